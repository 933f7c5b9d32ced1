"""Physics of the simulated Jetson's cost model that the calibration relies on.

GPU occupancy depends on a layer's work per SM and its reduction depth (a shallow convolution
fills the GPU at once, a deep one does not; a slower precision takes longer to fill); sibling
convolutions that read the same tensor run as one GPU kernel (TensorRT's horizontal fusion); in
an INT8 engine a layer without INT8 kernels pays two reformats. All figures are simulated.
"""

from __future__ import annotations

import numpy as np

from placetune import Model
from placetune.backends.simulate.costs import cost_table
from placetune.backends.simulate.graph import graph_info
from placetune.hardware.platforms import get_platform

XAVIER = get_platform("xavier-agx")
ORIN = get_platform("orin-agx")


def _deepest_conv(g) -> int:
    return int(np.argmax(np.where(np.array(g.cls) == "conv", g.depth, -1)))


def test_a_shallow_convolution_fills_the_gpu_sooner_than_a_deep_one():
    m = Model.load("mobilenetv2", batch=1)
    t = cost_table(m, ORIN, "int8", 1)
    g = t.g
    dw = next(i for i, c in enumerate(g.cls) if c == "depthwise")
    deep = _deepest_conv(g)
    assert g.depth[dw] < 16 < g.depth[deep]
    assert 0 < t.gpu_ramp_ms[dw] < 0.05 * t.gpu_ramp_ms[deep]
    # so a depthwise layer's time grows almost linearly with batch, a deep convolution's does not
    t8 = cost_table(m, ORIN, "int8", 8)
    launch = t.c.gpu_launch_us * 1e-3
    ratio = lambda i: (t8.t_alone[0, i] - launch) / (t.t_alone[0, i] - launch)  # noqa: E731
    assert ratio(dw) > 1.5 * ratio(deep)


def test_a_slower_precision_takes_longer_to_fill_the_gpu():
    m = Model.load("resnet50", batch=1)
    i = _deepest_conv(graph_info(m))
    f16, i8 = cost_table(m, XAVIER, "fp16", 1), cost_table(m, XAVIER, "int8", 1)
    assert f16.gpu_ramp_ms[i] > 1.5 * i8.gpu_ramp_ms[i] > 0


def test_sibling_convolutions_run_as_one_gpu_kernel():
    m = Model.load("googlenet", batch=1)
    g = graph_info(m)
    sib = np.flatnonzero(g.sibling >= 0)
    assert len(sib) >= 18  # two of the three 1x1 branches of each of the 9 Inception modules
    t = cost_table(m, XAVIER, "fp16", 1)
    codes = np.zeros(g.n, dtype=np.intp)
    on_gpu, _, fused = t.layer_costs(codes)
    assert fused[sib].all() and (on_gpu[sib] < t.t_alone[0, sib]).all()
    apart = codes.copy()
    apart[g.sibling[sib[0]]] = 1  # the first of the group on a DLA: the next one is a kernel of its own
    t2, _, fused2 = t.layer_costs(apart)
    assert not fused2[sib[0]] and t2[sib[0]] == t.t_alone[0, sib[0]]


def test_which_sibling_leaves_the_gpu_does_not_matter():
    """seed 000's conv1, conv3 and conv4 read the same tensor: moving conv1 or conv3 to a DLA
    leaves two of them on the GPU as one kernel either way."""
    m = Model.load("seed-block", batch=1)
    g = graph_info(m)
    t = cost_table(m, ORIN, "int8", 1)
    idx = {n.split("/")[1]: i for i, n in enumerate(g.names) if n.endswith("/Conv")}
    cost = {}
    for away in ("conv1", "conv3", "conv4"):
        codes = np.zeros(g.n, dtype=np.intp)
        codes[idx[away]] = 1
        on, _, _ = t.layer_costs(codes)
        cost[away] = float(sum(on[idx[c]] for c in ("conv1", "conv3", "conv4") if c != away))
    assert cost["conv1"] == cost["conv3"] == cost["conv4"]


def test_an_int8_engine_reformats_around_layers_without_int8_kernels():
    m = Model.load("alexnet", batch=8)
    g = graph_info(m)
    lrn, conv = g.ops.index("LRN"), g.ops.index("Conv")
    i8, f16 = cost_table(m, XAVIER, "int8", 8), cost_table(m, XAVIER, "fp16", 8)
    assert i8.t_alone[0, lrn] > f16.t_alone[0, lrn] + 2 * i8.c.boundary_us * 1e-3
    assert i8.t_alone[0, conv] < f16.t_alone[0, conv]
