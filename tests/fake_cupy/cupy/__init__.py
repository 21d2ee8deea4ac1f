"""A CPU stand-in for CuPy: NumPy underneath, CuPy's rules on top (tests only).

What it keeps from CuPy, so that mpicomm's device path runs as on a GPU:

1. an array type of its own, ``cupy.ndarray`` (its module is ``cupy``), that is
   *not* a NumPy array: ``np.asarray(x)`` raises TypeError ("Implicit conversion
   to a NumPy array is not allowed"), it exposes no buffer protocol, and a
   CuPy function or ufunc given a NumPy array raises TypeError — so a host/device
   mix-up fails here as it would on a GPU;
2. explicit copies only: ``asarray``/``array``/``set`` (host to device),
   ``asnumpy``/``get`` (device to host), each counted in ``transfers``;
3. device memory reaches MPI only through ``__cuda_array_interface__`` (or
   ``__dlpack__``), and only when the job says MPI is CUDA-aware
   (``MPICOMM_CUDA_AWARE=1``); otherwise handing a device array to MPI raises,
   as a device pointer given to an MPI without CUDA support would crash;
4. ``cupy.cuda``: devices, streams, events, pinned host memory, the runtime
   queries mpicomm makes (one "device" by default, ``CUPY_STANDIN_DEVICES=n``).

What it cannot show: anything about CUDA itself (kernels, streams running
concurrently, PCIe, a real CUDA-aware MPI). ``STANDIN`` is True here; mpicomm
never reads it (the tests do, to count copies).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from cupy import cuda  # noqa: F401 - cupy.cuda, as in CuPy

__version__ = "13.0.0+standin"
STANDIN = True
IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly.")
transfers = {"h2d": 0, "d2h": 0, "h2d_bytes": 0, "d2h_bytes": 0}


def _count(direction: str, nbytes: int) -> None:
    transfers[direction] += 1
    transfers[direction + "_bytes"] += int(nbytes)


def _wrap(a: Any) -> Any:
    """A NumPy result as a device array (0-d results too, as CuPy returns them)."""
    if isinstance(a, np.ndarray):
        out = object.__new__(ndarray)
        out._a = a
        return out
    if isinstance(a, np.generic):
        return _wrap(np.asarray(a))
    if isinstance(a, tuple):
        return tuple(_wrap(x) for x in a)
    if isinstance(a, list):
        return [_wrap(x) for x in a]
    return a


def _unwrap(x: Any, who: str) -> Any:
    """A device array's NumPy memory; a NumPy array here is a host/device mix-up."""
    if isinstance(x, ndarray):
        return x._a
    if isinstance(x, np.ndarray):
        raise TypeError(f"Unsupported type {type(x)} in cupy.{who} (a host array where a "
                        "device array is needed: copy it with cupy.asarray first)")
    if isinstance(x, (tuple, list)):
        return type(x)(_unwrap(v, who) for v in x)
    return x


def _device_call(fn: Any, who: str, args: tuple, kwargs: dict) -> Any:
    args = tuple(_unwrap(a, who) for a in args)
    kwargs = {k: _unwrap(v, who) for k, v in kwargs.items()}
    return _wrap(fn(*args, **kwargs))


class ndarray(NDArrayOperatorsMixin):  # noqa: N801 - CuPy's name
    """A device array: NumPy memory that NumPy may not read implicitly."""

    __slots__ = ("_a",)
    __array_priority__ = 100.0

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C") -> None:
        self._a = np.empty(shape, dtype=dtype, order=order)

    # ------------------------------------------------ what CuPy refuses
    def __array__(self, *args, **kwargs):
        raise TypeError(IMPLICIT)

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self)))

    # ------------------------------------------------ NumPy protocols: stay on the device
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        fn = getattr(ufunc, method)
        out = kwargs.get("out")
        res = _device_call(fn, ufunc.__name__, inputs, kwargs)
        if out is not None:
            return out[0] if isinstance(out, tuple) and len(out) == 1 else out
        return res

    def __array_function__(self, func, types, args, kwargs):
        return _device_call(func, func.__name__, args, kwargs)

    # ------------------------------------------------ MPI and DLPack: device memory
    @property
    def __cuda_array_interface__(self) -> dict:
        _check_export("__cuda_array_interface__")
        a = self._a
        return {"data": (a.ctypes.data, not a.flags.writeable), "shape": a.shape,
                "typestr": a.dtype.str, "strides": None if a.flags.c_contiguous else a.strides,
                "descr": [("", a.dtype.str)], "stream": None, "version": 3}

    def __dlpack__(self, **kwargs):
        _check_export("__dlpack__")
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        _check_export("__dlpack__")
        return self._a.__dlpack_device__()

    # ------------------------------------------------ attributes, indexing, conversions
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    ndim = property(lambda self: self._a.ndim)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    T = property(lambda self: _wrap(self._a.T))
    device = property(lambda self: cuda.Device(0))
    data = property(lambda self: cuda.MemoryPointer(self._a.ctypes.data))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # no __array_interface__ or other host views
            raise AttributeError(f"cupy.ndarray has no attribute {name!r}")
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)
        return lambda *args, **kwargs: _device_call(attr, name, args, kwargs)

    def __len__(self) -> int:
        return len(self._a)

    def __getitem__(self, key):
        return _wrap(self._a[_unwrap_index(key)])

    def __setitem__(self, key, value) -> None:
        if isinstance(value, np.ndarray):  # CuPy copies a host value in: count it
            _count("h2d", value.nbytes)
        self._a[_unwrap_index(key)] = value._a if isinstance(value, ndarray) else value

    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __repr__(self) -> str:
        return "cupy-standin:" + repr(self._a)

    def __copy__(self):
        return _wrap(self._a.copy())

    def item(self):
        return self._a.item()

    def get(self, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        """Copy to the host (into ``out`` when given): one counted device-to-host copy."""
        _count("d2h", self._a.nbytes)
        if out is None:
            return self._a.copy(order=order)
        if not isinstance(out, np.ndarray) or out.shape != self._a.shape:
            raise ValueError("cupy.ndarray.get: out must be a NumPy array of the same shape")
        np.copyto(out, self._a)
        return out

    def set(self, arr: np.ndarray, stream=None) -> None:
        """Copy a host array of the same shape in: one counted host-to-device copy."""
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"cupy.ndarray.set: expected a numpy.ndarray, got {type(arr)}")
        if arr.shape != self._a.shape or arr.dtype != self._a.dtype:
            raise ValueError("cupy.ndarray.set: shape and dtype must match")
        _count("h2d", arr.nbytes)
        np.copyto(self._a, arr)


def _unwrap_index(key: Any) -> Any:
    if isinstance(key, ndarray):
        return key._a
    if isinstance(key, tuple):
        return tuple(k._a if isinstance(k, ndarray) else k for k in key)
    return key


def _check_export(how: str) -> None:
    """Device memory may reach MPI only when the job says MPI is CUDA-aware."""
    if os.environ.get("MPICOMM_CUDA_AWARE", "").strip().lower() not in ("1", "true", "yes"):
        raise TypeError(f"cupy stand-in: device memory exported through {how} while MPI is "
                        "not CUDA-aware (MPICOMM_CUDA_AWARE is not 1): a real MPI would "
                        "crash or read garbage here; stage through host memory")


# ---------------------------------------------------------------- host <-> device
def asarray(a: Any, dtype=None, order=None) -> ndarray:
    """A device array of ``a`` (a host array is copied: one counted host-to-device copy)."""
    if isinstance(a, ndarray):
        return a if dtype is None or a.dtype == np.dtype(dtype) else a.astype(dtype)
    host = np.asarray(a, dtype=dtype, order=order)
    _count("h2d", host.nbytes)
    return _wrap(host.copy())


def array(a: Any, dtype=None, copy: bool = True, order="K") -> ndarray:
    if isinstance(a, ndarray):
        return _wrap(np.array(a._a, dtype=dtype, copy=copy, order=order))
    return asarray(a, dtype=dtype)


def asnumpy(a: Any, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
    if isinstance(a, ndarray):
        return a.get(out=out, order=order)
    return np.asarray(a, order=order)


def from_dlpack(obj: Any) -> ndarray:
    return _wrap(np.from_dlpack(obj))


def get_array_module(*args: Any):
    import sys

    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


def ascontiguousarray(a: ndarray, dtype=None) -> ndarray:
    return _wrap(np.ascontiguousarray(_unwrap(a, "ascontiguousarray"), dtype=dtype))


class _Ufunc:
    """A NumPy ufunc refusing host arrays, as CuPy's do."""

    def __init__(self, uf: np.ufunc) -> None:
        self._uf, self.__name__ = uf, uf.__name__

    def __call__(self, *args, **kwargs):
        out = kwargs.get("out")
        res = _device_call(self._uf, self.__name__, args, kwargs)
        return out if out is not None and not isinstance(out, tuple) else res

    def __getattr__(self, method: str):
        fn = getattr(self._uf, method)
        return lambda *args, **kwargs: _device_call(fn, f"{self.__name__}.{method}", args, kwargs)


def __getattr__(name: str) -> Any:
    """Any other NumPy name: dtypes as they are, functions on device arrays only."""
    if name.startswith("__"):
        raise AttributeError(name)
    attr = getattr(np, name)
    if isinstance(attr, np.ufunc):
        return _Ufunc(attr)
    if isinstance(attr, type) or not callable(attr):
        return attr
    return lambda *args, **kwargs: _device_call(attr, name, args, kwargs)
