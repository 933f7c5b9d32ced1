"""Throughput of the Gymnasium environments on the simulated Jetson.

Prints env steps/s and episodes/s for both environments, separately for episodes whose
placement is new (cache miss: the simulator runs) and episodes that repeat a measured
placement (cache hit: answered from the evaluator's memory).

Usage:
    python benchmarks/bench_env.py [--model resnet50] [--platform orin-agx] [--episodes 200]

Example:
    $ python benchmarks/bench_env.py --episodes 50
    env          cache   episodes  steps  seconds  steps/s  episodes/s  ...
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from placetune.envs import PlacementEnv, PlacementOneShotEnv, masked_random_action


def _episode(env: Any, assignment: np.ndarray) -> tuple[int, dict[str, Any]]:
    """Play one episode with a fixed assignment; returns (steps, last info)."""
    env.reset()
    if isinstance(env, PlacementOneShotEnv):
        _, _, _, _, info = env.step(assignment)
        return 1, info
    info: dict[str, Any] = {}
    for a in assignment:
        _, _, terminated, _, info = env.step(int(a))
    assert terminated
    return len(assignment), info


def _random_assignments(env: Any, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    space = env.space
    return [np.asarray(space.sample(rng), dtype=np.int64) for _ in range(n)]


def bench(env: Any, episodes: int, rng: np.random.Generator) -> list[dict[str, Any]]:
    """Time ``episodes`` new-placement episodes, then replay them as cache hits."""
    env.reset(seed=0)  # evaluator + baseline built outside the timing
    plans = _random_assignments(env, episodes, rng)
    rows = []
    for cache in ("miss", "hit"):
        steps = hits = 0
        t0 = time.perf_counter()
        for a in plans:
            s, info = _episode(env, a)
            steps += s
            hits += bool(info["cache_hit"])
        dt = time.perf_counter() - t0
        rows.append(
            {
                "env": type(env).__name__,
                "cache": cache,
                "episodes": episodes,
                "steps": steps,
                "seconds": dt,
                "steps/s": steps / dt,
                "episodes/s": episodes / dt,
                "hit rate": hits / episodes,
            }
        )
    return rows


def bench_random_agent(env: Any, steps: int, rng: np.random.Generator) -> dict[str, Any]:
    """A masked random agent through masked_random_action (the mask lookup included)."""
    env.reset(seed=1)
    t0 = time.perf_counter()
    episodes = 0
    for _ in range(steps):
        _, _, terminated, _, _ = env.step(masked_random_action(env, rng))
        if terminated:
            episodes += 1
            env.reset()
    dt = time.perf_counter() - t0
    return {"env": type(env).__name__, "cache": "agent", "episodes": episodes, "steps": steps, "seconds": dt,
            "steps/s": steps / dt, "episodes/s": episodes / dt, "hit rate": float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--platform", default="orin-agx")
    parser.add_argument("--mode", default="engine")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    kw = dict(model=args.model, platform=args.platform, mode=args.mode)
    t0 = time.perf_counter()
    seq = PlacementEnv(**kw)
    one = PlacementOneShotEnv(**kw)
    build = (time.perf_counter() - t0) / 2
    print(f"{args.model} on {args.platform} ({args.mode} mode, simulated): {seq.n_units} units, "
          f"devices {'/'.join(seq.devices)}; env construction {build * 1e3:.1f} ms (no evaluation)")
    rows = bench(seq, args.episodes, rng) + bench(one, args.episodes, rng)
    rows.append(bench_random_agent(seq, args.episodes * seq.n_units, rng))
    rows.append(bench_random_agent(one, args.episodes, rng))
    cols = ["env", "cache", "episodes", "steps", "seconds", "steps/s", "episodes/s", "hit rate"]
    print("  ".join(f"{c:>19}" if i == 0 else f"{c:>10}" for i, c in enumerate(cols)))
    for r in rows:
        cells = []
        for i, c in enumerate(cols):
            v = r[c]
            text = f"{v:.3f}" if c == "seconds" else f"{v:.2f}" if c == "hit rate" else (
                f"{v:.0f}" if isinstance(v, float) else str(v))
            cells.append(f"{text:>19}" if i == 0 else f"{text:>10}")
        print("  ".join(cells))
    ev = seq.evaluator
    print(f"sequential env evaluator: {ev.stats.as_dict()}")


if __name__ == "__main__":
    main()
