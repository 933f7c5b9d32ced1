"""A device that drifts during the run: detect it from plans built more than once, compare
measurements on the same footing, and rank the final candidates on equal numbers of builds.

A Jetson that warms up over a night runs the same engine slower at build 40 than at build 3. A
search that compares a cold early build with hot late ones ranks on the drift, not on the plans.
The guided agent keeps every build's value with the number of builds done before it (its time,
in builds). Plans built more than once (the reference below, close contenders, the final top
candidates) give the drift: ``log value = plan + beta x t + noise``, with ``beta`` the one slope
that fits every re-built plan's builds about its own mean (least squares).

**The test.** Each plan's first build is left out of the fit: a plan is built again *because* that
build was among the best, so it is a lucky one more often than not, and the builds after it fall
back towards the plan's true value, which reads as a device that slows even where none does (on a
short noisy run without drift this found -0.8 % per 10 builds and crowned a worse plan). ``beta``
counts only when a two-sided t-test on the slope rejects "no drift" at :data:`DRIFT_LEVEL` (the
slope over its standard error, the residual sd of the fit over the spread of the build times,
against Student's t with the fit's residual degrees of freedom), and only with at least
:data:`DRIFT_MIN_DOF` of them. Then the final re-ranking compares the top candidates on the same
number of builds each (their latest ``m``, ``m`` the fewest any of them has), drift-corrected (as
they would have been at build 0), each with its own slope: its builds' slope shrunk towards the
common one (a plan whose bottleneck is on a core that does not drift does not slow with the GPU).
Otherwise the final re-ranking is the median over all builds of each (what the store holds), and
the note gives the bound: the runner-up's gap against the noise's reach ``2 sd x sqrt(1/n_a +
1/n_b)``. During the run the search ranks the values as measured.

* **the reference**: with re-measuring on (a budget of :data:`search.guided.REMEASURE_MIN_BUDGET`
  or more), every :data:`DRIFT_EVERY` builds the best measured plan is built again (it is the
  plan every other is compared with, and a second build of it is also a guard against a lucky
  one);
* the run's notes say what drift was found and how the final candidates were ranked.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence
from typing import Any

from placetune.wording import figure

__all__ = ["Drift", "DRIFT_EVERY", "DRIFT_LEVEL", "DRIFT_MIN_DOF"]

#: builds between two builds of the reference: a Jetson build takes 1-2 minutes, so about every
#: quarter of an hour, short against the hours over which a device warms or throttles
DRIFT_EVERY = 10
#: the drift test's level (two-sided): the usual 5 %, about the two standard errors used before
DRIFT_LEVEL = 0.05
#: fewest residual degrees of freedom for the drift test: below 3, Student's t at 5 % is over 3.2 and
#: the residual sd rests on one or two differences, so one odd build decides
DRIFT_MIN_DOF = 3


@functools.lru_cache(maxsize=64)
def _t_crit(dof: int) -> float:
    """The two-sided :data:`DRIFT_LEVEL` quantile of Student's t with ``dof`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(1 - DRIFT_LEVEL / 2, dof))


class Drift:
    """The drift-tracking part of the guided agent's run state (a mixin of its ``_State``: it
    uses ``run``, ``measured``, ``realised`` and ``noise``)."""

    run: Any
    measured: dict[tuple[int, ...], float]
    build_log: dict[str, list[tuple[int, float]]]
    beta: float
    beta_se: float | None
    _raw_beta: float  # the slope before the noise test (set with beta_se)
    drift_dof: int  # the drift test's residual degrees of freedom
    rank_note: str | None = None  # how the final candidates were ranked, where no drift was found
    #: the final ranking (:meth:`rank_equal`): each candidate with its score (the objective's value), best first
    final_ranking: list[tuple[tuple[int, ...], float]] | None = None
    final_builds: int | None = None  # with a drift: the latest builds of each candidate it ranked on
    drift_checked: int

    def log_build(self, key: Sequence[int], loss: float, t: int) -> None:
        """Record one ok build of an assignment's realisation: its log |loss| at time ``t``."""
        if math.isfinite(loss) and 0 < abs(loss) < 1e12:
            self.build_log.setdefault(self.realised(key), []).append((t, math.log(abs(loss))))  # type: ignore[attr-defined]

    def estimate_drift(self) -> None:
        """``beta`` (log loss per build) from the plans built more than once, each plan's first
        build left out; 0 unless the t-test (module docstring) rejects "no drift"."""
        sxy = sxx = syy = 0.0
        n = plans = 0
        for builds in self.build_log.values():
            later = sorted(builds)[1:]  # the build that made the plan a candidate is left out
            if len(later) < 2:
                continue
            tm = sum(t for t, _ in later) / len(later)
            ym = sum(y for _, y in later) / len(later)
            sxy += sum((t - tm) * (y - ym) for t, y in later)
            sxx += sum((t - tm) ** 2 for t, _ in later)
            syy += sum((y - ym) ** 2 for _, y in later)
            n, plans = n + len(later), plans + 1
        self.drift_dof = dof = n - plans - 1
        self._raw_beta = 0.0
        if sxx <= 0 or dof < DRIFT_MIN_DOF:  # no evidence either way
            self.beta, self.beta_se = 0.0, None
            return
        b = sxy / sxx if syy > 1e-12 else 0.0  # builds identical (a noise-free device): no slope
        self.beta_se = math.sqrt(max(0.0, syy - b * sxy) / dof / sxx)
        self.beta = b if abs(b) > _t_crit(dof) * self.beta_se else 0.0
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

    def own_slope(self, builds: Sequence[tuple[int, float]], sigma: float) -> float:
        """One plan's drift slope for the final ranking: its own least-squares slope over its builds
        (sd ``sigma`` over the root of the spread of its build times) shrunk towards the common slope
        ``beta`` (the prior, sd ``|beta|``: a plan's exposure lies between none, its work on a core
        that does not drift, and about twice the average the common slope measures), precision-
        weighted. One slope for every plan lifts a plan that drifts less than the average by the
        others' drift. Builds at a single time (or one build), or no noise estimate: ``beta``."""
        if len(builds) < 2 or not self.beta or sigma <= 0:
            return self.beta
        tm = sum(t for t, _ in builds) / len(builds)
        ym = sum(y for _, y in builds) / len(builds)
        sxx = sum((t - tm) ** 2 for t, _ in builds)
        if sxx <= 0:
            return self.beta
        own = sum((t - tm) * (y - ym) for t, y in builds) / sxx
        w_own, w_prior = sxx / sigma ** 2, 1.0 / self.beta ** 2
        return (w_prior * self.beta + w_own * own) / (w_prior + w_own)

    def rank_equal(self, top: list[tuple[int, ...]]) -> tuple[int, ...] | None:
        """The best of ``top``: with a drift, on equal numbers of builds (each one's latest ``m``),
        each brought to build 0 with its own slope (:meth:`own_slope`); without, on the median over all its builds. Sets :attr:`rank_note`."""
        logs = [self.build_log.get(self.realised(k)) or [] for k in top]  # type: ignore[attr-defined]
        m = min((len(b) for b in logs), default=0)
        if m == 0:
            return None
        # the median of the values (as the store combines builds: two builds, their mean)
        if self.beta:
            sigma = self.noise()  # type: ignore[attr-defined]
            score = [statistics.median(math.exp(y - self.own_slope(b, sigma) * t) for t, y in sorted(b)[-m:])
                     for b in logs]
        else:
            score = [statistics.median(math.exp(y) for _, y in b) for b in logs]
        minimize = self.run.objective.direction == "minimize"
        order = sorted(range(len(top)), key=lambda i: score[i] if minimize else -score[i])
        self.final_ranking = [(top[i], score[i]) for i in order]
        self.final_builds = m if self.beta else None
        self.rank_note = None
        if not self.beta and len(order) >= 2:
            a, b = order[0], order[1]
            gap = abs(math.log(score[b] / score[a]))
            reach = 2 * self.noise() * math.sqrt(1 / len(logs[a]) + 1 / len(logs[b]))  # type: ignore[attr-defined]
            self.rank_note = (f"ranked on the median over each one's builds ({len(logs[a])} and {len(logs[b])}): "
                              f"#1 leads #2 by {100 * gap:.1f}%, "
                              + ("beyond" if gap >= reach else "within")
                              + f" the noise's reach of {100 * reach:.1f}% (2 sd x sqrt(1/n_a + 1/n_b))")
        return top[order[0]]

    def crown(self, key: Sequence[int]) -> None:
        """Make an assignment measured in this run the run's best (the final ranking's choice)."""
        run = self.run
        m = run.known(key)
        run.best_assignment = list(key)
        run.best_placement = run.space.to_placement(list(key))
        run.best_measurement = m
        run.best_value = run.objective.value(m)

    def final_rule(self) -> str | None:
        """How :meth:`rank_equal` chose, with each candidate's score (None before it ranked): the
        run's final pick's reason, stored with the study (:attr:`SearchResult.final_rule`)."""
        if not self.final_ranking:
            return None
        obj = self.run.objective
        unit = f" {obj.units[0]}" if obj.units and obj.units[0] else ""
        if self.final_builds is not None:
            per10 = 100 * (math.exp(10 * self._raw_beta) - 1)
            how = (f"on each one's latest {self.final_builds} builds brought to build 0 with its own drift slope (a drift "
                   f"of {per10:+.1f}% per 10 builds was found)")
        else:
            how = "on the median over each one's builds"
        def named(k: tuple[int, ...]) -> str:
            m = self.run.known(k)
            mid = (m.extra or {}).get("_id") if m is not None else None
            return "" if mid is None else f" (measurement {mid})"

        scores = ", ".join(f"#{i + 1} {figure(v)}{unit}{named(k)}" for i, (k, v) in enumerate(self.final_ranking))
        return (f"the guided agent's final ranking of its top {len(self.final_ranking)} re-measured candidates, "
                f"{how}: {scores}")

    def drift_note(self) -> str | None:
        """One line for the run's notes (None when no plan was built often enough to test, and the
        final ranking had nothing to say)."""
        if self.beta_se is None:
            return None if not self.rank_note else (
                f"drift: not tested (fewer than {DRIFT_MIN_DOF} degrees of freedom in the builds after each plan's "
                f"first); the final top candidates were {self.rank_note}")
        per10 = 100 * (math.exp(10 * self._raw_beta) - 1)  # the objective's own value: + is larger
        test = f"t-test on the slope, {100 * DRIFT_LEVEL:g}% two-sided, {self.drift_dof} dof"
        if self.beta:
            return (f"drift: measurements moved {per10:+.1f}% per 10 builds (from the plans built more than once; "
                    f"{test}); the final top candidates were ranked on drift-corrected values")
        line = f"drift: none detected ({per10:+.1f}% per 10 builds, within the noise: {test})"
        return line + (f"; the final top candidates were {self.rank_note}" if self.rank_note else "")
