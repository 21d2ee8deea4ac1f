"""What the training tests share: a small model's flags, a launcher, the checkpoint reader."""

import numpy as np
from mpi_harness import run_mpi

SMALL = ["--layers", "16,32,32,4", "--train-samples", "512", "--test-samples", "64",
         "--eval-samples", "128", "--log-every", "0"]
SMALL_DATA = [f for i, f in enumerate(SMALL)  # with --data: the data set sets the sizes
              if f not in ("--train-samples", "--test-samples")
              and SMALL[i - 1] not in ("--train-samples", "--test-samples")]


def train(nranks, *args, timeout=120):
    return run_mpi(nranks, ["-m", "mpicomm", "train", *map(str, args)], timeout=timeout)


def ok(res):
    assert res.returncode == 0 and not res.timed_out, res.tail()
    return res


def params(path):
    with np.load(path) as f:
        return f["params"], f["momentum"], int(f["step"])


def rel_err(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())
