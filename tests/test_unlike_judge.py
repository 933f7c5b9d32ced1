"""The search benchmark's judge: a change to the final pick is judged on the rows whose longer run
reported a worse plan than the shorter one, found from the before file."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import unlike_judge  # noqa: E402

BLIND = {"random": [[50.0] * 50] * 3}  # a blind agent 50 % behind: every row meets the blind goal


def _row(family: str, at15: list[float], at50: list[float], before: dict | None = None) -> dict:
    return {"case": "resnet50", "family": family, "draw": 5, "best": 100.0, "agent": {"15": at15, "50": at50},
            "before": before or {"15": [], "50": []}, "blind": BLIND}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_later_worse_row_that_recovers_is_an_improvement(tmp_path, capsys):
    before = _write(tmp_path / "b.jsonl", [_row("handoff", [100, 100, 100], [97, 97, 100]),
                                           _row("mixed", [99, 99, 99], [99.5, 99.5, 99.5])])
    after = _write(tmp_path / "a.jsonl", [_row("handoff", [100, 100, 100], [100, 100, 100]),
                                          _row("mixed", [99, 99, 99], [99.5, 99.5, 99.5])])
    assert unlike_judge.main([str(before), str(after), "--later-worse"]) == 0
    out = capsys.readouterr().out
    assert "later-worse rows (median at 50 above median at 15 before): 1: resnet50 handoff 5" in out
    assert "same seed: 2 -> 0" in out and "later-worse: IMPROVED" in out


def test_a_later_worse_row_that_falls_further_fails(tmp_path, capsys):
    before = _write(tmp_path / "b.jsonl", [_row("handoff", [100, 100, 100], [97, 97, 100])])
    after = _write(tmp_path / "a.jsonl", [_row("handoff", [100, 100, 100], [96, 96, 100])])
    assert unlike_judge.main([str(before), str(after), "--later-worse"]) == 1
    assert "FAIL later-worse row resnet50 handoff 5: median at 50 rises" in capsys.readouterr().out


def test_paired_judges_the_before_column_against_the_agent(tmp_path, capsys):
    f = _write(tmp_path / "f.jsonl", [_row("drift", [100, 100, 100], [100, 100, 100],
                                           before={"15": [100, 100, 100], "50": [97, 97, 97]})])
    assert unlike_judge.main(["--paired", str(f)]) == 0
    assert "@50 3.00/3.00% -> 0.00/0.00%  CHANGED" in capsys.readouterr().out


def test_a_noise_bound_lets_a_row_move_within_it_and_fails_one_beyond_it(tmp_path, capsys):
    before = _write(tmp_path / "b.jsonl", [_row("handoff", [100, 100, 100], [99, 99, 100]),
                                           _row("mixed", [100, 100, 100], [98, 98, 98]),
                                           _row("reformat", [100, 100, 100], [100, 100, 100])])
    within = _write(tmp_path / "w.jsonl", [_row("handoff", [100, 100, 100], [98.8, 98.8, 100]),  # +0.2 points
                                           _row("mixed", [100, 100, 100], [100, 100, 100]),
                                           _row("reformat", [100, 100, 100], [100, 100, 100])])
    assert unlike_judge.main([str(before), str(within), "--later-worse"]) == 1  # strict: a later-worse row rose
    assert unlike_judge.main([str(before), str(within), "--later-worse", "--noise-bound", "0.005"]) == 0
    beyond = _write(tmp_path / "x.jsonl", [_row("handoff", [100, 100, 100], [99, 99, 100]),
                                           _row("mixed", [100, 100, 100], [100, 100, 100]),
                                           _row("reformat", [100, 100, 100], [99.3, 99.3, 100])])  # +0.7 points
    capsys.readouterr()
    assert unlike_judge.main([str(before), str(beyond), "--noise-bound", "0.005"]) == 1
    out = capsys.readouterr().out
    assert "FAIL resnet50 reformat 5: median at 50 rises beyond the noise bound of 0.50% (0.00% -> 0.70%)" in out
