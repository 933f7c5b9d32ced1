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


# ------------------------------------------------------------------ a log (nohup, systemd, CI): no live bar
_NOTE = re.compile(r"note: still predicting the next placement \(\d+ s since the last trial line; it is built "
                   r"and measured next\)")


def _notes(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("note: still")]


def _log_progress(out: io.StringIO, after: float, every: float = 60.0) -> Progress:
    p = Progress(out, tty=False, total=300, done=3, objective=get_objective("throughput"), baseline=None)
    p.note_after_s, p.note_every_s = after, every
    return p


def test_a_log_says_the_agent_still_predicts_when_it_takes_more_than_a_few_seconds():
    """Under nohup the guided agent's search of its model (about twelve seconds in the default tune) left the log
    silent after the baselines' lines: a user tailing it took the run for hung. The live bar says ``predicting``;
    a log now gets one line once the step runs past a few seconds, and one more for each further while."""
    import time

    assert Progress(io.StringIO(), tty=False, total=1, done=0, objective=get_objective("throughput"),
                    baseline=None).note_after_s <= 5
    out = io.StringIO()
    p = _log_progress(out, after=0.05, every=0.3)
    p.working("predicting")
    deadline = time.monotonic() + 5
    while not _notes(out.getvalue()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.4)  # past the repeat: a second line
    p.close()
    notes = _notes(out.getvalue())
    assert 2 <= len(notes) <= 3 and all(_NOTE.fullmatch(n) for n in notes), out.getvalue()
    time.sleep(0.4)
    assert _notes(out.getvalue()) == notes  # closed: no line after the run's end


def test_a_prediction_shorter_than_the_wait_adds_no_line_and_the_trial_line_stops_the_note():
    import time

    from types import SimpleNamespace

    from placetune.measurement import Measurement

    out = io.StringIO()
    p = _log_progress(out, after=0.2)
    p.working("predicting")
    p.update(SimpleNamespace(as_dict=lambda: {"conv": "DLA0"}), Measurement("ok", latency_samples_ms=[1.0], simulated=True))
    time.sleep(0.4)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trial=4/300 status=ok "), lines


def test_the_default_tune_in_a_log_keeps_its_trial_lines_and_adds_the_note(tmp_path, monkeypatch):
    import time

    from placetune.tuning.evaluator import Evaluator

    def run(db: str) -> str:
        cfg = TuneConfig.embedded_default().with_overrides(model="seed-block", trials=8,
                                                           storage=f"sqlite:///{tmp_path / db}",
                                                           export=str(tmp_path / f"{db}.plan.json"))
        out = io.StringIO()
        Tuner(cfg, out=out, tty=False).run()
        return out.getvalue()

    quick = run("a.db")
    assert not _notes(quick)
    real = Evaluator.working

    def slow(self, what):  # a prediction that takes longer than the wait
        real(self, what)
        time.sleep(0.5)

    monkeypatch.setattr(Evaluator, "working", slow)
    monkeypatch.setattr(Progress, "note_after_s", 0.1)
    slowed = run("b.db")

    def trials(text: str) -> list[str]:
        return [re.sub(r" elapsed_s=[0-9.]+", "", x) for x in text.splitlines() if x.startswith("trial=")]

    assert trials(slowed) == trials(quick) and len(trials(quick)) == 8
    assert _notes(slowed) and all(_NOTE.fullmatch(n) for n in _notes(slowed)), slowed
