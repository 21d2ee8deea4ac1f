"""CuPy for ``--device gpu``: import it with a one-line error and install hint, or describe it.

``import_cupy(who)`` raises ``ConfigError`` (printed as one line by the
commands, before any message between ranks) when CuPy is missing or finds no
GPU, instead of a traceback on every rank. ``gpu_info()`` is what ``info``
reports: CuPy's version (or why it is absent), the GPUs and CUDA-aware MPI.
"""

from __future__ import annotations

from typing import Any

from mpicomm.core.errors import ConfigError

__all__ = ["import_cupy", "gpu_info", "INSTALL_HINT"]

INSTALL_HINT = ("install CuPy for your CUDA: pip install 'mpicomm[gpu]' (cupy-cuda12x), "
                "or pip install cupy-cuda11x")


def import_cupy(who: str = "") -> Any:
    """Return the ``cupy`` module, or raise ``ConfigError`` saying how to get it.

    ``who`` (e.g. "bench") prefixes the message; "" when the caller adds its own.
    """
    who = f"{who}: " if who else ""
    try:
        import cupy
    except ImportError as exc:
        raise ConfigError(f"{who}--device gpu needs CuPy, which is not installed "
                          f"({exc.name or 'cupy'}); {INSTALL_HINT}") from None
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # noqa: BLE001 - CUDA driver missing or broken
        raise ConfigError(f"{who}--device gpu: CuPy {cupy.__version__} finds no usable CUDA "
                          f"device ({type(exc).__name__}: {exc})") from None
    if count < 1:
        raise ConfigError(f"{who}--device gpu: CuPy {cupy.__version__} sees no GPU")
    return cupy


def gpu_info() -> dict:
    """CuPy version or absence, the visible GPUs, and whether MPI is CUDA-aware."""
    from mpicomm.core.backend import mpi_cuda_aware

    info: dict[str, Any] = {"cuda_aware_mpi": mpi_cuda_aware()}
    try:
        import cupy
    except ImportError:
        info.update(cupy=None, gpus=[], gpu_note=f"CuPy not installed; {INSTALL_HINT}")
        return info
    info["cupy"] = cupy.__version__
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        gpus = []
        for i in range(n):
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"]
            gpus.append({"id": i, "name": name.decode() if isinstance(name, bytes) else name,
                         "memory_gib": round(props["totalGlobalMem"] / 2**30, 1)})
        info["gpus"] = gpus
        info["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    except Exception as exc:  # noqa: BLE001 - no driver / no device
        info.update(gpus=[], gpu_note=f"CuPy present but no usable GPU ({exc})")
    return info
