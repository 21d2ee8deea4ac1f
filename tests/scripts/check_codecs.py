"""Rank script: compressed reductions against a NumPy reference, within the documented bounds.

For every (strategy options, codec, length, op) case each rank redraws every
rank's input from (seed, rank, case) and computes, in float64:

- fp16 / int8: the exact sum; the result must lie within the bound of the
  strategy's file (``mpicomm.reducers.*``, also docs/compression.md);
- topk: what each rank sent is ``x + old residual - new residual`` (error
  feedback); the result must equal the sum of that over ranks (float32
  summation), every sent value must be at least as large as every kept one
  (per ps range), and two calls in a row check the residual carries over.

Results must be bitwise equal on every rank. Usage (under ``python -m mpi4py``)::

    check_codecs.py '[["ring", {}], ["ps", {"servers": 2}]]' fp16,int8,topk:0.1 --lengths 1,7,1001
"""

import argparse
import json

import numpy as np
from mpi4py import MPI
from mpi_harness import report

import mpicomm
from mpicomm.reducers.ring import chunk_bounds

U16 = 2.0**-11


def rank_input(seed: int, rank: int, case: int, n: int) -> np.ndarray:
    rng = np.random.default_rng([seed, rank, case])
    return (rng.standard_normal(n) * rng.choice([1e-3, 1.0, 300.0], n)).astype(np.float32)


def quantised_bound(codec: str, p: int, xs: list[np.ndarray], total: np.ndarray) -> np.ndarray:
    """The per-element error bound of the quantised algorithms (the loosest, hierarchical's)."""
    rounds = p + 2
    if codec == "fp16":
        s = sum(np.abs(x.astype(np.float64)) for x in xs)
        return rounds * U16 * (s + np.abs(total)) + 1e-6 * max(float(s.max()), 1e-30)
    # int8: every rounding at most scale/2, scale <= sum over ranks of the chunk max / 127
    amax = sum(float(np.abs(x).max()) for x in xs)
    return np.full(total.shape, rounds * 0.5 * amax / 127 * (1 + 1e-5))


def check_case(reducer, codec, n, op, case, args, comm, failures, label):
    p, me = comm.Get_size(), comm.Get_rank()
    xs = [rank_input(args.seed, r, case, n) for r in range(p)]
    div = p if op == "mean" else 1
    if codec.startswith("topk"):
        res_old = np.zeros(n, dtype=np.float32)
        key = f"case{case}"  # a new bucket: its residual starts at zero
        for call in range(2):  # two calls, two buffers, one key: the residual carries over
            xs = [rank_input(args.seed, r, case * 10 + call, n) for r in range(p)]
            buf = xs[me].copy()
            out = reducer.allreduce(buf, op=op, key=key)
            res_new = reducer.codec_state().get(key, np.zeros(n, dtype=np.float32)).copy()
            if "noef" in codec:  # the top-k of x itself (per ps range); the rest is dropped
                sent = _reference_topk(reducer, xs[me])
            else:  # exact: sent values are copies of x + old residual
                sent = (xs[me] + res_old) - res_new
            alls = comm.allgather(sent)
            expect = sum(a.astype(np.float64) for a in alls) / div
            err = np.abs(out.astype(np.float64) - expect)
            tol = 4 * p * np.finfo(np.float32).eps * (sum(np.abs(a) for a in alls) / div + 1e-30)
            if (err > tol).any():
                failures.append(f"{label} n={n} {op} call {call}: sum of sent differs "
                                f"(max err {err.max():.3g})")
            _check_selection(reducer, sent, res_new, n, codec, failures, label)
            if "noef" in codec:
                if np.any(res_new):
                    failures.append(f"{label}: noef kept a residual")
            else:
                res_old = res_new
            _check_equal(out, comm, failures, f"{label} n={n} {op}")
        return
    buf = xs[me].copy()
    out = reducer.allreduce(buf, op=op)
    scaled = [x / np.float32(div) if div > 1 else x for x in xs]
    total = sum(x.astype(np.float64) for x in xs) / div
    err = np.abs(out.astype(np.float64) - total)
    bound = quantised_bound(codec, p, scaled, total)
    if (err > bound).any():
        i = int(np.argmax(err - bound))
        failures.append(f"{label} n={n} {op}: err {err[i]:.3g} > bound {bound[i]:.3g} at {i}")
    _check_equal(out, comm, failures, f"{label} n={n} {op}")


def _ranges(reducer, n):
    return chunk_bounds(n, len(reducer.servers)) if reducer.name == "ps" else [0, n]


def _reference_topk(reducer, x):
    out = np.zeros_like(x)
    r = _ranges(reducer, x.size)
    for lo, hi in zip(r[:-1], r[1:], strict=True):
        k = reducer.feedback.codec.k_of(hi - lo)
        idx = lo + np.argsort(np.abs(x[lo:hi]), kind="stable")[hi - lo - k :]
        out[idx] = x[idx]
    return out


def _check_selection(reducer, sent, residual, n, codec, failures, label):
    """Sent values are the k largest of x + residual (per ps range); k as documented."""
    ranges = _ranges(reducer, n)
    for lo, hi in zip(ranges[:-1], ranges[1:], strict=True):
        s, r = sent[lo:hi], residual[lo:hi]
        k = reducer.feedback.codec.k_of(hi - lo)
        if np.count_nonzero(s) > k:
            failures.append(f"{label} n={n}: {np.count_nonzero(s)} values sent, k={k}")
        if s.size and k < s.size and "noef" not in codec and np.abs(s[s != 0]).min(
                initial=np.inf) < np.abs(r).max(initial=0):
            failures.append(f"{label} n={n}: a kept value is larger than a sent one")


def _check_equal(out, comm, failures, label):
    first = comm.bcast(out if comm.Get_rank() == 0 else None, root=0)
    if not np.array_equal(first, out):
        failures.append(f"{label}: ranks disagree")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases")
    ap.add_argument("codecs")
    ap.add_argument("--lengths", default="1,7,1001,5003")
    ap.add_argument("--ops", default="sum,mean")
    ap.add_argument("--seed", type=int, default=99)
    args = ap.parse_args()
    comm = MPI.COMM_WORLD
    failures: list[str] = []
    case = 0
    calls = 0
    for name, options in json.loads(args.cases):
        for codec in args.codecs.split(","):
            label = f"{name} {options} {codec}"
            with mpicomm.make_reducer(name, comm=comm, compress=codec, **options) as reducer:
                for n in map(int, args.lengths.split(",")):
                    for op in args.ops.split(","):
                        case += 1
                        check_case(reducer, codec, n, op, case, args, comm, failures, label)
                        calls += 1
    report(ok=not failures, error="; ".join(failures[:5]) or None, calls=calls)


if __name__ == "__main__":
    main()
