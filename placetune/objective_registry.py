"""The objectives added by :func:`~placetune.tuning.objectives.register_objective`, kept where a
:class:`~placetune.measurement.Measurement` can read them without importing the tuning package
(which imports the measurement): ``Measurement.objective(name)`` computes a registered one and
refuses a name that is neither built in nor registered."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["BUILTIN_OBJECTIVES", "Registered", "REGISTERED", "registered_value"]

#: The single objectives a measurement holds itself (``gpu_time``: GPU busy ms per frame).
BUILTIN_OBJECTIVES = ("latency", "throughput", "energy", "gpu_time")


@dataclass(frozen=True)
class Registered:
    """An objective added by ``register_objective``: its value and what it is computed from."""

    value: Callable[[Any], float | None]  # a function of a successful Measurement
    measured_from: tuple[str, ...]


#: Objectives added by ``register_objective``, by name.
REGISTERED: dict[str, Registered] = {}


def registered_value(registered: Registered, m: Any) -> float | None:
    """A registered objective's value of a successful measurement: None when its function gives no
    finite number (a bool, None, NaN or infinity is no value)."""
    v = registered.value(m)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)
