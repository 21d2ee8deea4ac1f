"""``cupy.cuda`` of the stand-in: devices, streams, events, pinned memory, runtime queries.

Everything runs synchronously on the CPU, so every ``synchronize`` only counts
(``syncs``); a stream ``with`` block makes it current as in CuPy.
"""

from __future__ import annotations

import os

import numpy as np

syncs = {"device": 0, "stream": 0}


class MemoryPointer:
    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


_current_device = 0


class Device:
    def __init__(self, device=None) -> None:
        self.id = _current_device if device is None else int(device)  # None: the current one
        if not 0 <= self.id < runtime.getDeviceCount():
            raise RuntimeError(f"cudaErrorInvalidDevice: device {self.id}")

    def use(self) -> None:
        """Make this the current device (remembered; the memory is the host's either way)."""
        global _current_device
        _current_device = self.id

    def synchronize(self) -> None:
        syncs["device"] += 1

    def __enter__(self) -> Device:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class Stream:
    null: Stream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptr: int = 0) -> None:
        self.ptr = ptr
        self._prev: list[Stream] = []

    def synchronize(self) -> None:
        syncs["stream"] += 1

    def use(self) -> Stream:
        global _current
        _current = self
        return self

    def __enter__(self) -> Stream:
        global _current
        self._prev.append(_current)
        _current = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _current
        _current = self._prev.pop()


Stream.null = Stream(null=True)
_current = Stream.null


def get_current_stream() -> Stream:
    return _current


class Event:
    def record(self, stream: Stream | None = None) -> None:
        pass

    def synchronize(self) -> None:
        syncs["stream"] += 1


def alloc_pinned_memory(nbytes: int):
    """A reusable pinned (page-locked on a GPU machine) host buffer of ``nbytes``."""
    return np.empty(nbytes, dtype=np.uint8)  # a NumPy array: np.frombuffer reads it


class runtime:  # noqa: N801 - CuPy's name (a module there)
    @staticmethod
    def getDeviceCount() -> int:  # noqa: N802
        """``CUPY_STANDIN_DEVICES`` (default 1) GPUs, or as CUDA would count them, the
        entries of ``CUDA_VISIBLE_DEVICES`` when it is set."""
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        if visible is not None:
            return len([d for d in visible.split(",") if d.strip()])
        return int(os.environ.get("CUPY_STANDIN_DEVICES", "1"))

    @staticmethod
    def getDeviceProperties(i: int) -> dict:  # noqa: N802
        return {"name": b"CuPy stand-in (NumPy on the CPU)", "totalGlobalMem": 1 << 30}

    @staticmethod
    def runtimeGetVersion() -> int:  # noqa: N802
        return 12000

    @staticmethod
    def deviceSynchronize() -> None:  # noqa: N802
        syncs["device"] += 1
