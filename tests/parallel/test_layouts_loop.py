"""Pipeline and tensor runs go through the one loop: its flags work for them, equal in
float64 to the ring where the math is the same, and their records carry every field a
data-parallel record carries (issue 31: ``train/parallel_run.py`` refused 13 of them)."""

import json

import numpy as np
import pytest
from mpi_harness import ROOT, run_mpi

SCRIPTS = ROOT / "tests" / "parallel" / "scripts"
LAYERS = "12,20,16,9,5"  # odd widths; four linears: 2 stages of 2, or 2 Megatron pairs
FAMILIES = {"pp2": dict(pipeline_stages=2, micro_batches=4), "tp2": dict(tensor_parallel=2)}


def _equal(n, spec, timeout=240):
    res = run_mpi(n, ["-m", "mpi4py", str(SCRIPTS / "layout_equal.py"), json.dumps(spec),
                      LAYERS], timeout=timeout)
    res.expect_ok()
    return res.records[0]["runs"]


def test_accumulate_bucket_and_overlap_equal_the_ring_at_2_ranks():
    """--accumulate 2 and --bucket-mb (several buckets, sent by the overlap thread) with one
    replica of 2 parts: the ring on 1 rank with the same flags takes the same steps; every
    field of its record is in theirs (the old runner's record lacked 36)."""
    flags = dict(accumulate=2, bucket_mb=0.0005)
    spec = {f"{k}-acc": {**v, **flags} for k, v in FAMILIES.items()}
    out = _equal(2, spec)
    for label, v in out.items():
        assert v["rel"] < 1e-9, (label, v["rel"])
        assert v["missing"] == [], (label, v["missing"])
        rec = v["rec"]
        assert rec["accumulate"] == 2 and rec["buckets"] > 1 and rec["overlap"], rec
        assert rec["params_in_sync"] and rec["param_crc32"] is not None
        assert 0 <= rec["test_accuracy"] <= 1 and rec["step_times_s"], rec


@pytest.mark.slow  # 4 ranks (the tiers' rank rule, tests/conftest.py)
def test_two_replicas_with_overlap_and_forward_overlap_equal_the_ring():
    """2 replicas x 2 parts: the replicas' all-reduce is the engine's (buckets on the overlap
    thread, --overlap-forward's deferred tail): the ring on 2 ranks takes the same steps."""
    flags = dict(bucket_mb=0.0005, overlap_forward=True, steps=6)
    spec = {f"{k}-ovf": {**v, **flags} for k, v in FAMILIES.items()}
    spec["pp2-acc"] = {**FAMILIES["pp2"], "accumulate": 2, "strategy": "ring"}
    out = _equal(4, spec, timeout=300)
    for label, v in out.items():
        assert v["rel"] < 1e-9, (label, v["rel"])
        assert v["missing"] == [], (label, v["missing"])
        assert v["rec"]["workers"] == 2 and v["rec"]["params_in_sync"], label
    assert out["tp2-ovf"]["rec"]["overlap_forward"]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_checkpoint_resume_bit_identical_and_trace(tmp_path, family):
    """6 steps straight and 3 + 3 resumed: the same whole-model parameters and checkpoint,
    bit for bit (float64); the trace holds both ranks' steps, forwards and optimizer."""
    pytest.importorskip("tensorboardX")
    res = run_mpi(2, ["-m", "mpi4py", str(SCRIPTS / "layout_files.py"), str(tmp_path),
                      json.dumps({family: FAMILIES[family]}), LAYERS, "tensorboard"],
                  timeout=240)
    res.expect_ok()
    v = res.records[0]["runs"][family]
    assert v["params_same"] and v["files_same"] and v["resumed_from"] == 3, v
    first, resumed = v["losses"]
    np.testing.assert_array_equal(first[3:], resumed)  # the resumed steps, bit for bit
    events = json.loads((tmp_path / family / "trace.json").read_text())
    assert {e["pid"] for e in events} == {0, 1}
    for pid in (0, 1):
        cats = {e["cat"] for e in events if e["pid"] == pid and e["ph"] == "X"}
        assert {"step", "forward", "optimizer"} <= cats, (pid, cats)
    (run_dir,) = list((tmp_path / family / "tb").iterdir())  # worker 0's scalars
    assert any(p.name.startswith("events") for p in run_dir.iterdir())
    with np.load(tmp_path / family / "full.npz") as ck:  # the whole model: any layout resumes
        assert ck["params"].size == v["rec"]["params"]


@pytest.mark.slow  # three jobs
def test_a_pipeline_checkpoint_resumes_as_a_ring_run(tmp_path):
    """The checkpoint holds the whole model: 3 steps of pp2 then 3 of the ring on one rank
    (the same global batch) take the steps a straight tp2 run takes (float64, 1e-9)."""
    args = ["-m", "mpicomm", "train", "--layers", LAYERS, "--batch-size", "16",
            "--train-samples", "256", "--test-samples", "32", "--log-every", "0", "--dtype",
            "float64", "--checkpoint", str(tmp_path / "c.npz")]
    res = run_mpi(2, [*args, "--steps", "3", "--pipeline-stages", "2", "--micro-batches", "2"],
                  timeout=60)
    assert res.returncode == 0, res.tail()
    res = run_mpi(1, [*args, "--steps", "6", "--resume", "--json", str(tmp_path / "a.json")],
                  timeout=60)
    assert res.returncode == 0, res.tail()
    res = run_mpi(2, [*args[:-2], "--steps", "6", "--tensor-parallel", "2", "--json",
                      str(tmp_path / "b.json")], timeout=60)
    assert res.returncode == 0, res.tail()
    a, b = (json.loads((tmp_path / f).read_text())["results"][0] for f in ("a.json", "b.json"))
    assert a["resumed_from_step"] == 3 and b["strategy"] == "tp2"
    np.testing.assert_allclose(a["loss_history"], b["loss_history"][3:], rtol=1e-9, atol=0)
