"""placetune selftest: off a Jetson it says what it cannot check and exits 8; against the
TensorRT/pycuda/trtexec doubles every check runs, green for every Jetson module and every supported
TensorRT version, red with a clear line when a DLA build's placement is unknown or it ran on the GPU
(a build log without placement lines whose engines' layer information places them is green, as a tune reads it)."""

from __future__ import annotations

import importlib
import json
import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from placetune.cli.main import main
from placetune.cli.selftest import EXIT_NOT_ALL_OK, run_selftest
from tests.fakes import FAKES_DIR, fake_env

NAMES = ["cuda", "module", "tensorrt", "clocks", "engine all-GPU fp16 (vs trtexec)", "engine all-DLA0 fp16 (vs trtexec)",
         "engine all-DLA0 int8, no calibration cache", "pipeline GPU->DLA0->GPU K=1..3, wrong cut", "DLA0 || DLA1",
         "second run hits the engine cache", "worker exit", "power rails"]
DLA_CHECKS = NAMES[5:10]
SYSFS = FAKES_DIR / "sysfs"


def _device_tree(path, model, compatible=None):
    path.mkdir()
    (path / "model").write_bytes(model.encode() + b"\x00")
    if compatible:
        (path / "compatible").write_bytes("\x00".join(compatible).encode() + b"\x00")
    return path


def _run(tmp_path, version, model, compatible=None, rails="orin-agx", platform=None, **fake):
    """The selftest against the doubles of TensorRT ``version`` (and trtexec of the same version)
    on a board whose device tree says ``model`` / ``compatible``."""
    env = fake_env(version, **fake)
    env["PLACETUNE_FAKE_TRTEXEC_VERSION"] = version  # the worker's environment is trtexec's too
    if "DLA_CORES" in fake:
        env["PLACETUNE_FAKE_TRTEXEC_DLA_CORES"] = fake["DLA_CORES"]
    return run_selftest(tmp_path / "st", worker_env=env, trtexec=str(FAKES_DIR / "trtexec"), quick=True,
                        device_tree=_device_tree(tmp_path / "dt", model, compatible), power_root=SYSFS / rails,
                        platform=platform)


def _all(tmp_path, cases):
    """Each case's selftest, run at once (they wait on their workers and trtexec, not the CPU)."""
    with ThreadPoolExecutor(max_workers=3) as pool:
        futures = []
        for i, case in enumerate(cases):
            (tmp_path / str(i)).mkdir()
            futures.append(pool.submit(_run, tmp_path / str(i), *case[:3], **case[3]))
        return [f.result() for f in futures]


def _lines(doc):
    return "\n".join(f"{c['status']} {c['name']}: {c['detail']}" for c in doc["checks"])


def test_here_it_reports_what_it_cannot_check_and_exits_8(tmp_path, capsys):
    code = main(["selftest", "-o", str(tmp_path / "st")])
    out = capsys.readouterr().out
    assert code == EXIT_NOT_ALL_OK == 8
    doc = json.loads((tmp_path / "st" / "selftest.json").read_text())
    assert [c["name"] for c in doc["checks"]] == NAMES and not doc["all_ok"]
    by = {c["name"]: c for c in doc["checks"]}
    assert by["cuda"]["status"] == "failed" and "pip install --no-build-isolation pycuda" in by["cuda"]["detail"]
    assert by["tensorrt"]["status"] == "failed" and "--system-site-packages" in by["tensorrt"]["detail"]
    assert by["engine all-GPU fp16 (vs trtexec)"]["status"] == "skipped"
    assert "needs TensorRT" in by["engine all-GPU fp16 (vs trtexec)"]["detail"]
    assert by["worker exit"]["status"] == "ok"
    assert "[skipped] engine all-GPU fp16" in out and "send" not in out  # off a Jetson: nobody to send it to
    assert "this machine is not a Jetson" in out and "run `placetune selftest` on the Jetson" in out
    text = (tmp_path / "st" / "selftest.txt").read_text()
    assert "[FAILED]  tensorrt" in text
    home = os.path.expanduser("~")
    raw = (tmp_path / "st" / "selftest.json").read_text()
    assert os.environ["PATH"] not in raw and (home == "/" or home not in raw)  # no environment dump


# every supported TensorRT version (tests/fakes VERSIONS) on a module that JetPack ships it for,
# with the module's DLA cores; the model strings as real Jetsons print them (tests/test_jetson_modules.py)
GREEN = [
    ("8.5.2", "Jetson-AGX", ["nvidia,p2972-0000", "nvidia,tegra194"], {}, "xavier-agx"),
    ("8.6.2", "NVIDIA Orin NX Developer Kit", ["nvidia,p3768-0000+p3767-0001", "nvidia,p3767-0001"],
     {"DLA_CORES": "1"}, "orin-nx-8gb"),
    ("10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004", "nvidia,p3701-0004"], {}, "orin-agx"),
    ("11.4.1", "NVIDIA Jetson AGX Orin Developer Kit", None, {}, "orin-agx"),
    ("10.3.0", "NVIDIA Orin Nano Developer Kit", ["nvidia,p3768-0000+p3767-0005-super"], {"DLA_CORES": "0"},
     "orin-nano"),
    ("11.4.1", "NVIDIA Jetson AGX Thor Developer Kit", ["nvidia,p4071-0000+p3834-0008", "nvidia,p3834-0008"],
     {"DLA_CORES": "0"}, "orin-nano"),
]


LOCKED = ("SOC family:tegra234  Machine:NVIDIA Jetson AGX Orin Developer Kit\nOnline CPUs: 0-11\n"
          "cpu0: Online=1 Governor=schedutil MinFreq=2201600 MaxFreq=2201600 CurrentFreq=2201600 IdleStates: C1=0\n"
          "GPU MinFreq=1300500000 MaxFreq=1300500000 CurrentFreq=1300500000\n")
UNLOCKED = LOCKED.replace("MinFreq=1300500000", "MinFreq=306000000").replace("CurrentFreq=1300500000",
                                                                             "CurrentFreq=306000000")
#: locked (minimum = maximum, what jetson_clocks sets), the GPU slowed by a thermal or power cap when read
THROTTLED = LOCKED.replace("CurrentFreq=1300500000", "CurrentFreq=918000000")


@pytest.fixture
def board(tmp_path, monkeypatch):
    """nvpmodel and jetson_clocks on PATH, answering as a board in MAXN with its clocks fixed
    (``board(clocks=UNLOCKED)`` for one whose jetson_clocks is off)."""
    def make(clocks=LOCKED, mode="MAXN"):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir(exist_ok=True)
        (tmp_path / "clocks.txt").write_text(clocks)
        for name, body in (("nvpmodel", f"printf 'NV Power Mode: {mode}\\n0\\n'"),
                           ("jetson_clocks", f"cat '{tmp_path / 'clocks.txt'}'")):
            (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
            (bin_dir / name).chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return make


def test_green_against_the_doubles_on_every_module_and_version(tmp_path, board):
    board()
    for i, (case, (code, doc)) in enumerate(zip(GREEN, _all(tmp_path, GREEN))):
        version, model, compatible, fake, platform = case
        by = {c["name"]: c for c in doc["checks"]}
        assert list(by) == NAMES
        assert code == 0 and doc["all_ok"], (case, _lines(doc))
        assert doc["platform"] == platform and by["module"]["status"] == "ok", case
        ran = {n for n, c in by.items() if c["status"] == "ok"}
        assert {"cuda", "tensorrt", "clocks", "engine all-GPU fp16 (vs trtexec)", "worker exit", "power rails"} <= ran
        assert by["clocks"]["detail"].startswith("nvpmodel mode MAXN; jetson_clocks on")
        assert " mJ per inference of the all-GPU engine" in by["power rails"]["detail"]
        assert by["engine all-GPU fp16 (vs trtexec)"]["latency_ratio"] == pytest.approx(1.0, abs=0.1)
        assert "--exposeDMA" in by["engine all-GPU fp16 (vs trtexec)"]["trtexec_command"]  # timed as the worker
        dla = int(fake.get("DLA_CORES", "2"))
        if dla == 0:
            assert all(by[n]["status"] == "n/a" and "no DLA" in by[n]["detail"] for n in DLA_CHECKS), case
            continue
        dla0 = by["engine all-DLA0 fp16 (vs trtexec)"]
        assert dla0["status"] == "ok" and dla0["dla_loadables"]["DLA0"] >= 1
        assert dla0["dla_loadables"]["DLA0"] <= dla0["trtexec_loadables"]["DLA0"]
        assert by["pipeline GPU->DLA0->GPU K=1..3, wrong cut"]["K3"]["period_ms"] > 0
        if version.startswith("11."):
            assert by["engine all-DLA0 int8, no calibration cache"]["status"] == "n/a"
        if dla == 2:  # both DLA engines ran on their own cores
            assert set(by["DLA0 || DLA1"]["dla_loadables"]) == {"DLA0", "DLA1"}
            assert all(n >= 1 for n in by["DLA0 || DLA1"]["dla_loadables"].values())
        else:
            assert by["DLA0 || DLA1"]["status"] == "n/a"
        text = (tmp_path / str(i) / "st" / "selftest.txt").read_text()
        assert text.rstrip().endswith("all checks ok") and model in text


RED = [
    ("10.3.0", "Jetson AGX Orin", ["nvidia,p3701-0005"], {"NO_PLACEMENT_LOG": "1"}),
    ("8.6.2", "Acme Robot Controller rev B", ["acme,robo-b"], {"DLA_UNSUPPORTED_ON": "*"}),
]


def test_placed_by_layer_information_without_placement_lines_is_green_and_a_dla_check_on_the_gpu_red(tmp_path):
    (code, doc), (code2, doc2) = _all(tmp_path, RED)
    by = {c["name"]: c for c in doc["checks"]}
    assert by["engine all-GPU fp16 (vs trtexec)"]["status"] == "ok"
    assert not [c for c in doc["checks"] if c["status"] == "failed"], _lines(doc)
    # the engines' layer information placed every DLA engine (all-DLA0, the pipeline's segments, both
    # replicas): known, as a tune reads it, and said so; what fails is the INT8 build without a cache
    for n in ("engine all-DLA0 fp16 (vs trtexec)", "pipeline GPU->DLA0->GPU K=1..3, wrong cut", "DLA0 || DLA1"):
        assert by[n]["status"] == "ok" and "from the engine's layer information only" in by[n]["detail"], by[n]
    by = {c["name"]: c for c in doc2["checks"]}
    assert code2 == EXIT_NOT_ALL_OK
    for n in ("engine all-DLA0 fp16 (vs trtexec)", "DLA0 || DLA1"):
        assert by[n]["status"] == "failed" and by[n]["detail"].startswith("the DLA check ran on the GPU"), by[n]
    # an unknown module is said so, and the checks go on with a stand-in of as many DLA cores
    assert by["module"]["status"] == "skipped" and "unknown module ('Acme Robot Controller rev B'" in \
        by["module"]["detail"] and "stand-in profile orin-agx" in by["module"]["detail"]
    assert "with --platform (" in by["module"]["detail"] and "orin-nano" in by["module"]["detail"]
    assert by["engine all-GPU fp16 (vs trtexec)"]["status"] == "ok"


def test_the_same_engine_agrees_within_a_relative_and_a_fixed_allowance():
    """Both backends time one query in flight (trtexec --exposeDMA), so what is left is the
    Python-vs-C++ start of the enqueue (a fixed few microseconds) and run-to-run drift (relative):
    a 0.30 ms engine 40 us slower in the worker agrees; a 25 % gap does not."""
    from placetune.cli.selftest import LATENCY_ALLOWANCE_MS, LATENCY_TOLERANCE, within_tolerance

    assert LATENCY_TOLERANCE == 0.10 and LATENCY_ALLOWANCE_MS == 0.05
    assert within_tolerance(0.34, 0.30) and within_tolerance(10.9, 10.0)
    assert not within_tolerance(1.25, 1.0) and not within_tolerance(0.20, 0.30) and not within_tolerance(11.2, 10.0)


def test_unlocked_clocks_are_a_setup_step_named_loudly_not_a_failure_of_the_stack(tmp_path, board):
    """A board whose jetson_clocks is off: the stack works (exit 0), and the report says, on a line of
    its own and in its last line, that the board needs `sudo jetson_clocks` before a tune (a tune
    would stop at its first build); the engines still build and time."""
    board(clocks=UNLOCKED)
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    not_ok = {c["name"]: (c["status"], c["detail"]) for c in doc["checks"] if c["status"] not in ("ok", "n/a")}
    assert code == 0 and doc["all_ok"] and list(not_ok) == ["clocks"] and doc["setup"] == ["clocks"], _lines(doc)
    status, detail = not_ok["clocks"]
    assert status == "setup" and "jetson_clocks is off" in detail and "`sudo jetson_clocks`" in detail
    text = (tmp_path / "st" / "selftest.txt").read_text()
    assert "[SETUP]   clocks: nvpmodel mode MAXN; jetson_clocks is off" in text
    assert text.rstrip().splitlines()[-1].startswith("the stack works") and "[SETUP]" in text.splitlines()[-1]
    assert "all checks ok" not in text


def _worker_always_slower(real):
    """A stand-in for ``compare_timing`` whose worker runs take 1.5x trtexec's, on the first compare and
    on every repeat: a disagreement that does not go away."""
    def disagreeing(ours, theirs, again, locked, throttled=None):
        def slower():
            o, t = again()
            return ({**o, "median": o["median"] * 1.5} if o else o), t
        return real({**ours, "median": ours["median"] * 1.5}, theirs, slower, locked, throttled)
    return disagreeing


def test_a_locked_board_that_throttles_passes_with_the_throttling_said(tmp_path, board, monkeypatch):
    """A healthy board, its clocks locked by jetson_clocks (minimum = maximum), read as root while a
    thermal or power cap runs the GPU below its lock: the clocks check is ok and says THROTTLED with the
    clock, selftest.json lists it under ``throttled``, exit 0. Before, the current frequency below the
    maximum read as "jetson_clocks is off" ([SETUP]). A timing disagreement that repeats on such a board
    is NOT VERIFIED ([SETUP], exit 0), never a failure of the timing method: the cap moves either run."""
    import placetune.cli.selftest as selftest
    from placetune.cli.selftest_checks import compare_timing as real

    board(clocks=THROTTLED)
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    clocks = {c["name"]: c for c in doc["checks"]}["clocks"]
    assert code == 0 and doc["all_ok"] and clocks["status"] == "ok", _lines(doc)
    assert "jetson_clocks on" in clocks["detail"] and "THROTTLED when read: GPU at 918000000 Hz" in clocks["detail"]
    assert doc["throttled"] == ["clocks"] and doc["setup"] == []
    assert "CLOCKS THROTTLED" in (tmp_path / "st" / "selftest.txt").read_text()

    monkeypatch.setattr(selftest, "compare_timing", _worker_always_slower(real))
    (tmp_path / "again").mkdir()
    code, doc = _run(tmp_path / "again", "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    gpu = {c["name"]: c for c in doc["checks"]}["engine all-GPU fp16 (vs trtexec)"]
    assert code == 0 and gpu["status"] == "setup" and "locked but throttled (GPU at 918000000 Hz" in gpu["detail"], gpu
    assert "engine all-GPU fp16 (vs trtexec)" in doc["unverified"]
    text = (tmp_path / "again" / "st" / "selftest.txt").read_text()
    assert "the clocks are locked but throttled" in text and "`sudo jetson_clocks --fan`" in text
    # only a CPU read below its lock (its current frequency may read off the one set): not throttling, and a
    # timing disagreement on locked GPU clocks stays a real difference of timing method, failed
    (tmp_path / "cpu").mkdir()
    board(clocks=LOCKED.replace("MaxFreq=2201600 CurrentFreq=2201600", "MaxFreq=2201600 CurrentFreq=1497600"))
    code, doc = _run(tmp_path / "cpu", "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["clocks"]["status"] == "ok" and "THROTTLED" not in checks["clocks"]["detail"]
    gpu = checks["engine all-GPU fp16 (vs trtexec)"]
    assert code == EXIT_NOT_ALL_OK and gpu["status"] == "failed" and "real difference of timing method" in gpu["detail"]


def test_a_wrong_cut_run_that_failed_for_another_reason_is_not_counted_as_caught(tmp_path, board, monkeypatch):
    """The wrong-cut check passes only when the gate compared the outputs and they differed. A wrong-cut
    run that failed otherwise (here the DLA failed while running it, with no gate report) says nothing
    of the gate: before, any ``runtime_failed`` counted as caught, and the check passed."""
    import placetune.cli.selftest as selftest
    from placetune.measurement import Measurement

    real = selftest._measure

    def measure(model, plat, backend, placement, **settings):
        if model.name == "seed-block":  # the wrong-cut run: the DLA fails before any output is compared
            return Measurement.failure("runtime_failed", "the DLA failed (pipeline execution failed: "
                                       "NVDLA submit error)", backend="tensorrt", mode="pipeline")
        return real(model, plat, backend, placement, **settings)

    monkeypatch.setattr(selftest, "_measure", measure)
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    check = {c["name"]: c for c in doc["checks"]}["pipeline GPU->DLA0->GPU K=1..3, wrong cut"]
    assert code == EXIT_NOT_ALL_OK and check["status"] == "failed", check
    assert "a deliberately wrong cut was not caught by the gate (runtime_failed: the DLA failed" in check["detail"]


def test_each_failure_mode_has_its_own_line():
    """The clocks and energy checks' answers, one per failure mode, none alike; none of them a
    failure of the stack: clocks off or unreadable are setup steps, no energy figure is unavailable
    (a study that needs energy is refused on such a board)."""
    from placetune.cli.selftest_checks import clocks_check as _clocks_check, energy_check as _energy_check

    answers = [_clocks_check("MAXN", True), _clocks_check("15W", False), _clocks_check(None, None),
               _energy_check([], {}, True), _energy_check(["VDD_IN"], {}, False),
               _energy_check(["VDD_IN"], {"energy_mj": None, "power": {"reason": "no power sample could be read "
                                                                          "during the timed run"}}, True),
               _energy_check(["VDD_IN"], {"energy_mj": 1.5, "power": {}}, True)]
    assert [a[1] for a in answers] == ["ok", "setup", "setup", "unavailable", "unavailable", "unavailable", "ok"]
    assert len({a[2] for a in answers}) == len(answers)
    assert "nvpmodel mode 15W" in answers[1][2] and "no power sample" in answers[5][2]
    assert all("sudo jetson_clocks" in a[2] for a in answers[1:3])
    assert all("--objective energy" in a[2] and "refused" in a[2] for a in (answers[3], answers[5]))


def test_no_power_rails_leave_the_selftest_green_and_say_energy_is_unavailable(tmp_path, board):
    """A module whose rails placetune cannot read (here: none at all) passes the selftest; the power
    line says energy is unavailable and that an energy study is refused."""
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"], rails="no-rails")
    by = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and doc["all_ok"] and doc["unavailable"] == ["power rails"], _lines(doc)
    assert by["power rails"]["status"] == "unavailable" and "refused" in by["power rails"]["detail"]
    text = (tmp_path / "st" / "selftest.txt").read_text()
    assert "[unavailable] power rails: no INA3221 rails found" in text
    assert text.rstrip().splitlines()[-1].startswith("all checks of the stack ok (power rails: unavailable")


def test_a_timing_disagreement_is_timed_again_once_before_it_fails():
    """Two processes timed one after the other: a DVFS step or a background task can move one run,
    the worker's or trtexec's; a real offset of method repeats. Both are timed again once, and the
    check fails only when no worker run agrees with a trtexec run; the failure line gives every run
    and trtexec's own spread, and points at the clocks unless they are locked."""
    from placetune.cli.selftest import compare_timing

    calls = []

    def again(ours, theirs):
        return lambda: calls.append(1) or (ours, theirs)

    # trtexec's first run was the disturbed one
    why, figs = compare_timing({"median": 0.40}, {"median": 0.30}, again({"median": 0.40}, {"median": 0.41}), True)
    assert why is None and figs["retimed"] and figs["trtexec_latency_ms"] == 0.41 and len(calls) == 1
    assert "trtexec's two runs 0.300 and 0.410 ms (+37%)" in figs["drift"]
    # the worker's first run was the disturbed one: trtexec agrees with itself, the worker's second run with it
    why, figs = compare_timing({"median": 0.60}, {"median": 0.30}, again({"median": 0.31}, {"median": 0.30}), True)
    assert why is None and figs["latency_ms"] == 0.31 and figs["latency_ratio"] == pytest.approx(1.0333)
    # ... and the worker's own two runs of the same engine, 0.60 then 0.31 ms, are a drifting board: said
    assert figs["run_to_run_pct"] == {"placetune": -48.3, "trtexec": 0.0}
    assert figs["drift"].startswith("RUN-TO-RUN DRIFT:") and "placetune's two runs 0.600 and 0.310 ms (-48%)" in figs["drift"]
    assert "trtexec's two runs" not in figs["drift"]  # trtexec agreed with itself
    why, figs = compare_timing({"median": 0.34}, {"median": 0.30}, again({"median": 9.0}, {"median": 9.0}), True)
    assert why is None and "retimed" not in figs and len(calls) == 2  # agreed at once: not timed again
    first = {"median": 0.30, "p90": 0.31, "p99": 0.35}
    why, figs = compare_timing({"median": 0.45}, first, again({"median": 0.46}, {"median": 0.29, "p90": 0.30,
                                                                                 "p99": 0.33}), True)
    assert why is not None and "median 0.450 ms and again 0.460 ms by placetune" in why
    assert "median 0.300 ms (p90 0.310, p99 0.350); again: median 0.290 ms" in why
    assert "real difference of timing method" in why
    why, _ = compare_timing({"median": 0.45}, first, again(None, None), None)
    assert "timing it again failed" in why and "`sudo jetson_clocks`, then the selftest again" in why


def test_dla_loadables_that_trtexec_cannot_tell_are_not_compared_and_not_failed():
    """TensorRT 10.3 prints the placement at VERBOSE only; where trtexec's log does not say how many
    loadables its build has, the check says 'cannot be compared' and passes on it; where both tell
    and the worker's engine has more, it fails."""
    from placetune.cli.selftest import compare_loadables

    assert compare_loadables({"DLA0": 1}, {"DLA0": 2}, {"placement_known": True}) == (None, None)
    why, note = compare_loadables({"DLA0": 2}, {}, {"placement_known": False, "placement_unknown": "no log lines"})
    assert why is None and note.startswith("DLA loadables cannot be compared") and "no log lines" in note
    why, note = compare_loadables({"DLA0": 2}, {}, {})
    assert why is None and "no loadable count for DLA0" in note
    why, note = compare_loadables({"DLA0": 3}, {"DLA0": 2}, {"placement_known": True})
    assert note is None and why.startswith("DLA loadables {'DLA0': 3} vs trtexec's {'DLA0': 2}")


def test_a_dla_check_whose_placement_is_unknown_says_so_not_that_it_ran_on_the_gpu():
    """The realised placement is unknown (the build log and the engine's layer information
    disagree): the check's line names that cause, not "ran on the GPU" (realized is None then)."""
    from placetune.cli.selftest import _ran_on_dla
    from placetune.measurement import Measurement

    why = "the build log counts 2 DLA loadable(s), the engine's layer information 1"
    m = Measurement(status="ok", latency_samples_ms=[1.0], realized=None, dla_loadables={},
                    extra={"placement_known": False, "placement_unknown": why})
    line = _ran_on_dla(m, ["DLA0"])
    assert line is not None and line.startswith("where TensorRT put the layers is unknown") and why in line
    assert "ran on the GPU" not in line


def test_a_dla_core_count_below_the_modules_says_which_tensorrt_has_no_dla_where():
    """TensorRT 10.8+ has no DLA (10.7 the last), 11.0-11.3 none, 11.4.1 on AGX Orin only
    (TensorRT 11.4.1 release notes): the tensorrt check's line says which applies."""
    from placetune.cli.selftest import dla_count_hint

    assert "10.7 was the last" in dla_count_hint("10.16.2", "Jetson AGX Orin 64GB")
    assert "11.0-11.3" in dla_count_hint("11.1.0", "Jetson AGX Orin 64GB")
    assert "AGX Orin only" in dla_count_hint("11.4.1", "Jetson Orin NX 16GB")
    assert "JetPack 7.2.2" in dla_count_hint("11.4.1", "Jetson AGX Orin 64GB")  # 11.4.1's DLA needs JetPack
    assert dla_count_hint("10.3.0", "Jetson Orin NX 16GB") == ""


def test_a_tensorrt_installed_by_pip_is_named_where_its_dla_count_is_wrong():
    """JetPack's TensorRT bindings live in /usr/lib/python3*/dist-packages (apt: python3-libnvinfer); a
    ``tensorrt`` pip put in a venv's site-packages shadows them: the tensorrt check names it."""
    from placetune.cli.selftest import pip_wheel_hint

    assert pip_wheel_hint("/usr/lib/python3.10/dist-packages/tensorrt/__init__.py") == ""
    assert pip_wheel_hint(None) == ""
    hint = pip_wheel_hint("/opt/pt/lib/python3.10/site-packages/tensorrt/__init__.py")
    assert "/opt/pt/lib/python3.10/site-packages" in hint and "pip uninstall tensorrt" in hint


def test_the_fp16_gate_passes_fp16_rounding_and_a_failure_says_arithmetic_or_wrong_data(monkeypatch):
    """FP16 moves a small chain's output by 5.7e-4 to 4.9e-3 relative L2 (benchmarks/fp16_gate_noise.py:
    FP32 / FP16 accumulation); the gate (2e-2) passes that with a 4x margin on the real comparison code,
    fails a swapped cut, and the selftest's line says which kind a failure is."""
    import numpy as np

    from placetune.backends.tensorrt.backend import GATE_TOLERANCE
    from placetune.backends.tensorrt.pool import WORKER_FILE
    from placetune.cli.selftest import WRONG_DATA_REL_L2, gate_kind

    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))  # imported as the worker does: top-level
    compare_outputs = importlib.import_module("worker_pipeline").compare_outputs

    rng = np.random.default_rng(1)
    ref = np.maximum(rng.standard_normal((4, 16, 8, 8)), 0).astype(np.float32)
    noisy = ref + rng.standard_normal(ref.shape).astype(np.float32) * 4.9e-3 * np.sqrt((ref ** 2).mean())
    ok = compare_outputs(np, {"y": noisy}, {"y": ref}, GATE_TOLERANCE["fp16"])
    assert ok["passed"] and ok["outputs"]["y"]["rel_l2"] * 4 < GATE_TOLERANCE["fp16"]
    swapped = compare_outputs(np, {"y": ref[::-1].copy()}, {"y": ref}, GATE_TOLERANCE["fp16"])
    assert not swapped["passed"] and swapped["outputs"]["y"]["rel_l2"] > WRONG_DATA_REL_L2
    assert "wrong data, not rounding" in gate_kind(swapped)
    drift = compare_outputs(np, {"y": ref * 1.05}, {"y": ref}, GATE_TOLERANCE["fp16"])
    assert not drift["passed"] and "DLA arithmetic differs" in gate_kind(drift)
    assert gate_kind({}) == ""


def test_a_dla_build_placed_by_the_engines_layer_information_alone_is_not_a_missing_placement():
    """A build log without placement lines whose engine's layer information placed every layer
    (placement_known True, as a tune would read it) passes the DLA check; the same log with the
    placement unknown still fails with the 'printed no placement lines' line."""
    from placetune.cli.selftest import _ran_on_dla
    from placetune.measurement import Measurement

    note = "the build log has no DLA/GPU placement sections: realised placement from the engine inspector only"
    m = Measurement(status="ok", latency_samples_ms=[1.0], realized={"a": "DLA0", "b": "DLA0"},
                    dla_loadables={"DLA0": 1}, extra={"placement_known": True, "notes": [note]})
    assert _ran_on_dla(m, ["DLA0"]) is None
    unknown = Measurement(status="ok", latency_samples_ms=[1.0], realized=None, dla_loadables={},
                          extra={"placement_known": False, "notes": [note.replace("from the engine inspector only",
                                                                                  "UNKNOWN")]})
    assert _ran_on_dla(unknown, ["DLA0"]).startswith("the DLA build printed no placement lines")


def test_the_second_timing_runs_on_the_board_when_the_first_disagrees(tmp_path, board, monkeypatch):
    """End to end against the doubles: when the first comparison disagrees (forced here), the worker
    and trtexec time the same engine again and the check passes on the second pair, saying so."""
    import placetune.cli.selftest_checks as checks

    real, seen = checks.within_tolerance, []

    def first_disagrees(worker_ms, trtexec_ms):
        seen.append((worker_ms, trtexec_ms))
        return len(seen) > 1 and real(worker_ms, trtexec_ms)

    monkeypatch.setattr(checks, "within_tolerance", first_disagrees)
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    gpu = {c["name"]: c for c in doc["checks"]}["engine all-GPU fp16 (vs trtexec)"]
    assert gpu["status"] == "ok" and "(trtexec agrees on a second run)" in gpu["detail"], gpu
    assert gpu["retimed"] and gpu["latency_ms_again"] > 0 and gpu["trtexec_latency_ms_again"] > 0
    assert code == 0, _lines(doc)
    assert doc["drift"] == [] and "RUN-TO-RUN" not in gpu["detail"]  # the doubles time alike run to run
    assert "engine_rebuilt" not in gpu  # the doubles' rebuild writes the same engine file, byte for byte


def test_a_second_timing_of_another_build_is_paired_only_with_its_own_engine(tmp_path, board, monkeypatch):
    """End to end against the doubles: the worker builds the engine again for its second timing, into the
    same plan file trtexec then loads. When that rebuild differs from the first build (forced here: the
    file's digest), the first build's runs are never paired with the second's and the worker's two runs
    are not called drift; the check passes on the second build's pair and says which engines it timed."""
    import placetune.cli.selftest as selftest
    import placetune.cli.selftest_checks as checks

    real, seen, digests = checks.within_tolerance, [], []
    monkeypatch.setattr(checks, "within_tolerance", lambda w, t: bool(seen.append(1)) or len(seen) > 1 and real(w, t))
    monkeypatch.setattr(selftest, "engine_digest", lambda path: digests.append(path) or ("a" if len(digests) == 1 else "b"))
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    gpu = {c["name"]: c for c in doc["checks"]}["engine all-GPU fp16 (vs trtexec)"]
    assert gpu["status"] == "ok" and gpu["retimed"] and gpu["engine_rebuilt"] is True, gpu
    assert gpu["run_to_run_pct"] == {} and "RUN-TO-RUN" not in gpu["detail"] and code == 0
    assert len(set(digests[:3])) == 1  # the check's three digests are of the one plan file both sides time


def test_a_board_whose_timings_drift_between_runs_passes_but_says_so(tmp_path, board, monkeypatch):
    """The same engine timed twice by the worker, seconds apart, moving by more than the tolerance is a
    board whose timings drift: the check still passes when trtexec agrees with one of the worker's runs
    (the timing method is right), but its line, selftest.json's ``drift`` and the report's last lines
    say so. It passed as '(trtexec agrees on a second run)' and nothing else."""
    import placetune.cli.selftest as selftest
    from placetune.cli.selftest import format_report

    real = selftest.compare_timing

    def drifting(ours, theirs, again, locked, throttled=None):  # the worker's first run 1.5x slower than any other
        return real({**ours, "median": ours["median"] * 1.5}, theirs, again, locked, throttled)

    monkeypatch.setattr(selftest, "compare_timing", drifting)
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    gpu = {c["name"]: c for c in doc["checks"]}["engine all-GPU fp16 (vs trtexec)"]
    assert code == 0 and gpu["status"] == "ok" and "(trtexec agrees on a second run)" in gpu["detail"], gpu
    assert "RUN-TO-RUN DRIFT" in gpu["detail"] and "placetune's two runs" in gpu["detail"]
    assert gpu["run_to_run_pct"]["placetune"] == pytest.approx(-33.3, abs=0.1)
    assert "engine all-GPU fp16 (vs trtexec)" in doc["drift"]
    assert "RUN-TO-RUN DRIFT in engine all-GPU fp16 (vs trtexec)" in format_report(doc)


# a segment c1 -> r1 -> c2 -> pool on DLA0: its engine's layer information as the real profile of
# NVIDIA/TensorRT#3143 names a loadable's copies (tests/test_placement_known.py)
_SEG = ["c1", "r1", "c2", "pool"]
_SEG_LAYERS = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[c1...c2]}", "LayerType": "Unknown"},
               {"Name": "c2 from nvm", "LayerType": "Reformat"}, {"Name": "in copy finish", "LayerType": "Reformat"},
               {"Name": "pool", "LayerType": "Pooling"}]
_SEG_LOG = [["VERBOSE", "{ForeignNode[c1...c2]} successfully offloaded to DLA."], ["VERBOSE", "[GpuLayer] POOLING: pool"]]


def _segment(log, layers):
    """A pipeline measurement of the one DLA0 segment whose engine built with ``log`` and whose layer
    information is ``layers`` (None: not read), read as the tensorrt backend's pipeline reads it."""
    from placetune.backends.tensorrt.jobs import mark_unknown, read_realised
    from placetune.measurement import Measurement

    predicted = {n: "DLA0" for n in _SEG}
    info = {"log": log, "network_layers": [], "inspector": json.dumps({"Layers": layers}) if layers else None}
    realized, fallback, notes, unknown, unchecked = dict(predicted), {}, [], [], []
    n_load, _ = read_realised(_SEG, "DLA0", predicted, info, realized, fallback, notes, "seg0", unknown,
                              unchecked=unchecked)
    kw = {"realized": realized, "fallback": fallback, "dla_loadables": {"DLA0": n_load}, "extra": {"notes": notes}}
    mark_unknown(kw, unknown, unchecked)
    return Measurement(status="ok", latency_samples_ms=[1.0], **kw)


def test_pipeline_and_replica_engines_are_judged_by_both_placement_sources_as_a_tune_reads_them():
    """The pipeline and DLA0 || DLA1 checks read each DLA engine's placement through the same
    reading as a tune (the build log and the engine's layer information, cross-checked): a log
    without placement lines whose layer information places the segment passes, and says so; layer
    information that disagrees with the log fails naming the disagreement; neither source fails."""
    from placetune.cli.selftest import _layer_information_only, _ran_on_dla

    m = _segment([["INFO", "Detected 1 inputs and 1 output network tensors."]], _SEG_LAYERS)
    assert m.placement_known and m.realized["c2"] == "DLA0" and m.realized["pool"] == "GPU", m.extra
    assert m.dla_loadables == {"DLA0": 1} and _ran_on_dla(m, ["DLA0"]) is None
    assert "from the engine's layer information only" in _layer_information_only(m)
    both = _segment(_SEG_LOG, _SEG_LAYERS)
    assert both.placement_known and _ran_on_dla(both, ["DLA0"]) is None and _layer_information_only(both) is None
    wrong = [dict(x) for x in _SEG_LAYERS]
    wrong[1]["Name"] = "{ForeignNode[c1...r1]}"
    wrong.insert(4, {"Name": "c2", "LayerType": "CaskConvolution"})  # the layer information says c2 ran on the GPU
    why = _ran_on_dla(_segment(_SEG_LOG, wrong), ["DLA0"])
    assert why.startswith("where TensorRT put the layers is unknown") and "disagree on 1 layer(s) (c2)" in why, why
    why = _ran_on_dla(_segment([["INFO", "Detected 1 inputs and 1 output network tensors."]], None), ["DLA0"])
    assert why.startswith("the DLA build printed no placement lines") and "seg0" in why, why
    # layer information showing no DLA layer in the form read here beside a log that names the loadable:
    # the segment rests on the log, recorded and said, as engine mode says it
    # (a loadable under a name the log does not give it: one the log names is read by that name)
    bare = [{"Name": "dla_subgraph_0", "LayerType": "Unknown"}, {"Name": "pool", "LayerType": "Pooling"}]
    m = _segment(_SEG_LOG, bare)
    assert m.placement_known and _ran_on_dla(m, ["DLA0"]) is None and m.realized["c1"] == "DLA0"
    assert _layer_information_only(m).startswith("placement read from the build log only: seg0: engine's layer")
    # the log warns that c1 fell back and prints no placement report; the layer information shows no DLA
    # layer in the form read here: where c2 ran no source says, so the check says unknown, never "ran on the GPU"
    fell = [["WARNING", "Layer 'c1' (CONVOLUTION): Unsupported on DLA. Switching this layer's device type to GPU."]]
    unread = [{"Name": "dla_subgraph_0", "LayerType": "Unknown", "Metadata": "[ONNX Layer: c1]\x1e[ONNX Layer: c2]"},
              {"Name": "pool", "LayerType": "Pooling"}]
    m = _segment(fell, unread)
    why = _ran_on_dla(m, ["DLA0"])
    assert not m.placement_known and why.startswith("the DLA build printed no placement lines"), why
    assert "(c2, pool) neither source says where they ran" in why and "ran on the GPU" not in why, why
    assert "Unsupported on DLA" in m.fallback["c1"]


def test_an_unknown_platform_name_is_one_line_exit_4_before_anything_runs(tmp_path, capsys):
    """--platform names the profile of a module the device tree does not identify; a name placetune
    has no profile for is the unknown-name error of every command (exit 4), naming the valid ones,
    and no report is written."""
    code = main(["selftest", "-o", str(tmp_path / "st"), "--platform", "orin-agz"])
    err = capsys.readouterr().err.strip()
    assert code == 4 and len(err.splitlines()) == 1, err
    assert "unknown platform 'orin-agz'" in err and "valid platforms: " in err and "orin-agx" in err
    assert not (tmp_path / "st").exists()


def test_a_module_placetune_cannot_identify_is_checked_with_the_profile_named_by_platform(tmp_path, board):
    """An unidentified module is no usage error (the board said it, not the user): without --platform
    its line is skipped and names the option and the profiles; with it the checks use that profile
    (its DLA cores are the ones TensorRT must report) and can all pass; on a module placetune
    identifies, a --platform of another profile fails the module check with one line."""
    board()
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        named = pool.submit(_run, tmp_path / "a", "10.3.0", "Acme Robot Controller rev B", ["acme,robo-b"],
                            platform="orin-agx")
        wrong = pool.submit(_run, tmp_path / "b", "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"],
                            platform="orin-nano")
        (code, doc), (code2, doc2) = named.result(), wrong.result()
    by = {c["name"]: c for c in doc["checks"]}
    assert code == 0 and doc["all_ok"] and doc["platform"] == "orin-agx", _lines(doc)
    assert by["module"]["status"] == "ok" and "unknown module ('Acme Robot Controller rev B'" in by["module"]["detail"]
    assert "the profile named by --platform, orin-agx (2 DLA core(s))" in by["module"]["detail"]
    by2 = {c["name"]: c for c in doc2["checks"]}
    assert code2 == EXIT_NOT_ALL_OK and by2["module"]["status"] == "failed", _lines(doc2)
    assert "not --platform orin-nano" in by2["module"]["detail"] and "--platform orin-agx" in by2["module"]["detail"]


def test_a_pipeline_gate_whose_reference_ignores_its_input_is_red(tmp_path, board, monkeypatch):
    """A gate that passed on outputs the reference gave identically for every random input (a
    detector's NMS that keeps no box of random input; ``gate.same_for_every_input``) checked
    nothing, as an all-zero one: the pipeline check fails saying so (forced here on the doubles)."""
    import placetune.cli.selftest as selftest

    real = selftest._measure

    def same_outputs(model, plat, backend, placement, **settings):
        m = real(model, plat, backend, placement, **settings)
        if settings.get("mode") == "pipeline" and (m.extra.get("gate") or {}).get("passed"):
            m.extra["gate"]["same_for_every_input"] = True
        return m

    monkeypatch.setattr(selftest, "_measure", same_outputs)
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    row = {c["name"]: c for c in doc["checks"]}["pipeline GPU->DLA0->GPU K=1..3, wrong cut"]
    assert row["status"] == "failed" and "same outputs for every random input" in row["detail"], row
    assert code == EXIT_NOT_ALL_OK


def test_an_agx_orin_kit_emulating_an_orin_nx_8gb_is_not_failed_for_the_kit_s_second_dla(tmp_path):
    """TensorRT on an AGX Orin kit flashed to emulate an Orin NX 8GB still reports the kit's 2 DLA cores:
    the selftest said 'reports 2 DLA core(s), but a Jetson Orin NX 8GB has 1' (failed) on a healthy board;
    it now says in one line that the run uses the module's 1, and checks that many."""
    from tests.test_board_module import EMULATED_NX8

    code, doc = _run(tmp_path, "10.3.0", EMULATED_NX8[0], EMULATED_NX8[1], DLA_CORES="2")
    by = {c["name"]: c for c in doc["checks"]}
    assert by["module"]["status"] == "ok", by["module"]
    assert by["tensorrt"]["status"] == "ok" and "which has 1: the run uses 1" in by["tensorrt"]["detail"], by["tensorrt"]
    assert "\n" not in by["tensorrt"]["detail"]


def test_a_timing_disagreement_on_unlocked_clocks_is_not_verified_never_failed_or_passed():
    """Clocks not locked (or not known to be): DVFS can hold the GPU at another frequency in each run,
    so a disagreement that repeats says nothing of the timing method. It is marked NOT VERIFIED
    (``unverified``) with the command, not failed; locked clocks keep it a failure."""
    from placetune.cli.selftest import compare_timing

    def again():
        return {"median": 0.46}, {"median": 0.30}

    for locked in (False, None):
        why, figs = compare_timing({"median": 0.45}, {"median": 0.30}, again, locked)
        assert figs["unverified"] is True and why.count("NOT VERIFIED") == 1 and "`sudo jetson_clocks`" in why
    why, figs = compare_timing({"median": 0.45}, {"median": 0.30}, again, True)
    assert "unverified" not in figs and "real difference of timing method" in why


def test_an_unlocked_board_whose_timings_disagree_exits_0_marked_not_verified(tmp_path, board, monkeypatch):
    """End to end against the doubles, on a board whose jetson_clocks is off and whose worker and
    trtexec timings disagree twice (forced): a healthy board is not failed (exit 0), but the timing
    checks are [SETUP] lines saying NOT VERIFIED, selftest.json lists them under ``unverified`` and the
    report's last lines never say the stack was checked: it says to lock the clocks and run it again.
    Before, the unlocked board failed the selftest (exit 8)."""
    import placetune.cli.selftest as selftest
    from placetune.cli.selftest_checks import compare_timing as real

    monkeypatch.setattr(selftest, "compare_timing", _worker_always_slower(real))
    board(clocks=UNLOCKED)
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    checks = {c["name"]: c for c in doc["checks"]}
    gpu = checks["engine all-GPU fp16 (vs trtexec)"]
    assert code == 0 and doc["all_ok"], _lines(doc)
    assert gpu["status"] == "setup" and "NOT VERIFIED" in gpu["detail"] and gpu["unverified"], gpu
    assert "engine all-GPU fp16 (vs trtexec)" in doc["unverified"] and "clocks" in doc["setup"]
    text = (tmp_path / "st" / "selftest.txt").read_text()
    assert "TIMING NOT VERIFIED in engine all-GPU fp16 (vs trtexec)" in text and "all checks ok" not in text
    assert "every check of it ok" not in text and "its timing is not verified" in text.splitlines()[-1]
    # the same board with its clocks locked: a real difference of method, failed
    (tmp_path / "locked").mkdir()
    board(clocks=LOCKED)
    code, doc = _run(tmp_path / "locked", "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    gpu = {c["name"]: c for c in doc["checks"]}["engine all-GPU fp16 (vs trtexec)"]
    assert code == EXIT_NOT_ALL_OK and gpu["status"] == "failed" and "real difference of timing method" in gpu["detail"]


def test_a_dla_check_whose_layer_information_was_not_understood_passes_and_asks_for_the_report():
    """The build log placed the layers (a real source) and the engine's layer information showed no DLA
    layer in a form placetune reads: the placement rests on the log (``placement_unchecked``). The DLA
    check passes as a tune reads it, and its line says so and asks for the report: that report holds
    the first real DLA engine's layer information. Before, the line said nothing of it."""
    from placetune.cli.selftest import _layer_information_only, _ran_on_dla
    from placetune.measurement import Measurement

    why = ("engine's layer information not compared: it shows no DLA layer in a form placetune reads while the "
           "build log names 1 DLA loadable(s)")
    m = Measurement(status="ok", latency_samples_ms=[1.0], realized={"a": "DLA0"}, dla_loadables={"DLA0": 1},
                    extra={"placement_known": True, "placement_unchecked": why})
    assert _ran_on_dla(m, ["DLA0"]) is None
    line = _layer_information_only(m)
    assert line.startswith("placement read from the build log only: engine's layer information not compared")
    assert "send this report" in line


def test_without_trtexec_the_all_gpu_check_says_it_compared_nothing(tmp_path, board, monkeypatch):
    """No trtexec found: the all-GPU engine is built and timed by the worker, but the check named
    "(vs trtexec)" compared nothing, so it is skipped naming where trtexec was looked for, never ok."""
    import placetune.backends.tensorrt.env as trt_env

    board()
    monkeypatch.delenv("PLACETUNE_TRTEXEC", raising=False)
    monkeypatch.setattr(trt_env, "TRTEXEC_DIRS", (str(tmp_path / "no-tensorrt-bin"),))
    env = fake_env("10.3.0")
    code, doc = run_selftest(tmp_path / "st", worker_env=env, trtexec=None, quick=True,
                             device_tree=_device_tree(tmp_path / "dt", "Jetson AGX Orin",
                                                      ["nvidia,p3737-0000+p3701-0004"]),
                             power_root=SYSFS / "orin-agx")
    gpu = {c["name"]: c for c in doc["checks"]}["engine all-GPU fp16 (vs trtexec)"]
    assert gpu["status"] == "skipped", gpu
    assert "not compared with trtexec" in gpu["detail"] and "no trtexec found" in gpu["detail"]
    assert "ms by placetune's worker" in gpu["detail"] and "PLACETUNE_TRTEXEC=PATH" in gpu["detail"]
    assert str(tmp_path / "no-tensorrt-bin" / "trtexec") in gpu["detail"]
    dla = {c["name"]: c for c in doc["checks"]}["engine all-DLA0 fp16 (vs trtexec)"]
    assert dla["status"] == "skipped" and dla["detail"].startswith("needs trtexec: none found (looked in: ")
    assert code == EXIT_NOT_ALL_OK


def test_a_worker_python_that_cannot_be_started_is_a_failed_check_and_the_report_is_written(tmp_path):
    """A --worker-python that exists but cannot be started: every check says so and the report is written (the
    worker exit check raised FileNotFoundError out of the selftest, so no report at all). One that does not
    exist is refused before anything runs (tests/test_hostile_round14.py)."""
    python = tmp_path / "not-a-program"
    python.write_text("not a program\n")
    python.chmod(0o644)
    code, doc = run_selftest(tmp_path / "st", worker_python=str(python), quick=True, device_tree=tmp_path / "no-dt")
    by = {c["name"]: c for c in doc["checks"]}
    assert code == EXIT_NOT_ALL_OK and list(by) == NAMES
    assert by["worker exit"]["status"] == "failed" and "cannot be started" in by["worker exit"]["detail"]
    assert (tmp_path / "st" / "selftest.txt").is_file() and (tmp_path / "st" / "selftest.json").is_file()


def test_a_worker_that_hangs_at_exit_fails_the_worker_exit_check(tmp_path, monkeypatch):
    """A worker that answers and then never exits is the check's failure, named, not a TimeoutExpired
    traceback that ends the selftest before its report."""
    import placetune.cli.selftest as selftest

    hangs = tmp_path / "python"
    hangs.write_text("#!/bin/sh\ncat >/dev/null\nsleep 30\n")
    hangs.chmod(0o755)
    monkeypatch.setattr(selftest, "WORKER_EXIT_TIMEOUT_S", 0.5)
    name, status, detail = selftest._worker_exit(str(hangs), None)
    assert (name, status) == ("worker exit", "failed") and "did not exit within 0.5 s" in detail


def test_a_tensorrt_whose_builder_cannot_be_made_is_said_so_not_read_as_no_dla_cores(tmp_path, monkeypatch, board):
    """The worker imports TensorRT but trt.Builder fails (the GPU not usable by this user): the tensorrt line names
    the builder's error; before, it said 'reports None DLA core(s), but a Jetson AGX Orin has 2', a DLA fault."""
    import placetune.backends.tensorrt.pool as pool

    board()

    class NoBuilderPool:
        def __init__(self, *a, **k):
            pass

        def run(self, job, timeout_s):
            return pool.WorkerReply("result", result={
                "status": "ok", "python": "3.10.12", "trt_version": "10.3.0",
                "trt_path": "/usr/lib/python3.10/dist-packages/tensorrt/__init__.py", "num_dla_cores": None,
                "builder_error": "TypeError: pybind11::init(): factory function returned nullptr",
                "cuda_binding": None, "cuda_error": "cuda-python: CudaError: cuInit failed: CUDA_ERROR_NO_DEVICE (100)",
                "cuda_fix": "pip install ..."})

        def close(self):
            pass

    monkeypatch.setattr(pool, "WorkerPool", NoBuilderPool)
    code, doc = run_selftest(tmp_path / "st", quick=True,
                             device_tree=_device_tree(tmp_path / "dt", "Jetson AGX Orin", ["nvidia,p3701-0004"]))
    by = {c["name"]: c for c in doc["checks"]}
    assert code == EXIT_NOT_ALL_OK and by["tensorrt"]["status"] == "failed"
    assert "no TensorRT builder can be made" in by["tensorrt"]["detail"]
    assert "factory function returned nullptr" in by["tensorrt"]["detail"]
    assert "None DLA core" not in by["tensorrt"]["detail"]


def test_a_worker_that_dies_during_its_probe_is_said_so_not_sent_to_install_a_binding(tmp_path):
    """A worker killed by a signal during the probe (a segmentation fault importing tensorrt or initialising CUDA):
    the cuda and tensorrt lines name the signal and its last stderr line; before, the cuda line read 'the worker did
    not answer (crashed); fix: ' and the tensorrt line 'cannot import tensorrt: None; fix: ... --system-site-packages',
    advice for a TensorRT or binding that nothing said was missing."""
    segv = tmp_path / "python3"
    segv.write_text("#!/bin/sh\necho 'Fatal Python error: Segmentation fault' >&2\nkill -SEGV $$\n")
    segv.chmod(0o755)
    code, doc = run_selftest(tmp_path / "st", worker_python=str(segv), quick=True, device_tree=tmp_path / "no-dt")
    by = {c["name"]: c for c in doc["checks"]}
    assert code == EXIT_NOT_ALL_OK and by["cuda"]["status"] == by["tensorrt"]["status"] == "failed"
    for name in ("cuda", "tensorrt"):
        assert "died during its probe (SIGSEGV)" in by[name]["detail"], by[name]["detail"]
        assert "Fatal Python error: Segmentation fault" in by[name]["detail"]
        assert "fix:" not in by[name]["detail"] and "--system-site-packages" not in by[name]["detail"]
    assert by["tensorrt"]["detail"].startswith("not known: ")


def test_the_report_holds_each_dla_engines_layer_information_and_placement_lines(tmp_path, board):
    """The DLA form of the engine's layer information has never been observed: every DLA check asks for
    the report when its placement rests on one source or is unknown, so the report must hold what was read.
    Each engine DLA check writes the worker's and trtexec's engine layer information and the build log's
    kept lines (placement, warnings) into ``evidence/`` beside ``selftest.json``, which names them. Before,
    the line said 'send this report: it shows a real DLA engine's layer information' and the report held
    none of it."""
    board()
    code, doc = _run(tmp_path, "10.3.0", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004", "nvidia,p3701-0004"])
    assert code == 0, _lines(doc)
    by = {c["name"]: c for c in doc["checks"]}
    st = tmp_path / "st"
    for name in ("engine all-DLA0 fp16 (vs trtexec)", "engine all-DLA0 int8, no calibration cache"):
        files = by[name]["evidence"]
        assert {f.rsplit("-", 1)[-1] for f in files} == {"layerinfo.json", "buildlog.txt"}, files
        assert any("-placetune-" in f for f in files) and any("-trtexec-" in f for f in files), files
        for f in files:
            text = (st / f).read_text()
            assert "{ForeignNode[" in text, f  # the loadable, as the layer information and the log name it
        info = next(f for f in files if "-placetune-" in f and f.endswith("layerinfo.json"))
        assert "Layers" in json.loads((st / info).read_text())
    # the pipeline and DLA0 || DLA1 checks keep each DLA engine's layer information too (before: none)
    pipe = [f for f in by["pipeline GPU->DLA0->GPU K=1..3, wrong cut"]["evidence"] if f.endswith("layerinfo.json")]
    reps = [f for f in by["DLA0 || DLA1"]["evidence"] if f.endswith("layerinfo.json")]
    assert pipe and all(f.rsplit("-", 2)[-2].startswith("seg") for f in pipe), pipe
    assert sorted(f.rsplit("-", 2)[-2] for f in reps) == ["DLA0", "DLA1"], reps
    for f in pipe + reps:
        assert "Layers" in json.loads((st / f).read_text()), f
    assert "evidence/" in (st / "selftest.txt").read_text()


def test_the_checks_apply_the_dla_rules_of_the_boards_own_tensorrt_as_a_tune_does(tmp_path, board, caplog):
    """JetPack 5.1 (TensorRT 8.5.2) and 7.2.2 (11.4.1): a tune and measure apply the DLA rules of the
    TensorRT the worker has (settings.rules_version); the selftest measured under the default 8.6's,
    asking the DLA for what a tune there would not, and printed "pass trt_version=..." (it has no such option)."""
    board()
    cases = [("8.5.2", "Jetson-AGX", ["nvidia,p2972-0000", "nvidia,tegra194"], {}),
             ("11.4.1", "NVIDIA Jetson AGX Orin Developer Kit", None, {})]
    with caplog.at_level("WARNING"):
        results = _all(tmp_path, cases)
    assert all(code == 0 for code, _ in results), [_lines(doc) for _, doc in results]
    said = [r.getMessage() for r in caplog.records if "DLA rules are for TensorRT" in r.getMessage()]
    assert not said, said
