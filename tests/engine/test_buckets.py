"""Bucket plans: backward order, contiguous views, size rule, one per tensor at 0; the engine
on a stub reducer (one process): nothing is sent before backward wrote it, accumulation."""

import threading
import time

import numpy as np
import pytest

from mpicomm.engine import GradEngine, plan_buckets
from mpicomm.nn import MLP, layer_tensors


def test_buckets_cover_the_buffer_in_backward_order_without_gaps():
    layers = (64, 64, 64, 64, 10)
    tensors = layer_tensors(layers)
    n = tensors[-1][2]
    for bucket_bytes in (0, 1, 4096, 20_000, 10**9):
        plan = plan_buckets(tensors, 4, bucket_bytes)
        assert plan[0].hi == n and plan[-1].lo == 0  # last layer first
        for a, b in zip(plan, plan[1:], strict=False):
            assert a.lo == b.hi and a.ready_layer >= b.ready_layer  # contiguous, in order
        assert sum(b.tensors for b in plan) == len(tensors)
        for b in plan[:-1]:  # every closed bucket reached the size, and only just
            assert b.size * 4 >= bucket_bytes
    assert len(plan_buckets(tensors, 4, 0)) == len(tensors) == 8
    assert len(plan_buckets(tensors, 4, 10**9)) == 1
    # 32 KiB: b3 W3 b2 W2 (19 KB) + b1 W1 reaches 35.9 KB -> 6 tensors; then b0 W0
    mid = plan_buckets(tensors, 4, 64 * 64 * 4 * 2)
    assert [b.tensors for b in mid] == [6, 2] and [b.ready_layer for b in mid] == [1, 0]
    with pytest.raises(ValueError):
        plan_buckets(tensors, 4, -1)


def test_ready_layer_is_the_lowest_layer_in_the_bucket():
    tensors = layer_tensors((8, 8, 8, 4))
    for b in plan_buckets(tensors, 8, 300):
        layers = {t[0] for t in tensors if b.lo <= t[1] < b.hi}
        assert b.ready_layer == min(layers)


class SnapshotReducer:
    """One 'rank': mean = identity. Records what each call saw, slowly, on whatever thread."""

    rank, num_workers = 0, 1

    def __init__(self, delay=0.0):
        self.delay, self.seen, self.threads = delay, [], set()

    def allreduce(self, buf, op="sum", key=None):
        self.seen.append((buf.ctypes.data, buf.copy()))
        self.threads.add(threading.current_thread().name)
        time.sleep(self.delay)
        return buf


class SlowMLP(MLP):
    """Backward poisons every gradient with NaN first and takes 5 ms per layer."""

    def backward(self):
        self.grads[...] = np.nan
        for i in super().backward():
            yield i
            time.sleep(0.005)


@pytest.mark.parametrize("bucket_bytes", [0, 1500, 10**9])
@pytest.mark.parametrize("overlap", [True, False])
def test_no_bucket_is_sent_before_backward_has_written_all_of_it(bucket_bytes, overlap):
    layers = (12, 16, 16, 16, 3)
    model = SlowMLP(layers, seed=1, dtype="float64")
    ref = MLP(layers, seed=1, dtype="float64")
    x = np.random.default_rng(0).standard_normal((5, 12))
    y = np.array([0, 1, 2, 1, 0])
    ref.loss_and_grads(x, y)
    red = SnapshotReducer(delay=0.002)
    eng = GradEngine(red, model.grads, model.tensors, model.spans, bucket_bytes=bucket_bytes,
                     overlap=overlap)
    model.forward(x, y)
    eng.backward(model.backward())
    got = [b for b in eng.reduced()]
    eng.close()
    assert [b.index for b in got] == list(range(len(eng.buckets)))
    assert len(red.seen) == len(eng.buckets)
    for b, (addr, snap) in zip(eng.buckets, red.seen, strict=True):
        assert addr == model.grads[b.lo : b.hi].ctypes.data  # a view, no packing copy
        np.testing.assert_array_equal(snap, ref.grads[b.lo : b.hi])  # no NaN: fully written
    want_thread = "communication" if overlap and len(eng.buckets) > 1 else "MainThread"
    assert red.threads == {want_thread}


def test_accumulated_micro_batches_equal_the_big_batch():
    layers = (6, 10, 4)
    x = np.random.default_rng(1).standard_normal((12, 6))
    y = np.arange(12) % 4
    big = MLP(layers, seed=3, dtype="float64")
    big.loss_and_grads(x, y)
    model = MLP(layers, seed=3, dtype="float64")
    eng = GradEngine(SnapshotReducer(), model.grads, model.tensors, model.spans,
                     bucket_bytes=100, overlap=True, accumulate=3)
    for k in range(3):
        model.forward(x[4 * k : 4 * k + 4], y[4 * k : 4 * k + 4])
        eng.backward(model.backward(), last=k == 2)
    list(eng.reduced())
    eng.close()
    np.testing.assert_allclose(model.grads, big.grads, rtol=0, atol=1e-14)
