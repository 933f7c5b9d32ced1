"""The ``placetune`` command. Only this module prints; library code logs."""

from __future__ import annotations

import argparse
import os
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placetune.errors import PlacetuneError
from placetune.safetext import terminal_safe
from placetune.validate import dumps_json
from placetune.wording import plural

__all__ = ["main", "build_parser"]

log = logging.getLogger("placetune")


# ----------------------------------------------------------------- helpers
def _load_model(args: argparse.Namespace):
    from placetune.model.model import Model

    return Model.load(args.model, getattr(args, "shape", None) or None, batch=getattr(args, "batch", None))


def _table(rows: list[Sequence[Any]], header: Sequence[str]) -> str:
    cols = [list(map(str, header))] + [[("" if c is None else terminal_safe(str(c))) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cols]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _shape(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape)


def _out(args: argparse.Namespace, doc: dict, human: str) -> None:
    if getattr(args, "json", False):
        print(dumps_json(doc, indent=2))
    else:
        print(human)


# ----------------------------------------------------------------- check
def cmd_check(args: argparse.Namespace) -> int:
    from placetune.hardware.platforms import get_platform
    from placetune.placement.realise import MAX_LOADABLES_PER_CORE, dla_support

    model = _load_model(args)
    platform = get_platform(args.platform)
    args.power_mode = platform.check_power_mode(args.power_mode)
    args.trt_version = args.trt_version or platform.default_trt_version
    support = dla_support(model, platform, args.precision, args.trt_version)
    eligible = sum(1 for s in support.values() if s.supported)
    islands = _islands_before_limit(model, support) if platform.dla_count else 0
    doc = {
        "model": model.name,
        "model_hash": model.hash,
        "platform": platform.name,
        "precision": args.precision,
        "trt_version": args.trt_version,
        "power_mode": args.power_mode,
        "layers": [
            {
                "name": layer.name,
                "op_type": layer.op_type,
                "input_shape": list(layer.input_shape),
                "output_shape": list(layer.output_shape),
                "dla": bool(support[layer.name].supported) and platform.dla_count > 0,
                "reason": support[layer.name].reason if platform.dla_count else f"{platform.name} has no DLA",
            }
            for layer in model.layers
        ],
        "summary": {
            "layers": len(model),
            "dla_eligible": eligible if platform.dla_count else 0,
            "dla_islands": islands,
            "exceeds_loadable_limit": islands > MAX_LOADABLES_PER_CORE,
            "gmacs": round(model.total_macs / 1e9, 4),
        },
    }
    rows = [
        (layer["name"], layer["op_type"], _shape(layer["input_shape"]), _shape(layer["output_shape"]),
         "yes" if layer["dla"] else "no", layer["reason"] or "")
        for layer in doc["layers"]
    ]
    s = doc["summary"]
    human = _table(rows, ("layer", "op", "input", "output", "DLA", "reason"))
    human += (
        f"\n\n{model.name} on {platform.name} ({args.precision}, TensorRT {args.trt_version} rules, power mode "
        f"{args.power_mode}): "
        f"{s['layers']} layers, {s['dla_eligible']} DLA-eligible, {s['gmacs']} GMACs"
    )
    if platform.dla_count:
        limit = " (exceeds the 16-per-core limit: the rest fall back to GPU)" if s["exceeds_loadable_limit"] else ""
        human += f"\nall-DLA with GPU fallback forms {plural(islands, 'DLA island')} (loadables){limit}"
    _out(args, doc, human)
    return 0


def _islands_before_limit(model, support) -> int:
    """DLA islands of the all-DLA placement after fallback, before the 16-loadable cut."""
    from placetune.placement.placement import Placement

    dev = {n: ("DLA0" if support[n].supported else "GPU") for n in model.names}
    return Placement(model, dev).dla_islands()["DLA0"]


# ----------------------------------------------------------------- zoo
def cmd_zoo_list(args: argparse.Namespace) -> int:
    from placetune.model import zoo

    rows = [(n, zoo.default_batch(n), zoo.describe(n)) for n in zoo.names()]
    doc = {"models": [{"name": n, "batch": b, "description": d} for n, b, d in rows]}
    _out(args, doc, _table(rows, ("name", "batch", "description")))
    return 0


def cmd_zoo_export(args: argparse.Namespace) -> int:
    from placetune.model import zoo
    from placetune.model.model import _zoo_options

    base, _, opts = args.name.partition(":")
    if args.batch is not None and args.batch < 1:
        from placetune.errors import ConfigError

        raise ConfigError(f"batch must be a positive integer, got {args.batch}")
    path = zoo.export(base, args.output, batch=args.batch or zoo.default_batch(base), **_zoo_options(opts))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, with deterministic weights)")
    return 0


# ----------------------------------------------------------------- measure
def _parse_placement(text: str, model, platform):
    from placetune.errors import PlacementError
    from placetune.placement.placement import Placement

    low = text.strip().lower()
    if low in ("all-gpu", "gpu"):
        return Placement.all_gpu(model)
    if low in ("all-dla", "dla", "dla0", "all-dla0"):
        return Placement.all_dla(model, 0)
    if low in ("dla1", "all-dla1"):
        return Placement.all_dla(model, 1)
    if text.lstrip().startswith("{"):
        return Placement.from_json(model, text)
    path = Path(text)
    try:
        exists = text == "-" or os.path.lexists(path)
    except (OSError, ValueError):  # a name too long for the file system
        exists = False
    if exists:  # a regular file (or - for standard input); a FIFO or a device is refused, never read
        from placetune.files.read import read_text

        return Placement.from_json(model, read_text(text, "placement file", error=PlacementError, stdin=True))
    raise PlacementError(f"--placement {text[:80]!r}: expected all-gpu, all-dla, dla0, dla1, a JSON file or JSON text")


def _settings_from_args(args: argparse.Namespace):
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings, parse_replicas

    return Settings(
        mode=args.mode,
        precision=args.precision,
        gpu_fallback=not args.no_gpu_fallback,
        dla_core=args.dla_core,
        trt_version=args.trt_version or get_platform(args.platform).default_trt_version,
        frames_in_flight=args.frames_in_flight,
        replicas=parse_replicas(args.replicas) if args.replicas else None,
        noise=args.noise,
        seed=args.seed,
        power_mode=get_platform(args.platform).check_power_mode(args.power_mode),
    )


def _calibration_cache(path: str, backend: str | None) -> str:
    """``--calibration-cache``: an existing file, for a backend that builds engines."""
    from placetune.errors import ConfigError

    if backend not in ("tensorrt", "trtexec"):
        raise ConfigError(f"--calibration-cache is for the tensorrt and trtexec backends (INT8 builds), not "
                          f"{backend or 'simulate'!r}: the simulated Jetson has no INT8 ranges to calibrate")
    from placetune.files.read import check_regular

    check_regular(path, "calibration cache")
    return path


def cmd_measure(args: argparse.Namespace) -> int:
    from placetune.tuning.evaluator import Evaluator

    model = _load_model(args)
    settings = _settings_from_args(args)
    from placetune.backends.registry import get_backend

    options = {"device_profile": args.device_profile} if args.device_profile else {}
    if args.calibration_cache:
        options["calibration_cache"] = _calibration_cache(args.calibration_cache, args.backend)
    ev = Evaluator(model, args.platform, get_backend(args.backend, **options), settings=settings, store=None)
    placement = _parse_placement(args.placement or _default_placement(settings, model, ev.platform), model,
                                 ev.platform)
    m = ev.evaluate(placement)
    doc = m.to_dict(timeline=args.timeline)
    doc.pop("latency_samples_ms", None) if not args.samples else None
    doc["extra"] = {k: v for k, v in doc["extra"].items() if not k.startswith("_")}
    doc = {"model": model.name, "platform": ev.platform.name, "power_mode": settings.power_mode, **doc}
    _out(args, doc, _measure_human(m, model, ev.platform, settings.power_mode))
    return 0 if m.ok else 1


def cmd_selftest(args: argparse.Namespace) -> int:
    from placetune.cli.selftest import format_report, run_selftest

    code, doc = run_selftest(args.output, worker_python=args.worker_python)
    print(format_report(doc), end="")
    print(f"report: {args.output}/selftest.txt, {args.output}/selftest.json")
    return code


def _default_placement(settings, model, platform) -> str:
    """``measure`` without ``--placement``: all-GPU, except in replicas mode with a DLA replica,
    where each DLA instance runs the network on its DLA with GPU fallback (``all-dla``)."""
    from placetune.settings import resolve_replicas

    if settings.mode == "replicas":
        reps, _ = resolve_replicas(settings, model.batch, platform.devices, platform.name)
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
    if m.ok:
        lat = m.latency_ms
        lines.append(
            f"latency: median {lat['median']:.3f} ms  p90 {lat['p90']:.3f} ms  p99 {lat['p99']:.3f} ms"
        )
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
    if m.segment_times_ms:
        rows = [
            (s.get("index"), s.get("device"), s.get("layers"), f"{s.get('start_ms', 0):.3f}",
             f"{s.get('end_ms', 0):.3f}", f"{s.get('time_ms', 0):.3f}")
            for s in m.segment_times_ms[:40]
        ]
        lines.append("")
        lines.append(_table(rows, ("segment", "device", "layers", "start ms", "end ms", "time ms")))
        if len(m.segment_times_ms) > 40:
            lines.append(f"... {len(m.segment_times_ms) - 40} more segments (use --json)")
    return "\n".join(lines)


# ----------------------------------------------------------------- tune
def cmd_tune(args: argparse.Namespace) -> int:
    import shlex

    from placetune.tuning.studyfile import TuneConfig, load_study_file, parse_duration
    from placetune.tuning.tune import Tuner

    embedded = not args.study_file and args.model is None
    if args.study_file:
        base = load_study_file(args.study_file)
    elif embedded:
        base = TuneConfig.embedded_default()
    else:
        base = TuneConfig()
    models = list(args.model or [])
    if len(models) > 1 and args.mode is None:  # several networks run at once
        args.mode = "concurrent"
    cfg = base.with_overrides(
        model=models[0] if len(models) == 1 else None, models=models if len(models) > 1 else None,
        platform=args.platform, backend=args.backend, mode=args.mode,
        objective=args.objective, precision=args.precision, batch=args.batch, shapes=args.shape,
        agent=args.agent, trials=args.trials, timeout=parse_duration(args.timeout), storage=args.storage,
        study=args.study, granularity=args.granularity, export=args.export,
        stop_when_converged=True if args.stop_when_converged else None, power_mode=args.power_mode,
    )
    if args.seed is not None:
        cfg.agent_options["seed"] = args.seed
        cfg.check_options()
    if args.worker_python:
        cfg.backend_options["worker_python"] = args.worker_python
    if args.trtexec:
        cfg.backend_options["trtexec"] = args.trtexec
    if args.calibration_cache:
        cfg.backend_options["calibration_cache"] = _calibration_cache(args.calibration_cache, cfg.backend)
    if args.device_profile:
        cfg = cfg.with_overrides(device_profile=args.device_profile)
    if args.constraint:  # command-line constraints replace the study file's
        from placetune.tuning.constraints import parse_constraints

        cfg.constraints = [c.text for c in parse_constraints(args.constraint)]
    if cfg.trials < 1:
        from placetune.errors import ConfigError

        raise ConfigError("--trials must be >= 1")
    if embedded:
        print("no study file or model given: running the embedded default (placetune tune --help lists the options)")
    hint = "placetune " + shlex.join(sys.argv[1:] if args.argv is None else args.argv)
    outcome = Tuner(cfg, resume_hint=hint).run()
    return 128 + (outcome.signal or 2) if outcome.interrupted else 0  # 130 Ctrl-C, 143 SIGTERM


# ----------------------------------------------------------------- doctor
def cmd_doctor(args: argparse.Namespace) -> int:
    from placetune.backends import doctor

    checks = doctor.run(worker_python=args.worker_python)
    if args.json:
        print(dumps_json([c.__dict__ if hasattr(c, "__dict__") else c._asdict() for c in checks], indent=2))
    else:
        print(doctor.format(checks))
    return doctor.verdict(checks)[0]  # 0: a hardware backend works here; 8: only the simulated Jetson


# ----------------------------------------------------------------- parser
#: The end of ``placetune tune --help``: the agents and granularities (tests check it names
#: every agent of ``search.agent_names()``).
TUNE_EPILOG = """\
agents (--agent):
  guided     the default: fits corrections of the simulator to the run's own measurements,
             searches the corrected simulator and builds only its best few predictions
  local      hill climbing (or simulated annealing) from the best baseline, one unit at a time
  optuna     Optuna's TPE sampler over the placetune study's own Optuna study
  random     uniform random placements (the yardstick)
  reinforce  a policy-gradient agent on the placetune/Placement-v0 Gymnasium environment
  exact      the true optimum: enumerates small spaces, dynamic programming for engine mode

granularities (--granularity), what one decision unit is:
  stages     a few contiguous stages, one device each (guided's default)
  fusion     the groups of layers TensorRT fuses anyway (the other agents' default)
  layer      every layer on its own
  scope:N    the model's modules at depth N (torch scopes such as layer1/layer1.0)

examples:
  placetune tune                                   the embedded default (simulated AGX Orin, ResNet-50)
  placetune tune studies/seed-block-pipeline.toml  a study file; options override it
  placetune tune --model my.onnx --agent local --granularity fusion --trials 300 --timeout 8h
"""

def _add_model_args(p: argparse.ArgumentParser, batch: bool = True) -> None:
    p.add_argument("model", help="ONNX file (.onnx or .onnx.gz) or zoo name (see `placetune zoo list`)")
    p.add_argument("--shape", action="append", metavar="NAME=1x3x224x224",
                   help="fix an input shape (repeat for several inputs); needed for dynamic dims")
    if batch:
        p.add_argument("--batch", type=int, default=None, help="batch size of zoo models")


def _add_target_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--platform", default="orin-agx", help="Jetson profile (default orin-agx)")
    p.add_argument("--precision", default="fp16", choices=("fp16", "int8", "fp32"))
    p.add_argument("--trt-version", default=None, help="TensorRT version whose DLA rules apply (default: the "
                   "platform's, 8.6 on Orin, 8.5 on Xavier)")
    p.add_argument("--power-mode", default="MAXN", help="nvpmodel power mode of the platform, e.g. 30W (default "
                   "MAXN: the fastest; see docs/power-modes.md)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``placetune`` command."""
    from placetune.version import __version__

    parser = argparse.ArgumentParser(
        prog="placetune",
        description="Find the best placement of a network's layers on a Jetson's GPU and DLA cores.",
    )
    parser.add_argument("--version", action="version", version=f"placetune {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("check", help="which layers can run on a DLA, and why not")
    _add_model_args(p)
    _add_target_args(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("zoo", help="built-in networks")
    zsub = p.add_subparsers(dest="zoo_command", metavar="ACTION")
    z = zsub.add_parser("list", help="list the built-in networks")
    z.add_argument("--json", action="store_true")
    z.set_defaults(func=cmd_zoo_list)
    z = zsub.add_parser("export", help="write a built-in network to an ONNX file (with weights)")
    z.add_argument("name")
    z.add_argument("-o", "--output", required=True, help="output .onnx path")
    z.add_argument("--batch", type=int, default=None)
    z.set_defaults(func=cmd_zoo_export)

    p = sub.add_parser("measure", help="measure one placement (simulated Jetson by default)")
    _add_model_args(p)
    _add_target_args(p)
    p.add_argument("--mode", default="engine", choices=("engine", "pipeline", "replicas"))
    p.add_argument("--placement", default=None,
                   help="all-gpu | all-dla | dla0 | dla1 | FILE.json | JSON text (default all-gpu; in replicas "
                        "mode all-dla: each DLA replica runs the network on its DLA with GPU fallback)")
    p.add_argument("--dla-core", type=int, default=None, help="engine mode: the engine's DLA core")
    p.add_argument("--no-gpu-fallback", action="store_true", help="build without GPU_FALLBACK")
    p.add_argument("--replicas", default=None, metavar="GPU:8,DLA0:2,DLA1:2", help="replicas mode: device:batch list")
    p.add_argument("--frames-in-flight", type=int, default=1, help="pipeline mode: frames in flight")
    p.add_argument("--noise", type=float, default=0.0, help="simulated timing noise (relative sd)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", default="simulate", help="simulate | tensorrt | trtexec")
    p.add_argument("--timeline", action="store_true", help="include the timeline events in --json")
    p.add_argument("--samples", action="store_true", help="include every latency sample in --json")
    p.add_argument("--device-profile", metavar="FILE", help="simulated backend: measure the device this profile "
                   "(TOML, see placetune calibrate) describes")
    p.add_argument("--calibration-cache", metavar="FILE", help="tensorrt/trtexec INT8 builds: a TensorRT "
                   "calibration cache (without one, INT8 ranges are placeholders: right for timing, not accuracy)")
    p.set_defaults(func=cmd_measure)
    p = sub.add_parser("doctor", help="which backends work on this machine, and how to fix what is missing; exit 0 "
                       "when the tensorrt or trtexec backend works, 8 when only the simulated Jetson does")
    p.add_argument("--worker-python", help="Python interpreter for the TensorRT worker (JetPack 5: /usr/bin/python3)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("selftest", help="first run on a new Jetson: check the real TensorRT/CUDA/DLA stack "
                       "(about 10 minutes), write a shareable report; exit 0 all ok, 8 otherwise")
    p.add_argument("-o", "--output", default="placetune-selftest", help="report folder (default placetune-selftest)")
    p.add_argument("--worker-python", help="Python interpreter for the TensorRT worker (JetPack 5: /usr/bin/python3)")
    p.set_defaults(func=cmd_selftest)

    from placetune.cli.results import add_parsers

    add_parsers(sub)

    from placetune.cli.calibrate import add_parser as add_calibrate

    add_calibrate(sub)

    from placetune.cli.deploy import add_parser as add_build

    add_build(sub)

    p = sub.add_parser("tune", help="search placements for a study (resumable; Ctrl-C stops cleanly)",
                       description="Search placements for a study: resumable (the same command continues it), "
                       "Ctrl-C stops cleanly after the evaluation in flight.", epilog=TUNE_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("study_file", nargs="?", metavar="STUDY.toml", help="study file (see studies/)")
    p.add_argument("--model", action="append", help="ONNX file or zoo name (default: the embedded default); "
                   "repeat it with --mode concurrent to place several networks that run at once")
    p.add_argument("--shape", action="append", metavar="NAME=1x3x224x224")
    p.add_argument("--batch", type=int)
    p.add_argument("--platform")
    p.add_argument("--backend", help="simulate | tensorrt | trtexec")
    p.add_argument("--mode", choices=("engine", "pipeline", "replicas", "concurrent"))
    p.add_argument("--objective", help="latency | throughput | energy | gpu_time | latency+energy")
    p.add_argument("--constraint", action="append", metavar="METRIC<=BOUND",
                   help="repeatable: latency<=2.0, throughput>=500, energy<=40, gpu_time<=1.5 (ms, fps, mJ, ms); "
                   "concurrent mode also latency[NETWORK]<=5")
    p.add_argument("--precision", choices=("fp16", "int8", "fp32"))
    p.add_argument("--power-mode", help="nvpmodel power mode of the platform, e.g. 30W (default MAXN: the "
                   "fastest; see docs/power-modes.md)")
    p.add_argument("--agent", help="search agent: guided (default), local, optuna, random, reinforce, exact "
                   "(see below)")
    p.add_argument("--trials", type=int, help="evaluation budget of the study (total over resumes)")
    p.add_argument("--timeout", help="wall-clock limit of this run, e.g. 8h, 30m")
    p.add_argument("--storage", help="SQLAlchemy URL or SQLite path (default sqlite:///placetune.db)")
    p.add_argument("--study", help="study name (default: derived from the settings)")
    p.add_argument("--granularity", help="decision units: stages, fusion, layer or scope:N (see below; default: "
                   "the agent's, guided: stages)")
    p.add_argument("--seed", type=int, help="agent seed")
    p.add_argument("--stop-when-converged", action="store_true",
                   help="end the run once the best stopped improving (default: use the whole budget and report "
                        "where it converged)")
    p.add_argument("--export", help="plan path (default <study>.plan.json)")
    p.add_argument("--worker-python", help="tensorrt backend: Python that runs the build worker")
    p.add_argument("--trtexec", help="trtexec backend: the trtexec binary (default: $PLACETUNE_TRTEXEC, PATH, "
                   "/usr/src/tensorrt/bin)")
    p.add_argument("--device-profile", metavar="FILE", help="simulated backend: measure the device this profile "
                   "(TOML, see placetune calibrate) describes")
    p.add_argument("--calibration-cache", metavar="FILE", help="tensorrt/trtexec INT8 builds: a TensorRT "
                   "calibration cache (without one, INT8 ranges are placeholders: right for timing, not accuracy)")
    p.set_defaults(func=cmd_tune)
    return parser


#: The longest error message printed: a hostile value (a 50 MB device name) is cut, not echoed whole.
MAX_ERROR_CHARS = 2000


def _one_line(text: str) -> str:
    """An error message as printed: at most :data:`MAX_ERROR_CHARS` characters."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}... (message cut: {len(text):,} characters)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``placetune`` console script.

    Everything it prints passes :mod:`placetune.cli.terminal` (secrets masked, control and
    bidi characters escaped); every option passes :func:`placetune.cli.checks.check_arguments`.
    """
    from placetune.cli.terminal import safe_output

    with safe_output():
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    from placetune.cli.checks import check_arguments

    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(argv) if argv is not None else None
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        check_arguments(parser, args)
        return int(args.func(args) or 0)
    except PlacetuneError as exc:
        print(f"placetune: error: {_one_line(' '.join(str(exc).split()))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("placetune: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
