"""Tensor parallelism (Megatron pairs): losses equal to the unsplit loop's, bytes = the formula."""

import json

import pytest
from mpi_harness import ROOT, run_mpi

from mpicomm.parallel.tensor import layer_kinds, tp_bytes_formula
from mpicomm.train.config import ConfigError, TrainConfig
from mpicomm.train.parallel_setup import check_parallel_flags

SCRIPT = ROOT / "tests" / "parallel" / "scripts" / "layout_equal.py"


def test_layer_kinds_pair_column_then_row():
    assert layer_kinds(4) == ["col", "row", "col", "row"]
    assert layer_kinds(3) == ["col", "row", "rep"]


def test_bytes_formula_by_hand():
    # layers 20,33,17,9,7: pair (0,1) sends its output 17 forward (no input gradient: data);
    # pair (2,3) sends its output 7 forward and its input gradient 17 back
    assert tp_bytes_formula((20, 33, 17, 9, 7), 4, 16, 8) == 2 * 3 / 4 * 16 * (17 + 7 + 17) * 8


@pytest.mark.slow  # 4 ranks (the tiers' rank rule, tests/conftest.py); CI's slow step
@pytest.mark.parametrize("layers", ["20,33,17,9,7", "20,33,17,7"])
def test_tensor_parallel_equals_unsplit_loop_at_4_ranks(layers):
    """float64: T = 4 (one replica), T = 2 (two replicas, ring across them); odd widths."""
    spec = {"tp4": dict(tensor_parallel=4), "tp2": dict(tensor_parallel=2)}
    res = run_mpi(4, ["-m", "mpi4py", str(SCRIPT), json.dumps(spec), layers], timeout=240)
    res.expect_ok()
    out = res.records[0]["runs"]
    widths = tuple(int(w) for w in layers.split(","))
    for label, T in (("tp4", 4), ("tp2", 2)):
        v = out[label]
        assert v["rel"] < 1e-9, (label, v["rel"])
        rec = v["rec"]
        formula = tp_bytes_formula(widths, T, 16, 8)
        assert rec["tp_bytes_formula_per_step"] == formula
        assert abs(rec["model_parallel_bytes_per_step"] - formula) <= 0.01 * formula, rec
        assert rec["params_in_sync"], rec
    full = sum(i * o + o for i, o in zip(widths[:-1], widths[1:], strict=False)) * 8
    assert out["tp4"]["rec"]["param_bytes"] < full / 2  # the pairs' parameters are split


def test_tensor_parallel_refusals():
    with pytest.raises(ConfigError, match="hidden width >= 4: here"):
        check_parallel_flags(TrainConfig(layers=(8, 3, 8, 4), tensor_parallel=4))
    with pytest.raises(ConfigError, match="needs a pair of linear layers"):  # was "(here [])"
        check_parallel_flags(TrainConfig(layers=(8, 4), tensor_parallel=2))
    with pytest.raises(ConfigError, match="not supported"):
        check_parallel_flags(TrainConfig(layers=(8, 8, 8, 4), tensor_parallel=2,
                                         pipeline_stages=2))
    with pytest.raises(ConfigError, match="do not split"):
        check_parallel_flags(TrainConfig(layers=(8, 8, 8, 4), tensor_parallel=2), ranks=3)
    with pytest.raises(ConfigError, match="one replica"):  # nothing across replicas to compress
        check_parallel_flags(TrainConfig(layers=(8, 8, 8, 4), tensor_parallel=2,
                                         compress="fp16"), ranks=2)
    with pytest.raises(ConfigError, match="--channels has no effect with one replica"):
        check_parallel_flags(TrainConfig(layers=(8, 8, 8, 4), tensor_parallel=2, channels=2),
                             ranks=2)
    check_parallel_flags(TrainConfig(layers=(8, 8, 8, 4), tensor_parallel=2, compress="fp16"),
                         ranks=4)
