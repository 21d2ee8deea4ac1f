"""The reading's regime line and its (α, 1/β) quote the links the model column used.

Under the virtual clock compare's model column is the modelled cluster's (``cluster_time``);
its reading quoted this host's measured α and β instead: for the README's main job
(``--inter-link 20us,1GB/s``, 4 ranks, 1.6 MB) "the ring's bytes term ... = 30081 µs" and
"α = 3.0 µs, 1/β(n/p) = 0.08 GB/s" beside a ring step of 2.5 ms. Given the modelled link,
both lines are that link's (issue 30).
"""

import numpy as np
import pytest

from mpicomm.analysis import reading as report


class _Measured:
    """This host's measured link as compare's ModelParams gives it (deliberately odd)."""

    class _Link:
        alpha = 3.0e-6

        @staticmethod
        def beta_at(m):
            return 1 / 0.08e9

    def flat_link(self):
        return self._Link()


def _records():
    rng = np.random.default_rng(0)
    base = {"workers": 4, "ranks": 4, "grad_bytes": 1_600_000, "global_batch": 256,
            "bytes_per_step": 2_400_000, "comm_share": 0.9, "clock": "virtual", "reducer": {}}
    recs = [dict(base, strategy="ring", samples_per_sec=100.0, comm_s=2.4e-3,
                 predicted_comm_s=2.5e-3),
            dict(base, strategy="ps", samples_per_sec=40.0, comm_s=6.4e-3,
                 predicted_comm_s=7.4e-3)]
    runs = {r["strategy"]: [{**r, "step_times_s": list(256 / r["samples_per_sec"]
                                                       * rng.lognormal(0, 0.01, 50))}]
            for r in recs}
    return recs, runs


@pytest.mark.parametrize("link, bytes_us, alpha_us, gbps", [
    ((20e-6, 1e-9), "2400", "20.0", "1.00"),  # the modelled 20us,1GB/s: 2(p-1)/p·n·β
    (None, "30000", "3.0", "0.08"),  # no modelled link (wall clock): the measured one
])
def test_regime_and_alpha_beta_quote_the_link_given(link, bytes_us, alpha_us, gbps):
    recs, runs = _records()
    lines = report.reading(recs, _Measured(), runs, link=link)
    regime = next(ln for ln in lines if ln.startswith("Comm is "))
    assert f"2(p-1)/p·nβ = {bytes_us} µs" in regime, regime
    assert f"2(p-1)α = {round(6 * float(alpha_us))} µs" in regime, regime
    comm = next(ln for ln in lines if ln.startswith("comm ms per step"))
    assert f"α = {alpha_us} µs, 1/β(n/p) = {gbps} GB/s" in comm, comm
