"""NVTX ranges for Nsight Systems: steps, buckets, collectives on the GPU timeline.

    from mpicomm.core import nvtx
    nvtx.enable()                     # train --nvtx; needs the nvtx package (mpicomm[nvtx])
    with nvtx.range("bucket 3"):      # a no-op until enabled
        ...

1. Off by default: ``range(name)`` returns one shared do-nothing context and
   ``push``/``pop`` return at once, so the call sites cost a function call.
2. ``enable()`` imports the ``nvtx`` package (NVIDIA's Python bindings) or raises
   ``ConfigError`` with the install hint; from then on every range is an
   ``nvtx.push_range``/``nvtx.pop_range`` pair in the "mpicomm" domain. Without
   CUDA or without a profiler attached, NVTX itself records nothing: ``--nvtx``
   runs anywhere.

Ranges nest per thread (NVTX's rule): the communication thread's collectives
form their own stack beside the training thread's steps.
"""

from __future__ import annotations

import contextlib
from typing import Any

from mpicomm.core.errors import ConfigError

__all__ = ["require", "enable", "disable", "enabled", "range", "push", "pop", "INSTALL_HINT"]

INSTALL_HINT = "pip install 'mpicomm[nvtx]' (the nvtx package)"
DOMAIN = "mpicomm"

_nvtx: Any = None  # the nvtx module once enabled
_NULL = contextlib.nullcontext()


def require() -> None:
    """Raise ``ConfigError`` (one line, with the install hint) unless ``nvtx`` imports."""
    try:
        import nvtx  # noqa: F401
    except ImportError:
        raise ConfigError(f"--nvtx needs the nvtx package: {INSTALL_HINT}") from None


def enable() -> None:
    """Turn ranges on; ``ConfigError`` (one line, with the install hint) without ``nvtx``."""
    global _nvtx
    try:
        import nvtx
    except ImportError:
        raise ConfigError(f"--nvtx needs the nvtx package: {INSTALL_HINT}") from None
    _nvtx = nvtx


def disable() -> None:
    """Turn ranges off again (tests; a run that enabled them and ended)."""
    global _nvtx
    _nvtx = None


def enabled() -> bool:
    return _nvtx is not None


def push(name: str) -> None:
    """Open a range named ``name`` on this thread (no-op while disabled)."""
    if _nvtx is not None:
        _nvtx.push_range(name, domain=DOMAIN)


def pop() -> None:
    """Close this thread's innermost range (no-op while disabled)."""
    if _nvtx is not None:
        _nvtx.pop_range(domain=DOMAIN)


class _Range:
    __slots__ = ("name", "lib")

    def __init__(self, name: str, lib: Any) -> None:
        self.name, self.lib = name, lib

    def __enter__(self) -> _Range:
        self.lib.push_range(self.name, domain=DOMAIN)
        return self

    def __exit__(self, *exc: object) -> None:
        self.lib.pop_range(domain=DOMAIN)


def range(name: str) -> Any:  # noqa: A001 - nvtx's own word for it
    """A context manager: one NVTX range around the block (a shared no-op while disabled)."""
    return _NULL if _nvtx is None else _Range(name, _nvtx)
