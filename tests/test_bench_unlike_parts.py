"""The search benchmark's parts and its dla-weights truth: the fresh held-out part is its own draws
and seeds, and a DLA core holding more weights than it caches runs slower, the GPU not."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_unlike  # noqa: E402
from device_truths import FAMILIES, Truth, TruthJetson, truth  # noqa: E402


def test_the_three_parts_share_no_draw_and_no_seed():
    parts = ("tuning", "held-out", "fresh")
    draws = [set(bench_unlike.split_draws(p)) for p in parts]
    seeds = [set(bench_unlike.split_seeds(p, 3)) for p in parts]
    for i in range(3):
        for j in range(i + 1, 3):
            assert not draws[i] & draws[j] and not seeds[i] & seeds[j]
    assert bench_unlike.split_draws("fresh") == (3, 4) and bench_unlike.split_seeds("fresh", 3) == [200, 201, 202]


def test_a_dla_core_over_its_weight_cache_runs_slower_and_the_gpu_does_not():
    assert FAMILIES[-1] == "dla-weights"  # appended: the other families' draws keep their seeds
    t = Truth(**{**truth("dla-weights", 0).__dict__, "noise": 0.0})
    plain = Truth(**{**t.__dict__, "weight_share": 0.0})
    ev = bench_unlike.evaluator("resnet50", TruthJetson(t))
    space = ev.space("stages")
    from search.base import baseline_assignments

    plans = baseline_assignments(space)
    value = lambda tr, name: bench_unlike.true_value(ev, TruthJetson(tr), space.to_placement(plans[name]))  # noqa: E731
    assert value(t, "all-gpu") == value(plain, "all-gpu")
    assert value(t, "all-dla0") < 0.9 * value(plain, "all-dla0")  # every weight on one core: most of it streams
