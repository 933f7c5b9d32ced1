"""After convergence: build only what can still change the answer, or stop and say so.

A long run converges early (the default tune's best stops moving at its fifth trial) and its
later builds mostly go to plans the model itself predicts far worse than the best. Once the run
has converged by the rule ``placetune tune`` reports (:mod:`placetune.tuning.convergence`: no gain
over :data:`~placetune.tuning.convergence.MIN_GAIN` in ``max(10, budget / 10)`` evaluations; the
study's trials, earlier runs included, where the budget gives :attr:`~search.result.Budget.converged`
as ``placetune tune`` does, else this run's own), each round of the guided agent builds only

* **candidates that could still win**: unmeasured plans whose optimistic prediction, the
  prediction moved :data:`Z` sigmas towards better, beats the best measured by more than
  ``MIN_GAIN``. Sigma (relative) is the larger of the ensemble's spread for that plan and the
  model's out-of-sample error: :data:`MAD_SD` x the median |log error| of its last picks (a median
  absolute deviation read as a normal standard deviation); and
* **re-measurements of the leaders** (measured plans, distinct realisations) while a leader and
  the best are closer than their builds' noise can tell apart
  (``Z x sd x sqrt(1/n_a + 1/n_b)``, :meth:`search.rebuilds.Rebuilds.noise`) and the leader may
  still be better than the best by more than ``MIN_GAIN`` (that width less the best's measured
  lead): the one with fewer builds is built again. Once no leader can beat the best by more than
  ``MIN_GAIN``, which of them wins no longer moves the answer by more than the convergence
  threshold. (The bound is the regret of keeping the best: a best that leads by 0.8 % needs a
  width of 1.8 %, not 1 %; under 2 % noise about 10 builds of each instead of 32.)

When neither remains, the run stops and one note says so (what it did not spend, and why); the
top candidates are still re-measured at the end as before. The rule applies only to a
:class:`~search.result.Budget` with ``settle=True`` and a number of evaluations (a time budget sets
no patience). ``placetune tune`` sets it by default (``--no-stop-when-settled``,
``stop_when_settled = false``: build to the end of the budget); a bare ``Budget`` does not. It
became the default once it met the rule fixed before it was measured
(``benchmarks/later_builds.py``); its first measurement had failed on one noisy case, where the
final re-ranking of a short run found a drift that was not there (fixed in :mod:`search.drift`).

The constants are the textbook ones, not fitted to a benchmark: ``Z = 2`` (a one-sided 2.3 % chance
per plan of passing over one that is truly better by the threshold), the normal MAD factor, and the
convergence rule's own 1 % (a Jetson build's noise).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from placetune.tuning.convergence import MIN_GAIN, patience_for

from .base import BudgetExhausted

__all__ = ["LaterBuilds", "Z", "MAD_SD", "converged_at"]

#: width of the optimistic bound and of the leaders' noise interval, in standard deviations
Z = 2.0
#: a median absolute deviation read as a normal standard deviation
MAD_SD = 1.4826
#: unmeasured plans (best predicted first) whose optimistic bound is checked each round
_SCAN = 24


def converged_at(bests: Sequence[float], patience: int, min_gain: float = MIN_GAIN) -> int | None:
    """The evaluation (1-based) the run converged at, or None: the first evaluation whose best
    (loss, lower is better) is within ``min_gain`` of the current best, once ``patience``
    evaluations have followed it."""
    if not bests or not math.isfinite(bests[-1]):
        return None
    now = bests[-1]
    reach = now + min_gain * abs(now)
    for i, b in enumerate(bests, 1):
        if b <= reach:
            return i if len(bests) - i >= patience else None
    return None


class LaterBuilds:
    """The post-convergence part of the guided agent's run state (a mixin of its ``_State``)."""

    run: Any
    ev: Any
    space: Any
    agent: Any
    rebuilds: bool
    measured: dict[tuple[int, ...], float]
    recent_error: float | None
    members: Callable[[], list[tuple[Any, Any]]]
    realised: Callable[[Sequence[int]], str]
    seen: Callable[[list[int]], bool]
    canon: Callable[[list[int]], tuple[int, ...]]
    builds: Callable[[Sequence[int]], list[float]]
    noise: Callable[[], float]
    rebuild: Callable[[Sequence[int]], Any]
    evaluate: Callable[[list[int], float | None], Any]
    local_step: Callable[..., Any]
    candidates: Callable[..., list[tuple[float, list[int]]]]
    spread: Callable[..., Any]

    def converged(self) -> bool:
        """True once the search has converged: the study's rule where the budget gives it (its earlier
        runs included), else this run's own evaluations (False: a time-only budget, or not ``settle``)."""
        budget = self.run.budget
        if not budget.settle or budget.evaluations is None:
            return False
        if budget.converged is not None:
            return bool(budget.converged())
        sign = -1.0 if self.run.objective.direction == "maximize" else 1.0
        bests = [sign * h.best if h.best is not None else math.inf for h in self.run.history]
        return converged_at(bests, patience_for(int(budget.evaluations))) is not None

    def later_round(self, sur: Any, ranked: list[tuple[float, list[int]]]) -> bool:
        """After convergence, this round's builds (True), or False when the run has not converged.
        Raises :class:`BudgetExhausted` (after a note) when nothing left can change the answer."""
        if not self.converged():
            return False
        best = min(self.measured.values(), default=math.inf)
        k = self.agent.batch if self.run.remaining is None else max(1, min(self.agent.batch, self.run.remaining))
        leader = self.leader() if self.rebuilds else None
        if leader is not None:
            self.rebuild(leader)
            k -= 1
        picks = self.could_win(sur, ranked, best)[:k] if k > 0 and math.isfinite(best) else []
        if leader is None and not picks:
            self.stop_note()
            raise BudgetExhausted()
        for a, pred in picks:
            self.evaluate(a, pred)
        return True

    def could_win(self, sur: Any, ranked: list[tuple[float, list[int]]],
                  best: float) -> list[tuple[list[int], float]]:
        """Unmeasured plans whose optimistic prediction beats ``best`` (loss) by more than ``MIN_GAIN``,
        most optimistic first."""
        err = self.recent_error
        if err is None:  # no out-of-sample error yet: nothing is ruled out
            return [(a, v) for v, a in ranked[:1] if not self.seen(a)]
        step = self.local_step(sur, [])
        pool = self.candidates(([(step[1], step[0])] if step else []) + list(ranked), _SCAN)
        if not pool:
            return []
        mean = np.array([v for v, _ in pool])
        spread = self.spread([a for _, a in pool], self.members())
        sigma = np.maximum(spread / np.maximum(np.abs(mean), 1e-300), MAD_SD * err)
        bound = mean - Z * sigma * np.abs(mean)
        goal = best - MIN_GAIN * abs(best)
        order = np.argsort(bound, kind="stable")
        return [(pool[int(j)][1], float(mean[j])) for j in order if bound[j] < goal]

    def leader(self) -> tuple[int, ...] | None:
        """The leader to build again: of the best measured plan and another measured plan (distinct
        realisations) that the builds' noise cannot yet tell apart from it at a resolution finer than
        ``MIN_GAIN``, the one with fewer builds (None: every measured plan is told apart from the best)."""
        ranked: list[tuple[int, ...]] = []
        seen: set[str] = set()
        for key, loss in sorted(self.measured.items(), key=lambda t: t[1]):
            if not math.isfinite(loss) or abs(loss) >= 1e12:
                break
            if self.realised(key) not in seen:
                seen.add(self.realised(key))
                ranked.append(key)
        if len(ranked) < 2:
            return None
        sd = self.noise()
        best = ranked[0]
        nb = max(1, len(self.builds(best)))
        for c in ranked[1:]:
            gap = abs(math.log(self.measured[c] / self.measured[best]))
            if gap >= Z * sd * math.sqrt(1 / nb + 1):  # past the reach of any plan's noise (ranked: so are the rest)
                break
            nc = max(1, len(self.builds(c)))
            width = Z * sd * math.sqrt(1 / nb + 1 / nc)
            if gap < width and width - gap > MIN_GAIN:  # c may still be better than best by over MIN_GAIN
                return best if nb <= nc else c
        return None

    def stop_note(self) -> None:
        """One line: where the run stopped, what it did not spend, and why."""
        run = self.run
        left = run.remaining or 0
        why = (f"no placement left unmeasured is predicted to beat the best by over {100 * MIN_GAIN:g}%, even at the "
               f"hopeful end of the prediction ({Z:g} sd of the model's error)")
        if self.rebuilds:
            why += f", and the leaders' builds leave none of them room to beat the best by over {100 * MIN_GAIN:g}%"
        run.notes.append(f"stopped after convergence: {why}; {left} of the budget's evaluations not spent "
                         "(--no-stop-when-settled, or stop_when_settled = false, spends them)")
