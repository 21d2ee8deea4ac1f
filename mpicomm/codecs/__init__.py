"""Gradient compression on the wire: fp16, int8, top-k with error feedback (docs/compression.md).

``make_reducer(name, compress="int8", ...)`` (also ``mpicomm.make_reducer``)
wraps the strategy's reducer in a ``CompressedReducer``; codecs are in
``quantize`` and ``topk``, one compressed algorithm per file.
"""

from mpicomm.codecs.wrapper import SUPPORT, CompressedReducer, check_supported, make_reducer

__all__ = ["make_reducer", "CompressedReducer", "SUPPORT", "check_supported"]
