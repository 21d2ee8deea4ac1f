"""PSEngine without MPI: the engine contract over a fake client — accumulation is the mean of
the micro-batches, the push carries the step's lr, no bucket reaches the loop's optimizer, the
stop flag and close (once) come from the client."""

import numpy as np
import pytest

from mpicomm.core.errors import ConfigError
from mpicomm.engine import PSEngine, ps_codec


class FakeClient:
    def __init__(self, stop_after=None):
        self.pushed, self.finished, self.stop_after = [], 0, stop_after

    def push_pull(self, grads, params, step, lr):
        self.pushed.append((grads.copy(), step, lr))
        params -= lr * grads  # a server's plain SGD
        return self.stop_after is not None and len(self.pushed) >= self.stop_after

    def snapshot(self, momentum):
        momentum[...] = 7.0

    def finish(self, params):
        self.finished += 1


def test_accumulation_pushes_the_mean_once():
    rng = np.random.default_rng(0)
    params, grads = np.zeros(11), np.zeros(11)
    client = FakeClient()
    eng = PSEngine(client, params, grads, accumulate=3)
    micro = [rng.standard_normal(11) for _ in range(3)]
    eng.start_step(4, 0.5)
    for k, g in enumerate(micro):
        grads[...] = g
        eng.backward(iter([1, 0]), last=k == 2)
    assert client.pushed == []  # nothing leaves before reduced()
    assert list(eng.reduced()) == []  # the servers applied the optimizer
    sent, step, lr = client.pushed[0]
    np.testing.assert_allclose(sent, np.mean(micro, axis=0), rtol=1e-14)
    assert (step, lr) == (4, 0.5)
    np.testing.assert_allclose(params, -0.5 * np.mean(micro, axis=0), rtol=1e-14)
    total, exposed = eng.take_times()
    assert total == exposed > 0 and eng.take_times() == (0.0, 0.0)


def test_stop_state_and_close_once():
    params, grads = np.zeros(3), np.ones(3)
    client = FakeClient(stop_after=2)
    eng = PSEngine(client, params, grads)
    for step in range(2):
        eng.start_step(step, 0.1)
        eng.backward(iter([0]))
        list(eng.reduced())
    assert eng.stopped
    v = np.zeros(3)
    eng.sync_state(v)
    assert (v == 7.0).all()
    eng.close()
    eng.close()
    assert client.finished == 1
    assert eng.describe()["buckets"] == 1 and eng.buckets == []


def test_codecs_under_ps():
    assert ps_codec("none") is None
    assert ps_codec("int8").name == "int8" and ps_codec("fp16").name == "fp16"
    with pytest.raises(ConfigError, match="fp16 or int8 only"):
        ps_codec("topk:0.1")
