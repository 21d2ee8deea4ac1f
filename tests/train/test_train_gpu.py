"""train --device gpu ends where --device cpu ends: the loop, engine, reducers and codecs on
CuPy buffers (real CuPy on a GPU, else the stand-in of tests/fake_cupy; conftest.gpu_backend).

On the stand-in the device run does the same NumPy arithmetic as the host run, so the final
parameters must be bit-identical: any difference is the device path computing something else.
On a GPU (cuBLAS) they agree to a float32 tolerance.
"""

import numpy as np
import pytest
from mpi_harness import run_mpi

pytestmark = [pytest.mark.gpu, pytest.mark.slow]  # two trainings each: ~15 s under load

SMALL = ["--layers", "16,32,4", "--train-samples", "256", "--test-samples", "64",
         "--eval-samples", "64", "--log-every", "0", "--steps", "4", "--bucket-mb", "0"]


def final_params(tmp_path, device, args, env):
    ck = tmp_path / f"{device}.npz"
    nranks = 4 if "hierarchical" in args else 2  # 2 nodes of 2: train cuts equal nodes
    res = run_mpi(nranks, ["-m", "mpicomm", "train", *SMALL, *args, "--device", device,
                      "--checkpoint", str(ck)], timeout=120, env=env)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    with np.load(ck) as f:
        return f["params"]


CASES = [(args, staging) for args in (["--strategy", "ring"],
                                      ["--strategy", "hierarchical", "--ranks-per-node", "2"],
                                      ["--strategy", "ps", "--dedicated"])
         for staging in ("0", "1")]
CASES += [(["--strategy", "ring", "--compress", "fp16"], "0"),  # codecs always stage (NumPy)
          (["--strategy", "ring", "--compress", "topk:0.25"], "0")]  # EF keyed by bucket id


@pytest.mark.parametrize("args, staging", CASES,
                         ids=lambda v: " ".join(v) if isinstance(v, list) else f"aware={v}")
def test_gpu_training_ends_where_cpu_training_ends(tmp_path, args, staging, gpu_backend):
    env = {"MPICOMM_CUDA_AWARE": staging}
    if staging == "1" and gpu_backend == "real":
        from mpicomm.core.backend import mpi_cuda_aware

        if not mpi_cuda_aware():
            pytest.skip("this MPI does not report CUDA support")
    host = final_params(tmp_path, "cpu", args, env)
    device = final_params(tmp_path, "gpu", args, env)
    if gpu_backend == "standin":
        np.testing.assert_array_equal(device, host)
    else:
        np.testing.assert_allclose(device, host, rtol=1e-3, atol=1e-5)
