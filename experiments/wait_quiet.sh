#!/bin/sh
# Wait (up to $1 seconds, default 600) until no other MPI job runs on this host and the
# CPUs were >= 95% idle over the last 2 s, so benchmark numbers are not shared with someone
# else's job. Prints uptime before returning; exit 1 if it never got quiet.
limit=${1:-600}
start=$(date +%s)
idle_pct() {
  set -- $(head -1 /proc/stat); i1=$5; t1=$(($2 + $3 + $4 + $5 + $6 + $7 + $8))
  sleep 2
  set -- $(head -1 /proc/stat); i2=$5; t2=$(($2 + $3 + $4 + $5 + $6 + $7 + $8))
  echo $(( 100 * (i2 - i1) / (t2 - t1 + 1) ))
}
while :; do
  others=$(pgrep -c -f 'hydra_pmi_proxy|mpiexec|torch.multiprocessing' 2>/dev/null || true)
  idle=$(idle_pct)
  if [ "$others" -eq 0 ] && [ "$idle" -ge 95 ]; then
    echo "quiet: idle ${idle}%, no other MPI job; $(uptime)"; exit 0
  fi
  if [ $(( $(date +%s) - start )) -ge "$limit" ]; then
    echo "still busy after ${limit}s: idle ${idle}%, $others MPI processes; $(uptime)" >&2
    exit 1
  fi
  sleep 3
done
