"""A torch tensor as the NumPy/CuPy array it already is, and the in-place allreduce on it.

1. check the tensor: a strided (dense) ``torch.Tensor``, float32/float64,
   contiguous, not requiring grad, on the CPU or a CUDA device — otherwise a
   ``TypeError``/``ValueError`` saying what and how to fix it (nothing is
   converted or copied behind the caller's back);
2. view it without a copy: CPU → ``tensor.numpy()`` (same memory); CUDA →
   ``cupy.from_dlpack(tensor)`` (same device memory; torch's stream is
   synchronised first, CuPy's after);
3. hand the view to the reducer's ``allreduce`` (in place), return the tensor.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["as_array", "allreduce"]

_FLOATS = (torch.float32, torch.float64)
_WHO = "mpicomm.torch.allreduce"


def as_array(tensor: torch.Tensor, who: str = _WHO) -> Any:
    """Return a NumPy (CPU) or CuPy (CUDA) array sharing ``tensor``'s memory.

    Raises:
        TypeError: not a dense torch tensor, or not float32/float64.
        ValueError: not contiguous, requires grad, or on a device other than cpu/cuda.
    """
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(
            f"{who}: expected a torch.Tensor, got {type(tensor).__name__} "
            "(NumPy/CuPy arrays go to reducer.allreduce directly)"
        )
    if tensor.layout != torch.strided:
        raise TypeError(f"{who}: {tensor.layout} tensors are not supported; pass a dense tensor")
    if tensor.dtype not in _FLOATS:
        raise TypeError(
            f"{who}: unsupported dtype {tensor.dtype}; expected torch.float32 or torch.float64"
        )
    if tensor.requires_grad:
        raise ValueError(
            f"{who}: the tensor requires grad, and an in-place reduction would bypass autograd; "
            "reduce its .grad, or pass tensor.detach() (same memory) inside torch.no_grad()"
        )
    if not tensor.is_contiguous():
        raise ValueError(
            f"{who}: tensor is not contiguous (shape {tuple(tensor.shape)}, strides "
            f"{tensor.stride()}); reduce t = tensor.contiguous() and copy back with tensor.copy_(t)"
        )
    kind = tensor.device.type
    if kind == "cpu":
        try:
            return tensor.numpy()
        except RuntimeError as exc:  # e.g. a lazily negated/conjugated view
            raise ValueError(f"{who}: no NumPy view of this tensor: {exc}") from None
    if kind == "cuda":
        try:
            import cupy
        except ImportError:
            raise ValueError(
                f"{who}: CUDA tensors need CuPy: pip install 'mpicomm[gpu]'"
            ) from None
        torch.cuda.current_stream(tensor.device).synchronize()  # the data is written
        return cupy.from_dlpack(tensor)
    raise ValueError(f"{who}: tensor is on device {tensor.device}; only cpu and cuda are supported")


def allreduce(tensor: torch.Tensor, reducer: Any, op: str = "mean", *,
              key: Any = None) -> torch.Tensor:
    """Reduce ``tensor`` in place across ``reducer``'s workers and return it.

    Args:
        tensor: dense, contiguous float32/float64 tensor on the CPU or a CUDA device,
            not requiring grad (a ``.grad``, a ``.detach()``ed parameter, a DDP bucket).
        reducer: an ``mpicomm.make_reducer(...)`` reducer.
        op: ``"mean"`` (default; sum divided by the workers) or ``"sum"``.
        key: the bucket id for a compressing reducer's error feedback (None: the layout).

    Returns:
        ``tensor``, now holding the reduction (same memory, no copy).
    """
    array = as_array(tensor)
    reducer.allreduce(array, op=op, key=key)
    if tensor.device.type == "cuda":  # the reducer worked on CuPy's stream; torch reads next
        import cupy

        cupy.cuda.get_current_stream().synchronize()
    return tensor
