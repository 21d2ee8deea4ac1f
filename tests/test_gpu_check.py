"""experiments/gpu_check.sh --dry-run: lists every step without a GPU and exits 0, creating
nothing; its train steps cover every registered strategy and every codec's strategies."""

import subprocess
from pathlib import Path

from mpicomm.reducers import REDUCERS, strategies

ROOT = Path(__file__).resolve().parents[1]


def test_dry_run_lists_every_step_and_exits_0(tmp_path):
    venv, out = tmp_path / "venv", tmp_path / "report.json"
    res = subprocess.run(["bash", str(ROOT / "experiments" / "gpu_check.sh"), "--dry-run",
                          "--venv", str(venv), "--out", str(out)],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    steps = [line.split()[0] for line in res.stdout.splitlines() if "(limit" in line]
    want = ["venv", "info", "probe", "pytest", "bench-staged", "bench-cuda-aware"]
    want += [f"train-{s}" for s in strategies()]
    want += [f"train-{s}-{kind}" for kind in ("fp16", "int8", "topk")
             for s, cls in REDUCERS.items() if kind in cls.compressions]
    want += ["torch-cuda"]
    assert sorted(steps) == sorted(want), res.stdout
    assert "--gpu-backend real" in res.stdout  # real CuPy: never the stand-in
    assert not venv.exists() and not out.exists() and not any(tmp_path.iterdir())
