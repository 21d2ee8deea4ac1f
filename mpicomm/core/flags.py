"""A frozen dataclass as a set of flags, without argparse: each field's help and type.

Each field is one line ``name: type = default  # help``, the help continued on
comment-only lines below it; fields inherited from a base dataclass (the reducer
options, ``core.options.ReducerFields``) take their help from the base's source
(``field_help``). ``cli.flags.add_flags`` turns a record into a command's flags.

Values are checked on creation (``ConfigError``), never by argparse, so a bad value
gives the same clear message from the command line and from Python; ``check_types``
refuses a value of the wrong type (``ConfigTypeError``) before the field checks run.
``GIVEN`` names the attribute of parsed flags holding the flags the command line typed
(``cli.flags.given_dests``); ``is_given`` reads it.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import textwrap
import tokenize
import types
import typing
from typing import Any

from mpicomm.core.errors import ConfigTypeError

__all__ = ["field_help", "check_types", "flag_name", "base_type", "GIVEN", "is_given",
           "CLUSTER_FLAGS"]

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
