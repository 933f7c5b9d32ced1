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
