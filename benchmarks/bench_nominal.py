"""`tune`'s default agent on the nominal simulated Jetson: the gap to the best known after 100 evaluations.

The target: on resnet50 and googlenet, pipeline mode, throughput, INT8, batch 2, 4 frames
in flight, the default agent and granularity are within 2 % of the best known after 100
evaluations (median of 3 seeds). The best known is the best of long local searches at fusion
and stages granularity, a long run of the default agent, and every run in the table.

    python benchmarks/bench_nominal.py [--seeds 3] [--budget 100] [--reference-budget 600]

Everything here is simulated (the nominal simulator is both the device and the agent's prior).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placetune import Model  # noqa: E402
from placetune.tuning.evaluator import Evaluator  # noqa: E402
from search import DEFAULT_AGENT, Budget, get_agent  # noqa: E402

_MODELS: dict[str, Model] = {}


def evaluator(name: str) -> Evaluator:
    """A fresh evaluator (in-memory store) for the target's pipeline case of a network."""
    if name not in _MODELS:
        _MODELS[name] = Model.load(name, batch=2)
    return Evaluator(_MODELS[name], "orin-agx", mode="pipeline", precision="int8", objective="throughput",
                     frames_in_flight=4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--budget", type=int, default=100)
    ap.add_argument("--reference-budget", type=int, default=600)
    ap.add_argument("--networks", nargs="+", default=["resnet50", "googlenet"])
    args = ap.parse_args(argv)
    print(f"default agent: {DEFAULT_AGENT}; {args.seeds} seeds x {args.budget} evaluations (SIMULATED, nominal)\n")
    print("| network | best known | default agent best after budget, per seed | gap per seed | median gap | s/run |")
    print("|---|---:|---|---|---:|---:|")
    ok = True
    for net in args.networks:
        t0 = time.perf_counter()
        runs = [get_agent(seed=s).run(evaluator(net), Budget(args.budget)) for s in range(args.seeds)]
        secs = (time.perf_counter() - t0) / args.seeds
        long = [get_agent("local", seed=100, granularity=g).run(evaluator(net), Budget(args.reference_budget))
                for g in ("fusion", "stages")]
        long.append(get_agent(seed=100).run(evaluator(net), Budget(3 * args.budget)))
        ref = max(r.best_value for r in runs + long if r.best_value is not None)
        vals = [r.best_after(args.budget) for r in runs]
        gaps = [(ref - v) / ref if v is not None else float("inf") for v in vals]
        med = statistics.median(gaps)
        ok &= med <= 0.02
        print(f"| {net} | {ref:,.1f} fps | {', '.join(f'{v:,.1f}' for v in vals)} | "
              f"{', '.join(f'{100 * g:.2f}%' for g in gaps)} | {100 * med:.2f}% | {secs:.1f} |")
    print(f"\ntarget (median gap <= 2% after {args.budget}): {'met' if ok else 'MISSED'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
