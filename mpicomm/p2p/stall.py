"""Stall inspector: warn (and optionally abort) when a rank waits too long inside a reducer call.

As Horovod's: a rank that has waited more than ``MPICOMM_STALL_WARN_S`` seconds
(default 60) inside one reducer call prints ONE warning naming the strategy, the
call number and the ranks that have not arrived; past ``MPICOMM_STALL_ABORT_S``
(default: never) it prints the message again, writes this rank's ``--trace``
events (``core.trace.flush_active``) and ends the job (``MPI.Abort``, exit code 1).
``MPICOMM_STALL_WARN_S=0`` switches the warning off; the abort still applies
when ``MPICOMM_STALL_ABORT_S`` is set (both unset or 0: no watchdog).

How:

1. ``attach(comm, participants)`` (collective, at reducer creation) duplicates
   ``comm`` into a side communicator when every rank watches (one small allreduce:
   the environment may differ per rank) and returns a ``Channel``; the reducer calls
   ``channel.begin(name, t0)`` / ``channel.end(token, t1)`` around each call: two
   list appends, the per-call log the slow-rank report reads, which is also the
   state the watchdog reads (a call is in progress while it has an entry and no
   duration yet); the caller's entry and exit times are reused. A wall-clock
   caller may append itself (``Channel``: the inline protocol, what
   ``Reducer.allreduce``'s hot path does: two appends, no call).
   ``Transport._wait_requests`` notes how many requests it blocks on.
2a. Every wait of the point-to-point layer outside a reducer call is watched too: the
   engines' and layouts' own messages (ZeRO's reduce-scatter and all-gather, a pipeline
   stage's sends and receives, tensor parallelism's rings) and the MPI collectives the
   transport runs. The transport brackets each blocking call with ``wait_begin(n, peer)``
   / ``wait_end()`` (a tuple stored per thread: no MPI, no lock), and the watchdog treats
   a wait that has lasted past the warning (abort) time, while no channel is inside a
   call, as a stall: one warning naming the rank it waits for (its world rank, when one
   peer is known), then the abort. A parameter server's idle wait for any worker
   (``recv_any``) is not watched: its workers' calls are.
2. One watchdog thread per process wakes every ``min(1 s, warn/4)``. It answers
   peers' questions on every side communicator (``Iprobe``; a reply is this rank's
   ``Channel.state``: call counter, inside or not, seconds inside, seconds since its
   last progress). A call is stalled when its rank has made **no progress** (no wait of
   the transport has ended, ``wait_end``) for the warning time: a slow call whose
   messages keep arriving is not a stall, however long it lasts (at 64 ranks on 2 cores a
   healthy virtual-clock call lasts minutes).
3. Asking peers needs ``MPI_THREAD_MULTIPLE`` (mpi4py's default); at a lower
   level the warning says the missing ranks cannot be asked.
4. Who asks (Horovod's coordinator): a stalled rank does not ask every peer (p − 1
   stalled ranks would ask p(p − 1) questions: 30% of a 64-rank run's wall time in
   measurement). It reports to the coordinator, the first participant, which surveys
   every participant once (``survey``: one question each, answered within two wake-up
   periods plus 0.5 s, ``answer_wait_s``, else NaN) and sends the table to every rank
   that reported (``serve_reports``); one survey serves the reports of a wake-up and a
   question's wait. A coordinator silent for a wake-up, a question's wait and 0.5 s is
   replaced by the second participant (its deputy), and when both are silent the rank
   asks every peer itself. Each rank then names, from the table, the participants whose
   counter is behind its own (``stall_text.describe``): a peer still silent is named as
   such, never as "none behind"; every rank inside the same call with none moving is a
   disagreement on what the call is. Only participants are asked about: a dedicated
   parameter server, which makes no calls, is not "not arrived". The main thread blocks
   in MPI with the GIL released, so the watchdog runs while it waits. It looks at every
   channel inside a call (``Channel.since``).

Cost when nothing stalls (docs/ps.md): begin/end per call, one clock read per wait
(its end) and two ``Iprobe`` per channel per second.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import weakref
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicomm.core import clock, tags, trace
from mpicomm.core.segments import abort_job
from mpicomm.p2p.stall_text import FIELDS, describe

__all__ = ["Channel", "attach", "settings", "set_enabled", "note_wait", "wait_begin",
           "wait_end", "watch", "LOG_CAP"]

_TAG_ASK, _TAG_ANSWER = tags.STALL_ASK, tags.STALL_ANSWER
_TAG_REPORT, _TAG_VERDICT = tags.STALL_REPORT, tags.STALL_VERDICT
LOG_CAP = 1 << 18  # per-call log entries kept (the newest); a long benchmark loop stays bounded


def poll_s(warn: float, abort: float | None) -> float:
    """Seconds between the watchdog's wake-ups: a quarter of the first deadline, 50 ms to 1 s."""
    first = min(t for t in (warn or None, abort or None, 60.0) if t is not None)
    return max(0.05, min(1.0, first / 4))


def answer_wait_s(warn: float, abort: float | None) -> float:
    """How long a question waits for peers: two of their wake-up periods, plus 0.5 s."""
    return 2 * poll_s(warn, abort) + 0.5


def settings(environ: Any = os.environ) -> tuple[float, float | None]:
    """Return (warn seconds, abort seconds or None) from the environment (0 warn = off)."""
    def read(name: str, default: float | None) -> float | None:
        text = environ.get(name, "").strip()
        if not text:
            return default
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{name} must be a number of seconds, got {text!r}") from None
        if value < 0 or value != value:
            raise ValueError(f"{name} must be >= 0, got {text!r}")
        return value

    return read("MPICOMM_STALL_WARN_S", 60.0), read("MPICOMM_STALL_ABORT_S", None)


class Channel:
    """One reducer's view for the inspector: its per-call log, which is also its state.

    ``enter_t`` gets each call's entry time when it begins, ``waited`` its seconds
    inside when it ends: a call is in progress while ``len(enter_t) > len(waited)``,
    and its number is ``done + len(enter_t)`` (``done``: calls dropped from the log).
    Inline protocol, for a wall-clock caller (``begin``/``end`` do the same for any
    clock; what ``Reducer.allreduce``'s hot path does)::

        log = ch.enter_t if ch.on else None      # on: the inspector is on (``set_enabled``)
        if log is not None:
            log.append(t0)                       # time.perf_counter() at entry
        ...                                      # the call
        if log is not None:
            ch.waited.append(t1 - t0)
            if len(ch.waited) > LOG_CAP:
                ch.trim()
    """

    def __init__(self, side: MPI.Comm | None, participants: list[int], rank: int,
                 size: int) -> None:
        self.side, self.participants, self.rank, self.size = side, participants, rank, size
        self.name = "?"
        self.on = _state.enabled
        self.done = 0                       # calls dropped from the log (trim, take_log)
        self.warned = 0
        self.enter_t: list[float] = []      # clock.now() at each call's entry
        self.waited: list[float] = []       # seconds inside each call
        self._wall_t: float | None = None   # wall entry of the current call (virtual clock)
        self._wall_offset = time.time() - time.perf_counter()  # entry times -> wall clock
        self._answer = np.zeros(len(FIELDS), dtype=np.float64)
        self._ask = np.zeros(1, dtype=np.float64)
        self._asked: list = []  # (payload, sends) of messages not yet sent (never waited for)
        self._reports: list[tuple[int, float]] = []  # (rank, its call): to answer (coordinator)
        self._table: np.ndarray | None = None  # the last survey, and when (time.perf_counter)
        self._table_t = 0.0
        self.answered = 0  # questions this rank's watchdog answered on this channel

    @property
    def call(self) -> int:
        """The number of the current (or last) call."""
        return self.done + len(self.enter_t)

    def since(self) -> float | None:
        """Return the wall time (``time.perf_counter``) the current call began, or None."""
        enter = self.enter_t
        if len(enter) <= len(self.waited):
            return None
        wall = self._wall_t
        return enter[-1] if wall is None else wall

    def begin(self, name: str, t: float | None = None) -> float:
        """Mark entry into call number ``call + 1`` at ``t`` (``clock.now()``; now when None).

        The per-call log (``take_log``) is in the installed clock; the watchdog
        always measures wall time. Returns the token for ``end`` (0.0 when the
        inspector is off).
        """
        if not self.on:
            return 0.0
        if t is None:
            t = clock.now()
        self.name = name
        if clock.virtual() is not None:
            self._wall_t = time.perf_counter()
        self.enter_t.append(t)
        return t or 1e-300  # a true token even at t == 0.0

    def end(self, token: float, t: float | None = None) -> None:
        """Mark the call begun with ``token`` as finished at ``t`` (``clock.now()``; now when
        None)."""
        if token:
            self._wall_t = None
            waited = self.waited
            waited.append((clock.now() if t is None else t) - self.enter_t[-1])
            if len(waited) > LOG_CAP:
                self.trim()

    def trim(self) -> None:
        """Drop the older half of the per-call log, both lists alike (past ``LOG_CAP``)."""
        with _state.lock:  # the watchdog reads the lengths under it
            del self.waited[: LOG_CAP // 2], self.enter_t[: LOG_CAP // 2]
            self.done += LOG_CAP // 2

    def take_log(self) -> tuple[np.ndarray, np.ndarray]:
        """Return and clear (entry times, seconds inside) of the calls finished so far:
        wall-clock (``time.time``) times, or virtual ones (comparable across ranks)
        under that clock."""
        offset = self._wall_offset if clock.virtual() is None else 0.0
        with _state.lock:
            n = len(self.waited)
            out = np.array(self.enter_t[:n]) + offset, np.array(self.waited[:n])
            del self.enter_t[:n], self.waited[:n]
            self.done += n
        return out

    def close(self) -> None:
        """Stop answering for this channel and free its side communicator (collective)."""
        with _state.lock:
            if self in _state.channels:
                _state.channels.remove(self)
            _state.every.discard(self)
            side, self.side = self.side, None
        if side is not None:
            side.Free()

    # ---------------------------------------------------- watchdog side
    def state(self) -> tuple[float, float, float, float]:
        """This rank's survey row (``stall_text.FIELDS``): call, inside, seconds inside, seconds
        inside since its last progress (a finished wait of the transport)."""
        t = self.since()
        if t is None:
            return float(self.call), 0.0, 0.0, 0.0
        now = time.perf_counter()
        return float(self.call), 1.0, now - t, now - max(t, _state.progress_t)

    def answer_questions(self) -> None:
        """Answer the peers' questions with ``state``; note stalled ranks' reports (4.)."""
        side = self.side
        if side is None:
            return
        st = MPI.Status()
        while side.Iprobe(MPI.ANY_SOURCE, _TAG_ASK, st):
            side.Recv(self._ask, st.Get_source(), _TAG_ASK)
            self._answer[:] = self.state()
            side.Send(self._answer, st.Get_source(), _TAG_ANSWER)
            self.answered += 1
        while side.Iprobe(MPI.ANY_SOURCE, _TAG_REPORT, st):
            side.Recv(self._ask, st.Get_source(), _TAG_REPORT)
            self._reports.append((st.Get_source(), float(self._ask[0])))

    def missing(self, call: int | None = None) -> str:
        """Return the ranks that have not arrived at this rank's current call, in words: from
        the survey of the coordinator or, when it is silent, its deputy (4.); from this
        rank's own survey when both are. ``call``: the call asked about (default the
        current one)."""
        if self.side is None:
            if self.size == 1:
                return "none (one rank)"
            return "unknown (MPI thread level below multiple: peers cannot be asked)"
        call = self.call if call is None else call
        wait = answer_wait_s(_state.warn_s, _state.abort_s)
        table, silent = None, []
        for c in self.participants[:2]:  # the coordinator, then its deputy
            if c == self.rank:
                table = self._recent_table()
                table = self.survey(wait) if table is None else table
                break
            table = self._ask_coordinator(c, call, wait)
            if table is not None:
                break
            silent.append(c)
        if table is None:
            table = self.survey(wait)
        peers = [r for r in self.participants if r != self.rank]
        note = (f" (coordinator {' and '.join(map(str, silent))} did not answer, so "
                f"{'its deputy' if table is not None and len(silent) == 1 else 'this rank'} "
                "asked every rank)") if silent else ""
        moving = 0.5 * (_state.warn_s or _state.abort_s or 60.0)
        return describe(table, call, peers, wait, moving) + note

    def _recent_table(self) -> np.ndarray | None:
        """The last survey when it was taken inside this rank's current call, else None."""
        t = self.since()
        table = self._table
        return table if table is not None and t is not None and self._table_t >= t else None

    def survey(self, wait: float) -> np.ndarray:
        """Ask every other participant its ``state`` (one question each, answered by its
        watchdog within ``wait`` seconds or NaN), then send the table to the ranks that
        reported a stall meanwhile."""
        side = self.side
        table = np.full((self.size, len(FIELDS)), np.nan)
        table[self.rank] = self.state()
        peers = [r for r in self.participants if r != self.rank]
        ask = np.array([self.call], dtype=np.float64)
        reqs = [side.Irecv(table[r], r, _TAG_ANSWER) for r in peers]
        self._keep(ask, [side.Isend(ask, r, _TAG_ASK) for r in peers])
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not MPI.Request.Testall(reqs):
            _answer_all()  # a peer may be asking us at the same moment
            time.sleep(0.01)
        _settle(reqs)
        self._table, self._table_t = table, time.perf_counter()
        self.serve_reports()
        return table

    def serve_reports(self) -> None:
        """Send each rank that reported a stall the last survey, headed by its call; survey
        first when that one is older than a question's wait plus a wake-up, or older than
        a reporter's call."""
        if not self._reports or self.side is None:
            return
        fresh = answer_wait_s(_state.warn_s, _state.abort_s) + poll_s(_state.warn_s,
                                                                      _state.abort_s)
        table = self._table
        if (table is None or time.perf_counter() - self._table_t > fresh
                or any(table[rank, 0] < call for rank, call in self._reports)):
            self.survey(answer_wait_s(_state.warn_s, _state.abort_s))  # serves them
            return
        reports, self._reports = self._reports, []
        for rank, call in reports:
            verdict = np.vstack(([call] + [0.0] * (len(FIELDS) - 1), table))
            self._keep(verdict, [self.side.Isend(verdict, rank, _TAG_VERDICT)])

    def _ask_coordinator(self, coordinator: int, call: int, wait: float) -> np.ndarray | None:
        """Report the stall at ``call`` to ``coordinator`` and return its survey, or None when
        it has not answered within a wake-up, its survey's wait and 0.5 s."""
        side = self.side
        verdict = np.full((self.size + 1, len(FIELDS)), np.nan)
        ask = np.array([call], dtype=np.float64)
        req = side.Irecv(verdict, coordinator, _TAG_VERDICT)
        self._keep(ask, [side.Isend(ask, coordinator, _TAG_REPORT)])
        deadline = time.monotonic() + poll_s(_state.warn_s, _state.abort_s) + wait + 0.5
        while time.monotonic() < deadline:
            if req.Test():
                if verdict[0, 0] == call:
                    return verdict[1:]
                req = side.Irecv(verdict, coordinator, _TAG_VERDICT)  # a late one, of before
            _answer_all()
            time.sleep(0.01)
        _settle([req])
        return None

    def _keep(self, payload: np.ndarray, sends: list) -> None:
        """Keep sends in flight and their payload referenced until sent (never waited for: a
        stopped peer cannot block the watchdog)."""
        self._asked = [(a, s) for a, s in self._asked if not MPI.Request.Testall(s)]
        self._asked.append((payload, sends))


def _settle(recvs: list) -> None:
    """End a question's receives before their arrays go: cancel the answers still missing (a
    silent peer, e.g. starved on a crowded host, answers later; a cancelled receive completes
    at once). Left posted, a late answer was written into the array freed on return (the
    likely cause of the MPI error at 256 ranks, docs/workloads.md). The asks' sends are kept
    on the channel until they complete, never waited for: a stopped peer cannot block the
    watchdog."""
    for r in recvs:
        if r:  # still active: not yet completed by Testall
            r.Cancel()
    MPI.Request.Waitall(recvs)


class _State:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.channels: list[Channel] = []  # those with a side communicator (answering)
        self.every: weakref.WeakSet[Channel] = weakref.WeakSet()  # every open channel
        self.thread: threading.Thread | None = None
        self.enabled = True
        self.warn_s, self.abort_s = 60.0, None
        self.waiting_on = 0  # requests the transport is blocked on (0: none)
        # thread id -> (wall entry, requests, world rank waited for or -1) of its current
        # point-to-point wait, None between waits (2a.)
        self.waits: dict[int, tuple[float, int, int] | None] = {}
        self.warned_wait = 0.0  # the entry time of the last wait warned about
        self.progress_t = 0.0  # time.perf_counter() at the end of the last wait (any thread)


_state = _State()
_ident, _perf = threading.get_ident, time.perf_counter


def wait_begin(n: int, peer: int = -1) -> None:
    """This thread blocks on ``n`` messages now (``peer``: the world rank it waits for,
    -1 when not one known rank)."""
    _state.waiting_on = n
    _state.waits[_ident()] = (_perf(), n, peer)


def wait_end() -> None:
    """This thread's wait is over: progress."""
    _state.waiting_on = 0
    _state.waits[_ident()] = None
    _state.progress_t = _perf()


def set_enabled(on: bool) -> None:
    """Switch the per-call bookkeeping on or off (for measuring its cost), for every channel."""
    with _state.lock:
        _state.enabled = on
        for ch in _state.every:
            ch.on = on


def note_wait(n: int) -> None:
    """The transport blocks on ``n`` requests (0: the wait is over): ``wait_begin``/``_end``."""
    if n:
        wait_begin(n)
    else:
        wait_end()


def watch() -> None:
    """Start the watchdog thread (once per process) when the environment asks for one: a
    transport made outside any reducer (a pipeline's, a tensor group's) is watched too."""
    warn, abort = settings()
    with _state.lock:
        _state.warn_s, _state.abort_s = warn, abort
        if (warn or abort) and _state.thread is None:
            _state.thread = threading.Thread(target=_watch, name="mpicomm-stall", daemon=True)
            _state.thread.start()


def attach(comm: MPI.Comm, participants: list[int] | None = None) -> Channel:
    """Return a ``Channel`` for a reducer over ``comm`` (collective over ``comm``).

    ``participants``: the ranks that make the calls (default all; a parameter
    server's workers). Starts the watchdog thread on first use.
    """
    warn, abort = settings()
    size, rank = comm.Get_size(), comm.Get_rank()
    watching = bool(warn) or bool(abort)
    ask_ok = size > 1 and MPI.Query_thread() == MPI.THREAD_MULTIPLE and watching
    if size > 1:  # Dup is collective: every rank decides alike (the env may differ per rank)
        ask_ok = comm.allreduce(ask_ok, op=MPI.LAND)
    side = comm.Dup() if ask_ok else None
    ch = Channel(side, list(range(size)) if participants is None else list(participants),
                 rank, size)
    with _state.lock:
        if side is not None:
            _state.channels.append(ch)
        _state.every.add(ch)
    watch()  # the settings, and the thread on first use
    return ch


def _answer_all() -> None:
    with _state.lock:
        for ch in list(_state.channels):
            ch.answer_questions()


def _watch() -> None:
    while True:
        warn, abort = _state.warn_s, _state.abort_s
        time.sleep(poll_s(warn, abort))
        _answer_all()
        with _state.lock:
            for ch in list(_state.channels):
                ch.serve_reports()  # the coordinator's part (4.)
            inside = [ch for ch in _state.every if ch.since() is not None]
        for ch in inside:
            _check(ch, warn, abort)
        if not inside:  # a wait outside every reducer call (2a.)
            _check_waits(warn, abort)


def _check_waits(warn: float, abort: float | None) -> None:
    """Warn about (or abort on) a point-to-point wait that has lasted too long (2a.)."""
    now = _perf()
    for tid, w in list(_state.waits.items()):
        if w is None:
            continue
        waited = now - w[0]
        if warn and waited > warn and _state.warned_wait != w[0]:
            _state.warned_wait = w[0]
            _say_wait(w, waited, "warning")
        if abort and waited > abort and _state.waits.get(tid) is w:
            _say_wait(w, waited, "abort")
            trace.flush_active()
            abort_job(1, 0.5)


def _say_wait(w: tuple[float, int, int], waited: float, kind: str) -> None:
    _, n, peer = w
    who = f"rank {peer}" if peer >= 0 else "unknown (the wait is on requests to several ranks)"
    tail = (f"; MPICOMM_STALL_ABORT_S={_state.abort_s:g} passed: aborting the job"
            if kind == "abort" else "")
    sys.stderr.write(
        f"mpicomm stall {kind}: rank {MPI.COMM_WORLD.Get_rank()} has waited {waited:.1f} s "
        f"on {n} point-to-point request{'s' if n > 1 else ''} (an engine's or a layout's "
        f"messages, outside a reducer call); ranks not arrived: {who}{tail}\n")
    sys.stderr.flush()


def _check(ch: Channel, warn: float, abort: float | None) -> None:
    """Warn about (or abort on) ``ch``'s current call if it has lasted too long."""
    t = ch.since()
    if t is None:
        return
    now = time.perf_counter()
    waited, quiet = now - t, now - max(t, _state.progress_t)  # a call that moves is not stuck
    if warn and quiet > warn and ch.warned != ch.call:
        ch.warned = ch.call
        _say(ch, quiet, waited, "warning")
    if abort and quiet > abort and ch.since() == t:
        _say(ch, quiet, waited, "abort")
        trace.flush_active()  # --trace: this rank's events reach the file before the abort
        abort_job(1, 0.5)  # 0.5 s: the launcher forwards the message before Abort kills the job


def _say(ch: Channel, quiet: float, inside: float, kind: str) -> None:
    """One line: the seconds without progress (and inside the call, when it moved first)."""
    call = ch.call  # asking takes seconds: the call may end meanwhile
    with _state.lock:
        missing = ch.missing(call) if ch in _state.channels or ch.side is None else "unknown"
    where = f", blocked on {_state.waiting_on} requests" if _state.waiting_on else ""
    tail = (f"; MPICOMM_STALL_ABORT_S={_state.abort_s:g} passed: aborting the job"
            if kind == "abort" else "")
    moved = f" (inside it {inside:.1f} s, moving until then)" if inside > quiet + 1 else ""
    sys.stderr.write(
        f"mpicomm stall {kind}: rank {ch.rank} has waited {quiet:.1f} s in {ch.name} call "
        f"{call}{moved}{where}; ranks not arrived: {missing}{tail}\n")
    sys.stderr.flush()
