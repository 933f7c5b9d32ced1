"""What a resumed study's stored rows say, read once: every row decoded and checked in one pass.

A resumed ``placetune tune`` reads its study's rows back before it measures anything (an edited
or damaged row stops it then, before new rows are stored), and its summary needs figures over
all of them: each measurement's loss (where the convergence rule starts from), the simulated
device time, and the best plan that uses a DLA. :class:`StudyScan` gathers them in that one
streamed pass (:meth:`Store.each_measurement <placetune.store.queries.QueriesMixin.each_measurement>`),
keeping one number or two per row, never the decoded rows; at the end of the run
:meth:`StudyScan.refresh` reads only the rows written or re-measured since. Each pass over a study
of a million rows used to decode all of them again, and held them all in memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from placetune.tuning.convergence import device_spent

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.placement.placement import Placement
    from placetune.store.records import MeasurementRecord
    from placetune.store.store import Store
    from placetune.tuning.objectives import Objective

__all__ = ["StudyScan"]


class StudyScan:
    """Per-row figures of a study's stored measurements (see the module docstring).

    Args:
        objective: the study's objective.

    Attributes:
        losses: measurement id -> :meth:`Objective.loss` of its measurement.
        spent: measurement id -> the device seconds its trial spent (0 for a cache hit; see
            :func:`~placetune.tuning.convergence.device_spent`).
        last_id: the largest measurement id read (None: none yet).
    """

    def __init__(self, objective: "Objective") -> None:
        self.objective = objective
        self.losses: dict[int, float] = {}
        self.spent: dict[int, float] = {}
        self._device_s: dict[int, float] = {}  # id -> simulated device time of its builds and timing
        self._dla_value: dict[int, float] = {}  # id -> objective value of an ok plan that uses a DLA
        self._remeasured: set[int] = set()  # ids re-measured in this run (their rows rewritten)
        self.last_id: int | None = None

    def read(self, store: "Store", study_name: str) -> "StudyScan":
        """Decode (and so check) every stored row of the study, once, keeping its figures.

        Raises:
            StoreError: a corrupt row (named), or a database problem.
        """
        for rec in store.each_measurement(study_name, after_id=self.last_id):
            self._add(rec)
        return self

    def seen(self, placement: "Placement", m: "Measurement") -> None:
        """Evaluator callback: remember the rows this run re-measures (rewritten in place)."""
        mid = m.extra.get("_id")
        if m.extra.get("remeasured") and isinstance(mid, int):
            self._remeasured.add(mid)

    def refresh(self, store: "Store", study_name: str) -> None:
        """Read the rows stored since the last read, and those re-measured in this run, again."""
        self.read(store, study_name)
        ids = sorted(self._remeasured)
        for i in range(0, len(ids), 500):
            for rec in store.measurements(study_name, ids=ids[i:i + 500]):
                self._add(rec)
        self._remeasured.clear()

    def _add(self, rec: "MeasurementRecord") -> None:
        m, obj = rec.measurement, self.objective
        self.losses[rec.id] = obj.loss(m)
        self.spent[rec.id] = device_spent(m)
        dev = m.extra.get("device_time_s")
        if isinstance(dev, dict) and isinstance(dev.get("total_s"), (int, float)):
            self._device_s[rec.id] = float(dev["total_s"])
        else:
            self._device_s.pop(rec.id, None)
        v = obj.value(m) if m.ok else None
        if v is not None and m.realized and set(m.realized.values()) != {"GPU"}:
            self._dla_value[rec.id] = v
        else:
            self._dla_value.pop(rec.id, None)
        if self.last_id is None or rec.id > self.last_id:
            self.last_id = rec.id

    # ------------------------------------------------------------------ figures
    @property
    def device_time(self) -> tuple[float, int]:
        """(seconds, measurements): the simulated device time of the rows that record one."""
        return sum(self._device_s.values()), len(self._device_s)

    def best_dla(self, store: "Store") -> "Measurement | None":
        """The best ok measurement whose plan uses a DLA (ties: the earliest), or None."""
        best: tuple[float, int] | None = None
        for mid in sorted(self._dla_value):
            v = self._dla_value[mid]
            if best is None or self.objective.better(v, best[0]):
                best = (v, mid)
        if best is None:
            return None
        recs: Any = store.measurements(ids=[best[1]])
        return recs[0].measurement if recs else None
