"""The numeric codes of ops and dtypes, in one table.

Ranks exchange these small integers instead of names: in the agreement check
(``Reducer._check_agreement``, one Allgather of (length, dtype, op)) and in a
dedicated parameter server's push header. One table, so a code means the same
thing in every message.
"""

from __future__ import annotations

import numpy as np

__all__ = ["OPS", "OP_NAMES", "OP_SUM", "OP_MEAN", "DTYPE_CODES", "DTYPE_NAMES", "CODE_DTYPES"]

OP_SUM, OP_MEAN = 1, 2
OPS = {"sum": OP_SUM, "mean": OP_MEAN}
OP_NAMES = {code: name for name, code in OPS.items()}

DTYPE_CODES = {np.dtype(np.float32): 1, np.dtype(np.float64): 2}
CODE_DTYPES = {code: dt for dt, code in DTYPE_CODES.items()}
DTYPE_NAMES = {code: str(dt) for dt, code in DTYPE_CODES.items()}
