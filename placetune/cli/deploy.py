"""``placetune build``: build an exported plan's engines on the Jetson and report how TensorRT realised it."""

from __future__ import annotations

import argparse

from placetune.validate import dumps_json

__all__ = ["add_parser", "cmd_build"]


def cmd_build(args: argparse.Namespace) -> int:
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from placetune.plan.build import build_plan

    model = None
    if args.model:
        from placetune.model.model import Model

        model = Model.load(args.model)
    with TensorRTBackend(args.worker_python) as be:
        report = build_plan(args.plan, args.output, model=model, backend=be,
                            calibration_cache=args.calibration_cache)
    print(dumps_json(report.to_dict(), indent=1) if args.json else report.summary())
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("build", help="on a Jetson: build an exported plan's engines (TensorRT worker) and report "
                       "every layer TensorRT placed elsewhere than the plan")
    p.add_argument("plan", metavar="PLAN", help="plan folder (placetune export --format trtexec -o DIR) or plan.json")
    p.add_argument("-o", "--output", default=None, help="folder to build in (default: the plan folder; for a "
                   "plan.json, <model>.build)")
    p.add_argument("--model", help="the plan's ONNX model, when the plan's own reference cannot be loaded")
    p.add_argument("--calibration-cache", metavar="FILE", help="INT8: TensorRT calibration cache for the builds")
    p.add_argument("--worker-python", help="Python interpreter for the TensorRT worker (JetPack 5: /usr/bin/python3)")
    p.add_argument("--json", action="store_true", help="the report as JSON")
    p.set_defaults(func=cmd_build)
