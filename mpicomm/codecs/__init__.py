"""Gradient codecs: fp16, int8, top-k, and error feedback (docs/compression.md).

Only codecs live here; the algorithms send through them: a quantising codec as
a ``Wire`` inside each algorithm's steps, top-k as (index, value) pairs that
the algorithm gathers, with ``ErrorFeedback`` keeping a residual per bucket.
``mpicomm.make_reducer(name, compress="int8")`` (that is
``mpicomm.reducers.make_reducer``, a layer above) builds a compressed reducer.
"""

from __future__ import annotations

from mpicomm.codecs.feedback import ErrorFeedback
from mpicomm.codecs.quantize import Fp16Codec, Int8Codec
from mpicomm.codecs.topk import TopKCodec
from mpicomm.codecs.wire import Wire
from mpicomm.core.options import parse_compress

__all__ = ["Fp16Codec", "Int8Codec", "TopKCodec", "ErrorFeedback", "Wire", "make_codec"]


def make_codec(spec: str) -> Wire | ErrorFeedback | None:
    """Return what a ``compress`` string builds: None ("none"), a ``Wire`` (fp16, int8) or
    an ``ErrorFeedback`` around a ``TopKCodec`` (topk, ``enabled`` False with ``:noef``)."""
    kind, ratio, ef = parse_compress(spec)
    if kind == "fp16":
        return Wire(Fp16Codec())
    if kind == "int8":
        return Wire(Int8Codec())
    if kind == "topk":
        return ErrorFeedback(TopKCodec(ratio), enabled=ef)
    return None
