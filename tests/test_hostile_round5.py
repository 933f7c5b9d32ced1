"""What a hostile review of the inputs found after round four: Optuna tables of another schema, and
other edits and files that escaped as tracebacks or read as trusted results. Each case failed before its fix."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from placetune.cli.main import main


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    d = tmp_path_factory.mktemp("db")
    db = d / "base.db"
    assert main(["tune", "--model", "seed-block", "--trials", "8", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db


def _copy(src: Path, dst: Path, sql: str = "") -> Path:
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
        if sql:
            b.executescript(sql)
            b.commit()
    finally:
        a.close()
        b.close()
    return dst


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
