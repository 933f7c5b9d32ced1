"""Replicas mode through trtexec: one whole-network engine per device, timed at once as separate processes."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.measurement import Measurement, latency_stats
from placetune.settings import resolve_replicas
from placetune.backends.trtexec.engine import (
    PARSER_LAYERS,
    Engine,
    TrtexecOptions,
    build,
    build_extra,
    engine_spec,
    onnx_file,
    placement_args,
    realised,
    sampler,
    time_argv,
)
from placetune.backends.timing_method import REPLICAS_TIMED
from placetune.backends.trtexec.parse import parse_summary
from placetune.backends.trtexec.process import Proc, classify
from placetune.backends.trtexec.timing import END_MARKERS, absolute_times, read_times, summary_stats, thin

if TYPE_CHECKING:
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["measure_replicas"]

_STATIC_SHAPES = "Static model does not take explicit shapes"


def measure_replicas(be: TrtexecOptions, r: "Realisation", platform: "Platform", settings: "Settings",
                     version: str, base: dict[str, Any], workdir: Path) -> Measurement:
    """Replicas mode: one whole-network engine per device, all timed at once for ``replica_duration_s``."""
    model = r.realized.model
    predicted = r.realized.as_dict()
    reps, why = resolve_replicas(settings, model.batch, platform.devices, platform.name)
    if why:
        return Measurement.failure("infeasible", why, **base)
    onnx_or_failure = onnx_file(be.cache_dir, model, settings, version, base)
    if isinstance(onnx_or_failure, Measurement):
        return onnx_or_failure
    dla_layers = [n for n, d in predicted.items() if d != "GPU"]
    notes: list[str] = []
    if not dla_layers and any(d != "GPU" for d in reps):
        notes.append("the realised placement has no DLA layer: the DLA replicas run all-GPU engines")
    engines: list[Engine] = []
    for dev, batch in reps.items():
        core = int(dev[3:]) if dev != "GPU" and dla_layers else -1
        if core >= 0:
            # the parser's layers beyond the nodes, from an earlier build of this file (engine.PARSER_LAYERS)
            placement = placement_args(r, platform, settings, version, core,
                                       PARSER_LAYERS.get((str(onnx_or_failure), version)))
            if isinstance(placement, str):
                return Measurement.failure("infeasible", f"replica {dev}: {placement}", realized=predicted, **base)
            place_args, more = placement
        else:
            place_args, more = [], []
        eng = engine_spec(be, onnx_or_failure, model, settings, version, platform, dev, core, int(batch),
                          place_args, workdir, dev.lower())
        eng.notes.extend(more)
        engines.append(eng)
    commands: dict[str, Any] = {"build": {}, "time": {}}
    build_s = 0.0
    for eng in engines:
        if eng.batch != model.batch and not model.dynamic_input_shapes:
            return Measurement.failure(
                "infeasible", f"replica {eng.device} asks batch {eng.batch} but the ONNX file has a static batch "
                f"of {model.batch} (trtexec takes --shapes only for dynamic inputs): export the model with a dynamic "
                "batch dimension to give replicas their own batch", extra={"commands": commands}, **base)
        commands["build"][eng.device] = eng.recorded_argv()
        failure = build(be, eng, version, {**base, "extra": {"replica": eng.device, "commands": commands}})
        if failure is not None:
            failure.reason = f"replica {eng.device}: {failure.reason}"
            return failure
        build_s += eng.built().seconds
        if eng.network:
            PARSER_LAYERS[(str(onnx_or_failure), version)] = eng.network
        if eng.batch != model.batch and any(_STATIC_SHAPES in x for x in eng.built().lines()):
            return Measurement.failure(
                "infeasible", f"replica {eng.device} asks batch {eng.batch} but the ONNX file has a static batch "
                f"of {model.batch} (trtexec ignored --shapes): export the model with a dynamic batch dimension "
                "to give replicas their own batch", build_seconds=build_s, extra={"commands": commands}, **base)
    # the realised placement: the first DLA replica's (realise() reports replicas on DLA0)
    shown = next((e for e in engines if e.core >= 0), engines[0])
    placed = realised(shown, r)
    realized, fallback = placed.realized, placed.fallback
    extra: dict[str, Any] = {"trt_version": version, "commands": commands, **build_extra(shown), **placed.extra}
    # each DLA replica's loadables as its own build log says them, read as the engine mode reads them
    # (TensorRT 10.3 prints 'successfully offloaded' lines, no [DlaLayer] line); unknown ones left out
    placed_by = {e.device: (placed if e is shown else realised(e, r)) for e in engines
                 if e.core >= 0 and e.blog is not None}
    loadables = {dev: p.loadables for dev, p in placed_by.items() if p.loadables is not None}
    for e in engines:
        notes.extend(f"{e.device}: {n}" for n in e.notes)
    if notes:
        extra["notes"] = notes
    # ---- run every replica at once
    files_by: dict[str, dict[str, Path | None]] = {}
    procs: list[tuple[Engine, Proc]] = []
    power = sampler(be)
    if power is not None:
        power.start()
    with be.clock_watch.timing():  # the clocks judged: around these runs, not around the builds
        try:
            for eng in engines:
                argv, files = time_argv(be, eng, version, settings, workdir, eng.device.lower(),
                                        duration_s=be.replica_duration_s, profile=False, serial=False)
                commands["time"][eng.device] = argv
                files_by[eng.device] = files
                procs.append((eng, Proc(argv, workdir / f"{eng.device.lower()}.time.log", be.environ(), workdir,
                                        END_MARKERS)))
            deadline = time.monotonic() + be.timeout_s + be.replica_duration_s + be.warmup_ms / 1000.0
            runs = [(eng, proc.wait(deadline)) for eng, proc in procs]
        except BaseException:
            for _, proc in procs:
                proc.kill()
            raise
        finally:
            if power is not None:
                power.stop()
    kw = dict(realized=realized, fallback=fallback, dla_loadables=loadables, build_seconds=build_s, extra=extra,
              **base)
    per: list[dict[str, Any]] = []
    for eng, run in runs:
        lines = run.lines()
        summary = parse_summary(lines)
        failure = classify(run, lines, summary, "time", kw, be.timeout_s)
        if failure is not None:
            failure.reason = f"replica {eng.device}: {failure.reason}"
            return failure
        records = read_times(files_by[eng.device].get("times"))
        samples = [x["latencyMs"] for x in records if "latencyMs" in x]
        stats = latency_stats(samples) if samples else summary_stats(summary)
        per.append({"device": eng.device, "batch": eng.batch, "dla_core": eng.core if eng.core >= 0 else None,
                    "qps": summary.throughput_qps,
                    "alone_fps": summary.throughput_qps * eng.batch if summary.throughput_qps else None,
                    "latency_ms": stats, "iterations": len(records), "_samples": samples,
                    "_abs": absolute_times(run, records, summary)})
    # ---- throughput while all of them ran
    spans = [p["_abs"] for p in per]
    t_lo = max((s[0][0] for s in spans if s), default=None)
    t_hi = min((s[-1][1] for s in spans if s), default=None)
    overlap = (t_hi - t_lo) if (t_lo is not None and t_hi is not None and all(spans)) else 0.0
    total_fps = 0.0
    for p in per:
        if overlap > 0:
            done = sum(1 for (_, end) in p["_abs"] if t_lo <= end <= t_hi)
            p["throughput_fps"] = done * p["batch"] / overlap
        else:
            p["throughput_fps"] = p["alone_fps"] or 0.0
        total_fps += p["throughput_fps"]
    if overlap > 0:
        extra["overlap_s"] = overlap
        if overlap < 0.5 * be.replica_duration_s:
            extra.setdefault("notes", []).append(
                f"the replicas ran together for only {overlap:.2f} s of {be.replica_duration_s:g} s "
                "(engine loading took long): raise replica_duration_s")
    else:
        extra.setdefault("notes", []).append("the replicas' timed windows could not be aligned: per-replica "
                                             "throughput is each trtexec's own figure")
    slowest = max(per, key=lambda p: p["latency_ms"].get("median", 0.0))
    samples = slowest["_samples"]
    for p in per:
        p.pop("_samples")
        p.pop("_abs")
    extra["replicas"] = per
    extra["timed"] = REPLICAS_TIMED
    # ---- power over the common window
    power_w, energy = None, None
    if power is not None:
        reading = power.reading(t_lo, t_hi) if overlap > 0 else power.reading()
        extra["power"] = reading.to_dict()
        power_w = reading.mean_w
        if power_w is not None and total_fps > 0:
            extra["energy_per_sample_mj"] = power_w / (total_fps / 1000.0)
            energy = extra["energy_per_sample_mj"] * base["batch"]
    else:
        extra["power"] = {"mean_w": None, "reason": "power sampling is off (power=False)"}
    kw.update(latency_samples_ms=thin(samples), latency_ms=slowest["latency_ms"],
              throughput_fps=total_fps or None, power_w=power_w, energy_mj=energy)
    return Measurement(status="ok", **kw)
