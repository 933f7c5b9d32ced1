"""Hostile and odd input, round 10: file names longer than the system takes given to the commands that
first ask whether a name is a folder (``export -o``, ``build``, ``placetune.runtime.load``).

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import pytest

from placetune.cli.main import main
from placetune.errors import ConfigError
from tests.test_hostile_round4 import make_small_db

#: one name component over the system's 255 bytes, and a path whose middle component is
TOO_LONG = ["9" * 400, "a/" + "b" * 300 + "/c.json", "9" * 400 + ".json"]


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    return make_small_db(tmp_path_factory.mktemp("db"))


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("placetune: error: "), err
    return lines[0]


@pytest.mark.parametrize("name", TOO_LONG)
@pytest.mark.parametrize("fmt", ["json", "trtexec"])
def test_export_to_a_name_too_long_is_one_line(name, fmt, small_db, capsys):
    """``Path.is_dir()`` raises on ENAMETOOLONG (it ignores only a missing file): ``export -o <400 characters>``
    was an internal error with a traceback; it is the write's one line, exit 6."""
    code = main(["export", "--storage", str(small_db), "--format", fmt, "-o", name])
    assert code == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(("placetune: error: cannot write ", "placetune: error: cannot use ")), line
    assert "characters" in line, line  # the name is cut


@pytest.mark.parametrize("name", TOO_LONG)
def test_build_of_a_name_too_long_is_one_line(name, capsys):
    """``placetune build <400 characters>`` was an internal error with a traceback."""
    assert main(["build", name]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "no such file or folder" in line and "characters" in line, line


@pytest.mark.parametrize("name", TOO_LONG + ["9" * 400 + "/plan.json"])
def test_runtime_load_of_a_name_too_long_is_a_configuration_error(name):
    """``placetune.runtime.load`` raised a bare OSError for a name too long; it says it is no plan folder."""
    import placetune.runtime

    with pytest.raises(ConfigError, match="not a plan folder"):
        placetune.runtime.load(name)
