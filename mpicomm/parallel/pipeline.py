"""Pipeline schedules: which micro-batch each stage runs forward (F) or backward (B), in order.

    sched = schedule("1f1b", stages=4, micro=8)   # sched[s]: stage s's [("F", 0), ("F", 1), ...]
    sim = simulate(sched)                          # slot counts: makespan, bubble, peak held

The MLP's layers are split over P stages (contiguous layer ranges); a step's
batch is cut into M micro-batches. Stage s runs F(m) once stage s−1 has run
F(m) (it needs the activation), and B(m) once stage s+1 has run B(m) (it needs
the gradient) — the last stage's B(m) follows its own F(m).

1. GPipe (Huang et al. 2019): every stage runs F(0..M−1), then B(0..M−1). A
   stage holds the activations of all M micro-batches at once.
2. 1F1B (PipeDream-flush, Narayanan et al. 2021): stage s runs min(P−1−s, M)
   warm-up forwards, then alternates one forward and one backward, then drains
   the remaining backwards. A stage holds at most min(P−s, M) micro-batches.

Both take the same time: with a forward and a backward costing one slot each,
a step is 2(M+P−1) slots of which each stage works 2M, so the idle share — the
*bubble* — is (P−1)/(M+P−1). ``simulate`` runs a schedule with these equal
slot costs (any costs may be given, per stage too) and counts it; the runner
measures it with the clock beside.

With unequal stages the step is longer than its busiest stage's work by the fill
and the drain: ``busiest_bubble`` = 1 − max busy / makespan, what the runner
measures. Stage 0 computes no input gradient, so its B costs one matmul per layer
where the others' cost two: with t_F = 1, t_B = 2 elsewhere and 1 on stage 0, the
drain is shorter by t_B/2 and the bubble is 8/(3M+8) at P = 4 (0.400, 0.250,
0.143 for M = 4, 8, 16) against 9/(3M+9) for equal stages.

Cost per step per stage boundary (B rows, width w of the boundary's activation,
b bytes per element): B·w·b forward plus B·w·b backward, in M messages each:
2M·α + 2·B·w·b·β. The step: (M+P−1)·(t_F + t_B) + the boundary messages on
the critical path, against M·(t_F + t_B)·P for one stage doing it all.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SCHEDULES", "schedule", "simulate", "Simulation", "bubble_formula", "split_layers"]

SCHEDULES = ("gpipe", "1f1b")


def schedule(kind: str, stages: int, micro: int) -> list[list[tuple[str, int]]]:
    """Return each stage's ordered actions ``("F"|"B", micro_batch)`` for one step.

    Raises ``ValueError`` for an unknown ``kind`` or counts below 1.
    """
    if kind not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {kind!r}")
    if stages < 1 or micro < 1:
        raise ValueError(f"need stages >= 1 and micro-batches >= 1, got {stages}, {micro}")
    out = []
    for s in range(stages):
        if kind == "gpipe":                                                 # 1.
            acts = [("F", m) for m in range(micro)] + [("B", m) for m in range(micro)]
        else:                                                               # 2.
            warm = min(stages - 1 - s, micro)
            acts = [("F", m) for m in range(warm)]
            for i in range(micro - warm):
                acts += [("F", warm + i), ("B", i)]
            acts += [("B", m) for m in range(micro - warm, micro)]
        out.append(acts)
    return out


@dataclass
class Simulation:
    """A schedule run with fixed slot costs: the step's length and each stage's work and memory."""

    makespan: float
    busy: list[float]            # per stage: time spent running F or B
    peak_held: list[int]         # per stage: most micro-batches forwarded, not yet backwarded

    @property
    def bubble(self) -> float:
        """Idle share of the step, over all stages: 1 − Σ busy / (P · makespan)."""
        return 1.0 - sum(self.busy) / (len(self.busy) * self.makespan)

    @property
    def busiest_bubble(self) -> float:
        """Idle share of the busiest stage: 1 − max busy / makespan (the fill and the drain)."""
        return 1.0 - max(self.busy) / self.makespan


def simulate(sched: list[list[tuple[str, int]]], f_cost: float | list[float] = 1.0,
             b_cost: float | list[float] = 1.0) -> Simulation:
    """Run ``sched`` with every F costing ``f_cost`` and every B ``b_cost`` (one number, or
    one per stage); raise on deadlock."""
    P = len(sched)
    fc = f_cost if isinstance(f_cost, list) else [f_cost] * P
    bc = b_cost if isinstance(b_cost, list) else [b_cost] * P
    done: dict[tuple[str, int, int], float] = {}  # (op, stage, micro) -> finish time
    pos, free = [0] * P, [0.0] * P
    busy, held, peak = [0.0] * P, [0] * P, [0] * P
    while any(pos[s] < len(sched[s]) for s in range(P)):
        moved = False
        for s in range(P):
            if pos[s] == len(sched[s]):
                continue
            op, m = sched[s][pos[s]]
            need = (("F", s - 1, m) if s > 0 else None) if op == "F" else \
                (("B", s + 1, m) if s < P - 1 else ("F", s, m))
            if need is not None and need not in done:
                continue
            cost = fc[s] if op == "F" else bc[s]
            start = max(free[s], done[need] if need is not None else 0.0)
            free[s] = done[(op, s, m)] = start + cost
            busy[s] += cost
            held[s] += 1 if op == "F" else -1
            peak[s] = max(peak[s], held[s])
            pos[s] += 1
            moved = True
        if not moved:
            raise ValueError(f"schedule deadlocks at positions {pos}")
    return Simulation(max(free), busy, peak)


def bubble_formula(stages: int, micro: int) -> float:
    """Return (P−1)/(M+P−1), the bubble of GPipe and 1F1B with equal slot costs."""
    return (stages - 1) / (micro + stages - 1)


def split_layers(linears: int, stages: int) -> list[tuple[int, int]]:
    """Return each stage's ``[first, last)`` linear layers: contiguous, sizes differing by <= 1.

    Raises ``ValueError`` when there are fewer layers than stages.
    """
    if stages > linears:
        raise ValueError(f"{stages} pipeline stages for {linears} layers: each stage needs one")
    base, extra = divmod(linears, stages)
    out, lo = [], 0
    for s in range(stages):
        hi = lo + base + (1 if s < extra else 0)
        out.append((lo, hi))
        lo = hi
    return out
