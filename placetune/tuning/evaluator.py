"""Evaluator: validate -> realise -> cache -> measure -> store, for one study.

This is the object search agents talk to. It needs nothing but a model, a platform and
a backend; everything it measures goes to the store, and everything in the store with
the same model, environment fingerprint and settings is a cache hit. A measured placement
can be built again (:meth:`Evaluator.remeasure`): its stored measurement then becomes the median
over its builds. Its arguments are resolved and checked, and its study opened in the store, by
:mod:`placetune.tuning.study_setup`.
"""

from __future__ import annotations

import copy
import time
from collections import OrderedDict
from datetime import datetime
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError, GpuContended, PlacementError, StopRequested
from placetune.measurement import Measurement
from placetune.model.model import Model
from placetune.tuning.objectives import Objective, best_stored
from placetune.tuning.stats import EvaluatorStats
from placetune.placement.placement import Placement
from placetune.placement.realise import InfeasiblePlacement, Realisation, realise
from placetune.plan.trtexec import refuse_unexportable
from placetune.settings import DEFAULT_PRECISION, Settings
from placetune.validate import request as check_request
from placetune.tuning.trial_log import DEFAULT_BATCH_SECONDS, DEFAULT_BATCH_TRIALS, TrialLog
from placetune.backends.jetson import refuse_for_board
from placetune.placement.space import Space
from placetune.store.store import Store
from placetune.tuning.baselines import BaselinesByName, baseline_placements
from placetune.tuning.concurrent import network_latencies
from placetune.tuning.remeasure import combine_builds, device_time, measured_again, next_build_number
from placetune.tuning.study_setup import check_arguments, open_study, resolve, study_name_for

if TYPE_CHECKING:
    from placetune.backends.base import Backend
    from placetune.hardware.platforms import Platform
    from placetune.placement.space import Space
    from placetune.store.store import Store

__all__ = ["Evaluator", "EvaluatorStats"]

_MEMO_SIZE = 4096


class Evaluator:
    """Measure placements of one model on one platform, with caching and storage.

    Args:
        model: a :class:`Model`, a zoo name or an ONNX path.
        platform: a platform name (``orin-agx``...) or :class:`~placetune.hardware.platforms.Platform`.
        backend: ``simulate`` (default), ``tensorrt``, ``trtexec`` or a backend object.
        mode: ``engine``, ``pipeline`` or ``replicas``.
        precision: ``int8`` (default, as ``placetune tune``, ``check`` and ``measure``: one constant,
            :data:`placetune.settings.DEFAULT_PRECISION`), ``fp16`` or ``fp32`` (GPU only).
        batch: batch size of zoo models (files: use ``shapes``).
        objective: ``latency``, ``throughput``, ``energy`` or a pair like ``latency+energy``.
        store: a :class:`~placetune.store.store.Store`, a SQLAlchemy URL / SQLite path, or None for
            an in-memory store (nothing persists).
        study: study name in the store (default: derived from model, platform and settings).
        settings: full :class:`Settings` (overrides ``mode``/``precision`` and ``options``).
        shapes: input shape overrides for ONNX files (``["input=1x3x224x224"]``).
        agent: default agent name recorded with each measurement.
        constraints: bounds like ``latency<=2.0`` (see :mod:`placetune.tuning.constraints`);
            violating measurements rank after every feasible one.
        **options: other :class:`Settings` fields (``gpu_fallback``, ``dla_core``,
            ``frames_in_flight``, ``replicas``, ``noise``, ``seed``, ``trt_version``...).

    Raises:
        ConfigError: a keyword argument it does not take or of the wrong type (one line naming it and
            listing the allowed ones, as ``gymnasium.make`` of the placement environments does), or
            settings that cannot be measured together (:mod:`placetune.tuning.study_setup`).
        ConfigError, ModelError, PlacementError: with a ``store``, what ``placetune export --format trtexec``
            would refuse for every plan of the study, refused before the database is opened as
            ``placetune tune`` refuses it (:func:`placetune.plan.trtexec.refuse_unexportable`: INT8 without
            Q/DQ for TensorRT 11, an input name or node names trtexec cannot carry); without one (in memory)
            the placements are measured all the same.

    Example:
        >>> ev = Evaluator("seed-block", "orin-agx", mode="pipeline")
        >>> base = ev.baseline()
        >>> m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}))
        >>> m.simulated, m.realized["/conv3/Conv"], m.latency_ms["median"] > 0
        (True, 'DLA0', True)
    """

    def __init__(
        self,
        model: Model | str | Path,
        platform: "Platform | str" = "orin-agx",
        backend: "Backend | str" = "simulate",
        *,
        mode: str = "engine",
        precision: str = DEFAULT_PRECISION,
        batch: int | None = None,
        objective: str | Objective = "latency",
        store: "Store | str | None" = None,
        study: str | None = None,
        settings: Settings | None = None,
        shapes: Any = None,
        agent: str | None = None,
        constraints: Any = None,
        **options: Any,
    ) -> None:
        check_arguments(options, settings=settings, shapes=shapes, agent=agent, constraints=constraints)
        setup = resolve(model, platform, backend, mode=mode, precision=precision, batch=batch, objective=objective,
                        settings=settings, shapes=shapes, constraints=constraints, options=options)
        self.model = setup.model
        #: the networks of a concurrent study's merged model ([] for one network)
        self.networks = setup.networks
        self.platform = setup.platform
        self.backend = setup.backend
        self.settings = setup.settings
        self.objective = setup.objective
        if store is not None:  # a study kept in a database: what its export would refuse, refused as tune does
            refuse_unexportable(self.model, self.settings.mode, self.settings.precision, str(self.settings.trt_version))
        self.store = Store.of(store)
        self.agent = agent
        self.fingerprint = self.backend.fingerprint(self.platform, self.settings)
        refuse_for_board(self.backend, self.model, self.settings, self.fingerprint)  # before it's stored
        self.stats = EvaluatorStats()
        self.study_name = study or self.default_study_name()
        self.study = open_study(self.store, self.study_name, setup, self.fingerprint)
        self._memo: OrderedDict[str, Measurement] = OrderedDict()
        self._measured_here: set[str] = set()  # realised keys this evaluator measured (see _again)
        self._realised_key: OrderedDict[str, str] = OrderedDict()  # requested key -> realised key
        self._callbacks: list[Callable[[Placement, Measurement], None]] = []
        self._activity: list[Callable[[str], None]] = []
        self._stop = False
        #: what stopped the run from the backend (another process kept the GPU busy), None otherwise
        self.stop_cause: GpuContended | None = None
        self._baseline: Measurement | None = None
        #: fleet mode (:class:`placetune.tuning.fleet_claims.Claims`): claim a realised placement before
        #: measuring it, so that two workers never measure the same one
        self.claims: Any = None
        #: the evaluations on their way to the store and the study's Optuna trials
        self.trial_log = TrialLog(self)

    @property
    def fingerprint_hash(self) -> str:
        """Hash of the environment fingerprint, as the store keys cache entries."""
        return self.study.fingerprint_hash

    @property
    def rebuilds_vary(self) -> bool:
        """False when building a placement again cannot change its figures (a simulated backend
        with noise 0, the settings' or the backend's own): :meth:`remeasure` would learn nothing."""
        if not self.backend.simulated:
            return True
        fp = self.fingerprint if isinstance(self.fingerprint, dict) else {}
        noise = fp.get("noise", self.settings.noise)
        return isinstance(noise, (int, float)) and noise > 0

    # ------------------------------------------------------------------ naming
    def default_study_name(self) -> str:
        """``<model>-<platform>-<mode>-<precision>-<objective>-<backend>-<settings hash[:6]>``, plus
        ``-profile-<digest[:6]>`` when a simulated backend measures with a device profile."""
        profile = self.fingerprint.get("profile") if isinstance(self.fingerprint, dict) else None
        return study_name_for(self.model.name, self.platform.name, self.settings, self.objective.name,
                              self.backend.name, profile)

    def __repr__(self) -> str:
        return (
            f"Evaluator({self.model.name!r}, {self.platform.name!r}, backend={self.backend.name!r}, "
            f"mode={self.settings.mode!r}, objective={self.objective.name!r}, study={self.study_name!r})"
        )

    # ------------------------------------------------------------- main entry
    def space(self, granularity: str = "fusion", **kw: Any) -> "Space":
        """The decision space of this evaluator's model, platform and mode."""
        return Space(self.model, self.platform, mode=self.settings.mode, precision=self.settings.precision,
                     granularity=granularity, trt_version=self.settings.trt_version, **kw)

    def realise(self, placement: Placement) -> Realisation:
        """Realise a placement under this evaluator's settings (may raise InfeasiblePlacement)."""
        s = self.settings
        return realise(placement, self.platform, mode=s.mode, precision=s.precision, gpu_fallback=s.gpu_fallback,
                       dla_core=s.dla_core, trt_version=s.trt_version)

    def evaluate(
        self,
        placement: Placement | dict[str, str],
        *,
        agent: str | None = None,
        trial_number: int | None = None,
        annotation: dict[str, Any] | None = None,
    ) -> Measurement:
        """Measure a placement (or return the stored measurement of its realisation).

        ``annotation`` (e.g. an agent's ``predicted`` value and ``cv_error``) is passed to the
        callbacks in the returned measurement's ``extra["annotation"]``; it is never stored.

        Failures are returned as measurements with a non-``ok`` status; only a placement
        that is not a placement of this model, or names a device the platform lacks,
        raises (PlacementError). A stored measurement taken under other clocks than its run's first is
        no answer: the placement is measured again, and the new measurement replaces it in the store.

        The returned measurement has ``extra["cache_hit"]`` set, and its measurement id
        ``extra["_id"]`` once it is stored: at once, or with its batch after :meth:`write_in_batches`.
        """
        check_request(agent, trial_number)
        placement = self._own(placement)
        if self._stop:
            raise StopRequested("stop requested: the evaluation in flight finished and is stored")
        started = datetime.now()
        self.stats.requested += 1
        agent = agent or self.agent
        key = self._realised_key.get(placement.key)
        cached = self._lookup(key) if key is not None else None
        if cached is None or self._again(key, cached):
            t0 = time.perf_counter()
            try:
                r = self.realise(placement)
                key = r.realized.key
            except InfeasiblePlacement as exc:
                r = None
                key = "infeasible:" + placement.key
                infeasible_reason = str(exc)
            self.stats.realise_seconds += time.perf_counter() - t0
            self._realised_key[placement.key] = key
            if len(self._realised_key) > _MEMO_SIZE:
                self._realised_key.popitem(last=False)
            cached = self._lookup(key)
        untrusted, cached = (cached, None) if cached is not None and self._again(key, cached) else (None, cached)
        if cached is None and untrusted is None and r is not None and self.claims is not None:
            cached = self.claims.acquire(self, key)  # another worker's result, or None: ours to measure
        if cached is not None:
            self.stats.cache_hits += 1
            self._count(cached)
            out = self._answer(cached, placement, cache_hit=True, annotation=annotation)
            t0 = time.perf_counter()
            try:
                self.trial_log.hit(placement, out, key, cached, agent, trial_number, started)
            finally:
                self.stats.store_seconds += time.perf_counter() - t0
            return out
        t0 = time.perf_counter()
        if r is None:
            m = Measurement.failure(
                "infeasible", infeasible_reason, requested=placement.as_dict(), simulated=self.backend.simulated,
                backend=self.fingerprint.get("backend", self.backend.name), mode=self.settings.mode,
                precision=self.settings.precision, batch=self.model.batch,
            )
        else:
            try:
                m = self.backend.measure(r, self.platform, self.settings)
            except InfeasiblePlacement as exc:
                m = Measurement.failure("infeasible", str(exc), requested=placement.as_dict(),
                                        realized=r.realized.as_dict(), simulated=self.backend.simulated)
            except BaseException as exc:
                if self.claims is not None:  # fleet: another worker may measure it
                    self.claims.release(self, key)
                self._stopped_by(exc)
                raise
            if m.requested is None:
                m.requested = placement.as_dict()
            if r.notes:
                m.extra.setdefault("notes", list(r.notes))
            if self.networks and m.ok:  # a concurrent study: each network's own latency
                m.extra["network_latency_ms"] = network_latencies(self.model, m, self.networks)
        self.stats.measure_seconds += time.perf_counter() - t0
        self.stats.measured += 1
        self._count(m)
        out = self._answer(m, placement, cache_hit=False, annotation=annotation)
        t0 = time.perf_counter()
        try:
            if untrusted is None:
                self.trial_log.measured(placement, m, out, key, agent, trial_number, started)  # now, or batched
            else:  # its stored row, measured under other clocks, is rewritten
                self.trial_log.replaced(placement, m, out, key, agent, trial_number, started)
            self._remember(key, m)
            self._measured_here.add(key)
        finally:
            self.stats.store_seconds += time.perf_counter() - t0
            if r is not None and self.claims is not None:
                self.claims.release(self, key)
        return out

    def remeasure(
        self,
        placement: Placement | dict[str, str],
        *,
        builds: int = 1,
        agent: str | None = None,
        trial_number: int | None = None,
    ) -> Measurement:
        """Build and measure a measured placement ``builds`` more times and store the combination.

        Each build of a network picks TensorRT tactics anew (~1-3 % apart on a Jetson; the
        simulated Jetson draws a factor per build), so one build may be a lucky one. The stored
        ``ok`` measurement of the placement's realisation is combined with the new builds
        (:mod:`placetune.tuning.remeasure`): ``extra["builds"]`` lists every build's median
        latency, throughput and energy; the measurement's median latency, throughput, energy and
        power become the **median over all ok builds** (two builds: their mean); its latency
        samples are all builds' samples concatenated (``mean``, ``p90``, ``p99``... are theirs);
        its per-layer times, timeline and other details stay the first build's.

        The stored row is rewritten in place (:meth:`Store.update_measurement
        <placetune.store.measurements.MeasurementsMixin.update_measurement>`), one request is
        logged (``cache_hit`` false, agent ``agent`` or ``"remeasure"``), and this evaluator and
        its store answer the combined measurement afterwards. Each build counts as an evaluation
        (``stats.requested`` and ``stats.measured`` grow by ``builds``), so budgets include it.
        Callbacks get the answer, with ``extra["remeasured"] = builds``.

        Raises:
            ConfigError: the placement's realisation was never measured in this study's scope, or
                its measurement failed (nothing is measured or stored then); ``builds`` < 1.
            PlacementError: not a placement of this model.
            StopRequested: after :meth:`request_stop`.
        """
        check_request(agent, trial_number)
        placement = self._own(placement)
        if isinstance(builds, bool) or not isinstance(builds, int) or builds < 1:
            raise ConfigError(f"remeasure: builds must be an integer >= 1, not {builds!r}")
        if self._stop:
            raise StopRequested("stop requested: the evaluation in flight finished and is stored")
        started = datetime.now()
        self.flush()  # its stored row is rewritten below
        try:
            r: Realisation | None = self.realise(placement)
        except InfeasiblePlacement:
            r = None
        stored = None if r is None else self._lookup(r.realized.key)
        if r is None or stored is None or not stored.ok:
            why = ("its measurement failed (infeasible)" if r is None else "it was never measured" if stored is None
                   else f"its measurement failed ({stored.status})")
            raise ConfigError(f"cannot re-measure placement {placement.key[:12]} in study {self.study_name!r}: "
                              f"{why}; only a placement with an ok measurement is re-measured")
        key = r.realized.key
        nxt = next_build_number(stored)
        if nxt is not None and self.backend.capabilities.build_counter:  # the simulator's build counter
            self.backend.advance_builds(key, self.settings.mode, nxt)
        new: list[Measurement] = []
        for _ in range(builds):
            self.stats.requested += 1
            t0 = time.perf_counter()
            try:
                m = self.backend.measure(r, self.platform, self.settings)
            except InfeasiblePlacement as exc:
                m = Measurement.failure("infeasible", str(exc), realized=r.realized.as_dict(),
                                        simulated=self.backend.simulated)
            except GpuContended as exc:
                self._stopped_by(exc)
                raise
            self.stats.measure_seconds += time.perf_counter() - t0
            self.stats.measured += 1
            self._count(m)
            new.append(m)
        combined = combine_builds(stored, new)
        t0 = time.perf_counter()
        try:
            mid = self.store.rewrite(self.study, placement.key, key, combined, agent or "remeasure", trial_number)
            if mid is None:
                raise ConfigError(f"cannot re-measure placement {placement.key[:12]}: its measurement is no "
                                  f"longer in {self.store.url}")
        finally:
            self.stats.store_seconds += time.perf_counter() - t0
        combined.extra["_id"] = mid
        self._remember(key, combined)
        if self._baseline is not None and self._baseline.realized == combined.realized:  # baseline() answers it
            base = Placement.all_gpu(self.model)
            self._baseline = self._answer(combined, base, cache_hit=bool(self._baseline.extra.get("cache_hit")))
            self._baseline.requested = base.as_dict()
        out = self._answer(combined, placement, cache_hit=False)
        out.requested = placement.as_dict()
        out.extra["remeasured"] = builds
        spent = device_time(new)  # progress displays: this call's device time
        if spent is not None:
            out.extra["device_time_s"] = spent
        else:
            out.extra.pop("device_time_s", None)
        self.trial_log.stored(placement, out, started, agent or "remeasure")  # its trial, then the callbacks
        return out

    # ------------------------------------------------------- hooks and stop
    def add_callback(self, fn: Callable[[Placement, Measurement], None]) -> None:
        """Call ``fn(placement, measurement)`` after every evaluation (progress displays, logs), in
        order, once the evaluation is stored (with its batch after :meth:`write_in_batches`)."""
        self._callbacks.append(fn)

    def add_activity_callback(self, fn: Callable[[str], None]) -> None:
        """Call ``fn(what)`` whenever an agent says what it does between evaluations (:meth:`working`)."""
        self._activity.append(fn)

    def working(self, what: str) -> None:
        """Say what the agent does now, between evaluations (``"predicting"``: a word or two, fitting the
        live bar of an 80-column terminal): a progress display shows it until the next evaluation, so a
        search of the model that takes seconds is not a frozen screen. Nothing happens without a display."""
        for fn in self._activity:
            fn(what)

    def write_in_batches(self, trials: int = DEFAULT_BATCH_TRIALS, seconds: float = DEFAULT_BATCH_SECONDS) -> None:
        """Store evaluations (and their Optuna trials) in batches instead of one transaction each.

        For simulated backends, whose evaluations cost about as much as a transaction: a batch is
        written when ``trials`` evaluations wait or the oldest has waited ``seconds`` (checked at
        each evaluation), and by :meth:`flush`, :meth:`best`, :meth:`remeasure` and :meth:`close`
        (see :mod:`placetune.tuning.trial_log`). Until then the evaluations live in this process
        only: a killed process loses them (never a part of one). ``trials=1`` writes each at once
        again (the default). A fleet worker (:attr:`claims` set) always writes at once: the
        other workers wait for its measurements.

        Raises:
            ConfigError: ``trials`` not an integer >= 1 or ``seconds`` not a finite number >= 0.
        """
        self.trial_log.batch(trials, seconds, at_once=self.claims is not None)

    def flush(self) -> None:
        """Write the evaluations waiting in a batch now (nothing to do when none waits).

        Raises:
            StoreError: a database problem (they keep waiting; the next flush tries again).
        """
        self.trial_log.flush()

    def request_stop(self) -> None:
        """Make the next :meth:`evaluate` raise :class:`~placetune.errors.StopRequested`.

        Safe to call from a signal handler: the evaluation in flight finishes and is stored.
        """
        self._stop = True

    def _stopped_by(self, exc: BaseException) -> None:
        """A backend's stop of the run (another process kept the GPU busy): stop as on a signal."""
        if isinstance(exc, GpuContended):
            self._stop, self.stop_cause = True, exc

    @property
    def stop_requested(self) -> bool:
        """True after :meth:`request_stop`."""
        return self._stop

    def peek(self, placement: Placement) -> Measurement | None:
        """The stored measurement of a placement's realisation, without measuring or
        recording a request (None when it was never measured or is infeasible)."""
        key = self.realised_key(placement)
        if key.startswith("infeasible:"):
            return None
        m = self._lookup(key)
        return self._answer(m, placement, cache_hit=True) if m is not None else None

    def realised_key(self, placement: Placement) -> str:
        """Key of the placement TensorRT would run for ``placement`` (what the store caches by;
        ``infeasible:<requested key>`` when it cannot run), remembered per requested placement."""
        placement = self._own(placement)
        key = self._realised_key.get(placement.key)
        if key is None:
            try:
                key = self.realise(placement).realized.key
            except PlacementError:
                key = "infeasible:" + placement.key
            self._realised_key[placement.key] = key
            if len(self._realised_key) > _MEMO_SIZE:
                self._realised_key.popitem(last=False)
        return key

    def notify_callbacks(self, placement: Placement, m: Measurement) -> Measurement:
        """Call every callback (:meth:`add_callback`) with an evaluation, in order; returns ``m``
        (the trial log calls it once the evaluation is written)."""
        for fn in self._callbacks:
            fn(placement, m)
        return m

    # ------------------------------------------------------------- baselines
    def baseline(self) -> Measurement:
        """The all-GPU measurement (measured once, then cached)."""
        if self._baseline is None:
            self._baseline = self.evaluate(Placement.all_gpu(self.model), agent="baseline")
        return self._baseline

    def baselines(self) -> dict[str, tuple[Placement, Measurement]]:
        """All-GPU, all-DLA on each core (with fallback) and, in pipeline mode, a split over the cores.

        Returns:
            ``{"all-GPU": (placement, measurement), "all-DLA0": ..., "split-DLA0-DLA1": ...}``,
            named as every table prints them; the lower-case names of older placetune
            (``"all-gpu"``) are looked up too.
        """
        out = BaselinesByName()
        for name, _, p in baseline_placements(self):  # printed names: all-GPU, all-DLA0, split-DLA0-DLA1
            m = self.baseline() if name == "all-gpu" else self.evaluate(p, agent="baseline")
            out[name.replace("gpu", "GPU").replace("dla", "DLA")] = (p, m)
        return out

    def best(self) -> tuple[Placement, Measurement] | None:
        """Best ok measurement this study requested (by the primary objective; under
        constraints the best feasible one, else the one closest to feasible). The plan ``placetune
        tune`` reports and exports may be a run's own final pick instead
        (:func:`placetune.tuning.final_pick.study_best`); this is its fallback."""
        self.flush()
        rec = best_stored(self.store, self.study_name, self.objective)
        if rec is None:
            return None
        from placetune.placement.placement import stored_placement

        placement = stored_placement(self.model, rec.requested,
                                     f"measurement {rec.id} of study {self.study_name!r}, field requested")
        return placement, rec.measurement

    def value(self, m: Measurement) -> float | None:
        """Primary objective value of a measurement."""
        return self.objective.value(m)

    def close(self) -> None:
        """Write the evaluations waiting in a batch, then close the store (a second call does nothing)."""
        if self.store.closed:
            return
        try:
            self.flush()
        finally:
            self.store.close()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------- internals
    def _count(self, m: Measurement) -> None:
        self.stats.by_status[m.status] = self.stats.by_status.get(m.status, 0) + 1
        if not m.ok:
            self.stats.failures += 1

    def _own(self, placement: Placement | dict[str, str]) -> Placement:
        """A placement of this evaluator's model (PlacementError for another model's)."""
        if not isinstance(placement, Placement):
            return Placement(self.model, placement)
        if placement.model.hash != self.model.hash:
            raise PlacementError(
                f"placement is for model {placement.model.name!r}, this evaluator measures {self.model.name!r}"
            )
        return placement

    def _again(self, key: str | None, m: Measurement) -> bool:
        """Whether the stored ``m`` of ``key`` is measured again rather than answered: taken under other clocks
        or beside another process's GPU work (:func:`measured_again`), or a ``timeout`` that an earlier run
        stored: its limit (``[backend_options] timeout_s``) may have been raised since, which is what the
        timeout's message advises. Once per run: a timeout this evaluator measured stays the answer."""
        return measured_again(m) or (m.status == "timeout" and key not in self._measured_here)

    def _lookup(self, key: str) -> Measurement | None:
        m = self._memo.get(key)
        if m is not None:
            self._memo.move_to_end(key)
            return m
        t0 = time.perf_counter()
        m = self.store.lookup(*self.study.scope, key)
        if m is not None:
            m.extra["_id"] = self.store.measurement_id(*self.study.scope, key)  # (from the store's LRU)
            self._remember(key, m)
        self.stats.store_seconds += time.perf_counter() - t0
        return m

    def _remember(self, key: str, m: Measurement) -> None:
        self._memo[key] = m
        if len(self._memo) > _MEMO_SIZE:
            self._memo.popitem(last=False)

    def _answer(self, m: Measurement, placement: Placement, cache_hit: bool,
                annotation: dict[str, Any] | None = None) -> Measurement:
        out = copy.copy(m)
        out.extra = {**m.extra, "cache_hit": cache_hit, "requested_key": placement.key}
        if annotation:
            out.extra["annotation"] = dict(annotation)
        if cache_hit:
            out.requested = placement.as_dict()
        return out
