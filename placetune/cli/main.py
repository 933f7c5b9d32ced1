"""The ``placetune`` command. Only this module prints; library code logs."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
import os
import shlex
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, NoReturn

from placetune.cli.check import cmd_check, with_dla
from placetune.cli.checks import check_arguments
from placetune.cli.measure import calibration_cache, cmd_measure
from placetune.cli.usage import closest_options, command_hint
from placetune.cli.signals import interrupt_behind, sigterm_as_interrupt, stop_line
from placetune.cli.tune_help import TUNE_EXAMPLES, tune_epilog
from placetune.cli.terminal import (error_line, output_lost, safe_output, show, table, terminal_width,
                                     when_output_lost)
from placetune.errors import ConfigError, Interrupted, PlacetuneError, ShapeError
from placetune.validate import dumps_json
from placetune.wording import plural, wrap
from placetune._lazy import lazy_import
from placetune.cli.calibrate import add_parser as add_calibrate
from placetune.cli.deploy import add_parser as add_build
from placetune.cli.helpall import add_help_all, rare, rare_options
from placetune.cli.results import add_parsers
from placetune.cli.selftest import format_report, run_selftest
from placetune.hardware.platforms import get_platform
from placetune.settings import DEFAULT_PRECISION, check_trt_version
from placetune.version import __version__

if TYPE_CHECKING:
    import placetune.backends.doctor as _doctor
    import placetune.tuning.constraints as _constraints
    import placetune.model.zoo as _zoo
    import placetune.model.zoo.registry as _zoo_registry
    import placetune.tuning.studyfile as _studyfile
    import placetune.tuning.tune as _tune
else:
    _doctor = lazy_import("placetune.backends.doctor")
    _constraints = lazy_import("placetune.tuning.constraints")
    _zoo = lazy_import("placetune.model.zoo")
    _zoo_registry = lazy_import("placetune.model.zoo.registry")
    _studyfile = lazy_import("placetune.tuning.studyfile")
    _tune = lazy_import("placetune.tuning.tune")

__all__ = ["main", "build_parser"]

log = logging.getLogger("placetune")


# ----------------------------------------------------------------- helpers
# ----------------------------------------------------------------- zoo
def cmd_zoo_list(args: argparse.Namespace) -> int:
    rows = [(n, _zoo.default_batch(n), _zoo.describe(n)) for n in _zoo.names()]
    doc = {"models": [{"name": n, "batch": b, "description": d} for n, b, d in rows]}
    show(args, doc, table(rows, ("name", "batch", "description"), width=terminal_width()))
    return 0


def cmd_zoo_export(args: argparse.Namespace) -> int:
    base, _, opts = args.name.partition(":")
    if args.batch is not None and args.batch < 1:
        raise ConfigError(f"batch must be a positive integer, got {args.batch}")
    if args.output == "-":  # a binary ONNX file of up to hundreds of MB: never a file named "-", nor the terminal
        raise ConfigError("zoo export -o: the ONNX model is written to a file; give its name (e.g. -o "
                          f"{base}.onnx), not - (standard output)")
    path = _zoo.export(base, args.output, batch=args.batch or _zoo.default_batch(base), force=args.force,
                       **_zoo_registry.parse_options(opts))
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, with deterministic weights)")
    return 0


# ----------------------------------------------------------------- selftest
def cmd_selftest(args: argparse.Namespace) -> int:
    code, doc = run_selftest(args.output, worker_python=args.worker_python, platform=args.platform,
                             input_data=args.input_data)
    print(format_report(doc), end="")
    print(f"report: {args.output}/selftest.txt, {args.output}/selftest.json")
    return code


# ----------------------------------------------------------------- tune
def cmd_tune(args: argparse.Namespace) -> int:
    embedded = not args.study_file and args.model is None
    if args.study_file:
        base = _studyfile.load_study_file(args.study_file, trusted=args.trust_study_file)
        if not args.model:  # a model of the command line replaces the file's
            _studyfile.check_model_files(base)
    elif embedded:
        base = _studyfile.TuneConfig.embedded_default()
    else:
        base = _studyfile.TuneConfig()
    models = list(args.model or [])
    if len(models) > 1 and args.mode is None:  # several networks run at once
        args.mode = "concurrent"
    cfg = base.with_overrides(
        model=models[0] if len(models) == 1 else None, models=models if len(models) > 1 else None,
        platform=args.platform, backend=args.backend, mode=args.mode,
        objective=args.objective, precision=args.precision, batch=args.batch, shapes=args.shape,
        agent=args.agent, trials=args.trials, timeout=_studyfile.parse_duration(args.timeout), storage=args.storage,
        study=args.study, granularity=args.granularity, export=args.export,
        export_force=True if args.force else None,
        stop_when_converged=True if args.stop_when_converged else None, power_mode=args.power_mode,
        stop_when_settled=args.stop_when_settled,
        streams=args.streams,
    )
    if args.seed is not None:
        cfg.agent_options["seed"] = args.seed
        cfg.check_options()
    if args.worker_python:
        cfg.backend_options["worker_python"] = args.worker_python
    if args.trtexec:
        cfg.backend_options["trtexec"] = args.trtexec
    if args.calibration_cache:
        cfg.backend_options["calibration_cache"] = calibration_cache(args.calibration_cache, cfg.backend)
    if args.device_profile:
        cfg = cfg.with_overrides(device_profile=args.device_profile)
    if args.input_data:
        cfg = cfg.with_overrides(input_data=args.input_data)
    if args.trt_version is not None:  # as [settings] trt_version: the DLA rules the search applies
        check_trt_version(args.trt_version)
        cfg.settings["trt_version"] = args.trt_version.strip()
        cfg.check_options()
    if args.constraint:  # command-line constraints replace the study file's
        cfg.constraints = [c.text for c in _constraints.parse_constraints(args.constraint)]
    if cfg.trials < 1:
        raise ConfigError("--trials must be >= 1")
    _refuse_without_dla(cfg.platform)
    if cfg.precision == "fp32":
        raise ConfigError("precision fp32 runs on the GPU only (the DLA takes fp16 and int8): no layer can run on "
                          "a DLA, so all-GPU is the only placement and there is nothing to tune; tune with --precision fp16 or int8, or "
                          "time all-GPU at fp32 with: placetune measure MODEL --precision fp32")
    argv = sys.argv[1:] if args.argv is None else args.argv
    intro = ""  # said by the run once its options are checked, never before an error
    if embedded:
        intro = "no study file or model given: running the embedded default " + (
            "with the options given" if len(argv) > 1 else "(placetune tune --help lists the options)")
    hint = "placetune " + shlex.join(argv)
    tuner = _tune.Tuner(cfg, resume_hint=hint, intro=intro)

    def stop() -> None:  # the output is lost: stop after the evaluation in flight (stored), as on Ctrl-C
        if tuner.evaluator is not None:
            tuner.evaluator.request_stop()

    try:
        with when_output_lost(stop):
            outcome = tuner.run()
    except ShapeError as exc:  # a study file's shapes: it says --shape, the file named them
        if args.study_file and not args.shape and cfg.shapes and "--shape" in str(exc):
            raise ShapeError(f"{args.study_file} sets shapes = {list(cfg.shapes)}: {exc}") from None
        raise
    if output_lost() is not None:  # said where it stopped on standard error, the one output left
        error_line(f"placetune: the tune stopped after {outcome.trials_done} of {plural(cfg.trials, 'trial')}; "
                   f"everything measured is stored. Resume with: {hint}")
    if outcome.exit_code is not None:  # 8: another process kept the GPU busy (stored, exported, resumable)
        return outcome.exit_code
    return 128 + (outcome.signal or 2) if outcome.interrupted else 0  # 130 Ctrl-C, 143 SIGTERM


def _refuse_without_dla(name: str) -> None:
    """A tune on a module without a DLA (Orin Nano) has one placement, all-GPU: nothing to search. It
    built one trial and printed an unjudged verdict; it is refused before a study is stored (exit 6)."""
    platform = get_platform(name)
    if not platform.dla_count:
        raise ConfigError(f"platform {platform.name} has no DLA core: every layer runs on the GPU, so there is no "
                          f"placement to tune (placetune measure MODEL --platform {platform.name} times all-GPU); "
                          f"platforms with a DLA: {with_dla()}")


# ----------------------------------------------------------------- doctor
def cmd_doctor(args: argparse.Namespace) -> int:
    checks = _doctor.run(worker_python=args.worker_python)
    if args.json:
        print(dumps_json([asdict(c) for c in checks], indent=2))
    else:
        print(_doctor.format(checks, terminal_width()))
    return _doctor.verdict(checks)[0]  # 0: a hardware backend works here; 8: only the simulated Jetson


# ----------------------------------------------------------------- parser
#: The end of ``placetune measure --help`` and ``--help-all``.
MEASURE_EXAMPLES = """\
examples:
  placetune measure resnet50 --placement all-dla
  placetune measure my.onnx --mode pipeline --placement placement.json
  placetune measure resnet50 --mode replicas --replicas GPU:8,DLA0:2,DLA1:2
"""


def _add_model_args(p: argparse.ArgumentParser, batch: bool = True) -> None:
    p.add_argument("model", help="ONNX file (.onnx or .onnx.gz) or zoo name (see `placetune zoo list`)")
    p.add_argument("--shape", "--shapes", action="append", metavar="NAME=1x3x224x224",
                   help="fix an input shape (repeat for several inputs); needed for dynamic dims; trtexec's "
                        "name:1x3x224x224[,name:dims] and Polygraphy's name:[1,3,224,224] work too")
    if batch:
        p.add_argument("--batch", type=int, default=None, help="batch: of a zoo model, or the open leading "
                       "dimension of a file's inputs (a file with a static batch takes --shape)")


def _add_target_args(p: argparse.ArgumentParser, precision: str = DEFAULT_PRECISION) -> None:
    p.add_argument("--platform", default="orin-agx", help="Jetson profile (default orin-agx)")
    p.add_argument("--precision", default=precision, choices=("fp16", "int8", "fp32"), type=str.lower,
                   help=f"builder precision (default {precision}" + (", as tune's)" if precision != "fp16" else ")"))
    p.add_argument("--trt-version", default=None, help="TensorRT version whose DLA rules apply (default: the "
                   "platform's, 8.6 on Orin, 8.5 on Xavier)")
    p.add_argument("--power-mode", default="MAXN", help="nvpmodel power mode of the platform, e.g. 30W (default "
                   "MAXN: the fastest; see docs/power-modes.md)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _add_input_data_arg(p: Any) -> None:
    p.add_argument("--input-data", metavar="FILE.npz|DIR", help="time (and gate) on these inputs, not random ones: "
                   "a .npz keyed by the network's input names, or a folder of JPEG/PNG frames (letterboxed as "
                   "Ultralytics does); a detector's NMS does little on noise (docs/timing.md)")


class _Parser(argparse.ArgumentParser):
    """A usage error in one line (exit 2): what was wrong and where the command's options are listed,
    not the command's whole usage (tune's fills a screen and hides the line that matters)."""

    def error(self, message: str) -> NoReturn:
        error_line(f"{self.prog}: error: {message}{command_hint(message)} ({self.prog} --help lists the options)")
        self.exit(2)


def _unknown_options(parser: argparse.ArgumentParser, args: argparse.Namespace, extras: list[str]) -> NoReturn:
    """Arguments no option of the command takes: each named, with the command's options closest to it
    (``--trails``: did you mean ``--trials``?), in one line, exit 2."""
    command = parser
    for action in parser._actions:  # noqa: SLF001 - argparse keeps its subcommands there
        if isinstance(action, argparse._SubParsersAction) and getattr(args, "command", None) in action.choices:
            command = action.choices[args.command]
    options = {o: i for i, a in enumerate(command._actions)  # noqa: SLF001
               for o in a.option_strings if o.startswith("--")}  # option -> its action (--shape, --shapes: one)
    words = []
    for extra in extras:
        close = closest_options(extra.split("=")[0], options) if extra.startswith("--") else []
        words.append(f"{extra} (did you mean {' or '.join(close)}?)" if close else extra)
    command.error(f"unrecognized argument{'s' if len(extras) > 1 else ''}: {', '.join(words)}")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``placetune`` command."""
    parser = _Parser(
        prog="placetune",
        description="Find the best placement of a network's layers on a Jetson's GPU and DLA cores.",
        epilog="start here:\n"
               "  placetune tune                  the main job (ResNet-50, simulated Orin)\n"
               "  placetune tune --model my.onnx  the same for your own network\n"
               "  placetune export -o plan.json   the best plan (--format trtexec: for Jetson)\n"
               "  placetune report -o report      plots of the search and its best plan\n"
               "Off a Jetson every figure comes from the simulated Jetson and says so.\n"
               "placetune COMMAND --help: a command's options (tune, measure: also --help-all).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"placetune {__version__}")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("check", help="which layers of a model can run on a DLA, and why not")
    _add_model_args(p)
    _add_target_args(p, DEFAULT_PRECISION)
    p.add_argument("--layers", action="store_true", help="the per-layer table too (op, shapes, DLA or not, why "
                   "not), fitted to the terminal (80 columns in a log); default: the summary and the reasons only")
    p.add_argument("--wide", action="store_true", help="the whole per-layer table, one layer a line: full names and "
                   "reasons, input shapes (implies --layers)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("zoo", help="built-in networks")
    p.set_defaults(func=lambda _args, zoo=p: _usage(zoo))  # `placetune zoo` alone: the zoo's help
    zsub = p.add_subparsers(dest="zoo_command", metavar="ACTION")
    z = zsub.add_parser("list", help="list the built-in networks")
    z.add_argument("--json", action="store_true", help="print JSON instead of a table")
    z.set_defaults(func=cmd_zoo_list)
    z = zsub.add_parser("export", help="write a built-in network to an ONNX file (with weights)")
    z.add_argument("name")
    z.add_argument("-o", "--output", required=True, help="output .onnx path (replaces an earlier zoo export or an "
                   "empty file; another file only with --force)")
    z.add_argument("--force", action="store_true", help="replace an existing -o file that is not a zoo export")
    z.add_argument("--batch", type=int, default=None, help="batch of the exported network (default: its own, as `placetune zoo list` shows)")
    z.set_defaults(func=cmd_zoo_export)

    p = sub.add_parser("measure", help="measure one placement (simulated Jetson by default)",
                       usage="%(prog)s MODEL [--placement PLACEMENT] [--mode MODE] [options]",
                       description="Measure one placement of MODEL (all-GPU unless --placement says otherwise).\n"
                       "A plan tune or export wrote, given to --placement, is measured as it was tuned:\n"
                       "its platform, mode, precision, frames in flight and power mode, for the options\nleft out.")
    _add_model_args(p)
    _add_target_args(p, DEFAULT_PRECISION)
    p.set_defaults(platform=None, precision=None, power_mode=None)  # a plan's own, else the defaults its help names
    p.add_argument("--mode", default=None, choices=("engine", "pipeline", "replicas"), type=str.lower,
                   help="engine: one engine, GPU + one DLA core (default); pipeline: one engine per segment; "
                   "replicas: one whole network per device")
    p.add_argument("--placement", default=None,
                   help="all-gpu | all-dla | dla0 | dla1 | FILE.json | JSON text (default all-gpu; in replicas "
                        "mode all-dla: each DLA replica runs the network on its DLA with GPU fallback)")
    p.add_argument("--dla-core", type=int, default=None, help="engine mode: the engine's DLA core")
    p.add_argument("--no-gpu-fallback", action="store_true", help="build without GPU_FALLBACK")
    p.add_argument("--replicas", default=None, metavar="GPU:8,DLA0:2,DLA1:2", help="replicas mode: device:batch list")
    p.add_argument("--frames-in-flight", type=int, default=None, help="pipeline mode: frames in flight (default 1)")
    p.add_argument("--noise", type=float, default=0.0, help="simulated timing noise (relative sd)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated timing noise (default 0)")
    p.add_argument("--backend", default="simulate",
                   help="simulate | tensorrt | trtexec, or a backend a package adds (entry point group "
                        "placetune.backends)")
    p.add_argument("--timeline", action="store_true", help="include the timeline events in --json")
    p.add_argument("--samples", action="store_true", help="include every latency sample in --json")
    p.add_argument("--device-profile", metavar="FILE", help="simulated backend: measure the device this profile "
                   "(TOML, see placetune calibrate) describes")
    p.add_argument("--calibration-cache", metavar="FILE", help="tensorrt/trtexec INT8 builds: a TensorRT "
                   "calibration cache (without one, INT8 ranges are placeholders: right for timing, not accuracy)")
    _add_input_data_arg(p)
    rare_options(p, "--trt-version", "--power-mode", "--dla-core", "--no-gpu-fallback", "--frames-in-flight",
                 "--noise", "--seed", "--timeline", "--samples", "--device-profile", "--calibration-cache",
                 "--input-data")
    add_help_all(p, full_epilog=MEASURE_EXAMPLES, short_epilog=MEASURE_EXAMPLES)
    p.set_defaults(func=cmd_measure)
    p = sub.add_parser("doctor", help="which backends work here, and how to fix what is missing",
                       description="Which backends work on this machine, and how to fix what is missing; exit 0 "
                       "when the tensorrt or trtexec backend works, 8 when only the simulated Jetson does.")
    p.add_argument("--worker-python", help="Python interpreter for the TensorRT worker (JetPack 5: /usr/bin/python3)")
    p.add_argument("--json", action="store_true", help="print JSON instead of the list")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("selftest", help="first run on a Jetson: check TensorRT, CUDA, DLA (10 min)",
                       description="First run on a new Jetson: check the real TensorRT/CUDA/DLA stack "
                       "(about 10 minutes), write a shareable report; exit 0 when the stack works (a setup step such as "
                       "jetson_clocks may remain), 8 when a check failed or could not run.")
    p.add_argument("-o", "--output", default="placetune-selftest", help="report folder (default placetune-selftest)")
    p.add_argument("--worker-python", help="Python interpreter for the TensorRT worker (JetPack 5: /usr/bin/python3)")
    p.add_argument("--platform", help="the placetune profile of a module the device tree does not identify (the "
                   "one a tune of this board names; an unknown name is exit 4)")
    p.add_argument("--input-data", metavar="FILE.npz", help="time the self-test's network on these inputs (keys: "
                   "its input name 'input', arrays 4x3x32x32 float32) instead of random ones")
    p.set_defaults(func=cmd_selftest)

    add_parsers(sub)

    add_calibrate(sub)

    add_build(sub)

    p = sub.add_parser("tune", help="search placements (resumable; Ctrl-C stops cleanly)",
                       usage="%(prog)s [STUDY.toml] [--model MODEL] [--trials N] [options]",
                       description="Search placements for a study. Resumable: the same command continues it.\n"
                       "Ctrl-C stops cleanly after the evaluation in flight.",
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    # the options in groups, the essentials first: a first run needs none of the rest
    g = p.add_argument_group("what to tune, and where the results go")
    g.add_argument("study_file", nargs="?", metavar="STUDY.toml", help="study file (see studies/); options "
                   "override it")
    g.add_argument("--model", metavar="MODEL", action="append",
                   help="ONNX file or zoo name (default: the embedded default); "
                   "repeat it for several networks that run at once")
    g.add_argument("--platform", metavar="NAME",
                   help="Jetson profile (default orin-agx), e.g. orin-nx-16gb, xavier-agx (README: "
                   "Platforms)")
    g.add_argument("--objective", metavar="NAME",
                   help="throughput (default) | latency | energy | gpu_time | latency+energy")
    rare(g.add_argument("--constraint", action="append", metavar="METRIC<=BOUND",
                   help="repeatable: latency<=2.0, throughput>=500, energy<=40, gpu_time<=1.5 (ms, fps, mJ, ms); "
                   "concurrent mode also latency[NETWORK]<=5"))
    g.add_argument("--trials", metavar="N", type=int,
                   help="evaluation budget of the study (total over resumes; default 300)")
    g.add_argument("--timeout", metavar="TIME", help="wall-clock limit of this run, e.g. 8h, 30m (a bare "
                   "number: seconds)")
    g.add_argument("--backend", metavar="NAME",
                   help="simulate (default: the simulated Jetson) | tensorrt | trtexec, or one a package "
                   "adds (entry points placetune.backends)")
    rare(g.add_argument("--storage", metavar="URL",
                        help="SQLAlchemy URL or SQLite path (default sqlite:///placetune.db)"))
    g.add_argument("--study", metavar="NAME", help="study name (default: derived from the settings)")
    rare(g.add_argument("--export", metavar="FILE", help="plan path (default <study>.plan.json); replaces an "
                        "earlier plan or an empty file, another file only with --force (checked before the run)"))
    rare(g.add_argument("--force", action="store_true", help="let the plan file replace an existing file that "
                        "is not a placetune plan (not a study file's export = ...)"))

    g = p.add_argument_group("the model and how it runs")
    g.add_argument("--shape", "--shapes", action="append", metavar="NAME=1x3x224x224",
                   help="fix an input shape (also trtexec's name:1x3x224x224[,name:dims])")
    g.add_argument("--batch", metavar="N", type=int,
                   help="batch: of a zoo model, or the open leading dimension of a file's "
                   "inputs (a file with a static batch takes --shape)")
    g.add_argument("--mode", choices=("engine", "pipeline", "replicas", "concurrent"), type=str.lower, metavar="MODE",
                   help="how a placement runs: pipeline (default: one engine per segment on GPU/DLA0/DLA1), engine, "
                   "replicas, or concurrent (several --model at once)")
    g.add_argument("--precision", choices=("fp16", "int8", "fp32"), type=str.lower, metavar="NAME",
                   help=f"{DEFAULT_PRECISION} (default), " + ", ".join(p for p in ("fp16", "int8")
                                                                      if p != DEFAULT_PRECISION)
                   + "; fp32 is refused (the DLA runs fp16 and int8 only: nothing to place)")
    rare(g.add_argument("--power-mode", metavar="MODE",
                   help="nvpmodel power mode of the platform, e.g. 30W (default MAXN: the "
                   "fastest; see docs/power-modes.md)"))
    rare(g.add_argument("--trt-version", metavar="X.Y",
                   help="TensorRT version whose DLA rules the search applies, e.g. 10.3 (default: "
                   "the board's own on a real backend, else the platform's: 8.6 on Orin, 8.5 on Xavier; "
                   "[settings] trt_version in a study file)"))
    rare(g.add_argument("--streams", metavar="N", type=int,
                   help="camera streams sharing the plan's frames evenly (N streams of one "
                   "network): the summary and the plan give each stream's frames per second"))
    _add_input_data_arg(g)

    g = p.add_argument_group("the search")
    g.add_argument("--agent", metavar="NAME",
                   help="search agent: guided (default), local, optuna, random, reinforce, exact, or one a package "
                   "registers (--help-all lists them and says what each does)")
    rare(g.add_argument("--granularity", metavar="UNIT",
                   help="decision units: stages, fusion, layer or scope:N (see the list below; default: "
                   "the agent's, guided: stages)"))
    rare(g.add_argument("--seed", metavar="N", type=int, help="agent seed"))
    rare(g.add_argument("--stop-when-converged", action="store_true",
                   help="end the run once the best stopped improving (default off: the run goes on and reports "
                        "where it converged; the guided agent still stops once settled, see --stop-when-settled)"))
    rare(g.add_argument("--stop-when-settled", action=argparse.BooleanOptionalAction, default=None,
                   help="guided: after convergence build only plans that could still beat the best by over 1%% and "
                        "leaders the noise cannot yet order, and end the run when none remain (the default; "
                        "--no-stop-when-settled: use the whole budget)"))

    g = p.add_argument_group("on a Jetson (--backend tensorrt or trtexec)")
    rare(g.add_argument("--worker-python", metavar="PATH", help="tensorrt backend: Python that runs the build worker"))
    rare(g.add_argument("--trtexec", metavar="PATH",
                   help="trtexec backend: the trtexec binary (default: $PLACETUNE_TRTEXEC, PATH, "
                   "/usr/src/tensorrt/bin)"))
    rare(g.add_argument("--calibration-cache", metavar="FILE", help="INT8 builds: a TensorRT calibration cache "
                   "(without one, INT8 ranges are placeholders: right for timing, not accuracy)"))

    g = p.add_argument_group("advanced")
    rare(g.add_argument("--device-profile", metavar="FILE", help="simulated backend: measure the device this profile "
                   "(TOML, see placetune calibrate) describes"))
    rare(g.add_argument("--trust-study-file", action="store_true", help="let the study file name paths outside its "
                   "folder and the working folder, and programs, arguments and environment variables of the "
                   "backend ([backend_options] trtexec, worker_python, env...): only for a file you trust"))
    add_help_all(p, full_epilog=tune_epilog, short_epilog=TUNE_EXAMPLES,
                 what="what each agent and granularity does")
    p.set_defaults(func=cmd_tune)
    for commands in (sub, zsub):
        _verbose_anywhere(commands)
    _list_in_order(sub, COMMAND_ORDER)
    return parser


#: The commands as ``placetune --help`` lists them: in the order a user needs them.
COMMAND_ORDER = ("tune", "check", "export", "report", "build", "measure", "studies", "trace", "zoo", "calibrate",
                 "doctor", "selftest")


def _list_in_order(sub: Any, order: Sequence[str]) -> None:
    """List the commands of ``sub`` in ``order`` in the help (those it does not name last, as added)."""
    rank = {name: i for i, name in enumerate(order)}
    # argparse lists subcommands in the order they were added and has no public way to change it
    sub._choices_actions.sort(key=lambda a: rank.get(a.dest, len(rank)))  # noqa: SLF001


def _usage(parser: argparse.ArgumentParser) -> int:
    """A command given without its action: its own help, exit 2 (a usage error)."""
    parser.print_help()
    return 2


def _verbose_anywhere(sub: Any) -> None:
    """``-v`` after the command too (``placetune check x -v``): on every parser of ``sub``."""
    for p in set(sub.choices.values()):
        p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                       help="more log output (-vv for debug)")


#: The longest error message printed: a hostile value (a 50 MB device name) is cut, not echoed whole.
MAX_ERROR_CHARS = 2000


def _cut_message(text: str) -> str:
    """An error message as printed: at most :data:`MAX_ERROR_CHARS` characters (the caller has already folded its
    whitespace onto one line; :func:`placetune.plan.trtexec.one_line` is another job: it escapes control characters
    in a note written into a script)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:MAX_ERROR_CHARS]}... (message cut: {len(text):,} characters)"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``placetune`` console script.

    Everything it prints passes :mod:`placetune.cli.terminal` (secrets masked, control and
    bidi characters escaped); every option passes :func:`placetune.cli.checks.check_arguments`.
    """
    with safe_output(), sigterm_as_interrupt():
        try:
            code = _main(argv)
        except SystemExit as exc:  # --help, --help-all, --version, a usage error: argparse exits
            if exc.code not in (0, None) or _printed() is None:
                raise
            code = 0  # what they printed never reached its reader: said below
        except Exception as exc:  # noqa: BLE001 - a bug: its traceback, escaped like every other message
            interrupt = interrupt_behind(exc)
            if interrupt is not None:  # a library's clean-up that the signal broke: the signal's one line
                print(stop_line(interrupt), file=sys.stderr)
                code = interrupt.exit_code if isinstance(interrupt, Interrupted) else 130
            else:
                import traceback

                print("placetune: internal error (a bug in placetune; please report it with this traceback):\n"
                      + traceback.format_exc(), file=sys.stderr)
                code = 1
        lost = _printed()
        if lost is None:
            return code
        # nothing said on standard output reached its reader: never a success, never a traceback
        error_line(f"placetune: error: {lost}: the command's output is incomplete")
        return ConfigError.exit_code


def _printed() -> str | None:
    """Standard output flushed: None when all of it reached its reader, else how it was lost."""
    sys.stdout.flush()
    return output_lost()


def _check_working_folder() -> None:
    """Refuse to run in a working folder that was deleted (or unmounted) under the shell: every
    relative path (the default database, the plan file) would fail deep inside a command."""
    try:
        os.getcwd()
    except FileNotFoundError:
        raise ConfigError("the working folder no longer exists (deleted or unmounted): cd to a folder that exists "
                          "and run the command again") from None


class _Plain(logging.Formatter):
    """A log line as a user reads it: ``placetune: warning: ...`` (another package's: ``optuna: warning: ...``),
    wrapped at word boundaries when standard error is a terminal, one line in a log or a pipe (as
    :func:`~placetune.cli.terminal.error_line` writes an error)."""

    def format(self, record: logging.LogRecord) -> str:
        who = record.name.split(".")[0] or "placetune"
        text = wrap(f"{who}: {record.levelname.lower()}: {record.getMessage()}", terminal_width(sys.stderr))
        return text + ("\n" + self.formatException(record.exc_info) if record.exc_info else "")


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        _unknown_options(parser, args, extras)
    args.argv = list(argv) if argv is not None else None
    level = logging.WARNING - 10 * min(args.verbose, 2)
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # a warning in the words of an error ("placetune: warning: ..."), not a module's name
        for handler in logging.getLogger().handlers:
            if type(handler) is logging.StreamHandler:  # basicConfig's (a test harness keeps its own)
                handler.setFormatter(_Plain())
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        _check_working_folder()
        check_arguments(parser, args)
        return int(args.func(args) or 0)
    except PlacetuneError as exc:
        error_line(f"placetune: error: {_cut_message(' '.join(str(exc).split()))}")
        return exc.exit_code
    except KeyboardInterrupt as exc:  # before a run's handler holds, or a second signal: stopped at once
        print(stop_line(exc), file=sys.stderr)
        return exc.exit_code if isinstance(exc, Interrupted) else 130
    except BrokenPipeError:  # a pipe other than standard output's (those are marked lost as they fail)
        print("placetune: error: a pipe's reader went away", file=sys.stderr)
        return ConfigError.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
