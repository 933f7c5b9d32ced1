"""Agents written step by step: :class:`StepAgent` proposes assignments, is told their
measurements, and :class:`Steps` does the rest of the ask/tell contract (:mod:`search.asktell`)
over a :class:`~search.base.SearchRun`: the budget (a batch never asks for more calls than are
left), answers from the study's own measurements (no build, no budget), no two proposals of a
batch that realise alike (no duplicate build), history and best.

Example (a whole agent):
    >>> from placetune import Evaluator
    >>> from search import Budget
    >>> class FirstUnitSweep(StepAgent):
    ...     name = "first-unit"
    ...     def propose(self, run):              # every device of the first unit, then stop
    ...         return [] if run.evaluations else [[d] + [0] * (run.space.n_units - 1)
    ...                                            for d in range(run.space.n_devices)]
    >>> FirstUnitSweep().run(Evaluator("seed-block", "orin-agx"), Budget(evaluations=2)).evaluations
    2
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from placetune.measurement import Measurement
from placetune.placement.placement import Placement

from .asktell import Proposal
from .base import Agent, Budget, BudgetExhausted, SearchResult, SearchRun

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator

__all__ = ["StepAgent", "Steps"]


class StepAgent(Agent):
    """Base class of an agent written step by step.

    Subclasses set :attr:`name` and implement :meth:`propose` (and usually :meth:`told`);
    :meth:`start` and :meth:`finish` are optional. One :class:`Steps` per run calls them.
    """

    def start(self, run: SearchRun) -> None:
        """Called once before the first proposal (e.g. to seed a generator from :attr:`seed`)."""

    def propose(self, run: SearchRun) -> list[list[int]]:
        """The next assignments to measure, a batch (device indexes of ``run.space``); [] ends the run.

        Assignments the run already measured, and those the study already holds, are answered at once
        (:meth:`told`, no budget: a walk that comes back to a placement learns its measurement again);
        only the rest are asked of the study. After :attr:`Steps.MAX_IDLE_ROUNDS` rounds in a row that
        propose only placements this run measured, the run ends."""
        raise NotImplementedError

    def told(self, run: SearchRun, told: list[tuple[list[int], Measurement]]) -> None:
        """The measurements of proposed assignments (those of one batch, or answers from the study); on a
        resumed study (:attr:`Budget.recall`, which ``placetune tune`` passes) first, before any proposal,
        every ok measurement the study stored, in the store's order; on a fresh study of ``placetune tune``
        (:attr:`Budget.baselines`) first the baselines it measured just before (all-GPU, all-DLA0, ...)."""

    def finish(self, run: SearchRun) -> SearchResult:
        """The run's result (default: :meth:`SearchRun.result`)."""
        return run.result()

    def ask_tell(self, evaluator: "Evaluator", budget: Budget) -> "Steps":
        """One run of the agent, driven step by step."""
        return Steps(self, evaluator, budget)


class Steps:
    """The ask/tell run of a :class:`StepAgent` (an :class:`~search.asktell.AskTell`).

    Attributes:
        run: the run's :class:`SearchRun` (its evaluator is only read: the study measures).
    """

    #: rounds in a row that propose nothing new (only assignments the run measured) before the run ends
    MAX_IDLE_ROUNDS = 100

    def __init__(self, agent: StepAgent, evaluator: "Evaluator", budget: Budget) -> None:
        self.agent = agent
        self.run = SearchRun(evaluator, budget, agent.name, agent.granularity)
        self._asked: list[tuple[list[int], Placement]] = []
        #: proposals of the asked batch that realise as an earlier one of it: (assignment, placement, its index)
        self._twins: list[tuple[list[int], Placement, int]] = []
        self._over = False
        agent.start(self.run)
        # a resumed study: the agent goes on from what it measured; a fresh one's: from the baselines the
        # study measured before it started (no build, no budget either way)
        recalled = self.run.recall() if budget.recall else self.run.recall_baselines() if budget.baselines else []
        if recalled:
            agent.told(self.run, recalled)

    def ask(self) -> list[Proposal]:
        """The agent's next batch of placements to measure ([] once it proposes nothing or the budget is spent)."""
        if self._asked:
            raise RuntimeError("ask: tell (or throw) the measurements of the previous proposals first")
        run, idle = self.run, 0
        while not self._over:
            if run.exhausted:
                break
            batch, answered, from_study = self._batch(self.agent.propose(run))
            if answered:
                self.agent.told(run, answered)
            if batch:
                self._asked = batch
                return [Proposal(p, "evaluate", run.agent, run.evaluations + i) for i, (_, p) in enumerate(batch)]
            idle = 0 if from_study else idle + 1
            if idle >= self.MAX_IDLE_ROUNDS:
                run.notes.append(f"stopped early: {idle} rounds proposed only placements already measured")
                break
        self._over = True
        return []

    def _batch(self, proposed: Sequence[Sequence[int]]) -> tuple[list[tuple[list[int], Placement]],
                                                                  list[tuple[list[int], Measurement]], bool]:
        """The proposals to measure (at most the calls left, one per realisation), the answers (the run's
        own measurements and the study's, in the order proposed) and whether any came from the study."""
        run, ev = self.run, self.run.evaluator
        if not proposed:
            self._over = True
        batch: list[tuple[list[int], Placement]] = []
        free: list[tuple[list[int], Measurement]] = []
        from_study = False
        realised: dict[str, int] = {}
        self._twins = []
        for a in proposed:
            a = [int(x) for x in a]
            seen = run.known(a)
            if seen is not None:  # measured in this run: told again (a walk may come back), no budget
                free.append((a, seen))
                continue
            if run.remaining is not None and len(batch) >= run.remaining:
                break
            try:
                got = run.ask(a)
            except BudgetExhausted:
                self._over = True
                break
            if isinstance(got, Measurement):
                free.append((a, got))
                from_study = True
                continue
            key = ev.realised_key(got)
            if key not in realised:  # two proposals that realise alike: one build, both told
                realised[key] = len(batch)
                batch.append((a, got))
            else:
                self._twins.append((a, got, realised[key]))
        return batch, free, from_study

    def tell(self, measurements: Sequence[Measurement]) -> None:
        """The measurements of the proposals :meth:`ask` returned, in order. Fewer: the first ones
        (the study's budget ended before the others were measured); the run then ends."""
        if len(measurements) > len(self._asked):
            raise ValueError(f"tell: one measurement per proposal ({len(self._asked)} asked, "
                             f"{len(measurements)} told)")
        if len(measurements) < len(self._asked):
            self._over = True
        asked, self._asked = self._asked[:len(measurements)], []
        for (a, p), m in zip(asked, measurements):
            self.run.tell(a, p, m)
        told = [(a, m) for (a, _), m in zip(asked, measurements)]
        for a, p, i in self._twins:  # a proposal that realises as one measured: its measurement, no budget
            if i < len(measurements):
                self.run.observe(a, p, measurements[i], counted=False)
                told.append((a, measurements[i]))
        self._twins = []
        self.agent.told(self.run, told)

    def throw(self, exc: BaseException) -> None:
        """A measurement raised: the run ends with it."""
        self._asked, self._over = [], True
        raise exc

    def result(self) -> SearchResult:
        """The run's result so far."""
        return self.agent.finish(self.run)

    def close(self) -> None:
        """End the run (nothing to release)."""
        self._over = True
