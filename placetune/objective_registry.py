"""The objectives added by :func:`~placetune.tuning.objectives.register_objective`, kept where a
:class:`~placetune.measurement.Measurement` can read them without importing the tuning package
(which imports the measurement): ``Measurement.objective(name)`` computes a registered one and
refuses a name that is neither built in nor registered."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from placetune.errors import ConfigError

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


def registered_value(registered: Registered, m: Any, name: str = "") -> float | None:
    """A registered objective's value of a successful measurement: None when its function gives no
    finite number (a bool, None, NaN or infinity is no value; a NumPy number is one).

    Raises:
        ConfigError: the objective's function raised (named, with what it raised).
    """
    try:
        v = registered.value(m)
    except Exception as exc:  # noqa: BLE001 - a user's function: its failure named, not a traceback
        raise ConfigError(f"objective {name}: its value function raised {type(exc).__name__}: "
                          f"{str(exc)[:200]}") from exc
    if v is None or isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        return None
    try:
        v = float(v)
    except (OverflowError, ValueError, TypeError):  # an integer too large for a float
        return None
    return v if math.isfinite(v) else None
