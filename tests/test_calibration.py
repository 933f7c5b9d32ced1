"""The simulated Jetson against published numbers (benchmarks/calibration.py, issue 15).

The simulator's per-architecture constants are fitted to the ``fit`` rows of
``placetune/data/published.csv``; the ``validate`` rows are never used to set them. These tests
check that split is respected (changing a validate row changes nothing in the fit), that the
stored fit is what the fitter reproduces, the issue's validation targets and the MLPerf
data-parallel gain range, and that rows the simulator cannot express are listed with a reason.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from placetune.backends.simulate import costs
from placetune.calibration.builtin import fit_builtin, use_values
from placetune.calibration.published import error_summary, evaluate, load_published, published_cases

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"
_spec = importlib.util.spec_from_file_location("placetune_calibration", _PATH)
calibration = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = calibration
_spec.loader.exec_module(calibration)


@pytest.fixture
def restore_constants():
    saved = dict(costs.ARCH)
    yield
    costs.ARCH.update(saved)
    costs._TABLE_CACHE.clear()


def test_split_is_the_declared_rule():
    rows = load_published()
    for r in rows:
        rule = "validate" if r.source.startswith("mlperf") or r.platform in ("orin-nx-16gb", "orin-nx-8gb",
                                                                             "xavier-nx") else "fit"
        assert r.split == rule, r.id


def test_unexpressible_rows_are_skipped_with_a_reason():
    cases = published_cases()
    skipped = {c.row.id: c.skip for c in cases if c.skip}
    assert "drive-orin-x" in skipped["cudla-orinx-yolov5s-gpu-bs1"]
    assert "not in the zoo" in skipped["mlperf30-orin-retinanet-offline"]
    assert all(skipped.values())
    kept = [c for c in cases if not c.skip]
    assert {c.row.split for c in kept} == {"fit", "validate"} and len(kept) >= 20


def test_fit_never_sees_validate_rows(restore_constants):
    cases = published_cases()
    base = fit_builtin(cases, iterations=2)
    moved = [dataclasses.replace(c, row=dataclasses.replace(c.row, value=c.row.value * 3))
             if c.row.split == "validate" else c for c in cases]
    other = fit_builtin(moved, iterations=2)
    assert other.values == base.values and set(base.rows) == {c.row.id for c in cases
                                                              if not c.skip and c.row.split == "fit"}


def test_stored_fit_is_reproduced_by_the_fitter(restore_constants):
    stored = json.loads(costs.FIT_FILE.read_text())["values"]
    fit = fit_builtin()
    for arch, values in stored.items():
        for k, v in values.items():
            assert fit.values[arch][k] == pytest.approx(v, rel=0.02), (arch, k)


def test_fit_improves_on_the_priors(restore_constants):
    fit_cases = [c for c in published_cases() if not c.skip and c.row.split == "fit"]
    fitted = error_summary(evaluate(fit_cases))
    use_values({})
    prior = error_summary(evaluate(fit_cases))
    assert fitted["median"] < prior["median"] and fitted["median"] <= 0.10


def test_validation_error_meets_the_issue_targets():
    val = evaluate(split="validate")
    s = error_summary(val)
    assert s["n"] >= 10
    assert s["median"] <= calibration.TARGET_MEDIAN and s["max"] <= calibration.TARGET_MAX, s


def test_data_parallel_gain_in_the_mlperf_range():
    gpu, both, gain = calibration.data_parallel_gain()
    lo, hi = calibration.GAIN_RANGE
    assert both > gpu and lo <= gain <= hi


def test_report_labels_simulated_and_shows_both_splits():
    text, fit, val = calibration.report()
    assert "fit (set the constants)" in text and "validate (never used" in text
    assert "simulated" in text.lower() and fit and val
