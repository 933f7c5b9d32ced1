"""Objectives: what a search optimises, its direction and unit."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placetune.errors import ConfigError, UnknownNameError
from placetune.measurement import Measurement
from placetune.objective_registry import REGISTERED, Registered
from placetune.tuning.constraints import Constraint, best_record, parse_constraints, total_violation

__all__ = ["Objective", "get_objective", "OBJECTIVE_NAMES", "objective_names", "register_objective", "registered_objectives",
           "unregister_objective", "best_stored"]

_SINGLE = {
    # name: (direction, unit)
    "latency": ("minimize", "ms"),
    "throughput": ("maximize", "fps"),
    "energy": ("minimize", "mJ"),
    "gpu_time": ("minimize", "ms"),  # GPU busy time per frame: what the placement takes of the GPU
}
#: The built-in single objectives.
_BUILTIN = tuple(_SINGLE)
#: Accepted built-in objective names (``a+b`` pairs are multi-objective); :func:`objective_names`
#: adds the registered ones.
OBJECTIVE_NAMES = (*_SINGLE, "latency+energy", "throughput+energy")



#: Objectives added by :func:`register_objective`, by name (declared where a measurement reads them too).
_REGISTERED = REGISTERED
#: A registered objective's name: ASCII lower-case letters, digits and underscores, a letter first.
_NAME = re.compile(r"[a-z][a-z0-9_]*")


def register_objective(name: str, *, direction: str, unit: str, value: Callable[[Measurement], float | None],
                       measured_from: tuple[str, ...] | list[str] = ("latency",), replace: bool = False) -> None:
    """Add an objective: ``get_objective(name)``, ``Evaluator(..., objective=name)`` and the search
    agents then use it (the extension point for what a search optimises; ``examples/toy_objective.py``
    is one in a file).

    Args:
        name: lower-case letters, digits and underscores, e.g. ``"p99_latency"``.
        direction: ``minimize`` or ``maximize``.
        unit: the unit of its values (shown with them, e.g. ``ms``).
        value: the objective's value of a successful measurement (``None`` when it has none); a
            failed measurement has none without asking.
        measured_from: the built-in objectives the value is computed from: a backend must measure
            them (:attr:`Capabilities.objectives <placetune.backends.base.Capabilities.objectives>`).
        replace: allow replacing an objective registered before (never a built-in one).

    Raises:
        ConfigError: a malformed name, direction, unit or ``measured_from``, a value that is not
            callable, or a name already taken.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"objective name {str(name)[:40]!r}: lower-case letters, digits and underscores only")
    if name in _BUILTIN or (name in _REGISTERED and not replace):
        raise ConfigError(f"objective {name!r} is taken; choose another name"
                          + ("" if name in _BUILTIN else " or pass replace=True"))
    if direction not in ("minimize", "maximize"):
        raise ConfigError(f"objective {name}: direction must be 'minimize' or 'maximize', not {direction!r}")
    if not isinstance(unit, str) or not unit or not unit.isprintable():
        raise ConfigError(f"objective {name}: unit must be a non-empty text on one line, e.g. 'ms'")
    if not callable(value):
        raise ConfigError(f"objective {name}: value must be a function of a Measurement")
    if isinstance(measured_from, str) or not isinstance(measured_from, (tuple, list)):
        raise ConfigError(f"objective {name}: measured_from must be a tuple of built-in objectives "
                          f"({', '.join(_BUILTIN)}), e.g. ('latency',), not {str(measured_from)[:40]!r}")
    sources = tuple(measured_from)
    if not sources or any(n not in _BUILTIN for n in sources):
        raise ConfigError(f"objective {name}: measured_from must name built-in objectives "
                          f"({', '.join(_BUILTIN)}), not {sources!r}")
    _SINGLE[name] = (direction, unit)
    _REGISTERED[name] = Registered(value, sources)


def unregister_objective(name: str) -> None:
    """Forget an objective added by :func:`register_objective` (a built-in one cannot be removed).

    Raises:
        ConfigError: a built-in objective. UnknownNameError: no such registered objective.
    """
    if not isinstance(name, str):
        raise UnknownNameError(f"no registered objective {str(name)[:40]!r}")
    if name in _BUILTIN:
        raise ConfigError(f"objective {name!r} is built in; it cannot be unregistered")
    if name not in _REGISTERED:
        raise UnknownNameError(f"no registered objective {name!r}")
    del _REGISTERED[name], _SINGLE[name]


def objective_names() -> tuple[str, ...]:
    """Every objective name accepted now: the built-in ones (:data:`OBJECTIVE_NAMES`) and the registered ones."""
    return (*OBJECTIVE_NAMES, *_REGISTERED)


def registered_objectives() -> tuple[str, ...]:
    """The objectives added by :func:`register_objective`."""
    return tuple(_REGISTERED)


def _value_of(m: Measurement, name: str) -> float | None:
    """Objective ``name``'s value of a measurement: a built-in one from the measurement, a registered
    one from its function (None for a failed measurement, or a value that is not a finite number)."""
    return m.objective(name)


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
        vals = tuple(_value_of(m, n) for n in self.names)
        return None if any(v is None for v in vals) else vals  # type: ignore[return-value]

    def value(self, m: Measurement) -> float | None:
        """Primary objective value (None when failed)."""
        return _value_of(m, self.names[0])

    @property
    def measured_from(self) -> tuple[str, ...]:
        """The built-in objectives a backend must measure for this one (a registered objective's
        ``measured_from``; a built-in one is its own)."""
        out: list[str] = []
        for n in self.names:
            registered = _REGISTERED.get(n)
            out.extend(n2 for n2 in (registered.measured_from if registered else (n,)) if n2 not in out)
        return tuple(out)

    @property
    def registered(self) -> bool:
        """True when a component was added by :func:`register_objective`."""
        return any(n in _REGISTERED for n in self.names)

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
        raise UnknownNameError(f"unknown objective {name!r}; objectives are {', '.join(objective_names())}")
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
        if not st.constraints and not get_objective(st.objective).registered:
            return store.best(study_name)
        objective = get_objective(st.objective, st.constraints)
    if objective.constraints or objective.registered:  # ranked here: the store ranks built-in columns only
        return best_record(store.measurements(study_name, status="ok"), objective.loss)
    return store.best(study_name, objective.names[0], objective.direction)
