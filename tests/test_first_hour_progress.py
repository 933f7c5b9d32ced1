"""After the baselines the guided agent searches its model for seconds without a build (about ten in the
default tune on a laptop): the live bar stood still on ``1/300`` (the two other baselines, done within its
0.1 s redraw limit, were not drawn) with no word of what was happening. The bar is drawn again when the
agent starts such a search, with every evaluation so far, and says ``predicting`` until the next one."""

from __future__ import annotations

import io
import re

from placetune.tuning.objectives import get_objective
from placetune.tuning.progress import Progress
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune import Tuner


def test_the_bar_says_what_the_agent_does_between_evaluations_on_an_80_column_terminal():
    out = io.StringIO()
    p = Progress(out, tty=True, total=300, done=3, objective=get_objective("throughput"), baseline=None,
                 columns=80)
    p.best = p.base = 2346.1
    p.working("predicting")
    frame = out.getvalue().split("\r")[-1]
    assert re.fullmatch(r"\[-+\] 3/300  best 2346 fps \(same as all-GPU\)  failures 0  predicting *", frame), frame
    assert len(frame.rstrip()) <= 79


def test_the_default_tune_says_predicting_with_every_baseline_drawn_and_drops_it_at_the_next_build(tmp_path):
    cfg = TuneConfig.embedded_default().with_overrides(model="seed-block", trials=8,
                                                       storage=f"sqlite:///{tmp_path / 'pt.db'}",
                                                       export=str(tmp_path / "plan.json"))
    out = io.StringIO()
    Tuner(cfg, out=out, tty=True).run()
    frames = [f for f in out.getvalue().split("\r") if f.startswith("[")]
    said = [i for i, f in enumerate(frames) if f.rstrip().endswith("  predicting")]
    assert said, frames
    first = frames[said[0]]
    # drawn with the three baselines of a two-DLA pipeline (all-GPU, all-DLA0, split), not the first one alone
    assert re.search(r"\] 3/8  best", first), first
    after = [f for f in frames[said[0] + 1:] if " 4/8 " in f]
    assert after and "predicting" not in after[0], after


def test_a_run_that_ends_while_the_agent_predicts_does_not_leave_the_word_on_its_last_line():
    """A guided round that finds nothing left worth building ends the run right after saying ``predicting``."""
    out = io.StringIO()
    p = Progress(out, tty=True, total=300, done=35, objective=get_objective("throughput"), baseline=None,
                 columns=120)
    p.working("predicting")
    p.close()
    last = out.getvalue().rstrip("\n").split("\r")[-1]
    assert " 35/300 " in last and "predicting" not in last, last
