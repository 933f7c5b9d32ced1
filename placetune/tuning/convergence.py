"""When a study stops improving: a patience rule on its best value, watched live and reported after.

A long run on a Jetson spends most of its builds after the search has settled. The rule here
says when: the study has **converged** at trial ``c`` once ``patience`` further trials have not
brought its best more than ``min_gain`` (relative) past the best of trial ``c``, ``c`` being the
first trial whose best is within ``min_gain`` of the current best. ``placetune tune`` prints
where that happened and what the trials after it bought, stores both (the study's Optuna
study user attribute ``convergence``, and the exported plan's notes) and, with
``stop_when_converged``, ends the run there.

The rule reads the objective's losses (feasible before infeasible under constraints), in the
order the study asked for them, its earlier runs included; a re-measured placement counts with
its latest (median over builds) value, so a lucky first build does not hold the best up.

A declaration is withdrawn when the best then moves more than ``min_gain`` past the best of the
convergence trial (a later trial found a better plan): the study is not converged any more, and
the rule waits ``patience`` trials again from the trial where the best moved. A re-measurement that
lowers the best withdraws nothing (it found nothing new). While not converged, the rule says at
which trial the best last moved by more than ``min_gain`` (the terminal's progress bar shows it).

Patience: ``max(10, budget / 10)`` trials (30 of the default 300), gain: 1 % (about the
build-to-build noise of a Jetson; nothing smaller is told apart from noise by one build).
"""

from __future__ import annotations

import bisect
import heapq
import logging
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from placetune._lazy import lazy_import
from placetune.wording import figure, hours, plural
from placetune.placement.placement import Placement
from placetune.tuning.optuna_study import storage_for

if TYPE_CHECKING:
    import optuna

    from placetune.measurement import Measurement
    from placetune.placement.placement import Placement
    from placetune.tuning.evaluator import Evaluator
    from placetune.tuning.objectives import Objective
else:
    optuna = lazy_import("optuna")

__all__ = ["MIN_GAIN", "Convergence", "ConvergenceWatch", "patience_for", "store_convergence"]

log = logging.getLogger(__name__)

#: a best that moves less than this (relative) is taken as no progress: a Jetson build's noise
MIN_GAIN = 0.01


def patience_for(budget: int) -> int:
    """Trials without progress after which a study of ``budget`` trials counts as converged."""
    return max(10, int(round(0.1 * max(0, int(budget)))))


@dataclass(frozen=True)
class Convergence:
    """Where a study converged and what the trials after it bought.

    Attributes:
        trials: trials of the study so far.
        patience: trials without progress the rule waits.
        min_gain: relative gain below which the best did not move.
        trial: the trial the study converged at (None: not converged); the rule knew it
            ``patience`` trials later, at ``trial + patience``.
        best_then: the best value at that trial (the objective's unit).
        best_now: the best value after every trial.
        direction: ``maximize`` or ``minimize`` (the objective's).
        stopped: True when the run ended there (``stop_when_converged``).
        last_moved: the trial the best last moved more than ``min_gain`` at (the first trial
            whose best is within ``min_gain`` of the current best; None: no trial yet).
        withdrawn: ``(convergence trial, trial it was withdrawn at)`` of every declaration a
            later gain over ``min_gain`` withdrew, in order.
        device_s: the device time (builds and timing, seconds) of the trials seen; what the backend
            reports as ``extra["device_time_s"]`` (the simulator does), cache hits cost nothing.
        device_s_after: of it, the trials after the convergence trial (0 when not converged).
    """

    trials: int
    patience: int
    min_gain: float
    trial: int | None
    best_then: float | None
    best_now: float | None
    direction: str = "maximize"
    stopped: bool = False
    last_moved: int | None = None
    withdrawn: tuple[tuple[int, int], ...] = ()
    device_s: float = 0.0
    device_s_after: float = 0.0

    @property
    def bought(self) -> float | None:
        """Relative improvement of the best after the convergence trial (0.004: 0.4 % better; negative:
        a re-measurement lowered it); None when not converged."""
        if self.trial is None or not self.best_then or self.best_now is None:
            return None
        gain = (self.best_now - self.best_then) / abs(self.best_then)
        return gain if self.direction == "maximize" else -gain

    def sentence(self, unit: str = "", subject: str = "the best") -> str:
        """One line for a person: where the study converged and what came after. ``subject`` names the
        best the rule watched (``the best stored value`` where the run's summary shows another best, a
        run's own final pick)."""
        u = f" {unit}" if unit else ""
        if self.trial is None:
            if self.trials <= self.patience and not self.withdrawn:
                return (f"not judged: convergence needs {plural(self.patience, 'trial')} after the best without a "
                        f"gain over {100 * self.min_gain:g}%, and the study has only {self.trials}")
            moved = (f"{subject} last moved by more than {100 * self.min_gain:g}% at trial {self.last_moved} of "
                     f"{self.trials}" if self.last_moved is not None else
                     f"{subject} still moved by more than {100 * self.min_gain:g}% within the last {self.patience} "
                     f"of {self.trials} trials")
            return (f"not converged: {moved}, and convergence needs {plural(self.patience, 'trial')} without such a "
                    f"gain" + self._withdrawals())
        after = self.trials - self.trial
        head = (f"converged at trial {self.trial} of {self.trials}: {subject} stopped improving there "
                f"({self.patience} trials in a row gained under {100 * self.min_gain:g}%{self._withdrawals()})")
        if self.stopped:
            return head + f"; the run stopped {plural(after, 'trial')} later (--stop-when-converged)"
        more = f"the {plural(after, 'trial')} after it"
        b = self.bought or 0.0
        if b <= -0.0005:  # the best of that trial was one lucky build: re-measured, it did not hold
            return head + (f"; {more} found nothing better, and re-measuring moved {subject} from "
                           f"{figure(self.best_then)} to {figure(self.best_now)}{u}")
        if abs(b) < 0.0005:
            return head + f"; {more} found nothing better ({subject.removeprefix('the ')} {figure(self.best_now)}{u})"
        return head + (f"; {more} improved {subject} by {100 * b:.1f}% "
                       f"({figure(self.best_then)} -> {figure(self.best_now)}{u})")

    def _withdrawals(self) -> str:
        """``; a convergence declared at trial 3 was withdrawn at trial 26`` (nothing when none was)."""
        if not self.withdrawn:
            return ""
        told = ", ".join(f"at trial {c} was withdrawn at trial {w}" for c, w in self.withdrawn)
        return f"; {'a convergence' if len(self.withdrawn) == 1 else 'the convergences'} declared {told}"

    def device_clause(self) -> str:
        """``; 6.0 h of it after the study converged at trial 4``: what the later builds cost
        (nothing when not converged or no device time is known)."""
        if self.trial is None or self.device_s <= 0:
            return ""
        return f"; {hours(self.device_s_after)} of it after the study converged at trial {self.trial}"

    def short(self) -> str:
        """A few words for a progress bar: ``converged at trial 4``, ``best moved at trial 37``."""
        if self.trial is not None:
            return f"converged at trial {self.trial}"
        return f"best moved at trial {self.last_moved}" if self.last_moved is not None else ""

    def as_dict(self) -> dict[str, Any]:
        """Plain values (what the study stores)."""
        return {**asdict(self), "bought": self.bought}


def device_spent(m: "Measurement") -> float:
    """The simulated device seconds a trial's measurement spent on builds and timing (0 for a cache hit,
    or where the measurement records none)."""
    dev = m.extra.get("device_time_s")
    if m.extra.get("cache_hit") or not isinstance(dev, dict) or not isinstance(dev.get("total_s"), (int, float)):
        return 0.0
    return float(dev["total_s"])


class ConvergenceWatch:
    """Evaluator callback that applies the rule to every evaluation (:meth:`update`).

    Args:
        objective: the study's objective.
        budget: the study's trials (sets the patience, see :func:`patience_for`).
        history: ``(realisation key, measurement)`` of the study's earlier trials, in order
            (a resumed study), e.g. from :meth:`from_store`.
        patience: trials without progress (default: :func:`patience_for` of ``budget``).
        min_gain: relative gain that counts as progress.
    """

    def __init__(self, objective: "Objective", budget: int, history: Iterable[tuple[str, "Measurement"]] = (), *,
                 patience: int | None = None, min_gain: float = MIN_GAIN) -> None:
        self.objective = objective
        self.patience = int(patience) if patience is not None else patience_for(budget)
        self.min_gain = float(min_gain)
        self._latest: dict[str, float] = {}  # realisation -> latest loss
        self._heap: list[tuple[float, str]] = []  # (loss, realisation), stale entries left until they surface
        self._bests: list[float] = []  # best loss after each trial
        # -(running minimum of _bests): non-decreasing, so the first trial within reach of a value is a bisection
        self._neg_prefix_min: list[float] = []
        self._device: list[float] = []  # device seconds of each trial (builds and timing; 0 for a cache hit)
        self._trial: int | None = None  # where it converged (None: not converged, or withdrawn)
        self._withdrawn: list[tuple[int, int]] = []  # (convergence trial, withdrawn at) of each withdrawn declaration
        self._news: list[str] = []  # declarations and withdrawals not announced yet (see announcements)
        self.stopped = False
        for key, m in history:
            self._add(key, m, 1)

    @classmethod
    def from_store(cls, ev: "Evaluator", budget: int, losses: dict[int, float] | None = None,
                   spent: dict[int, float] | None = None, **kw: Any) -> "ConvergenceWatch":
        """A watch that starts from the study's stored trials (a resumed study).

        Args:
            losses: measurement id -> loss of rows already read (:class:`~placetune.tuning.study_scan.StudyScan`);
                the other rows the study's requests name are read here.
            spent: measurement id -> the device seconds its trial spent (:func:`device_spent`) of the same rows.
        """
        requests = ev.store.request_keys(ev.study_name)
        if losses is None:
            losses, spent = {}, {}
            for rec in ev.store.each_measurement(ev.study_name):
                losses[rec.id] = ev.objective.loss(rec.measurement)
                spent[rec.id] = device_spent(rec.measurement)
        losses, spent = dict(losses), dict(spent or {})
        missing = sorted({mid for _, mid in requests if mid not in losses})
        for i in range(0, len(missing), 500):  # (rows stored since they were read: the run's first baselines)
            for rec in ev.store.measurements(ev.study_name, ids=missing[i:i + 500]):
                losses[rec.id] = ev.objective.loss(rec.measurement)
                spent[rec.id] = device_spent(rec.measurement)
        watch = cls(ev.objective, budget, **kw)
        for key, mid in requests:
            if mid in losses:
                watch._add_loss(key, losses[mid], 1, spent.get(mid, 0.0))
        watch._news.clear()  # the stored trials' declarations were announced by the runs that made them
        return watch

    # ------------------------------------------------------------------ updates
    def update(self, placement: "Placement", m: "Measurement") -> None:
        """Evaluator callback: one evaluation (or a re-measurement of ``n`` builds: ``n`` trials)."""
        key = Placement(placement.model, m.realized).key if m.realized else "infeasible:" + placement.key
        self.add(key, m)

    def add(self, key: str, m: "Measurement") -> None:
        """One trial of the realisation ``key`` (a re-measurement of ``n`` builds: ``n`` trials,
        its value replacing the realisation's earlier one)."""
        self._add(key, m, int(m.extra.get("remeasured") or 1))

    def _add(self, key: Any, m: "Measurement", trials: int) -> None:
        self._add_loss(key, self.objective.loss(m), trials, device_spent(m))

    def _add_loss(self, key: Any, loss: float, trials: int, spent: float = 0.0) -> None:
        if math.isfinite(loss):
            self._latest[str(key)] = loss
            heapq.heappush(self._heap, (loss, str(key)))
        best = self._best()
        for _ in range(max(1, trials)):
            self._bests.append(best)
            low = -self._neg_prefix_min[-1] if self._neg_prefix_min else math.inf
            self._neg_prefix_min.append(-min(low, best))
            self._device.append(spent / max(1, trials))
            if self._trial is not None and not self.stopped:
                then = self._bests[self._trial - 1]
                if best < then - self.min_gain * abs(then):  # a gain over min_gain: not converged after all
                    self._withdrawn.append((self._trial, len(self._bests)))
                    self._news.append(self._withdrawal_line(self._trial, then, best))
                    log.info("convergence at trial %d withdrawn at trial %d", self._trial, len(self._bests))
                    self._trial = None
            if self._trial is None:
                c = self._since()
                if c is not None and len(self._bests) - c >= self.patience:
                    self._trial = c
                    self._news.append(f"converged at trial {c}: no gain over {100 * self.min_gain:g}% in the "
                                      f"{self.patience} trials after it")
                    log.info("converged at trial %d (declared at trial %d)", c, len(self._bests))

    def _withdrawal_line(self, trial: int, then: float, now: float) -> str:
        if abs(then) >= 1e12:  # constraints: the convergence trial's best broke one
            return (f"convergence at trial {trial} withdrawn at trial {len(self._bests)}: the first plan that meets "
                    f"the constraints")
        sign = -1.0 if self.objective.direction == "maximize" else 1.0
        gain = (then - now) / abs(then) if then else 0.0
        return (f"convergence at trial {trial} withdrawn at trial {len(self._bests)}: the best moved "
                f"{100 * gain:+.1f}% ({figure(sign * then)} -> {figure(sign * now)})")

    def _since(self) -> int | None:
        """The first trial whose best is within ``min_gain`` of the current best (1-based)."""
        now = self._bests[-1]
        if not math.isfinite(now):
            return None
        # the first trial whose best is <= now + tol is the first whose running minimum is: a bisection
        # of the running minima (a scan of every trial per trial made a long study's resume quadratic)
        i = bisect.bisect_left(self._neg_prefix_min, -(now + self.min_gain * abs(now)))
        return i + 1 if i < len(self._bests) else None

    def _best(self) -> float:
        """The lowest latest loss of any realisation (a heap whose entries a later value of their
        realisation made stale are dropped as they surface: O(log n) a trial, not a scan of every one)."""
        heap = self._heap
        while heap and self._latest.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else math.inf

    # ------------------------------------------------------------------ reading
    @property
    def converged(self) -> bool:
        """True while the rule's declaration stands (a later gain over ``min_gain`` withdraws it)."""
        return self._trial is not None

    def announcements(self) -> list[str]:
        """The declarations and withdrawals since the last call, one line each, in order (for a run's log)."""
        news, self._news = self._news, []
        return news

    def should_stop(self) -> bool:
        """A :class:`search.base.Budget` stop condition: True once converged (and remembered)."""
        if self.converged:
            self.stopped = True
        return self.converged

    def result(self) -> Convergence:
        """The rule's verdict on the trials seen so far."""
        sign = -1.0 if self.objective.direction == "maximize" else 1.0

        def value(loss: float) -> float | None:
            return None if not math.isfinite(loss) or abs(loss) >= 1e12 else sign * loss

        then = value(self._bests[self._trial - 1]) if self._trial else None
        now = value(self._bests[-1]) if self._bests else None
        return Convergence(len(self._bests), self.patience, self.min_gain, self._trial, then, now,
                           self.objective.direction, self.stopped, self._since() if self._bests else None,
                           tuple(self._withdrawn), sum(self._device),
                           sum(self._device[self._trial:]) if self._trial else 0.0)


def store_convergence(ev: "Evaluator", conv: Convergence | None, unit: str = "", verdict: str | None = None,
                      subject: str = "the best") -> None:
    """Keep the run's conclusions with the study, where optuna-dashboard shows them: the Optuna study's
    user attributes ``convergence`` (:meth:`Convergence.sentence` of ``subject``, the line the run printed) and
    ``verdict`` (the verdict line without its ``verdict:``), as text a person reads; the figures of
    ``conv`` (:meth:`Convergence.as_dict`) go to the study system attribute ``placetune:convergence``
    for programs. Nothing when Optuna is not installed or the study cannot be opened."""
    try:
        storage = storage_for(ev.store)
        study = optuna.load_study(study_name=ev.study_name, storage=storage)
        if conv is not None:
            study.set_user_attr("convergence", conv.sentence(unit, subject))
            storage.set_study_system_attr(storage.get_study_id_from_name(ev.study_name), "placetune:convergence", conv.as_dict())
        if verdict:
            study.set_user_attr("verdict", verdict.removeprefix("verdict: "))
    except Exception as exc:  # noqa: BLE001 - the lines were printed; storing them is a convenience
        log.info("convergence not stored with the Optuna study %r: %s", ev.study_name, exc)
