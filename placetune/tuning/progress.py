"""Progress of a tuning run: a live bar on a terminal, one structured line per evaluation otherwise."""

from __future__ import annotations

import math
import os
import threading
import time
from typing import IO, TYPE_CHECKING, Any

from placetune.measurement import Measurement
from placetune.tuning.objectives import Objective
from placetune.placement.placement import Placement
from placetune.wording import versus, wrap
from placetune.tuning.final_pick import can_export

if TYPE_CHECKING:
    from placetune.tuning.convergence import ConvergenceWatch

__all__ = ["Progress", "placement_field", "terminal_columns"]


def terminal_columns(out: Any) -> int:
    """The width of the terminal ``out`` writes to: ``$COLUMNS``, else the terminal's (80 when it does not
    say); a stream with no file behind it is no terminal: no limit (a very large width)."""
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return 1 << 20
    env = os.environ.get("COLUMNS", "")
    if env.isascii() and env.isdigit() and int(env) > 0:  # (isdigit() passes '²', which int() cannot read)
        return int(env)
    try:
        return os.get_terminal_size(fd).columns or 80
    except (OSError, ValueError):
        return 80

#: What the live line keeps beside its bar on any terminal: the trial count, the best with its words
#: against all-GPU (``  best 3399 fps (1.45x faster than all-GPU)``) and the failures: 68 characters.
_BAR_ROOM = 68


class Progress:
    """Evaluation callback that reports progress.

    On a terminal it redraws one line: trials done/total, best value and its gain over
    all-GPU, cache hits and failures, and where the study converged (or when its best last
    moved, see :meth:`watch_convergence`). Elsewhere (nohup, systemd, CI) it prints one
    ``key=value`` line per evaluation, easy to grep and parse.

    Args:
        out: the stream.
        tty: True for the live bar.
        total: the study's trial budget.
        done: trials already done before this run.
        objective: the study's objective.
        baseline: the all-GPU measurement (for the gain), if known.
        stops_early: why the run may end before its budget (``"it stops once settled"``), empty when
            it builds to the end: the device time left to the budget's end is then said on the bar as
            an upper bound, not as the time the run has left.
        columns: the width the live line must fit (default: the terminal's, 80 when it does not say).

    The device time to the end of the budget (``device_eta_s=`` on the lines, hours on the bar) is
    the mean device time per measured evaluation so far times the trials left in the budget.

    In a log, an agent's step between evaluations (:meth:`working`) that runs past :attr:`note_after_s`
    seconds gets a line of its own (``note: still predicting the next placement (5 s since the last trial
    line; ...)``), and another every :attr:`note_every_s` seconds: a log silent for the guided agent's
    seconds of prediction read as a hung run. The trial lines are unchanged.
    """

    #: seconds an agent's step runs in a log before a line says it still works (a few: never for a quick one)
    note_after_s = 5.0
    #: seconds between the lines of a step that goes on
    note_every_s = 60.0

    def __init__(self, out: IO[str], *, tty: bool, total: int, done: int, objective: Objective,
                 baseline: Measurement | None, stops_early: str = "", columns: int | None = None) -> None:
        self.out = out
        self.columns = columns  # the live line's width (default: the terminal's)
        self.tty = tty
        self.total = total
        self.done = done
        self.objective = objective
        self.stops_early = stops_early
        self.base = objective.value(baseline) if baseline is not None else None
        self.best: float | None = None
        self._best_loss = float("inf")
        # [loss, value, realised map, exportable] of each ok evaluation: re-ranked on a re-measure
        self._ok: list[list[Any]] = []
        self._best_exportable = True  # False: the best so far has no read placement (can_export)
        self.cache_hits = 0
        self.failures = 0
        self.t0 = time.monotonic()
        self._last_draw = 0.0
        self._drawn = 0  # length of the live line last drawn: a shorter one blanks the rest
        self.cv_error: float | None = None
        self.device_s = 0.0  # simulated device time (builds + timing) of this run's measurements
        self.device_n = 0
        self._watch: "ConvergenceWatch | None" = None
        self._working = ""  # what the agent does between evaluations (:meth:`working`), on the bar until the next
        self._lock = threading.Lock()  # a log's note (a timer's thread) and its trial lines, one line at a time
        self._note: threading.Timer | None = None
        self._since = time.monotonic()  # the last trial line (or the run's start): what a note counts from

    def watch_convergence(self, watch: "ConvergenceWatch") -> None:
        """Show ``watch``'s state on the live bar: ``converged at trial 4``, ``best moved at trial 37``."""
        self._watch = watch

    def resume_from(self, best: Measurement | None) -> None:
        """Start "best" from a resumed study's stored best measurement, not from scratch."""
        value = None if best is None else self.objective.value(best)
        if best is None or value is None:
            return
        self._ok.append([self.objective.loss(best), value, best.realized, can_export(best)])
        self._rerank()

    def set_baseline(self, baseline: Measurement) -> None:
        """Set the all-GPU measurement once it is known."""
        self.base = self.objective.value(baseline)

    def working(self, what: str) -> None:
        """Evaluator activity callback: the agent says what it does before its next evaluation
        (``predicting``); the live bar shows it, drawn now with every evaluation so far, until the next one."""
        self._working = what
        if self.tty:
            self._last_draw = time.monotonic()
            self._draw()
        elif what:
            self._arm(self.note_after_s)

    def _arm(self, delay: float) -> None:
        """A log: say in ``delay`` seconds that the agent still does what it said, unless a trial line comes first."""
        with self._lock:
            if self._note is not None:
                self._note.cancel()
            self._note = threading.Timer(max(0.0, delay), self._say_still, args=(self._working,))
            self._note.daemon = True
            self._note.start()

    def _say_still(self, what: str) -> None:
        with self._lock:
            if self._note is None or self._note is not threading.current_thread() or self._working != what:
                return  # a trial line, the run's end or another step came first
            waited = time.monotonic() - self._since
            try:
                print(f"note: still {what} the next placement ({waited:.0f} s since the last trial line; it is built "
                      "and measured next)", file=self.out, flush=True)
            except (OSError, ValueError):  # the log is gone: the run goes on without the line
                return
            self._note = threading.Timer(self.note_every_s, self._say_still, args=(what,))
            self._note.daemon = True
            self._note.start()

    def _quiet(self) -> None:
        """No more note of the step in progress (a trial line came, or the run ends)."""
        with self._lock:
            if self._note is not None:
                self._note.cancel()
                self._note = None

    def update(self, placement: Placement, m: Measurement) -> None:
        """Evaluator callback: one evaluation finished.

        An agent's annotation (``predicted`` value, model ``cv_error``) is shown next to the
        measurement.
        """
        self.done += int(m.extra.get("remeasured") or 1)  # a re-measurement of n builds is n evaluations
        self._working = ""
        if self._note is not None:
            self._quiet()
        note = m.extra.get("annotation") or {}
        if note.get("cv_error") is not None:
            self.cv_error = float(note["cv_error"])
        hit = bool(m.extra.get("cache_hit"))
        self.cache_hits += hit
        dev = m.extra.get("device_time_s")
        if not hit and isinstance(dev, dict) and isinstance(dev.get("total_s"), (int, float)):
            self.device_s += float(dev["total_s"])
            self.device_n += 1
        value = self.objective.value(m)
        if self.base is None and value is not None and all(d == "GPU" for d in placement.as_dict().values()):
            self.base = value  # the all-GPU baseline is usually the run's first evaluation
        if not m.ok:
            self.failures += 1
        elif value is not None and m.extra.get("remeasured"):  # the median over builds replaces a first build
            for entry in self._ok:
                if entry[2] == m.realized:
                    entry[0], entry[1] = self.objective.loss(m), value
            if m.realized and all(d == "GPU" for d in m.realized.values()):
                self.base = value
            self._ok.append([self.objective.loss(m), value, m.realized, can_export(m)])
            self._rerank()
        elif value is not None:
            self._ok.append([self.objective.loss(m), value, m.realized, can_export(m)])
            if self.best is None or self.objective.loss(m) < self._best_loss:
                self.best, self._best_loss = value, self.objective.loss(m)  # constraints: the best feasible
                self._best_exportable = can_export(m)
        if self.tty:
            now = time.monotonic()
            if now - self._last_draw > 0.1 or self.done >= self.total:
                self._last_draw = now
                self._draw()
        else:
            self._line(m, value, hit)

    def _rerank(self) -> None:
        """The best so far from every ok evaluation's latest value."""
        e = min(self._ok, key=lambda e: (e[0], e[1]))
        self._best_loss, self.best, self._best_exportable = e[0], e[1], e[3]

    def _eta(self) -> float:
        """Estimated device time to the end of the budget: the mean per measured evaluation so far
        times the trials left (an upper bound of the run's when it :attr:`stops_early`)."""
        return max(0, self.total - self.done) * self.device_s / max(1, self.device_n)

    def _gain(self) -> str:
        """The best value's gain over all-GPU, ``-`` while either is unknown (never ``nan``)."""
        if self.best is None or not self.base:
            return "-"
        g = self.objective.gain(self.best, self.base)
        return "-" if math.isnan(g) else f"{g:.3f}"

    def _versus(self) -> str:
        """The best value against all-GPU in words: ``1.52x faster than all-GPU``."""
        words = "-" if self.best is None or not self.base else \
            versus(self.objective.gain(self.best, self.base), self.objective.names[0])
        return {"-": "all-GPU not measured yet", "same": "same as all-GPU"}.get(words, f"{words} than all-GPU")

    def _fmt(self, v: float | None, unit: bool = True) -> str:
        if v is None:
            return "-"
        return f"{v:.4g} {self.objective.units[0]}" if unit else f"{v:.4g}"

    def _draw(self) -> None:
        text = "\r" + self._bar_text(self._columns())
        width_now = len(text)
        self.out.write(text + " " * max(0, self._drawn - width_now))  # no leftover of a longer line ("0.0%%")
        self._drawn = width_now
        self.out.flush()

    def _columns(self) -> int:
        """The width the live line must fit: :attr:`columns` when given, else ``$COLUMNS``, else the
        terminal's (80 when it does not say); a stream with no file behind it is no terminal: no limit."""
        if self.columns:
            return self.columns
        return terminal_columns(self.out)

    def _bar_text(self, columns: int) -> str:
        """The live line, at most ``columns - 1`` characters: a longer one wraps, and each redraw (``\\r``
        goes back to the start of the last row only) would leave a wrapped copy on the screen. The parts
        that do not fit are left out, least useful first (the model's error, the elapsed time, the cache
        hits, the device time); the bar narrows on a terminal under 93 columns (down to 8 characters) so that
        80 keep the failures, and the trial count and the best are cut only on a very narrow one."""
        parts = [  # (priority: lower is kept first, text) in the order they are shown
            (4, f"  cache hits {self.cache_hits}"),
            (0, f"  failures {self.failures}"),
            (5, f"  {time.monotonic() - self.t0:.0f}s"),
            (3, f"  device {self.device_s / 3600:.1f} h, {self._eta_words()}" if self.device_n else ""),
            (6, f"  model cv error {100 * self.cv_error:.1f}%" if self.cv_error is not None else ""),
            (1, self._convergence()),
            (1, f"  {self._working}" if self._working else ""),
        ]
        rest = f" {self.done}/{self.total}  best {self._fmt(self.best)} ({self._versus()})"
        width = max(8, min(24, columns - 1 - _BAR_ROOM))  # set by the terminal alone: it never jumps
        frac = min(self.done / self.total, 1.0) if self.total else 1.0
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        head = f"[{bar}]{rest}"
        room = max(columns - 1, 10) - len(head)
        keep: set[int] = set()
        for i in sorted(range(len(parts)), key=lambda i: parts[i][0]):
            if parts[i][1] and len(parts[i][1]) <= room:
                keep.add(i)
                room -= len(parts[i][1])
        text = head + "".join(p for i, (_, p) in enumerate(parts) if i in keep)
        return text[:max(columns - 1, 10)]

    def _eta_words(self) -> str:
        """``~7.3 h more to the budget's end``, or ``at most ~7.3 h more (to the budget's end; it stops
        once settled)`` for a run that may end before its budget."""
        hours = f"~{self._eta() / 3600:.1f} h more"
        return f"at most {hours} (to the budget's end; {self.stops_early})" if self.stops_early else \
            f"{hours} to the budget's end"

    def _convergence(self) -> str:
        """``  converged at trial 4`` for the bar (nothing without a watch or a trial)."""
        words = self._watch.result().short() if self._watch is not None else ""
        return f"  {words}" if words else ""

    def _line(self, m: Measurement, value: float | None, hit: bool) -> None:
        fields = [
            f"trial={self.done}/{self.total}",
            f"status={m.status}",
            f"{self.objective.metric_names[0]}={self._fmt(value, unit=False)}",
            f"best_{self.objective.metric_names[0]}={self._fmt(self.best, unit=False)}",
            f"gain={self._gain()}",
            f"cache_hit={'true' if hit else 'false'}",
            f"failures={self.failures}",
            f"elapsed_s={time.monotonic() - self.t0:.1f}",
        ]
        note = m.extra.get("annotation") or {}
        if note.get("predicted") is not None:
            fields.append(f"predicted_{self.objective.metric_names[0]}={self._fmt(note['predicted'], unit=False)}")
        if note.get("cv_error") is not None:
            fields.append(f"cv_error_pct={100 * note['cv_error']:.1f}")
        if m.extra.get("remeasured"):  # a top candidate built again: the value is the median over its builds
            fields.append(f"remeasured_builds={len(m.extra.get('builds') or ())}")
        if self.device_n:
            fields.append(f"device_s={self.device_s:.0f}")
            fields.append(f"device_eta_s={self._eta():.0f}")
        if m.simulated:
            fields.append("simulated=true")
        if (where := placement_field(m)) is not None:
            fields.append(where)
        if self.best is not None and not self._best_exportable:  # as placetune studies marks it
            fields.append("best_exportable=false")
        with self._lock:
            print(" ".join(fields), file=self.out, flush=True)
            self._since = time.monotonic()

    def say_above(self, text: str) -> None:
        """A message that must stay on the screen (``converged at trial 4: ...``): on a terminal the
        live line is blanked, the message printed (wrapped at the terminal's width) and the line drawn
        again below it; elsewhere one line of its own."""
        if not self.tty:
            print(text, file=self.out, flush=True)
            return
        self.out.write("\r" + " " * self._drawn)  # one write, one leading \r: the CLI's output escapes any other
        self.out.write("\r" + wrap(text, self._columns()) + "\n")
        self._drawn = 0
        self._draw()

    def close(self) -> None:
        """End the live line (what the agent was doing is over: its word goes); a log's note of it stops."""
        self._working = ""
        self._quiet()
        if self.tty:
            self._draw()
            self.out.write("\n")
            self.out.flush()


def placement_field(m: Measurement) -> str | None:
    """The trial line's word on a realised placement that was not read: ``placement_known=false``, or
    ``placement_known=partly:3/4_segments`` for a pipeline some of whose segments were read (their
    layers known, the others' marked unknown); None when it is known (the line says nothing)."""
    if not m.ok or m.placement_known:
        return None
    read = m.segments_read
    return "placement_known=false" if read is None else f"placement_known=partly:{read[0]}/{read[1]}_segments"
