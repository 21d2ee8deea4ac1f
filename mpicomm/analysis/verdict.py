"""Verdicts that respect noise: "A beats B" only when the difference exceeds this run's noise.

Used by ``compare`` (step times of training runs) and ``bench`` (per-call times).
A sample is a list of rounds, each a 1-D array of times (seconds or µs: only
ratios are reported). The method, in three sentences (docs/compare.md):

1. Each round's times are summarised by their median, and a strategy's speed
   is its work (samples per step, or 1 for a call) over the mean of its round
   medians.
2. A bootstrap redraws the steps inside each round (and the rounds, the same
   for both strategies since they took turns) 2,000 times with a fixed seed,
   the middle 95% of the redrawn speed ratios is the interval, and with three
   rounds or more it is widened to at least the Student-t interval of the
   per-round ratios (a bootstrap of three rounds alone would be too narrow).
3. A strategy wins only when the whole interval lies beyond 1 (or beyond the
   noise floor measured between two runs of one algorithm); otherwise the
   verdict is a tie, printed with its interval.

With one round only step-to-step noise is resampled; with several rounds the
round-to-round drift of a shared machine is in the interval too. NumPy only.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mpicomm.core import clock

__all__ = ["Interval", "Verdict", "speed_interval", "ratio_interval", "decide", "compare_pair",
           "crossovers", "cpu_sharing_warning", "late_rank", "holds_back", "LEVEL",
           "BOOTSTRAPS"]

LEVEL = 0.95       # coverage of every interval
BOOTSTRAPS = 2000  # redraws (fewer for very long samples, to bound memory)
_MAX_DRAWS = 4_000_000
MIN_ROUNDS_T = 3  # from 3 rounds on, the interval is at least the t interval of round ratios
# Student-t 97.5% quantiles by degrees of freedom (a 95% two-sided interval; >30: 1.96)
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
         9: 2.262, 10: 2.228, 12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


@dataclass(frozen=True)
class Interval:
    """A point estimate and its ``LEVEL`` bootstrap interval."""

    value: float
    low: float
    high: float

    def half_width(self) -> float:
        """Half the interval's width relative to the value (the table's ± column)."""
        return (self.high - self.low) / 2 / self.value if self.value > 0 else float("nan")


@dataclass(frozen=True)
class Verdict:
    """Speed of ``a`` over speed of ``b`` (>1: a faster), its interval, and who won."""

    a: str
    b: str
    ratio: Interval
    winner: str | None  # a, b, or None: a tie
    same_algorithm: bool = False

    def text(self, exact: bool = False) -> str:
        """One clause; ``exact``: a deterministic clock's ratio, printed without an interval."""
        r = self.ratio
        ci = f"{r.value:.2f}x, 95% interval {r.low:.2f}-{r.high:.2f}x"
        if exact:
            ci = f"{r.value:.2f}x"
            shown = r.value if self.winner != self.b else 1 / r.value
            if self.winner is not None and not self.same_algorithm:
                loser = self.b if self.winner == self.a else self.a
                return f"{self.winner} beats {loser}: {shown:.2f}x (exact)"
        if self.same_algorithm:
            return f"{self.a} = {self.b}: same algorithm here, a tie by construction ({ci})"
        if self.winner is None:
            return f"{self.a} ~ {self.b}: tie within the noise ({ci})"
        loser = self.b if self.winner == self.a else self.a
        shown = r if self.winner == self.a else Interval(1 / r.value, 1 / r.high, 1 / r.low)
        return (f"{self.winner} beats {loser}: {shown.value:.2f}x, 95% interval "
                f"{shown.low:.2f}-{shown.high:.2f}x")


def _rounds(sample: Sequence) -> list[np.ndarray]:
    rounds = [np.asarray(r, dtype=np.float64).ravel() for r in sample]
    rounds = [r[np.isfinite(r)] for r in rounds]
    rounds = [r for r in rounds if r.size]
    if not rounds:
        raise ValueError("verdict: a sample with no finite time")
    return rounds


def _redrawn_medians(rounds: list[np.ndarray], boots: int, rng: np.random.Generator) -> np.ndarray:
    """(rounds, boots) array: each round's median over its steps redrawn with replacement."""
    out = np.empty((len(rounds), boots))
    for k, r in enumerate(rounds):
        idx = rng.integers(0, r.size, size=(boots, r.size))
        out[k] = np.median(r[idx], axis=1)
    return out


def _centers(meds: np.ndarray, picks: np.ndarray) -> np.ndarray:
    """Mean over the picked rounds of each redraw: picks is (boots, rounds) of round indices."""
    return meds[picks, np.arange(meds.shape[1])[:, None]].mean(axis=1)


def _boots(*samples: list[np.ndarray]) -> int:
    longest = max(r.size for s in samples for r in s)
    return int(min(BOOTSTRAPS, max(200, _MAX_DRAWS // longest)))


def _t975(df: int) -> float:
    return next((_T975[k] for k in sorted(_T975) if k >= df), 1.96)


def _interval(point: float, draws: np.ndarray, per_round: np.ndarray | None = None) -> Interval:
    """Percentile interval of ``draws``, widened to the t interval of ``per_round`` (logs)."""
    lo, hi = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    lo, hi = min(lo, point), max(hi, point)  # a skewed redraw can leave the point outside
    if per_round is not None and per_round.size >= MIN_ROUNDS_T:
        half = _t975(per_round.size - 1) * per_round.std(ddof=1) / np.sqrt(per_round.size)
        lo = min(lo, point * np.exp(-half))
        hi = max(hi, point * np.exp(half))
    return Interval(float(point), float(lo), float(hi))


def speed_interval(sample: Sequence, work: float = 1.0, seed: int = 0,
                   widen: bool = True) -> Interval:
    """Speed = work / (mean of round medians), with its bootstrap interval.

    ``widen=False`` keeps the bootstrap interval alone (no Student-t widening
    over rounds): a description of the spread rather than a test.
    """
    rounds = _rounds(sample)
    rng = np.random.default_rng(seed)
    boots = _boots(rounds)
    meds = _redrawn_medians(rounds, boots, rng)
    picks = _picks(len(rounds), boots, rng)
    medians = np.array([np.median(r) for r in rounds])
    point = work / medians.mean()
    return _interval(point, work / _centers(meds, picks), np.log(medians) if widen else None)


def _picks(n_rounds: int, boots: int, rng: np.random.Generator) -> np.ndarray:
    if n_rounds == 1:
        return np.zeros((boots, 1), dtype=np.int64)
    return rng.integers(0, n_rounds, size=(boots, n_rounds))


def ratio_interval(a: Sequence, b: Sequence, work_a: float = 1.0, work_b: float = 1.0,
                   seed: int = 0) -> Interval:
    """Speed of ``a`` over speed of ``b``, with a paired bootstrap interval.

    Args:
        a, b: rounds of times (round k of a and of b ran in the same turn, so
            rounds are redrawn in pairs when both have the same number).
        work_a, work_b: work per time unit of each (global batch per step; 1 per call).
        seed: the bootstrap's seed (same seed, same interval).
    """
    ra, rb = _rounds(a), _rounds(b)
    rng = np.random.default_rng(seed)
    boots = _boots(ra, rb)
    ma, mb = _redrawn_medians(ra, boots, rng), _redrawn_medians(rb, boots, rng)
    if len(ra) == len(rb):
        pa = pb = _picks(len(ra), boots, rng)
    else:
        pa, pb = _picks(len(ra), boots, rng), _picks(len(rb), boots, rng)
    med_a, med_b = (np.array([np.median(r) for r in x]) for x in (ra, rb))
    point = (work_a / med_a.mean()) / (work_b / med_b.mean())
    if len(ra) == len(rb):  # paired: the ratio within each turn
        per_round = np.log(med_b / med_a)
    else:  # unpaired: the spread of both, combined
        per_round = np.concatenate([np.log(med_a) - np.log(med_a).mean(),
                                    np.log(med_b) - np.log(med_b).mean()])
    return _interval(point, (work_a / _centers(ma, pa)) / (work_b / _centers(mb, pb)),
                     per_round)


def decide(a: str, b: str, ratio: Interval, floor: float = 1.0,
           same_algorithm: bool = False) -> Verdict:
    """A wins if the interval lies above ``floor``, B if below 1/floor, else a tie.

    ``floor`` (>= 1) is an extra noise margin, e.g. the largest gap measured
    between two runs of one algorithm in the same job.
    """
    floor = max(float(floor), 1.0)
    winner = None
    if not same_algorithm:
        if ratio.low > floor:
            winner = a
        elif ratio.high < 1 / floor:
            winner = b
    return Verdict(a, b, ratio, winner, same_algorithm)


def compare_pair(a: str, b: str, sample_a: Sequence, sample_b: Sequence, work_a: float = 1.0,
                 work_b: float = 1.0, seed: int = 0, floor: float = 1.0,
                 same_algorithm: bool = False) -> Verdict:
    """``decide`` on the ``ratio_interval`` of two samples."""
    ratio = ratio_interval(sample_a, sample_b, work_a, work_b, seed)
    return decide(a, b, ratio, floor, same_algorithm)


def crossovers(sizes: Sequence[int], verdicts: Sequence[Verdict]) -> list[dict]:
    """Sizes where the significant winner changes, from one verdict per size (ascending).

    Returns one dict per change: ``from``/``to`` (the winners before and after),
    ``low``/``high`` (the last size the first won and the first size the second
    won: the crossover lies between them; ties in between are the noise), and
    ``estimate`` (where the ratio's point estimates cross 1, log-interpolated).
    """
    out: list[dict] = []
    last: tuple[int, str] | None = None
    for i, (n, v) in enumerate(zip(sizes, verdicts, strict=True)):
        if v.winner is None:
            continue
        if last is not None and v.winner != last[1]:
            j = last[0]
            out.append({"from": last[1], "to": v.winner, "low": int(sizes[j]), "high": int(n),
                        "estimate": _cross_estimate(sizes[j : i + 1], verdicts[j : i + 1])})
        last = (i, v.winner)
    return out


def _cross_estimate(sizes: Sequence[int], verdicts: Sequence[Verdict]) -> int:
    logs = [np.log(v.ratio.value) for v in verdicts]
    for k in range(len(logs) - 1):
        if (logs[k] > 0) != (logs[k + 1] > 0):
            x0, x1 = np.log(sizes[k]), np.log(sizes[k + 1])
            t = logs[k] / (logs[k] - logs[k + 1])
            return int(round(float(np.exp(x0 + t * (x1 - x0)))))
    return int(sizes[-1])


def cpu_sharing_warning(ranks_on_host: int, cores: int | None = None) -> str | None:
    """The one line for more ranks than cores on one host under the wall clock: the scheduler
    decides such timings, so callers give no verdict. None when the ranks fit, or under the
    virtual clock (compute is charged as CPU time there, whoever shares the cores)."""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
    if ranks_on_host <= cores or clock.name() == "virtual":
        return None
    return (f"no verdict: {ranks_on_host} ranks share {cores} cores under the wall clock, so "
            "the scheduler decides which strategy is faster; for a meaningful answer run with "
            "--clock virtual (a modelled cluster, docs/virtual_clock.md)")


def late_rank(last_share: Sequence[float | None], calls: int, alpha: float = 0.01) -> int | None:
    """The rank last to arrive at the collective calls beyond chance, or None.

    ``last_share[r]``: the fraction of ``calls`` calls rank ``r`` reached last (None:
    not a participant). Without a late rank each of the P participants is last with
    probability 1/P, so a rank is named only when (1) it is last in at least
    max(50%, 1.5/P) of the calls and (2) being last that often by chance is less likely
    than ``alpha``/P (binomial tail, Bonferroni over the P ranks). Last in 5 of 10
    calls among 4 ranks happens by chance 8% of the time: not named.
    """
    who = [r for r, s in enumerate(last_share) if s is not None]
    p = len(who)
    if p < 2 or calls < 1:
        return None
    top = max(who, key=lambda r: last_share[r])
    share = float(last_share[top])
    k = int(round(share * calls))
    if share < max(0.5, 1.5 / p):
        return None
    return top if _binomial_tail(k, calls, 1.0 / p) < alpha / p else None


HOLD_BACK_SHARE = 0.1  # the others' extra wait, as a share of theirs, that makes a late rank matter


def holds_back(own_wait_s: float, others_wait_s: float, share: float = HOLD_BACK_SHARE) -> bool:
    """Whether a rank last to arrive (``late_rank``) costs the others anything worth a note.

    Last to arrive says who comes last, not by how much: a rank that leaves each
    call a few microseconds after its peers (an algorithm's last message, under the
    virtual clock) is last at every call and holds nobody back. The others wait for it
    what they wait beyond it, so it matters when ``others_wait_s - own_wait_s`` is at
    least ``share`` of ``others_wait_s`` (mean seconds inside each call).
    """
    return others_wait_s > 0 and others_wait_s - own_wait_s >= share * others_wait_s


def _binomial_tail(k: int, n: int, q: float) -> float:
    """P(X >= k) for X ~ Binomial(n, q), in log space (n up to tens of thousands)."""
    ks = np.arange(k, n + 1)
    lg = np.vectorize(math.lgamma)
    logs = (math.lgamma(n + 1) - lg(ks + 1) - lg(n - ks + 1)
            + ks * math.log(q) + (n - ks) * math.log1p(-q))
    return float(np.exp(logs).sum()) if ks.size else 0.0
