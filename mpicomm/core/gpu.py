"""CuPy for ``--device gpu``: import it with a one-line error and install hint, or describe it.

``import_cupy(who)`` raises ``ConfigError`` (printed as one line by the
commands, before any message between ranks) when CuPy is missing or finds no
GPU, instead of a traceback on every rank. ``gpu_info()`` is what ``info``
reports: CuPy's version (or why it is absent), the GPUs and CUDA-aware MPI.
``probe_cuda_aware()`` goes further than asking MPI: it hands device buffers to
``Sendrecv`` around the ranks and checks what arrived (experiments/gpu_check.sh).
``use_local_device()`` gives each rank of a node its own GPU: ``local_rank % devices``.
"""

from __future__ import annotations

import os
from typing import Any

from mpicomm.core.errors import ConfigError

__all__ = ["import_cupy", "gpu_info", "probe_cuda_aware", "INSTALL_HINT", "local_device",
           "use_local_device"]

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


def local_device(local_rank: int, devices: int) -> int:
    """The GPU of the rank ``local_rank`` of its node when it sees ``devices`` GPUs.

    ``local_rank % devices``: ranks of a node take its GPUs in turn (more ranks than GPUs
    share them). A launcher that gives each rank its own GPU (``srun --gpus-per-task=1``,
    a ``CUDA_VISIBLE_DEVICES`` per rank) leaves each rank seeing one: device 0 is then it.
    """
    if devices < 1:
        raise ConfigError(f"--device gpu: rank sees {devices} GPUs (CUDA_VISIBLE_DEVICES="
                          f"{os.environ.get('CUDA_VISIBLE_DEVICES', '(unset)')!r})")
    return local_rank % devices


def use_local_device(cupy: Any, comm: Any = None) -> int:
    """Make ``local_rank % devices`` this rank's current CUDA device; return its index.

    Collective over ``comm`` (default ``MPI.COMM_WORLD``): the local rank comes from MPI's
    shared-memory split, so it counts the ranks of this host whatever the launcher's
    placement. The device count is what CuPy sees, so ``CUDA_VISIBLE_DEVICES`` set by
    the launcher is honoured.
    """
    from mpi4py import MPI

    comm = MPI.COMM_WORLD if comm is None else comm
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.Get_rank())
    local_rank = node.Get_rank()
    node.Free()
    index = local_device(local_rank, cupy.cuda.runtime.getDeviceCount())
    cupy.cuda.Device(index).use()
    return index


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


def probe_cuda_aware(comm: Any = None, n: int = 1 << 20) -> dict:
    """Send a CuPy buffer around the ranks straight through MPI; return what happened.

    Collective over ``comm`` (default ``MPI.COMM_WORLD``): 1. each rank fills ``n``
    float32 on its GPU with rank + 1; 2. ``Sendrecv`` to the right, from the left,
    handing MPI the device buffers; 3. each checks it got its left neighbour's value;
    4. the ranks agree on the verdict. An exception in MPI (a library refusing the
    device pointer) is reported, not raised; an MPI without CUDA support may instead
    crash the job, so run this in a job of its own.

    Returns:
        ``{"mpi_reports_cuda": MPIX_Query_cuda_support, "device_transfer_ok": bool,
        "error": str | None, "ranks": p}`` (the same on every rank).
    """
    from mpi4py import MPI

    from mpicomm.core.backend import _query_mpi_cuda_support

    cupy = import_cupy("probe")
    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    cupy.cuda.Device(rank % cupy.cuda.runtime.getDeviceCount()).use()
    send = cupy.full(n, rank + 1, dtype=cupy.float32)
    recv = cupy.zeros(n, dtype=cupy.float32)
    cupy.cuda.get_current_stream().synchronize()
    error = None
    try:
        comm.Sendrecv(send, (rank + 1) % size, 7, recv, (rank - 1) % size, 7)
        ok = bool((recv == ((rank - 1) % size + 1)).all())
    except Exception as exc:  # noqa: BLE001 - the finding: MPI refused device memory
        ok, error = False, f"{type(exc).__name__}: {exc}"
    errors = [e for e in comm.allgather(error) if e]  # once, small: the pickling call is fine
    return {"mpi_reports_cuda": _query_mpi_cuda_support(), "ranks": size,
            "device_transfer_ok": bool(comm.allreduce(ok, op=MPI.LAND)),
            "error": errors[0] if errors else None}
