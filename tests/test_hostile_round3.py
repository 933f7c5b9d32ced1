"""What a hostile user and a fresh fuzz seed found: commands that wrote nothing and said they had,
outputs that vanish, study files that reach beyond their folder, parsers without bounds, locks that
could be removed from under a run. Each case failed before its fix."""

from __future__ import annotations

import json
import os
import resource
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import placetune
from placetune import Placement
from placetune.cli.main import main
from tests.fakes import fake_env

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"


def _cli(args: list[str], cwd: Path, env: dict[str, str] | None = None, preexec=None, timeout: int = 300,
         **kw) -> subprocess.CompletedProcess:
    """``python -m placetune.cli ARGS`` in a subprocess importing this checkout (and ``env``)."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if env and "PYTHONPATH" in env:
        full["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(ROOT)
    return subprocess.run([sys.executable, "-m", "placetune.cli", *map(str, args)], cwd=cwd, env=full,
                          preexec_fn=preexec, text=True, timeout=timeout, **({"capture_output": True} | kw))


def _one_line_error(proc: subprocess.CompletedProcess, code: int, *words: str) -> None:
    err = proc.stderr
    assert proc.returncode == code, (proc.returncode, err[-1500:], proc.stdout[-500:])
    assert "Traceback" not in err, err[-1500:]
    line = [x for x in err.splitlines() if x.startswith("placetune: error: ")]
    assert line and all(w in line[0] for w in words), err[-1500:]


def _exported(tmp: Path, precision: str) -> Path:
    """A plan folder of one measured all-DLA engine placement of the GroupNorm model."""
    url = f"sqlite:///{tmp}/{precision}.db"
    with placetune.Evaluator(str(DATA / "seed_model_gn.onnx.gz"), "orin-agx", mode="engine", precision=precision,
                             store=url, study="s") as ev:
        ev.baselines()
        m = ev.evaluate(Placement.all_dla(ev.model), agent="t", trial_number=0)
    out = tmp / f"{precision}-plan"
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0
    return out


# ---------------------------------------------------------------------------------------------- writes


def test_an_int8_plan_without_a_calibration_cache_builds_every_engine(tmp_path):
    """INT8 without a cache (the default precision) said it built every engine and wrote none: the
    placeholder ranges' tensor names replaced the list of files to copy into the folder."""
    folder = _exported(tmp_path, "int8")
    proc = _cli(["build", folder], tmp_path, env=fake_env("10.3.0"))
    for name in ("model.engine", "model.engine.json"):
        assert (folder / name).stat().st_size > 0, name
    report = json.loads((folder / "build.json").read_text())
    # built: exit 1 exactly when some layer is not known to run where the plan says (build.json lists it)
    assert proc.returncode == (0 if not report["differences"] and report["placement_known"] else 1), proc.stderr[-2000:]
    assert (folder / report["engines"][0]["engine_file"]).stat().st_size == report["engines"][0]["engine_bytes"]


def test_a_failed_engine_write_fails_the_build_naming_the_file(tmp_path):
    """A file-size limit (a full disk) kept the worker from writing the engine: build said it built it, exit 0."""
    folder = _exported(tmp_path, "fp16")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))

    proc = _cli(["build", folder], tmp_path, env=fake_env("10.3.0"), preexec=limit)
    _one_line_error(proc, 8, "model.engine", "not written")
    assert not (folder / "model.engine").exists() and not (folder / "build.json").exists()


def test_export_never_writes_a_plan_its_own_loader_refuses(tmp_path, capsys):
    """A stored ``mode`` edited to 0 was exported as a plan ``placetune`` itself then refused to load."""
    db = tmp_path / "t.db"
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "s.plan.json")]) == 0
    con = sqlite3.connect(db)
    con.execute("update pt_studies set mode=0")
    con.commit()
    con.close()
    capsys.readouterr()
    assert main(["export", "--study", "s", "--storage", str(db), "-o", str(tmp_path / "p.json")]) == 7
    err = capsys.readouterr().err
    assert "unknown mode '0'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


# ---------------------------------------------------------------------------------------------- outputs


def test_a_tune_whose_output_pipe_closes_stops_cleanly_with_an_error_exit(tmp_path):
    """``placetune tune | head`` exited 0 with 18 of 150 trials stored and no plan: now the tune stops
    after the evaluation in flight, stores it, exports the plan and says on stderr where it stopped."""
    db = tmp_path / "p.db"
    argv = [sys.executable, "-m", "placetune.cli", "tune", "--model", "seed-block", "--trials", "150", "--agent",
            "random", "--storage", str(db), "--study", "s", "--export", str(tmp_path / "p.plan.json")]
    proc = subprocess.Popen(argv, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    trials = 0
    while trials < 2:  # what `head` reads (the 'what will run' block, the first trial lines), then it goes away
        line = proc.stdout.readline()
        assert line
        trials += line.startswith("trial=")
    proc.stdout.close()
    err = proc.stderr.read()
    rc = proc.wait(timeout=120)
    assert rc == 6 and "Traceback" not in err, (rc, err[-2000:])
    lines = err.strip().splitlines()
    assert lines[-1].startswith("placetune: error: the standard output was closed"), err
    stopped = [x for x in lines if "the tune stopped after" in x]
    assert stopped and "of 150 trials; everything measured is stored. Resume with: placetune tune" in stopped[0]
    done = int(stopped[0].split("stopped after ")[1].split()[0])
    assert 1 <= done < 150
    con = sqlite3.connect(db)
    stored = con.execute("select count(*) from pt_requests").fetchone()[0]
    con.close()
    assert stored >= done
    assert (tmp_path / "p.plan.json").stat().st_size > 100


@pytest.mark.parametrize("how", ["full", "closed"])
@pytest.mark.parametrize("command", ["studies", "export", "zoo list"])
def test_a_full_or_closed_standard_output_is_an_error_line_not_a_traceback(how, command, tmp_path):
    db = tmp_path / "b.db"
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "s.plan.json")]) == 0
    argv = {"studies": ["studies", "--storage", db], "export": ["export", "--study", "s", "--storage", db],
            "zoo list": ["zoo", "list"]}[command]
    cmd = " ".join(f"'{a}'" for a in [sys.executable, "-m", "placetune.cli", *map(str, argv)])
    if how == "full":
        os.mknod(tmp_path / "full", 0o20666, os.makedev(1, 7))  # like /dev/full, in the test's own folder
        cmd += f" > '{tmp_path / 'full'}'"
    else:
        cmd += " >&-"
    proc = subprocess.run(["sh", "-c", cmd], cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)
    why = "is full" if how == "full" else "is closed"
    _one_line_error(proc, 6, f"the standard output {why}")
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# ---------------------------------------------------------------------------------------------- links


def test_a_failed_write_through_a_symlink_leaves_its_file_whole(tmp_path):
    """A write through an output symlink opened the linked file with O_TRUNC: a write that failed
    half-way (a full disk, an error in the data) left it truncated. The linked file is now replaced
    through a temporary file in its own folder: it stays as it was, the link stays a link."""
    from placetune.errors import ConfigError
    from placetune.files.write import write_file

    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "plan.json"
    target.write_text("the user's plan\n")
    target.chmod(0o640)
    link = tmp_path / "out.json"
    link.symlink_to(target)

    def half(fh):
        fh.write(b"{\"half\": ")
        fh.flush()
        raise OSError(28, "No space left on device")

    with pytest.raises(ConfigError, match="No space left on device"):
        write_file(link, half, "plan file")
    assert target.read_text() == "the user's plan\n" and link.is_symlink()
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["plan.json"]  # no temporary file left
    write_file(link, "{}\n", "plan file")
    assert target.read_text() == "{}\n" and link.is_symlink() and os.readlink(link) == str(target)
    assert (target.stat().st_mode & 0o777) == 0o640


def test_a_file_size_limit_on_an_output_symlink_keeps_the_linked_file(tmp_path):
    db = tmp_path / "b.db"
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "s.plan.json")]) == 0
    target = tmp_path / "kept.json"
    target.write_text("x" * 100)
    (tmp_path / "out.json").symlink_to(target)

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (2000, 2000))

    proc = _cli(["trace", tmp_path / "s.plan.json", "-o", tmp_path / "out.json", "--force"], tmp_path,  # not a trace
                preexec=limit)
    _one_line_error(proc, 6, "out.json", "File too large")
    assert target.read_text() == "x" * 100


# ---------------------------------------------------------------------------------------------- study files


def _study_file(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    f = folder / "study.toml"
    model = "" if body.startswith("model = ") else 'model = "seed-block"\n'
    f.write_text('[study]\n' + model + 'trials = 2\nagent = "random"\n' + body)
    return f


@pytest.mark.parametrize("body, what", [
    ('[backend_options]\ntrtexec = "/tmp/evil"\n', "trtexec"),
    ('[backend_options]\nworker_python = "/tmp/evil"\n', "worker_python"),
    ('[backend_options]\nworker_env = { LD_PRELOAD = "/tmp/evil.so" }\n', "worker_env"),
    ('[backend_options]\nenv = { LD_PRELOAD = "/tmp/evil.so" }\n', "env"),
    ('[backend_options]\nbuild_args = ["--saveEngine=/etc/x"]\n', "build_args"),
])
def test_a_study_file_names_no_program_nor_environment(body, what, tmp_path, capsys):
    """[backend_options] let a study file choose the program placetune runs and its LD_PRELOAD."""
    f = _study_file(tmp_path / "s", 'backend = "trtexec"\n' + body)
    code = main(["tune", str(f), "--storage", str(tmp_path / "s" / "t.db")])
    err = capsys.readouterr().err
    assert code == 6 and what in err and "--trust-study-file" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s" / "t.db").exists()


@pytest.mark.parametrize("key, value", [
    ("export", "{outside}/victim.txt"),
    ("storage", "sqlite:///{outside}/x.db"),
    ("device_profile", "{outside}/p.toml"),
    ("model", "{outside}/m.onnx"),
    ("export", "../victim.txt"),
])
def test_a_study_file_s_paths_stay_in_its_folder_and_the_working_folder(key, value, tmp_path, capsys,
                                                                        monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "victim.txt").write_text("keep")
    (outside / "victim.txt").write_text("keep")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    f = _study_file(work / "studies", f'{key} = "{value.format(outside=outside)}"\n')
    code = main(["tune", str(f), "--storage", str(work / "t.db")] if key != "storage" else ["tune", str(f)])
    err = capsys.readouterr().err
    assert code == 6 and f"{key} = " in err and "outside the study file's folder" in err, err
    assert (outside / "victim.txt").read_text() == "keep" and (tmp_path / "victim.txt").read_text() == "keep"
    assert not (outside / "x.db").exists()


def test_a_study_file_never_exports_over_itself_nor_over_a_file_placetune_did_not_write(tmp_path, capsys,
                                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    f = _study_file(tmp_path, 'export = "study.toml"\n')
    before = f.read_text()
    assert main(["tune", str(f), "--storage", str(tmp_path / "t.db")]) == 6
    assert "itself" in capsys.readouterr().err and f.read_text() == before
    (tmp_path / "notes.txt").write_text("mine")
    g = _study_file(tmp_path / "g", 'export = "notes.txt"\n')  # relative to the working folder
    assert main(["tune", str(g), "--storage", str(tmp_path / "t.db")]) == 6
    assert "not a file placetune wrote" in capsys.readouterr().err and (tmp_path / "notes.txt").read_text() == "mine"


def test_a_trusted_study_file_and_the_command_line_are_not_confined(tmp_path, capsys, monkeypatch):
    outside = tmp_path / "outside"
    outside.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    f = _study_file(work / "studies", f'export = "{outside}/p.plan.json"\n')
    assert main(["tune", str(f), "--storage", str(work / "t.db"), "--trust-study-file"]) == 0
    assert (outside / "p.plan.json").stat().st_size > 100
    g = _study_file(work / "other", "")
    assert main(["tune", str(g), "--storage", str(tmp_path / "t2.db"), "--export", str(outside / "r.plan.json")]) == 0
    assert (outside / "r.plan.json").is_file() and (tmp_path / "t2.db").is_file()


# ---------------------------------------------------------------------------------------------- bounded parsing


@pytest.mark.parametrize("body, pattern", [
    ("a" + ".a" * 100_000 + " = 1\n", "dotted key of more than 64 parts"),  # once grew to 23 GB in tomllib
    ("[" + "a." * 5000 + "b]\n", "dotted key of more than 64 parts"),
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply: arrays and tables more than 64 deep"),  # once a RecursionError traceback
    ("x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply: arrays and tables more than 64 deep"),
])
@pytest.mark.parametrize("kind", ["study file", "device profile"])
def test_toml_nesting_and_dotted_keys_are_bounded_before_the_parser(body, pattern, kind, tmp_path, capsys):
    from tests.hostile import memory_cap

    f = tmp_path / "f.toml"
    f.write_text(('[study]\nmodel = "seed-block"\n' if kind == "study file" else "") + body)
    argv = ["tune", str(f)] if kind == "study file" else ["tune", "--model", "seed-block", "--device-profile", str(f)]
    with memory_cap(1 << 30):
        code = main(argv + ["--storage", str(tmp_path / "t.db"), "--trials", "2"])
    err = capsys.readouterr().err
    assert code == 6 and pattern in err and kind in err and len(err.strip().splitlines()) == 1, err[-500:]


def test_json_nesting_is_bounded_before_the_parser(tmp_path, capsys):
    from placetune.errors import ConfigError
    from placetune.validate import loads_json

    with pytest.raises(ConfigError, match="nested too deeply: arrays and tables more than 64 deep"):
        loads_json("[" * 100_000 + "]" * 100_000, "x.json")
    assert loads_json('{"a": "\\"' + "[" * 80 + '"}', "x") == {"a": '"' + "[" * 80}  # in a string: text


def test_strings_and_comments_are_not_counted_as_structure(tmp_path):
    from placetune.tuning.studyfile import load_study_file

    f = tmp_path / "s.toml"
    f.write_text('[study]\nmodel = "seed-block"\nname = "' + "a." * 90 + '[[[{{"  # ' + "[" * 90 + "\n"
                 "platform = '''\n" + "." * 200 + "'''\n")
    assert load_study_file(f, trusted=True).study == "a." * 90 + "[[[{{"


@pytest.mark.parametrize("body, pattern", [
    ('[study]\nmodel = "seed-block"\ntimeout = ' + "9" * 400 + "\n", "timeout must be positive and at most"),
])
def test_integers_beyond_a_float_are_refused_by_the_validators(body, pattern, tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(body)
    code = main(["tune", str(f), "--storage", str(tmp_path / "t.db")])
    err = capsys.readouterr().err
    assert code == 6 and pattern in err and "Traceback" not in err, err[-800:]


def test_a_device_profile_integer_beyond_a_float_is_refused(tmp_path, capsys):
    f = tmp_path / "p.toml"
    f.write_text("base = \"orin-agx\"\n[noise]\nlayer_sigma = " + "9" * 400 + "\n")
    code = main(["tune", "--model", "seed-block", "--device-profile", str(f), "--storage", str(tmp_path / "t.db")])
    err = capsys.readouterr().err
    assert code == 6 and "layer_sigma must be finite" in err and len(err.strip().splitlines()) == 1, err[-800:]


def test_a_report_of_names_that_look_like_math_text(tmp_path, capsys):
    """``report`` died on ``$...$`` in a study name: matplotlib parsed it as math text."""
    db = tmp_path / "r.db"
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage", str(db),
                 "--study", "a $\\frac{x}$ b", "--export", str(tmp_path / "p.json")]) == 0
    capsys.readouterr()
    assert main(["report", "--storage", str(db), "-o", str(tmp_path / "rep")]) == 0, capsys.readouterr().err
    assert (tmp_path / "rep" / "progress.png").stat().st_size > 1000


def test_a_bug_s_traceback_is_escaped_like_every_message(monkeypatch, capsys):
    import importlib

    cli = importlib.import_module("placetune.cli.main")

    def boom(args):
        raise RuntimeError("\x1b]0;pwned\x07 a bug")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["studies"].set_defaults(func=boom)
    assert main(["studies", "--storage", "x.db"]) == 1
    err = capsys.readouterr().err
    assert "internal error" in err and "RuntimeError" in err and "\x1b" not in err and "\x07" not in err


# ---------------------------------------------------------------------------------------------- the database


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    d = tmp_path_factory.mktemp("db")
    db = d / "base.db"
    assert main(["tune", "--model", "seed-block", "--trials", "6", "--agent", "optuna", "--storage", str(db),
                 "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db


def _copy(src: Path, dst: Path, sql: str = "") -> Path:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
        if sql:
            b.executescript(sql)
            b.commit()
    return dst


def test_a_removed_lock_file_never_lets_a_second_tune_write_the_same_database(small_db, tmp_path, capsys):
    """Deleting ``<db>.tune-lock`` let a second tune write the same study at once (111 trials for a
    budget of 60): the database file itself is locked for the whole run."""
    from placetune.tuning.fleet_locks import SingleWriterLock

    db = _copy(small_db, tmp_path / "t.db")
    lock = SingleWriterLock(db).acquire()  # the first run
    try:
        Path(str(db) + ".tune-lock").unlink()
        capsys.readouterr()
        code = main(["tune", "--model", "seed-block", "--trials", "12", "--agent", "random", "--storage", str(db),
                     "--study", "s", "--export", str(tmp_path / "p.json")])
        err = capsys.readouterr().err
        assert code == 7 and "already being written by another placetune tune" in err, err
    finally:
        lock.release()
    assert main(["tune", "--model", "seed-block", "--trials", "8", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "p.json")]) == 0  # released: the next run goes


def test_trials_a_killed_run_left_running_are_failed_on_resume(small_db, tmp_path):
    import optuna

    db = _copy(small_db, tmp_path / "t.db")
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    study.ask()  # what a killed run leaves: a trial RUNNING forever
    assert len(study.get_trials(states=(optuna.trial.TrialState.RUNNING,))) == 1
    assert main(["tune", "--model", "seed-block", "--trials", "8", "--agent", "optuna", "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "p.json")]) == 0
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{db}")
    assert not study.get_trials(states=(optuna.trial.TrialState.RUNNING,))
    assert len(study.get_trials(states=(optuna.trial.TrialState.FAIL,))) == 1


@pytest.mark.parametrize("sql, pattern", [
    ("update pt_measurements set requested='{\"\":[]}'", "column requested is"),
    ("update trials set state='BOGUS'", "Optuna tables of"),
    ("update trial_params set distribution_json='{bad'", "Optuna tables of"),
    ("update trial_params set param_value='x'", "Optuna tables of"),
    ("update trials set datetime_start='garbage'", "Optuna tables of"),
    ("update trial_user_attributes set value_json='{bad'", "Optuna tables of"),
    ("delete from study_directions", "has the directions []"),
    # a fresh fuzz seed (1076189701) found it: Optuna hands the attribute back as stored, and list(1) raised
    ("update study_system_attributes set value_json=1", "has the metric names '1'"),
    # and seed 1600606749: a parameter without a name reached a sort of the trial's parameters
    ("update trial_params set param_name=NULL where rowid = 1", "Optuna tables of"),
    ("update trial_user_attributes set key=NULL where rowid = 1", "Optuna tables of"),
])
@pytest.mark.parametrize("agent", ["optuna", "random"])
def test_edited_rows_stop_a_resume_with_one_line(sql, pattern, agent, small_db, tmp_path, capsys):
    db = _copy(small_db, tmp_path / "t.db", sql)
    capsys.readouterr()
    code = main(["tune", "--model", "seed-block", "--trials", "10", "--agent", agent, "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code == 7 and pattern in err and "Traceback" not in err, err[-1500:]
    assert len([x for x in err.splitlines() if x.startswith("placetune: error:")]) == 1, err[-1500:]


def test_studies_lists_a_database_with_an_edited_requested_map_as_an_error_line(small_db, tmp_path, capsys):
    db = _copy(small_db, tmp_path / "t.db", "update pt_measurements set requested='{\"\":[]}'")
    capsys.readouterr()
    code = main(["studies", "--storage", str(db)])
    err = capsys.readouterr().err
    assert code == 7 and "column requested is" in err and len(err.strip().splitlines()) == 1, err


# ---------------------------------------------------------------------------------------------- runtime


RUNTIME_CASES = r'''
import json, shutil, sys
from pathlib import Path
import numpy as np
import placetune.runtime
from placetune.errors import PlacetuneError

folder = Path(sys.argv[1])
out = {}

def attempt(name, fn):
    try:
        fn()
        out[name] = "ok"
    except PlacetuneError as exc:
        out[name] = "placetune: " + type(exc).__name__ + ": " + str(exc)
    except Exception as exc:
        out[name] = "python: " + type(exc).__name__ + ": " + str(exc)

def without(i):
    d = folder.parent / f"without{i}"
    shutil.copytree(folder, d)
    doc = json.loads((d / "plan.json").read_text())
    del doc["engines"][i]
    for k, e in enumerate(doc["engines"]):  # renumbered, as a careful edit would
        e["index"] = k
        e["predecessors"] = [p for p in e.get("predecessors") or [] if p < len(doc["engines"])]
    (d / "plan.json").write_text(json.dumps(doc))
    return d

attempt("middle segment missing", lambda: placetune.runtime.load(without(1)))
attempt("last segment missing", lambda: placetune.runtime.load(without(-1)))
attempt("folder not a path", lambda: placetune.runtime.load(123))
rt = placetune.runtime.load(folder)
shape = rt.inputs["input"][0]
attempt("frames_in_flight text", lambda: list(rt.stream([{"input": np.zeros(shape, np.float32)}], frames_in_flight="x")))
attempt("text input", lambda: rt({"input": np.full(shape, "a")}))
attempt("ragged input", lambda: rt({"input": [[1.0], [1.0, 2.0]]}))
attempt("good input", lambda: rt({"input": np.zeros(shape, np.float32)}))
print(json.dumps(out))
'''


def test_the_runtime_speaks_placetune_errors_and_refuses_a_plan_with_a_segment_missing(tmp_path):
    """``placetune.runtime`` ran a pipeline plan whose plan.json lost a segment (its cut tensor taken
    for a network input) and raised Python's errors (ValueError, TypeError) for bad arguments."""
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(DATA / "seed_block.onnx.gz"), "orin-agx", mode="pipeline", precision="fp16",
                             store=url, study="p") as ev:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}), agent="t",
                        trial_number=0)
    folder = tmp_path / "plan"
    assert main(["export", "--study", "p", "--storage", url, "--format", "trtexec", "-o", str(folder),
                 "--measurement", str(m.extra["_id"])]) == 0
    assert _cli(["build", folder], tmp_path, env=fake_env("10.3.0")).returncode == 0
    env = {**os.environ, **fake_env("10.3.0")}
    env["PYTHONPATH"] = env["PYTHONPATH"] + os.pathsep + str(ROOT)
    proc = subprocess.run([sys.executable, "-c", RUNTIME_CASES, str(folder)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout)
    assert got["good input"] == "ok"
    for case in ("middle segment missing", "last segment missing"):
        assert got[case].startswith("placetune: ConfigError") and "segment of the plan is missing" in got[case], got
    for case in ("folder not a path", "frames_in_flight text", "text input", "ragged input"):
        assert got[case].startswith("placetune: ConfigError"), (case, got[case])
