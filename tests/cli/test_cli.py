"""The command line: one module per command, guarded() never returns, clean exits without MPI."""

import subprocess
import sys

import pytest
from mpi_harness import ROOT, run_mpi

AFTER = (
    "import os, sys\n"
    "from mpi4py import MPI\n"
    "from mpicomm.cli.main import guarded\n"
    "from mpicomm.core.errors import ConfigError\n"
    "rank = MPI.COMM_WORLD.Get_rank()\n"
    "def fail():\n"
    "    if rank == {bad}: raise {exc}('failing on purpose')\n"
    "    MPI.COMM_WORLD.Barrier()\n"
    "guarded(fail)\n"
    "open(os.path.join(sys.argv[1], f'after_{{rank}}'), 'w').close()\n"
)


@pytest.mark.parametrize("exc", ["ValueError", "ConfigError"])
def test_guarded_never_returns_on_the_failing_rank(tmp_path, exc):
    """issue 19 item 3: after MPI_Abort, code after guarded() ran on the failing rank."""
    res = run_mpi(2, ["-c", AFTER.format(bad=1, exc=exc), str(tmp_path)], timeout=60)
    assert not res.timed_out
    assert res.returncode != 0
    assert not (tmp_path / "after_1").exists(), "guarded() returned on the failing rank"


@pytest.mark.parametrize("exc,code", [("ValueError", 1), ("ConfigError", 2)])
def test_guarded_one_process_exits_with_its_code(tmp_path, exc, code):
    """Without mpiexec (one rank): the error, the exit code, nothing after it, no MPI_Abort."""
    done = subprocess.run([sys.executable, "-c", AFTER.format(bad=0, exc=exc), str(tmp_path)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stderr
    assert not (tmp_path / "after_0").exists()
    assert "failing on purpose" in done.stderr
    assert "MPI_Abort" not in done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["plot", "/nonexistent/x.json"],
    ["experiments", "--root", "/nonexistent/experiments"],
    ["model", "--predict", "--compute-ms", "-1"],
])
def test_non_mpi_commands_exit_2_without_abort(argv):
    """issue 19 item 7: plot, experiments, model --predict appended MPI's abort banner."""
    done = subprocess.run([sys.executable, "-m", "mpicomm", *argv], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    out = done.stdout + done.stderr
    if "matplotlib" in out and argv[0] in ("plot", "experiments"):
        pytest.skip("matplotlib missing: the error is the install hint")
    assert done.returncode == 2, out
    assert "mpicomm: error:" in done.stderr
    assert "Abort" not in out and "Traceback" not in out


def test_non_mpi_command_under_mpiexec_exits_2_without_abort():
    res = run_mpi(2, ["-m", "mpicomm", "model", "--predict", "--compute-ms", "-1"], timeout=60)
    assert not res.timed_out
    assert res.returncode == 2
    out = res.stdout + res.stderr
    assert "MPI_Abort" not in out and out.count("mpicomm: error:") == 1, out


def test_every_command_is_a_cli_module():
    """One module per command, imported normally (no import_module strings)."""
    import importlib

    from mpicomm.cli import COMMANDS

    assert set(COMMANDS) == {"info", "bench", "model", "train", "compare", "plot",
                               "experiments"}
    for name, module in COMMANDS.items():
        assert module is importlib.import_module(f"mpicomm.cli.{name}")
        assert module.HELP and callable(module.run) and callable(module.add_arguments)
    assert "import_module" not in (ROOT / "mpicomm" / "cli" / "main.py").read_text()


@pytest.mark.parametrize("bad", ["topk:2", "topk:0", "topk:x"])
def test_topk_ratio_out_of_range_names_the_ratio_not_the_codec(bad):
    """issue 19 item 7: `topk:2` was called an unknown codec; the ratio is what is wrong."""
    from mpicomm.core.errors import ConfigError
    from mpicomm.core.options import ReducerOptions

    with pytest.raises(ConfigError) as err:
        ReducerOptions(compress=bad)
    text = str(err.value)
    assert "unknown" not in text and "RATIO" in text and "must be 0 < RATIO <= 1" in text


def test_reducer_options_are_one_record_for_train_compare_and_bench():
    """issue 17 item 3: train lacked --crossover-bytes and --cuda-aware; three spellings drifted."""
    import dataclasses

    from mpicomm.cli.config import train_config
    from mpicomm.cli.main import build_parser
    from mpicomm.core.errors import ConfigError
    from mpicomm.core.options import ReducerFields, ReducerOptions
    from mpicomm.train.config import TrainConfig, check_world

    names = [f.name for f in dataclasses.fields(ReducerFields)]
    assert [f.name for f in dataclasses.fields(ReducerOptions)] == names
    assert set(names) <= {f.name for f in dataclasses.fields(TrainConfig)}
    parser = build_parser()
    flags = ["--ranks-per-node", "2", "--variant", "leader", "--servers", "2", "--dedicated",
             "--no-validate", "--cuda-aware", "--crossover-bytes", "4K", "--inter-link",
             "20us,1GB/s", "--compress", "TopK:0.5"]
    want = {"ranks_per_node": 2, "variant": "leader", "servers": 2, "dedicated": True,
            "validate": False, "cuda_aware": True, "crossover_bytes": 4096,
            "inter_link": "20us,1GB/s", "compress": "TopK:0.5"}
    for command in ("train", "compare", "bench", "model"):
        args = parser.parse_args([command, *flags])
        assert {k: getattr(args, k) for k in want} == want, command
    on_cpu = [f for f in flags if f != "--cuda-aware"]  # CuPy buffers only: refused on the CPU
    with pytest.raises(ConfigError, match="--cuda-aware/--no-cuda-aware: how CuPy buffers"):
        check_world(train_config(parser.parse_args(["train", *flags])), 4)
    cfg = train_config(parser.parse_args(["train", *on_cpu]))
    check_world(cfg, 4)
    assert isinstance(cfg.reducer, ReducerOptions)   # held, checked and parsed once
    assert cfg.reducer.compress == "topk:0.5" and cfg.reducer.inter_link.bandwidth == 1e9
    opts = cfg.reducer_options()
    assert opts["crossover_bytes"] == 4096 and "cuda_aware" not in opts
    assert opts["inter_link"] is cfg.reducer.inter_link  # the parsed spec goes down
    assert parser.parse_args(["bench"]).validate is False  # bench checks results itself


@pytest.mark.parametrize("kwargs, message", [
    ({"servers": "2"}, "--servers must be int"),
    ({"cuda_aware": "yes"}, "--cuda-aware must be bool or None"),
    ({"lr": "0.1"}, "--lr must be float"),
    ({"crossover_bytes": -1}, "crossover_bytes must be an int >= 0"),
])
def test_train_config_refuses_wrong_types(kwargs, message):
    from mpicomm.core.errors import ConfigError
    from mpicomm.train.config import TrainConfig

    with pytest.raises(ConfigError, match=message):
        TrainConfig(**kwargs)


def test_train_config_refuses_unknown_names():
    from mpicomm.core.errors import ConfigTypeError
    from mpicomm.train.config import TrainConfig

    with pytest.raises(ConfigTypeError, match="unknown training option 'srevers'; valid: "):
        TrainConfig.from_dict({"srevers": 2})
    assert TrainConfig.from_dict({"servers": 2}).servers == 2


@pytest.mark.parametrize("argv", [
    ["bench", "-b", "4K", "-e", "4K", "--json", "/nonexistent/x.json"],
    ["compare", "--steps", "5", "--json", "/nonexistent/x.json"],
    ["bench", "-b", "4K", "-e", "4K", "--csv", "/nonexistent/x.csv"],
])
def test_every_command_checks_its_output_paths_first(argv):
    """issue 19 item 5: a bad output path ends the job at once (exit 2, one line), not after
    the run with its results lost."""
    res = run_mpi(2, ["-m", "mpicomm", *argv], timeout=60)
    assert not res.timed_out and res.returncode == 2, res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert out.count("folder /nonexistent does not exist") == 1, out
    assert "# mpicomm bench" not in out and "samples/s" not in out, out  # nothing ran


def test_tensorboard_folder_checked_first(tmp_path):
    """--tensorboard DIR is made at the end of the run: a file in its way used to crash the job
    there with a traceback (NotADirectoryError), after the training, the JSON unwritten."""
    from argparse import Namespace

    from mpicomm.core.outputs import check_outputs

    afile = tmp_path / "afile"
    afile.write_text("")
    assert "is a file, not a folder" in check_outputs(Namespace(tensorboard=str(afile)))
    assert f"{afile} is a file" in check_outputs(Namespace(tensorboard=str(afile / "a" / "b")))
    assert check_outputs(Namespace(tensorboard=str(tmp_path / "new" / "deeper"))) is None
    assert check_outputs(Namespace(tensorboard=str(tmp_path))) is None
    assert not (tmp_path / "new").exists()  # checked, nothing made


@pytest.mark.slow  # one mpiexec run
def test_tensorboard_onto_a_file_stops_before_the_run(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("")
    res = run_mpi(2, ["-m", "mpicomm", "train", "--layers", "8,16,4", "--steps", "100000",
                      "--tensorboard", str(afile)], timeout=60)
    out = res.stdout + res.stderr
    assert not res.timed_out and res.returncode == 2, out
    assert out.count(f"--tensorboard {afile}: is a file, not a folder") == 1, out
    assert "Traceback" not in out and "samples/s" not in out, out


def test_two_outputs_onto_one_file_are_refused(tmp_path):
    """--json onto the --checkpoint file silently replaced the checkpoint at the run's end."""
    from argparse import Namespace

    from mpicomm.core.outputs import check_outputs

    ck = str(tmp_path / "ck.npz")
    msg = check_outputs(Namespace(json=ck, checkpoint=ck, trace=None))
    assert msg.startswith("--json and --checkpoint both write"), msg
    other = str(tmp_path / "sub" / ".." / "t.json")
    (tmp_path / "sub").mkdir()
    msg = check_outputs(Namespace(json=other, trace=str(tmp_path / "t.json")))
    assert msg and "--json and --trace both write" in msg, msg
    assert check_outputs(Namespace(json=ck + ".json", checkpoint=ck, trace=None)) is None


@pytest.mark.slow
@pytest.mark.parametrize("unbuffered", ["1", None])  # CI runs without PYTHONUNBUFFERED
def test_stdout_closed_early_ends_without_a_traceback(unbuffered):
    """`python -m mpicomm info | head -2` printed a 10-line BrokenPipeError traceback; with a
    block-buffered stdout the pipe broke only at exit ("Exception ignored", exit code 120)."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env["PYTHONPATH"] = str(ROOT)
    if unbuffered:
        env["PYTHONUNBUFFERED"] = unbuffered
    proc = subprocess.Popen([sys.executable, "-m", "mpicomm", "info"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written
    try:
        err = proc.stderr.read().decode()
        rc = proc.wait(timeout=60)
    finally:
        proc.kill()
    assert rc == 1 and "Traceback" not in err and "BrokenPipeError" not in err, err


@pytest.mark.parametrize("env, message", [
    ({"MPICOMM_STALL_WARN_S": "soon"}, "MPICOMM_STALL_WARN_S must be a number of seconds"),
    ({"MPICOMM_STALL_ABORT_S": "-1"}, "MPICOMM_STALL_ABORT_S must be >= 0"),
])
def test_a_bad_stall_setting_is_a_config_error_before_the_command(monkeypatch, env, message):
    """Before: every rank printed a ValueError traceback from reducer creation and the job
    ended with exit 1; now one line (ConfigError: exit 2) before the command runs."""
    import argparse
    import importlib
    from types import SimpleNamespace

    main = importlib.import_module("mpicomm.cli.main")
    from mpicomm.core.errors import ConfigError

    for name, value in env.items():
        monkeypatch.setenv(name, value)
    ran = []
    module = SimpleNamespace(USES_MPI=True, run=lambda args: ran.append(args))
    with pytest.raises(ConfigError, match=message):
        main._run(module, argparse.Namespace())
    assert not ran
    monkeypatch.delenv(next(iter(env)))
    main._run(module, argparse.Namespace())  # a good environment: the command runs
    assert len(ran) == 1


SKEWED_START = """
import runpy, sys, time
from mpi4py import MPI  # initialised, as importing mpicomm's MPI layer does
if MPI.COMM_WORLD.Get_rank() == 0:
    time.sleep(2.0)  # rank 0 reaches the error 2 s after the others: a loaded host's start skew
sys.argv = ["mpicomm", "model", "--predict", "--compute-ms", "-1"]
runpy.run_module("mpicomm", run_name="__main__")
"""


@pytest.mark.slow  # a 2 s head start (the default tier's time budget, docs/testing.md)
def test_a_late_rank_0_still_says_the_error_of_a_command_without_messages():
    """Before, the other ranks left 1 s after their error and the launcher ended rank 0 before it
    printed (no line, or exit 9 in CI under load); now every rank leaves through MPI_Finalize."""
    res = run_mpi(2, ["-c", SKEWED_START], timeout=60)
    assert not res.timed_out and res.returncode == 2, res.tail()
    out = res.stdout + res.stderr
    assert out.count("mpicomm: error: --compute-ms") == 1 and "MPI_Abort" not in out, out
