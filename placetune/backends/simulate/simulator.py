"""The simulated Jetson: a calibrated cost model + discrete-event schedule, no hardware.

Every figure it produces is **simulated** (``Measurement.simulated`` is True, the backend is
``simulate-<version>``). It plans placements where no Jetson is at hand; the constants and
what they were fitted to are in :mod:`placetune.backends.simulate.costs` and ``docs/simulator.md``.

Example:
    >>> from placetune import Model
    >>> from placetune.placement import Placement
    >>> from placetune.platforms import get_platform
    >>> from placetune.realise import realise
    >>> from placetune.settings import Settings
    >>> from placetune.backends.simulate import SimulatedJetson
    >>> m = Model.load("resnet18", batch=1)
    >>> orin = get_platform("orin-agx")
    >>> r = realise(Placement.all_gpu(m), orin, precision="int8")
    >>> meas = SimulatedJetson().measure(r, orin, Settings(precision="int8"))
    >>> meas.ok, meas.simulated
    (True, True)
"""

from __future__ import annotations

import math
import os
from operator import itemgetter
from typing import TYPE_CHECKING, Any
import dataclasses

import numpy as np

from placetune.measurement import Measurement
from placetune.backends.simulate.costs import (
    CODE_DEVICE,
    DEVICE_CODE,
    SIM_VERSION,
    CostTable,
    cost_table,
    graph_info,
    power_factor,
)
from placetune.backends.simulate.noise import samples as noise_samples
from placetune.backends.simulate.profiled import apply_profile
from placetune.backends.simulate.build_time import BuildClock, engine_specs
from placetune.backends.simulate.schedule import Task, run, run_closed_loops
from placetune.backends.simulate.steady import steady_state

from placetune.backends.base import BackendBase, Capabilities
from placetune.settings import resolve_replicas
from placetune.errors import ConfigError
from placetune.inputdata import load_input_data
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    from placetune.calibration import profile as device_profiles
    from placetune.hardware.platforms import Platform
else:  # the calibration package's own modules import this simulator
    device_profiles = lazy_import("placetune.calibration.profile")
    from placetune.hardware.power_modes import ClockScale
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["SimulatedJetson", "simulate_concurrent", "SIM_VERSION", "DLA_MAX_BATCH"]

#: TensorRT DLA restriction G1 (reference tensorrt-dla.md §3.1).
DLA_MAX_BATCH = 4096
#: Replicas mode: iterations of the slowest instance that are simulated.
_REPLICA_ITERATIONS = 3
#: Cap on simulated tasks per measurement (keeps pathological cases fast).
_MAX_TASKS = 20000
#: Floor of any simulated time (an engine of shape-only layers still costs an enqueue).
_MIN_MS = 1e-3
#: Timeline events kept per measurement.
_MAX_EVENTS = 2000


class SimulatedJetson(BackendBase):
    """The ``simulate`` backend: turns a realised placement into a simulated Measurement.

    Modes (``settings.mode``): ``engine`` (one engine, segments run one after the other),
    ``pipeline`` (one engine per segment, a DAG of engines; ``frames_in_flight`` frames at once
    for the throughput figure) and ``replicas`` (a whole-network instance per device of
    ``settings.replicas``, all at once). Shared-DRAM contention slows devices that run at
    the same time. Everything reported is simulated.

    Every engine pays ``engine_ms`` (enqueue, launch and synchronisation) once per inference:
    in ``engine`` mode the one engine (counted in the first segment's time), in ``pipeline``
    mode every segment (each is an engine), in ``replicas`` mode every replica's engine.

    Args:
        timeline: record timeline events (``Measurement.timeline``).
        profile: a :class:`~placetune.calibration.profile.DeviceProfile` (or the path of its TOML
            file): measure a device that differs from the nominal simulator by its corrections.
            Its ``base`` must be the platform measured. Part of the fingerprint.
        noise: relative timing noise that overrides ``settings.noise`` (None: use the settings').
            Part of the fingerprint when set.
        device_profile: the same as ``profile`` (the option's name in ``get_backend`` and the CLI).
        separate_processes: ``replicas`` mode runs every replica as its own process (as the trtexec
            backend does: one trtexec per device), so the GPU parts of different replicas share the
            GPU by time slices: a DLA replica's fallback segment ready while another replica's GPU
            work runs waits half a slice first (``schedule.GPU_TIMESLICE_US``) and its DLA idles.
            False (default): the replicas are streams of one process (the TensorRT backend's
            threads, MLPerf's harness), no such wait. Part of the fingerprint when True.
    """

    name = "simulate"
    capabilities = Capabilities(simulated=True, objectives=("latency", "throughput", "energy", "gpu_time"),
                                build_counter=True, device_profile=True, cost_tables=True, input_data=True)

    def __init__(self, timeline: bool = True, profile: Any = None, noise: float | None = None,
                 device_profile: Any = None, separate_processes: bool = False, input_data: Any = None) -> None:
        # accepted and recorded (timed_input), never used: the simulator runs no network on any input
        self.input_data = load_input_data(input_data) if input_data else None
        if device_profile is not None:
            profile = device_profile
        if not isinstance(timeline, bool):  # (a study file's timeline = "no" is a true string)
            raise ConfigError(f"timeline must be true or false, got {str(timeline)[:40]!r}")
        self.timeline = timeline
        if profile is not None and not isinstance(profile, device_profiles.DeviceProfile):
            if not isinstance(profile, (str, os.PathLike)):  # ([backend_options] profile = 5: a TypeError before)
                raise ConfigError(f"device_profile must be the path of a device profile (TOML) or a DeviceProfile, "
                                  f"got {type(profile).__name__} {str(profile)[:40]!r}")
            profile = device_profiles.load_device_profile(profile)
        self.profile = None if profile is None or profile.is_nominal else profile
        self.base_profile = profile
        # the range Settings takes (checked here, before a study is stored with this noise in its fingerprint)
        if noise is not None and (isinstance(noise, bool) or not isinstance(noise, (int, float))
                                  or not math.isfinite(noise) or not 0 <= noise <= 1):
            raise ConfigError(f"noise must be a number from 0 to 1 (a relative standard deviation), got "
                              f"{str(noise)[:40]!r}")
        self.noise = None if noise is None else float(noise)
        if not isinstance(separate_processes, bool):
            raise ConfigError(f"separate_processes must be true or false, got {separate_processes!r}")
        self.separate_processes = separate_processes
        self.clock = BuildClock()  # simulated engine cache: device time per measurement
        self._builds: dict[tuple[str, str], int] = {}  # build counter per (placement, mode): noise.py

    def forget_builds(self, key: str | None = None) -> None:
        """Forget how often a realised placement (``key``; every one when None) was built, so its
        next measurement is a first build again (noise.py draws a tactic factor per build)."""
        if key is None:
            self._builds.clear()
        else:
            for k in [k for k in self._builds if k[0] == key]:
                del self._builds[k]

    def advance_builds(self, key: str, mode: str, next_build: int) -> None:
        """Make the next build of realised placement ``key`` in ``mode`` number ``next_build`` or later:
        a re-measurement in a new process continues the stored builds instead of drawing the first
        build's figures again (noise.py)."""
        bkey = (key, mode)
        self._builds[bkey] = max(self._builds.get(bkey, -1), int(next_build) - 1)

    # ---------------------------------------------------------------- protocol
    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """``{"backend": "simulate", "version": SIM_VERSION, "platform": ..., "power_mode": ...}``,
        plus ``"profile"`` (its digest) with a non-nominal device profile and ``"noise"`` when
        the backend overrides the settings' noise.

        Raises:
            ConfigError: the device profile's base is not ``platform``.
        """
        self.check_base(platform)
        fp = {"backend": "simulate", "version": SIM_VERSION, "platform": platform.name,
              "power_mode": settings.power_mode}
        if self.profile is not None:
            fp["profile"] = self.profile.digest()
        if self.noise is not None:
            fp["noise"] = self.noise
        if self.separate_processes:
            fp["processes"] = "separate"
        return fp

    def check_base(self, platform: "Platform") -> None:
        """ConfigError when the device profile was fitted on another platform than ``platform``."""
        prof = self.base_profile
        if prof is not None and prof.base != platform.name:
            raise ConfigError(f"the device profile's base is {prof.base!r} but the platform measured is "
                              f"{platform.name!r}; use --platform {prof.base} or a profile of {platform.name}")

    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        """Simulate the realised placement in ``settings.mode``; failures are returned.

        ``extra["timed_input"]`` records the study's input; a simulated figure does not depend on it.

        Raises:
            ConfigError: the device profile's base is not ``platform``.
        """
        m = self._measure(realisation, platform, settings)
        m.extra["timed_input"] = settings.timed_input
        return m

    def _measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        self.check_base(platform)
        if self.noise is not None and settings.noise != self.noise:
            settings = dataclasses.replace(settings, noise=self.noise)
        realized = realisation.realized
        model = realized.model
        g = graph_info(model)
        base = dict(simulated=True, backend=f"simulate-{SIM_VERSION}", mode=settings.mode,
                    precision=settings.precision, batch=int(model.batch),
                    requested=realisation.requested.as_dict(), realized=realized.as_dict(),
                    fallback=dict(realisation.fallback))
        codes = _codes(base["realized"], g)
        power = power_factor(platform, settings.power_mode)
        if power is None:
            return Measurement.failure(
                "infeasible", f"{platform.name} has no power mode {settings.power_mode!r}; "
                f"modes: {platform.mode_list()}", **base)
        uses_dla = bool((codes > 0).any())
        if uses_dla and settings.precision not in ("fp16", "int8"):
            return Measurement.failure(
                "infeasible", f"DLA runs fp16 or int8 only, not {settings.precision}; "
                "realise() with this precision moves every layer to the GPU", **base)
        if settings.mode == "replicas":
            return self._replicas(realisation, platform, settings, power, codes, base)
        if uses_dla and model.batch > DLA_MAX_BATCH:
            return Measurement.failure(
                "infeasible", f"batch {model.batch} exceeds the DLA limit of {DLA_MAX_BATCH}; "
                "use a smaller batch or keep the layers on the GPU", **base)
        table = apply_profile(cost_table(model, platform, settings.precision, model.batch, power), self.profile)
        if settings.mode == "pipeline":
            return self._pipeline(realisation, platform, settings, table, codes, base)
        return self._engine(realisation, platform, settings, table, codes, base)

    # ---------------------------------------------------------------- engine
    def _engine(self, r, platform, settings, table: CostTable, codes, base) -> Measurement:
        pick = table.selection(codes)
        t, by, bms, bby = table.costs_of(pick)
        fused, nb = pick.fused, pick.boundaries
        segs = r.realized.segments(pipeline=False)
        seg_time, seg_bytes, seg_dev = _segment_sums(segs, table, t + bms, by + bby)
        profiled = profiled_layer_times(t, segs, seg_time, seg_dev, table.g)
        seg_time[0] += table.engine_ms  # one engine: one enqueue + synchronisation per inference
        latency = float(seg_time.sum())
        busy = {d: float(seg_time[seg_dev == c].sum()) for c, d in enumerate(CODE_DEVICE) if (seg_dev == c).any()}
        seg_list, events = [], []
        now = 0.0
        for s, st in zip(segs, seg_time.tolist()):
            seg_list.append({"index": s.index, "device": s.device, "layers": len(s.layers), "time_ms": st,
                             "start_ms": now, "end_ms": now + st, "ranges": _ranges(s.layers, table.g)})
            if self.timeline:
                events.append({"device": s.device, "name": f"seg{s.index}", "start_ms": now, "end_ms": now + st, "frame": 0})
            now += st
        extra = {"boundaries": nb, "boundary_ms": float(bms.sum()), "islands": int((seg_dev > 0).sum()),
                 "fused_layers": int(fused.sum()), "busy_ms": busy}
        return self._finish(settings, platform, base, r, latency, None, busy, latency,
                            seg_list, profiled, table, events, extra)

    # ---------------------------------------------------------------- pipeline
    def _pipeline(self, r, platform, settings, table: CostTable, codes, base) -> Measurement:
        pick = table.selection(codes)
        t, by, bms, bby = table.costs_of(pick)
        fused, nb = pick.fused, pick.boundaries
        segs = r.realized.segments(pipeline=True)
        seg_time, seg_bytes, seg_dev = _segment_sums(segs, table, t + bms, by + bby)
        profiled = profiled_layer_times(t, segs, seg_time, seg_dev, table.g)
        seg_time = seg_time + table.engine_ms  # every segment is an engine
        sens = table.sensitivity()
        one = run(_frame_tasks(segs, seg_time, seg_bytes, table, frames=1, in_flight=1), sens)
        latency = one.makespan
        k = settings.frames_in_flight
        extra = {"boundaries": nb, "boundary_ms": float(bms.sum()), "islands": int((seg_dev > 0).sum()),
                 "fused_layers": int(fused.sum()), "serial_sum_ms": float(seg_time.sum())}
        if k == 1:
            period = latency
            busy = {d: v for d, v in ((d, one.busy_ms(d)) for d in one.busy) if v > 0}
            events = _events(one.tasks) if self.timeline else []
        else:  # the periodic steady state of k frames in flight (placetune.backends.simulate.steady)
            ss = steady_state(seg_dev, seg_time, table.demands(seg_time, seg_bytes), latency, k,
                              tuple(sens[d] for d in CODE_DEVICE))
            period = ss.period_ms
            extra["latency_in_flight_ms"] = ss.latency_ms
            busy = {d: v for d, v in zip(CODE_DEVICE, ss.busy_ms) if v > 0}
            # the first k frames as the event scheduler runs them (each DLA core one engine at a time);
            # frame 0's schedule repeated a period later drew a core running two engines at once
            events = _events(run(_frame_tasks(segs, seg_time, seg_bytes, table, frames=k, in_flight=k),
                                 sens).tasks) if self.timeline else []
        extra["busy_ms"] = busy
        seg_list = []
        for s, st in zip(segs, seg_time.tolist()):
            task = one.tasks[s.index]
            seg_list.append({"index": s.index, "device": s.device, "layers": len(s.layers), "time_ms": st,
                             "start_ms": task.start, "end_ms": task.end, "predecessors": list(s.predecessors),
                             "ranges": _ranges(s.layers, table.g)})
        return self._finish(settings, platform, base, r, latency, None, busy, period,
                            seg_list, profiled, table, events, extra)

    # ---------------------------------------------------------------- replicas
    def _replicas(self, r, platform, settings, power, codes, base) -> Measurement:
        model = r.realized.model
        reps, why = resolve_replicas(settings, model.batch, platform.devices, platform.name)
        if why:
            return Measurement.failure("infeasible", why, **base)
        uses_dla = bool((codes > 0).any())
        for d, b in reps.items():
            if d != "GPU" and uses_dla and b > DLA_MAX_BATCH:
                return Measurement.failure(
                    "infeasible", f"replica {d} batch {b} exceeds the DLA limit of {DLA_MAX_BATCH}", **base)
        segs = r.realized.segments(pipeline=False)
        extra: dict[str, Any] = {}
        if not uses_dla and any(d != "GPU" for d in reps):
            extra["notes"] = ["the realised placement has no DLA layer: the DLA replicas run on the GPU"]
        instances = [_instance(model, platform, settings.precision, power, codes, segs, dev, b, self.profile)
                     for dev, b in reps.items()]
        sens = instances[0]["table"].sensitivity()
        loops = [[(d, ms, inst["table"].demand(nb, ms)) for d, ms, nb in inst["parts"]] for inst in instances]
        periods, sched, t1 = run_closed_loops(loops, sens, iterations=_REPLICA_ITERATIONS, max_tasks=_MAX_TASKS,
                                              separate_processes=self.separate_processes)
        per_instance, total_fps = [], 0.0
        for inst, period in zip(instances, periods):
            fps = 1000.0 * inst["batch"] / period
            total_fps += fps
            per_instance.append({"device": inst["device"], "batch": inst["batch"], "latency_ms": period,
                                 "throughput_fps": fps, "alone_ms": sum(p[1] for p in inst["parts"]),
                                 "segments": len(inst["parts"])})
        latency = max(periods)
        busy_frac = {d: sched.busy_ms(d, 0.0, t1) / t1 for d in sched.busy}
        busy = {d: f * latency for d, f in busy_frac.items() if f > 0}
        # segments / layer times are reported for the first DLA instance (else the GPU one), alone
        shown = next((x for x in instances if x["device"] != "GPU"), instances[0])
        seg_list, now = [], 0.0
        for k, ((d, ms, _), si) in enumerate(zip(shown["parts"], shown["part_seg"])):
            s = segs[si] if si is not None and shown["device"] != "GPU" else None
            whole = shown["device"] == "GPU"  # else a DLA replica's part of reformats only: no layer
            seg_list.append({"index": k, "device": d, "layers": len(s.layers) if s else len(model.layers) * whole,
                             "time_ms": ms, "start_ms": now, "end_ms": now + ms,
                             "ranges": _ranges(s.layers, shown["table"].g) if s
                             else [[0, len(model.layers) - 1]] if whole else []})
            now += ms
        for task in sched.tasks:  # name timeline events after the replica they belong to
            task.label = f"{instances[task.group]['device']}-replica part{task.key[2]}"
        extra.update(replicas=per_instance, busy_ms=busy, window_ms=t1)
        events = _events(sched.tasks) if self.timeline else []
        m = self._finish(settings, platform, base, r, latency, total_fps, busy, latency, seg_list,
                         shown["t"], shown["table"], events, extra)
        # realise() counts the DLA loadables on DLA0; each DLA replica builds that many on its own core
        n_load = max(r.loadables.values(), default=0)
        m.dla_loadables = {d: (n_load if d in reps else 0) for d in r.loadables}
        # energy per model-batch inference = mean power / samples per ms * model batch
        p_w = _power(platform, busy_frac, power)
        m.power_w = p_w
        m.energy_mj = p_w / (total_fps / 1000.0) * model.batch
        m.extra["energy_per_sample_mj"] = p_w / (total_fps / 1000.0)
        return m

    # ---------------------------------------------------------------- common
    def _finish(self, settings, platform, base, r, latency, fps, busy, period, seg_list, t, table, events, extra):
        """Samples, throughput, energy and the Measurement (latency / period in ms)."""
        bkey = (r.realized.key, settings.mode)
        build = self._builds[bkey] = self._builds.get(bkey, -1) + 1
        samples, stats, fps, p_w, energy, by_dev, period = figures(settings, platform, table, r.realized.key,
                                                                   latency, fps, busy, period, build=build)
        extra["build"] = build
        extra["power_w_by_device"] = by_dev
        extra["period_ms"] = period
        extra["sim_version"] = SIM_VERSION
        mode = settings.mode
        instances = [x["device"] for x in extra.get("replicas", ())]
        segs = r.realized.segments(pipeline=mode == "pipeline")
        key = (r.realized.model.hash, settings.precision, int(table.batch))
        device = self.clock.charge(engine_specs(key, mode, segs, instances), latency_ms=stats["median"],
                                   iterations=settings.iterations)
        extra["device_time_s"] = device  # simulated: what this evaluation would cost on a Jetson
        g = table.g
        return Measurement(
            status="ok", latency_samples_ms=samples, latency_ms=stats, throughput_fps=float(fps),
            dla_loadables=dict(r.loadables), segment_times_ms=seg_list,
            layer_times_ms=dict(zip(g.names, t.tolist())), energy_mj=float(energy), power_w=float(p_w),
            build_seconds=float(device["build_s"]), timeline=events[:_MAX_EVENTS], extra=extra, **base)


def figures(settings, platform, table: CostTable, key: str, latency: float, fps, busy: dict[str, float],
            period: float, build: int = 0):
    """``(samples, stats, fps, power_w, energy_mj, power_w_by_device, period)`` of a simulated run
    (shared by :class:`SimulatedJetson` and the incremental evaluation, so both report alike);
    ``build``: the build number of the placement (noise.py: each build draws its own tactic factor)."""
    latency, period = max(latency, _MIN_MS), max(period, _MIN_MS)
    if fps is None:  # one inference of table.batch samples per period
        fps = 1000.0 * table.batch / period
    power = table.power
    samples, stats = noise_samples(latency, settings.noise, settings.iterations, settings.seed, key,
                                   settings.mode, build)
    scale = stats["median"] / latency if latency > 0 else 1.0
    fps = fps / scale if scale > 0 else fps
    # energy per inference: idle over the period + each device's active power while busy
    frac = {d: (ms / period if period > 0 else 0.0) for d, ms in busy.items()}
    p_w = _power(platform, frac, power)
    energy = p_w * period  # W x ms = mJ
    by_dev = {d: _active_w(platform, d, power) * f for d, f in frac.items()}
    return samples, stats, fps, p_w, energy, by_dev, period


def simulate_concurrent(jobs, platform: "Platform", precision: str = "int8", power_mode: str = "MAXN",
                        iterations: int = _REPLICA_ITERATIONS, separate_processes: bool = False) -> list[dict[str, Any]]:
    """Several engines (possibly of different models) running at once, each in a closed loop.

    This is the multi-model form of ``replicas`` mode (e.g. the "3 models on GPU, DLA0 and
    DLA1" contention case of the reference). All figures are simulated.

    Args:
        jobs: ``(realisation, device)`` pairs: the realised placement of a model runs as one
            engine at the model's batch; on ``"GPU"`` it runs all-GPU, on ``"DLA0"``/``"DLA1"``
            its DLA layers run on that core and its fallback layers on the shared GPU.
        platform: the Jetson profile.
        precision: ``fp16`` or ``int8`` (``fp32`` for GPU-only jobs).
        power_mode: a power mode of the platform.
        iterations: inferences of the slowest engine that are simulated.
        separate_processes: every engine is its own process (e.g. one trtexec each): GPU work of
            one engine that is ready while another engine's GPU work runs waits half a GPU time
            slice first (a DLA engine's fallback segment: its DLA idles meanwhile). False: the
            engines are streams of one process.

    Returns:
        Per job: ``device``, ``model``, ``alone_ms`` (latency alone), ``latency_ms`` (with the
        others running), ``throughput_fps`` and ``slowdown`` (latency_ms / alone_ms).

    Example:
        >>> jobs = [(realise(Placement.all_gpu(m), orin), "GPU"),            # doctest: +SKIP
        ...         (realise(Placement.all_dla(m), orin, precision="int8"), "DLA0")]
        >>> [round(j["slowdown"], 2) for j in simulate_concurrent(jobs, orin)]  # doctest: +SKIP
        [1.4, 1.06]
    """
    power = power_factor(platform, power_mode)
    if power is None:
        raise ConfigError(f"{platform.name} has no power mode {power_mode!r}; modes: {platform.mode_list()}")
    instances = []
    for realisation, device in jobs:
        if device not in platform.devices:
            raise ConfigError(f"{platform.name} has no device {device!r}; devices: {', '.join(platform.devices)}")
        model = realisation.realized.model
        codes = _codes(realisation.realized.as_dict(), graph_info(model))
        segs = realisation.realized.segments(pipeline=False)
        inst = _instance(model, platform, precision, power, codes, segs, device, int(model.batch))
        inst["model"] = model.name
        instances.append(inst)
    sens = instances[0]["table"].sensitivity()
    loops = [[(d, ms, inst["table"].demand(nb, ms)) for d, ms, nb in inst["parts"]] for inst in instances]
    periods, _, _ = run_closed_loops(loops, sens, iterations=iterations, max_tasks=_MAX_TASKS,
                                     separate_processes=separate_processes)
    out = []
    for inst, period, loop in zip(instances, periods, loops):
        alone = run_closed_loops([loop], sens, iterations=2)[0][0]
        out.append({"device": inst["device"], "model": inst["model"], "alone_ms": alone, "latency_ms": period,
                    "throughput_fps": 1000.0 * inst["batch"] / period, "slowdown": period / alone})
    return out


# =========================================================================================
# helpers
# =========================================================================================
def _codes(realized: dict[str, str], g) -> np.ndarray:
    if len(realized) != g.n or list(realized) != g.names:
        realized = {n: realized[n] for n in g.names}
    return np.fromiter(map(DEVICE_CODE.__getitem__, realized.values()), dtype=np.intp, count=g.n)


def profiled_layer_times(t: np.ndarray, segs, seg_time: np.ndarray, seg_dev: np.ndarray, g) -> np.ndarray:
    """Per-layer times as the TensorRT backends report them (``Measurement.layer_times_ms``).

    TensorRT's profiler times a DLA loadable as one ``{ForeignNode[...]}`` entry, and the
    backends (:func:`placetune.backends.tensorrt.layer_profile.attribute_profile`) split that entry's
    time, copies included, evenly over its layers; GPU layers are timed one by one. The simulated
    backend reports the same, so a calibration fit sees on the simulator no more than it would
    see on a Jetson: a DLA segment's time (its island overhead and incoming boundaries
    included), not how it divides among the segment's layers.
    """
    out = t.copy()
    for s, ms, dev in zip(segs, seg_time.tolist(), seg_dev.tolist()):
        if dev > 0 and s.layers:
            out[[g.index[n] for n in s.layers]] = ms / len(s.layers)
    return out


def _segment_index(segs, g) -> tuple[np.ndarray, np.ndarray]:
    """The segment of every layer and the device code of every segment."""
    names = [n for s in segs for n in s.layers]
    ids = [s.index for s in segs for _ in s.layers]
    seg_of = np.empty(g.n, dtype=np.intp)
    seg_of[list(itemgetter(*names)(g.index)) if len(names) > 1 else [g.index[names[0]]]] = ids
    seg_dev = np.fromiter((DEVICE_CODE[s.device] for s in segs), dtype=np.intp, count=len(segs))
    return seg_of, seg_dev


def _segment_sums(segs, table: CostTable, ms: np.ndarray, nbytes: np.ndarray):
    """Per segment: time (layers + incoming boundaries + DLA island overhead), bytes, device code."""
    return segment_sums_of(*_segment_index(segs, table.g), table, ms, nbytes)


def segment_sums_of(seg_of: np.ndarray, seg_dev: np.ndarray, table: CostTable, ms: np.ndarray, nbytes: np.ndarray):
    """:func:`_segment_sums` given the segment of every layer and the device code of every segment."""
    k = len(seg_dev)
    seg_time = np.bincount(seg_of, weights=ms, minlength=k)
    seg_bytes = np.bincount(seg_of, weights=nbytes, minlength=k)
    seg_time = seg_time + np.where(seg_dev > 0, table.island_ms, 0.0)
    return seg_time, seg_bytes, seg_dev


def _instance(model, platform, precision, power, codes, segs, device, batch, profile=None) -> dict[str, Any]:
    """One replica: the whole network on ``device`` at ``batch`` as a list of parts (device, ms, bytes).

    The GPU replica is one all-GPU engine; a DLA replica runs the realised placement with its
    DLA layers on ``device`` (its fallback layers are GPU parts that share the GPU). A DLA
    segment's reformats are GPU work (TensorRT's reformat layers are GPU kernels): the ones into
    its input format join the GPU part before it and its model output's the GPU part after it,
    or are GPU parts of their own. ``part_seg``: the segment index of each part (None: reformats only).
    """
    table = apply_profile(cost_table(model, platform, precision, batch, power), profile)
    if device == "GPU":
        t, by, _ = table.layer_costs(np.zeros_like(codes))
        parts = [("GPU", float(t.sum()) + table.engine_ms, float(by.sum()))]
        part_seg: list[int | None] = [None]
    else:
        icodes = np.where(codes > 0, DEVICE_CODE[device], 0)
        pick = table.selection(icodes)
        t, by, bms, bby = table.costs_of(pick)
        pre, pre_b, post = table.dla_reformats(pick)
        seg_of, sd = _segment_index(segs, table.g)
        st, sb, _ = segment_sums_of(seg_of, sd, table, t + bms - pre - post, by + bby - pre_b)
        k = len(sd)
        r_in, r_in_b, r_out = (np.bincount(seg_of, weights=w, minlength=k).tolist() for w in (pre, pre_b, post))
        raw = []  # [device, ms, bytes, segment]
        for i, (c, x, y) in enumerate(zip(sd.tolist(), st.tolist(), sb.tolist())):
            if c:
                raw += [["GPU", r_in[i], r_in_b[i], None], [device, x, y, i], ["GPU", r_out[i], 0.0, None]]
            else:
                raw.append(["GPU", x, y, i])
        merged: list[list] = []
        for p in raw:
            if p[3] is None and p[1] <= 0.0:
                continue  # no reformat there
            if merged and merged[-1][0] == "GPU" == p[0]:  # contiguous GPU work of one stream
                merged[-1][1] += p[1]
                merged[-1][2] += p[2]
                merged[-1][3] = p[3] if merged[-1][3] is None else merged[-1][3]
            else:
                merged.append(p)
        merged[0][1] += table.engine_ms  # the replica is one engine
        parts = [(d, x, y) for d, x, y, _ in merged]
        part_seg = [i for *_, i in merged]
    return {"device": device, "batch": int(batch), "parts": parts, "part_seg": part_seg, "table": table, "t": t}


def _ranges(names, g) -> list[list[int]]:
    """Model-layer indices of a segment's layers as ``[first, last]`` runs (compact for the store)."""
    idx = sorted(g.index[n] for n in names)
    out: list[list[int]] = []
    for i in idx:
        if out and i == out[-1][1] + 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return out


def _frame_tasks(segs, seg_time, seg_bytes, table, frames: int, in_flight: int) -> list[Task]:
    """Tasks of ``frames`` frames of a segment DAG, at most ``in_flight`` frames at once."""
    k = len(segs)
    has_succ = [False] * k
    for s in segs:
        for p in s.predecessors:
            has_succ[p] = True
    sinks = [i for i in range(k) if not has_succ[i]]
    tasks = []
    st, sb = seg_time.tolist(), seg_bytes.tolist()
    for f in range(frames):
        base = f * k
        gate = tuple((f - in_flight) * k + i for i in sinks) if f >= in_flight else ()
        for s in segs:
            preds = tuple(base + p for p in s.predecessors) or gate
            tasks.append(Task(s.device, st[s.index], table.demand(sb[s.index], st[s.index]), preds,
                              key=(f, s.index), stream=0, label=f"seg{s.index}", frame=f))
    return tasks


def _events(tasks) -> list[dict[str, Any]]:
    out = [{"device": t.device, "name": t.label, "start_ms": t.start, "end_ms": t.end, "frame": t.frame}
           for t in tasks if t.end > t.start]
    out.sort(key=lambda e: (e["start_ms"], e["device"]))
    return out[:_MAX_EVENTS]


def _active_w(platform, device: str, power: "ClockScale") -> float:
    # ESTIMATE: a device's active power scales with its compute rate in the power mode (GPU: active
    # TPCs x clock; DLA: its clock)
    return platform.gpu_active_w * power.gpu if device == "GPU" else platform.dla_active_w * power.dla


def _power(platform, busy_fraction: dict[str, float], power: "ClockScale") -> float:
    """Mean module power (W): idle + active power of each device times its busy fraction."""
    return platform.idle_w + sum(_active_w(platform, d, power) * min(1.0, f) for d, f in busy_fraction.items())
