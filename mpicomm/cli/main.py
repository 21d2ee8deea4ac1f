"""``python -m mpicomm <command>``: one entry point, one small module per command.

Each command module (``mpicomm.cli.<name>``) defines ``HELP``, ``USES_MPI``,
``add_arguments(parser)`` and ``run(args) -> int``, and is registered by one line
in ``COMMANDS``. The entry point:

1. parses flags identically on every rank (usage errors are printed by rank 0 only);
2. runs the command on every rank;
3. if any rank raises, prints ``mpicomm: rank R: <traceback>`` and calls
   ``MPI.COMM_WORLD.Abort(1)``, so no rank waits forever and mpiexec exits non-zero;
   a command that sends no message (``plot``, ``experiments``, ``model --predict``)
   or a job of one rank exits instead (2 for a ``ConfigError``), with no ``MPI_Abort``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from types import ModuleType

from mpicomm.cli import bench, compare, experiments, info, model, plot, train
from mpicomm.cli.flags import given_dests
from mpicomm.cli.helptext import organise
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import GIVEN
from mpicomm.core.outputs import check_outputs
from mpicomm.core.segments import abort_job, release_singleton, unlink_mapped

__all__ = ["main", "COMMANDS", "guarded"]

# name -> command module (its HELP is the one-line help)
COMMANDS: dict[str, ModuleType] = {
    "info": info,
    "bench": bench,
    "model": model,
    "train": train,
    "compare": compare,
    "plot": plot,
    "experiments": experiments,
}


# before MPI_Abort: time for the launcher to forward what this rank just wrote to stderr
# (without it, mpiexec sometimes kills the job before the message reaches the terminal)
ABORT_GRACE_S = 0.5


def _world_rank() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_rank()


class RankZeroParser(argparse.ArgumentParser):
    """ArgumentParser that prints help and usage errors on rank 0 only."""

    def _print_message(self, message, file=None):  # noqa: D401 - argparse hook
        if message and _world_rank() == 0:
            super()._print_message(message, file)


def build_parser() -> argparse.ArgumentParser:
    parser = RankZeroParser(
        prog="python -m mpicomm",
        description="Compare gradient-synchronisation strategies over MPI. "
        "Run under mpiexec, e.g. `mpiexec -n 4 python -m mpicomm compare`.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command", parser_class=RankZeroParser)
    sub.required = True
    for name, module in COMMANDS.items():
        p = sub.add_parser(name, help=module.HELP, description=module.HELP, add_help=False)
        module.add_arguments(p)
        organise(p, name)  # six groups, a brief --help with examples, --help-all
        p.set_defaults(_command=name)
    return parser


def _peers() -> bool:
    """True when other MPI ranks exist that could wait on this one."""
    try:
        from mpi4py import MPI
    except ImportError:
        return False
    return MPI.Is_initialized() and not MPI.Is_finalized() and MPI.COMM_WORLD.Get_size() > 1


def _abort(code: int) -> None:
    """End this process with ``code``: ``MPI_Abort`` when peers exist, else ``_exit``;
    never returns.

    Some MPICH builds return from ``MPI_Abort`` on the calling rank (seen with the
    singleton and hydra); ``os._exit`` after it makes sure no line of the caller
    runs after the failure (issue 19 item 3).
    """
    if _peers():
        abort_job(code, ABORT_GRACE_S)  # flushes; the host's MPI segments unlinked first
    _exit(code)  # a singleton's segments unlinked there


def guarded(fn, *args, mpi: bool = True, **kwargs):
    """Call ``fn``; if it raises on this rank, print the error and end the job (never returns).

    A ``ConfigError`` (bad strategy or option: the same on every rank, raised
    before any message) is printed as one line by rank 0, and the job ends with
    exit code 2. Anything else prints ``mpicomm: rank R: <traceback>`` and ends
    the job with exit code 1. With peers, ``MPI_Abort`` ends every rank: a rank
    that merely exited would leave the others waiting in their next collective.
    ``mpi=False`` (a command that sends no message), a job of one rank, or a
    ``ConfigError`` every rank raised alike (``on_every_rank``: ``make_reducer``'s refusals,
    agreed collectively) exits without ``MPI_Abort``, so a clean error is not followed by
    MPI's abort banner.
    """
    try:
        result = fn(*args, **kwargs)
        sys.stdout.flush()  # a closed pipe raises here, not at exit (block-buffered stdout)
        return result
    except SystemExit:
        raise
    except ConfigError as exc:
        peers = mpi and _peers()
        rank = _world_rank() if _peers() else 0
        sys.stdout.flush()
        if peers and exc.on_every_rank:  # agreed (make_reducer): all leave, no MPI_Abort
            if rank == 0:
                sys.stderr.write(f"mpicomm: error: {exc}\n")
            sys.stderr.flush()
            raise SystemExit(2) from None
        if not peers and _peers():  # a command without messages: rank 0 says it for all,
            if rank == 0:  # and every rank leaves through MPI_Finalize, whose PMI barrier keeps
                sys.stderr.write(f"mpicomm: error: {exc}\n")  # a rank from leaving first
            _finalize_exit(2)  # (a 1 s head start lost that race under load: exit 9, SIGKILL)
        if rank != 0:
            # rank 0 raised the same error and aborts first; print only if it did not
            time.sleep(1.0)
        sys.stderr.write(f"mpicomm: error: {exc}\n" if rank == 0 else
                         f"mpicomm: rank {rank}: error: {exc}\n")
        _abort(2) if peers else _exit(2)
    except BrokenPipeError:  # stdout closed early (`| head`): end quietly, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        _abort(1) if mpi and _peers() else _exit(1)
    except BaseException as exc:  # noqa: BLE001 - any failure must end the job
        peers = mpi and _peers()
        rank = _world_rank() if peers else 0
        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        sys.stdout.flush()
        sys.stderr.write(
            "".join(f"mpicomm: rank {rank}: {line}\n" for line in text.rstrip().splitlines())
        )
        sys.stderr.write(f"mpicomm: rank {rank}: {type(exc).__name__}: {exc} -- aborting job\n")
        _abort(1) if peers else _exit(1)


def _finalize_exit(code: int) -> None:
    """Peers but no messages: flush, ``MPI_Finalize`` (Hydra ends a job with SIGKILL, exit 9,
    when a rank that initialised MPI leaves without it), exit ``code``; never returns."""
    sys.stdout.flush()
    sys.stderr.flush()
    from mpi4py import MPI

    MPI.Finalize()
    os._exit(code)


def _exit(code: int) -> None:
    """No peers: flush and exit with ``code`` (no ``MPI_Abort``, no banner); never returns.
    A singleton that initialised MPI unlinks its segments first (``os._exit`` skips the
    MPI_Finalize that would); with peers (a command without messages) they keep theirs."""
    sys.stdout.flush()
    sys.stderr.flush()
    if not _peers():
        unlink_mapped()
    os._exit(code)


VIRTUAL_ON_GPU = ("--device gpu under the virtual clock: it charges compute as this thread's CPU "
                  "time, which does not see GPU kernels; use --clock wall on a GPU node "
                  "(docs/virtual_clock.md)")


def _run(module, args: argparse.Namespace):
    """Check every output path the command will write (one line, exit 2, before any work:
    results are never lost at the end) and the stall inspector's environment
    (``MPICOMM_STALL_WARN_S``/``_ABORT_S``), install the clock the flags ask for (``--clock``,
    train/compare/bench/model), then run."""
    problem = check_outputs(args, ("json", "csv", "trace", "checkpoint"))  # + the inputs
    if problem is not None:
        raise ConfigError(problem)
    if getattr(module, "USES_MPI", False):  # the stall inspector's environment, read per rank
        from mpicomm.p2p import stall

        try:
            stall.settings()
        except ValueError as exc:  # before: a traceback on every rank at reducer creation
            raise ConfigError(str(exc)) from None
    if getattr(module, "uses_mpi", lambda a: module.USES_MPI)(args):
        _same_inputs(args)  # collective: one small Allgather
    if hasattr(args, "compute_scale") and not getattr(args, "predict", False):
        failure = None
        try:
            _apply_profile(args)
            _install_clock(args)  # no message
        except ConfigError as exc:
            failure = exc
        if not getattr(module, "USES_MPI", False):
            if failure is not None:
                raise failure
        else:  # one line and exit 2 on every rank, never MPI_Abort and its banner
            from mpicomm.train import metrics

            bad = metrics.first_failure(metrics.world(), failure is not None)
            if bad < 0:
                try:
                    _check_links_reach(args)  # collective: the same answer on every rank
                except ConfigError as exc:
                    failure, bad = exc, 0
            if bad >= 0:
                return _refused(args, failure, bad)
        _print_cluster(args)
    return module.run(args)


def _same_inputs(args: argparse.Namespace) -> None:
    """The files the command reads by path (``--data``, ``--links-from``, ``--resume``'s
    checkpoint) hold the same bytes on every rank, or ``ConfigError`` on every rank naming
    the ranks that differ (``core.inputs.check_same_everywhere``)."""
    from mpi4py import MPI

    from mpicomm.core.inputs import check_same_everywhere

    links = getattr(args, "links_from", None)
    if links == "this-machine":  # the calibration it stands for
        from mpicomm.costmodel.calibrate import HOST_PARAMS_PATHS

        links = next((p for p in HOST_PARAMS_PATHS if os.path.exists(p)), None)
    resume = getattr(args, "resume", False) and getattr(args, "checkpoint", None)
    try:
        check_same_everywhere(MPI.COMM_WORLD, {"data": getattr(args, "data", None),
                                               "links_from": links,
                                               "checkpoint": resume or None})
    except ConfigError as exc:
        exc.on_every_rank = True  # every rank compared the same digests
        raise


def _apply_profile(args: argparse.Namespace) -> None:
    """``--profile NAME``: set each cluster flag the command line left unset to the profile's
    (``costmodel.profiles.profile_fields``; an explicit flag overrides its field only); the
    default ring's channels only where a ring runs. Refused under ``--clock wall``."""
    name = getattr(args, "profile", None)
    if name is None:
        return
    from mpicomm.core.options import MAX_CHANNELS
    from mpicomm.costmodel.profiles import profile_fields

    fields = profile_fields(name)  # an unknown name: one line, before any message
    if getattr(args, "clock", None) == "wall":
        raise ConfigError(f"--profile {name}: a modelled cluster needs the virtual clock; drop "
                          "--clock wall or --profile")
    if hasattr(args, "clock") and args.clock is None:
        args.clock = "virtual"  # a profile is a modelled cluster
    given = getattr(args, GIVEN, frozenset())
    names = getattr(args, "strategy", None) or getattr(args, "strategies", None)
    ring = names is None or "ring" in str(names).split(",")
    for key, value in fields.items():
        if key == "channels":
            if key in given or value <= 1 or not ring or getattr(args, "compress", "none") != \
                    "none":
                continue
            value = min(value, MAX_CHANNELS)
        elif not hasattr(args, key) and key == "accelerator":
            continue  # a command without the device model's flag
        elif getattr(args, key, None) is not None:
            continue
        elif key in ("ranks_per_node", "nics_per_node"):  # a job smaller than one node of it:
            value = min(value, _world_size())  # its ranks share one partial node
        setattr(args, key, value)


def _world_size() -> int:
    from mpi4py import MPI

    return MPI.COMM_WORLD.Get_size()


def _print_cluster(args: argparse.Namespace) -> None:
    """A virtual run's first line (rank 0): the cluster it models, as ``model --predict``
    prints it (``Cluster.line``)."""
    from mpicomm.core import clock

    if clock.virtual() is None or _world_rank() != 0:
        return
    from mpi4py import MPI

    from mpicomm.costmodel.profiles import cluster_of

    print(f"# {cluster_of(args, MPI.COMM_WORLD.Get_size()).line()}", flush=True)


def _install_clock(args: argparse.Namespace) -> None:
    """Install the clock of ``--clock`` and its flags (``p2p.install_clock``; no message)."""
    from mpicomm.p2p import install_clock  # (model --predict runs no clock: it refuses flags)

    name = install_clock(getattr(args, "clock", None), args.compute_scale,
                               getattr(args, "ranks_per_node", None), args.inter_link,
                               args.intra_link, getattr(args, "links_from", None),
                               getattr(args, "nics_per_node", None),
                               getattr(args, "flop_rate", None))
    if name == "virtual" and getattr(args, "device", "cpu") == "gpu":
        raise ConfigError(VIRTUAL_ON_GPU)
    from mpicomm.costmodel import device

    _measured_host(args, name)
    device.install(getattr(args, "accelerator", None), getattr(args, "precision", "fp32"),
                   getattr(args, "flop_rate", None))  # refused on the wall clock
    if name == "virtual" and getattr(args, "accelerator", None) == device.HOST and \
            getattr(args, "links_from", None):
        from mpicomm.core import clock
        from mpicomm.costmodel.calibrate import host_links

        clock.virtual().cpu_share = host_links(args.links_from)[1].cpu_share or 1.0


def _measured_host(args: argparse.Namespace, clock_name: str) -> None:
    """``--links-from`` (this host's measured links) without ``--accelerator``: the compute is
    this host's too (``host``: its CPU time, times the calibration's ``cpu_share``), as a
    profile brings its device; not with ``--model``, whose layers only a device models."""
    if clock_name == "virtual" and getattr(args, "links_from", None) and \
            hasattr(args, "accelerator") and args.accelerator is None and \
            not getattr(args, "model", None):
        from mpicomm.costmodel.device import HOST

        args.accelerator = HOST


def _refused(args: argparse.Namespace, exc: ConfigError | None, bad: int) -> int:
    """A clock flag refused (``bad``: the lowest rank that refused it, which says it in one
    line; ranks started with other flags or environment may disagree): every rank returns 2,
    without ``MPI_Abort`` and its banner."""
    from mpi4py import MPI

    if MPI.COMM_WORLD.Get_rank() == bad and exc is not None:
        where = f" (rank {bad} only)" if bad else ""
        sys.stdout.flush()
        sys.stderr.write(f"mpicomm {args._command}: error: {exc}{where}\n")
        sys.stderr.flush()
    return 2


NODE_COMMANDS = ("train", "compare", "bench")  # one job size: a node flag must fit it


def _check_links_reach(args: argparse.Namespace) -> None:
    """A node or link flag no message of the job's layout would use: ``ConfigError`` on every
    rank, alike in train, compare and bench (``--ranks-per-node`` above the job's size; a
    link or ``--nics-per-node`` that ``unreached_link`` finds unused). Without
    ``--ranks-per-node`` the layout is MPI's (collective: one shared-memory split and one
    small Allgather); ``model`` sweeps sizes under a fixed node size, so only its MPI layout
    is checked."""
    from mpi4py import MPI

    from mpicomm.core.topology import node_map, resolve_ranks_per_node, unreached_link

    k = resolve_ranks_per_node(getattr(args, "ranks_per_node", None))
    size, fixed = MPI.COMM_WORLD.Get_size(), args._command in NODE_COMMANDS
    profiled = getattr(args, "profile", None) is not None  # a modelled cluster's node size
    given = getattr(args, GIVEN, frozenset())  # --profile's own fields are not the user's flags
    def mine(name: str):  # noqa: E306 - the value of a flag the user gave, else None
        return getattr(args, name, None) if getattr(args, "profile", None) is None or \
            name in given else None
    if k is not None and fixed and k > size and mine("ranks_per_node") is not None:
        raise ConfigError(f"--ranks-per-node {k}: this job has {size} rank(s), so they all share "
                          f"one node, as without the flag; give --ranks-per-node {size} or less")
    nics, inter, intra = mine("nics_per_node"), mine("inter_link"), mine("intra_link")
    if inter is None and intra is None and nics is None:
        return
    if k is not None and (not fixed or profiled):  # a profile's nodes: the cluster's own
        return
    node_of = node_map(MPI.COMM_WORLD) if k is None else [r // k for r in range(size)]
    why = unreached_link(node_of, inter, intra, nics)
    if why is not None:
        raise ConfigError(why)


def main(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen command on every rank."""
    parser = build_parser()
    args = parser.parse_args(argv)
    setattr(args, GIVEN, given_dests(parser, argv))  # a flag given at its default counts
    module = COMMANDS[args._command]
    uses_mpi = getattr(module, "uses_mpi", lambda a: module.USES_MPI)(args)
    rc = guarded(_run, module, args, mpi=uses_mpi)
    release_singleton()  # Open MPI leaves a launcher-less run's segment otherwise
    return int(rc or 0)
