"""The budget an agent's run spends (:class:`Budget`) and what the run returns (:class:`SearchResult`),
below :mod:`search.base` and :mod:`search.asktell`, which both use them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from placetune.measurement import Measurement
from placetune.placement.placement import Placement
from placetune.wording import plural

__all__ = ["Budget", "BudgetExhausted", "HistoryEntry", "SearchResult"]


@dataclass(frozen=True)
class Budget:
    """How much an agent may spend.

    Args:
        evaluations: the most ``Evaluator.evaluate()`` calls a run may make (a cache hit from
            another study of the same scope counts: it is a call that makes the plan this
            study's; a placement this study already holds is answered without a call). None: no limit.
        seconds: wall-clock limit, checked before each call (a measurement in flight is
            not interrupted). None: no limit.
        stop: a condition checked before each call, e.g. "the run has converged"
            (:mod:`placetune.tuning.convergence`): once it returns True the run is exhausted,
            except for the re-measurements an agent held back for its end. None: none.
        settle: end the run once the agent finds nothing left that could change its answer (the
            guided agent after convergence: :mod:`search.later`). False: spend every evaluation
            (``placetune tune`` passes True unless ``stop_when_settled = false``).
        converged: with ``settle``, whether the study has converged, its earlier runs included
            (``placetune tune`` passes its :class:`~placetune.tuning.convergence.ConvergenceWatch`'s,
            which starts from the study's stored trials: a resumed settled study builds only what can
            still change its answer). None: the agent judges convergence on its own run's evaluations.
        recall: the agent starts from the study's stored ok measurements, its earlier runs' (the guided
            agent's model and its judgement of what could still change the answer rest on all of them,
            not only on those it proposes again: :meth:`search.base.SearchRun.recall`). ``placetune tune``
            passes True when it resumes a study. False: the agent learns only from its own run.
        baselines: the agent starts from the study's baselines that the study already holds
            (:meth:`search.base.SearchRun.recall_baselines`, no build, no budget): ``placetune tune``
            measures them just before a fresh study's agent starts and passes True (on a resume,
            ``recall`` covers them). A step-by-step agent is told them before its first proposal; a
            loop agent that measures the baselines itself is answered from the study, as before.

    Raises:
        ValueError: a negative number of evaluations or a non-positive time.

    Example:
        >>> Budget(100).evaluations, Budget(seconds=3600).seconds
        (100, 3600)
    """

    evaluations: int | None = None
    seconds: float | None = None
    stop: Callable[[], bool] | None = field(default=None, compare=False, repr=False)
    settle: bool = False
    converged: Callable[[], bool] | None = field(default=None, compare=False, repr=False)
    recall: bool = False
    baselines: bool = False

    def __post_init__(self) -> None:
        if self.evaluations is not None and int(self.evaluations) < 0:
            raise ValueError(f"Budget.evaluations must be >= 0, not {self.evaluations}")
        if self.seconds is not None and not float(self.seconds) > 0:
            raise ValueError(f"Budget.seconds must be > 0, not {self.seconds}")

    @property
    def unlimited(self) -> bool:
        """True when neither a number of evaluations, a time nor a stop condition is set."""
        return self.evaluations is None and self.seconds is None and self.stop is None


class BudgetExhausted(Exception):
    """Raised by :meth:`SearchRun.evaluate` when the budget allows no further call."""


class HistoryEntry(NamedTuple):
    """One evaluation of a run.

    Attributes:
        index: 1-based index of the ``evaluate()`` call within the run.
        value: primary objective value (None when the measurement failed).
        best: best primary value so far (None while nothing succeeded).
    """

    index: int  # type: ignore[assignment]  # a field named like tuple.index, kept for its users
    value: float | None
    best: float | None


@dataclass
class SearchResult:
    """What an agent's run found.

    Attributes:
        agent: the agent's name.
        objective: the objective name (``latency``, ``latency+energy``...).
        direction: ``minimize`` or ``maximize`` (of the primary component).
        best_placement: best placement asked for (None when nothing succeeded).
        best_measurement: its measurement.
        best_value: its primary objective value.
        history: one entry per ``evaluate()`` call, in order.
        evaluations: ``evaluate()`` calls made (never more than the budget).
        measured: of those, the ones the backend measured.
        cache_hits: the ones answered from the store or memory.
        seconds: wall time of the run.
        certified: True when the agent proved ``best_placement`` optimal (``exact``).
        pareto: multi-objective runs: the non-dominated (placement, measurement) pairs.
        notes: human-readable remarks (why a result is not certified...).
        extra: agent-specific details (lower bounds, study names...).
        final_rule: how the agent chose ``best_placement`` at its run's end when it ranked its
            candidates by a rule of its own rather than by their stored values (the guided agent's
            final, possibly drift-corrected, ranking of its re-measured top candidates), with the
            figures; None: the best measured value. ``placetune tune`` stores, reports and exports
            the plan so chosen (:mod:`placetune.tuning.final_pick`).
    """

    agent: str
    objective: str
    direction: str
    best_placement: Placement | None
    best_measurement: Measurement | None
    best_value: float | None
    history: list[HistoryEntry]
    evaluations: int
    measured: int
    cache_hits: int
    seconds: float
    certified: bool = False
    pareto: list[tuple[Placement, Measurement]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    final_rule: str | None = None

    def evaluations_to_reach(self, target: float, rel_tol: float = 0.01) -> int | None:
        """First evaluation index whose best-so-far is within ``rel_tol`` of ``target``.

        Within means ``best <= target * (1 + rel_tol)`` when minimising and
        ``best >= target * (1 - rel_tol)`` when maximising. None when never reached.
        """
        for h in self.history:
            if h.best is not None and _within(h.best, target, rel_tol, self.direction):
                return h.index
        return None

    def best_after(self, evaluations: int) -> float | None:
        """Best primary value after the first ``evaluations`` calls (None if none succeeded)."""
        best = None
        for h in self.history:
            if h.index > evaluations:
                break
            best = h.best
        return best

    def summary(self) -> str:
        """One line: agent, best value, counts."""
        v = "none" if self.best_value is None else f"{self.best_value:.6g}"
        cert = ", certified optimal" if self.certified else ""
        return (
            f"{self.agent}: best {self.objective} {v} after {plural(self.evaluations, 'evaluation')} "
            f"({self.measured} measured, {plural(self.cache_hits, 'cache hit')}, {self.seconds:.1f} s{cert})"
        )


def _within(value: float, target: float, rel_tol: float, direction: str) -> bool:
    if direction == "minimize":
        return value <= target * (1.0 + rel_tol) + 1e-12
    return value >= target * (1.0 - rel_tol) - 1e-12
