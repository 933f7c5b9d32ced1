"""One test build of the loadable length a learned length rule leaves untested.

The feasibility rules (:mod:`search.feasibility`) put a limit half-way (geometric mean) between
the longest DLA loadable that built and the shortest failure put down to length. Lengths are
integers, so where those two are ``s`` and ``s + 2`` layers the threshold (``sqrt(s (s + 2))``,
just under ``s + 1``) blocks the one length nobody has built, ``s + 1``, for the rest of the run:
if the device takes it, every plan that needs it is lost for good (traced: googlenet with the
truth's limit at 18 layers, a run that built 17 and failed 19 before it built an 18, ended 7 %
short of the best known plan, which holds an 18-layer loadable).

:meth:`Gaps.gap_pick` answers that gap with one build: the model's best plan whose longest loadable
has exactly ``s + 1`` layers, which no other rule blocks and which goes beyond what built in
nothing else (so that a failure is put down to its length). Its build closes the gap either way
(built: ``s + 1`` is safe; failed: it is the shortest failure), so a run builds at most one such
plan, and at most one of its builds fails for it. It is built only when the rule binds: when the
model predicts it better than the round's best prediction among the plans the rules allow (else
the model would not pick it were the length allowed, and the gap costs the run nothing).

No number here is fitted: "exactly one untested length" is the one gap of an integer limit that
a single build settles (a wider one is not answered by one build, and reading the chance of a
build inside a gap, tried before on failed builds, lost on the tuning parts: ``docs/search.md``);
"one build per run" follows from it (the gap, once closed, cannot open again: the safe length
only rises, the shortest failure only falls); the bar is the model's own prediction; the search
for the plan spends the round's own inner-search effort. Runs whose rules leave no such gap are
unchanged: the search for the test plan runs only while one is open, with a generator of its own
and no share in the round's portfolio, so it leaves the round's own search as it was.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .surrogate import Surrogate, inner_search

__all__ = ["Gaps"]


class Gaps:
    """The gap-testing part of the guided agent's run state (a mixin of its ``_State``: it uses
    ``feasibility``, ``max_stages``, ``seen``, ``inner_calls`` and ``inner_seconds``)."""

    feasibility: Any
    max_stages: int
    seen: Callable[[list[int]], bool]
    inner_calls: int
    inner_seconds: float
    gap_rng: np.random.Generator  # the test plan's search's own randomness (the round's is left alone)
    gap_tested: int | None  # the length tested by a build in this run (None: none yet)

    def gap_pick(self, sur: Surrogate, ranked: Sequence[tuple[float, list[int]]], starts: Sequence[list[int]],
                 evaluations: int) -> tuple[list[int], float] | None:
        """The plan to build to test the one loadable length the rules leave untested, with its
        prediction, or None (no such gap, already tested in this run, or the model predicts no plan
        of that length better than ``ranked``'s best, the best it predicts among allowed plans).

        Searches ``sur``'s model (its profile, correction and local correction) with the length rule
        moved to just above the untested length, from ``starts``, for ``evaluations`` calls."""
        if self.gap_tested is not None or not ranked:
            return None
        length = self.feasibility.gap()
        if length is None:
            return None
        bar = min(v for v, _ in ranked)
        if not math.isfinite(bar):
            return None
        memo: dict[tuple[int, ...], bool] = {}

        def fails(a: Sequence[int]) -> bool:
            key = tuple(int(x) for x in a)
            hit = memo.get(key)
            if hit is None:
                hit = memo[key] = self.feasibility.fails_at(key, length)
            return hit

        relaxed = Surrogate(sur.evaluator, sur.space, sur.objective, sur.profile, sur.correction, fails=fails)
        relaxed.local = sur.local
        t0 = time.perf_counter()
        found = inner_search(relaxed, starts, self.gap_rng, evaluations=evaluations, max_stages=self.max_stages,
                             sweep=0)
        self.inner_calls += relaxed.calls
        self.inner_seconds += time.perf_counter() - t0
        for v, a in found:  # best first
            if not math.isfinite(v) or v >= bar:
                return None
            if self.feasibility.tests_gap(a, length) and not self.seen(a):
                self.gap_tested = length
                return list(a), float(v)
        return None

    def gap_note(self) -> str | None:
        """One line for the run's notes: the length tested and what its build said."""
        if self.gap_tested is None:
            return None
        built = self.feasibility.ok_max.get("layers", 0.0) >= self.gap_tested
        return (f"one build tested the loadable length the rules left untested ({self.gap_tested} layers): "
                + ("it built" if built else "it failed"))
