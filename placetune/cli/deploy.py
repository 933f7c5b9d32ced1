"""``placetune build``: build an exported plan's engines on the Jetson and report how TensorRT realised it."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from placetune.validate import dumps_json
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    import placetune.backends.tensorrt.backend as _backend
    import placetune.plan.build as _build
    import placetune.model.model as _model
else:
    _backend = lazy_import("placetune.backends.tensorrt.backend")
    _build = lazy_import("placetune.plan.build")
    _model = lazy_import("placetune.model.model")

__all__ = ["add_parser", "cmd_build"]


def cmd_build(args: argparse.Namespace) -> int:
    model = None
    if args.model:
        model = _model.Model.load(args.model)
    with _backend.TensorRTBackend(args.worker_python) as be:
        report = _build.build_plan(args.plan, args.output, model=model, backend=be,
                            calibration_cache=args.calibration_cache)
    print(dumps_json(report.to_dict(), indent=1) if args.json else report.summary())
    # the engines and build.json are written either way; a script (a board's CI) learns from the status that
    # what it built is not what the plan measured
    return 0 if report.as_planned else 1


def add_parser(sub) -> None:
    p = sub.add_parser("build", help="on a Jetson: build a plan, say where TensorRT put each layer",
                       description="On a Jetson: build an exported plan's engines (TensorRT worker) and report "
                       "every layer TensorRT placed elsewhere than the plan (exit 1 when any is, or is unknown).")
    p.add_argument("plan", metavar="PLAN", help="plan folder (placetune export --format trtexec -o DIR) or plan.json")
    p.add_argument("-o", "--output", default=None, help="folder to build in (default: the plan folder; for a "
                   "plan.json, <model>.build)")
    p.add_argument("--model", help="the plan's ONNX model, when the plan's own reference cannot be loaded")
    p.add_argument("--calibration-cache", metavar="FILE", help="INT8: TensorRT calibration cache for the builds")
    p.add_argument("--worker-python", help="Python interpreter for the TensorRT worker (JetPack 5: /usr/bin/python3)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_build)
