#!/bin/sh
# Every figure of experiments/README.md, reproduced by one command (it calls `mpicomm experiments`):
#
#   sh experiments/run_all.sh --quick      # small sweeps, at most 10 minutes on 2 cores
#   sh experiments/run_all.sh              # the full sweeps, at most an hour
#   sh experiments/run_all.sh --only 1,8   # some figures (the README keeps the others)
#
# JSON goes to experiments/results/, PNGs to experiments/figures/, and experiments/README.md
# is regenerated (each figure, the command that made it, its conclusion). Needs the [plot]
# extra: pip install -e ".[mpich,plot]".
#
# The tables of the top-level README.md (bench/model/gloo/ps at 2-4 ranks, read by
# experiments/summarize.py) are the `tables` part:
#
#   sh experiments/run_all.sh tables [bench model gloo ps]
set -e
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
if [ "${1:-}" != tables ]; then
  exec $PY -m mpicomm experiments --update-committed "$@"
fi
shift
out=experiments/results
mkdir -p "$out"
TORCH_PY=${TORCH_PYTHON:-/tmp/venvtorch/bin/python}
parts=${*:-bench model gloo ps}

for part in $parts; do
  experiments/wait_quiet.sh 900
  case $part in
  bench)
    mpiexec -n 2 $PY -m mpicomm bench -b 4K -e 64M -f 4 -n 20 --rounds 3 \
      --strategies native,ring,auto,recursive_doubling,hierarchical,ps \
      --json $out/bench_2ranks.json --csv $out/bench_2ranks.csv | tee $out/bench_2ranks.txt ;;
  model)
    mpiexec -n 2 $PY -m mpicomm model -b 4K -e 64M -f 4 -n 20 --rounds 3 \
      --strategies native,ring,auto,recursive_doubling,ps \
      --json $out/model_2ranks.json | tee $out/model_2ranks.txt ;;
  gloo)
    if [ -x "$TORCH_PY" ]; then
      $TORCH_PY experiments/gloo_allreduce.py -b 4K -e 64M -f 4 -n 30 \
        --json $out/gloo_2ranks.json | tee $out/gloo_2ranks.txt
    else
      echo "skipping gloo: set TORCH_PYTHON to a python with torch" >&2
    fi ;;
  ps)
    # PS shape: one server vs S = p colocated servers, against the ring, ranks 2..4
    # (beyond 2 ranks this 2-core host is oversubscribed: see README.md)
    for p in 2 3 4; do
      for s in 1 $p; do
        experiments/wait_quiet.sh 900
        mpiexec -n $p $PY -m mpicomm model --strategies ring,ps --servers $s \
          -b 1M -e 64M -f 4 -n 10 --rounds 2 \
          --json $out/ps_p${p}_s${s}.json | tee $out/ps_p${p}_s${s}.txt
      done
    done ;;
  *) echo "unknown part $part (bench model gloo ps)" >&2; exit 2 ;;
  esac
done
