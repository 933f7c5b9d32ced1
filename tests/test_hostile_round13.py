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
