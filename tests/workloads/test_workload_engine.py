"""The real gradient engine buckets and reduces a real model's tensor list (ResNet-50's 161
tensors, VGG-16's fc6) under mpiexec: every layer's reduced gradient is the mean over the
ranks, for the ring, the parameter server and MPI's own allreduce, with and without overlap."""

from pathlib import Path

import pytest
from mpi_harness import run_mpi

SCRIPT = Path(__file__).resolve().parent / "scripts" / "workload_engine.py"


@pytest.mark.parametrize("model, strategy, bucket_mb, overlap, ranks", [
    ("resnet50", "ring", "25", "1", 3),
    pytest.param("resnet50", "ps", "4", "0", 2, marks=pytest.mark.slow),
    ("inception3", "native", "0", "1", 2),
])
def test_the_engine_reduces_every_layer_of_a_real_model(model, strategy, bucket_mb, overlap,
                                                        ranks):
    res = run_mpi(ranks, ["-m", "mpi4py", str(SCRIPT), model, strategy, bucket_mb, overlap],
                  timeout=180)
    res.expect_ok()
