"""The nccl-tests-style harness: sweep strategies over message sizes (``python -m mpicomm bench``,
whose flags and printing live in ``cli/bench.py``).

    mpiexec -n 2 python -m mpicomm bench -b 8 -e 64M -f 2 -n 20 -w 5 -c 1 -d float

The harness owns what is generic; a plug-in (``bench.allreduce.AllreduceTest``,
one per registered strategy) owns the collective. Per strategy and size:

1. take views of buffers allocated once for the largest size, fill the input;
2. warm up ``-w`` calls (first-use setup: scratch buffers, agreement checks);
3. time ``-n`` calls one by one on every rank; per call keep the slowest rank's
   time (one MAX reduction over all calls afterwards, outside the timed loop);
   report the median, min and max over calls;
4. algbw = bytes / time; busbw = algbw × 2(p-1)/p (the plug-in's bus factor);
5. ``-c`` times: refill inputs from (seed, rank, rep), run once, count elements
   off the independently computed expectation; ``#wrong`` is summed over ranks;
6. print one nccl-tests row; ``vs <baseline>`` is baseline time / time (>1: faster),
   marked ``*`` when its 95% interval (``analysis.verdict``: bootstrap over the
   calls, paired by round) excludes 1, ``~`` when the difference is within noise;
7. after the sweep, per pair of strategies, the sizes where the significant
   winner changes (measured crossover, with the bracketing sizes) beside the
   cost model's predicted crossover (``costmodel.predict``, quick calibration).

``--device gpu`` sweeps CuPy buffers through the same reducers (a one-line
error without CuPy). Rank 0 shows progress per size (a tqdm bar on a terminal,
plain lines on stderr otherwise).

The harness never names a strategy: it takes the names from the registry (or
``--strategies``) and the baseline from ``--baseline``; it reads no flags and prints no
error (a problem comes back as its one line, which the command prints).
"""

from __future__ import annotations

import csv
import json
import os
import sys
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

from mpicomm._mpi_init import requested_thread_level
from mpicomm.analysis import verdict as V
from mpicomm.bench.allreduce import AllreduceTest
from mpicomm.core import clock
from mpicomm.core.errors import ConfigError
from mpicomm.core.memory import available_memory
from mpicomm.core.progress import Progress
from mpicomm.core.units import fmt_bytes, fmt_num, jsonable, parse_bytes
from mpicomm.p2p import barrier
from mpicomm.reducers import make_reducer

__all__ = ["BenchConfig", "parse_bytes", "size_list", "sweep", "run_bench", "DTYPES",
           "RECORD_KEYS", "device_error", "emulation_note", "cpu_sharing", "thread_level_record",
           "write_records", "format_row", "HEADER", "LEGEND", "memory_problem", "memory_error",
           "cluster_record"]

DTYPES = {"float": np.float32, "float32": np.float32, "double": np.float64,
          "float64": np.float64}
TYPE_NAMES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}
RECORD_KEYS = ["strategy", "ranks", "bytes", "count", "type", "redop", "time_us", "min_us",
               "max_us", "algbw_gbps", "busbw_gbps", "wrong", "vs_baseline"]


@dataclass(frozen=True)
class BenchConfig:
    """One sweep's settings (the nccl-tests flags)."""

    sizes: tuple[int, ...]
    iters: int = 20
    rounds: int = 1
    warmup: int = 5
    check: int = 1
    dtype: str = "float"
    op: str = "sum"
    seed: int = 1
    device: str = "cpu"  # cpu (NumPy buffers) | gpu (CuPy buffers)


def size_list(begin: int, end: int, factor: float) -> list[int]:
    """Geometric sizes from ``begin`` to ``end`` inclusive (nccl-tests ``-b -e -f``)."""
    if begin < 1 or end < begin or factor <= 1:
        raise ValueError(f"need 1 <= -b <= -e and -f > 1, got -b {begin} -e {end} -f {factor}")
    sizes, s = [], begin
    while s <= end:
        sizes.append(int(s))
        s = int(s * factor) if int(s * factor) > s else s + 1
    return sizes


class Buffers:
    """Input/output, expected and difference buffers for the largest size; views per size.

    Allocated once per run and written once here, so no page is first touched
    inside a timed call.
    """

    def __init__(self, max_count: int, dtype, checks: bool = True, xp=np) -> None:
        n = max_count if checks else 1
        self.buf = xp.empty(max_count, dtype=dtype)
        self.expected = xp.empty(n, dtype=dtype)
        self.diff = xp.empty(n, dtype=dtype)
        for b in (self.buf, self.expected, self.diff):
            b.fill(0)


def count_wrong(out, expected, diff, tol: float) -> int:
    """Elements of ``out`` farther than ``tol`` from ``expected`` (NaN counts as wrong).

    NumPy or CuPy arrays (the work stays on the device; one integer comes back).
    """
    xp = np if isinstance(out, np.ndarray) else __import__("cupy")
    xp.subtract(out, expected, out=diff)
    xp.abs(diff, out=diff)
    return int(out.size - int(xp.count_nonzero(diff <= tol)))


def sweep(tests: list, comm: MPI.Comm, cfg: BenchConfig, bufs: Buffers,
          emit=None, progress: Progress | None = None) -> list[dict]:
    """Time and check every plug-in of ``tests`` at every size; collective over ``comm``.

    At each size the plug-ins take turns (``cfg.rounds`` turns of ``cfg.iters``
    calls each), so a slow spell of a shared machine hits them alike and their
    ratios stay fair.

    Args:
        tests: plug-ins (see ``mpicomm.bench.allreduce``) active on every rank of ``comm``.
        comm: the ranks taking part.
        cfg: sizes, iterations, rounds, warm-up, checks, dtype, op, seed.
        bufs: buffers for the largest size.
        emit: called with each finished row (on every rank), e.g. to print it.
        progress: told when each size begins and ends (rank 0 shows it).

    Returns:
        One record per plug-in and size (``RECORD_KEYS`` less ``vs_baseline``),
        identical on all ranks, ordered by size then plug-in; ``_samples`` holds
        the per-call times (µs, rounds × calls) behind each row's verdicts.
    """
    dtype = np.dtype(DTYPES[cfg.dtype])
    p = comm.Get_size()
    n = cfg.iters
    times = np.zeros((len(tests), max(cfg.rounds * n, 1)))
    wrong = np.zeros(len(tests), dtype=np.int64)
    rows: list[dict] = []
    counts = list(dict.fromkeys(tests[0].count(nbytes, dtype.itemsize) for nbytes in cfg.sizes))
    for count in counts:
        if progress is not None:
            progress.begin(f"{', '.join(t.label for t in tests)} at "
                           f"{fmt_bytes(count * dtype.itemsize)}")
        buf, expected, diff = (b[:count] for b in (bufs.buf, bufs.expected, bufs.diff))
        for rnd in range(cfg.rounds):
            for k, test in enumerate(tests):
                test.init_data(buf, expected, cfg.seed, 0)
                # 1. warm-up: first-use setup stays out of the timings
                for _ in range(cfg.warmup):
                    test.run(buf)
                # 2. timed calls, one by one
                barrier(comm)  # under the virtual clock, also one start time
                for i in range(rnd * n, (rnd + 1) * n):
                    t0 = clock.now()
                    test.run(buf)
                    times[k, i] = clock.now() - t0
        # the slowest rank's time per call: one reduction, outside the timed loops
        comm.Allreduce(MPI.IN_PLACE, times, MPI.MAX)
        # 3. check against the expectation, on fresh inputs
        wrong[:] = 0
        for k, test in enumerate(tests):
            for rep in range(cfg.check):
                tol = test.init_data(buf, expected, cfg.seed, rep + 1)
                test.run(buf)
                wrong[k] += count_wrong(buf, expected, diff, tol)
        comm.Allreduce(MPI.IN_PLACE, wrong, MPI.SUM)
        for k, test in enumerate(tests):
            row = _record(test, p, count, dtype, cfg.op, times[k, : cfg.rounds * n], int(wrong[k]))
            row["_samples"] = times[k, : cfg.rounds * n].reshape(cfg.rounds, n) * 1e6
            rows.append(row)
            if emit is not None:
                emit(row)
        if progress is not None:
            progress.done()
    return rows


def _record(test, p: int, count: int, dtype: np.dtype, op: str, t: np.ndarray,
            wrong: int) -> dict:
    """One result row: median, min and max of the per-call slowest-rank times, bandwidths."""
    nan = float("nan")
    seconds = float(np.median(t)) if t.size else nan
    # a call the clock charged nothing (one rank under a modelled device) has no bandwidth
    algbw = count * dtype.itemsize / seconds / 1e9 if t.size and seconds > 0 else nan
    return {
        "strategy": test.label,
        "ranks": p,
        "bytes": count * dtype.itemsize,
        "count": count,
        "type": TYPE_NAMES[dtype],
        "redop": op,
        "time_us": seconds * 1e6,
        "min_us": float(t.min()) * 1e6 if t.size else nan,
        "max_us": float(t.max()) * 1e6 if t.size else nan,
        "algbw_gbps": algbw,
        "busbw_gbps": algbw * test.bus_factor(p),
        "wrong": wrong,
    }


# ------------------------------------------------------------------ table
HEADER = (
    f"#{'strategy':>19} {'ranks':>5} {'size':>11} {'count':>11} {'type':>6} {'redop':>5} "
    f"{'time':>9} {'min':>9} {'max':>9} {'algbw':>7} {'busbw':>7} {'#wrong':>6} {'vs':>8}\n"
    f"#{'':>19} {'':>5} {'(B)':>11} {'(elements)':>11} {'':>6} {'':>5} "
    f"{'(us)':>9} {'(us)':>9} {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7} {'':>6} {'baseline':>8}"
)


LEGEND = (
    "# time, min, max: median, fastest and slowest call (each call: the slowest rank's time); "
    "algbw = size / time; busbw = algbw x 2(p-1)/p; #wrong: elements off the expected sum\n"
    "# vs baseline: baseline time / time (>1: faster); * = its 95% interval (bootstrap over "
    "calls and rounds) excludes 1, ~ = within the noise of this run (a tie)"
)
MARKS = {"faster": "*", "slower": "*", "tie": "~"}
ONE_RANK_NOTE = ("1 rank: every allreduce is a local copy (no message), so the vs-baseline column "
                 "gets no verdict; launch more ranks: mpiexec -n 2 python -m mpicomm bench")


def format_row(row: dict) -> str:
    vs = fmt_num(row.get("vs_baseline"), ".2f")
    mark = MARKS.get(row.get("vs_verdict"), "") if vs != "-" else ""
    return (
        f"{row['strategy']:>20} {row['ranks']:>5} {row['bytes']:>11} {row['count']:>11} "
        f"{row['type']:>6} {row['redop']:>5} {fmt_num(row['time_us'], '.2f'):>9} "
        f"{fmt_num(row['min_us'], '.2f'):>9} {fmt_num(row['max_us'], '.2f'):>9} "
        f"{fmt_num(row['algbw_gbps'], '.2f'):>7} {fmt_num(row['busbw_gbps'], '.2f'):>7} "
        f"{row['wrong']:>6} {vs + mark:>8}"
    )


def emulation_note(options: dict) -> str | None:
    """One header line naming the emulated links and that native is not emulated, or the
    virtual clock's links; None if neither."""
    from mpicomm.core.options import ReducerOptions

    opts = ReducerOptions.from_kwargs("bench", **options)
    if clock.virtual() is not None:
        return ("# virtual clock: every message charged by the cluster above; native by "
                "MPICH's algorithm on it (docs/virtual_clock.md)")
    if not opts.emulated:
        return None
    links = ", ".join(f"{k} {v}" for k, v in (("inter", opts.inter_link),
                                              ("intra", opts.intra_link)) if v is not None)
    return f"# emulated links: {links}; native is MPI's own collective: NOT emulated"


def cluster_record(flags: object, ranks: int) -> dict | None:
    """The modelled cluster for a result file (``Cluster.as_dict``): a virtual run's; None
    under the wall clock."""
    if clock.virtual() is None:
        return None
    from mpicomm.costmodel.profiles import cluster_of

    return cluster_of(flags, ranks).as_dict()


def memory_problem(max_bytes: int, checked: bool, ranks_on_host: int,
                   available: int | None) -> str | None:
    """Why the sweep's buffers cannot fit this host, or None when they may.

    Each rank allocates its buffer of ``max_bytes`` (and, with checks, the expected sums and
    their differences: 3x) before the first call, and a strategy's scratch is about one more
    message: at least ``(3 or 1) + 1`` x ``max_bytes`` a rank, ``ranks_on_host`` ranks on
    this host. ``available`` None (unknown): no verdict."""
    if available is None:
        return None
    copies = (3 if checked else 1) + 1
    need = copies * max_bytes * ranks_on_host
    if need <= available:
        return None
    return (f"-e: the largest size, {fmt_bytes(max_bytes)}, needs at least {fmt_bytes(need)} on "
            f"this host ({copies} x {fmt_bytes(max_bytes)} a rank x {ranks_on_host} ranks), more "
            f"than its {fmt_bytes(available)} available; give a smaller -e")


def memory_error(max_bytes: int, checked: bool, device: str, world: MPI.Comm) -> str | None:
    """Collective: why some host cannot hold the sweep's buffers (``memory_problem``), the same
    on every rank, so every rank can refuse before the first message of the sweep; None
    when they may fit. CPU buffers only (``--device gpu`` allocates on the device)."""
    host = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.Get_rank())
    local = host.Get_size()
    host.Free()
    why = None if device != "cpu" else memory_problem(max_bytes, checked, local,
                                                     available_memory())
    bad = np.array([0 if why is None else 1], dtype=np.int64)
    world.Allreduce(MPI.IN_PLACE, bad, MPI.MAX)
    if not bad[0]:
        return None
    return why or (f"-e: the largest size, {fmt_bytes(max_bytes)}, does not fit the memory of "
                   "another host of this job; give a smaller -e")


def device_error(device: str, who: str) -> str | None:
    """For ``--device gpu`` without CuPy (or a GPU): the one line that says so; else None."""
    if device != "gpu":
        return None
    from mpicomm.core.gpu import import_cupy

    try:
        import_cupy(who)
    except ConfigError as exc:
        return str(exc)
    return None


def cpu_sharing(world: MPI.Comm) -> str | None:
    """The CPU-sharing warning when this host runs more ranks than it has cores (collective)."""
    host = world.Split_type(MPI.COMM_TYPE_SHARED, key=world.Get_rank())
    mine = np.array([host.Get_size()], dtype=np.int64)
    host.Free()
    world.Allreduce(MPI.IN_PLACE, mine, MPI.MAX)
    return V.cpu_sharing_warning(int(mine[0]))


def thread_level_record(requested: str | None) -> dict:
    """The MPI thread level asked for (``--thread-level``, else ``MPICOMM_THREAD_LEVEL``) and
    the one MPI provided, for the result file."""
    names = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
             MPI.THREAD_SERIALIZED: "serialized", MPI.THREAD_MULTIPLE: "multiple"}
    requested = requested or requested_thread_level([], os.environ)
    return {"requested": requested or "multiple (mpi4py default)",
            "provided": names.get(MPI.Query_thread(), str(MPI.Query_thread()))}


def run_bench(names: list[str], options: dict, cfg: BenchConfig, baseline: str | None,
              printer=None, described: dict | None = None, judge: bool = True) -> list[dict]:
    """Sweep every strategy in ``names`` (baseline first); collective over ``COMM_WORLD``.

    Strategies active on every rank are swept together, taking turns at each
    size; one with inactive ranks (dedicated servers, which serve meanwhile) is
    swept on its own afterwards. Returns all records on every rank, with
    ``vs_baseline`` when the baseline ran; ``printer(row)`` sees each row once;
    ``described``, if given, receives each strategy's ``describe()`` (rank 0's view);
    ``judge=False`` leaves every ``vs_verdict`` unset (timings the scheduler decides).
    """
    world = MPI.COMM_WORLD
    dtype = np.dtype(DTYPES[cfg.dtype])
    xp = np
    if cfg.device == "gpu":
        from mpicomm.core.gpu import import_cupy, use_local_device

        xp = import_cupy("bench")
        use_local_device(xp, world)  # each rank of a node its own GPU (cluster.md)
    bufs = Buffers(max(max(cfg.sizes) // dtype.itemsize, 1), dtype, cfg.check > 0, xp)
    tests = [AllreduceTest(make_reducer(name, comm=world, **options), op=cfg.op)
             for name in names]
    if described is not None:
        described.update({t.label: t.describe() for t in tests})
    flags = np.array([0 if t.active else 1 for t in tests], dtype=np.int64)
    world.Allreduce(MPI.IN_PLACE, flags, MPI.SUM)
    together = [t for t, f in zip(tests, flags, strict=True) if f == 0]
    apart = [t for t, f in zip(tests, flags, strict=True) if f > 0]
    base: dict[int, dict] = {}

    def emit(row: dict, comm: MPI.Comm) -> None:
        if row["strategy"] == baseline:
            base[row["bytes"]] = row
        _vs_baseline(row, base.get(row["bytes"]), cfg.seed)
        if not judge:
            row["vs_verdict"] = None
        if printer is not None and comm.Get_rank() == 0:
            printer(row)

    n_sizes = len(dict.fromkeys(max(s // dtype.itemsize, 1) for s in cfg.sizes))
    weights = [s + 65536 for s in cfg.sizes[:n_sizes]] * (bool(together) + len(apart))
    progress = Progress(len(weights), "bench", enabled=world.Get_rank() == 0, weights=weights,
                        stream=sys.stderr)
    rows: list[dict] = []
    if together:
        rows += sweep(together, world, cfg, bufs, lambda row: emit(row, world), progress)
        for t in together:
            t.close()
    for test in apart:
        comm = world.Split(0 if test.active else MPI.UNDEFINED, key=world.Get_rank())
        mine: list[dict] = []
        if test.active:
            mine = sweep([test], comm, cfg, bufs, lambda row, c=comm: emit(row, c), progress)
            test.close()  # releases the dedicated servers from serve()
            comm.Free()
        else:
            test.serve()
            test.close()
        # every rank gets the records (setup path, not timed: pickling is fine)
        first = world.allreduce(world.Get_rank() if test.active else world.Get_size(), op=MPI.MIN)
        rows += world.bcast(mine, root=first)
    progress.close()
    return rows


def _vs_baseline(row: dict, base: dict | None, seed: int) -> None:
    """Set ``vs_baseline`` (baseline time / time) and its verdict: faster, slower or tie."""
    row["vs_baseline"] = row["vs_low"] = row["vs_high"] = row["vs_verdict"] = None
    if base is None or not row["time_us"] > 0:
        return
    row["vs_baseline"] = base["time_us"] / row["time_us"]
    if base is row or row["ranks"] < 2:  # 1 rank: every "allreduce" is a local copy, no verdict
        return
    v = V.compare_pair(row["strategy"], base["strategy"], row["_samples"], base["_samples"],
                       seed=seed)
    # the interval's own point (mean of round medians), so the point lies inside its interval
    row["vs_baseline"], row["vs_low"], row["vs_high"] = v.ratio.value, v.ratio.low, v.ratio.high
    row["vs_verdict"] = ("tie" if v.winner is None else
                         "faster" if v.winner == row["strategy"] else "slower")


def write_records(rows: list[dict], meta: dict, json_path: str | None,
                  csv_path: str | None) -> None:
    rows = [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]
    if json_path:  # strict JSON: NaN and infinities become null
        with open(json_path, "w") as f:
            json.dump(jsonable({**meta, "results": rows}), f, indent=1, allow_nan=False)
    if csv_path:
        keys = list(dict.fromkeys(RECORD_KEYS + [k for r in rows for k in r]))
        with open(csv_path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
