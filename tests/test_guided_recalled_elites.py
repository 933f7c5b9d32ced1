"""The guided agent's inner search keeps starting from the plans earlier rounds' models ranked best
(search.guided: ``recalled_elites``), so a later model that ranks such a plan high again can reach it.
Scenario: a seen benchmark row (resnet50 on the ``seg-length`` truth of draw 20: DLA spill past 15
layers). Its best plan runs DLA0 then DLA1 from the input; from round 3 on the model predicts that
plan at 3,400-3,500 fps, above anything its inner search finds, but every start of the search lies in
the basin of a plan with a GPU head (3,120 fps), and descent over stage moves does not cross to the
other stage-device pattern. SIMULATED."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import bench_unlike  # noqa: E402
from device_truths import TruthJetson, truth  # noqa: E402

from search import get_agent  # noqa: E402
from search.base import Budget  # noqa: E402


def test_a_plan_an_earlier_model_ranked_high_is_reached_when_the_model_ranks_it_high_again():
    backend = TruthJetson(truth("seg-length", 20))
    ev = bench_unlike.evaluator("resnet50", backend)
    r = get_agent("guided", seed=1001).run(ev, Budget(15))
    value = bench_unlike.true_value(ev, backend, r.best_placement)
    # the best known plan is worth 3,414.4 fps; the GPU-head plateau the search stayed on, 3,119.9
    assert value > 3400, value
