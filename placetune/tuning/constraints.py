"""Constraints on a study's measurements: ``latency<=2.0``, ``throughput>=500``, ``energy<=40``.

A constraint bounds one metric (``latency`` ms, ``throughput`` fps, ``energy`` mJ, ``gpu_time``
ms of GPU busy time per frame). A measurement that violates one is *feasible but penalised*,
never a failure: searches rank every measurement that satisfies all constraints before any
that does not, and the infeasible ones by how far they miss (so that a search can walk
towards the feasible region). Optuna's convention is used for the violation values
(:meth:`Constraint.violation`: ``<= 0`` satisfied, ``> 0`` violated by that much), so the
same numbers go to ``constraints_func`` of Optuna's samplers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Callable
import difflib

from placetune.errors import ConfigError, UnknownNameError
from placetune.measurement import Measurement

__all__ = ["Constraint", "parse_constraint", "parse_constraints", "check_networks", "CONSTRAINT_METRICS",
           "best_record"]

#: metric -> unit of its bound.
CONSTRAINT_METRICS = {"latency": "ms", "throughput": "fps", "energy": "mJ", "gpu_time": "ms"}

_RE = re.compile(r"^\s*([a-z_]+)(?:\[([A-Za-z0-9_.+-]+)\])?\s*(<=|>=)\s*([-+0-9.eE]+)\s*$")


@dataclass(frozen=True)
class Constraint:
    """A bound on one metric of a measurement.

    Example:
        >>> c = parse_constraint("latency<=2.0")
        >>> c.text, c.unit
        ('latency<=2', 'ms')
    """

    metric: str
    op: str  # "<=" or ">="
    bound: float
    network: str | None = None  # concurrent studies: ``latency[resnet50]<=5`` bounds one network's latency

    @property
    def text(self) -> str:
        """``latency<=2`` or ``latency[resnet50]<=5``: how it is written (and parsed back)."""
        where = f"[{self.network}]" if self.network else ""
        return f"{self.metric}{where}{self.op}{self.bound:g}"

    @property
    def unit(self) -> str:
        """Unit of the bound."""
        return CONSTRAINT_METRICS[self.metric]

    def value(self, m: Measurement) -> float | None:
        """The measured value of the metric (None when the measurement failed or lacks it)."""
        if self.network:
            v = (m.extra or {}).get("network_latency_ms", {}).get(self.network) if m.ok else None
            return float(v) if v is not None else None
        return m.objective(self.metric)

    def violation(self, m: Measurement) -> float:
        """Optuna's constraint value: ``<= 0`` when the bound holds, else by how much it is missed
        (in the metric's unit); ``inf`` when the value is missing."""
        v = self.value(m)
        if v is None or not math.isfinite(v):
            return math.inf
        return v - self.bound if self.op == "<=" else self.bound - v

    def holds(self, m: Measurement) -> bool:
        """True when the measurement satisfies the bound."""
        return self.violation(m) <= 0

    def as_dict(self, m: Measurement | None = None) -> dict[str, object]:
        """JSON-ready: the constraint, and with a measurement its value and whether it holds."""
        d: dict[str, object] = {"constraint": self.text, "metric": self.metric, "op": self.op,
                                "bound": self.bound, "unit": self.unit}
        if m is not None:
            d["value"] = self.value(m)
            d["holds"] = self.holds(m)
        return d


def parse_constraint(text: str | Constraint) -> Constraint:
    """Parse ``metric<=bound`` or ``metric>=bound``.

    Raises:
        ConfigError: not of that form, an unknown metric or a bound that is not a finite number greater than 0.
    """
    if isinstance(text, Constraint):
        return text
    allowed = ", ".join(CONSTRAINT_METRICS)
    mt = _RE.match(str(text)) if isinstance(text, str) else None
    if mt is None:
        raise ConfigError(f"constraint {str(text)[:80]!r}: write it as METRIC<=BOUND or METRIC>=BOUND "
                          f"(e.g. latency<=2.0, or latency[NETWORK]<=5 in a concurrent study); metrics are {allowed}")
    metric, network, op, bound_s = mt.groups()
    metric = metric.lower()
    if metric not in CONSTRAINT_METRICS:
        raise ConfigError(f"constraint {text!r}: unknown metric {metric!r}; metrics are {allowed}")
    if network and metric != "latency":
        raise ConfigError(f"constraint {text!r}: only latency is bounded per network (latency[{network}]<=...)")
    try:
        bound = float(bound_s)
    except ValueError:
        bound = math.nan
    if not math.isfinite(bound):
        raise ConfigError(f"constraint {text!r}: the bound must be a finite number")
    # latency, throughput and energy are positive, gpu_time is 0 or more (a plan with nothing on the GPU):
    # a bound the metric can never pass, or one it always does, is a sign typed by mistake
    least = 0.0 if metric == "gpu_time" else math.ulp(0.0)
    if bound < least or (op == ">=" and bound <= least):
        lowest = "0 or more" if metric == "gpu_time" else "positive"
        need = "0 or more" if metric == "gpu_time" and op == "<=" else "greater than 0"
        raise ConfigError(f"constraint {text!r}: the bound must be {need} ({metric} in "
                          f"{CONSTRAINT_METRICS[metric]} is {lowest}, so {op} {bound_s.strip()} "
                          f"{'never' if op == '<=' else 'always'} holds)")
    return Constraint(metric, op, bound, network or None)


def parse_constraints(texts: Iterable[str | Constraint] | str | None) -> tuple[Constraint, ...]:
    """Parse several constraints (a single string is one constraint); duplicates are dropped.

    Raises:
        ConfigError: one does not parse (:func:`parse_constraint`), or a lower bound of a metric lies above
            an upper bound of the same metric (``latency>=2`` with ``latency<=1``: no measurement holds both).
    """
    if texts is None:
        return ()
    if isinstance(texts, (str, Constraint)):
        texts = [texts]
    out: list[Constraint] = []
    for t in texts:
        c = parse_constraint(t)
        if c not in out:
            out.append(c)
    for low in out:
        for high in out:
            if (low.op, high.op) == (">=", "<=") and (low.metric, low.network) == (high.metric, high.network) \
                    and low.bound > high.bound:
                raise ConfigError(f"constraints {low.text!r} and {high.text!r} contradict each other: no "
                                  f"{low.metric} is at least {low.bound:g} and at most {high.bound:g} "
                                  f"{low.unit}; drop or correct one")
    return tuple(out)


def check_networks(constraints: Iterable[Constraint], networks: Sequence[str]) -> None:
    """Refuse a per-network constraint on a network the study does not run (``latency[resnet81]<=1``
    on a study of resnet18 and googlenet was accepted, never held, and the run ended without a plan).

    Raises:
        UnknownNameError: naming the network, the close match and the study's networks.
    """
    for c in constraints:
        if c.network is None or c.network in networks:
            continue
        if not networks:
            raise UnknownNameError(f"constraint {c.text}: bounds network {c.network!r}, but the study runs one "
                                   "network; per-network constraints are for concurrent studies (--mode concurrent)")
        close = difflib.get_close_matches(c.network, list(networks), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UnknownNameError(f"constraint {c.text}: the study has no network {c.network!r}{hint}; its networks "
                               f"are {', '.join(networks)}")


def total_violation(constraints: Sequence[Constraint], m: Measurement) -> float:
    """Sum of the positive violations, each relative to its bound (0 when every one holds)."""
    total = 0.0
    for c in constraints:
        v = c.violation(m)
        if v > 0:
            total += v / max(abs(c.bound), 1e-9)
    return total


def best_record(records: Iterable[Any], loss: Callable[[Measurement], float]) -> Any:
    """The stored record (``.measurement``) of smallest finite ``loss`` (ties: the first), or None."""
    best, best_loss = None, math.inf
    for rec in records:
        v = loss(rec.measurement)
        if v < best_loss:
            best, best_loss = rec, v
    return best
