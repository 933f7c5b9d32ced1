"""``placetune measure``: one placement, built and timed by a backend, shown as a table or JSON."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from placetune.cli.checks import load_model
from placetune.cli.terminal import show, table, terminal_width
from placetune.wording import plural, wrap
from placetune._lazy import lazy_import
from placetune.errors import ConfigError, PlacementError, PlacetuneError
from placetune.files.read import check_regular, read_text
from placetune.safetext import shown
from placetune.validate import loads_json
from placetune.hardware.platforms import get_platform

if TYPE_CHECKING:
    import placetune.tuning.evaluator as _evaluator
    import placetune.placement.placement as _placement
    import placetune.backends.registry as _registry
    import placetune.settings as _settings
    import placetune.tuning.oom_stop as _oom_stop
    import placetune.backends.oom as _oom
    import placetune.plan.file as _plan_file
else:
    _evaluator = lazy_import("placetune.tuning.evaluator")
    _placement = lazy_import("placetune.placement.placement")
    _registry = lazy_import("placetune.backends.registry")
    _settings = lazy_import("placetune.settings")
    _oom_stop = lazy_import("placetune.tuning.oom_stop")
    _oom = lazy_import("placetune.backends.oom")
    _plan_file = lazy_import("placetune.plan.file")

__all__ = ["cmd_measure", "calibration_cache"]


def _is_plan(path: str | Path) -> bool:
    """True when ``path`` is a regular file whose JSON object says it is a placetune plan (its ``format``),
    whole or not: a damaged plan is refused by the plan's own checks (its version, batch, mode...), not read as
    a placement ("placement has unknown key(s) 'backend', 'baselines', ...", naming none of what was wrong)."""
    if _plan_file.is_plan_file(path):
        return True
    try:
        doc = loads_json(read_text(path, "placement file", error=PlacementError), "placement file")
    except PlacetuneError:
        return False
    return isinstance(doc, dict) and doc.get("format") == _plan_file.PLAN_FORMAT


def _parse_placement(text: str, model, platform):
    low = text.strip().lower()
    if low in ("all-gpu", "gpu"):
        return _placement.Placement.all_gpu(model)
    if low in ("all-dla", "dla", "dla0", "all-dla0"):
        return _placement.Placement.all_dla(model, 0)
    if low in ("dla1", "all-dla1"):
        return _placement.Placement.all_dla(model, 1)
    if text.lstrip().startswith("{"):
        return _placement.Placement.from_json(model, text)
    path = Path(text)
    try:
        exists = text == "-" or os.path.lexists(path)
    except (OSError, ValueError):  # a name too long for the file system
        exists = False
    if exists and text != "-" and _is_plan(path):  # the plan tune or export wrote: its placement
        return _plan_file.load(path, model).placement(model, "requested")
    if exists:  # a regular file (or - for standard input); a FIFO or a device is refused, never read
        return _placement.Placement.from_json(model, read_text(text, "placement file", error=PlacementError, stdin=True))
    raise PlacementError(f"--placement {text[:80]!r}: expected all-gpu, all-dla, dla0, dla1, a JSON file or JSON text")


#: measure's defaults of the options a plan also sets (the parser leaves them None, so that a plan's own
#: values fill what the command line left out)
_DEFAULTS = {"platform": "orin-agx", "mode": "engine", "frames_in_flight": 1, "power_mode": "MAXN"}


def _plan_options(text: str | None, model, args: argparse.Namespace) -> str:
    """``--placement PLAN.json`` (a plan tune or export wrote) is measured as it was tuned: the platform,
    mode, precision, frames in flight, power mode, replicas and TensorRT rules left out of the command
    line are the plan's; one given otherwise (or a batch other than the plan's) is refused in one line
    naming the options that measure it as tuned (exit 6). Returns the line that says which options were
    taken from the plan ("" when none were). Then every option still left out gets measure's default."""
    taken = ""
    if text and text != "-" and not text.lstrip().startswith("{") and os.path.exists(text) \
            and _is_plan(text):
        taken = _from_plan(text, _plan_file.load(text, model, check_hash=False), model, args)
    for dest, value in _DEFAULTS.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)
    if args.precision is None:
        args.precision = _settings.DEFAULT_PRECISION
    return taken


def _from_plan(text: str, plan, model, args: argparse.Namespace) -> str:
    board = get_platform(plan.platform)
    wanted = {"--platform": ("platform", plan.platform), "--mode": ("mode", plan.mode),
              "--precision": ("precision", plan.precision)}
    if plan.mode == "pipeline":
        wanted["--frames-in-flight"] = ("frames_in_flight", plan.settings.get("frames_in_flight") or 1)
    if plan.settings.get("power_mode"):  # a MAXN_SUPER plan measured at MAXN is another plan's timing
        wanted["--power-mode"] = ("power_mode", _power_mode(board, plan.settings["power_mode"]))
    if plan.mode == "replicas" and plan.settings.get("replicas"):
        reps = plan.settings["replicas"]
        wanted["--replicas"] = ("replicas", ",".join(f"{d}:{b}" for d, b in reps.items()) if isinstance(reps, dict)
                                else reps)
    if plan.settings.get("trt_version"):
        wanted["--trt-version"] = ("trt_version", str(plan.settings["trt_version"]))
    differ, taken = [], []
    for flag, (dest, want) in wanted.items():
        have = getattr(args, dest)
        if want is None:
            continue
        if have is None:
            setattr(args, dest, want)
            usual = {**_DEFAULTS, "precision": _settings.DEFAULT_PRECISION,
                     "trt_version": board.default_trt_version}.get(dest)
            if str(want).lower() != str(usual).lower():  # said only where it is not what a bare measure takes
                taken.append(f"{flag} {want}")
            continue
        if dest == "power_mode":
            have = _power_mode(board, have)
        if dest == "replicas":
            continue  # replicas given: the plan's placement on the instances given
        if str(have).lower() != str(want).lower():
            differ.append(f"{flag} {want}")
    how = [f"{' '.join(differ)} (or leave the option out)"] if differ else []
    if model.batch != plan.batch and plan.batch is not None:  # never taken from the plan: leaving it out is no cure
        how.append(f"--batch {plan.batch}" + (f" (without --batch the model loads at batch {model.batch})"
                                              if getattr(args, "batch", None) is None else ""))
    if how:
        raise ConfigError(f"--placement {shown(text)} is a plan of {plan.model.get('name')} on {plan.platform}, "
                          f"{plan.mode} mode, {plan.precision}, batch {plan.batch}: measure it as it was tuned "
                          f"with {' and '.join(how)}")
    return f"as tuned (from the plan): {' '.join(taken)}" if taken else ""


def _power_mode(platform, mode) -> str:
    """A power mode as placetune names it on ``platform`` (``30w`` -> ``30W``); as given when it has none such."""
    try:
        return platform.check_power_mode(mode)
    except ConfigError:  # the options' own check says it in one line
        return str(mode)


def _settings_from_args(args: argparse.Namespace):
    return _settings.Settings(
        mode=args.mode,
        precision=args.precision,
        gpu_fallback=not args.no_gpu_fallback,
        dla_core=args.dla_core,
        trt_version=args.trt_version or get_platform(args.platform).trt_version_for(args.power_mode),
        frames_in_flight=args.frames_in_flight,
        replicas=_settings.parse_replicas(args.replicas) if args.replicas else None,
        noise=args.noise,
        seed=args.seed,
        power_mode=get_platform(args.platform).check_power_mode(args.power_mode),
    )


def _takes_calibration_cache(name: str) -> bool:
    try:
        return _registry.backend_capabilities(name).calibration_cache
    except ConfigError:  # a backend that cannot be imported or declares nothing
        return False


def calibration_cache(path: str, backend: str | None) -> str:
    """``--calibration-cache``: an existing file, for a backend that builds engines."""
    if not _registry.backend_capabilities(backend or "simulate").calibration_cache:
        takers = [n for n in _registry.backend_names() if _takes_calibration_cache(n)]
        raise ConfigError(f"--calibration-cache is for the {' and '.join(takers)} backends (INT8 builds), not "
                          f"{backend or 'simulate'!r}: it builds no engine with INT8 ranges to calibrate")
    check_regular(path, "calibration cache")
    return path


def cmd_measure(args: argparse.Namespace) -> int:
    model = load_model(args)
    given = [k for k in _settings.MODE_ONLY if getattr(args, k, None) is not None]  # before a plan fills any
    taken = _plan_options(args.placement, model, args)
    _settings.check_mode_options(args.mode, given, lambda k: "--" + k.replace("_", "-"))
    settings = _settings_from_args(args)  # bad settings refused before a worker starts
    options = {"device_profile": args.device_profile} if args.device_profile else {}
    if args.calibration_cache:
        options["calibration_cache"] = calibration_cache(args.calibration_cache, args.backend)
    if args.input_data:
        options["input_data"] = args.input_data
    backend = _registry.get_backend(args.backend, **options)
    if args.trt_version is None and backend.capabilities.probe:  # the DLA rules of the board's own TensorRT, as tune
        version = backend.probe().get("trt_version")
        if version:
            args.trt_version = _settings.rules_version(version)
            settings = _settings_from_args(args)
    ev = _evaluator.Evaluator(model, args.platform, backend, settings=settings, store=None)
    placement = _parse_placement(args.placement or _default_placement(settings, model, ev.platform), model,
                                 ev.platform)
    m = ev.evaluate(placement)
    doc = m.to_dict(timeline=args.timeline)
    doc.pop("latency_samples_ms", None) if not args.samples else None
    doc["extra"] = {k: v for k, v in doc["extra"].items() if not k.startswith("_")}
    doc = {"model": model.name, "platform": ev.platform.name, "power_mode": settings.power_mode, **doc}
    if _oom.is_memory_failure(m):  # what to change, in the words a tune stops with
        doc["out_of_memory"] = _oom_stop.said(m)
    said = _measure_human(m, model, ev.platform, settings.power_mode)
    show(args, doc, wrap(f"{taken}\n{said}" if taken else said, terminal_width()))
    return 0 if m.ok else 1


def _default_placement(settings, model, platform) -> str:
    """``measure`` without ``--placement``: all-GPU, except in replicas mode with a DLA replica,
    where each DLA instance runs the network on its DLA with GPU fallback (``all-dla``)."""
    if settings.mode == "replicas":
        reps, _ = _settings.resolve_replicas(settings, model.batch, platform.devices, platform.name)
        if any(d != "GPU" and d in platform.devices for d in reps):
            return "all-dla"
    return "all-gpu"


def _measure_human(m, model, platform, power_mode: str = "MAXN") -> str:
    label = "SIMULATED " if m.simulated else ""
    reps = m.extra.get("replicas") if m.mode == "replicas" else None
    batch = ("replicas " + ", ".join(f"{r['device']} batch {r['batch']}" for r in reps)) if reps \
        else f"batch {m.batch}"
    lines = [f"{label}measurement: {model.name} on {platform.name}, {m.mode} mode, {m.precision}, {batch}, "
             f"power mode {power_mode}"]
    lines.append(f"status: {m.status}" + (f" ({m.reason})" if m.reason else ""))
    if _oom.is_memory_failure(m):  # what to change, in the words a tune stops with
        lines.append(_oom_stop.said(m))
    if str(m.extra.get("timed_input", "random-uniform")) != "random-uniform":  # the --input-data it was timed on
        lines.append(f"timed on input data {m.extra['timed_input']}" + (" (recorded only: the simulator runs no "
                                                                          "network)" if m.simulated else ""))
    if m.ok:
        lat = m.latency_ms
        if m.simulated and lat["p90"] == lat["median"] and lat["p99"] == lat["median"]:  # no spread measured
            lines.append(f"latency: median {lat['median']:.3f} ms (no spread: simulated without timing noise; "
                         "--noise 0.02 adds it)")
        else:
            lines.append(f"latency: median {lat['median']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms")
        if m.throughput_fps is not None:
            lines.append(f"throughput: {m.throughput_fps:,.1f} fps")
        if m.energy_mj is not None:
            lines.append(f"energy: {m.energy_mj:.3f} mJ per inference" + (f" ({m.power_w:.1f} W)" if m.power_w else ""))
    if m.realized:
        counts: dict[str, int] = {}
        for d in m.realized.values():
            counts[d] = counts.get(d, 0) + 1
        if reps:  # realise() reports the layers of every DLA replica on DLA0
            lines.append("realised in each DLA replica: " + ", ".join(
                f"{'DLA' if d != 'GPU' else d} {n} layers" for d, n in sorted(counts.items())))
        else:
            lines.append("realised: " + ", ".join(f"{d} {n} layers" for d, n in sorted(counts.items())))
    if m.segments_read is not None:  # a pipeline read segment by segment: the layers read, the rest unknown
        read: dict[str, int] = {}
        for d in (m.realized_partial or {}).values():
            read[d] = read.get(d, 0) + 1
        lines.append("realised, PARTLY UNKNOWN: " + ", ".join(f"{d} {n} layers" for d, n in sorted(read.items()))
                     + f"; {m.unread_line()}")
    elif not m.placement_known:
        lines.append(f"realised: UNKNOWN ({(m.extra or {}).get('placement_unknown') or 'no source says'})")
    if m.dla_loadables:
        lines.append("DLA loadables: " + ", ".join(f"{d} {n}" for d, n in m.dla_loadables.items()))
    if m.fallback:
        lines.append(f"GPU fallback: {plural(len(m.fallback), 'layer')}")
        for name, reason in list(m.fallback.items())[:8]:
            lines.append(f"  {name}: {reason}")
        if len(m.fallback) > 8:
            lines.append(f"  ... {len(m.fallback) - 8} more (use --json)")
    for note in m.extra.get("notes", []):
        lines.append(f"note: {note}")
    for r in reps or []:  # every replica at once; the segment table below is one replica's
        lat, fps = r.get("latency_ms"), r.get("throughput_fps")
        lines.append(f"replica {r['device']}: batch {r['batch']}"
                     + (f", {lat:.3f} ms per batch" if isinstance(lat, (int, float)) else "")
                     + (f", {fps:,.1f} fps" if isinstance(fps, (int, float)) else ""))
    if m.segment_times_ms:
        rows = [
            (s.get("index"), s.get("device"), s.get("layers"), f"{s.get('start_ms', 0):.3f}",
             f"{s.get('end_ms', 0):.3f}", f"{s.get('time_ms', 0):.3f}")
            for s in m.segment_times_ms[:40]
        ]
        lines.append("")
        if reps:
            shown = next((r["device"] for r in reps if r["device"] != "GPU"), reps[0]["device"])
            lines.append(f"segments of the {shown} replica, timed alone (every DLA replica runs the same on its "
                         "own core):")
        lines.append(table(rows, ("segment", "device", "layers", "start ms", "end ms", "time ms")))
        if len(m.segment_times_ms) > 40:
            lines.append(f"... {len(m.segment_times_ms) - 40} more segments (use --json)")
    return "\n".join(lines)
