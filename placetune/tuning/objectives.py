"""Objectives: what a search optimises, its direction and unit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from placetune.errors import UnknownNameError
from placetune.measurement import Measurement
from placetune.tuning.constraints import Constraint, best_record, parse_constraints, total_violation

__all__ = ["Objective", "get_objective", "OBJECTIVE_NAMES", "best_stored"]

_SINGLE = {
    # name: (direction, unit)
    "latency": ("minimize", "ms"),
    "throughput": ("maximize", "fps"),
    "energy": ("minimize", "mJ"),
    "gpu_time": ("minimize", "ms"),  # GPU busy time per frame: what the placement takes of the GPU
}
#: Accepted objective names (``a+b`` pairs are multi-objective).
OBJECTIVE_NAMES = (*_SINGLE, "latency+energy", "throughput+energy")

#: Loss of an infeasible measurement (a violated constraint): above every feasible loss.
_INFEASIBLE = 1e12


@dataclass(frozen=True)
class Objective:
    """One objective or a pair for multi-objective search.

    Example:
        >>> get_objective("latency").directions
        ('minimize',)
        >>> get_objective("latency+energy").names
        ('latency', 'energy')
    """

    names: tuple[str, ...]
    constraints: tuple[Constraint, ...] = ()

    @property
    def name(self) -> str:
        """``latency``, ``throughput``, ``energy``, ``gpu_time`` or ``a+b`` (without constraints)."""
        return "+".join(self.names)

    @property
    def directions(self) -> tuple[str, ...]:
        """``minimize`` / ``maximize`` per component."""
        return tuple(_SINGLE[n][0] for n in self.names)

    @property
    def units(self) -> tuple[str, ...]:
        """Unit per component."""
        return tuple(_SINGLE[n][1] for n in self.names)

    @property
    def metric_names(self) -> tuple[str, ...]:
        """Name and unit of each component, as stored and shown everywhere:
        ``latency_ms``, ``throughput_fps``, ``energy_mj``."""
        return tuple(f"{n}_{_SINGLE[n][1].lower()}" for n in self.names)

    @property
    def slug(self) -> str:
        """The name with its constraints, safe in study and file names: ``energy-latency-le-2``."""
        ops = {"<=": "le", ">=": "ge"}
        return "-".join([self.name, *(f"{c.metric}-{ops[c.op]}-{c.bound:g}" for c in self.constraints)])

    def with_constraints(self, constraints: object) -> "Objective":
        """The same objective under constraints (texts like ``latency<=2`` or :class:`Constraint`)."""
        return Objective(self.names, parse_constraints(constraints))  # type: ignore[arg-type]

    def feasible(self, m: Measurement) -> bool:
        """True when every constraint holds (always, without constraints)."""
        return all(c.holds(m) for c in self.constraints)

    def violations(self, m: Measurement) -> list[float]:
        """Optuna constraint values, one per constraint (``<= 0``: holds)."""
        return [c.violation(m) for c in self.constraints]

    def loss(self, m: Measurement | None) -> float:
        """Primary objective as a loss (smaller is better; ``inf`` for a failure). A measurement
        that violates a constraint is feasible but penalised: its loss is above every feasible
        loss, ordered by how far it misses (relative to each bound)."""
        v = None if m is None else self.value(m)
        if v is None or not math.isfinite(v):
            return math.inf
        loss = v if self.direction == "minimize" else -v
        if self.constraints and m is not None:
            miss = total_violation(self.constraints, m)
            if miss > 0:
                return _INFEASIBLE * (1.0 + miss) + loss
        return loss

    @property
    def multi(self) -> bool:
        """True for a pair."""
        return len(self.names) > 1

    @property
    def direction(self) -> str:
        """Direction of the first (primary) component."""
        return self.directions[0]

    def values(self, m: Measurement) -> tuple[float, ...] | None:
        """Objective values of a measurement (None when it failed or lacks a value)."""
        vals = tuple(m.objective(n) for n in self.names)
        return None if any(v is None for v in vals) else vals  # type: ignore[return-value]

    def value(self, m: Measurement) -> float | None:
        """Primary objective value (None when failed)."""
        return m.objective(self.names[0])

    def better(self, a: float, b: float) -> bool:
        """True when primary value ``a`` is strictly better than ``b``."""
        return a < b if self.direction == "minimize" else a > b

    def gain(self, value: float, baseline: float) -> float:
        """Improvement factor over a baseline (> 1 is better): baseline/value for minimise."""
        if value <= 0 or baseline <= 0:
            return float("nan")
        return baseline / value if self.direction == "minimize" else value / baseline

    def gain_over(self, m: Measurement | None, baseline: Measurement | None) -> float | None:
        """The primary objective's :meth:`gain` of measurement ``m`` over ``baseline`` (> 1 is
        better): the "vs all-GPU" figure of ``placetune tune``'s summary and of an exported plan's
        headline. None when either has no value (failed) or the ratio is undefined (a zero value)."""
        if m is None or baseline is None:
            return None
        v, b = self.value(m), self.value(baseline)
        if v is None or b is None:
            return None
        g = self.gain(v, b)
        return g if math.isfinite(g) else None


def get_objective(name: str | Objective, constraints: object = None) -> Objective:
    """Parse an objective name (optionally under constraints, see :meth:`Objective.with_constraints`).

    Raises:
        UnknownNameError: not one of :data:`OBJECTIVE_NAMES`.
    """
    if isinstance(name, Objective):
        return name if constraints is None else name.with_constraints(constraints)
    parts = tuple(p.strip().lower() for p in str(name).split("+"))
    if not parts or any(p not in _SINGLE for p in parts) or len(set(parts)) != len(parts) or len(parts) > 2:
        raise UnknownNameError(f"unknown objective {name!r}; objectives are {', '.join(OBJECTIVE_NAMES)}")
    return Objective(parts, parse_constraints(constraints))  # type: ignore[arg-type]


def best_stored(store: Any, study_name: str, objective: "Objective | None" = None) -> Any:
    """The best ``ok`` measurement record of a stored study, ranked as ``placetune tune`` ranks it.

    One ranking for the evaluator, ``placetune export`` and ``placetune studies``: with constraints
    (``objective``'s, or when ``objective`` is None the ones the study was created with), the
    best feasible measurement by the objective's loss, else the one closest to feasible
    (:func:`best_record`); without, the store's ranking by the primary objective
    (:meth:`Store.best <placetune.store.queries.QueriesMixin.best>`, which also ranks ``gpu_time``).

    Args:
        store: the :class:`~placetune.store.store.Store`.
        study_name: the study.
        objective: an :class:`~placetune.tuning.objectives.Objective`; None: the study's own.

    Returns:
        The :class:`~placetune.store.records.MeasurementRecord`, or None when nothing ok is stored.

    Raises:
        UnknownNameError: no such study.
    """
    if objective is None:
        st = store.study(study_name)
        if not st.constraints:
            return store.best(study_name)
        objective = get_objective(st.objective, st.constraints)
    if objective.constraints:
        return best_record(store.measurements(study_name, status="ok"), objective.loss)
    return store.best(study_name, objective.names[0], objective.direction)
