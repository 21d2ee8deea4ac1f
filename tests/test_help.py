"""--help of every command: six groups, a screenful (80 lines of 80 columns), examples that parse;
--help-all: every option in full. compare --help was 188 lines, one group, no example."""

import argparse
import contextlib
import io
import shlex
import subprocess
import sys

import pytest
from mpi_harness import ROOT

from mpicomm.cli.main import COMMANDS, build_parser
from mpicomm.core.helptext import EXAMPLES, GROUPS

BIG = ("compare", "train", "bench", "model")


def help_text(command: str, flag: str = "--help") -> str:
    """What ``python -m mpicomm COMMAND FLAG`` prints (the real parser, in this process)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, flag])
    assert done.value.code in (0, None)
    return out.getvalue()


@pytest.mark.slow
def test_help_from_the_command_line():
    done = subprocess.run([sys.executable, "-m", "mpicomm", "compare", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    assert done.stdout == help_text("compare")


def options(command: str) -> list[argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in sub.choices[command]._actions if a.option_strings]


@pytest.mark.parametrize("command", BIG)
def test_help_fits_a_terminal_grouped_with_examples(command):
    text = help_text(command)
    lines = text.rstrip("\n").splitlines()
    assert len(lines) <= 80 and max(map(len, lines)) <= 80, (len(lines), text)
    titles = [ln.split(" (")[0] for ln in lines if ln and not ln.startswith(" ") and
              ln.endswith("):")]
    assert titles == [g for g in GROUPS if g in titles]  # in the one order
    assert len(titles) == {"bench": 4, "model": 5}.get(command, 6)  # bench, model: no traces
    examples = lines[lines.index("examples:") + 1:]
    assert 3 <= len(examples) <= 5 and all(ex.startswith("  ") for ex in examples)
    words = text.replace("/", " ").replace(",", " ").split()
    missing = [a.option_strings[-1] for a in options(command)
               if not any(o in words for o in a.option_strings)]
    assert not missing, f"--help names neither spelling of {missing}"


@pytest.mark.parametrize("command", BIG)
def test_help_all_has_every_option_in_full(command):
    text = help_text(command, "--help-all")
    for action in options(command):
        assert any(o in text for o in action.option_strings), action.option_strings
    assert "(default: " in text and text.rstrip().splitlines()[-1].startswith("  ")


def test_every_example_parses_and_every_flag_has_a_group():
    parser = build_parser()
    for command, examples in EXAMPLES.items():
        assert command in COMMANDS
        for ex in examples:
            argv = shlex.split(ex.split("python -m mpicomm ", 1)[1])
            assert parser.parse_args(argv).command == command, ex
    named = {d for _, dests in GROUPS.values() for d in dests}
    loose = {(c, a.dest) for c in BIG for a in options(c) if a.dest not in named}
    assert not loose, f"flags with no group in mpicomm/core/helptext.py GROUPS: {loose}"
