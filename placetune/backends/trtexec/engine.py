"""One engine through trtexec: its build and timing command lines, the build, the realised placement, engine mode."""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, field
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from placetune.model.model import refuse_renamed
from placetune.errors import PlacementError
from placetune.hardware.locked_clocks import clocks_tag
from placetune.hardware.power import PowerSampler
from placetune.measurement import Extra, Measurement, latency_stats
from placetune.placement.realise import dla_support
from placetune.backends.clocks import ClockWatch
from placetune.backends.jetson import (
    UNEXPLAINED_FALLBACK,
    prepared_onnx,
    realized_vs_predicted,
    untyped_int8,
)
from placetune.backends.onnx_prep import has_qdq
from placetune.backends.timing_method import ENGINE_TIMED
from placetune.backends.tensorrt.buildlog import BuildLog, locate, parse_build_log, parser_network
from placetune.backends.tensorrt.placement_known import decide, mark_known
from placetune.backends.trtexec.command import (
    MAX_ARG_CHARS,
    adjust_for_dla_flags,
    build_only_flag,
    cuda_graph_flags,
    device_types_arg,
    dla_flags,
    has_layer_device_types,
    load_inputs_arg,
    precision_flags,
    profile_flags,
    serial_flags,
    shapes_arg,
    shapes_from_argv,
    spin_wait_flags,
    strongly_typed,
    transfer_flags,
    version_tuple,
)
from placetune.backends.trtexec.parse import parse_layer_info, parse_summary, strip_prefix
from placetune.backends.tensorrt.worker_names import is_placement_line
from placetune.backends.trtexec.process import Proc, Run, classify
from placetune.backends.trtexec.timingcache import copy_for_build, keep, set_aside, unreadable
from placetune.backends.trtexec.timing import (
    END_MARKERS,
    energy,
    profile_into,
    read_times,
    summary_stats,
    thin,
    window,
)

if TYPE_CHECKING:
    from placetune.inputdata import InputData
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["TrtexecOptions", "Engine", "Realised", "measure_engine", "time_built", "engine_spec", "time_argv", "placement_args", "build",
           "build_extra", "realised", "onnx_file", "sampler"]

log = logging.getLogger(__name__)
_LOG_KEEP = 400
#: A kept build-log line is cut here (trtexec prints its whole --layerDeviceTypes list on one line).
_LINE_KEEP = 2000
#: trtexec 10.x's echo of each --layerDeviceTypes match, one [I] line per listed layer
#: (samples/common/sampleEngines.cpp release/10.3:596 "Set layer " << name << " to device type ").
_DEVICE_ECHO = re.compile(r"^Set layer .+ to device type (?:GPU|DLA)$")
#: (prepared ONNX file, TensorRT version) -> the parser's layers of its last verbose build
#: (buildlog.parser_network): the next builds list the layers made beyond the nodes
PARSER_LAYERS: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
_INSPECTOR_MAX_CHARS = 500_000


class TrtexecOptions(Protocol):
    """What building and timing an engine reads of the trtexec backend: its options (see
    :class:`~placetune.backends.trtexec.backend.TrtexecBackend` for each) and the environment
    trtexec runs in."""

    trtexec: str
    cache_dir: Path
    #: the frequencies the clocks were read locked at (JetsonBackend.locked_clocks): the timing cache's key
    locked_clocks: dict[str, int] | None
    timeout_s: float
    warmup_ms: float
    iterations: int | None
    duration_s: float
    replica_duration_s: float
    timing_cache: bool
    calibration_cache: str | None
    verbose: bool
    profile: bool
    layer_info: bool
    spin_wait: bool
    power: bool
    power_root: str | None
    power_interval_s: float
    power_rails: list[str] | None
    build_args: list[str]
    run_args: list[str]
    input_data: "InputData | None"  # what trtexec times on (--loadInputs); None: its random input

    @property
    def clock_watch(self) -> ClockWatch: ...

    def environ(self) -> dict[str, str]: ...


@dataclass
class Engine:
    """What one engine build asks for and what came of it."""

    device: str  # GPU, DLA0, DLA1
    core: int  # -1: GPU engine
    batch: int
    build_argv: list[str]
    engine_path: Path
    notes: list[str] = field(default_factory=list)
    run: Run | None = None
    blog: BuildLog | None = None
    layer_info_path: Path | None = None
    predicted: dict[str, str] | None = None  # the placement placetune predicted (for the cross-check)
    network: list[tuple[str, str | None]] | None = None  # (layer, its ONNX node) from the parser's [V] lines
    timing_cache: Path | None = None  # the shared timing cache; trtexec gets its own copy (timingcache.py)

    def recorded_argv(self) -> list[str]:
        """The build command as recorded with the measurement (``extra["commands"]["build"]``): the shared
        timing cache in place of the build's own copy, which is deleted with the run directory; the command
        a user re-running it by hand needs (trtexec takes the same ``<cache>.lock`` as placetune on it)."""
        if self.timing_cache is None:
            return list(self.build_argv)
        return [f"--timingCacheFile={self.timing_cache}" if a.startswith("--timingCacheFile=") else a
                for a in self.build_argv]

    def built(self) -> Run:
        """The build's run (once :func:`build` ran it)."""
        if self.run is None:
            raise RuntimeError(f"the {self.device} engine was not built")
        return self.run


def measure_engine(be: TrtexecOptions, r: "Realisation", platform: "Platform", settings: "Settings", version: str,
                   base: dict[str, Any], workdir: Path) -> Measurement:
    """Engine mode: build one engine of the realised placement, time it, sample power while it runs."""
    model = r.realized.model
    predicted = r.realized.as_dict()
    dla_layers = [n for n, d in predicted.items() if d != "GPU"]
    core = r.dla_core if (r.dla_core is not None and dla_layers) else -1
    onnx_or_failure = onnx_file(be.cache_dir, model, settings, version, base)
    if isinstance(onnx_or_failure, Measurement):
        return onnx_or_failure
    key = (str(onnx_or_failure), version)
    for attempt in range(2):
        placement = placement_args(r, platform, settings, version, core, PARSER_LAYERS.get(key))
        if isinstance(placement, str):
            return Measurement.failure("infeasible", placement, realized=predicted, **base)
        place_args, notes = placement
        device = f"DLA{core}" if core >= 0 else "GPU"
        eng = engine_spec(be, onnx_or_failure, model, settings, version, platform, device, core, int(model.batch),
                          place_args, workdir, "engine")
        eng.notes.extend(notes)
        failure = build(be, eng, version, base)
        if failure is not None:
            return failure
        # the first verbose build of a model says which layers the parser made beyond its nodes; if some
        # of a GPU node's were left to --useDLACore's default (DLA), build again with them listed
        missed = any(d == "GPU" for d in parser_layer_devices(eng.network, predicted).values()) \
            and key not in PARSER_LAYERS and any(a.startswith("--layerDeviceTypes=") for a in place_args)
        if eng.network:
            PARSER_LAYERS[key] = eng.network
        if attempt:
            eng.notes.append("built twice: the first build's log named layers the ONNX parser made for GPU nodes, "
                             "which --useDLACore had put on the DLA; the second lists them on the GPU")
        if not missed or attempt:
            break
        log.info("rebuilding %s: the parser made layers for GPU nodes that --useDLACore put on the DLA", key[0])
    placed = realised(eng, r)
    extra: dict[str, Any] = {"trt_version": version, "dla_core": core, "commands": {"build": eng.recorded_argv()},
                             **build_extra(eng), **placed.extra}
    if settings.precision == "int8" and not strongly_typed(version_tuple(version)):  # where the ranges came from
        extra["int8_ranges"] = "calibration-cache" if be.calibration_cache else \
            "qdq" if model.proto is not None and has_qdq(model.proto) else "placeholder"
    if eng.notes:
        extra["notes"] = list(eng.notes)
    loadables = {device: placed.loadables} if core >= 0 and placed.loadables is not None else {}
    kw = dict(realized=placed.realized or None, fallback=placed.fallback, dla_loadables=loadables,
              build_seconds=eng.built().seconds, extra=extra, **base)
    return time_built(be, eng, version, settings, workdir, kw, model, profile=be.profile)


def time_built(be: TrtexecOptions, eng: Engine, version: str, settings: "Settings", workdir: Path,
               kw: dict[str, Any], model: "Model | None" = None, *, profile: bool = False,
               tag: str = "engine") -> Measurement:
    """Time a built engine (``eng.engine_path``) with trtexec and sample power while it runs: the
    measurement of ``kw`` (its ``extra``, realised placement...) with the timings added, or the
    failure. ``model``: attribute the per-layer profile to its layers (``profile``)."""
    extra = kw["extra"]
    base_batch = int(kw["batch"])
    run_argv, files = time_argv(be, eng, version, settings, workdir, tag, duration_s=be.duration_s,
                                profile=profile)
    extra.setdefault("commands", {})["time"] = run_argv
    power = sampler(be)
    with be.clock_watch.timing():  # the clocks judged: around this trtexec run, not around the build
        proc = Proc(run_argv, workdir / f"{tag}.time.log", be.environ(), workdir, END_MARKERS)
        if power is not None:
            power.start()
        try:
            # a profiled run is timed twice, warm-up and duration each time: the timed run, then the
            # profiling run (trtexec.cpp release/10.3:474-491, runInference again with the same options;
            # always separate from 11 on)
            runs = 2 if files.get("profile") is not None else 1
            run = proc.wait(time.monotonic() + be.timeout_s + runs * (be.duration_s + be.warmup_ms / 1000.0))
        finally:
            if power is not None:
                power.stop()
    lines = run.lines()
    summary = parse_summary(lines)
    failure = classify(run, lines, summary, "time", kw, be.timeout_s)
    if failure is not None:
        return failure
    records = read_times(files.get("times"))
    samples = [r_["latencyMs"] for r_ in records if "latencyMs" in r_]
    stats = latency_stats(samples) if samples else summary_stats(summary)
    if not stats:
        extra["time_log"] = lines[-40:]
        return Measurement.failure("runtime_failed", "trtexec printed no performance summary and wrote no "
                                   "--exportTimes records", **kw)
    qps = summary.throughput_qps or (1000.0 / stats["median"] if stats.get("median") else None)
    fps = qps * base_batch if qps else None
    extra["summary"] = summary.to_dict()
    extra["timed_iterations"] = len(records) or None
    extra["timed"] = ENGINE_TIMED
    timed = window(run, records, summary)
    # ---- per-layer profile (the engine's layer information was read with its build: realised)
    profile_path = files.get("profile")
    if profile_path is not None and model is not None:
        profile_into(profile_path, eng.blog, eng.network, model, eng.core, extra, kw)
    # ---- power
    power_w, energy_mj = None, None
    if power is not None:
        reading = power.reading(*timed) if timed else power.reading()
        extra["power"] = reading.to_dict()
        power_w = reading.mean_w
        energy_mj = energy(reading, qps)
        if energy_mj is not None:
            extra["energy_per_sample_mj"] = energy_mj / base_batch
    else:
        extra["power"] = {"mean_w": None, "reason": "power sampling is off (power=False)"}
    kw.update(latency_samples_ms=thin(samples), latency_ms=stats, throughput_fps=fps, power_w=power_w,
              energy_mj=energy_mj)
    return Measurement(status="ok", **kw)


def sampler(be: TrtexecOptions) -> Any:
    """A power sampler of the backend's rails, None when power sampling is off."""
    if not be.power:
        return None
    return PowerSampler(be.power_root, be.power_interval_s, total_rails=be.power_rails)


def onnx_file(cache_dir: Path, model: "Model", settings: "Settings", version: str,
              base: dict[str, Any]) -> Path | Measurement:
    """The ONNX file trtexec builds from (prepared as for the TensorRT backend), or a failure."""
    typed = strongly_typed(version_tuple(version))
    refused = untyped_int8(model, settings.precision, version, typed, base)
    if refused is not None:
        return refused
    return prepared_onnx(model, cache_dir, settings.precision, typed, "trtexec", base)


def parser_layer_devices(parser: Sequence[tuple[str, str | None]] | None, predicted: Mapping[str, str]
                         ) -> dict[str, str]:
    """The layers the ONNX parser made beyond the model's nodes (``<node>_<k>``, ``ONNXTRT_*``, a
    Constant named after its weights; :func:`~placetune.backends.tensorrt.buildlog.parser_network`
    of an earlier build) with the device of the node they were made for. Under ``--useDLACore``
    every layer not listed goes to the DLA (sampleEngines.cpp: setDefaultDeviceType(kDLA), then
    setLayerDeviceTypes per name), so a GPU node's extra layers must be named to follow it. A name
    ``--layerDeviceTypes`` cannot carry (``,`` or ``'``) is left out."""
    out: dict[str, str] = {}
    for layer, node in parser or ():
        if node is None or layer in predicted or node not in predicted or "," in layer or "'" in layer or not layer:
            continue
        out[layer] = predicted[node]
    return out


def placement_args(r: "Realisation", platform: "Platform", settings: "Settings", version: str,
                   core: int, parser: Sequence[tuple[str, str | None]] | None = None
                   ) -> tuple[list[str], list[str]] | str:
    """``--useDLACore``/``--allowGPUFallback``/``--layerDeviceTypes`` for the realised placement,
    with notes; or why trtexec of this version cannot express it. ``parser``: the parser's layers
    of an earlier build of the model (:func:`parser_layer_devices` lists them too)."""
    if core < 0:
        return [], []
    model = r.realized.model
    predicted = r.realized.as_dict()
    args = dla_flags(core, settings.gpu_fallback)
    extra_layers = parser_layer_devices(parser, predicted)
    # layers on the GPU that were not asked on a DLA (those in r.fallback were, and trtexec
    # falls them back by itself): only these need --layerDeviceTypes
    asked_gpu = [n for n, d in predicted.items() if d == "GPU" and n not in r.fallback]
    if not asked_gpu:
        return args, []
    if not has_layer_device_types(version_tuple(version)):
        support = dla_support(model, platform, settings.precision, settings.trt_version)
        if settings.gpu_fallback and all(not support[n].supported for n in asked_gpu):
            return args, [f"{len(asked_gpu)} layer(s) asked on the GPU are not supported on the DLA, so "
                          f"TensorRT {version} keeps them there without --layerDeviceTypes"]
        shown = ", ".join(asked_gpu[:3]) + (f" (+{len(asked_gpu) - 3} more)" if len(asked_gpu) > 3 else "")
        return (f"trtexec of TensorRT {version} has no --layerDeviceTypes (added in 8.6), so it can only build "
                f"all-GPU or all-DLA engines; this placement keeps {shown} on the GPU next to DLA layers. "
                "Per-layer placement on TensorRT 8.5 needs the tensorrt backend (--backend tensorrt), "
                "which sets each layer's device with the Python API")
    try:
        refuse_renamed(model.renamed, model.names)  # a name TensorRT gives by its own counter
        spec, only_gpu = device_types_arg({**{n: predicted[n] for n in model.names}, **extra_layers})
    except PlacementError as exc:
        return (f"trtexec cannot express this placement: {exc}. Measure it with the tensorrt backend "
                "(--backend tensorrt), which places layers with the Python API")
    notes: list[str] = []
    if only_gpu:
        notes.append("--layerDeviceTypes lists only the GPU layers (--useDLACore makes DLA the default)")
    if len(spec) > MAX_ARG_CHARS:
        return (f"the --layerDeviceTypes list is {len(spec)} characters, over the argument limit; use the "
                "tensorrt backend")
    if extra_layers:
        notes.append(f"{len(extra_layers)} layer(s) the ONNX parser made beyond the model's nodes (<node>_<k>, "
                     "ONNXTRT_*, weights) are listed with their node's device (read from an earlier build's log)")
    else:
        notes.append("layers TensorRT's parser adds beyond the ONNX nodes (<node>_<k>, ONNXTRT_*) are not listed and "
                     "default to the DLA under --useDLACore")
    return args + [f"--layerDeviceTypes={spec}"], notes


def engine_spec(be: TrtexecOptions, onnx: Path, model: "Model", settings: "Settings", version: str,
                platform: "Platform", device: str, core: int, batch: int, place_args: list[str], workdir: Path,
                tag: str) -> Engine:
    """The build command of one engine (``--saveEngine`` in ``workdir``)."""
    vt = version_tuple(version)
    engine_path = workdir / f"{tag}.engine"
    argv = [be.trtexec, f"--onnx={onnx}"]
    notes: list[str] = []
    flags = precision_flags(settings.precision, vt)
    argv.extend(flags)
    if flags and settings.precision == "int8":
        if be.calibration_cache:
            argv.append(f"--calib={be.calibration_cache}")
        elif model.proto is not None and has_qdq(model.proto):
            notes.append("INT8 ranges from the model's Q/DQ nodes (trtexec sets no placeholder range on a network "
                         "with Q/DQ layers)")
        else:
            notes.append("--int8 without --calib: placeholder dynamic ranges (right for timing, not accuracy)")
    argv.extend(place_args)
    adjust = adjust_for_dla_flags(core, vt)  # 10.16 on: the parser may rewrite layers to suit the DLA
    if adjust:
        argv.extend(adjust)
        notes.append("--adjustForDLA: the ONNX parser's ADJUST_FOR_DLA rewrites (TensorRT 10.16 on)")
    # trtexec (sampleEngines.cpp, every version) fails the build when --shapes is given for a
    # model whose inputs are all static: shapes only for inputs the file leaves open
    shapes = shapes_arg(model.dynamic_input_shapes, batch if batch != model.batch else None)
    if shapes:
        argv.append(f"--shapes={shapes}")
    argv.append(f"--saveEngine={engine_path}")
    shared_cache = timing_cache_path(be.cache_dir, platform, version, settings.power_mode,
                                     be.locked_clocks) if be.timing_cache else None
    if shared_cache is not None:  # the build's own copy: a killed build never leaves the shared one half-written
        argv.append(f"--timingCacheFile={workdir / f'{tag}.timing.cache'}")
    layer_info_path = None
    if be.layer_info:
        argv.append("--profilingVerbosity=detailed")
        layer_info_path = workdir / f"{tag}.layers.json"
        argv.append(f"--exportLayerInfo={layer_info_path}")
    if be.verbose or core >= 0:  # some versions log the Layers Running on DLA/GPU report at [V] only
        argv.append("--verbose")
    argv.append(build_only_flag(vt))
    argv.extend(be.build_args)
    return Engine(device, core, batch, argv, engine_path, notes, layer_info_path=layer_info_path,
                  timing_cache=shared_cache)


def time_argv(be: TrtexecOptions, eng: Engine, version: str, settings: "Settings", workdir: Path, tag: str, *,
              duration_s: float, profile: bool, serial: bool = True) -> tuple[list[str], dict[str, Path | None]]:
    """The timing command of a built engine and the files it exports (``times``, ``profile``).

    ``serial``: one query in flight (``--exposeDMA``), the engine-mode method of both real backends
    (:mod:`placetune.backends.timing_method`); False keeps trtexec's two in flight (replicas mode)."""
    vt = version_tuple(version)
    files: dict[str, Path | None] = {"times": workdir / f"{tag}.times.json", "profile": None}
    argv = [be.trtexec, f"--loadEngine={eng.engine_path}"]
    if eng.core >= 0:
        argv.append(f"--useDLACore={eng.core}")  # the runtime's DLA core is chosen at load time
    shapes = shapes_arg(shapes_from_argv(eng.build_argv), None)
    if shapes:
        argv.append(f"--shapes={shapes}")
    if be.input_data is not None:  # the input data given, at the engine's batch, not trtexec's random input
        argv.append(load_inputs_arg(be.input_data.raw_files(be.cache_dir / "inputs", eng.batch, vt[0] < 10)))
    iterations = be.iterations or settings.iterations
    argv += [f"--iterations={iterations}", f"--warmUp={be.warmup_ms:g}", f"--duration={duration_s:g}",
             f"--exportTimes={files['times']}"]
    if profile:
        files["profile"] = workdir / f"{tag}.profile.json"
        argv.extend(profile_flags(files["profile"], vt))
    if be.spin_wait:
        argv.extend(spin_wait_flags(vt))
    argv.extend(transfer_flags(vt))  # compute only, as the tensorrt worker times
    if serial:
        argv.extend(serial_flags())  # one query in flight, as the worker times (timing_method)
    argv.extend(cuda_graph_flags(vt))  # no CUDA graph, as the worker times (trtexec 11 captures one by default)
    argv.extend(be.run_args)
    return argv, files


def timing_cache_path(cache_dir: Path, platform: "Platform", version: str, power_mode: str,
                      locked: Mapping[str, int] | None = None) -> Path:
    """The ``--timingCacheFile`` of a platform, TensorRT version and power mode (and clock lock:
    :func:`~placetune.hardware.locked_clocks.clocks_tag`), its directory made."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{platform.name}-trt{version}-{clocks_tag(power_mode, locked)}")
    path = cache_dir / "timing" / f"{safe}.cache"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def build(be: TrtexecOptions, eng: Engine, version: str, base: dict[str, Any]) -> Measurement | None:
    """Run the build; None when it produced an engine, else the failure."""
    log_path = eng.engine_path.with_suffix(".build.log")
    for path in (eng.engine_path, eng.layer_info_path):  # an earlier build's (a rebuild): never read as this one's
        if path is not None:
            path.unlink(missing_ok=True)
    private = _cache_arg(eng.build_argv)
    for attempt in range(2):
        if eng.timing_cache is not None and private is not None and not attempt:
            copy_for_build(eng.timing_cache, private)
        proc = Proc(eng.build_argv, log_path, be.environ(), eng.engine_path.parent)
        run = eng.run = proc.wait(time.monotonic() + be.timeout_s)
        lines = run.lines()
        # a failed build only: 10.x logs a cache it cannot update and passes (timingCache.cpp release/10.3:114-147)
        bad = unreadable(lines) if (eng.timing_cache is not None and private is not None and not attempt
                                    and run.returncode != 0) else None
        if bad is None:
            break
        aside = set_aside(eng.timing_cache, private)  # type: ignore[arg-type]  # (checked above)
        private.unlink()  # type: ignore[union-attr]
        said = (f"trtexec could not read the timing cache {eng.timing_cache} ({bad})"
                + (f": set aside as {aside.name}" if aside is not None else "") + "; built again without it")
        log.warning("%s", said)
        eng.notes.append(said)
    if eng.timing_cache is not None and private is not None and run.returncode == 0 and not run.timed_out:
        keep(lines, private, eng.timing_cache)
    eng.blog = parse_build_log(lines)
    eng.network = parser_network(run.parser_messages()) or None
    extra = dict(base.pop("extra", {}) or {})
    extra.setdefault("commands", {"build": eng.recorded_argv()})
    kw = dict(build_seconds=run.seconds, extra=extra, **base)
    failure = classify(run, lines, parse_summary(lines), "build", kw, be.timeout_s)
    if failure is not None:
        failure.extra.update(build_extra(eng))
        return failure
    if not eng.engine_path.is_file():
        return Measurement.failure("build_failed", f"trtexec passed but wrote no engine file {eng.engine_path}",
                                   **kw)
    return None


def _cache_arg(argv: list[str]) -> Path | None:
    """The build's own ``--timingCacheFile`` (None: no timing cache)."""
    return next((Path(a.partition("=")[2]) for a in argv if a.startswith("--timingCacheFile=")), None)


def build_extra(eng: Engine) -> Extra:
    """The build's errors, warnings and first log lines for ``Measurement.extra``."""
    blog = eng.blog
    if blog is None:
        return {}
    lines = eng.run.lines() if eng.run is not None else []  # no [V] lines but the placement
    msgs = [(x, strip_prefix(x)[1]) for x in lines]
    kept = [x for x, msg in msgs if not _DEVICE_ECHO.match(msg.strip())]
    echoed = len(msgs) - len(kept)
    # the first lines, then every placement line after them: the record of where TensorRT put the layers
    kept = kept[:_LOG_KEEP] + [x for x in kept[_LOG_KEEP:] if is_placement_line(strip_prefix(x)[1])]
    kept = [x if len(x) <= _LINE_KEEP else f"{x[:_LINE_KEEP]}... ({len(x)} characters)" for x in kept]
    if echoed:
        kept.append(f"({echoed} 'Set layer ... to device type ...' lines, trtexec's echo of --layerDeviceTypes, "
                    "left out)")
    return {"build_errors": blog.errors[:50], "build_warnings": blog.warnings[:100], "build_log": kept}


@dataclass
class Realised:
    """What an engine's build log says TensorRT placed.

    Attributes:
        realized: the realised placement (empty when unknown).
        fallback: why layers asked on a DLA run on the GPU.
        extra: the measurement's extras that say how it was read (``placement_known``...).
        loadables: the engine's DLA loadables (None: unknown).
    """

    realized: dict[str, str]
    fallback: dict[str, str]
    extra: dict[str, Any]
    loadables: int | None


def realised(eng: Engine, r: "Realisation") -> Realised:
    """The realised placement and fallback reasons of a built engine: its build log cross-checked with
    the layer information the same build wrote (``--exportLayerInfo``: trtexec writes it before it
    skips inference, samples/trtexec/trtexec.cpp release/10.3 ``if (options.build.skipInference)``
    -> ``printLayerInfo``; release/8.5 ``--buildOnly`` alike), decided once (:func:`decide`), so the
    fallback reasons follow the placement decided and an unknown placement is said only when it is."""
    model = r.realized.model
    predicted = r.realized.as_dict()
    blog = eng.blog or BuildLog()
    loc = locate(blog, model.names, eng.network, [n for n, d in predicted.items() if d == "GPU"])
    extra: dict[str, Any] = {}
    eng.predicted = dict(predicted)
    layers = None
    if eng.layer_info_path is not None and eng.layer_info_path.is_file():
        info = parse_layer_info(eng.layer_info_path.read_text(errors="replace"))
        extra["engine_inspector"] = info.text[:_INSPECTOR_MAX_CHARS]
        extra["engine_layers"] = len(info.layers)
        if info.unreadable:
            eng.notes.append(f"--exportLayerInfo could not be read ({info.unreadable}): placement from the build "
                             "log only")
        elif not info.valid_json:
            eng.notes.append("--exportLayerInfo was not valid JSON (unescaped names): layer names read from the "
                             "raw text")
        layers = info.layers or None
    known = decide(predicted, eng.core, blog, loc, model.names, eng.network, layers)
    mark_known(extra, known, blog)
    if eng.core >= 0 and not blog.reports_placement:
        eng.notes.append("the build log has no DLA/GPU placement sections: realised placement " + (
            f"from the {known.source} only" if known.known else "UNKNOWN"))
    realized = known.realized if known.realized is not None else {}
    fallback = {n: loc.fallback.get(n, why) for n, why in r.fallback.items()}
    for n, d in predicted.items():
        if d != "GPU" and realized.get(n) == "GPU":
            fallback[n] = loc.fallback.get(n) or UNEXPLAINED_FALLBACK
    for n in list(fallback):
        if realized and realized.get(n) != "GPU":
            del fallback[n]  # TensorRT ran it on the DLA after all
    for n in known.fallback_warned:  # an unknown placement: TensorRT's warning still says these left the DLA
        fallback[n] = loc.fallback[n]
    extra["realized_vs_predicted"] = realized_vs_predicted(predicted, realized)
    parser_layers = parser_layer_devices(eng.network, predicted) if eng.core >= 0 else {}
    if parser_layers:  # as asked: listed in --layerDeviceTypes, or the DLA by --useDLACore's default
        extra["parser_layers"] = {n: ("GPU" if d == "GPU" else "DLA") for n, d in parser_layers.items()}
    extra["subgraph_limit"] = loc.subgraph_limit
    extra["dla_subgraphs"] = loc.subgraphs
    extra["unmapped_log_names"] = loc.unmapped[:50]
    return Realised(realized, fallback, extra, known.loadables)
