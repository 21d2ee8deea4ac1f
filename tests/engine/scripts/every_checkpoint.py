"""Job script (plain ``python``): train with ``--overlap-forward --checkpoint-every 3`` and
keep a copy of every checkpoint as it is written (``PATH.stepN.npz``), so a test can read the
ones a finished run has overwritten: a job killed after such a save resumes from it.

Usage: ``every_checkpoint.py PATH STEPS [--checkpoint-every K] [more train flags]``.
"""

import shutil
import sys

from mpi_harness import report

from mpicomm.cli.main import guarded
from mpicomm.train import loop as T

_save = T.save_checkpoint


def save_and_keep(path, **arrays):
    _save(path, **arrays)
    shutil.copy(path, f"{path}.step{int(arrays['step'])}.npz")


T.save_checkpoint = save_and_keep
path, steps, *flags = sys.argv[1:]
cfg = T.TrainConfig(strategy="ring", layers=(16, 32, 32, 4), steps=int(steps), batch_size=8,
                    train_samples=256, test_samples=32, eval_samples=32, log_every=0,
                    bucket_mb=0.0, dtype="float64", checkpoint=path,
                    checkpoint_every=3 if "--checkpoint-every" in flags else 0,
                    overlap_forward="--overlap-forward" in flags)
guarded(T.run_training, cfg, verbose=False)
report(ok=True)
