"""The workers' pushes in time order: the verdict's sample and the loss history of a PS run.

In async/ssp runs workers do not take steps together, so "step k" means a
different moment on each worker. Here every worker's step ends (seconds since
the run's common start, a barrier) and losses are gathered once, merged in time
order and cut into windows of W pushes: one window is one global batch,
whoever pushed it. sync runs keep the allreduce loop's per-step view.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mpicomm.train.summary import HISTORY_POINTS, warm_steps

__all__ = ["Timeline", "gather"]


class Timeline:
    """Every worker's (end time, loss, step seconds) per step; empty rows for servers."""

    def __init__(self, parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]], W: int) -> None:
        self.parts = [p for p in parts if len(p[0])]
        self.W = W
        ends = np.concatenate([p[0] for p in self.parts]) if self.parts else np.zeros(0)
        order = np.argsort(ends, kind="stable")
        self.ends = ends[order]
        self.losses = (np.concatenate([p[1] for p in self.parts])[order] if self.parts
                       else np.zeros(0))

    def step_series(self, mode: str) -> list[float]:
        """Seconds per global batch, the verdict's sample, without each worker's warm steps.

        sync: each step's mean over workers, as the allreduce loop. async/ssp: the
        length of each window of W merged pushes. Single gaps would not do: ssp
        releases workers in bursts, so their median is ~0.
        """
        if not self.parts:
            return []
        if mode == "sync":
            rows = [p[2][warm_steps(len(p[2])) :] for p in self.parts]
            n = min(len(r) for r in rows)
            return np.mean([r[:n] for r in rows], axis=0).tolist() if n else []
        timed = np.sort(np.concatenate([p[0][warm_steps(len(p[0])) :] for p in self.parts]))
        return np.diff(timed[:: self.W]).tolist()

    def history(self) -> dict[str, list]:
        """Loss per window of W pushes against the window's end (async/ssp loss history)."""
        n = len(self.ends) // self.W
        if n == 0:
            return {"loss_history_step": [], "loss_history": [], "wall_s_history": []}
        loss = self.losses[: n * self.W].reshape(n, self.W).mean(axis=1)
        wall = self.ends[self.W - 1 : n * self.W : self.W]
        idx = np.arange(n)[:: max(1, -(-n // HISTORY_POINTS))]
        return {"loss_history_step": (idx + 1).tolist(), "loss_history": loss[idx].tolist(),
                "wall_s_history": wall[idx].tolist()}


def gather(comm: Any, out: dict | None, W: int) -> Timeline:
    """Collective: every rank's steps (servers send nothing) -> one ``Timeline`` on all ranks."""
    empty = np.zeros(0)
    mine = (out["ends"], out["losses"], out["times"][:, 0]) if out else (empty, empty, empty)
    return Timeline(comm.allgather(mine), W)  # once per run, off the hot path
