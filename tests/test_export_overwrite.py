"""``placetune export -o FILE`` replaced any file the user named: ``-o notes.txt`` (a slip of the tab key) lost the
notes without a word, though the README says placetune never overwrites a file it did not write. An existing
file that is not a placetune export (a plan, or a trtexec build script export wrote) is refused (exit 6, one line)
unless ``--force``; a previous export, an empty file, a device or a pipe are written as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placetune.cli.main import main


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("db")
    assert main(["tune", "--model", "seed-block", "--trials", "4", "--storage", str(d / "pt.db"), "--study", "s",
                 "--export", str(d / "s.plan.json")]) == 0
    return d / "pt.db"


def _export(db: Path, out: Path, fmt: str, *extra: str) -> int:
    return main(["export", "--storage", str(db), "--format", fmt, "-o", str(out), *extra])


@pytest.mark.parametrize("fmt", ["json", "trtexec"])
def test_export_refuses_to_overwrite_a_file_that_is_not_an_export(fmt, db, tmp_path, capsys):
    mine = tmp_path / ("notes.json" if fmt == "json" else "notes.sh")
    mine.write_text("my notes\n")
    code = _export(db, mine, fmt)
    out, err = capsys.readouterr()
    assert code == 6 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{mine.name} exists and is not a file placetune wrote: refusing to overwrite it" in err, err
    assert "--force" in err, err
    assert mine.read_text() == "my notes\n"
    assert _export(db, mine, fmt, "--force") == 0, capsys.readouterr().err
    assert mine.read_text() != "my notes\n" and "placetune" in mine.read_text()


@pytest.mark.parametrize("fmt", ["json", "trtexec"])
@pytest.mark.parametrize("before", ["plan", "script", "empty"])
def test_export_replaces_an_earlier_export_or_an_empty_file(fmt, before, db, tmp_path, capsys):
    target = tmp_path / "out.json"  # (trtexec: a path without .sh or .json is a deployment folder)
    if before == "empty":
        target.write_text("")
    else:
        assert _export(db, target, "json" if before == "plan" else "trtexec") == 0
    assert _export(db, target, fmt) == 0, capsys.readouterr().err
    text = target.read_text()
    if fmt == "json":
        assert json.loads(text)["format"] == "placetune-plan"
    else:
        assert text.startswith("#!") and "# placetune plan: " in text


def test_export_writes_through_a_device_as_before(db, capsys):
    assert _export(db, Path("/dev/null"), "json") == 0, capsys.readouterr().err
