"""mpicomm from PyTorch (optional extra ``[torch]``); ``import mpicomm`` never imports torch.

    import mpicomm.torch as mt
    mt.init_process_group()                       # torch.distributed from MPI, no torchrun
    ddp = DistributedDataParallel(model)
    state = mt.HookState("ps", servers=2)         # ring | hierarchical | ps | native | auto | ...
    ddp.register_comm_hook(state, mt.comm_hook)   # every DDP bucket goes through mpicomm
    ...
    state.close()

    mt.allreduce(tensor, reducer, op="mean")      # one tensor, in place, no copy

Modules: ``process_group`` (the init helper), ``tensor`` (torch tensor → NumPy/CuPy
view and the in-place allreduce), ``hook`` (``HookState`` and ``comm_hook``).
"""

try:
    import torch as _torch  # noqa: F401
except ImportError as exc:  # one clear line instead of a traceback into our modules
    raise ImportError(
        "mpicomm.torch needs PyTorch: pip install 'mpicomm[torch]' (or pip install torch)"
    ) from exc

from mpicomm.torch.hook import HookState, comm_hook
from mpicomm.torch.process_group import init_process_group
from mpicomm.torch.tensor import allreduce, as_array

__all__ = ["init_process_group", "allreduce", "as_array", "HookState", "comm_hook"]
