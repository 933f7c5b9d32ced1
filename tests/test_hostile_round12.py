"""Hostile and odd input, round 12: values that hold a database URL echoed cut short in an error, ONNX models
that point outside their folder or are no file, study files with odd types and numbers, plans fed to the
runtime and the deploy writers edited, the Python API and the Gymnasium environments given wrong types, and
tunes stopped by a signal or sharing one SQLite file.

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import pytest

from placetune.cli.main import main
from placetune.safetext import mask_secrets

SECRET_URL = "postgresql+psycopg://tuner:s3cr%2FetPW%40%23x@127.0.0.1:1/db"
LEAKS = ("s3cr", "etPW")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- a URL cut short in a message
@pytest.mark.parametrize("key, table", [
    ("dla_core", "settings"), ("trt_version", "settings"), ("batch", "settings"), ("trials", "study"),
    ("timeout", "study"), ("streams", "study"), ("stop_when_converged", "study")])
def test_a_database_url_given_as_another_setting_hides_its_password_when_cut_short(key, table, tmp_path, capsys):
    """Seen by the study-file fuzz property (PLACETUNE_FUZZ_SEED=573201523): a value shown at most 40
    characters long was cut inside the password of a URL, and with no ``@`` left the masking let the
    password's first characters through."""
    study = {"model": '"seed-block"', "trials": "2", "agent": '"random"', "backend": '"simulate"'}
    body = {"study": dict(study), "settings": {}}
    body[table][key] = f'"{SECRET_URL}"'
    text = "".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for t, kv in body.items())
    (tmp_path / "s.toml").write_text(text)
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    out = capsys.readouterr()
    assert code == 6, out
    said = out.out + out.err
    assert key in said and not any(leak in said for leak in LEAKS), said
    assert len(out.err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, masked", [
    ("got 'postgresql+psycopg://tuner:s3cr%2FetPW%4'", "got 'postgresql+psycopg://tuner:***'"),
    ("got postgresql://u:s3cr/etP... (300 characters)", "got postgresql://u:*** (300 characters)"),
    ('got "mysql+pymysql://u:s3cr"', 'got "mysql+pymysql://u:***"'),
    ("postgresql+psycopg:/tuner:s3cr", "postgresql+psycopg:/tuner:***"),
])
def test_a_url_cut_inside_its_password_is_masked(text, masked):
    assert mask_secrets(text) == masked


@pytest.mark.parametrize("text", [
    "postgresql://db:5432/placetune refused", "got 'postgresql://db:5432'", "sqlite:///runs/p.db",
    "sqlite:////tmp/a:b.db", "postgresql+psycopg://tuner:***@db/x", "see https://docs.nvidia.com/x: y",
    "layer /conv1/Conv: GPU", "trt_version 10.3: no JetPack"])
def test_text_with_no_cut_password_is_unchanged(text):
    assert mask_secrets(text) == text
