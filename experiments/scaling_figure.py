"""The figure the users came for: PS, ring and hierarchical scaling efficiency, 8-1,024 GPUs.

    python experiments/scaling_figure.py --figure experiments/figures/scaling.png \
        --json experiments/results/scaling.json

Predicted lines (``bench.step_predict.step_rows``, the code of ``model --predict --model``) for
ResNet-50 (batch 128 a GPU) and BERT-large (32 sequences of 128 tokens a GPU), compute from
the device model at half precision (fp16 on V100, bf16 on H100; gradients of 2 bytes), the
engine's 25 MiB buckets overlapped with backward, on two clusters:

- ``25gbe-v100``: 8 V100 a node on NVLink 2 (6 links x 25 GB/s one way = 150 GB/s, NVIDIA V100
  datasheet; efficiency 370/450 and alpha 0.6 us as profiles S3/S5), one 25 Gb/s Ethernet NIC
  a node at line rate (AWS p3.16xlarge's "25 Gigabit" networking), alpha 2.7 us (S5);
- ``dgx-h100-ib400``: the named profile (8 H100, NVLink 4, 8x NDR 400 Gb/s).

Strategies: the ring, hierarchical, mpicomm's ps with S = p key ranges, and a TensorFlow-style
ps: whole tensors on one server a node (S = nodes). Scaling efficiency = one GPU's step /
the step at p GPUs (weak scaling). Virtual-run points are not drawn: ``train --model`` is not
built yet (docs/validation_steps.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's mpicomm first

from mpicomm.bench.predict import Variant
from mpicomm.bench.step_predict import DEFAULT_BUCKET_MB, step_rows
from mpicomm.costmodel.cluster import Cluster, Link
from mpicomm.costmodel.profiles import cluster as named
from mpicomm.workloads import workload

RANKS = [8, 16, 32, 64, 128, 256, 512, 1024]
MODELS = {"resnet50": 128, "bert-large": 32}
V100_25GBE = Cluster("25gbe-v100", 8, Link(0.6e-6, 150e9, 370 / 450, "NVLink 2, S3, S5"),
                     Link(2.7e-6, 25e9 / 8, 1.0, "25 GbE, line rate; alpha S5"), 3 / 900e9, 1,
                     "8 V100 on NVLink 2, one 25 GbE NIC a node (AWS p3.16xlarge)")
CLUSTERS = {"25gbe-v100": (V100_25GBE, "v100", "fp16"),
            "dgx-h100-ib400": (named("dgx-h100-ib400"), "h100", "bf16")}
LINES = ("ring", "hierarchical", "ps(S=p)", "ps(tensors, S=nodes)")


def _variant(label: str, p: int, local: int) -> tuple[Variant, str]:
    if label.startswith("ps(tensors"):
        return Variant(label, "ps", {"servers": max(1, p // local)}), "tensors"
    if label.startswith("ps"):
        return Variant(label, "ps", {"servers": p}), "even"
    return Variant(label, label, {}), "even"


def curves() -> list[dict]:
    """Every (cluster, model, strategy, p) row."""
    out = []
    for cname, (cl, accel, precision) in CLUSTERS.items():
        for model, batch in MODELS.items():
            for label in LINES:
                for p in RANKS:
                    variant, placement = _variant(label, p, cl.ranks_per_node)
                    args = argparse.Namespace(
                        model=model, batch_size=batch, single_rate=None, accelerator=accel,
                        precision=precision, bucket_mb=DEFAULT_BUCKET_MB, no_overlap=False,
                        ps_placement=placement, ps_servers_on="workers", ps_node_reduce=False)
                    (row,) = step_rows(workload(model), cl, [p], [variant], args)
                    out.append({"cluster": cname, **row})
    return out


def figure(rows: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7), sharex=True, sharey=True)
    for i, cname in enumerate(CLUSTERS):
        for j, model in enumerate(MODELS):
            ax = axes[i][j]
            for label in LINES:
                pts = [r for r in rows if r["cluster"] == cname and r["model"] == model
                       and r["strategy"] == label]
                ax.plot([r["ranks"] for r in pts], [r["scaling_efficiency"] for r in pts],
                        marker="o", label=label)
            ax.set_xscale("log", base=2)
            ax.set_ylim(0, 1.05)
            ax.set_title(f"{model} on {cname}")
            ax.grid(alpha=0.3)
    for ax in axes[-1]:
        ax.set_xlabel("GPUs")
    for ax in axes[:, 0]:
        ax.set_ylabel("scaling efficiency (predicted)")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--figure", default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = curves()
    for r in rows:
        print(f"{r['cluster']:>15} {r['model']:>10} {r['strategy']:>21} {r['ranks']:>5} "
              f"{r['samples_per_sec']:>12.0f} samples/s  eff {r['scaling_efficiency']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    if args.figure:
        figure(rows, args.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
