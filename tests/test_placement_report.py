"""The realised placement as TensorRT reports it, on each version the doubles emulate.

The worker and the trtexec backend read the ``Layers Running on DLA/GPU`` report whatever level
TensorRT logs it at; the ONNX parser's helper layers (``(Unnamed Layer* N)`` in 8.x,
``ONNXTRT_*`` in 10.x) go where the node they serve goes; layer metadata is read in the ONNX
parser's format of each version. The doubles' version behaviour these rely on is listed with
its source in docs/doubles.md.
"""

from __future__ import annotations

import gzip
import importlib
import os
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.backends.tensorrt.pool import WORKER_FILE, WorkerClient
from placetune.backends.tensorrt.worker_names import onnx_nodes
from tests.fakes import FAKES_DIR, VERSIONS, fake_env

FAKE_TRTEXEC = FAKES_DIR / "trtexec"


def _save(model, path: Path) -> str:
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return str(path)


def _conv1d_chain(tmp: Path) -> str:
    """conv1 -> relu1 -> conv2 -> relu2 on a (1, 8, 32) input: 1-D convolutions, which the ONNX
    parser runs as 2-D between an unsqueeze and a squeeze it registers for no node."""
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 8, 32])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 8, 32])
    inits = [numpy_helper.from_array(np.full((8, 8, 3), 0.1, np.float32), f"w{i}") for i in (1, 2)]
    nodes = [helper.make_node("Conv", ["input", "w1"], ["c1"], name="conv1", pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1]),
             helper.make_node("Relu", ["c2"], ["output"], name="relu2")]
    graph = helper.make_graph(nodes, "conv1d", [x], [y], inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp / "conv1d.onnx")


def _branches(tmp: Path, doc: str = "", fp16: bool = False) -> str:
    """Two branches joined by a Concat, listed interleaved: conv_a, abs_b, relu_a, conv_b, concat.
    abs_b cannot run on the doubles' DLA; conv_a, relu_a, concat and conv_b are connected.
    ``fp16``: float16 throughout (TensorRT 11 is strongly typed: the DLA needs FP16 tensors)."""
    elem, dt = (TensorProto.FLOAT16, np.float16) if fp16 else (TensorProto.FLOAT, np.float32)
    x = helper.make_tensor_value_info("input", elem, [1, 8, 8, 8])
    y = helper.make_tensor_value_info("output", elem, [1, 16, 8, 8])
    inits = [numpy_helper.from_array(np.full((8, 8, 1, 1), 0.1, dt), w) for w in ("wa", "wb")]
    nodes = [helper.make_node("Conv", ["input", "wa"], ["ca"], name="conv_a", doc_string=doc),
             helper.make_node("Abs", ["input"], ["ab"], name="abs_b"),
             helper.make_node("Relu", ["ca"], ["ra"], name="relu_a"),
             helper.make_node("Conv", ["ab", "wb"], ["cb"], name="conv_b"),
             helper.make_node("Concat", ["ra", "cb"], ["output"], name="concat", axis=1)]
    graph = helper.make_graph(nodes, "branches", [x], [y], inits)
    return _save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp / "branches.onnx")


def _measure(version: str, onnx: str, dla: list[str], shape: list[int], strongly_typed: bool = False) -> dict:
    job = {"op": "measure", "onnx": onnx, "input_shapes": {"input": shape}, "precision": "fp16", "dla_core": 0,
           "gpu_fallback": True, "dla_layers": dla, "iterations": 2, "warmup_ms": 1, "profile_iterations": 1,
           "timing_cache": None, "inspector": False, "strongly_typed": strongly_typed}
    client = WorkerClient(sys.executable, fake_env(version))
    try:
        reply = client.request(job, timeout_s=60)
    finally:
        client.close()
    assert reply.result["status"] == "ok", reply.result.get("error")
    return reply.result


def _worker_module(name: str):
    """A worker module imported as the worker imports it: top-level, from the worker's directory."""
    here = str(WORKER_FILE.parent)
    sys.path.insert(0, here)
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(here)


def _dla_lines(result: dict) -> list[tuple[str, str]]:
    """The DLA loadables of the log, as ``[DlaLayer] name`` (10.x's doubles print 10.3's real form,
    ``name successfully offloaded to DLA.``, read here in the older form to compare)."""
    offloaded = re.compile(r"^(\{.*\}) successfully offloaded to DLA\.$")
    return [(s, m) if m.startswith("[DlaLayer]") else (s, "[DlaLayer] " + offloaded.match(m).group(1))
            for s, m in result["log"] if m.startswith("[DlaLayer]") or offloaded.match(m)]


# ------------------------------------------------------------------ the report's log level
@pytest.mark.parametrize("version", VERSIONS)
def test_the_worker_reads_the_placement_report_whatever_level_it_is_logged_at(version, tmp_path):
    """8.5/8.6.2 log the report at INFO, 8.6.10+ and 10.x/11.x at VERBOSE (the doubles follow
    docs/doubles.md). The worker keeps the report at any level, and no other VERBOSE line."""
    eleven = version.startswith("11.")
    result = _measure(version, _branches(tmp_path, fp16=eleven), ["conv_a", "relu_a", "conv_b", "concat", "abs_b"],
                      [1, 8, 8, 8], strongly_typed=eleven)
    level = "VERBOSE" if version.startswith(("10.", "11.")) else "INFO"
    assert _dla_lines(result) == [(level, "[DlaLayer] {ForeignNode[conv_a...concat]}")]
    gpu = [m for s, m in result["log"] if m.startswith("[GpuLayer]")]
    assert len(gpu) == 1 and gpu[0].endswith("abs_b")  # the fallback is seen, not assumed
    assert all(s != "VERBOSE" or m.startswith(("[DlaLayer]", "[GpuLayer]", "---", "Number of DLA", "{ForeignNode["))
               for s, m in result["log"])
    # the pipeline's check of the loadables all its engines hold on a core counts these lines
    worker_pipeline = _worker_module("worker_pipeline")
    assert "17 DLA loadables on DLA0" in worker_pipeline.too_many_loadables([{"dla_core": 0}] * 17,
                                                                            [{"log": result["log"]}] * 17)


def test_trtexec_placement_at_verbose_is_read_and_dla_builds_are_verbose(tmp_path):
    """trtexec 10.x prints the report at [V]: the backend passes --verbose to every DLA build and
    keeps those [V] lines (and no others) when it reads the output."""
    from placetune.backends import get_backend
    from placetune.backends.trtexec.process import Run
    from placetune.model.model import Model
    from placetune.placement.placement import Placement
    from placetune.tuning.evaluator import Evaluator

    env = {"PLACETUNE_FAKE_TRTEXEC_VERSION": "10.3.0",
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    be = get_backend("trtexec", trtexec=str(FAKE_TRTEXEC), cache_dir=tmp_path / "cache", env=env, verbose=False,
                     warmup_ms=5, duration_s=0, power_root=Path(__file__).parent / "fakes" / "sysfs" / "orin-agx")
    path = Path(_branches(tmp_path))
    gz = tmp_path / "branches.onnx.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    ev = Evaluator(Model.load(gz), "orin-agx", backend=be, iterations=3, precision="fp16", trt_version="10.3")
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "ok", m.reason
    assert "--verbose" in m.extra["commands"]["build"]
    assert m.realized["abs_b"] == "GPU" and m.realized["conv_a"] == "DLA0" and m.dla_loadables == {"DLA0": 1}
    log = tmp_path / "out.log"
    log.write_text("[01/01/2025-00:00:00] [V] [TRT] [DlaLayer] {ForeignNode[a...b]}\n"
                   "[01/01/2025-00:00:00] [V] [TRT] Tactic: 0x1 Time: 0.1\n[01/01/2025-00:00:00] [I] done\n")
    assert Run(["trtexec"], log).lines() == ["[01/01/2025-00:00:00] [V] [TRT] [DlaLayer] {ForeignNode[a...b]}",
                                             "[01/01/2025-00:00:00] [I] done"]


# ------------------------------------------------------------------ parser helpers
@pytest.mark.parametrize("version, helper_names", [
    ("8.6.2", r"\(Unnamed Layer\* \d+\) \[Shuffle\]"),
    ("10.3.0", r"ONNXTRT_(un)?squeezeTensor(_\d+)?"),
])
def test_parser_helpers_of_1d_convolutions_go_with_their_node(version, helper_names, tmp_path):
    """onnx-tensorrt runs a 1-D Conv as 2-D between an unsqueeze and a squeeze it registers for no
    node: unnamed in 8.x, ONNXTRT_unsqueezeTensor/ONNXTRT_squeezeTensor in 10.x (importerUtils.cpp).
    They follow the Conv to the DLA, so the chain stays one DLA loadable."""
    result = _measure(version, _conv1d_chain(tmp_path), ["conv1", "relu1", "conv2", "relu2"], [1, 8, 32])
    helpers = [row for row in result["network_layers"] if row[1] is None]
    assert len(helpers) == 4 and all(re.fullmatch(helper_names, row[0]) for row in helpers), helpers
    assert all(row[3] for row in result["network_layers"]), result["network_layers"]  # every layer asked for DLA
    assert [m for _, m in _dla_lines(result)] == [f"[DlaLayer] {{ForeignNode[{helpers[0][0]}...relu2]}}"]


def test_helper_names_of_each_parser_version():
    from types import SimpleNamespace as NS

    from placetune.backends.tensorrt.worker_devices import is_helper, is_helper_name

    assert is_helper_name("(Unnamed Layer* 7) [Shuffle]") and is_helper_name("ONNXTRT_unsqueezeTensor_3")
    assert is_helper_name("ONNXTRT_Broadcast") and not is_helper_name("/conv1/Conv")
    assert is_helper(NS(name="ONNXTRT_castHelper"), None, None)
    assert not is_helper(NS(name="ONNXTRT_castHelper"), None, "/cast")  # registered for a node after all


# ------------------------------------------------------------------ metadata
def test_the_worker_reads_the_node_of_86_metadata_with_doc_string_lines(tmp_path):
    """onnx-tensorrt 8.6-GA appends a node's doc-string lines to its metadata after " | "
    (onnx2trt_utils.cpp filterDocString): the worker reports the node, not the text."""
    doc = "x = self.conv(x)\n/usr/lib/python3/site-packages/torch/nn/modules/conv.py(443): forward"
    result = _measure("8.6.2", _branches(tmp_path, doc=doc), ["conv_a"], [1, 8, 8, 8])
    rows = {row[0]: row[1] for row in result["network_layers"]}
    assert rows["conv_a"] == "conv_a" and rows["relu_a"] == "relu_a"


def test_worker_metadata_reader_matches_the_parents():
    from types import SimpleNamespace as NS

    worker_build = _worker_module("worker_build")

    for meta, node in [("[ONNX Layer: /c/Conv | Local Function: B]", "/c/Conv"),
                       ("[ONNX Layer: /c/Conv | x = self.conv(x)]", "/c/Conv"),
                       ("[ONNX Layer: /a]\x1f[ONNX Layer: /b]", "/a"), ("", None)]:
        assert worker_build._onnx_name(NS(metadata=meta)) == node == (onnx_nodes(meta) or [None])[0]


# ------------------------------------------------------------------ the doubles' version behaviour
def test_doubles_form_dla_islands_by_connectivity_not_network_order(tmp_path):
    """conv_a and relu_a/conv_b/concat are listed apart (abs_b, on the GPU, comes between them)
    but are connected: one DLA loadable, in both doubles."""
    result = _measure("8.5.2", _branches(tmp_path), ["conv_a", "relu_a", "conv_b", "concat", "abs_b"], [1, 8, 8, 8])
    assert [m for _, m in _dla_lines(result)] == ["[DlaLayer] {ForeignNode[conv_a...concat]}"]
    import subprocess

    env = {**os.environ, "PLACETUNE_FAKE_TRTEXEC_VERSION": "8.6.1"}
    out = subprocess.run([sys.executable, str(FAKE_TRTEXEC), f"--onnx={_branches(tmp_path)}", "--fp16",
                          "--useDLACore=0", "--allowGPUFallback", "--skipInference"],
                         capture_output=True, text=True, env=env, timeout=60).stdout
    assert re.findall(r"\[DlaLayer\] (.*)", out) == ["{ForeignNode[conv_a...concat]}"]


@pytest.mark.parametrize("version, cores", [("10.3.0", 2), ("11.0.0", 0), ("11.3.0", 0), ("11.4.1", 2)])
def test_doubles_have_no_dla_in_11_0_to_11_3(version, cores):
    """TensorRT 11.0-11.3 support no DLA (11.1.0 and 11.3.0 docs); 11.4.1 brings it back on AGX Orin."""
    client = WorkerClient(sys.executable, fake_env(version))
    try:
        probe = client.request({"op": "probe"}, timeout_s=60).result
    finally:
        client.close()
    assert probe["num_dla_cores"] == cores
