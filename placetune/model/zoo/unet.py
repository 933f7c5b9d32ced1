"""A small U-Net: the zoo's segmentation network (ConvTranspose and Resize upsampling, Concat skips)."""

from __future__ import annotations

import numpy as np

from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.layers import add_conv, add_maxpool, add_relu


def unet_small(g: Graph, batch: int) -> Net:
    """A small 3-level U-Net: ConvTranspose and nearest Resize upsampling, Concat skips."""

    def double_conv(x: str, name: str, cin: int, cout: int) -> str:
        x = add_conv(g, x, [name, f"{name}.0"], cin, cout, 3, pad=1)
        x = add_relu(g, x, [name, f"{name}.1"])
        x = add_conv(g, x, [name, f"{name}.2"], cout, cout, 3, pad=1)
        return add_relu(g, x, [name, f"{name}.3"])

    def up_transposed(x: str, name: str, cin: int, cout: int) -> str:
        w = g.param(f"{name}.weight", [cin, cout, 2, 2], "weight", cin)
        b = g.param(f"{name}.bias", [cout], "bias", cin)
        return g.op(
            "ConvTranspose",
            [x, w, b],
            [name],
            dilations=[1, 1],
            group=1,
            kernel_shape=[2, 2],
            pads=[0, 0, 0, 0],
            strides=[2, 2],
        )

    c = 16  # base width
    e1 = double_conv("input", "enc1", 3, c)  # 256x256
    e2 = double_conv(add_maxpool(g, e1, ["pool1"], 2, 2), "enc2", c, 2 * c)  # 128
    e3 = double_conv(add_maxpool(g, e2, ["pool2"], 2, 2), "enc3", 2 * c, 4 * c)  # 64
    b = double_conv(add_maxpool(g, e3, ["pool3"], 2, 2), "bottleneck", 4 * c, 8 * c)  # 32
    u3 = up_transposed(b, "up3", 8 * c, 4 * c)  # 64
    d3 = double_conv(g.op("Concat", [u3, e3], (), axis=1), "dec3", 8 * c, 4 * c)
    scales = g.const(["up2"], [1.0, 1.0, 2.0, 2.0], np.float32)
    u2 = g.op(
        "Resize",
        [d3, "", scales],
        ["up2"],
        coordinate_transformation_mode="asymmetric",
        cubic_coeff_a=-0.75,
        mode="nearest",
        nearest_mode="floor",
    )  # 128
    d2 = double_conv(g.op("Concat", [u2, e2], (), axis=1), "dec2", 6 * c, 2 * c)
    u1 = up_transposed(d2, "up1", 2 * c, c)  # 256
    d1 = double_conv(g.op("Concat", [u1, e1], (), axis=1), "dec1", 2 * c, c)
    y = add_conv(g, d1, ["head"], c, 2, 1)
    return y, [batch, 3, 256, 256], [batch, 2, 256, 256]
