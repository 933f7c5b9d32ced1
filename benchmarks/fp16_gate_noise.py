"""How far FP16 arithmetic moves a small CNN-like chain's output, against the pipeline gate's FP16 tolerance.

The gate (``GATE_TOLERANCE["fp16"]`` in placetune/backends/tensorrt/backend.py, 2e-2) compares a
pipeline's outputs with the all-GPU engine's by relative L2 error. Both run FP16, but the DLA
segment and the GPU's tactics may round and accumulate differently. This chain of 6 layers of
K = 288 terms per output (a 3x3 convolution over 32 channels) with ReLU, random weights scaled to
keep the activations' size, is computed three ways: FP32 throughout; FP16 activations with FP32
accumulation (TensorRT's FP16 tactics); FP16 activations with FP16 accumulation (each partial sum
rounded: the worst case). Numpy only, no GPU; about 30 s. Run: ``python benchmarks/fp16_gate_noise.py``.
"""
import numpy as np
rng = np.random.default_rng(0)
K, N, L = 288, 512, 6
Ws = [rng.standard_normal((K, K)).astype(np.float32) / np.sqrt(K / 2) for _ in range(L)]
x0 = rng.standard_normal((N, K)).astype(np.float32)
def run(acc16, act16):
    x = x0.astype(np.float16).astype(np.float32) if act16 else x0
    for W in Ws:
        W16 = W.astype(np.float16).astype(np.float32)
        if acc16:
            prod = (x[:, :, None] * W16[None, :, :]).astype(np.float16)      # N x K x K products in fp16
            y = np.add.accumulate(prod, axis=1, dtype=np.float16)[:, -1, :].astype(np.float32)
        else:
            y = x @ W16
        x = np.maximum(y, 0)
        if act16:
            x = x.astype(np.float16).astype(np.float32)
    return x
ref = run(False, False)
for name, a in [("fp16 activations, fp32 accumulate", run(False, True)), ("fp16 activations, fp16 accumulate", run(True, True))]:
    print(name, "rel L2 vs fp32:", float(np.linalg.norm(a - ref) / np.linalg.norm(ref)))
a32, a16 = run(False, True), run(True, True)
print("fp16-acc vs fp32-acc (both fp16 activations; DLA vs GPU worst case):", float(np.linalg.norm(a16 - a32) / np.linalg.norm(a32)))
