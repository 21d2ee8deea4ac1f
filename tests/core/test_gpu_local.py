"""The GPU of a local rank (core.gpu.local_device): ranks of a node take its GPUs in turn."""

import pytest

from mpicomm.core.errors import ConfigError
from mpicomm.core.gpu import local_device


def test_local_ranks_take_the_gpus_in_turn():
    assert [local_device(r, 4) for r in range(6)] == [0, 1, 2, 3, 0, 1]
    assert [local_device(r, 1) for r in range(3)] == [0, 0, 0]  # one visible: that one


def test_no_visible_gpu_is_one_line():
    with pytest.raises(ConfigError, match="sees 0 GPUs"):
        local_device(0, 0)
