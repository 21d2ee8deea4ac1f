"""The CuPy stand-in keeps CuPy's rules (in a subprocess, so no test process imports it as
``cupy``): no implicit conversion, no host array in a device call, counted copies, device
memory exported to MPI only when MPI is said to be CUDA-aware."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

STANDIN = Path(__file__).resolve().parent / "fake_cupy"

CHECKS = r'''
import numpy as np, cupy
from mpi4py import MPI

def raises(fn, exc, text):
    try:
        fn()
    except exc as e:
        assert text in str(e), e
    else:
        raise AssertionError(f"no {exc.__name__}")

h = np.arange(6.0)
d = cupy.asarray(h)
assert type(d).__module__ == "cupy" and not isinstance(d, np.ndarray)
raises(lambda: np.asarray(d), TypeError, "Implicit conversion to a NumPy array is not allowed")
raises(lambda: memoryview(d), TypeError, "")                   # no buffer protocol
raises(lambda: d + h, TypeError, "Unsupported type")             # host array in a device op
raises(lambda: cupy.add(h, h), TypeError, "Unsupported type")
raises(lambda: np.add(d, h, out=d), TypeError, "Unsupported type")
e = d * 2 + 1                                                    # device ops stay on the device
np.add(d, e, out=d)
assert type(e) is cupy.ndarray and type(d[1:3]) is cupy.ndarray
assert cupy.transfers["h2d"] == 1 and cupy.transfers["d2h"] == 0
out = np.empty(6)
d.get(out=out)
assert (out == 3 * h + 1).all() and cupy.transfers["d2h"] == 1
d.set(h)
assert cupy.transfers["h2d"] == 2 and cupy.asnumpy(d).tolist() == h.tolist()
view = cupy.empty(64, dtype=np.uint8)[:16].view(np.float64)      # scratch views, as the ring's
assert type(view) is cupy.ndarray and view.shape == (2,)
aware = __import__("os").environ["MPICOMM_CUDA_AWARE"] == "1"
recv = cupy.zeros(6)
if aware:                                                        # MPI reads the pointer
    MPI.COMM_SELF.Sendrecv(d, 0, 0, recv, 0, 0)
    assert recv.get().tolist() == h.tolist()
else:
    raises(lambda: MPI.COMM_SELF.Sendrecv(d, 0, 0, recv, 0, 0), TypeError, "not CUDA-aware")
print("ok")
'''


@pytest.mark.parametrize("aware", ["0", "1"])
def test_standin_keeps_cupys_rules(aware):
    env = dict(os.environ, PYTHONPATH=str(STANDIN), MPICOMM_CUDA_AWARE=aware)
    res = subprocess.run([sys.executable, "-c", CHECKS], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "ok", res.stdout + res.stderr
