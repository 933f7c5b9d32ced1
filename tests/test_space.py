"""Space: granularities, masks, conversion and features."""

from __future__ import annotations

import numpy as np
import pytest

from placetune import ConfigError, Model, Placement, PlacementError, Space


def test_devices_per_mode_and_platform():
    m = Model.load("seed-block")
    assert Space(m, "orin-agx", mode="pipeline").devices == ("GPU", "DLA0", "DLA1")
    assert Space(m, "orin-agx", mode="engine").devices == ("GPU", "DLA0")
    assert Space(m, "orin-agx", mode="engine", dla_core=1).devices == ("GPU", "DLA1")
    assert Space(m, "orin-nx-8gb", mode="pipeline").devices == ("GPU", "DLA0")
    assert Space(m, "orin-nano", mode="pipeline").devices == ("GPU",)
    with pytest.raises(ConfigError):
        Space(m, "orin-nx-8gb", mode="engine", dla_core=1)


def test_fusion_groups_conv_bn_relu():
    m = Model.load("resnet50")
    space = Space(m, "orin-agx", granularity="fusion")
    first = space.unit_of("/conv1/Conv")
    ops = [m.layer(n).op_type for n in first.layers]
    assert ops == ["Conv", "BatchNormalization", "Relu"]
    # every layer in exactly one unit, in order
    flat = [n for u in space.units for n in u.layers]
    assert sorted(flat) == sorted(m.names)
    assert space.n_units < len(m) / 2
    assert Space(m, "orin-agx", granularity="layer").n_units == len(m)


def test_scope_granularity():
    m = Model.load("resnet50")
    s1 = Space(m, "orin-agx", granularity="scope:1")
    names = [u.name for u in s1.units]
    assert "layer1" in names and "layer4" in names
    s2 = Space(m, "orin-agx", granularity="scope:2")
    assert "layer1/layer1.0" in [u.name for u in s2.units]
    assert s1.n_units < s2.n_units < Space(m, "orin-agx").n_units
    with pytest.raises(ConfigError):
        Space(m, "orin-agx", granularity="scope:x")
    with pytest.raises(ConfigError):
        Space(m, "orin-agx", granularity="blocks")


def test_masks_follow_dla_rules():
    m = Model.load("resnet50")
    xavier = Space(m, "xavier-agx", mode="pipeline")
    soft = xavier.unit_of([layer.name for layer in m.layers if layer.op_type == "Softmax"][0])
    assert soft.choices == ("GPU",) and not soft.eligible["DLA0"]
    assert xavier.mask[soft.index].tolist() == [1, 0, 0]
    conv = xavier.unit_of("/conv1/Conv")
    assert conv.choices == ("GPU", "DLA0", "DLA1")
    # keeping unsupported choices on purpose, to study fallback itself
    loose = Space(m, "xavier-agx", mode="pipeline", allow_unsupported=True)
    assert loose.units[soft.index].choices == ("GPU", "DLA0", "DLA1")
    assert not loose.units[soft.index].eligible["DLA0"]


def test_conversion_round_trip_and_sampling():
    m = Model.load("googlenet")
    space = Space(m, "orin-agx", mode="pipeline", precision="int8")
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = space.sample(rng)
        assert space.is_allowed(a)
        p = space.to_placement(a)
        assert isinstance(p, Placement)
        assert space.from_placement(p) == a
    with pytest.raises(PlacementError):
        space.to_placement([0])
    with pytest.raises(PlacementError):
        space.to_placement([7] * space.n_units)
    moves = space.neighbours([0] * space.n_units)
    assert moves and all(space.mask[i, k] for i, k in moves)


def test_features_shape_and_content():
    m = Model.load("resnet18")
    space = Space(m, "orin-agx", mode="pipeline")
    f = space.features()
    assert f.shape == (space.n_units, len(space.feature_names)) and f.dtype == np.float32
    assert np.isfinite(f).all()
    col = space.feature_names.index("op_conv")
    assert f[space.unit_of("/conv1/Conv").index, col] == 1.0
    pos = f[:, space.feature_names.index("position")]
    assert pos[0] == 0.0 and np.all(np.diff(pos) > 0)


# ----------------------------------------------------------------------------- stages
def _contiguous(space, a) -> bool:
    """Every stage is one contiguous run of units whose devices are its device or GPU fallback."""
    for s in space.stages(a):
        for i in range(s.start, s.end):
            if a[i] != s.device and not (a[i] == 0 and not space.mask[i, s.device]):
                return False
    return True


@pytest.mark.parametrize("name,mode", [("googlenet", "pipeline"), ("model-gn", "pipeline"),
                                       ("resnet50", "engine"), ("seed-block", "pipeline")])
def test_stage_space_samples_and_neighbours_are_few_contiguous_stages(name, mode):
    from placetune.placement.stages import DEFAULT_MAX_STAGES

    m = Model.load(name)
    space = Space(m, "orin-agx", mode=mode, precision="int8", granularity="stages")
    assert [u.layers for u in space.units] == [u.layers for u in Space(m, "orin-agx", mode=mode).units]
    rng = np.random.default_rng(1)
    n_stages = set()
    for _ in range(40):
        a = space.sample(rng)
        assert space.is_allowed(a) and _contiguous(space, a)
        st = space.stages(a)
        n_stages.add(len(st))
        assert 1 <= len(st) <= DEFAULT_MAX_STAGES
        assert st[0].start == 0 and st[-1].end == space.n_units
        assert all(x.end == y.start and x.device != y.device for x, y in zip(st, st[1:]))
        assert space.from_stages(st) == a  # stages <-> assignment round trip
        assert space.from_placement(space.to_placement(a)) == a  # placement round trip
        for b in space.stage_neighbours(a):
            assert b != a and space.is_allowed(b) and _contiguous(space, b)
            assert len(space.stages(b)) <= DEFAULT_MAX_STAGES
        for i, k in space.neighbours(a):
            b = list(a)
            b[i] = k
            assert space.mask[i, k] and len(space.stages(b)) <= DEFAULT_MAX_STAGES
    assert len(n_stages) > 1  # samples vary in the number of stages


def test_stage_moves_cover_add_remove_shift_and_device_change():
    from placetune.placement.stages import Stage, stage_moves

    space = Space(Model.load("resnet50"), "orin-agx", mode="pipeline", precision="int8", granularity="stages")
    n = space.n_units
    st = [Stage(0, 20, 1), Stage(20, 40, 2), Stage(40, n, 0)]
    moves = stage_moves(space, st)
    counts = {len(m) for m in moves}
    assert {2, 3, 4} <= counts  # a cut removed, kept, added
    assert [Stage(0, 21, 1), Stage(21, 40, 2), Stage(40, n, 0)] in moves  # a cut shifted
    assert [Stage(0, 20, 0), Stage(20, 40, 2), Stage(40, n, 0)] in moves  # a stage's device changed
    assert st not in moves


def test_stage_space_puts_independent_branches_on_different_devices():
    m = Model.load("seed-block")  # three parallel convolutions after the first
    space = Space(m, "orin-agx", mode="pipeline", precision="int8", granularity="stages")
    convs = [space.unit_of(n).index for n in ("/conv2/Conv", "/conv3/Conv", "/conv4/Conv") if n in m.names]
    from placetune.placement.stages import Stage

    stages = []
    start = 0
    for j, i in enumerate(sorted(convs)):
        stages.append(Stage(start, i + 1, j % 3))
        start = i + 1
    if start < space.n_units:
        stages.append(Stage(start, space.n_units, 0))
    a = space.from_stages(stages)
    p = space.to_placement(a)
    assert len({p[space.units[i].layers[0]] for i in convs}) >= 2


def test_stages_is_an_accepted_granularity_everywhere():
    from placetune.tuning.evaluator import Evaluator

    ev = Evaluator("seed-block", "orin-agx", mode="pipeline")
    assert ev.space("stages").granularity == "stages"
    with pytest.raises(ConfigError, match="stages"):
        Space(Model.load("seed-block"), "orin-agx", granularity="stage")


@pytest.mark.parametrize("name", ["resnet50", "googlenet"])
def test_a_placement_from_a_unit_assignment_lists_its_layers_in_topological_order(name):
    # Placement.as_dict promises topological order; the store's encodings and the packed
    # per-layer times rely on one order per model (fusion units do not follow it)
    model = Model.load(name)
    space = Space(model, "orin-agx", mode="pipeline", precision="int8")
    rng = np.random.default_rng(1)
    for _ in range(5):
        p = space.to_placement(space.sample(rng))
        assert list(p.as_dict()) == model.names
