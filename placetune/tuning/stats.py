"""Counters of one evaluator: requests, cache hits, measurements, failures and where the time went."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["EvaluatorStats"]


@dataclass
class EvaluatorStats:
    """Counters of one evaluator.

    Attributes:
        requested: evaluate() calls.
        cache_hits: answered from the store or memory without measuring.
        measured: backend measurements run.
        failures: measurements (new or cached) that were not ok.
        measure_seconds: wall time spent in the backend.
        realise_seconds: wall time spent realising placements (:meth:`Evaluator.realise`).
        store_seconds: wall time spent in the store: look-ups, and recording measurements and requests.
    """

    requested: int = 0
    cache_hits: int = 0
    measured: int = 0
    failures: int = 0
    measure_seconds: float = 0.0
    realise_seconds: float = 0.0
    store_seconds: float = 0.0
    by_status: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain dict."""
        return {
            "requested": self.requested,
            "cache_hits": self.cache_hits,
            "measured": self.measured,
            "failures": self.failures,
            "measure_seconds": round(self.measure_seconds, 3),
            "realise_seconds": round(self.realise_seconds, 3),
            "store_seconds": round(self.store_seconds, 3),
            "by_status": dict(self.by_status),
        }
