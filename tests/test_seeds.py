"""The randomised suites draw a fresh seed on every run and replay one from the environment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import seeds


@pytest.mark.parametrize("name", sorted(seeds.SEEDS))
def test_a_seed_is_fresh_unless_the_environment_replays_one(monkeypatch, name):
    drawn = set()
    for _ in range(3):
        monkeypatch.delenv(name, raising=False)
        drawn.add(seeds.seed(name))
    assert len(drawn) > 1
    monkeypatch.setenv(name, "42")
    assert seeds.seed(name) == 42 and f"{name}=42" in seeds.replay_line()


def test_no_randomised_test_falls_back_to_a_fixed_seed():
    """A seed read from the environment with a fixed default is fixed whenever the test runs alone
    (the ONNX fuzz suite used 1234, the SIGKILL suite 20261121)."""
    fixed = re.compile(r"environ\.get\(\s*[\"']PLACETUNE_\w*SEED[\"']\s*,")
    tests = Path(__file__).resolve().parent
    offenders = [str(p.relative_to(tests)) for p in tests.rglob("*.py") if fixed.search(p.read_text())]
    assert offenders == []
