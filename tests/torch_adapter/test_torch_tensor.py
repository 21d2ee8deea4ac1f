"""mpicomm.torch.allreduce on torch tensors (in place, no copy, vs NumPy), its clear errors for
bad tensors, HookState's refusals, and init_process_group under mpiexec without env vars."""

import subprocess
import sys

import pytest

pytest.importorskip("torch")
from mpi_harness import run_script  # noqa: E402


@pytest.mark.parametrize("nranks", [2, 3])
def test_tensors_reduce_in_place_and_bad_ones_are_refused(nranks):
    run_script(nranks, "torch_tensor.py", timeout=180).expect_ok()


def test_import_mpicomm_does_not_import_torch():
    code = ("import sys, mpicomm, mpicomm.train.data; mpicomm.make_reducer; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
