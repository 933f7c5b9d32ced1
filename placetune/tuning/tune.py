"""``placetune tune``: run a search agent on a study until its budget is spent, resumably.

The study lives in the store; re-running the same command resumes it (measurements are
cache hits, the budget counts what was already done). The first Ctrl-C (or SIGTERM) lets the
evaluation in flight finish and be stored, then prints the best so far and how to resume;
a second one stops at once.

On a simulated backend the evaluations are written in batches (:mod:`placetune.tuning.trial_log`),
always before the run reports, on Ctrl-C and SIGTERM, and when the agent stops for any other
reason; a real Jetson's are written one by one as they are measured, and so are a fleet
worker's (the other workers wait for its measurements).

This module is the run itself (the loop, signals, resuming); opening the study is
:mod:`~placetune.tuning.tune_study`'s, what the run says :mod:`~placetune.tuning.tune_report`'s
and the plan file :mod:`~placetune.tuning.tune_export`'s.
"""

from __future__ import annotations

import logging
import signal
import sys
import time
from typing import IO, Any

from search import Agent, Budget, drive, get_agent

from placetune.errors import Interrupted, StopRequested
from placetune.placement.placement import Placement, stored_placement
from placetune.store.url import mask_url
from placetune.tuning.baselines import measure_study_baselines
from placetune.tuning.blas import single_blas_thread
from placetune.tuning.convergence import ConvergenceWatch
from placetune.tuning.study_scan import StudyScan
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.final_pick import BestPick, record_pick, recorded_pick, run_pick, study_best
from placetune.tuning.first_build import FirstBuildCheck
from placetune.tuning.objectives import best_stored
from placetune.tuning.oom_stop import OutOfMemoryStop
from placetune.tuning.fleet import Fleet, agent_options_of, storage_error, tune_config
from placetune.tuning.progress import Progress, terminal_columns
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune_export import export_best
from placetune.tuning.tune_report import (TuneOutcome, TuneReport, already_settled, settles, simulated_on_a_jetson,
                                          stops_early, what_will_run)
from placetune.tuning.tune_study import PIPELINE_FRAMES_IN_FLIGHT, OpenStudy, StudyOpener
from placetune.wording import plural, wrap

__all__ = ["Tuner", "TuneOutcome", "PIPELINE_FRAMES_IN_FLIGHT"]

_SAID = ("re-measured", "failed builds", "drift", "stopped after convergence")  # an agent's notes shown under the summary
log = logging.getLogger(__name__)
#: the signals that stop a run after the evaluation in flight: Ctrl-C, SIGTERM, and SIGHUP (the terminal closed,
#: an ssh session dropped) where the system has it
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM) + ((signal.SIGHUP,) if hasattr(signal, "SIGHUP") else ())


class Tuner:
    """Runs one ``placetune tune`` invocation.

    Args:
        cfg: the resolved configuration.
        out: where to print (default stdout).
        tty: force the terminal progress bar on/off (default: ``out.isatty()``).
        resume_hint: the command that resumes this run (printed on Ctrl-C).
    """

    def __init__(self, cfg: TuneConfig, out: IO[str] | None = None, tty: bool | None = None,
                 resume_hint: str = "the same command", intro: str = "") -> None:
        self.cfg = cfg
        self.intro = intro  # a line said before "what will run:", once the run's options are checked
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.resume_hint = mask_url(resume_hint)  # the command line may hold a database password
        self.evaluator: Evaluator | None = None  # set once the study is open (a lost output stops it)
        self._study: OpenStudy | None = None
        self._interrupts = 0
        self._caught: tuple[int, ...] = ()  # the stop signals the run handles (those not ignored at its start)
        self._signal: int | None = None

    @property
    def fleet(self) -> Fleet | None:
        """The fleet this run joined on a shared database (None: alone, or not started)."""
        return self._study.fleet if self._study is not None else None

    def _say(self, text: str = "") -> None:
        """One message; on a terminal, wrapped at its width (a log keeps one message a line for grep)."""
        print(wrap(text, terminal_columns(self.out)) if self.tty else text, file=self.out, flush=True)

    # -------------------------------------------------------------------- run
    def run(self) -> TuneOutcome:
        """Run (or resume) the study; returns the outcome. Raises PlacetuneError on bad input.

        Its Ctrl-C, SIGTERM and SIGHUP handler holds from the start: before the study is open a signal stops the run at once
        (nothing is measured yet; the database's writes are transactions); from then on, the baselines included,
        the first lets the evaluation in flight finish and be stored."""
        # a signal ignored at start stays ignored: nohup ignores SIGHUP so that a night outlives the ssh session
        # that started it, and a shell ignores SIGINT in the commands it puts in the background
        previous = {s: h for s in _STOP_SIGNALS if (h := signal.getsignal(s)) is not signal.SIG_IGN}
        self._caught = tuple(previous)
        for s in previous:
            signal.signal(s, self._on_sigint)
        try:
            return self._run()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            if self._study is not None:
                self._study.close()

    def _trials_done(self, ev: Evaluator, agent: Agent) -> int:
        """Requests of the study; in a fleet, trials every worker finished (its requests too: builds and cache
        hits, baselines included, not repeats answered without a build)."""
        ev.flush()  # the evaluations waiting in a batch count
        if self.fleet is None:
            return ev.store.study(ev.study_name).n_requests
        return self.fleet.trials_done(agent.study_name or ev.study_name)

    def _run(self) -> TuneOutcome:
        cfg, note = tune_config(self.cfg)
        self.cfg = cfg
        if note:
            self._say(f"note: {note}")
        agent_options = agent_options_of(cfg)  # less a fleet's heartbeat settings
        seed = int(agent_options.pop("seed", 0))
        if cfg.granularity is not None:  # else the agent's default (guided: stages)
            agent_options["granularity"] = cfg.granularity
        agent_probe = get_agent(cfg.agent, seed=seed, **agent_options)
        self._study = StudyOpener(cfg, self._say).open()
        ev = self.evaluator = self._study.evaluator
        fleet = self._study.fleet
        store = ev.store
        name = ev.study_name
        done = self._trials_done(ev, agent_probe)
        # the rows this run reads back at its end are read (and checked) before anything new is measured:
        # a damaged or edited row stops the run now, not after new measurements are stored
        store.model_row(ev.study.model_hash)
        scan = StudyScan(ev.objective).read(store, name) if done else StudyScan(ev.objective)  # one pass
        if self.intro:
            self._say(self.intro)
        self._say(what_will_run(cfg, ev, agent_probe.granularity))
        self._say(f"study {name!r} in {store.url} ({cfg.source})")
        if on_board := simulated_on_a_jetson(ev):
            self._say(on_board)
        if fleet is not None:
            self._say(fleet.describe(cfg.trials))
        self._open_optuna_study(ev, agent_probe)
        if ev.backend.simulated and fleet is None:  # milliseconds per evaluation: written in batches
            ev.write_in_batches()
        if done:
            self._say(f"resuming: {done} of {plural(cfg.trials, 'trial')} already done; stored measurements are not repeated"
                      if done < cfg.trials else
                      f"resuming: {plural(done, 'trial')} already done, the whole budget of {cfg.trials} "
                      f"(--trials {done + 100} searches 100 more)")
        baseline = ev.peek(Placement.all_gpu(ev.model))
        progress = Progress(self.out, tty=self.tty, total=cfg.trials, done=done,
                            objective=ev.objective, baseline=baseline, stops_early=stops_early(cfg))
        ev.add_callback(progress.update)
        ev.add_activity_callback(progress.working)
        ev.add_callback(scan.seen)
        if not ev.backend.simulated:  # a real run's first builds check the stack (exit 8)
            FirstBuildCheck(ev).attach()
            ev.add_callback(OutOfMemoryStop())  # memory failures in a row stop the night (exit 8)
        if done:  # resumed: "best" starts from the study's stored best
            stored = ev.best()
            progress.resume_from(stored[1] if stored else None)
        stopped_cleanly = False
        try:
            # the baselines are part of every study: measured first, within the budget (those the
            # study holds cost nothing); a concurrent study's naive plans the model rules out are not
            # in a fleet each baseline is a trial of the fleet's Optuna study, counted in its budget as on one machine
            recording = fleet.record_baselines(ev, agent_probe.granularity or "fusion") if fleet is not None else None
            try:
                baselines = measure_study_baselines(ev, lambda: self._trials_done(ev, agent_probe) < cfg.trials)
            finally:
                if recording is not None:
                    Fleet.stop_recording(ev, recording)
            base = baselines[0][2] if baselines else None
            if base is not None:
                baseline = base
                progress.set_baseline(base)
            watch = ConvergenceWatch.from_store(ev, cfg.trials, scan.losses, scan.spent)
            report = TuneReport(cfg, ev, self._say, progress, resumed=bool(done), watch=watch, scan=scan,
                                baselines=baselines)
            ev.add_callback(watch.update)
            progress.watch_convergence(watch)
            # when the rest of the budget buys little: a line of the log (nohup, systemd), or on a terminal
            # a line printed above the live bar (the bar's own few words are redrawn away)
            ev.add_callback(report.announce_convergence)
            remaining = cfg.trials - self._trials_done(ev, agent_probe)
            settled = bool(done) and settles(cfg) and watch.converged  # converged by the study's stored trials
            interrupted = False
            said: list[str] = []
            final: tuple[str | None, Any] = (None, None)  # the agent's own final pick: its rule and measurement
            if ev.stop_requested:  # Ctrl-C or SIGTERM during the baselines: what was measured is stored
                interrupted = True
            elif remaining > 0:
                # a resumed run explores anew (seed + trials done); the cache prevents re-measuring
                # (a converged study's resume keeps the seed: with stop_when_settled its first proposals
                # are the study's own, answered free, and it builds only what could still change the answer)
                agent = get_agent(cfg.agent, seed=seed + done, **agent_options) \
                    if done and not settled else agent_probe
                if fleet is not None:
                    agent = fleet.configure(agent, cfg.trials, stop=lambda: ev.stop_requested,
                                            deadline=time.monotonic() + cfg.timeout if cfg.timeout else None,
                                            study_name=agent.study_name or ev.study_name)
                try:
                    with single_blas_thread():  # the agent's many small solves: threads only spin
                        stop = watch.should_stop if cfg.stop_when_converged else None
                        budget = Budget(remaining, cfg.timeout, stop, settle=cfg.stop_when_settled,
                                        converged=lambda: watch.converged,  # the study's, its stored trials included
                                        recall=bool(done),  # a resumed agent starts from the study's measurements,
                                        baselines=True)  # a fresh one's from the baselines measured above
                        result = drive(agent.ask_tell(ev, budget), ev)  # study measures
                    # the guided agent's re-ranked top candidates, failed builds, drift: said once the display is closed
                    said = [n for n in result.notes if n.startswith(_SAID)]
                    if fleet is None:  # a fleet worker's agent saw only part of the study's evidence
                        final = (result.final_rule, result.best_measurement)
                except StopRequested as stop:
                    interrupted = True
                    said = [n for n in stop.notes if n.startswith(_SAID)]  # the agent's drift so far, as below
                except Exception as exc:  # a database failure in the agent's Optuna study: one clear line
                    err = storage_error(store, exc, f"running the {cfg.agent} agent's study")
                    if err is None:
                        raise
                    raise err from None
            else:
                self._say("the study's budget is already spent; showing its result")
            stopped_cleanly = True
        finally:
            self._write_waiting(ev, raise_errors=stopped_cleanly)
            progress.close()
        if settled and self._trials_done(ev, agent_probe) == cfg.trials - remaining:  # nothing built: one line
            said = [already_settled(watch.result(), remaining) if n.startswith("stopped after convergence") else n
                    for n in said]
        for line in said:
            self._say(line)
        interrupted = interrupted or ev.stop_requested
        if baseline is not None:  # re-measured by the agent: the median over its builds
            baseline = ev.peek(Placement.all_gpu(ev.model)) or baseline
        if fleet is not None:  # the study's trials, every worker's, not only those this worker saw
            watch = report.watch = ConvergenceWatch.from_store(ev, cfg.trials)
        pick = self._final_pick(ev, *final) if not interrupted else study_best(store, name, ev.objective)
        best = None if pick is None else (stored_placement(ev.model, pick.record.requested, f"measurement "
                                                           f"{pick.record.id} of study {name!r}, field requested"),
                                          pick.record.measurement)
        outcome = TuneOutcome(name, self._trials_done(ev, agent_probe), cfg.trials, best, baseline, interrupted,
                              signal=self._signal if interrupted else None, convergence=watch.result(), pick=pick,
                              exit_code=ev.stop_cause.exit_code if ev.stop_cause is not None else None)
        if ev.stop_cause is not None:
            self._say(f"stopped: {ev.stop_cause}")
        report.summary(outcome)
        if fleet is not None:
            self._say(fleet.summary(agent_probe.study_name or ev.study_name))
        if outcome.best is None:
            self._say("no successful measurement yet: no plan exported")
        else:
            # the agent's drift line (its rebuilds of the best plan over the night) goes with the plan, not only to the terminal
            outcome.plan_path = export_best(cfg, ev, outcome.study,
                                            report.verdict_lines + [n for n in said if n.startswith("drift")], self._say,
                                            pick=pick)
        if interrupted and ev.store.in_memory:  # nothing is kept to resume from
            self._say(f"interrupted after {outcome.trials_done} of {plural(cfg.trials, 'trial')}; the study was in an "
                      "in-memory database, gone with this run: nothing to resume (give --storage FILE.db to keep one)")
        elif interrupted:
            self._say(f"interrupted after {outcome.trials_done} of {plural(cfg.trials, 'trial')}; everything measured is "
                      f"stored. Resume with: {self.resume_hint}")
        return outcome

    @staticmethod
    def _final_pick(ev: Evaluator, rule: str | None, measurement: Any) -> BestPick | None:
        """The study's best plan once the run ended: the agent's own final pick, recorded with the
        study (:mod:`placetune.tuning.final_pick`), where it chose one by a rule of its own; else
        the study's best (a pick an earlier run recorded while nothing was measured since, or the
        best stored value)."""
        doc = run_pick(ev, rule, measurement)
        if doc is not None:
            try:
                record_pick(ev.store, ev.study_name, doc)
            except Exception as exc:  # a database failure: one clear line
                err = storage_error(ev.store, exc, "recording the run's best plan")
                if err is None:
                    raise
                raise err from None
            if ev.store.in_memory or recorded_pick(ev.store, ev.study_name) is not None:
                return study_best(ev.store, ev.study_name, ev.objective)
            rec = next(iter(ev.store.measurements(ev.study_name, ids=[doc["measurement_id"]])))
            best = best_stored(ev.store, ev.study_name, ev.objective)  # no Optuna study held it: this run follows it
            return BestPick(rec, doc["rule"], recorded=True, store_best=None if best is None or best.id == rec.id
                            else best, ignored="(not recorded: the study has no Optuna study to hold it)")
        return study_best(ev.store, ev.study_name, ev.objective)

    def _open_optuna_study(self, ev: Evaluator, agent: Agent) -> None:
        """Keep the study's Optuna study (same name, same database; see
        :mod:`placetune.tuning.optuna_study`). The ``optuna`` agent writes its own trials;
        for any other agent each evaluation becomes a trial as it is measured."""
        try:  # (optuna is optional: placetune works without the dashboard)
            from placetune.tuning.optuna_study import OptunaStudy, set_optuna_verbosity
        except ImportError:
            log.info("optuna is not installed: no Optuna study for %r", ev.study_name)
            return
        set_optuna_verbosity(1 if logging.getLogger("placetune").isEnabledFor(logging.INFO) else 0)
        if agent.name == "optuna" or self.fleet is not None:
            return
        try:
            granularity = self.cfg.granularity or agent.granularity or "fusion"
            OptunaStudy(ev, granularity).attach()
        except Exception as exc:  # a database failure: one clear line
            err = storage_error(ev.store, exc, "opening the study's Optuna study")
            if err is None:
                raise
            raise err from None

    @staticmethod
    def _write_waiting(ev: Evaluator, raise_errors: bool) -> None:
        """Write the evaluations waiting in a batch, however the agent stopped. When it stopped on
        an error (``raise_errors`` False), a failure here is logged and the agent's error is the one raised."""
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
            what = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            try:  # (after a hangup the terminal may be gone: the stop goes on without the line)
                print(f"\nstopping after the evaluation in flight ({what} again to stop at once)",
                      file=sys.stderr, flush=True)
            except (OSError, ValueError):
                pass
            return
        for s in self._caught:
            signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
        raise Interrupted(signum)


def run_tune(cfg: TuneConfig, out: IO[str] | None = None, resume_hint: str = "the same command") -> TuneOutcome:
    """Convenience wrapper: ``Tuner(cfg).run()`` with timing logged."""
    t0 = time.monotonic()
    outcome = Tuner(cfg, out=out, resume_hint=resume_hint).run()
    log.info("tune finished in %.1f s", time.monotonic() - t0)
    return outcome
