"""Evaluations per second through the Evaluator with a file-backed SQLite store.

Prints cache misses (simulate + store) and cache hits (realise + lookup) separately,
and the simulator's own share, for a model and platform.

    python benchmarks/bench_evaluator.py [--model resnet50] [--n 300]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from placetune import Evaluator


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--platform", default="orin-agx")
    ap.add_argument("--mode", default="engine")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--n", type=int, default=300)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        ev = Evaluator(args.model, args.platform, mode=args.mode, precision=args.precision, store=url)
        space = ev.space()
        rng = np.random.default_rng(0)
        placements = [space.to_placement(space.sample(rng)) for _ in range(args.n)]
        t0 = time.perf_counter()
        for p in placements:
            ev.evaluate(p)
        miss = time.perf_counter() - t0
        sim = ev.stats.measure_seconds
        measured = ev.stats.measured
        t0 = time.perf_counter()
        for p in placements:
            ev.evaluate(p)
        hit = time.perf_counter() - t0
        ev.close()
        # a fresh evaluator: hits come from SQLite, not the in-process memo
        ev2 = Evaluator(args.model, args.platform, mode=args.mode, precision=args.precision, store=url)
        t0 = time.perf_counter()
        for p in placements:
            ev2.evaluate(p)
        hit_db = time.perf_counter() - t0
        ev2.close()
    print(f"{args.model} on {args.platform}, {args.mode} mode, {args.precision}, SQLite file store, "
          f"{len(space.units)} units, {args.n} random placements")
    print(f"cache misses: {measured / miss:8.0f} evaluations/s "
          f"(simulator {sim / miss * 100:.0f}% of the time, store+realise the rest)")
    print(f"cache hits (memo): {args.n / hit:8.0f} evaluations/s")
    print(f"cache hits (SQLite, new process state): {args.n / hit_db:8.0f} evaluations/s")


if __name__ == "__main__":
    main()
