"""The search benchmark's parts and its dla-weights truth: the fresh held-out part is its own draws
and seeds, and a DLA core holding more weights than it caches runs slower, the GPU not."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_unlike  # noqa: E402
from device_truths import FAMILIES, FRESH_ONLY, Truth, TruthJetson, truth  # noqa: E402


def test_the_parts_share_no_draw_and_no_seed():
    parts = ("tuning", "held-out", "fresh", "tuning2", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8",
             "fresh9")
    draws = [set(bench_unlike.split_draws(p)) for p in parts]
    seeds = [set(bench_unlike.split_seeds(p, 3)) for p in parts]
    for i in range(len(parts)):
        for j in range(i + 1, len(parts)):
            assert not draws[i] & draws[j] and not seeds[i] & seeds[j]
    assert bench_unlike.split_draws("fresh") == (3, 4) and bench_unlike.split_seeds("fresh", 3) == [200, 201, 202]
    assert bench_unlike.split_draws("tuning2") == (5, 6) and bench_unlike.split_seeds("tuning2", 3) == [300, 301, 302]
    assert bench_unlike.split_draws("fresh2") == (7, 8) and bench_unlike.split_seeds("fresh2", 3) == [400, 401, 402]
    assert bench_unlike.split_draws("fresh3") == (9, 10) and bench_unlike.split_seeds("fresh3", 3) == [500, 501, 502]
    assert bench_unlike.split_draws("fresh4") == (11, 12) and bench_unlike.split_seeds("fresh4", 3) == [600, 601, 602]
    assert bench_unlike.split_draws("fresh5") == (13, 14) and bench_unlike.split_seeds("fresh5", 3) == [700, 701, 702]
    assert bench_unlike.split_draws("fresh6") == (15, 16) and bench_unlike.split_seeds("fresh6", 3) == [800, 801, 802]
    assert bench_unlike.split_draws("fresh7") == (17, 18) and bench_unlike.split_seeds("fresh7", 3) == [900, 901, 902]
    assert bench_unlike.split_draws("fresh8") == (19, 20) and bench_unlike.split_seeds("fresh8", 3) == [1000, 1001, 1002]
    assert bench_unlike.split_draws("fresh9") == (21, 22) and bench_unlike.split_seeds("fresh9", 3) == [1100, 1101, 1102]


def test_a_dla_core_over_its_weight_cache_runs_slower_and_the_gpu_does_not():
    assert FAMILIES[8] == "dla-weights"  # appended: the other families' draws keep their seeds
    t = Truth(**{**truth("dla-weights", 0).__dict__, "noise": 0.0})
    plain = Truth(**{**t.__dict__, "weight_share": 0.0})
    ev = bench_unlike.evaluator("resnet50", TruthJetson(t))
    space = ev.space("stages")
    from search.base import baseline_assignments

    plans = baseline_assignments(space)
    value = lambda tr, name: bench_unlike.true_value(ev, TruthJetson(tr), space.to_placement(plans[name]))  # noqa: E731
    assert value(t, "all-gpu") == value(plain, "all-gpu")
    assert value(t, "all-dla0") < 0.9 * value(plain, "all-dla0")  # every weight on one core: most of it streams


def _values(family: str, case: str, off: dict) -> tuple:
    """``value(truth, plan name)`` on draw 0 of a family, its truth without noise and that truth with
    the family's effect turned off (``off``)."""
    from search.base import baseline_assignments

    t = Truth(**{**truth(family, 0).__dict__, "noise": 0.0})
    plain = Truth(**{**t.__dict__, **off})
    ev = bench_unlike.evaluator(case, TruthJetson(t))
    space = ev.space("stages")
    plans = baseline_assignments(space)
    return (lambda tr, name: bench_unlike.true_value(ev, TruthJetson(tr), space.to_placement(plans[name]))), t, plain


def test_the_fresh_only_families_are_appended_and_run_in_the_fresh_part_only():
    assert FAMILIES[-2:] == FRESH_ONLY == ("dla-switch", "dla-cbuf")
    for part in ("fresh", "tuning2", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9"):
        assert set(bench_unlike.split_families(part)) == set(FAMILIES)
    for part in ("tuning", "held-out"):
        assert not set(FRESH_ONLY) & set(bench_unlike.split_families(part))
    import pytest

    with pytest.raises(SystemExit):
        bench_unlike.main(["--split", "tuning", "--families", "dla-switch"])


def test_loadables_that_share_a_dla_core_pay_context_switches_and_the_gpu_does_not():
    value, t, plain = _values("dla-switch", "resnet50", {"switch_us": 0.0})
    assert t.switch_us > 0
    assert value(t, "all-gpu") == value(plain, "all-gpu")
    from placetune import Placement

    ev = bench_unlike.evaluator("resnet50", TruthJetson(t))
    names = ev.model.names
    # DLA0, GPU, DLA0, GPU, ...: several loadables on one core
    striped = Placement(ev.model, {n: ("DLA0" if (i // 20) % 2 == 0 else "GPU") for i, n in enumerate(names)})
    hot = bench_unlike.true_value(ev, TruthJetson(t), striped)
    cold = bench_unlike.true_value(ev, TruthJetson(plain), striped)
    assert hot < cold


def test_dla_convolutions_past_the_convolution_buffer_run_slower_and_the_gpu_does_not():
    value, t, plain = _values("dla-cbuf", "resnet50", {"cbuf_q": 0.0})
    assert value(t, "all-gpu") == value(plain, "all-gpu")
    assert value(t, "all-dla0") < 0.95 * value(plain, "all-dla0")


def _first_is_slowest(i: int) -> int:
    import time

    time.sleep(0.4 if i == 0 else 0.0)
    return i


def test_rows_come_back_in_the_order_of_the_jobs_whatever_finished_first():
    # with --jobs the first row (the slowest here) used to be printed last: two runs of the same
    # command printed their rows and --json lines in different orders
    assert list(bench_unlike.in_order(_first_is_slowest, list(range(5)), 2)) == [0, 1, 2, 3, 4]
    assert list(bench_unlike.in_order(_first_is_slowest, list(range(3)), 1)) == [0, 1, 2]
