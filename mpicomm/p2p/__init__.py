"""The point-to-point layer every hand-written strategy sends through.

``make_transport(comm, node_of, counts, inter_link, intra_link)`` returns a
``Transport`` (real links), an ``EmulatedTransport`` (some link class
emulated for some peer of this rank, wall clock) or, when the virtual clock is
installed (``virtual.install``), a ``VirtualTransport``. See ``transport``,
``emulated`` and ``virtual``.
"""

from __future__ import annotations

from mpi4py import MPI

from mpicomm.core import clock
from mpicomm.core.links import LinkSpec
from mpicomm.p2p.emulated import EmulatedTransport
from mpicomm.p2p.transport import Traffic, Transport
from mpicomm.p2p.virtual import VirtualTransport, installed_model

__all__ = ["Transport", "EmulatedTransport", "VirtualTransport", "Traffic", "make_transport"]


def make_transport(comm: MPI.Comm, node_of: list[int], counts: Traffic | None = None,
                   inter_link: LinkSpec | None = None,
                   intra_link: LinkSpec | None = None) -> Transport:
    """The transport for this rank: emulated when one of its peers sits on an emulated class.

    The choice is symmetric (rank a is remote to b exactly when b is to a), so a
    sender adds headers exactly when its receiver expects them. Local: no message.
    Under the virtual clock every rank's transport is virtual (the given links
    replace the installed model's classes).
    """
    if clock.virtual() is not None:
        return VirtualTransport(comm, node_of, counts,
                                installed_model().with_links(inter_link, intra_link))
    me = node_of[comm.Get_rank()]
    has_inter = any(n != me for n in node_of)
    has_intra = sum(n == me for n in node_of) > 1
    if (inter_link is not None and has_inter) or (intra_link is not None and has_intra):
        return EmulatedTransport(comm, node_of, counts, inter_link, intra_link)
    return Transport(comm, node_of, counts)
