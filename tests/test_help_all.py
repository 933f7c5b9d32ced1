"""A command's ``--help`` is a first read: ``tune --help`` ran to 125 lines and ``measure --help`` to 73, every
rare option (``--trust-study-file``, ``--device-profile``, ``--noise``...) at the length of the common ones.
``--help`` now shows the common options and names the others; ``--help-all`` explains every one."""

from __future__ import annotations

import argparse
import re

import pytest

from placetune.cli.main import build_parser, main


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


def _command(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return sub.choices[name]


@pytest.mark.parametrize("command, most", [("tune", 65), ("measure", 50)])
def test_help_shows_the_common_options_and_names_every_other(command, most, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    short = _help([command, "--help"], capsys)
    full = _help([command, "--help-all"], capsys)
    assert len(short.splitlines()) <= most, len(short.splitlines())
    assert max(len(line) for line in short.splitlines()) < 80
    assert len(full.splitlines()) > len(short.splitlines()) + 10
    more = short[short.index("more options, each explained by placetune "
                             f"{command} --help-all:"):].split("\n\n")[0]
    options = {o for a in _command(command)._actions for o in a.option_strings if o.startswith("--")}  # noqa: SLF001
    for option in options:  # every option is reachable: shown, or named under "more options"
        assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", short), option
        assert re.search(rf"^  {re.escape(option)}\b", full, re.M) or f", {option}" in full, option
    hidden = re.findall(r"--[a-z][a-z0-9-]+", more.split(":", 1)[1])
    listed = short[:short.index("more options")]
    assert hidden and all(not re.search(rf"^  {re.escape(o)}\b", listed, re.M) for o in hidden), hidden
    entries = " ".join(more.split(":", 1)[1].split()).split(", ")  # --stop-when-settled / --no-stop-... is one
    assert f"every option ({len(entries)} more than --help shows)" in short


def test_help_all_explains_each_hidden_option_and_the_agents(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    short = _help(["tune", "--help"], capsys)
    full = _help(["tune", "--help-all"], capsys)
    assert "agents (--agent):" not in short and "agents (--agent):" in full
    assert "examples:" in short and "examples:" in full
    assert "  --trust-study-file    let the study file name paths" in full
    assert "--trust-study-file    let" not in short and "--trust-study-file" in short
    assert "granularities (--granularity)" in full


def test_the_short_help_keeps_the_options_a_first_night_needs(capsys, monkeypatch):
    """The engineer's overnight YOLO tune on a Jetson: its options are all in the first read."""
    monkeypatch.setenv("COLUMNS", "80")
    short = _help(["tune", "--help"], capsys)
    for option in ("--model", "--shape", "--platform", "--backend", "--objective", "--trials", "--timeout",
                   "--study", "--precision", "--mode", "--input-data", "--agent"):
        assert re.search(rf"^  {re.escape(option)} ", short, re.M), option
