"""What a ``placetune tune`` run says: the line that says what will run, the line when the study has
converged, and at the end the summary table against the baselines, the simulated device time, the
verdict (what the run found and what it rests on) and where the study converged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from placetune.backends.jetson import board_module
from placetune.measurement import Measurement
from placetune.model.merge import network_of
from placetune.placement.placement import DEVICES, Placement
from placetune.tuning.final_pick import exportable, optuna_trial_number
from placetune.tuning.baselines import Baseline
from placetune.tuning.convergence import Convergence, ConvergenceWatch, store_convergence
from placetune.tuning.study_scan import StudyScan
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.final_pick import BestPick
from placetune.tuning.progress import Progress
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.verdict import agent_hint, best_caveats, per_stream_line, placement_line, verdict
from placetune.wording import figure, hours, plural, versus

__all__ = ["TuneOutcome", "TuneReport", "already_settled", "settles", "simulated_on_a_jetson", "stops_early",
           "what_will_run"]


@dataclass
class TuneOutcome:
    """What a tuning run ended with.

    Attributes:
        study: the study name.
        trials_done: evaluation requests recorded for the study (all runs).
        trials: the study's budget.
        best: (placement, measurement) of the best stored result, or None.
        baseline: the all-GPU measurement, if measured.
        interrupted: True when stopped by Ctrl-C, SIGTERM (or a stop request).
        plan_path: path of the exported plan, if one was written.
        signal: the signal that stopped the run (``signal.SIGINT``, ``signal.SIGTERM``), if one did.
        exit_code: the exit status of a stop that was no signal's (8: another process kept the GPU busy,
            :class:`~placetune.errors.GpuContended`), None otherwise.
        convergence: where the study converged and what the trials after it bought.
        pick: which plan ``best`` is and why (:func:`placetune.tuning.final_pick.study_best`).
    """

    study: str
    trials_done: int
    trials: int
    best: tuple[Placement, Measurement] | None
    baseline: Measurement | None
    interrupted: bool = False
    plan_path: str | None = None
    signal: int | None = None
    exit_code: int | None = None
    convergence: Convergence | None = None
    pick: BestPick | None = None


#: The width "what will run:" keeps to: a terminal of 80 columns.
WHAT_WILL_RUN_WIDTH = 79


def _duration(seconds: float) -> str:
    """A ``--timeout`` as one writes it: ``8h``, ``1h30m``, ``90s`` -> ``1m30s`` (not ``28800 s``).

    Example:
        >>> _duration(28800), _duration(5400), _duration(90), _duration(2.5)
        ('8h', '1h30m', '1m30s', '2.5s')
    """
    if seconds != int(seconds):
        return f"{seconds:g}s"
    h, rest = divmod(int(seconds), 3600)
    m, s = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (s, "s")) if v) or "0s"


def what_will_run(cfg: TuneConfig, ev: Evaluator, granularity: str | None = None) -> str:
    """What this run measures and how, printed first by every run: a line starting ``what will run:`` (the
    model and what is optimised) and indented lines under it (where it runs, how the placement runs, how it
    searches), each within :data:`WHAT_WILL_RUN_WIDTH` columns (a long name or constraint list wraps at a
    comma). ``granularity``: the agent's own when the run does not set one (``stages`` for guided)."""
    s = ev.settings
    sim = "SIMULATED Jetson" if ev.backend.simulated else "real Jetson"
    mode = s.mode + (f" ({plural(s.frames_in_flight, 'frame')} in flight)" if s.mode == "pipeline" else "")
    if ev.networks:
        mode = f"concurrent ({len(ev.networks)} networks at once: {', '.join(ev.networks)}; as a {mode})"
    if s.mode == "replicas" and s.replicas:
        mode += " (" + ", ".join(f"{d}:{b}" for d, b in s.replicas.items()) + ")"
    groups = [
        [f"model {ev.model.name}", f"batch {ev.model.batch}", s.precision, f"objective {ev.objective.name}",
         *(f"constraint {c.text} {c.unit}" for c in ev.objective.constraints)],
        [f"platform {ev.platform.name} ({sim})", f"power mode {s.power_mode}", f"backend {ev.backend.name}"],
        [f"{mode} mode", f"TensorRT {s.trt_version} DLA rules"],
        [f"agent {cfg.agent} (granularity {cfg.granularity or granularity or 'the agent default'})",
         f"budget {plural(cfg.trials, 'trial')}" + (f" / {_duration(cfg.timeout)}" if cfg.timeout else "")],
    ]
    lines: list[str] = []
    for i, parts in enumerate(groups):
        line = "what will run: " if i == 0 else "  "
        for j, part in enumerate(parts):
            piece = part if j == 0 else ", " + part
            if j and len(line) + len(piece) > WHAT_WILL_RUN_WIDTH:  # wrap at the comma
                lines.append(line + ",")
                line, piece = "  ", part
            line += piece
        lines.append(line)
    return "\n".join(lines)


def simulated_on_a_jetson(ev: Evaluator) -> str:
    """A note when a run measures on the simulated Jetson on a board whose device tree names a Jetson module
    (``placetune tune --model my.onnx`` launched on the board for the night runs on the default backend, the
    simulator: the summary's SIMULATED was the first sign); empty off a Jetson or on a real backend."""
    if not ev.backend.simulated:
        return ""
    match = board_module()
    if not match.known or match.module is None:
        return ""
    return (f"note: this board is a {match.module.title}, but this run measures on the SIMULATED Jetson (backend "
            f"{ev.backend.name}, the default): --backend tensorrt or --backend trtexec measures on the board "
            f"itself (placetune doctor says which works here)")


def settles(cfg: TuneConfig) -> bool:
    """True when the run's agent stops once nothing it could build can change its answer
    (``stop_when_settled`` with the guided agent, :mod:`search.later`)."""
    return bool(cfg.stop_when_settled) and cfg.agent == "guided"


def stops_early(cfg: TuneConfig) -> str:
    """Why the run may end before its budget, in words for the live bar (empty: it builds to the end,
    unless a timeout or Ctrl-C ends it)."""
    why = [w for w, on in (("once settled", settles(cfg)), ("once converged", bool(cfg.stop_when_converged)),
                           (f"after {cfg.timeout or 0:g} s", bool(cfg.timeout))) if on]
    return f"it stops {' or '.join(why)}" if why else ""


def already_settled(conv: Convergence, left: int) -> str:
    """One line for a resumed study that had settled before this run, which built nothing: why, and
    what builds the ``left`` trials of the budget."""
    return (f"already settled: the study converged at trial {conv.trial} of {conv.trials} and nothing left to build "
            f"could change its answer, so this run built nothing (--no-stop-when-settled, or stop_when_settled = "
            f"false in a study file, builds the budget's other {plural(left, 'trial')})")


@dataclass
class TuneReport:
    """The run's report, filled in as the run goes (its progress display, its baselines, its
    convergence watch) and printed at its end.

    Attributes:
        cfg: the run's configuration.
        ev: the study's evaluator.
        say: prints one line.
        progress: the run's progress display (device time, best so far).
        resumed: True when the study had trials before this run.
        baselines: the study's baselines as measured at the start (all-GPU first): (baseline,
            why it was not measured, its measurement).
        watch: where the study converges.
        scan: the study's stored rows, read once at the start (and at the end, only those written or
            re-measured since).
        verdict_lines: the verdict and where the study converged (the exported plan's notes).
    """

    cfg: TuneConfig
    ev: Evaluator
    say: Callable[[str], None]
    progress: Progress
    resumed: bool
    watch: ConvergenceWatch
    scan: StudyScan
    baselines: list[tuple[Baseline, str | None, Measurement | None]] = field(default_factory=list)
    verdict_lines: list[str] = field(default_factory=list)

    # ---------------------------------------------------------------- during the run
    def announce_convergence(self, placement: Placement, m: Measurement) -> None:
        """Evaluator callback: one line when the study has just converged, and one when a later gain withdrew it."""
        if self.cfg.stop_when_converged:
            then = "; the run stops here (stop_when_converged)"
        elif settles(self.cfg):
            then = "; the run goes on with only what could still change the answer (stop_when_settled)"
        else:
            then = "; the run goes on (--stop-when-converged ends a run here)"
        say = self.progress.say_above if self.progress.tty else self.say
        for line in self.watch.announcements():
            say(line + (then if line.startswith("converged") else ""))

    # ---------------------------------------------------------------- at its end
    def summary(self, outcome: TuneOutcome) -> None:
        """The summary table, the best plan's constraints and placement, then the verdict."""
        ev = self.ev
        obj = ev.objective
        rows: list[tuple[str, Measurement | None]] = [("all-GPU", outcome.baseline)]
        why: dict[str, str] = {}
        for b, why_not, m in self.baselines[1:]:  # all-GPU is the first row
            rows.append((b.label, m))
            if m is None and why_not:
                why[b.label] = why_not
        if outcome.best is not None:
            rows.append(("best found", outcome.best[1]))
        self.say("")
        label = " (SIMULATED)" if ev.backend.simulated else ""
        self.say(f"summary{label}: {plural(outcome.trials_done, 'trial')}, {ev.stats.measured:,} measured in this run, "
                 f"{plural(ev.stats.cache_hits, 'cache hit')}, {plural(ev.stats.failures, 'failure')}")
        device = self.device_time()
        if device:
            self.say(device)
        width = max([26] + [len(label_) + 1 for label_, _ in rows])
        header = f"{'placement':{width}s} {'latency ms':>11s} {'throughput fps':>14s} {'energy mJ':>10s}  vs all-GPU"
        self.say(header)
        self.say("-" * len(header))
        for label_, m in rows:
            if m is None:
                self.say(f"{label_:{width}s} {'not measured':>11s}" + (f": {why[label_]}" if label_ in why else ""))
                continue
            if not m.ok:
                reason = " ".join(str(m.reason or "").split())  # whole: the end names the layer's cause
                reason = reason if len(reason) <= 400 else reason[:399] + "\u2026"
                self.say(f"{label_:{width}s} {m.status}: {reason}")
                continue
            versus_base = "baseline" if m is outcome.baseline else \
                versus(obj.gain_over(m, outcome.baseline), obj.names[0])  # "1.52x faster"
            energy = f"{m.energy_mj:10.3f}" if m.energy_mj is not None else f"{'-':>10s}"
            self.say(
                f"{label_:{width}s} {m.latency_ms.get('median', float('nan')):11.3f} {m.throughput_fps or 0:14,.1f} "
                f"{energy}  {versus_base}"
            )
        longer = self._longer_frame(outcome)
        if longer:
            self.say(longer)
        if ev.settings.mode == "replicas":  # not a frame's latency: a camera's frame waits for its replica's batch
            self.say("latency ms in replicas mode: the slowest replica's time per batch; throughput fps: all "
                     "replicas' frames together")
        if outcome.best is not None:
            self._best(outcome.best[1])
        if outcome.pick is not None:  # a run's own final pick: which plan, and why it is the best
            trial = optuna_trial_number(ev.store, ev.study_name, outcome.pick.record.id) if outcome.pick.recorded else None
            for line in outcome.pick.lines(ev.objective, trial):
                self.say(line)
            chosen = exportable(ev.store, ev.study_name, outcome.pick, ev.objective)  # its placement unread: another
            if chosen is not None and chosen.passed_over is not None:
                st = ev.store.study(ev.study_name)
                for line in chosen.lines(ev.objective, st):
                    self.say(line)
        self._verdict(outcome, rows)

    def _longer_frame(self, outcome: TuneOutcome) -> str | None:
        """Under a throughput table whose best frame takes longer than all-GPU's: the `vs all-GPU` ratio is
        throughput's, and how much longer a frame takes (`1.23x faster` beside a latency twice all-GPU's
        read as a faster frame)."""
        ev, base = self.ev, outcome.baseline
        best = outcome.best[1] if outcome.best is not None else None
        if ev.objective.names[0] != "throughput" or ev.settings.mode == "replicas" or best is None \
                or base is None or not (best.ok and base.ok):
            return None
        b, m = base.latency_ms.get("median"), best.latency_ms.get("median")
        if not b or not m or m <= b * 1.005:
            return None
        k = ev.settings.frames_in_flight or 1
        why = f"{k} frames in flight; " if ev.settings.mode == "pipeline" and k > 1 else ""
        return (f"vs all-GPU compares throughput, the objective: a frame of best found takes {m / b:.2f}x as long "
                f"({why}--objective latency tunes for one frame's time)")

    def _best(self, m: Measurement) -> None:
        """The best plan's constraints, its placement and, for concurrent networks, each network's share."""
        ev = self.ev
        realized = m.realized or {}
        for c in ev.objective.constraints:
            v = c.value(m)
            self.say(f"constraint {c.text} {c.unit}: best={'-' if v is None else f'{v:.4g}'} "
                     f"holds={'yes' if c.holds(m) else 'no'}")
        if ev.objective.name == "gpu_time" and m.objective("gpu_time") is not None:
            self.say(f"gpu_time: best={m.objective('gpu_time'):.4g} ms of GPU busy time per frame")
        if m.placement_known:
            self.say(placement_line(realized, ev.settings))
        for line in best_caveats(m):
            self.say(line)
        if ev.networks:
            lat = m.extra.get("network_latency_ms") or {}
            for net in ev.networks:
                on = [d for layer, d in realized.items() if network_of(layer, [net])]
                where = ", ".join(f"{d} {on.count(d)}" for d in DEVICES if on.count(d))
                self.say(f"  {net}: latency {lat.get(net, float('nan')):.3f} ms in the frame; layers {where}")
        if m.dla_loadables:
            self.say("DLA loadables per core: " + ", ".join(f"{d} {k}" for d, k in m.dla_loadables.items()))

    def device_time(self) -> str | None:
        """The simulated device time a Jetson would spend on this run's builds and timings (and on
        the whole study's, after a resume); None on a real backend, whose time is the run's own."""
        ev, progress = self.ev, self.progress
        if not ev.backend.simulated:
            return None
        this_run = (f"{hours(progress.device_s)} for this run's {plural(progress.device_n, 'measurement')}"
                    if progress.device_n else "none in this run")
        later = self.watch.result().device_clause()  # what the builds after convergence cost
        if not self.resumed:  # everything the study holds was measured in this run
            return f"simulated device time (builds and timing on a Jetson): {this_run}{later}"
        self.scan.refresh(ev.store, ev.study_name)
        total, n = self.scan.device_time
        return (f"simulated device time (builds and timing on a Jetson): {this_run}, "
                f"{hours(total)} for the study's {plural(n, 'measurement')}{later}")

    def _verdict(self, outcome: TuneOutcome, rows: list[tuple[str, Measurement | None]]) -> None:
        """The verdict (what the run found and what that rests on) and where the study converged;
        kept for the exported plan's notes and with the study."""
        ev = self.ev
        best = outcome.best[1] if outcome.best is not None else None
        bases = {label: m for label, m in rows if label != "best found"}
        text = verdict(ev.objective, best, bases, self.cfg.agent, outcome.trials_done,
                       simulated=ev.backend.simulated)
        if best is not None and best.realized and set(best.realized.values()) == {"GPU"} \
                and outcome.baseline is not None:
            terms = self._best_split(outcome.baseline)
            text += f"; {terms}" if terms else ""
        self.verdict_lines = [text]
        streams = per_stream_line(rows, self.cfg.streams) if self.cfg.streams else None
        if streams:
            self.verdict_lines.append(streams)
        conv = outcome.convergence if outcome.convergence is not None and outcome.convergence.trials else None
        unit = ev.objective.units[0] if ev.objective.units else ""
        # the rule watches the store's best: where the run's own pick is another plan, the line says which best
        subject = "the best stored value" if outcome.pick is not None and outcome.pick.store_best is not None \
            else "the best"
        if conv is not None:
            self.verdict_lines.append(conv.sentence(unit, subject))
        store_convergence(ev, conv, unit, text, subject)
        for line in self.verdict_lines:
            self.say(line)
        hint = agent_hint(text, self.cfg.agent, outcome.trials_done)
        if hint:
            self.say(hint)

    def _best_split(self, base: Measurement) -> str | None:
        """The decisive cost terms of the best measured plan that uses a DLA (GPU<->DLA boundary
        time and DLA busy time, from the measurement's extras), against all-GPU."""
        ev = self.ev
        obj = ev.objective
        self.scan.refresh(ev.store, ev.study_name)
        m = self.scan.best_dla(ev.store)
        base_v = obj.value(base)
        v = None if m is None else obj.value(m)
        if m is None or v is None or base_v is None:
            return None
        name = obj.names[0]
        unit = {"latency": "ms", "throughput": "fps", "energy": "mJ"}.get(name, "")
        dla = {d: t for d, t in (m.extra.get("busy_ms") or {}).items() if d != "GPU" and t}
        terms = []
        if m.extra.get("boundary_ms"):
            n = m.extra.get("boundaries")
            terms.append(f"{m.extra['boundary_ms']:.3g} ms for {n or 'its'} GPU<->DLA boundar{'y' if n == 1 else 'ies'}")
        if dla:
            terms.append(" and ".join(f"{t:.3g} ms of {d} work" for d, t in dla.items()))
        return (f"the best plan measured with a DLA ({name} {figure(v)} {unit} against {figure(base_v)} {unit} all-GPU)"
                + (f" pays {' and '.join(terms)}" if terms else ""))
