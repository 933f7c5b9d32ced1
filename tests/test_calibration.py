"""The simulated Jetson reproduces the published Jetson numbers (benchmarks/calibration.py).

Each case states its tolerance in ``benchmarks/calibration.py`` (``Case.tolerance``):
+-20 % on ratios, +-25 % on the Orin absolute DLA figures, +-30 % on the Xavier absolute GPU
latencies, a bound for the "low single ms" Orin GPU case and a range for loadable counts.
Cases with tolerance None are informative and only have to compute.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"
_spec = importlib.util.spec_from_file_location("placetune_calibration", _PATH)
calibration = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = calibration  # dataclasses look their module up
_spec.loader.exec_module(calibration)


@pytest.mark.parametrize("case", calibration.CASES, ids=[c.name for c in calibration.CASES])
def test_calibration_case(case):
    simulated = float(case.compute())
    assert simulated > 0
    err = simulated / case.published - 1.0
    assert case.passes(simulated), (
        f"{case.what}: simulated {simulated:.4g} {case.unit} vs published {case.published:.4g} "
        f"({100 * err:+.1f} %, tolerance {case.tolerance}, check {case.check} {case.bounds})"
    )


def test_ratio_tolerances_are_twenty_percent():
    ratios = [c for c in calibration.CASES if c.unit == "x" and c.tolerance is not None]
    assert len(ratios) >= 10 and all(c.tolerance <= 0.2 for c in ratios)


def test_markdown_table_labels_simulated():
    results = [(c, 1.0) for c in calibration.CASES[:2]]
    text = calibration.markdown(results)
    assert text.startswith("| case |") and "simulated" in text.lower()
