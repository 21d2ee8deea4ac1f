"""``--model NAME`` in the one loop (``train/workload_setup.py``): the refusals, each in one
line, the run's tensor list, and the placeholder data. The runs themselves (a real model
under mpiexec against the predictor) are tests/workloads/test_workload_runs.py."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from mpicomm.train import workload_setup
from mpicomm.train.checks import check
from mpicomm.train.config import ConfigError, TrainConfig
from mpicomm.workloads import workload


@pytest.fixture
def virtual(monkeypatch):
    """A virtual clock in force, as ``cli.main`` installs it before the checks run."""
    monkeypatch.setattr(workload_setup.clock, "virtual", lambda: SimpleNamespace())


def test_an_unknown_model_is_refused_listing_the_valid_ones():
    with pytest.raises(ConfigError, match="unknown model 'resnet5'; valid models: mlp, resnet50"):
        TrainConfig(model="resnet5")


def test_the_wall_clock_is_refused():
    with pytest.raises(ConfigError, match="--model resnet50 needs the virtual clock"):
        check(TrainConfig(model="resnet50"), 2)


@pytest.mark.parametrize("flags, match", [
    (dict(layers=(8, 8)), "--layers cannot take effect with --model vgg16"),
    (dict(data="digits"), "--data cannot take effect"),
    (dict(train_samples=100, test_samples=10), "--train-samples, --test-samples cannot"),
    (dict(accelerator="host"), "--accelerator host cannot take effect with --model vgg16"),
    (dict(accelerator="HOST"), "--accelerator host cannot take effect"),
    (dict(checkpoint="c.npz"), "--checkpoint cannot take effect with --model vgg16"),
    (dict(strategy="ps", ps_mode="sync"), "--ps-mode cannot take effect"),
    (dict(pipeline_stages=2), "--pipeline-stages cannot take effect"),
    (dict(tensor_parallel=2), "--tensor-parallel cannot take effect"),
])
def test_flags_that_cannot_take_effect_are_refused_in_one_line(virtual, flags, match):
    with pytest.raises(ConfigError, match=match) as e:
        check(TrainConfig(model="vgg16", **flags), 4)
    assert "\n" not in str(e.value)


def test_a_data_flag_typed_at_its_default_is_refused_too(virtual):
    with pytest.raises(ConfigError, match="--eval-samples cannot take effect"):
        workload_setup.check_model_flags(TrainConfig(model="vgg16"), given={"eval_samples"})
    workload_setup.check_model_flags(TrainConfig(model="vgg16", eval_samples=512))  # the docs
    # test's MPICOMM_DOCS_QUICK default: no one typed it


def test_a_model_too_large_for_this_host_is_refused_before_any_allocation(virtual,
                                                                          monkeypatch):
    from mpicomm.core import memory

    monkeypatch.setattr(memory, "available_memory", lambda: 10 * 2**30)
    monkeypatch.setattr(memory, "ranks_on_this_host", lambda default=1: 8)
    with pytest.raises(ConfigError, match=r"--model bert-large --fold 1: .* \(3\.75 GiB a "
                       r"rank x 8 rank\(s\)\), more than its 10 GiB available; --fold 3 "
                       r"would fit$") as e:
        check(TrainConfig(model="bert-large", fold=1), 8)  # 3 x 1.34 GB a rank, 30 GiB in all
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match=r"--fold 2: .*; --fold 3 would fit$"):
        check(TrainConfig(model="bert-large", fold=2), 8)
    check(TrainConfig(model="bert-large", fold=3), 8)
    check(TrainConfig(model="bert-large"), 8)  # auto: 16 (30 GiB of state over 2 GiB)
    check(TrainConfig(model="resnet50", fold=1), 8)  # 8 x 3 x 102 MB fit


def test_fold_auto_is_the_smallest_power_of_2_under_the_budget():
    """ResNet-50 (3 x 102.2 MB a rank) folds 1 at 2 ranks (613 MB), 4 at 16 (4.9 GB), 16 at
    64 (19.6 GB) and 64 at 256; the MLP never; an explicit fold is kept."""
    budget = workload_setup.FOLD_BUDGET_BYTES
    assert budget == 2 * 2**30
    for ranks, want in [(1, 1), (2, 1), (16, 4), (64, 16), (256, 64)]:
        assert workload_setup.run_fold(TrainConfig(model="resnet50"), ranks) == want, ranks
    assert workload_setup.run_fold(TrainConfig(), 256) == 1
    assert workload_setup.run_fold(TrainConfig(model="resnet50", fold=3), 256) == 3


@pytest.mark.parametrize("value", ["0", "-2", "x", "1.5", 0, -1])
def test_a_fold_that_is_not_a_positive_integer_is_refused(value):
    with pytest.raises(ConfigError, match=r"^--fold must be a positive integer or auto, got"):
        TrainConfig(model="resnet50", fold=value)


def test_a_fold_without_a_model_or_under_the_wall_clock_is_refused():
    with pytest.raises(ConfigError, match=r"^--fold 4: virtual-clock only .*add --clock "
                                          r"virtual$"):
        check(TrainConfig(fold=4), 2)  # the wall clock (no fixture)
    check(TrainConfig(fold=1), 2)  # 1: nothing folded, nothing to refuse


def test_a_fold_of_the_mlp_is_refused(virtual):
    with pytest.raises(ConfigError, match=r"^--fold 4 cannot take effect without --model"):
        check(TrainConfig(fold=4), 2)


def test_what_does_take_effect_is_accepted(virtual):
    """The engine, the strategies' options and the device flags act on a workload as on the
    MLP; and the synthetic set's rows bound no batch (a workload reads none)."""
    cfg = TrainConfig(model="resnet50", strategy="ring", bucket_mb=4.0, accumulate=2,
                      accelerator="a100", precision="fp16", batch_size=4096)
    check(cfg, 8)  # 4096 x 8 rows a step: more than the 16384 synthetic rows


def test_the_runs_tensors_are_the_models():
    w = workload("inception3")
    tensors = workload_setup.run_tensors(TrainConfig(model="inception3"))
    assert len(tensors) == w.num_tensors == 292
    assert sum(hi - lo for _, lo, hi in tensors) == w.num_params
    assert workload_setup.run_num_params(TrainConfig(model="vgg16")) == 138_357_544
    mlp = TrainConfig(layers=(5, 3, 2))
    assert workload_setup.run_num_params(mlp) == 5 * 3 + 3 + 3 * 2 + 2


def test_the_placeholder_data_is_one_global_batch_of_zeros():
    cfg = TrainConfig(model="gpt2", batch_size=3, accumulate=2)
    ds = workload_setup.no_data(cfg, workers=4)
    assert ds.x_train.shape == (24, 1) and not ds.x_train.any() and len(ds.y_test) == 4
    assert "--model gpt2" in ds.source


def test_the_model_is_the_workloads_layout():
    cfg = TrainConfig(model="resnet50", batch_size=2)
    m = workload_setup.make_model(cfg, worker_rank=1, xp=np)
    assert m.params.size == m.grads.size == 25_557_032 and m.params.dtype == np.float32
    last = next(m.backward())  # the last layer's gradient is final first
    assert last == len(workload("resnet50").layers) - 1
    assert math.isclose(float(m.grads[m.spans[last]][0]), (last + 1) * 2 * 1e-6, rel_tol=1e-6)


def test_a_model_run_takes_6_steps_unless_steps_is_typed():
    """Every step of the device model is the same: ``--model`` runs 6 (the first untimed),
    and a typed ``--steps`` is kept, at its default value too."""
    from mpicomm.cli.config import MODEL_STEPS, train_config
    from mpicomm.cli.flags import given_dests
    from mpicomm.cli.main import build_parser
    from mpicomm.core.flags import GIVEN

    parser = build_parser()

    def cfg(*argv):
        args = parser.parse_args(list(argv))
        setattr(args, GIVEN, given_dests(parser, list(argv)))
        return train_config(args)

    assert MODEL_STEPS == 6
    assert cfg("train", "--model", "resnet50").steps == 6
    assert cfg("train", "--model", "resnet50", "--steps", "300").steps == 300
    assert cfg("train").steps == 300  # the MLP learns: its default stands
    assert cfg("compare", "--model", "mlp").steps == 6
