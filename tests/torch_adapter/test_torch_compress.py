"""The PyTorch hook compresses through the one factory: int8 and top-k buckets (skipped
cleanly without torch)."""

import pytest

pytest.importorskip("torch")
from mpi_harness import run_script  # noqa: E402


@pytest.mark.parametrize("nranks", [1, pytest.param(2, marks=pytest.mark.slow)])
def test_hook_compresses_buckets(nranks):
    run_script(nranks, "torch_hook_compress.py", timeout=120).expect_ok()
