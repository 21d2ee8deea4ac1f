"""``CompressedReducer``: a codec wrapped around a reducer, and ``make_reducer`` that builds it.

As PyTorch's ``fp16_compress_wrapper(allreduce_hook)``: the wrapper keeps the
inner reducer (its transport ``p2p``, ranks, topology, stats) and replaces its
algorithm by the compressed one of the same strategy — one file each:

    ============  ===========================  ===========================
    strategy      fp16 / int8                  topk:RATIO[:noef]
    ============  ===========================  ===========================
    ring          ring_quantized               sparse_allgather
    hierarchical  hierarchical_quantized       hierarchical_sparse
                  (variant reduce_scatter)     (both variants)
    ps            ps_quantized (colocated)     ps_sparse (colocated)
    ============  ===========================  ===========================

Every message goes through ``inner.p2p``, so ``stats`` counts the compressed
bytes. The checks of ``Reducer.allreduce`` (buffer, agreement, timing) run as
for any reducer; each call (each engine bucket) is compressed on its own.
CuPy buffers are staged through host memory (the codecs are NumPy).

Refused, with a ``ConfigError`` before any message (the same on every rank):
``native`` (MPI's Allreduce has no fp16, int8 or sparse sum), ``recursive_doubling``
and ``auto`` (not implemented), dedicated ps servers, hierarchical ``leader``
with fp16/int8 (its node reduce is MPI's).
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from mpicomm.codecs.hierarchical_quantized import QuantizedHierarchical
from mpicomm.codecs.hierarchical_sparse import SparseHierarchical
from mpicomm.codecs.ps_quantized import QuantizedPS
from mpicomm.codecs.ps_sparse import SparsePS
from mpicomm.codecs.quantize import Fp16Codec, Int8Codec
from mpicomm.codecs.ring_quantized import QuantizedRing
from mpicomm.codecs.sparse_allgather import SparseRing
from mpicomm.codecs.topk import TopKCodec
from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions, parse_compress
from mpicomm.reducers import REDUCERS, Reducer
from mpicomm.reducers import make_reducer as make_plain_reducer

__all__ = ["CompressedReducer", "make_reducer", "make_codec", "SUPPORT", "check_supported"]

# codec kind -> strategy -> algorithm class
SUPPORT: dict[str, dict[str, type]] = {
    "fp16": {"ring": QuantizedRing, "hierarchical": QuantizedHierarchical, "ps": QuantizedPS},
    "int8": {"ring": QuantizedRing, "hierarchical": QuantizedHierarchical, "ps": QuantizedPS},
    "topk": {"ring": SparseRing, "hierarchical": SparseHierarchical, "ps": SparsePS},
}


def make_codec(spec: str) -> Any:
    """Return the codec object of a ``compress`` string (not "none")."""
    kind, ratio, ef = parse_compress(spec)
    if kind == "fp16":
        return Fp16Codec()
    if kind == "int8":
        return Int8Codec()
    if kind == "topk":
        return TopKCodec(ratio, ef)
    raise ConfigError(f"compress={spec!r} builds no codec")


def check_supported(name: str, opts: ReducerOptions) -> None:
    """Raise ``ConfigError`` unless strategy ``name`` supports ``opts.compress``."""
    kind = parse_compress(opts.compress)[0]
    table = SUPPORT[kind]
    spec = opts.compress
    if name not in table:
        why = {"native": "MPI's Allreduce has no fp16, int8 or sparse sum",
               "recursive_doubling": "not implemented for it",
               "auto": "not implemented for it"}.get(name, "not implemented for it")
        raise ConfigError(f"compress={spec!r} is not available with strategy {name!r} ({why}); "
                          f"strategies supporting {kind}: {', '.join(table)}")
    if name == "ps" and opts.dedicated:
        raise ConfigError(f"compress={spec!r}: ps with dedicated servers is not supported "
                          f"(their serve() loop speaks float32); use colocated servers "
                          f"(dedicated=False) or strategy ring/hierarchical")
    if name == "hierarchical" and opts.variant == "leader" and kind != "topk":
        raise ConfigError(f"compress={spec!r}: hierarchical variant 'leader' reduces with MPI's "
                          f"Reduce/Bcast; use variant 'reduce_scatter'")


class CompressedReducer(Reducer):
    """``inner``'s strategy with its messages compressed by ``codec`` (see module docstring)."""

    def __init__(self, inner: Reducer, spec: str) -> None:
        super().__init__(None, inner.options, transport=inner.p2p)
        self.inner = inner
        self.name = inner.name
        self.compress = spec
        self.codec = make_codec(spec)
        self.algorithm = SUPPORT[parse_compress(spec)[0]][inner.name](inner, self.codec)
        self.is_worker, self.worker_rank = inner.is_worker, inner.worker_rank
        self.num_workers = inner.num_workers
        self._cuda_aware = False  # NumPy codecs: device buffers go through host memory

    def _allreduce(self, flat, scale) -> None:
        self.algorithm(flat, scale)

    def _release(self) -> None:
        self.inner.close()

    def describe(self) -> dict:
        d = self.inner.describe()
        d["compress"] = self.compress
        return d


def make_reducer(name: str, comm: MPI.Comm | None = None, **options) -> Reducer:
    """Create the reducer for strategy ``name``, compressed when ``compress`` is not "none".

    Same arguments as ``mpicomm.reducers.make_reducer`` plus ``compress``
    (``"none"``, ``"fp16"``, ``"int8"``, ``"topk:RATIO"``, ``"topk:RATIO:noef"``).
    Collective over ``comm``; an unsupported combination raises ``ConfigError``
    before any message.
    """
    if name not in REDUCERS:
        return make_plain_reducer(name, comm, **options)  # its error names the strategies
    opts = ReducerOptions.from_kwargs(f"make_reducer({name!r})", **options)
    if opts.compress == "none":
        return make_plain_reducer(name, comm, **options)
    check_supported(name, opts)
    inner = make_plain_reducer(name, comm, **{**options, "compress": "none"})
    try:
        return CompressedReducer(inner, opts.compress)
    except BaseException:
        inner.close()
        raise
