"""What each per-call guarantee of the hot path costs, one rank: leave-one-out on ``native``.

Builds variants of ``Reducer.allreduce`` from its own source, each with one piece
taken out (the stall log, the stats, the guard, the owner check, the clock and
nvtx tests, the layout lookup, the two clock reads), runs them on a reducer whose
layout is planned and cached, variants taking turns, and prints the minimum per
call of each and what leaving the piece out saves; "plan" is the plan alone (the
``Allreduce`` and its byte count). Run without the stall watchdog thread, which
would wake during the loops::

    MPICOMM_STALL_WARN_S=0 python experiments/hot_path_pieces.py [--bytes 1024] [--reps 40]
"""

from __future__ import annotations

import argparse
import inspect
import re
import textwrap
import time

import numpy as np

import mpicomm
from mpicomm.reducers import base

LOOKUP = "hot = self._hot.get(buf.size) if type(buf) is _ndarray else None"
PIECES = {  # piece -> the replacements that take it out
    "stall log": [("ch = self.stall_channel", "ch = None")],
    "stats": [("st.calls += 1", "pass"), ("st.seconds += seconds", "pass")],
    "guard": [("token.pop()", "pass"), ("token.append(True)", "pass")],
    "owner check": [("owner = self.owner", "owner = None")],
    "nvtx test": [("and nvtx._nvtx is None\n", "")],
    "layout lookup": [(LOOKUP, "hot = HOT"), ("hot[0] is buf.dtype and hot[1] is op", "True")],
    "clock reads": [("t0 = now()", "t0 = 0.0"), ("seconds = now() - t0", "seconds = 0.0")],
}


def variant(src: str, cuts: list[tuple[str, str]], names: dict) -> object:
    """Return ``allreduce`` compiled from ``src`` with ``cuts`` applied (each must match)."""
    for old, new in cuts:
        if old not in src:
            raise SystemExit(f"hot_path_pieces: {old!r} is no longer in Reducer.allreduce")
        src = src.replace(old, new)
    space: dict = {}
    exec(src, names, space)  # noqa: S102 - the library's own source, edited above
    return space["allreduce"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bytes", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--calls", type=int, default=20000)
    args = ap.parse_args()
    x = np.zeros(args.bytes // 4, dtype=np.float32)
    r = mpicomm.make_reducer("native")
    r.allreduce(x)
    r.allreduce(x)  # planned, and cached for its length
    src = textwrap.dedent(inspect.getsource(base.Reducer.allreduce))
    src = re.sub(r'\n\s*""".*?"""\n', "\n", src, flags=re.S)  # the docstring
    names = dict(vars(base), HOT=r._hot[x.size])
    plan = r._hot[x.size][2]
    runs = {"full": variant(src, [], names)}
    runs.update({f"- {k}": variant(src, cuts, names) for k, cuts in PIECES.items()})
    runs["- all of them"] = variant(src, [c for cuts in PIECES.values() for c in cuts], names)
    runs["plan alone"] = lambda _r, buf: plan(buf)
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(args.reps):
        for name, fn in runs.items():
            t0 = time.perf_counter_ns()
            for _ in range(args.calls):
                fn(r, x)
            best[name] = min(best[name], (time.perf_counter_ns() - t0) / args.calls)
    print(f"{args.bytes} B, 1 rank, min of {args.reps} x {args.calls} calls, ns per call:")
    for name, ns in best.items():
        print(f"  {name:18s} {ns:7.0f}   saves {best['full'] - ns:5.0f}")
    r.close()


if __name__ == "__main__":
    main()
