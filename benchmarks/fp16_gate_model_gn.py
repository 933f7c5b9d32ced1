"""How far FP16 arithmetic moves the selftest's own network (model-gn) against the pipeline gate's FP16 tolerance.

The selftest's pipeline check compares a GPU->DLA0->GPU pipeline of ``model-gn`` (batch 4, random
uniform(-1, 1) input, as the worker feeds it) with the all-GPU FP16 engine by relative L2 error
(``GATE_TOLERANCE["fp16"]`` = 2e-2, placetune/backends/tensorrt/backend.py). This evaluates the real
model-gn graph (onnx's reference evaluator, node by node, no GPU) five ways:

* ``fp32``: FP32 throughout (the truth);
* ``gpu16``: every tensor and weight stored in FP16, arithmetic in FP32 (FP16 storage with FP32
  accumulation: TensorRT's FP16 GPU tactics);
* ``acc16``: as gpu16, and every Conv/Gemm accumulates its sum in FP16, each partial sum rounded in
  order (the worst accumulation any FP16 engine could use);
* ``dla16``: gpu16 with the layers the selftest puts on DLA0 (the middle third, as ``half`` in
  placetune/cli/selftest.py) accumulating in FP16: the pipeline's worst case against gpu16, the gate's
  own comparison;
* ``norm16``: dla16, and every InstanceNormalization's mean and variance summed in FP16 too (a GPU
  normalization tactic unlike the reference's).

It prints each variant's worst relative L2 error over 16 random batches against fp32 and against
gpu16. Run: ``python benchmarks/fp16_gate_model_gn.py`` (about a minute on one core).
"""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from placetune import Model
from placetune.model.zoo.registry import build

F16 = np.float16


def r16(a):
    return a.astype(F16).astype(np.float32) if isinstance(a, np.ndarray) and a.dtype == np.float32 else a


def seq16(prod):
    """Sum over the last axis with every partial sum rounded to FP16, in order."""
    return np.add.accumulate(prod.astype(F16), axis=-1, dtype=F16)[..., -1].astype(np.float32)


def conv16(x, w, b, stride, pad):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    cols = np.empty((n, oh, ow, c * kh * kw), np.float32)
    for i in range(oh):
        for j in range(ow):
            cols[:, i, j] = xp[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw].reshape(n, -1)
    wf = w.reshape(o, -1)
    out = np.empty((n, o, oh, ow), np.float32)
    for k in range(o):  # one output channel at a time keeps the products small
        out[:, k] = seq16(cols * wf[k]) + (0 if b is None else b[k])
    return r16(out)


def inorm16(x, scale, bias, eps):
    n, c = x.shape[:2]
    flat = x.reshape(n, c, -1)
    m = seq16(flat) / flat.shape[-1]
    v = seq16((flat - m[..., None]) ** 2) / flat.shape[-1]
    y = (flat - m[..., None]) / np.sqrt(v[..., None] + eps)
    return r16((y * scale[None, :, None] + bias[None, :, None]).reshape(x.shape))


def run(proto, feeds, mode, dla_nodes):
    ev = ReferenceEvaluator(proto)
    vals = {k: (r16(v) if mode != "fp32" else v) for k, v in ev.rt_inits_.items()}
    vals.update({k: (r16(v) if mode != "fp32" else v) for k, v in feeds.items()})
    for node, onode in zip(ev.rt_nodes_, proto.graph.node):
        args = [vals[i] if i else None for i in onode.input]
        attrs = {a.name: a for a in onode.attribute}
        acc = mode == "acc16" or (mode in ("dla16", "norm16") and onode.name in dla_nodes)
        if onode.op_type == "Conv" and acc:
            out = [conv16(args[0], args[1], args[2] if len(args) > 2 else None, attrs["strides"].ints[0],
                          attrs["pads"].ints[0])]
        elif onode.op_type == "Gemm" and acc:
            w = args[1].T if attrs.get("transB") and attrs["transB"].i else args[1]
            out = [r16(seq16(args[0][:, :, None].transpose(0, 2, 1) * w.T[None]) + args[2])]
        elif onode.op_type == "InstanceNormalization" and mode == "norm16":
            out = [inorm16(args[0], args[1], args[2], attrs["epsilon"].f)]
        else:
            out = node.run(*args)
            out = [r16(o) if mode != "fp32" else o for o in out]
        for name, o in zip(onode.output, out):
            vals[name] = o
    return vals[proto.graph.output[0].name]


def rel(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def main():
    model = Model.load("model-gn", batch=4)
    proto = build("model-gn", batch=4, weights=True)  # the zoo's own weights, as the backends build it
    names = [l.name for l in model.layers]
    dla = set(names[len(names) // 3: 2 * len(names) // 3])  # the selftest's ``half`` placement
    rng = np.random.default_rng(0)
    worst: dict[str, list[float]] = {}
    for _ in range(16):
        x = rng.uniform(-1.0, 1.0, size=(4, 3, 32, 32)).astype(np.float32)
        outs = {m: run(proto, {"input": x}, m, dla) for m in ("fp32", "gpu16", "acc16", "dla16", "norm16")}
        for m in ("gpu16", "acc16", "dla16", "norm16"):
            worst.setdefault(f"{m} vs fp32", []).append(rel(outs[m], outs["fp32"]))
        for m in ("acc16", "dla16", "norm16"):
            worst.setdefault(f"{m} vs gpu16 (the gate's comparison)", []).append(rel(outs[m], outs["gpu16"]))
    print(f"model-gn, DLA0 layers of the selftest's pipeline: {len(dla)} of {len(names)}")
    for k, v in worst.items():
        print(f"{k:40s} median {np.median(v):.2e}  worst {max(v):.2e}  (gate 2e-2)")


if __name__ == "__main__":
    main()
