"""`placetune tune`: embedded default, resume, SIGINT in a real subprocess, study files."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from placetune import ConfigError, Store
from placetune.cli.main import main
from placetune.tuning.studyfile import load_study_file, parse_duration

STUDIES = Path(__file__).resolve().parents[1] / "studies"


def _cli(*argv: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placetune.cli", *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def _measured_keys(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return [r[0] for r in con.execute("SELECT placement_key FROM pt_measurements")]


def test_embedded_default_runs_and_resumes(tmp_path):
    # the whole budget: the guided agent would stop after convergence here (tests/test_search_later.py)
    first = _cli("tune", "--trials", "25", "--no-stop-when-settled", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "embedded default" in first.stdout and "SIMULATED" in first.stdout
    # not a terminal: one structured line per evaluation
    lines = [x for x in first.stdout.splitlines() if x.startswith("trial=")]
    assert len(lines) == 25 and all("simulated=true" in x for x in lines)
    assert lines[-1].startswith("trial=25/25")
    keys = _measured_keys(tmp_path / "placetune.db")
    assert len(keys) == len(set(keys))
    again = _cli("tune", "--trials", "40", "--no-stop-when-settled", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "resuming: 25 of 40 trials already done" in again.stdout
    keys2 = _measured_keys(tmp_path / "placetune.db")
    assert len(keys2) == len(set(keys2)) and len(keys2) > len(keys)
    done = _cli("tune", "--trials", "40", "--no-stop-when-settled", cwd=tmp_path)
    assert "budget is already spent" in done.stdout
    assert _measured_keys(tmp_path / "placetune.db") == keys2


def test_mismatched_settings_on_resume_name_the_setting(tmp_path):
    assert _cli("tune", "--trials", "5", "--study", "s1", cwd=tmp_path).returncode == 0
    proc = _cli("tune", "--trials", "5", "--study", "s1", "--platform", "xavier-agx", cwd=tmp_path)
    assert proc.returncode == ConfigError.exit_code
    assert "platform=orin-agx" in proc.stderr and "xavier-agx" in proc.stderr and "Traceback" not in proc.stderr


def test_sigint_stops_cleanly_and_resume_finishes_budget(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--model", "resnet50", "--mode", "engine",
           "--granularity", "layer", "--agent", "random", "--trials", "400", "--study", "sig"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = 0
    for line in proc.stdout:
        if line.startswith("trial="):
            seen += 1
            if seen == 20:
                proc.send_signal(signal.SIGINT)
                break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "best found" in out and "Resume with: placetune tune" in out
    assert "stopping after the evaluation in flight" in err
    with Store(f"sqlite:///{tmp_path / 'placetune.db'}") as store:
        rec = store.study("sig")
        assert 20 <= rec.n_requests < 400
        rows = store.measurements("sig")
        assert all(r.measurement.ok for r in rows)
    with sqlite3.connect(tmp_path / "placetune.db") as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    again = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert again.returncode == 0, again.stderr
    with Store(f"sqlite:///{tmp_path / 'placetune.db'}") as store:
        assert store.study("sig").n_requests == 400
    keys = _measured_keys(tmp_path / "placetune.db")
    assert len(keys) == len(set(keys))  # no realised placement measured twice


def test_an_unmeasured_core_swapped_baseline_says_why(tmp_path, capsys):
    """The embedded default printed 'all-DLA1 (+fallback) not measured' with no reason: a study measures
    one plan of each DLA0/DLA1-swapped pair (identical cores), and the summary says so."""
    code = main(["tune", "--model", "seed-block", "--mode", "pipeline", "--trials", "8",
                 "--storage", f"sqlite:///{tmp_path / 'pt.db'}", "--export", str(tmp_path / "plan.json")])
    out = capsys.readouterr().out
    assert code == 0
    row = next(x for x in out.splitlines() if x.startswith("all-DLA1 (+fallback)"))
    assert "not measured: all-DLA0 (+fallback) with DLA0 and DLA1 swapped (identical cores)" in row
    assert re.search(r"^all-DLA0 \(\+fallback\) +[\d.]+ ", out, re.M)


def test_a_replicas_summary_speaks_of_replicas_not_of_one_engine(tmp_path, capsys):
    """Replicas mode printed engine-mode labels: 'all-DLA0 (+fallback)' and 'DLA0 n layers' for a placement
    that every DLA replica (DLA0 and DLA1) runs on its own core."""
    code = main(["tune", "--model", "seed-block", "--mode", "replicas", "--trials", "4",
                 "--storage", f"sqlite:///{tmp_path / 'pt.db'}", "--export", str(tmp_path / "plan.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "all-DLA0" not in out and re.search(r"^DLA replicas all-DLA \(\+fallback\) +[\d.]+ ", out, re.M)
    line = next(x for x in out.splitlines() if x.startswith("best placement"))
    assert line.startswith("best placement (realised) of the DLA replicas:") and "DLA0" not in line
    assert line.endswith("the GPU replica runs every layer on the GPU")


def test_tune_ends_with_what_to_run_next_and_hints_at_guided(tmp_path, capsys, monkeypatch):
    """A tune ended at 'plan exported': nothing said to export a deployment folder or a report; a weaker agent
    that found nothing better than all-GPU did not point at the guided agent."""
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "4", "--storage", "r.db"])
    out = capsys.readouterr().out
    assert code == 0 and "verdict: no plan better than all-GPU found by random" in out
    study = re.search(r"^study '([^']+)'", out, re.M).group(1)
    assert out.rstrip().splitlines()[-2:] == [
        f"next: placetune export --storage r.db --study {study} --format trtexec -o deploy   (build.sh and the "
        f"engines' ONNX, for the Jetson)", f"      placetune report --storage r.db --study {study} -o report   (plots)"]
    assert "hint: random found nothing better; the guided agent (the default)" in out and "--trials above 4" in out
    assert main(["export", "--storage", "r.db", "--study", study, "--format", "trtexec", "-o", "deploy"]) == 0


@pytest.mark.parametrize("path", sorted(STUDIES.glob("*.toml")), ids=lambda p: p.name)
def test_every_study_file_loads(path):
    cfg = load_study_file(path)
    assert cfg.study and cfg.trials >= 1 and cfg.model


@pytest.mark.parametrize("name", [p.name for p in sorted(STUDIES.glob("*.toml")) if p.name != "jetson-overnight.toml"])
def test_every_study_file_runs_on_the_simulator(tmp_path, name, capsys):
    code = main(["tune", str(STUDIES / name), "--trials", "12", "--storage", f"sqlite:///{tmp_path / 'pt.db'}",
                 "--export", str(tmp_path / "plan.json")])
    out = capsys.readouterr().out
    assert code == 0 and "best found" in out and "SIMULATED" in out


def test_jetson_template_runs_with_the_simulator_and_an_onnx_file(tmp_path, capsys):
    cfg = load_study_file(STUDIES / "jetson-overnight.toml")
    assert cfg.backend == "tensorrt" and cfg.timeout == 8 * 3600
    data = Path(__file__).parent / "data" / "resnet18.onnx.gz"
    code = main(["tune", str(STUDIES / "jetson-overnight.toml"), "--backend", "simulate", "--model", str(data),
                 "--trials", "8", "--storage", f"sqlite:///{tmp_path / 'pt.db'}",
                 "--export", str(tmp_path / "plan.json")])
    assert code == 0, capsys.readouterr().err


def test_study_file_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[study\nmodel = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_study_file(bad)
    bad.write_text("[study]\nmodle = 'resnet50'\n")
    with pytest.raises(ConfigError, match="modle"):
        load_study_file(bad)
    bad.write_text("[study]\ntrials = 0\n")
    with pytest.raises(ConfigError, match="trials"):
        load_study_file(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_study_file(tmp_path / "missing.toml")


def test_a_typo_in_settings_names_the_closest_key(tmp_path):
    bad = tmp_path / "typo.toml"
    bad.write_text("[study]\nmodel = 'seed-block'\n[settings]\ngpu_fallbak = true\n")
    with pytest.raises(ConfigError, match=r"\[settings\] has no key 'gpu_fallbak'; did you mean 'gpu_fallback'\?"):
        load_study_file(bad)
    bad.write_text("[study]\nmodel = 'seed-block'\n[settings]\nprecision = 'fp16'\n")
    with pytest.raises(ConfigError, match=r"precision: set it in \[study\]"):
        load_study_file(bad)


def test_parse_duration():
    assert parse_duration("8h") == 28800 and parse_duration("1h30m") == 5400 and parse_duration("90") == 90
    for bad in ("soon", "-5", "8x"):
        with pytest.raises(ConfigError):
            parse_duration(bad)
    # a unit given twice is refused, not added up ("1h1h" is not 2 h)
    for bad in ("1h1h", "30m1h30m", "5s5s"):
        with pytest.raises(ConfigError, match=r"^bad --timeout .*at most once \(e\.g\. 8h, 30m, 90s or 1h30m\)$"):
            parse_duration(bad)


def test_terminal_progress_bar(tmp_path, capsys):
    import io

    from placetune.tuning.studyfile import TuneConfig
    from placetune.tuning.tune import Tuner

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    cfg = TuneConfig(model="seed-block", trials=10, storage=f"sqlite:///{tmp_path / 'pt.db'}",
                     export=str(tmp_path / "p.json"))
    outcome = Tuner(cfg, out=out).run()
    text = out.getvalue()
    assert "\r[" in text and "10/10" in text and "vs all-GPU" in text and "trial=" not in text
    assert outcome.trials_done == 10 and outcome.best is not None


def test_progress_never_shows_nan_and_names_the_metric_with_its_unit(tmp_path):
    """The first trial once printed gain=nan (the all-GPU baseline was not known yet)."""
    proc = _cli("tune", "--trials", "4", "--agent", "random", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [x for x in proc.stdout.splitlines() if x.startswith("trial=")]
    assert lines and "nan" not in proc.stdout
    assert "gain=1.000" in lines[0]  # the first evaluation is the all-GPU baseline itself
    assert all(" throughput_fps=" in x and " best_throughput_fps=" in x for x in lines)
    assert "samples/s" not in proc.stdout and "throughput/s" not in proc.stdout


def test_terminal_bar_never_shows_nan(tmp_path):
    import io

    from placetune.tuning.studyfile import TuneConfig
    from placetune.tuning.tune import Tuner

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    out = Tty()
    cfg = TuneConfig(model="seed-block", trials=3, storage=f"sqlite:///{tmp_path / 'pt.db'}",
                     export=str(tmp_path / "p.json"))
    Tuner(cfg, out=out).run()
    assert "nan" not in out.getvalue()


@pytest.mark.parametrize("agent", ["local", "random", "reinforce"])
def test_sigint_with_any_agent_leaves_no_traceback_and_no_fail_trial(tmp_path, agent):
    """The first Ctrl-C ends every agent cleanly; its Optuna study keeps no FAIL/RUNNING trial."""
    optuna = pytest.importorskip("optuna")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--model", "resnet50", "--mode", "engine",
           "--granularity", "layer", "--agent", agent, "--trials", "400", "--study", "sig"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = 0
    for line in proc.stdout:
        if line.startswith("trial="):
            seen += 1
            if seen == 8:
                proc.send_signal(signal.SIGINT)
                break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "StopRequested" not in err and "KeyboardInterrupt" not in err, err
    assert "Resume with: placetune tune" in out
    st = optuna.load_study(study_name="sig", storage=f"sqlite:///{tmp_path / 'placetune.db'}")
    states = [t.state for t in st.get_trials(deepcopy=False)]
    assert states and optuna.trial.TrialState.FAIL not in states and optuna.trial.TrialState.RUNNING not in states
    with Store(f"sqlite:///{tmp_path / 'placetune.db'}") as store:
        assert len(states) == store.study("sig").n_requests  # every stored evaluation is a trial, nothing more


def what_will_run(out: str) -> str:
    """The ``what will run:`` line and the indented lines under it, as one string."""
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("what will run:"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return "\n".join(lines[start:end])


def test_every_run_says_what_will_run_and_model_runs_share_the_embedded_defaults(tmp_path, capsys, monkeypatch):
    """--model runs once had other defaults (engine/fp16/latency) than the embedded default
    (pipeline/int8/throughput), visible only in a later mismatch error; custom runs said '(embedded default)'."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--trials", "3", "--agent", "random"]) == 0
    embedded = capsys.readouterr().out
    assert main(["tune", "--model", "resnet50", "--trials", "3", "--agent", "random"]) == 0
    custom = capsys.readouterr().out
    assert "(embedded default)" in embedded and "embedded default" not in custom
    for out in (embedded, custom):
        line = what_will_run(out)
        for part in ("model resnet50", "platform orin-agx (SIMULATED Jetson)", "TensorRT 8.6 DLA rules",
                     "pipeline (4 frames in flight) mode", "int8", "objective throughput", "agent random",
                     "budget 3 trials", "backend simulate"):
            assert part in line, (part, line)
    assert "batch 2" in embedded and "batch 1" in custom
    assert main(["tune", "--model", "resnet50", "--platform", "xavier-agx", "--trials", "2"]) == 0
    assert "TensorRT 8.5 DLA rules" in capsys.readouterr().out


def test_a_study_made_with_the_old_defaults_keeps_resuming(tmp_path, capsys, monkeypatch):
    """Xavier's default TensorRT rules became 8.5; a study created with 8.6 (the old default)
    resumes with its own settings instead of silently starting a new study."""
    from placetune.tuning.evaluator import Evaluator

    monkeypatch.chdir(tmp_path)
    db = tmp_path / "placetune.db"
    for study in ("named", None):
        ev = Evaluator("resnet50", "xavier-agx", mode="pipeline", precision="int8", objective="throughput",
                       store=f"sqlite:///{db}", study=study, trt_version="8.6", frames_in_flight=1)
        ev.baseline()
        ev.store.close()
    old_names = {s.name for s in Store(f"sqlite:///{db}").studies()}
    assert main(["tune", "--model", "resnet50", "--platform", "xavier-agx", "--trials", "3", "--study", "named"]) == 0
    assert "TensorRT 8.6 DLA rules" in capsys.readouterr().out
    assert main(["tune", "--model", "resnet50", "--platform", "xavier-agx", "--trials", "3"]) == 0
    out = capsys.readouterr().out
    assert "resuming: 1 of 3 trials already done" in out and "TensorRT 8.6 DLA rules" in out
    assert {s.name for s in Store(f"sqlite:///{db}").studies()} == old_names  # no new study


def test_when_all_gpu_stays_best_the_verdict_says_what_it_rests_on_and_why(tmp_path, capsys):
    """Studies that ended with all-GPU best (1.00x) said why, as a claim about the device ("all-GPU
    wins"): the verdict names the agent and the trials it rests on, then the cost terms."""
    code = main(["tune", str(STUDIES / "seed-block-pipeline.toml"), "--storage", f"sqlite:///{tmp_path / 'pt.db'}",
                 "--export", str(tmp_path / "plan.json")])
    out = capsys.readouterr().out
    assert code == 0 and "best placement (realised): GPU 5 layers (100%)" in out and "wins" not in out
    why = next(x for x in out.splitlines() if x.startswith("verdict:"))
    # the study file's agent enumerates the 243 placements: it rests on all of them
    assert why.startswith("verdict: no plan better than all-GPU found by exact in 243 trials (simulated figures); ")
    assert re.search(r"latency [\d.]+ ms against [\d.]+ ms all-GPU\) pays [\d.]+ ms for \d+ GPU<->DLA boundar(y|ies) "
                     r"and [\d.]+ ms of DLA\d work", why), why
    code = main(["tune", str(STUDIES / "resnet50-throughput-orin.toml"), "--trials", "12", "--storage",
                 f"sqlite:///{tmp_path / 'pt.db'}", "--export", str(tmp_path / "plan2.json")])
    out = capsys.readouterr().out  # the DLAs pay here: nothing to explain
    assert code == 0 and "against" not in next(x for x in out.splitlines() if x.startswith("verdict:"))


@pytest.mark.parametrize("path", sorted(STUDIES.glob("*.toml")), ids=lambda p: p.name)
def test_every_study_file_states_what_it_demonstrates(path):
    """Each study file says what it demonstrates."""
    header = path.read_text().split("[study]")[0]
    assert "# Demonstrates:" in header


@pytest.mark.parametrize("argv, field", [
    (["measure", "seed-block", "--mode", "pipeline", "--frames-in-flight", "10000"], "--frames-in-flight"),  # the option, as given
    (["measure", "seed-block", "--noise", "inf"], "noise"),
    (["measure", "seed-block", "--noise", "nan"], "noise"),
    (["tune", "STUDY:frames_in_flight = 100000000"], "frames_in_flight"),
    (["tune", "STUDY:iterations = 100000000"], "iterations"),
])
def test_unbounded_settings_are_refused_in_one_line(argv, field, tmp_path, capsys, monkeypatch):
    """--frames-in-flight 10000 once ran for minutes (1e8 never ended), --noise inf
    gave status ok with a NaN median, iterations = 1e8 was accepted; each is refused up front,
    naming the field and what is allowed, before anything is stored."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "pt.db"
    if argv[0] == "tune":
        study = tmp_path / "s.toml"
        study.write_text('[study]\nname = "bounded"\nmodel = "seed-block"\nmode = "pipeline"\ntrials = 3\n\n'
                         f"[settings]\n{argv[1].partition(':')[2]}\n")
        argv = ["tune", str(study), "--storage", f"sqlite:///{db}"]
    t0 = time.monotonic()
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == ConfigError.exit_code and time.monotonic() - t0 < 20
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and field in lines[0] and "must be" in lines[0] and "Traceback" not in err, err
    if db.exists():
        with Store(f"sqlite:///{db}") as store:
            assert not store.studies()


@pytest.mark.parametrize("argv, field", [
    (["measure", "seed-block", "--trt-version", "99"], "trt_version"),
    (["measure", "seed-block", "--mode", "replicas", "--replicas", "GPU:1,GPU:2"], "GPU twice"),
    (["measure", "seed-block", "--mode", "engine", "--replicas", "GPU:1"], "replicas are for mode"),
    (["tune", "--model", "seed-block", "--study", "", "--trials", "2"], "study must be"),
    (["tune", "STUDY:trials = true"], "trials must be"),
    (["tune", "STUDY:timeout = true"], "timeout must be"),
])
def test_values_that_were_accepted_are_refused(argv, field, tmp_path, capsys, monkeypatch):
    """Values once accepted are refused: one line naming the field, nothing stored."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "pt.db"
    if argv[-1].startswith("STUDY:"):
        study = tmp_path / "s.toml"
        study.write_text(f'[study]\nname = "s"\nmodel = "seed-block"\n{argv[-1].partition(":")[2]}\n')
        argv = ["tune", str(study)]
    if argv[0] == "tune":
        argv = argv + ["--storage", f"sqlite:///{db}"]
    code = main(argv)
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert code == ConfigError.exit_code and len(lines) == 1 and field in lines[0], err
    if db.exists():
        with Store(f"sqlite:///{db}") as store:
            assert not store.studies()


def test_the_multi_camera_study_gives_each_streams_frames_per_second(tmp_path, capsys):
    """studies/multi-camera.toml: four streams of one detector; the summary and the plan say what each stream gets."""
    from placetune.plan.file import Plan

    assert load_study_file(STUDIES / "multi-camera.toml").streams == 4
    code = main(["tune", str(STUDIES / "multi-camera.toml"), "--trials", "6", "--agent", "local",
                 "--storage", f"sqlite:///{tmp_path / 'pt.db'}", "--export", str(tmp_path / "plan.json")])
    out = capsys.readouterr().out
    assert code == 0 and "SIMULATED" in out
    best = float(re.search(r"^best found +[\d.]+ +([\d,.]+)", out, re.M).group(1).replace(",", ""))
    gpu = float(re.search(r"^all-GPU +[\d.]+ +([\d,.]+)", out, re.M).group(1).replace(",", ""))
    line = re.search(r"^per stream \(4 streams sharing the frames evenly\): all-GPU ([\d.,]+) fps, .*best found "
                     r"([\d.,]+) fps each$", out, re.M)
    assert line is not None, out
    assert float(line.group(1)) == pytest.approx(gpu / 4, rel=2e-3)
    assert float(line.group(2)) == pytest.approx(best / 4, rel=2e-3)
    plan = Plan.load(tmp_path / "plan.json")
    assert plan.measured["streams"] == {"streams": 4, "per_stream_fps": pytest.approx(plan.measured["throughput_fps"] / 4)}
    assert f"per stream: 4 streams at {plan.measured['throughput_fps'] / 4:,.1f} frames/s each" in plan.summary()
    assert any(n.startswith("per stream (4 streams") for n in plan.notes)
    # --streams on the command line, and a bad value named with what is allowed (exit 6)
    assert main(["tune", "--model", "seed-block", "--streams", "0", "--storage", f"sqlite:///{tmp_path / 'b.db'}"]) == 6
    assert "--streams must be an integer from 1 to 1024" in capsys.readouterr().err
    bad = tmp_path / "bad.toml"
    bad.write_text('[study]\nmodel = "seed-block"\nstreams = "four"\n')
    assert main(["tune", str(bad), "--storage", f"sqlite:///{tmp_path / 'c.db'}"]) == 6
    assert "streams must be an integer" in capsys.readouterr().err
    # a hand-edited plan with a bad streams entry is refused with one line, not a traceback
    doc = json.loads((tmp_path / "plan.json").read_text())
    doc["measured"]["streams"] = {"streams": "4"}
    with pytest.raises(ConfigError, match="measured.streams must be"):
        Plan.from_dict(doc)


def test_the_agent_s_drift_line_goes_into_the_exported_plan(tmp_path, capsys, monkeypatch):
    """The guided agent rebuilds its best plan through the night and says at the end how far the board's
    measurements drifted ('drift: measurements moved ...'); that line was printed only, so a user who
    came back to the plan file never saw that its figures rest on a drifting board."""
    import search
    from search.random_search import RandomAgent

    class Drifting(RandomAgent):
        name = "drifting"

        def search(self, evaluator, budget):
            result = super().search(evaluator, budget)
            result.notes.append("drift: measurements moved +12.0% per 10 builds (from the plans built more than once)")
            return result

    monkeypatch.setattr(search, "_REGISTRY", dict(search._REGISTRY))
    search.register_agent("drifting", Drifting)
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "--model", "seed-block", "--agent", "drifting", "--trials", "4", "--storage", "r.db",
                 "--export", "best.plan.json"])
    out = capsys.readouterr().out
    assert code == 0 and "drift: measurements moved +12.0% per 10 builds" in out
    plan = json.loads((tmp_path / "best.plan.json").read_text())
    assert any(n.startswith("drift: measurements moved +12.0%") for n in plan["notes"]), plan["notes"]


def test_an_interrupted_guided_run_keeps_its_drift_line(tmp_path, capsys, monkeypatch):
    """Ctrl-C mid-study: the guided agent's run ends with StopRequested, so its end-of-run notes were never
    made and the drift its rebuilds had seen so far was neither said nor written into the plan the
    interrupted run exports. It now goes with the interrupted run's summary and plan as at a full run's end."""
    import os
    import signal

    from placetune.tuning.evaluator import Evaluator
    from search.drift import Drift

    line = "drift: measurements moved +12.0% per 10 builds (from the plans built more than once)"
    seen = []
    monkeypatch.setattr(Drift, "drift_note", lambda self: seen.append(self.build_log is not None) or line)
    evaluate = Evaluator.evaluate
    calls = []

    def evaluate_then_ctrl_c(self, *a, **kw):
        m = evaluate(self, *a, **kw)
        calls.append(1)
        if len(calls) == 12:
            os.kill(os.getpid(), signal.SIGINT)  # the tune's handler: stop after the evaluation in flight
        return m

    monkeypatch.setattr(Evaluator, "evaluate", evaluate_then_ctrl_c)
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "--model", "seed-block", "--agent", "guided", "--trials", "40", "--storage", "r.db",
                 "--export", "best.plan.json"])
    out = capsys.readouterr().out
    assert code == 130, out
    assert "interrupted after" in out and line in out and seen
    plan = json.loads((tmp_path / "best.plan.json").read_text())
    assert line in plan["notes"], plan["notes"]
