"""Top-k error feedback keeps one residual per engine bucket, on the host and on the device.

Two equal-length buckets, different data, four steps, against a NumPy reference
of per-bucket error feedback (tests/scripts/check_ef_buckets.py). On the device
path every CuPy bucket is staged through one reused host buffer, so a residual
keyed by buffer address is shared by equal-length buckets: the device case
fails until error feedback is keyed by the bucket id the engine passes.
"""

import pytest
from mpi_harness import run_script


@pytest.mark.parametrize("nranks", [2, 3])
def test_host_buckets_keep_separate_residuals(nranks):
    run_script(nranks, "check_ef_buckets.py", "--xp", "numpy", timeout=120).expect_ok()


@pytest.mark.gpu
def test_device_buckets_keep_separate_residuals(gpu_backend):
    run_script(2, "check_ef_buckets.py", "--xp", "cupy", env={"MPICOMM_CUDA_AWARE": "0"},
               timeout=120).expect_ok()
