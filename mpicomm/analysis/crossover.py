"""Measured crossovers: where the significant winner of two strategies changes with size.

``bench`` prints, per pair of strategies it ran, the sizes bracketing each
change of significant winner (``verdict.crossovers`` on one verdict per
size) beside the α-β-γ model's predicted crossover (``costmodel.predict`` over
powers of two). Rows carry ``_samples``: per-call times, rounds × calls.
"""

from __future__ import annotations

from mpicomm.analysis import verdict as V
from mpicomm.core.units import fmt_bytes

__all__ = ["measured_crossovers", "predicted_crossover", "crossover_lines"]


def _pair_verdicts(rows: list[dict], a: str, b: str, seed: int) -> tuple[list[int], list]:
    at = {(r["strategy"], r["bytes"]): r for r in rows}
    sizes = sorted({r["bytes"] for r in rows if (a, r["bytes"]) in at and (b, r["bytes"]) in at})
    vs = [V.compare_pair(a, b, at[(a, n)]["_samples"], at[(b, n)]["_samples"], seed=seed)
          for n in sizes]
    return sizes, vs


def measured_crossovers(rows: list[dict], names: list[str], seed: int = 1) -> list[dict]:
    """Per pair of strategies, the sizes where the significant winner changes (see verdict)."""
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            sizes, vs = _pair_verdicts(rows, a, b, seed)
            if len(sizes) < 2:
                continue
            wins = {s: sum(v.winner == s for v in vs) for s in (a, b)}
            out.append({"a": a, "b": b, "sizes": len(sizes), "wins": wins,
                        "ties": len(sizes) - wins[a] - wins[b],
                        "crossovers": V.crossovers(sizes, vs)})
    return out


def predicted_crossover(a: str, b: str, p: int, params, options: dict,
                        sizes=None) -> int | None | str:
    """First power-of-two size where the cost model's faster of ``a``, ``b`` changes.

    Returns the size, None when the same one is predicted faster everywhere,
    or "no formula" when the model has none for one of them.
    """
    from mpicomm.costmodel.formulas import predict

    sizes = sizes or [1 << k for k in range(3, 31)]
    sign = []
    for n in sizes:
        ta = predict(a, p, n, params, options, options.get("crossover_bytes"))
        tb = predict(b, p, n, params, options, options.get("crossover_bytes"))
        if ta is None or tb is None:
            return "no formula"
        sign.append(ta < tb)
    return next((int(n) for n, s0, s1 in zip(sizes[1:], sign, sign[1:], strict=False)
                 if s0 != s1), None)


def crossover_lines(rows: list[dict], names: list[str], p: int, params, options: dict,
                    seed: int = 1) -> tuple[list[str], list[dict]]:
    """Lines (and records) of measured crossovers beside the model's predicted ones."""
    found = measured_crossovers(rows, names, seed)
    lines = []
    for c in found:
        pred = None if params is None else predicted_crossover(c["a"], c["b"], p, params, options)
        c["predicted_bytes"] = pred
        model = ("model: no prediction" if pred is None and params is None else
                 f"model: {pred}" if isinstance(pred, str) else
                 "model: no crossover (one is predicted faster at every size)" if pred is None
                 else f"model predicts {fmt_bytes(pred)}")
        head = f"# {c['a']} vs {c['b']}: "
        if not c["crossovers"]:
            lead = (f"{c['a']} faster at {c['wins'][c['a']]}, {c['b']} at {c['wins'][c['b']]}, "
                    f"tie at {c['ties']} of {c['sizes']} sizes; no measured crossover")
            lines.append(head + lead + f"; {model}")
            continue
        parts = [f"{x['from']} -> {x['to']} between {fmt_bytes(x['low'])} and "
                 f"{fmt_bytes(x['high'])} (~{fmt_bytes(x['estimate'])})" for x in c["crossovers"]]
        lines.append(head + "measured " + "; ".join(parts) + f"; {model}")
    return lines, found
