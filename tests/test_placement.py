"""Placement: canonical keys, JSON, scopes, segments and DLA islands."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placetune import Model
from placetune.errors import PlacementError
from placetune.placement.placement import Placement

from .conftest import DATA


def test_key_is_canonical(seed_block):
    names = seed_block.names
    a = Placement(seed_block, {names[2]: "DLA0", names[3]: "dla1"})
    b = Placement(seed_block, {names[3]: "DLA1", names[2]: "dla", names[0]: "GPU"})
    assert a.key == b.key and a == b
    c = a.with_devices({names[2]: "DLA1"})
    assert c.key != a.key
    assert Placement.all_gpu(seed_block).key != Placement.all_dla(seed_block).key


def test_json_round_trip(seed_block):
    p = Placement(seed_block, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    q = Placement.from_json(seed_block, p.to_json())
    assert q == p
    doc = json.loads(p.to_json())
    assert doc["default"] == "GPU" and doc["layers"] == {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}
    # plain mapping and wrapped forms
    assert Placement.from_json(seed_block, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}) == p
    assert Placement.from_json(seed_block, {"placement": doc}) == p


def test_unknown_layer_and_device(seed_block):
    with pytest.raises(PlacementError, match="does not have: '/conv9/Conv'"):
        Placement(seed_block, {"/conv9/Conv": "DLA0"})
    with pytest.raises(PlacementError, match="unknown device 'TPU'"):
        Placement(seed_block, {"/conv1/Conv": "TPU"})
    with pytest.raises(PlacementError, match="not valid JSON"):
        Placement.from_json(seed_block, "{nope")


def test_from_scopes_most_specific_wins(resnet18_export):
    m = resnet18_export
    p = Placement.from_scopes(m, {"layer1": "DLA0", "layer1/layer1.0": "GPU"}, default="GPU")
    for layer in m.layers:
        if layer.scope.startswith("layer1/layer1.0"):
            assert p[layer.name] == "GPU"
        elif layer.scope.startswith("layer1/") or layer.scope == "layer1":
            assert p[layer.name] == "DLA0", layer.name
        else:
            assert p[layer.name] == "GPU"
    assert p.counts()["DLA0"] > 0
    with pytest.raises(PlacementError, match="match no layer"):
        Placement.from_scopes(m, {"layer9": "DLA0"})


def test_segments_engine_vs_pipeline(seed_block):
    p = Placement(seed_block, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    pipe = p.segments(pipeline=True)
    assert [(s.device, s.layers) for s in pipe] == [
        ("GPU", ("/conv1/Conv", "/conv2/Conv")),
        ("DLA0", ("/conv3/Conv",)),
        ("DLA1", ("/conv4/Conv",)),
        ("GPU", ("/Concat",)),
    ]
    assert pipe[3].predecessors == (0, 1, 2)
    # in one engine the GPU layers form one region (TensorRT's view)
    assert len(p.segments()) == 3
    assert p.dla_islands() == {"DLA0": 1, "DLA1": 1}
    assert Placement.all_dla(seed_block).dla_islands() == {"DLA0": 1, "DLA1": 0}
    # a pipeline's loadables are its segments, one engine each
    assert p.dla_islands(pipeline=True) == {"DLA0": 1, "DLA1": 1}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["GPU", "DLA0", "DLA1"]), min_size=1, max_size=200), st.booleans())
def test_dla_islands_count_the_segments_without_naming_them(devices, pipeline):
    model = _RESNET50
    dev = {n: devices[i % len(devices)] for i, n in enumerate(model.names)}
    p = Placement(model, dev)
    islands = p.dla_islands(pipeline=pipeline)
    assert p._segments is None  # counted on the integer segmentation: no name tuples built
    named = Placement(model, dev).segments(pipeline=pipeline)
    assert islands == {d: sum(s.device == d for s in named) for d in ("DLA0", "DLA1")}


def test_realise_checks_the_loadable_limit_without_naming_segments():
    from placetune.hardware.platforms import get_platform
    from placetune.placement.realise import realise

    model = _RESNET50
    dev = {n: "DLA0" if i < 40 else "GPU" for i, n in enumerate(model.names)}  # a few loadables
    for mode in ("engine", "pipeline"):
        r = realise(Placement(model, dev), get_platform("orin-agx"), mode=mode, precision="int8")
        assert 0 < r.loadables["DLA0"] <= 16 and not r.notes
        assert r.realized._segments is None  # nothing asked for the segments' layer names
        assert r.loadables["DLA0"] == sum(s.device == "DLA0" for s in r.realized.segments(pipeline=mode == "pipeline"))


_RESNET50 = Model.load("resnet50", batch=1)


def test_group_norm_fragments_dla(seed_model_gn):
    m = seed_model_gn
    gpu_only = {layer.name: "GPU" for layer in m.layers if layer.op_type in ("InstanceNormalization", "Reshape")}
    p = Placement.all_dla(m).with_devices(gpu_only)
    assert p.dla_islands()["DLA0"] >= 5


def _is_convex(model, placement, segment):
    inside = set(segment.layers)
    # no path leaves the segment and comes back in
    reach_out = set()
    for layer in model.layers:
        from_inside = any(p in inside for p in layer.producers)
        from_out = any(p in reach_out for p in layer.producers)
        if layer.name in inside:
            if from_out:
                return False
        elif from_inside or from_out:
            reach_out.add(layer.name)
    return True


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["GPU", "DLA0", "DLA1"]), min_size=49, max_size=49), st.booleans())
def test_segments_partition_and_are_convex(devices, pipeline):
    m = Model.load(DATA / "resnet18.onnx.gz")
    p = Placement(m, dict(zip(m.names, devices)))
    segs = p.segments(pipeline=pipeline)
    seen = [n for s in segs for n in s.layers]
    assert sorted(seen) == sorted(m.names)
    for s in segs:
        assert {p[n] for n in s.layers} == {s.device}
        assert _is_convex(m, p, s)
        assert all(q < s.index for q in s.predecessors)


def test_default_alone_is_a_placement_and_a_bad_device_names_the_valid_ones(seed_block):
    """{"default": "DLA0"} was once refused as naming an unknown layer 'default'."""
    p = Placement.from_json(seed_block, {"default": "DLA0"})
    assert set(p.as_dict().values()) == {"DLA0"}
    first = seed_block.names[0]
    q = Placement.from_json(seed_block, {"default": "DLA1", first: "GPU"})
    assert q[first] == "GPU" and q[seed_block.names[-1]] == "DLA1"
    with pytest.raises(PlacementError) as exc:
        Placement.from_json(seed_block, {"default": "DLA2"})
    msg = str(exc.value)
    assert "'DLA2'" in msg and "GPU, DLA0, DLA1" in msg and "does not have" not in msg


def test_layers_and_scopes_together_apply_both(seed_block):
    """With both ``scopes`` and ``layers`` the layers were once ignored.
    Scopes apply first, then the named layers override them (a layer is the most specific scope)."""
    doc = {"default": "GPU", "scopes": {"": "DLA0"}, "layers": {"/conv2/Conv": "GPU", "/Concat": "DLA1"}}
    p = Placement.from_json(seed_block, json.dumps(doc))
    assert p["/conv2/Conv"] == "GPU" and p["/Concat"] == "DLA1"
    assert p["/conv1/Conv"] == "DLA0" and p["/conv3/Conv"] == "DLA0"
    with pytest.raises(PlacementError, match="does not have: '/nope'"):
        Placement.from_json(seed_block, {"scopes": {"": "DLA0"}, "layers": {"/nope": "GPU"}})
