"""MaskablePPO across seeds: what the learned placement gains over all-GPU, per environment design.

Trains examples/train_maskable_ppo.py's agent (same task, same hyperparameters) for the same number
of episodes (= evaluations) on three designs and prints the greedy policy's gain over all-GPU per seed:

* ``PlacementStages-v0``: one step per block, one stretch per DLA core (the example's env);
* ``PlacementStages-v0, stages_per_dla=None``: one step per block, stages free to open anywhere;
* ``Placement-v0``: one step per unit (the ``stages`` granularity's fusion groups).

Everything is simulated (the simulate backend). Needs the ``rl`` extra.

Usage:
    python benchmarks/bench_rl.py [--seeds 10] [--episodes 315] [--designs stages,free,units]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import placetune as pt

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import train_maskable_ppo as ex  # noqa: E402 - the example's task, agent and rollout


def make(design: str, task: dict):
    """The env of a design, and its episode length in steps."""
    if design == "stages":
        env = pt.PlacementStagesEnv(**task)
        return env, env.n_blocks
    if design == "free":
        env = pt.PlacementStagesEnv(**task, stages_per_dla=None)
        return env, env.n_blocks
    env = pt.PlacementEnv(**task, granularity="stages")
    return env, env.n_units


def main() -> None:
    """Print one line per design and seed, then the spread per design."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=315, help="training episodes (default 315: 4,096 steps of the "
                                                               "stages env, what CI trains)")
    ap.add_argument("--designs", default="stages,free,units")
    args = ap.parse_args()
    gains: dict[str, list[float]] = {}
    for design in args.designs.split(","):
        for seed in range(args.seeds):
            env, length = make(design, ex.TASK)
            env.reset(seed=seed)
            t0 = time.perf_counter()
            model, log = ex.train(env, args.episodes * length, seed)
            info = ex.greedy(model, env)
            gains.setdefault(design, []).append(info["gain"])
            print(f"{design:6s} seed {seed}: {model.num_timesteps:,} steps, {len(log)} episodes, "
                  f"{env.evaluator.stats.measured} builds, {time.perf_counter() - t0:.0f} s: "
                  f"{info['gain']:.3f}x all-GPU (SIMULATED)", flush=True)
            env.close()
    for design, g in gains.items():
        beat = sum(x > 1.0 + 1e-9 for x in g)
        print(f"{design:6s}: min {min(g):.3f}x, median {statistics.median(g):.3f}x, max {max(g):.3f}x all-GPU; "
              f"{beat}/{len(g)} seeds beat all-GPU")


if __name__ == "__main__":
    main()
