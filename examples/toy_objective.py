"""An objective in one file: the 99th-percentile latency, searched like any built-in objective.

A registered objective is a name, a direction, a unit and the value of a successful measurement,
computed from what the backend measures (here its latency samples, so every backend that measures
latency can serve it)::

    import placetune as pt
    from toy_objective import register
    register()
    ev = pt.Evaluator("seed-block", "orin-agx", objective="p99_latency")
"""

from __future__ import annotations

import placetune as pt
from placetune.measurement import Measurement


def p99_latency(m: Measurement) -> float | None:
    """The measurement's 99th-percentile latency in ms (None when it has none)."""
    return m.latency_ms.get("p99")


def register() -> None:
    """Make ``p99_latency`` known (again: replacing an earlier registration of it)."""
    pt.register_objective("p99_latency", direction="minimize", unit="ms", value=p99_latency,
                          measured_from=("latency",), replace=True)


if __name__ == "__main__":
    register()
    ev = pt.Evaluator("seed-block", "orin-agx", mode="engine", objective="p99_latency")
    gpu = ev.baseline()
    print(f"all-GPU p99 latency {ev.value(gpu):.3f} ms (simulated)")
