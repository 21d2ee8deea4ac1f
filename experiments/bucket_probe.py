"""The token-bucket probe's spread (``calibrate.burst``'s single bursts), across two hosts
made of network namespaces joined by a ``tbf`` link (as root; docs/cluster.md):

    python experiments/bucket_probe.py                 # 30 bursts through 200mbit burst 256kb
    python experiments/bucket_probe.py --bursts 60 --rate 800mbit

Each burst: the link idles 0.1 s, then h0's first rank sends ``calibrate.BURST_COUNT``
messages of ``calibrate.BURST_MESSAGE`` bytes to h1's first rank (``calibrate._arrivals``),
which reads the bucket off their arrivals (``calibrate.bucket_fit``). Prints the bucket each
burst read, sorted, in KiB, their median, and the configured bucket.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worker(bursts: int) -> None:
    """On every rank of a 2 x 2 job: ``bursts`` bursts from rank 0 to rank 2."""
    import numpy as np
    from mpi4py import MPI

    from mpicomm.costmodel import calibrate

    comm = MPI.COMM_WORLD
    read = []
    for _ in range(bursts):
        times = calibrate._arrivals(comm, 0, 2, calibrate.BURST_MESSAGE, calibrate.BURST_COUNT,
                                    0.1)
        if comm.Get_rank() == 2:
            read.append(calibrate.bucket_fit(calibrate.BURST_MESSAGE, times)[0] / 1024)
    if comm.Get_rank() == 2:
        print("BUCKET_KIB " + json.dumps([round(x, 1) for x in sorted(read)]))
        print(f"median {float(np.median(read)):.1f} KiB", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bursts", type=int, default=30)
    ap.add_argument("--rate", default="200mbit")
    ap.add_argument("--mpiexec", default=str(Path(sys.executable).parent / "mpiexec"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.bursts)
        return 0
    from mpicomm.testing.netns import BURST_BYTES, Hosts

    with Hosts(2, rate=args.rate) as net:
        cmd, env = net.launch([2, 2], [sys.executable, __file__, "--worker", "--bursts",
                                       str(args.bursts)], args.mpiexec)
        res = net.run(cmd, 60 + 2 * args.bursts, env=env, cwd=str(ROOT))
    sys.stdout.write(res.stdout)
    print(f"configured bucket {BURST_BYTES / 1024:.0f} KiB at {args.rate}")
    if res.returncode:
        sys.stderr.write(res.stderr[-4000:])
    return res.returncode


if __name__ == "__main__":
    raise SystemExit(main())
