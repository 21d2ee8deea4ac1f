"""One data-parallel training step predicted: compute per layer, buckets, overlap, throughput.

    compute = rate_compute(w, batch, samples_per_s)          # or device_compute(w, batch, dev)
    buckets = [(nbytes, ready_layer), ...]                    # engine.buckets.plan_buckets
    step = step_time(compute, buckets, comm, overlap=True)    # comm(nbytes) -> seconds
    step.samples_per_s(batch, p), step.scaling_efficiency(one_rank_step)

The timeline the gradient engine runs (``engine/grad_engine.py``):

1. forward: the layers in order, F = Σ fwd_i;
2. backward from the last layer to the first; layer i's gradient is final at
   F + Σ_{j ≥ i} bwd_j;
3. a bucket is ready once its lowest layer (``ready_layer``) is final; one communication
   thread reduces the buckets in order, each starting when it is ready and the previous one
   is done: end_k = max(ready_k, end_{k−1}) + comm(bytes_k);
4. after backward the training thread takes the buckets in order, waiting for each one's
   reduction, then running its SGD update (``update_s[k]``; the loop's ``train.sgd.SGD``,
   whose charge is ``sgd_update`` here), so the first buckets' updates run while the last
   ones are still on the wire:

       t = F + B;  for each bucket k:  t = max(t, end_k) + update_k;  step = t
                                                      (overlap, more than one bucket)
       step = F + B + Σ_k (comm(bytes_k) + update_k)  (no overlap, or one bucket: the
                                                       engine reduces after backward)

Throughput p·batch/step samples/s; weak-scaling efficiency = step(1 rank) / step(p ranks)
(the per-rank batch fixed). ``comm`` is the ONE cost function of the strategy
(``cluster_predict.cluster_time`` for a cluster), called per bucket, so fusion divides the
latency terms as the engine's buckets do.

Compute comes either from a measured single-device rate (``rate_compute``: batch/R seconds,
shared between the layers and between forward and backward in proportion to their FLOPs;
the optimizer is inside the measured rate) or from the device model (``device_compute``:
each of a layer's kernels a roofline, ``Device.seconds``; each bucket's SGD update as
``sgd_update`` counts it, the kernels the loop's optimizer runs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from mpicomm.core.errors import ConfigError
from mpicomm.workloads import Workload

__all__ = ["Compute", "Step", "rate_compute", "check_single_rate", "device_compute", "step_time",
           "sgd_update", "ITEMSIZE"]

ITEMSIZE = {"fp32": 4, "fp16": 2, "bf16": 2}  # bytes a value takes at each precision


@dataclass(frozen=True)
class Compute:
    """Seconds of each layer's forward and backward (forward order) and of each bucket's
    update (in the buckets' order; empty: inside a measured rate, nothing apart)."""

    fwd_s: tuple[float, ...]
    bwd_s: tuple[float, ...]
    update_s: tuple[float, ...]
    source: str

    @property
    def total_s(self) -> float:
        return sum(self.fwd_s) + sum(self.bwd_s) + sum(self.update_s)

    def update_of(self, k: int) -> float:
        """Seconds of bucket ``k``'s update (0 inside a measured rate)."""
        return self.update_s[k] if self.update_s else 0.0


def sgd_update(n: int, weight_decay: bool = True) -> tuple[float, float, int]:
    """(FLOPs, values moved, kernels) of the loop's SGD on ``n`` parameters (``train.sgd``
    charges exactly this): v *= mu; v += g; [g = p·wd; v += g;] g = v·lr; p -= g, each
    kernel 1 FLOP and 2-3 values an element."""
    if weight_decay:
        return 6.0 * n, 15.0 * n, 6
    return 4.0 * n, 10.0 * n, 4


@dataclass(frozen=True)
class Step:
    """One predicted step: its time and where it goes."""

    step_s: float
    compute_s: float
    comm_s: float  # the buckets' reductions, summed
    exposed_s: float  # the part of the step spent waiting for communication
    buckets: int

    def samples_per_s(self, batch: int, ranks: int) -> float:
        return ranks * batch / self.step_s

    def scaling_efficiency(self, one_rank: Step) -> float:
        return one_rank.step_s / self.step_s


def check_single_rate(samples_per_s: float) -> None:
    """Raise ``ConfigError`` unless ``samples_per_s`` is a finite number > 0."""
    if not (isinstance(samples_per_s, (int, float)) and 0 < samples_per_s < math.inf):
        raise ConfigError(f"--single-rate must be a number of samples/s > 0, got "
                          f"{samples_per_s!r}")


def rate_compute(w: Workload, batch: int, samples_per_s: float) -> Compute:
    """A measured one-device rate: batch/R seconds shared out by FLOPs (update inside it).
    ``model --predict --single-rate`` predicts with it and ``train``/``compare --model
    --single-rate`` charge it (``workloads.model.WorkloadModel``): one model."""
    check_single_rate(samples_per_s)
    total = batch / samples_per_s
    flops = w.fwd_flops + w.bwd_flops
    return Compute(tuple(total * layer.fwd_flops / flops for layer in w.layers),
                   tuple(total * layer.bwd_flops / flops for layer in w.layers), (),
                   f"measured {samples_per_s:g} samples/s on one device")


def device_compute(w: Workload, batch: int, device, precision: str = "fp32",
                   bucket_sizes: Sequence[int] | None = None,
                   weight_decay: bool = True) -> Compute:
    """Each layer's kernels (``Layer.fwd_kernels``, ``bwd_kernels``) on ``device``, each a
    roofline, as ``workloads.model.WorkloadModel`` charges them in a virtual run (and, for the
    ``mlp`` workload, as the loop's own MLP charges its kernels: ``workloads.kernels``).

    By default a layer is one kernel forward and one or two backward (dX, dW), moving its
    output written and read back (2·out per sample) and its weights read, each value at the
    precision's width; backward twice that. The update: the loop's
    SGD on each bucket of ``bucket_sizes`` elements (default: one bucket of the whole model),
    as ``sgd_update`` counts it (``weight_decay``: train's default 1e-4 is on), each value at
    the precision's width as ``core.flops.charge`` moves it.
    """
    itemsize = ITEMSIZE[precision]

    def seconds(kernels) -> float:
        return sum(device.seconds(f, v * itemsize, k, precision) for f, v, k in kernels)

    fwd = [seconds(layer.fwd_kernels(batch)) for layer in w.layers]
    bwd = [seconds(layer.bwd_kernels(batch)) for layer in w.layers]
    sizes = (w.num_params,) if bucket_sizes is None else bucket_sizes
    update = []
    for n in sizes:
        ops, values, kernels = sgd_update(n, weight_decay)
        update.append(device.seconds(ops, values * itemsize, kernels, precision))
    return Compute(tuple(fwd), tuple(bwd), tuple(update), f"device {device.name} ({precision})")


def step_time(compute: Compute, buckets: Sequence[tuple[float, int]],
              comm: Callable[[float], float], overlap: bool = True,
              floors: Sequence[float] | None = None) -> Step:
    """The step the engine runs (module docstring, steps 1-4).

    Args:
        compute: per-layer seconds.
        buckets: (bytes, ready_layer) in the order they are sent (backward order).
        comm: seconds of one reduction of that many bytes (the strategy's cost function).
        overlap: reduce on the communication thread during backward (the engine's default).
        floors: per bucket, the fewest seconds its reduction can take whatever the links
            (a transport's per-message rate: ``bench.step_predict.RpcRate``); None: none.
    """
    fwd = sum(compute.fwd_s)
    done, t = {}, fwd  # 2. when each layer's gradient is final
    for i in range(len(compute.bwd_s) - 1, -1, -1):
        t += compute.bwd_s[i]
        done[i] = t
    backward_end = t
    costs = [comm(nbytes) for nbytes, _ in buckets]
    if floors is not None:
        costs = [max(c, f) for c, f in zip(costs, floors, strict=True)]
    updates = [compute.update_of(k) for k in range(len(buckets))]
    if overlap and len(buckets) > 1:
        end, step = 0.0, backward_end
        for (_, layer), c, u in zip(buckets, costs, updates, strict=True):
            end = max(done[layer], end) + c  # 3. the communication thread
            step = max(step, end) + u  # 4. the training thread: wait, then update
    else:
        step = backward_end + sum(costs) + sum(updates)
    exposed = step - backward_end - sum(updates)
    return Step(step, compute.total_s, sum(costs), exposed, len(buckets))
