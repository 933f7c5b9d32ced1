"""Evaluations per second through the Evaluator with a file-backed SQLite store, and its memory over time.

Default run: cache misses (realise + simulate + store), then cache hits from the
evaluator's memo and from SQLite. For the misses it prints evaluations/s and, per
evaluation, the simulator's time beside the store's and realise()'s (from
:class:`~placetune.tuning.evaluator.EvaluatorStats`), and the part of realise() that is the
segmentation the simulator then reuses (timed again on copies of the realised placements). Each figure is the best of
``--repeat`` runs on fresh database files: this 2-core machine is shared and noisy,
so compare ratios taken in one run, not absolute times across runs.

    python benchmarks/bench_evaluator.py [--model resnet50] [--mode engine] [--n 300] [--repeat 3] [--before REV]

``--before REV`` first prints the miss figures of git revision REV's package (this script's
code, run in a subprocess) beside this tree's, alternating runs of the two.

``--memory``: peak resident memory (``ru_maxrss``) and the Python heap (tracemalloc's
current size, when ``--tracemalloc`` is given: it slows the run about 2x) after
10,000 and after 100,000 evaluations of random placements on one evaluator with a
SQLite *file* store (an in-memory SQLite store keeps every row in RAM, by design).
100,000 resnet50 misses would take about 10 minutes here, so it uses alexnet in
pipeline mode by default (13 decision units, 1.6 million placements: nearly every
evaluation is a miss, i.e. a simulation and a stored row, well past the 4,096 entries
of each in-process cache).

    python benchmarks/bench_evaluator.py --memory [--memory-model alexnet] [--memory-mode pipeline]
"""

from __future__ import annotations

import argparse
import gc
import resource
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

from placetune import Evaluator, Placement


def _islands(placement: Placement, pipeline: bool) -> object:
    """The DLA loadables realise() counts (a revision before ``dla_islands(pipeline=)``: its segments)."""
    try:
        return placement.dla_islands(pipeline=pipeline)
    except TypeError:
        return placement.segments(pipeline=pipeline)


def _misses(args: argparse.Namespace, tmp: Path, run: int) -> dict[str, float]:
    url = f"sqlite:///{tmp / f'misses{run}.db'}"
    ev = Evaluator(args.model, args.platform, mode=args.mode, precision=args.precision, store=url)
    space = ev.space()
    rng = np.random.default_rng(0)
    placements = [space.to_placement(space.sample(rng)) for _ in range(args.n)]
    gc.collect()  # every run from a clean heap: the previous runs' garbage is not collected in this one's time
    t0 = time.perf_counter()
    for p in placements:
        ev.evaluate(p)
    wall = time.perf_counter() - t0
    s = ev.stats
    n = max(s.measured, 1)
    out = {
        "units": len(space.units), "measured": s.measured, "per_s": s.measured / wall,
        "total_ms": wall / n * 1e3, "sim_ms": s.measure_seconds / n * 1e3,
        "realise_ms": getattr(s, "realise_seconds", float("nan")) / n * 1e3,
        "store_ms": getattr(s, "store_seconds", float("nan")) / n * 1e3,
    }
    # the share of realise() that is the segmentation (for the DLA loadable count) the simulator
    # reuses: realise() on fresh copies of the placements, then dla_islands() (the integer
    # segmentation) on fresh copies of what they realised; the fastest of 3 passes of each
    realise_s, segments_s = [], []
    for _ in range(3):
        fresh = [Placement(ev.model, p.as_dict()) for p in placements]
        t0 = time.perf_counter()
        done = [ev.realise(p).realized.as_dict() for p in fresh]
        realise_s.append(time.perf_counter() - t0)
        copies = [Placement(ev.model, d) for d in done]
        t0 = time.perf_counter()
        for c in copies:
            _islands(c, args.mode == "pipeline")
        segments_s.append(time.perf_counter() - t0)
    out["segments_ms"] = out["realise_ms"] * min(segments_s) / min(realise_s)
    t0 = time.perf_counter()
    for p in placements:
        ev.evaluate(p)
    out["memo_per_s"] = args.n / (time.perf_counter() - t0)
    ev.close()
    ev2 = Evaluator(args.model, args.platform, mode=args.mode, precision=args.precision, store=url)
    t0 = time.perf_counter()
    for p in placements:  # a fresh evaluator: hits come from SQLite, not the in-process memo
        ev2.evaluate(p)
    out["db_per_s"] = args.n / (time.perf_counter() - t0)
    ev2.close()
    return out


def _runs(args: argparse.Namespace) -> list[dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        return [_misses(args, Path(tmp), i) for i in range(args.repeat)]


def run_before(rev: str, args: argparse.Namespace) -> list[dict[str, float]]:
    """:func:`_runs` with the package of git revision ``rev`` (this script's code), in a subprocess."""
    from revision import run_at_revision

    return run_at_revision(rev, __file__, f"b._runs(__import__('argparse').Namespace(**{vars(args)!r}))")


def speed(args: argparse.Namespace) -> None:
    """Cache misses and hits, best of ``--repeat`` runs (``--before``: beside a git revision's)."""
    if args.before:
        old, runs = [], []
        for _ in range(2):  # alternate: this machine's other load slows both alike
            old += run_before(args.before, args)
            runs += _runs(args)
        b, a = (max(r, key=lambda x: x["per_s"]) for r in (old, runs))
        print(f"{args.model} on {args.platform}, {args.mode} mode, {args.precision}, SQLite file store, "
              f"{args.n} random placements, best of {len(runs)} runs each, alternating\n")
        print(f"| per cache miss | before ({args.before}) | after | after/before |\n|---|---:|---:|---:|")
        for label, key in (("evaluations/s", "per_s"), ("simulator ms", "sim_ms"), ("realise ms", "realise_ms"),
                           ("store ms", "store_ms"), ("total ms", "total_ms")):
            print(f"| {label} | {b[key]:.3f} | {a[key]:.3f} | {a[key] / b[key]:.2f} |")
        for label, r in (("before", b), ("after", a)):
            print(f"(store+realise)/simulator {label}: {(r['store_ms'] + r['realise_ms']) / r['sim_ms']:.2f}")
        print()
    else:
        runs = _runs(args)
    best = max(runs, key=lambda r: r["per_s"])
    sr = best["store_ms"] + best["realise_ms"]
    print(f"{args.model} on {args.platform}, {args.mode} mode, {args.precision}, SQLite file store, "
          f"{best['units']} units, {args.n} random placements, best of {len(runs)} runs")
    print(f"cache misses: {best['per_s']:8.0f} evaluations/s, {best['total_ms']:.3f} ms per evaluation:")
    print(f"  simulator      {best['sim_ms']:.3f} ms ({best['sim_ms'] / best['total_ms'] * 100:.0f}%)")
    print(f"  store+realise  {sr:.3f} ms ({sr / best['total_ms'] * 100:.0f}%): store {best['store_ms']:.3f} ms, "
          f"realise {best['realise_ms']:.3f} ms; (store+realise)/simulator = {sr / best['sim_ms']:.2f}")
    seg = best["segments_ms"]
    print(f"  realise's segmentation {seg:.3f} ms ({seg / best['realise_ms'] * 100:.0f}% of realise: the DLA "
          f"loadables per core; the simulator reuses it): charged to the simulator instead, "
          f"(store+realise)/simulator = {(sr - seg) / (best['sim_ms'] + seg):.2f}")
    rest = best["total_ms"] - best["sim_ms"] - sr
    print(f"  evaluator rest {rest:.3f} ms; everything but the simulator {best['total_ms'] - best['sim_ms']:.3f} ms")
    print(f"cache hits (memo): {max(r['memo_per_s'] for r in runs):8.0f} evaluations/s")
    print(f"cache hits (SQLite, new process state): {max(r['db_per_s'] for r in runs):8.0f} evaluations/s")


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def memory(args: argparse.Namespace) -> None:
    """Peak memory after 10,000 and 100,000 evaluations."""
    checkpoints = sorted({min(10_000, args.memory_n), args.memory_n})
    if args.tracemalloc:
        tracemalloc.start()
    with tempfile.TemporaryDirectory() as tmp:
        ev = Evaluator(args.memory_model, args.platform, mode=args.memory_mode, precision=args.precision,
                       store=f"sqlite:///{Path(tmp) / 'memory.db'}")
        space = ev.space()
        rng = np.random.default_rng(0)
        print(f"{args.memory_model} on {args.platform}, {args.memory_mode} mode, {args.precision}, SQLite file "
              f"store, {len(space.units)} units, random placements; start: max RSS {_rss_mib():.1f} MiB")
        done, t0 = 0, time.perf_counter()
        for target in checkpoints:
            while done < target:
                ev.evaluate(space.to_placement(space.sample(rng)))
                done += 1
            s = ev.stats
            heap = (f", Python heap {tracemalloc.get_traced_memory()[0] / 2**20:.1f} MiB "
                    f"(peak {tracemalloc.get_traced_memory()[1] / 2**20:.1f})" if args.tracemalloc else "")
            db = Path(tmp) / "memory.db"
            print(f"after {done:7d} evaluations ({s.measured} measured, {s.cache_hits} cache hits, "
                  f"{done / (time.perf_counter() - t0):.0f}/s): max RSS {_rss_mib():.1f} MiB{heap}; "
                  f"database {db.stat().st_size / 2**20:.0f} MiB")
        ev.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--platform", default="orin-agx")
    ap.add_argument("--mode", default="engine")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=3, help="runs of the miss benchmark; the best is shown")
    ap.add_argument("--before", metavar="REV", help="also run the misses with git revision REV's package, side by side")
    ap.add_argument("--memory", action="store_true", help="peak memory after 10,000 and 100,000 evaluations")
    ap.add_argument("--memory-model", default="alexnet")
    ap.add_argument("--memory-mode", default="pipeline")
    ap.add_argument("--memory-n", type=int, default=100_000)
    ap.add_argument("--tracemalloc", action="store_true", help="also trace the Python heap (slower)")
    args = ap.parse_args()
    if args.memory:
        memory(args)
    else:
        speed(args)


if __name__ == "__main__":
    main()
