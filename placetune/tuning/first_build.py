"""The first builds of a real run check the stack before the run commits hours to it.

A night on a Jetson is hours of builds; a stack that cannot give the study what it needs should
stop at its first build, with one clear line, not export nothing in the morning. Before the first
build and on the first builds of a run on a real backend (tensorrt, trtexec):

* **clocks**: the board's nvpmodel mode is the study's ``power_mode``, and ``jetson_clocks`` has
  not been found off (both read by the backend's fingerprint, :mod:`placetune.backends.tensorrt.env`,
  and recorded with every measurement through the study's fingerprint, which a resumed study must
  match: another power mode is refused naming both);
* **timing**: the first build of an all-GPU placement (the study's first baseline) is measured,
  with finite positive latency;
* **objective**: that measurement has the figures of the study's objective and constraints
  (e.g. an energy figure: power rails found and read);
* **placement**: the realised placement of the placements with layers asked on a DLA is read
  from TensorRT (:func:`placement_known`), not placetune's own prediction. One engine whose
  placement cannot be read (an inspector output or a build log of a form placetune does not read
  in full) is recorded ``placement_known=False`` with its timing, said on the terminal, and the run
  goes on; only :data:`PLACEMENT_STOP_AFTER` such DLA placements in a row before any has been
  read stop it: the stack, not one engine, cannot say what ran where. Once one DLA placement was
  read, a later unknown one is only marked. A pipeline placement one of whose DLA segments was read
  and another not (:mod:`placetune.backends.tensorrt.segment_known`) counts as read, and is said
  loudly (``PLACEMENT PARTLY UNKNOWN``) with its unread layers.

A failed check raises :class:`~placetune.errors.BackendError` (exit status 8); each message
starts with ``first-build check <name> failed:`` so the failure modes are told apart. A check of a
build (timing, objective, placement) fails once that build's measurement is stored: it raises a
:class:`~placetune.errors.StoppedAfterMeasurement`, so the trial that asked for it is told it before
the run ends (a fleet worker's trial finishes as one that the other workers count, not left failed),
as the out-of-memory stop does (:mod:`placetune.tuning.oom_stop`).
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from placetune.errors import BackendError, StoppedAfterMeasurement
from placetune.hardware.power_modes import mode_names, modes_of, same_power_mode

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.placement.placement import Placement
    from placetune.tuning.evaluator import Evaluator

__all__ = ["CHECKS", "FirstBuildCheck", "placement_known", "clocks_problem", "measurement_problem",
           "PLACEMENT_STOP_AFTER"]

log = logging.getLogger(__name__)

#: DLA placements in a row whose realised placement is unknown, before any was read, that stop the run
#: (as :data:`placetune.backends.clocks.STOP_AFTER` measurements under other clocks do).
PLACEMENT_STOP_AFTER = 3

#: The checks, in the order a run meets them (``first-build check <name> failed: ...``).
CHECKS = ("clocks", "timing", "objective", "placement")
_NO_SECTIONS = "placement sections"  # the backends' note when the build log had no DLA/GPU sections


def placement_known(m: "Measurement") -> bool:
    """Whether the realised placement of ``m`` was read from TensorRT rather than predicted.

    The single hook for the build-log readers' own flag: ``extra["placement_known"]`` when a
    backend records it (``Measurement.placement_known`` reads the same key where the readers add
    it); otherwise known unless the backend noted that the build log had no DLA/GPU placement
    sections (its realised placement is then placetune's prediction)."""
    extra = m.extra or {}
    flag = extra.get("placement_known")
    if isinstance(flag, bool):
        return flag
    return not any(_NO_SECTIONS in str(note) for note in extra.get("notes") or [])


def _dla_segment_read(m: "Measurement") -> bool:
    """Whether some DLA segment of a pipeline whose placement is partly known was read (a GPU
    segment is known by construction: it says nothing of the build-log readers on this stack)."""
    if m.segments_read is None:
        return False
    return any(isinstance(s, dict) and s.get("known") and s.get("device") != "GPU"
               for s in (m.extra or {}).get("segment_placements") or [])


def clocks_problem(fingerprint: dict[str, Any], power_mode: str, platform: str | None = None) -> str | None:
    """Why the board's clocks are not what the study assumes (None: they are, or cannot be read).

    The board's nvpmodel mode and the study's ``power_mode`` are compared as modes of the
    ``platform``'s nvpmodel file (:func:`~placetune.hardware.power_modes.same_power_mode`: the
    board prints ``MODE_30W`` for the study's ``30W``, ``15W`` on Orin Nano for ``MAXN``), or of
    its module's JetPack 6.2 ``_super`` file for a mode the profile's own file lacks (an Orin NX
    board's ``MAXN_SUPER``: a study of ``MAXN_SUPER`` passes, one of ``MAXN`` does not)."""
    board = fingerprint.get("power_mode")
    plat = str(platform or fingerprint.get("platform") or "")
    if board is not None and not same_power_mode(plat, str(board), str(power_mode)):
        table = modes_of(plat, str(board))
        if table is not None and table.mode(str(board)) is None:  # a mode neither of the module's files has
            return (f"the board runs nvpmodel mode {board}, which the {plat} profile does not have (its modes: "
                    f"{mode_names(plat)}), so no study of this platform can assume it: switch the board to "
                    f"the study's power_mode {power_mode} with `sudo nvpmodel -m <id>`")
        return (f"the board runs nvpmodel mode {board} but the study assumes power_mode {power_mode}: set it "
                f"with `sudo nvpmodel -m <id>` (nvpmodel -q names it), or set power_mode = \"{board}\" in "
                "[settings] for a study of that mode")
    if fingerprint.get("clocks_locked") is False:
        return ("jetson_clocks is off (`jetson_clocks --show`: the CPU/GPU clocks are not fixed), so timings "
                "drift with DVFS: run `sudo jetson_clocks` first")
    return None


def measurement_problem(m: "Measurement", names: tuple[str, ...]) -> tuple[str, str] | None:
    """``(check, why)`` when ``m``, a study's first all-GPU build, shows a broken stack: not measured,
    no finite positive latency, or no figure for one of ``names`` (objective and constraint metrics)."""
    if not m.ok:
        return "timing", f"the first all-GPU build was not measured ({m.status}: {m.reason})"
    median = m.latency_ms.get("median")
    if not isinstance(median, (int, float)) or not math.isfinite(median) or median <= 0:
        return "timing", f"the first all-GPU build has no finite positive latency (median {median!r})"
    for name in names:
        if m.objective(name) is None:
            why = ((m.extra or {}).get("power") or {}).get("reason") if name == "energy" else None
            return "objective", (f"the first all-GPU build has no {name} figure" + (f" ({why})" if why else "")
                                 + f": the study's {name} cannot be measured on this board")
    return None


class FirstBuildCheck:
    """The checks of one run on a real backend: :meth:`before` the first build, then as an
    evaluator callback until a GPU-only and a DLA placement have each been checked once."""

    def __init__(self, ev: "Evaluator") -> None:
        self.ev = ev
        names = list(ev.objective.names) + [c.metric for c in ev.objective.constraints if not c.network]
        self.names = tuple(dict.fromkeys(names))
        self.gpu_checked = False
        self.dla_checked = False
        self.unknown_in_a_row = 0

    def fail(self, check: str, why: str, placement: "Placement | None" = None, m: "Measurement | None" = None) -> None:
        """Stop the run: one line naming the check (exit status 8). After the stored measurement ``m`` of
        ``placement``, the stop carries it (:class:`~placetune.errors.StoppedAfterMeasurement`)."""
        line = f"first-build check {check} failed: {why}; the run stopped before spending its budget"
        if m is not None:
            raise StoppedAfterMeasurement(line, placement, m)
        raise BackendError(line)

    def before(self) -> None:
        """The clocks check, from the fingerprint the backend read when the study opened."""
        fp = self.ev.fingerprint if isinstance(self.ev.fingerprint, dict) else {}
        why = clocks_problem(fp, self.ev.settings.power_mode, self.ev.platform.name)
        if why:
            self.fail("clocks", why)

    def attach(self) -> None:
        """Check the clocks now and the first builds as they come (an evaluator callback)."""
        self.before()
        self.ev.add_callback(self)

    def __call__(self, placement: "Placement", m: "Measurement") -> None:
        asked = set(placement.as_dict().values())
        if not self.gpu_checked and asked == {"GPU"}:
            self.gpu_checked = True
            problem = measurement_problem(m, self.names)
            if problem:
                self.fail(*problem, placement, m)
        elif not self.dla_checked and asked - {"GPU"} and m.ok:
            if placement_known(m):
                self.dla_checked = True
                return
            if _dla_segment_read(m):  # the stack read a DLA engine's placement: said loudly, not counted
                self.dla_checked = True
                log.warning("PLACEMENT PARTLY UNKNOWN: of this DLA pipeline placement, %s (the record's "
                            "placement_unknown says why); it is recorded with its timing and the layers read, the "
                            "unread ones marked unknown, and the run goes on", m.unread_line())
                return
            self.unknown_in_a_row += 1
            why = (m.extra or {}).get("placement_unknown") or ("its build log has no DLA/GPU placement lines "
                                                               "('Layers Running on DLA/GPU')")
            if self.unknown_in_a_row >= PLACEMENT_STOP_AFTER:
                self.fail("placement", f"where TensorRT put the layers is unknown for the first {self.unknown_in_a_row} "
                          f"DLA placements in a row (the last: {why}), so no measurement could say what ran where: "
                          "run `placetune selftest` and send its report", placement, m)
            if self.unknown_in_a_row == 1:
                log.warning("PLACEMENT UNKNOWN: where TensorRT put the layers of this DLA placement could not be read "
                            "(%s); it is recorded with placement_known=False and its timing, and the run goes on; it "
                            "stops if the first %d DLA placements are all unknown", why, PLACEMENT_STOP_AFTER)
