"""analysis.verdict: wins need a difference beyond the noise; same distributions tie; seeded."""

import re

import numpy as np
import pytest

from mpicomm.analysis.verdict import (
    compare_pair,
    cpu_sharing_warning,
    crossovers,
    decide,
    ratio_interval,
    speed_interval,
)


def rounds(rng, center, spread, steps=200, n=3, drift=0.0):
    """n rounds of lognormal step times around ``center``; each round drifts by up to ``drift``."""
    return [center * (1 + drift * rng.uniform(-1, 1)) * rng.lognormal(0, spread, steps)
            for _ in range(n)]


def test_real_difference_wins():
    rng = np.random.default_rng(1)
    fast, slow = rounds(rng, 1.0, 0.1), rounds(rng, 1.3, 0.1)
    v = compare_pair("fast", "slow", fast, slow)
    assert v.winner == "fast"
    assert 1.2 < v.ratio.value < 1.4 and v.ratio.low > 1
    assert "fast beats slow" in v.text()
    assert compare_pair("slow", "fast", slow, fast).winner == "fast"


def test_same_distribution_ties():
    rng = np.random.default_rng(2)
    # the same distribution, with rounds that drift as a shared machine does
    ties = 0
    for _ in range(20):
        a, b = rounds(rng, 1.0, 0.3, drift=0.2), rounds(rng, 1.0, 0.3, drift=0.2)
        ties += compare_pair("a", "b", a, b).winner is None
    assert ties >= 17  # a 95% interval: about one false call in twenty


def test_the_old_rule_called_noise_a_win():
    """±30% spread, a 1.16x lead on one round: the old margin-vs-p90 rule said 'won'."""
    rng = np.random.default_rng(3)
    # round-to-round drift of ±25% dominates: 3 rounds cannot separate 1.16x from noise
    a = [1.0 * d * rng.lognormal(0, 0.3, 100) for d in (0.75, 1.0, 1.25)]
    b = [1.16 * d * rng.lognormal(0, 0.3, 100) for d in (1.25, 0.8, 1.0)]
    v = compare_pair("ring", "ps", a, b)
    assert v.winner is None, v.text()
    assert v.ratio.low < 1 < v.ratio.high


def test_deterministic_with_seed():
    rng = np.random.default_rng(4)
    a, b = rounds(rng, 1.0, 0.2, n=1), rounds(rng, 1.05, 0.2, n=1)  # one round: bootstrap only
    assert ratio_interval(a, b, seed=7) == ratio_interval(a, b, seed=7)
    assert ratio_interval(a, b, seed=7) != ratio_interval(a, b, seed=8)


def test_one_round_interval_is_the_step_spread():
    rng = np.random.default_rng(5)
    one = [rng.lognormal(0, 0.3, 300)]
    iv = speed_interval(one, work=64)
    assert iv.low < iv.value < iv.high
    assert 0.005 < iv.half_width() < 0.2  # not a fake 0%
    calm = speed_interval([np.full(300, 0.01)], work=64)
    assert calm.half_width() == 0 and calm.value == pytest.approx(6400)


def test_work_scales_speed():
    """Dedicated servers: fewer workers, smaller global batch: speeds compare samples/s."""
    t = [np.full(50, 0.1)]
    v = ratio_interval(t, t, work_a=192, work_b=256)
    assert v.value == pytest.approx(0.75)


def test_floor_and_same_algorithm():
    from mpicomm.analysis.verdict import Interval

    r = Interval(1.1, 1.05, 1.15)
    assert decide("a", "b", r).winner == "a"
    assert decide("a", "b", r, floor=1.08).winner is None  # within the measured noise floor
    v = decide("auto", "ring", r, same_algorithm=True)
    assert v.winner is None and "same algorithm" in v.text()


def test_crossovers():
    from mpicomm.analysis.verdict import Interval

    def v(x):
        lo, hi = (x * 0.97, x * 1.03)
        return decide("rd", "ring", Interval(x, lo, hi))

    sizes = [8, 64, 512, 4096, 32768]
    got = crossovers(sizes, [v(2.0), v(1.5), v(1.01), v(0.7), v(0.5)])
    assert len(got) == 1
    c = got[0]
    assert (c["from"], c["to"], c["low"], c["high"]) == ("rd", "ring", 64, 4096)
    assert 512 <= c["estimate"] <= 4096
    assert crossovers(sizes, [v(2.0)] * 5) == []


def test_cpu_sharing_warning():
    assert cpu_sharing_warning(2, cores=2) is None
    assert "4 ranks share 2 cores" in cpu_sharing_warning(4, cores=2)


def test_table_times_share_one_estimator():
    """issue 19 item 7: comm ms (a mean) exceeded step ms (a median): 3.66 against 2.87."""
    from mpicomm.analysis.report import format_table

    rec = {"strategy": "ring", "ranks": 2, "workers": 2, "step_time_median_s": 2.87e-3,
           "step_time_p90_s": 9.0e-3, "step_time_mean_s": 4.1e-3, "comm_s": 3.66e-3,
           "comm_share": 3.66 / 4.1}
    header, _, row = format_table([rec]).splitlines()
    cells = dict(zip(re.split(r"\s{2,}", header.strip()), row.split(), strict=True))
    assert float(cells["step ms"]) >= float(cells["comm ms"]) == 3.66
    assert cells["step ms"] == "4.10" and "p90" not in header


def test_late_rank_needs_more_than_noise():
    """issue 19 item 7: 'rank 1 holds the others back' for last in 50% of 10 calls (noise)."""
    from mpicomm.analysis.verdict import late_rank

    assert late_rank([0.2, 0.5, 0.2, 0.1], 10) is None        # 5 of 10 among 4: 8% by chance
    assert late_rank([0.5, 0.5], 1000) is None                 # 2 ranks: 50% is chance itself
    assert late_rank([0.1, 0.7, 0.1, 0.1], 10) is None         # 7 of 10: 0.35% > 1%/4
    assert late_rank([0.05, 0.85, 0.05, 0.05], 200) == 1       # 170 of 200: no chance
    assert late_rank([None, 0.02, 0.96, 0.02], 50) == 2        # a server (None) is not counted
    assert late_rank([0.9, 0.1], 20) == 0                      # 18 of 20 of 2: 2e-4 by chance


def test_one_strategy_compare_is_a_measurement_not_a_failure():
    """issue 19 item 7: `compare --strategies ring` read like a failed comparison."""
    from mpicomm.analysis.reading import verdict_lines

    (line,) = verdict_lines([], 1.0, 3, names=["ring"])
    assert "ring alone" in line and "fewer" not in line and "nothing" not in line
    assert "fewer than two" in verdict_lines([], 1.0, 3, names=["ring", "ps"])[0]


def test_prediction_summary_names_the_fastest_per_size_range():
    """issue 19 item 7: `model --predict` printed 364 rows and no summary."""
    from mpicomm.analysis.prediction import best_lines

    rows = [{"ranks": p, "bytes": n, "strategy": s, "predicted_us": t}
            for p in (8, 64) for n in (1024, 2048, 4096, 8192)
            for s, t in (("native", 10.0 + n / (100 if p == 64 else 1e9)),
                         ("ring", 30.0 + n / 1000), ("ps", None))]
    assert best_lines(rows) == [
        "8 ranks: fastest native at every size",
        "64 ranks: fastest native up to 2 KiB, ring from 4 KiB",
    ]


def test_an_interval_always_holds_its_own_point():
    """A skewed redraw (every draw above the point) must not give an interval that leaves the
    point out: bench's vs column printed 0.7715 with an interval of 0.7749-... (CI, 2026-12-01)."""
    from mpicomm.analysis.verdict import _interval

    iv = _interval(0.77, np.linspace(0.775, 0.80, 1000))
    assert iv.low <= iv.value <= iv.high
    iv = _interval(1.5, np.linspace(1.0, 1.2, 1000))
    assert iv.low <= iv.value <= iv.high


def test_a_rank_last_by_a_hair_holds_nobody_back():
    """Before: `train --clock virtual` on 2 balanced ranks printed "rank 1 holds the others
    back: ... it waits 2.03 ms per call, the others 2.03 ms" (last at every call by µs)."""
    from mpicomm.analysis.verdict import holds_back

    assert not holds_back(2.03e-3, 2.03e-3)          # the same wait: nobody held back
    assert not holds_back(2.01e-3, 2.10e-3)          # 4% more: an algorithm's last message
    assert holds_back(1.0e-3, 26e-3)                 # a 25 ms straggler
    assert holds_back(0.0, 1e-4) and not holds_back(0.0, 0.0)
