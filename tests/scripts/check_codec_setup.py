"""Rank script: bad or unsupported codecs are refused on every rank before any message, and
the bytes the transport counts are the compressed ones (ratios against compress="none")."""

import numpy as np
from mpi4py import MPI
from mpi_harness import expect_raises, report

import mpicomm
from mpicomm.core.errors import ConfigError
from mpicomm.reducers import make_reducer as plain_make_reducer

N = 100_003


def bytes_per_call(strategy: str, compress: str, **options) -> int:
    x = np.random.default_rng(MPI.COMM_WORLD.Get_rank()).standard_normal(N).astype(np.float32)
    with mpicomm.make_reducer(strategy, compress=compress, **options) as r:
        r.allreduce(x.copy())
        before = r.stats.bytes_sent
        r.allreduce(x.copy())
        return r.stats.bytes_sent - before


def main() -> None:
    comm = MPI.COMM_WORLD
    problems: list[str] = []
    messages = []
    for bad in ("fp8", "topk", "topk:0", "topk:2", "topk:abc", "topk:0.1:maybe", "", 3):
        messages.append(expect_raises(problems, ConfigError, "valid codecs: none, fp16, int8",
                                      lambda b=bad: mpicomm.make_reducer("ring", compress=b)))
    refused = [(s, c) for s in ("native", "auto") for c in ("fp16", "int8", "topk:0.01")]
    for strategy, codec in [*refused, ("recursive_doubling", "topk:0.01")]:
        messages.append(expect_raises(
            problems, ConfigError, "strategies supporting",
            lambda s=strategy, c=codec: mpicomm.make_reducer(s, compress=c)))
    if comm.Get_size() > 1:
        expect_raises(problems, ConfigError, "dedicated servers is not supported",
                      lambda: mpicomm.make_reducer("ps", compress="int8", dedicated=True))
    expect_raises(problems, ConfigError, "variant 'leader'",
                  lambda: mpicomm.make_reducer("hierarchical", compress="fp16", variant="leader"))
    with plain_make_reducer("ring", compress="fp16") as r:  # one factory: both names compress
        if r.compress != "fp16" or mpicomm.make_reducer is not plain_make_reducer:
            problems.append("mpicomm.reducers.make_reducer does not build compressed reducers")
    if "ring, hierarchical, ps" not in messages[-2]:
        problems.append(f"native refusal does not name the supporting strategies: {messages[-1]}")
    same = comm.allgather(messages)
    if any(m != same[0] for m in same):
        problems.append("ranks raised different messages")
    ratios: dict[str, float] = {}
    if comm.Get_size() == 1:  # nothing crosses a wire
        report(ok=not problems, error="; ".join(problems) or None, ratios=ratios)
        return
    base = bytes_per_call("ring", "none")
    for codec in ("fp16", "int8", "topk:0.01", "topk:0.01:noef"):
        ratios[codec] = bytes_per_call("ring", codec) / base if base else 0.0
    for codec in ("fp16", "int8", "topk:0.01"):
        ps_base = bytes_per_call("ps", "none", servers=comm.Get_size())
        ratios[f"ps {codec}"] = bytes_per_call("ps", codec, servers=comm.Get_size()) / ps_base
    rd_base = bytes_per_call("recursive_doubling", "none")
    for codec in ("fp16", "int8"):
        ratios[f"rd {codec}"] = bytes_per_call("recursive_doubling", codec) / rd_base
    report(ok=not problems, error="; ".join(problems) or None, ratios=ratios)


if __name__ == "__main__":
    main()
