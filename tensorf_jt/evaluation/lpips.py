"""LPIPS (Zhang et al., CVPR 2018), version 0.1, with AlexNet or VGG16 features, in Jittor.

What the reference reports for each test view (``utils.rgb_lpips``: ``lpips.LPIPS(net=...,
version='0.1')`` called with ``normalize=True``): both images go from [0, 1] to [-1, 1], are
shifted and scaled per channel (the "scaling layer"), and pass through the backbone; at each
of its five ReLU taps the features are divided by their norm over channels, the squared
difference is weighted per channel by a 1x1 convolution (the linear layer), averaged over the
image, and the five averages are summed. Weights: ``tensorf_jt.formats.lpips_weights``.

Images are scored whole, one pair per forward pass without gradients: the convolutions'
padding makes a score of tiles differ from the score of the image, and an 800x800 pair fits
in memory on the CPU and any GPU.
"""
from __future__ import annotations

import numpy as np
import jittor as jt
from jittor import nn

from tensorf_jt.formats.lpips_weights import lpips_weights

SHIFT = (-0.030, -0.088, -0.188)
SCALE = (0.458, 0.448, 0.450)
# Backbone layers: convolutions (out channels, kernel, stride, padding), "pool" (max pooling
# with its kernel and stride), and "tap" after the ReLU whose output LPIPS compares.
ALEX_LAYERS = [(64, 11, 4, 2), "tap", ("pool", 3, 2), (192, 5, 1, 2), "tap", ("pool", 3, 2),
               (384, 3, 1, 1), "tap", (256, 3, 1, 1), "tap", (256, 3, 1, 1), "tap"]
VGG_LAYERS = [(64, 3, 1, 1), (64, 3, 1, 1), "tap", ("pool", 2, 2),
              (128, 3, 1, 1), (128, 3, 1, 1), "tap", ("pool", 2, 2),
              (256, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1), "tap", ("pool", 2, 2),
              (512, 3, 1, 1), (512, 3, 1, 1), (512, 3, 1, 1), "tap", ("pool", 2, 2),
              (512, 3, 1, 1), (512, 3, 1, 1), (512, 3, 1, 1), "tap"]
LAYERS = {"alex": ALEX_LAYERS, "vgg": VGG_LAYERS}
# The smallest image side AlexNet's pooling leaves something of (the official package fails
# below it too); VGG16 needs 16.
MIN_SIZE = 31


class LPIPS(nn.Module):
    """LPIPS v0.1 distance with backbone ``net`` ('alex' or 'vgg'); ``execute(a, b)`` takes two
    image batches [N, 3, H, W] in [0, 1] and returns the distances [N]."""

    def __init__(self, net: str) -> None:
        super().__init__()
        weights = lpips_weights(net)
        self.net = net
        self.plan: list = []
        self.convs = nn.ModuleList()
        in_channels = 3
        for layer in LAYERS[net]:
            if layer == "tap" or layer[0] == "pool":
                self.plan.append(layer)
                continue
            out_channels, kernel, stride, padding = layer
            conv = nn.Conv2d(in_channels, out_channels, kernel, stride=stride, padding=padding)
            index = len(self.convs)
            conv.weight.assign(jt.array(weights[f"conv{index}.weight"]))
            conv.bias.assign(jt.array(weights[f"conv{index}.bias"]))
            self.convs.append(conv)
            self.plan.append(index)
            in_channels = out_channels
        self.lins = [jt.array(weights[f"lin{i}.weight"]) for i in range(5)]
        self.shift = jt.array(np.asarray(SHIFT, np.float32).reshape(1, 3, 1, 1))
        self.scale = jt.array(np.asarray(SCALE, np.float32).reshape(1, 3, 1, 1))
        for var in [*self.parameters(), *self.lins, self.shift, self.scale]:
            var.stop_grad()

    def features(self, images: jt.Var) -> list[jt.Var]:
        """The five tapped ReLU outputs for images [N, 3, H, W] in [0, 1]."""
        x = (images * 2.0 - 1.0 - self.shift) / self.scale
        taps = []
        for step in self.plan:
            if step == "tap":
                taps.append(x)
            elif isinstance(step, tuple):
                x = max_pool(x, step[1], step[2])
            else:
                x = nn.relu(self.convs[step](x))
        return taps

    def execute(self, images: jt.Var, references: jt.Var) -> jt.Var:
        total = 0.0
        for lin, a, b in zip(self.lins, self.features(images), self.features(references)):
            difference = jt.sqr(unit_channels(a) - unit_channels(b))
            total = total + nn.conv2d(difference, lin).mean(dims=(2, 3))
        return total.reshape(-1)


def max_pool(x: jt.Var, kernel: int, stride: int) -> jt.Var:
    """Max pooling without padding, sizes rounded down (``torch.nn.MaxPool2d``'s defaults).

    Jittor's pooling refuses an input exactly as large as the kernel, which torch's pools to
    one value (AlexNet's second pooling meets it on 31- to 34-pixel images); that case is
    computed as an explicit window gather.
    """
    height, width = x.shape[2], x.shape[3]
    if height > kernel and width > kernel:
        return nn.pool(x, kernel, "maximum", stride=stride)
    out_h, out_w = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    windows = x.reindex([x.shape[0], x.shape[1], out_h, out_w, kernel, kernel],
                        ["i0", "i1", f"i2*{stride}+i4", f"i3*{stride}+i5"])
    return windows.max(dims=(4, 5))


def unit_channels(features: jt.Var, eps: float = 1e-10) -> jt.Var:
    """Features divided by their L2 norm over channels (lpips' ``normalize_tensor``)."""
    return features / (jt.sqrt(jt.sqr(features).sum(dim=1, keepdims=True)) + eps)


_NETWORKS: dict[str, LPIPS] = {}


def lpips_distance(image: np.ndarray, reference: np.ndarray, net: str) -> float:
    """LPIPS between two images [H, W, 3] in [0, 1] (the reference's ``rgb_lpips``); the
    network is built on first use and kept. Images must be at least ``MIN_SIZE`` pixels a side."""
    if min(image.shape[:2]) < MIN_SIZE:
        raise ValueError(f"LPIPS needs images of at least {MIN_SIZE} pixels a side, got {image.shape[1]}x{image.shape[0]}")
    if net not in _NETWORKS:
        _NETWORKS[net] = LPIPS(net)
    pair = [jt.array(np.ascontiguousarray(np.asarray(x, np.float32).transpose(2, 0, 1)[None])) for x in (image, reference)]
    with jt.no_grad():
        return float(_NETWORKS[net](*pair).item())
