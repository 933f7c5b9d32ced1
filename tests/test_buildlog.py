"""Build-log parsing: the real trtexec excerpt of seed 002, TensorRT 10 logs, fallback and
16-subgraph warnings, fused engine names, profile attribution."""

from __future__ import annotations

import pytest

from placetune.backends.tensorrt.buildlog import (
    locate,
    onnx_name_of,
    parse_build_log,
    split_engine_name,
)
from placetune.backends.tensorrt.layer_profile import attribute_profile

# shared/seeds/002: trtexec --int8 --useDLACore=0 --allowGPUFallback on model_gn (Orin, 2022)
SEED_002 = """\
[03/31/2022-14:34:54] [I] [TRT] ---------- Layers Running on DLA ----------
[03/31/2022-14:34:54] [I] [TRT] [DlaLayer] {ForeignNode[Conv_0]}
[03/31/2022-14:34:54] [I] [TRT] [DlaLayer] {ForeignNode[Relu_10...Conv_11]}
[03/31/2022-14:34:54] [I] [TRT] [DlaLayer] {ForeignNode[Relu_21...Conv_22]}
[03/31/2022-14:34:54] [I] [TRT] [DlaLayer] {ForeignNode[Relu_32...Conv_33]}
[03/31/2022-14:34:54] [I] [TRT] [DlaLayer] {ForeignNode[Relu_43]}
[03/31/2022-14:34:54] [I] [TRT] ---------- Layers Running on GPU ----------
[03/31/2022-14:34:54] [I] [TRT] [GpuLayer] SHUFFLE: Reshape_2 + (Unnamed Layer* 7) [Shuffle]
[03/31/2022-14:34:54] [I] [TRT] [GpuLayer] PLUGIN_V2: InstanceNormalization_5
[03/31/2022-14:34:54] [I] [TRT] [GpuLayer] SHUFFLE: (Unnamed Layer* 12) [Shuffle] + Reshape_7
[03/31/2022-14:34:54] [I] [TRT] [GpuLayer] SCALE: 71 + (Unnamed Layer* 16) [Shuffle] + Mul_8
[03/31/2022-14:34:54] [I] [TRT] [GpuLayer] SCALE: 72 + (Unnamed Layer* 19) [Shuffle] + Add_9
[03/31/2022-14:34:54] [I] [TRT] [GpuLayer] SHUFFLE: Reshape_13 + (Unnamed Layer* 29) [Shuffle]
"""


def _gn_names() -> list[str]:
    """Layer names of model_gn as the older torch exporter named them (11 nodes per block)."""
    names = []
    for b in range(4):
        k = 11 * b
        names += [f"Conv_{k}", f"Reshape_{k + 2}", f"InstanceNormalization_{k + 5}", f"Reshape_{k + 7}",
                  f"Mul_{k + 8}", f"Add_{k + 9}", f"Relu_{k + 10}"]
    return names + ["GlobalAveragePool_44", "Flatten_45", "Gemm_46"]


def test_seed_002_excerpt():
    log = parse_build_log(SEED_002.splitlines())
    assert log.has_sections and log.loadables == 5
    assert log.dla_subgraphs[1] == "{ForeignNode[Relu_10...Conv_11]}"
    assert ("PLUGIN_V2", "InstanceNormalization_5") in log.gpu_layers
    loc = locate(log, _gn_names())
    assert loc.loadables == 5
    assert [loc.devices[n] for n in ("Conv_0", "Relu_10", "Conv_11", "Relu_21", "Conv_22", "Relu_43")] == ["DLA"] * 6
    # fused GPU names map back, constants ("71") and unnamed helpers are ignored
    for n in ("Reshape_2", "InstanceNormalization_5", "Reshape_7", "Mul_8", "Add_9", "Reshape_13"):
        assert loc.devices[n] == "GPU", n
    assert loc.subgraphs[1] == ["Relu_10", "Conv_11"]
    assert "InstanceNormalization_16" not in loc.devices  # the excerpt stops there: not located


def test_ilogger_pairs_and_severities():
    lines = [
        ("INFO", "---------- Layers Running on DLA ----------"),
        ("INFO", "[DlaLayer] {ForeignNode[a...c]}"),
        ("INFO", "---------- Layers Running on GPU ----------"),
        ("INFO", "[GpuLayer] CONVOLUTION: d + e"),
        ("WARNING", "Layer 'b' (SHUFFLE): Unsupported on DLA. Switching this layer's device type to GPU."),
        (1, "2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error"),
    ]
    log = parse_build_log(lines)
    assert log.errors == ["2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error"]
    assert len(log.warnings) == 1 and "b" in log.fallbacks
    # b sits inside the a...c range but TensorRT switched it to the GPU and lists it there
    log.gpu_layers.append(("SHUFFLE", "b"))
    loc = locate(log, ["a", "b", "c", "d", "e"])
    assert loc.devices == {"a": "DLA", "b": "GPU", "c": "DLA", "d": "GPU", "e": "GPU"}
    assert loc.fallback["b"].startswith("Layer 'b' (SHUFFLE)")


@pytest.mark.parametrize("warning, name", [
    ("Layer '/model.22/Reshape' (SHUFFLE): Unsupported on DLA. Switching this layer's device type to GPU.",
     "/model.22/Reshape"),
    ("Default DLA is enabled but layer Gather_12 is not supported on DLA, falling back to GPU.", "Gather_12"),
    ("DLA supports only 16 subgraphs per DLA core. Switching to GPU for layer conv17", "conv17"),
    ("DLA supports only 8 subgraphs per DLA core. Switching to GPU for layer Conv_3.", "Conv_3"),
    ("Validation failed for DLA layer: /head/Softmax. Switching to GPU fallback.", "/head/Softmax"),
    ("DLA only supports FP16 and Int8 precision type. Switching /fc/Gemm device type to GPU.", "/fc/Gemm"),
])
def test_fallback_warnings(warning, name):
    log = parse_build_log([f"[11/02/2024-10:00:00] [W] [TRT] {warning}"])
    assert list(log.fallbacks) == [name]
    assert log.warnings == [warning]


def test_sixteen_subgraph_limit_synthetic():
    convs = [f"conv{i}" for i in range(20)]
    model = []
    for i, c in enumerate(convs):
        model += [c, f"abs{i}"]
    lines = ["---------- Layers Running on DLA ----------"]
    lines += [f"[DlaLayer] {{ForeignNode[{c}]}}" for c in convs[:16]]
    lines += ["---------- Layers Running on GPU ----------"]
    lines += [f"[GpuLayer] UNARY: abs{i}" for i in range(20)]
    lines += [f"[GpuLayer] CONVOLUTION: {c}" for c in convs[16:]]
    warn = [("WARNING", f"DLA supports only 16 subgraphs per DLA core. Switching to GPU for layer {c}")
            for c in convs[16:]]
    log = parse_build_log([("INFO", x) for x in lines] + warn)
    loc = locate(log, model)
    assert loc.loadables == 16 and log.subgraph_limit == convs[16:]
    assert loc.subgraph_limit == convs[16:]
    assert all(loc.devices[c] == "DLA" for c in convs[:16])
    assert all(loc.devices[c] == "GPU" and "16 subgraphs" in loc.fallback[c] for c in convs[16:])


def test_trt10_helpers_follow_their_onnx_node():
    network = [
        ("/conv1/Conv", "/conv1/Conv"),
        ("/relu/Relu", "/relu/Relu"),
        ("ONNXTRT_ShapeShuffle_0", "/flatten/Flatten"),  # a parser helper is the only layer of its node
        ("/fc/Gemm", "/fc/Gemm"),
        ("/fc/Gemm_3", "/fc/Gemm"),                     # bias helper of the Gemm
        ("(Unnamed Layer* 9) [Constant]", None),
    ]
    log = parse_build_log([
        "---------- Layers Running on DLA ----------",
        "[DlaLayer] {ForeignNode[/conv1/Conv.../relu/Relu]}",
        "[DlaLayer] {ForeignNode[/fc/Gemm_3]}",
        "---------- Layers Running on GPU ----------",
        "[GpuLayer] SHUFFLE: ONNXTRT_ShapeShuffle_0",
        "[GpuLayer] MATRIX_MULTIPLY: /fc/Gemm",
        "[GpuLayer] REFORMAT: Reformatting CopyNode for Input Tensor 0 to /relu/Relu",
    ])
    loc = locate(log, ["/conv1/Conv", "/relu/Relu", "/flatten/Flatten", "/fc/Gemm"], network)
    # the primary layer decides (/fc/Gemm on GPU) even though its helper ran on the DLA
    assert loc.devices == {"/conv1/Conv": "DLA", "/relu/Relu": "DLA", "/flatten/Flatten": "GPU", "/fc/Gemm": "GPU"}
    assert loc.subgraphs == [["/conv1/Conv", "/relu/Relu"], ["/fc/Gemm"]]
    assert loc.unmapped == []


def test_fused_names_and_myelin():
    known = {n: 0 for n in ("Conv_0", "Relu_1", "Sigmoid_4", "Mul_5", "Conv_1", "Conv_10", "a + b")}
    assert split_engine_name("Conv_0 + Relu_1", known) == ["Conv_0", "Relu_1"]
    assert split_engine_name("PWN(PWN(Sigmoid_4), Mul_5)", known) == ["Sigmoid_4", "Mul_5"]
    assert split_engine_name("Conv_10 + copy of something", known) == ["Conv_10"]  # not Conv_1
    assert split_engine_name("a + b", known) == ["a + b"]
    # parallel branches run as one engine layer (a real 8.2 --exportProfile): every branch, in order
    known.update({n: 0 for n in ("Conv_171", "Relu_172", "Conv_178", "Relu_179")})
    assert split_engine_name("Conv_171 + Relu_172 || Conv_178 + Relu_179", known) == [
        "Conv_171", "Relu_172", "Conv_178", "Relu_179"]
    names = ["/blk/ln/LayerNorm", "/blk/fc1/MatMul", "/blk/act/Gelu", "/blk/fc2/MatMul", "/head/Conv"]
    log = parse_build_log([
        "[GpuLayer] MYELIN: {ForeignNode[/blk/ln/LayerNorm.../blk/fc2/MatMul]}",  # Myelin, not DLA (§0.6)
        "[DlaLayer] {ForeignNode[/head/Conv]}",
    ])
    loc = locate(log, names)
    assert [loc.devices[n] for n in names] == ["GPU"] * 4 + ["DLA"]
    assert loc.loadables == 1


def test_names_with_dots_in_ranges():
    names = ["/cnn/cnn.0/Conv", "/cnn/cnn.1/Relu", "/cnn/cnn.11/Relu", "x."]
    log = parse_build_log(["[DlaLayer] {ForeignNode[/cnn/cnn.0/Conv.../cnn/cnn.11/Relu]}",
                           "[DlaLayer] {ForeignNode[x..../cnn/cnn.0/Conv]}"])
    loc = locate(log, names)
    assert loc.subgraphs[0] == names[:3]
    assert loc.subgraphs[1] == names  # "x." ... "/cnn/cnn.0/Conv": the split that names known layers
    assert loc.unmapped == []


def test_foreign_node_of_a_fused_list():
    """A DLA subgraph may be printed as the fused list of its layers,
    ``{ForeignNode[A + B + C]}``, not only as the range ``A...C``: every named layer is on the DLA."""
    names = ["/conv1/Conv", "/relu1/Relu", "/pool/MaxPool", "/conv2/Conv", "/fc/Gemm"]
    log = parse_build_log(["[DlaLayer] {ForeignNode[/conv1/Conv + /relu1/Relu + /conv2/Conv]}",
                           "[GpuLayer] POOLING: /pool/MaxPool", "[GpuLayer] CONVOLUTION: /fc/Gemm"])
    loc = locate(log, names)
    assert loc.subgraphs[0] == ["/conv1/Conv", "/relu1/Relu", "/conv2/Conv"] and loc.unmapped == []
    assert [loc.devices[n] for n in names] == ["DLA", "DLA", "GPU", "DLA", "GPU"]


def test_unknown_names_are_reported_not_guessed():
    log = parse_build_log(["[DlaLayer] {ForeignNode[Foo...Bar]}", "[GpuLayer] SHUFFLE: Baz"])
    loc = locate(log, ["a", "b"])
    assert loc.devices == {} and loc.unmapped == ["{ForeignNode[Foo...Bar]}", "Baz"]


def test_no_sections_without_dla():
    log = parse_build_log(["Engine generation completed in 1.2 seconds."])
    assert not log.has_sections and log.loadables == 0


def test_metadata_read_per_onnx_parser_format():
    """The node is what precedes the first " | " inside the brackets, whatever follows it."""
    assert onnx_name_of("[ONNX Layer: /conv1/Conv]") == "/conv1/Conv"
    # onnx-tensorrt 8.6-GA onnx2trt_utils.cpp processMetadata + filterDocString: doc-string lines
    assert onnx_name_of("[ONNX Layer: /conv1/Conv | x = self.conv1(x) | # a 'quoted' note]") == "/conv1/Conv"
    # 10.0-GA / 10.1-GA importerUtils.cpp processMetadata: the local function
    assert onnx_name_of("[ONNX Layer: /c/Conv | Local Function: B]") == "/c/Conv"
    # later main importerUtils.cpp (0137504e): the local-function stack, innermost first
    assert onnx_name_of("[ONNX Layer: /c/Conv | b_node (B) | a_node (A)]") == "/c/Conv"
    # a node name with brackets stays whole; truncateString keeps both ends around " ... "
    assert onnx_name_of("[ONNX Layer: (Unnamed Layer* 7) [Shuffle]]") == "(Unnamed Layer* 7) [Shuffle]"
    assert onnx_name_of("[ONNX Layer: /c/Conv | a (A) ... z (Z)]") == "/c/Conv"
    assert onnx_name_of("") is None and onnx_name_of(None) is None and onnx_name_of("fused") is None


def test_fused_metadata_names_every_node():
    """An engine layer fused from several network layers joins their metadata with \\x1f."""
    from placetune.backends.tensorrt.worker_names import onnx_nodes
    from placetune.plan.apply import onnx_node_of

    fused = "[ONNX Layer: /a/Conv]\x1f[ONNX Layer: /a/Relu | Local Function: B]\x1e[ONNX Layer: /a/Conv]"
    assert onnx_nodes(fused) == ["/a/Conv", "/a/Relu"]
    assert onnx_name_of(fused) == "/a/Conv"
    assert onnx_node_of(fused) == ["/a/Conv", "/a/Relu"]
    assert onnx_node_of("[ONNX Layer: /c/Conv | Local Function: B]") == ["/c/Conv"]


def test_profile_attribution_dla_group():
    # per-layer profile names on a DLA platform (reference §2.5, NVIDIA/TensorRT #3143)
    log = parse_build_log(["[DlaLayer] {ForeignNode[Conv_0...Concat_198]}", "[GpuLayer] CONVOLUTION: Head_1"])
    profile = [["images to nvm", 0.0852], ["{ForeignNode[Conv_0...Concat_198]}", 0.0085],
               ["head_3 from nvm", 7.6931], ["images copy finish", 0.0017], ["Head_1", 0.5]]
    s = attribute_profile(profile, log, ["Conv_0", "Mid_5", "Concat_198", "Head_1"])
    assert s.dla_ms == pytest.approx(0.0852 + 0.0085 + 7.6931 + 0.0017)
    assert s.gpu_ms == pytest.approx(0.5)
    assert sum(s.layer_times_ms[n] for n in ("Conv_0", "Mid_5", "Concat_198")) == pytest.approx(s.dla_ms)
    assert [(g["device"], g["layers"]) for g in s.segments] == [("DLA0", 3), ("GPU", 1)]
    assert s.segments[1]["start_ms"] == pytest.approx(s.dla_ms)


def test_legacy_fallback_wording_from_seed_003():
    from pathlib import Path

    from placetune.backends.tensorrt.buildlog import parse_build_log

    text = (Path(__file__).parent / "data" / "trtexec_seed003_legacy_dla0.log").read_text().splitlines()
    log = parse_build_log(text)
    assert "prob" in log.fallbacks and "falling back to GPU" in log.fallbacks["prob"]


def test_islands_whose_ends_are_parser_layers_are_read_with_the_parsers_lines():
    """A DLA island may start or end at a layer the parser made beyond the nodes (``max_3``: the
    second layer of a three-input Max, onnx-tensorrt elementwiseHelper; ``ONNXTRT_Broadcast_5``,
    10.x). Without the parser's lines such a ForeignNode range names a layer the model does not
    have and was left unmapped. The ``Parsing node``/``Registering layer`` lines (onnx-tensorrt
    ModelImporter.cpp / ImporterContext.cpp registerLayer, 8.5-GA to main; older parsers prefix the
    source location, as in the published logs of NVIDIA/TensorRT#1090 and #1389) give the order and
    the owner of every registered layer."""
    from placetune.backends.tensorrt.buildlog import parser_network, split_prefix

    v = "[10/06/2020-09:46:28] [V] [TRT] "
    parser = parser_network(split_prefix(x)[1] for x in [
        v + "ModelImporter.cpp:107: Parsing node: conv0 [Conv]",
        v + "ImporterContext.hpp:122: Registering layer: conv0 for ONNX node: conv0",
        v + "Parsing node: max [Max]",
        v + "Registering layer: w2 for ONNX node: w2",  # a Constant for weights: a helper of max
        v + "Registering layer: max for ONNX node: max",
        v + "Registering layer: max_3 for ONNX node: max",
        v + "Registering layer: ONNXTRT_Broadcast_5 required by ONNX-TRT",
        v + "Parsing node: conv2 [Conv]",
        v + "Registering layer: conv2 for ONNX node: conv2",
        v + "Registering tensor: output for ONNX tensor: output",
    ])
    assert parser == [("conv0", "conv0"), ("w2", "max"), ("max", "max"), ("max_3", "max"),
                      ("ONNXTRT_Broadcast_5", "max"), ("conv2", "conv2")]
    log = parse_build_log(["---------- Layers Running on DLA ----------",
                           "[DlaLayer] {ForeignNode[conv0]}", "[DlaLayer] {ForeignNode[max_3...conv2]}",
                           "---------- Layers Running on GPU ----------", "[GpuLayer] ELEMENTWISE: max"])
    names = ["conv0", "max", "conv2"]
    without = locate(log, names)
    assert "{ForeignNode[max_3...conv2]}" in without.unmapped
    with_parser = locate(log, names, parser)
    assert not with_parser.unmapped
    assert with_parser.devices == {"conv0": "DLA", "max": "GPU", "conv2": "DLA"}
    assert with_parser.subgraphs == [["conv0"], ["max", "conv2"]]


def _step5_parser(extra: list[str] = ()) -> list:
    """The parser's lines of an 8.5 ``trtexec --verbose`` build of the jetson_dla_tutorial's
    model_bn (Conv_0...Relu_7, GlobalAveragePool_8, a flatten, Gemm_15 with a bias), in the
    wording of onnx-tensorrt 8.5-GA (ModelImporter.cpp:122, ImporterContext.cpp:101): the Gemm's
    bias Constant is registered (named after its weights), its broadcast Shuffle and its bias
    ElementWise are never registered (onnx2trt_utils.cpp:163, builtin_op_importers.cpp:1656)."""
    from placetune.backends.tensorrt.buildlog import parser_network, split_prefix

    v = "[03/31/2022-15:12:47] [V] [TRT] "
    nodes = [("Conv_0", "Conv"), ("BatchNormalization_1", "BatchNormalization"), ("Relu_2", "Relu"),
             ("Conv_3", "Conv"), ("BatchNormalization_4", "BatchNormalization"), ("Relu_5", "Relu"),
             ("Conv_6", "Conv"), ("Relu_7", "Relu"), ("GlobalAveragePool_8", "GlobalAveragePool"),
             ("Flatten_9", "Flatten")]
    lines = []
    for name, op in nodes:
        lines += [v + f"Parsing node: {name} [{op}]", v + f"Registering layer: {name} for ONNX node: {name}"]
    lines += [v + "Parsing node: Gemm_15 [Gemm]", v + "Registering layer: Gemm_15 for ONNX node: Gemm_15",
              v + "Registering layer: linear.bias for ONNX node: linear.bias", *extra,
              v + "Registering tensor: output_0 for ONNX tensor: output_0"]
    return parser_network(split_prefix(x)[1] for x in lines)


STEP5_NAMES = ["Conv_0", "BatchNormalization_1", "Relu_2", "Conv_3", "BatchNormalization_4", "Relu_5", "Conv_6",
               "Relu_7", "GlobalAveragePool_8", "Flatten_9", "Gemm_15"]


def test_a_fused_loadable_with_unregistered_parser_layers_still_maps():
    """The published line (corpus dlatutorial-readme-step5-bn): a fused DLA loadable that holds the
    Gemm's unregistered bias Shuffle and ElementWise names Gemm_15 too, which places the node."""
    from pathlib import Path

    from placetune.backends.tensorrt.placement_known import decide

    lines = (Path(__file__).parent / "data" / "trt_corpus" / "dlatutorial-readme-step5-bn" / "console.log"
             ).read_text().splitlines()
    blog = parse_build_log(lines)
    network = _step5_parser()
    loc = locate(blog, STEP5_NAMES, network)
    assert loc.unresolved == [] and loc.devices["Gemm_15"] == "DLA" and loc.devices["Relu_7"] == "DLA"
    predicted = {n: ("GPU" if n == "GlobalAveragePool_8" else "DLA0") for n in STEP5_NAMES}
    known = decide(predicted, 0, blog, loc, STEP5_NAMES, network)
    assert known.known and known.realized["Gemm_15"] == "DLA0" and known.realized["GlobalAveragePool_8"] == "GPU"


def _unregistered_end_log() -> list[str]:
    """The step-5 model all on the DLA but its pooling: the second loadable runs from the flatten to
    the Gemm's bias add, the last layer of the network, which the 8.x parser never registered."""
    i = "[03/31/2022-15:12:48] [I] [TRT] "
    return [i + "---------- Layers Running on DLA ----------",
            i + "[DlaLayer] {ForeignNode[Conv_0...Relu_7]}",
            i + "[DlaLayer] {ForeignNode[Flatten_9...(Unnamed Layer* 20) [ElementWise]]}",
            i + "---------- Layers Running on GPU ----------",
            i + "[GpuLayer] REDUCE: GlobalAveragePool_8"]


def test_a_loadable_ending_at_an_unregistered_parser_layer_is_refused_not_filled_in():
    """``{ForeignNode[Flatten_9...(Unnamed Layer* 20) [ElementWise]]}``: no parser line names its
    end, so which layers lie between the ends cannot be read; the placement is UNKNOWN with one
    line saying why (before, the range went unread and its layers took the predicted device,
    so a Gemm_15 asked on the GPU but run on the DLA would have been recorded on the GPU)."""
    from placetune.backends.tensorrt.placement_known import decide, mark_known

    blog = parse_build_log(_unregistered_end_log())
    network = _step5_parser()
    loc = locate(blog, STEP5_NAMES, network)
    end = "(Unnamed Layer* 20) [ElementWise]"
    assert loc.unresolved == [("{ForeignNode[Flatten_9...(Unnamed Layer* 20) [ElementWise]]}", end)]
    predicted = {n: ("GPU" if n in ("GlobalAveragePool_8", "Gemm_15") else "DLA0") for n in STEP5_NAMES}
    known = decide(predicted, 0, blog, loc, STEP5_NAMES, network)
    assert not known.known and known.realized is None and known.loadables == 2
    extra: dict = {}
    mark_known(extra, known, blog)
    assert extra["placement_known"] is False and "\n" not in extra["placement_unknown"]
    assert end in extra["placement_unknown"] and "Registering layer" in extra["placement_unknown"]


def test_a_loadable_ending_at_a_parser_layer_registered_without_a_name_maps():
    """``registerLayer`` with an empty basename keeps TensorRT's default name but logs it
    (ImporterContext.cpp:97-101, 8.5-GA): ``Registering layer: (Unnamed Layer* 20) [ElementWise]
    for ONNX node: ``. That end is in the network as read, so the range maps, and its layer counts
    for the node being parsed."""
    from placetune.backends.tensorrt.placement_known import decide

    v = "[03/31/2022-15:12:47] [V] [TRT] "
    network = _step5_parser([v + "Registering layer: (Unnamed Layer* 20) [ElementWise] for ONNX node: "])
    assert network[-1] == ("(Unnamed Layer* 20) [ElementWise]", "Gemm_15")
    blog = parse_build_log(_unregistered_end_log())
    loc = locate(blog, STEP5_NAMES, network)
    assert loc.unresolved == [] and loc.subgraphs[1] == ["Flatten_9", "Gemm_15"]
    predicted = {n: ("GPU" if n in ("GlobalAveragePool_8", "Gemm_15") else "DLA0") for n in STEP5_NAMES}
    known = decide(predicted, 0, blog, loc, STEP5_NAMES, network)
    assert known.known and known.realized["Gemm_15"] == "DLA0"  # as TensorRT ran it, not as asked


def test_a_layer_tensorrt_switched_to_the_gpu_is_on_the_gpu_though_no_placement_line_names_it():
    """TensorRT 10.3 on an AGX Orin (corpus orin-agx-trt10.3-dla-offloaded: ResNet-50, its published
    placement section) offloads two ForeignNodes and names two [GpuLayer]s; the same report shows the
    warning "Layer '/Flatten' (SHUFFLE): Unsupported on DLA. Switching ... to GPU." (abbreviated there;
    here in the full wording of the corpus' 8.6/10.x logs) and no placement line names '/Flatten'. It
    ran on the GPU: it was recorded on the DLA, filled in from the request."""
    from pathlib import Path

    from placetune.backends.tensorrt.placement_known import decide

    corpus = Path(__file__).parent / "data" / "trt_corpus" / "orin-agx-trt10.3-dla-offloaded" / "console.log"
    lines = corpus.read_text().splitlines() + [
        "[W] [TRT] Layer '/Flatten' (SHUFFLE): Unsupported on DLA. Switching this layer's device type to GPU."]
    names = ["/conv1/Conv", "/relu/Relu", "/layer4/layer4.2/relu_2/Relu", "/avgpool/GlobalAveragePool",
             "/Flatten", "/fc/Gemm"]
    blog = parse_build_log(lines)
    loc = locate(blog, names)
    assert loc.devices["/Flatten"] == "GPU" and "Unsupported on DLA" in loc.fallback["/Flatten"]
    known = decide({n: "DLA0" for n in names}, 0, blog, loc, names)
    assert known.known and known.loadables == 2
    assert known.realized == {"/conv1/Conv": "DLA0", "/relu/Relu": "DLA0", "/layer4/layer4.2/relu_2/Relu": "DLA0",
                              "/avgpool/GlobalAveragePool": "GPU", "/Flatten": "GPU", "/fc/Gemm": "DLA0"}
    # the warning wins over a ForeignNode range that spans the layer, too
    spanning = parse_build_log(["{ForeignNode[/conv1/Conv.../fc/Gemm]} successfully offloaded to DLA.",
                                lines[-1]])
    assert locate(spanning, names).devices["/Flatten"] == "GPU"


def test_copy_layers_are_located_by_their_names():
    """A COPY layer may be a model layer (8.6 QDQ: the input QuantizeLinear runs as a copy); a copy of a
    tensor named after no layer (torch2trt's '..._copy_output', 8.4) is left unmapped, not placed."""
    log = parse_build_log([
        "[01/10/2024-21:52:53] [I] [TRT] ---------- Layers Running on GPU ----------",
        "[01/10/2024-21:52:53] [I] [TRT] [GpuLayer] COPY: /model/backbone0/conv/_input_quantizer/QuantizeLinear",
        "[12/30/2022-14:03:16] [TRT] [I] [GpuLayer] SHUFFLE: head:26:SHUFFLE:GPU",
        "[12/30/2022-14:03:16] [TRT] [I] [GpuLayer] COPY: head:26:SHUFFLE:GPU_copy_output",
        "[12/30/2022-14:03:16] [TRT] [I] [GpuLayer] COPY: (Unnamed Layer* 1413) [Convolution]_output copy",
    ])
    q = "/model/backbone0/conv/_input_quantizer/QuantizeLinear"
    loc = locate(log, [q, "head:26:SHUFFLE:GPU"])
    assert loc.devices == {q: "GPU", "head:26:SHUFFLE:GPU": "GPU"}
    assert loc.unmapped == ["head:26:SHUFFLE:GPU_copy_output"]


def test_a_trt7_list_cut_inside_its_last_name_keeps_the_names_before_the_cut():
    """TensorRT 7 writes each list item with its comma: a published line cut mid-name (corpus
    trt-2319-...) lists the complete items; a message with a comma after an empty section is no list."""
    log = parse_build_log([
        "[I] [TRT] --------------- Layers running on DLA:",
        "[I] [TRT] {a,b}, {c}, {d,e",
        "[I] [TRT] --------------- Layers running on GPU:",
        "[I] [TRT] Conv_1 + Relu_2, Pool_3, (Unnamed Layer* 0) [Cons",
    ])
    assert log.dla_subgraphs == ["{a,b}", "{c}"]
    assert log.gpu_layers == [("", "Conv_1 + Relu_2"), ("", "Pool_3")]
    log = parse_build_log([
        "[I] [TRT] --------------- Layers running on GPU:",
        "[I] [TRT] Some tactics do not have sufficient workspace memory to run. Increasing workspace size may "
        "increase performance, please check verbose output.",
    ])
    assert log.gpu_layers == []


def test_an_int8_node_without_a_scale_leaves_the_dla():
    """8.5/8.6's 'Node: X cannot run in INT8 mode due to missing scale and zero point. This node will not
    run on DLA.' (corpus super-gradients-1760-...) is a fallback of its own wording."""
    log = parse_build_log(["[W] [TRT] Node: /head/Relu cannot run in INT8 mode due to missing scale and zero point. "
                           "This node will not run on DLA."])
    assert list(log.fallbacks) == ["/head/Relu"] and log.warnings


def test_a_trt7_list_wrapped_by_the_console_is_read_whole():
    """A console wraps TensorRT 7's one-line list into bare lines that cut names (corpus
    tensorrt-demos-200-trt7-wrapped-dla-list): the bare lines continue it."""
    log = parse_build_log([
        "[TensorRT] INFO: --------------- Layers running on DLA:",
        "[TensorRT] INFO: {a_1,b_2}, {c_",
        "3,d_4}, {e_5},",
        "[TensorRT] INFO: --------------- Layers running on GPU:",
        "[TensorRT] INFO: f_6 + g_7, i_9, h_",
        "8,",
    ])
    assert log.dla_subgraphs == ["{a_1,b_2}", "{c_3,d_4}", "{e_5}"]
    assert log.gpu_layers == [("", "f_6 + g_7"), ("", "i_9"), ("", "h_8")]
