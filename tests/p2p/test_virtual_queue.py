"""The virtual clock's queues on their own, no MPI launch: receive (``_arrive``), send (``_book``).

A one-server PS at 16 ranks on 2 nodes: 8 workers on the other node push 16 pieces each, one
round per ``Waitall``; each worker's pieces leave on its own interface one after another, the
server's inter-node receive queue takes them one at a time. Its last piece arrives at
α + 8·16·piece·β whatever the queue remembers: forgetting old busy intervals must not turn
them into gaps that later pieces fill (issue 18: 219 ms instead of 268 ms at 16 MiB).
"""

from types import SimpleNamespace

import numpy as np
import pytest

from mpicomm.costmodel.queues import RECV_INTERVALS
from mpicomm.p2p.virtual import VirtualTransport, _Msg

ALPHA, BETA = 20e-6, 1e-9  # 20us,1GB/s
PIECE = 1 << 20


def _receiver(senders: int):
    """What ``_arrive`` reads of a transport: every sender on the other node (class inter)."""
    wires = [lambda n: n * BETA] * (senders + 1)  # a modelled link: every table n·β
    return SimpleNamespace(remote=[True] * (senders + 1), _ab=[(ALPHA, BETA)] * (senders + 1),
                           _wires={(x, c): wires for x in (False, True) for c in (False, True)},
                           _recv_wires={(x, c): wires for x in (False, True)
                                        for c in (False, True)},
                           _cold=lambda: False, _rendezvous=[float("inf")] * 2,
                           _recv_busy=[[], []], _recv_floor=[0.0, 0.0],
                           _buckets=None)  # no measured token bucket (a modelled link)


def _incast_rounds(senders: int, rounds: int) -> tuple[float, list[tuple[float, float]]]:
    """Last arrival at the server and every piece's (arrival - wire, arrival)."""
    t = _receiver(senders)
    wire = PIECE * BETA
    last, spans = 0.0, []
    for k in range(rounds):  # round k leaves each worker at k·wire (its own interface)
        for w in range(1, senders + 1):
            at = VirtualTransport._arrive(t, k * wire, (k + 1) * wire, PIECE, w)
            spans.append((at - wire, at))
            last = max(last, at)
    return last, spans


@pytest.mark.parametrize("senders,rounds", [(4, 16), (8, 16), (8, 40)])
def test_the_receive_queue_never_reuses_time_it_has_forgotten(senders, rounds):
    assert senders * rounds > RECV_INTERVALS or senders == 4  # (4, 16): exactly full, no loss
    last, spans = _incast_rounds(senders, rounds)
    wire = PIECE * BETA
    assert last == pytest.approx(ALPHA + senders * rounds * wire, rel=1e-9)
    spans.sort()
    for (a0, a1), (b0, b1) in zip(spans[:-1], spans[1:], strict=True):  # one at a time
        assert b0 >= a1 - 1e-12, ((a0, a1), (b0, b1))


def test_touching_intervals_merge_so_the_queue_stays_short():
    t = _receiver(8)
    wire = PIECE * BETA
    for k in range(16):
        for w in range(1, 9):
            VirtualTransport._arrive(t, k * wire, (k + 1) * wire, PIECE, w)
    assert t._recv_busy[1] == [(pytest.approx(ALPHA), pytest.approx(ALPHA + 128 * wire))]
    assert t._recv_floor[1] == 0.0  # nothing forgotten


# ------------------------------------------------------------------ the send queue (``_book``)
def _sender():
    """What ``_book`` reads of a transport: one peer on the same node (class intra)."""
    wires = [lambda n: n * BETA] * 2
    return SimpleNamespace(remote=[False, False], _send_free=[0.0, 0.0], _cold=lambda: False,
                           _wires={(x, c): wires for x in (False, True) for c in (False, True)})


def _booked(posts: list[float], nbytes: int = PIECE) -> list[tuple[float, float]]:
    """Book one batch of sends to rank 1 posted at ``posts``; each one's (start, end)."""
    msgs = [_Msg([], np.zeros(2), True, 1, 0, nbytes, t0, 0.0) for t0 in posts]
    VirtualTransport._book(_sender(), msgs)
    return [(float(m.stamp[0]), float(m.stamp[1])) for m in msgs]


def test_sends_posted_together_share_the_interface():
    wire = PIECE * BETA
    assert _booked([0.0, 0.0, 0.0]) == [(0.0, pytest.approx(3 * wire, rel=1e-12))] * 3


def test_a_send_posted_later_in_the_same_batch_neither_delays_nor_precedes_the_first():
    """A pipeline stage posts each micro-batch's activation after computing it, with no other
    transport call between: one batch. The batch used to start every message at the first
    post and share the interface among all, so the first arrived k·n·β late (GPipe's fill
    11.5 us longer at 8 micro-batches) and a later one ended before it was posted."""
    wire = PIECE * BETA
    posts = [0.0, 10 * wire, 20 * wire]  # compute between the posts: each goes alone
    for t0, (start, end) in zip(posts, _booked(posts), strict=True):
        assert start == t0 and end == pytest.approx(t0 + wire, rel=1e-12)


def test_a_send_joining_one_in_flight_shares_the_rest_of_it():
    wire = PIECE * BETA  # the first alone for wire/2, then both at half the rate
    (a0, a1), (b0, b1) = _booked([0.0, wire / 2])
    assert (a0, b0) == (0.0, wire / 2)
    assert a1 == pytest.approx(1.5 * wire, rel=1e-12) and b1 == pytest.approx(2 * wire, rel=1e-12)
