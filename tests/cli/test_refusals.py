"""Flags that cannot take effect are refused in one line with exit code 2 on every rank, before
any message; a 1-rank run says what it is (issue 19, item 6: each case run as quoted)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from mpi_harness import run_mpi

from mpicomm.cli.config import train_config
from mpicomm.train.config import (
    ONE_RANK_NOTE,
    ConfigError,
    TrainConfig,
    check_strategy_options,
    check_world,
)
from mpicomm.train.data import DataError, Shard, check_rows_per_step

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("nranks, args, message", [
    (2, ["--straggler", "7:20"], "--straggler 7:20: rank 7 is not in this job of 2 ranks"),
    (2, ["--trace", "{tmp}/t.json", "--trace-steps", "500:510", "--steps", "20"],
     "--trace-steps 500:510: the run ends at step 20, so nothing would be traced"),
    (4, ["--ranks-per-node", "3"], "--ranks-per-node 3 does not cut 4 ranks into equal nodes"),
    (2, ["--accumulate", "1000"], "× --accumulate 1000 = 128000 rows per step, but the training "
     "set has 16384 rows"),
    (2, ["--batch-size", "10000"], "--batch-size 10000 per worker × 2 workers = 20000 rows"),
    # a flag given at its default value is as ineffective as any other value (ran, exit 0)
    (2, ["--strategy", "ring", "--servers", "1"], "--servers 1 has no effect with --strategy ring"),
    (2, ["--strategy", "ps", "--ps-mode", "sync", "--bucket-mb", "25"],
     "--bucket-mb has no effect under --ps-mode"),
    (2, ["--holdout", "0.1"], "--holdout 0.1 sets the held-out fraction of --data"),
    (2, ["--pipeline-stages", "2", "--strategy", "ps", "--dedicated"], "--dedicated is not "
     "supported with --pipeline-stages"),
    # a clock flag under the wall clock: one line and exit 2, no MPI_Abort banner (it had one)
    (2, ["--compute-scale", "2", "--clock", "wall"], "--compute-scale: virtual-clock only"),
    (2, ["--flop-rate", "1e11", "--clock", "wall"], "--flop-rate: virtual-clock only"),
    # --fold (issue 32): not a positive integer, under the wall clock, or without --model
    (2, ["--fold", "0"], "--fold must be a positive integer or auto, got 0"),
    (2, ["--fold", "4", "--clock", "wall"], "--fold 4: virtual-clock only"),
    (2, ["--fold", "4", "--clock", "virtual"], "--fold 4 cannot take effect without --model"),
    # --single-rate (issue 32): not a finite rate > 0, under the wall clock, without --model
    (2, ["--single-rate", "0", "--model", "mlp", "--clock", "virtual"],
     "--single-rate must be a number of samples/s > 0, got 0.0"),
    (2, ["--single-rate", "nan", "--model", "mlp", "--clock", "virtual"],
     "--single-rate must be a number of samples/s > 0, got nan"),
    (2, ["--single-rate", "100", "--clock", "wall"], "--single-rate 100: virtual-clock only"),
    (2, ["--single-rate", "100", "--clock", "virtual"],
     "--single-rate 100 cannot take effect without --model"),
    # refused by make_reducer, which every rank reaches and which agrees collectively: no
    # MPI_Abort banner (it had one)
    (2, ["--strategy", "native", "--compress", "int8"],
     "compress='int8' is not available with strategy 'native'"),
])
def test_refused_in_one_line_with_exit_2(tmp_path, nranks, args, message):
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = run_mpi(nranks, ["-m", "mpicomm", "train", *args], timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count(message) == 1, res.tail()  # once, by rank 0
    assert "Traceback" not in out and "Abort" not in out, res.tail()
    assert not (tmp_path / "t.json").exists()  # refused before anything was opened


def test_bench_refuses_a_codec_a_strategy_cannot_run_before_its_header():
    """It printed the table's header, then MPI_Abort's banner after rank 0's line."""
    res = run_mpi(2, ["-m", "mpicomm", "bench", "--strategies", "ring,native", "--compress",
                      "int8", "-n", "2"], timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("compress='int8' is not available with strategy 'native'") == 1, out
    assert "Abort" not in out and "#" not in res.stdout, out


def test_ranks_started_with_different_flags_exit_2_without_an_abort():
    """Every rank raises it alike (the flags' agreement): it was followed by MPI_Abort's
    banner."""
    code = ("import sys; from mpi4py import MPI; from mpicomm.cli.main import main; "
            "r = MPI.COMM_WORLD.Get_rank(); "
            "sys.exit(main(['train', '--strategy', 'ring' if r == 0 else 'hierarchical', "
            "'--steps', '2']))")
    res = run_mpi(2, ["-c", code], timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("--strategy differ between rank 0 and rank(s) 1") == 1, out
    assert "Abort" not in out and "Traceback" not in out, out


def test_one_rule_for_the_rows_of_a_step():
    """The config (known rows) and the shard (loaded rows) apply the same check."""
    check_rows_per_step(16384, 64, 2, 128)  # exactly the set: fine
    with pytest.raises(DataError, match="= 16512 rows per step"):
        check_rows_per_step(16384, 64, 2, 129)
    with pytest.raises(ConfigError, match="--accumulate <= 128"):
        check_world(TrainConfig(accumulate=1000), 2)
    with pytest.raises(DataError, match="--accumulate <= 2"):
        import numpy as np

        Shard(np.zeros((10, 2), np.float32), np.zeros(10, np.int64), batch=2, worker_rank=0,
              num_workers=2, seed=0, accumulate=3)
    check_world(TrainConfig(accumulate=1000, data="digits"), 2)  # rows known at set-up only


def test_world_checks_accept_what_fits():
    check_world(TrainConfig(straggler=("1:20",), ranks_per_node=2), 4)
    check_world(TrainConfig(strategy="ps", dedicated=True, servers=1, batch_size=8192), 2)
    check_world(TrainConfig(strategy="ps", ps_mode="async", servers=1, batch_size=8192), 2)
    with pytest.raises(ConfigError, match="8193 per worker × 2 workers"):
        check_world(TrainConfig(strategy="ps", dedicated=True, servers=1, batch_size=8193), 3)
    with pytest.raises(ConfigError, match="--straggler 4:5"):
        check_world(TrainConfig(straggler=("4:5",)), 4)
    # a dedicated server runs no step: its straggler delay was ignored without a word
    for ps in (dict(ps_mode="async"), dict(dedicated=True)):
        with pytest.raises(ConfigError, match="rank 3 is a dedicated parameter server"):
            check_world(TrainConfig(strategy="ps", straggler=("3:20",), **ps), 4)
        check_world(TrainConfig(strategy="ps", straggler=("2:20",), **ps), 4)
    check_world(TrainConfig(strategy="ps", straggler=("3:20",)), 4)  # colocated: a worker
    with pytest.raises(ConfigError, match="use one of 1, 2, 3, 6"):
        check_world(TrainConfig(ranks_per_node=4), 6)


def test_one_rank_refuses_what_needs_a_message():
    # a 1-rank job quantised (int8) or sparsified (top-k) its one gradient: a changed run for
    # no message (loss 3.4554 / 2.9455 against 3.4565 after 3 steps), and the links did nothing
    for kw, flag in ((dict(compress="int8"), "--compress int8"),
                     (dict(strategy="ps", compress="topk:0.01"), "--compress topk:0.01"),
                     (dict(inter_link="50us,1GB/s"), "--inter-link"),
                     (dict(intra_link="1us,10GB/s"), "--intra-link")):
        with pytest.raises(ConfigError, match=f"{flag}.*a 1-rank job sends no"):
            check_world(TrainConfig(**kw), 1)
        check_world(TrainConfig(**kw), 2)
    check_world(TrainConfig(), 1)


def test_digits_picks_its_own_layers():
    assert TrainConfig(data="digits").layers == (64, 128, 10)
    assert TrainConfig(data="digits", layers="64,32,10").layers == (64, 32, 10)
    assert TrainConfig().layers == (256, 512, 512, 10)


def _cli(*args, timeout=120):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mpicomm", *args], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


@pytest.mark.parametrize("kw, flag, users", [
    (dict(servers=2), "--servers 2", "ps"), (dict(dedicated=True), "--dedicated", "ps"),
    (dict(variant="leader"), "--variant leader", "hierarchical"),
    (dict(crossover_bytes="4K"), "--crossover-bytes 4096", "auto"),
    (dict(channels=2), "--channels 2", "ring")])
def test_a_strategys_option_needs_that_strategy(kw, flag, users):
    # `train --strategy ring --servers 2` (or --dedicated, --variant leader, ...) ran the ring
    # alone, exit 0, the flag dropped without a word
    cfg = TrainConfig(**kw)
    with pytest.raises(ConfigError, match=f"^{flag} has no effect with --strategy native: it "
                       f"sets an option of {users} only"):
        check_strategy_options(cfg, ["native"], "--strategy")
    with pytest.raises(ConfigError, match=f"^{flag} has no effect with --strategies "
                       "tree,recursive_doubling: "):
        check_strategy_options(cfg, ["tree", "recursive_doubling"])
    check_strategy_options(cfg, ["native", users])  # compare: one of its strategies uses it
    check_strategy_options(TrainConfig(), ["native"])


def test_train_refuses_another_strategys_option():
    res = _cli("train", "--strategy", "ring", "--servers", "2", "--steps", "1")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "--servers 2 has no effect with --strategy ring: it sets an option of ps only" in (
        res.stdout.splitlines()[-1])


def test_train_without_mpiexec_says_it_is_one_rank():
    res = _cli("train", "--layers", "16,8,4", "--train-samples", "256", "--test-samples", "32",
               "--eval-samples", "64", "--steps", "3", "--log-every", "0")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count(ONE_RANK_NOTE) == 1, res.stdout
    assert "mpiexec -n" in ONE_RANK_NOTE


def test_bench_on_one_rank_gives_no_verdicts():
    res = _cli("bench", "--strategies", "native,ring,recursive_doubling", "-b", "4K", "-e", "64K",
               "-f", "4", "-n", "5", "-w", "1")
    assert res.returncode == 0, res.stdout + res.stderr
    rows = [line for line in res.stdout.splitlines() if line and not line.startswith("#")]
    assert len(rows) == 9, res.stdout
    assert not any(line.rstrip().endswith(("*", "~")) for line in rows), res.stdout
    assert "1 rank: every allreduce is a local copy" in res.stdout
    assert " faster at " not in res.stdout  # no pairwise winners either


def test_torch_example_without_torch_says_so_once(tmp_path):
    """experiments/torch_ddp.py with torch missing: one line naming the CPU wheel, exit 2."""
    (tmp_path / "torch").mkdir()  # a torch that fails to import, also where torch is installed
    (tmp_path / "torch" / "__init__.py").write_text("raise ImportError('no torch here')\n")
    res = run_mpi(2, [str(ROOT / "experiments" / "torch_ddp.py"), "--strategy", "ring"],
                  timeout=60, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("torch is not installed: pip install torch") == 1, res.tail()
    assert "Traceback" not in out and "ModuleNotFoundError" not in out, res.tail()


@pytest.mark.slow
def test_measuring_model_refuses_predict_only_flags():
    """`mpiexec -n 2 model --ranks 64 --profile gb200-nvl72 --table` measured this host and
    ignored the three flags; now one line, exit 2 on every rank, before any measurement."""
    res = run_mpi(2, ["-m", "mpicomm", "model", "--ranks", "64", "--profile", "gb200-nvl72",
                      "--table", "-e", "8K"], timeout=60)
    out = res.stdout + res.stderr
    assert res.returncode == 2 and not res.timed_out, res.tail()
    assert out.count("--ranks (--predict only), --table (--predict only): cannot take effect "
                     "in a measuring `model` run") == 1, \
        res.tail()
    assert "Traceback" not in out and "Abort" not in out and "size (B)" not in out, res.tail()


@pytest.mark.parametrize("kwargs, message", [
    ({"holdout": 0.2}, "--holdout 0.2 sets the held-out fraction of --data"),
    ({"data": "digits", "train_samples": 512},
     "--train-samples size the synthetic task; with --data digits the data set decides"),
    ({"data": "d.npz", "train_samples": 512, "test_samples": 64},
     "--train-samples and --test-samples size the synthetic task; with --data d.npz"),
])
def test_data_flags_of_the_other_source_are_refused(kwargs, message):
    """Each was silently ignored: --holdout on the synthetic task (it holds out --test-samples),
    the synthetic sizes beside --data (the data set has its own)."""
    with pytest.raises(ConfigError) as err:
        TrainConfig(**kwargs)
    assert message in str(err.value), err.value
    TrainConfig(data="digits", holdout=0.2)  # each flag with its own source: accepted
    TrainConfig(train_samples=512, test_samples=64)


def test_a_model_larger_than_the_host_is_refused_in_one_line(monkeypatch):
    """`mpiexec -n 2 train --layers 200000,200000,10` was killed by the kernel (MPICH's 'BAD
    TERMINATION', exit 9) with no word about why: 40 G parameters, 149 GiB each copy."""
    from mpicomm.core import memory
    from mpicomm.train.config import memory_need

    gib = 1 << 30
    need, what = memory_need(TrainConfig(layers="200000,200000,10"))
    params = (200000 * 200000 + 200000 + 200000 * 10 + 10) * 4
    assert need == 2 * params + (16384 + 2048) * 200000 * 4, what
    # a pipeline of 4 stages holds a quarter of the parameters on its busiest rank at least
    assert memory_need(TrainConfig(layers="200000,200000,10", pipeline_stages=4))[0] == \
        2 * (params // 4) + (16384 + 2048) * 200000 * 4
    monkeypatch.setattr(memory, "available_memory", lambda: 18 * gib)
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    with pytest.raises(ConfigError, match=r"--layers 200000,200000,10: 2 x 149 GiB of "
                       r"parameters and 13.7 GiB of synthetic rows need at least 624 GiB on "
                       r"this host \(312 GiB a rank x 2 rank\(s\)\), more than its 18 GiB"):
        check_world(TrainConfig(layers="200000,200000,10"), 2)
    check_world(TrainConfig(), 2)  # the default model: a few MiB
    monkeypatch.setattr(memory, "available_memory", lambda: None)  # unknown: no verdict
    check_world(TrainConfig(layers="200000,200000,10"), 2)


@pytest.mark.parametrize("kw, name", [
    (dict(strategy="zero", zero_stage=1), "--strategy zero"),
    (dict(strategy="zero", zero_stage=2), "--strategy zero"),
    (dict(strategy="ps", ps_mode="sync"), "--ps-mode"),
    (dict(strategy="ps", ps_mode="async"), "--ps-mode")])
def test_no_overlap_is_refused_where_nothing_overlaps(kw, name):
    # `train --strategy zero --no-overlap` and `--ps-mode sync --no-overlap` ran exactly as
    # without the flag (no communication thread there), exit 0, the flag dropped without a word
    from mpicomm.train import ps_setup, zero_setup

    cfg = TrainConfig(overlap=False, **kw)
    with pytest.raises(ConfigError, match=f"^--no-overlap has no effect (with|under) {name}"):
        ps_setup.check_ps_flags(cfg, 4)
        zero_setup.check_zero_flags(cfg)
    ps_setup.check_ps_flags(cfg, 4, single_run=False)  # compare: the flag is the others'
    zero_setup.check_zero_flags(cfg, single_run=False)
    ps_setup.check_ps_flags(TrainConfig(**kw), 4)  # the default (--overlap) passes
    zero_setup.check_zero_flags(TrainConfig(**kw))


@pytest.mark.slow  # a 1-rank training run in a subprocess (about 2 s)
def test_a_diverged_run_says_so():
    # the table shows "-" for a NaN loss, as for a value not measured; nothing else said so
    res = _cli("train", "--layers", "16,8,4", "--train-samples", "256", "--test-samples", "32",
               "--eval-samples", "64", "--steps", "20", "--log-every", "0", "--lr", "1e6")
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count("WARNING: native: the run diverged: the final loss is nan") == 1, (
        res.stdout)
    ok = _cli("train", "--layers", "16,8,4", "--train-samples", "256", "--test-samples", "32",
              "--eval-samples", "64", "--steps", "3", "--log-every", "0")
    assert "diverged" not in ok.stdout, ok.stdout


def _mixed_flags_job(extra_on_last: list[str]):
    """3 ranks run `train`; the last one with ``extra_on_last`` added (an MPMD launch)."""
    common = ["train", "--layers", "16,8,4", "--train-samples", "512", "--test-samples", "32",
              "--eval-samples", "64", "--steps", "2", "--log-every", "0", "--strategy", "ring"]
    code = ("import sys; from mpi4py import MPI; from mpicomm.cli.main import main; "
            f"last = MPI.COMM_WORLD.Get_rank() == 2; "
            f"sys.exit(main({common!r} + ({extra_on_last!r} if last else [])))")
    return run_mpi(3, ["-c", code], timeout=60)


@pytest.mark.slow  # two 3-rank jobs
def test_ranks_started_with_different_flags_are_refused_not_left_waiting():
    # a flag refused on rank 2 only: rank 2 returned 2, ranks 0 and 1 waited in the next
    # collective until the launcher's timeout
    res = _mixed_flags_job(["--accumulate", "4"])  # 64 × 3 × 4 rows > 512
    out = res.stdout + res.stderr
    assert not res.timed_out and res.returncode == 2, res.tail()
    assert out.count("--accumulate 4 = 768 rows per step") == 1, res.tail()
    assert "(rank 2 only: rank 0 accepted its flags)" in out, res.tail()
    # flags each rank accepts, but not the same: the mean of gradients of different batches,
    # exit 0 with params in sync, not a word
    res = _mixed_flags_job(["--accumulate", "2", "--lr", "0.1"])
    out = res.stdout + res.stderr
    assert not res.timed_out and res.returncode == 2, res.tail()
    assert ("the ranks were started with different flags: --lr, --accumulate differ between "
            "rank 0 and rank(s) 2") in out, res.tail()


def _given(*argv: str):
    """The parsed flags of ``python -m mpicomm ARGV``, with what the command line set."""
    from mpicomm.cli.flags import given_dests
    from mpicomm.cli.main import build_parser
    from mpicomm.core.flags import GIVEN

    parser = build_parser()
    args = parser.parse_args(list(argv))
    setattr(args, GIVEN, given_dests(parser, list(argv)))
    return args


def test_the_command_line_tells_a_flag_given_at_its_default():
    """``given_dests`` names exactly the flags typed, in every subcommand, whatever their value;
    the checks that compared values with defaults then refuse them too."""
    assert _given("train", "--servers", "1", "--bucket-mb", "25")._given == \
        {"servers", "bucket_mb"}
    assert _given("compare", "--repeats", "3")._given == {"repeats"}
    assert _given("model", "--predict", "-n", "20")._given == {"predict", "iters"}
    assert _given("train")._given == frozenset()
    with pytest.raises(ConfigError, match="--servers 1 has no effect with --strategies native"):
        check_strategy_options(_given("bench", "--servers", "1"), ["native"])
    check_strategy_options(_given("bench", "--servers", "1"), ["ps"])  # ps reads it
    check_strategy_options(_given("bench"), ["native"])  # nothing typed: nothing refused
    with pytest.raises(ConfigError, match="--holdout 0.1 sets the held-out fraction"):
        train_config(_given("train", "--holdout", "0.1"))
    with pytest.raises(ConfigError, match="--train-samples size the synthetic task"):
        train_config(_given("train", "--data", "digits", "--train-samples", "16384"))
    # a config built in Python has no command line: its values alone tell, as before
    check_world(TrainConfig(holdout=0.1), 2)


@pytest.mark.parametrize("argv, name", [
    (["--strategy", "zero"], "--strategy zero"),
    (["--strategy", "ps", "--ps-mode", "sync"], "--ps-mode")])
def test_overlap_typed_is_refused_where_nothing_overlaps(argv, name):
    """``--overlap`` is the default, so typing it passed the value check and ran, exit 0; with
    no communication thread to turn on it is as ineffective as ``--no-overlap``."""
    from mpicomm.cli.config import given
    from mpicomm.train import ps_setup, zero_setup

    args = _given("train", *argv, "--overlap")
    cfg = train_config(args)
    with pytest.raises(ConfigError, match=f"^--overlap has no effect (with|under) {name}"):
        ps_setup.check_ps_flags(cfg, 4, given=given(args))
        zero_setup.check_zero_flags(cfg, given=given(args))
    ps_setup.check_ps_flags(cfg, 4)  # a config alone: its values tell, and --overlap is the
    zero_setup.check_zero_flags(cfg)  # default
    cfg = train_config(_given("train", *argv))  # not typed: nothing refused
    ps_setup.check_ps_flags(cfg, 4)
    zero_setup.check_zero_flags(cfg)
