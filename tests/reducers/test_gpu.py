"""CuPy buffers: every strategy on the GPU, several ranks sharing one device.

Skipped cleanly where CuPy or a CUDA device is missing. Runs both ways of moving
device memory: handed to MPI directly (only when the MPI reports CUDA support)
and staged through pinned host buffers (MPICOMM_CUDA_AWARE=0).
"""

import json

import pytest
from mpi_harness import STRATEGY_CASES, run_script

pytestmark = pytest.mark.gpu


def _gpu_available() -> bool:
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - no cupy, no driver, no device
        return False


def _mpi_cuda_aware() -> bool:
    from mpicomm.core.backend import mpi_cuda_aware

    return mpi_cuda_aware()


needs_gpu = pytest.mark.skipif(not _gpu_available(), reason="needs CuPy and a CUDA GPU")

CASES = STRATEGY_CASES


@needs_gpu
@pytest.mark.parametrize("staging", ["staged", "cuda_aware"])
@pytest.mark.parametrize("nranks", [1, 3, 4])
@pytest.mark.parametrize("strategy,options", CASES, ids=str)
def test_cupy_buffers_match_numpy(strategy, options, nranks, staging):
    if staging == "cuda_aware" and not _mpi_cuda_aware():
        pytest.skip("this MPI does not report CUDA support (MPIX_Query_cuda_support)")
    if options.get("dedicated") and nranks == 1:
        nranks = 2
    env = {"MPICOMM_CUDA_AWARE": "0" if staging == "staged" else "1"}
    res = run_script(
        nranks,
        "check_reducer.py",
        strategy,
        json.dumps(options),
        "--xp",
        "cupy",
        "--lengths",
        "1,2,p-1,1000,1000003",
        env=env,
        timeout=300,
    )
    res.expect_ok()
