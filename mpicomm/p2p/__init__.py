"""The point-to-point layer every hand-written strategy sends through, and the clock's seam.

``make_transport(comm, node_of, counts, inter_link, intra_link, ...)`` returns a
``Transport`` (real links), an ``EmulatedTransport`` (some link class emulated for some
peer of this rank, wall clock) or, when the virtual clock is installed, a
``VirtualTransport`` charging its own ``Cluster``. See ``transport``, ``emulated`` and
``virtual``.

Everything above this layer (reducers, engines, train, bench, cli) reaches the virtual
clock through these names and ``mpicomm.core.clock`` only, never ``mpicomm.p2p.virtual``
itself (tests/test_layout.py keeps it so): ``install_clock`` (a command's one install),
``hold_clock``/``release_clock`` (one reducer's), ``barrier`` and ``max_over`` (a
collective that also carries the clock), ``set_fold`` (``--fold``: the clock charges a
buffer's size that many times).
"""

from __future__ import annotations

from typing import Any

from mpi4py import MPI

from mpicomm.core import clock
from mpicomm.core.links import LinkSpec
from mpicomm.costmodel.profiles import build_cluster
from mpicomm.p2p.emulated import EmulatedTransport
from mpicomm.p2p.transport import Traffic, Transport
from mpicomm.p2p.virtual import (
    VirtualTransport,
    barrier,
    default_clock,
    hold,
    max_over,
    release,
    set_fold,
)
from mpicomm.p2p.virtual import install_for as install_clock

__all__ = ["Transport", "EmulatedTransport", "VirtualTransport", "Traffic", "make_transport",
           "install_clock", "default_clock", "hold_clock", "release_clock", "barrier",
           "max_over", "set_fold"]

hold_clock, release_clock = hold, release


def make_transport(comm: MPI.Comm, node_of: list[int], counts: Traffic | None = None,
                   inter_link: LinkSpec | None = None,
                   intra_link: LinkSpec | None = None, *, nics_per_node: int | None = None,
                   links_from: str | None = None, cluster: Any = None) -> Transport:
    """The transport for this rank: emulated when one of its peers sits on an emulated class.

    The choice is symmetric (rank a is remote to b exactly when b is to a), so a
    sender adds headers exactly when its receiver expects them. Local: no message.
    Under the virtual clock every rank's transport is virtual and charges ``cluster``, or
    the one ``build_cluster`` makes of these links, NICs and ``links_from`` on this layout
    (the predictor's defaults for what is not given).
    """
    me = node_of[comm.Get_rank()]
    if clock.virtual() is not None:
        if cluster is None:
            local = sum(n == me for n in node_of)
            cluster = build_cluster(ranks_per_node=local, inter=inter_link, intra=intra_link,
                                    nics_per_node=nics_per_node, links_from=links_from)
        return VirtualTransport(comm, node_of, counts, cluster)
    has_inter = any(n != me for n in node_of)
    has_intra = sum(n == me for n in node_of) > 1
    if (inter_link is not None and has_inter) or (intra_link is not None and has_intra):
        return EmulatedTransport(comm, node_of, counts, inter_link, intra_link)
    return Transport(comm, node_of, counts)
