"""ONNX cutting (placetune.cut) with the real onnx package: every segment passes the checker, and
the segments run in order by onnx's reference evaluator reproduce the whole model's output, on the
torch-exported fixtures in tests/data (weights re-filled at random: the exports have zeroed
weights) and on zoo networks (deterministic weights)."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from placetune import Model, ModelError, Placement
from placetune.model.source import load_source, randomize_weights
from placetune.placement.cut import cut, run_segments, swap_inputs

DATA = Path(__file__).parent / "data"
DEVICES = ("GPU", "DLA0", "DLA1")

# fixture file -> input shape override (smaller images keep the reference evaluator fast)
FIXTURES = {
    "seed_block": None,
    "resnet18": {"input": (1, 3, 64, 64)},
    "seed_model_gn": None,
    "mobilenet_v2_dynamo": {"x": (1, 3, 64, 64)},
}


def _random_placement(model: Model, seed: int) -> Placement:
    rng = np.random.default_rng(seed)
    return Placement(model, {n: DEVICES[int(rng.integers(3))] for n in model.names})


def _feeds(model: Model, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {t.name: rng.standard_normal(t.shape).astype(np.float32) for t in model.inputs}


def _static(vi: onnx.ValueInfoProto) -> bool:
    dims = vi.type.tensor_type.shape.dim
    return all(d.HasField("dim_value") and d.dim_value > 0 for d in dims)


def _check_cut(model: Model, source: onnx.ModelProto, placement: Placement, rtol=1e-4, atol=1e-5):
    segs = cut(model, placement, source)
    expected = placement.segments(pipeline=True)
    assert [(s.index, s.device, s.layers) for s in segs] == [(e.index, e.device, e.layers) for e in expected]
    assert [s.predecessors for s in segs] == [e.predecessors for e in expected]
    orig_nodes = {n.name for n in source.graph.node if n.name}
    orig_tensors = {o for n in source.graph.node for o in n.output} | {i.name for i in source.graph.input}
    for s in segs:
        onnx.checker.check_model(s.proto, full_check=True)
        g = s.proto.graph
        # names preserved, static shapes everywhere, only the initializers used
        assert {n.name for n in g.node if n.name and n.op_type != "Constant"} <= orig_nodes
        assert set(s.inputs) <= orig_tensors and set(s.outputs) <= orig_tensors
        assert [i.name for i in g.input] == list(s.inputs) and [o.name for o in g.output] == list(s.outputs)
        assert all(_static(vi) for vi in list(g.input) + list(g.output) + list(g.value_info))
        used = {x for n in g.node for x in n.input}
        assert {t.name for t in g.initializer} <= used
        assert not [n for n in g.node if n.op_type == "Shape"]  # folded into Constants
    feeds = _feeds(model)
    whole = ReferenceEvaluator(source).run(None, feeds)
    env = run_segments(segs, feeds)
    for out, want in zip((o.name for o in source.graph.output), whole):
        np.testing.assert_allclose(env[out], want, rtol=rtol, atol=atol)
        assert np.abs(want).max() > 0  # the check means something
    return segs


def _spatial_dims_open(name: str, folder: Path) -> Path:
    """A copy of a static export whose input H and W are symbolic: --shape may set only the batch
    and dynamic dimensions, and 64x64 keeps the reference evaluator fast."""
    import gzip

    with gzip.open(DATA / f"{name}.onnx.gz", "rb") as fh:
        proto = onnx.load_from_string(fh.read())
    for vi in proto.graph.input:
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 4:
            dims[2].dim_param, dims[3].dim_param = "height", "width"
    del proto.graph.value_info[:]
    path = folder / f"{name}.onnx"
    onnx.save(proto, str(path))
    return path


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    out = {}
    folder = tmp_path_factory.mktemp("open")
    for name, shapes in FIXTURES.items():
        static = shapes is not None
        model = Model.load(_spatial_dims_open(name, folder) if static else DATA / f"{name}.onnx.gz", shapes=shapes)
        out[name] = (model, randomize_weights(load_source(model), seed=3))
    return out


@pytest.mark.parametrize("name", list(FIXTURES))
@pytest.mark.parametrize("seed", [0, 1])
def test_torch_exports_cut_and_rerun(name, seed, fixtures):
    model, source = fixtures[name]
    segs = _check_cut(model, source, _random_placement(model, seed))
    assert len(segs) > 1


@pytest.mark.parametrize("zoo_name", ["model-gn", "vit-tiny:depth=2", "model-bn"])
def test_zoo_models_cut_and_rerun(zoo_name):
    model = Model.load(zoo_name)
    source = load_source(model)  # zoo weights are deterministic and non-zero
    _check_cut(model, source, _random_placement(model, 5), rtol=1e-3, atol=1e-4)


def test_seed_block_three_branches(fixtures):
    model, source = fixtures["seed_block"]
    p = Placement(model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    segs = _check_cut(model, source, p)
    assert [(s.device, s.layers) for s in segs] == [
        ("GPU", ("/conv1/Conv", "/conv2/Conv")), ("DLA0", ("/conv3/Conv",)), ("DLA1", ("/conv4/Conv",)),
        ("GPU", ("/Concat",))]
    assert [(s.inputs, s.outputs) for s in segs] == [
        (("input",), ("/conv2/Conv_output_0",)), (("input",), ("/conv3/Conv_output_0",)),
        (("input",), ("/conv4/Conv_output_0",)),
        (("/conv2/Conv_output_0", "/conv3/Conv_output_0", "/conv4/Conv_output_0"), ("output",))]
    # the shared weight (conv1.weight behind three Identity nodes) goes to every segment that uses it
    for s in segs[:3]:
        assert [t.name for t in s.proto.graph.initializer] == ["conv1.weight"]
    assert not segs[3].proto.graph.initializer


def test_folded_shape_chains_become_constants(fixtures):
    """seed_model_gn's GroupNorm reads ``Shape(conv output)`` for its second Reshape; placetune
    folds it. Cut between the Conv and that Reshape, the Reshape's segment gets a Constant of
    the static shape (same node and tensor name) instead of a dependency on the Conv's output."""
    model, source = fixtures["seed_model_gn"]
    assert any(n.op_type == "Shape" for n in source.graph.node)
    p = Placement(model, {n: ("DLA0" if model.layer(n).op_type in ("Reshape", "Conv") else "GPU") for n in model.names})
    segs = _check_cut(model, source, p)
    (seg,) = [s for s in segs if "/cnn/cnn.1/Reshape_1" in s.layers]
    assert "/cnn/cnn.1/Reshape_1" not in [x for s in segs if "/cnn/cnn.0/Conv" in s.layers for x in s.layers]
    assert "/cnn/cnn.0/Conv_output_0" not in seg.inputs
    (const,) = [n for n in seg.proto.graph.node if n.name == "/cnn/cnn.1/Shape"]
    assert const.op_type == "Constant" and list(const.output) == ["/cnn/cnn.1/Shape_output_0"]
    assert tuple(numpy_helper.to_array(const.attribute[0].t)) == model.layer("/cnn/cnn.0/Conv").outputs[0].shape
    # no segment reads a tensor only for its shape: inputs are the layers' data tensors
    layer_outputs = {t.name for layer in model.layers for t in layer.outputs} | set(model.input_shapes)
    assert all(set(s.inputs) <= layer_outputs for s in segs)


def test_shared_segments_hash_the_same(fixtures):
    model, source = fixtures["seed_block"]
    a = cut(model, Placement(model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}), source)
    b = cut(model, Placement(model, {"/conv3/Conv": "DLA1", "/conv4/Conv": "DLA0"}), source)
    c = cut(model, Placement(model, {"/conv2/Conv": "DLA0"}), source)
    assert a[0].hash == b[0].hash and a[3].hash == b[3].hash  # same layers -> same sub-model
    assert a[1].hash == b[1].hash  # /conv3/Conv alone: the device is not part of the content
    assert a[0].hash not in {s.hash for s in c}
    assert len({s.hash for s in a}) == 4


def test_one_segment_is_the_whole_model(fixtures):
    model, source = fixtures["resnet18"]
    (seg,) = _check_cut(model, source, Placement.all_gpu(model))
    assert seg.inputs == ("input",) and seg.outputs == ("output",) and seg.predecessors == ()


def test_a_swapped_cut_is_wrong(fixtures):
    model, source = fixtures["seed_block"]
    segs = cut(model, Placement(model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}), source)
    bad = swap_inputs(segs[3])
    assert bad.hash != segs[3].hash and bad.inputs == segs[3].inputs
    onnx.checker.check_model(bad.proto, full_check=True)
    feeds = _feeds(model)
    good = run_segments(segs, feeds)["output"]
    wrong = run_segments(segs[:3] + [bad], feeds)["output"]
    assert not np.allclose(good, wrong)
    with pytest.raises(ValueError, match="no two inputs"):
        swap_inputs(segs[0])


def test_identity_output_and_unnamed_nodes(tmp_path):
    """A network output behind an Identity (torch does this) and unnamed nodes (node_of_<output>)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    rng = np.random.default_rng(0)
    w = [numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), f"w{i}") for i in range(2)]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Identity", ["c1"], ["y"], name="out_alias"),
    ]
    proto = helper.make_model(helper.make_graph(nodes, "g", [x], [y], w), opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    model = Model.load(path, shapes={"x": (2, 4, 8, 8)})
    assert model.names == ["node_of_c0", "node_of_r0", "conv1"]
    p = Placement(model, {"node_of_r0": "DLA0"})
    segs = cut(model, p, load_source(model))
    assert [s.layers for s in segs] == [("node_of_c0",), ("node_of_r0",), ("conv1",)]
    assert segs[-1].outputs == ("y",)  # the alias is exported by the segment of its producer
    feeds = {"x": rng.standard_normal((2, 4, 8, 8)).astype(np.float32)}
    np.testing.assert_allclose(run_segments(segs, feeds)["y"], ReferenceEvaluator(proto).run(None, feeds)[0],
                               rtol=1e-5, atol=1e-5)
    for s in segs:
        onnx.checker.check_model(s.proto, full_check=True)
        assert all(d.dim_value > 0 for vi in s.proto.graph.input for d in vi.type.tensor_type.shape.dim)


def test_source_that_does_not_match_the_model(fixtures):
    model, _ = fixtures["seed_block"]
    other = load_source(Model.load(DATA / "seed_model_gn.onnx.gz"))
    with pytest.raises(ModelError, match="does not match"):
        cut(model, Placement.all_gpu(model), other)


def test_load_source_from_file_zoo_and_proto(tmp_path):
    gz = load_source(Model.load(DATA / "seed_block.onnx.gz"))
    assert numpy_helper.to_array(gz.graph.initializer[0]).shape == (384, 384, 1, 1)
    plain = tmp_path / "sb.onnx"
    plain.write_bytes(gzip.decompress((DATA / "seed_block.onnx.gz").read_bytes()))
    assert load_source(Model.load(plain)).SerializeToString() == gz.SerializeToString()
    z = load_source(Model.load("seed-block"))
    assert np.abs(numpy_helper.to_array(z.graph.initializer[0])).max() > 0  # zoo: real weights
    stripped = Model.load(load_source(Model.load("seed-block")))  # from a proto: weights stripped
    assert stripped.path is None and stripped.zoo is None
    zeros = load_source(stripped)
    onnx.checker.check_model(zeros, full_check=True)
