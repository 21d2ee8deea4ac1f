#!/bin/sh
# The overlap table of docs/engine.md ("Overlap with the next forward"): the issue's overlap
# command in virtual time at 2 and 4 ranks, batch 64 and 128, with --overlap, --overlap
# --overlap-forward and --no-overlap; one markdown row per run (step, compute, comm total and
# exposed in ms, overlap_fraction). About 2 minutes on 2 cores.
#
#   sh experiments/overlap_forward.sh [RANKS...]      # default: 2 4
set -e
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for n in ${*:-2 4}; do
  for b in 64 128; do
    for flags in "--overlap" "--overlap --overlap-forward" "--no-overlap"; do
      # shellcheck disable=SC2086  # $flags: one or two flags
      mpiexec -n "$n" $PY -m mpicomm train --strategy ring --layers 256,512x8,10 --bucket-mb 1 \
        --ranks-per-node 1 --inter-link 50us,0.5GB/s --steps 40 --batch-size "$b" $flags \
        --log-every 0 --json "$out/run.json" > "$out/log" 2>&1 || { cat "$out/log"; exit 1; }
      $PY - "$out/run.json" "$n" "$b" "$flags" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
ms = [r[k] * 1e3 for k in ("step_time_mean_s", "compute_s", "comm_total_s", "comm_exposed_s")]
print(f"| {sys.argv[2]} | {sys.argv[3]} | `{sys.argv[4]}` | "
      + " | ".join(f"{x:.2f}" for x in ms) + f" | {100 * r['overlap_fraction']:.1f}% |")
PY
    done
  done
done
