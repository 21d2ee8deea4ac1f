"""Array modules and MPI buffers: NumPy on the host, CuPy on the GPU.

The reducers move flat, contiguous float32/float64 arrays with mpi4py's buffer
methods. This module answers three questions for them, once per buffer kind:

1. Which array module owns the buffer (``numpy`` or ``cupy``)?
2. Is the buffer acceptable (dtype, contiguity)? If not, a clear error.
3. For a CuPy buffer, can MPI read device memory (CUDA-aware MPI), or must the
   reducer stage it through a reused, pinned host buffer?

CUDA-awareness is decided, in this order, by the reducer option
``cuda_aware=True|False``, the environment variable ``MPICOMM_CUDA_AWARE=0|1``,
and finally the MPI library's own answer (``MPIX_Query_cuda_support``, exported
by both Open MPI and MPICH builds that support CUDA).
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicomm.core.codes import DTYPE_CODES  # noqa: F401 - re-exported (the table lives in codes)

__all__ = [
    "SUPPORTED_DTYPES",
    "array_module",
    "check_buffer",
    "flat_view",
    "is_device_array",
    "mpi_cuda_aware",
    "HostStage",
]

SUPPORTED_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def is_device_array(buf: Any) -> bool:
    """Return True for a CuPy (CUDA device) array."""
    return type(buf).__module__.startswith("cupy")


def array_module(buf: Any):
    """Return ``cupy`` for a CuPy array, else ``numpy``."""
    if is_device_array(buf):
        import cupy

        return cupy
    return np


def check_buffer(buf: Any, who: str) -> None:
    """Raise a clear error if ``buf`` cannot be reduced in place.

    Args:
        buf: the array passed to ``allreduce``.
        who: the strategy name, used as the message prefix.

    Raises:
        TypeError: not a NumPy/CuPy array, or a dtype other than float32/float64.
        ValueError: not contiguous, or read-only.
    """
    if not (isinstance(buf, np.ndarray) or is_device_array(buf)):
        raise TypeError(
            f"{who}: allreduce expects a numpy or cupy array, got {type(buf).__name__}"
        )
    if buf.dtype not in SUPPORTED_DTYPES:
        raise TypeError(
            f"{who}: unsupported dtype {buf.dtype}; expected float32 or float64"
        )
    flags = buf.flags
    if not (flags.c_contiguous or flags.f_contiguous):
        raise ValueError(
            f"{who}: buffer is not contiguous (shape {buf.shape}, strides {buf.strides}); "
            "pass a contiguous array, e.g. np.ascontiguousarray(buf), and copy back"
        )
    if isinstance(buf, np.ndarray) and not flags.writeable:
        raise ValueError(f"{who}: buffer is read-only; allreduce works in place")


def flat_view(buf: Any):
    """Return a 1-D view of a contiguous array in memory order (never a copy)."""
    if buf.ndim == 1:
        return buf
    if type(buf) is not np.ndarray and isinstance(buf, np.ndarray):
        buf = buf.view(np.ndarray)  # a subclass's ravel may stay 2-D (np.matrix)
    order = "C" if buf.flags.c_contiguous else "F"
    return buf.ravel(order=order)


_cuda_aware_cache: bool | None = None


def mpi_cuda_aware(override: bool | None = None) -> bool:
    """Return whether MPI may be handed CUDA device pointers.

    Args:
        override: ``True``/``False`` forces the answer; ``None`` consults
            ``MPICOMM_CUDA_AWARE`` and then the MPI library.
    """
    global _cuda_aware_cache
    if override is not None:
        return bool(override)
    from mpicomm.core.options import env_flag

    env = env_flag("MPICOMM_CUDA_AWARE")
    if env is not None:
        return env
    if _cuda_aware_cache is None:
        _cuda_aware_cache = _query_mpi_cuda_support()
    return _cuda_aware_cache


def _query_mpi_cuda_support() -> bool:
    """Ask the loaded MPI library through ``MPIX_Query_cuda_support`` (0 if absent)."""
    fn = getattr(MPI, "Query_cuda_support", None)  # newer mpi4py exposes it
    if fn is not None:
        try:
            return bool(fn())
        except Exception:  # noqa: BLE001 - an MPI without the extension
            return False
    try:
        sym = ctypes.CDLL(None).MPIX_Query_cuda_support
    except (AttributeError, OSError):
        return False
    sym.restype = ctypes.c_int
    return bool(sym())


class HostStage:
    """Reused pinned host memory for a CuPy array when MPI is not CUDA-aware.

    ``to_host(buf)`` copies the device array into a pinned NumPy view of the same
    length and dtype; ``to_device`` copies it back. One pinned buffer is kept and
    grown to the largest buffer seen, so every shape reuses it.
    Cost: two PCIe copies of n bytes per call.
    """

    def __init__(self) -> None:
        self._mem = None  # pinned allocation
        self._nbytes = 0

    def host_for(self, n: int, dtype: np.dtype) -> np.ndarray:
        dtype = np.dtype(dtype)
        nbytes = max(n * dtype.itemsize, 1)
        if nbytes > self._nbytes:
            import cupy

            self._mem = cupy.cuda.alloc_pinned_memory(nbytes)
            self._nbytes = nbytes
        return np.frombuffer(self._mem, dtype=dtype, count=n)

    def to_host(self, dev) -> np.ndarray:
        host = self.host_for(dev.size, dev.dtype)
        dev.get(out=host)  # synchronous on the current stream
        return host

    @staticmethod
    def to_device(host: np.ndarray, dev) -> None:
        dev.set(host)


def sync_device(buf: Any) -> None:
    """Wait for pending GPU work on ``buf``'s stream before MPI reads it."""
    if is_device_array(buf):
        import cupy

        cupy.cuda.get_current_stream().synchronize()


def mpi_datatype(dtype: np.dtype) -> MPI.Datatype:
    """Return the MPI datatype for a supported NumPy dtype."""
    return MPI.FLOAT if np.dtype(dtype) == np.float32 else MPI.DOUBLE
