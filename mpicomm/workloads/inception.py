"""Inception-v3 as torchvision builds it (299×299 RGB, 1,000 classes, with the auxiliary
classifier: torchvision's default ``aux_logits=True``, whose weights train with the rest).

Source: torchvision ``models/inception.py`` (``Inception3``; Szegedy et al., "Rethinking
the Inception Architecture for Computer Vision", CVPR 2016, arXiv:1512.00567). Every
convolution is a ``BasicConv2d``: no bias, batch norm (weight, bias), ReLU. Parameters
are listed in torchvision's registration order (the auxiliary head after Mixed_6e).
"""

from __future__ import annotations

from mpicomm.workloads.layer import Layer, bn, conv, elementwise, linear
from mpicomm.workloads.workload import Workload

__all__ = ["inception3"]

K = int | tuple[int, int]


class _Net:
    """Collects layers; ``c`` adds one BasicConv2d at the current spatial size."""

    def __init__(self) -> None:
        self.layers: list[Layer] = []

    def c(self, name: str, cin: int, cout: int, k: K, size: int) -> int:
        self.layers.append(conv(f"{name}.conv", cin, cout, k, size, size))
        self.layers.append(bn(f"{name}.bn", cout, size * size))
        return cout

    def pool(self, name: str, elems: float, window: int) -> None:
        self.layers.append(elementwise(name, elems, float(window * window)))


def _a(n: _Net, name: str, cin: int, pool: int, s: int) -> int:
    n.c(f"{name}.branch1x1", cin, 64, 1, s)
    n.c(f"{name}.branch5x5_1", cin, 48, 1, s)
    n.c(f"{name}.branch5x5_2", 48, 64, 5, s)
    n.c(f"{name}.branch3x3dbl_1", cin, 64, 1, s)
    n.c(f"{name}.branch3x3dbl_2", 64, 96, 3, s)
    n.c(f"{name}.branch3x3dbl_3", 96, 96, 3, s)
    n.pool(f"{name}.avgpool", cin * s * s, 3)
    n.c(f"{name}.branch_pool", cin, pool, 1, s)
    return 64 + 64 + 96 + pool


def _b(n: _Net, name: str, cin: int, s: int) -> int:
    o = (s - 3) // 2 + 1
    n.c(f"{name}.branch3x3", cin, 384, 3, o)
    n.c(f"{name}.branch3x3dbl_1", cin, 64, 1, s)
    n.c(f"{name}.branch3x3dbl_2", 64, 96, 3, s)
    n.c(f"{name}.branch3x3dbl_3", 96, 96, 3, o)
    n.pool(f"{name}.maxpool", cin * o * o, 3)
    return 384 + 96 + cin


def _c(n: _Net, name: str, cin: int, c7: int, s: int) -> int:
    n.c(f"{name}.branch1x1", cin, 192, 1, s)
    n.c(f"{name}.branch7x7_1", cin, c7, 1, s)
    n.c(f"{name}.branch7x7_2", c7, c7, (1, 7), s)
    n.c(f"{name}.branch7x7_3", c7, 192, (7, 1), s)
    n.c(f"{name}.branch7x7dbl_1", cin, c7, 1, s)
    for i, (k, co) in enumerate((((7, 1), c7), ((1, 7), c7), ((7, 1), c7), ((1, 7), 192))):
        n.c(f"{name}.branch7x7dbl_{i + 2}", c7, co, k, s)
    n.pool(f"{name}.avgpool", cin * s * s, 3)
    n.c(f"{name}.branch_pool", cin, 192, 1, s)
    return 768


def _d(n: _Net, name: str, cin: int, s: int) -> int:
    o = (s - 3) // 2 + 1
    n.c(f"{name}.branch3x3_1", cin, 192, 1, s)
    n.c(f"{name}.branch3x3_2", 192, 320, 3, o)
    n.c(f"{name}.branch7x7x3_1", cin, 192, 1, s)
    n.c(f"{name}.branch7x7x3_2", 192, 192, (1, 7), s)
    n.c(f"{name}.branch7x7x3_3", 192, 192, (7, 1), s)
    n.c(f"{name}.branch7x7x3_4", 192, 192, 3, o)
    n.pool(f"{name}.maxpool", cin * o * o, 3)
    return 320 + 192 + cin


def _e(n: _Net, name: str, cin: int, s: int) -> int:
    n.c(f"{name}.branch1x1", cin, 320, 1, s)
    n.c(f"{name}.branch3x3_1", cin, 384, 1, s)
    n.c(f"{name}.branch3x3_2a", 384, 384, (1, 3), s)
    n.c(f"{name}.branch3x3_2b", 384, 384, (3, 1), s)
    n.c(f"{name}.branch3x3dbl_1", cin, 448, 1, s)
    n.c(f"{name}.branch3x3dbl_2", 448, 384, 3, s)
    n.c(f"{name}.branch3x3dbl_3a", 384, 384, (1, 3), s)
    n.c(f"{name}.branch3x3dbl_3b", 384, 384, (3, 1), s)
    n.pool(f"{name}.avgpool", cin * s * s, 3)
    n.c(f"{name}.branch_pool", cin, 192, 1, s)
    return 2048


def _aux(n: _Net, cin: int) -> None:
    """AuxLogits on the 17×17 map: avg pool 5/3 -> 5×5, 1×1 to 128, 5×5 to 768, fc."""
    n.pool("AuxLogits.avgpool", cin * 5 * 5, 5)
    n.c("AuxLogits.conv0", cin, 128, 1, 5)
    n.c("AuxLogits.conv1", 128, 768, 5, 1)
    n.layers.append(linear("AuxLogits.fc", 768, 1000))


def inception3() -> Workload:
    """Inception-v3 with its auxiliary classifier (27,161,264 parameters)."""
    n = _Net()
    n.c("Conv2d_1a_3x3", 3, 32, 3, 149)
    n.c("Conv2d_2a_3x3", 32, 32, 3, 147)
    n.c("Conv2d_2b_3x3", 32, 64, 3, 147)
    n.pool("maxpool1", 64 * 73 * 73, 3)
    n.c("Conv2d_3b_1x1", 64, 80, 1, 73)
    n.c("Conv2d_4a_3x3", 80, 192, 3, 71)
    n.pool("maxpool2", 192 * 35 * 35, 3)
    ch = _a(n, "Mixed_5b", 192, 32, 35)
    ch = _a(n, "Mixed_5c", ch, 64, 35)
    ch = _a(n, "Mixed_5d", ch, 64, 35)
    ch = _b(n, "Mixed_6a", ch, 35)
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        ch = _c(n, name, ch, c7, 17)
    _aux(n, ch)
    ch = _d(n, "Mixed_7a", ch, 17)
    ch = _e(n, "Mixed_7b", ch, 8)
    ch = _e(n, "Mixed_7c", ch, 8)
    n.pool("avgpool", ch * 8 * 8, 1)
    n.layers.append(linear("fc", ch, 1000))
    return Workload("inception3", tuple(n.layers), "299x299 image",
                    "torchvision models/inception.py (Inception3, aux_logits=True), "
                    "Szegedy et al. arXiv:1512.00567")
