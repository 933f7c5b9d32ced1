"""``random``: the baselines, then uniform sampling over the masked choices (the yardstick of the other agents)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Agent, Budget, BudgetExhausted, SearchResult, SearchRun, in_range

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator

__all__ = ["RandomAgent"]


class RandomAgent(Agent):
    """Sample every unit's device uniformly among its allowed devices, after the baselines.

    The run starts with the baselines (:meth:`~search.base.SearchRun.measure_baselines`), so it
    never reports a plan worse than the best of them. Assignments already tried in the run are redrawn (up to ``max_redraws`` times), so
    the budget goes to distinct placements; when the space is exhausted the run ends.

    Args:
        seed: random seed (None: fresh entropy).
        granularity: decision units (``fusion``, ``layer``, ``scope:N``).
        max_redraws: redraws of an assignment already tried before giving up.

    Example:
        >>> from placetune.evaluator import Evaluator
        >>> from search import Budget
        >>> RandomAgent(seed=0).run(Evaluator("seed-block"), Budget(10)).evaluations
        10
    """

    name = "random"

    def __init__(self, *, seed: int | None = None, granularity: str = "fusion", max_redraws: int = 100) -> None:
        super().__init__(seed=seed, granularity=granularity)
        in_range("max_redraws", int(max_redraws), 0)
        self.max_redraws = int(max_redraws)

    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Sample until the budget is spent (or every assignment was tried)."""
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        rng = run.rng(self.seed)
        space = run.space
        try:
            run.measure_baselines()
            while not run.exhausted:
                for _ in range(self.max_redraws + 1):
                    a = space.sample(rng)
                    if run.known(a) is None:
                        break
                else:
                    run.notes.append("stopped early: no untried assignment found (space exhausted?)")
                    break
                run.evaluate(a)
        except BudgetExhausted:
            pass
        return run.result()
