"""``python -m mpicomm.workloads``: every workload's totals as a Markdown table."""

from mpicomm.workloads import MODEL_NAMES, workload


def table() -> str:
    """One row per model: parameters, tensors, largest tensor's share, GMACs, FLOPs, bytes."""
    rows = ["| model | sample | parameters | tensors | largest tensor | forward GMACs | "
            "fwd GFLOP | bwd GFLOP | activations (MB, fp32) |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name in MODEL_NAMES:
        w = workload(name)
        big = max(e for _, _, e in w.tensors_backward())
        rows.append(f"| {name} | {w.sample} | {w.num_params:,} | {w.num_tensors} | "
                    f"{big / w.num_params:.0%} | {w.macs / 1e9:.3f} | {w.fwd_flops / 1e9:.2f} | "
                    f"{w.bwd_flops / 1e9:.2f} | {w.act_bytes() / 1e6:.1f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table())
