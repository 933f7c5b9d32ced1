"""What a hostile review of the inputs found after round four: Optuna tables of another schema, and
other edits and files that escaped as tracebacks or read as trusted results. Each case failed before its fix."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from placetune.cli.main import main
from tests.test_hostile_round4 import _copy, make_small_db


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    return make_small_db(tmp_path_factory.mktemp("db"))


def _rows(db: Path) -> list:
    with sqlite3.connect(db) as con:
        tables = [t for t, in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return [(t, con.execute(f"SELECT * FROM {t}").fetchall()) for t in tables]


@pytest.mark.parametrize("agent", ["random", "optuna"])
def test_optuna_tables_of_another_schema_are_one_line(agent, small_db, tmp_path, capsys):
    """Optuna tables whose ``alembic_version`` this Optuna does not know (written by a newer Optuna, or
    edited) escaped as a RuntimeError traceback from Optuna's schema check on resume."""
    db = _copy(small_db, tmp_path / "t.db", "UPDATE alembic_version SET version_num = 'v99.0.0';")
    before = _rows(db)
    capsys.readouterr()
    code = main(["tune", "--model", "seed-block", "--trials", "12", "--agent", agent, "--study", "s",
                 "--storage", str(db), "--export", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code == 7, err
    assert "Traceback" not in err and "internal error" not in err
    assert "Optuna tables" in err and "schema" in err
    assert _rows(db) == before


@pytest.mark.parametrize("argv", [["studies"], ["studies", "--json"], ["export", "--study", "s", "-o", "{d}/p.json"]])
def test_a_row_of_an_unknown_status_is_refused_never_skipped(argv, small_db, tmp_path, capsys):
    """The best row's status edited to one placetune does not know was skipped by ``studies``, which then
    listed the next row's figure as the study's best; every command now refuses the row (exit 7)."""
    db = _copy(small_db, tmp_path / "t.db")
    with sqlite3.connect(db) as con:
        best = con.execute("SELECT id FROM pt_measurements WHERE status = 'ok' ORDER BY throughput_fps DESC, id "
                           "LIMIT 1").fetchone()[0]
        con.execute("UPDATE pt_measurements SET status = 'weird' WHERE id = ?", (best,))
    capsys.readouterr()
    code = main([a.format(d=tmp_path) for a in argv] + ["--storage", str(db)])
    out, err = capsys.readouterr()
    assert code == 7, out + err
    assert f"stored measurement {best} is corrupt" in err and "'status'" in err


def _dla1(doc):
    """The plan's third layer and its engine moved to DLA1 (as a plan of a two-DLA module says it)."""
    doc["layers"][2].update(requested="DLA1", realized="DLA1")
    eng = next(e for e in doc["engines"] if doc["layers"][2]["name"] in (e.get("layers") or []))
    eng.update(device="DLA1", dla_core=1, dla_layers=[doc["layers"][2]["name"]])


def _edit(doc, how):
    if how == "one-DLA module":
        _dla1(doc)
        doc["platform"] = "orin-nx-8gb"
    elif how == "module without a DLA":
        _dla1(doc)
        doc["platform"] = "orin-nano"
    elif how == "precision":
        doc["precision"] = "fp64"
    elif how == "platform type":
        doc["platform"] = ["orin-agx"]
    elif how == "dla_core of another device":
        doc["engines"][0].update(dla_core=1)
    elif how == "format without its type":
        doc["engines"][0]["inputs"][0] = {"name": doc["engines"][0]["inputs"][0]["name"], "format": "CHW32"}
    elif how == "tensor without a name":
        doc["engines"][0]["outputs"][0] = {"format": "CHW32", "trt_dtype": "HALF"}


@pytest.mark.parametrize("how, code, pattern", [
    ("one-DLA module", 5, "DLA1, which platform orin-nx-8gb does not have"),
    ("module without a DLA", 5, "DLA1, which platform orin-nano does not have"),
    ("precision", 6, "\"precision\" must be one of fp16, int8, fp32"),
    ("platform type", 6, "\"platform\" must be a platform name"),
    ("dla_core of another device", 6, "engines[0].dla_core 1 contradicts its device"),
    ("format without its type", 6, "must name its \"trt_dtype\""),
    ("tensor without a name", 6, "engines[0].outputs must be a list of objects with a \"name\""),
])
def test_an_edited_plan_is_refused_when_it_is_read(how, code, pattern, small_db, tmp_path, capsys):
    """Plan files edited by hand were read as they were: a plan for a one-DLA module (or one without a
    DLA) that runs a layer on DLA1, a precision placetune never builds in (a build went ahead in FP32), an
    engine whose DLA core is not its device's (built on the other core), and an engine input in a
    non-LINEAR format without its TensorRT type or name (``placetune build`` stopped with a KeyError
    traceback). Every reader of a plan (``build``, ``trace``, the runtime) refuses them with one line."""
    import json

    plan = tmp_path / "plan.json"
    assert main(["export", "--storage", str(small_db), "--study", "s", "-o", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    _edit(doc, how)
    plan.write_text(json.dumps(doc))
    capsys.readouterr()
    got = main(["trace", str(plan), "-o", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    assert got == code, err
    assert pattern in err and err.count("\n") == 1, err
    assert not (tmp_path / "t.json").exists()


def test_replicas_on_a_device_the_module_lacks_are_refused_before_anything_is_stored(tmp_path, capsys):
    """A replicas study asking for DLA1 on a one-DLA module (orin-nx-8gb) ran its whole budget, every trial
    infeasible ("replicas ask for DLA1 but orin-nx-8gb has only GPU, DLA0"), stored them and exited 0; it
    now stops first with one line naming what replicas may use, as an unknown power mode does. (``measure``
    keeps its documented answer for one placement: the measurement is infeasible, exit 1.)"""
    study = tmp_path / "r.toml"
    study.write_text('[study]\nmodel = "seed-block"\ntrials = 3\nplatform = "orin-nx-8gb"\nmode = "replicas"\n'
                     '[settings]\nreplicas = {DLA1 = 2}\n')
    db = tmp_path / "r.db"
    capsys.readouterr()
    code = main(["tune", str(study), "--storage", f"sqlite:///{db}"])
    err = capsys.readouterr().err
    assert code == 6, err
    assert "replicas ask for DLA1, which orin-nx-8gb does not have: replicas may name GPU, DLA0" in err
    assert not db.exists()


def test_a_merged_model_cache_this_user_may_not_read_is_no_traceback(tmp_path, monkeypatch, capsys):
    """``$PLACETUNE_CACHE_DIR`` on a folder this user may not look into (another user's, mode 0700; here
    /proc/1/root's Permission denied is played by the cached file's stat) made a concurrent tune stop with a
    PermissionError traceback from the check of the cached merged model; that file is now written anew (or its
    folder refused with one line, exit 6)."""
    import pathlib

    cache = tmp_path / "cache"
    real = pathlib.Path.is_file

    def denied(self):
        if str(self).startswith(str(cache)):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setenv("PLACETUNE_CACHE_DIR", str(cache))
    monkeypatch.setattr(pathlib.Path, "is_file", denied)
    capsys.readouterr()
    code = main(["tune", "--model", "seed-block", "--model", "vit-tiny", "--trials", "2", "--agent", "random",
                 "--storage", str(tmp_path / "c.db"), "--export", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code in (0, 6), err
    assert "Traceback" not in err and "internal error" not in err
