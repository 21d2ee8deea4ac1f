"""``torch.distributed`` from the MPI world: no MASTER_ADDR, MASTER_PORT or torchrun under mpiexec.

1. every rank gathers the host names over MPI: one host → the rendezvous
   address is 127.0.0.1; several → rank 0's host name (or ``addr`` if given);
2. rank 0 opens the rendezvous store (``torch.distributed.TCPStore``) on port 0,
   so the OS picks a free port with no race between choosing and binding it;
3. rank 0 broadcasts (address, port) — or its error — over MPI;
4. the other ranks connect to the store, and every rank calls
   ``torch.distributed.init_process_group(backend, store, rank, world_size)``
   with the MPI rank and size, so torch rank r is MPI rank r.

Set-up runs once per process; a second call with the same world returns at once.
"""

from __future__ import annotations

import datetime
import socket

from mpi4py import MPI

__all__ = ["init_process_group"]


def init_process_group(
    backend: str = "gloo", *, comm: MPI.Comm | None = None, addr: str | None = None,
    timeout_s: float = 300.0,
) -> None:
    """Initialise ``torch.distributed`` with the ranks of ``comm`` (default ``MPI.COMM_WORLD``).

    Collective over ``comm``.

    Args:
        backend: torch.distributed backend ("gloo"; "nccl" for CUDA tensors, untested here).
        comm: the MPI communicator whose ranks become the torch ranks.
        addr: rendezvous address to use instead of 127.0.0.1 / rank 0's host name.
        timeout_s: rendezvous and collective timeout of the process group.

    Raises:
        RuntimeError: on every rank, when rank 0 cannot open the store, or torch.distributed
            is already initialised with a different rank or size.
    """
    import torch.distributed as dist

    comm = MPI.COMM_WORLD if comm is None else comm
    rank, size = comm.Get_rank(), comm.Get_size()
    if dist.is_initialized():  # same answer on every rank: each checks its own group
        if (dist.get_rank(), dist.get_world_size()) != (rank, size):
            raise RuntimeError(
                f"mpicomm.torch.init_process_group: torch.distributed is already initialised "
                f"as rank {dist.get_rank()} of {dist.get_world_size()}, but MPI has rank "
                f"{rank} of {size}"
            )
        return
    timeout = datetime.timedelta(seconds=timeout_s)
    hosts = comm.allgather(socket.gethostname())  # set-up, once: the pickling call is fine
    host = addr or ("127.0.0.1" if len(set(hosts)) == 1 else hosts[0])
    store, port, error = None, 0, None
    if rank == 0:
        try:
            store = dist.TCPStore(host, 0, size, True, timeout=timeout, wait_for_workers=False)
            port = store.port
        except Exception as exc:  # noqa: BLE001 - shared with every rank below
            error = f"{type(exc).__name__}: {exc}"
    host, port, error = comm.bcast((host, port, error), root=0)
    if error is not None:
        raise RuntimeError(
            f"mpicomm.torch.init_process_group: rank 0 could not open the rendezvous store "
            f"on {host}: {error}"
        )
    if store is None:
        store = dist.TCPStore(host, port, size, False, timeout=timeout)
    dist.init_process_group(backend, store=store, rank=rank, world_size=size, timeout=timeout)
