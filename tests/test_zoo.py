"""Tests of placetune.zoo: structure, shapes, MAC counts, determinism, errors."""

from __future__ import annotations

import gzip
import pathlib

import numpy as np
import onnx
import pytest
from onnx import numpy_helper, shape_inference

from placetune.model import zoo
from placetune.model.zoo.graph import Graph
from placetune.errors import ConfigError, UnknownNameError

DATA = pathlib.Path(__file__).parent / "data"

ALL = [
    "alexnet",
    "googlenet",
    "mobilenetv1",
    "mobilenetv2",
    "model-bn",
    "model-gn",
    "resnet18",
    "resnet34",
    "resnet50",
    "resnet101",
    "resnet152",
    "seed-block",
    "ssdlite-mobilenetv3",
    "unet-small",
    "vgg11",
    "vgg13",
    "vgg16",
    "vgg19",
    "vit-tiny",
    "yolo11n",
    "yolo11n-seg",
    "yolo11s",
    "yolo11s-seg",
    "yolov8n",
    "yolov8n-seg",
    "yolov8s",
    "yolov8s-seg",
]

#: the detectors keep their export's tensor names and opset (Ultralytics: images -> output0, opset 18)
YOLO = ["yolo11n", "yolo11s", "yolov8n", "yolov8s"]
YOLO_SEG = [f"{name}-seg" for name in YOLO]
IO = {**{name: ("images", "output0") for name in YOLO}, **{name: ("images", "output0", "output1") for name in YOLO_SEG},
      "ssdlite-mobilenetv3": ("images", "boxes", "scores")}
EXPORT_OPSET = {name: 18 for name in YOLO + YOLO_SEG}
#: the second and later outputs of a network with several: name -> (output name, shape without batch)
MORE_OUTPUTS = {"ssdlite-mobilenetv3": [("scores", [3234, 91])],
                **{name: [("output1", [32, 160, 160])] for name in YOLO_SEG}}

INPUT_SHAPE = {
    "alexnet": [3, 227, 227],
    "googlenet": [3, 224, 224],
    "mobilenetv1": [3, 224, 224],
    "mobilenetv2": [3, 224, 224],
    "model-bn": [3, 32, 32],
    "model-gn": [3, 32, 32],
    "resnet18": [3, 224, 224],
    "resnet34": [3, 224, 224],
    "resnet50": [3, 224, 224],
    "resnet101": [3, 224, 224],
    "resnet152": [3, 224, 224],
    "seed-block": [384, 56, 56],
    "ssdlite-mobilenetv3": [3, 320, 320],
    "unet-small": [3, 256, 256],
    "vgg11": [3, 224, 224],
    "vgg13": [3, 224, 224],
    "vgg16": [3, 224, 224],
    "vgg19": [3, 224, 224],
    "vit-tiny": [3, 224, 224],
    **{name: [3, 640, 640] for name in YOLO + YOLO_SEG},
}

OUTPUT_SHAPE = {
    "alexnet": [1000],
    "googlenet": [1000],
    "mobilenetv1": [1001],
    "mobilenetv2": [1000],
    "model-bn": [10],
    "model-gn": [10],
    "resnet18": [1000],
    "resnet34": [1000],
    "resnet50": [1000],
    "resnet101": [1000],
    "resnet152": [1000],
    "seed-block": [1152, 56, 56],
    "ssdlite-mobilenetv3": [3234, 4],
    "unet-small": [2, 256, 256],
    "vgg11": [1000],
    "vgg13": [1000],
    "vgg16": [1000],
    "vgg19": [1000],
    "vit-tiny": [1000],
    **{name: [84, 8400] for name in YOLO},
    **{name: [116, 8400] for name in YOLO_SEG},  # 4 box + 80 classes + 32 mask coefficients
}

# published GMACs (multiply-accumulates, batch 1) and the tolerance
PUBLISHED_GMACS = {
    "resnet18": (1.81, 0.03),
    "resnet50": (4.09, 0.03),
    "resnet34": (3.66, 0.03),  # torchvision resnet34: 3.66 GMACs (conv + fc)
    "resnet101": (7.80, 0.03),  # torchvision resnet101: 7.80 GMACs
    "resnet152": (11.51, 0.03),  # torchvision resnet152: 11.51 GMACs (conv + fc)
    "mobilenetv1": (0.569, 0.03),  # MobileNetV1 1.0/224: 569 M mult-adds (Howard et al. 2017, Table 8)
    "mobilenetv2": (0.30, 0.03),
    "vgg11": (7.61, 0.03),  # torchvision vgg11: 7.61 GMACs
    "vgg13": (11.31, 0.03),  # torchvision vgg13: 11.31 GMACs
    "vgg16": (15.47, 0.03),
    "vgg19": (19.63, 0.03),  # torchvision vgg19: 19.63 GMACs
    "alexnet": (0.72, 0.03),  # BVLC Caffe AlexNet at 227, grouped convs
    "googlenet": (1.5, 0.10),
    "vit-tiny": (1.26, 0.03),  # timm vit_tiny_patch16_224
    "yolo11n": (3.25, 0.03),  # Ultralytics YOLO11n at 640: 6.5 GFLOPs
    "ssdlite-mobilenetv3": (0.58, 0.03),  # torchvision ssdlite320_mobilenet_v3_large: 0.58 GFLOPS (their MACs)
    "yolov8n": (4.35, 0.03),  # Ultralytics YOLOv8n at 640: 8.7 GFLOPs
    "yolov8s": (14.3, 0.03),  # Ultralytics YOLOv8s at 640: 28.6 GFLOPs
    # Ultralytics 8.4.190's model summary (fused) at 640, GFLOPs / 2
    "yolo11s": (10.8, 0.03),  # 21.6 GFLOPs
    "yolov8n-seg": (6.0, 0.03),  # 12.0 GFLOPs
    "yolov8s-seg": (20.05, 0.03),  # 40.1 GFLOPs
    "yolo11n-seg": (4.9, 0.03),  # 9.8 GFLOPs
    "yolo11s-seg": (16.55, 0.03),  # 33.1 GFLOPs
}

# where the weights are too big to materialise in a unit test (> ~100 MB)
BIG = {"alexnet", "vgg11", "vgg13", "vgg16", "vgg19", "resnet101", "resnet152", "yolov8s", "yolo11s", "yolov8s-seg",
       "yolo11s-seg"}

# for these ops, the inputs at these positions are shape logic and must be Constant nodes
SHAPE_INPUTS = {
    "Reshape": [1],
    "Resize": [2],
    "Clip": [1, 2],
    "Expand": [1],
    "Squeeze": [1],
    "Split": [1],
    "Gather": [1],
}


def _dims(vi: onnx.ValueInfoProto) -> list[int]:
    return [d.dim_value for d in vi.type.tensor_type.shape.dim]


def _infer(model: onnx.ModelProto) -> dict[str, list[int]]:
    """Strict shape inference; returns every tensor's static shape."""
    inferred = shape_inference.infer_shapes(model, strict_mode=True)
    g = inferred.graph
    shapes = {vi.name: _dims(vi) for vi in [*g.value_info, *g.input, *g.output]}
    shapes.update({t.name: list(t.dims) for t in g.initializer})
    for node in g.node:
        for out in node.output:
            assert out in shapes, f"no inferred shape for {out}"
            assert all(d > 0 for d in shapes[out]), f"non-static shape for {out}: {shapes[out]}"
    return shapes


def _macs(model: onnx.ModelProto) -> int:
    """MACs from inferred shapes: Conv N*Cout*Ho*Wo*Cin/g*kh*kw; Gemm/MatMul M*N*K."""
    shapes = _infer(model)
    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":
            out = shapes[node.output[0]]
            w = shapes[node.input[1]]  # [Cout, Cin/group, kh, kw]
            total += int(np.prod(out)) * w[1] * w[2] * w[3]
        elif node.op_type == "ConvTranspose":
            x = shapes[node.input[0]]
            w = shapes[node.input[1]]  # [Cin, Cout/group, kh, kw]
            total += int(np.prod(x)) * w[1] * w[2] * w[3]
        elif node.op_type in ("Gemm", "MatMul"):
            out = shapes[node.output[0]]
            k = shapes[node.input[0]][-1]
            total += int(np.prod(out)) * k
    return total


def _weights_as_inputs(model: onnx.ModelProto) -> onnx.ModelProto:
    """The shape-only form with every initializer turned into a typed graph input."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for t in m.graph.initializer:
        m.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    del m.graph.initializer[:]
    return m


@pytest.fixture(scope="module")
def built() -> dict[str, onnx.ModelProto]:
    return {name: zoo.build(name) for name in ALL}


def test_names_sorted_and_complete() -> None:
    assert zoo.names() == sorted(ALL)


@pytest.mark.parametrize("name", ALL)
def test_describe_one_line(name: str) -> None:
    text = zoo.describe(name)
    assert text and "\n" not in text


@pytest.mark.parametrize("name", ALL)
def test_structure_and_shapes(name: str, built: dict[str, onnx.ModelProto]) -> None:
    m = built[name]
    inp, out = IO.get(name, ("input", "output"))[:2]
    assert [o.version for o in m.opset_import if o.domain == ""] == [EXPORT_OPSET.get(name, 17)]
    assert [i.name for i in m.graph.input] == [inp]
    assert [o.name for o in m.graph.output] == [out, *(o for o, _ in MORE_OUTPUTS.get(name, []))]
    assert _dims(m.graph.input[0]) == [1, *INPUT_SHAPE[name]]
    shapes = _infer(m)
    assert shapes[out] == [1, *OUTPUT_SHAPE[name]]
    for other, shape in MORE_OUTPUTS.get(name, []):
        assert shapes[other] == [1, *shape]

    node_names = [n.name for n in m.graph.node]
    assert all(node_names) and len(set(node_names)) == len(node_names)
    assert all(n.startswith("/") for n in node_names)
    tensors = [inp, *(t.name for t in m.graph.initializer)]
    tensors += [o for n in m.graph.node for o in n.output]
    assert len(set(tensors)) == len(tensors)


@pytest.mark.parametrize("name", ALL)
def test_shape_only_form(name: str, built: dict[str, onnx.ModelProto]) -> None:
    """weights=False: initializers have dims and type but no data; constants have data."""
    m = built[name]
    for t in m.graph.initializer:
        assert t.data_type == onnx.TensorProto.FLOAT and len(t.dims) > 0
        assert not t.raw_data and not t.float_data
    constants = {}
    for node in m.graph.node:
        if node.op_type == "Constant":
            (attr,) = node.attribute
            constants[node.output[0]] = numpy_helper.to_array(attr.t)
    for node in m.graph.node:
        for pos in SHAPE_INPUTS.get(node.op_type, []):
            assert node.input[pos] in constants, f"{node.name} input {pos} is not a Constant"
    # the structure is sound: the checker passes once the data-less weights become inputs
    onnx.checker.check_model(_weights_as_inputs(m), full_check=True)


@pytest.mark.parametrize("name", sorted(set(ALL) - BIG))
def test_weights_pass_full_checker(name: str) -> None:
    m = zoo.build(name, weights=True)
    onnx.checker.check_model(m, full_check=True)
    for t in m.graph.initializer:
        arr = numpy_helper.to_array(t)
        assert arr.dtype == np.float32 and list(arr.shape) == list(t.dims)
        assert np.isfinite(arr).all() and np.abs(arr).max() <= 1.0
    assert _infer(m)[IO.get(name, ("input", "output"))[1]] == [1, *OUTPUT_SHAPE[name]]


@pytest.mark.parametrize("name", sorted(BIG))
def test_big_weights_same_graph(name: str, built: dict[str, onnx.ModelProto]) -> None:
    """The weighted form differs from the shape-only one by initializer data only.

    Checked on the first initializer's data instead of materialising every weight.
    """
    m = built[name]
    first = m.graph.initializer[0]
    assert np.prod(first.dims) < 100_000  # conv1 weights, small
    small = Graph(True, onnx.GraphProto())
    small.param(first.name, list(first.dims), "weight", int(np.prod(first.dims[1:])))
    arr = numpy_helper.to_array(small.initializers[0])
    assert list(arr.shape) == list(first.dims) and np.isfinite(arr).all() and arr.std() > 0


@pytest.mark.parametrize("name", sorted(PUBLISHED_GMACS))
def test_macs_match_published(name: str, built: dict[str, onnx.ModelProto]) -> None:
    expected, tol = PUBLISHED_GMACS[name]
    got = _macs(built[name]) / 1e9
    assert abs(got - expected) <= tol * expected, f"{name}: {got:.3f} GMACs vs {expected}"


@pytest.mark.parametrize("name", ["seed-block", "model-gn", "resnet18", "unet-small", "vit-tiny", "yolov8n", "yolo11n",
                                  "yolov8n-seg"])
def test_batch_scales_input_output_and_macs(name: str, built: dict[str, onnx.ModelProto]) -> None:
    m = zoo.build(name, batch=3)
    assert _dims(m.graph.input[0]) == [3, *INPUT_SHAPE[name]]
    shapes = _infer(m)
    assert shapes[IO.get(name, ("input", "output"))[1]] == [3, *OUTPUT_SHAPE[name]]
    for other, shape in MORE_OUTPUTS.get(name, []):
        assert shapes[other] == [3, *shape]
    assert _macs(m) == 3 * _macs(built[name])


def test_model_gn_study_batch() -> None:
    m = zoo.build("model-gn", 32)
    assert _dims(m.graph.input[0]) == [32, 3, 32, 32]
    assert _infer(m)["output"] == [32, 10]


def test_seed_block_topology(built: dict[str, onnx.ModelProto]) -> None:
    m = built["seed-block"]
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Conv") == 4 and ops.count("Concat") == 1 and len(ops) == 5
    by_name = {n.name: n for n in m.graph.node}
    assert by_name["/conv1/Conv"].input[0] == "input"
    assert by_name["/conv2/Conv"].input[0] == by_name["/conv1/Conv"].output[0]
    assert by_name["/conv3/Conv"].input[0] == "input"
    assert by_name["/conv4/Conv"].input[0] == "input"
    concat = by_name["/Concat"]
    assert list(concat.input) == [by_name[f"/conv{i}/Conv"].output[0] for i in (2, 3, 4)]
    assert all(len(by_name[f"/conv{i}/Conv"].input) == 2 for i in range(1, 5))  # bias=False


def test_seed_block_matches_torch_export(built: dict[str, onnx.ModelProto]) -> None:
    real = onnx.load_from_string(gzip.decompress((DATA / "seed_block.onnx.gz").read_bytes()))
    real_nodes = [
        (n.op_type, n.name, list(n.input)) for n in real.graph.node if n.op_type != "Identity"
    ]
    ours = [(n.op_type, n.name, list(n.input)) for n in built["seed-block"].graph.node]
    assert ours == real_nodes


def test_model_gn_vs_bn(built: dict[str, onnx.ModelProto]) -> None:
    gn = [n.op_type for n in built["model-gn"].graph.node]
    bn = [n.op_type for n in built["model-bn"].graph.node]
    assert gn.count("InstanceNormalization") == 4
    assert "InstanceNormalization" not in bn and bn.count("BatchNormalization") == 4
    assert gn.count("Conv") == bn.count("Conv") == 4


def test_model_gn_mirrors_torch_export() -> None:
    """Same nodes, names and order as the real torch.onnx export of seed 002's ModelGN.

    The export's Identity nodes (zeroed, deduplicated weights) are left out, and its Shape
    node (shape of the conv output, static) is a Constant here.
    """
    real = onnx.load_from_string(gzip.decompress((DATA / "seed_model_gn.onnx.gz").read_bytes()))
    ours = zoo.build("model-gn", 32)
    real_nodes = [(n.op_type, n.name) for n in real.graph.node if n.op_type != "Identity"]
    expected = [
        ("Constant", name.replace("/Shape", "/Constant_3")) if op == "Shape" else (op, name)
        for op, name in real_nodes
    ]
    assert [(n.op_type, n.name) for n in ours.graph.node] == expected
    real_inits = {(t.name, tuple(t.dims)) for t in real.graph.initializer}
    our_inits = {(t.name, tuple(t.dims)) for t in ours.graph.initializer}
    assert real_inits <= our_inits
    # GroupNorm pieces: the group reshape, unit scale / zero bias of InstanceNormalization
    consts = {
        n.output[0]: numpy_helper.to_array(n.attribute[0].t)
        for n in ours.graph.node
        if n.op_type == "Constant"
    }
    by_name = {n.name: n for n in ours.graph.node}
    inorm = by_name["/cnn/cnn.1/InstanceNormalization"]
    assert consts[by_name["/cnn/cnn.1/Reshape"].input[1]].tolist() == [0, 8, -1]
    assert consts[inorm.input[1]].tolist() == [1.0] * 8
    assert consts[inorm.input[2]].tolist() == [0.0] * 8
    assert consts[by_name["/cnn/cnn.1/Reshape_1"].input[1]].tolist() == [32, 64, 16, 16]


def test_resnet18_names_match_torch_export(built: dict[str, onnx.ModelProto]) -> None:
    """Ours keeps BatchNormalization; the real export folded it into the convs."""
    real = onnx.load_from_string(gzip.decompress((DATA / "resnet18.onnx.gz").read_bytes()))
    real_names = [n.name for n in real.graph.node if n.op_type != "Identity"]
    ours = [n.name for n in built["resnet18"].graph.node if n.op_type != "BatchNormalization"]
    assert ours == real_names
    inits = {t.name: list(t.dims) for t in built["resnet18"].graph.initializer}
    assert inits["layer1.0.conv1.weight"] == [64, 64, 3, 3]
    assert inits["layer4.0.downsample.1.running_var"] == [512]


def test_mobilenetv2_naming_and_ops(built: dict[str, onnx.ModelProto]) -> None:
    m = built["mobilenetv2"]
    names = {n.name for n in m.graph.node}
    assert "/features/features.0/features.0.0/Conv" in names
    assert "/features/features.0/features.0.2/Clip" in names
    assert "/features/features.1/conv/conv.0/conv.0.0/Conv" in names
    assert "/features/features.3/Add" in names
    assert "/classifier/classifier.1/Gemm" in names
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("Conv") == 52 and ops.count("BatchNormalization") == 52
    assert ops.count("Clip") == 35 and ops.count("Add") == 10
    dw = [n for n in m.graph.node if n.op_type == "Conv" and
          next(a.i for a in n.attribute if a.name == "group") > 1]
    assert len(dw) == 17


def test_unet_small_has_both_upsamplers(built: dict[str, onnx.ModelProto]) -> None:
    ops = [n.op_type for n in built["unet-small"].graph.node]
    assert "ConvTranspose" in ops and ops.count("Resize") == 1 and ops.count("Concat") == 3
    (resize,) = [n for n in built["unet-small"].graph.node if n.op_type == "Resize"]
    assert resize.input[1] == ""
    consts = {n.output[0]: n for n in built["unet-small"].graph.node if n.op_type == "Constant"}
    scales = numpy_helper.to_array(consts[resize.input[2]].attribute[0].t)
    assert scales.tolist() == [1.0, 1.0, 2.0, 2.0]


def test_googlenet_and_alexnet_structure(built: dict[str, onnx.ModelProto]) -> None:
    g = [n.op_type for n in built["googlenet"].graph.node]
    assert g.count("LRN") == 2 and g.count("Concat") == 9 and g.count("Conv") == 57
    assert g[-1] == "Softmax"
    a = built["alexnet"].graph.node
    assert [n.op_type for n in a].count("LRN") == 2 and a[-1].op_type == "Softmax"
    groups = [next(x.i for x in n.attribute if x.name == "group") for n in a if n.op_type == "Conv"]
    assert groups == [1, 2, 1, 2, 2]
    assert zoo.build("alexnet", softmax=False).graph.node[-1].op_type == "Gemm"


def test_softmax_option() -> None:
    assert zoo.build("resnet50").graph.node[-1].op_type == "Softmax"
    assert zoo.build("resnet50", softmax=False).graph.node[-1].op_type == "Gemm"
    assert zoo.build("resnet18").graph.node[-1].op_type == "Gemm"
    assert zoo.build("resnet18", softmax=True).graph.node[-1].op_type == "Softmax"


def test_vit_tiny_sizes(built: dict[str, onnx.ModelProto]) -> None:
    m = built["vit-tiny"]
    assert len(m.graph.node) >= 500
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("LayerNormalization") == 25 and ops.count("Erf") == 12
    assert ops.count("Softmax") == 12 and ops[-1] == "Gemm"
    # Q @ K^T: a MatMul with two runtime inputs per block
    inits = {t.name for t in m.graph.initializer}
    runtime_mm = [n for n in m.graph.node if n.op_type == "MatMul" and not set(n.input) & inits]
    assert len(runtime_mm) == 24
    deep = zoo.build("vit-tiny", depth=48)
    assert len(deep.graph.node) >= 1900
    assert _infer(deep)["output"] == [1, 1000]
    eager = zoo.build("vit-tiny", depth=2, attention="eager")
    assert _infer(eager)["output"] == [1, 1000]
    assert _macs(eager) == _macs(zoo.build("vit-tiny", depth=2))


@pytest.mark.parametrize("name", ALL)
def test_build_is_deterministic(name: str, built: dict[str, onnx.ModelProto]) -> None:
    assert zoo.build(name).SerializeToString() == built[name].SerializeToString()


def test_weighted_build_is_deterministic() -> None:
    for name, kw in [("seed-block", {}), ("vit-tiny", {"depth": 2})]:
        a = zoo.build(name, weights=True, **kw).SerializeToString()
        assert a == zoo.build(name, weights=True, **kw).SerializeToString()


def test_export_writes_checked_model(tmp_path: pathlib.Path) -> None:
    path = zoo.export("model-gn", tmp_path / "sub" / "model_gn.onnx", batch=32)
    assert path == tmp_path / "sub" / "model_gn.onnx" and path.is_file()
    loaded = onnx.load(str(path))
    onnx.checker.check_model(loaded, full_check=True)
    assert loaded.SerializeToString() == zoo.build("model-gn", 32, weights=True).SerializeToString()


def test_unknown_name() -> None:
    with pytest.raises(UnknownNameError) as err:
        zoo.build("resnet-18")
    assert "resnet18" in str(err.value) and "vit-tiny" in str(err.value)
    with pytest.raises(UnknownNameError):
        zoo.describe("nope")
    with pytest.raises(UnknownNameError):
        zoo.export("nope", "/nonexistent/x.onnx")


@pytest.mark.parametrize("batch", [0, -1, 1.5, True, "2"])
def test_bad_batch(batch: object) -> None:
    with pytest.raises(ConfigError):
        zoo.build("seed-block", batch)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name, kw",
    [
        ("seed-block", {"softmax": True}),
        ("resnet18", {"depth": 3}),
        ("resnet18", {"softmax": 1}),
        ("vit-tiny", {"depth": 0}),
        ("vit-tiny", {"depth": 65}),
        ("vit-tiny", {"attention": "flash"}),
    ],
)
def test_bad_options(name: str, kw: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        zoo.build(name, **kw)


@pytest.mark.parametrize("spec, key", [("resnet50:batch=3", "batch"), ("vit-tiny:weights=true", "weights")])
def test_zoo_options_that_are_load_arguments_are_refused_clearly(spec, key):
    """`placetune check resnet50:batch=3` once died with a TypeError traceback."""
    from placetune import Model, ModelError

    with pytest.raises(ModelError, match=f"zoo option '{key}'"):
        Model.load(spec)
