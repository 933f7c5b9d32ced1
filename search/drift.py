"""A device that drifts during the run: detect it from plans built more than once, compare
measurements on the same footing, and rank the final candidates on equal numbers of builds.

A Jetson that warms up over a night runs the same engine slower at build 40 than at build 3. A
search that compares a cold early build with hot late ones ranks on the drift, not on the plans.
The guided agent keeps every build's value with the number of builds done before it (its time,
in builds). Plans built more than once (the reference below, close contenders, the final top
candidates) give the drift: ``log value = plan + beta x t + noise``, with ``beta`` the one slope
that fits every re-built plan's builds about its own mean (least squares). ``beta`` counts only
when it is more than two standard errors from zero (the build-to-build noise over the spread of
the build times); the measured values are then compared drift-corrected, as they would have
been at build 0 in the final re-ranking (during the run the search ranks the values as measured).

* **the reference**: with re-measuring on (a budget of :data:`search.guided.REMEASURE_MIN_BUDGET`
  or more), every :data:`DRIFT_EVERY` builds the best measured plan is built again (it is the
  plan every other is compared with, and a second build of it is also a guard against a lucky
  one);
* **the final re-ranking** compares the top candidates on the same number of builds each (their
  latest ``m``, ``m`` the fewest any of them has), drift-corrected;
* the run's notes say what drift was found.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

__all__ = ["Drift", "DRIFT_EVERY"]

#: builds between two builds of the reference: a Jetson build takes 1-2 minutes, so about every
#: quarter of an hour, short against the hours over which a device warms or throttles
DRIFT_EVERY = 10


class Drift:
    """The drift-tracking part of the guided agent's run state (a mixin of its ``_State``: it
    uses ``run``, ``measured``, ``realised`` and ``noise``)."""

    run: Any
    measured: dict[tuple[int, ...], float]
    build_log: dict[str, list[tuple[int, float]]]
    beta: float
    beta_se: float | None
    _raw_beta: float  # the slope before the noise test (set with beta_se)
    drift_checked: int

    def log_build(self, key: Sequence[int], loss: float, t: int) -> None:
        """Record one ok build of an assignment's realisation: its log |loss| at time ``t``."""
        if math.isfinite(loss) and 0 < abs(loss) < 1e12:
            self.build_log.setdefault(self.realised(key), []).append((t, math.log(abs(loss))))  # type: ignore[attr-defined]

    def estimate_drift(self) -> None:
        """``beta`` (log loss per build) from the plans built more than once; 0 unless it is
        more than two standard errors from zero."""
        sxy = sxx = 0.0
        for builds in self.build_log.values():
            if len(builds) < 2:
                continue
            tm = sum(t for t, _ in builds) / len(builds)
            ym = sum(y for _, y in builds) / len(builds)
            sxy += sum((t - tm) * (y - ym) for t, y in builds)
            sxx += sum((t - tm) ** 2 for t, _ in builds)
        if sxx <= 0:
            self.beta, self.beta_se = 0.0, None
            return
        b = sxy / sxx
        self.beta_se = self.noise() / math.sqrt(sxx)  # type: ignore[attr-defined]
        self.beta = b if abs(b) > 2 * self.beta_se else 0.0
        self._raw_beta = b

    def corrected(self, key: Sequence[int]) -> float | None:
        """The drift-corrected loss of an assignment (the median over its builds of each build
        brought to time 0); None when it has no ok build logged."""
        builds = self.build_log.get(self.realised(key))  # type: ignore[attr-defined]
        if not builds:
            return None
        sign = -1.0 if self.run.objective.direction == "maximize" else 1.0
        return sign * statistics.median(math.exp(y - self.beta * t) for t, y in builds)

    def correct_measured(self) -> None:
        """Re-estimate the drift. The measured values the search ranks by during the run stay as
        measured (the reference's rebuilds bring a cold best down): one slope for every plan
        overcorrects the plans that run mostly on a device that does not drift, and on the
        benchmark's tuning part ranking the run on corrected values chose worse plans; the
        slope corrects the final re-ranking of the top candidates, which run alike."""
        self.estimate_drift()

    def reference_due(self) -> bool:
        """True when the reference is due for another build."""
        return self.run.evaluations - self.drift_checked >= DRIFT_EVERY

    def rank_equal(self, top: list[tuple[int, ...]]) -> tuple[int, ...] | None:
        """The best of ``top`` on equal numbers of builds (each one's latest ``m``), drift-corrected."""
        logs = [self.build_log.get(self.realised(k)) or [] for k in top]  # type: ignore[attr-defined]
        m = min((len(b) for b in logs), default=0)
        if m == 0:
            return None
        # the median of the values (as the store combines builds: two builds, their mean)
        score = [statistics.median(math.exp(y - self.beta * t) for t, y in sorted(b)[-m:]) for b in logs]
        minimize = self.run.objective.direction == "minimize"
        j = min(range(len(top)), key=lambda i: score[i] if minimize else -score[i])
        return top[j]

    def crown(self, key: Sequence[int]) -> None:
        """Make an assignment measured in this run the run's best (the final ranking's choice)."""
        run = self.run
        m = run.known(key)
        run.best_assignment = list(key)
        run.best_placement = run.space.to_placement(list(key))
        run.best_measurement = m
        run.best_value = run.objective.value(m)

    def drift_note(self) -> str | None:
        """One line for the run's notes (None when no plan was built twice)."""
        if self.beta_se is None:
            return None
        per10 = 100 * (math.exp(10 * self._raw_beta) - 1)  # the objective's own value: + is larger
        if self.beta:
            return (f"drift: measurements moved {per10:+.1f}% per 10 builds (from the plans built more than once); "
                    "the final top candidates were ranked on drift-corrected values")
        return f"drift: none detected ({per10:+.1f}% per 10 builds, within the noise)"
