"""Command-line flags generated from a frozen dataclass: one record, every command's flags.

``add_flags`` reads each field's type and default from the dataclass and its help from
the trailing comment (``core.flags.field_help``):

- ``--name-with-dashes``; ``bool = False`` gives ``--name``; ``bool = True`` or
  ``bool | None`` gives ``--name/--no-name``;
- ``tuple[str, ...]`` is a repeatable flag, other ``tuple`` fields take comma lists;
- a field's ``metadata["flag_type"]`` parses its text (``parse_bytes`` for sizes).

Values are checked by the record on creation (``ConfigError``), never by argparse, so a
bad value gives the same clear message from the command line and from Python.
``given_dests`` tells which flags the command line typed; ``add_cluster_flags`` is the
``--profile`` group every command shares.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import typing

from mpicomm.cli.helptext import DefaultsFormatter
from mpicomm.core.flags import base_type, field_help, flag_name

__all__ = ["add_flags", "given_dests", "add_cluster_flags"]


def add_flags(p: argparse.ArgumentParser, cls: type, *, skip: tuple[str, ...] = (),
              only: tuple[str, ...] | None = None, defaults: dict | None = None,
              notes: dict | None = None) -> None:
    """Add one flag per field of dataclass ``cls`` to ``p`` (defaults, types and help from it).

    Fields written in ``cls`` itself come first, then the inherited ones. ``skip``
    leaves fields out, ``only`` keeps just those, ``defaults`` replaces defaults,
    ``notes`` appends a command's own words to a field's help.
    """
    p.formatter_class = DefaultsFormatter
    hints = typing.get_type_hints(cls)
    helps = field_help(cls)
    own = set(cls.__dict__.get("__annotations__", {}))
    fields = sorted(dataclasses.fields(cls), key=lambda f: f.name not in own)
    for f in fields:
        if f.name in skip or (only is not None and f.name not in only):
            continue
        default = (defaults or {}).get(f.name, f.default)
        kind, optional = base_type(hints[f.name])
        help_text = " ".join(filter(None, (helps.get(f.name, ""), (notes or {}).get(f.name))))
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        flag = flag_name(f.name)
        if kind is bool:
            action = "store_true" if default is False and not optional else \
                argparse.BooleanOptionalAction
            p.add_argument(flag, action=action, default=default, help=help_text)
        elif kind == tuple[str, ...]:  # repeatable flag, parsed by the config
            p.add_argument(flag, action="append", default=None, help=help_text)
        elif typing.get_origin(kind) is tuple:  # comma list, parsed by the config
            p.add_argument(flag, default=",".join(map(str, default)), help=help_text)
        else:
            p.add_argument(flag, type=f.metadata.get("flag_type", kind), default=default,
                           help=help_text, metavar=f.name.upper() if optional else None)


def given_dests(parser: argparse.ArgumentParser, argv: list[str] | None) -> frozenset[str]:
    """The dests that ``argv`` sets on the command line, whatever their value: a flag given
    at its default value counts (``--bucket-mb 25`` under ``--ps-mode`` is as ineffective as
    ``--bucket-mb 24``, but a check comparing values with the default cannot see it).

    ``argv`` is parsed again by a copy of ``parser`` whose every default, in every
    subcommand, is ``SUPPRESS``: only what the command line set stays in the namespace."""
    quiet = copy.deepcopy(parser)
    _suppress_defaults(quiet)
    ns, _ = quiet.parse_known_args(argv)
    return frozenset(k for k in vars(ns) if not k.startswith("_") and k != "command")


def _suppress_defaults(p: argparse.ArgumentParser) -> None:
    p._defaults.clear()  # set_defaults(...): a subcommand's own
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _suppress_defaults(sub)
        elif action.dest != "help":
            action.default = argparse.SUPPRESS


def add_cluster_flags(p: argparse.ArgumentParser) -> None:
    """The cluster-flag group every command's parser calls (train, compare, bench, model):
    ``--profile NAME``, beside the link, node and NIC flags the reducer options give
    (``ReducerFields``: ``--inter-link``, ``--intra-link``, ``--ranks-per-node``,
    ``--nics-per-node``, ``--channels``, ``--links-from``). Adding it twice adds it once."""
    if "--profile" in p._option_string_actions:
        return
    g = p.add_argument_group("cluster (the modelled cluster; each flag overrides its field of "
                             "--profile; the run prints the resulting cluster line)")
    g.add_argument("--profile", default=None, metavar="NAME",
                   help="a named cluster (links with their sources, ranks and NICs per node; "
                        "e.g. dgx-h100-ib400; an unknown name lists them; this-machine: the "
                        "links measured here); implies the virtual clock")
