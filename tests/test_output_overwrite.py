"""Every command that writes a file the user names follows one rule (README: placetune never overwrites a file
it did not write): it replaces its own earlier output, an empty file, a device or a pipe; any other existing
file is refused (exit 6, one line naming the option and ``--force``) before anything is measured or written,
and ``--force`` replaces it. ``export -o`` has its own tests (tests/test_export_overwrite.py)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from placetune.cli.main import main


@pytest.fixture(scope="module")
def dbs(tmp_path_factory) -> dict[str, Path]:
    """A small study ``s`` (its plan file too) and an engine-mode study ``c`` large enough to calibrate."""
    d = tmp_path_factory.mktemp("overwrite")
    assert main(["tune", "--model", "seed-block", "--trials", "4", "--agent", "random", "--storage", str(d / "s.db"),
                 "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    assert main(["tune", "--model", "seed-block", "--mode", "engine", "--objective", "latency", "--trials", "14",
                 "--agent", "random", "--storage", str(d / "c.db"), "--study", "c", "--export",
                 str(d / "c.plan.json")]) == 0
    return {"s": d / "s.db", "c": d / "c.db", "plan": d / "s.plan.json"}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a tune's default export lands here, not in the repository


def _copy(src: Path, dst: Path) -> Path:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return dst


#: command -> (the option that names the file, the database it reads or writes, argv given (dbs, db, out))
COMMANDS = {
    "tune --export": ("--export", lambda dbs, db, o: ["tune", "--model", "seed-block", "--study", "s", "--agent",
                                                       "random", "--trials", "6", "--storage", str(db),
                                                       "--export", str(o)]),
    "trace": ("-o", lambda dbs, db, o: ["trace", str(dbs["plan"]), "-o", str(o)]),
    "calibrate": ("-o", lambda dbs, db, o: ["calibrate", "--study", "c", "--storage", str(db), "--folds", "0",
                                             "-o", str(o)]),
    "zoo export": ("-o", lambda dbs, db, o: ["zoo", "export", "seed-block", "-o", str(o)]),
}


def _setup(command: str, dbs: dict[str, Path], tmp_path: Path) -> tuple[str, Path, list[str], Path]:
    option, argv = COMMANDS[command]
    db = _copy(dbs["c" if command == "calibrate" else "s"], tmp_path / "work.db")
    out = tmp_path / ("out.onnx" if command == "zoo export" else "out.json")
    return option, db, argv(dbs, db, out), out


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_existing_file_placetune_did_not_write_is_refused_unless_force(command, dbs, tmp_path, capsys):
    option, db, argv, out = _setup(command, dbs, tmp_path)
    out.write_text("my notes\n")
    before = _digest(db)
    code = main(argv)
    _, err = capsys.readouterr()
    assert code == 6 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{out.name} exists and is not a file placetune wrote: refusing to overwrite it" in err, err
    assert f"pass --force to replace it, or choose another {option} name" in err, err
    assert out.read_text() == "my notes\n"
    assert _digest(db) == before  # nothing measured, nothing stored
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, "work.db"])
    assert main([*argv, "--force"]) == 0, capsys.readouterr().err
    assert out.read_text(errors="replace") != "my notes\n" and out.stat().st_size > 100


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("before", ["its own output", "empty"])
def test_its_own_earlier_output_or_an_empty_file_is_replaced(command, before, dbs, tmp_path, capsys):
    _, _, argv, out = _setup(command, dbs, tmp_path)
    if before == "empty":
        out.write_text("")
    else:
        assert main(argv) == 0, capsys.readouterr().err
        out.write_bytes(out.read_bytes() + b"\n")  # (an edited copy is still placetune's file)
    assert main(argv) == 0, capsys.readouterr().err
    assert out.stat().st_size > 100


def test_a_file_of_another_command_is_not_its_own(dbs, tmp_path, capsys):
    """trace -o over a plan file: a plan is export's and tune's output, not trace's."""
    plan = tmp_path / "plan.json"
    plan.write_bytes(dbs["plan"].read_bytes())
    code = main(["trace", str(dbs["plan"]), "-o", str(plan)])
    assert code == 6 and "--force" in capsys.readouterr().err
    assert plan.read_bytes() == dbs["plan"].read_bytes()


def test_a_plan_file_that_appears_during_the_run_keeps_the_result(dbs, tmp_path, capsys, monkeypatch):
    """Checked at the start, the plan file may still appear during a night's run: the run ends with one line
    saying the result is in the database and how to export it, not with the night lost."""
    import placetune.tuning.tune_study as tune_study

    out = tmp_path / "night.plan.json"
    real = tune_study.check_export

    def check_then_appear(cfg, study):  # the start-of-run check passes; the file appears right after it
        path = real(cfg, study)
        out.write_text("written by someone else during the night\n")
        return path

    monkeypatch.setattr(tune_study, "check_export", check_then_appear)
    db = tmp_path / "night.db"
    code = main(["tune", "--model", "seed-block", "--study", "night", "--agent", "random", "--trials", "5",
                 "--storage", str(db), "--export", str(out)])
    _, err = capsys.readouterr()
    assert code == 6 and "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert "night.plan.json exists and is not a file placetune wrote" in line, line
    assert "the run's result is kept in" in line and "placetune export" in line and "--force" in line, line
    assert out.read_text() == "written by someone else during the night\n"
    monkeypatch.undo()
    assert main(["export", "--storage", str(db), "--study", "night", "-o", str(tmp_path / "again.json")]) == 0
    assert (tmp_path / "again.json").stat().st_size > 100


def test_an_in_memory_run_writes_its_plan_beside_a_file_that_appeared(tmp_path, capsys, monkeypatch):
    """An in-memory database keeps nothing to export later: the plan goes to a new file beside the refused one."""
    import placetune.tuning.tune_study as tune_study

    out = tmp_path / "night.plan.json"
    real = tune_study.check_export

    def check_then_appear(cfg, study):
        path = real(cfg, study)
        out.write_text("mine\n")
        return path

    monkeypatch.setattr(tune_study, "check_export", check_then_appear)
    code = main(["tune", "--model", "seed-block", "--study", "night", "--agent", "random", "--trials", "5",
                 "--storage", ":memory:", "--export", str(out)])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 6 and "in-memory database: its plan was written to" in line and "night.plan.1.json" in line, line
    assert out.read_text() == "mine\n"
    assert json.loads((tmp_path / "night.plan.1.json").read_text())["format"] == "placetune-plan"
