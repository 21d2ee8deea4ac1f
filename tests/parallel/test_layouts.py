"""``compare --layouts``: every layout trains the same steps (float64 losses equal), one table."""

import json

import pytest
from mpi_harness import run_mpi

from mpicomm.train.checks import check
from mpicomm.train.config import ConfigError, TrainConfig
from mpicomm.train.layouts import check_layout_flags, layout_config


def test_layout_names():
    cfg = TrainConfig(layers=(8, 8, 8, 4), batch_size=8, micro_batches=4)
    assert layout_config(cfg, "dp", 4).strategy == "ring"
    assert layout_config(cfg, "zero2", 4).zero_stage == 2
    pp = layout_config(cfg, "dp2xpp2", 4)
    assert (pp.pipeline_stages, pp.micro_batches, pp.batch_size) == (2, 4, 16)
    tp = layout_config(cfg, "tp4", 4)
    assert (tp.tensor_parallel, tp.micro_batches, tp.batch_size) == (4, 1, 32)
    with pytest.raises(ConfigError, match="the job has 4"):
        layout_config(cfg, "dp3xpp2", 4)
    with pytest.raises(ConfigError, match="unknown layout"):
        layout_config(cfg, "fsdp", 4)
    # zero's refusals before any layout runs (dp trained, then zero aborted the job)
    with pytest.raises(ConfigError, match="--compress is not supported with --strategy zero"):
        check(layout_config(TrainConfig(compress="int8"), "zero", 4), 4, single_run=False)
    with pytest.raises(ConfigError, match="--accumulate is not supported with --strategy zero"):
        check(layout_config(TrainConfig(accumulate=2), "zero2", 4), 4, single_run=False)


@pytest.mark.parametrize("flags, match", [
    (dict(pipeline_stages=4), "--pipeline-stages 4 has no effect with --layouts"),
    (dict(tensor_parallel=4), "--tensor-parallel 4 has no effect with --layouts"),
    (dict(zero_stage=2), "--zero-stage 2 has no effect with --layouts"),
    (dict(micro_batches=4), "--micro-batches and --schedule shape pipeline layouts"),
    (dict(schedule="gpipe"), "--micro-batches and --schedule shape pipeline layouts"),
    (dict(servers=2), "--servers has no effect with --layouts"),
    (dict(variant="leader"), "--variant has no effect with --layouts"),
    (dict(crossover_bytes=4096), "--crossover-bytes has no effect with --layouts")])
def test_layouts_refuse_flags_the_names_set(flags, match):
    """Each of these was dropped without a word: `compare --layouts zero --zero-stage 2` ran
    ZeRO-1, `--layouts dp,pp2 --pipeline-stages 4` ran 2 stages, `--layouts dp,tp2
    --micro-batches 4` had no pipeline to cut; every layout reduces with the ring, so
    `--servers 2` or `--variant leader` changed nothing."""
    with pytest.raises(ConfigError, match=match):
        check_layout_flags(TrainConfig(**flags), ["dp", "zero", "tp2"])
    check_layout_flags(TrainConfig(micro_batches=4, schedule="gpipe"), ["dp", "dp2xpp2"])


def test_layouts_refuse_a_name_twice_and_one_part():
    """`--layouts dp,dp` printed two identical rows of pooled runs; `tp1` and `pp1` ran the
    data-parallel loop under a model-parallel name."""
    with pytest.raises(ConfigError, match="names dp more than once"):
        check_layout_flags(TrainConfig(), ["dp", "zero", "dp"])
    for name in ("tp1", "pp1", "dp4xtp1"):
        with pytest.raises(ConfigError, match="needs K >= 2"):
            layout_config(TrainConfig(layers=(8, 8, 8, 4)), name, 4)


@pytest.mark.slow  # 4 ranks (the tiers' rank rule, tests/conftest.py); CI's slow step
def test_compare_layouts_same_losses_and_memory_columns(tmp_path):
    out = tmp_path / "l.json"
    res = run_mpi(4, ["-m", "mpicomm", "compare", "--layouts", "dp,zero,pp2,tp2,pp4,tp4",
                      "--layers", "12,16,16,16,5", "--dtype", "float64", "--batch-size", "4",
                      "--micro-batches", "4", "--steps", "4", "--repeats", "1",
                      "--no-baseline", "--train-samples", "256", "--test-samples", "32",
                      "--log-every", "0", "--json", str(out)], timeout=240)
    assert res.returncode == 0, res.tail()
    recs = {r["layout"]: r for r in json.loads(out.read_text())["results"]}
    ref = recs["dp"]["loss_history"]
    for name, r in recs.items():  # the same global batch, the same model: the same steps
        assert max(abs(a - b) for a, b in zip(r["loss_history"], ref, strict=True)) < 1e-9, name
        for key in ("param_bytes", "optimizer_state_bytes", "activation_bytes",
                    "bytes_per_step", "samples_per_sec"):
            assert r[key] is not None and r[key] > 0, (name, key)
    assert recs["zero"]["optimizer_state_bytes"] < recs["dp"]["optimizer_state_bytes"] / 3
    assert recs["tp4"]["param_bytes"] < recs["dp"]["param_bytes"] / 2
    assert "layout" in res.stdout and "act KB" in res.stdout


@pytest.mark.slow  # one mpiexec run
def test_layouts_refuse_strategies():
    """--strategies beside --layouts was ignored without a word (every layout runs the ring)."""
    res = run_mpi(2, ["-m", "mpicomm", "compare", "--layouts", "dp,tp2", "--strategies",
                      "hierarchical", "--layers", "8,16,16,4", "--steps", "100000"], timeout=60)
    out = res.stdout + res.stderr
    assert not res.timed_out and res.returncode == 2, res.tail()
    assert out.count("--strategies has no effect with --layouts") == 1, res.tail()
    # typed at its default value, it is as ineffective (it ran the layouts, exit 0)
    res = run_mpi(2, ["-m", "mpicomm", "compare", "--layouts", "dp,tp2", "--strategies",
                      "native,ps,ring,hierarchical", "--layers", "8,16,16,4", "--steps", "100000"],
                  timeout=60)
    out = res.stdout + res.stderr
    assert not res.timed_out and res.returncode == 2, res.tail()
    assert out.count("--strategies has no effect with --layouts") == 1, res.tail()
    res = run_mpi(2, ["-m", "mpicomm", "compare", "--layouts", "dp,tp2", "--explain",
                      "--layers", "8,16,16,4", "--steps", "100000"], timeout=60)
    out = res.stdout + res.stderr
    assert not res.timed_out and res.returncode == 2, res.tail()
    assert out.count("--explain has no effect with --layouts") == 1, res.tail()
