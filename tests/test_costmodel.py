"""Cost model: formulas against hand-computed values, α/β fitting, one `model` run."""

import json

import numpy as np
import pytest
from mpi_harness import run_mpi

from mpicomm.costmodel import (
    LinkModel,
    ModelParams,
    auto_crossover,
    fit_alpha_beta,
    hierarchical_time,
    predict,
    ps_time,
    rabenseifner_time,
    recursive_doubling_time,
    ring_time,
)

A, B, G, N = 1e-6, 1e-9, 1e-10, 1e6  # α, β, γ, n


def test_formulas_by_hand():
    # 2(p-1)α + 2(p-1)/p·nβ + (p-1)/p·nγ at p=4: 6e-6 + 1.5e-3 + 7.5e-5
    assert ring_time(4, N, A, B, G) == pytest.approx(1.581e-3)
    assert ring_time(1, N, A, B, G) == 0.0
    # lg 4·(α + nβ + nγ) = 2·1.101e-3; p=5 folds onto 4: + 2(α + nβ) + nγ
    assert recursive_doubling_time(4, N, A, B, G) == pytest.approx(2.202e-3)
    assert recursive_doubling_time(5, N, A, B, G) == pytest.approx(2.202e-3 + 2.002e-3 + 1e-4)
    # 2 lg 4·α + 2·3/4·nβ + 3/4·nγ
    assert rabenseifner_time(4, N, A, B, G) == pytest.approx(4e-6 + 1.5e-3 + 7.5e-5)
    # one server: 2(p-1)α + 2(p-1)nβ + (p-1)nγ
    assert ps_time(4, N, A, B, G) == pytest.approx(6e-6 + 6e-3 + 3e-4)
    # dedicated, 4 workers + 1 server: 2·4·α + 2·4·nβ + 3·nγ
    assert ps_time(5, N, A, B, G, servers=1, dedicated=True) == pytest.approx(8e-6 + 8e-3 + 3e-4)
    # hierarchical 2 nodes x 2 ranks: ring(2, n) intra + ring(2, n/2) inter
    intra, inter = (A, B), (1e-5, 1e-8)
    assert hierarchical_time(N, 2, 2, intra, inter, G) == pytest.approx(
        (2e-6 + 1e-3 + 5e-5) + (2e-5 + 5e-3 + 2.5e-5))
    # leader: min(tree 2.102e-3, scatter/gather 2.054e-3) + ring(2, n) among leaders
    assert hierarchical_time(N, 2, 2, intra, inter, G, "leader") == pytest.approx(
        2.054e-3 + (2e-5 + 1e-2 + 5e-5))


def test_ps_shapes():
    """One server grows linearly with p; S = p colocated servers cost exactly the ring."""
    t = [ps_time(p, N, A, B, G) for p in (2, 4, 6, 8)]
    assert np.allclose(np.diff(t), t[1] - t[0])
    for p in (2, 3, 8):
        assert ps_time(p, N, A, B, G, servers=p) == pytest.approx(ring_time(p, N, A, B, G))


def test_fit_recovers_alpha_beta():
    sizes = [8 << k for k in range(24)]
    alpha, beta = 2.5e-6, 1 / 12e9
    exact = [alpha + m * beta for m in sizes]
    a, b = fit_alpha_beta(sizes, exact)
    assert a == pytest.approx(alpha, rel=1e-6) and b == pytest.approx(beta, rel=1e-6)
    noise = np.random.default_rng(0).uniform(0.97, 1.03, len(sizes))
    a, b = fit_alpha_beta(sizes, np.array(exact) * noise)
    assert a == pytest.approx(alpha, rel=0.1) and b == pytest.approx(beta, rel=0.1)


def _params(alpha=2e-6, beta=1e-10, gamma=1e-10) -> ModelParams:
    sizes = [8 << k for k in range(24)]
    link = LinkModel.from_pingpong(sizes, [alpha + m * beta for m in sizes])
    return ModelParams(link, link, sizes, [gamma] * len(sizes))


def test_link_model_and_predict():
    params = _params()
    assert params.intra.alpha == pytest.approx(2e-6, rel=1e-6)
    assert params.intra.beta_at(12345) == pytest.approx(1e-10, rel=1e-6)
    assert predict("ring", 2, N, params) == pytest.approx(ring_time(2, N, 2e-6, 1e-10, 1e-10))
    assert predict("ps", 4, N, params, {"servers": 2}) == pytest.approx(
        ps_time(4, N, 2e-6, 1e-10, 1e-10, servers=2))
    assert predict("unregistered", 2, N, params) is None


def test_auto_crossover_two_ranks():
    """p=2: both move n bytes; the ring wins once nγ/2 > α, i.e. n > 2α/γ = 40000 B."""
    params = _params()
    x = auto_crossover(2, params)
    assert x == 65536
    assert predict("auto", 2, 32768, params) == predict("recursive_doubling", 2, 32768, params)
    assert predict("auto", 2, x, params) == predict("ring", 2, x, params)


@pytest.mark.slow  # about 7 CPU-s
def test_model_command(tmp_path):
    js = tmp_path / "m.json"
    res = run_mpi(2, ["-m", "mpicomm", "model", "--strategies", "native,ring,ps,auto",
                      "-b", "4K", "-e", "256K", "-f", "8", "-n", "3", "-w", "1",
                      "--json", str(js)], timeout=180)
    assert res.returncode == 0, res.tail()
    data = json.loads(js.read_text())
    assert data["params"]["intra"]["alpha"] > 0
    rows = data["results"]
    assert len(rows) == 4 * 3
    for r in rows:
        assert r["predicted_us"] > 0 and r["time_us"] > 0 and r["wrong"] == 0
    assert "predicted" in res.stdout and "meas/pred" in res.stdout


def _flat_link(alpha, beta, emulated=None):
    sizes = [8 << k for k in range(24)]
    link = LinkModel(alpha, sizes, [beta] * len(sizes), beta, None, [beta] * len(sizes), alpha,
                     beta)
    link.emulated = emulated
    return link


def test_emulated_link_takes_the_slower_of_emulated_and_real():
    from mpicomm.costmodel import emulated_link

    fast = emulated_link(_flat_link(1e-6, 1e-10), 20e-6, 1e9, "20us,1GB/s")
    assert fast.alpha == fast.exchange_alpha() == 20e-6 and fast.emulated == "20us,1GB/s"
    assert fast.beta_at(1 << 20) == pytest.approx(1e-9)
    assert fast.beta_x_at(64) == pytest.approx(1e-9)
    # a real link slower than the emulated one (100 MB/s): the real time stands
    slow = emulated_link(_flat_link(1e-6, 1e-8), 20e-6, 1e9)
    m = 1 << 20
    assert slow.alpha + m * slow.beta_at(m) == pytest.approx(1e-6 + m * 1e-8)


def test_ps_over_interfaces_by_hand():
    """4 ranks as 2 nodes x 2, one colocated server (rank 0), 16 MB in 1 MB pieces.

    push, per round: rank 2's piece on its emulated interface, 2e-5 + 1e6·1e-9 = 1.02e-3
    (rank 1's real push into rank 0 takes 1.01e-4); adds 3·1e6·γ = 3e-4 overlap the next
    round: 16·1.02e-3 + 3e-4. pull: rank 0's interface carries 2 answers of 16 MB:
    2·(2e-5 + 1.6e-2)."""
    from mpicomm.costmodel import ps_time_interfaces

    inter, intra = _flat_link(2e-5, 1e-9, "20us,1GB/s"), _flat_link(1e-6, 1e-10)
    t = ps_time_interfaces(16e6, [0], [0, 1, 2, 3], [0, 0, 1, 1],
                           lambda remote: inter if remote else intra, 1e-10, piece=1e6)
    assert t == pytest.approx(16 * 1.02e-3 + 3e-4 + 2 * (2e-5 + 1.6e-2))
    params = ModelParams(intra, inter, intra.sizes, [1e-10] * len(intra.sizes), 2, 2)
    assert predict("ps", 4, 16 * (1 << 20), params, {"ranks_per_node": 2}) > predict(
        "ring", 4, 16 * (1 << 20), params)
