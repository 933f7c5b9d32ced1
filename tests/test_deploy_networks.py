"""The networks Jetson users deploy, beyond YOLO detection: Ultralytics segmentation, pose, oriented boxes,
YOLOv10 and RT-DETR, FP16 exports, and torchvision's detectors, segmenters and classifiers as
``torch.onnx.export`` writes them. Each pattern that used to break loading is rebuilt below as a small ONNX
graph that always runs; the real exports run when a Python with ultralytics (and torchvision) is at hand
(PLACETUNE_ULTRALYTICS_PYTHON), else they skip."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main
from placetune.errors import ModelError, ShapeError
from placetune.model.model import Model
from placetune.placement.cut import cut, run_segments
from placetune.placement.placement import Placement

from .test_detector import _ultralytics_python

n = helper.make_node


def _init(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _save(tmp_path, nodes, inits, *, shape=(1, 3, 16, 24), out_shape=None, name="net.onnx", opset=17,
          in_type=TensorProto.FLOAT):
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("images", in_type, list(shape))],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    path = tmp_path / name
    onnx.save(model, path)
    return path


def _torchvision_transform(size: float = 32.0):
    """torchvision's GeneralizedRCNNTransform as torch.onnx.export writes it for a static image: the
    scale is ``min(size / min(h, w), max_size / max(h, w))`` through ``Reciprocal``, the image resized by
    it, then padded to a multiple of 8 from the resized image's own ``Shape``."""
    inits = [_init("hw", [16.0, 24.0]), _init("size", size), _init("big", 1000.0), _init("ax", [0], np.int64),
             _init("eight", 8.0), _init("two3", [2, 3], np.int64), _init("zeros6", [0, 0, 0, 0, 0, 0], np.int64),
             _init("ones2", [1.0, 1.0]), _init("sixteen", [16.0, 24.0])]
    nodes = [n("ReduceMin", ["hw"], ["short"], name="/transform/ReduceMin", keepdims=0),
             n("ReduceMax", ["hw"], ["long"], name="/transform/ReduceMax", keepdims=0),
             n("Reciprocal", ["short"], ["rs"], name="/transform/Reciprocal"),
             n("Reciprocal", ["long"], ["rl"], name="/transform/Reciprocal_1"),
             n("Mul", ["rs", "size"], ["s1"], name="/transform/Mul"),
             n("Mul", ["rl", "big"], ["s2"], name="/transform/Mul_1"),
             n("Min", ["s1", "s2"], ["scale"], name="/transform/Min"),
             n("Mul", ["sixteen", "scale"], ["hw2"], name="/transform/Mul_2"),
             n("Floor", ["hw2"], ["hw3"], name="/transform/Floor"),
             n("Cast", ["hw3"], ["sizes_hw"], name="/transform/Cast", to=TensorProto.INT64),
             n("Shape", ["images"], ["ishape"], name="/transform/Shape", end=2),
             n("Concat", ["ishape", "sizes_hw"], ["sizes"], name="/transform/Concat", axis=0),
             n("Resize", ["images", "", "", "sizes"], ["resized"], name="/transform/Resize", mode="linear"),
             # pad to a multiple of 8, sized from the resized image (known only once its size is folded)
             n("Shape", ["resized"], ["rshape"], name="/transform/Shape_1"),
             n("Gather", ["rshape", "two3"], ["rhw"], name="/transform/Gather"),
             n("Cast", ["rhw"], ["rhwf"], name="/transform/Cast_1", to=TensorProto.FLOAT),
             n("Div", ["rhwf", "eight"], ["q"], name="/transform/Div"),
             n("Ceil", ["q"], ["qc"], name="/transform/Ceil"),
             n("Mul", ["qc", "eight"], ["padded_hw"], name="/transform/Mul_3"),
             n("Sub", ["padded_hw", "rhwf"], ["pad_hw"], name="/transform/Sub"),
             n("Cast", ["pad_hw"], ["pad_i"], name="/transform/Cast_2", to=TensorProto.INT64),
             n("Concat", ["zeros6", "pad_i"], ["pads"], name="/transform/Concat_1", axis=0),
             n("Pad", ["resized", "pads"], ["padded"], name="/transform/Pad")]
    return nodes, inits


def test_torchvision_s_transform_folds_to_static_sizes(tmp_path):
    """The resize used to be refused as 'breaks the ONNX spec of Resize' (Reciprocal was not folded, so
    its sizes were an unevaluated constant), then the pad as a size placetune 'cannot bound' (its pads come
    from the Shape of the resized image, which the file's inference never knew)."""
    nodes, inits = _torchvision_transform()
    nodes.append(n("Relu", ["padded"], ["out"], name="/Relu"))
    path = _save(tmp_path, nodes, inits)
    from onnx.reference import ReferenceEvaluator
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 24)).astype(np.float32)
    (want,) = ReferenceEvaluator(onnx.load(path)).run(None, {"images": x})
    assert want.shape == (1, 3, 32, 48)  # 16x24 scaled by 32/16, already multiples of 8
    model = Model.load(path)
    assert model.layer("/transform/Resize").outputs[0].shape == (1, 3, 32, 48)
    assert model.layer("/transform/Pad").outputs[0].shape == (1, 3, 32, 48)
    assert [layer.op_type for layer in model] == ["Resize", "Pad", "Relu"]  # the size arithmetic is folded


def test_a_constant_too_large_to_evaluate_is_sized_once_folded(tmp_path):
    """Anchors: a constant computation sized from a feature map whose size is folded, with more elements
    than placetune evaluates; it used to stop the load ('constant tensor ... has no static shape after
    folding')."""
    nodes, inits = _torchvision_transform()
    inits += [_init("zero", 0, np.int64), _init("one", 1, np.int64), _init("big4096", 4096, np.int64),
              _init("idx2", 2, np.int64), _init("row", [1, -1], np.int64), _init("k", 0.5)]
    nodes += [n("Shape", ["padded"], ["pshape"], name="/anchors/Shape"),
              n("Gather", ["pshape", "idx2"], ["ph"], name="/anchors/Gather"),
              n("Mul", ["ph", "big4096"], ["count"], name="/anchors/Mul"),  # 32 x 4096 = 131,072 elements
              n("Range", ["zero", "count", "one"], ["r"], name="/anchors/Range"),
              n("Cast", ["r"], ["rf"], name="/anchors/Cast", to=TensorProto.FLOAT),
              n("Mul", ["rf", "k"], ["anchors"], name="/anchors/Mul_1"),
              n("Reshape", ["anchors", "row"], ["anchors2"], name="/anchors/Reshape"),
              n("Flatten", ["padded"], ["flat"], name="/Flatten", axis=1),
              n("Concat", ["flat", "anchors2"], ["out"], name="/Concat", axis=1)]
    model = Model.load(_save(tmp_path, nodes, inits))
    assert model.layer("/Concat").outputs[0].shape == (1, 3 * 32 * 48 + 32 * 4096)


def _nonzero_levels(tmp_path):
    """Two feature levels of a detector, each keeping the cells above a threshold (NonZero), concatenated:
    torchvision's postprocess concatenates the boxes of every level before its NMS."""
    inits = [_init("w", np.random.default_rng(0).standard_normal((2, 3, 3, 3))), _init("thr", 0.0),
             _init("perm_ax", [0], np.int64)]
    nodes = [n("Conv", ["images", "w"], ["f1"], name="/head/Conv", pads=[1, 1, 1, 1]),
             n("MaxPool", ["f1"], ["f2"], name="/head/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
             n("Greater", ["f1", "thr"], ["m1"], name="/post/Greater"),
             n("Greater", ["f2", "thr"], ["m2"], name="/post/Greater_1"),
             n("NonZero", ["m1"], ["i1"], name="/post/NonZero"),
             n("NonZero", ["m2"], ["i2"], name="/post/NonZero_1"),
             n("Transpose", ["i1"], ["t1"], name="/post/Transpose", perm=[1, 0]),
             n("Transpose", ["i2"], ["t2"], name="/post/Transpose_1", perm=[1, 0]),
             n("Concat", ["t1", "t2"], ["cat"], name="/post/Concat", axis=0),
             n("Cast", ["cat"], ["out"], name="/post/Cast", to=TensorProto.FLOAT)]
    return _save(tmp_path, nodes, inits, shape=(1, 3, 8, 8))


def test_the_boxes_of_every_level_concatenated_are_bounded(tmp_path, monkeypatch):
    """A Concat of data-dependent sizes used to be refused ('cannot bound it'): its bound is the sum of its
    inputs' bounds along its axis."""
    model = Model.load(_nonzero_levels(tmp_path))
    out = model.layer("/post/Concat").outputs[0]
    assert (out.shape, out.data_dependent) == ((2 * 8 * 8 + 2 * 4 * 4, 4), True)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "net.onnx"]) == 0


def _if_model(tmp_path):
    """torchvision's batched NMS: ``If`` no box is left, an empty tensor, else the boxes (data-dependent)."""
    then_graph = helper.make_graph([n("Constant", [], ["e"], value=_init("empty", np.zeros((0, 4))))], "then", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [0, 4])])
    else_graph = helper.make_graph([n("Reshape", ["flat4", "shape4"], ["b"])], "else", [],
                                   [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    inits = [_init("w", np.random.default_rng(0).standard_normal((4, 3, 1, 1))), _init("shape4", [-1, 4], np.int64)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/head/Conv"),
             n("Flatten", ["f"], ["flat4"], name="/post/Flatten", axis=0),
             n("ReduceMax", ["f"], ["mx"], name="/post/ReduceMax", keepdims=0),
             n("Less", ["mx", "zero"], ["none_left"], name="/post/Less"),
             n("If", ["none_left"], ["boxes"], name="If_2649", then_branch=then_graph, else_branch=else_graph),
             n("Relu", ["boxes"], ["out"], name="/post/Relu")]
    inits.append(_init("zero", 0.0))
    return _save(tmp_path, nodes, inits, shape=(1, 3, 4, 4))


def _loop_model(tmp_path):
    """Mask R-CNN's paste of masks: a ``Loop`` over a count computed from the data, appending a scan output."""
    body = helper.make_graph(
        [n("Identity", ["cond_in"], ["cond_out"]), n("Add", ["acc", "one_b"], ["acc_out"]),
         n("Identity", ["acc_out"], ["scan"])], "body",
        [helper.make_tensor_value_info("iter", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("acc_out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, None)], [_init("one_b", 1.0)])
    inits = [_init("w", np.random.default_rng(0).standard_normal((4, 3, 1, 1))), _init("true", True, np.bool_)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/head/Conv"),
             n("ReduceMax", ["f"], ["mx"], name="/post/ReduceMax", keepdims=0),
             n("Cast", ["mx"], ["count"], name="/post/Cast", to=TensorProto.INT64),
             n("Loop", ["count", "true", "f"], ["last", "masks"], name="Loop_3160", body=body),
             n("Relu", ["masks"], ["out"], name="/post/Relu")]
    return _save(tmp_path, nodes, inits, shape=(1, 3, 4, 4))


@pytest.mark.parametrize("build, op", [(_if_model, "If"), (_loop_model, "Loop")])
def test_control_flow_is_refused_in_one_line_naming_it(tmp_path, capsys, build, op):
    """An If or Loop whose output size the data decides used to be refused as a node that 'breaks the ONNX
    spec' (export it again) or with a generic open-dimension line; the refusal now names the layer and
    its op as control flow, and what to export instead."""
    path = build(tmp_path)
    with pytest.raises((ShapeError, ModelError), match=f"'{op}_\\d+' \\({op}\\) is ONNX control flow"):
        Model.load(path)
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "backbone and head" in err[0] and "breaks the ONNX spec" not in err[0]


def _boxes_reshaped_like(tmp_path, *, control: bool, opset: int = 13):
    """torchvision's ``clip_boxes_to_image`` as ``torch.onnx.export`` writes it below opset 14: the boxes
    (sized by the data: NonZero here) split into x and y, clamped, stacked and reshaped to the ``Shape``
    of the boxes, a Reshape ONNX infers no shape for before opset 14 (its shape is computed in the graph);
    with ``control``, an ``If`` after it (the batched NMS), as in RetinaNet, FCOS and SSDlite."""
    inits = [_init("thr", 0.0), _init("i0", 0, np.int64), _init("i1", 1, np.int64), _init("ax0", [0], np.int64),
             _init("s22", [-1, 2, 2], np.int64)]
    nodes = [n("Greater", ["images", "thr"], ["mask"], name="/post/Greater"),
             n("NonZero", ["mask"], ["idx"], name="/post/NonZero"),
             n("Transpose", ["idx"], ["ti"], name="/post/Transpose", perm=[1, 0]),
             n("Cast", ["ti"], ["boxes"], name="/post/Cast", to=TensorProto.FLOAT),
             n("Reshape", ["boxes", "s22"], ["xy"], name="/post/Reshape_1"),
             n("Relu", ["xy"], ["clamped"], name="/post/Relu"),
             n("Shape", ["boxes"], ["bshape"], name="/post/Shape_4"),
             n("Gather", ["bshape", "i0"], ["b0"], name="/post/Gather_20"),
             n("Gather", ["bshape", "i1"], ["b1"], name="/post/Gather_21"),
             n("Unsqueeze", ["b0", "ax0"], ["u0"], name="/post/Unsqueeze_26"),
             n("Unsqueeze", ["b1", "ax0"], ["u1"], name="/post/Unsqueeze_27"),
             n("Concat", ["u0", "u1"], ["like"], name="/post/Concat_4", axis=0),
             n("Reshape", ["clamped", "like"], ["clipped"], name="/post/Reshape_2")]
    if control:
        then_graph = helper.make_graph([n("Constant", [], ["e"], value=_init("empty", np.zeros((0, 4))))], "then", [],
                                       [helper.make_tensor_value_info("e", TensorProto.FLOAT, [0, 4])])
        else_graph = helper.make_graph([n("Identity", ["clipped"], ["kept"])], "else", [],
                                       [helper.make_tensor_value_info("kept", TensorProto.FLOAT, None)])
        nodes += [n("ReduceMax", ["images"], ["mx"], name="/post/ReduceMax", keepdims=0),
                  n("Less", ["mx", "thr"], ["none_left"], name="/post/Less"),
                  n("If", ["none_left"], ["out"], name="If_2649", then_branch=then_graph, else_branch=else_graph)]
    else:
        nodes.append(n("Identity", ["clipped"], ["out"], name="/post/Identity"))
    return _save(tmp_path, nodes, inits, shape=(1, 1, 4, 4), opset=opset)


@pytest.mark.parametrize("control", [True, False])
def test_a_size_the_data_decides_that_inference_cannot_follow_says_to_leave_out_the_post_processing(
        tmp_path, capsys, control):
    """A torchvision detector exported whole at opset 11 or 13 (RetinaNet, FCOS) was refused at the Reshape
    of its clipped boxes with 'fold those computations first (onnxslim ...)': folding leaves that size as
    the data decides it, and onnxslim's output was then refused at the NMS's If. The line now says the
    size follows the boxes the data decides, names the control flow after it, and says what to export."""
    path = _boxes_reshaped_like(tmp_path, control=control)
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "'/post/Reshape_2' (Reshape)" in err[0] and "whose size the data decides" in err[0], err[0]
    assert "onnxslim" not in err[0] and "export the network without its post-processing" in err[0], err[0]
    assert ("('If_2649', If)" in err[0]) == control, err[0]


def test_a_layer_without_shape_behind_an_earlier_open_size_leaves_that_one_refused(tmp_path, capsys):
    """Faster R-CNN exported at opset 11 or 13: the RPN's NMS ends in an If whose size the data decides;
    the ROI heads behind it reshape to a shape computed in the graph, which ONNX infers nothing for before
    opset 14. The load stopped at that later Reshape ('fold ... with onnxslim') instead of the If, which is
    the first layer placetune cannot size and what the same network is refused at from opset 14 on."""
    then_graph = helper.make_graph([n("Constant", [], ["e"], value=_init("empty", np.zeros((0, 4))))], "then", [],
                                   [helper.make_tensor_value_info("e", TensorProto.FLOAT, [0, 4])])
    else_graph = helper.make_graph([n("Reshape", ["flat4", "shape4"], ["b"])], "else", [],
                                   [helper.make_tensor_value_info("b", TensorProto.FLOAT, ["kept", 4])])
    inits = [_init("w", np.random.default_rng(0).standard_normal((4, 3, 1, 1))), _init("shape4", [-1, 4], np.int64),
             _init("zero", 0.0), _init("i0", 0, np.int64), _init("ax0", [0], np.int64), _init("minus1", [-1], np.int64)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/head/Conv"),
             n("Flatten", ["f"], ["flat4"], name="/post/Flatten", axis=0),
             n("ReduceMax", ["f"], ["mx"], name="/post/ReduceMax", keepdims=0),
             n("Less", ["mx", "zero"], ["none_left"], name="/post/Less"),
             n("If", ["none_left"], ["proposals"], name="If_1559", then_branch=then_graph, else_branch=else_graph),
             n("Shape", ["proposals"], ["pshape"], name="/roi_heads/Shape"),
             n("Gather", ["pshape", "i0"], ["p0"], name="/roi_heads/Gather_1"),
             n("Unsqueeze", ["p0", "ax0"], ["u0"], name="/roi_heads/Unsqueeze"),
             n("Concat", ["u0", "minus1"], ["like"], name="/roi_heads/Concat", axis=0),
             n("Reshape", ["proposals", "like"], ["out"], name="/roi_heads/Reshape")]
    path = _save(tmp_path, nodes, inits, shape=(1, 3, 4, 4), opset=13)
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'If_1559' (If) is ONNX control flow" in err[0], err


def test_a_layer_after_an_open_size_does_not_crash_the_load(tmp_path, capsys):
    """A Gemm reading a tensor of open size (behind the first layer placetune cannot size) crashed the
    costing ('malformed ONNX graph (IndexError ...)'); the first open size is refused by name."""
    inits = [_init("k", [1.0]), _init("ones", [1.0]), _init("w", np.zeros((8, 48)))]
    nodes = [n("ReduceMean", ["images"], ["m"], name="/transform/Mean", keepdims=0),  # data: not folded
             n("Mul", ["m", "k"], ["s"], name="/transform/Mul"),
             n("Concat", ["ones", "ones", "s", "s"], ["scales"], name="/transform/Concat", axis=0),
             n("Resize", ["images", "", "scales"], ["r"], name="/transform/Resize", mode="nearest"),
             n("Flatten", ["r"], ["flat"], name="/Flatten", axis=1),
             n("Gemm", ["flat", "w"], ["out"], name="/fc6/Gemm", transB=1)]
    path = _save(tmp_path, nodes, inits, shape=(1, 3, 4, 4))
    with pytest.raises(ModelError, match="'/transform/Resize'"):
        Model.load(path)
    assert main(["check", str(path)]) == 3
    assert "IndexError" not in capsys.readouterr().err


def test_rt_detr_s_top_k_sized_by_clip_folds_on_a_dynamic_export(tmp_path, capsys):
    """RT-DETR exported with ``dynamic=True`` keeps its top ``min(300, anchors)`` queries: K is a ``Clip`` of
    the anchors' count from ``Shape``; Clip was not folded and the TopK was refused ('fold those
    computations first'), though --shape fixes every size."""
    inits = [_init("w", np.random.default_rng(0).standard_normal((4, 3, 1, 1))), _init("one", 1, np.int64),
             _init("lo", 0, np.int64), _init("hi", 300, np.int64), _init("k1", [1], np.int64)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/model.28/Conv"),
             n("ReduceMax", ["f"], ["s"], name="/model.28/ReduceMax", axes=[1], keepdims=0),
             n("Flatten", ["s"], ["flat"], name="/model.28/Flatten", axis=1),
             n("Shape", ["flat"], ["fs"], name="/model.28/Shape_19"),
             n("Gather", ["fs", "one"], ["anchors"], name="/model.28/Gather_7", axis=0),
             n("Clip", ["anchors", "lo", "hi"], ["k"], name="/model.28/Clip"),
             n("Reshape", ["k", "k1"], ["k_1"], name="/model.28/Reshape_18"),
             n("TopK", ["flat", "k_1"], ["out", "idx"], name="/model.28/TopK", axis=1)]
    path = _save(tmp_path, nodes, inits, shape=("batch", 3, "height", "width"))
    model = Model.load(path, shapes=["images=1x3x16x24"])
    assert model.layer("/model.28/TopK").outputs[0].shape == (1, 300)  # min(300, 16 x 24)
    assert Model.load(path, shapes=["images=1x3x8x8"]).layer("/model.28/TopK").outputs[0].shape == (1, 64)
    assert main(["check", str(path), "--shape", "images=1x3x16x24"]) == 0, capsys.readouterr().err


def _two_rounds_of_shape_arithmetic(path):
    """A dynamic-axes export whose second reshape is sized from the Shape of the first one's output, each
    through arithmetic ONNX inference cannot follow (Cast, Div, Ceil), as RT-DETR's decoder is."""
    rng = np.random.default_rng(0)
    inits = [_init("w1", rng.standard_normal((8, 3, 3, 3))), _init("w2", rng.standard_normal((8, 8, 3, 3))),
             _init("w3", rng.standard_normal((8, 8, 3, 3))), _init("two", 2, np.int64), _init("one", 1.0),
             _init("head", [1, 8], np.int64), _init("ax", [0], np.int64)]
    nodes = [n("Conv", ["images", "w1"], ["y"], name="/c1/Conv", pads=[1, 1, 1, 1])]
    src = "y"
    for r in ("a", "b"):  # the size of round b is known only once round a's Reshape has a static shape
        nodes += [n("Shape", [src], [f"{r}s"], name=f"/{r}/Shape"),
                  n("Gather", [f"{r}s", "two"], [f"{r}h"], name=f"/{r}/Gather"),
                  n("Cast", [f"{r}h"], [f"{r}hf"], name=f"/{r}/Cast", to=TensorProto.FLOAT),
                  n("Div", [f"{r}hf", "one"], [f"{r}hd"], name=f"/{r}/Div"),
                  n("Ceil", [f"{r}hd"], [f"{r}hc"], name=f"/{r}/Ceil"),
                  n("Cast", [f"{r}hc"], [f"{r}hi"], name=f"/{r}/Cast_1", to=TensorProto.INT64),
                  n("Unsqueeze", [f"{r}hi", "ax"], [f"{r}hu"], name=f"/{r}/Unsqueeze"),
                  n("Concat", ["head", f"{r}hu", f"{r}hu"], [f"{r}t"], name=f"/{r}/Concat", axis=0),
                  n("Reshape", [src, f"{r}t"], [f"{r}r"], name=f"/{r}/Reshape"),
                  n("Conv", [f"{r}r", "w2" if r == "a" else "w3"], [f"{r}c"], name=f"/{r}/Conv", pads=[1, 1, 1, 1])]
        src = f"{r}c"
    nodes.append(n("Relu", [src], ["out"], name="/out/Relu"))
    return _save(path.parent, nodes, inits, shape=("batch", 3, "height", "width"), name=path.name)


def test_a_dynamic_export_sized_in_two_rounds_cuts(tmp_path):
    """RT-DETR exported with dynamic=True loaded, tuned, and its plan's export stopped at 'Shape node ...
    reads ..., whose shape is not static': the cut folded its shapes in one round where the model's loader
    folds to a fixed point."""
    path = _two_rounds_of_shape_arithmetic(tmp_path / "dyn.onnx")
    model = Model.load(path, shapes=["images=1x3x8x8"])
    assert model.layer("/b/Conv").outputs[0].shape == (1, 8, 8, 8)
    parts = cut(model, Placement(model, {"/b/Conv": "DLA0"}), source=onnx.load(path))
    assert len(parts) >= 2
    from onnx.reference import ReferenceEvaluator
    x = np.random.default_rng(2).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = ReferenceEvaluator(onnx.load(path)).run(None, {"images": x})[0]
    assert np.allclose(run_segments(parts, {"images": x})["out"], want, rtol=1e-4, atol=1e-4)


def test_vit_s_attention_sliced_by_mod_folds(tmp_path, capsys):
    """torchvision's ViT exported with ``dynamo=False`` slices its attention's shape at ``Mod(2, 3)`` (the
    ``-1`` of a negative index); Mod was not folded, and the Slice was refused ('fold those computations
    first')."""
    c = lambda name, v: n("Constant", [], [name], name=f"/attn/{name}", value=_init(name + "_v", v, np.int64))  # noqa: E731
    inits = [_init("w", np.random.default_rng(0).standard_normal((12, 12)))]
    nodes = [n("MatMul", ["images", "w"], ["qkv"], name="/attn/MatMul"),
             n("Shape", ["qkv"], ["s"], name="/attn/Shape"),
             c("two", [2]), c("three", [3]), c("zero", [0]), c("one", [1]),
             n("Mod", ["two", "three"], ["m"], name="/attn/Mod"),
             n("Reshape", ["m", "one"], ["end"], name="/attn/Reshape"),
             n("Slice", ["s", "zero", "end"], ["head"], name="/attn/Slice"),
             c("minus", [-1]),
             n("Concat", ["head", "minus"], ["target"], name="/attn/Concat", axis=0),
             n("Reshape", ["qkv", "target"], ["out"], name="/attn/Reshape_1")]
    path = _save(tmp_path, nodes, inits, shape=(1, 4, 12))
    assert Model.load(path).layer("/attn/Reshape_1").outputs[0].shape == (1, 4, 12)
    assert main(["check", str(path)]) == 0, capsys.readouterr().err


def _half_export(tmp_path):
    """A network exported in FP16 as Ultralytics' ``half=True`` writes it: an input Cast to FP16 that the
    converter appends after every other node (the file's nodes are not in topological order)."""
    rng = np.random.default_rng(0)
    inits = [_init("w1", rng.standard_normal((8, 3, 3, 3)), np.float16),
             _init("w2", rng.standard_normal((8, 8, 3, 3)), np.float16)]
    nodes = [n("Conv", ["x16", "w1"], ["a"], name="/model.0/conv/Conv", pads=[1, 1, 1, 1]),
             n("Relu", ["a"], ["b"], name="/model.0/act/Relu"),
             n("Conv", ["b", "w2"], ["c"], name="/model.1/conv/Conv", pads=[1, 1, 1, 1]),
             n("Relu", ["c"], ["d"], name="/model.1/act/Relu"),
             n("Cast", ["d"], ["out"], name="graph_output_cast0", to=TensorProto.FLOAT),
             n("Cast", ["images"], ["x16"], name="graph_input_cast0", to=TensorProto.FLOAT16)]
    return _save(tmp_path, nodes, inits, shape=(1, 3, 16, 16))


def test_a_half_export_whose_nodes_are_not_sorted_cuts_and_exports(tmp_path, monkeypatch, capsys):
    """Its plan's export used to stop at 'the cut output tensor ... has no static shape after shape
    inference; pass --shape' (ONNX inference reads the nodes in file order); TensorRT's parser sorts them."""
    path = _half_export(tmp_path)
    model = Model.load(path)
    parts = cut(model, Placement(model, {"/model.1/conv/Conv": "DLA0"}), source=onnx.load(path))
    assert len(parts) >= 2
    for part in parts:
        onnx.checker.check_model(part.proto, full_check=True)
    x = np.random.default_rng(1).standard_normal((1, 3, 16, 16)).astype(np.float32)
    from onnx.reference import ReferenceEvaluator
    sorted_model = onnx.load(path)
    nodes = list(sorted_model.graph.node)
    del sorted_model.graph.node[:]
    sorted_model.graph.node.extend([nodes[-1], *nodes[:-1]])
    want = ReferenceEvaluator(sorted_model).run(None, {"images": x})[0]
    assert np.allclose(run_segments(parts, {"images": x})["out"], want, rtol=1e-2, atol=1e-2)
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "net.onnx", "--trials", "4", "--granularity", "layer"]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    assert list((tmp_path / "deploy").glob("model.seg*.onnx"))


def test_a_model_with_its_weights_in_external_data_is_tuned(tmp_path, monkeypatch, capsys):
    """torch.onnx.export's dynamo exporter writes the weights beside the model (``net.onnx.data``); the tune's
    check of that data compared each initializer with another one's length (kept by ``id()`` of protobuf
    objects, which are made anew on each access) and refused every such model as 'truncated or edited'."""
    rng = np.random.default_rng(0)
    inits, nodes, x = [], [], "images"
    for i, c in enumerate((8, 16, 24, 32)):
        inits.append(_init(f"w{i}", rng.standard_normal((c, 3 if i == 0 else (8, 16, 24)[i - 1], 3, 3))))
        nodes += [n("Conv", [x, f"w{i}"], [f"c{i}"], name=f"/conv{i}/Conv", pads=[1, 1, 1, 1]),
                  n("Relu", [f"c{i}"], [f"r{i}" if i < 3 else "out"], name=f"/conv{i}/Relu")]
        x = f"r{i}"
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), tmp_path / "net.onnx",
              save_as_external_data=True, all_tensors_to_one_file=True, location="net.onnx.data", size_threshold=0)
    from placetune.model.onnx_io import check_external_data
    check_external_data(tmp_path / "net.onnx")
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "net.onnx", "--trials", "4"]) == 0, capsys.readouterr().err


# ---------------------------------------------------------------- real exports (slow, need ultralytics)
_ULTRALYTICS = """
import os, shutil, sys, json
os.environ["YOLO_OFFLINE"] = "1"
from ultralytics import YOLO, RTDETR
name, kwargs = sys.argv[1], json.loads(sys.argv[2])
net = (RTDETR if name.startswith("rtdetr") else YOLO)(name + ".yaml")
shutil.move(net.export(format="onnx", imgsz=224 if name.endswith("-cls") else 320, **kwargs), "net.onnx")
"""

_TORCHVISION = """
import sys, torch, torchvision
from torchvision.models import detection, segmentation
name, size = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
for module in (detection, segmentation, torchvision.models):
    if hasattr(module, name):
        kw = {"weights": None} if module is torchvision.models else {"weights": None, "weights_backbone": None}
        net = getattr(module, name)(**kw).eval()
        break
x = torch.rand(1, 3, size, size)
args = ([x[0]],) if module is detection else (x,)
torch.onnx.export(net, args, "net.onnx", opset_version=int(sys.argv[3]), dynamo=False, input_names=["images"])
"""

#: Ultralytics networks and export options -> what placetune does (every one of them loads, is tuned and exported)
ULTRALYTICS = [("rtdetr-l", {"dynamic": True}), ("yolo11n-seg", {"half": True}), ("yolo11n-pose", {"half": True}),
               ("yolo11n-obb", {"half": True}),
               ("yolo11n-seg", {"nms": True}), ("yolo11n-pose", {"nms": True}), ("yolo11n-obb", {"nms": True}),
               ("yolov10n", {}), ("yolo11n-cls", {"dynamic": True}), ("rtdetr-l", {})]


def _export(script, args, tmp_path):
    python = _ultralytics_python()
    if python is None:
        pytest.skip("ultralytics is not installed (or set PLACETUNE_ULTRALYTICS_PYTHON to a Python that has it)")
    done = subprocess.run([python, "-c", script, *args], cwd=tmp_path, capture_output=True, text=True, timeout=900,
                          env={"YOLO_OFFLINE": "1", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    if script is _TORCHVISION and "No module named 'torchvision'" in done.stderr:
        pytest.skip("the ultralytics Python has no torchvision")
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.parametrize("name, kwargs", ULTRALYTICS, ids=[f"{a}-{'-'.join(b) or 'plain'}" for a, b in ULTRALYTICS])
def test_real_ultralytics_networks_load_tune_and_export(name, kwargs, tmp_path, monkeypatch, capsys):
    _export(_ULTRALYTICS, [name, json.dumps(kwargs)], tmp_path)
    monkeypatch.chdir(tmp_path)
    size = 224 if name.endswith("-cls") else 320
    shape = ["--shape", f"images=1x3x{size}x{size}"] if kwargs.get("dynamic") else []
    assert main(["check", "net.onnx", *shape]) == 0, capsys.readouterr().err
    assert main(["tune", "--model", "net.onnx", *shape, "--trials", "4"]) == 0, capsys.readouterr().err
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0, capsys.readouterr().err
    assert list((tmp_path / "deploy").glob("model.seg*.onnx"))


#: torchvision networks, image size, opset -> None (loads) or the op of the control flow the refusal names
TORCHVISION = [("ssdlite320_mobilenet_v3_large", 320, "If", 17), ("retinanet_resnet50_fpn", 320, "If", 17),
               ("fasterrcnn_mobilenet_v3_large_320_fpn", 320, "If", 17), ("maskrcnn_resnet50_fpn", 320, "If", 17),
               ("lraspp_mobilenet_v3_large", 320, None, 17), ("efficientnet_b0", 224, None, 17),
               ("vit_b_16", 224, None, 17),
               # below opset 14 ONNX infers no shape for a Reshape to a computed shape (the boxes clipped)
               ("retinanet_resnet50_fpn", 320, "If", 13), ("fcos_resnet50_fpn", 320, "If", 11),
               ("fasterrcnn_mobilenet_v3_large_320_fpn", 320, "If", 11), ("ssdlite320_mobilenet_v3_large", 320, "If", 11),
               ("keypointrcnn_resnet50_fpn", 320, "If", 17), ("deeplabv3_mobilenet_v3_large", 320, None, 11)]


@pytest.mark.slow
@pytest.mark.parametrize("name, size, refused_at, opset", TORCHVISION, ids=[f"{t[0]}-opset{t[3]}" for t in TORCHVISION])
def test_real_torchvision_exports(name, size, refused_at, opset, tmp_path, monkeypatch, capsys):
    _export(_TORCHVISION, [name, str(size), str(opset)], tmp_path)
    monkeypatch.chdir(tmp_path)
    code = main(["check", "net.onnx"])
    err = capsys.readouterr().err.strip().splitlines()
    if refused_at is None:
        assert code == 0, err
        assert main(["tune", "--model", "net.onnx", "--trials", "4"]) == 0
        return
    assert code == 3 and len(err) == 1, err
    assert (f"({refused_at}) is ONNX control flow" in err[0] or f"ONNX control flow ('{refused_at}_" in err[0]) \
        and "backbone and head" in err[0] and "onnxslim" not in err[0], err[0]


def _nms_rows_gathered(tmp_path):
    """YOLOv7's ``export.py --end2end --max-wh N`` tail (ONNX NonMaxSuppression, as its ``ORT_NMS`` writes it):
    the kept rows' batch and box indices (``Gather`` of a column of ``selected_indices``), the flat index
    ``box + batch * boxes``, and the boxes gathered by it along axis 0 of the flattened ``[1 * boxes, 4]``."""
    inits = [_init("w", np.random.default_rng(0).standard_normal((5, 3, 1, 1))), _init("to3d", [1, 5, 16], np.int64),
             _init("s0", [0], np.int64), _init("s4", [4], np.int64), _init("s5", [5], np.int64), _init("ax2", [2], np.int64),
             _init("maxout", [10], np.int64), _init("iou", [0.5]), _init("conf", [0.1]),
             _init("col0", 0, np.int64), _init("col2", 2, np.int64), _init("nboxes", [16], np.int64)]
    nodes = [n("Conv", ["images", "w"], ["f"], name="/model/Conv"),
             n("Reshape", ["f", "to3d"], ["f3"], name="/model/Reshape"),
             n("Transpose", ["f3"], ["rows"], name="/model/Transpose", perm=[0, 2, 1]),
             n("Slice", ["rows", "s0", "s4", "ax2"], ["boxes"], name="/end2end/Slice"),
             n("Slice", ["rows", "s4", "s5", "ax2"], ["score"], name="/end2end/Slice_1"),
             n("Transpose", ["score"], ["scores"], name="/end2end/Transpose", perm=[0, 2, 1]),
             n("NonMaxSuppression", ["boxes", "scores", "maxout", "iou", "conf"], ["sel"],
               name="/end2end/NonMaxSuppression"),
             n("Gather", ["sel", "col0"], ["batch"], name="/end2end/Gather", axis=1),
             n("Gather", ["sel", "col2"], ["box"], name="/end2end/Gather_1", axis=1),
             n("Mul", ["batch", "nboxes"], ["offset"], name="/end2end/Mul_2"),
             n("Add", ["box", "offset"], ["flat_idx"], name="/end2end/Add_1"),
             n("Flatten", ["boxes"], ["flat"], name="/end2end/Flatten", axis=2),
             n("Gather", ["flat", "flat_idx"], ["kept"], name="/end2end/Gather_4", axis=0),
             n("Unsqueeze", ["batch"], ["batch1"], name="/end2end/Unsqueeze", axes=[1]),
             n("Cast", ["batch1"], ["batchf"], name="/end2end/Cast_2", to=TensorProto.FLOAT),
             n("Concat", ["batchf", "kept"], ["out"], name="/end2end/Concat_6", axis=1)]
    path = _save(tmp_path, nodes, inits, shape=(1, 3, 4, 4), out_shape=["Concatoutput_dim_0", 5], opset=12)
    # the value_info onnxsim writes into such an export: the gathered boxes named with a fresh symbol
    model = onnx.load(path)
    for name, dims in [("sel", ["unk__0", 3]), ("batch", ["unk__0"]), ("box", ["unk__0"]), ("flat_idx", ["unk__0"]),
                       ("kept", ["unk__3", 4])]:
        model.graph.value_info.append(helper.make_tensor_value_info(
            name, TensorProto.FLOAT if name == "kept" else TensorProto.INT64, dims))
    onnx.save(model, path)
    return path


def test_boxes_gathered_by_the_kept_indices_of_an_onnx_nms_are_bounded(tmp_path, monkeypatch):
    """A Gather whose indices are the kept boxes (sized by NonMaxSuppression) used to be refused: ONNX's
    inference names its size with a fresh symbol (``unk__3``), which placetune could not bound ('depends on
    values computed in the graph ... and placetune cannot bound it'). Its bound is the data's shape with the
    gathered axis replaced by the indices' bound (ONNX spec: Gather's output has rank q + r - 1)."""
    model = Model.load(_nms_rows_gathered(tmp_path))
    kept = model.layer("/end2end/Gather_4").outputs[0]
    assert (kept.shape, kept.data_dependent) == ((10, 4), True)  # 1 batch x 1 class x min(16 boxes, 10 kept)
    assert model.layer("/end2end/Concat_6").outputs[0].shape == (10, 5)
    monkeypatch.chdir(tmp_path)
    assert main(["check", "net.onnx"]) == 0
    assert main(["tune", "--model", "net.onnx", "--trials", "3"]) == 0
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0
