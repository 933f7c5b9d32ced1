"""Model import: real torch exports, folding, naming, shapes, costs and bad input."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from placetune import Model, ModelError, ShapeError, UnknownNameError, parse_shape_spec
from placetune.model.onnx_io import read_model_proto, strip_weights

from .conftest import DATA


def _conv_macs(layer):
    w = layer.inputs[1].shape
    return int(np.prod(layer.output_shape)) * int(np.prod(w[1:]))


def test_resnet18_export_counts_and_macs(resnet18_export):
    m = resnet18_export
    ops = [layer.op_type for layer in m.layers]
    # torch export with BN folded: 20 conv, 17 relu, 1 maxpool, 8 add, gap, flatten, gemm.
    assert ops.count("Conv") == 20 and ops.count("Relu") == 17 and ops.count("Add") == 8
    assert "Identity" not in ops
    assert len(m) == 49
    # torchvision's published figure: 1.81 GMACs at 224.
    assert m.total_macs / 1e9 == pytest.approx(1.814, abs=0.005)
    conv = m.layer("/conv1/Conv")
    assert conv.output_shape == (1, 64, 112, 112)
    assert conv.macs == 64 * 112 * 112 * 3 * 7 * 7
    assert conv.flops == 2 * conv.macs
    assert conv.weight_bytes == 64 * 3 * 7 * 7 * 4 + 64 * 4
    assert conv.bytes_in == 3 * 224 * 224 * 4
    assert conv.scope == "conv1"
    fc = m.layers[-1]
    assert fc.op_type == "Gemm" and fc.macs == 512 * 1000


def test_every_shared_export_imports():
    expected = {
        "seed_block": (5, 4 * 384 * 384 * 56 * 56),
        "seed_block_dynamo": (5, 4 * 384 * 384 * 56 * 56),
        "seed_model_gn": (31, None),
        "resnet18": (49, None),
        "mobilenet_v2_dynamo": (100, None),
    }
    for stem, (n_layers, macs) in expected.items():
        m = Model.load(DATA / f"{stem}.onnx.gz")
        assert len(m) == n_layers, stem
        for layer in m.layers:
            assert all(d > 0 for t in layer.outputs for d in t.shape), layer.name
            if layer.op_type == "Conv":
                assert layer.macs == _conv_macs(layer)
        if macs is not None:
            assert m.total_macs == macs


def test_mobilenet_dynamo_scopes_and_macs():
    m = Model.load(DATA / "mobilenet_v2_dynamo.onnx.gz")
    # torchvision MobileNetV2: 300.8 M MACs (incl. classifier)
    assert m.total_macs / 1e6 == pytest.approx(300.8, rel=0.01)
    first = m.layers[0]
    assert first.name == "node_Conv_810"
    assert first.scope.startswith("features/features.0")
    depthwise = [layer for layer in m.layers if layer.op_type == "Conv" and layer.attrs.get("group", 1) > 1]
    assert depthwise and all(layer.macs == _conv_macs(layer) for layer in depthwise)


def test_group_norm_folds_shape_chains(seed_model_gn):
    m = seed_model_gn
    ops = [layer.op_type for layer in m.layers]
    for folded in ("Shape", "Constant", "Identity"):
        assert folded not in ops
    assert ops.count("InstanceNormalization") == 4 and ops.count("Reshape") == 9
    # the reshape back to NCHW reads a shape folded from Shape(conv output)
    back = m.layer("/cnn/cnn.1/Reshape_1")
    shape_in = [t for t in back.inputs if t.const][0]
    assert shape_in.value is not None and list(shape_in.value) == [32, 64, 16, 16]
    assert back.output_shape == (32, 64, 16, 16)
    assert m.layer("/cnn/cnn.1/Reshape").output_shape == (32, 8, 2048)


def test_edges_and_topological_order(seed_block):
    m = seed_block
    assert m.layer("/conv2/Conv").producers == ("/conv1/Conv",)
    concat = m.layers[-1]
    assert concat.op_type == "Concat" and concat.output_shape == (1, 1152, 56, 56)
    assert set(concat.producers) == {"/conv2/Conv", "/conv3/Conv", "/conv4/Conv"}
    assert m.layer("/conv1/Conv").consumers == ("/conv2/Conv",)
    pos = {layer.name: layer.index for layer in m.layers}
    for layer in m.layers:
        assert all(pos[p] < layer.index for p in layer.producers)


def test_unnamed_nodes_get_tensorrt_parser_names():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    m = Model.load(helper.make_model(helper.make_graph(nodes, "g", [x], [y])))
    assert m.names == ["node_of_r", "sig"]
    assert m.layer("sig").scope == ""


def test_hash_ignores_weights_but_not_shapes(tmp_path):
    proto = onnx.load_from_string(gzip.open(DATA / "seed_block.onnx.gz").read())
    a = Model.load(proto)
    for init in proto.graph.initializer:
        arr = np.frombuffer(init.raw_data, dtype=np.float32).copy() + 1.0
        init.raw_data = arr.tobytes()
    assert Model.load(proto).hash == a.hash
    assert Model.load(proto, {"input": (2, 384, 56, 56)}).hash != a.hash


def test_weights_are_not_loaded(tmp_path):
    raw = gzip.open(DATA / "resnet18.onnx.gz").read()
    stripped, n = strip_weights(raw)
    assert n >= 10 and len(stripped) < len(raw) / 100
    path = tmp_path / "r18.onnx"
    path.write_bytes(raw)
    proto, names = read_model_proto(path)
    assert names and all(not t.raw_data for t in proto.graph.initializer if t.name in names)


def test_external_data_model_imports_without_the_data_file(tmp_path):
    proto = onnx.load_from_string(gzip.open(DATA / "seed_block.onnx.gz").read())
    path = tmp_path / "ext.onnx"
    onnx.save_model(proto, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="ext.bin", size_threshold=1024)
    (tmp_path / "ext.bin").unlink()  # the weights are never read
    m = Model.load(path)
    assert len(m) == 5 and m.layer("/conv1/Conv").weight_bytes == 384 * 384 * 4


def _dynamic_model(path):
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 3, 3, 3], np.zeros(8 * 27, np.float32))
    g = helper.make_graph([helper.make_node("Conv", ["images", "w"], ["y"], name="/c/Conv", pads=[1, 1, 1, 1])],
                          "g", [x], [y], [w])
    onnx.save(helper.make_model(g), str(path))
    return path


def test_dynamic_batch_needs_shape_override(tmp_path):
    path = _dynamic_model(tmp_path / "dyn.onnx")
    with pytest.raises(ShapeError, match="images.*dynamic.*--shape images=1x3x16x16") as err:
        Model.load(path)
    # the hint is concrete (it once said images=Nx3x16x16): pasting it works
    hint = str(err.value).split("--shape ")[1].split()[0]
    assert "N" not in hint and Model.load(path, [hint]).batch == 1
    m = Model.load(path, ["images=4x3x16x16"])
    assert m.layer("/c/Conv").output_shape == (4, 8, 16, 16)
    m = Model.load(path, ["2x3x16x16"])  # single input: name optional
    assert m.batch == 2
    with pytest.raises(ShapeError, match="model's inputs are: images"):
        Model.load(path, ["x=1x3x16x16"])
    with pytest.raises(ShapeError, match="rank"):
        Model.load(path, ["images=1x3x16"])


def test_parse_shape_spec():
    assert parse_shape_spec("input=32x3x32x32") == ("input", (32, 3, 32, 32))
    assert parse_shape_spec("1x3x8x8") == (None, (1, 3, 8, 8))
    with pytest.raises(ShapeError):
        parse_shape_spec("input=1xAx3")
    with pytest.raises(ShapeError):
        parse_shape_spec("input=0x3")
    # an empty name before '=' (or trtexec's ':') is a name left out, not a single-input shape
    for spec in ("=1x384x56x56", " =1x3", ":1x3x8x8"):
        with pytest.raises(ShapeError, match=r"^bad --shape .*NAME=DIMS .* or DIMS alone"):
            parse_shape_spec(spec)


@pytest.mark.parametrize("shapes, says", [
    (["input=1x384x56x56,input=1x3x32x32"], "one input per --shape"),  # the same input twice in one text
    (["input=4x3x32x32,other=1x10"], "one input per --shape"),  # two inputs, commas as trtexec's
    (["input:1x3x32x32,input=4x3x32x32"], "one input per --shape"),  # ':' and '=' mixed up
    (["input=4x3x32x32", "input=2x3x32x32"], "gives input 'input' twice (4x3x32x32 and 2x3x32x32)"),
    (["input:4x3x32x32,input:2x3x32x32"], "gives input 'input' twice"),
])
def test_a_shape_text_listing_inputs_wrongly_is_one_line_naming_the_field_and_the_syntax(shapes, says, capsys):
    """``--shape "input=1x384x56x56,input=1x3x..."`` took 'input=1x384x56x56,input' for an input's name and said
    the model has no such input; the same input given twice kept the last without a word. One line (exit 3)
    naming --shape and the syntax it takes."""
    from placetune.cli.main import main

    gn = Path(__file__).resolve().parent / "data" / "seed_model_gn.onnx.gz"
    code = main(["check", str(gn), *[a for s in shapes for a in ("--shape", s)]])
    err = capsys.readouterr().err.strip()
    assert code == ShapeError.exit_code == 3 and len(err.splitlines()) == 1, err
    assert err.startswith("placetune: error: bad --shape") and says in err and "name=1x3x224x224" in err
    assert "model's inputs are" not in err
    assert parse_shape_spec("input:0=1x3x8x8") == ("input:0", (1, 3, 8, 8))  # a ':' in a name stays a name
    assert parse_shape_spec("input=1,3,8,8") == ("input", (1, 3, 8, 8))  # commas between dimensions still work


def test_bad_files(tmp_path):
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    with pytest.raises(ModelError, match="not a valid ONNX"):
        Model.load(text)
    raw = gzip.open(DATA / "seed_block.onnx.gz").read()
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ModelError):
        Model.load(trunc)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ModelError, match="empty"):
        Model.load(empty)
    with pytest.raises(ModelError, match="no such file"):
        Model.load(tmp_path / "missing.onnx")
    with pytest.raises(UnknownNameError, match="zoo"):
        Model.load("resnet-nine-thousand")


def test_op_without_shape_inference_is_a_clear_error():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MysteryOp", ["r"], ["y"], name="mystery", domain="com.example")]
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [y]),
                              opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    with pytest.raises(ModelError, match="mystery.*MysteryOp.*no shape inference"):
        Model.load(proto)


def test_unknown_layer_name_suggests(seed_block):
    with pytest.raises(UnknownNameError, match="did you mean /conv1/Conv"):
        seed_block.layer("/conv1/conv")


def test_import_does_not_pull_tensorrt():
    code = "import sys, placetune; assert 'tensorrt' not in sys.modules and 'pycuda' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr


def _clip_model(hi: float, name: str = "g"):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    lo_t = helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0])
    hi_t = helper.make_tensor("hi", TensorProto.FLOAT, [], [hi])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Clip", ["r", "lo", "hi"], ["y"], name="clip")]
    return helper.make_model(helper.make_graph(nodes, name, [x], [y], [lo_t, hi_t]))


def test_hash_covers_the_constants_dla_rules_read(tmp_path):
    """Two files that differ only in a Clip bound (which decides DLA eligibility) once
    hashed the same, so a plan or a study of one was accepted for the other."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_clip_model(6.0), str(a))
    onnx.save(_clip_model(200.0), str(b))
    ma, mb = Model.load(a), Model.load(b)
    assert ma.hash != mb.hash
    assert Model.load(a).hash == ma.hash  # still deterministic
    # a Constant node's value counts too
    def const_model(hi):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        nodes = [helper.make_node("Constant", [], ["lo"], value=helper.make_tensor("v", TensorProto.FLOAT, [], [0.0])),
                 helper.make_node("Constant", [], ["hi"], value=helper.make_tensor("w", TensorProto.FLOAT, [], [hi])),
                 helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")]
        return helper.make_model(helper.make_graph(nodes, "g", [x], [y]))
    assert Model.load(const_model(6.0)).hash != Model.load(const_model(6.5)).hash


def test_duplicate_node_names_never_take_an_existing_name():
    """Nodes [dup, dup, dup_0] were once named dup, dup_0, dup_0_1, so
    {"dup_0": ...} placed the second ``dup`` and not the node called dup_0."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="dup"),
             helper.make_node("Sigmoid", ["a"], ["b"], name="dup"),
             helper.make_node("Tanh", ["b"], ["c"], name="dup_0"),
             helper.make_node("Relu", ["c"], ["y"], name="dup")]
    m = Model.load(helper.make_model(helper.make_graph(nodes, "g", [x], [y])))
    assert len(set(m.names)) == 4
    assert m.layer("dup").op_type == "Relu" and m.layer("dup_0").op_type == "Tanh"
    assert [m.layer(n).op_type for n in m.names] == ["Relu", "Sigmoid", "Tanh", "Relu"]


def test_shape_may_not_change_a_static_non_batch_dimension(tmp_path):
    """``--shape input=1x5x224x224`` on a 3-channel conv was once accepted (a model
    TensorRT would never build); only the batch dimension of a static input may change."""
    path = _dynamic_model(tmp_path / "dyn.onnx")
    with pytest.raises(ShapeError, match=r"images.*dimension 1 to 5.*fixes it at 3"):
        Model.load(path, ["images=1x5x16x16"])
    with pytest.raises(ShapeError, match="dimension 3"):
        Model.load(path, ["images=1x3x16x32"])
    assert Model.load(path, ["images=4x3x16x16"]).batch == 4  # the dynamic batch dim
    m = Model.load(DATA / "seed_block.onnx.gz", ["input=2x384x56x56"])  # a static batch dim may change
    assert m.batch == 2


@pytest.mark.parametrize("batch", [0, -1, True, 2.5])
def test_batch_must_be_a_positive_integer(batch):
    """``--batch 0`` once silently became the zoo default."""
    from placetune.errors import ConfigError

    with pytest.raises(ConfigError, match="batch must be a positive integer"):
        Model.load("seed-block", batch=batch)


def test_cli_batch_zero_is_refused(capsys, tmp_path):
    from placetune.cli.main import main

    for argv in (["check", "seed-block", "--batch", "0"], ["zoo", "export", "seed-block", "-o",
                                                          str(tmp_path / "x.onnx"), "--batch", "0"],
                 ["tune", "--model", "seed-block", "--batch", "0", "--storage", str(tmp_path / "t.db")]):
        assert main(argv) == 6, argv
        err = capsys.readouterr().err
        assert "batch must be a positive integer" in err and "Traceback" not in err
    assert not (tmp_path / "x.onnx").exists() and not (tmp_path / "t.db").exists()


def _yolo_like_head(batch="batch"):
    """A YOLO-style head: images [B,3,32,32] -> output0 [B,84,1024] (a 1x1 conv and a reshape)."""
    from onnx import numpy_helper
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, 32, 32])
    w = numpy_helper.from_array(np.zeros((84, 3, 1, 1), np.float32), "w")
    s = numpy_helper.from_array(np.array([0, 84, -1], np.int64), "s")
    nodes = [helper.make_node("Conv", ["images", "w"], ["c"], name="/model.0/conv/Conv"),
             helper.make_node("Reshape", ["c", "s"], ["output0"], name="/model.1/Reshape")]
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [batch, 84, 1024])],
                          [w, s])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("domain", ["", "TRT"])
def test_tensorrt_plugin_takes_the_shapes_the_file_declares(domain):
    from placetune.hardware.dla import check_model

    from .detector import NMS_OUTPUTS, append_efficient_nms
    m = Model.load(append_efficient_nms(_yolo_like_head(), domain=domain, batch="batch"), ["images=2x3x32x32"])
    nms = m.layer("/nms/EfficientNMS_TRT")
    assert nms.plugin and not m.layer("/nms/Split").plugin
    # the declared [batch, ...] follows the input's fixed batch
    assert [(t.name, t.shape, t.dtype) for t in nms.outputs] == [
        ("num_dets", (2, 1), "int32"), ("det_boxes", (2, 100, 4), "float32"),
        ("det_scores", (2, 100), "float32"), ("det_classes", (2, 100), "int32")]
    assert tuple(t.name for t in m.outputs) == NMS_OUTPUTS and m.outputs[1].shape == (2, 100, 4)
    verdict = check_model(m, "orin-agx", "fp16")["/nms/EfficientNMS_TRT"]
    assert not verdict.supported and verdict.reason.startswith("plugin: no DLA")
    assert check_model(m, "orin-agx", "fp16")["/model.0/conv/Conv"].supported


def _nms_without_shapes(op="EfficientNMS_TRT", keep: int | None = 100, then_cast=False):
    """The YOLO-like head ending in ``op`` whose four outputs declare a type but no shape."""
    from .detector import append_efficient_nms
    proto = append_efficient_nms(_yolo_like_head(), batch="batch")
    node = proto.graph.node[-1]
    node.op_type = op
    del node.attribute[:]
    key = "max_output_boxes" if op == "EfficientNMS_TRT" else "keepTopK"
    node.attribute.extend([helper.make_attribute(k, v) for k, v in
                           (("score_threshold", 0.25), ("iou_threshold", 0.45), (key, keep)) if v is not None])
    for out in proto.graph.output:
        out.type.tensor_type.ClearField("shape")
    if then_cast:  # a layer after the plugin reads its shape
        proto.graph.node.append(helper.make_node("Cast", ["num_dets"], ["n"], name="/post/Cast", to=TensorProto.FLOAT))
        proto.graph.output.append(helper.make_tensor_value_info("n", TensorProto.FLOAT, None))
    return proto


@pytest.mark.parametrize("op, classes", [("EfficientNMS_TRT", "int32"), ("BatchedNMSDynamic_TRT", "float32"),
                                         ("BatchedNMS_TRT", "float32")])
def test_an_nms_plugin_whose_outputs_declare_no_shape_takes_them_from_its_attributes(op, classes):
    """Before: refused at load ("declare the plugin's output shapes in the file") though TensorRT's plugin
    READMEs give them: num_detections [batch, 1] INT32, boxes [batch, K, 4], scores and classes [batch, K],
    K its max_output_boxes (EfficientNMS_TRT) or keepTopK (BatchedNMS), batch its boxes input's."""
    m = Model.load(_nms_without_shapes(op, keep=50, then_cast=True), ["images=2x3x32x32"])
    nms = m.layer("/nms/EfficientNMS_TRT")
    assert nms.plugin and [(t.shape, t.dtype) for t in nms.outputs] == [
        ((2, 1), "int32"), ((2, 50, 4), "float32"), ((2, 50), "float32"), ((2, 50), classes)]
    assert m.layer("/post/Cast").output_shape == (2, 1) and m.outputs[1].shape == (2, 50, 4)


def test_an_nms_plugin_without_its_kept_boxes_attribute_keeps_the_clear_refusal():
    """No max_output_boxes: the plugin's outputs cannot be sized from the file, so the load refuses it, naming it."""
    with pytest.raises(ModelError, match=r"^layer '/nms/EfficientNMS_TRT' \(EfficientNMS_TRT\) has no shape "
                                         r"inference for output 'num_dets'.*declare the plugin's output shapes"):
        Model.load(_nms_without_shapes(keep=None), ["images=2x3x32x32"])


def test_plugin_with_a_static_declared_batch_follows_a_batch_override():
    from .detector import append_efficient_nms
    m = Model.load(append_efficient_nms(_yolo_like_head(batch=1), batch=1), ["images=4x3x32x32"])
    assert m.layer("/nms/EfficientNMS_TRT").outputs[1].shape == (4, 100, 4)


def test_plugin_feeding_more_layers_propagates_its_declared_shape():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MysteryOp", ["r"], ["m"], name="mystery", domain="com.example"),
             helper.make_node("Sigmoid", ["m"], ["y"], name="sig")]
    g = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          value_info=[helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 4, 8, 8])])
    m = Model.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                                       helper.make_opsetid("com.example", 1)]))
    assert m.layer("mystery").plugin and m.layer("sig").output_shape == (1, 4, 8, 8)
    assert m.outputs[0].shape == (1, 4, 8, 8)


def test_a_zero_sized_input_dimension_is_called_zero_not_dynamic(tmp_path, capsys):
    """An input whose file fixes a dimension at 0 was refused as "a dynamic shape [1x3x?x224]",
    with advice about dynamic dimensions: the message now says which dimension is zero and that
    every input dimension must be 1 or more (the file's, or --shape's)."""
    from placetune.cli.main import main

    def model(dims):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.onnx"
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
        return str(path)

    zero = model([1, 3, 0, 224])
    with pytest.raises(ShapeError) as e:
        Model.load(zero)
    text = str(e.value)
    assert "dynamic" not in text and "[1x3x0x224]" in text and "dimension 2 is 0" in text, text
    assert "1 or more" in text and "--shape x=1x3x1x224" in text, text
    assert main(["check", zero]) == 3
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "dimension 2 is 0" in err, err
    assert Model.load(zero, ["x=1x3x8x224"]).inputs[0].shape == (1, 3, 8, 224)  # --shape sets it
    two = model(["batch", 0, 0, 224])
    with pytest.raises(ShapeError, match=r"--batch 2: input 'x' \[2x0x0x224\]: dimensions 1 and 2 are 0"):
        Model.load(two, batch=2)
    dynamic = model([1, 3, "h", 224])  # a named dimension is still called dynamic
    with pytest.raises(ShapeError, match="dynamic shape"):
        Model.load(dynamic)
