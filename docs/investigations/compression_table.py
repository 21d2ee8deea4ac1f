"""Codec x strategy -> bytes/step, step time, held-out accuracy (docs/compression.md).

    python docs/investigations/compression_table.py --ranks 2 --strategies ring,ps,hierarchical \
        --codecs none,fp16,int8,topk:0.01,topk:0.01:noef [-- extra train flags]

Runs ``python -m mpicomm train`` once per (strategy, codec), strategies taking
turns per codec, each under its own ``mpiexec``; prints one Markdown table, each
ratio against the same strategy's ``none`` row. Extra flags after ``--`` go to
every run (e.g. ``--ranks-per-node 1``); the environment passes through
(``MPICOMM_INTER_LINK=50us,0.1GB/s`` emulates the links between nodes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path


def run_one(ranks: int, strategy: str, codec: str, extra: list[str], out: Path) -> dict:
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    cmd = [mpiexec, "-n", str(ranks), sys.executable, "-m", "mpicomm", "train",
           "--strategy", strategy, "--compress", codec, "--log-every", "0", "--json", str(out),
           *extra]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=os.environ.copy())
    return json.loads(out.read_text())["results"][0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--strategies", default="ring")
    ap.add_argument("--codecs", default="none,fp16,int8,topk:0.01,topk:0.01:noef")
    ap.add_argument("extra", nargs="*")
    args = ap.parse_args()
    rows: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for codec in args.codecs.split(","):
            for strategy in args.strategies.split(","):
                out = Path(tmp) / f"{strategy}-{codec.replace(':', '_')}.json"
                rows[strategy, codec] = run_one(args.ranks, strategy, codec, args.extra, out)
    print("| strategy | codec | KB/step | vs none | step ms | vs none | test acc | train loss |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for strategy in args.strategies.split(","):
        base = rows.get((strategy, "none"))
        for codec in args.codecs.split(","):
            r = rows[strategy, codec]
            kb, ms = r["bytes_per_step"] / 1e3, r["step_time_median_s"] * 1e3
            vb = f"{r['bytes_per_step'] / base['bytes_per_step']:.3f}" if base else "-"
            vt = f"{r['step_time_median_s'] / base['step_time_median_s']:.2f}" if base else "-"
            print(f"| {strategy} | {codec} | {kb:.1f} | {vb} | {ms:.2f} | {vt} | "
                  f"{100 * r['test_accuracy']:.1f}% | {r['final_loss']:.4f} |")


if __name__ == "__main__":
    main()
