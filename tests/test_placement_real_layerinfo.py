"""The realised placement read from a real TensorRT 10.3 DLA engine's layer information (AGX Orin,
JetPack 6: corpus yolo11-dla-orin-10.3-layer-types) with TensorRT's real fallback warnings (corpus
ultralytics-23488-8.5.2-head-slice-concat-fallbacks), on the model those engines were built from
(Ultralytics' stock YOLO11n export, ``tests/data/yolo11n_ultralytics.onnx.gz``)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import onnx
import pytest

from placetune.backends.tensorrt.buildlog import locate, parse_build_log
from placetune.backends.tensorrt.placement_known import decide, inspector_dla_layers
from tests.test_trt_corpus import inspector_types_table

DATA = Path(__file__).parent / "data"
CORPUS = DATA / "trt_corpus"
FALLBACK_ENGINE = "yolo11n-dla-gpu-fallback-fp16"


@pytest.fixture(scope="module")
def names() -> list[str]:
    model = onnx.load_from_string(gzip.decompress((DATA / "yolo11n_ultralytics.onnx.gz").read_bytes()))
    return [n.name for n in model.graph.node if n.op_type != "Constant"]


def _engines() -> dict[str, list[dict]]:
    return inspector_types_table((CORPUS / "yolo11-dla-orin-10.3-layer-types" / "layer_profile.csv").read_text())


def _warnings() -> list[str]:
    return (CORPUS / "ultralytics-23488-8.5.2-head-slice-concat-fallbacks" / "build.log").read_text().splitlines()


def test_a_real_10_3_dla_engine_is_read_as_its_four_dla_loadables_and_its_gpu_layers(names):
    layers = _engines()[FALLBACK_ENGINE]
    assert len(inspector_dla_layers(layers)) == 4  # engine_summary.csv of the same build: 4 DLA loadables
    blog = parse_build_log([])
    pred = {n: "DLA0" for n in names}  # --useDLACore=0 --allowGPUFallback: every layer asked on DLA0
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known and k.loadables == 4 and k.source == "engine inspector"
    gpu = {n for n, d in k.realized.items() if d == "GPU"}
    # the engine's GPU layers: the attention MatMuls (Myelin kernels named '/model_10/m/m_0/attn/MatMul_myl4_0'),
    # the DFL and the box decoding; every other layer it names lies in a DLA loadable
    assert {"/model.10/m/m.0/attn/MatMul", "/model.10/m/m.0/attn/MatMul_1", "/model.23/dfl/Softmax",
            "/model.23/dfl/conv/Conv", "/model.23/Sigmoid", "/model.23/Mul_2"} <= gpu
    assert k.realized["/model.0/conv/Conv"] == "DLA0" and k.realized["/model.23/cv3.2/cv3.2.2/Conv"] == "DLA0"
    strict = _engines()["yolo11n-dla-strict-dla-fp16"]
    assert inspector_dla_layers(strict) == ["{ForeignNode[/model.0/conv/Conv.../model.23/Concat_2]}"]


def test_a_layer_tensorrt_warns_it_moved_to_the_gpu_is_the_gpus_though_no_engine_layer_names_it(names):
    """TensorRT warns that it moved the head's Slice_1 and Concat_2 to the GPU, and the real engine's layer
    information names neither (elided into the GPU's copies). Read from the layer information alone (a
    build log without a placement report), they were recorded on DLA0, the request, with the placement
    known: a misread that read as known. TensorRT's warning is its own word of where they ran, as the
    build log's reading already takes it (buildlog.locate)."""
    layers = _engines()[FALLBACK_ENGINE]
    blog = parse_build_log(_warnings())
    assert not blog.reports_placement and {"/model.23/Slice_1", "/model.23/Concat_2"} <= set(blog.fallbacks)
    pred = {n: "DLA0" for n in names}
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known
    assert k.realized["/model.23/Slice_1"] == "GPU" and k.realized["/model.23/Concat_2"] == "GPU"
    assert "/model.23/Slice_1" not in k.from_request and "/model.23/Concat_2" not in k.from_request


def test_a_warned_layer_inside_a_dla_range_is_the_gpus_as_the_build_log_reads_it():
    """A layer between the ends of a {ForeignNode[A...B]} loadable that TensorRT warns it moved to the GPU
    (a parallel branch the range's name cannot tell apart) ran on the GPU: the build log's reading says
    so (its warning beats the range), and so does the layer information's now, so the two agree."""
    names = ["a", "b", "side", "c"]
    pred = {n: "DLA0" for n in names}
    layers = [{"Name": "{ForeignNode[a...c]}", "LayerType": "DLA"}]
    warn = ["[W] [TRT] Layer 'side' (SLICE): Unsupported on DLA. Switching this layer's device type to GPU."]
    blog = parse_build_log(warn)
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known and k.realized["side"] == "GPU" and k.realized["a"] == "DLA0"
    logged = parse_build_log(warn + ["Number of DLA node candidates offloaded : 1 out of 1",
                                     "{ForeignNode[a...c]} successfully offloaded to DLA."])
    k = decide(pred, 0, logged, locate(logged, names), names, None, layers)
    assert k.known and k.realized["side"] == "GPU", k.reason


def test_the_layer_information_json_form_of_the_table_is_the_inspectors():
    # the table's two columns are the Name and LayerType of each layer of the engine's --exportLayerInfo
    doc = {"Layers": _engines()[FALLBACK_ENGINE]}
    assert json.loads(json.dumps(doc))["Layers"][1] == {
        "Name": "{ForeignNode[/model.0/conv/Conv.../model.10/m/m.0/attn/Transpose]}", "LayerType": "DLA"}


def _with_metadata(layers: list[dict]) -> list[dict]:
    """The engine's layers with the Metadata TensorRT 10's DETAILED layer information gives a Myelin kernel:
    the ONNX node it computes (the real form of corpus evpe-rtx3060-trtexec-10.4-alexnet-layerinfo,
    ``[ONNX Layer: /features/features.0/Conv]``); the published table has Name and LayerType only."""
    node = {"_myl4_0": "/model.10/m/m.0/attn/MatMul", "_myl9_0": "/model.10/m/m.0/attn/MatMul_1"}
    return [{**x, "Metadata": f"[ONNX Layer: {n}]"} if (n := next((v for k, v in node.items()
                                                                   if x["Name"].endswith(k)), None)) else x
            for x in layers]


def _offload_log() -> list[str]:
    """The 10.3 build log of that engine as TensorRT prints it (the forms of corpus orin-agx-trt10.3-dla-offloaded
    and ultralytics-23488-xavier-8.5.2-matmul-unsupported-fallbacks): a warning for each layer the engine's GPU
    layers compute (TensorRT warns of each layer it moves off the DLA: the attention MatMuls, the head's Reshapes,
    its DFL and box decoding), the four loadables of its layer information offloaded."""
    dla = inspector_dla_layers(_engines()[FALLBACK_ENGINE]) or []
    return ([f"[W] [TRT] Layer '{n}' (MATRIX_MULTIPLY): Unsupported on DLA. Switching this layer's device type to GPU."
             for n in ("/model.10/m/m.0/attn/MatMul", "/model.10/m/m.0/attn/MatMul_1")]
            + [f"[W] [TRT] Layer '/model.23/{n}' (SHUFFLE): Unsupported on DLA. Switching this layer's device type to GPU."
               for n in ("Reshape", "Reshape_1", "Reshape_2", "Reshape_3", "Reshape_4", "Reshape_5", "dfl/Reshape",
                         "dfl/Transpose", "dfl/Softmax", "dfl/Reshape_1", "dfl/conv/Conv", "Sub", "Add_1", "Add_2",
                         "Div_1", "Sigmoid", "Sub_1", "Mul_2")]
            + [x for x in _warnings() if "Switching" in x]
            + [f"[V] [TRT] Number of DLA node candidates offloaded : {len(dla)} out of {len(dla)}"]
            + [f"[V] [TRT] {x} successfully offloaded to DLA." for x in dla])


def test_a_gpu_layer_between_the_names_of_a_dla_loadable_is_no_fallen_branch_when_tensorrt_warned_of_it(names):
    """The real engine's third loadable is named {ForeignNode[/model.10/Split.../model.23/cv2.2/cv2.2.2/Conv]}: its
    ends span, in the network's order, the attention block, whose MatMuls ran on the GPU (the engine's gemm kernels)
    and the rest on other loadables. A loadable's name gives its first and last layers, not an interval of the network.
    Read with the Metadata a TensorRT 10 Myelin kernel carries, the MatMuls 'inside' that range were taken for a
    branch that fell back, and every such YOLO11n placement read UNKNOWN (3 in a row stop a night), although the
    build log warns of each layer it moves off the DLA and counts every candidate offloaded."""
    layers = _with_metadata(_engines()[FALLBACK_ENGINE])
    pred = {n: "DLA0" for n in names}
    blog = parse_build_log(_offload_log())
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known, k.reason
    assert k.source == "build log and engine inspector" and k.loadables == 4
    assert k.realized["/model.10/m/m.0/attn/MatMul"] == "GPU" and k.realized["/model.10/m/m.0/attn/Softmax"] == "DLA0"
    # without the build log's report (its count, its offload lines) the layer information alone cannot tell a
    # fallen branch from this: still unknown, and said
    warned_only = parse_build_log(_offload_log()[:-5])
    k = decide(pred, 0, warned_only, locate(warned_only, names), names, None, layers)
    assert not k.known and "branch of that range fell back" in k.reason
    # nor when TensorRT says a candidate was not offloaded (it may be the range's branch, on the GPU unwarned)
    partial = parse_build_log([x.replace("4 out of 4", "4 out of 5") for x in _offload_log()])
    k = decide(pred, 0, partial, locate(partial, names), names, None, layers)
    assert not k.known
