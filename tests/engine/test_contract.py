"""The engine contract has a type (``engine.base.Engine``): the loop calls it, never probes it."""

import ast

import numpy as np
import pytest
from mpi_harness import ROOT

from mpicomm.engine import Engine, GradEngine, PSEngine
from mpicomm.engine.zero import ZeroEngine


def test_every_engine_keeps_the_one_contract():
    for cls in (GradEngine, PSEngine, ZeroEngine):
        assert issubclass(cls, Engine), cls
        # the shared parts are written once, in the base class
        for name in ("take_times", "close", "ready_for"):
            assert name not in vars(cls) or name == "ready_for" and cls is GradEngine, (cls, name)
    with pytest.raises(TypeError):
        Engine()  # backward, reduced and describe are each engine's own


class _Client:
    finished = 0

    def finish(self, params):
        self.finished += 1


def test_close_runs_once_and_times_reset():
    client = _Client()
    e = PSEngine(client, np.zeros(4), np.zeros(4))
    e.comm_total_s, e.comm_exposed_s = 2.0, 1.0
    assert e.take_times() == (2.0, 1.0) and e.take_times() == (0.0, 0.0)
    e.close()
    e.close()
    assert client.finished == 1
    assert list(e.ready_for(0)) == [] and not e.overlap_forward and e.server_params is None


def test_the_loop_probes_no_engine_attribute():
    """``getattr(engine, ...)`` stood in for a contract in train/loop.py."""
    tree = ast.parse((ROOT / "mpicomm" / "train" / "loop.py").read_text())
    probes = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
              and getattr(n.func, "id", "") in ("getattr", "hasattr")
              and isinstance(n.args[0], ast.Name) and n.args[0].id == "engine"]
    assert probes == []
