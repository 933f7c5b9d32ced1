"""What a round of the guided agent builds: its pick policy.

Given the model's ranked predictions (the round's inner search), a round picks

* **the best predicted plan**, then **the most optimistic plans of other stage-device patterns**
  (:meth:`Picks.select`): the predicted mean less ``kappa`` times the spread of the model's
  posterior draws (:meth:`Picks.members`, :meth:`Picks.spread`), each pick at least a tenth of
  the units (at least 4) away from every other, one per pattern (:meth:`Picks.pattern`: DLA0 and
  DLA1 swapped are one pattern) before the rest are filled by score;
* **model-ranked neighbours of the best measured plan** (:meth:`Picks.local_step`): local search
  on the device, which keeps the search climbing where the model misses what it cannot express.

How many of each a round builds, the trust region and the candidate pool (unmeasured, not
predicted to fail, within the trust region) are the run state's, :mod:`search.guided`;
:mod:`search.later` ranks its post-convergence pool with the same spread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from placetune.placement.stages import assignment_of

from .surrogate import Fit, Surrogate

__all__ = ["Picks"]

#: predicted candidates scanned for a round's picks (best first)
_SCAN = 2000


class Picks:
    """The picking part of the guided agent's run state (a mixin of its ``_State``: it uses ``ev``,
    ``space``, ``run``, ``agent``'s ``kappa``, ``fit``, ``model``, ``measured``, ``portfolio``,
    ``top_measured``, ``candidates``, ``seen``, ``canon`` and ``distance``)."""

    ev: Any
    space: Any
    run: Any
    agent: Any
    fit: Fit
    model: Any
    measured: dict[tuple[int, ...], float]
    portfolio: dict[Any, Any]
    top_measured: Callable[[int], list[list[int]]]
    candidates: Callable[..., list[tuple[float, list[int]]]]
    seen: Callable[[list[int]], bool]
    canon: Callable[[list[int]], tuple[int, ...]]
    distance: Callable[[Sequence[int], Sequence[int]], int]

    def members(self) -> list[tuple[Any, Any]]:
        """(profile, correction) of each ensemble member for the spread of predictions."""
        draws = self.model.draws
        if self.model.name == "profile" and self.fit.ensemble:
            return [(p, draws[j % len(draws)] if draws else None) for j, p in enumerate(self.fit.ensemble)]
        return [(self.model.profile, d) for d in draws]

    def spread(self, assignments: Sequence[list[int]], members: Sequence[tuple[Any, Any]]) -> np.ndarray:
        """Standard deviation of the ensemble members' (profile, correction) predictions of each
        assignment (0 where fewer than two members predict it)."""
        if len(members) < 2:
            return np.zeros(len(assignments))
        preds = np.array([[Surrogate(self.ev, self.space, self.run.objective, p, corr).loss(a) for a in assignments]
                          for p, corr in members])
        preds[~np.isfinite(preds)] = np.nan
        with np.errstate(all="ignore"):
            return np.nan_to_num(np.nanstd(preds, axis=0), nan=0.0)


    def select(self, sur: Surrogate, fit: Fit, ranked: list[tuple[float, list[int]]],
               k: int) -> list[tuple[list[int], float]]:
        """Up to ``k`` unmeasured candidates: the best predicted, then optimistic ones of other patterns."""
        # the pool: the best predicted, at most 3 per stage-device pattern so that others get in,
        # and the best of every pattern the inner search refined (its portfolio)
        pool = list(ranked[:_SCAN])
        pool += sorted(((sur.loss(a), a) for a in (assignment_of(self.space, st) for st in self.portfolio.values())),
                       key=lambda t: t[0])
        anchors = [np.asarray(b) for b in self.top_measured(3)]  # the trust region's centres, once
        top = self.candidates(sorted(pool, key=lambda t: t[0]), 24, anchors=anchors, per_pattern=3)
        if not top:
            return []
        mean = np.array([v for v, _ in top])
        members = self.members() if fit is self.fit else [(p, None) for p in fit.ensemble]
        spread = self.spread([a for _, a in top], members)
        score = mean - self.agent.kappa * spread
        picks: list[tuple[list[int], float]] = [(top[0][1], float(top[0][0]))]
        patterns = {self.pattern(top[0][1])}
        apart = max(4, self.space.n_units // 10)  # a diverse pick differs from every other in this many units
        order = np.argsort(score, kind="stable")
        for j in order:
            if len(picks) >= k:
                break
            a = top[int(j)][1]
            if any(a == b for b, _ in picks) or not math.isfinite(mean[j]):
                continue
            pat = self.pattern(a)
            if pat in patterns or min(self.distance(a, b) for b, _ in picks) < apart:
                continue
            patterns.add(pat)
            picks.append((a, float(mean[j])))
        for j in order:  # not enough distinct patterns: fill by score
            if len(picks) >= k:
                break
            a = top[int(j)][1]
            if not any(a == b for b, _ in picks) and math.isfinite(mean[j]):
                picks.append((a, float(mean[j])))
        return picks[:k]

    def local_step(self, sur: Surrogate, taken: list[list[int]]) -> tuple[list[int], float] | None:
        """The unmeasured stage neighbour of the best measured placement that the model likes most.

        Where the model misses effects it cannot represent, this keeps the search climbing on
        measured values (local search ranked by the model).
        """
        centre = self.top_measured(1)  # the best measured
        if not centre or not math.isfinite(self.measured[tuple(centre[0])]):
            return None
        best: tuple[float, list[int]] | None = None
        for b in self.space.stage_neighbours(centre[0]):
            if self.seen(b) or any(self.canon(b) == self.canon(t) for t in taken):
                continue
            v = sur.loss(b)
            if math.isfinite(v) and (best is None or v < best[0]):
                best = (v, b)
        return None if best is None else (best[1], best[0])

    def pattern(self, a: list[int]) -> tuple[int, ...]:
        """The sequence of stage devices, DLA cores named in order of first use (diversity: one
        candidate per pattern first; two plans that swap DLA0 and DLA1 are one pattern)."""
        return tuple(s.device for s in self.space.stages(list(self.canon(a))))
