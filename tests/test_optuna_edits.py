"""Edits of an optuna agent's Optuna tables, on resume, export and ``studies``: refused with one line
(exit 7) where Optuna cannot read them, and never read as results (placetune's own tables hold those).

Each case is a real SQLite store written by a real small tune, then edited with sqlite3.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from placetune.cli.main import main


@pytest.fixture(scope="module")
def optuna_db(tmp_path_factory):
    d = tmp_path_factory.mktemp("db")
    db = d / "base.db"
    assert main(["tune", "--model", "seed-block", "--trials", "8", "--agent", "optuna", "--storage", str(db),
                 "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db


def _copy(src: Path, dst: Path, sql: str) -> Path:
    a, b = sqlite3.connect(src), sqlite3.connect(dst)
    try:
        a.backup(b)
        b.executescript(sql)
        b.commit()
    finally:
        a.close()
        b.close()
    return dst


def _best(db: Path) -> int:
    """The trial Optuna holds as the best (throughput: the highest value)."""
    with sqlite3.connect(db) as con:
        return con.execute("SELECT trial_id FROM trial_values ORDER BY value DESC LIMIT 1").fetchone()[0]


def _run(argv, capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


EDITS = {
    "a FINITE value set to NULL": "UPDATE trial_values SET value = NULL WHERE trial_id = {best};",
    "a value type Optuna does not know": "UPDATE trial_values SET value_type = 'BOGUS' WHERE trial_id = {best};",
}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_unreadable_optuna_value_stops_a_resume_with_one_line(edit, optuna_db, tmp_path, capsys):
    """A FINITE trial value set to NULL failed an assert inside Optuna's storage: an internal-error traceback."""
    db = _copy(optuna_db, tmp_path / "t.db", EDITS[edit].format(best=_best(optuna_db)))
    code, _, err = _run(["tune", "--model", "seed-block", "--trials", "12", "--agent", "optuna", "--study", "s",
                         "--storage", db, "--export", tmp_path / "p.json"], capsys)
    assert code == 7, err
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and "internal error" not in err
    assert line.startswith(f"placetune: error: the Optuna tables of sqlite:///{db} are corrupt (")
    assert line.endswith("while running the optuna agent's study: the database was edited or damaged (restore it "
                         "from a backup)")


@pytest.mark.parametrize("edit", [*sorted(EDITS), "the Optuna study renamed"])
def test_studies_and_export_read_placetunes_own_rows_whatever_the_optuna_tables_say(edit, optuna_db, tmp_path,
                                                                                    capsys):
    """``studies`` and ``export`` read the measurements placetune stored, never Optuna's trial values: the
    edited copy reports the same best measurement and exports the same plan as the untouched store."""
    sql = EDITS.get(edit, "UPDATE studies SET study_name = 'renamed';").format(best=_best(optuna_db))
    db = _copy(optuna_db, tmp_path / "t.db", sql)
    seen = []
    for store in (optuna_db, db):
        code, out, err = _run(["studies", "--json", "--storage", store], capsys)
        assert code == 0, err
        row = json.loads(out)["studies"]
        plan = tmp_path / f"{store.stem}.plan.json"
        code, _, err = _run(["export", "--study", "s", "--storage", store, "-o", plan], capsys)
        assert code == 0, err
        plan_json = json.loads(plan.read_text())
        seen.append((row, {k: plan_json[k] for k in ("layers", "engines", "measured")}))
    assert seen[0] == seen[1]


def test_a_renamed_optuna_study_is_rebuilt_from_the_stored_measurements(optuna_db, tmp_path, capsys):
    """Renaming the Optuna study leaves it behind: the resume opens a new one under the study's own name,
    warm-started from placetune's measurements (none repeated), so the budget and the best stay right."""
    db = _copy(optuna_db, tmp_path / "t.db", "UPDATE studies SET study_name = 'renamed';")
    code, out, err = _run(["tune", "--model", "seed-block", "--trials", "12", "--agent", "optuna", "--study", "s",
                           "--storage", db, "--export", tmp_path / "p.json"], capsys)
    assert code == 0, err
    assert "resuming: 8 of 12 trials already done" in out
    with sqlite3.connect(db) as con:
        assert con.execute("SELECT count(*) FROM pt_measurements").fetchone()[0] == 12
        assert sorted(n for n, in con.execute("SELECT study_name FROM studies")) == ["renamed", "s"]
