"""A night that keeps running out of memory stops, with one line that says so and what to change.

Each memory failure (:func:`~placetune.backends.oom.is_memory_failure`: TensorRT's allocation failed, or
the kernel's out-of-memory killer killed the build or timing) is a measured trial like any failure: stored
with its class, counted against the budget, never measured again; the worker or trtexec process starts
anew for the next placement. But when :data:`~placetune.backends.oom.STOP_AFTER` measurements in a row are
memory failures, the board cannot build what the search asks of it and every further placement would fail
the same way, each after minutes of swapping: the run stops (exit status 8, the study resumes).
The stop is a :class:`~placetune.errors.StoppedAfterMeasurement`: the last measurement is stored and
its trial is told it before the run ends (a fleet worker's trial finishes as a failed placement that
the other workers count; it is not left failed). ``placetune measure`` says a memory failure with the
same words (:func:`said`).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from placetune.backends.oom import STOP_AFTER, is_memory_failure
from placetune.errors import StoppedAfterMeasurement

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.placement.placement import Placement

__all__ = ["OutOfMemoryStop", "ADVICE", "said"]

log = logging.getLogger(__name__)

#: What to change before running again.
ADVICE = ("free the board's memory (close other programs: the GPU shares it), give TensorRT a smaller workspace "
          "([backend_options] dla_memory_pools = {workspace = 1073741824} for the tensorrt backend, build_args = "
          "[\"--memPoolSize=workspace:1024M\"] for trtexec), fewer frames in flight (--frames-in-flight) or "
          "replicas, or a smaller batch; `sudo dmesg | grep -i -e oom -e 'killed process'` shows the kernel's kills")


def said(m: "Measurement", in_a_row: int | None = None) -> str:
    """The one line of a memory failure: a run's stop after ``in_a_row`` of them (``m`` the last), or
    without it one measurement's (``placetune measure``); both name what to change."""
    last = f"{m.status}: {str(m.reason)[:300]}"
    if in_a_row is not None:
        return (f"out of memory: {in_a_row} placements in a row ran out of memory (the last: {last}); the run "
                f"stopped rather than fail every placement that follows: {ADVICE}; then run again (the study resumes)")
    return f"out of memory: the placement ran out of memory ({last}): {ADVICE}; then measure again"


class OutOfMemoryStop:
    """An evaluator callback (called once each evaluation is stored) that counts memory failures in a row
    and stops the run at ``stop_after``. A placement served from the study's store is not a new build and
    counts neither way."""

    def __init__(self, stop_after: int = STOP_AFTER) -> None:
        self.stop_after = stop_after
        self.in_a_row = 0
        self.warned = False

    def __call__(self, placement: "Placement", m: "Measurement") -> None:
        if m.extra.get("cache_hit"):
            return
        if not is_memory_failure(m):
            self.in_a_row = 0
            return
        self.in_a_row += 1
        if self.in_a_row >= self.stop_after:
            raise StoppedAfterMeasurement(said(m, self.in_a_row), placement, m)
        if not self.warned:  # once a run: a night of scattered memory failures says it once
            self.warned = True
            log.warning("OUT OF MEMORY: this placement is recorded as failed (failure_class memory) and the run goes on; "
                        "it stops after %d in a row", self.stop_after)
