"""A study baseline the uncorrected simulator rules out and that measures far worse still (the whole
network on one DLA, far past the length its SRAM holds) is built but not fitted: its slowdown would
be read as a slow DLA on every plan the search considers."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_unlike  # noqa: E402
from device_truths import TruthJetson, truth  # noqa: E402

from search import Budget, get_agent  # noqa: E402
from search.guided import ruled_out  # noqa: E402


def test_ruled_out_compares_the_loss_ratio_with_the_study_baselines_rule():
    assert ruled_out(-1000.0, -1600.0) and not ruled_out(-1100.0, -1600.0)  # throughput: 1.6x and 1.45x worse
    assert ruled_out(16.0, 10.0) and not ruled_out(14.0, 10.0)  # a time: 1.6x and 1.4x worse
    assert not ruled_out(float("inf"), -1600.0) and not ruled_out(-1000.0, float("nan"))
    assert not ruled_out(1e12, 10.0)  # a penalised (infeasible) loss compares with nothing


def _fitted_first(family: str, draw: int) -> tuple[int, int]:
    """(measurements the first fit used, builds before it) of a 7-build guided run on googlenet."""
    ev = bench_unlike.evaluator("googlenet", TruthJetson(truth(family, draw)))
    r = get_agent("guided", seed=801).run(ev, Budget(7))
    fits = r.extra["fits"]
    return fits[0][0], 5


def test_baselines_that_spill_far_past_the_dla_knee_are_built_but_not_fitted():
    # googlenet on a `mixed` truth: all-DLA and DLA0|DLA1 (ruled out 3.6x and 2.6x) measure 3x and 1.6x
    # worse than predicted; the first fit has the other three of round 0's five builds
    fitted, built = _fitted_first("mixed", 16)
    assert (fitted, built) == (3, 5)


def test_baselines_that_measure_as_predicted_are_fitted():
    # a `handoff` truth: the same baselines measure faster than predicted (tensors kept on chip): fitted
    fitted, built = _fitted_first("handoff", 16)
    assert (fitted, built) == (5, 5)
