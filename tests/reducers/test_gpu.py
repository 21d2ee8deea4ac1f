"""CuPy buffers: every strategy on the GPU, several ranks sharing one device.

Runs on real CuPy where a CUDA device is usable, else on the NumPy stand-in of
tests/fake_cupy (conftest's ``gpu_backend``; ``--gpu-backend real`` insists on a
GPU). Both ways of moving device memory run: handed to MPI directly
(MPICOMM_CUDA_AWARE=1; on real CuPy only when the MPI reports CUDA support) and
staged through pinned host buffers (MPICOMM_CUDA_AWARE=0). On the stand-in the
rank script also reports every host<->device copy, so a hidden copy (or a device
array handed to an MPI that is not CUDA-aware, which the stand-in refuses) fails.
"""

import json

import pytest
from mpi_harness import STRATEGY_CASES, run_mpi, run_script

pytestmark = pytest.mark.gpu

CASES = STRATEGY_CASES
LENGTHS = "1,2,p-1,1000,1000003"
# on the CPU stand-in: still several 1 MiB scratch pieces in float32 and float64, a third
# of the time (the numpy tests in test_<strategy>.py run 1,000,003 through the same code)
STANDIN_LENGTHS = "1,2,p-1,1000,300007"


def _mpi_cuda_aware() -> bool:
    from mpicomm.core.backend import mpi_cuda_aware

    return mpi_cuda_aware()


# each staging at 1 rank and at one of 3 (odd, uneven nodes) and 4 ranks (two even nodes):
# the copies and the reduction are each rank's own, so 3 and 4 ranks need not meet each staging
@pytest.mark.parametrize("nranks, staging", [(1, "staged"), (1, "cuda_aware"),
                                             (3, "cuda_aware"), (4, "staged")])
@pytest.mark.parametrize("strategy,options", CASES, ids=str)
def test_cupy_buffers_match_numpy(strategy, options, nranks, staging, gpu_backend):
    if staging == "cuda_aware" and gpu_backend == "real" and not _mpi_cuda_aware():
        pytest.skip("this MPI does not report CUDA support (MPIX_Query_cuda_support)")
    # enough ranks for the servers (servers=2 at 1 rank is a ConfigError, not a GPU case)
    nranks = max(nranks, options.get("servers", 1) + bool(options.get("dedicated")))
    env = {"MPICOMM_CUDA_AWARE": "0" if staging == "staged" else "1"}
    res = run_script(nranks, "check_reducer.py", strategy, json.dumps(options), "--xp", "cupy",
                     "--lengths", STANDIN_LENGTHS if gpu_backend == "standin" else LENGTHS,
                     env=env, timeout=300)
    res.expect_ok()
    if gpu_backend != "standin":
        return
    # the script copies each case in and out once; staging adds exactly one copy each way
    per_case = 1 if staging == "cuda_aware" else 2
    for rec in res.records:
        if rec.get("role") == "server":
            continue
        t, cases = rec["transfers"], rec["cases"]
        assert (t["h2d"], t["d2h"]) == (per_case * cases, per_case * cases), (rec["rank"], t)


PROBE = ("from mpi_harness import report; from mpicomm.core.gpu import probe_cuda_aware; "
         "report(ok=True, **probe_cuda_aware())")


@pytest.mark.parametrize("aware", ["1", "0"])
def test_cuda_awareness_probe_hands_device_buffers_to_mpi(aware, gpu_backend):
    res = run_mpi(2, ["-c", PROBE], env={"MPICOMM_CUDA_AWARE": aware}, timeout=120).expect_ok()
    got = [{k: v for k, v in r.items() if k != "rank"} for r in res.records]
    assert len(got) == 2 and got[0] == got[1], got  # the same verdict on every rank
    got = got[0]
    if gpu_backend == "real":  # the verdict is the MPI's; it must at least agree with itself
        assert not got["mpi_reports_cuda"] or got["device_transfer_ok"], got
    elif aware == "1":  # the stand-in's MPI takes host memory behind __cuda_array_interface__
        assert got["device_transfer_ok"] and got["error"] is None, got
    else:  # ... and refuses it when the job says MPI is not CUDA-aware
        assert not got["device_transfer_ok"] and "not CUDA-aware" in got["error"], got
