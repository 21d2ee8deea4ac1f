"""The predicted outcomes docs/coursework.md states (exercises 1 to 4) come from the model.

Each number below is the one the page prints; a change of the cluster model that moves it
fails here, so the page is updated with it. The virtual-time outcomes are checked by
tests/p2p/test_virtual_outcomes.py (slow tier).
"""

import pytest

from mpicomm.costmodel.cluster_predict import cluster_time
from mpicomm.costmodel.profiles import cluster

MiB = 1 << 20
DGX, ETH = cluster("dgx-h100-ib400"), cluster("ethernet-25g")
ONE = {"channels": 1}  # the pages' `--channels 1`: the ring through one NIC (default: one per NIC)


def _busbw(seconds: float, n: int, p: int) -> float:
    return n * 2 * (p - 1) / p / seconds / 1e9


@pytest.mark.parametrize("p, crossover", [(64, 8 * MiB), (1024, 64 * MiB)])
def test_exercise_1_ring_overtakes_recursive_doubling(p, crossover):
    sizes = [MiB << k for k in range(11)]  # 1 MiB .. 1 GiB, -f 2
    ring_wins = [cluster_time("ring", p, n, DGX, ONE) < cluster_time("recursive_doubling", p, n,
                                                                       DGX)
                 for n in sizes]
    assert sizes[ring_wins.index(True)] == crossover
    assert all(ring_wins[ring_wins.index(True):])  # and keeps winning above it


@pytest.mark.parametrize("p, ps_ms, ps_eff, ring_eff", [(8, 0.52, 0.79, 0.88),
                                                       (16, 9.43, 0.17, 0.56)])
def test_exercise_2_one_server_on_ethernet(p, ps_ms, ps_eff, ring_eff):
    """The page said 'passes 1 ms at 8 ranks, 16 ms at 16 (efficiency 0.11 against 0.52)'."""
    n, compute_ms, opts = 1_597_480, 2.0, {"servers": 1}
    ps = cluster_time("ps", p, n, ETH, dict(opts)) * 1e3
    ring = cluster_time("ring", p, n, ETH, dict(opts)) * 1e3
    assert ps == pytest.approx(ps_ms, rel=0.01)
    assert compute_ms / (compute_ms + ps) == pytest.approx(ps_eff, abs=0.005)
    assert compute_ms / (compute_ms + ring) == pytest.approx(ring_eff, abs=0.005)


@pytest.mark.parametrize("p, n, busbw", [(16, 1 << 30, 46.8), (1024, 1 << 30, 39.7),
                                         (16, MiB, 16.3), (1024, MiB, 0.81)])
def test_exercise_3_ring_busbw(p, n, busbw):
    assert _busbw(cluster_time("ring", p, n, DGX, ONE), n, p) == pytest.approx(busbw, rel=0.01)


@pytest.mark.parametrize("profile, ring_ms, hier_ms", [(DGX, 16.8, 2.12), (ETH, 237, 205)])
def test_exercise_4_hierarchy_at_1024_ranks(profile, ring_ms, hier_ms):
    n = 256 * MiB
    ring, hier = cluster_time("ring", 1024, n, profile, ONE), cluster_time("hierarchical", 1024,
                                                                            n, profile)
    assert ring * 1e3 == pytest.approx(ring_ms, rel=0.01)
    assert hier * 1e3 == pytest.approx(hier_ms, rel=0.02)


# ---------------------------------------------------------------- exercises 13 and 14 (device)
# The seed's two compute pitfalls in virtual time: each test runs its exercise's own commands,
# as docs/coursework.md writes them, and checks the outcome the page states.

def _exercise_commands(number: int) -> list[str]:
    """The fenced commands of docs/coursework.md's exercise ``number``."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "coursework.md").read_text()
    section = re.split(r"^## ", text, flags=re.M)
    body = next(s for s in section if s.startswith(f"{number}. "))
    block = body.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def _run_exercise(number: int, cwd) -> dict[str, dict]:
    """Run the exercise's commands in ``cwd`` (mpiexec and python: this venv's); return each
    command's JSON record of its one strategy, by the JSON's file name."""
    import json
    import shlex
    import subprocess
    import sys

    from mpi_harness import launcher_env, mpiexec

    out = {}
    for cmd in _exercise_commands(number):
        words = shlex.split(cmd)
        assert words[0] == "mpiexec" and words[3] == "python", cmd
        argv = [mpiexec(), *words[1:3], sys.executable, *words[4:]]
        env = {**__import__("os").environ, **launcher_env(argv[0])}
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=540)
        assert done.returncode == 0, f"{cmd}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        name = words[words.index("--json") + 1]
        doc = json.loads((cwd / name).read_text())
        rec = doc["results"][0]
        rec["bound_line"] = next(line for line in doc["reading"] if line.startswith("bound:"))
        out[name] = rec
    return out


@pytest.mark.slow
def test_exercise_13_precision_and_batch_flip_what_bounds_the_step(tmp_path):
    runs = _run_exercise(13, tmp_path)
    small, fp32, fp16 = runs["bound_small.json"], runs["bound_fp32.json"], runs["bound_fp16.json"]
    for rec in (small, fp32, fp16):
        assert rec["clock"] == "virtual" and rec["device"]["name"] == "v100"

    def compute(rec):
        return rec["compute_share"] + rec["optimizer_share"]

    assert small["comm_share"] > compute(small)
    assert "communication-bound" in small["bound_line"]
    assert compute(fp32) > fp32["comm_share"]
    assert "compute-bound" in fp32["bound_line"] and "at fp32" in fp32["bound_line"]
    assert fp16["comm_share"] > compute(fp16)
    assert "communication-bound" in fp16["bound_line"] and "at fp16" in fp16["bound_line"]
    # fp16 halves the bytes on the wire: the exposed allreduce of the same step about halves
    assert fp16["comm_s"] == pytest.approx(fp32["comm_s"] / 2, rel=0.1)


@pytest.mark.slow
def test_exercise_14_low_memory_bandwidth_makes_a_faster_link_useless(tmp_path):
    runs = _run_exercise(14, tmp_path)

    def gain(device):
        return (runs[f"{device}_slow.json"]["step_time_mean_s"]
                / runs[f"{device}_fast.json"]["step_time_mean_s"])

    assert gain("k80") < 1.2, gain("k80")
    assert gain("h200") > 1.5, gain("h200")
    for link in ("slow", "fast"):
        assert "compute-bound" in runs[f"k80_{link}.json"]["bound_line"]
