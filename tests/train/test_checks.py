"""One ``check(cfg, ranks)`` that every command calls; commands in cli/, libraries without them."""

import ast

import pytest
from mpi_harness import ROOT

from mpicomm.train.checks import check
from mpicomm.train.config import ConfigError, TrainConfig


def _calls(path, name):
    tree = ast.parse(path.read_text())
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call)
            and getattr(n.func, "id", getattr(n.func, "attr", None)) == name]


def test_every_training_command_calls_the_one_check():
    for command in ("train", "compare"):
        assert _calls(ROOT / "mpicomm" / "cli" / f"{command}.py", "check"), command


def test_the_loop_neither_parses_flags_nor_prints_a_command_s_table():
    """``train.loop.run(args)`` was the command; it is ``cli/train.py`` now, and the
    config reads no world size (``TrainConfig.from_args`` read ``MPI.COMM_WORLD``'s; the
    flags become a record in ``cli/config.py`` now)."""
    for module in ("loop", "layouts", "config"):
        src = (ROOT / "mpicomm" / "train" / f"{module}.py").read_text()
        assert "def run(" not in src and (module == "loop" or "Get_size()" not in src), module
    assert not _calls(ROOT / "mpicomm" / "train" / "config.py", "print")


@pytest.mark.parametrize("flags, ranks, match", [
    (dict(straggler=("3:20",)), 2, "rank 3 is not in this job"),            # the job
    (dict(servers=2), 4, "--servers 2 has no effect with --strategy native"),  # its options
    (dict(strategy="ps", ps_mode="sync", bucket_mb=1.0), 4, "--bucket-mb has no effect"),  # ps
    (dict(strategy="zero", compress="fp16"), 4, "--compress is not supported with --strategy "
     "zero"),                                                                   # zero
    (dict(tensor_parallel=2, layers=(8, 8, 8, 4)), 3, "do not split"),       # parallel
])
def test_each_family_refuses_through_check(flags, ranks, match):
    with pytest.raises(ConfigError, match=match):
        check(TrainConfig(**flags), ranks)


def test_compare_runs_skip_what_only_one_run_can_refuse():
    cfg = TrainConfig(servers=2)
    check(cfg, 4, single_run=False)  # compare checks its strategies as one list


def test_no_function_over_60_lines_in_train_and_cli():
    """Functions readable in one screen (issue 31: five were longer)."""
    long = []
    for folder in ("train", "cli"):
        for path in sorted((ROOT / "mpicomm" / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef) and node.end_lineno - node.lineno >= 60:
                    long.append(f"{folder}/{path.name}:{node.name}")
    assert long == []


def test_no_library_below_cli_reads_argparse():
    """Issue 31: a run's settings are built in cli/ and handed down as records; ``train/`` read
    an argparse namespace (``TrainConfig.from_args``), ``bench/`` held the bench and model
    commands' flags and ``core/`` the flag generator and the help. What still knows argparse
    below cli/ is named here."""
    left = {"core/units.py",  # SizeError: a ValueError argparse prints as a usage error
            "testing/netns.py"}  # its own command (python -m mpicomm.testing.netns)
    readers = set()
    for folder in sorted(p for p in (ROOT / "mpicomm").iterdir() if p.is_dir()):
        if folder.name == "cli":
            continue
        for path in sorted(folder.glob("*.py")):
            tree = ast.parse(path.read_text())
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            if "argparse" in names:
                readers.add(f"{folder.name}/{path.name}")
    assert readers == left
