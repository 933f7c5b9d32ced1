"""Ask/tell: an agent proposes placements (:meth:`AskTell.ask`), the study measures them and
tells the agent the measurements (:meth:`AskTell.tell`). The study, not the agent, calls
``Evaluator.evaluate()``.

Two kinds of agent fit the contract:

* **Step agents** implement :class:`AskTell` themselves (``ask`` may return several proposals,
  a batch; ``tell`` takes their measurements in the same order).
* **Loop agents** (every built-in agent, and agents written as ``run(evaluator, budget)``
  loops) keep their algorithm as it is: :class:`LoopAskTell` runs the loop as a coroutine
  against a :class:`StudyView` of the evaluator whose ``evaluate``, ``remeasure`` and
  ``baseline`` hand the placement to the study and wait for its measurement. The loop runs
  only while the study waits on ``ask``/``tell`` (strict hand-over, never beside the study), so
  a run is as deterministic as the loop itself.

:func:`drive` is the study's loop; ``Agent.run(evaluator, budget)`` is ``drive`` over the
agent's :meth:`~search.base.Agent.ask_tell`.

Example (a step agent asked and told by hand):
    >>> from placetune import Evaluator
    >>> from search import Budget, get_agent
    >>> ev = Evaluator("seed-block", "orin-agx")
    >>> steps = get_agent("random", seed=0).ask_tell(ev, Budget(evaluations=3))
    >>> asked = steps.ask()                      # the agent's first proposal (a baseline)
    >>> len(asked), asked[0].kind
    (1, 'evaluate')
    >>> steps.tell([measure(ev, p) for p in asked])   # the study measures, the agent is told
    >>> while asked := steps.ask():
    ...     steps.tell([measure(ev, p) for p in asked])
    >>> steps.result().evaluations
    3
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from placetune.measurement import Measurement
from placetune.placement.placement import Placement

from .result import Budget, SearchResult

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator


__all__ = ["Proposal", "AskTell", "LoopAskTell", "StudyView", "measure", "drive"]


@dataclass(frozen=True)
class Proposal:
    """One placement an agent asks the study to measure.

    Attributes:
        placement: the placement.
        kind: ``evaluate`` (measure it, or answer from the store), ``remeasure`` (build a measured
            placement ``builds`` more times, :meth:`Evaluator.remeasure
            <placetune.tuning.evaluator.Evaluator.remeasure>`) or ``baseline`` (the all-GPU
            baseline, :meth:`Evaluator.baseline <placetune.tuning.evaluator.Evaluator.baseline>`).
        agent: the agent name recorded with the measurement (None: the evaluator's).
        trial_number: the trial number recorded with it.
        builds: builds of a ``remeasure``.
        annotation: shown by progress displays with the evaluation (never stored).
    """

    placement: Placement
    kind: str = "evaluate"
    agent: str | None = None
    trial_number: int | None = None
    builds: int = 1
    annotation: dict[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in ("evaluate", "remeasure", "baseline"):
            raise ValueError(f"Proposal.kind must be evaluate, remeasure or baseline, not {self.kind!r}")


def measure(evaluator: "Evaluator", proposal: Proposal) -> Measurement:
    """The study's side of a proposal: the one place the measuring call is made."""
    if proposal.kind == "baseline":
        return evaluator.baseline()
    if proposal.kind == "remeasure":
        return evaluator.remeasure(proposal.placement, builds=proposal.builds, agent=proposal.agent,
                                   trial_number=proposal.trial_number)
    kw: dict[str, Any] = {"annotation": proposal.annotation} if proposal.annotation else {}
    return evaluator.evaluate(proposal.placement, agent=proposal.agent, trial_number=proposal.trial_number, **kw)


@runtime_checkable
class AskTell(Protocol):
    """One run of an agent, driven one step at a time by the study.

    ``ask()`` returns the next proposals (an empty list: the run is over); the study measures
    each (:func:`measure`) and calls ``tell()`` with their measurements, in order, before asking
    again. When measuring raised, the study calls ``throw(exc)`` instead of ``tell``: the agent
    handles it (and the run goes on) or re-raises it. ``result()`` is the run's
    :class:`~search.base.SearchResult` so far; ``close()`` ends the run early.
    """

    def ask(self) -> list[Proposal]: ...

    def tell(self, measurements: Sequence[Measurement]) -> None: ...

    def throw(self, exc: BaseException) -> None: ...

    def result(self) -> "SearchResult": ...

    def close(self) -> None: ...


def drive(steps: AskTell, evaluator: "Evaluator") -> "SearchResult":
    """The study's loop: ask, measure every proposal, tell, until the agent asks nothing more.

    An exception of a measurement (e.g. :class:`~placetune.errors.StopRequested`) is thrown
    into the agent, as a loop agent's own ``evaluate()`` call would have raised it.
    """
    try:
        while asked := steps.ask():
            told: list[Measurement] = []
            try:
                for p in asked:
                    told.append(measure(evaluator, p))
            except Exception as exc:
                steps.throw(exc)
                continue
            steps.tell(told)
    finally:
        steps.close()
    return steps.result()


class _Closed(BaseException):
    """Thrown into a loop agent that the study stops early (like ``GeneratorExit``)."""


class StudyView:
    """The evaluator as a loop agent sees it under ask/tell: every attribute is the evaluator's,
    but ``evaluate``, ``remeasure`` and ``baseline`` are asked of the study and wait for its answer."""

    def __init__(self, evaluator: "Evaluator", ask: Callable[[Proposal], Measurement]) -> None:
        self.__dict__["_evaluator"] = evaluator
        self.__dict__["_ask"] = ask

    def __getattr__(self, name: str) -> Any:
        return getattr(self.__dict__["_evaluator"], name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._evaluator, name, value)

    def __repr__(self) -> str:
        return f"StudyView({self._evaluator!r})"

    def evaluate(self, placement: Placement | dict[str, str], *, agent: str | None = None,
                 trial_number: int | None = None, annotation: dict[str, Any] | None = None) -> Measurement:
        """Ask the study to measure ``placement`` (see ``Evaluator.evaluate``)."""
        return self._ask(Proposal(self._placement(placement), "evaluate", agent, trial_number, annotation=annotation))

    def remeasure(self, placement: Placement | dict[str, str], *, builds: int = 1, agent: str | None = None,
                  trial_number: int | None = None) -> Measurement:
        """Ask the study to build ``placement`` again (see ``Evaluator.remeasure``)."""
        return self._ask(Proposal(self._placement(placement), "remeasure", agent, trial_number, builds))

    def _placement(self, placement: Placement | dict[str, str]) -> Placement:
        return placement if isinstance(placement, Placement) else Placement(self._evaluator.model, placement)

    def baseline(self) -> Measurement:
        """Ask the study for the all-GPU baseline (measured once; see ``Evaluator.baseline``)."""
        return self._ask(Proposal(Placement.all_gpu(self._evaluator.model), "baseline", "baseline"))


class LoopAskTell:
    """:class:`AskTell` over an agent written as a loop: ``loop(view, budget)`` runs as a coroutine
    (in a thread of its own that runs only while the study waits on :meth:`ask`, :meth:`tell` or
    :meth:`throw`) and each measuring call of the :class:`StudyView` it gets is one proposal.

    Args:
        loop: the agent's loop, e.g. ``agent.search``; it returns the run's result.
        evaluator: the study's evaluator.
        budget: the run's budget.
        name: the thread's name (for logs and tracebacks).
    """

    def __init__(self, loop: Callable[[Any, "Budget"], "SearchResult"], evaluator: "Evaluator",
                 budget: "Budget", *, name: str = "agent", closing: type[BaseException] | None = None) -> None:
        self.view = StudyView(evaluator, self._propose)
        self._loop, self._budget, self._name = loop, budget, name
        self._closing = closing or _Closed
        self._to_agent: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._to_study: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._next: tuple[str, Any] | None = None  # the agent's message the study has not read yet
        self._pending: Proposal | None = None
        self._result: "SearchResult | None" = None
        self._over = False  # the loop returned or raised

    # ----------------------------------------------------------- agent's side
    def _main(self) -> None:
        try:
            self._to_study.put(("done", self._loop(self.view, self._budget)))
        except _Closed:
            self._to_study.put(("closed", None))
        except BaseException as exc:
            self._to_study.put(("error", exc))

    def _propose(self, proposal: Proposal) -> Measurement:
        if threading.current_thread() is not self._thread:
            raise RuntimeError("a loop agent's evaluator view is used by its own loop only")
        self._to_study.put(("ask", proposal))
        what, payload = self._to_agent.get()
        if what == "tell":
            return payload
        raise payload  # "throw": the measurement's exception, or _Closed

    # ----------------------------------------------------------- study's side
    def _resume(self, what: str, payload: Any) -> None:
        """Hand over to the agent and wait until it asks again or ends."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
            self._thread.start()
        else:
            self._to_agent.put((what, payload))
        self._next = self._to_study.get()

    def ask(self) -> list[Proposal]:
        """The agent's next proposal (one at a time), or [] once its loop returned."""
        if self._pending is not None:
            raise RuntimeError("ask: tell (or throw) the measurement of the previous proposal first")
        if self._over:
            return []
        if self._next is None:
            self._resume("start", None)
        assert self._next is not None
        what, payload = self._next
        self._next = None
        if what == "ask":
            self._pending = payload
            return [payload]
        self._over = True
        if what == "error":
            raise payload
        self._result = payload  # "done" (or "closed": None)
        return []

    def tell(self, measurements: Sequence[Measurement]) -> None:
        """The measurement of the proposal :meth:`ask` returned."""
        if self._pending is None:
            raise RuntimeError("tell: nothing was asked")
        if len(measurements) != 1:
            raise ValueError(f"tell: one measurement per proposal (1 asked, {len(measurements)} told)")
        self._pending = None
        self._resume("tell", measurements[0])

    def throw(self, exc: BaseException) -> None:
        """Raise ``exc`` in the agent's loop where it waits for its measurement."""
        if self._pending is None:
            raise exc
        self._pending = None
        self._resume("throw", exc)

    def result(self) -> "SearchResult":
        """The loop's result (once :meth:`ask` returned [], or it returned one when closed)."""
        if self._result is None:
            raise RuntimeError("result: the agent's loop has not returned (ask until it returns [])")
        return self._result

    def close(self) -> None:
        """End the loop early and wait for it: where it waits for a measurement it gets the
        ``closing`` exception (the agents' :class:`~search.base.BudgetExhausted`: a loop that
        handles it returns its result so far), and after 100 more proposals one it cannot catch."""
        t = self._thread
        self._over = True
        if t is None:
            return
        msg = self._next or (("ask", self._pending) if self._pending is not None else None)
        self._pending = self._next = None
        thrown = 0
        while msg is not None or t.is_alive():
            if msg is None:  # the loop runs (the study was interrupted): wait until it asks or ends
                try:  # (a thread that already sent its last message may still be ending: never wait on it)
                    msg = self._to_study.get(timeout=0.05)
                except queue.Empty:
                    continue
            if msg[0] == "done":
                self._result = cast("SearchResult | None", msg[1])
            if msg[0] != "ask":
                break
            self._to_agent.put(("throw", self._closing() if thrown < 100 else _Closed()))
            thrown += 1
            msg = None
        t.join()
