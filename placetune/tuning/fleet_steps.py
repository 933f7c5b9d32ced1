"""Any agent in a fleet: the worker's study drives it by ask/tell, one trial of the fleet's Optuna study per proposal.

The ``optuna`` agent coordinates a fleet through its own sampler (constant liar). Every other
agent runs as it runs on one machine (:mod:`search.asktell`), and :class:`FleetSteps` stands
between its proposals and the study's measurements:

* **The budget**: before each proposal is measured, the worker passes the fleet's
  :class:`~placetune.tuning.fleet_gate.TrialGate` (advisory lock, count, then a RUNNING trial of
  the fleet's Optuna study carrying the proposal's parameters), so the fleet runs exactly
  ``--trials`` trials whatever the agents propose; a batch the gate cuts short is told only the
  measurements it got, and the run ends.
* **No build twice**: the evaluator's claims (:class:`~placetune.tuning.fleet_claims.Claims`)
  make a worker wait for a placement another worker is measuring.
* **Heartbeats**: the trial's heartbeat is recorded while it is measured; the trial of a worker
  that died goes stale and is failed by the next worker waiting at the gate. It is not
  re-queued (a proposal belongs to the agent that made it): the live workers' agents propose
  the trials that finish the budget.

Example:
    ``placetune tune study.toml --agent random --storage postgresql+psycopg://tuner@db/pt`` on
    N machines: N random agents (each with its own seed) share one budget and one store.
"""

from __future__ import annotations

import logging
import threading
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from placetune._lazy import lazy_import
from placetune.errors import StoppedAfterMeasurement
from placetune.tuning.optuna_study import OptunaStudy, distributions, storage_for

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution
    import optuna

    from placetune.measurement import Measurement
    from placetune.tuning.evaluator import Evaluator
    from placetune.tuning.fleet_gate import TrialGate
    from placetune.tuning.fleet_worker import FleetOptions
    from search import AskTell, Budget, Proposal, SearchResult

if TYPE_CHECKING:
    import optuna.trial as optuna_trial
else:
    optuna = lazy_import("optuna")
    optuna_trial = lazy_import("optuna.trial")

__all__ = ["FleetAgent", "FleetSteps"]

log = logging.getLogger(__name__)


class FleetAgent:
    """An agent as one worker of a fleet: its :meth:`ask_tell` runs through :class:`FleetSteps`.

    Args:
        agent: the agent (its seed already made this worker's own).
        gate: the fleet's trial gate.
        options: heartbeat settings.
    """

    def __init__(self, agent: Any, gate: "TrialGate", options: "FleetOptions") -> None:
        self.agent, self.gate, self.options = agent, gate, options
        self.name, self.seed, self.granularity = agent.name, agent.seed, agent.granularity
        self.study_name: str | None = None  # the evaluator's: the fleet's Optuna study

    def ask_tell(self, evaluator: "Evaluator", budget: "Budget") -> "FleetSteps":
        """The agent's run (:meth:`search.base.Agent.ask_tell`) with the fleet's gate around each proposal."""
        return FleetSteps(self.agent.ask_tell(evaluator, budget), evaluator, self.gate, self.options,
                          granularity=self.granularity, agent=self.name)


class _Heartbeat(threading.Thread):
    """Records a RUNNING trial's heartbeat every interval until stopped."""

    def __init__(self, storage: Any, trial_id: int, interval: float) -> None:
        super().__init__(name=f"heartbeat of trial {trial_id}", daemon=True)
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self.done = threading.Event()

    def run(self) -> None:
        while True:
            try:
                self.storage.record_heartbeat(self.trial_id)
            except Exception as exc:  # a missed beat; the next one may pass
                log.debug("heartbeat of trial %s: %s", self.trial_id, exc)
            if self.done.wait(self.interval):
                return

    def stop(self) -> None:
        self.done.set()
        self.join()


class FleetSteps:
    """An :class:`~search.asktell.AskTell` run seen through the fleet: each proposal is a trial.

    Args:
        steps: the agent's run.
        evaluator: this worker's evaluator (claims attached).
        gate: the fleet's trial gate.
        options: heartbeat settings.
        granularity: the agent's (the trials' parameters).
        agent: the agent's name (a trial attribute).
    """

    def __init__(self, steps: "AskTell", evaluator: "Evaluator", gate: "TrialGate", options: "FleetOptions", *,
                 granularity: str = "fusion", agent: str | None = None) -> None:
        self.steps, self.evaluator, self.gate, self.options, self.agent = steps, evaluator, gate, options, agent
        with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            storage = storage_for(evaluator.store, heartbeat_interval=int(options.heartbeat_interval),
                                  grace_period=int(options.grace_period))
        self.optuna = OptunaStudy(evaluator, granularity, storage=storage, backfill=False)
        self.study = self.optuna.study
        self._dists = distributions(self.optuna.space)
        self._running: list[tuple["optuna.Trial", "Proposal", _Heartbeat | None]] = []
        self._over = False

    def ask(self) -> list["Proposal"]:
        """The agent's proposals that the gate lets this worker measure ([] once the fleet's budget is done)."""
        if self._over:
            return []
        asked = self.steps.ask()
        for p in asked:
            if not self.gate.may_start(self.study, wait=not self._running):  # never wait on its own trials
                break
            self._running.append(self._start(p))
        if not asked:
            self._over = True
        elif not self._running:  # the fleet's budget is done (or a stop): the agent's run ends
            self.close()
        return [p for _, p, _ in self._running]

    def _start(self, proposal: "Proposal") -> tuple["optuna.Trial", "Proposal", _Heartbeat | None]:
        """A RUNNING trial with the proposal's parameters (the gate's lock is held until it exists)."""
        try:
            params = self.optuna.params(proposal.placement)
            dists: dict[str, "BaseDistribution"] = {k: d for k, d in self._dists.items() if k in params}
            self.study.enqueue_trial(params, user_attrs={"proposal": proposal.kind})
            with warnings.catch_warnings():  # "heartbeat ... with Study.optimize": this worker records them
                warnings.simplefilter("ignore", UserWarning)
                trial = self.study.ask(fixed_distributions=dists)
        except BaseException:
            self.gate.release()
            raise
        self.gate.trial_started(self.study, trial)  # labels it with the worker, releases the lock
        beat = None
        if isinstance(self.study._storage, optuna.storages.RDBStorage):
            beat = _Heartbeat(self.study._storage, trial._trial_id, float(self.options.heartbeat_interval))
            beat.start()
        return trial, proposal, beat

    def tell(self, measurements: Sequence["Measurement"]) -> None:
        """The measurements of the proposals :meth:`ask` returned: the trials finish, the agent is told."""
        running, self._running = self._running, []
        if len(measurements) != len(running):
            self._fail(running)
            raise ValueError(f"tell: one measurement per proposal ({len(running)} asked, {len(measurements)} told)")
        for (trial, p, beat), m in zip(running, measurements):
            if beat is not None:
                beat.stop()
            self.optuna.tell(trial, p.placement, m, self.agent)
        self.steps.tell(measurements)

    def throw(self, exc: BaseException) -> None:
        """A measurement raised: its trials fail, and the agent decides (see ``AskTell.throw``). A run stopped
        once a measurement was stored (:class:`~placetune.errors.StoppedAfterMeasurement`: memory failures in
        a row, a failed first-build check) tells that measurement's trial first: a finished trial the other workers count, not a failed one."""
        running, self._running = self._running, []
        if isinstance(exc, StoppedAfterMeasurement):
            key = exc.placement.key
            told = next((t for t in running if t[1].placement.key == key), None)
            if told is not None:
                running.remove(told)
                trial, p, beat = told
                if beat is not None:
                    beat.stop()
                self.optuna.tell(trial, p.placement, exc.measurement, self.agent)
        self._fail(running)
        self.steps.throw(exc)

    def _fail(self, running: list[tuple["optuna.Trial", "Proposal", _Heartbeat | None]]) -> None:
        for trial, _, beat in running:
            if beat is not None:
                beat.stop()
            self.study.tell(trial, state=optuna_trial.TrialState.FAIL)

    def result(self) -> "SearchResult":
        """The agent's result."""
        return self.steps.result()

    def close(self) -> None:
        """End the run: unfinished trials fail, the agent's run is closed, the gate is released."""
        self._over = True
        running, self._running = self._running, []
        self._fail(running)
        self.steps.close()
        self.gate.release()
