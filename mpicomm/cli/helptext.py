"""``--help`` for every command: options in six groups, a screenful, ending with examples.

- ``DefaultsFormatter`` shows every default exactly once (``--help-all``).
- ``organise(parser, command)`` (called by ``cli.main`` for each command once its flags are
  added) files every option under one of ``GROUPS`` (run, model, cluster, strategy, output,
  observability) by its ``dest``, shortens the usage line, and adds ``-h/--help``: one line
  per option in ``PRIMARY`` (its help's first clause), the rest named together on ``also:``
  lines, then the command's ``EXAMPLES``; ``--help-all`` prints every option with its whole
  help, grouped alike. So ``compare --help`` fits a terminal (80 lines) and nothing is hidden.

A flag added anywhere (``cli.flags.add_flags``, a command's own ``add_argument``) lands in
its group by ``dest`` here; one not listed falls under ``run`` (tests/cli/test_help.py lists the
flags of train, compare, bench and model that no group names, so a new flag gets its group).
"""

from __future__ import annotations

import argparse
import sys
import textwrap

__all__ = ["DefaultsFormatter", "GROUPS", "PRIMARY", "EXAMPLES", "organise", "brief_help",
           "group_of", "HELP_WIDTH"]

HELP_WIDTH = 80  # --help's lines; --help-all wraps at the terminal's width as argparse does
FEW = 16  # a command with at most this many options lists every one in --help

# group -> (what it holds, the dests filed under it)
GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "run": ("what runs, how long, how often", (
        "strategy", "strategies", "layouts", "repeats", "solo_baseline", "baseline", "steps",
        "batch_size", "seed", "device", "minbytes", "maxbytes", "stepfactor", "iters",
        "warmup_iters", "rounds", "check", "datatype", "op", "blas_threads", "thread_level",
        "straggler", "jitter")),
    "model": ("the model trained, or the cost model predicted", (
        "layers", "data", "dtype", "lr", "momentum", "weight_decay", "scale_lr", "warmup_steps",
        "train_samples", "test_samples", "holdout", "eval_samples", "predict", "ranks", "table",
        "compute_ms", "params", "calibrate", "model", "single_rate", "fold", "reducers")),
    "cluster": ("the machine modelled or emulated, and its clock", (
        "profile", "clock", "ranks_per_node", "nics_per_node", "inter_link", "intra_link",
        "channels", "accelerator", "precision", "flop_rate", "compute_scale", "links_from",
        "gamma_rate")),
    "strategy": ("how gradients are synchronised", (
        "variant", "servers", "dedicated", "validate", "cuda_aware", "crossover_bytes",
        "compress", "bucket_mb", "overlap", "overlap_forward", "accumulate", "ps_mode",
        "staleness", "ps_momentum", "zero_stage", "pipeline_stages", "micro_batches",
        "schedule", "tensor_parallel", "no_overlap", "ps_placement", "ps_servers_on",
        "ps_node_reduce")),
    "output": ("what is printed and written", (
        "json", "csv", "wide", "legend", "explain", "log_every", "checkpoint",
        "checkpoint_every", "resume", "help", "help_all")),
    "observability": ("traces and timelines", ("trace", "trace_steps", "nvtx", "tensorboard")),
}

# the options --help gives a line of their own; the others are named on their group's "also:"
PRIMARY = frozenset({
    "strategy", "strategies", "layouts", "repeats", "steps", "batch_size", "minbytes",
    "maxbytes", "stepfactor", "iters", "rounds", "predict", "ranks", "table", "layers", "data",
    "lr", "profile", "clock", "ranks_per_node", "nics_per_node", "inter_link", "intra_link",
    "channels", "accelerator", "precision", "compress", "bucket_mb", "overlap", "variant",
    "servers", "ps_mode", "json", "csv", "wide", "legend", "explain", "trace", "tensorboard",
    "help_all",
})

# command -> its examples, from an activated venv (tests/cli/test_help.py parses each)
EXAMPLES: dict[str, tuple[str, ...]] = {
    "compare": (
        "mpiexec -n 4 python -m mpicomm compare",
        "mpiexec -n 8 python -m mpicomm compare --profile dgx-h100-ib400",
        "mpiexec -n 4 python -m mpicomm compare --strategies ring,ps --compress fp16",
        "mpiexec -n 4 python -m mpicomm compare --layouts dp,zero,pp2,tp2 --steps 50",
        "mpiexec -n 2 python -m mpicomm compare --repeats 5 --legend --json c.json",
    ),
    "train": (
        "mpiexec -n 4 python -m mpicomm train --strategy ring",
        "mpiexec -n 4 python -m mpicomm train --strategy ps --ps-mode async",
        "mpiexec -n 4 python -m mpicomm train --strategy ring --inter-link 5us,1GB/s",
        "mpiexec -n 8 python -m mpicomm train --profile dgx-h100-ib400 --trace t.json",
    ),
    "bench": (
        "mpiexec -n 2 python -m mpicomm bench -b 8 -e 128M -f 2",
        "mpiexec -n 4 python -m mpicomm bench --strategies native,ring --rounds 3",
        "mpiexec -n 8 python -m mpicomm bench --profile dgx-h100-ib400 -b 1MiB -e 1GiB",
        "mpiexec -n 2 python -m mpicomm bench -b 1MB -e 100MB -f 10 --json b.json",
    ),
    "model": (
        "python -m mpicomm model --predict --profile dgx-h100-ib400",
        "python -m mpicomm model --predict --ranks 8,1024 --table",
        "mpiexec -n 4 python -m mpicomm model -b 4K -e 16M -f 4",
        "mpiexec -n 2 python -m mpicomm model --strategies ring -e 64M --json m.json",
    ),
}


class DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Append ``(default: X)`` unless the help already says its default, or there is none.

    On/off switches (default off) and options without a default (None) get no
    suffix: "(default: None)" tells nothing, and a help text that explains its
    default ("default: ask MPI") must not get a second one.
    """

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.nargs == 0 or action.default is None or action.default is argparse.SUPPRESS
                or "default" in text or "%(default)" in text):
            return text
        return super()._get_help_string(action)


def group_of(dest: str) -> str:
    """The group that holds option ``dest`` (``run`` when no group names it)."""
    return next((g for g, (_, dests) in GROUPS.items() if dest in dests), "run")


def _examples(command: str) -> str:
    lines = EXAMPLES.get(command, ())
    return "examples:\n" + "".join(f"  {ex}\n" for ex in lines) if lines else ""


class _HelpAction(argparse.Action):
    """``-h``/``--help`` (brief) and ``--help-all`` (every option's whole help)."""

    def __init__(self, option_strings, dest, command: str = "", full: bool = False, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)
        self.command, self.full = command, full

    def __call__(self, parser, namespace, values, option_string=None):
        text = (parser.format_help() + "\n" + _examples(self.command) if self.full
                else brief_help(parser, self.command))
        parser._print_message(text, sys.stdout)  # a RankZeroParser prints on rank 0 only
        parser.exit()


def organise(p: argparse.ArgumentParser, command: str) -> None:
    """File ``p``'s options under ``GROUPS``, shorten its usage, add ``-h``/``--help-all``.

    ``p`` must have been created with ``add_help=False``."""
    p.add_argument("-h", "--help", action=_HelpAction, command=command,
                   help="this summary: the main options of each group, then examples")
    p.add_argument("--help-all", action=_HelpAction, command=command, full=True,
                   help="every option with its whole help and default")
    p.usage = "%(prog)s [options]   (every option: --help-all)"
    groups = {name: p.add_argument_group(f"{name} ({what})") for name, (what, _) in GROUPS.items()}
    for action in list(p._actions):
        if not action.option_strings:
            continue
        for old in p._action_groups:
            if action in old._group_actions and old not in groups.values():
                old._group_actions.remove(action)
        target = groups[group_of(action.dest)]
        if action not in target._group_actions:
            target._group_actions.append(action)
    for name, group in groups.items():  # in the order GROUPS lists them (--profile first)
        order = GROUPS[name][1]
        group._group_actions.sort(key=lambda a: order.index(a.dest) if a.dest in order
                                  else len(order))
    p._action_groups[:] = [g for g in p._action_groups if g._group_actions]


def _invocation(action: argparse.Action) -> str:
    """``--steps N``, ``--overlap/--no-overlap``, ``-b, --minbytes N``, ``paths``."""
    if not action.option_strings:
        return action.metavar or action.dest
    names = "/".join(o for o in action.option_strings) if isinstance(
        action, argparse.BooleanOptionalAction) else ", ".join(action.option_strings)
    if action.nargs == 0:
        return names
    short = {int: "N", float: "X"}.get(action.type, "S")  # the whole metavar: --help-all
    if getattr(action.type, "__name__", "") == "parse_bytes":
        short = "SIZE"
    return f"{names} {short if action.metavar in (None, action.dest.upper()) else action.metavar}"


def _first_clause(text: str | None, room: int) -> str:
    """The help's first clause (up to "; "), cut at a word to ``room`` characters."""
    text = " ".join((text or "").replace("%%", "%").split()).split("; ")[0]
    if text.count("(") > text.count(")"):  # an aside cut by "; ": leave it out
        text = text.rsplit(" (", 1)[0]
    if len(text) <= room:
        return text
    return text[: room - 3].rsplit(" ", 1)[0].rstrip(",:(") + "..."


def _name(action: argparse.Action) -> str:
    if not action.option_strings:
        return action.dest
    return action.option_strings[0 if isinstance(action, argparse.BooleanOptionalAction) else -1]


def brief_help(p: argparse.ArgumentParser, command: str) -> str:
    """The ``--help`` text: usage, the description, each group's main options, examples."""
    out = [p.format_usage().rstrip(), ""]
    if p.description:
        out += textwrap.wrap(p.description, HELP_WIDTH) + [""]
    every = len([a for g in p._action_groups for a in g._group_actions]) <= FEW
    for group in p._action_groups:
        main = [a for a in group._group_actions if every or a.dest in PRIMARY or a.dest == "help"
                or not a.option_strings]
        rest = [a for a in group._group_actions if a not in main]
        out.append(f"{group.title}:")
        for a in main:
            left = f"  {_invocation(a)}".ljust(24)
            out.append(f"{left}  {_first_clause(a.help, HELP_WIDTH - len(left) - 2)}")
        if rest:
            out += textwrap.wrap("also: " + " ".join(map(_name, rest)), HELP_WIDTH,
                                 initial_indent="  ", subsequent_indent="        ",
                                 break_on_hyphens=False)
        out.append("")
    return "\n".join(out) + "\n" + _examples(command)
