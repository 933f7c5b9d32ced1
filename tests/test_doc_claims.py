"""What README.md says of the command line, checked against what the command line does now: each claim here
is one sentence of the README (quoted in the test's docstring) that a cheap run can confirm or refute."""

from __future__ import annotations

import pytest

from placetune.cli.main import main


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_tune_help_does_not_offer_the_fp32_it_refuses(capsys, monkeypatch):
    """README: "`tune --precision fp32` is refused the same way: the DLA runs fp16 and int8 only" (exit 6).
    ``tune --help`` listed fp32 among the precisions to pick, as if it were a tune one could run."""
    monkeypatch.setenv("COLUMNS", "200")
    text = _help(["tune", "--help"], capsys)
    line = " ".join(text[text.index("--precision NAME"):].split())[:120]
    assert "int8 (default), fp16;" in line and "fp32 is refused" in line, line
    assert main(["tune", "--model", "seed-block", "--precision", "fp32", "--storage", "sqlite://"]) == 6
    assert "precision fp32 runs on the GPU only" in capsys.readouterr().err
