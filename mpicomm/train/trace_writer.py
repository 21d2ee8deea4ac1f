"""Write the job's timeline as one Chrome-trace JSON file (Perfetto, chrome://tracing).

    session = TraceFile.open(path, comm)      # collective: rank 0 creates the file, clocks aligned
    ... events go to mpicomm.core.trace.active() ...
    session.flush()                           # this rank's events so far, appended under a lock

The file is a JSON array (Chrome's "JSON Array Format") that is complete after
every flush: each rank, holding an exclusive ``flock`` on the file, removes the
closing ``]``, appends its events and closes the array again. A rank flushes on
its way out — at the end of a run and when a run raises — so the file stays
valid JSON even when the job fails midway (the events of ranks killed by the
abort are lost, the file is not).

Layout: one process per rank (pid = rank, named "rank R"), threads named by
the recorder's thread names ("training", "communication"; the main thread is
shown as "training"). Every event in the recorder is written, whatever its
category (p2p messages, buckets, waits, compute). Times are microseconds since
the barrier that opened the trace, so the ranks' clocks line up to within the
barrier's exit skew (microseconds on one host).
"""

from __future__ import annotations

import fcntl
import json
import os
from typing import Any

from mpicomm.core import clock, trace
from mpicomm.p2p import barrier

__all__ = ["TraceFile"]

_OPEN: dict[str, TraceFile] = {}  # one file per path and process (compare: several runs)
_TID = {"training": 1, "MainThread": 1, "communication": 2}


class TraceFile:
    """This rank's share of one Chrome-trace file, and the recorder that fills it."""

    def __init__(self, path: str, rank: int, t_zero: float, recorder: trace.Recorder) -> None:
        self.path, self.rank, self.t_zero, self.recorder = path, rank, t_zero, recorder
        self._tids = dict(_TID)
        self._named: set[int] = set()

    @classmethod
    def open(cls, path: str, comm: Any) -> TraceFile:
        """Start (or continue, for a later run of the same job) the trace at ``path``.

        Collective over ``comm`` on first use: rank 0 creates the file, a barrier
        orders that before any append and marks time zero on every rank.
        """
        old = _OPEN.get(path)
        if old is not None:
            trace.set_active(old.recorder)
            return old
        rank = comm.Get_rank()
        if rank == 0:
            with open(path, "w") as f:
                f.write("[\n" + json.dumps(_meta("process_name", 0, 0, "rank 0")) + "\n]\n")
        barrier(comm)  # under the virtual clock also one time zero
        t_zero = clock.now()
        rec = trace.Recorder(enabled=False)
        session = _OPEN[path] = cls(path, rank, t_zero, rec)
        rec.flush = session.flush  # a stall abort writes this rank's events first
        trace.set_active(rec)
        if rank:
            session._lines([_meta("process_name", rank, 0, f"rank {rank}")])
        return session

    def flush(self) -> None:
        """Append the events recorded since the last flush (holding the file's lock)."""
        events, self.recorder.events = self.recorder.events, []
        if events:
            self._lines([self._event(e) for e in events])

    def close(self) -> None:
        """Flush and stop recording (the file stays open for a later run of the job)."""
        self.flush()
        self.recorder.enabled = False
        trace.set_active(None)

    # ------------------------------------------------------------- helpers
    def _event(self, e: trace.Event) -> dict:
        tid = self._tids.setdefault(e.thread, len(self._tids) + 1)
        out = {"name": e.name, "cat": e.cat, "ph": "X", "pid": self.rank, "tid": tid,
               "ts": round((e.start - self.t_zero) * 1e6, 3),
               "dur": round((e.end - e.start) * 1e6, 3)}
        if e.args:
            out["args"] = e.args
        return out

    def _lines(self, records: list[dict]) -> None:
        for tid, name in {t: n for n, t in self._tids.items() if n != "MainThread"}.items():
            if tid not in self._named and any(r.get("tid") == tid for r in records):
                self._named.add(tid)
                records.insert(0, _meta("thread_name", self.rank, tid, name))
        body = ",\n".join(json.dumps(r, default=str) for r in records)
        with open(self.path, "r+b") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                f.seek(0, os.SEEK_END)
                end = f.tell()
                f.seek(max(end - 3, 0))
                if f.read() == b"\n]\n":  # reopen the array
                    f.seek(end - 3)
                    f.truncate()
                    f.write(b",\n")
                f.write(body.encode() + b"\n]\n")
                f.flush()
                os.fsync(f.fileno())
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _meta(what: str, pid: int, tid: int, name: str) -> dict:
    return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
