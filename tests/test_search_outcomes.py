"""What a tuning run ends with: the baselines in every study, no build spent on a cache hit, a
verdict that says what it rests on, where the study converged (and stopping there on request)."""

from __future__ import annotations

import io
import json
import math
import re

import pytest

from placetune import Evaluator, Store
from placetune.measurement import Measurement
from placetune.tuning.baselines import study_baselines
from placetune.tuning.convergence import ConvergenceWatch, patience_for
from placetune.tuning.objectives import get_objective
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune import Tuner
from placetune.tuning.verdict import verdict
from search import Budget, agent_names, get_agent

pytest.importorskip("optuna")

#: a Jetson whose GPU is 10x slower than the simulator's: a DLA baseline is the best one
SLOW_GPU = 'base = "orin-agx"\n[scale]\ngpu = 10.0\n'
#: small budgets and options so that every agent runs in a few seconds on resnet18
AGENT_OPTIONS = {"guided": {"inner_evals": 60, "ensemble": 1}, "reinforce": {"hidden": 0}}
BUDGET = 8


def _tune(tmp_path, **kw) -> tuple[str, object]:
    cfg = TuneConfig(storage=f"sqlite:///{tmp_path / 'pt.db'}", export=str(tmp_path / "plan.json"), **kw)
    out = io.StringIO()
    outcome = Tuner(cfg, out=out, tty=False).run()
    return out.getvalue(), outcome


@pytest.mark.parametrize("agent", sorted(set(agent_names())))
def test_every_agent_exports_a_plan_no_worse_than_the_best_baseline(tmp_path, agent):
    profile = tmp_path / "slow-gpu.toml"
    profile.write_text(SLOW_GPU)
    out, outcome = _tune(tmp_path, model="resnet18", agent=agent, trials=BUDGET, device_profile=str(profile),
                         agent_options=dict(AGENT_OPTIONS.get(agent, {})))
    # the baselines, measured on their own: all-GPU, all-DLA0 (+fallback), the DLA0|DLA1 split
    from placetune.backends.simulate.simulator import SimulatedJetson

    ev = Evaluator("resnet18", "orin-agx", SimulatedJetson(profile=str(profile)), mode="pipeline",
                   precision="int8", objective="throughput", frames_in_flight=4)
    values = {b.label: ev.objective.value(ev.evaluate(b.placement)) for b in study_baselines(ev)
              if b.measured_by_study}
    assert max(values, key=values.get) != "all-GPU"  # the case is one where all-GPU is not the best baseline
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["measured"]["throughput_fps"] >= max(values.values()) * (1 - 1e-9)
    for label, v in values.items():  # every baseline is part of the study (measured, in its summary)
        row = next(x for x in out.splitlines() if x.startswith(label + " "))
        assert f"{v:,.1f}" in row, row
    line = next(x for x in out.splitlines() if x.startswith("verdict: "))
    assert f"by {agent} in {BUDGET} trials" in line and "wins" not in out
    assert plan["notes"] and plan["notes"][-2] == line  # the verdict travels with the plan


def test_a_single_network_run_spends_no_trial_on_a_cache_hit(tmp_path):
    """tune measures the baselines first; the agent's own baselines are the study's (no second request)."""
    out, outcome = _tune(tmp_path, model="seed-block", trials=12, agent_options={"inner_evals": 60})
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        st = store.study(outcome.study)
        assert (st.n_requests, st.n_cache_hits, st.n_measured) == (12, 0, 12)
        assert len({r.placement_key for r in store.requests(outcome.study)}) == 12
    assert "summary (SIMULATED): 12 trials, 12 measured in this run, 0 cache hits" in out


def test_a_resumed_run_spends_its_budget_on_new_builds_only(tmp_path):
    _tune(tmp_path, model="seed-block", agent="random", trials=6)
    out, outcome = _tune(tmp_path, model="seed-block", agent="local", trials=14)
    with Store(f"sqlite:///{tmp_path / 'pt.db'}") as store:
        st = store.study(outcome.study)
        assert st.n_requests == 14 and st.n_cache_hits == 0


def test_verdict_rests_on_the_agent_and_its_trials():
    obj = get_objective("throughput")
    gpu = Measurement(status="ok", latency_samples_ms=[1.0], throughput_fps=1000.0, realized={"a": "GPU"})
    dla = Measurement(status="ok", latency_samples_ms=[1.0], throughput_fps=1200.0, realized={"a": "DLA0"})
    best = Measurement(status="ok", latency_samples_ms=[1.0], throughput_fps=1800.0, realized={"a": "DLA1"})
    assert verdict(obj, gpu, {"all-GPU": gpu, "all-DLA1": None}, "local", 40) == \
        "verdict: no plan better than all-GPU found by local in 40 trials"
    assert verdict(obj, dla, {"all-GPU": gpu, "all-DLA0": dla}, "optuna", 1, simulated=True) == \
        "verdict: no plan better than all-DLA0 found by optuna in 1 trial (simulated figures)"
    assert verdict(obj, best, {"all-GPU": gpu, "all-DLA0": dla}, "guided", 300) == \
        "verdict: a plan 1.50x better in throughput than all-DLA0 (the best baseline) found by guided in 300 trials"


def _m(fps: float, key: str) -> Measurement:
    return Measurement(status="ok", latency_samples_ms=[1.0], throughput_fps=fps, realized={"x": key})


def test_convergence_rule_finds_the_trial_and_what_came_after():
    obj = get_objective("throughput")
    assert patience_for(300) == 30 and patience_for(15) == 10
    fps = [100, 150, 200, 201, 199] + [200.5] * 20 + [201.5] * 6
    watch = ConvergenceWatch(obj, 32, [(str(i), _m(v, str(i))) for i, v in enumerate(fps)], patience=10)
    c = watch.result()
    assert (c.trial, c.trials, c.best_then, c.best_now) == (3, 31, 200, 201.5)
    assert math.isclose(c.bought, 0.0075)
    # in plain words: where the best stopped improving, by what rule, and what the trials after it bought
    assert c.sentence("fps") == ("converged at trial 3 of 31: the best stopped improving there (10 trials in a row "
                                 "gained under 1%); the 28 trials after it improved the best by 0.8% "
                                 "(200 -> 201.5 fps)")
    # still improving: not converged, and it says when the best last moved
    c = ConvergenceWatch(obj, 32, [(str(i), _m(100 + 10 * i, str(i))) for i in range(20)]).result()
    assert (c.trial, c.last_moved) == (None, 20)
    assert c.sentence() == ("not converged: the best last moved by more than 1% at trial 20 of 20, and convergence "
                            "needs 10 trials without such a gain")
    # a re-measured lucky best counts with its latest value
    watch = ConvergenceWatch(obj, 30, [("a", _m(100, "a")), ("b", _m(120, "b"))], patience=10)
    again = _m(90, "b")
    again.extra["remeasured"] = 2
    watch.add("b", again)
    assert (watch.result().best_now, watch.result().trials) == (100, 4)


def test_a_gain_over_one_percent_withdraws_the_convergence_declared_before_it():
    obj = get_objective("throughput")
    fps = [100, 150, 200, 201, 199] + [200.5] * 20 + [230] + [229] * 5
    watch = ConvergenceWatch(obj, 32, patience=10)
    for i, v in enumerate(fps[:25]):
        watch.add(str(i), _m(v, str(i)))
    assert watch.converged and watch.result().trial == 3
    assert watch.announcements() == ["converged at trial 3: no gain over 1% in the 10 trials after it"]
    for i, v in enumerate(fps[25:], 25):
        watch.add(str(i), _m(v, str(i)))
    c = watch.result()
    # trial 26 found a plan 15 % better: the declaration of trial 3 no longer stands
    assert not watch.converged and (c.trial, c.last_moved, c.withdrawn, c.best_now) == (None, 26, ((3, 26),), 230)
    assert watch.announcements() == ["convergence at trial 3 withdrawn at trial 26: the best moved +15.0% (200 -> 230)"]
    assert c.sentence("fps") == ("not converged: the best last moved by more than 1% at trial 26 of 31, and "
                                 "convergence needs 10 trials without such a gain; a convergence declared at trial 3 "
                                 "was withdrawn at trial 26")
    assert c.short() == "best moved at trial 26" and c.as_dict()["withdrawn"] == ((3, 26),)
    # ten more trials without a gain: declared again, at the trial the best moved
    for i in range(31, 36):
        watch.add(str(i), _m(229, str(i)))
    c = watch.result()
    assert (c.trial, c.trials) == (26, 36) and c.short() == "converged at trial 26"
    assert c.sentence("fps").startswith("converged at trial 26 of 36: the best stopped improving there (10 trials "
                                        "in a row gained under 1%; a convergence declared at trial 3 was "
                                        "withdrawn at trial 26)")
    # a re-measurement that lowers the best withdraws nothing
    again = _m(200, "25")
    again.extra["remeasured"] = 1
    watch.add("25", again)
    assert watch.converged and watch.result().withdrawn == ((3, 26),)


def test_the_rule_counts_the_device_time_spent_after_convergence():
    obj = get_objective("throughput")
    watch = ConvergenceWatch(obj, 20, patience=10)
    for i, v in enumerate([100, 200] + [200] * 12):
        m = _m(v, str(i))
        m.extra["device_time_s"] = {"total_s": 600.0}
        m.extra["cache_hit"] = i == 13  # a cache hit costs nothing
        watch.add(str(i), m)
    c = watch.result()
    assert (c.trial, c.device_s, c.device_s_after) == (2, 13 * 600.0, 11 * 600.0)
    assert c.device_clause() == "; 1.8 h of it after the study converged at trial 2"
    assert ConvergenceWatch(obj, 20).result().device_clause() == ""


def test_the_live_bar_shows_where_the_study_converged_or_when_its_best_last_moved():
    from placetune.tuning.progress import Progress

    obj = get_objective("throughput")
    out = io.StringIO()
    p = Progress(out, tty=True, total=40, done=0, objective=obj, baseline=None)
    watch = ConvergenceWatch(obj, 40, patience=10)
    p.watch_convergence(watch)
    for i, v in enumerate([100, 150, 200]):
        watch.add(str(i), _m(v, str(i)))
    p._draw()
    assert out.getvalue().split("\r")[-1].rstrip().endswith("best moved at trial 3")
    for i in range(3, 13):
        watch.add(str(i), _m(200, str(i)))
    p._draw()
    assert out.getvalue().split("\r")[-1].rstrip().endswith("converged at trial 3")


def test_stop_when_converged_ends_the_run_and_says_so(tmp_path):
    out, outcome = _tune(tmp_path, model="seed-block", agent="local", trials=60, stop_when_converged=True)
    conv = outcome.convergence
    assert conv.trial is not None and conv.stopped and outcome.trials_done < 60
    assert re.search(r"^converged at trial \d+ of \d+: .*the run stopped \d+ trials? later \(--stop-when-converged\)", out, re.M)
    (tmp_path / "full").mkdir()
    full, outcome = _tune(tmp_path / "full", model="seed-block", agent="local", trials=40)
    assert outcome.trials_done == 40 and not outcome.convergence.stopped
    assert re.search(r"^converged at trial \d+ of 40: .* the \d+ trials after it (improved the best|found nothing better)", full, re.M)
    # what the builds after convergence cost, next to the run's device time
    conv = outcome.convergence
    assert 0 < conv.device_s_after < conv.device_s
    assert re.search(rf"^simulated device time .*; [\d.]+ (h|min|s) of it after the study converged at trial "
                     rf"{conv.trial}$", full, re.M), full


def test_the_residual_model_learns_what_the_profile_cannot_express():
    """A device whose DLA segments slow down past 8 layers (no scale of the simulator's terms says
    so): fitted on 24 plans, the segment residuals predict 12 other plans' long DLA segments far better."""
    import numpy as np

    from placetune.backends.simulate.simulator import SimulatedJetson
    from search.residual import Correction, CorrectedSimulator, fit_correction

    ev = Evaluator("resnet18", "orin-agx", mode="pipeline", precision="int8", objective="throughput",
                   frames_in_flight=4)
    space, rng, sim = ev.space("stages"), np.random.default_rng(0), SimulatedJetson(timeline=False)

    def measured(a):
        m = sim.measure(ev.realise(space.to_placement(a)), ev.platform, ev.settings)
        for s in m.segment_times_ms:  # the device: +4 % per DLA layer past 8
            if s["device"] != "GPU":
                s["time_ms"] *= 1 + 0.04 * max(0, s["layers"] - 8)
        return m

    plans = [measured(space.sample(rng)) for _ in range(36)]
    inc = CorrectedSimulator(ev.model, ev.platform, ev.settings, sim)
    corr, _, info = fit_correction(inc, ev.objective, plans[:24])
    assert corr.segment.any() and info["segments"] > 24

    def dla_errors(correction):
        from placetune.placement.segmenting import segment_arrays
        from search.residual import _codes

        inc.correction = correction
        out = []
        for m in plans[24:]:
            codes = _codes(ev.model, m.realized)
            sa = segment_arrays(inc.producers, codes, True)
            pred, _, dev = inc.segment_times(codes, sa)
            out += [abs(np.log((s["time_ms"] - inc.table.engine_ms) / p))
                    for s, p, d in zip(m.segment_times_ms, pred, dev) if d > 0 and s["layers"] > 8]
        return float(np.median(out))

    before, after = dla_errors(Correction.none()), dla_errors(corr)
    assert before > 0.1 and after < before / 3, (before, after)


def test_the_plan_residual_tells_a_gpu_bound_plan_from_a_dla_bound_one():
    """A device whose GPU slows down under the DLAs' memory traffic while the DLAs hardly feel the
    GPU's (asymmetric contention, no scale of the simulator's terms says so): fitted on 24 plans,
    the plan residual predicts 16 other plans far better than one contention term for both."""
    import numpy as np

    from placetune.backends.simulate.simulator import SimulatedJetson
    from search.residual import Correction, CorrectedSimulator, _codes, evaluation_time_like, fit_correction, time_like

    ev = Evaluator("resnet18", "orin-agx", mode="pipeline", precision="int8", objective="throughput",
                   frames_in_flight=4)
    space, rng, sim = ev.space("stages"), np.random.default_rng(0), SimulatedJetson(timeline=False)

    def measured(a):
        m = sim.measure(ev.realise(space.to_placement(a)), ev.platform, ev.settings)
        busy, period = m.extra["busy_ms"], m.extra["period_ms"]
        u = {d: min(1.0, busy.get(d, 0.0) / period) for d in ("GPU", "DLA0", "DLA1")}
        if u["GPU"] >= max(u["DLA0"], u["DLA1"]):  # the GPU is the bottleneck: it waits on the DLAs' traffic
            m.throughput_fps /= 1 + 0.4 * (u["DLA0"] + u["DLA1"])
        else:  # a DLA is: it feels the GPU's traffic less than the simulator says
            m.throughput_fps *= 1 + 0.1 * u["GPU"]
        return m

    plans = [measured(space.sample(rng)) for _ in range(40)]
    inc = CorrectedSimulator(ev.model, ev.platform, ev.settings, sim)
    corr, _, _ = fit_correction(inc, ev.objective, plans[:24])

    def error(correction):
        inc.correction = correction
        return float(np.median([abs(np.log(time_like(ev.objective, m) / evaluation_time_like(
            ev.objective, inc.evaluate(_codes(ev.model, m.realized))))) for m in plans[24:]]))

    before, after = error(Correction.none()), error(corr)
    assert after < before / 3, (before, after)


def test_a_best_that_did_not_hold_on_re_measurement_is_not_called_a_purchase():
    from placetune.tuning.convergence import Convergence

    c = Convergence(trials=24, patience=10, min_gain=0.01, trial=8, best_then=0.561, best_now=0.6163,
                    direction="minimize")
    assert c.bought < 0
    text = c.sentence("ms")
    assert "by -" not in text
    assert text.endswith("the 16 trials after it found nothing better, and re-measuring moved the best from "
                         "0.561 to 0.6163 ms")
