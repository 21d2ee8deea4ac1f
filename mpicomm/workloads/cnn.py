"""ResNet-50/101/152 and VGG-16 as torchvision builds them (224×224 RGB, 1,000 classes).

Sources: torchvision ``models/resnet.py`` (ResNet v1.5: the stride on the 3×3 convolution
of a bottleneck; He et al., "Deep Residual Learning for Image Recognition", CVPR 2016,
arXiv:1512.03385, Table 1) and ``models/vgg.py`` (configuration "D", no batch norm;
Simonyan & Zisserman, arXiv:1409.1556). Convolutions carry no bias before a batch norm;
batch norm has a weight and a bias (its running statistics are buffers, not parameters).
"""

from __future__ import annotations

from mpicomm.workloads.layer import Layer, bn, conv, elementwise, linear
from mpicomm.workloads.workload import Workload

__all__ = ["resnet", "vgg16", "RESNET_BLOCKS"]

RESNET_BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}
_TV = "torchvision models/resnet.py (v1.5), He et al. arXiv:1512.03385"


def _conv_bn(out: list[Layer], name: str, cin: int, cout: int, k: int, size: int,
             relu: bool = True) -> None:
    out.append(conv(f"{name}.conv", cin, cout, k, size, size))
    out.append(bn(f"{name}.bn", cout, size * size, relu))


def _bottleneck(out: list[Layer], name: str, cin: int, width: int, size_in: int,
                stride: int) -> int:
    """One bottleneck block (1×1, 3×3 with the stride, 1×1 ×4); returns its output channels."""
    size = size_in // stride
    _conv_bn(out, f"{name}.1", cin, width, 1, size_in)
    _conv_bn(out, f"{name}.2", width, width, 3, size)
    _conv_bn(out, f"{name}.3", width, 4 * width, 1, size, relu=False)
    if stride != 1 or cin != 4 * width:
        _conv_bn(out, f"{name}.downsample", cin, 4 * width, 1, size, relu=False)
    out.append(elementwise(f"{name}.add_relu", 4 * width * size * size, 2.0))
    return 4 * width


def resnet(depth: int) -> Workload:
    """ResNet-``depth`` (50, 101 or 152)."""
    layers: list[Layer] = []
    _conv_bn(layers, "stem", 3, 64, 7, 112)
    layers.append(elementwise("maxpool", 64 * 56 * 56, 9.0))
    cin, size = 64, 56
    for stage, (blocks, width) in enumerate(zip(RESNET_BLOCKS[depth], (64, 128, 256, 512),
                                                strict=True)):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            cin = _bottleneck(layers, f"layer{stage + 1}.{b}", cin, width, size, stride)
            size //= stride
    layers.append(elementwise("avgpool", cin, 49.0))
    layers.append(linear("fc", cin, 1000))
    return Workload(f"resnet{depth}", tuple(layers), "224x224 image", _TV)


def vgg16() -> Workload:
    """VGG-16 (configuration D), 3×3 convolutions with bias and ReLU, three dense layers."""
    cfg = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
           512, 512, 512, "M")
    layers: list[Layer] = []
    cin, size = 3, 224
    for i, c in enumerate(cfg):
        if c == "M":
            size //= 2
            layers.append(elementwise(f"pool{i}", cin * size * size, 4.0))
            continue
        layers.append(conv(f"features.{i}", cin, c, 3, size, size, bias=True))
        cin = c
    for i, (fi, fo) in enumerate(((512 * 7 * 7, 4096), (4096, 4096), (4096, 1000))):
        layers.append(linear(f"classifier.{i}", fi, fo))
    return Workload("vgg16", tuple(layers), "224x224 image",
                    "torchvision models/vgg.py (cfg D), Simonyan & Zisserman arXiv:1409.1556")
