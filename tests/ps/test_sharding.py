"""ps.sharding: even key ranges, and ranges cut only at tensor edges (ps-lite's whole keys),
the busiest range checked against a brute-force optimum over every set of cuts."""

import itertools
import random

import pytest

from mpicomm.core.errors import ConfigError
from mpicomm.ps.sharding import layout, tensor_bounds
from mpicomm.workloads import workload


def _best(edges, n, servers):
    best = None
    for cuts in itertools.combinations(edges, servers - 1):
        b = [0, *cuts, n]
        worst = max(y - x for x, y in zip(b, b[1:], strict=False))
        best = worst if best is None else min(best, worst)
    return best


@pytest.mark.parametrize("seed", range(30))
def test_tensor_bounds_are_optimal_and_never_split_a_tensor(seed):
    rng = random.Random(seed)
    sizes = [rng.randint(1, 50) for _ in range(rng.randint(1, 9))]
    servers = rng.randint(1, len(sizes))
    edges = list(itertools.accumulate(sizes))[:-1]
    n = sum(sizes)
    b = tensor_bounds(edges, n, servers)
    assert len(b) == servers + 1 and b[0] == 0 and b[-1] == n
    assert all(x < y for x, y in zip(b, b[1:], strict=False))  # every server holds a tensor
    assert set(b[1:-1]) <= set(edges)
    assert max(y - x for x, y in zip(b, b[1:], strict=False)) == _best(edges, n, servers)


def test_layout_with_the_model_tensors():
    w = workload("resnet50")
    edges = [hi for _, _, hi in w.flat_tensors()][:-1]
    lay = layout(10, 4, w.num_params, edges)
    assert lay.workers == list(range(6)) and lay.servers == [6, 7, 8, 9]
    assert set(lay.bounds[1:-1]) <= set(edges) and lay.bounds[-1] == w.num_params
    even = layout(10, 4, w.num_params)
    assert even.bounds[1] not in edges or even.bounds[2] not in edges  # the ring's split
    with pytest.raises(ConfigError, match="exceeds the 3 tensors"):
        layout(10, 4, 100, [10, 20])
