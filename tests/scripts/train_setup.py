"""Rank script: run_training's set-up, checked from inside the job.

Usage (under ``python -m mpi4py``): ``train_setup.py``. Every rank reports ``ok`` and
the problems it found:

* a set-up error (missing --data) raises ``SetupError`` on every rank and leaves no
  communicator of the reducer allocated, for every strategy, and for the baseline;
* ``MPICOMM_VALIDATE`` reaches the reducer when ``TrainConfig.validate`` is None,
  and an explicit ``validate`` wins over it.
"""

import dataclasses
import os

from mpi4py import MPI
from mpi_harness import STRATEGY_CASES, report

from mpicomm.train import loop as T

made = []
_make = T.make_reducer


def capture(*args, **kwargs):
    made.append(_make(*args, **kwargs))
    return made[-1]


T.make_reducer = capture  # run_training's reducers, to look at after it returns or raises


def live_comms(obj, seen=None):
    """Names of the MPI communicators reachable from ``obj`` that were not freed."""
    seen = set() if seen is None else seen
    if id(obj) in seen or not hasattr(obj, "__dict__"):
        return []
    seen.add(id(obj))
    out = []
    for name, value in vars(obj).items():
        if isinstance(value, MPI.Comm):
            if value != MPI.COMM_NULL:
                out.append(f"{type(obj).__name__}.{name}")
        elif type(value).__module__.startswith("mpicomm"):
            out += live_comms(value, seen)
    return out


T.limit_blas_threads(1)
base = T.TrainConfig(layers=(16, 8, 4), steps=2, batch_size=8, train_samples=128,
                     test_samples=32, eval_samples=32, log_every=0)
size = MPI.COMM_WORLD.Get_size()
problems = []

# 1. a set-up error: SetupError everywhere, every communicator freed
sizes = {f: T.TrainConfig.__dataclass_fields__[f].default
         for f in ("train_samples", "test_samples")}
bad = dataclasses.replace(base, data="/nonexistent/d.npz", **sizes)  # --data: its own sizes
for strategy, options in STRATEGY_CASES:
    if options.get("ranks_per_node", 1) > size or (options.get("dedicated") and size < 2):
        continue
    made.clear()
    cfg = dataclasses.replace(bad, strategy=strategy, **options)
    try:
        T.run_training(cfg, verbose=False)
        problems.append(f"{strategy} {options}: no SetupError")
    except T.SetupError:
        pass
    problems += [f"{strategy} {options}: {c} not freed" for r in made for c in live_comms(r)]
made.clear()
try:
    T.measure_baseline(bad)
    problems.append("baseline: no SetupError")
except T.SetupError:
    pass
problems += [f"baseline: {c} not freed" for r in made for c in live_comms(r)]

# 2. MPICOMM_VALIDATE reaches the reducer unless the config says otherwise
for env, options, want in (("1", {}, True), ("0", {}, False), ("0", {"validate": True}, True),
                           ("1", {"validate": False}, False)):
    os.environ["MPICOMM_VALIDATE"] = env
    made.clear()
    T.run_training(dataclasses.replace(base, **options), verbose=False)
    got = made[0].options.validate
    if got is not want:
        problems.append(f"MPICOMM_VALIDATE={env}, config {options}: reducer has {got}")
del os.environ["MPICOMM_VALIDATE"]

report(ok=not problems, problems=problems)
