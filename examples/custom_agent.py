"""A custom search agent in 20 lines, using only the public API (README example)."""
import numpy as np
import placetune as pt

ev = pt.Evaluator("googlenet", "orin-agx", precision="int8", objective="energy")  # simulated Jetson
space = ev.space(granularity="fusion")            # decision units, masks, features
rng = np.random.default_rng(0)
start = {name: space.from_placement(p) for name, (p, m) in ev.baselines().items()}
best, best_mj = None, float("inf")
for name, a in start.items():                     # all-GPU, all-DLA0 (with fallback)
    v = ev.evaluate(space.to_placement(a)).objective("energy")
    if v is not None and v < best_mj:
        best, best_mj = a, v
for step in range(300):                            # greedy single-unit flips
    moves = space.neighbours(best)
    unit, device = moves[rng.integers(len(moves))]
    cand = list(best)
    cand[unit] = device
    v = ev.evaluate(space.to_placement(cand)).objective("energy")
    if v is not None and v < best_mj:
        best, best_mj = cand, v
print(f"all-GPU {ev.baseline().energy_mj:.3f} mJ -> best {best_mj:.3f} mJ per inference (simulated); "
      f"{ev.stats.measured} measured, {ev.stats.cache_hits} cache hits; {space.to_placement(best).counts()}")
