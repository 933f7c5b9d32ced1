"""``placetune tune``: run a search agent on a study until its budget is spent, resumably.

The study lives in the store; re-running the same command resumes it (measurements are
cache hits, the budget counts what was already done). The first Ctrl-C (or SIGTERM) lets the
evaluation in flight finish and be stored, then prints the best so far and how to resume;
a second one stops at once.

On a simulated backend the evaluations are written in batches (:mod:`placetune.tuning.trial_log`),
always before the run reports, on Ctrl-C and SIGTERM, and when the agent stops for any other
reason; a real Jetson's are written one by one as they are measured, and so are a fleet
worker's (the other workers wait for its measurements).
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from dataclasses import dataclass
from typing import IO, Any

from placetune.errors import ConfigError, StopRequested
from placetune.tuning.blas import single_blas_thread
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.first_build import FirstBuildCheck
from placetune.tuning.measurable import check_measurable
from placetune.measurement import Measurement
from placetune.placement.placement import DEVICES, Placement
from placetune.tuning.verdict import agent_hint, next_steps, placement_line, verdict
from placetune.tuning.progress import Progress
from placetune.store.url import mask_url
from placetune.tuning.studyfile import TuneConfig
from placetune.wording import figure, hours, plural, versus

__all__ = ["Tuner", "TuneOutcome", "PIPELINE_FRAMES_IN_FLIGHT"]

#: Frames in flight of a pipeline-mode throughput study that does not set ``frames_in_flight``.
PIPELINE_FRAMES_IN_FLIGHT = 4
_SAID = ("re-measured", "failed builds", "drift")  # an agent's notes shown under the summary
log = logging.getLogger(__name__)


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
        convergence: where the study converged and what the trials after it bought
            (:class:`~placetune.tuning.convergence.Convergence`).
    """

    study: str
    trials_done: int
    trials: int
    best: tuple[Placement, Measurement] | None
    baseline: Measurement | None
    interrupted: bool = False
    plan_path: str | None = None
    signal: int | None = None
    convergence: Any = None  # placetune.tuning.convergence.Convergence


class Tuner:
    """Runs one ``placetune tune`` invocation.

    Args:
        cfg: the resolved configuration.
        out: where to print (default stdout).
        tty: force the terminal progress bar on/off (default: ``out.isatty()``).
        resume_hint: the command that resumes this run (printed on Ctrl-C).
    """

    def __init__(self, cfg: TuneConfig, out: IO[str] | None = None, tty: bool | None = None,
                 resume_hint: str = "the same command") -> None:
        self.cfg = cfg
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.resume_hint = mask_url(resume_hint)  # the command line may hold a database password
        self.evaluator: Evaluator | None = None
        self.fleet: Any = None  # placetune.fleet.Fleet on a shared database
        self._writer_lock: Any = None  # placetune.fleet.SingleWriterLock on a SQLite file
        self._interrupts = 0
        self.progress: Progress | None = None  # this run's progress display (device time, best so far)
        self.resumed = False  # True when the study had trials before this run
        self.scan: Any = None  # placetune.tuning.study_scan.StudyScan: the study's stored rows, read once
        self._signal: int | None = None

    # ------------------------------------------------------------------ setup
    def _make_evaluator(self) -> Evaluator:
        from placetune.backends.registry import get_backend
        from placetune.settings import Settings
        from placetune.store.store import Store

        cfg = self.cfg  # an objective the backend never reports would run the whole budget and export nothing:
        check_measurable(cfg.objective, cfg.constraints, cfg.backend, cfg.mode, cfg.backend_options)
        options = dict(cfg.backend_options)
        if cfg.device_profile:
            options["device_profile"] = cfg.device_profile
        backend = get_backend(cfg.backend, **options)
        options = cfg.settings_options()  # (a power mode the platform lacks: refused before the database is touched)
        if backend.capabilities.probe and "trt_version" not in options:
            # apply the DLA rules of the TensorRT the worker really has (11.x needs the full version)
            version = backend.probe().get("trt_version")
            if version:
                options["trt_version"] = version if version.startswith("11") else ".".join(version.split(".")[:2])
        from placetune.hardware.platforms import get_platform

        # defaults of settings the run did not set, and the values older placetune used for them
        legacy: dict[str, Any] = {}
        if "trt_version" not in options:
            options["trt_version"] = get_platform(cfg.platform).default_trt_version
            legacy["trt_version"] = "8.6"
        if cfg.mode in ("pipeline", "concurrent") and "throughput" in cfg.objective and "frames_in_flight" not in options:
            options["frames_in_flight"] = PIPELINE_FRAMES_IN_FLIGHT
            legacy["frames_in_flight"] = 1
        try:
            # concurrent networks are one merged model measured as a pipeline (placetune.model.merge)
            settings = Settings(mode="pipeline" if cfg.mode == "concurrent" else cfg.mode, precision=cfg.precision,
                                **options)
        except TypeError as exc:
            raise ConfigError(f"bad [settings] in {cfg.source}: {exc}") from None
        plat = get_platform(cfg.platform)
        plat.check_power_mode(settings.power_mode)  # before the database is touched
        if cfg.study:  # a bad export path is refused before the database is touched
            self._check_export(cfg.study)
        if cfg.constraints:  # so is a constraint on a network the study does not run
            from placetune.model.merge import network_names
            from placetune.tuning.constraints import check_networks, parse_constraints

            check_networks(parse_constraints(cfg.constraints),
                           network_names(cfg.models) if cfg.mode == "concurrent" else [])
        store = Store(cfg.storage)
        from placetune.model.model import Model

        if cfg.mode == "concurrent":
            from placetune.model.merge import load_networks

            model = load_networks(cfg.models, batch=cfg.batch, shapes=cfg.shapes or None)
        else:
            model = Model.load(cfg.model, cfg.shapes or None, batch=cfg.batch)
        settings = self._resume_settings(store, model, backend, settings, settings.replace(**legacy))
        study = cfg.study or self._default_study(store, model, backend, settings)
        if not cfg.study:  # (a study named in the config was checked above)
            self._check_export(study)  # before anything is measured, not after
        from placetune.tuning.fleet import prepare

        # SQLite: refuse a second writer; shared database: join the fleet (same environment)
        self.fleet, self._writer_lock = prepare(store, cfg, backend, settings)
        ev = Evaluator(
            model, cfg.platform, backend, batch=cfg.batch, objective=cfg.objective, store=store,
            study=study, settings=settings, shapes=cfg.shapes or None, agent=cfg.agent,
            constraints=cfg.constraints or None,
        )
        if self.fleet is not None:
            self.fleet.attach(ev)
        return ev

    def _resume_settings(self, store: Any, model: Any, backend: Any, settings: Any, legacy: Any) -> Any:
        """``settings``, or ``legacy`` (the defaults of an older placetune) when the study this
        run resumes was created with those: new defaults apply to new studies only."""
        if legacy == settings:
            return settings
        cfg = self.cfg
        names = {st.name: st for st in store.studies()}
        if cfg.study:
            st = names.get(cfg.study)
            return legacy if st is not None and st.settings == legacy.to_dict() else settings

        def name(s: Any) -> str:
            return self._default_study(store, model, backend, s, names)

        if name(settings) not in names and name(legacy) in names:
            self._say(f"note: resuming study {name(legacy)!r} with the settings it was created with ("
                      + ", ".join(f"{k}={getattr(legacy, k)}" for k in legacy.to_dict()
                                  if getattr(legacy, k) != getattr(settings, k)) + ")")
            return legacy
        return settings

    def _default_study(self, store: Any, model: Any, backend: Any, settings: Any, names: Any = None) -> str:
        """The study name of a run without ``--study``: the evaluator's default, with the model
        hash appended when that name is taken by another version of the model (another batch,
        another file of the same name)."""
        from placetune.hardware.platforms import get_platform
        from placetune.tuning.evaluator import study_name_for
        from placetune.tuning.objectives import get_objective

        plat = get_platform(self.cfg.platform)
        fp = backend.fingerprint(plat, settings)
        objective = get_objective(self.cfg.objective, self.cfg.constraints or None)  # constrained: its own study
        base = study_name_for(model.name, plat.name, settings, objective.slug, backend.name,
                              fp.get("profile") if isinstance(fp, dict) else None)
        names = names if names is not None else {st.name: st for st in store.studies()}
        st = names.get(base)
        same = st is not None and st.model_hash in (model.hash, model.legacy_hash)  # legacy: migrated on open
        return base if st is None or same else f"{base}-{model.hash[:6]}"

    def _check_export(self, study: str) -> str:
        """The plan file of the run (``--export`` or ``<study>.plan.json``), refused now if it cannot be
        written: a study name that is not a plain file name, a directory, a file that is not a plan."""
        from placetune.files.names import file_name
        from placetune.files.write import check_output
        from placetune.plan.file import is_plan_file

        if self.cfg.export:  # (named by an untrusted study file: only over a plan file placetune wrote)
            return str(check_output(self.cfg.export, "plan file (--export)", owned=self.cfg.export_owner()))
        name = file_name(f"{study}.plan.json", "the plan file name of study", hint="give the plan file with "
                         "--export PATH (or export = \"...\" in the study file)")
        check_output(name, "plan file", owned=is_plan_file, hint="give the plan file with --export PATH")
        return name

    def _say(self, text: str = "") -> None:
        print(text, file=self.out, flush=True)

    # -------------------------------------------------------------------- run
    def run(self) -> TuneOutcome:
        """Run (or resume) the study; returns the outcome. Raises PlacetuneError on bad input."""
        try:
            return self._run()
        finally:
            if self.fleet is not None:
                self.fleet.close()
            if self._writer_lock is not None:
                self._writer_lock.release()

    def _trials_done(self, agent: Any) -> int:
        """Requests of the study; in a fleet, trials every worker finished."""
        ev = self.evaluator
        assert ev is not None
        ev.flush()  # the evaluations waiting in a batch count
        if self.fleet is None:
            return ev.store.study(ev.study_name).n_requests
        return self.fleet.trials_done(agent.study_name or ev.study_name)

    def _run(self) -> TuneOutcome:
        from search import Budget, drive, get_agent

        from placetune.tuning.fleet import agent_options_of, storage_error, tune_config

        cfg, note = tune_config(self.cfg)
        self.cfg = cfg
        if note:
            self._say(f"note: {note}")
        agent_options = agent_options_of(cfg)  # less a fleet's heartbeat settings
        seed = int(agent_options.pop("seed", 0))
        if cfg.granularity is not None:  # else the agent's default (guided: stages)
            agent_options["granularity"] = cfg.granularity
        agent_probe = get_agent(cfg.agent, seed=seed, **agent_options)
        ev = self.evaluator = self._make_evaluator()
        store = ev.store
        name = ev.study_name
        done = self._trials_done(agent_probe)
        # the rows this run reads back at its end are read (and checked) before anything new is measured:
        # a damaged or edited row stops the run now, not after new measurements are stored
        from placetune.plan.export import stored_model_row

        stored_model_row(store, ev.study.model_hash)
        from placetune.tuning.study_scan import StudyScan

        self.scan = StudyScan(ev.objective).read(store, name) if done else StudyScan(ev.objective)  # one pass
        self._say(self.what_will_run())
        self._say(f"study {name!r} in {store.url} ({cfg.source})")
        if self.fleet is not None:
            self._say(self.fleet.describe(cfg.trials))
        self._open_optuna_study(agent_probe)
        if ev.backend.simulated and self.fleet is None:  # milliseconds per evaluation: written in batches
            ev.write_in_batches()
        if done:
            self._say(f"resuming: {done} of {plural(cfg.trials, 'trial')} already done; stored measurements are not repeated")
        baseline = ev.peek(Placement.all_gpu(ev.model))
        progress = Progress(self.out, tty=self.tty, total=cfg.trials, done=done,
                            objective=ev.objective, baseline=baseline)
        ev.add_callback(progress.update)
        ev.add_callback(self.scan.seen)
        if not ev.backend.simulated:  # a real run's first builds check the stack (exit 8)
            FirstBuildCheck(ev).attach()
        self.progress, self.resumed = progress, bool(done)
        if done:  # resumed: "best" starts from the study's stored best
            stored = ev.best()
            progress.resume_from(stored[1] if stored else None)
        from placetune.tuning.baselines import measure_study_baselines
        from placetune.tuning.convergence import ConvergenceWatch

        # the baselines are part of every study: measured first, within the budget (those the
        # study holds cost nothing); a concurrent study's naive plans the model rules out are not
        self.baselines = measure_study_baselines(ev, lambda: self._trials_done(agent_probe) < cfg.trials)
        base = self.baselines[0][2] if self.baselines else None
        if base is not None:
            baseline = base
            progress.set_baseline(base)
        self.watch = ConvergenceWatch.from_store(ev, cfg.trials, self.scan.losses)
        ev.add_callback(self.watch.update)
        if not self.tty:  # a log of the run (nohup, systemd) says when the rest of the budget buys little
            ev.add_callback(self._announce_convergence)
        remaining = cfg.trials - self._trials_done(agent_probe)
        interrupted = False
        said: list[str] = []
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        for s in previous:
            signal.signal(s, self._on_sigint)
        stopped_cleanly = False
        try:
            if remaining > 0:
                # a resumed run explores anew (seed + trials done); the cache prevents re-measuring
                agent = get_agent(cfg.agent, seed=seed + done, **agent_options) \
                    if done else agent_probe
                if self.fleet is not None:
                    agent = self.fleet.configure(agent, cfg.trials, stop=lambda: ev.stop_requested,
                                                 deadline=time.monotonic() + cfg.timeout if cfg.timeout else None,
                                                 study_name=agent.study_name or ev.study_name)
                try:
                    with single_blas_thread():  # the agent's many small solves: threads only spin
                        stop = self.watch.should_stop if cfg.stop_when_converged else None
                        result = drive(agent.ask_tell(ev, Budget(remaining, cfg.timeout, stop)), ev)  # study measures
                    # the guided agent's re-ranked top candidates, failed builds, drift: said once the display is closed
                    said = [n for n in result.notes if n.startswith(_SAID)]
                except StopRequested:
                    interrupted = True
                except Exception as exc:  # a database failure in the agent's Optuna study: one clear line
                    err = storage_error(store, exc, f"running the {cfg.agent} agent's study")
                    if err is None:
                        raise
                    raise err from None
            else:
                self._say("the study's budget is already spent; showing its result")
            stopped_cleanly = True
        finally:
            self._write_waiting(raise_errors=stopped_cleanly)
            for s, handler in previous.items():
                signal.signal(s, handler)
            progress.close()
        for line in said:
            self._say(line)
        interrupted = interrupted or ev.stop_requested
        if baseline is not None:  # re-measured by the agent: the median over its builds
            baseline = ev.peek(Placement.all_gpu(ev.model)) or baseline
        outcome = TuneOutcome(name, self._trials_done(agent_probe), cfg.trials, ev.best(), baseline, interrupted,
                              signal=self._signal if interrupted else None, convergence=self.watch.result())
        self._summary(outcome)
        if self.fleet is not None:
            self._say(self.fleet.summary())
        outcome.plan_path = self._export(outcome)
        if interrupted:
            self._say(f"interrupted after {outcome.trials_done} of {plural(cfg.trials, 'trial')}; everything measured is "
                      f"stored. Resume with: {self.resume_hint}")
        return outcome

    def what_will_run(self) -> str:
        """One line that says what this run measures and how (printed first by every run)."""
        ev, cfg = self.evaluator, self.cfg
        assert ev is not None
        s = ev.settings
        sim = "SIMULATED Jetson" if ev.backend.simulated else "real Jetson"
        mode = s.mode + (f" ({plural(s.frames_in_flight, 'frame')} in flight)" if s.mode == "pipeline" else "")
        if ev.networks:
            mode = f"concurrent ({len(ev.networks)} networks at once: {', '.join(ev.networks)}; as a {mode})"
        if s.mode == "replicas" and s.replicas:
            mode += " (" + ", ".join(f"{d}:{b}" for d, b in s.replicas.items()) + ")"
        return (f"what will run: model {ev.model.name}, platform {ev.platform.name} ({sim}), power mode {s.power_mode}, "
                f"TensorRT {s.trt_version} DLA rules, {mode} mode, {s.precision}, batch {ev.model.batch}, objective {ev.objective.name}, "
                + "".join(f"constraint {c.text} {c.unit}, " for c in ev.objective.constraints)
                + f"agent {cfg.agent} ({cfg.granularity or 'its default granularity'}), budget {plural(cfg.trials, 'trial')}"
                + (f" / {cfg.timeout:g} s" if cfg.timeout else "") + f", backend {ev.backend.name}")

    def _open_optuna_study(self, agent: Any) -> None:
        """Keep the study's Optuna study (same name, same database; see
        :mod:`placetune.tuning.optuna_study`). The ``optuna`` agent writes its own trials;
        for any other agent each evaluation becomes a trial as it is measured."""
        ev = self.evaluator
        assert ev is not None
        try:
            from placetune.tuning.optuna_study import OptunaStudy, set_optuna_verbosity
        except ImportError:  # optuna not installed: placetune works without the dashboard
            log.info("optuna is not installed: no Optuna study for %r", ev.study_name)
            return
        set_optuna_verbosity(1 if logging.getLogger("placetune").isEnabledFor(logging.INFO) else 0)
        if getattr(agent, "name", None) == "optuna" or self.fleet is not None:
            return
        from placetune.tuning.fleet import storage_error

        try:
            granularity = self.cfg.granularity or getattr(agent, "granularity", None) or "fusion"
            OptunaStudy(ev, granularity).attach()
        except Exception as exc:  # a database failure: one clear line
            err = storage_error(ev.store, exc, "opening the study's Optuna study")
            if err is None:
                raise
            raise err from None

    def _write_waiting(self, raise_errors: bool) -> None:
        """Write the evaluations waiting in a batch, however the agent stopped. When it stopped on
        an error (``raise_errors`` False), a failure here is logged and the agent's error is the one raised."""
        ev = self.evaluator
        assert ev is not None
        if raise_errors:
            ev.flush()
            return
        try:
            ev.flush()
        except Exception as exc:  # noqa: BLE001 - the error in flight is the one to report
            log.error("%d evaluations were not written: %s", len(ev.trial_log.pending), exc)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        self._interrupts += 1
        self._signal = self._signal or signum
        if self._interrupts == 1 and self.evaluator is not None:
            self.evaluator.request_stop()
            what = "Ctrl-C" if signum == signal.SIGINT else "SIGTERM"
            print(f"\nstopping after the evaluation in flight ({what} again to stop at once)",
                  file=sys.stderr, flush=True)
            return
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    # ---------------------------------------------------------------- summary
    def _summary(self, outcome: TuneOutcome) -> None:
        ev = self.evaluator
        assert ev is not None
        obj = ev.objective
        rows: list[tuple[str, Measurement | None]] = [("all-GPU", outcome.baseline)]
        why: dict[str, str] = {}
        for b, why_not, m in getattr(self, "baselines", [])[1:]:  # all-GPU is the first row
            rows.append((b.label, m))
            if m is None and why_not:
                why[b.label] = why_not
        if outcome.best is not None:
            rows.append(("best found", outcome.best[1]))
        self._say("")
        label = " (SIMULATED)" if ev.backend.simulated else ""
        self._say(f"summary{label}: {plural(outcome.trials_done, 'trial')}, {ev.stats.measured:,} measured in this run, "
                  f"{plural(ev.stats.cache_hits, 'cache hit')}, {plural(ev.stats.failures, 'failure')}")
        device = self._device_time()
        if device:
            self._say(device)
        width = max([26] + [len(label_) + 1 for label_, _ in rows])
        header = f"{'placement':{width}s} {'latency ms':>11s} {'throughput fps':>14s} {'energy mJ':>10s}  vs all-GPU"
        self._say(header)
        self._say("-" * len(header))
        for label_, m in rows:
            if m is None:
                self._say(f"{label_:{width}s} {'not measured':>11s}" + (f": {why[label_]}" if label_ in why else ""))
                continue
            if not m.ok:
                self._say(f"{label_:{width}s} {m.status}: {m.reason or ''}"[:120])
                continue
            versus_base = "baseline" if m is outcome.baseline else \
                versus(obj.gain_over(m, outcome.baseline), obj.names[0])  # "1.52x faster"
            energy = f"{m.energy_mj:10.3f}" if m.energy_mj is not None else f"{'-':>10s}"
            self._say(
                f"{label_:{width}s} {m.latency_ms.get('median', float('nan')):11.3f} {m.throughput_fps or 0:14,.1f} "
                f"{energy}  {versus_base}"
            )
        if outcome.best is not None:
            m = outcome.best[1]
            realized = m.realized or {}
            for c in ev.objective.constraints:
                v = c.value(m)
                self._say(f"constraint {c.text} {c.unit}: best={'-' if v is None else f'{v:.4g}'} "
                          f"holds={'yes' if c.holds(m) else 'no'}")
            if ev.objective.name == "gpu_time" and m.objective("gpu_time") is not None:
                self._say(f"gpu_time: best={m.objective('gpu_time'):.4g} ms of GPU busy time per frame")
            self._say(placement_line(realized, ev.settings))
            if ev.networks:
                from placetune.model.merge import network_of

                lat = m.extra.get("network_latency_ms") or {}
                for net in ev.networks:
                    on = [d for layer, d in realized.items() if network_of(layer, [net])]
                    where = ", ".join(f"{d} {on.count(d)}" for d in DEVICES if on.count(d))
                    self._say(f"  {net}: latency {lat.get(net, float('nan')):.3f} ms in the frame; layers {where}")
            if m.dla_loadables:
                self._say("DLA loadables per core: " + ", ".join(f"{d} {k}" for d, k in m.dla_loadables.items()))
        self._verdict(outcome, rows)

    def _device_time(self) -> str | None:
        """The simulated device time a Jetson would spend on this run's builds and timings (and on
        the whole study's, after a resume); None on a real backend, whose time is the run's own."""
        ev = self.evaluator
        progress = self.progress
        if ev is None or not ev.backend.simulated or progress is None:
            return None
        this_run = (f"{hours(progress.device_s)} for this run's {plural(progress.device_n, 'measurement')}"
                    if progress.device_n else "none in this run")
        if not self.resumed:  # everything the study holds was measured in this run
            return f"simulated device time (builds and timing on a Jetson): {this_run}"
        self.scan.refresh(ev.store, ev.study_name)
        total, n = self.scan.device_time
        return (f"simulated device time (builds and timing on a Jetson): {this_run}, "
                f"{hours(total)} for the study's {plural(n, 'measurement')}")

    def _announce_convergence(self, placement: Placement, m: Measurement) -> None:
        """Evaluator callback: one line when the study has just converged."""
        if getattr(self, "_announced", False) or not self.watch.converged:
            return
        self._announced = True
        c = self.watch.result()
        then = ("; the run stops here (stop_when_converged)" if self.cfg.stop_when_converged
                else "; the run goes on (--stop-when-converged ends a run here)")
        self._say(f"converged at trial {c.trial}: no gain over {100 * c.min_gain:g}% in the {c.patience} trials "
                  f"after it{then}")

    def _verdict(self, outcome: TuneOutcome, rows: list[tuple[str, Measurement | None]]) -> None:
        """The verdict (what the run found and what that rests on) and where the study converged;
        kept for the exported plan's notes and with the study."""
        from placetune.tuning.convergence import store_convergence

        ev = self.evaluator
        assert ev is not None
        best = outcome.best[1] if outcome.best is not None else None
        bases = {label: m for label, m in rows if label != "best found"}
        text = verdict(ev.objective, best, bases, self.cfg.agent, outcome.trials_done,
                       simulated=ev.backend.simulated)
        if best is not None and best.realized and set(best.realized.values()) == {"GPU"} \
                and outcome.baseline is not None:
            terms = self._best_split(outcome.baseline)
            text += f"; {terms}" if terms else ""
        self.verdict_lines = [text]
        conv = outcome.convergence
        if conv is not None and conv.trials:
            unit = ev.objective.units[0] if ev.objective.units else ""
            self.verdict_lines.append(conv.sentence(unit))
            store_convergence(ev, conv)
        for line in self.verdict_lines:
            self._say(line)
        hint = agent_hint(text, self.cfg.agent, outcome.trials_done)
        if hint:
            self._say(hint)

    def _best_split(self, base: Measurement) -> str | None:
        """The decisive cost terms of the best measured plan that uses a DLA (GPU<->DLA boundary
        time and DLA busy time, from the measurement's extras), against all-GPU."""
        ev = self.evaluator
        assert ev is not None
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

    def _export(self, outcome: TuneOutcome) -> str | None:
        ev = self.evaluator
        assert ev is not None
        if outcome.best is None:
            self._say("no successful measurement yet: no plan exported")
            return None
        try:
            from placetune.plan.export import export_plan
        except ImportError:  # pragma: no cover - plan module not installed
            return None
        from placetune.plan.file import is_plan_file

        path = self._check_export(outcome.study)
        plan = export_plan(ev.store, outcome.study, objective=ev.objective, model=ev.model)  # not loaded again
        plan.notes.extend(getattr(self, "verdict_lines", []))  # what the plan rests on, with the plan
        plan.save(path, owned=self.cfg.export_owner() if self.cfg.export else is_plan_file)
        self._say(f"plan exported to {path}" + (" (simulated figures)" if ev.backend.simulated else ""))
        self._say(next_steps(self.cfg.storage, outcome.study))
        return path


def run_tune(cfg: TuneConfig, out: IO[str] | None = None, resume_hint: str = "the same command") -> TuneOutcome:
    """Convenience wrapper: ``Tuner(cfg).run()`` with timing logged."""
    t0 = time.monotonic()
    outcome = Tuner(cfg, out=out, resume_hint=resume_hint).run()
    log.info("tune finished in %.1f s", time.monotonic() - t0)
    return outcome
