"""Job script (plain ``python``): train with every checkpoint save taking SECONDS longer on
worker 0 (``time.sleep`` inside it); rank 0 reports the run's step times and its checkpoint
time, so a test can see where the save's time went.

Usage: ``slow_save.py SECONDS JSON`` with JSON the ``TrainConfig`` fields of the run.
"""

import json
import sys
import time

from mpi_harness import report

from mpicomm.cli.main import guarded
from mpicomm.train import loop as T

_save = T.save_checkpoint
seconds, fields = float(sys.argv[1]), json.loads(sys.argv[2])


def slow_save(path, **arrays):
    time.sleep(seconds)
    _save(path, **arrays)


T.save_checkpoint = slow_save
rec = guarded(T.run_training, T.TrainConfig(**fields), verbose=False)
report(ok=True, step_times_s=rec["step_times_s"], step_time_mean_s=rec["step_time_mean_s"],
       checkpoint_s=rec["checkpoint_s"], samples_per_sec=rec["samples_per_sec"])
