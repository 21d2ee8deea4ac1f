"""The virtual clock held against the wall clock where the wall clock means something.

2 ranks on this host's 2 cores (one core each, nothing oversubscribed): the wall clock
times the real transfers, so a virtual run charging this host's *measured* links must
give the same times. One command (about 2 minutes on 2 quiet cores):

    python experiments/virtual_vs_wall.py                 # calibrate, then compare
    python experiments/virtual_vs_wall.py --no-calibrate  # reuse the saved calibration
    python experiments/virtual_vs_wall.py --no-calibrate --params \
        experiments/results/model_2ranks.json --wall-json experiments/results/bench_2ranks.json \
        --train ''        # a busy host: virtual now against a quiet host's recorded run

1. calibrate: ``mpiexec -n 2 python -m mpicomm model --strategies ring -b 4K -e 64M -f 4
   -n 5 --json experiments/results/this_machine.json`` measures α, the one-way time per
   message size (ping-pong, every power of two) and γ(m) (an add right after an exchange);
2. ``bench`` at 2 ranks under ``--clock wall`` and under ``--clock virtual --links-from
   FILE`` (the same sizes, strategies, calls), back to back;
3. ``train`` at 2 ranks (one BLAS thread per rank, no overlap thread: each rank owns a
   core) under both clocks: the median step time;
4. the table: virtual / wall per strategy and size, and per training run; the target is
   every ratio within 25% (0.75 to 1.25). ``uptime``'s load before and after is printed:
   wall-clock numbers mean something only on a quiet host (``experiments/wait_quiet.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mpicomm.bench.launch import mpiexec_command, shown
from mpicomm.costmodel.calibrate import HOST_PARAMS_PATHS

TOLERANCE = 0.25


def load() -> str:
    """The 1-, 5- and 15-minute load averages, as ``uptime`` prints them."""
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run(cmd: list[str], timeout: float) -> None:
    """Run one command, show it, stop the experiment if it fails."""
    print(f"$ {shown(cmd)}", flush=True)
    done = subprocess.run(cmd, timeout=timeout, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"failed (exit {done.returncode}): {shown(cmd)}")


def bench(clock: list[str], args: argparse.Namespace, out: Path) -> dict:
    """{(strategy, bytes): median µs} of one 2-rank bench run under ``clock``'s flags."""
    run(mpiexec_command(2, ["bench", "--strategies", args.strategies, "-b", args.minbytes,
                            "-e", args.maxbytes, "-f", "4", "-n", str(args.iters), "-w", "3",
                            "--rounds", str(args.rounds), *clock, "--json", str(out)]),
        args.timeout)
    rows = json.loads(out.read_text())["results"]
    return {(r["strategy"], r["bytes"]): r["time_us"] for r in rows}


def train(strategy: str, clock: list[str], args: argparse.Namespace, out: Path) -> float:
    """Median step time (ms) of a short 2-rank training run under ``clock``'s flags."""
    run(mpiexec_command(2, ["train", "--strategy", strategy, "--layers", args.layers,
                            "--steps", str(args.train_steps), "--no-overlap",
                            "--blas-threads", "1", "--log-every", "0", "--eval-samples", "256",
                            *clock, "--json", str(out)]), args.timeout)
    return json.loads(out.read_text())["results"][0]["step_time_median_s"] * 1e3


def verdict(ratio: float) -> str:
    return "ok" if abs(ratio - 1) <= TOLERANCE else "MISS"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=HOST_PARAMS_PATHS[0],
                    help="calibration file (written by the calibration, read by --links-from)")
    ap.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True,
                    help="measure the host's links first (default); --no-calibrate reuses")
    ap.add_argument("--strategies", default="ring,native,ps")
    ap.add_argument("-b", dest="minbytes", default="4K")
    ap.add_argument("-e", dest="maxbytes", default="64M")
    ap.add_argument("-n", dest="iters", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--train", default="ring,native,ps", help="strategies to train ('' = none)")
    ap.add_argument("--layers", default="256,512x4,10")
    ap.add_argument("--train-steps", type=int, default=40)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--wall-json", default=None, metavar="FILE",
                    help="a recorded 2-rank wall-clock `bench --json` (a quiet host's) instead of "
                         "running one now, e.g. experiments/results/bench_2ranks.json with "
                         "--no-calibrate --params experiments/results/model_2ranks.json")
    ap.add_argument("--save-wall", default=None, metavar="FILE",
                    help="keep this run's wall-clock `bench --json` (for a later --wall-json)")
    args = ap.parse_args()
    print(f"# load before: {load()} (2 cores; meaningful below ~1.3)", flush=True)
    if args.calibrate:
        Path(args.params).parent.mkdir(parents=True, exist_ok=True)
        run(mpiexec_command(2, ["model", "--strategies", "ring", "-b", "4K", "-e", "64M",
                                "-f", "4", "-n", "5", "--json", args.params]), args.timeout)
    virtual = ["--clock", "virtual", "--links-from", args.params]
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        wall = bench(["--clock", "wall"], args, t / "wall.json") if not args.wall_json else {
            (r["strategy"], r["bytes"]): r["time_us"]
            for r in json.loads(Path(args.wall_json).read_text())["results"]}
        if args.save_wall and not args.wall_json:
            shutil.copyfile(t / "wall.json", args.save_wall)
        virt = bench(virtual, args, t / "virtual.json")
        steps = [(s, train(s, ["--clock", "wall"], args, t / "tw.json"),
                  train(s, virtual, args, t / "tv.json"))
                 for s in filter(None, args.train.split(","))]
    print(f"# load after: {load()}")
    print(f"# {'strategy':>10} {'bytes':>10} {'wall us':>10} {'virtual us':>11} "
          f"{'virt/wall':>9}")
    misses = 0
    for (name, nbytes), w in sorted(wall.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        v = virt.get((name, nbytes))
        if v is None:  # a recorded wall run may hold strategies or sizes not run here
            continue
        misses += verdict(v / w) != "ok"
        print(f"  {name:>10} {nbytes:>10} {w:>10.1f} {v:>11.1f} {v / w:>9.2f} {verdict(v / w)}")
    for name, w, v in steps:
        misses += verdict(v / w) != "ok"
        print(f"  train {name:>4} step (ms) {w:>10.3f} {v:>11.3f} {v / w:>9.2f} {verdict(v / w)}")
    total = len([k for k in wall if k in virt]) + len(steps)
    print(f"# within {TOLERANCE:.0%}: {total - misses} of {total}")
    return 0 if misses == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
