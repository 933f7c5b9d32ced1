"""Where the guided agent's model may be blind: builds it cannot rank, and a local correction
when they surprise it.

A model that misses an effect no feature of it expresses (say, small tensors handed on chip from
one DLA layer to the next) predicts well near the plans it was fitted on and never builds where
the effect pays, because its predictions there look no better. Two rules guard against that:

* **a share of builds where the model cannot discriminate** (:meth:`BlindSpots.blind_pick`):
  in every other round (:data:`EXPLORE_EVERY`) one build goes to the plan, among those the model
  predicts within its own error of its best prediction (it cannot tell them apart from its
  best), that differs most from every plan measured so far (units on other devices, DLA cores
  relabelled alike). By the model's own account such a build costs nothing in expectation; it
  pays when the model is wrong there. With the default three builds a round that is one build in
  six after the first round: two at a budget of 15, seven or eight at 50.
* **a larger hypothesis space when such a build surprises the model**: once an exploration
  build misses its prediction by more than twice the larger of the build-to-build noise and the
  model's error, every prediction is corrected by a kernel average of the model's residuals on
  the measured plans near it (:class:`LocalResidual`), shrunk towards the model: what no feature
  expresses is then learned where it was seen, and the inner search follows it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import canonical

__all__ = ["BlindSpots", "LocalResidual", "EXPLORE_EVERY"]

#: an exploration build every this many rounds (see the module docstring for the share)
EXPLORE_EVERY = 2
#: pseudo-observations of zero residual in the local correction: one measured plan right at a
#: candidate moves its prediction half-way to the measurement
_PRIOR_WEIGHT = 1.0


class LocalResidual:
    """A kernel average of the model's time-like log residuals on measured plans:
    ``sum k r / (PRIOR + sum k)`` with ``k = exp(-distance / length)`` (units on other devices,
    DLA cores relabelled alike).

    Args:
        space: the unit space.
        keys: the measured assignments.
        residuals: ``log(measured / predicted)`` of each, time-like (> 0: slower than predicted).
        length: the kernel's length in units (the distance at which the agent calls two plans
            different).
    """

    def __init__(self, space: Any, keys: Sequence[Sequence[int]], residuals: Sequence[float], length: float) -> None:
        self.space = space
        self.x = np.array([canonical(space, list(k)) for k in keys], dtype=np.int16)
        self.r = np.asarray(residuals, dtype=float)
        self.length = float(length)

    def __call__(self, assignment: Sequence[int]) -> float:
        if not self.r.size:
            return 0.0
        c = np.asarray(canonical(self.space, list(assignment)), dtype=np.int16)
        k = np.exp(-(self.x != c).sum(axis=1) / self.length)
        return float(k @ self.r / (_PRIOR_WEIGHT + k.sum()))


class BlindSpots:
    """The exploring part of the guided agent's run state (a mixin of its ``_State``: it uses
    ``space``, ``measured``, ``predicted``, ``run``, ``feasibility``, ``seen``, ``distance``,
    ``noise`` and ``cv_error``)."""

    space: Any
    run: Any
    measured: dict[tuple[int, ...], float]
    predicted: dict[tuple[int, ...], float]
    explored: list[tuple[int, ...]]
    grown: bool
    band_floor: float

    def explore_round(self, rounds: int, k: int) -> bool:
        """True when this round spends one of its ``k`` builds on :meth:`blind_pick`."""
        return k >= 3 and rounds % EXPLORE_EVERY == 1

    def band(self) -> float:
        """The relative error within which the model cannot tell two plans apart: the larger of its
        cross-validated error, the noise of a build and :attr:`band_floor` (the agent's
        :data:`search.guided.POOR_ERROR`: the error at which it calls its model poor)."""
        cv = self.cv_error  # type: ignore[attr-defined]
        return max(self.band_floor, cv if cv is not None and math.isfinite(cv) else 0.0, self.noise())  # type: ignore[attr-defined]

    def blind_pick(self, sur: Any, ranked: list[tuple[float, list[int]]],
                   taken: list[list[int]]) -> tuple[list[int], float] | None:
        """The plan predicted within :meth:`band` of the best prediction that differs most from
        every measured plan and every pick of the round (None: no such plan)."""
        finite = [(v, a) for v, a in ranked if math.isfinite(v)]
        if not finite:
            return None
        best = min(v for v, _ in finite)
        tol = self.band() * abs(best)
        others = [list(k) for k, v in self.measured.items()] + [list(t) for t in taken]
        if not others:
            return None
        seen_c: set[tuple[int, ...]] = set()
        choice: tuple[int, float, list[int]] | None = None
        for v, a in finite[:2000]:
            if v > best + tol:
                continue
            c = canonical(self.space, a)
            if c in seen_c or self.seen(a) or self.feasibility.fails(a):  # type: ignore[attr-defined]
                continue
            seen_c.add(c)
            d = min(self.distance(a, b) for b in others)  # type: ignore[attr-defined]
            if choice is None or d > choice[0]:
                choice = (d, v, a)
        if choice is None or choice[0] == 0:
            return None
        return choice[2], choice[1]

    def surprised(self, key: tuple[int, ...]) -> None:
        """After an exploration build: grow the hypothesis space when it missed its prediction by
        more than twice :meth:`band` (the model is blind there)."""
        pred, got = self.predicted.get(key), self.measured.get(key)
        if pred is None or got is None or not (math.isfinite(pred) and math.isfinite(got)) or pred * got <= 0:
            return
        if abs(math.log(abs(got) / abs(pred))) > 2 * self.band():
            self.grown = True

    def local_residual(self, sur: Any) -> LocalResidual | None:
        """The local correction of ``sur``'s predictions from its residuals on the measured plans
        (None until an exploration build surprised the model)."""
        if not self.grown:
            return None
        keys, res = [], []
        minimize = self.run.objective.direction == "minimize"
        for key, got in self.measured.items():
            if not math.isfinite(got) or abs(got) >= 1e12:
                continue
            pred = sur.loss(list(key))
            if not math.isfinite(pred) or pred * got <= 0:
                continue
            r = math.log(abs(got) / abs(pred))  # time-like for a minimised objective
            keys.append(key)
            res.append(r if minimize else -r)
        return LocalResidual(self.space, keys, res, max(4, self.space.n_units // 10))
