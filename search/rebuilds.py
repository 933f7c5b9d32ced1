"""Re-measurement under noise for the guided agent: which measured plan to build again, and when.

Each build of a network picks TensorRT tactics anew (1-3 % apart on a Jetson), so the best of many
single builds tends to be a lucky one. The guided agent builds plans again in two places:

* during the run, every other round, when the best measured plan and a runner-up are closer than
  the noise can tell apart (``2 sd x sqrt(1/n_a + 1/n_b)`` over their builds), the one of the two
  with fewer builds gets one more (:meth:`Rebuilds.contest`), at most :data:`MAX_BUILDS` builds;
* at the end, its top candidates once more each (:meth:`Rebuilds.remeasure_top`), ranked on the
  same number of builds each, drift-corrected (:mod:`search.drift`); where a drift test ran and
  found none, on the median over all builds of each, the store's rule, so a plan outside the top
  whose median beats them all (a baseline built once) stays the best. Where the drift was not tested
  (too few builds after each plan's first), such a plan on fewer builds than theirs is built once
  more (:meth:`Rebuilds.rank_outsider`), as late as they were, and ranked with them on the same
  rule: under a drift its new build is as hot as theirs, without one it is one more sample. Not built
  again (as many builds as theirs, or no build left), it is not kept: built early, cold, against the
  top re-measured late, hot, it would win on the drift the re-measuring is there to handle.

Every build of a plan counts, those the agent got without a build included (a baseline the study
built before the agent ran): ranked on its later builds only, a baseline lost to plans ranked on
all theirs, their lucky first builds included.

The noise is estimated from the builds of re-measured plans, shrunk towards :data:`NOISE_PRIOR`.
The store then holds each plan's median over its builds
(:meth:`placetune.tuning.evaluator.Evaluator.remeasure`), which is what the study ranks and exports.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from placetune.measurement import Measurement

from .base import BudgetExhausted

__all__ = ["Rebuilds", "NOISE_PRIOR", "MAX_BUILDS"]

log = logging.getLogger(__name__)

#: build-to-build noise assumed before any re-measurement (sd of log values: a Jetson's 1-3 %)
NOISE_PRIOR = 0.02
#: builds of one placement after which it is not built again during the run
MAX_BUILDS = 4
_BUILD_FIELD = {"throughput": "throughput_fps", "latency": "median_ms", "energy": "energy_mj"}


class Rebuilds:
    """The re-measuring part of the guided agent's run state (a mixin of its ``_State``: it uses
    ``run``, ``measured``, ``measurements``, ``realised`` and ``remeasured``)."""

    run: Any
    measured: dict[tuple[int, ...], float]
    measurements: list[Measurement]
    remeasured: int
    realised: Callable[[Sequence[int]], str]
    log_build: Callable[..., None]
    correct_measured: Callable[[], None]
    rank_equal: Callable[[list[tuple[int, ...]]], tuple[int, ...] | None]
    crown: Callable[[Sequence[int]], None]
    final_rule: Callable[[], str | None]
    final_ranking: list[tuple[tuple[int, ...], float]] | None
    beta: float
    beta_se: float | None

    def rebuild(self, key: Sequence[int]) -> Measurement:
        """Build a measured assignment once more; every assignment of its realisation, and the fit,
        see the median over its builds from then on."""
        before, t = len(self.builds(key)), self.run.evaluations
        m = self.run.remeasure(key)
        self.remeasured += 1
        after = self.builds(key)
        if len(after) > before:  # the new build is ok: its time and value for the drift
            self.log_build(key, after[-1], t)
        r = self.realised(key)
        for k in self.measured:  # every assignment of that realisation
            if self.realised(k) == r:
                self.measured[k] = self.run.loss(m)
        self.measurements = [x for x in self.measurements if x.realized != m.realized] + [m]
        return m

    def builds(self, key: Sequence[int]) -> list[float]:
        """The objective's value of each ok build of a measured assignment."""
        m = self.run.known(key)
        field = _BUILD_FIELD.get(self.run.objective.names[0])
        if m is None or not m.ok or field is None:
            return []
        entries = m.extra.get("builds") or [{field: self.run.objective.value(m)}]
        return [float(b[field]) for b in entries if isinstance(b.get(field), (int, float)) and b[field] > 0]

    def noise(self) -> float:
        """Build-to-build noise (sd of log values) pooled over the re-measured plans, shrunk towards
        :data:`NOISE_PRIOR` (two pseudo-observations)."""
        ss, dof = 2 * NOISE_PRIOR ** 2, 2
        for key in {self.realised(k): k for k in self.measured}.values():
            vals = np.log(self.builds(key))
            if len(vals) >= 2:
                ss += float(((vals - vals.mean()) ** 2).sum())
                dof += len(vals) - 1
        return math.sqrt(ss / dof)

    def contest(self) -> tuple[int, ...] | None:
        """The assignment to build again while the best measured and a runner-up are closer than
        the noise can tell apart: of the two, the one with fewer builds (None: no such contest)."""
        top: list[tuple[int, ...]] = []
        seen: set[str] = set()
        for key, loss in sorted(self.measured.items(), key=lambda t: t[1]):
            if not math.isfinite(loss) or abs(loss) >= 1e12 or len(top) >= 3:
                break
            if self.realised(key) not in seen:
                seen.add(self.realised(key))
                top.append(key)
        if len(top) < 2:
            return None
        sigma = self.noise()
        nb = max(1, len(self.builds(top[0])))
        for c in top[1:]:
            nc = max(1, len(self.builds(c)))
            close = abs(math.log(self.measured[c] / self.measured[top[0]])) < 2 * sigma * math.sqrt(1 / nb + 1 / nc)
            key = top[0] if nb <= nc else c
            if close and len(self.builds(key)) < MAX_BUILDS:
                return key
        return None

    def outranked(self, top: list[tuple[int, ...]]) -> bool:
        """True when the run's best (the best of its latest measurements, each plan's median over its
        builds) is none of ``top`` and beats the final ranking's #1 on that figure."""
        run, ranking = self.run, self.final_ranking
        if not ranking or run.best_assignment is None or tuple(run.best_assignment) in {tuple(k) for k in top}:
            return False
        if run.best_value is None or not math.isfinite(run.best_value):
            return False
        score = ranking[0][1]
        return run.best_value > score if run.objective.direction == "maximize" else run.best_value < score

    def rank_outsider(self, ranked: list[tuple[int, ...]],
                      winner: tuple[int, ...]) -> tuple[tuple[int, ...] | None, str, str]:
        """The final pick where a plan outside the re-measured top (the run's best) has a better median
        over fewer builds than theirs and the drift was not tested: its early (cold) builds against the
        top's late (hot) ones may differ by the drift, and its fewer builds by luck, so it is built once
        more, as late as theirs, and ranked with them (:meth:`rank_equal`). Returns the pick and the
        note's two parts (not kept and why, or what its new build gave); where its budget ran out, the
        re-measured ranking's ``winner``, not it."""
        run, obj = self.run, self.run.objective
        key, value = tuple(run.best_assignment), run.best_value
        notkept = (f"; a plan outside the top has a better median ({_fmt(value)}), not kept: the drift was not "
                   "tested, and its builds and the top's later ones may differ by it")
        if len(self.builds(key)) >= min(len(self.builds(k)) for k in ranked):
            return winner, notkept, ""
        try:
            m = self.rebuild(key)
        except BudgetExhausted:
            return winner, notkept + " (the time budget ran out before it could be built once more)", ""
        self.correct_measured()  # one more build for the drift test
        pick = self.rank_equal(ranked + [key]) or winner
        n = len(m.extra.get("builds") or ())
        how = "it stays the best" if pick == key else f"the re-measured #{ranked.index(pick) + 1} is the best"
        return pick, "", (f"; a plan outside the top had a better median on fewer builds and the drift was not tested: "
                          f"built once more: {_fmt(value)} -> "
                          f"{_fmt(obj.value(m))} ({n} builds), ranked with the top: {how}")

    def remeasure_top(self, n: int, *, once: bool = False) -> None:
        """Build the ``n`` best measured candidates (distinct realisations) once more each, rank
        them by the median over their builds, and say so in the notes. With ``once``, only those of
        them built once (a resumed run: an earlier run's end re-measured the others already)."""
        run, obj = self.run, self.run.objective
        top: list[tuple[int, ...]] = []
        realisations: set[str] = set()
        for key, loss in sorted(self.measured.items(), key=lambda t: t[1]):
            if not math.isfinite(loss) or len(top) >= n:
                break
            if self.realised(key) not in realisations:
                realisations.add(self.realised(key))
                top.append(key)
        todo = [key for key in top if not once or len(self.builds(key)) < 2]
        if not todo:
            return
        crowned = run.best_assignment
        shown = []
        for key in todo:
            before = obj.value(run.known(key))
            try:
                m = self.rebuild(key)
            except BudgetExhausted:
                run.notes.append(f"re-measured {len(shown)} of the top {len(todo)}: the time budget ran out")
                break
            shown.append(f"{_fmt(before)} -> {_fmt(obj.value(m))} ({len(m.extra.get('builds') or ())} builds)")
        if not shown:
            return
        # the final ranking: the re-measured candidates on equal numbers of builds, drift-corrected
        self.correct_measured()
        # (a resumed run's: its builds and the earlier runs' are combined in the store's medians, which rank them)
        ranked = top[:len(shown)]
        winner = None if once else self.rank_equal(ranked)
        kept = ""  # a plan outside the top that beats them on its median: kept or not, and why
        outside = ""  # the same plan built once more and ranked with the top: what it gave
        if winner is not None and self.outranked(top):
            if self.beta_se is not None and not self.beta:
                # a drift test ran and found none: the final ranking's rule is the store's, each plan's median over
                # its builds, so a plan outside the top whose median beats every re-measured one stays the best
                winner = None
            elif self.beta_se is None:
                winner, kept, outside = self.rank_outsider(ranked, winner)
        if winner is not None and list(winner) != run.best_assignment:
            self.crown(winner)
        if winner is not None:  # the run's pick and why: what placetune tune reports, stores and exports
            run.final_rule = self.final_rule()
        unit = f", {obj.units[0]}" if obj.units and obj.units[0] else ""
        now = next((i for i, k in enumerate(top) if list(k) == run.best_assignment), None)
        if run.best_assignment == crowned or (outside and now is None):
            moved = ""  # (the plan outside the top: its own part of the note says what came of it)
        elif now is not None:
            moved = f"; #{now + 1} is the best now (the first build of #1 was a lucky one)"
        else:
            moved = (f"; the best is now one measured once ({_fmt(run.best_value)}): the top {len(shown)} fell behind it "
                     "(the drift test found none)")
        which = f"the top {len(shown)}" if len(todo) == len(top) else \
            f"{len(shown)} of the top {len(top)} (built once; an earlier run re-measured the others)"
        run.notes.append(f"re-measured {which} ({obj.names[0]}{unit}, as measured -> median over "
                         "builds): " + ", ".join(shown) + moved + kept + outside)
        log.info("guided: %s", run.notes[-1])


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"
