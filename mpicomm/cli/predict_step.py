"""``model --predict --model M``'s flags and run: whole training steps, one process, no MPI.

The flags become one ``bench.step_predict.StepOptions``; the rows are ``step_rows``'s (the
same code ``compare --model`` and experiments/validation/check_steps.py use).
"""

from __future__ import annotations

import argparse
import sys

from mpicomm.bench.step_predict import (
    DEFAULT_BUCKET_MB,
    REDUCERS,
    StepOptions,
    check_options,
    format_step_rows,
    step_rows,
)
from mpicomm.core.errors import ConfigError
from mpicomm.core.flags import is_given
from mpicomm.costmodel.cluster import Cluster
from mpicomm.costmodel.ps_placement import PLACEMENTS
from mpicomm.workloads import MODEL_NAMES

__all__ = ["add_arguments", "step_options", "run_step_predict", "STEP_ONLY", "NOT_WITH_MODEL",
           "GAMMA_RATE_DEFAULT"]

# the flags add_arguments defines (dests), and model's sweep flags that --model replaces
STEP_ONLY = ("model", "batch_size", "single_rate", "bucket_mb", "no_overlap", "ps_placement",
             "ps_servers_on", "ps_node_reduce", "reducers")
NOT_WITH_MODEL = ("minbytes", "maxbytes", "stepfactor", "compute_ms", "table")
GAMMA_RATE_DEFAULT = "1000GB/s"  # model --predict's --gamma-rate (cli/predict.py)
_FORMS = {"nccl": "collectives as NCCL runs them (the profile's pipelined forms)",
          "mpicomm": "mpicomm's own reducers (one exchange a step, an add a kernel launch: "
                     "what a virtual run executes)"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The whole-step flags of ``model --predict``."""
    g = p.add_argument_group("whole training steps (model --predict --model)")
    g.add_argument("--model", default=None, metavar="NAME",
                   help=f"predict whole steps of this model: {', '.join(MODEL_NAMES)}")
    g.add_argument("--batch-size", type=int, default=32, help="samples per rank per step")
    g.add_argument("--single-rate", type=float, default=None, metavar="SAMPLES_PER_S",
                   help="measured one-device rate (samples/s) instead of the device model")
    g.add_argument("--bucket-mb", type=float, default=DEFAULT_BUCKET_MB,
                   help="gradient bucket size in MiB, as train's engine (default 25)")
    g.add_argument("--no-overlap", action="store_true",
                   help="reduce after backward instead of during it")
    g.add_argument("--ps-placement", choices=PLACEMENTS, default="even",
                   help="ps: even key ranges (mpicomm), whole tensors (TensorFlow, ps-lite) "
                        "or 4 MB chunks (BytePS)")
    g.add_argument("--ps-servers-on", choices=("workers", "separate"), default="workers",
                   help="ps: servers on the workers' nodes, or on separate CPU machines "
                        "with their own NICs")
    g.add_argument("--ps-node-reduce", action="store_true",
                   help="ps: all-reduce inside each node first, then one push and pull per "
                        "node (tf_cnn_benchmarks' distributed_replicated, BytePS)")
    g.add_argument("--reducers", choices=REDUCERS, default=None,
                   help="a named --profile's collectives priced as NCCL runs them (nccl, the "
                        "default: pipelined, its per-call alpha) or as mpicomm's own reducers "
                        "run them (mpicomm: one exchange a step, each add a kernel launch: "
                        "what compare --clock virtual runs and predicts); link flags model "
                        "mpicomm's already")


def step_options(args: argparse.Namespace) -> StepOptions:
    """The parsed flags as the record the predictor takes."""
    gamma = getattr(args, "gamma_rate", None)
    return StepOptions(model=args.model, batch_size=args.batch_size,
                       single_rate=args.single_rate, bucket_mb=args.bucket_mb,
                       overlap=not args.no_overlap, ps_placement=args.ps_placement,
                       ps_servers_on=args.ps_servers_on, ps_node_reduce=args.ps_node_reduce,
                       reducers=getattr(args, "reducers", None),
                       accelerator=getattr(args, "accelerator", None),
                       precision=getattr(args, "precision", None),
                       own_gamma=is_given(args, "gamma_rate",
                                          gamma not in (None, GAMMA_RATE_DEFAULT)))


def run_step_predict(args: argparse.Namespace, source, described: str, variants) -> int:
    """Print (and with --json write) the whole-step table; one process, no MPI messages."""
    from mpicomm.bench.harness import write_records

    if not isinstance(source, Cluster):
        raise ConfigError("--model needs a modelled cluster (--profile NAME or --inter-link), "
                          "not this-machine's measured links")
    opts = step_options(args)
    if opts.reducers is not None and not source.pipelined:
        raise ConfigError(f"--reducers {opts.reducers} cannot take effect without a named "
                          "--profile: link flags model mpicomm's own reducers already (one "
                          "exchange a step, no per-call alpha); drop it")
    w = check_options(opts)
    rows = step_rows(w, source, args.ranks, variants, opts)
    print(f"# mpicomm model --predict --model {w.name}: {described}")
    print(f"# {w.name}: {w.num_params:,} parameters in {w.num_tensors} tensors, "
          f"batch {opts.batch_size} a rank, compute {rows[0]['compute'] if rows else '-'}, "
          f"{rows[0]['buckets'] if rows else '-'} bucket(s) of {opts.bucket_mb:g} MiB, "
          f"{'overlapped with backward' if opts.overlap else 'no overlap'}; "
          f"{_FORMS[rows[0]['reducers'] if rows else 'nccl']}")
    print(format_step_rows(rows))
    meta = {"command": "predict --model", "argv": sys.argv, "described": described,
            "model": w.name, "ranks": args.ranks, "batch_size": opts.batch_size,
            "single_rate": opts.single_rate, "strategies": [v.label for v in variants],
            "reducers": rows[0]["reducers"] if rows else opts.reducers}
    if args.json or getattr(args, "csv", None):
        write_records(rows, meta, args.json, getattr(args, "csv", None))
    return 0
