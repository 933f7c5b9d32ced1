"""The agent protocol: :class:`Budget`, :class:`SearchResult`, :class:`Agent` and :class:`SearchRun`.

An agent is built with its options and searched with ``agent.run(evaluator, budget)``, which
is the study's ask/tell loop over ``agent.ask_tell(evaluator, budget)`` (:mod:`search.asktell`:
the agent proposes, the study measures). It talks to the evaluator through the public API only
(``Evaluator.space()``, ``Evaluator.evaluate()``, ``Evaluator.objective``), so a user-written
agent looks exactly like the built-in ones; one written as a loop (below: ``run``, or
``search`` as the built-in agents do) is driven step by step as it is:

Example:
    >>> from placetune.evaluator import Evaluator
    >>> from search import Agent, Budget, SearchResult, SearchRun
    >>> class AllGpuThenRandom(Agent):
    ...     name = "mine"
    ...     def run(self, evaluator, budget):
    ...         run = SearchRun(evaluator, budget, self.name, self.granularity)
    ...         rng = run.rng(self.seed)
    ...         run.evaluate([0] * run.space.n_units)
    ...         while not run.exhausted:
    ...             run.evaluate(run.space.sample(rng))
    ...         return run.result()
    >>> result = AllGpuThenRandom(seed=0).run(Evaluator("seed-block", "orin-agx"), Budget(evaluations=5))
    >>> result.evaluations
    5

:class:`SearchRun` is the bookkeeping every agent needs: it checks the budget before each
``evaluate()`` call (the number of calls never exceeds ``budget.evaluations``), keeps
masks honest, remembers what was already asked (so an agent never pays twice for the
same assignment), answers a placement whose realisation the study already holds without an
``evaluate()`` call (:meth:`SearchRun.answer`: no build, no budget), measures the study's
baselines first (:meth:`SearchRun.measure_baselines`), and tracks the history and the best
measurement.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from placetune import PlacementError, PlacetuneError
from placetune.measurement import Measurement
from placetune.placement.placement import Placement

from .baselines import baseline_assignments, canonical, project
from .result import Budget, BudgetExhausted, HistoryEntry, SearchResult
from placetune.tuning.baselines import study_baselines
from placetune.tuning.run_end import conclude
from .asktell import LoopAskTell, drive

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator

    from .asktell import AskTell
    from placetune.placement.space import Space

__all__ = [
    "Budget",
    "BudgetExhausted",
    "HistoryEntry",
    "SearchResult",
    "Agent",
    "SearchRun",
    "baseline_assignments",
    "canonical",
    "in_range",
    "project",
]

log = logging.getLogger(__name__)

#: answers in a row from the study's own measurements after which a run stops (the agent
#: proposes nothing new, so it would never spend its budget)
_MAX_FREE_RUN = 5000


def in_range(option: str, value: float, low: float, high: float | None = None, *, above: bool = False,
             below: bool = False) -> None:
    """Refuse an agent option outside what the agent can use, naming it (``get_agent`` turns the
    ValueError into a one-line ConfigError naming the agent): ``low <= value`` (``low < value`` when
    ``above``) and, with ``high``, ``value <= high`` (``value < high`` when ``below``).

    Raises:
        ValueError: ``option must be ...``.
    """
    ok = (value > low if above else value >= low) and (high is None or (value < high if below else value <= high))
    if not ok:
        want = f"{'>' if above else '>='} {low:g}" + ("" if high is None else f" and {'<' if below else '<='} {high:g}")
        raise ValueError(f"{option} must be {want}, not {value}")


class Agent:
    """Base class of the search agents.

    Subclasses set :attr:`name` and implement their search either as a loop, :meth:`search`
    (an agent written before ask/tell overrides :meth:`run` instead: that loop is its
    :meth:`search`), or step by step, :meth:`ask_tell` (:mod:`search.asktell`). The study drives
    every agent through :meth:`ask_tell`; :meth:`run` is that loop for a caller without a study.
    Every agent accepts ``seed`` and ``granularity``; other options are agent-specific keyword
    arguments.

    Args:
        seed: seed of every random choice the agent makes (None: fresh entropy).
        granularity: decision units (``fusion``, ``layer`` or ``scope:N``; see
            :class:`placetune.placement.space.Space`).
    """

    #: Registry name of the agent.
    name: str = "agent"
    #: The Optuna study the agent keeps its own trials in (None: the evaluator's study's).
    study_name: str | None = None

    def __init__(self, *, seed: int | None = None, granularity: str = "fusion") -> None:
        self.seed = seed
        self.granularity = granularity

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if "run" in cls.__dict__ and "search" not in cls.__dict__:  # a loop written as run(): its search
            cls.search = cls.__dict__["run"]  # type: ignore[method-assign]

    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """The agent's search written as a loop over ``evaluator`` (through :class:`SearchRun`).

        Under :meth:`ask_tell` its measuring calls are proposals the study answers."""
        raise NotImplementedError(f"agent {self.name!r} implements neither search() nor ask_tell()")

    def ask_tell(self, evaluator: "Evaluator", budget: Budget) -> "AskTell":
        """A run of the agent driven one step at a time (:mod:`search.asktell`): by default its
        :meth:`search` loop as a coroutine (:class:`~search.asktell.LoopAskTell`)."""
        return LoopAskTell(self.search, evaluator, budget, name=f"agent {self.name}", closing=BudgetExhausted)

    def run(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Search placements with ``evaluator`` within ``budget``: :func:`search.asktell.drive` over
        :meth:`ask_tell` (the loop :class:`~placetune.tuning.tune.Tuner` runs too). Where an Optuna study is
        attached to the evaluator, the run's end records its final pick (``placetune_best``) and its verdict
        there, as ``placetune tune``'s end does (:func:`placetune.tuning.run_end.conclude`)."""
        result = drive(self.ask_tell(evaluator, budget), evaluator)
        conclude(evaluator, result, self.name)
        return result

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({opts})"


class SearchRun:
    """Budget-checked evaluation bookkeeping for one agent run.

    Args:
        evaluator: the evaluator to search with.
        budget: the run's budget.
        agent: agent name recorded with each measurement.
        granularity: granularity of :attr:`space` (ignored when ``space`` is given).
        space: the decision space (default: ``evaluator.space(granularity)``).

    Attributes:
        space: the decision space.
        objective: the evaluator's objective.
        history: :class:`HistoryEntry` per call.
        best_assignment / best_placement / best_measurement / best_value: the best so far
            by the primary objective.
    """

    def __init__(
        self,
        evaluator: "Evaluator",
        budget: Budget,
        agent: str,
        granularity: str = "fusion",
        *,
        space: "Space | None" = None,
    ) -> None:
        self.evaluator = evaluator
        self.budget = budget
        self.agent = agent
        self.space = space if space is not None else evaluator.space(granularity)
        self.objective = evaluator.objective
        self.t0 = time.monotonic()
        self._start_calls = evaluator.stats.requested
        self.history: list[HistoryEntry] = []
        self.best_assignment: list[int] | None = None
        self.best_placement: Placement | None = None
        self.best_measurement: Measurement | None = None
        self.best_value: float | None = None
        self.measured = 0
        self.cache_hits = 0
        self._seen: dict[tuple[int, ...], Measurement] = {}
        self._points: list[tuple[Placement, Measurement, tuple[float, ...]]] = []
        self.notes: list[str] = []
        #: how the agent chose its best at the run's end when not as the best measured value (its own
        #: final ranking, e.g. drift-corrected): :attr:`SearchResult.final_rule`; None: the best measured
        self.final_rule: str | None = None
        #: answers given without an evaluate() call: realisations the study already holds
        self.free = 0
        self._free_run = 0  # of them, in a row (an agent that only proposes known plans stops)
        self._study_keys: set[str] | None = None  # realised placement keys of the study's requests
        #: evaluations held back for the end of the run (e.g. :meth:`remeasure`): :attr:`remaining`
        #: and :attr:`exhausted` leave them out until the agent sets this back to 0
        self.reserve = 0

    # ------------------------------------------------------------------ budget
    @property
    def evaluations(self) -> int:
        """``evaluate()`` calls made on the evaluator since the run started."""
        return self.evaluator.stats.requested - self._start_calls

    @property
    def remaining(self) -> int | None:
        """Calls left (None: unlimited), less the :attr:`reserve`."""
        if self.budget.evaluations is None:
            return None
        return max(0, int(self.budget.evaluations) - self.evaluations - self.reserve)

    @property
    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.t0

    @property
    def exhausted(self) -> bool:
        """True when no further call is allowed (the budget's stop condition included, unless
        a :attr:`reserve` was set back to 0 for the end of the run)."""
        if self.remaining == 0:
            return True
        if self.budget.stop is not None and self.budget.stop():
            return True
        return self.budget.seconds is not None and self.elapsed >= float(self.budget.seconds)

    def rng(self, seed: int | None) -> np.random.Generator:
        """A numpy generator for the agent's seed."""
        return np.random.default_rng(seed)

    # -------------------------------------------------------------- evaluating
    def known(self, assignment: Sequence[int]) -> Measurement | None:
        """The measurement of an assignment already evaluated in this run, else None."""
        return self._seen.get(tuple(int(a) for a in assignment))

    def evaluate(self, assignment: Sequence[int], *, reuse: bool = True, finish: bool = False,
                 annotation: dict[str, Any] | None = None) -> Measurement:
        """Evaluate a unit assignment (device indexes of :attr:`space`).

        Args:
            assignment: one device index per unit; every one must be unmasked.
            reuse: answer an assignment already evaluated in this run from memory,
                without calling the evaluator (and without spending budget).
            finish: ignore the time limit (a step the agent already started, e.g. an
                Optuna trial); the number of evaluations is still enforced.
            annotation: shown with the evaluation by progress displays (e.g. the agent's
                ``predicted`` value, its model's ``cv_error``); never stored.

        Raises:
            BudgetExhausted: no call left.
            PlacementError: a masked device.
        """
        asked = self.ask(assignment, reuse=reuse, finish=finish)
        if isinstance(asked, Measurement):
            return asked
        kw: dict[str, Any] = {"annotation": annotation} if annotation else {}
        m = self.evaluator.evaluate(asked, agent=self.agent, trial_number=self.evaluations, **kw)
        self.tell(assignment, asked, m)
        return m

    def ask(self, assignment: Sequence[int], *, reuse: bool = True, finish: bool = False) -> Measurement | Placement:
        """The first half of :meth:`evaluate`: the measurement when the run or the study already
        holds the assignment's (with ``reuse``), else its placement, to be measured and then
        recorded with :meth:`tell` (the budget allows that call).

        Raises:
            BudgetExhausted: no call left.
            PlacementError: a masked device.
        """
        key = tuple(int(a) for a in assignment)
        if reuse and key in self._seen:
            return self._seen[key]
        if not self.space.is_allowed(key):
            bad = [self.space.units[i].name for i, a in enumerate(key) if not self.space.mask[i, a]]
            raise PlacementError(f"assignment puts masked units on devices they cannot use: {', '.join(bad[:5])}")
        if reuse:
            m = self.answer(key)
            if m is not None:  # the study holds this realisation: no build, no budget
                return m
        if self.remaining == 0 or (not finish and self.exhausted):
            raise BudgetExhausted()
        return self.space.to_placement(list(key))

    def tell(self, assignment: Sequence[int], placement: Placement, m: Measurement) -> None:
        """The second half of :meth:`evaluate`: record the study's measurement of a placement
        :meth:`ask` returned (one ``evaluate()`` call)."""
        self._free_run = 0
        if self._study_keys is not None:
            self._study_keys.add(self.evaluator.realised_key(placement))
        self.observe([int(a) for a in assignment], placement, m)

    def answer(self, assignment: Sequence[int]) -> Measurement | None:
        """The study's measurement of an assignment's realisation when the study already asked for
        it (in this run or an earlier one, e.g. a baseline ``placetune tune`` measured first),
        recorded as an answer without an ``evaluate()`` call (:attr:`free`: no build, no budget);
        None when it has to be evaluated.

        Raises:
            BudgetExhausted: the agent proposed only such placements for a long while (it would
                never spend its budget).
        """
        key = tuple(int(a) for a in assignment)
        if key in self._seen:
            return self._seen[key]
        if self._free_run >= _MAX_FREE_RUN:
            self.notes.append(f"stopped early: the last {_MAX_FREE_RUN} proposals were placements already measured")
            self._free_run = 0
            raise BudgetExhausted()
        ev = self.evaluator
        if self._study_keys is None:
            self._study_keys = {key for key, _ in ev.store.request_keys(ev.study_name)}
        placement = self.space.to_placement(list(key))
        m = ev.peek(placement) if self._study_keys and ev.realised_key(placement) in self._study_keys else None
        if m is not None:
            self.free += 1
            self._free_run += 1
            self.observe(list(key), placement, m, counted=False)
        return m

    def recall(self) -> list[tuple[list[int], Measurement]]:
        """The study's stored ok measurements (its earlier runs'), as assignments of the run's space
        with their measurements, each recorded as an answer without an ``evaluate()`` call (no build,
        no budget, not in the history; :meth:`answer`): a plan whose requested placement the space
        cannot express is left out. In the store's order."""
        ev = self.evaluator
        out: list[tuple[list[int], Measurement]] = []
        keys: set[tuple[int, ...]] = set()
        for rec in ev.store.measurements(ev.study_name, status="ok"):
            try:
                a = project(self.space, self.space.from_placement(Placement(ev.model, rec.requested or rec.realized)))
            except PlacetuneError:  # a record of another model version
                continue
            key = tuple(a)
            if key in keys or not self.space.is_allowed(key):
                continue
            m = self.answer(a)
            if m is not None and m.ok:
                keys.add(key)
                out.append((a, m))
        self._free_run = 0  # recalled, not proposed
        return out

    def recall_baselines(self) -> list[tuple[list[int], Measurement]]:
        """The study's ok measurements of its baselines (:func:`placetune.tuning.baselines.study_baselines`,
        those every study measures), as :meth:`recall` gives the stored ones: answers without an
        ``evaluate()`` call (no build, no budget), in the baselines' order; a baseline the study does not
        hold, or holds as a failure, is left out."""
        out: list[tuple[list[int], Measurement]] = []
        for b in study_baselines(self.evaluator):
            if not b.measured_by_study:
                continue
            a = project(self.space, self.space.from_placement(b.placement))
            if not self.space.is_allowed(tuple(a)) or any(a == seen for seen, _ in out):
                continue
            m = self.answer(a)
            if m is not None and m.ok:
                out.append((a, m))
        self._free_run = 0  # recalled, not proposed
        return out

    def measure_baselines(self) -> dict[str, Measurement]:
        """Evaluate the study's baselines (:func:`placetune.tuning.baselines.study_baselines`:
        all-GPU, all-DLA with fallback, the per-core split; a concurrent study's naive plans the
        model cannot rule out), one of each pair that swaps DLA0 and DLA1, while the budget lasts.

        Every built-in agent starts with them, so a run never reports a plan worse than the best
        baseline it measured; those the study already holds cost nothing.

        Returns:
            baseline name -> measurement, for those evaluated.
        """
        out: dict[str, Measurement] = {}
        for b in study_baselines(self.evaluator):
            if not b.measured_by_study:
                continue
            a = project(self.space, self.space.from_placement(b.placement))
            if self.known(a) is None and self.answer(a) is None and self.exhausted:
                break
            out[b.name] = self.evaluate(a)
        return out

    def observe(self, assignment: Sequence[int] | None, placement: Placement, m: Measurement, *,
                counted: bool = True) -> float | None:
        """Record an evaluation made elsewhere (e.g. by an environment's ``step``).

        Args:
            counted: False for an answer that was no ``evaluate()`` call (the study already held
                it): the best and the Pareto front take it, the history and the counts do not.

        Returns:
            The primary objective value (None when the measurement failed).
        """
        if counted and m.extra.get("cache_hit"):
            self.cache_hits += 1
        elif counted:
            self.measured += 1
        value = self.objective.value(m)
        if assignment is not None:
            self._seen[tuple(int(a) for a in assignment)] = m
        if value is not None and (self.best_measurement is None
                                  or self.objective.loss(m) < self.objective.loss(self.best_measurement)):
            self.best_value = value
            self.best_placement = placement
            self.best_measurement = m
            self.best_assignment = list(assignment) if assignment is not None else None
        if self.objective.multi:
            vals = self.objective.values(m)
            if vals is not None:
                self._points.append((placement, m, vals))
        if counted:
            self.history.append(HistoryEntry(len(self.history) + 1, value, self.best_value))
        return value

    def remeasure(self, assignment: Sequence[int], *, builds: int = 1) -> Measurement:
        """Build an assignment evaluated in this run again, ``builds`` more times
        (:meth:`Evaluator.remeasure <placetune.tuning.evaluator.Evaluator.remeasure>`: its stored
        measurement becomes the median over its builds), and re-rank the run's best.

        Each build counts as an evaluation (a history entry each). Every assignment of the run
        that realises alike answers the combined measurement from then on, and the best is the
        best of the run's latest measurements: a candidate that was lucky on its first build may
        lose its place.

        Raises:
            BudgetExhausted: fewer than ``builds`` calls left (the :attr:`reserve` included in
                what is left only once it is set back to 0), or the time limit passed.
            PlacementError: the assignment was not evaluated in this run.
            ConfigError: its measurement failed.
        """
        key = tuple(int(a) for a in assignment)
        if key not in self._seen:
            raise PlacementError("re-measure: the assignment was not evaluated in this run")
        left = self.remaining
        late = self.budget.seconds is not None and self.elapsed >= float(self.budget.seconds)
        if (left is not None and left < builds) or late:  # the stop condition does not apply here
            raise BudgetExhausted()
        placement = self.space.to_placement(list(key))
        m = self.evaluator.remeasure(placement, builds=builds, trial_number=self.evaluations)
        self.measured += builds
        for k, old in self._seen.items():
            if old.realized == m.realized:
                self._seen[k] = m
        if self.objective.multi:
            self._points = [(p, m, self.objective.values(m) or vals) if old.realized == m.realized else (p, old, vals)
                            for p, old, vals in self._points]
        self._rerank(m)
        value = self.objective.value(m)
        for _ in range(builds):
            self.history.append(HistoryEntry(len(self.history) + 1, value, self.best_value))
        return m

    def _rerank(self, new: Measurement) -> None:
        """The best of the run's latest measurements, after ``new`` replaced those of its realisation."""
        cands: list[tuple[list[int] | None, Placement | None, Measurement]] = [
            (list(k), None, m) for k, m in self._seen.items()]
        if self.best_assignment is None and self.best_measurement is not None:  # observed without one
            same = self.best_measurement.realized == new.realized
            cands.append((None, self.best_placement, new if same else self.best_measurement))
        best = None
        loss = self.objective.loss
        for a, p, m in cands:
            if self.objective.value(m) is not None and (best is None or loss(m) < loss(best[2])):
                best = (a, p, m)
        if best is not None:
            a, p, m = best
            self.best_assignment = a
            self.best_placement = p if a is None else self.space.to_placement(a)
            self.best_measurement = m
            self.best_value = self.objective.value(m)

    def loss(self, m: Measurement | None) -> float:
        """Primary objective as a loss: smaller is better, ``inf`` for failures; a violated
        constraint ranks after every feasible measurement (:meth:`Objective.loss`)."""
        return self.objective.loss(m)

    def evaluate_all(self, assignments: Iterable[Sequence[int]]) -> list[tuple[list[int], Measurement]]:
        """Evaluate assignments in order while the budget lasts."""
        out = []
        for a in assignments:
            if self.exhausted and self.known(a) is None:
                break
            out.append((list(a), self.evaluate(a)))
        return out

    # ------------------------------------------------------------------ result
    def pareto(self) -> list[tuple[Placement, Measurement]]:
        """Non-dominated (placement, measurement) pairs of a multi-objective run."""
        if not self._points:
            return []
        signs = [1.0 if d == "minimize" else -1.0 for d in self.objective.directions]
        pts = [(p, m, tuple(s * v for s, v in zip(signs, vals))) for p, m, vals in self._points]
        front = []
        seen: set[str] = set()
        for p, m, v in pts:
            dominated = any(
                all(a <= b for a, b in zip(w, v)) and any(a < b for a, b in zip(w, v)) for _, _, w in pts
            )
            if not dominated and p.key not in seen:
                seen.add(p.key)
                front.append((p, m))
        return front

    def result(self, *, certified: bool = False, **extra: Any) -> SearchResult:
        """The :class:`SearchResult` of the run so far."""
        return SearchResult(
            agent=self.agent,
            objective=self.objective.name,
            direction=self.objective.direction,
            best_placement=self.best_placement,
            best_measurement=self.best_measurement,
            best_value=self.best_value,
            history=list(self.history),
            evaluations=self.evaluations,
            measured=self.measured,
            cache_hits=self.cache_hits,
            seconds=self.elapsed,
            certified=certified,
            pareto=self.pareto() if self.objective.multi else [],
            notes=list(self.notes),
            extra=dict(extra),
            final_rule=self.final_rule,
        )
