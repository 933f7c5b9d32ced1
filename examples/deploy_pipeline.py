"""From a tuned study to a pipeline running in an application (the deployment user's path).

    python examples/deploy_pipeline.py STUDY [--storage sqlite:///placetune.db] [-o plan_dir]

1. export the study's best plan as a folder (segment ONNX files with weights, build.sh, plan.json);
2. build its engines here through the TensorRT worker (on a Jetson), reporting any layer that
   TensorRT put elsewhere than the plan says;
3. run the built pipeline: one inference, then a stream with the plan's frames in flight.
Needs TensorRT and CUDA (a Jetson); step 1 works anywhere, and without TensorRT the example
stops after it with a one-line error and exit status 8, as ``placetune build`` does.
"""

import argparse
import sys
import time

import numpy as np

import placetune as pt

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("study", help="the study whose best plan to deploy (placetune studies lists them)")
ap.add_argument("--storage", default="sqlite:///placetune.db",
                help="the database the study is in (default sqlite:///placetune.db)")
ap.add_argument("-o", "--output", default="plan_dir", help="the plan folder to write (default plan_dir)")
args = ap.parse_args()


def main() -> None:
    with pt.Store(args.storage) as store:
        plan = pt.export_plan(store, args.study)
        model = pt.Model.load(plan.model.get("path") or plan.model["zoo"], batch=plan.batch)
    folder = pt.write_plan_folder(plan, model, args.output)              # 1. the folder
    print("wrote", ", ".join(p.name for p in folder.files))
    print(pt.build_plan(folder.directory).summary())                     # 2. the engines, on the Jetson
    with pt.runtime.load(folder.directory) as rt:                        # 3. the application's side
        rng = np.random.default_rng(0)  # stand-in frames: your application feeds its own, one array per input
        frames = [{name: rng.standard_normal(shape).astype(dtype) for name, (shape, dtype) in rt.inputs.items()}
                  for _ in range(64)]
        first = rt(frames[0])
        t0 = time.perf_counter()
        n = sum(1 for _ in rt.stream(frames))
        print(f"{n} frames, {rt.planned_frames_in_flight} in flight: {n / (time.perf_counter() - t0):.1f} frames/s "
              f"(outputs {', '.join(f'{k} {v.shape}' for k, v in first.items())})")


try:
    main()
except pt.PlacetuneError as exc:  # no TensorRT here, no such study...: one line, as the placetune command says it
    print(f"deploy_pipeline: error: {exc}", file=sys.stderr)
    sys.exit(exc.exit_code)  # the placetune command's exit codes (8: backend)
