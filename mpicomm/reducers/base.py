"""The one reducer interface, and what every strategy shares.

A strategy subclasses ``Reducer`` and implements one method::

    def _allreduce(self, flat, scale) -> None

which sums the 1-D array ``flat`` in place across the reducer's ranks,
multiplying the result by ``scale`` when it is not None (op="mean"). It sends
every message through ``self.p2p`` (a ``mpicomm.p2p.Transport`` over the private
communicator and the node map), which counts the bytes into ``self.stats`` and
applies emulated links. ``Reducer.allreduce`` does the rest:

1. refuse a second concurrent call (another thread, or any thread but the
   owner's while an ``AsyncReducer`` owns the reducer): a ``RuntimeError``, never
   a wrong sum (a non-blocking lock: ``_Guard``, ~0.01 µs);
2. check the buffer (array type, dtype, contiguity) — before any message;
3. gather (length, dtype, op) from every rank and raise the same clear error on
   every rank if they differ (one small Allgather) — once per distinct layout
   (length, dtype, op) this reducer has seen, as DDP checks its buckets once at
   construction; on every call with ``validate=True`` (or ``MPICOMM_VALIDATE=1``).
   Ranks that call the same sequence of layouts take the same decisions. A rank
   that diverges onto a layout the others have seen before is not caught by the
   layout cache (they skip the check while it waits in it): ``validate=True``
   catches that too, and the stall inspector names the ranks;
4. CuPy buffers: synchronise the stream and pass device memory (CUDA-aware MPI)
   or stage through a reused pinned host buffer (always, when compressing: the
   codecs are NumPy);
5. compression (``compress``): a quantising codec is the algorithm's ``wire``
   (``mpicomm.codecs.Wire``, None for plain messages); top-k runs the strategy's
   sparse gather (``_sparse``) with the error-feedback residual of ``key``;
6. time the call into ``self.stats`` (the transport has counted the bytes).

The hot path (a training loop's every bucket after the first step): once a
layout has been agreed on (3.) for a plain reducer (no compression) with
``validate`` off, ``_fast_plan`` makes a plan for it, kept in a dict keyed by
(length, dtype, op) — independent of the buffer's address. A later call with a
1-D, writable, C-contiguous NumPy array of that layout (and no ``--nvtx``) runs
1., the plan and 6. only. The layout is found through a cache keyed by the length
alone (``_hot``: length -> the dtype object, op string and plan of that length's
last hot call), compared by identity: an int's hash instead of a tuple's holding a
dtype (whose hash NumPy computes on every call); a miss (another dtype or op, an
equal dtype that is another object) asks the dict, and a layout without a plan
takes the checked path. The flags test is the plan's own where its first act
takes the buffer through mpi4py as writable and contiguous (``native``: a
``BufferError`` before anything is sent, answered with the checked path's error).
The hot path runs under either clock: the virtual clock charges the CPU time of
the path a cluster's run takes, not the checked path's.
A strategy's plan precomputes what depends on the layout alone: ``native`` calls
MPI's ``Allreduce`` directly with the bytes to count precomputed, the ring its
steps' bounds and scratch views (``ring.direct_ring``); both on a plain
``Transport`` only (``Transport.direct``: not under emulated links or the virtual
clock, which must see every message), except the ring's, which the virtual clock's
transport times message by message. Every other call takes 2.-5. as listed.

What a hot call costs beyond the plan, one rank, wall clock, ns: what leaving each
piece out saves (``MPICOMM_STALL_WARN_S=0 python experiments/hot_path_pieces.py``,
1 KiB, min of 40 x 20,000 calls, load 1.05; 2 ranks on 2 cores pay about twice):
the two clock reads 111 (``perf_counter`` is ~55 ns on this host), the layout
lookup 102, the stall log 91 (two list appends), stats 51, the guard 24, the owner
check 18, the clock and nvtx tests 15 (the clock test has since gone: the hot path runs
under either clock); in all 570 (``full`` 1047 against ``plan
alone`` 477).

Lifecycle: a reducer is a context manager (``with make_reducer(...) as r:``);
``close()`` releases it, a second ``close()`` does nothing, and a call after
``close()`` raises ``RuntimeError("<name>: this reducer is closed")``.
``allreduce_flat`` runs the algorithm alone on a checked buffer (how ``auto``
composes its two algorithms).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from mpi4py import MPI

from mpicomm.codecs import ErrorFeedback, Wire, make_codec
from mpicomm.core import clock, flops, nvtx
from mpicomm.core.backend import (
    HostStage,
    check_buffer,
    flat_view,
    is_device_array,
    mpi_cuda_aware,
    sync_device,
)
from mpicomm.core.codes import DTYPE_CODES, DTYPE_NAMES, OP_NAMES, OP_SUM, OPS
from mpicomm.core.errors import ConfigError
from mpicomm.core.options import ReducerOptions, parse_compress
from mpicomm.core.topology import node_map
from mpicomm.costmodel import device
from mpicomm.p2p import Transport, hold_clock, make_transport, release_clock, stall
from mpicomm.reducers.stats import ReduceStats

__all__ = ["Reducer", "MismatchError", "OPS"]

_CHAR_CODES = {dt.char: code for dt, code in DTYPE_CODES.items()}  # dtype.char: cheap to hash
_ndarray = np.ndarray
_LOG_CAP = stall.LOG_CAP
_WALL = time.perf_counter  # clock.now under the wall clock (else: the stall log's wall entry)
MAX_PLANS = 1024  # hot-path plans kept per reducer (a sweep over more sizes: the checked path)


class MismatchError(ValueError):
    """Ranks called allreduce with different lengths, dtypes or ops."""


class _Guard:
    """A non-blocking lock as one token in a list: ``pop`` takes it, ``append`` gives it back.

    Both are atomic (CPython's documented thread-safe list operations; also without
    the GIL), and cost a fifth of ``Lock.acquire(False)`` + ``release`` (0.012 against
    0.075 µs here): what the hot path uses, through ``token``."""

    __slots__ = ("token",)

    def __init__(self) -> None:
        self.token = [True]

    def acquire(self, blocking: bool = True) -> bool:
        while True:
            try:
                self.token.pop()
                return True
            except IndexError:
                if not blocking:
                    return False
                time.sleep(1e-4)

    def release(self) -> None:
        self.token.append(True)


class Reducer:
    """Base class: in-place allreduce of a flat float buffer over ``comm``.

    Args:
        comm: communicator to reduce over; it is duplicated so the reducer's
            messages never match the caller's. ``None`` means ``MPI.COMM_WORLD``.
        options: the shared ``ReducerOptions``.

    Attributes:
        name: strategy name.
        comm: the reducer's private communicator.
        p2p: the ``Transport`` every message of the strategy goes through.
        stats: ``ReduceStats`` of this rank (bytes counted by ``p2p``).
        is_worker: False on a dedicated parameter-server rank, which calls
            ``serve()`` instead of ``allreduce``.
        worker_rank, num_workers: this rank among the workers, and their count
            (the divisor of op="mean").
    """

    name = "base"

    can_emulate = True  # hand-written strategies send through the transport
    # compress kinds the strategy's steps implement (``wire`` for fp16/int8, ``_sparse``
    # for topk); the others are refused before any message, with ``why_not`` as reason
    compressions: tuple[str, ...] = ()
    why_not = "not implemented for it"

    @classmethod
    def check_compress(cls, options: ReducerOptions, able: list[str] | None = None) -> None:
        """Raise ``ConfigError`` unless this strategy can run ``options.compress``.

        ``able``: the strategies that can (``make_reducer`` passes the registry's)."""
        kind = parse_compress(options.compress)[0]
        if kind != "none" and kind not in cls.compressions:
            also = f"; strategies supporting {kind}: {', '.join(able)}" if able else ""
            raise ConfigError(f"compress={options.compress!r} is not available with strategy "
                              f"{cls.name!r} ({cls.why_not}){also}")

    def __init__(self, comm: MPI.Comm | None, options: ReducerOptions, *,
                 transport: Transport | None = None) -> None:
        """``transport``: share another reducer's transport, communicator and stats
        (``auto`` builds its two algorithms so); the owner closes them."""
        self.check_compress(options)
        self.options = options
        self._closed = False
        self._owns_comm = transport is None
        self._clock = None  # the virtual clock this reducer holds (``release_clock`` on close)
        if transport is None:
            self._clock = self._take_clock(options)  # before the transport is chosen
            base = MPI.COMM_WORLD if comm is None else comm
            self.comm = base.Dup()
            self.stats = ReduceStats()
            nodes = node_map(self.comm, options.ranks_per_node)
            # the virtual clock charges every strategy on the run's cluster (native's MPI
            # collective too); under the wall clock only the hand-written ones are emulated
            charged = self.can_emulate or clock.virtual() is not None
            links = (options.inter_link, options.intra_link) if charged else (None, None)
            transport = make_transport(self.comm, nodes, self.stats, *links,
                                       nics_per_node=options.nics_per_node,
                                       links_from=options.links_from)
        else:
            self.comm = transport.comm
            self.stats = transport.counts
        self.p2p = transport
        self.rank = self.comm.Get_rank()
        self.size = self.comm.Get_size()
        if self._owns_comm:  # the virtual clock's interface sharing (--nics-per-node)
            transport.cross_at_once(self.crossing_ranks())
        self.is_worker = True
        self.worker_rank: int | None = self.rank
        self.num_workers = self.size
        self._agree_comm = self.comm  # who must agree on (length, dtype, op)
        self._checked: set[tuple[int, int, int]] = set()  # layouts agreed on (step 3)
        self._plans_by_layout: dict[tuple, Any] = {}  # (size, dtype, op) -> hot-path call
        # length -> (dtype, op, plan, plan tests the buffer) of that length's last hot call
        self._hot: dict[int, tuple] = {}
        self._lock = _Guard()  # step 1
        self._token = self._lock.token
        self.owner: int | None = None  # thread id of an AsyncReducer that owns this reducer
        codec = make_codec(options.compress)
        self.wire: Wire | None = codec if isinstance(codec, Wire) else None
        self.feedback: ErrorFeedback | None = codec if isinstance(codec, ErrorFeedback) else None
        self.compress = options.compress
        self._plain = self.wire is None and self.feedback is None
        self._validate = options.validate
        self._stage: HostStage | None = None
        self._cuda_aware: bool | None = None  # decided at the first CuPy call, then kept
        self._key = np.zeros(3, dtype=np.int64)
        self._keys: np.ndarray | None = None
        self.stall_channel = stall.attach(self.comm) if self._owns_comm else None  # collective
        if self.stall_channel is not None:
            self.stall_channel.name = self.name  # the hot path does not pass it per call

    @staticmethod
    def _take_clock(options: ReducerOptions) -> Any:
        """The clock ``options`` ask for: ``clock="virtual"`` holds the process's virtual clock
        (installed for this reducer if none runs, taken down when its last holder closes);
        ``"wall"`` beside a running virtual clock, or a virtual-clock option under the wall
        clock, is refused (``ConfigError``): it could not take effect."""
        if options.clock == "virtual":
            held = hold_clock(options.compute_scale)
            # the compute model; a command's --flop-rate, installed before, is kept
            device.install(options.accelerator, options.precision, flops.flop_rate())
            return held
        if clock.virtual() is None and (options.accelerator is not None
                                        or options.precision != "fp32"):
            device.install(options.accelerator, options.precision)  # refused: the wall clock
        if options.clock == "wall" and clock.virtual() is not None:
            raise ConfigError("clock='wall': a virtual clock runs in this process (a command's, "
                              "or a reducer's not yet closed); close that reducer first")
        if options.nics_per_node is not None and clock.virtual() is None:
            raise ConfigError("nics_per_node: the virtual clock's interface sharing; "
                              "use clock='virtual'")
        return None

    def crossing_ranks(self) -> int:
        """How many of a node's ranks send across node boundaries at once: they share the
        node's interfaces under the virtual clock's ``nics_per_node``. Here every rank
        (recursive doubling, native); the ring's one boundary rank overrides it, and ps and
        the tree set their own per phase (``cross_at_once``)."""
        return self.comm.Get_size()

    # ---------------------------------------------------------------- public
    def allreduce(self, buf: Any, op: str = "sum", *, key: Any = None) -> Any:
        """Reduce ``buf`` in place across all workers and return it.

        Args:
            buf: contiguous float32/float64 NumPy or CuPy array (any shape).
            op: ``"sum"`` or ``"mean"`` (sum divided by the number of workers).
            key: the bucket's id (the engine passes ``bucket.index``): top-k keeps
                its error-feedback residual per key. None: the buffer's layout.

        Returns:
            ``buf``, now holding the reduction.
        """
        now = clock.now
        t0 = now()
        # the hot path: a 1-D NumPy array whose length, dtype object and op string are those
        # of a plan's last call (``_hot_plan``), C-contiguous and writable (tested here, or by
        # the plan's MPI call: ``_fast_plan``), no --nvtx; any clock (the virtual clock charges
        # the CPU time of the path a cluster's run takes)
        hot = self._hot.get(buf.size) if type(buf) is _ndarray else None
        if (hot is not None and hot[0] is buf.dtype and hot[1] is op and buf.ndim == 1
                and nvtx._nvtx is None
                and (hot[3] or (flags := buf.flags).c_contiguous and flags.writeable)):
            plan = hot[2]
        else:
            plan = self._hot_plan(buf, op)
            if plan is None:
                return self._allreduce_checked(buf, op, key, t0)
        owner = self.owner
        if owner is not None and owner != threading.get_ident():
            self._refuse_owned()
        token = self._token  # 1. (``_Guard``)
        try:
            token.pop()
        except IndexError:
            raise self._concurrent() from None
        ch = self.stall_channel  # the stall inspector's inline protocol
        log = ch.enter_t if ch is not None and ch.on else None
        if now is not _WALL:  # the virtual clock: the call's buffer (its cache model)
            self.p2p.footprint = buf.nbytes
            if log is not None:  # the watchdog measures wall time (``Channel.begin``)
                ch._wall_t = _WALL()
        if log is not None:
            log.append(t0)
        try:
            plan(buf)
        except BufferError:  # a plan that tests the buffer itself: before any message
            check_buffer(buf, self.name)  # raises the checked path's error naming why
            raise
        finally:
            seconds = now() - t0
            if log is not None:
                waited = ch.waited
                waited.append(seconds)
                if len(waited) > _LOG_CAP:
                    ch.trim()
            token.append(True)
        st = self.stats  # 6.
        st.calls += 1
        st.seconds += seconds
        return buf

    def _hot_plan(self, buf: Any, op: str) -> Any:
        """Return the plan for ``buf``'s layout when the hot path may take this call (a 1-D,
        C-contiguous, writable NumPy array of a planned (length, dtype, op), no --nvtx), else
        None; keep it as its length's entry of the identity cache (_hot)."""
        if type(buf) is not np.ndarray or buf.ndim != 1 or type(op) is not str or (
                nvtx._nvtx is not None or not (flags := buf.flags).c_contiguous
                or not flags.writeable):
            return None
        dtype = buf.dtype
        plan = self._plans_by_layout.get((buf.size, dtype, op))
        if plan is not None:
            self._hot[buf.size] = (dtype, op, plan, getattr(plan, "tests_buffer", False))
        return plan

    def _allreduce_checked(self, buf: Any, op: str, key: Any, t0: float) -> Any:
        """Steps 1-6 one by one: the first call of a layout and every call the hot path
        does not take (any clock, any buffer)."""
        if self._closed:
            raise RuntimeError(f"{self.name}: this reducer is closed")
        if self.owner is not None and self.owner != threading.get_ident():
            self._refuse_owned()
        lock = self._lock
        if not lock.acquire(False):
            raise self._concurrent()
        ch = self.stall_channel
        call = 0.0 if ch is None else ch.begin(self.name, t0)
        t1 = None
        try:
            self._checked_allreduce(buf, op, key)
            t1 = clock.now()
            self.stats.add(t1 - t0)
        finally:
            if call:
                ch.end(call, t1)
            lock.release()
        return buf

    def _refuse_owned(self) -> None:
        raise RuntimeError(f"{self.name}: this reducer belongs to an AsyncReducer; call "
                           "its allreduce_async (two callers would interleave messages)")

    def _concurrent(self) -> RuntimeError:
        return RuntimeError(f"{self.name}: allreduce called while another call is running "
                            "(from another thread): one reducer serves one caller at a time")

    def _checked_allreduce(self, buf: Any, op: str, key: Any) -> None:
        if not self.is_worker:
            raise RuntimeError(f"{self.name}: rank {self.rank} is a dedicated server; call serve()")
        # fast path: a writable, C-contiguous float NumPy array (the training loop's case)
        on_host = type(buf) is np.ndarray
        # dtype.char drops the byte order: a byte-swapped float ('>f4') is check_buffer's
        code = _CHAR_CODES.get(buf.dtype.char) if on_host and buf.dtype.isnative else None
        if code is None or not (flags := buf.flags).c_contiguous or not flags.writeable:
            check_buffer(buf, self.name)  # raises with the reason, or it is fine after all
            on_host = not is_device_array(buf)
            code = DTYPE_CODES[buf.dtype]
        opcode = OPS.get(op) if type(op) is str else None  # MPI.SUM is not hashable
        if opcode is None:
            raise ValueError(f"{self.name}: unknown op {op!r}; valid ops: "
                             f"{', '.join(map(repr, OPS))} (strings, not MPI.Op objects)")
        flat = buf if buf.ndim == 1 else flat_view(buf)
        self.p2p.footprint = flat.nbytes  # the virtual clock's cache model
        layout = (flat.size, code, opcode)
        if self._validate or layout not in self._checked:
            self._check_agreement(layout)
            self._checked.add(layout)
        scale = None if opcode == OP_SUM or self.num_workers == 1 else 1.0 / self.num_workers
        if on_host and self._plain and not self._validate:
            self._add_plan((flat.size, flat.dtype, op), flat, scale)
        if nvtx._nvtx is None:  # no --nvtx: the call alone (a context manager costs 0.17 us)
            self._dispatch(flat, scale, key, on_host)
            return
        with nvtx.range(self.name):  # Nsight: one range per collective (train --nvtx)
            self._dispatch(flat, scale, key, on_host)

    def _add_plan(self, layout: tuple, flat: Any, scale: float | None) -> None:
        """Keep the hot path's plan for an agreed ``layout`` (at most ``MAX_PLANS``)."""
        plans = self._plans_by_layout
        if layout not in plans and len(plans) < MAX_PLANS:
            plans[layout] = self._fast_plan(flat, scale)

    def _fast_plan(self, flat: Any, scale: float | None) -> Any:
        """Return the hot path's call for ``flat``'s layout: ``run(flat)`` reduces ``flat`` and
        counts its bytes into ``self.stats`` (not the call: ``allreduce`` does).

        Here: the algorithm as written. A strategy overrides it to precompute what depends
        on the layout alone (messages sent around the transport, ``Transport.direct``, are
        counted by the plan)."""
        run = self._allreduce

        def plain(buf: Any) -> None:
            run(buf, scale)

        return plain

    def _dispatch(self, flat: Any, scale: float | None, key: Any, on_host: bool) -> None:
        if self._plain:  # the algorithm as written
            if on_host:
                self._allreduce(flat, scale)
            else:
                self._allreduce_device(flat, scale)
        else:
            self._compressed(flat, scale, key, on_host)

    def _compressed(self, flat: Any, scale: float | None, key: Any, on_host: bool) -> None:
        """Step 5 (NumPy codecs: device buffers are staged through host memory)."""
        host = flat
        if not on_host:
            if self._stage is None:
                self._stage = HostStage()
            host = self._stage.to_host(flat)
        if self.feedback is not None:
            name = f"n{host.size}:{host.dtype.char}" if key is None else str(key)
            self._sparse(host, scale, self.feedback.residual(name, host.size, host.dtype))
        else:
            if scale is not None:  # before the first step: no partial sum outgrows an input
                host *= scale
                flops.scale(host.size)
            self._allreduce(host, None)
        if not on_host:
            self._stage.to_device(host, flat)

    def codec_state(self) -> dict[str, np.ndarray]:
        """Return the codec's state to checkpoint: top-k residuals by bucket key ({} otherwise)."""
        return {} if self.feedback is None else self.feedback.state()

    def load_codec_state(self, state: dict[str, np.ndarray]) -> None:
        """Restore what ``codec_state`` returned (the residuals of a checkpoint)."""
        if self.feedback is not None:
            self.feedback.load_state(state)
        elif state:
            raise ValueError(f"{self.name}: compress={self.compress!r} keeps no codec state, "
                             f"but {len(state)} residuals were given")

    def allreduce_flat(self, flat: Any, scale: float | None = None) -> None:
        """Run the algorithm alone on ``flat``: a checked, 1-D, writable host (or CUDA-aware
        device) buffer that every rank passes with the same length and dtype.

        No checks, no call counting: for a reducer composing others (``auto``),
        whose own ``allreduce`` has checked the buffer. ``scale`` multiplies the sum.
        """
        if self._closed:
            raise RuntimeError(f"{self.name}: this reducer is closed")
        self._allreduce(flat, scale)

    def serve(self) -> None:
        """Serve workers until they all close (dedicated parameter servers only)."""
        raise RuntimeError(f"{self.name}: serve() is only for dedicated parameter servers")

    def close(self) -> None:
        """Release the reducer (tell servers this worker is done, free the communicator).

        Collective, like creation. A second call does nothing."""
        if self._closed:
            return
        self._closed = True
        self._hot.clear()  # the next call takes the checked path, which refuses
        self._plans_by_layout.clear()
        if self.feedback is not None:
            self.feedback.clear()
        self._release()
        if self.stall_channel is not None:
            self.stall_channel.close()
        if self._owns_comm:
            self.p2p.close()
        if self._owns_comm and self.comm != MPI.COMM_NULL:
            self.comm.Free()
        release_clock(self._clock)  # nothing this reducer set outlives it
        self._clock = None

    def __enter__(self) -> Reducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def describe(self) -> dict:
        """Return a JSON-able description of this reducer."""
        d = {"strategy": self.name, "ranks": self.size, "num_workers": self.num_workers,
             "emulated": self.p2p.emulated}
        if self.p2p.emulated:
            d.update({k: v for k, v in self.p2p.describe().items() if k.endswith("_link")})
        if self.compress != "none":
            d["compress"] = self.compress
        return d

    # ----------------------------------------------------------- subclasses
    def _allreduce(self, flat: Any, scale: float | None) -> None:
        raise NotImplementedError

    def _sparse(self, flat: Any, scale: float | None, residual: Any) -> None:
        """Top-k: encode with ``self.feedback`` (``residual``: None without feedback), gather
        the pairs, sum them into ``flat``, scale; strategies in ``compressions`` override."""
        raise NotImplementedError

    def _release(self) -> None:
        """Free what the strategy holds besides the communicator (override; called once)."""

    # -------------------------------------------------------------- helpers
    def _allreduce_device(self, flat: Any, scale: float | None) -> None:
        if self._cuda_aware is None:
            self._cuda_aware = mpi_cuda_aware(self.options.cuda_aware)
        if self._cuda_aware:
            sync_device(flat)
            self._allreduce(flat, scale)
            return
        if self._stage is None:
            self._stage = HostStage()
        host = self._stage.to_host(flat)
        self._allreduce(host, scale)
        self._stage.to_device(host, flat)

    def _check_agreement(self, key: tuple[int, int, int]) -> None:
        """Raise ``MismatchError`` on every rank unless all ranks passed ``key``."""
        comm = self._agree_comm
        if comm is None or comm.Get_size() == 1:
            return
        if self._keys is None:
            self._keys = np.empty((comm.Get_size(), 3), dtype=np.int64)
        self._key[:] = key
        self.p2p.collective("allgather", self._key.nbytes, any(self.p2p.remote), comm,
                            comm.Allgather, self._key, self._keys)
        keys = self._keys
        if (keys == keys[0]).all():
            return
        me = comm.Get_rank()
        other = next(r for r in range(len(keys)) if (keys[r] != keys[me]).any())
        if other == me:  # pragma: no cover - impossible by construction
            other = 0
        what = []
        mine, theirs = [int(v) for v in keys[me]], [int(v) for v in keys[other]]
        if mine[0] != theirs[0]:
            what.append(f"rank {me} has {mine[0]} elements, rank {other} has {theirs[0]}")
        if mine[1] != theirs[1]:
            what.append(
                f"rank {me} has dtype {DTYPE_NAMES[mine[1]]}, "
                f"rank {other} has {DTYPE_NAMES[theirs[1]]}"
            )
        if mine[2] != theirs[2]:
            what.append(
                f"rank {me} has op {OP_NAMES[mine[2]]!r}, "
                f"rank {other} has {OP_NAMES[theirs[2]]!r}"
            )
        detail = "; ".join(what) if what else "another pair of ranks differs"
        summary = ", ".join(f"r{r}:{int(k[0])}" for r, k in enumerate(keys))
        raise MismatchError(
            f"{self.name}: buffers differ across ranks: {detail} (elements per rank: {summary})"
        )
