"""timm ViT-Tiny/16 as torch.onnx exports it: the zoo's transformer and many-layer stress model."""

from __future__ import annotations

import math

import numpy as np

from placetune.model.zoo.graph import Graph, Net, scope_names
from placetune.model.zoo.layers import add_conv, add_gemm, add_linear3d


def vit_tiny(g: Graph, batch: int, depth: int, attention: str) -> Net:
    """timm vit_tiny_patch16_224 (dim 192, 3 heads, MLP 768) as torch.onnx exports it."""
    dim, heads, hidden, tokens = 192, 3, 768, 197
    head_dim = dim // heads
    x = add_conv(g, "input", ["patch_embed", "proj"], 3, dim, 16, stride=16)
    pe = ["patch_embed"]
    x = g.op("Reshape", [x, g.const(pe, [batch, dim, 196], np.int64)], pe, allowzero=0)
    x = g.op("Transpose", [x], pe, perm=[0, 2, 1])
    cls = g.param("cls_token", [1, 1, dim], "embed")
    cls = g.op("Expand", [cls, g.const((), [batch, 1, dim], np.int64)], ())
    x = g.op("Concat", [cls, x], (), axis=1)
    x = g.op("Add", [x, g.param("pos_embed", [1, tokens, dim], "embed")], ())

    def layer_norm(x: str, parts: list[str]) -> str:
        _, dotted = scope_names(parts)
        w = g.param(f"{dotted}.weight", [dim], "ones")
        b = g.param(f"{dotted}.bias", [dim], "zeros")
        return g.op("LayerNormalization", [x, w, b], parts, axis=-1, epsilon=1e-6)

    for i in range(depth):
        p = ["blocks", f"blocks.{i}"]
        a = p + ["attn"]
        h = layer_norm(x, p + ["norm1"])
        qkv = add_linear3d(g, h, a + ["qkv"], dim, 3 * dim)
        shape = g.const(a, [batch, tokens, 3, heads, head_dim], np.int64)
        qkv = g.op("Reshape", [qkv, shape], a, allowzero=0)
        qkv = g.op("Transpose", [qkv], a, perm=[2, 0, 3, 1, 4])
        # q, k, v = qkv.unbind(0): Split + one Squeeze per output
        parts3 = g.op("Split", [qkv, g.const(a, [1, 1, 1], np.int64)], a, outputs=3, axis=0)
        q, k, v = (g.op("Squeeze", [t, g.const(a, [0], np.int64)], a) for t in parts3)
        kt = g.op("Transpose", [k], a, perm=[0, 1, 3, 2])
        if attention == "sdpa":
            # torch's scaled_dot_product_attention symbolic: q*sqrt(s) @ k^T*sqrt(s)
            root = math.sqrt(1.0 / math.sqrt(head_dim))
            q = g.op("Mul", [q, g.const(a, root, np.float32)], a)
            kt = g.op("Mul", [kt, g.const(a, root, np.float32)], a)
            att = g.op("MatMul", [q, kt], a)
        else:
            att = g.op("MatMul", [q, kt], a)
            att = g.op("Mul", [att, g.const(a, 1.0 / math.sqrt(head_dim), np.float32)], a)
        att = g.op("Softmax", [att], a, axis=-1)
        o = g.op("MatMul", [att, v], a)
        o = g.op("Transpose", [o], a, perm=[0, 2, 1, 3])
        o = g.op("Reshape", [o, g.const(a, [batch, tokens, dim], np.int64)], a, allowzero=0)
        o = add_linear3d(g, o, a + ["proj"], dim, dim)
        x = g.op("Add", [x, o], p)
        h = layer_norm(x, p + ["norm2"])
        m = p + ["mlp"]
        h = add_linear3d(g, h, m + ["fc1"], dim, hidden)
        act = m + ["act"]  # exact GELU, torch.onnx opset < 20
        e = g.op("Div", [h, g.const(act, math.sqrt(2.0), np.float32)], act)
        e = g.op("Erf", [e], act)
        e = g.op("Add", [e, g.const(act, 1.0, np.float32)], act)
        e = g.op("Mul", [h, e], act)
        h = g.op("Mul", [e, g.const(act, 0.5, np.float32)], act)
        h = add_linear3d(g, h, m + ["fc2"], hidden, dim)
        x = g.op("Add", [x, h], p)
    x = layer_norm(x, ["norm"])
    x = g.op("Gather", [x, g.const((), 0, np.int64)], (), axis=1)
    y = add_gemm(g, x, ["head"], dim, 1000)
    return y, [batch, 3, 224, 224], [batch, 1000]
