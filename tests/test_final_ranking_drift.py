"""The guided agent's final re-ranking on a device that drifts within the run when the drift test
could not run: a plan built once early (cold) must not outrank the top candidates re-measured late
(hot) on its single build. The rule that keeps a plan outside the re-measured top as the best
(tests/test_remeasure.py: a baseline built once whose median beats them) holds only where a drift
test ran and found none."""

from __future__ import annotations

import math
import statistics

from placetune.measurement import Measurement
from placetune.tuning.objectives import get_objective
from search.drift import Drift
from search.rebuilds import Rebuilds

RATE = -0.003  # log fps per build: the GPU slows 0.3 % a build as it warms
# plan -> (true fps at build 0, [(build time, noise factor)]): A, B and D were built mid-run, each
# on a lucky first build that made it a candidate; C, truly 4 % worse, was built once, cold, early
PLANS = {
    (0,): (1000.0, [(20, 1.05)]),  # A: the best plan
    (1,): (995.0, [(22, 1.05)]),  # B
    (2,): (990.0, [(24, 1.05)]),  # D
    (3,): (960.0, [(2, 1.0)]),  # C: outside the top 3, built before the device warmed
}
REBUILT_AT = 48  # the end's re-measurements, each on an unlucky (noise-free) build


def _fps(plan: tuple[int, ...], t: int, factor: float, rate: float = RATE) -> float:
    return PLANS[plan][0] * math.exp(rate * t) * factor


def _measurement(builds: list[float]) -> Measurement:
    return Measurement(status="ok", throughput_fps=statistics.median(builds),
                       extra={"builds": [{"throughput_fps": v} for v in builds]})


class _Space:
    def to_placement(self, key):
        return tuple(key)


class _Run:
    """The parts of a search run the final re-ranking reads: its measurements (each plan's median
    over its builds), its best of them, and re-measuring a plan at the next build's time."""

    def __init__(self, rate: float = RATE, rebuilt: float = 1.0) -> None:
        self.rate, self.rebuilt = rate, rebuilt
        self.objective = get_objective("throughput")
        self.space = _Space()
        self.notes: list[str] = []
        self.final_rule: str | None = None
        self.evaluations = REBUILT_AT
        self.values = {k: [_fps(k, t, f, rate) for t, f in builds] for k, (_, builds) in PLANS.items()}
        self._rerank()

    def known(self, key) -> Measurement:
        return _measurement(self.values[tuple(key)])

    def loss(self, m: Measurement) -> float:
        return self.objective.loss(m)

    def remeasure(self, key) -> Measurement:
        key = tuple(key)
        self.values[key].append(_fps(key, self.evaluations, self.rebuilt, self.rate))
        self.evaluations += 1
        self._rerank()
        return self.known(key)

    def _rerank(self) -> None:
        best = max(self.values, key=lambda k: statistics.median(self.values[k]))
        self.best_assignment = list(best)
        self.best_measurement = self.known(best)
        self.best_value = self.best_measurement.throughput_fps


class _State(Rebuilds, Drift):
    def __init__(self, rate: float = RATE, rebuilt: float = 1.0) -> None:
        self.run = _Run(rate, rebuilt)
        self.build_log: dict = {}
        self.beta, self.beta_se = 0.0, None
        self.remeasured = 0
        self.measurements = []
        self.measured = {k: self.run.loss(self.run.known(k)) for k in PLANS}
        for k, (_, builds) in PLANS.items():
            for t, f in builds:
                self.log_build(k, -_fps(k, t, f, rate), t)

    def realised(self, key) -> str:
        return str(tuple(key))


def test_a_cold_early_plan_does_not_outrank_the_re_measured_top_when_the_drift_was_not_tested():
    s = _State()
    top = sorted(PLANS, key=lambda k: s.measured[k])[:3]
    assert (3,) not in top  # C is outside the top 3 on the values as measured
    s.remeasure_top(3)
    # two builds of each re-measured plan: no build after each plan's first is repeated, so no test
    assert s.beta_se is None and "drift: not tested" in s.drift_note()
    # each re-measured median fell behind C's one cold build: on the store's rule C would be the best
    assert all(statistics.median(s.run.values[k]) < s.run.values[(3,)][0] for k in top)
    # so C, the best median on one build against their two, is built once more, as late (hot) as theirs
    assert len(s.run.values[(3,)]) == 2 and s.run.evaluations == REBUILT_AT + 4
    assert s.run.best_assignment == [0]  # A: the best of the four on their medians, the truly best plan
    assert s.run.final_rule is not None and "#1" in s.run.final_rule
    note = s.run.notes[-1]
    assert "measured once" not in note and "the drift was not tested: built once more: 954.3 -> 889 (2 builds)" in note
    assert note.endswith("ranked with the top: the re-measured #1 is the best"), note


def test_where_the_budget_runs_out_before_the_plan_outside_the_top_is_built_again_the_re_measured_top_decides():
    """No build left for the plan outside the top: it is not kept (its one cold build against the
    top's hot ones), and the note says that it could not be built once more."""
    from search.base import BudgetExhausted

    s = _State()
    remeasure, left = s.run.remeasure, [None] * 3  # builds left: the top 3's, none for C

    def limited(key):
        if not left:
            raise BudgetExhausted()
        left.pop()
        return remeasure(key)

    s.run.remeasure = limited
    s.remeasure_top(3)
    assert len(s.run.values[(3,)]) == 1 and s.run.best_assignment == [0]
    note = s.run.notes[-1]
    assert "not kept: the drift was not tested" in note and "the time budget ran out before it could be built" in note


def test_a_plan_outside_the_top_with_a_better_median_stays_the_best_where_a_drift_test_found_none():
    """The store's rule where a drift test ran: no drift, and every re-measured median (a lucky first
    build, an unlucky second) falls behind C's one build, so C stays the run's best."""
    s = _State(rate=0.0, rebuilt=0.85)
    for i, t in enumerate((0, 8, 16, 24, 32, 40)):  # a reference built every 8 builds on a device that does not drift
        s.log_build((9,), -1000.0 * (1.01 if i % 2 else 0.99), t)
    s.remeasure_top(3)
    assert s.beta_se is not None and s.beta == 0.0 and "drift: none detected" in s.drift_note()
    assert s.run.best_assignment == [3]
    note = s.run.notes[-1]
    assert "one measured once (960)" in note and "the drift test found none" in note, note


def test_without_a_drift_the_plan_outside_the_top_built_once_more_stays_the_best_where_it_is_better(monkeypatch):
    """No drift and none tested: C, truly the best plan but built on a plain first build while the
    top three's were lucky, is outside the top; each re-measured median falls behind its one build,
    it is built once more and, on the medians over builds, stays the best."""
    monkeypatch.setitem(PLANS, (3,), (1030.0, [(2, 1.0)]))
    s = _State(rate=0.0, rebuilt=0.95)
    s.remeasure_top(3)
    assert s.beta_se is None and len(s.run.values[(3,)]) == 2
    assert s.run.best_assignment == [3] and s.run.best_value == statistics.median([1030.0, 1030.0 * 0.95])
    assert s.run.final_rule is not None and "top 4" in s.run.final_rule, s.run.final_rule
    note = s.run.notes[-1]
    assert "built once more: 1030 -> 1004 (2 builds), ranked with the top: it stays the best" in note, note
    assert "measured once" not in note, note
