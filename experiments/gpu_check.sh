#!/usr/bin/env bash
# One prepared GPU check: run it first on a GPU node (docs/cluster.md). Within 5 minutes on one
# GPU once installed (first installs come on top, once: CuPy ~100 MB, torch with CUDA ~2.5 GB).
#
#   bash experiments/gpu_check.sh [--dry-run] [--out gpu_check.json] [--venv .venv-gpu]
#                                 [--reuse-venv] [--no-torch]
#
# Steps, each under its own time limit; every step runs even when an earlier one failed:
#   1. venv    a fresh venv, mpicomm installed from this checkout with its extras
#              .[gpu,test,nvtx,tensorboard,torch] (CuPy: CUPY_PACKAGE, default cupy-cuda12x);
#              mpi4py builds against the system MPI when mpicc is found (keep your cluster's
#              CUDA-aware MPI), else the mpich extra (MPICH from PyPI: not CUDA-aware)
#   2. info    python -m mpicomm info: CuPy, the GPUs, MPIX_Query_cuda_support
#   3. probe   mpicomm.core.gpu.probe_cuda_aware on 2 ranks: device buffers handed to MPI
#   4. pytest  pytest -m "gpu and not slow" --gpu-backend real (real CuPy, no stand-in; 1-3 ranks)
#   5. bench   CuPy buffers, staged (MPICOMM_CUDA_AWARE=0), then CUDA-aware (=1; only when the
#              probe passed)
#   6. train   train --device gpu, every strategy, and every codec on the strategies taking it
#   7. torch   experiments/gpu_torch_check.py: mpicomm.torch.allreduce and the DDP comm hook
#              on CUDA tensors
# The report (--out, JSON): per step its command, exit status, seconds and output tail; the
# probe's verdict; the bench records. Exit 0 when every step passed. --dry-run lists the steps
# and exits 0 (no GPU needed).
set -uo pipefail
cd "$(dirname "$0")/.."

DRY=0 OUT=gpu_check.json VENV=.venv-gpu REUSE=0 TORCH=1
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --out) OUT=$2; shift ;;
    --venv) VENV=$2; shift ;;
    --reuse-venv) REUSE=1 ;;
    --no-torch) TORCH=0 ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1 (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
PYTHON=${PYTHON:-python3}
CUPY_PACKAGE=${CUPY_PACKAGE:-cupy-cuda12x}
NP=2  # ranks: they share the GPU when there is one (device = rank % GPUs in the probe)
FILES="${OUT%.json}_files"
PY="$VENV/bin/python"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # Open MPI in a container
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT
: > "$log/steps.tsv"
failed=0

extras="gpu,test,nvtx,tensorboard"
[ "$TORCH" = 1 ] && extras="$extras,torch"
command -v mpicc > /dev/null || extras="$extras,mpich"


# step NAME LIMIT_S COMMAND...: run it within LIMIT_S, keep its output, record the result
# (OPTIONAL=1 step ...: a failure is reported but does not fail the check)
step() {
  local name=$1 limit=$2 t0=$SECONDS rc
  shift 2
  if [ "$DRY" = 1 ]; then
    printf '%-24s (limit %3ss) %s\n' "$name" "$limit" "$*"
    return 0
  fi
  echo "=== $name: $*"
  timeout --signal=INT --kill-after=15 "$limit" "$@" > "$log/$name.out" 2>&1
  rc=$?
  tail -n 40 "$log/$name.out"
  [ "$rc" -eq 0 ] || [ "${OPTIONAL:-0}" = 1 ] || failed=1
  local cmd="$*"
  cmd=${cmd//$'\n'/ }  # one line per step in the table
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) "${OPTIONAL:-0}" \
    "${cmd//$'\t'/ }" >> "$log/steps.tsv"
  return $rc
}

if [ "$DRY" = 0 ]; then
  command -v nvidia-smi > /dev/null && nvidia-smi -L || echo "nvidia-smi not found"
  mkdir -p "$FILES"
fi

# 1. the venv, from this checkout's own pyproject extras
if [ "$REUSE" = 1 ] && [ -x "$PY" ]; then
  echo "reusing $VENV"
else
  step venv 900 bash -c "rm -rf '$VENV' && $PYTHON -m venv '$VENV' \
    && '$PY' -m pip install -q --upgrade pip \
    && '$PY' -m pip install -q -e '.[$extras]' \
    && if [ '$CUPY_PACKAGE' != cupy-cuda12x ]; then '$PY' -m pip uninstall -q -y cupy-cuda12x \
         && '$PY' -m pip install -q '$CUPY_PACKAGE'; fi"
fi

MPIEXEC=$VENV/bin/mpiexec  # the mpich extra's, else the system's
[ -x "$MPIEXEC" ] || MPIEXEC=$(command -v mpiexec || echo mpiexec)

# 2-3. what this node offers: CuPy, the GPUs, and whether MPI really takes device memory
step info 60 "$PY" -m mpicomm info
# (an MPI without CUDA support may crash on the device pointer: reported, not a failure)
OPTIONAL=1 step probe 60 "$MPIEXEC" -n $NP "$PY" -c "import json; from mpi4py import MPI
from mpicomm.core.gpu import probe_cuda_aware
r = probe_cuda_aware()
MPI.COMM_WORLD.Get_rank() or print(json.dumps(r)); open('$FILES/probe.json', 'w').write(json.dumps(r))"
aware=0
if [ "$DRY" = 0 ] && grep -q '"device_transfer_ok": true' "$FILES/probe.json" 2> /dev/null; then
  aware=1
fi

# 4. the gpu-marked tests on real CuPy, at 1-3 ranks (the slow training matrix: step 6 covers it)
step pytest 150 "$PY" -m pytest -q -m "gpu and not slow" -k "not -4-" --gpu-backend real \
  -p no:cacheprovider

# 5. bench on CuPy buffers: staged through pinned host memory, then handed to MPI directly
BENCH=(-m mpicomm bench --device gpu --strategies native,ring,hierarchical,ps,auto
       --ranks-per-node 1 -b 1K -e 64M -f 16 -n 10 -w 2 -c 1)
step bench-staged 90 env MPICOMM_CUDA_AWARE=0 \
  "$MPIEXEC" -n $NP "$PY" "${BENCH[@]}" --json "$FILES/bench_staged.json"
if [ "$aware" = 1 ] || [ "$DRY" = 1 ]; then
  step bench-cuda-aware 90 env MPICOMM_CUDA_AWARE=1 \
    "$MPIEXEC" -n $NP "$PY" "${BENCH[@]}" --json "$FILES/bench_cuda_aware.json"
else
  echo "bench-cuda-aware: skipped (the probe found MPI not CUDA-aware)"
fi

# 6. train --device gpu: every strategy, then every codec where the strategy takes it
TRAIN=(-m mpicomm train --device gpu --steps 20 --log-every 0 --ranks-per-node 1)
for s in native ring hierarchical ps recursive_doubling auto tree; do
  step "train-$s" 60 "$MPIEXEC" -n $NP "$PY" "${TRAIN[@]}" --strategy "$s"
done
# the strategies each codec runs on (each reducer's `compressions`; tests/test_gpu_check.py)
for c in fp16 int8 topk:0.01; do
  takers="ring hierarchical ps"
  [ "$c" = topk:0.01 ] || takers="$takers recursive_doubling"
  for s in $takers; do
    step "train-$s-${c%%:*}" 60 "$MPIEXEC" -n $NP "$PY" "${TRAIN[@]}" --strategy "$s" --compress "$c"
  done
done

# 7. the PyTorch adapter on CUDA tensors
if [ "$TORCH" = 1 ]; then
  step torch-cuda 120 "$MPIEXEC" -n $NP "$PY" experiments/gpu_torch_check.py
fi

[ "$DRY" = 1 ] && exit 0
"$PY" - "$log" "$OUT" "$FILES" <<'PYEOF' || failed=1
import json, sys, pathlib
log, out, files = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
steps = []
for line in (log / "steps.tsv").read_text().splitlines():
    name, rc, secs, optional, cmd = line.split("\t", 4)
    text = (log / f"{name}.out").read_text(errors="replace")
    steps.append({"step": name, "ok": rc == "0", "exit": int(rc), "seconds": int(secs),
                  "optional": optional == "1", "command": cmd, "output_tail": text[-3000:]})
def load(name):
    p = files / name
    return json.loads(p.read_text()) if p.exists() else None
report = {"ok": all(s["ok"] or s["optional"] for s in steps), "steps": steps, "probe": load("probe.json"),
          "bench_staged": load("bench_staged.json"),
          "bench_cuda_aware": load("bench_cuda_aware.json")}
pathlib.Path(out).write_text(json.dumps(report, indent=1))
print(f"wrote {out}: {sum(s['ok'] for s in steps)}/{len(steps)} steps passed")
for s in steps:
    print(f"  {s['step']:<24} {'ok' if s['ok'] else 'FAILED (exit %d)' % s['exit']:<16} {s['seconds']:4d}s")
PYEOF
exit $failed
