"""Hostile and odd input, round 13: digits ``int()`` cannot read (``scope:²``, ``COLUMNS=²``), a backend
option refused only after its study was stored, SQLite files the read-only commands and ``calibrate``
changed or created, a ``uri=true`` URL that opened a file of another name, plans given to ``measure`` whose
own error was hidden, and Ctrl-C or SIGTERM during a study's baselines.

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3

import pytest

from placetune.cli.main import main

TUNE = ["tune", "--model", "seed-block", "--agent", "random"]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _one_line(err: str) -> bool:
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err


# --------------------------------------------------------------------------- digits int() cannot read
@pytest.mark.parametrize("granularity", ["scope:²", "scope:¹", "scope:٣", "scope:１"])
def test_a_scope_depth_of_digits_outside_ascii_is_a_granularity_error(granularity, tmp_path, capsys):
    """``str.isdigit`` passes a superscript two, which ``int()`` cannot read: a traceback (exit 1). Other
    scripts' digits (Arabic-Indic three, a full-width one) were read as a depth: the documented N is ASCII."""
    code = main([*TUNE, "--trials", "2", "--storage", str(tmp_path / "g.db"), "--granularity", granularity])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and "scope:N with N >= 1" in err, err
    assert not (tmp_path / "g.db").exists()


def test_a_study_file_and_the_python_api_refuse_the_same_scope(tmp_path, capsys):
    from placetune.errors import ConfigError
    from placetune.placement.space import Space

    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\nagent = "random"\ntrials = 2\n'
                                     'granularity = "scope:²"\n')
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and "granularity" in err, err
    with pytest.raises(ConfigError, match="scope:N with N >= 1"):
        Space.check_granularity("scope:²")


@pytest.mark.parametrize("granularity", ["scope:1", "scope:2", "scope:12"])
def test_ascii_scope_depths_still_run(granularity, tmp_path, capsys):
    assert main([*TUNE, "--trials", "2", "--storage", str(tmp_path / "g.db"), "--granularity", granularity]) == 0, \
        capsys.readouterr().err


@pytest.mark.parametrize("columns", ["²", "¹²", "٣"])
def test_a_columns_variable_of_digits_int_cannot_read_is_no_width(columns, monkeypatch):
    """``$COLUMNS=²`` passed ``isdigit`` and raised ValueError in ``int()``: on a terminal every tune
    ended in a traceback at its first line."""
    from placetune.tuning.progress import terminal_columns

    monkeypatch.setenv("COLUMNS", columns)
    r, w = os.pipe()
    try:
        with os.fdopen(w, "w") as out:
            assert terminal_columns(out) == 80
    finally:
        os.close(r)


# --------------------------------------------------------------------------- a backend option refused late
@pytest.mark.parametrize("noise", ["2", "1e308", "1.5"])
def test_a_simulated_noise_over_one_is_refused_before_the_study_is_stored(noise, tmp_path, capsys):
    """``[backend_options] noise`` above 1 passed the simulator and was refused by the first measurement's
    settings: by then the study was stored with that noise in its fingerprint, and the corrected file was
    refused ("study ... exists with fingerprint.noise=1e+308")."""
    body = '[study]\nmodel = "seed-block"\nagent = "random"\ntrials = 2\nname = "n"\n[backend_options]\n'
    (tmp_path / "s.toml").write_text(body + f"noise = {noise}\n")
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and "noise must be a number from 0 to 1" in err, err
    assert not (tmp_path / "s.db").exists()
    (tmp_path / "s.toml").write_text(body + "noise = 0.02\n")
    assert main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")]) == 0, capsys.readouterr()


def test_the_python_api_refuses_the_same_noise():
    from placetune.backends.simulate.simulator import SimulatedJetson
    from placetune.errors import ConfigError

    with pytest.raises(ConfigError, match="noise must be a number from 0 to 1"):
        SimulatedJetson(noise=2.0)
    assert SimulatedJetson(noise=1.0).noise == 1.0


# --------------------------------------------------------------------------- SQLite files left as they were
def _foreign(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE notes (body TEXT)")
    con.execute("INSERT INTO notes VALUES ('mine')")
    con.commit()
    con.close()
    return path.read_bytes()


@pytest.mark.parametrize("argv", [["studies"], ["export"], ["report", "-o", "rep"]])
def test_a_reading_command_leaves_a_foreign_sqlite_file_unchanged(argv, tmp_path, capsys):
    """A command that only reads switched the file to WAL (its header's bytes 18 and 19): another program's
    database came back changed from ``placetune studies --storage other.db``, which refused it."""
    db = tmp_path / "other.db"
    before = _foreign(db)
    code = main([argv[0], "--storage", str(db), *argv[1:]])
    err = capsys.readouterr().err
    assert code == 7 and _one_line(err) and "has no placetune tables" in err, err
    assert db.read_bytes() == before
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_calibrate_changes_no_foreign_database_and_creates_none(tmp_path, capsys):
    """calibrate only reads a study, but opened its database to write: placetune's tables were added to
    another program's SQLite file, and a database name that did not exist was created, empty."""
    db = tmp_path / "other.db"
    before = _foreign(db)
    code = main(["calibrate", "--storage", str(db), "--study", "s"])
    err = capsys.readouterr().err
    assert code == 7 and _one_line(err) and "has no placetune tables" in err, err
    assert db.read_bytes() == before
    code = main(["calibrate", "--storage", str(tmp_path / "none.db"), "--study", "s"])
    err = capsys.readouterr().err
    assert code == 7 and _one_line(err) and "no database at" in err, err
    assert not (tmp_path / "none.db").exists()


def test_a_read_only_store_of_a_missing_file_creates_none(tmp_path):
    from placetune.errors import StoreError
    from placetune.store.store import Store

    with pytest.raises(StoreError, match="no database at"):
        Store(tmp_path / "none.db", readonly=True)
    assert not (tmp_path / "none.db").exists()


def test_calibrate_still_reads_a_study(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    assert main([*TUNE, "--trials", "12", "--storage", db, "--study", "c", "--mode", "engine"]) == 0
    capsys.readouterr()
    before = (tmp_path / "c.db").read_bytes()
    assert main(["calibrate", "--storage", db, "--study", "c", "--folds", "0"]) == 0, capsys.readouterr().err
    assert (tmp_path / "c.db").read_bytes() == before


# --------------------------------------------------------------------------- a URL that opens another file
@pytest.mark.parametrize("query", ["mode=rw&uri=true", "uri=true&cache=shared", "uri=true&mode=ro",
                                   "uri=true&immutable=1"])
def test_uri_parameters_on_a_plain_sqlite_path_are_refused(query, tmp_path, capsys):
    """With ``uri=true`` SQLite reads parameters only from a ``file:`` URI: ``sqlite:///a.db?mode=rw&uri=true``
    opened (and created) a file named ``a.db?mode=rw``, while placetune checked and locked ``a.db``."""
    code = main([*TUNE, "--trials", "2", "--storage", f"sqlite:///{tmp_path}/a.db?{query}"])
    err = capsys.readouterr().err
    assert code == 7 and _one_line(err) and "file:" in err and "uri=true" in err, err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("query", ["uri=true", "uri=true&timeout=5"])
def test_uri_true_with_the_drivers_own_options_or_a_file_uri_still_opens(query, tmp_path, capsys):
    assert main([*TUNE, "--trials", "2", "--storage", f"sqlite:///{tmp_path}/a.db?{query}"]) == 0, \
        capsys.readouterr().err
    assert main([*TUNE, "--trials", "2", "--storage", f"sqlite:///file:{tmp_path}/b.db?mode=rwc&uri=true"]) == 0, \
        capsys.readouterr().err
    assert sorted(p for p in os.listdir(tmp_path) if p.endswith(".db")) == ["a.db", "b.db"]


# --------------------------------------------------------------------------- plans given to measure
@pytest.fixture
def plan_doc(tmp_path, capsys):
    assert main([*TUNE, "--trials", "4", "--storage", str(tmp_path / "p.db"), "--study", "p", "--export",
                 str(tmp_path / "p.plan.json")]) == 0
    capsys.readouterr()
    return json.loads((tmp_path / "p.plan.json").read_text())


@pytest.mark.parametrize("edit, said", [
    ({"version": 2}, "newer than this placetune reads"),
    ({"version": 0}, '"version" must be a positive integer'),
    ({"batch": 0}, '"batch" must be a positive integer'),
    ({"mode": "nosuch"}, "unknown mode 'nosuch'"),
    ({"layers": []}, '"layers" must be a non-empty list'),
])
def test_measure_of_a_damaged_plan_says_what_is_wrong_with_the_plan(edit, said, plan_doc, tmp_path, capsys):
    """A plan file that failed its checks was read as a placement instead: "placement has unknown key(s)
    'backend', 'baselines', ..." (exit 5), naming none of what was wrong."""
    plan_doc.update(edit)
    (tmp_path / "bad.plan.json").write_text(json.dumps(plan_doc))
    code = main(["measure", "seed-block", "--mode", "pipeline", "--frames-in-flight", "4", "--placement",
                 str(tmp_path / "bad.plan.json")])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and said in err and "unknown key" not in err, err


def test_measure_of_a_whole_plan_and_of_a_placement_file_still_run(plan_doc, tmp_path, capsys):
    (tmp_path / "good.plan.json").write_text(json.dumps(plan_doc))
    assert main(["measure", "seed-block", "--mode", "pipeline", "--frames-in-flight", "4", "--placement",
                 str(tmp_path / "good.plan.json")]) == 0, capsys.readouterr().err
    (tmp_path / "pl.json").write_text(json.dumps({"layers": {"/conv1/Conv": "DLA0"}}))
    assert main(["measure", "seed-block", "--placement", str(tmp_path / "pl.json")]) == 0, capsys.readouterr().err


# --------------------------------------------------------------------------- a signal during the baselines
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_the_baselines_stops_after_the_evaluation_in_flight(signum, code, tmp_path, capsys,
                                                                           monkeypatch):
    """The handler was installed only after the baselines: Ctrl-C during the second baseline raised at once
    (its measurement lost, "placetune: interrupted", no best plan, no command to resume) and SIGTERM killed
    the process. On a Jetson the baselines are the first builds of a night (minutes each)."""
    from placetune.backends.simulate.simulator import SimulatedJetson

    real = SimulatedJetson.measure
    calls = []

    def measure(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the second baseline (all-DLA0 after all-GPU)
            os.kill(os.getpid(), signum)
        return real(self, *args, **kwargs)

    def outside(signum, frame):  # the handler around the run (pytest's process is not to be killed)
        raise KeyboardInterrupt

    monkeypatch.setattr(SimulatedJetson, "measure", measure)
    previous = signal.signal(signal.SIGTERM, outside)
    try:
        db = tmp_path / "b.db"
        assert main([*TUNE, "--trials", "20", "--storage", str(db), "--study", "b"]) == code
        assert signal.getsignal(signal.SIGTERM) is outside  # the run's own handler is gone again
    finally:
        signal.signal(signal.SIGTERM, previous)
    out = capsys.readouterr()
    assert "interrupted after 2 of 20 trials; everything measured is stored. Resume with:" in out.out, out
    assert "placetune: interrupted" not in out.err and (tmp_path / "b.plan.json").is_file()
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM pt_requests").fetchone()[0] == 2
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


# --------------------------------------------------------------------------- the engine cache
def _measure_all_dla(be, store: str):
    from placetune import Evaluator, Model, Placement

    model = Model.load("seed-block")
    ev = Evaluator(model, "orin-agx", backend=be, store=store, mode="pipeline", iterations=5, trt_version="10.3")
    return ev.evaluate(Placement.all_dla(model, 0))


def _backend(cache):
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from tests.fakes import fake_env

    return TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=cache, warmup_ms=1, profile_iterations=2)


@pytest.fixture(scope="module")
def built_cache(tmp_path_factory):
    """An engine cache holding seed-block's all-DLA0 pipeline, built once for the tests of this file
    (each copies it and damages its own copy's build records)."""
    root = tmp_path_factory.mktemp("engine-cache")
    with _backend(root / "cache") as be:
        assert _measure_all_dla(be, str(root / "a.db")).status == "ok"
    assert list((root / "cache" / "engines").glob("*.plan.json"))
    return root / "cache"


@pytest.mark.parametrize("record", ["[]", '"x"', "5", "null", '{"trt_version": "10.3.0", "engine_bytes": "many"}'])
def test_an_engine_cache_record_that_is_no_object_is_built_again_not_a_crashed_measurement(record, tmp_path,
                                                                                            built_cache):
    """A build record (``engines/<key>.plan.json``) holding a JSON list raised AttributeError in the parent's
    look-up: the placement was stored as ``crashed`` ("placetune's TensorRT backend failed: AttributeError"),
    a failure of the cache file recorded as one of the placement."""
    import shutil

    shutil.copytree(built_cache, tmp_path / "cache")
    records = list((tmp_path / "cache" / "engines").glob("*.plan.json"))
    assert records
    for path in records:
        path.write_text(record)
    with _backend(tmp_path / "cache") as be:
        again = _measure_all_dla(be, str(tmp_path / "b.db"))
    assert again.status == "ok", (again.status, again.reason)
    assert all(isinstance(json.loads(p.read_text()), dict) for p in records)  # rebuilt, recorded anew


# --------------------------------------------------------------------------- a study of a newer placetune
def test_studies_lists_a_database_holding_a_study_whose_objective_this_placetune_does_not_know(tmp_path, capsys):
    """A study of an objective this placetune does not know (a newer placetune's, sharing the database) made
    ``placetune studies`` fail for every study: exit 4, "unknown objective 'carbon'", nothing listed."""
    db = tmp_path / "n.db"
    for name in ("old", "new"):
        assert main([*TUNE, "--trials", "3", "--storage", str(db), "--study", name]) == 0
    con = sqlite3.connect(db)
    con.execute("UPDATE pt_studies SET objective = 'carbon' WHERE name = 'new'")
    con.commit()
    con.close()
    capsys.readouterr()
    assert main(["studies", "--storage", str(db), "--json"]) == 0
    docs = {d["study"]: d for d in json.loads(capsys.readouterr().out)["studies"]}
    assert docs["old"]["best"] is not None and docs["new"]["best"] is None
    assert docs["new"]["best_note"] == "objective 'carbon' unknown to this placetune"
    assert main(["studies", "--storage", str(db)]) == 0
    assert "objective 'carbon' unknown to this placetune" in capsys.readouterr().out


# --------------------------------------------------------------------------- options a JSON export ignored
@pytest.mark.parametrize("extra", [["--trt-version", "10.3"], ["--onnx", "m.onnx"]])
def test_a_json_export_refuses_the_options_of_the_trtexec_format(extra, tmp_path, capsys):
    """``export -o plan.json --trt-version 10.3`` wrote a plan of the study's TensorRT 8.6 rules and said
    nothing; ``--onnx`` was ignored the same way."""
    db = str(tmp_path / "e.db")
    assert main([*TUNE, "--trials", "3", "--storage", db, "--study", "e"]) == 0
    capsys.readouterr()
    code = main(["export", "--storage", db, "--study", "e", "-o", str(tmp_path / "e.json"), *extra])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and f"{extra[0]} is for --format trtexec" in err, err
    assert not (tmp_path / "e.json").exists()
    assert main(["export", "--storage", db, "--study", "e", "-o", str(tmp_path / "e.sh"), "--format", "trtexec",
                 *extra]) == 0, capsys.readouterr().err
