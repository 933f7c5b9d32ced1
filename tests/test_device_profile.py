"""Device profiles (placetune.calibration.profile) and the simulated backend measuring with one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from placetune import DeviceProfile, Model, Placement, Settings, get_backend, get_platform, load_device_profile, realise
from placetune.backends.simulate.costs import cost_table
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.errors import ConfigError

ORIN = get_platform("orin-agx")


@pytest.fixture(scope="module")
def resnet():
    return Model.load("resnet18", batch=1)


def _mixed(m):
    names = m.names
    half = len(names) // 2
    return Placement(m, {n: ("DLA0" if i < half else "GPU") for i, n in enumerate(names)})


def test_toml_round_trip(tmp_path):
    p = DeviceProfile.from_dict({"base": "orin-agx", "scale": {"gpu": 0.8, "dla": 1.3, "boundary": 2,
                                                               "op_class": {"gpu.conv": 1.1, "dla.pool": 0.5},
                                                               "layer": {"dla.some \"odd\" name": 1.2}},
                                 "add": {"engine_us": 80}, "noise": {"layer_sigma": 0.1, "seed": 3}})
    f = tmp_path / "dev.toml"
    f.write_text(p.to_toml())
    q = load_device_profile(f)
    assert q == p and q.digest() == p.digest() and q.op_class["gpu.conv"] == 1.1
    assert DeviceProfile.nominal("orin-agx").is_nominal and not p.is_nominal


@pytest.mark.parametrize("doc, words", [
    ({"base": "orin-agx", "scale": {"gpu": 0}}, "scale.gpu must be > 0"),
    ({"base": "orin-agx", "scale": {"dla": -1.0}}, "scale.dla must be > 0"),
    ({"base": "orin-agx", "scale": {"gpu": "fast"}}, "scale.gpu must be a number"),
    ({"base": "orin-agx", "scale": {"gpu": math.inf}}, "scale.gpu must be finite"),
    ({"base": "orin-agx", "scale": {"gpus": 1.0}}, "unknown key(s) in [scale]: gpus"),
    ({"base": "orin-agx", "extra": 1}, "unknown key(s) extra"),
    ({"base": "jetson-9000"}, "base 'jetson-9000' is not a built-in platform"),
    ({"scale": {}}, "base is missing"),
    ({"base": "orin-agx", "scale": {"op_class": {"gpu.warp": 1.0}}}, "unknown op class 'warp'"),
    ({"base": "orin-agx", "scale": {"op_class": {"conv": 1.0}}}, "must look like \"gpu.<name>\""),
    ({"base": "orin-agx", "scale": {"layer": {"dla.x": 0.0}}}, "scale.layer.dla.x must be > 0"),
    ({"base": "orin-agx", "noise": {"layer_sigma": -0.1}}, "noise.layer_sigma must be >= 0"),
    ({"base": "orin-agx", "noise": {"seed": 1.5}}, "noise.seed must be an integer"),
    ({"base": "orin-agx", "add": {"engine_us": True}}, "add.engine_us must be a number"),
])
def test_bad_profiles_are_one_line_errors(doc, words):
    with pytest.raises(ConfigError) as e:
        DeviceProfile.from_dict(doc)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_bad_file_names_file_and_key(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text('base = "orin-agx"\n[scale]\nboundary = 0\n')
    with pytest.raises(ConfigError, match=r"bad\.toml: device profile: scale.boundary must be > 0"):
        load_device_profile(f)
    f.write_text("base = [")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_device_profile(f)
    with pytest.raises(ConfigError, match="cannot read device profile"):
        load_device_profile(tmp_path / "missing.toml")


def test_layer_factors_combine_device_class_layer_and_noise(resnet):
    table = cost_table(resnet, ORIN, "int8", 1)
    g = table.g
    conv = g.cls.index("conv")
    name = g.names[conv]
    p = DeviceProfile("orin-agx", gpu=0.8, dla=1.3, op_class={"gpu.conv": 1.5}, layer={f"dla.{name}": 2.0})
    f = p.layer_factors(table)
    assert f.shape == (2, g.n)
    assert f[0, conv] == pytest.approx(0.8 * 1.5) and f[1, conv] == pytest.approx(1.3 * 2.0)
    other = next(i for i, c in enumerate(g.cls) if c != "conv")
    assert f[0, other] == pytest.approx(0.8) and f[1, other] == pytest.approx(1.3)
    noisy = DeviceProfile("orin-agx", layer_sigma=0.2, seed=1)
    a, b = noisy.layer_factors(table), DeviceProfile("orin-agx", layer_sigma=0.2, seed=2).layer_factors(table)
    assert np.array_equal(a, noisy.layer_factors(table)) and not np.allclose(a, b)
    assert 0.1 < np.log(a).std() < 0.3


@pytest.mark.parametrize("mode", ["engine", "pipeline"])
def test_profile_changes_what_is_measured(resnet, mode):
    r = realise(_mixed(resnet), ORIN, precision="int8")
    st = Settings(mode=mode, precision="int8")
    nominal = SimulatedJetson().measure(r, ORIN, st)
    slow_dla = SimulatedJetson(profile=DeviceProfile("orin-agx", dla=2.0)).measure(r, ORIN, st)
    nd = {s["index"]: s for s in nominal.segment_times_ms}
    for s in slow_dla.segment_times_ms:
        if s["device"] == "DLA0":
            assert s["time_ms"] > 1.5 * nd[s["index"]]["time_ms"] - 0.2
    # the per-engine cost: pipeline mode pays it per segment, engine mode once
    extra = SimulatedJetson(profile=DeviceProfile("orin-agx", engine_us=100.0)).measure(r, ORIN, st)
    k = len(nominal.segment_times_ms) if mode == "pipeline" else 1
    assert sum(s["time_ms"] for s in extra.segment_times_ms) - sum(s["time_ms"] for s in nominal.segment_times_ms) \
        == pytest.approx(0.1 * k)
    assert extra.simulated and slow_dla.simulated


def test_nominal_simulator_charges_each_pipeline_engine(resnet):
    """The per-engine launch + sync cost (table.engine_ms) makes a fragmented pipeline cost more."""
    table = cost_table(resnet, ORIN, "int8", 1)
    assert table.engine_ms == pytest.approx(0.020)
    m = SimulatedJetson().measure(realise(Placement.all_gpu(resnet), ORIN, precision="int8"), ORIN,
                                  Settings(mode="engine", precision="int8"))
    t, _, _ = table.layer_costs(np.zeros(table.g.n, dtype=np.intp))
    assert m.latency_ms["median"] == pytest.approx(t.sum() + 0.020)


def test_segments_carry_layer_ranges(resnet):
    r = realise(_mixed(resnet), ORIN, precision="int8")
    m = SimulatedJetson().measure(r, ORIN, Settings(mode="pipeline", precision="int8"))
    covered = sorted(i for s in m.segment_times_ms for a, b in s["ranges"] for i in range(a, b + 1))
    assert covered == list(range(len(resnet.layers)))
    for s in m.segment_times_ms:
        assert sum(b - a + 1 for a, b in s["ranges"]) == s["layers"]
        assert all(m.realized[resnet.names[i]] == s["device"] for a, b in s["ranges"] for i in range(a, b + 1))


def test_fingerprint_separates_profiles_and_checks_base(resnet, tmp_path):
    st = Settings(precision="int8")
    p = DeviceProfile("orin-agx", dla=1.3)
    assert "profile" not in SimulatedJetson().fingerprint(ORIN, st)
    assert "profile" not in SimulatedJetson(profile=DeviceProfile.nominal("orin-agx")).fingerprint(ORIN, st)
    fp = SimulatedJetson(profile=p).fingerprint(ORIN, st)
    assert fp["profile"] == p.digest() != DeviceProfile("orin-agx", dla=1.31).digest()
    with pytest.raises(ConfigError, match="base is 'xavier-agx'"):
        SimulatedJetson(profile=DeviceProfile("xavier-agx")).fingerprint(ORIN, st)
    f = tmp_path / "p.toml"
    f.write_text(p.to_toml())
    assert get_backend("simulate", device_profile=str(f)).fingerprint(ORIN, st) == fp
    with pytest.raises(ConfigError, match="applies to --backend simulate"):
        get_backend("trtexec", device_profile=p)


def test_profiled_store_cache_does_not_mix(resnet):
    from placetune import Evaluator

    ev0 = Evaluator(resnet, "orin-agx", mode="engine", precision="int8")
    store = ev0.store
    pl = _mixed(resnet)
    a = ev0.evaluate(pl)
    ev1 = Evaluator(resnet, "orin-agx", SimulatedJetson(profile=DeviceProfile("orin-agx", dla=2.0)), mode="engine",
                    precision="int8", store=store)
    b = ev1.evaluate(pl)
    assert ev1.stats.measured == 1 and b.latency_ms["median"] > a.latency_ms["median"]


def test_noise_override(resnet):
    r = realise(Placement.all_gpu(resnet), ORIN, precision="int8")
    st = Settings(precision="int8", iterations=20)
    m = SimulatedJetson(noise=0.05).measure(r, ORIN, st)
    assert len(set(m.latency_samples_ms)) > 1
    assert SimulatedJetson(noise=0.05).fingerprint(ORIN, st)["noise"] == 0.05
    with pytest.raises(ConfigError, match="noise must be a number from 0 to 1"):
        SimulatedJetson(noise=-1)
