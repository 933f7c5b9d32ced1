"""Objectives: what a search optimises, its direction and unit."""

from __future__ import annotations

from dataclasses import dataclass

from placetune.errors import UnknownNameError
from placetune.measurement import Measurement

__all__ = ["Objective", "get_objective", "OBJECTIVE_NAMES"]

_SINGLE = {
    # name: (direction, unit)
    "latency": ("minimize", "ms"),
    "throughput": ("maximize", "fps"),
    "energy": ("minimize", "mJ"),
}
#: Accepted objective names (``a+b`` pairs are multi-objective).
OBJECTIVE_NAMES = (*_SINGLE, "latency+energy", "throughput+energy")


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

    @property
    def name(self) -> str:
        """``latency``, ``throughput``, ``energy`` or ``a+b``."""
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


def get_objective(name: str | Objective) -> Objective:
    """Parse an objective name.

    Raises:
        UnknownNameError: not one of :data:`OBJECTIVE_NAMES`.
    """
    if isinstance(name, Objective):
        return name
    parts = tuple(p.strip().lower() for p in str(name).split("+"))
    if not parts or any(p not in _SINGLE for p in parts) or len(set(parts)) != len(parts) or len(parts) > 2:
        raise UnknownNameError(f"unknown objective {name!r}; objectives are {', '.join(OBJECTIVE_NAMES)}")
    return Objective(parts)
