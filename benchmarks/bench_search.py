"""Search agents on the simulated AGX Orin: how fast each one gets within 1 % of the optimum.

For every case (model, mode, precision, objective) and agent, the agent runs ``--seeds``
times with ``--budget`` evaluations on a fresh evaluator (nothing cached between runs).
The reference is the optimum of the ``exact`` agent when it certifies one (engine-mode DP,
or enumeration of small spaces), else the best value any run found, a long local search
(``--reference-budget`` evaluations) and a long annealing run included. The table gives,
per agent and case:

* ``evals@1%``: evaluations until the best-so-far is within 1 % of the reference, median
  over seeds (``>B`` when fewer than half of the seeds got there within the budget);
* ``reached``: seeds that got there;
* ``gap@100``: median relative gap to the reference after 100 evaluations.

Cases: ResNet-50, MobileNetV2 and GoogLeNet in engine mode, latency, fp16 and int8 (the
goal cases), seed-block in pipeline mode (latency, fp16 and int8) and, as harder cases
where the optimum is not a baseline, the same three CNNs in engine mode minimising energy.
Then the answers to seed 000: the best pipeline placement of seed-block (certified by
enumeration) against all-GPU, and a throughput search on ResNet-50 int8 in replicas and
pipeline modes with its gain over all-GPU.

Everything here is **simulated** (the simulate backend); nothing is measured on a Jetson.

Usage:
    python benchmarks/bench_search.py [--seeds 5] [--budget 200] [--quick]
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import optuna  # noqa: E402

from placetune import Model  # noqa: E402
from placetune.tuning.evaluator import Evaluator  # noqa: E402
from placetune.placement.placement import Placement  # noqa: E402
from search import DEFAULT_AGENT, Budget, SearchResult, get_agent  # noqa: E402

AGENTS = ("random", "local", "optuna", "reinforce")
PLATFORM = "orin-agx"
#: Simulated timing noise the searches run with (``--noise``: per-build tactic variance
#: and per-sample jitter, docs/simulator.md). 0 makes every measurement the model's central value.
NOISE = 0.02


@dataclass
class Case:
    """One benchmark case."""

    model: str
    mode: str
    precision: str
    objective: str = "latency"
    goal: bool = False  # part of the search goal (<= 100 evals, >= 3x fewer than random)
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.model} {self.mode} {self.precision} {self.objective}"


def cases(quick: bool) -> list[Case]:
    """The benchmark cases."""
    out = [Case(m, "engine", p, goal=True) for m in ("resnet50", "mobilenetv2", "googlenet") for p in ("fp16", "int8")]
    out += [Case("seed-block", "pipeline", p) for p in ("fp16", "int8")]
    hard = [Case(m, "engine", "int8", "energy") for m in ("resnet50", "mobilenetv2", "googlenet")]
    hard += [Case("mobilenetv2", "engine", "fp16", "energy")]
    return out + (hard[:2] if quick else hard)


_MODELS: dict[str, Model] = {}


def evaluator(case: Case) -> Evaluator:
    """A fresh evaluator (in-memory store, nothing cached) for a case."""
    if case.model not in _MODELS:
        _MODELS[case.model] = Model.load(case.model)
    return Evaluator(_MODELS[case.model], PLATFORM, mode=case.mode, precision=case.precision,
                     objective=case.objective, **{"noise": NOISE, **case.options})


def gap(value: float | None, ref: float, direction: str) -> float:
    """Relative gap to the reference (0 = optimal)."""
    if value is None:
        return math.inf
    return (value - ref) / ref if direction == "minimize" else (ref - value) / ref


def reference(case: Case, runs: list[SearchResult], budget: int) -> tuple[float, str]:
    """(reference value, where it comes from)."""
    ex = get_agent("exact").run(evaluator(case), Budget(evaluations=max(budget, 5000)))
    if ex.certified and ex.best_value is not None:
        return ex.best_value, f"exact ({ex.extra.get('method')}, {ex.evaluations} evals)"
    extra = [
        get_agent("local", seed=100).run(evaluator(case), Budget(budget)),
        get_agent("local", seed=101, method="anneal").run(evaluator(case), Budget(budget)),
    ]
    pool = [r for r in [*runs, *extra, ex] if r.best_value is not None]
    direction = pool[0].direction
    best = min(pool, key=lambda r: r.best_value if direction == "minimize" else -r.best_value)  # type: ignore[operator]
    return float(best.best_value), f"best of all runs (not certified: {'; '.join(ex.notes) or 'n/a'})"


def fmt_evals(values: list[float], budget: int) -> str:
    med = statistics.median(values)
    return f">{budget}" if math.isinf(med) else f"{med:g}"


def main_table(args: argparse.Namespace) -> dict[tuple[str, str], float]:
    """Run every agent on every case; print the table; return median evals@1% per (agent, case)."""
    header = f"{'agent':10s} {'case':42s} {'evals@1%':>9s} {'reached':>8s} {'gap@100':>9s} {'best':>12s} {'s/run':>6s}"
    results: dict[tuple[str, str], float] = {}
    refs: list[str] = []
    rows: list[str] = []
    for case in cases(args.quick):
        rows.append("")
        runs: dict[str, list[SearchResult]] = {a: [] for a in args.agents}
        secs: dict[str, float] = {a: 0.0 for a in args.agents}
        for agent in args.agents:
            for seed in range(args.seeds):
                t0 = time.perf_counter()
                r = get_agent(agent, seed=seed).run(evaluator(case), Budget(evaluations=args.budget))
                secs[agent] += time.perf_counter() - t0
                runs[agent].append(r)
        all_runs = [r for rs in runs.values() for r in rs]
        ref, source = reference(case, all_runs, args.reference_budget)
        direction = all_runs[0].direction
        refs.append(f"  {case.label:42s} reference {ref:.6g} from {source}")
        for agent in args.agents:
            rs = runs[agent]
            evals = [float(r.evaluations_to_reach(ref, 0.01) or math.inf) for r in rs]
            reached = sum(1 for e in evals if not math.isinf(e))
            gaps = [gap(r.best_after(100), ref, direction) for r in rs]
            g = statistics.median(gaps)
            best = [r.best_value for r in rs if r.best_value is not None]
            best_s = f"{statistics.median(best):.6g}" if best else "-"
            results[(agent, case.label)] = statistics.median(evals)
            rows.append(
                f"{agent:10s} {case.label:42s} {fmt_evals(evals, args.budget):>9s} {reached:>4d}/{len(rs):<3d} "
                f"{'inf' if math.isinf(g) else f'{100 * g:.2f}%':>9s} {best_s:>12s} {secs[agent] / len(rs):6.2f}"
            )
            if args.verbose:
                print(rows[-1], flush=True)
    print(f"\nSearch agents on the simulated {PLATFORM} ({args.seeds} seeds, budget {args.budget} evaluations "
          f"per run; evals@1% and gap@100 are medians over seeds)\n")
    print(header)
    print("-" * len(header))
    print("\n".join(rows).strip("\n"))
    print("\nReferences:")
    print("\n".join(refs))
    return results


def goal_check(results: dict[tuple[str, str], float], args: argparse.Namespace) -> None:
    """Print whether the default agent meets the search goal on the goal cases."""
    print(f"\nGoal (default agent {DEFAULT_AGENT!r}): within 1 % in <= 100 evaluations (median) on every "
          "goal case, and >= 3x fewer evaluations than random")
    ok_all = True
    for case in [c for c in cases(args.quick) if c.goal]:
        d = results.get((DEFAULT_AGENT, case.label), math.inf)
        r = results.get(("random", case.label), math.inf)
        ratio = (r / d) if not math.isinf(r) else math.inf
        ok = d <= 100 and ratio >= 3
        ok_all &= ok
        rs = f">{args.budget}" if math.isinf(r) else f"{r:g}"
        print(f"  {case.label:42s} {DEFAULT_AGENT}: {d:g}  random: {rs}  ratio: "
              f"{'>' + format(args.budget / d, '.0f') if math.isinf(ratio) else format(ratio, '.1f')}x  "
              f"{'ok' if ok else 'MISSED'}")
    print(f"  => {'goal met' if ok_all else 'goal NOT met'}")


def describe(p: Placement | None) -> str:
    """Short text of a placement: device counts, or layer -> device for small models."""
    if p is None:
        return "-"
    if len(p) <= 8:
        return ", ".join(f"{n.strip('/').split('/')[0]}:{d}" for n, d in p.items())
    return ", ".join(f"{d}={n}" for d, n in p.counts().items() if n)


def seed_000(args: argparse.Namespace) -> None:
    """Seed 000: best pipeline placement of seed-block; throughput search on ResNet-50 int8."""
    print("\nSeed 000: best pipeline-mode placement of seed-block on orin-agx (exact: every placement measured)")
    for precision in ("int8", "fp16"):
        ev = evaluator(Case("seed-block", "pipeline", precision))
        base = ev.baseline()
        r = get_agent("exact").run(ev, Budget(evaluations=1000))
        lat = r.best_value
        b = base.latency_ms["median"]
        print(f"  {precision}: best {lat:.4f} ms ({describe(r.best_placement)}), all-GPU {b:.4f} ms, "
              f"gain x{b / lat:.3f}, certified={r.certified} after {r.evaluations} evaluations")
        top = sorted(
            ((m.latency_ms["median"], describe(Placement(ev.model, m.requested or {})))
             for m in [rec.measurement for rec in ev.store.measurements(ev.study_name, status="ok")]),
        )[:3]
        for t, d in top:
            print(f"        {t:.4f} ms  {d}")
        for label, placement in (
            ("the seed's ask (conv2 GPU, conv3 DLA0, conv4 DLA1)",
             {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}),
        ):
            try:
                m = ev.evaluate(Placement(ev.model, placement))
                print(f"        {m.latency_ms['median']:.4f} ms  {label}")
            except Exception as exc:  # noqa: BLE001 - the zoo may name layers differently
                print(f"        (could not evaluate {label}: {exc})")
    print("\nSeed 000: throughput search on resnet50 int8 (objective throughput; budget "
          f"{args.throughput_budget} evaluations, agents {DEFAULT_AGENT} and optuna, seed 0)")
    for mode, options in (("replicas", {}), ("pipeline", {"frames_in_flight": 3})):
        for agent in (DEFAULT_AGENT, "optuna"):
            case = Case("resnet50", mode, "int8", "throughput", options=options)
            ev = evaluator(case)
            base = ev.baseline()
            r = get_agent(agent, seed=0).run(ev, Budget(evaluations=args.throughput_budget))
            b = base.throughput_fps
            best = r.best_value or float("nan")
            opts = ", ".join(f"{k}={v}" for k, v in options.items())
            print(f"  {mode:8s} {opts:20s} {agent:7s} best {best:9.1f} fps ({describe(r.best_placement)}), "
                  f"all-GPU {b:9.1f} fps, gain x{best / b:.3f}")


def main(argv: list[str] | None = None) -> None:
    global NOISE
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--noise", type=float, default=NOISE, help="simulated timing noise (0 = off)")
    ap.add_argument("--budget", type=int, default=200, help="evaluations per agent run")
    ap.add_argument("--reference-budget", type=int, default=2000,
                    help="evaluations of the long runs that set an uncertified reference")
    ap.add_argument("--throughput-budget", type=int, default=300)
    ap.add_argument("--agents", nargs="+", default=list(AGENTS))
    ap.add_argument("--quick", action="store_true", help="fewer cases and seeds (3)")
    ap.add_argument("--verbose", action="store_true", help="print rows as they finish")
    ap.add_argument("--skip-table", action="store_true", help="only the seed-000 answers")
    args = ap.parse_args(argv)
    NOISE = args.noise
    if args.quick:
        args.seeds = min(args.seeds, 3)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    t0 = time.perf_counter()
    if not args.skip_table:
        results = main_table(args)
        if "random" in args.agents and DEFAULT_AGENT in args.agents:
            goal_check(results, args)
    seed_000(args)
    print(f"\n(simulated figures; total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
