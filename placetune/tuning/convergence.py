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

Patience: ``max(10, budget / 10)`` trials (30 of the default 300), gain: 1 % (about the
build-to-build noise of a Jetson; nothing smaller is told apart from noise by one build).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from placetune._lazy import lazy_import
from placetune.wording import figure, plural
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
    """

    trials: int
    patience: int
    min_gain: float
    trial: int | None
    best_then: float | None
    best_now: float | None
    direction: str = "maximize"
    stopped: bool = False

    @property
    def bought(self) -> float | None:
        """Relative improvement of the best after the convergence trial (0.004: 0.4 % better; negative:
        a re-measurement lowered it); None when not converged."""
        if self.trial is None or not self.best_then or self.best_now is None:
            return None
        gain = (self.best_now - self.best_then) / abs(self.best_then)
        return gain if self.direction == "maximize" else -gain

    def sentence(self, unit: str = "") -> str:
        """One line for a person: where the study converged and what came after."""
        u = f" {unit}" if unit else ""
        if self.trial is None:
            if self.trials <= self.patience:
                return (f"not converged: a run of {plural(self.trials, 'trial')} is shorter than the {self.patience} "
                        f"trials without a gain over {100 * self.min_gain:g}% that convergence needs")
            return (f"not converged: the best still moved by more than {100 * self.min_gain:g}% within the last "
                    f"{self.patience} of {self.trials} trials")
        after = self.trials - self.trial
        head = (f"converged at trial {self.trial} of {self.trials} (no gain over {100 * self.min_gain:g}% in the "
                f"{plural(self.patience, 'trial')} after it)")
        if self.stopped:
            return head + f"; the run stopped there (stop_when_converged) after {plural(after, 'more trial')}"
        b = self.bought or 0.0
        if b <= -0.0005:  # the best of that trial was one lucky build: re-measured, it did not hold
            return head + (f"; the {plural(after, 'trial')} after it bought nothing, and re-measurement moved the "
                           f"best from {figure(self.best_then)} to {figure(self.best_now)}{u}")
        if abs(b) < 0.0005:
            return head + f"; the {plural(after, 'trial')} after it bought nothing (best {figure(self.best_now)}{u})"
        return head + (f"; the {plural(after, 'trial')} after it bought {100 * b:+.1f}% "
                       f"({figure(self.best_then)} -> {figure(self.best_now)}{u})")

    def as_dict(self) -> dict[str, Any]:
        """Plain values (what the study stores)."""
        return {**asdict(self), "bought": self.bought}


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
        self._bests: list[float] = []  # best loss after each trial
        self._trial: int | None = None  # where it converged (first declared)
        self.stopped = False
        for key, m in history:
            self._add(key, m, 1)

    @classmethod
    def from_store(cls, ev: "Evaluator", budget: int, **kw: Any) -> "ConvergenceWatch":
        """A watch that starts from the study's stored trials (a resumed study)."""
        by_id = {rec.id: rec.measurement for rec in ev.store.measurements(ev.study_name)}
        history = [(r.placement_key, by_id[r.measurement_id]) for r in ev.store.requests(ev.study_name)
                   if r.measurement_id in by_id]
        return cls(ev.objective, budget, history, **kw)

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
        loss = self.objective.loss(m)
        if math.isfinite(loss):
            self._latest[str(key)] = loss
        best = min(self._latest.values(), default=math.inf)
        for _ in range(max(1, trials)):
            self._bests.append(best)
            if self._trial is None:
                c = self._since()
                if c is not None and len(self._bests) - c >= self.patience:
                    self._trial = c
                    log.info("converged at trial %d (declared at trial %d)", c, len(self._bests))

    def _since(self) -> int | None:
        """The first trial whose best is within ``min_gain`` of the current best (1-based)."""
        now = self._bests[-1]
        if not math.isfinite(now):
            return None
        tol = self.min_gain * abs(now)
        for i, b in enumerate(self._bests):
            if b <= now + tol:
                return i + 1
        return None

    # ------------------------------------------------------------------ reading
    @property
    def converged(self) -> bool:
        """True once the rule has declared convergence (it stays declared)."""
        return self._trial is not None

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
                           self.objective.direction, self.stopped)


def store_convergence(ev: "Evaluator", conv: Convergence) -> None:
    """Keep ``conv`` with the study: the user attribute ``convergence`` of its Optuna study (the
    dashboard shows it); nothing when Optuna is not installed or the study cannot be opened."""
    try:
        study = optuna.load_study(study_name=ev.study_name, storage=storage_for(ev.store))
        study.set_user_attr("convergence", conv.as_dict())
    except Exception as exc:  # noqa: BLE001 - the convergence line was printed; storing it is a convenience
        log.info("convergence not stored with the Optuna study %r: %s", ev.study_name, exc)
