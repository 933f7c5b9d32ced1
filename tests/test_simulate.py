"""Behaviour of the simulated Jetson backend (placetune.backends.simulate)."""

from __future__ import annotations

import numpy as np
import pytest

from placetune import Evaluator, Model
from placetune.backends.base import Backend
from placetune.backends.registry import get_backend
from placetune.backends.simulate.costs import SIM_VERSION, cost_table
from placetune.backends.simulate.simulator import SimulatedJetson, simulate_concurrent
from placetune.placement.placement import Placement
from placetune.hardware.platforms import get_platform
from placetune.placement.realise import Realisation, realise
from placetune.settings import Settings

ORIN = get_platform("orin-agx")
XAVIER = get_platform("xavier-agx")
SIM = SimulatedJetson()
SPLIT = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}


def measure(placement, platform=ORIN, **kw):
    s = Settings(**{"precision": "int8", "iterations": 5, **kw})
    r = realise(placement, platform, mode=s.mode, precision=s.precision)
    return SIM.measure(r, platform, s)


@pytest.fixture(scope="module")
def resnet18():
    return Model.load("resnet18", batch=1)


@pytest.fixture(scope="module")
def resnet18_bs8():
    return Model.load("resnet18", batch=8)


@pytest.fixture(scope="module")
def model_bn():
    return Model.load("model-bn", batch=32)


# ------------------------------------------------------------------------------ protocol
def test_backend_protocol_and_fingerprint():
    sim = get_backend("simulate")
    assert isinstance(sim, SimulatedJetson) and isinstance(sim, Backend)
    assert sim.name == "simulate" and sim.simulated is True
    fp = sim.fingerprint(ORIN, Settings(power_mode="30W"))
    assert fp == {"backend": "simulate", "version": SIM_VERSION, "platform": "orin-agx", "power_mode": "30W"}


def test_engine_measurement_fields(resnet18):
    m = measure(Placement.all_dla(resnet18), iterations=7)
    assert m.ok and m.simulated and m.backend == f"simulate-{SIM_VERSION}"
    assert m.mode == "engine" and m.precision == "int8" and m.batch == 1 and m.build_seconds > 0  # simulated engine build time
    assert len(m.latency_samples_ms) == 7
    assert {"median", "p90", "p99"} <= set(m.latency_ms)
    assert m.throughput_fps == pytest.approx(1000.0 / m.latency_ms["median"])
    assert set(m.requested) == set(m.realized) == set(resnet18.names)
    assert set(m.layer_times_ms) == set(resnet18.names)
    assert m.dla_loadables["DLA0"] >= 1 and m.fallback  # GlobalAveragePool falls back
    assert all(m.realized[n] == "GPU" for n in m.fallback)
    assert sum(s["time_ms"] for s in m.segment_times_ms) == pytest.approx(m.latency_ms["median"])
    assert {e["device"] for e in m.timeline} == {"GPU", "DLA0"}
    assert m.energy_mj > 0 and m.power_w > ORIN.idle_w


def test_seed_block_pipeline_branches_overlap(seed_block):
    m = measure(Placement(seed_block, SPLIT), mode="pipeline", precision="fp16")
    assert m.ok
    first = {e["device"]: e for e in m.timeline if e["frame"] == 0 and e["name"] in ("seg0", "seg1", "seg2")}
    assert set(first) == {"GPU", "DLA0", "DLA1"}
    start = max(e["start_ms"] for e in first.values())
    end = min(e["end_ms"] for e in first.values())
    assert start < end  # conv1+conv2 on the GPU, conv3 on DLA0 and conv4 on DLA1 run at the same time
    assert m.latency_ms["median"] < 0.8 * m.extra["serial_sum_ms"]


def test_two_engines_on_one_dla_core_serialise(seed_block, model_bn):
    same = measure(Placement(seed_block, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}), mode="pipeline",
                   precision="fp16")
    split = measure(Placement(seed_block, SPLIT), mode="pipeline", precision="fp16")
    dla0 = sorted((e["start_ms"], e["end_ms"]) for e in same.timeline if e["device"] == "DLA0" and e["frame"] == 0)
    assert len(dla0) == 2 and dla0[0][1] <= dla0[1][0] + 1e-9
    assert same.latency_ms["median"] > 1.5 * split.latency_ms["median"]
    # two whole DLA-bound engines on DLA0 at once: each takes about twice as long (ref: 17.7 -> 33 ms);
    # a small block slows less: its I/O reformats (over half its time) run on the GPU, beside the other
    r = realise(Placement.all_dla(model_bn), ORIN, precision="int8")
    out = simulate_concurrent([(r, "DLA0"), (r, "DLA0")], ORIN)
    assert 1.8 < out[0]["slowdown"] < 2.3
    r = realise(Placement.all_dla(seed_block), ORIN, precision="int8")
    assert 1.05 < simulate_concurrent([(r, "DLA0"), (r, "DLA0")], ORIN)[0]["slowdown"] < 1.5


def test_dla_time_linear_in_batch_gpu_sublinear(resnet18, resnet18_bs8):
    dla = [measure(Placement.all_dla(m)) for m in (resnet18, resnet18_bs8)]
    gpu = [measure(Placement.all_gpu(m)).latency_ms["median"] for m in (resnet18, resnet18_bs8)]
    on_dla = []  # the cost model's own DLA layer times (layer_times_ms splits each loadable evenly)
    for d, m in zip(dla, (resnet18, resnet18_bs8)):
        codes = np.array([0 if d.realized[n] == "GPU" else 1 for n in m.names])
        t, _, _ = cost_table(m, ORIN, "int8", m.batch).layer_costs(codes)
        on_dla.append(float(t[codes > 0].sum()))
    assert 7.5 < on_dla[1] / on_dla[0] <= 8.0 + 1e-9  # the DLA loops over the batch items
    engine = dla[1].latency_ms["median"] / dla[0].latency_ms["median"]  # + fixed island/boundary costs
    assert gpu[1] / gpu[0] < 6.0 and engine > gpu[1] / gpu[0]


def test_layer_times_are_reported_as_tensorrt_reports_them(resnet18):
    """A DLA loadable is one profiler entry ({ForeignNode[...]}) that the TensorRT backends split
    evenly over its layers: the simulated backend reports the same (it reported each DLA layer's
    own modelled time, which no Jetson shows), while GPU layers keep their own times."""
    names = resnet18.names
    half = len(names) // 2
    m = measure(Placement(resnet18, {n: "DLA0" for n in names[half:]}))  # a GPU segment comes first
    dla_segs = [s for s in m.segment_times_ms if s["device"] != "GPU"]
    assert dla_segs and all(s["index"] > 0 for s in dla_segs)
    for seg in dla_segs:  # each loadable's layers share its time (island overhead and boundaries included)
        layers = [names[j] for a, b in seg["ranges"] for j in range(a, b + 1)]
        assert len({round(m.layer_times_ms[n], 12) for n in layers}) == 1
        assert sum(m.layer_times_ms[n] for n in layers) == pytest.approx(seg["time_ms"], rel=1e-9)
    gpu_times = [m.layer_times_ms[n] for n in names if m.realized[n] == "GPU"]
    assert len(set(round(v, 12) for v in gpu_times)) > 5  # GPU layers are timed one by one


def test_more_islands_is_slower(model_bn):
    one = Placement.all_dla(model_bn)
    # the same DLA layers, but two ReLUs on the GPU cut the DLA part into more loadables
    cut = one.with_devices({"/cnn/cnn.5/Relu": "GPU", "/cnn/cnn.8/Relu": "GPU"})
    a, b = measure(one), measure(cut)
    assert b.extra["islands"] > a.extra["islands"]
    assert sum(b.dla_loadables.values()) > sum(a.dla_loadables.values())
    assert b.latency_ms["median"] > a.latency_ms["median"]


def test_boundary_cost_grows_with_tensor_size(resnet18):
    table = cost_table(resnet18, XAVIER, "fp16", 1)
    order = np.argsort(table.edge_bytes)
    assert np.all(np.diff(table.edge_ms[order]) >= 0)
    # conv activations of a 224px CNN at bs 1: 10-74 us per boundary (ref §3/§5)
    act = table.edge_bytes >= 100e3
    assert act.sum() > 10
    assert 0.010 <= table.edge_ms[act].min() and table.edge_ms[act].max() <= 0.1
    small = cost_table(resnet18, XAVIER, "fp16", 8)
    assert np.all(small.edge_ms > table.edge_ms)


def test_fusion_makes_conv_bn_relu_cheaper(model_bn):
    table = cost_table(model_bn, ORIN, "int8", 32)
    names = model_bn.names
    idx = [names.index(n) for n in ("/cnn/cnn.3/Conv", "/cnn/cnn.4/BatchNormalization", "/cnn/cnn.5/Relu")]
    for kind in (0, 1):  # GPU and DLA
        codes = np.full(len(names), kind)
        t, _, fused = table.layer_costs(codes)
        assert fused[idx[1]] and fused[idx[2]] and not fused[idx[0]]
        assert t[idx].sum() < table.t_alone[kind, idx].sum()
    # split across devices, nothing fuses
    codes = np.zeros(len(names), dtype=np.intp)
    codes[idx[1]] = 1
    _, _, fused = table.layer_costs(codes)
    assert not fused[idx[1]] and not fused[idx[2]]


def test_noise_off_identical_noise_on_seeded(resnet18):
    p = Placement.all_gpu(resnet18)
    quiet = measure(p, iterations=20)
    assert len(set(quiet.latency_samples_ms)) == 1
    st = lambda seed: Settings(precision="int8", iterations=50, noise=0.05, seed=seed)  # noqa: E731
    r = realise(p, ORIN, precision="int8")
    a = SimulatedJetson(timeline=False).measure(r, ORIN, st(1))  # build 0 of a fresh backend
    b = SimulatedJetson(timeline=False).measure(r, ORIN, st(1))
    c = SimulatedJetson(timeline=False).measure(r, ORIN, st(2))
    assert a.latency_samples_ms == b.latency_samples_ms != c.latency_samples_ms
    rel_sd = np.std(a.latency_samples_ms) / np.mean(a.latency_samples_ms)
    assert 0.01 < rel_sd < 0.1
    assert a.latency_ms["p99"] > a.latency_ms["p90"] > a.latency_ms["median"] > 0


def test_two_builds_of_one_placement_differ_by_the_seeded_build_factor(resnet18):
    """Tactic variance between builds; the factor is noise.build_factor (sd = noise)."""
    from placetune.backends.simulate.noise import build_factor

    r = realise(Placement.all_gpu(resnet18), ORIN, precision="int8")
    st = Settings(precision="int8", iterations=30, noise=0.02, seed=7)
    sim = SimulatedJetson(timeline=False)
    first, second = sim.measure(r, ORIN, st), sim.measure(r, ORIN, st)
    assert (first.extra["build"], second.extra["build"]) == (0, 1)
    assert first.latency_ms["median"] != second.latency_ms["median"]
    quiet = SimulatedJetson(timeline=False).measure(r, ORIN, Settings(precision="int8", iterations=1))
    ratio = (second.latency_ms["mean"] / first.latency_ms["mean"])
    expected = build_factor(0.02, 7, r.realized.key, "engine", 1) / build_factor(0.02, 7, r.realized.key, "engine", 0)
    assert ratio == pytest.approx(expected, rel=0.02)
    factors = [build_factor(0.02, 7, r.realized.key, "engine", b) for b in range(400)]
    assert 0.01 < np.std(np.log(factors)) < 0.03  # ~1-3 % between builds
    assert quiet.latency_ms["median"] * 0.9 < first.latency_ms["median"] < quiet.latency_ms["median"] * 1.1


def test_noise_tail_separates_p99_from_the_median(resnet18):
    r = realise(Placement.all_gpu(resnet18), ORIN, precision="int8")
    m = SimulatedJetson(timeline=False).measure(r, ORIN, Settings(precision="int8", iterations=1000, noise=0.02))
    lat = m.latency_ms
    assert lat["p99"] / lat["median"] > 1.02 > lat["p90"] / lat["median"] > 1.0


def test_all_dla_uses_less_accelerator_energy_than_all_gpu(resnet18_bs8):
    """The DLA is the more efficient accelerator (DLA-SW: 3-5x images per joule of accelerator
    power); with the module's idle power added a slower DLA run may cost more in total."""
    gpu = measure(Placement.all_gpu(resnet18_bs8))
    dla = measure(Placement.all_dla(resnet18_bs8))
    active = lambda m: m.energy_mj - ORIN.idle_w * m.latency_ms["median"]  # noqa: E731
    assert active(dla) < active(gpu)
    assert dla.power_w < gpu.power_w


def test_the_dla_is_3_to_5x_as_energy_efficient_as_the_gpu_on_resnet50_int8():
    """The published ratio of images per joule of accelerator power (DLA-SW: "3x-5x more power
    efficient than the GPU"), on ResNet-50 INT8 batch 8, engine mode, each accelerator alone."""
    model = Model.load("resnet50", batch=8)
    per_image = {}
    for name, p in (("GPU", Placement.all_gpu(model)), ("DLA", Placement.all_dla(model))):
        m = measure(p)
        active = m.energy_mj - ORIN.idle_w * m.latency_ms["median"]  # the accelerators' energy, mJ
        per_image[name] = active / model.batch
    assert 3.0 <= per_image["GPU"] / per_image["DLA"] <= 5.0, per_image


def test_replicas_beat_the_best_single_device(resnet18_bs8):
    p = Placement.all_dla(resnet18_bs8)
    best = max(measure(Placement.all_gpu(resnet18_bs8)).throughput_fps, measure(p).throughput_fps)
    rep = measure(p, mode="replicas")
    assert rep.ok and [x["device"] for x in rep.extra["replicas"]] == ["GPU", "DLA0", "DLA1"]
    assert rep.throughput_fps == pytest.approx(sum(x["throughput_fps"] for x in rep.extra["replicas"]))
    assert rep.throughput_fps > best
    assert rep.latency_ms["median"] == pytest.approx(max(x["latency_ms"] for x in rep.extra["replicas"]))
    custom = measure(p, mode="replicas", replicas={"GPU": 16, "DLA0": 4})
    assert [(x["device"], x["batch"]) for x in custom.extra["replicas"]] == [("GPU", 16), ("DLA0", 4)]


def test_contention_slows_concurrent_devices(resnet18_bs8):
    rep = measure(Placement.all_dla(resnet18_bs8), mode="replicas")
    for x in rep.extra["replicas"]:
        assert x["latency_ms"] > 1.02 * x["alone_ms"], x
    gpu_alone = measure(Placement.all_gpu(resnet18_bs8), mode="replicas", replicas={"GPU": 8})
    assert gpu_alone.extra["replicas"][0]["latency_ms"] == pytest.approx(gpu_alone.extra["replicas"][0]["alone_ms"])


def test_batch_above_dla_limit_is_infeasible():
    big = Model.load("model-bn", batch=5000)
    dla = Placement.all_dla(big)
    m = SIM.measure(Realisation(dla, dla, {}, 0, {"DLA0": 1}), ORIN, Settings(precision="int8"))
    assert m.status == "infeasible" and "4096" in m.reason and m.simulated
    assert measure(Placement.all_gpu(big)).ok
    reps = measure(Placement.all_gpu(Model.load("model-bn", batch=8)), mode="replicas",
                   replicas={"GPU": 8, "DLA0": 5000})
    assert reps.ok  # no DLA layer in the placement: the "DLA" replica runs on the GPU
    assert reps.extra["notes"]
    small = Model.load("model-bn", batch=8)
    reps = measure(Placement.all_dla(small), mode="replicas", replicas={"GPU": 8, "DLA0": 5000})
    assert reps.status == "infeasible" and "DLA0" in reps.reason


def test_replicas_need_the_devices():
    nano = get_platform("orin-nano")
    m = Model.load("model-bn", batch=4)
    s = Settings(mode="replicas", replicas={"GPU": 4, "DLA0": 4}, iterations=2)
    r = realise(Placement.all_gpu(m), nano, mode="replicas")
    out = SIM.measure(r, nano, s)
    assert out.status == "infeasible" and "DLA0" in out.reason
    assert SIM.measure(r, nano, Settings(mode="replicas", iterations=2)).ok


def test_power_mode_and_precision(resnet18):
    p = Placement.all_gpu(resnet18)
    maxn, w15 = measure(p), measure(p, power_mode="15W")
    assert w15.latency_ms["median"] > 1.8 * maxn.latency_ms["median"]
    bad = measure(p, power_mode="99W")
    assert bad.status == "infeasible" and "MAXN" in bad.reason
    fp16, fp32 = measure(p, precision="fp16"), measure(p, precision="fp32")
    assert fp32.latency_ms["median"] > fp16.latency_ms["median"] > maxn.latency_ms["median"]
    # a DLA layer at fp32 cannot exist: infeasible, not a crash
    dla = Placement.all_dla(resnet18)
    out = SIM.measure(Realisation(dla, dla, {}, 0, {"DLA0": 1}), ORIN, Settings(precision="fp32"))
    assert out.status == "infeasible"


def test_frames_in_flight_raise_pipeline_throughput(seed_block):
    p = Placement(seed_block, SPLIT)
    one = measure(p, mode="pipeline", frames_in_flight=1)
    three = measure(p, mode="pipeline", frames_in_flight=3)
    assert three.throughput_fps > 1.1 * one.throughput_fps
    assert three.latency_ms["median"] == pytest.approx(one.latency_ms["median"])
    assert three.extra["latency_in_flight_ms"] > one.latency_ms["median"]


def test_transformer_and_other_ops_are_simulated():
    vit = Model.load("vit-tiny", batch=1)
    gpu = measure(Placement.all_gpu(vit), precision="fp16")
    dla = measure(Placement.all_dla(vit), precision="fp16")
    assert gpu.ok and dla.ok and dla.fallback
    assert 0.1 < gpu.latency_ms["median"] < 20
    mobile = Model.load("mobilenetv2", batch=1)
    assert 0.05 < measure(Placement.all_gpu(mobile)).latency_ms["median"] < 5


def test_evaluations_are_deterministic_and_cached(resnet18):
    p = Placement(resnet18, {n: ("DLA0" if i % 3 else "GPU") for i, n in enumerate(resnet18.names)})
    a, b = measure(p), measure(p)
    assert a.latency_samples_ms == b.latency_samples_ms
    assert a.to_dict()["layer_times_ms"] == b.to_dict()["layer_times_ms"]


def test_scheduler_contention_is_piecewise_exact():
    from placetune.backends.simulate.schedule import Task, run

    s = run([Task("GPU", 1.0, 0.5), Task("DLA0", 1.0, 0.5)], {"GPU": 1.0, "DLA0": 0.2})
    # both busy: GPU at 1/1.5, DLA at 1/1.1; the DLA ends at 1.1, then the GPU runs alone
    assert s.tasks[1].end == pytest.approx(1.1)
    assert s.tasks[0].end == pytest.approx(1.1 + (1.0 - 1.1 / 1.5))
    assert s.busy_ms("GPU") == pytest.approx(s.tasks[0].end)
    fifo = run([Task("DLA0", 1.0, key=(1,)), Task("DLA0", 1.0, key=(0,))], {})
    assert (fifo.tasks[1].start, fifo.tasks[0].start) == (0.0, 1.0)


def test_gpu_work_of_another_process_waits_for_the_time_slice():
    """Separate processes: a GPU task ready while another context's GPU task runs waits half a slice
    (or until that task ends), and its DLA idles; one context (streams of one process) never waits."""
    from placetune.backends.simulate.schedule import GPU_TIMESLICE_US, Task, run, run_closed_loops

    half = GPU_TIMESLICE_US / 2000.0
    assert half == pytest.approx(0.512)
    big, small = Task("GPU", 10.0, context=0), Task("GPU", 0.1, stream=1, context=1)
    s = run([big, small], {}, slice_wait_ms=half)
    assert small.start == pytest.approx(half)  # waited for the slice, then shares the GPU
    assert small.end == pytest.approx(half + 0.2)
    same = run([Task("GPU", 10.0), Task("GPU", 0.1, stream=1)], {}, slice_wait_ms=half)
    assert same.tasks[1].start == 0.0  # one context: no wait
    short = run([Task("GPU", 0.2, context=0), Task("GPU", 0.1, stream=1, context=1)], {}, slice_wait_ms=half)
    assert short.tasks[1].start == pytest.approx(0.2)  # the other context's work ended first
    # a DLA engine with one fallback segment beside a saturating GPU engine, in closed loops
    dla = [("DLA0", 1.0, 0.0), ("GPU", 0.05, 0.0), ("DLA0", 0.5, 0.0)]
    gpu = [("GPU", 20.0, 0.0)]
    alone = run_closed_loops([dla], {}, iterations=4)[0][0]
    one = run_closed_loops([gpu, dla], {}, iterations=4)[0][1]
    sep = run_closed_loops([gpu, dla], {}, iterations=4, separate_processes=True)[0][1]
    assert alone == pytest.approx(1.55)
    assert one == pytest.approx(1.6)  # processor sharing: the 0.05 ms kernel at half the GPU
    assert sep == pytest.approx(1.6 + half)  # + the wait for the GPU process's slice


def test_separate_process_replicas_lose_more_dla_throughput(resnet18_bs8):
    """A DLA replica with a fallback segment beside a GPU replica: separate processes wait for time
    slices, one process does not; the flag is part of the fingerprint."""
    p = Placement.all_dla(resnet18_bs8)
    s = Settings(precision="int8", iterations=5, mode="replicas", replicas={"GPU": 8, "DLA0": 8})
    r = realise(p, ORIN, mode="replicas", precision="int8")
    assert any(d == "GPU" for d in r.realized.as_dict().values())  # the pooling head falls back
    one = SimulatedJetson().measure(r, ORIN, s).extra["replicas"][1]
    sep = SimulatedJetson(separate_processes=True).measure(r, ORIN, s).extra["replicas"][1]
    assert sep["device"] == "DLA0" and sep["latency_ms"] > one["latency_ms"] + 0.4
    assert "processes" not in SimulatedJetson().fingerprint(ORIN, s)
    assert SimulatedJetson(separate_processes=True).fingerprint(ORIN, s)["processes"] == "separate"
    with pytest.raises(Exception, match="separate_processes"):
        SimulatedJetson(separate_processes="yes")


def test_simulated_build_time_charges_engines_and_reuses_cached_segments():
    from placetune.backends.simulate import build_time as bt

    ev = Evaluator("resnet50", "orin-agx", mode="pipeline", precision="int8", batch=2, frames_in_flight=4)
    gpu = ev.evaluate(Placement.all_gpu(ev.model))
    n = len(ev.model.layers)
    assert gpu.build_seconds == pytest.approx(bt.GPU_ENGINE_S + bt.GPU_LAYER_S * n)
    assert gpu.extra["device_time_s"]["total_s"] > gpu.build_seconds  # timing runs cost time too
    space = ev.space("stages")
    a = space.from_placement(Placement.all_gpu(ev.model))
    half = len(a) // 2
    first = ev.evaluate(space.to_placement([0] * half + [1] * (len(a) - half)))  # GPU | DLA0
    second = ev.evaluate(space.to_placement([0] * half + [2] * (len(a) - half)))  # GPU | DLA1
    # the GPU stage is the same engine as in `first`: loaded from the cache, not rebuilt
    assert second.extra["device_time_s"]["cached_engines"] >= 1
    assert first.extra["device_time_s"]["cached_engines"] == 0
    assert second.build_seconds < first.build_seconds


def test_progress_lines_show_simulated_device_time_and_its_estimate():
    import io

    from placetune.tuning.progress import Progress

    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8")
    out = io.StringIO()
    p = Progress(out, tty=False, total=4, done=0, objective=ev.objective, baseline=None)
    ev.add_callback(p.update)
    ev.evaluate(Placement.all_gpu(ev.model))
    line = out.getvalue().strip()
    spent = float(line.split("device_s=")[1].split()[0])
    eta = float(line.split("device_eta_s=")[1].split()[0])
    assert spent > 0 and eta == pytest.approx(3 * spent, rel=0.01)


def test_a_dla_engines_reformats_are_gpu_work_that_waits_for_a_time_slice(resnet18):
    """TensorRT runs a DLA engine's reformat layers as GPU kernels (trtexec's builder: "Reformatting
    runs on GPU"): in a replica, the model input's reformat into the DLA format is a GPU part before
    the first DLA segment, a GPU->DLA boundary's joins the GPU part before its DLA segment and the
    model output's is a GPU part after the last one. Alone the engine takes as long as before; beside
    a busy GPU in another process each of those GPU parts waits for a time slice."""
    from placetune.backends.simulate.schedule import GPU_TIMESLICE_US

    half = GPU_TIMESLICE_US / 2000.0
    dla = realise(Placement.all_dla(resnet18), ORIN, mode="replicas", precision="int8")
    assert [s.device for s in dla.realized.segments(pipeline=False)] == ["DLA0", "GPU", "DLA0"]  # the pool falls back
    s = Settings(precision="int8", iterations=5, mode="replicas", replicas={"DLA0": 1})
    m = SimulatedJetson().measure(dla, ORIN, s)
    parts = m.segment_times_ms
    assert [p["device"] for p in parts] == ["GPU", "DLA0", "GPU", "DLA0", "GPU"]
    assert [p["layers"] for p in parts] == [0, 66, 1, 2, 0]  # the first and last: reformats only
    table = cost_table(resnet18, ORIN, "int8", 1)
    assert parts[0]["time_ms"] == pytest.approx(table.in_ms[0] + table.engine_ms)
    assert parts[-1]["time_ms"] == pytest.approx(table.out_ms[0])
    engine = measure(Placement.all_dla(resnet18)).latency_ms["median"]
    assert m.extra["replicas"][0]["alone_ms"] == pytest.approx(engine)  # moved, not added
    gpu = realise(Placement.all_gpu(resnet18), ORIN, precision="int8")
    r = realise(Placement.all_dla(resnet18), ORIN, precision="int8")
    sep = simulate_concurrent([(gpu, "GPU"), (r, "DLA0")], ORIN, separate_processes=True)[1]
    one = simulate_concurrent([(gpu, "GPU"), (r, "DLA0")], ORIN)[1]
    # three GPU parts, three slice waits (one, the fallback pool, while the reformats ran on the DLA)
    assert sep["latency_ms"] > sep["alone_ms"] + 2.8 * half
    assert one["latency_ms"] < one["alone_ms"] + half


def test_the_timeline_of_frames_in_flight_never_runs_two_engines_at_once_on_one_dla_core():
    """With frames in flight the timeline (report's timeline.png, trace.json) was frame 0's schedule repeated
    one period later per frame: on 16 of 20 random YOLOv8n stage placements it drew one DLA core running two
    engines at once (seg9 of frame 0 over seg0 of frame 2), which a DLA core never does. It is now the event
    schedule of those frames, where each core runs one engine at a time."""
    ev = Evaluator("yolov8n", "orin-agx", mode="pipeline", objective="throughput", frames_in_flight=4)
    space = ev.space(granularity="stages")
    rng = np.random.default_rng(0)
    drawn = 0
    for _ in range(20):
        m = ev.evaluate(space.to_placement(space.sample(rng)))
        if not m.ok:
            continue
        assert {e["frame"] for e in m.timeline} == {0, 1, 2, 3}
        for core in ("DLA0", "DLA1"):
            spans = sorted((e["start_ms"], e["end_ms"]) for e in m.timeline if e["device"] == core)
            assert all(b[0] >= a[1] - 1e-9 for a, b in zip(spans, spans[1:])), (core, spans)
            drawn += len(spans)
    assert drawn > 0
