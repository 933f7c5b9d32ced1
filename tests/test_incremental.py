"""Incremental evaluation (backends/simulate/incremental.py) equals the full simulated measurement."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings as hsettings, strategies as st

from placetune import DeviceProfile, Model
from placetune.backends.simulate.incremental import IncrementalSimulator
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.errors import PlacementError
from placetune.hardware.platforms import get_platform
from placetune.model import zoo
from placetune.placement.placement import DEVICES, Placement
from placetune.settings import Settings

ORIN = get_platform("orin-agx")
MODELS = {"resnet50": Model.load("resnet50", batch=1),
          "vit-tiny-2": Model.load(zoo.build("vit-tiny", batch=1, depth=2), name="vit-tiny-2")}
PROFILE = DeviceProfile.from_dict({"base": "orin-agx", "scale": {"gpu": 0.8, "dla": 1.3, "boundary": 2,
                                                                 "contention": 1.5},
                                   "add": {"engine_us": 80}, "noise": {"layer_sigma": 0.1, "seed": 3}})
CONFIGS = [("engine", 1, None, 0.0), ("pipeline", 1, None, 0.0), ("pipeline", 4, None, 0.0),
           ("pipeline", 4, PROFILE, 0.0), ("engine", 1, PROFILE, 0.05), ("pipeline", 3, None, 0.05)]
_SIMS: dict = {}


def simulator(model_name, cfg):
    key = (model_name, cfg[:2], cfg[2] is not None, cfg[3])
    if key not in _SIMS:
        mode, k, profile, noise = cfg
        s = Settings(mode=mode, precision="int8", iterations=7, frames_in_flight=k, noise=noise)
        _SIMS[key] = IncrementalSimulator(MODELS[model_name], ORIN, s,
                                          SimulatedJetson(timeline=False, profile=profile))
    return _SIMS[key]


def assert_equal_to_full(ev):
    full = ev.sim.measure_full(ev.placement())
    assert full.ok and ev.ok
    assert ev.stats == full.latency_ms
    assert ev.throughput_fps == full.throughput_fps
    assert ev.energy_mj == full.energy_mj and ev.power_w == full.power_w
    assert ev.period_ms == full.extra["period_ms"]
    assert ev.busy_ms == full.extra["busy_ms"]
    assert [DEVICES[c] for c in ev.realized.tolist()] == list(full.realized.values())


@st.composite
def start_and_moves(draw):
    name = draw(st.sampled_from(sorted(MODELS)))
    n = len(MODELS[name].names)
    if draw(st.booleans()):
        codes = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    else:
        cuts = sorted(draw(st.lists(st.integers(1, n - 1), max_size=5)))
        codes, start = [], 0
        for end in cuts + [n]:
            codes += [draw(st.integers(0, 2))] * (end - start)
            start = end
    moves = draw(st.lists(st.dictionaries(st.integers(0, n - 1), st.integers(0, 2), min_size=1, max_size=3),
                          min_size=1, max_size=4))
    return name, np.array(codes, dtype=np.int8), moves


@hsettings(max_examples=60, deadline=None)
@given(start_and_moves(), st.sampled_from(CONFIGS))
def test_incremental_moves_equal_the_full_evaluation(case, cfg):
    name, codes, moves = case
    sim = simulator(name, cfg)
    ev = sim.evaluate(codes)
    assert_equal_to_full(ev)
    for move in moves:
        ev = sim.evaluate_move(ev, move)
        assert_equal_to_full(ev)


def test_move_by_layer_name_and_device_name():
    m = MODELS["resnet50"]
    sim = simulator("resnet50", CONFIGS[2])
    base = sim.evaluate(Placement.all_gpu(m))
    moved = sim.evaluate_move(base, {m.names[5]: "dla1", m.names[6]: "DLA1"})
    assert moved.placement() == Placement(m, {m.names[5]: "DLA1", m.names[6]: "DLA1"})
    assert moved.latency_ms != base.latency_ms
    assert moved.measurement().latency_ms == moved.stats
    with pytest.raises(PlacementError):
        sim.evaluate_move(base, {"no-such-layer": "GPU"})


def test_replicas_mode_goes_through_the_full_path():
    m = MODELS["resnet50"]
    sim = IncrementalSimulator(m, ORIN, Settings(mode="replicas", precision="int8", iterations=5))
    ev = sim.evaluate(Placement.all_dla(m))
    full = sim.measure_full(Placement.all_dla(m))
    assert ev.stats == full.latency_ms and ev.throughput_fps == full.throughput_fps


def test_steady_state_is_the_fixed_point_bisection_finds():
    """steady.steady_state finds P = f(P) with the Illinois method (a few evaluations): it must
    agree with a plain bisection of the same fixed point to 1e-11 on random segment DAGs."""
    import numpy as np

    from placetune.backends.simulate.steady import steady_state

    def bisect(dev, t, dem, lat, k, sens):
        w = np.bincount(dev, weights=t, minlength=3)[:3]
        q = [b / a if a > 0 else 0.0 for a, b in zip(w, np.bincount(dev, weights=t * dem, minlength=3)[:3])]

        def f(p):
            uq = [min(1.0, a / p) * b for a, b in zip(w, q)]
            ws = [w[d] * (1.0 + sens[d] * (sum(uq) - uq[d])) for d in range(3)]
            return max(max(ws), lat * sum(ws) / w.sum() / k)

        lo = max(max(w), lat / k)
        hi = f(lo)
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if f(mid) > mid else (lo, mid)
        return max(hi, lo)

    rng = np.random.default_rng(1)
    for _ in range(3000):
        n = int(rng.integers(1, 12))
        dev, t, dem = rng.integers(0, 3, n), rng.uniform(0.01, 2, n), rng.uniform(0, 1, n)
        lat, k, sens = float(t.sum() * rng.uniform(0.3, 1.5)), int(rng.integers(1, 9)), tuple(rng.uniform(0, 3, 3))
        got = steady_state(dev, t, dem, lat, k, sens).period_ms
        assert got == pytest.approx(bisect(dev, t, dem, lat, k, sens), rel=1e-11)


@st.composite
def segment_dags(draw):
    k = draw(st.integers(1, 40))
    device = draw(st.lists(st.integers(0, 2), min_size=k, max_size=k))
    preds = [tuple(sorted(draw(st.sets(st.integers(0, i - 1), max_size=3)))) if i else () for i in range(k)]
    work = draw(st.lists(st.floats(0.0, 5.0), min_size=k, max_size=k))
    demand = draw(st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k))
    return device, work, demand, preds


@hsettings(max_examples=200, deadline=None)
@given(segment_dags(), st.tuples(*[st.floats(0.0, 2.0)] * 3))
def test_one_frame_schedule_equals_the_event_scheduler(dag, sens):
    from placetune.backends.simulate.costs import CODE_DEVICE
    from placetune.backends.simulate.schedule import Task, run, run_one_frame

    device, work, demand, preds = dag
    tasks = [Task(CODE_DEVICE[d], w, q, p, key=(0, i)) for i, (d, w, q, p) in enumerate(zip(device, work, demand, preds))]
    ref = run(tasks, dict(zip(CODE_DEVICE, sens)))
    makespan, busy = run_one_frame(device, work, demand, preds, sens)
    assert makespan == ref.makespan
    assert {CODE_DEVICE[d]: v for d, v in busy} == {d: v for d in ref.busy if (v := ref.busy_ms(d)) > 0}
    assert [CODE_DEVICE[d] for d, _ in busy] == [d for d in ref.busy if ref.busy_ms(d) > 0]
