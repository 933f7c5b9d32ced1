"""Trace one guided run on a bench_unlike device truth: every build with its plan, its measured value
and the plan's noise-free value, then the plans the run built best with each one's builds, and the
run's notes (what the final ranking did). SIMULATED, like the benchmark.

Usage:
    python benchmarks/unlike_trace.py googlenet dla-cbuf 6 300 50   # case family draw seed budget
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_unlike as b  # noqa: E402
from device_truths import FAMILIES, TruthJetson, truth  # noqa: E402


def trace(case: str, family: str, draw: int, seed: int, budget: int) -> tuple[list[tuple], float | None, list[str], bool]:
    """(builds: (evaluation, plan number, measured value or None, noise-free value or None, builds
    of the plan so far), the reported plan's noise-free value, the run's notes, whether larger is better)."""
    from search import get_agent
    from search.base import Budget

    backend = TruthJetson(truth(family, draw))
    ev = b.evaluator(case, backend)
    obj = ev.objective
    ids: dict[str, int] = {}
    log: list[tuple] = []

    def on(placement, m) -> None:
        i = ids.setdefault(repr(sorted(placement.as_dict().items())), len(ids))
        try:
            tv = b.true_value(ev, backend, placement)
        except Exception:  # a plan the truth rejects has no value
            tv = None
        raw = [float(x.get("throughput_fps") or x.get("median_ms") or 0) for x in (m.extra.get("builds") or [])]
        log.append((len(log), i, obj.value(m) if m.ok else None, tv, raw or ([obj.value(m)] if m.ok else [])))

    ev.add_callback(on)
    r = get_agent("guided", seed=seed).run(ev, Budget(budget))
    reported = None if r.best_placement is None else b.true_value(ev, backend, r.best_placement)
    return log, reported, list(r.notes), obj.direction == "maximize"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("case", choices=sorted(b.CASES))
    ap.add_argument("family", choices=FAMILIES)
    ap.add_argument("draw", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("budget", type=int)
    args = ap.parse_args(argv)
    log, reported, notes, larger = trace(args.case, args.family, args.draw, args.seed, args.budget)
    for n, i, v, tv, _ in log:
        print(f"build {n:3d}  plan {i:3d}  " + ("FAILED" if v is None else f"measured {v:10.1f}") +
              ("" if tv is None else f"  noise-free {tv:10.1f}"))
    values = {i: tv for _, i, v, tv, _ in log if v is not None and tv is not None}
    print(f"reported plan: noise-free {reported}")
    for i, tv in sorted(values.items(), key=lambda t: -t[1] if larger else t[1])[:5]:
        last = [x for x in log if x[1] == i][-1]
        print(f"  plan {i}: noise-free {tv:.1f}, builds {[round(x) for x in last[4]]} at evaluations "
              f"{[x[0] for x in log if x[1] == i]}")
    for n in notes:
        print("note:", n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
