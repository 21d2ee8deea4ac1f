"""A GPU per local rank across real hosts: each rank takes ``local_rank % devices`` of its
host (local ranks counted per host, not per job), or, when the launcher leaves it one
device through ``CUDA_VISIBLE_DEVICES``, that one. On the CuPy stand-in without a GPU."""

import pytest
from across import hosts, run_script_across

SLOTS = [3, 2]


@pytest.mark.gpu
@pytest.mark.parametrize("env,devices", [({"CUPY_STANDIN_DEVICES": "2"}, 2),
                                         ({"CUDA_VISIBLE_DEVICES": "1"}, 1)],
                         ids=["2-gpus-per-host", "launcher-gives-one"])
def test_each_rank_takes_its_local_gpu(gpu_backend, env, devices):
    if gpu_backend == "real":
        pytest.skip("the stand-in's device counts are set here; a real GPU node has its own")
    with hosts(len(SLOTS), rate="1gbit") as net:
        res = run_script_across(net, SLOTS, "gpu_local_device.py", timeout=120, env=env)
    res.expect_ok()
    local = {0: 0, 1: 1, 2: 2, 3: 0, 4: 1}  # ranks 0-2 on h0, 3-4 on h1
    for rec in res.records:
        assert rec["host"] == ("h0" if rec["rank"] < 3 else "h1"), rec
        assert rec["devices"] == devices, rec
        assert rec["device"] == rec["current"] == local[rec["rank"]] % devices, rec
