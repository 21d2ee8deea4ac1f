"""Command-line flags generated from a frozen dataclass: one record, every command's flags.

Each field is one line ``name: type = default  # help``, the help continued on
comment-only lines below it; fields inherited from a base dataclass (the reducer
options, ``core.options.ReducerFields``) take their help from the base's source.
``add_flags`` reads the type and default from the dataclass and the help from the
comments:

- ``--name-with-dashes``; ``bool = False`` gives ``--name``; ``bool = True`` or
  ``bool | None`` gives ``--name/--no-name``;
- ``tuple[str, ...]`` is a repeatable flag, other ``tuple`` fields take comma lists;
- a field's ``metadata["flag_type"]`` parses its text (``parse_bytes`` for sizes).

Values are checked on creation (``ConfigError``), never by argparse, so a bad value
gives the same clear message from the command line and from Python; ``check_types``
refuses a value of the wrong type (``ConfigTypeError``) before the field checks run.
"""

from __future__ import annotations

import argparse
import ast
import copy
import dataclasses
import inspect
import io
import textwrap
import tokenize
import types
import typing
from typing import Any

from mpicomm.core.errors import ConfigTypeError
from mpicomm.core.helptext import DefaultsFormatter

__all__ = ["field_help", "add_flags", "check_types", "flag_name", "base_type", "GIVEN",
           "given_dests", "is_given", "add_cluster_flags", "CLUSTER_FLAGS"]

GIVEN = "_given"  # attribute of parsed flags: the dests set (the checks take it as given=)


def flag_name(name: str) -> str:
    """``crossover_bytes`` -> ``--crossover-bytes``."""
    return "--" + name.replace("_", "-")


def _own_help(cls: type) -> dict[str, str]:
    """The help of the fields written in ``cls``'s own source (not its bases')."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (frozen app): flags without help
        return {}
    body = next(n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)).body
    owner = {node.lineno: node.target.id for node in body
             if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    code_lines = {tok.start[0] for tok in tokens if tok.type not in (
        tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT)}
    comments = {tok.start[0]: tok.string.lstrip("#").strip() for tok in tokens
                if tok.type == tokenize.COMMENT}
    helps: dict[str, list[str]] = {}
    current = None
    for line in range(1, len(source.splitlines()) + 1):
        if line in owner:  # a field's line: its help starts here
            current = owner[line]
        elif line in code_lines:  # other code ends the field's help
            current = None
        if current is not None and line in comments:
            helps.setdefault(current, []).append(comments[line])
    return {name: " ".join(parts) for name, parts in helps.items()}


def field_help(cls: type) -> dict[str, str]:
    """Return each field's help: its trailing comment, from ``cls`` or the base that wrote it."""
    helps: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            helps.update(_own_help(klass))
    return helps


def base_type(hint: Any) -> tuple[Any, bool]:
    """Return (the first type of ``hint`` without None, whether None is allowed)."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(hint))
    return hint, False


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


def _accepts(hint: Any, value: Any) -> bool | None:
    """Whether ``value`` fits ``hint``; None when the hint is not a plain scalar (not checked)."""
    args = typing.get_args(hint) if (isinstance(hint, types.UnionType)
                                     or typing.get_origin(hint) is typing.Union) else (hint,)
    if not all(isinstance(a, type) and typing.get_origin(a) is None for a in args):
        return None  # tuple[int, ...] and the like: parsed by the config's own checks
    if value is None:
        return type(None) in args
    if isinstance(value, bool):
        return bool in args
    if isinstance(value, int) and float in args:
        return True
    return isinstance(value, tuple(a for a in args if a is not bool))


def check_types(obj: Any) -> None:
    """Raise ``ConfigTypeError`` for the first field of ``obj`` whose value has the wrong type."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, str) and "flag_type" in f.metadata:  # parsed later ("1M")
            continue
        if _accepts(hints[f.name], value) is False:
            raise ConfigTypeError(f"{flag_name(f.name)} must be {_spell(hints[f.name])}, "
                                  f"got {value!r}")


def _spell(hint: Any) -> str:
    union = isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union
    names = [getattr(a, "__name__", str(a)) for a in (typing.get_args(hint) if union else (hint,))]
    return " or ".join("None" if n == "NoneType" else n for n in names)


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


def is_given(flags: Any, name: str, differs: bool) -> bool:
    """True when flag ``name`` takes a value this run asked for: ``differs`` (its value is
    not the default) or the command line set it (parsed ``flags``' ``GIVEN``, from
    ``given_dests``; anything else has none, and its values alone tell)."""
    return differs or name in getattr(flags, GIVEN, ())


# the flags that describe the modelled cluster, one field each of ``costmodel.Cluster``
# (``costmodel.profiles.build_cluster`` turns them into one): --profile sets them all, an
# explicit flag overrides its own field only
CLUSTER_FLAGS = ("profile", "inter_link", "intra_link", "ranks_per_node", "nics_per_node",
                 "channels", "links_from", "accelerator")  # accelerator: the device model's


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
