"""Limit BLAS threads: ranks are the parallelism (one module, one job)."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["limit_blas_threads"]


def limit_blas_threads(n: int) -> bool:
    """Set the loaded OpenBLAS/MKL to ``n`` threads (best effort); return True if one was found.

    Ranks are the parallelism: with one rank per core, each BLAS spawning a
    thread per core oversubscribes the host (17x slower steps measured with 4
    ranks on 2 cores). The thread count is read from the environment only when
    the library loads, long before a command runs, so it is set through the
    library's own call, found among the loaded shared objects.
    """
    import ctypes
    import glob

    paths: list[str] = []
    try:
        with open("/proc/self/maps") as f:  # Linux: every loaded shared object
            paths = sorted({ln.split()[-1] for ln in f if "blas" in ln.lower() or "mkl" in ln})
    except OSError:
        pass
    paths += glob.glob(os.path.join(os.path.dirname(np.__file__), "..", "numpy*libs", "*blas*"))
    paths += glob.glob(os.path.join(os.path.dirname(np.__file__), ".dylibs", "*blas*"))
    names = [f"{pre}openblas_set_num_threads{suf}" for pre in ("", "scipy_") for suf in ("", "64_")]
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in [*names, "MKL_Set_Num_Threads"]:
            fn = getattr(lib, name, None)
            if fn is not None:
                fn(ctypes.c_int(n))
                return True
    return False
