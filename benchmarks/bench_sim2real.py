"""Sim-to-real: how many builds does each agent need when the device is not the simulator?

"The real Jetson" here is the **simulated** backend measuring with a device profile of our own
(:class:`placetune.calibration.DeviceProfile`), i.e. a simulator with plausible errors the agents
do not know about. Families:

* ``dla-slow``: DLA x1.3, boundaries x2, +100 us per engine, per-layer noise (sd 10 %);
* ``gpu-slow``: GPU x1.25, DLA x0.85, loadables x1.6, contention x1.5, per-layer noise (sd 15 %);
* ``op-class``: per-op-class factors (DLA convs x1.4, DLA pooling x0.6, GPU eltwise x1.6...),
  boundaries x1.5, per-layer noise (sd 10 %);
* ``seg-length``: an effect the correction model cannot represent: a DLA segment's time grows
  with its length beyond 20 layers (SRAM spills: +1.5 % per layer) and every GPU segment of
  fewer than 4 layers costs 60 us more (a benchmark-only subclass of the simulator).

Cases: resnet50 and googlenet in pipeline mode, throughput, int8, batch 2, 4 frames in flight;
mobilenetv2 in engine mode, energy, int8, batch 2. For each case and family, the truth's best
known is the best of long runs (local at fusion and stages granularity, guided with a large
budget) and of every run in the table; the table gives, per agent, the evaluations until the
best-so-far is within 5 % and 2 % of it (median over seeds; ``>B`` when not reached in B) and the
simulated device hours those evaluations would take at ~1.5 minutes per build (HaX-CoNN:
"a couple of minutes" per engine).

Everything here is simulated; nothing is measured on a Jetson.

Usage:
    python benchmarks/bench_sim2real.py [--seeds 1] [--budget 40] [--blind-budget 150] [--reference-budget 600]
    python benchmarks/bench_sim2real.py --seeds 5 --budget 60 --blind-budget 400 --reference-budget 3000  # full
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
import optuna  # noqa: E402

from placetune import Model  # noqa: E402
from placetune.backends.simulate import simulator as _sim  # noqa: E402
from placetune.backends.simulate.simulator import SimulatedJetson  # noqa: E402
from placetune.calibration import DeviceProfile  # noqa: E402
from placetune.tuning.evaluator import Evaluator  # noqa: E402
from search import Budget, SearchResult, get_agent  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

MIN_PER_BUILD = 1.5  # minutes per evaluation on a Jetson (engine build + timing)


class SegmentLengthJetson(SimulatedJetson):
    """Benchmark-only: segment costs that depend on segment length (no per-layer factor explains them)."""

    def __init__(self, *args: Any, dla_knee: int = 20, dla_slope: float = 0.015, short_gpu: int = 4,
                 short_gpu_ms: float = 0.06, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.knee, self.slope, self.short, self.short_ms = dla_knee, dla_slope, short_gpu, short_gpu_ms

    def measure(self, realisation, platform, settings):  # type: ignore[override]
        original = _sim._segment_sums

        def sums(segs, table, ms, nbytes):
            t, b, dev = original(segs, table, ms, nbytes)
            n = np.array([len(s.layers) for s in segs], dtype=float)
            t = t * np.where(dev > 0, 1.0 + self.slope * np.maximum(0.0, n - self.knee), 1.0)
            t = t + np.where((dev == 0) & (n < self.short), self.short_ms, 0.0)
            return t, b, dev

        _sim._segment_sums = sums
        try:
            return super().measure(realisation, platform, settings)
        finally:
            _sim._segment_sums = original


def families() -> dict[str, Any]:
    """name -> backend factory (a fresh backend per evaluator)."""
    p = {
        "dla-slow": DeviceProfile(base="orin-agx", dla=1.3, boundary=2.0, engine_us=100.0, layer_sigma=0.10, seed=1),
        "gpu-slow": DeviceProfile(base="orin-agx", gpu=1.25, dla=0.85, loadable=1.6, contention=1.5,
                                  layer_sigma=0.15, seed=2),
        "op-class": DeviceProfile(base="orin-agx", boundary=1.5, layer_sigma=0.10, seed=3,
                                  op_class={"dla.conv": 1.4, "dla.pool": 0.6, "gpu.eltwise": 1.6, "gpu.conv": 0.9,
                                            "dla.eltwise": 1.3}),
    }
    out: dict[str, Any] = {k: (lambda prof=v: SimulatedJetson(timeline=False, profile=prof)) for k, v in p.items()}
    out["seg-length"] = lambda: SegmentLengthJetson(timeline=False, profile=DeviceProfile(
        base="orin-agx", dla=1.1, engine_us=50.0, seed=4))
    return out


CASES = {
    "resnet50 pipeline throughput": dict(model="resnet50", mode="pipeline", objective="throughput"),
    "googlenet pipeline throughput": dict(model="googlenet", mode="pipeline", objective="throughput"),
    "mobilenetv2 engine energy": dict(model="mobilenetv2", mode="engine", objective="energy"),
}
_MODELS: dict[str, Model] = {}


def evaluator(case: dict[str, Any], backend: Any) -> Evaluator:
    name = case["model"]
    if name not in _MODELS:
        _MODELS[name] = Model.load(name, batch=2)
    opts = {"frames_in_flight": 4} if case["mode"] == "pipeline" else {}
    return Evaluator(_MODELS[name], "orin-agx", backend, mode=case["mode"], precision="int8",
                     objective=case["objective"], **opts)


def within(r: SearchResult, ref: float, tol: float) -> float:
    e = r.evaluations_to_reach(ref, tol)
    return math.inf if e is None else float(e)


def fmt(values: list[float], budget: int) -> str:
    med = statistics.median(values)
    return f">{budget}" if math.isinf(med) else f"{med:g}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--budget", type=int, default=40, help="evaluations of each guided run")
    ap.add_argument("--blind-budget", type=int, default=150, help="evaluations of each local / optuna run")
    ap.add_argument("--reference-budget", type=int, default=600, help="evaluations of the long reference runs")
    ap.add_argument("--families", nargs="*", default=list(families()))
    ap.add_argument("--cases", nargs="*", default=list(CASES), help="case labels (default: all)")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    fams = families()
    agents = {"guided": args.budget, "local": args.blind_budget, "optuna": args.blind_budget}
    print(f"bench_sim2real: SIMULATED 'real' devices (device profiles), {args.seeds} seed(s); guided budget "
          f"{args.budget}, local/optuna budget {args.blind_budget}, reference runs {args.reference_budget} evaluations")
    print("full run: python benchmarks/bench_sim2real.py --seeds 5 --budget 60 --blind-budget 400 "
          "--reference-budget 3000\n")
    rows, verdicts, refs = [], [], []
    t_all = time.perf_counter()
    for label in args.cases:
        case = CASES[label]
        for fam in args.families:
            make = fams[fam]
            runs: dict[str, list[SearchResult]] = {a: [] for a in agents}
            secs = {a: 0.0 for a in agents}
            for agent, budget in agents.items():
                for seed in range(args.seeds):
                    t0 = time.perf_counter()
                    runs[agent].append(get_agent(agent, seed=seed).run(evaluator(case, make()), Budget(budget)))
                    secs[agent] += time.perf_counter() - t0
            long = [get_agent("local", seed=100, granularity=g).run(evaluator(case, make()), Budget(args.reference_budget))
                    for g in ("fusion", "stages")]
            long.append(get_agent("guided", seed=100).run(evaluator(case, make()), Budget(max(60, args.budget))))
            pool = [r for rs in runs.values() for r in rs] + long
            direction = pool[0].direction
            vals = [r.best_value for r in pool if r.best_value is not None]
            ref = min(vals) if direction == "minimize" else max(vals)
            refs.append(f"  {label:30s} {fam:10s} best known {ref:.6g} "
                        f"(long local fusion {long[0].best_value:.6g}, stages {long[1].best_value:.6g}, "
                        f"guided-60 {long[2].best_value:.6g})")
            med: dict[str, tuple[float, float]] = {}
            for agent, budget in agents.items():
                e5 = [within(r, ref, 0.05) for r in runs[agent]]
                e2 = [within(r, ref, 0.02) for r in runs[agent]]
                med[agent] = (statistics.median(e5), statistics.median(e2))
                hours = [e * MIN_PER_BUILD / 60 for e in e5 if not math.isinf(e)]
                rows.append(f"{label:30s} {fam:10s} {agent:7s} {fmt(e5, budget):>7s} {fmt(e2, budget):>7s} "
                            f"{(f'{statistics.median(hours):.2f}' if len(hours) * 2 > len(e5) else '-'):>9s} "
                            f"{secs[agent] / args.seeds:7.1f}")
                if args.verbose:
                    print(rows[-1], flush=True)
            g5, g2 = med["guided"]
            blind = min(min(med["local"][0], med["optuna"][0]), math.inf)
            ratio = blind / g5 if g5 > 0 else math.inf
            ok = g5 <= 15 and g2 <= 50 and ratio >= 10
            if math.isinf(g5):
                rtext = "-"
            elif math.isinf(blind):
                rtext = f">{args.blind_budget / g5:.0f}x"
            else:
                rtext = f"{ratio:.1f}x"
            verdicts.append(f"  {label:30s} {fam:10s} guided 5%: {g5:g}, 2%: {g2:g}; best blind 5%: "
                            f"{'>' + str(args.blind_budget) if math.isinf(blind) else f'{blind:g}'} -> ratio "
                            f"{rtext}  {'ok' if ok else 'MISSED'}")
    header = f"{'case':30s} {'family':10s} {'agent':7s} {'evals5%':>7s} {'evals2%':>7s} {'dev h@5%':>9s} {'s/run':>7s}"
    print(header)
    print("-" * len(header))
    print("\n".join(rows))
    print("\nBest known (truth) per case and family:")
    print("\n".join(refs))
    print("\nGoal: guided within 5% in a median <= 15 evaluations, within 2% in <= 50, >= 10x fewer than the best "
          "blind agent (local, optuna):")
    print("\n".join(verdicts))
    print(f"\n(device hours: evaluations x {MIN_PER_BUILD} min per build; bench wall time "
          f"{time.perf_counter() - t_all:.0f} s)")


if __name__ == "__main__":
    main()
