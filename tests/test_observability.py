"""--nvtx and --tensorboard: NVTX ranges open and close in order (a recording nvtx stand-in,
tests/fake_nvtx), and the TensorBoard event file read back with TensorBoard's own reader."""

import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from mpi_harness import run_mpi

from mpicomm.core import nvtx
from mpicomm.train.loop import ConfigError, TrainConfig

SMALL = ["--layers", "16,32,32,4", "--train-samples", "512", "--test-samples", "64",
         "--eval-samples", "128", "--log-every", "0"]
FAKE_NVTX = str(Path(__file__).resolve().parent / "fake_nvtx")


def train(nranks, *args, timeout=120, env=None):
    res = run_mpi(nranks, ["-m", "mpicomm", "train", *map(str, args)], timeout=timeout, env=env)
    assert res.returncode == 0 and not res.timed_out, res.tail()
    return res


def thread_ranges(events):
    """Per thread: the completed ranges as (depth, name) in opening order; asserts balance."""
    stacks, done = defaultdict(list), defaultdict(list)
    for thread, kind, name, domain in events:
        assert domain == "mpicomm", domain
        if kind == "push":
            stacks[thread].append(name)
            done[thread].append((len(stacks[thread]) - 1, name))
        else:
            assert stacks[thread], f"pop without push on thread {thread}"
            stacks[thread].pop()
    assert all(not s for s in stacks.values()), f"ranges left open: {dict(stacks)}"
    return done


@pytest.mark.parametrize("overlap", ["--no-overlap", "--overlap"])
def test_nvtx_ranges_open_and_close_in_order(tmp_path, monkeypatch, overlap):
    monkeypatch.setenv("PYTHONPATH", FAKE_NVTX)  # run_mpi appends it: `import nvtx` finds the fake
    log = tmp_path / "nvtx"
    steps = 4
    train(2, *SMALL, "--steps", steps, "--strategy", "ring", "--bucket-mb", "0", overlap,
          "--nvtx", env={"FAKE_NVTX_LOG": str(log)})
    files = sorted(tmp_path.glob("nvtx.*"))
    assert len(files) == 2, files  # one per rank
    buckets = [f"bucket {k}" for k in range(6)]  # 3 layers: a weight and a bias each
    for f in files:
        ranges = thread_ranges([json.loads(line) for line in f.read_text().splitlines()])
        training = next(r for r in ranges.values() if r and r[0] == (0, "step 0"))
        assert [n for d, n in training if d == 0] == [f"step {s}" for s in range(steps)]
        assert [n for d, n in training if d == 1] == buckets * steps  # in send order, each step
        collectives = [n for rs in ranges.values() for d, n in rs if n == "ring"]
        assert len(collectives) == 6 * steps  # one per bucket, on whichever thread reduced it
        if overlap == "--no-overlap":  # reduced inside its bucket range on the training thread
            assert [n for d, n in training if d == 2] == ["ring"] * 6 * steps
        else:  # the communication thread: its own balanced stack of collectives
            assert any(rs and rs[0] == (0, "ring") for rs in ranges.values())


def test_nvtx_is_a_noop_until_enabled_and_refused_without_the_package(monkeypatch):
    calls = []
    fake = type(sys)("nvtx")
    fake.push_range = lambda name, domain=None: calls.append(("push", name))
    fake.pop_range = lambda domain=None: calls.append(("pop", None))
    monkeypatch.setitem(sys.modules, "nvtx", fake)
    assert not nvtx.enabled() and nvtx.range("a") is nvtx.range("b")  # one shared no-op
    with nvtx.range("a"):
        nvtx.push("b")
        nvtx.pop()
    assert calls == []
    nvtx.enable()
    try:
        with nvtx.range("a"):
            nvtx.push("b")
            nvtx.pop()
    finally:
        nvtx.disable()
    assert calls == [("push", "a"), ("push", "b"), ("pop", None), ("pop", None)]
    monkeypatch.setitem(sys.modules, "nvtx", None)  # not installed
    with pytest.raises(ConfigError, match=r"--nvtx needs the nvtx package: pip install"):
        TrainConfig(nvtx=True)


def test_tensorboard_without_a_writer_is_refused(monkeypatch):
    for name in ("tensorboardX", "torch.utils.tensorboard"):
        monkeypatch.setitem(sys.modules, name, None)
    with pytest.raises(ConfigError, match=r"--tensorboard needs tensorboardX"):
        TrainConfig(tensorboard="runs")


def read_scalars(run_dir):
    """tag -> {step: value}, read with TensorBoard's own EventAccumulator."""
    ea_mod = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = ea_mod.EventAccumulator(str(run_dir), size_guidance={ea_mod.SCALARS: 0})
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


PER_STEP = ["time/step_s", "time/compute_s", "time/comm_exposed_s", "time/comm_total_s",
            "time/optimizer_s", "throughput/samples_per_s", "comm/overlap", "train/loss",
            "bytes/sent_per_step", "bytes/inter_node_per_step", "bytes/intra_node_per_step"]


@pytest.mark.parametrize("strategy", [
    ["--strategy", "ring"],
    pytest.param(["--strategy", "ps", "--ps-mode", "ssp", "--staleness", "2"],
                 marks=pytest.mark.slow),
], ids=["ring", "ps-ssp"])
def test_tensorboard_scalars_over_every_step(tmp_path, strategy):
    pytest.importorskip("tensorboardX")
    steps, runs, js = 6, tmp_path / "runs", tmp_path / "r.json"
    res = train(2, *SMALL, "--steps", steps, *strategy, "--ranks-per-node", "1",
                "--tensorboard", runs, "--json", js)
    assert f"wrote TensorBoard scalars under {runs}" in res.stdout
    (run_dir,) = list(runs.iterdir())  # one run directory for the job
    scalars = read_scalars(run_dir)
    every = [t for t in PER_STEP if set(scalars.get(t, {})) == set(range(1, steps + 1))]
    assert len(every) >= 8, sorted(scalars)
    record = json.loads(js.read_text())["results"][0]
    assert scalars["eval/test_accuracy"][steps] == pytest.approx(record["test_accuracy"])
    per_step_bytes = record["bytes_per_step_by_rank"][0]
    assert scalars["bytes/sent_per_step"][1] == pytest.approx(per_step_bytes, rel=1e-6)
    inter = scalars["bytes/inter_node_per_step"][1]  # 1 rank per node: all of it or most
    assert 0 < inter <= per_step_bytes * (1 + 1e-6)
    assert all(np.isfinite(v) and v > 0 for v in scalars["time/step_s"].values())
    if "--ps-mode" in strategy:
        assert "ps/staleness_max" in scalars and "ps/staleness_mean" in scalars


def test_tensorboard_writes_a_diverged_loss_as_it_is(tmp_path, monkeypatch):
    """Before: train/loss skipped NaN and inf like "no value this step", so a run that
    diverged at step 3 showed a curve ending at step 2. Overlap's NaN (no communication)
    is still left out."""
    from types import SimpleNamespace

    from mpicomm.train import tensorboard as tb

    seen = []

    class Writer:
        def __init__(self, path):
            pass

        def add_scalar(self, tag, value, step):
            seen.append((tag, value, step))

        def close(self):
            pass

    monkeypatch.setattr(tb, "_writer_class", lambda: Writer)
    times = np.array([[0.1, 0.05, 0.0, 0.01, 0.0]] * 3)  # no communication: no overlap
    out = {"times": times, "losses": np.array([2.3, np.inf, np.nan])}
    record = {"strategy": "ring", "workers": 2, "global_batch": 128}
    stats = SimpleNamespace(bytes_sent=0, inter_bytes_sent=0)
    tb.write_run(tmp_path, SimpleNamespace(compress="none"), record, out, stats)
    loss = {step: v for tag, v, step in seen if tag == "train/loss"}
    assert sorted(loss) == [1, 2, 3] and loss[1] == 2.3, loss
    assert np.isinf(loss[2]) and np.isnan(loss[3]), loss
    assert not [s for tag, _, s in seen if tag == "comm/overlap"]


def test_tensorboard_run_dir_names_the_virtual_clock(tmp_path):
    """Before: a virtual-clock run and a wall-clock one under one --tensorboard DIR had the
    same kind of name, so their time/* curves read as comparable."""
    from types import SimpleNamespace

    from mpicomm.train.tensorboard import run_dir

    cfg = SimpleNamespace(compress="none")
    virtual = run_dir(tmp_path, cfg, {"strategy": "ring", "workers": 4, "clock": "virtual"})
    wall = run_dir(tmp_path, cfg, {"strategy": "ps:async", "workers": 3, "clock": "wall"})
    assert virtual.name.startswith("ring-4w-virtual-") and virtual.is_dir()
    assert wall.name.startswith("ps-async-3w-2") and "virtual" not in wall.name


def test_tensorboard_async_throughput_is_worker_0s_own(tmp_path, monkeypatch):
    """async/ssp: the workers do not step together. Before: throughput/samples_per_s was the
    global batch over worker 0's step time (with a straggler, 2-5x the run's samples/s)."""
    from types import SimpleNamespace

    from mpicomm.train import tensorboard as tb

    seen = {}

    class Writer:
        def __init__(self, path):
            pass

        def add_scalar(self, tag, value, step):
            seen.setdefault(tag, []).append(value)

        def close(self):
            pass

    monkeypatch.setattr(tb, "_writer_class", lambda: Writer)
    out = {"times": np.array([[0.01, 0.005, 0.0, 0.001, 0.0]] * 2), "losses": np.ones(2)}
    record = {"strategy": "ps:async", "workers": 2, "global_batch": 128}
    stats = SimpleNamespace(bytes_sent=0, inter_bytes_sent=0)
    for algorithm, tag, rate in (("async", "throughput/worker0_samples_per_s", 6400.0),
                                 ("sync", "throughput/samples_per_s", 12800.0)):
        seen.clear()
        cfg = SimpleNamespace(compress="none", ps_algorithm=algorithm)
        tb.write_run(tmp_path, cfg, record, out, stats)
        assert seen[tag] == pytest.approx([rate, rate]), seen
        assert len([t for t in seen if t.startswith("throughput/")]) == 1, sorted(seen)
