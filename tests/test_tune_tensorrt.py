"""`placetune tune --backend tensorrt` end to end against each TensorRT double (worker subprocess
included): realised placements that differ from the requested ones are stored, a plan is exported."""

from __future__ import annotations

import json
import os
import shutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from placetune import Store
from placetune.measurement import Measurement
from tests.fakes import VERSIONS, fake_env

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("version", VERSIONS)
def test_tune_with_the_tensorrt_backend(version, tmp_path):
    env = {**os.environ, **fake_env(version)}
    db = tmp_path / "pt.db"
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt",
           "--model", str(DATA / "seed_model_gn.onnx.gz"), "--mode", "engine", "--precision", "fp16",
           "--agent", "random", "--trials", "8", "--storage", f"sqlite:///{db}", "--study", "trt",
           "--export", str(tmp_path / "plan.json")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "SIMULATED" not in proc.stdout and "simulated=true" not in proc.stdout
    with Store(f"sqlite:///{db}") as store:
        study = store.study("trt")
        assert study.simulated is False and study.fingerprint["trt_version"] == version
        rows = store.measurements("trt")
    ok = [r for r in rows if r.measurement.ok]
    assert ok and all(not r.measurement.simulated for r in rows)
    # GroupNorm pieces asked on DLA ran on the GPU: what ran differs from what was asked
    assert any(r.measurement.requested != r.measurement.realized for r in ok)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan.get("simulated") is False
    assert plan["layers"] and all("realized" in layer for layer in plan["layers"])


def test_guided_against_the_tensorrt_fakes_stores_and_fits_segment_profiles(tmp_path, monkeypatch):
    """`tune --backend tensorrt --agent guided`: segment profiles are stored and the agent's fit uses them."""
    from placetune import Model, Settings
    from placetune.calibration import observations
    from placetune.hardware.platforms import get_platform

    env = {**os.environ, **fake_env("10.3.0")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env["PYTHONPATH"]])  # this checkout
    db = tmp_path / "pt.db"
    model = DATA / "seed_model_gn.onnx.gz"
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt", "--model", str(model),
           "--mode", "engine", "--precision", "fp16", "--agent", "guided", "--trials", "14",
           "--storage", f"sqlite:///{db}", "--study", "g", "--export", str(tmp_path / "plan.json")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = [x for x in proc.stdout.splitlines() if x.startswith("trial=")]
    # trials 1-2 are the study's baselines (all-GPU, all-DLA0; all-DLA1, its twin, is not built);
    # the agent's evaluations show the model's prediction
    assert len(lines) == 14 and all(re.search(r" predicted_\w+=[0-9.e+-]+( |$)", x) for x in lines[2:])
    assert not any(" predicted_" in x for x in lines[:2])
    assert any(re.search(r" cv_error_pct=[0-9.]+( |$)", x) for x in lines)  # the fit ran on the measured segment profiles
    with Store(f"sqlite:///{db}") as store:
        ok = [r.measurement for r in store.measurements("g") if r.measurement.ok]
        settings = Settings(**{k: v for k, v in store.study("g").settings.items() if k in Settings.__dataclass_fields__})
    assert len(ok) >= 8 and all(m.segment_times_ms for m in ok)
    obs = observations(Model.load(str(model)), get_platform("orin-agx"), settings, ok)
    assert sum(o.kind == "segment" for o in obs) >= len(ok)


# =========================================================================================
# every objective x backend x mode: measured, or refused at start with one line (exit 6)
# =========================================================================================
def _measure_all_objectives(backend, mode, tmp_path):
    """The objectives whose figures one measurement of ``backend`` in ``mode`` has."""
    from placetune import Evaluator, Model, Placement
    from placetune.tuning.objectives import OBJECTIVE_NAMES, get_objective

    model = Model.load(DATA / "seed_model_gn.onnx.gz")
    kw = {"replicas": {"GPU": 32, "DLA0": 32}} if mode == "replicas" else {}  # the file's static batch
    ev = Evaluator(model, "orin-agx", backend=backend, mode="pipeline" if mode == "concurrent" else mode,
                   precision="fp16", iterations=5, **kw)
    names = [layer.name for layer in ev.model.layers]
    placement = {n: ("DLA0" if i < len(names) // 3 else "GPU") for i, n in enumerate(names)}
    m = ev.evaluate(Placement(ev.model, placement))
    assert m.ok, (backend.name, mode, m.status, m.reason)
    return {o for o in OBJECTIVE_NAMES if get_objective(o).values(m) is not None}


def test_every_objective_backend_mode_combination_is_measured_or_refused_at_start(tmp_path, capsys):
    """An objective a backend never reports would run the whole budget and export nothing
    (--objective energy --backend tensorrt did): every combination either yields the objective's
    figures (measured here against the simulator and the TensorRT/trtexec doubles) or is refused
    before the database is touched, with one line naming the objective, the backend and the mode."""
    from placetune.backends.registry import backend_names, get_backend
    from placetune.cli.main import main
    from placetune.tuning.measurable import MODES, why_unmeasurable
    from placetune.tuning.objectives import OBJECTIVE_NAMES

    fakes = Path(__file__).parent / "fakes"
    trtexec_env = {"PLACETUNE_FAKE_TRTEXEC_VERSION": "10.3.0",
                   "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    makers = {
        "simulate": lambda: get_backend("simulate"),
        "tensorrt": lambda: get_backend("tensorrt", worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "trt",
                                        warmup_ms=1.0, profile_iterations=0, replicas_duration_s=0.2),
        "trtexec": lambda: get_backend("trtexec", trtexec=str(fakes / "trtexec"), cache_dir=tmp_path / "tx",
                                       env=trtexec_env, warmup_ms=5, duration_s=0.3, replica_duration_s=0.3,
                                       power_root=fakes / "sysfs" / "orin-agx", power_interval_s=0.01),
    }
    assert set(backend_names()) == set(makers)
    checked = refused = 0
    for backend_name in backend_names():
        be = makers[backend_name]()
        try:
            for mode in MODES:
                wanted = [o for o in OBJECTIVE_NAMES
                          if not any(why_unmeasurable(p, backend_name, mode) for p in o.split("+"))]
                if wanted:
                    measured = _measure_all_objectives(be, mode, tmp_path)
                    assert set(wanted) <= measured, (backend_name, mode, set(wanted) - measured)
                    checked += len(wanted)
                for objective in sorted(set(OBJECTIVE_NAMES) - set(wanted)):
                    db = tmp_path / f"{backend_name}-{mode}-{objective}.db"
                    models = ["--model", "seed-block", "--model", "model-gn"] if mode == "concurrent" else \
                        ["--model", str(DATA / "seed_model_gn.onnx.gz")]
                    code = main(["tune", "--backend", backend_name, "--mode", mode, "--objective", objective,
                                 *models, "--trials", "2", "--storage", f"sqlite:///{db}"])
                    err = capsys.readouterr().err.strip()
                    assert code == 6 and len(err.splitlines()) == 1, (backend_name, mode, objective, err)
                    assert f"objective {objective} " in err and f"the {backend_name} backend" in err \
                        and f"in {mode} mode" in err, err
                    assert not db.exists()  # refused before the database was touched
                    refused += 1
        finally:
            getattr(be, "close", lambda: None)()
    assert checked and refused
    assert checked + refused == len(OBJECTIVE_NAMES) * len(backend_names()) * len(MODES)


def test_the_overnight_template_offers_only_what_its_backend_measures():
    """studies/jetson-overnight.toml: its objective (and the ones its comment offers) can be measured
    by its backend in its mode."""
    import re as _re
    import tomllib

    from placetune.tuning.measurable import why_unmeasurable

    path = Path(__file__).resolve().parents[1] / "studies" / "jetson-overnight.toml"
    doc = tomllib.loads(path.read_text())["study"]
    offered = _re.search(r'^objective = "[^"]+"\s*#\s*(.+)$', path.read_text(), _re.M).group(1)
    names = {doc["objective"], *(x.strip() for x in offered.split("(")[0].split("|"))}
    for name in names:
        assert not any(why_unmeasurable(p, doc["backend"], doc["mode"]) for p in name.split("+")), name


# =========================================================================================
# the first builds of a night check the stack (exit 8, one line per failure mode)
# =========================================================================================
UNLOCKED = ("SOC family:tegra234  Machine:NVIDIA Jetson AGX Orin Developer Kit\nOnline CPUs: 0-11\n"
            "cpu0: Online=1 Governor=schedutil MinFreq=115200 MaxFreq=2201600 CurrentFreq=729600 IdleStates: C1=1\n"
            "GPU MinFreq=306000000 MaxFreq=1300500000 CurrentFreq=306000000\n")


def _board(tmp_path, power_mode="MAXN", clocks=None):
    """A bin folder with nvpmodel (and jetson_clocks) that answer as a board in ``power_mode`` does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    nv = bin_dir / "nvpmodel"
    nv.write_text(f"#!/bin/sh\nprintf 'NV Power Mode: {power_mode}\\n0\\n'\n")
    nv.chmod(0o755)
    if clocks is not None:
        jc = bin_dir / "jetson_clocks"
        (tmp_path / "clocks.txt").write_text(clocks)
        jc.write_text(f"#!/bin/sh\ncat '{tmp_path / 'clocks.txt'}'\n")
        jc.chmod(0o755)
    return bin_dir


def _tune(tmp_path, *extra, fake=None, bin_dir=None, study="night", backend="tensorrt"):
    env = {**os.environ, **fake_env("10.3.0", **(fake or {}))}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env["PYTHONPATH"]])
    if bin_dir is not None:
        env["PATH"] = str(bin_dir) + os.pathsep + env["PATH"]
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", backend,
           "--model", str(DATA / "seed_model_gn.onnx.gz"), "--mode", "engine", "--precision", "fp16",
           "--agent", "random", "--trials", "4", "--storage", f"sqlite:///{tmp_path / 'pt.db'}", "--study", study,
           *extra]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def _stopped(proc, check):
    err = [x for x in proc.stderr.splitlines() if x.startswith("placetune: error:")]
    assert proc.returncode == 8 and len(err) == 1, proc.stderr + proc.stdout
    assert err[0].startswith(f"placetune: error: first-build check {check} failed: "), err[0]
    return err[0]


def test_a_board_in_another_power_mode_stops_before_the_first_build(tmp_path):
    line = _stopped(_tune(tmp_path, bin_dir=_board(tmp_path, "15W")), "clocks")
    assert "nvpmodel mode 15W" in line and "power_mode MAXN" in line
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        assert store.measurements("night") == []  # nothing was built


def test_the_boards_power_mode_is_compared_as_its_nvpmodel_file_names_it():
    """``nvpmodel -q`` prints the mode's name in the module's file: AGX Orin's 30 W mode is ``MODE_30W``
    (the study says ``30W``), Orin Nano's and Xavier NX's fastest modes are ``15W`` and ``MODE_20W_6CORE``
    (the study's default ``MAXN``). A healthy board in the study's mode is not stopped; another mode is."""
    from placetune.tuning.first_build import clocks_problem

    assert clocks_problem({"power_mode": "MODE_30W"}, "30W", "orin-agx") is None
    assert clocks_problem({"power_mode": "15W"}, "MAXN", "orin-nano") is None
    assert clocks_problem({"power_mode": "MODE_20W_6CORE"}, "MAXN", "xavier-nx") is None
    assert clocks_problem({"power_mode": "MAXN"}, "MAXN", "orin-agx") is None
    assert "nvpmodel mode MODE_15W" in clocks_problem({"power_mode": "MODE_15W"}, "MAXN", "orin-agx")
    assert "nvpmodel mode MODE_50W" in clocks_problem({"power_mode": "MODE_50W"}, "30W", "orin-agx")
    # JetPack 6.2's Super modes on Orin NX are the module's _super file's: a study of MAXN_SUPER passes,
    # a study of MAXN is not taken for it, and the line advises the power_mode that study file accepts
    assert clocks_problem({"power_mode": "MAXN_SUPER"}, "MAXN_SUPER", "orin-nx-16gb") is None
    assert clocks_problem({"power_mode": "40W"}, "40w", "orin-nx-8gb") is None
    line = clocks_problem({"power_mode": "MAXN_SUPER"}, "MAXN", "orin-nx-16gb")
    assert "nvpmodel mode MAXN_SUPER but the study assumes power_mode MAXN" in line
    assert 'power_mode = "MAXN_SUPER"' in line
    # a mode neither file has is still refused loudly, naming both files' modes, with no power_mode advice
    line = clocks_problem({"power_mode": "MODE_99W"}, "MAXN", "orin-nx-16gb")
    assert ("MODE_99W, which the orin-nx-16gb profile does not have (its modes: MAXN, 10W, 15W, 25W; "
            "JetPack 6.2 Super: MAXN_SUPER, 10W, 15W, 25W, 40W)") in line
    assert 'power_mode = "MODE_99W"' not in line


def test_an_agx_orin_in_its_30w_mode_runs_a_30w_study(tmp_path):
    proc = _tune(tmp_path, "--power-mode", "30W", "--trials", "2", bin_dir=_board(tmp_path, "MODE_30W"))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "first-build check" not in proc.stderr and "the Jetson runs power mode" not in proc.stderr


def test_an_orin_nx_on_jetpack_6_2_in_maxn_super_runs_a_maxn_super_study(tmp_path):
    """JetPack 6.2's Super flash boots an Orin NX in its _super file's modes: a study of MAXN_SUPER on
    the orin-nx-16gb profile passes the first build's clocks check on a board that reports it."""
    proc = _tune(tmp_path, "--platform", "orin-nx-16gb", "--power-mode", "MAXN_SUPER", "--trials", "2",
                 bin_dir=_board(tmp_path, "MAXN_SUPER"))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "first-build check" not in proc.stderr and "the Jetson runs power mode" not in proc.stderr
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        assert store.study("night").settings["power_mode"] == "MAXN_SUPER"


def test_unlocked_clocks_stop_before_the_first_build(tmp_path):
    line = _stopped(_tune(tmp_path, bin_dir=_board(tmp_path, "MAXN", UNLOCKED)), "clocks")
    assert "sudo jetson_clocks" in line


def test_a_first_build_that_cannot_be_timed_stops_the_run(tmp_path):
    line = _stopped(_tune(tmp_path, fake={"EXEC_FAIL_ON": "*"}), "timing")
    assert "first all-GPU build was not measured (runtime_failed" in line
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        assert len(store.measurements("night")) == 1  # the one build, stored; no budget spent after it


def test_a_stack_that_cannot_read_any_dla_placement_stops_the_run(tmp_path):
    """No placement lines in the build log and no engine inspector: where TensorRT put the layers
    is unknown (placement_known=False) for every DLA placement, so the run stops at its third."""
    study = tmp_path / "no-inspector.toml"
    shutil.copy(DATA / "seed_model_gn.onnx.gz", tmp_path)  # a study file's paths stay in its folder
    study.write_text('[study]\nmodel = "seed_model_gn.onnx.gz"\n[backend_options]\ninspector = false\n')
    proc = _tune(tmp_path, str(study), "--trials", "10", fake={"NO_PLACEMENT_LOG": "1"})
    line = _stopped(proc, "placement")
    assert "is unknown for the first 3 DLA placements in a row" in line and "neither the build log nor" in line
    assert proc.stderr.count("PLACEMENT UNKNOWN") == 1  # said once, loudly, at the first
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        dla = [r.measurement for r in store.measurements("night") if set(r.measurement.requested.values()) - {"GPU"}]
        assert len(dla) == 3 and all(m.ok and m.extra["placement_known"] is False for m in dla)


def test_one_dla_engine_whose_placement_cannot_be_read_does_not_stop_the_night(caplog):
    """Before, the first DLA placement's unknown placement stopped the night (exit 8), whatever made it
    unknown: one engine's inspector output that placetune does not read in full. It is now marked
    and measured on; the stack is judged on the first DLA placements together."""
    import logging
    from types import SimpleNamespace as NS

    from placetune.errors import BackendError
    from placetune.tuning.first_build import FirstBuildCheck

    check = FirstBuildCheck(NS(objective=NS(names=("latency",), constraints=())))
    dla = NS(as_dict=lambda: {"a": "DLA0", "b": "GPU"})
    unknown = Measurement("ok", latency_samples_ms=[1.0], extra={"placement_known": False,
                                                                 "placement_unknown": "the inspector's JSON was cut"})
    with caplog.at_level(logging.WARNING):
        check(dla, unknown)  # marked, measured on
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["PLACEMENT UNKNOWN"]
    check(dla, Measurement("ok", latency_samples_ms=[1.0], extra={"placement_known": True}))
    for _ in range(5):  # the stack reads placements: later unknown ones are only marked
        check(dla, unknown)
    fresh = FirstBuildCheck(NS(objective=NS(names=("latency",), constraints=())))
    fresh(dla, unknown), fresh(dla, unknown)
    with pytest.raises(BackendError, match=r"^first-build check placement failed: .* first 3 DLA placements in a row "
                                           r"\(the last: the inspector's JSON was cut\)"):
        fresh(dla, unknown)


@pytest.mark.parametrize("board", ["no-rails", "vdd-in-unreadable"])
def test_a_board_without_power_rails_stops_an_energy_study_at_its_first_build(board, tmp_path):
    """No rails, or an Orin NX whose VDD_IN (the module's input) cannot be read: the rails inside it
    do not add up to the module's power, so there is no energy figure and the study stops."""
    fakes = Path(__file__).parent / "fakes"
    rails = tmp_path / board
    if board == "vdd-in-unreadable":
        shutil.copytree(fakes / "sysfs" / "orin-nx", rails)
        (rails / "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1/curr1_input").unlink()
    study = tmp_path / "energy.toml"
    shutil.copy(DATA / "seed_model_gn.onnx.gz", tmp_path)  # a study file's paths stay in its folder
    study.write_text(f"""[study]
model = "seed_model_gn.onnx.gz"
backend = "trtexec"
mode = "engine"
objective = "energy"
precision = "fp16"
agent = "random"
trials = 4
storage = "sqlite:///{tmp_path / 'pt.db'}"
[backend_options]
trtexec = "{fakes / 'trtexec'}"
power_root = "{rails}"
warmup_ms = 5
duration_s = 0.2
[backend_options.env]
PLACETUNE_FAKE_TRTEXEC_VERSION = "10.3.0"
""")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "PATH": os.pathsep.join([str(_board(tmp_path)), os.path.dirname(sys.executable), os.environ["PATH"]])}
    # the study file names the program placetune runs (the fake trtexec): trusted explicitly
    proc = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", str(study), "--trust-study-file"],
                          cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    line = _stopped(proc, "objective")
    if board == "no-rails":
        assert "no energy figure" in line and "power rails" in line
    else:
        assert "no energy figure" in line and "rail VDD_IN was found but cannot be read" in line
        assert "curr1_input" in line


def test_a_study_refuses_to_resume_under_another_power_mode(tmp_path):
    proc = _tune(tmp_path, bin_dir=_board(tmp_path, "MAXN"))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    proc = _tune(tmp_path, "--trials", "6", bin_dir=_board(tmp_path, "15W"))
    err = [x for x in proc.stderr.splitlines() if x.startswith("placetune: error:")]
    assert proc.returncode == 6 and len(err) == 1, proc.stderr
    assert "exists with fingerprint.power_mode=MAXN" in err[0] and "this run has fingerprint.power_mode=15W" in err[0]


def test_the_placement_check_reads_the_backends_flag_first():
    """``extra["placement_known"]`` (the readers' flag) wins over the notes; its reason is shown."""
    from placetune.measurement import Measurement
    from placetune.tuning.first_build import placement_known

    note = "the build log has no DLA/GPU placement sections: realised placement is placetune's prediction"
    assert placement_known(Measurement("ok", latency_samples_ms=[1.0], extra={"notes": [note]})) is False
    assert placement_known(Measurement("ok", latency_samples_ms=[1.0], extra={"notes": [note],
                                                                              "placement_known": True})) is True
    assert placement_known(Measurement("ok", latency_samples_ms=[1.0], extra={"placement_known": False})) is False
    assert placement_known(Measurement("ok", latency_samples_ms=[1.0], extra={})) is True


def test_the_tensorrt_backend_measures_energy_in_engine_mode_with_power_on(tmp_path):
    """With its backend option power = true the tensorrt backend samples the rails from the parent
    while the worker times (cut to the worker's timed window): energy objectives are measured in
    engine mode, and still refused in the other modes and with power off."""
    from placetune.backends.registry import get_backend
    from placetune.errors import ConfigError
    from placetune.tuning.measurable import check_measurable

    sysfs = Path(__file__).parent / "fakes" / "sysfs" / "orin-agx"
    be = get_backend("tensorrt", worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "trt", warmup_ms=1.0,
                     profile_iterations=0, power=True, power_duration_s=0.3, power_root=sysfs, power_interval_s=0.01)
    try:
        measured = _measure_all_objectives(be, "engine", tmp_path)
    finally:
        be.close()
    assert {"energy", "latency+energy", "throughput+energy"} <= measured
    for objective in ("energy", "latency+energy", "throughput+energy"):
        check_measurable(objective, [], "tensorrt", "engine", {"power": True})
        for mode, options in (("pipeline", {"power": True}), ("replicas", {"power": True}), ("engine", {})):
            with pytest.raises(ConfigError, match=re.escape(f"objective {objective} cannot be measured by the "
                                                            f"tensorrt backend in {mode} mode")):
                check_measurable(objective, [], "tensorrt", mode, options)


def test_a_best_plan_whose_placement_is_unknown_is_named_so_in_the_summary(tmp_path):
    """The summary, read in the morning, says the best plan's placement is unknown (it printed an
    empty 'best placement (realised): ' line before), not only the warning of the first trial."""
    study = tmp_path / "no-inspector.toml"
    shutil.copy(DATA / "seed_model_gn.onnx.gz", tmp_path)
    shutil.copy(DATA / "resnet18.onnx.gz", tmp_path)  # its all-DLA0 baseline beats all-GPU on the doubles
    study.write_text('[study]\nmodel = "resnet18.onnx.gz"\n[backend_options]\ninspector = false\n')
    env = {**os.environ, **fake_env("10.3.0", NO_PLACEMENT_LOG="1")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env["PYTHONPATH"]])
    cmd = [sys.executable, "-m", "placetune.cli", "tune", str(study), "--backend", "tensorrt", "--mode", "engine",
           "--agent", "random", "--trials", "2", "--storage", f"sqlite:///{tmp_path / 'pt.db'}", "--study", "night"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    # the best plan is never exported (its placement was not read); the best known one is, exit 0 (it
    # exited 6 "nothing true to export" before, and the morning had no plan)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        recs = sorted(store.measurements("night"), key=lambda r: -r.measurement.throughput_fps)
    best, known = recs[0], recs[1]
    assert best.measurement.extra.get("placement_known") is False  # the all-DLA0 baseline wins, placement unknown
    assert known.measurement.placement_known  # all-GPU
    summary = proc.stdout.split("summary:", 1)[1]
    assert "best placement: UNKNOWN where TensorRT put its layers" in summary
    assert "best placement (realised): \n" not in summary + "\n"
    fig = f"{best.measurement.throughput_fps:,.0f} fps"
    assert f"NOT EXPORTED: the better plan, measurement {best.id} ({fig}), could not be exported: where " \
           "TensorRT put its layers was not read (neither the build log nor the engine's layer information" in summary
    assert f"exported instead: measurement {known.id} (" in summary and f"x slower than measurement {best.id}" in summary
    assert "placetune measure MODEL --backend tensorrt --mode engine --placement FILE.json" in summary
    plan = json.loads((tmp_path / "night.plan.json").read_text())
    assert plan["source"]["measurement_id"] == known.id and {x["realized"] for x in plan["layers"]} == {"GPU"}
    assert any(n.startswith(f"NOT EXPORTED: the better plan, measurement {best.id}") for n in plan["notes"])
    assert plan["measured"]["not_exported"]["measurement_id"] == best.id
    # placetune export later, from the database: the same rule, the same plan and warning
    out = tmp_path / "later.plan.json"
    proc = subprocess.run([sys.executable, "-m", "placetune.cli", "export", "--storage",
                           f"sqlite:///{tmp_path / 'pt.db'}", "--study", "night", "-o", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    later = json.loads(out.read_text())
    assert later["source"]["measurement_id"] == known.id and later["measured"]["not_exported"]["measurement_id"] == best.id
    assert f"NOT EXPORTED: the better plan, measurement {best.id}" in proc.stdout + proc.stderr


def test_the_summary_names_each_caveat_of_the_best_plan():
    from placetune.measurement import Measurement
    from placetune.tuning.verdict import best_caveats

    plain = Measurement("ok", latency_samples_ms=[1.0], extra={"placement_known": True})
    assert best_caveats(plain) == []
    unchecked = Measurement("ok", latency_samples_ms=[1.0], extra={"placement_unchecked": "segment 2: log only",
                                                                   "gate_unverified": "all zeros"})
    lines = best_caveats(unchecked)
    assert lines[0].startswith("best placement: read from the build log only") and "segment 2" in lines[0]
    assert lines[1].startswith("best plan's outputs: UNCHECKED") and "all zeros" in lines[1]
