"""A non-blocking allreduce: one communication thread per reducer, handles with ``wait()``.

    areducer = AsyncReducer(reducer)              # starts the "communication" thread
    work = areducer.allreduce_async(buf, "mean")  # returns at once
    ...                                           # compute meanwhile
    work.wait()                                   # buf holds the reduction (or the error is raised)
    areducer.close()

As Horovod's ``allreduce_async`` + ``synchronize``. Only the communication thread
calls the reducer, in submission order, so every rank issues the same
collectives in the same order (the order calls are submitted must agree across
ranks, exactly as for blocking calls). mpi4py releases the GIL inside MPI calls
and NumPy inside its loops and BLAS, so the training thread computes while a
reduction is under way. This needs MPI's thread level "multiple" (mpi4py's
default): the training thread may still call MPI (metrics, barriers) while the
communication thread reduces.

An exception in the communication thread is kept and raised, as
``CommThreadError`` naming the rank, by ``wait()`` of that call and of every
later one: it ends the job like an exception on the training thread (the
command-line guard prints it and aborts every rank).
"""

from __future__ import annotations

import queue
import sys
import threading
from typing import Any

from mpicomm.core import clock

__all__ = ["AsyncReducer", "Work", "CommThreadError", "require_thread_multiple"]

# Python hands the GIL to a waiting thread only every switch interval (5 ms by default):
# a reduction returning from MPI while backward runs small NumPy ops (which keep the GIL)
# would wait that long per message. 100 µs lets it through promptly.
SWITCH_INTERVAL_S = 1e-4


class CommThreadError(RuntimeError):
    """A reduction failed on the communication thread (raised by ``Work.wait``)."""


def require_thread_multiple() -> None:
    """Raise RuntimeError unless MPI was initialised with thread level "multiple"."""
    from mpi4py import MPI

    level = MPI.Query_thread()
    if level < MPI.THREAD_MULTIPLE:
        names = {MPI.THREAD_SINGLE: "single", MPI.THREAD_FUNNELED: "funneled",
                 MPI.THREAD_SERIALIZED: "serialized"}
        raise RuntimeError(
            f"overlap needs MPI thread level 'multiple', but MPI provides "
            f"'{names.get(level, level)}' (MPICOMM_THREAD_LEVEL, or an MPI built without "
            "thread support); use --no-overlap, or MPICOMM_THREAD_LEVEL=multiple"
        )


class Work:
    """Handle of one submitted reduction.

    Attributes:
        buf: the buffer being reduced in place.
        key: the bucket id passed to ``reducer.allreduce(..., key=)`` (None: not passed).
        start, end: ``clock.now()`` seconds the reduction ran on the communication thread.
        posted: ``clock.now()`` of the submitting thread when it was queued.

    Under the virtual clock the communication thread has its own timeline (its
    own core, as on a GPU node): a reduction starts at the later of the thread's
    time and ``posted``, and ``wait()`` moves the waiting thread to ``end``.
    """

    __slots__ = ("buf", "op", "start", "end", "posted", "error", "_done", "tag", "key")

    def __init__(self, buf: Any, op: str, tag: Any = None, key: Any = None) -> None:
        self.buf, self.op, self.tag, self.key = buf, op, tag, key
        self.start = self.end = self.posted = 0.0
        self.error: BaseException | None = None
        self._done = threading.Event()

    def done(self) -> bool:
        """Return True once the reduction has finished (or failed)."""
        return self._done.is_set()

    def wait(self) -> Any:
        """Block until the reduction is done; return ``buf``, or raise ``CommThreadError``."""
        self._done.wait()
        if self.error is not None:
            raise self.error
        vc = clock.virtual()
        if vc is not None:  # the result exists from the communication thread's end on
            vc.advance_to(self.end)
        return self.buf

    @property
    def seconds(self) -> float:
        """Time the reduction took on the communication thread."""
        return self.end - self.start


class AsyncReducer:
    """Run ``reducer.allreduce`` calls on one background thread, in submission order.

    Args:
        reducer: any ``mpicomm`` reducer (a worker rank's).
        on_done: optional ``on_done(work)`` called on the communication thread after
            each successful reduction (e.g. to record a trace event).
        switch_interval: the interpreter's GIL switch interval while the thread runs
            (``sys.setswitchinterval``; restored by ``close``; None leaves it alone).
    """

    def __init__(self, reducer: Any, on_done: Any = None,
                 switch_interval: float | None = SWITCH_INTERVAL_S) -> None:
        require_thread_multiple()
        if getattr(reducer, "owner", None) is not None:  # two threads would interleave calls
            raise RuntimeError(f"{getattr(reducer, 'name', 'reducer')}: this reducer already "
                               "belongs to an AsyncReducer; close that one first")
        self._old_interval = sys.getswitchinterval()
        if switch_interval is not None:  # hand the GIL back to a returning MPI call sooner
            sys.setswitchinterval(min(switch_interval, self._old_interval))
        self.reducer = reducer
        self.on_done = on_done
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._failed: CommThreadError | None = None
        self._thread = threading.Thread(target=self._serve, name="communication", daemon=True)
        self._thread.start()
        if hasattr(reducer, "owner"):  # the reducer now refuses calls from other threads
            reducer.owner = self._thread.ident

    def allreduce_async(self, buf: Any, op: str = "sum", tag: Any = None) -> Work:
        """Queue an in-place allreduce of ``buf``; return its ``Work`` at once."""
        work = Work(buf, op, tag)
        self.submit(work)
        return work

    def submit(self, work: Work) -> None:
        """Queue a (reused) ``Work``; its previous result is forgotten."""
        if self._thread is None:
            raise RuntimeError("AsyncReducer is closed")
        work.error = None
        work._done.clear()
        work.posted = clock.now()
        self._queue.put(work)

    def close(self) -> None:
        """Finish the queued reductions and stop the thread (twice is harmless)."""
        if self._thread is not None:
            self._queue.put(None)
            ident = self._thread.ident
            self._thread.join()
            self._thread = None
            if getattr(self.reducer, "owner", None) == ident:
                self.reducer.owner = None
            sys.setswitchinterval(self._old_interval)

    def __enter__(self) -> AsyncReducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        perf = clock.now
        while True:
            work = self._queue.get()
            if work is None:
                return
            vc = clock.virtual()
            if vc is not None:  # this thread's timeline: the call cannot start before it is posted
                vc.advance_to(work.posted)
            if self._failed is None:
                try:
                    work.start = perf()
                    if work.key is None:
                        self.reducer.allreduce(work.buf, op=work.op)
                    else:
                        self.reducer.allreduce(work.buf, op=work.op, key=work.key)
                    work.end = perf()
                    if self.on_done is not None:
                        self.on_done(work)
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                    rank = getattr(self.reducer, "rank", "?")
                    self._failed = CommThreadError(
                        f"rank {rank}: communication thread: {type(exc).__name__}: {exc}")
                    self._failed.__cause__ = exc
            work.error = self._failed  # after a failure, every later call fails too
            work._done.set()
