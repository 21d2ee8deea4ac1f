"""The training flags, both ways: ``TrainConfig``'s fields as flags, parsed flags as a record.

    add_train_flags(p)                     # train and compare: one flag per field
    cfg = train_config(args)               # the record, built and checked once
    check(cfg, ranks, given=given(args))   # the flags typed, at their defaults too

Only ``cli/`` reads argparse: ``train.config.TrainConfig`` is built from keyword values,
and the checks take the set of flags the command line gave (``given``), never a namespace.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from mpicomm.cli.flags import add_flags
from mpicomm.core import flags
from mpicomm.core.flags import GIVEN
from mpicomm.train.config import SINGLE_RUN_ONLY, TrainConfig, TrainFields, check_data_flags

__all__ = ["add_train_flags", "train_config", "given", "field_help", "QUICK_ENV",
           "QUICK_DEFAULTS", "flag_defaults", "MODEL_STEPS"]

QUICK_ENV = "MPICOMM_DOCS_QUICK"  # set to 1: train and compare default to QUICK_DEFAULTS
QUICK_DEFAULTS = {"steps": 20, "eval_samples": 512}  # ints; tests/test_docs_commands.py
# --model runs under the virtual clock with the device model: every step after the first is
# the same to the last digit, so a handful of steps tell what 300 would (the first is left out
# of the timing: ``train.summary.warm_steps``); typed --steps is kept
MODEL_STEPS = 6


def field_help(cls: type = TrainFields) -> dict[str, str]:
    """Return each field's help (its trailing comment; inherited fields from their base)."""
    return flags.field_help(cls)


def flag_defaults() -> dict[str, Any]:
    """Return the flag defaults that differ from the fields': ``QUICK_DEFAULTS`` under QUICK_ENV."""
    return dict(QUICK_DEFAULTS) if os.environ.get(QUICK_ENV, "") not in ("", "0") else {}


def add_train_flags(p: argparse.ArgumentParser, *, single_run: bool = True) -> None:
    """Add one flag per ``TrainFields`` field to ``p`` (defaults, types and help from it).

    The reducer options' flags come from the same record (``ReducerFields``).
    ``single_run=False`` (compare) leaves out ``SINGLE_RUN_ONLY``.
    """
    add_flags(p, TrainFields, skip=() if single_run else SINGLE_RUN_ONLY,
                    defaults=flag_defaults())  # MPICOMM_DOCS_QUICK: the docs test's short runs


def given(args: argparse.Namespace) -> frozenset[str]:
    """The flags the command line set, whatever their value (``cli.flags.given_dests``)."""
    return frozenset(getattr(args, GIVEN, frozenset()))


def train_config(args: argparse.Namespace, **overrides: Any) -> TrainConfig:
    """The record of parsed flags (flag names = field names), ``overrides`` replacing some.

    Each value is checked on creation; a flag of the data family given at its default
    value is refused as one given otherwise (``check_data_flags``). What cannot take effect
    in the job is the command's next call, ``train.checks.check(cfg, ranks, given=...)``.
    """
    names = {f.name for f in dataclasses.fields(TrainConfig)}
    values = {k: v for k, v in vars(args).items() if k in names}
    if values.get("model") and "steps" not in given(args):  # MODEL_STEPS
        values["steps"] = min(MODEL_STEPS, values.get("steps", MODEL_STEPS))
    cfg = TrainConfig(**{**values, **overrides})
    check_data_flags(cfg, given(args))
    return cfg
