"""MaskablePPO against best-of-N random and guided at equal evaluations, per seed and environment design.

Trains examples/train_maskable_ppo.py's agent (same task, same hyperparameters) for ``--episodes``
episodes on each design, and gives the same number of evaluations to the simple baselines:

* ``ppo``: the greedy policy's placement after training (what the example reports), gain over all-GPU;
* ``ppo-seen``: the best placement the training itself played (every episode is one evaluation);
* ``random``: best of ``--episodes`` masked uniform episodes on the same env (the untrained policy,
  seeded by the seed): best-of-N random sampling at equal evaluations;
* ``guided``: the ``guided`` search agent's best after ``--episodes`` evaluations (same seed);
* ``optimum``: the best placement of the design's space, by enumerating it (designs with one stretch
  per DLA core only; ``n/a`` elsewhere), so "how far from the optimum" is a measured figure.

Designs:

* ``stages``: ``PlacementStages-v0`` on ResNet-18 (the example's env: one step per block, one stretch per DLA core);
* ``yolov8n``: the same env and task on YOLOv8n (19 blocks);
* ``free``: ``PlacementStages-v0`` on ResNet-18 with ``stages_per_dla=None`` (stages open anywhere);
* ``units``: ``Placement-v0`` on ResNet-18 (one step per unit, the ``stages`` granularity's fusion groups).

The seed set is fixed: seeds 0 .. ``--seeds``-1. Every (design, seed) runs in its own process
(``--jobs``), torch on one thread. Everything is simulated (the simulate backend). Needs the ``rl`` extra.

Usage:
    python benchmarks/bench_rl.py --seeds 10 --episodes 315 --designs stages,yolov8n,free --jobs 16 [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import placetune as pt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_maskable_ppo as ex  # noqa: E402 - the example's task, agent and rollout

DESIGNS = ("stages", "yolov8n", "free", "units")
COLUMNS = ("ppo", "ppo-seen", "random", "guided", "optimum")


def task(design: str) -> dict[str, Any]:
    """The example's task, on the design's network."""
    return {**ex.TASK, "model": "yolov8n"} if design == "yolov8n" else dict(ex.TASK)


def make(design: str) -> tuple[Any, int]:
    """The env of a design, and its episode length in steps."""
    if design in ("stages", "yolov8n"):
        env = pt.PlacementStagesEnv(**task(design))
        return env, env.n_blocks
    if design == "free":
        env = pt.PlacementStagesEnv(**task(design), stages_per_dla=None)
        return env, env.n_blocks
    if design == "units":
        env = pt.PlacementEnv(**task(design), granularity="stages")
        return env, env.n_units
    raise SystemExit(f"--designs: unknown design {design!r} (allowed: {', '.join(DESIGNS)})")


def one_seed(design: str, seed: int, episodes: int) -> dict[str, Any]:
    """PPO, random and guided on one design and seed, each with ``episodes`` evaluations."""
    t0 = time.perf_counter()
    env, length = make(design)
    env.reset(seed=seed)
    gpu = env.baseline_value
    model, log = ex.train(env, episodes * length, seed)
    info = ex.greedy(model, env)
    row = {"design": design, "seed": seed, "episodes": len(log), "ppo": float(info["gain"]),
           "ppo-seen": max(g for _, g, _ in log), "ppo_builds": env.evaluator.stats.measured}
    env.close()
    probe, _ = make(design)  # its own evaluator: nothing measured by the training
    probe.reset(seed=seed)
    row["random"] = max(ex.untrained(probe, episodes, seed))
    probe.close()
    from search import Budget, get_agent

    ev = pt.Evaluator(**task(design))
    result = get_agent("guided", seed=seed).run(ev, Budget(episodes))
    row["guided"] = float(result.best_value) / gpu
    row["guided_evaluations"] = result.evaluations
    ev.close()
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def optimum(design: str) -> dict[str, Any]:
    """The best placement of a one-stretch-per-DLA design: every allowed (DLA0 stretch, DLA1 stretch) played."""
    if design not in ("stages", "yolov8n"):
        return {"design": design, "optimum": None}
    t0 = time.perf_counter()
    env, n = make(design)
    env.reset(seed=0)
    stretches = [None] + [(a, b) for a in range(n) for b in range(a + 1, n + 1)]
    best, played = 0.0, 0
    for s0 in stretches:
        for s1 in stretches:
            if s0 and s1 and s0[0] < s1[1] and s1[0] < s0[1]:
                continue  # overlapping stretches
            actions = [0] * n
            for dev, s in ((1, s0), (2, s1)):
                if s:
                    actions[s[0]:s[1]] = [dev] * (s[1] - s[0])
            env.reset()
            allowed = True
            for a in actions:
                if not env.action_masks()[a]:
                    allowed = False
                    break
                _, _, done, _, info = env.step(a)
            if allowed:
                played += 1
                best = max(best, float(info["gain"]))
    env.close()
    return {"design": design, "optimum": best, "placements": played, "seconds": round(time.perf_counter() - t0, 1)}


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}x"


def main() -> None:
    """Print one row per design and seed, then the median and worst seed of each column per design."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="seeds 0 .. N-1 (default 10)")
    ap.add_argument("--episodes", type=int, default=315, help="training episodes = evaluations of each baseline "
                                                               "(default 315: 4,096 steps of the stages env, what CI trains)")
    ap.add_argument("--designs", default="stages,yolov8n,free")
    ap.add_argument("--jobs", type=int, default=1, help="processes (one (design, seed) each)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()
    designs = args.designs.split(",")
    for d in designs:
        if d not in DESIGNS:
            raise SystemExit(f"--designs: unknown design {d!r} (allowed: {', '.join(DESIGNS)})")
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        opt_futures = {d: pool.submit(optimum, d) for d in designs}
        futures = [pool.submit(one_seed, d, s, args.episodes) for d in designs for s in range(args.seeds)]
        rows = [f.result() for f in futures]
        optima = {d: f.result() for d, f in opt_futures.items()}
    for r in rows:
        r["optimum"] = optima[r["design"]]["optimum"]
    print(f"gain over all-GPU's throughput, {args.episodes} evaluations each (SIMULATED), seeds 0-{args.seeds - 1}; "
          f"{time.perf_counter() - t0:.0f} s")
    print("| design | seed | " + " | ".join(COLUMNS) + " |")
    print("|---|---|" + "---|" * len(COLUMNS))
    for r in rows:
        print(f"| {r['design']} | {r['seed']} | " + " | ".join(_fmt(r[c]) for c in COLUMNS) + " |")
    for d in designs:
        rs = [r for r in rows if r["design"] == d]
        for label, pick in (("median", statistics.median), ("worst", min)):
            print(f"| {d} | {label} | " + " | ".join(
                _fmt(pick([r[c] for r in rs]) if rs[0][c] is not None else None) for c in COLUMNS) + " |")
    for d in designs:
        rs = [r for r in rows if r["design"] == d]
        tol = 1e-9
        print(f"{d}: PPO (greedy) >= random best-of-{args.episodes} on {sum(r['ppo'] >= r['random'] - tol for r in rs)}"
              f"/{len(rs)} seeds, > on {sum(r['ppo'] > r['random'] + tol for r in rs)}; >= guided on "
              f"{sum(r['ppo'] >= r['guided'] - tol for r in rs)}/{len(rs)}; optimum: "
              + (f"{optima[d]['optimum']:.3f}x ({optima[d]['placements']} placements enumerated)"
                 if optima[d]["optimum"] is not None else "not enumerated"))
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args) | {"json": str(args.json)}, "rows": rows,
                                         "optima": optima}, indent=1))


if __name__ == "__main__":
    main()
