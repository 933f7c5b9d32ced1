"""A night of unattended builds on a board: what a killed build, an out-of-memory kill or bad input data
leave behind must not fail the builds after it, and what cannot go on is said once, plainly.

Against the doubles (tests/fakes/trtexec, tests/fakes/tensorrt); the premises are read in TensorRT's
sources (cited where used)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from placetune import Evaluator, Model, Placement

from tests.test_selftest import board  # noqa: F401  (the fixture: nvpmodel and jetson_clocks of a board)
from tests.test_trtexec import GN, _backend, _ev, _processes


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def _shared_cache(tmp: Path) -> Path:
    found = list((tmp / "cache" / "timing").glob("*.cache"))
    assert len(found) == 1, found
    return found[0]


def test_a_build_killed_while_trtexec_writes_its_timing_cache_does_not_fail_the_next_builds(tmp_path, gn):
    """trtexec truncates and rewrites its --timingCacheFile in place at the end of a build (common.h
    release/8.6:1168 updateTimingCacheFile, std::ofstream); killed meanwhile it left the shared cache
    half-written, and every later build failed with "TimingCache creation failed" (sampleEngines.cpp
    release/8.6:1197)."""
    ok = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert ok.status == "ok", ok.reason
    whole = _shared_cache(tmp_path).read_bytes()
    killed = _ev(gn, _backend(tmp_path, "8.6.1", fake={"KILL": "cache_write"}), tmp_path,
                 trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert killed.status == "crashed" and killed.extra["signal"] == "SIGKILL", killed.reason
    assert _shared_cache(tmp_path).read_bytes() == whole  # the shared cache was never written by trtexec
    later = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert later.status == "ok", later.reason
    # the later build's entries were kept: the shared cache grew, and it is whole
    assert json.loads(_shared_cache(tmp_path).read_bytes())["entries"]


def test_a_timing_cache_trtexec_cannot_read_is_set_aside_and_the_build_runs_again_without_it(tmp_path, gn, caplog):
    """A cache damaged before placetune kept builds whole (an older version's half-written file): the
    build's "TimingCache creation failed" is read from its log, the file renamed aside, said in one line,
    and the build run once more, on a new cache."""
    first = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert first.status == "ok", first.reason
    cache = _shared_cache(tmp_path)
    half = cache.read_bytes()[:40]
    cache.write_bytes(half)
    with caplog.at_level(logging.WARNING, logger="placetune"):
        m = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert m.status == "ok", m.reason
    aside = list(cache.parent.glob(f"{cache.name}.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == half
    said = [r.getMessage() for r in caplog.records if "timing cache" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0] and "set aside as" in said[0] and "TimingCache creation failed" in \
        said[0], said
    assert any("built again without it" in n for n in m.extra["notes"])
    assert json.loads(cache.read_bytes())["entries"]  # the retry's cache is the shared one now
    assert len(_processes(tmp_path, "build")) == 3  # first, the failed one, the retry: never a loop


@pytest.mark.parametrize("mode", ["engine", "replicas"])
def test_the_recorded_build_command_names_the_shared_timing_cache_a_rerun_by_hand_needs(tmp_path, gn, mode):
    """Each build runs on its own copy of the shared timing cache, in the run directory that is deleted after
    the measurement: the command recorded with the measurement names the shared cache (the file a user
    re-running it by hand needs, and whose lock trtexec takes), never the copy that is gone."""
    kw = {"mode": "replicas", "replicas": {"GPU": 32, "DLA0": 32}} if mode == "replicas" else {}
    # the replicas' timed run is not what is checked here: 0.2 s rather than the default 10 s
    be = _backend(tmp_path, "8.6.1", replica_duration_s=0.2)
    m = _ev(gn, be, tmp_path, trt_version="8.6", **kw).evaluate(Placement.all_dla(gn))
    assert m.status == "ok", m.reason
    shared = _shared_cache(tmp_path)
    builds = list(m.extra["commands"]["build"].values()) if mode == "replicas" else [m.extra["commands"]["build"]]
    ran = _processes(tmp_path, "build")
    assert len(builds) == len(ran) == (2 if mode == "replicas" else 1)
    for recorded, process in zip(builds, ran):
        assert [a for a in recorded if a.startswith("--timingCacheFile=")] == [f"--timingCacheFile={shared}"]
        copy = [a.partition("=")[2] for a in process["argv"] if a.startswith("--timingCacheFile=")]
        assert copy and Path(copy[0]) != shared and not Path(copy[0]).exists()  # gone with the run directory
        assert [a for a in recorded[1:] if not a.startswith("--timingCacheFile=")] == \
            [a for a in process["argv"] if not a.startswith("--timingCacheFile=")]  # otherwise what ran


def test_a_build_that_keeps_failing_on_its_timing_cache_is_retried_once_only(tmp_path, gn, monkeypatch):
    """A retry that fails too is the build's failure, not a third attempt."""
    from placetune.backends.trtexec import engine as trtexec_engine

    monkeypatch.setattr(trtexec_engine, "set_aside", lambda shared, private: None)
    first = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert first.status == "ok", first.reason
    _shared_cache(tmp_path).write_bytes(b"{not a cache")
    be = _backend(tmp_path, "8.6.1", fake={"FAIL": "build"})
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert m.status == "build_failed", m.reason
    assert len(_processes(tmp_path, "build")) == 3


@pytest.mark.parametrize("mode", ["engine", "pipeline", "replicas"])
def test_the_tensorrt_workers_unreadable_timing_cache_is_set_aside_not_a_failure_of_every_build(tmp_path, gn, caplog,
                                                                                                mode):
    """The binding returns None for a cache TensorRT cannot deserialise (pyCore.cpp release/8.6:270 returns
    createTimingCache's null); the worker passed it to set_timing_cache, which fails: this build and every
    later one. It is set aside, said in one line, and the build runs on a new cache that is then written
    whole (a temporary name, flushed, renamed). The line reaches the measurement's notes in every mode (a
    pipeline's or replicas' engine builds said it nowhere)."""
    from tests.test_tensorrt_backend import _backend as trt_backend

    be = trt_backend(tmp_path, "8.6.2", replicas_duration_s=0.2)  # the timed run is not checked (default 3 s)
    try:
        ev = Evaluator(gn, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6", mode=mode)
        first = ev.evaluate(Placement.all_gpu(gn))
        assert first.status == "ok", first.reason
        cache = _shared_cache(tmp_path)
        cache.write_bytes(cache.read_bytes()[:30])
        with caplog.at_level(logging.WARNING, logger="placetune"):
            m = ev.evaluate(Placement.all_dla(gn))
        assert m.status == "ok", m.reason
        said = [r.getMessage() for r in caplog.records if "timing cache" in r.getMessage()]
        assert len(said) == 1 and "set aside as" in said[0] and "\n" not in said[0], said
        assert any("set aside as" in n for n in m.extra["notes"])
        assert len(list(cache.parent.glob(f"{cache.name}.unreadable-*"))) == 1
        assert json.loads(cache.read_bytes())["entries"] and not list(cache.parent.glob("*.tmp"))
    finally:
        be.close()


# =========================================================================================
# out of memory
# =========================================================================================
@pytest.fixture
def vmstat(tmp_path, monkeypatch) -> Path:
    """The stand-in of /proc/vmstat the backends read and the doubles' KILL raises (as the kernel counts)."""
    from placetune.backends import oom

    path = tmp_path / "vmstat"
    path.write_text("nr_free_pages 1024\noom_kill 7\n")
    monkeypatch.setattr(oom, "VMSTAT", str(path))
    return path


def _dla_with_first_conv(gn: Model, others: str) -> Placement:
    """/cnn/cnn.0/Conv on DLA0 (where the TensorRT double's KILL_ON fires), every other layer on ``others``."""
    return Placement(gn, {n: ("DLA0" if n == "/cnn/cnn.0/Conv" else others) for n in gn.names})


def test_the_tensorrt_worker_killed_by_the_oom_killer_is_a_memory_failure_and_the_night_goes_on(tmp_path, gn, vmstat):
    """The worker SIGKILLed mid-build while the kernel's oom_kill count rose (mm/oom_kill.c counts the kill
    before it sends SIGKILL): recorded crashed, class memory, stored; a new worker measures the next placement."""
    from tests.test_tensorrt_backend import _backend as trt_backend

    be = trt_backend(tmp_path, "8.6.2", faults={"KILL_ON": "/cnn/cnn.0/Conv", "VMSTAT": str(vmstat)})
    try:
        ev = Evaluator(gn, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6",
                       store=tmp_path / "pt.db")
        m = ev.evaluate(Placement.all_dla(gn))
        assert m.status == "crashed" and m.extra["signal"] == "SIGKILL", m.reason
        assert m.extra["failure_class"] == "memory" and m.extra["oom_kills"] == 1
        assert "out-of-memory killer" in m.reason
        again = ev.evaluate(Placement.all_dla(gn))  # the stored failure answers: never measured again
        assert again.extra["cache_hit"] and again.status == "crashed" and ev.stats.measured == 1
        ok = ev.evaluate(Placement.all_gpu(gn))
        assert ok.status == "ok", ok.reason
        assert be.pool.restarts == 1  # type: ignore[attr-defined]
        with ev.store as store:
            rows = store.measurements(ev.study_name)
        assert sorted(r.measurement.extra.get("failure_class") or "-" for r in rows) == ["-", "memory"]
    finally:
        be.close()


def test_a_sigkill_while_the_kernel_counted_no_oom_kill_stays_an_unexplained_crash(tmp_path, gn, vmstat):
    be = _backend(tmp_path, "8.6.1", fake={"KILL": "build"})  # the fake trtexec dies, the count stays
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert m.status == "crashed" and m.extra["signal"] == "SIGKILL" and m.extra["oom_kills"] == 0
    assert "failure_class" not in m.extra


def test_trtexec_killed_by_the_oom_killer_is_a_memory_failure(tmp_path, gn, vmstat):
    be = _backend(tmp_path, "8.6.1", fake={"KILL": "build", "VMSTAT": vmstat})
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert m.status == "crashed" and m.extra["failure_class"] == "memory" and m.extra["oom_kills"] == 1, m.reason


def test_out_of_memory_three_times_in_a_row_stops_the_run_with_one_line_naming_memory(tmp_path, gn, vmstat):
    """Each memory failure is a stored, counted trial; the third in a row stops the run (BackendError, exit 8)
    with one line that names memory and what to change; a success in between starts the count again."""
    from placetune.errors import BackendError
    from placetune.tuning.oom_stop import OutOfMemoryStop
    from tests.test_tensorrt_backend import _backend as trt_backend

    be = trt_backend(tmp_path, "8.6.2", faults={"KILL_ON": "/cnn/cnn.0/Conv", "VMSTAT": str(vmstat)})
    try:
        ev = Evaluator(gn, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6",
                       store=tmp_path / "pt.db")
        ev.add_callback(OutOfMemoryStop())
        assert ev.evaluate(Placement.all_dla(gn)).extra["failure_class"] == "memory"
        assert ev.evaluate(_dla_with_first_conv(gn, "GPU")).extra["failure_class"] == "memory"
        assert ev.evaluate(Placement.all_gpu(gn)).ok  # the count starts again
        assert ev.evaluate(_dla_with_first_conv(gn, "DLA1")).extra["failure_class"] == "memory"
        assert ev.evaluate(Placement.all_dla(gn)).extra["cache_hit"]  # a stored answer is no new failure
        placements = [Placement(gn, {**_dla_with_first_conv(gn, "GPU").as_dict(), n: "DLA0"}) for n in ("/cnn/cnn.3/Conv", "/cnn/cnn.6/Conv")]
        assert ev.evaluate(placements[0]).extra["failure_class"] == "memory"
        with pytest.raises(BackendError) as err:
            ev.evaluate(placements[1])
        msg = str(err.value)
        assert err.value.exit_code == 8 and "\n" not in msg
        assert msg.startswith("out of memory: 3 placements in a row") and "workspace" in msg and "frames in flight" in msg
        with ev.store as store:  # the third is stored and counted before the stop
            rows = store.measurements(ev.study_name)
        assert sum(r.measurement.extra.get("failure_class") == "memory" for r in rows) == 5
    finally:
        be.close()


def _fleet_worker_stopped(tmp_path, gn, agent, callback, study, **backend):
    """One fleet worker (the fleet's Optuna study and claims; SQLite here) of ``agent`` on the TensorRT double
    with ``callback(ev)`` attached, run until it stops: asserts what every such stop must leave (exit 8 in one
    line; every trial of the fleet's study COMPLETE or PRUNED, counted by every worker; no claim left) and
    returns (the stop's message, the store, the study name, the last trial) for the test's own checks."""
    import optuna
    from optuna.trial import TrialState

    from placetune import Store
    from placetune.errors import BackendError
    from placetune.tuning.fleet import Fleet
    from placetune.tuning.fleet_claims import CLAIMS_TABLE
    from placetune.tuning.fleet_worker import FleetOptions
    from search import Budget, drive, get_agent
    from tests.test_tensorrt_backend import _backend as trt_backend

    db = tmp_path / "fleet.db"
    be = trt_backend(tmp_path, "10.3.0", **backend)
    store = Store(f"sqlite:///{db}")
    try:
        ev = Evaluator(gn, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="10.3", store=store,
                       study=study)
        ev.add_callback(callback(ev))
        fleet = Fleet(store, FleetOptions(heartbeat_interval=1, grace_period=3))
        fleet.attach(ev)
        worker = fleet.configure(get_agent(agent, seed=0), 30, study_name=ev.study_name)
        with pytest.raises(BackendError) as err:
            drive(worker.ask_tell(ev, Budget(evaluations=30)), ev)
        fleet.close()
        msg = str(err.value)
        assert err.value.exit_code == 8 and "\n" not in msg
        trials = optuna.load_study(study_name=ev.study_name, storage=f"sqlite:///{db}").get_trials(deepcopy=False)
        assert trials and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}, \
            [t.state for t in trials]
        assert fleet.trials_done(ev.study_name) == len(trials)  # the stopping trial counts for the other workers
        with store.engine.connect() as conn:
            assert conn.execute(CLAIMS_TABLE.select()).all() == []
    except BaseException:
        store.close()
        raise
    finally:
        be.close()
    return msg, store, ev.study_name, max(trials, key=lambda t: t.number)


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("agent", ["optuna", "random"])
def test_a_fleet_worker_stops_out_of_memory_as_tune_does_and_leaves_its_trial_finished(tmp_path, gn, agent):
    """A fleet worker (the fleet's Optuna study and claims; SQLite here, one worker) whose builds keep running
    out of memory stops with tune's line (exit 8); the third failure is stored and its trial of the fleet's
    study is told it (PRUNED, counted by every worker), never left FAIL or RUNNING, and no claim is left."""
    from optuna.trial import TrialState

    from placetune.tuning.oom_stop import OutOfMemoryStop

    msg, store, study, last = _fleet_worker_stopped(
        tmp_path, gn, agent, lambda ev: OutOfMemoryStop(), "oom",
        faults={"BUILD_OOM_ON": "+DLA"})  # every build with a DLA layer
    try:
        assert msg.startswith("out of memory: 3 placements in a row")
        assert last.state == TrialState.PRUNED and last.user_attrs["status"] == "build_failed"
        memory = [r for r in store.measurements(study) if r.measurement.extra.get("failure_class") == "memory"]
        assert last.user_attrs["measurement_id"] == max(r.id for r in memory)
    finally:
        store.close()


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("agent", ["optuna", "random"])
def test_a_fleet_worker_stopped_by_the_first_build_check_leaves_its_trial_finished(tmp_path, gn, agent):
    """A fleet worker whose stack cannot say where TensorRT put the layers (no placement lines in the build
    log, no inspector) stops at its third DLA placement with the first-build check's line (exit 8); that
    build is stored and its trial of the fleet's study is told it (counted by every worker), not left FAIL."""
    from placetune.tuning.first_build import FirstBuildCheck

    msg, store, study, last = _fleet_worker_stopped(
        tmp_path, gn, agent, FirstBuildCheck, "unknown", faults={"NO_PLACEMENT_LOG": "1"}, inspector=False)
    try:
        assert msg.startswith("first-build check placement failed:")
        dla = [r for r in store.measurements(study) if set(r.measurement.requested.values()) - {"GPU"}]
        assert len(dla) == 3 and all(r.measurement.extra["placement_known"] is False for r in dla)
        assert last.user_attrs["measurement_id"] == max(r.id for r in dla)
    finally:
        store.close()


def test_measure_says_a_memory_failure_in_the_words_tune_stops_with(tmp_path, monkeypatch, capsys):
    """`placetune measure --backend tensorrt` of a build that ran out of memory: its status, then the line a tune
    stops with for one placement (what to change), in the text and in --json; exit 1 as any failed placement."""
    import os

    from placetune.backends import clocks
    from placetune.cli.main import main
    from placetune.tuning.oom_stop import ADVICE
    from tests.fakes import fake_env

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))
    env = fake_env("10.3.0", BUILD_OOM_ON="*")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")]))
    for k, v in env.items():
        if k.startswith("PLACETUNE_FAKE_"):
            monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    argv = ["measure", str(GN), "--backend", "tensorrt", "--precision", "fp16", "--placement", "all-dla"]
    assert main(argv) == 1
    out = capsys.readouterr().out.splitlines()
    said = [x for x in out if x.startswith("out of memory: ")]
    assert len(said) == 1 and ADVICE in said[0] and "build_failed" in said[0], out
    assert main([*argv, "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["extra"]["failure_class"] == "memory" and doc["out_of_memory"] == said[0]


def test_a_tensorrt_build_out_of_memory_is_a_memory_failure_as_with_trtexec(tmp_path, gn):
    """The worker's build that TensorRT says ran out of memory ("Cuda Runtime (out of memory)", the lines of
    NVIDIA/TensorRT#4258) has class memory, as the trtexec backend already read the same lines."""
    from tests.test_tensorrt_backend import _backend as trt_backend

    be = trt_backend(tmp_path, "10.3.0", faults={"BUILD_OOM_ON": "/cnn/cnn.0/Conv"})
    try:
        ev = Evaluator(gn, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="10.3")
        m = ev.evaluate(Placement.all_dla(gn))
        assert m.status == "build_failed" and m.extra["failure_class"] == "memory", (m.status, m.reason)
        assert "out of memory" in m.reason
    finally:
        be.close()


# =========================================================================================
# selftest --input-data
# =========================================================================================
def test_selftest_input_data_for_its_own_network_is_timed_in_every_check(tmp_path, board):
    """The selftest times its own network (model-gn at batch 4); data of that network is used by every check
    of it. The pipeline check's deliberately wrong cut runs on another network (seed-block): it was measured
    with the backend's input data too, which does not fit it, so the check failed for a correct file."""
    import numpy as np

    from placetune.cli.selftest import run_selftest
    from tests.fakes import FAKES_DIR, fake_env
    from tests.test_selftest import SYSFS, _device_tree

    board()
    data = tmp_path / "frames.npz"
    np.savez(data, input=np.random.default_rng(0).uniform(-1, 1, (4, 3, 32, 32)).astype(np.float32))
    env = {**fake_env("10.3.0"), "PLACETUNE_FAKE_TRTEXEC_VERSION": "10.3.0"}
    code, doc = run_selftest(tmp_path / "st", worker_env=env, trtexec=str(FAKES_DIR / "trtexec"), quick=True,
                             device_tree=_device_tree(tmp_path / "dt", "Jetson AGX Orin", ["nvidia,p3701-0005"]),
                             power_root=SYSFS / "orin-agx", input_data=data)
    by = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and doc["all_ok"], "\n".join(f"{c['status']} {c['name']}: {c['detail']}" for c in doc["checks"])
    assert doc["timed_input"].startswith("sha256:") and "input 4x3x32x32 float32" in doc["timed_input"]
    assert by["pipeline GPU->DLA0->GPU K=1..3, wrong cut"]["status"] == "ok"


@pytest.mark.parametrize("arrays, why", [
    ({"images": (1, 3, 64, 64)}, "the file holds 'images' 1x3x64x64 float32"),
    ({"input": (1, 3, 640, 640)}, "the file holds 'input' 1x3x640x640 float32"),
])
def test_selftest_input_data_for_another_network_is_one_line_naming_the_field_and_the_shape_it_takes(
        tmp_path, capsys, arrays, why):
    """A user's frames for their own model given to the selftest: one line, exit 6, before anything runs,
    naming --input-data, that the selftest times its own network, and the array it takes."""
    import numpy as np

    from placetune.cli.main import main

    data = tmp_path / "mine.npz"
    np.savez(data, **{k: np.zeros(s, np.float32) for k, s in arrays.items()})
    code = main(["selftest", "-o", str(tmp_path / "st"), "--input-data", str(data)])
    err = capsys.readouterr().err.strip()
    assert code == 6 and len(err.splitlines()) == 1, err
    assert "--input-data" in err and why in err and "its own network" in err
    assert "'input' 4x3x32x32 float32" in err and "--batch" not in err  # selftest has no --batch
    assert not (tmp_path / "st").exists()


def test_a_tune_on_a_board_that_keeps_running_out_of_memory_stops_with_exit_8_and_one_line(tmp_path):
    """`placetune tune --backend tensorrt` where every build with /cnn/cnn.0/Conv on a DLA runs out of memory
    (the TensorRT double's BUILD_OOM_ON): the failures are stored trials with their class, the run goes on
    past them, said once, and stops at the third in a row with one line naming memory (exit 8)."""
    import os
    import subprocess
    import sys

    from placetune import Store
    from tests.fakes import fake_env

    env = {**os.environ, **fake_env("10.3.0", BUILD_OOM_ON="/cnn/cnn.0/Conv")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env["PYTHONPATH"]])
    db = tmp_path / "pt.db"
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt", "--model", str(GN),
           "--mode", "engine", "--precision", "fp16", "--agent", "random", "--seed", "3", "--trials", "30",
           "--storage", f"sqlite:///{db}", "--study", "s"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    errors = [x for x in proc.stderr.splitlines() if x.startswith("placetune: error:")]
    assert proc.returncode == 8 and len(errors) == 1, proc.stderr
    assert "out of memory: 3 placements in a row" in errors[0] and "workspace" in errors[0]
    assert proc.stderr.count("OUT OF MEMORY") == 1
    trials = [x for x in proc.stdout.splitlines() if x.startswith("trial=")]
    with Store(f"sqlite:///{db}") as store:
        rows = store.measurements("s")
    memory = [r for r in rows if r.measurement.extra.get("failure_class") == "memory"]
    assert len(memory) >= 3 and any(r.measurement.ok for r in rows)  # it went on past memory failures
    assert len(trials) < 30 and trials[-1].split()[1] == "status=build_failed"
