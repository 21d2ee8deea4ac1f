#!/usr/bin/env bash
# Two "nodes" on one machine, in one command: set up 2 hosts (network namespaces node h0 and
# h1, joined by 800 Mbit/s links), run mpicomm across them with 2 ranks on each, tear down.
# Needs root (network namespaces) and Linux with iproute2; docs/cluster.md.
#   sudo bash experiments/two_nodes.sh                 # info, then ring vs hierarchical at 16 MiB
#   sudo bash experiments/two_nodes.sh python -m mpicomm compare --steps 50   # any command
# PYTHON picks the venv (default .venv: MPICH; PYTHON=.venv-openmpi/bin/python for Open MPI,
# whose mpiexec sits beside it); RATE the links' rate (tc notation, default 800mbit).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
across() {
  "$PYTHON" -m mpicomm.testing.netns --hosts 2 --slots 2 --rate "${RATE:-800mbit}" \
    --mpiexec "$(dirname "$PYTHON")/mpiexec" -- "$@"
}
if [ $# -gt 0 ]; then
  across "$@"
else
  across python -m mpicomm info
  across python -m mpicomm bench --strategies ring,hierarchical --baseline ring -b 16M -e 16M \
    -n 10 --rounds 3
fi
