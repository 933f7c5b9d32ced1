"""The clocks read around every measurement of a real backend (placetune/backends/clocks.py), against a
fake sysfs tree only: the node names and units are those jetson_stats (jtop) reads, the values those
``jetson_clocks --show`` prints on a locked AGX Orin (tests/data/jetson_clocks). Never run on a board."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from placetune import BackendError, Evaluator, Placement
from placetune.backends import clocks
from placetune.backends.base import BackendBase
from placetune.backends.registry import get_backend
from placetune.backends.clocks import ClockWatch, clocks_moved, snapshot
from placetune.measurement import Measurement

from tests.test_trtexec import GN, _backend  # the fake trtexec and its model

GPU_HZ = 1300500000  # AGX Orin MAXN, locked (jetson_clocks --show: GPU MinFreq=MaxFreq=1300500000)
CPU_KHZ = 2201600


def _write(path: Path, value: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def _gpu(root: Path, cur: int = GPU_HZ, lo: int = GPU_HZ, hi: int = GPU_HZ, node: str = "17000000.gpu") -> None:
    for name, v in (("cur_freq", cur), ("min_freq", lo), ("max_freq", hi)):
        _write(root / "class/devfreq" / node / name, v)


def _cpu(root: Path, cur: int = CPU_KHZ, lo: int = CPU_KHZ, hi: int = CPU_KHZ) -> None:
    for policy in ("policy0", "policy4", "policy8"):  # AGX Orin: three clusters of four cores
        d = root / "devices/system/cpu/cpufreq" / policy
        for name, v in (("scaling_cur_freq", cur), ("scaling_min_freq", lo), ("scaling_max_freq", hi)):
            _write(d / name, v)


def _orin(root: Path) -> Path:
    """A locked AGX Orin (jetson_clocks on, MAXN), plus a devfreq node that is not the GPU."""
    _gpu(root)
    _cpu(root)
    (root / "class/devfreq/15340000.vic").mkdir(parents=True)
    return root


def _sampled_orin(tmp_path, monkeypatch):
    """A fake Orin's sysfs with no nvpmodel status file, and clock samplers whose timer never fires
    (they read at start, at stop and where a test reads them): the tree's root and the samplers started."""
    root = _orin(tmp_path / "sys")
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(tmp_path / "no-status"))
    monkeypatch.setattr(clocks, "SAMPLE_INTERVAL_S", 3600.0)
    samplers: list[clocks.ClockSampler] = []
    start = clocks.ClockSampler.start

    def started(self):
        samplers.append(self)
        return start(self)

    monkeypatch.setattr(clocks.ClockSampler, "start", started)
    return root, samplers


def test_snapshot_reads_the_gpu_cpu_and_readable_debugfs_clocks(tmp_path):
    root = _orin(tmp_path / "sys")
    snap = snapshot(root)
    assert snap["gpu:17000000.gpu"] == {"cur": GPU_HZ, "min": GPU_HZ, "max": GPU_HZ}
    assert set(snap) == {"gpu:17000000.gpu", "cpu:policy0", "cpu:policy4", "cpu:policy8"}  # vic: not the GPU
    # EMC and DLA only where debugfs is readable (root): jtop's paths
    _write(root / "kernel/debug/bpmp/debug/clk/emc/rate", 3199000000)
    _write(root / "kernel/debug/bpmp/debug/clk/emc/max_rate", 3199000000)
    _write(root / "kernel/debug/clk/dla0_core/clk_rate", 1600000000)
    _write(root / "kernel/debug/clk/dla0_core/clk_max_rate", 1600000000)
    (root / "kernel/debug/clk/pva0_vps").mkdir()
    snap = snapshot(root)
    assert snap["emc"] == {"cur": 3199000000, "max": 3199000000}
    assert snap["dla:dla0_core"] == {"cur": 1600000000, "max": 1600000000} and "dla:pva0_vps" not in snap


def test_off_a_jetson_there_is_nothing_to_watch(tmp_path):
    _cpu(tmp_path / "pc")  # a PC's cpufreq, no Jetson GPU devfreq node
    assert snapshot(tmp_path / "pc") is None and snapshot(tmp_path / "nothing") is None
    watch = ClockWatch(tmp_path / "pc", stop_after=1)
    m = Measurement(status="ok", latency_samples_ms=[1.0, 2.0])
    for _ in range(3):  # never untrusted, never stopped
        assert watch.judge(m, watch.read(), watch.read()) is m and "clocks" not in m.extra and m.ok


@pytest.mark.parametrize("change, words", [
    (lambda r: (_gpu(r, cur=918000000, lo=918000000, hi=918000000), _cpu(r, hi=1497600, lo=1497600,
                                                                          cur=1497600)),
     "max frequency 1300500000 -> 918000000"),  # nvpmodel -m to a lower mode
    (lambda r: _gpu(r, cur=306000000, lo=306000000), "min frequency 1300500000 -> 306000000"),  # jetson_clocks --restore
    (lambda r: _gpu(r, cur=1032750000), "ran at 1032750000, below its locked 1300500000"),  # throttling (made-up value)
    (lambda r: _cpu(r, cur=2201600, lo=1497600), "cpu:policy0 min frequency 2201600 -> 1497600"),
])
def test_what_counts_as_other_clocks(tmp_path, change, words):
    root = _orin(tmp_path / "sys")
    first = snapshot(root)
    assert clocks_moved(first, first, snapshot(root)) is None
    change(root)
    assert words in clocks_moved(first, snapshot(root), snapshot(root)) and "before" in clocks_moved(
        first, snapshot(root), snapshot(root))
    assert "during the measurement" in clocks_moved(first, first, snapshot(root))


def test_a_locked_cpu_read_far_below_its_lock_is_recorded_not_judged(tmp_path):
    """Orin's cpufreq driver may give back a frequency regenerated from its counters, hundreds of MHz
    off the one set (NVIDIA's tegra194-cpufreq patch of October 2023; a JetPack 6 Orin NX's dmesg
    shows gaps of 142-769 MHz), and jtop's service copies it into ``scaling_cur_freq``. Before, such a
    reading marked the measurement untrusted and three in a row stopped a night on a healthy board;
    the CPU's limits are still judged."""
    root = _orin(tmp_path / "sys")
    first = snapshot(root)
    _cpu(root, cur=1728000)  # 474 MHz under the locked 2201600 kHz
    assert snapshot(root)["cpu:policy0"]["cur"] == 1728000  # recorded
    assert clocks_moved(first, first, snapshot(root)) is None
    _cpu(root, cur=1728000, lo=1728000, hi=1728000)  # nvpmodel capped the CPU: its limits moved
    assert "cpu:policy0 max frequency 2201600 -> 1728000" in clocks_moved(first, first, snapshot(root))


def test_a_locked_cpu_read_back_one_step_low_is_not_throttling(tmp_path):
    root = _orin(tmp_path / "sys")
    first = snapshot(root)
    _cpu(root, cur=2188800)  # a read-back 0.6 % under the locked 2201600 kHz (hypothetical)
    assert clocks_moved(first, first, snapshot(root)) is None


def test_unlocked_clocks_are_recorded_not_judged_and_an_unreadable_gpu_is_untrusted(tmp_path):
    root = tmp_path / "sys"
    _gpu(root, cur=624750000, lo=306000000)  # DVFS on (the first-build check stops such a run)
    first = snapshot(root)
    _gpu(root, cur=306000000, lo=306000000)
    assert clocks_moved(first, first, snapshot(root)) is None
    assert "could not be read during" in clocks_moved(first, first, None)


def test_the_run_stops_after_several_untrusted_measurements_in_a_row(tmp_path):
    root = _orin(tmp_path / "sys")
    watch = ClockWatch(root, stop_after=3)
    ok = lambda: Measurement(status="ok", latency_samples_ms=[2.0, 2.0])  # noqa: E731
    assert watch.judge(ok(), watch.read(), watch.read()).ok
    _gpu(root, cur=1032750000)
    assert not watch.judge(ok(), watch.read(), watch.read()).ok
    _gpu(root)  # cooled down: the count starts again
    assert watch.judge(ok(), watch.read(), watch.read()).ok
    _gpu(root, cur=1032750000)
    for _ in range(2):
        assert watch.judge(ok(), watch.read(), watch.read()).extra["failure_class"] == "clocks"
    with pytest.raises(BackendError, match=r"^clocks check failed: 3 measurements in a row .*below its locked") as e:
        watch.judge(ok(), watch.read(), watch.read())
    assert e.value.exit_code == 8 and "\n" not in str(e.value)


def test_a_throttled_measurement_of_the_trtexec_backend_is_not_kept_as_a_figure(tmp_path, monkeypatch, caplog):
    """Before the clocks were read per measurement, the throttled measurement below was stored ``ok``
    with its slower median, mixed into the study with the first one's."""
    root = _orin(tmp_path / "sys")
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    be = _backend(tmp_path, "8.6.1")
    ev = Evaluator(GN, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6",
                   store=str(tmp_path / "s.db"))
    first = ev.evaluate(Placement.all_gpu(ev.model))
    assert first.ok
    _gpu(root, cur=1032750000)  # the board throttles
    with caplog.at_level(logging.WARNING):
        m = ev.evaluate(Placement.all_dla(ev.model, 0))
        m2 = ev.evaluate(Placement.all_dla(ev.model, 1))
    assert m.status == "runtime_failed" and m.extra["failure_class"] == "clocks" and m.median_ms is None
    assert first.extra["clocks"]["before"]["gpu:17000000.gpu"]["cur"] == GPU_HZ
    assert "below its locked 1300500000" in m.reason and m.extra["clocks_untrusted"] in m.reason
    assert m.extra["clocks"]["after"]["gpu:17000000.gpu"]["cur"] == 1032750000 and not m2.ok
    assert sum("CLOCKS CHANGED" in r.getMessage() for r in caplog.records) == 1  # said loudly, once
    best = ev.best()
    assert best is not None and best[1].extra.get("clocks_untrusted") is None  # only the first one ranks
    stored = [r.measurement for r in ev.store.measurements(ev.study_name)]
    assert [x.status for x in stored] == ["ok", "runtime_failed", "runtime_failed"]
    assert stored[1].extra["clocks_untrusted"] and stored[0].extra["clocks"]["after"] == first.extra["clocks"]["after"]
    be.clock_watch.stop_after = 3
    with pytest.raises(BackendError, match="clocks check failed: 3 measurements in a row"):
        ev.evaluate(Placement(ev.model, {n: ("DLA0" if i % 2 else "GPU") for i, n in enumerate(ev.model.names)}))
    ev.close()


def test_an_engine_file_timed_while_the_board_throttles_is_not_kept_as_a_figure(tmp_path, monkeypatch):
    """``TrtexecBackend.time_plan`` (the selftest's ``trtexec --loadEngine`` of the worker's engine) reads
    the clocks as its measurements do, against the same run's reference. Before, a throttled
    time_plan came back ``ok`` with its slower median, compared with the worker's as a normal figure."""
    from placetune.settings import Settings

    root = _orin(tmp_path / "sys")
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    be = _backend(tmp_path, "8.6.1", keep_files=True)
    ev = Evaluator(GN, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6")
    assert ev.evaluate(Placement.all_gpu(ev.model)).ok  # the run's reference: locked, cool
    [plan] = (tmp_path / "cache/runs").rglob("*.engine")  # the engine it built (the fake's stand-in)
    cool = be.time_plan(plan, Settings(precision="fp16"))
    assert cool.ok and cool.extra["clocks"]["before"]["gpu:17000000.gpu"]["cur"] == GPU_HZ
    _gpu(root, cur=1032750000)  # the board throttles
    t = be.time_plan(plan, Settings(precision="fp16"))
    assert t.status == "runtime_failed" and t.extra["failure_class"] == "clocks" and t.median_ms is None
    assert t.reason.startswith("clocks untrusted: gpu:17000000.gpu ran at 1032750000, below its locked 1300500000")
    assert "\n" not in t.reason and t.extra["commands"]["time"]  # what ran is still said
    assert be.clock_watch.first["gpu:17000000.gpu"]["cur"] == GPU_HZ  # one watch: the measure's reference
    be.clock_watch.stop_after = 2
    with pytest.raises(BackendError, match="clocks check failed: 2 measurements in a row"):
        be.time_plan(plan, Settings(precision="fp16"))
    ev.close()


def test_off_a_jetson_the_trtexec_backend_records_no_clocks(tmp_path, monkeypatch):
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))
    be = _backend(tmp_path, "8.6.1")
    ev = Evaluator(GN, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6")
    m = ev.evaluate(Placement.all_gpu(ev.model))
    assert m.ok and "clocks" not in m.extra and "clocks_untrusted" not in m.extra


def test_a_night_whose_board_throttles_stops_with_one_line(tmp_path, monkeypatch, capsys, caplog):
    """``placetune tune --backend tensorrt`` (the TensorRT doubles): the board throttles after the first
    build; the run says so once, then stops with exit status 8 and one line instead of measuring on."""
    from tests.fakes.board import on_a_board, tune_on_the_board

    root = _orin(tmp_path / "sys")
    on_a_board(monkeypatch, tmp_path, root)
    judge = ClockWatch.judge

    def throttle_after_the_first(self, m, before, after):
        out = judge(self, m, before, after)
        _gpu(root, cur=1032750000)
        return out

    monkeypatch.setattr(ClockWatch, "judge", throttle_after_the_first)
    rc = tune_on_the_board(tmp_path)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("placetune: error:")]
    assert rc == 8 and len(lines) == 1, err
    assert lines[0].startswith("placetune: error: clocks check failed: 3 measurements in a row"), lines[0]
    assert sum("CLOCKS CHANGED" in r.getMessage() for r in caplog.records) == 1  # the terminal's log handler


# --------------------------------------------------------------------------- a placement measured while throttled
class _Scripted(BackendBase):
    """The simulated Jetson, except that the next measurements of a placement answer ``script``'s
    outcomes first: ``"throttled"`` (marked by :func:`clocks.untrusted`, as the real backends do) or
    ``"failed"`` (an ordinary runtime failure)."""

    def __init__(self, script: dict[str, list[str]]):
        self.sim = get_backend("simulate")
        self.name, self.capabilities, self.fingerprint = self.sim.name, self.sim.capabilities, self.sim.fingerprint
        self.script, self.calls = script, 0

    def measure(self, r, platform, settings):
        self.calls += 1
        m = self.sim.measure(r, platform, settings)
        what = (self.script.get(r.realized.key) or ["ok"]).pop(0)
        if what == "throttled":
            return clocks.untrusted(m, "gpu:17000000.gpu ran at 1032750000, below its locked 1300500000")
        if what == "failed":
            return Measurement.failure("runtime_failed", "engine crashed", realized=m.realized, simulated=True)
        return m


def _scripted_ev(db, script, batch=1):
    ev = Evaluator("seed-block", "orin-agx", _Scripted(script), store=db, study="night")
    ev.write_in_batches(batch)
    return ev


def _rows(ev, key):
    """The stored measurements of a realised placement, and the study's requests for it."""
    ms = [r for r in ev.store.measurements(ev.study_name) if r.placement_key == key]
    return ms, [r for r in ev.store.requests(ev.study_name) if r.placement_key == key]


@pytest.mark.parametrize("batch", [1, 4])  # written at once, or in batches (its untrusted row may still wait)
def test_a_placement_measured_under_other_clocks_is_measured_again_when_asked_again(tmp_path, batch):
    """Before, the stored clocks-untrusted failure answered every later request from the cache:
    a placement measured only while the board throttled was lost to the study."""
    from optuna.trial import TrialState

    from placetune.tuning.optuna_study import OptunaStudy

    ev = _scripted_ev(str(tmp_path / "s.db"), {}, batch)
    trials = OptunaStudy(ev, "fusion").attach()
    p = Placement.all_dla(ev.model, 0)
    key = ev.realised_key(p)
    ev.backend.script[key] = ["throttled"]
    first = ev.evaluate(p)
    assert first.status == "runtime_failed" and first.extra["failure_class"] == "clocks"
    again = ev.evaluate(p)
    assert again.ok and not again.extra["cache_hit"] and ev.backend.calls == 2
    assert ev.evaluate(p).extra["cache_hit"] and ev.backend.calls == 2  # a trusted figure is a cache answer
    ev.flush()
    ms, reqs = _rows(ev, key)
    assert len(ms) == 1 and ms[0].measurement.ok and "clocks_untrusted" not in ms[0].measurement.extra
    assert ms[0].id == again.extra["_id"] and ev.store.lookup(*ev.study.scope, key).ok
    assert [(r.measurement_id, r.cache_hit) for r in reqs] == [(ms[0].id, False), (ms[0].id, False),
                                                               (ms[0].id, True)]
    assert ev.stats.measured == 2 and ev.stats.cache_hits == 1
    assert [t.state for t in trials.study.trials] == [TrialState.PRUNED] + [TrialState.COMPLETE] * 2
    ev.close()


def test_a_resumed_study_measures_again_what_was_stored_under_other_clocks(tmp_path):
    db = str(tmp_path / "s.db")
    ev = _scripted_ev(db, {})
    p = Placement.all_dla(ev.model, 1)
    key = ev.realised_key(p)
    ev.backend.script[key] = ["throttled"]
    assert ev.evaluate(p).extra["failure_class"] == "clocks"
    ev.close()
    resumed = _scripted_ev(db, {})  # a later run of the study: the board is cool again
    m = resumed.evaluate(p)
    assert m.ok and not m.extra["cache_hit"] and resumed.backend.calls == 1
    ms, reqs = _rows(resumed, key)
    assert len(ms) == 1 and ms[0].measurement.ok and [r.cache_hit for r in reqs] == [False, False]
    trials = resumed.store.requests(resumed.study_name)
    assert len(trials) == 2  # the first attempt's request stays, the new one is logged after it
    resumed.close()


def test_an_ordinary_failure_is_still_a_cache_answer(tmp_path):
    ev = _scripted_ev(str(tmp_path / "s.db"), {})
    p = Placement.all_dla(ev.model, 0)
    ev.backend.script[ev.realised_key(p)] = ["failed"]
    assert ev.evaluate(p).status == "runtime_failed"
    m = ev.evaluate(p)
    assert m.status == "runtime_failed" and m.extra["cache_hit"] and ev.backend.calls == 1
    resumed = _scripted_ev(str(tmp_path / "s.db"), {})
    assert resumed.evaluate(p).extra["cache_hit"] and resumed.backend.calls == 0
    ev.close()
    resumed.close()


def test_the_selftest_says_in_one_line_that_trtexecs_time_of_the_engine_is_not_trusted(tmp_path, monkeypatch):
    """The selftest times the worker's engine again with ``time_plan``: when trtexec's timing ran
    under throttled clocks (the worker's did not), the check fails with one line saying the figure is
    untrusted and why, and the energy check says why it has no figure (unavailable: the engine check is the
    failure); no ratio is computed from it."""
    from placetune.backends.trtexec.backend import TrtexecBackend
    from tests.test_selftest import _run

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))  # the worker: off a Jetson
    throttled = _orin(tmp_path / "sys")
    _gpu(throttled, cur=1032750000)
    watch = ClockWatch(throttled, stop_after=99)
    monkeypatch.setattr(TrtexecBackend, "clock_watch", property(lambda self: watch))
    _, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    by = {c["name"]: c for c in doc["checks"]}
    gpu = by["engine all-GPU fp16 (vs trtexec)"]
    assert gpu["status"] == "failed" and "latency_ratio" not in gpu and "\n" not in gpu["detail"], gpu
    assert gpu["detail"].startswith("trtexec --loadEngine of the worker's engine: runtime_failed: clocks untrusted: "
                                    "gpu:17000000.gpu ran at 1032750000, below its locked 1300500000"), gpu
    assert "are not kept" in gpu["detail"]
    power = by["power rails"]
    assert power["status"] == "unavailable" and "clocks untrusted: gpu:17000000.gpu ran at" in power["detail"], power


STATUS_DATA = Path(__file__).parent / "data" / "nvpmodel_status"


def test_the_power_mode_is_read_from_the_file_nvpmodel_writes():
    """Its real forms (tests/data/nvpmodel_status/provenance.json): with and without the fan mode."""
    import json

    prov = json.loads((STATUS_DATA / "provenance.json").read_text())["files"]
    for name, meta in prov.items():
        assert clocks.read_power_mode_id(STATUS_DATA / name) == (meta["mode_id"], "")
    assert clocks.parse_nvpmodel_status("fmode:quiet\n") is None
    mode, why = clocks.read_power_mode_id(STATUS_DATA / "absent")
    assert mode is None and "cannot be read" in why


def test_a_power_mode_change_that_moves_no_clock_limit_marks_the_measurement(tmp_path):
    """Two modes may share the GPU and CPU caps sysfs shows (differing in TPCs or EMC): before the mode
    was read per measurement, the second measurement below was kept as a figure of the first mode."""
    root, status = _orin(tmp_path / "sys"), tmp_path / "status"
    status.write_text("pmode:0000\n")
    watch = ClockWatch(root, stop_after=2, status=status)
    ok = lambda: Measurement(status="ok", latency_samples_ms=[2.0, 2.0])  # noqa: E731
    first = watch.judge(ok(), watch.read(), watch.read())
    assert first.ok and first.extra["clocks"]["before"]["nvpmodel"] == {"mode": 0}
    status.write_text("pmode:0002\n")  # sudo nvpmodel -m 2, every clock limit the same
    m = watch.judge(ok(), watch.read(), watch.read())
    assert m.extra["failure_class"] == "clocks" and "nvpmodel power mode 0 -> 2 before the measurement" in m.reason
    status.unlink()  # readable at the start, then not: not judged as the run's mode, so not trusted
    with pytest.raises(BackendError, match="power mode could not be read"):
        watch.judge(ok(), watch.read(), watch.read())


def test_an_unreadable_power_mode_is_said_once_and_not_guessed(tmp_path, caplog):
    root = _orin(tmp_path / "sys")
    watch = ClockWatch(root, status=tmp_path / "no-status")
    ok = lambda: Measurement(status="ok", latency_samples_ms=[2.0, 2.0])  # noqa: E731
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            assert watch.judge(ok(), watch.read(), watch.read()).ok
    said = [r.getMessage() for r in caplog.records if "POWER MODE NOT WATCHED" in r.getMessage()]
    assert len(said) == 1 and "no-status cannot be read" in said[0] and "\n" not in said[0]
    assert "nvpmodel" not in watch.first
    _gpu(root, cur=1032750000)  # the clocks are still judged
    assert not watch.judge(ok(), watch.read(), watch.read()).ok


# --------------------------------------------------------------------------- the timed part, not the build
def test_a_throttle_over_before_trtexec_times_the_engine_does_not_mark_it(tmp_path, monkeypatch):
    """The clocks judged are those around ``trtexec --loadEngine`` (the timing), not around the build:
    before, a board hot when the build began, cool again by the timing, lost a good measurement."""
    from placetune.backends.trtexec import engine

    root = _orin(tmp_path / "sys")
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(tmp_path / "no-status"))
    be = _backend(tmp_path, "8.6.1")
    ev = Evaluator(GN, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6")
    assert ev.evaluate(Placement.all_gpu(ev.model)).ok  # the run's reference: locked, cool
    build = engine.build

    def cools_during_the_build(*a, **kw):
        out = build(*a, **kw)
        _gpu(root)
        return out

    monkeypatch.setattr(engine, "build", cools_during_the_build)
    _gpu(root, cur=1032750000)  # hot when the measurement (its build) begins
    m = ev.evaluate(Placement.all_dla(ev.model, 0))
    assert m.ok, m.reason
    assert m.extra["clocks"]["span"] == "timing" and m.extra["clocks"]["before"]["gpu:17000000.gpu"]["cur"] == GPU_HZ

    def heats_during_the_build(*a, **kw):
        out = build(*a, **kw)
        _gpu(root, cur=1032750000)
        return out

    monkeypatch.setattr(engine, "build", heats_during_the_build)
    m = ev.evaluate(Placement.all_dla(ev.model, 1))  # hot while timed: marked, "before" the timing
    assert m.extra["failure_class"] == "clocks" and "below its locked 1300500000, before" in m.reason
    ev.close()


def test_the_sampler_picks_the_snapshots_around_the_timed_window():
    watch = ClockWatch()
    s = clocks.ClockSampler(watch)
    snaps = [{"gpu:x": {"cur": i}} for i in range(6)]
    s.samples = [(float(t), snap) for t, snap in zip((1, 2, 3, 4, 5, 6), snaps)]
    before, after, during = s.window(2.5, 4.5)
    assert before is snaps[1] and after is snaps[4] and during == snaps[2:4]
    assert s.window(0.5, 9.0)[:2] == (snaps[0], snaps[5])  # nothing read outside: the nearest


def test_the_tensorrt_backend_judges_the_clocks_around_the_workers_timed_loop(tmp_path, monkeypatch):
    """The worker builds and times in one job: the parent reads the clocks in a thread meanwhile and
    judges those around the loop's ``timed_window``. Before, the snapshots around the whole job
    were judged: a board hot while the engine was built, cool by its timing, lost the measurement,
    and one that throttled during the timing only, cool again by the job's end, kept it. (The
    thread's reads are made here, at known moments, rather than left to its timer.)"""
    import time

    from placetune.backends.tensorrt.pool import WorkerPool
    from tests.test_tensorrt_backend import _backend as trt_backend

    root, samplers = _sampled_orin(tmp_path, monkeypatch)
    be = trt_backend(tmp_path, "10.3.0")
    ev = Evaluator(GN, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="10.3")
    assert ev.evaluate(Placement.all_gpu(ev.model)).ok  # the run's reference
    run = WorkerPool.run

    def cool_then_time(self, job, **kw):  # the build's part: hot, then cool before the worker's loop
        _gpu(root)
        samplers[-1]._sample()
        return run(self, job, **kw)

    monkeypatch.setattr(WorkerPool, "run", cool_then_time)
    _gpu(root, cur=1032750000)  # hot when the job starts (the sampler's first read)
    m = ev.evaluate(Placement.all_dla(ev.model, 0))
    assert m.ok, m.reason
    assert m.extra["clocks"]["span"] == "timing" and m.extra["clocks"]["before"]["gpu:17000000.gpu"]["cur"] == GPU_HZ

    def throttled_while_timed(self, job, **kw):  # the loop's window: throttled, cool again by the end
        reply = run(self, job, **kw)
        t0 = time.monotonic()
        _gpu(root, cur=1032750000)
        samplers[-1]._sample()
        t1 = time.monotonic()
        _gpu(root)
        reply.result["timed_window"] = [t0, t1]
        return reply

    monkeypatch.setattr(WorkerPool, "run", throttled_while_timed)
    m = ev.evaluate(Placement.all_dla(ev.model, 1))
    assert m.extra.get("failure_class") == "clocks", m.reason
    assert "below its locked 1300500000, during the measurement" in m.reason and m.extra["clocks"]["samples_during"] == 1
    ev.close()


def _read_at(sampler: "clocks.ClockSampler", t: float) -> None:
    """A snapshot of the fake tree now, as if the sampler's thread had read it at monotonic time ``t``."""
    sampler.samples.append((t, sampler.watch.read()))


@pytest.mark.parametrize("mode", ["pipeline", "replicas"])
def test_pipeline_and_replicas_jobs_judge_the_clocks_around_their_timed_part(tmp_path, monkeypatch, mode):
    """A pipeline or replicas job builds its engines and times them in one worker job, as engine mode
    does: the worker reports its timed part's ``timed_window`` too, and the parent judges the
    clocks read inside it. A clock that moved while the engines were built, back by the timing, is
    not judged (before, the whole job was, and a night of DLA builds lost good measurements); one
    that moved while they were timed is; a job that reports no window is judged whole. (The
    sampler thread's reads are placed here at known moments of the job, rather than left to its timer.)"""
    from placetune.backends.tensorrt.pool import WorkerPool
    from tests.test_trt_pipeline import _backend as pipe_backend, _ev, _randomised

    root, samplers = _sampled_orin(tmp_path, monkeypatch)
    be = pipe_backend(tmp_path / "cache")
    kw = {"replicas": {"GPU": 1, "DLA0": 1}} if mode == "replicas" else {}
    ev = _ev(_randomised(tmp_path, "seed_block"), be, tmp_path, mode=mode, **kw)
    run = WorkerPool.run
    hot = 1032750000  # the GPU throttled below its locked 1300500000
    try:
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok  # the run's reference

        def throttled_while_built(self, job, **kw):  # between the job's start and its timed part: the builds
            reply = run(self, job, **kw)
            w0, _ = reply.result["timed_window"]
            t_start = samplers[-1].samples[0][0]
            assert t_start < w0
            _gpu(root, cur=hot)
            _read_at(samplers[-1], t_start + (w0 - t_start) / 3)
            _gpu(root)
            _read_at(samplers[-1], t_start + 2 * (w0 - t_start) / 3)
            return reply

        monkeypatch.setattr(WorkerPool, "run", throttled_while_built)
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
        assert m.ok, m.reason
        assert m.extra["clocks"]["span"] == "timing" and m.extra["clocks"]["before"]["gpu:17000000.gpu"]["cur"] == GPU_HZ

        def throttled_while_timed(self, job, **kw):
            reply = run(self, job, **kw)
            w0, w1 = reply.result["timed_window"]
            _gpu(root, cur=hot)
            _read_at(samplers[-1], (w0 + w1) / 2)
            _gpu(root)
            return reply

        monkeypatch.setattr(WorkerPool, "run", throttled_while_timed)
        m = ev.evaluate(Placement(ev.model, {"/conv4/Conv": "DLA0"}))
        assert m.extra.get("failure_class") == "clocks", m.reason
        assert "during the measurement" in m.reason and m.extra["clocks"]["span"] == "timing"
        assert m.extra["clocks"]["samples_during"] == 1

        def no_window_and_hot_at_the_end(self, job, **kw):
            reply = run(self, job, **kw)
            del reply.result["timed_window"]
            _gpu(root, cur=hot)
            return reply

        monkeypatch.setattr(WorkerPool, "run", no_window_and_hot_at_the_end)
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}))
        assert m.extra.get("failure_class") == "clocks", m.reason
        assert m.extra["clocks"]["span"] == "measurement"
    finally:
        ev.close()
        be.close()


# --------------------------------------------------------------------------- the board's TensorRT vs --platform
def test_a_tensorrt_the_platforms_jetpacks_never_had_is_refused_or_said(tmp_path, monkeypatch, caplog):
    """Before, ``Platform.ships_trt`` was never asked: TensorRT 10.3 on a board declared ``xavier-agx``
    (Xavier's last JetPack is 5.1, TensorRT 8.5) measured the night under Xavier's DLA rules."""
    from placetune import ConfigError

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))
    with pytest.raises(ConfigError) as e:
        Evaluator(GN, "xavier-agx", backend=_backend(tmp_path, "10.3.0"), iterations=5, precision="fp16",
                  trt_version="8.5")
    assert e.value.exit_code == 6 and "\n" not in str(e.value)
    assert str(e.value).startswith("platform xavier-agx: its JetPacks ship TensorRT 8.5 and none has TensorRT 10, but "
                                   "this board's TensorRT is 10.3.0: the board is another module; pass it as "
                                   "--platform (orin-agx, orin-nx-16gb")
    with caplog.at_level(logging.WARNING):  # another minor release of a major Orin's JetPacks ship: said once
        ev = Evaluator(GN, "orin-agx", backend=_backend(tmp_path / "b", "10.7.0"), iterations=5, precision="fp16",
                       trt_version="10.7")
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
        ev.close()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("TRT VERSION")]
    assert len(said) == 1 and "TensorRT 10.7.0 is not one a JetPack for orin-agx ships (8.5, 8.6, 10.3, 11.4)" in said[0]


def test_an_engine_inspector_that_raised_in_the_worker_is_recorded(tmp_path, monkeypatch):
    """The worker caught the inspector's exception into ``inspector_error`` and the parent dropped it: a
    measurement without layer information did not say why."""
    from placetune.backends.tensorrt.pool import WorkerPool
    from tests.test_tensorrt_backend import _backend as trt_backend

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))
    run = WorkerPool.run

    def inspector_raised(self, job, **kw):
        reply = run(self, job, **kw)
        if reply.result.pop("inspector", None) is not None:
            reply.result["inspector_error"] = "RuntimeError: get_engine_information failed"
        return reply

    monkeypatch.setattr(WorkerPool, "run", inspector_raised)
    ev = Evaluator(GN, "orin-agx", backend=trt_backend(tmp_path, "10.3.0"), iterations=5, precision="fp16",
                   trt_version="10.3")
    m = ev.evaluate(Placement.all_dla(ev.model, 0))
    assert m.ok and m.extra["inspector_error"] == "RuntimeError: get_engine_information failed"
    ev.close()


def test_a_board_that_does_not_run_the_mode_it_reports_is_said(tmp_path, monkeypatch, caplog):
    """nvpmodel reports the mode of its status file; a board whose nvpmodel service failed at boot runs
    other clocks. Before, a night in "30W" on an AGX Orin whose GPU was capped as in MAXN was
    recorded as 30W without a word. The GPU cap of each mode: NVIDIA's nvpmodel_p3701_0000.conf."""
    from placetune.backends.jetson import JetsonBackend, device_fingerprint
    from placetune.backends.tensorrt import env as trt_env
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    root = _orin(tmp_path / "sys")  # GPU max_freq 1300500000: MAXN's (uncapped)
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    monkeypatch.setattr(trt_env, "read_l4t", lambda: "R36.4.3")
    monkeypatch.setattr(trt_env, "read_clocks", lambda: True)

    class Real(JetsonBackend):
        name = "real"

    def said(reported, study):
        monkeypatch.setattr(trt_env, "read_power_mode", lambda: reported)
        caplog.clear()
        with caplog.at_level("WARNING"):
            device_fingerprint(Real(), "10.3.0", get_platform("orin-agx"), Settings(power_mode=study))
        return [r.getMessage() for r in caplog.records if "POWER MODE NOT APPLIED" in r.getMessage()]

    [line] = said("MODE_30W", "30W")
    assert "nvpmodel reports MODE_30W, whose GPU cap is 612000000 Hz" in line and "max_freq is 1300500000 Hz" in line
    assert said("MAXN", "MAXN") == []  # uncapped: nothing to compare
    _gpu(root, cur=612000000, lo=612000000, hi=612000000)
    assert said("MODE_30W", "30W") == []


def test_clocks_only_root_can_read_are_said_once_and_named_in_every_clock_record(tmp_path, caplog):
    """Run as a user, the memory (EMC) and DLA clock files (debugfs) cannot be read: a change of those
    clocks alone would go unseen, so the run says so once and each measurement's clock record names them."""
    root = _orin(tmp_path / "sys")  # no kernel/debug: a user's view of an Orin
    watch = ClockWatch(root, status=tmp_path / "no-status")
    ok = lambda: Measurement(status="ok", latency_samples_ms=[2.0, 2.0])  # noqa: E731
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            m = watch.judge(ok(), watch.read(), watch.read())
            assert m.ok and m.extra["clocks"]["not_watched"] == ["EMC", "DLA"]
    said = [r.getMessage() for r in caplog.records if "CLOCKS NOT WATCHED" in r.getMessage()]
    assert len(said) == 1 and "root" in said[0] and "EMC" in said[0] and "DLA" in said[0] and "\n" not in said[0]


def test_clocks_root_can_read_are_watched_and_not_said(tmp_path, caplog):
    root = _orin(tmp_path / "sys")
    _write(root / "kernel/debug/bpmp/debug/clk/emc/rate", 3199000000)
    _write(root / "kernel/debug/bpmp/debug/clk/emc/max_rate", 3199000000)
    _write(root / "kernel/debug/clk/dla0_core/clk_rate", 1600000000)
    watch = ClockWatch(root, status=tmp_path / "no-status")
    with caplog.at_level(logging.WARNING):
        m = watch.judge(Measurement(status="ok", latency_samples_ms=[2.0]), watch.read(), watch.read())
    assert "not_watched" not in m.extra["clocks"]
    assert not [r for r in caplog.records if "CLOCKS NOT WATCHED" in r.getMessage()]
