"""Re-measuring the top candidates: Evaluator.remeasure, Store.update_measurement
and the guided agent's re-measured final ranking."""

from __future__ import annotations

import re

import statistics

import pytest

from placetune import ConfigError, Evaluator, Placement, Store
from placetune.backends.base import BackendBase
from placetune.backends.registry import get_backend
from placetune.measurement import Measurement
from placetune.tuning.remeasure import combine_builds

NOISE = 0.1  # builds of one placement differ by ~10 %: re-measuring matters


def _ev(store=None, **kw):
    return Evaluator("seed-block", "orin-agx", store=store, noise=kw.pop("noise", NOISE), **kw)


def test_remeasure_combines_builds_by_their_median():
    ev = _ev()
    p = Placement.all_gpu(ev.model)
    first = ev.baseline()
    m = ev.remeasure(p, builds=2)
    builds = m.extra["builds"]
    assert len(builds) == 3 and [b["build"] for b in builds] == [0, 1, 2]
    assert builds[0]["median_ms"] == first.latency_ms["median"]
    medians = [b["median_ms"] for b in builds]
    assert len(set(medians)) == 3  # noise > 0: every build has its own figure
    assert m.latency_ms["median"] == statistics.median(medians) != first.latency_ms["median"]
    assert m.throughput_fps == statistics.median(b["throughput_fps"] for b in builds)
    assert m.energy_mj == statistics.median(b["energy_mj"] for b in builds)
    assert len(m.latency_samples_ms) == 3 * len(first.latency_samples_ms)
    assert m.latency_samples_ms[: len(first.latency_samples_ms)] == first.latency_samples_ms
    assert m.extra["remeasured"] == 2 and m.extra["cache_hit"] is False
    assert ev.baseline().latency_ms == m.latency_ms  # the all-GPU baseline is the combined one, for free
    assert ev.stats.requested == 3 and ev.stats.measured == 3  # each build is an evaluation
    # the evaluator's memory answers the combined measurement
    again = ev.evaluate(p)
    assert again.extra["cache_hit"] and again.latency_ms["median"] == m.latency_ms["median"]
    assert len(again.extra["builds"]) == 3


def test_combined_median_of_two_builds_is_their_mean():
    ev = _ev()
    p = Placement.all_gpu(ev.model)
    a = ev.evaluate(p)
    m = ev.remeasure(p)
    b = m.extra["builds"][1]["median_ms"]
    assert m.latency_ms["median"] == pytest.approx((a.latency_ms["median"] + b) / 2)
    assert combine_builds(a, []).latency_ms["median"] == a.latency_ms["median"]


def test_remeasure_updates_the_row_in_a_sqlite_file(tmp_path):
    db = str(tmp_path / "s.db")
    ev = _ev(db)
    gpu, dla = Placement.all_gpu(ev.model), Placement.all_dla(ev.model, 0)
    ev.evaluate(gpu)
    ev.evaluate(dla)
    n_rows = len(ev.store.measurements(ev.study_name))
    m = ev.remeasure(gpu, agent="tester", trial_number=7)
    assert ev.store.lookup(*ev.study.scope, ev.realise(gpu).realized.key).latency_ms["median"] == m.latency_ms["median"]
    ev.close()
    with Store(db) as s:  # a new store reads the rewritten row back
        recs = s.measurements(ev.study_name)
        assert len(recs) == n_rows  # updated in place, no second row
        rec = next(r for r in recs if r.placement_key == ev.realise(gpu).realized.key)
        assert rec.id == m.extra["_id"]
        assert rec.measurement.latency_ms == m.latency_ms
        assert rec.measurement.throughput_fps == m.throughput_fps
        assert rec.measurement.extra["builds"] == m.extra["builds"]
        assert rec.measurement.latency_samples_ms == m.latency_samples_ms
        assert rec.measurement.layer_times_ms == m.layer_times_ms  # packed fields survive the update
        last = s.requests(ev.study_name)[-1]  # the re-measurement is a logged request
        assert (last.measurement_id, last.cache_hit, last.agent, last.trial_number) == (rec.id, False, "tester", 7)
        assert len(s.requests(ev.study_name)) == 3
        # rankings use the combined figures
        best = s.best(ev.study_name, "latency")
        ranked = sorted((r.measurement.latency_ms["median"], r.id) for r in recs)
        assert best.id == ranked[0][1] and best.measurement.latency_ms["median"] == ranked[0][0]


def test_best_follows_the_combined_figure():
    """A store's ranking and the evaluator's best() read the rewritten figure columns."""
    ev = _ev()
    p = Placement.all_gpu(ev.model)
    first = ev.evaluate(p).latency_ms["median"]
    m = ev.remeasure(p, builds=4)
    assert m.latency_ms["median"] != first
    assert ev.best()[1].latency_ms["median"] == m.latency_ms["median"]
    assert ev.store.best(ev.study_name).measurement.latency_ms["median"] == m.latency_ms["median"]


def test_remeasure_in_another_process_continues_the_builds(tmp_path):
    """A new evaluator (a new process's simulator starts its build counter anew) draws new builds,
    not the stored first build's figures again."""
    db = str(tmp_path / "s.db")
    with _ev(db) as ev:
        p = Placement.all_gpu(ev.model)
        first = ev.evaluate(p)
    with _ev(db) as ev2:
        m = ev2.remeasure(p)
        assert [b["build"] for b in m.extra["builds"]] == [0, 1]
        assert m.extra["builds"][1]["median_ms"] != first.latency_ms["median"]


@pytest.mark.parametrize("what", ["never measured", "failed"])
def test_remeasure_of_an_unmeasured_or_failed_placement_is_a_one_line_error(tmp_path, what):
    db = str(tmp_path / "s.db")
    ev = _ev(db)
    ev.evaluate(Placement.all_gpu(ev.model))
    p = Placement.all_dla(ev.model, 0)
    if what == "failed":  # a build that fails on the device
        sim = get_backend("simulate")

        class Failing(BackendBase):
            name, capabilities, fingerprint = sim.name, sim.capabilities, sim.fingerprint

            def measure(self, r, platform, settings):
                return Measurement.failure("build_failed", "builder crashed", simulated=True)

        ev = Evaluator("seed-block", "orin-agx", Failing(), store=db, noise=NOISE, study="failing")
        assert ev.evaluate(p).status == "build_failed"
    def counts(stats):  # what the refusal must not change (the store look-up's time is spent, not counted)
        return {k: v for k, v in stats.as_dict().items() if not k.endswith("_seconds")}

    before = ([(r.id, r.measurement.to_dict()) for r in ev.store.measurements()],
              len(ev.store.requests(ev.study_name)), counts(ev.stats))
    with pytest.raises(ConfigError) as err:
        ev.remeasure(p)
    assert "\n" not in str(err.value) and "cannot re-measure" in str(err.value)
    assert what in str(err.value)
    after = ([(r.id, r.measurement.to_dict()) for r in ev.store.measurements()],
             len(ev.store.requests(ev.study_name)), counts(ev.stats))
    assert after == before
    with pytest.raises(ConfigError, match="builds must be"):
        ev.remeasure(Placement.all_gpu(ev.model), builds=0)


def test_update_measurement_of_a_missing_row_is_a_store_error():
    from placetune import StoreError

    ev = _ev()
    m = ev.evaluate(Placement.all_gpu(ev.model))
    with pytest.raises(StoreError, match="no stored measurement with id 999"):
        ev.store.update_measurement(999, m)


# --------------------------------------------------------------------------- the point of it
#: two placements of seed-block with the same figure without noise; with noise 0.1 and seed 1
#: the first build of LUCKY is ~20 % faster than OTHER's, the median of three builds is slower
LUCKY = {"/conv1/Conv": "DLA0", "/conv2/Conv": "GPU", "/conv3/Conv": "GPU", "/conv4/Conv": "GPU", "/Concat": "GPU"}
OTHER = {"/conv1/Conv": "GPU", "/conv2/Conv": "GPU", "/conv3/Conv": "DLA0", "/conv4/Conv": "GPU", "/Concat": "GPU"}


def test_a_lucky_first_build_loses_its_crown_after_re_measuring():
    exact = _ev(noise=0.0)
    assert exact.evaluate(LUCKY).latency_ms["median"] == exact.evaluate(OTHER).latency_ms["median"]
    ev = _ev(seed=1)
    lucky, other = ev.evaluate(LUCKY), ev.evaluate(OTHER)
    assert lucky.latency_ms["median"] < 0.9 * other.latency_ms["median"]
    assert ev.best()[1].realized == lucky.realized  # crowned by one build
    a, b = ev.remeasure(LUCKY, builds=2), ev.remeasure(OTHER, builds=2)
    assert b.latency_ms["median"] < a.latency_ms["median"]
    for m in (a, b):
        assert m.latency_ms["median"] == statistics.median(x["median_ms"] for x in m.extra["builds"])
    assert ev.best()[1].realized == other.realized  # the median over builds ranks them


# --------------------------------------------------------------------------- the guided agent
def _guided(budget, model="seed-block", **kw):
    from search import Budget, get_agent

    opts = {"mode": kw.pop("mode", "pipeline"), "precision": "int8", "objective": kw.pop("objective", "throughput")}
    ev = Evaluator(model, "orin-agx", noise=kw.pop("noise", NOISE), seed=kw.pop("seed", 0), **opts)
    r = get_agent("guided", seed=0, inner_evals=100, **kw).run(ev, Budget(budget))
    return ev, r


def test_guided_spends_its_last_evaluations_re_measuring_its_top_candidates():
    ev, r = _guided(20)
    # the last three builds re-measure the top three; one build before them was the drift's reference
    # (the best measured after ten builds, built again: search.drift)
    assert r.evaluations == 20 and r.extra["remeasured"] == 4 and len(r.history) == 20
    reqs = ev.store.requests(ev.study_name)
    assert [(q.agent, q.cache_hit) for q in reqs[-3:]] == [("remeasure", False)] * 3
    assert [q.agent for q in reqs[:-3]].count("remeasure") == 1
    assert all(q.agent in ("guided", "baseline", "remeasure") for q in reqs[:-3])
    recs = {rec.id: rec.measurement for rec in ev.store.measurements(ev.study_name, status="ok")}
    again = [recs[q.measurement_id] for q in reqs[-3:]]
    assert len({id(m) for m in again}) == 3 and sorted(len(m.extra["builds"]) for m in again) in ([2, 2, 2], [2, 2, 3])
    # the three were the best by their first builds
    first = sorted((m.extra["builds"][0]["throughput_fps"] if "builds" in m.extra else m.throughput_fps)
                   for m in recs.values())
    assert sorted(m.extra["builds"][0]["throughput_fps"] for m in again) == first[-3:]
    # the final best is the best by the combined figures, which are medians over the builds
    best = r.best_measurement
    assert len(best.extra["builds"]) >= 2
    assert r.best_value == best.throughput_fps == statistics.median(b["throughput_fps"] for b in best.extra["builds"])
    assert r.best_value == max(m.throughput_fps for m in recs.values())
    assert ev.best()[1].throughput_fps == r.best_value
    assert any(n.startswith("re-measured the top 3 (throughput, fps, as measured -> median over builds)")
               for n in r.notes), r.notes


def _crown_moved(note: str) -> bool:
    """The re-measuring note says #1's first build was lucky: another of the top 3 is the best
    now, or all of them fell behind a placement measured once (which one depends on the noise
    draws and the simulator's figures)."""
    return ("is the best now (the first build of #1 was a lucky one)" in note
            or bool(re.search(r"the best is now one measured once \([0-9.]+\): the top \d+ fell behind it", note)))


def test_guided_re_measuring_takes_the_crown_from_a_lucky_build():
    """googlenet, latency, noise 0.1: the best first build was a lucky one; after re-measuring the
    top 3 another one is the best, and the result says so."""
    # a scenario, not a statistic: noise seed 1 is one whose best first build is a lucky one on the
    # current simulated device (seed 0 was, before the power-mode refit of the constants)
    ev, r = _guided(20, "googlenet", mode="engine", objective="latency", seed=1)
    note = next(n for n in r.notes if n.startswith("re-measured the top 3"))
    assert _crown_moved(note), note
    firsts = {rec.id: (rec.measurement.extra.get("builds") or [{"median_ms": rec.measurement.latency_ms["median"]}])[0]
              for rec in ev.store.measurements(ev.study_name, status="ok")}
    lucky = min(firsts, key=lambda i: firsts[i]["median_ms"])
    assert r.best_measurement.extra["_id"] != lucky
    assert r.best_value == min(rec.measurement.latency_ms["median"]
                               for rec in ev.store.measurements(ev.study_name, status="ok"))


@pytest.mark.parametrize("budget, kw", [(19, {}), (20, {"remeasure": 0}), (20, {"noise": 0.0})])
def test_guided_re_measures_nothing_below_the_threshold_when_off_or_without_noise(budget, kw):
    ev, r = _guided(budget, **kw)
    assert r.evaluations == budget and r.extra["remeasured"] == 0
    assert all(q.agent != "remeasure" for q in ev.store.requests(ev.study_name))
    assert all("builds" not in rec.measurement.extra for rec in ev.store.measurements(ev.study_name))
    assert not any("re-measured" in n for n in r.notes)



# --------------------------------------------------------------------------- placetune tune
def test_tune_says_it_re_measured_and_its_summary_uses_the_combined_figures(tmp_path, capsys):
    from placetune.cli.main import main

    study = tmp_path / "s.toml"
    # the whole budget: this run's lucky first build is dethroned by the final re-measurement (a settled run
    # builds other plans after convergence, and its top 3 came out in their first order). A scenario, not a
    # statistic: noise seed 2, the first of 1-3 whose #1 loses its crown on the current simulated device
    # (seed 0's did before the refit that let FP16-only layers onto the DLA in INT8 builds; after it, #1
    # 0.5868 -> 0.6343 ms kept it by 0.1 % over #2's 0.6349)
    study.write_text('[study]\nmodel = "googlenet"\nmode = "engine"\nobjective = "latency"\ntrials = 24\n'
                     'stop_when_settled = false\n\n'
                     '[settings]\nnoise = 0.1\nseed = 2\n\n[agent_options]\nseed = 0\ninner_evals = 100\n')
    db = tmp_path / "pt.db"
    assert main(["tune", str(study), "--storage", f"sqlite:///{db}", "--export", str(tmp_path / "plan.json")]) == 0
    out = capsys.readouterr().out
    lines = [x for x in out.splitlines() if x.startswith("trial=")]
    # the run ends on its top 3 built once more each (a close contender may also be built again mid-run)
    assert len(lines) == 24 and all("remeasured_builds=" in x for x in lines[-3:])
    assert not any("remeasured_builds=" in x for x in lines[:3])  # the baselines, built once
    note = next(x for x in out.splitlines() if x.startswith("re-measured the top 3"))
    assert _crown_moved(note), note
    with Store(str(db)) as s:
        name = s.studies()[0].name
        best = s.best(name).measurement
    # the last progress line and the summary show the re-ranked best, the median over its builds
    assert f"best_latency_ms={best.latency_ms['median']:.4g} " in lines[-1]
    row = next(x for x in out.splitlines() if x.startswith("best found"))
    assert f"{best.latency_ms['median']:.3f}" in row
    if "builds" in best.extra:  # another of the re-measured top 3 is the best: its figure is the median
        assert best.latency_ms["median"] == statistics.median(b["median_ms"] for b in best.extra["builds"])
    else:  # a placement measured once beat the re-measured top 3: the note names its figure
        assert f"one measured once ({best.latency_ms['median']:.4g})" in note


def _tune_noisy_googlenet(tmp_path, seed: int):
    """The googlenet latency study of the test above on noise seed ``seed``: its output, the medians of
    the re-measuring note, its stored ok measurements and its all-GPU baseline's."""
    from placetune.cli.main import main

    study = tmp_path / "s.toml"
    study.write_text('[study]\nmodel = "googlenet"\nmode = "engine"\nobjective = "latency"\ntrials = 24\n'
                     'stop_when_settled = false\n\n'
                     f'[settings]\nnoise = 0.1\nseed = {seed}\n\n[agent_options]\nseed = 0\ninner_evals = 100\n')
    db = tmp_path / "pt.db"
    assert main(["tune", str(study), "--storage", f"sqlite:///{db}", "--export", str(tmp_path / "plan.json")]) == 0
    with Store(str(db)) as s:
        stored = [r.measurement for r in s.measurements(s.studies()[0].name, status="ok")]
    return stored, next(m for m in stored if m.realized and set(m.realized.values()) == {"GPU"})


def _best_found(out: str) -> str:
    return next(x for x in out.splitlines() if x.startswith("best found"))


def test_the_final_ranking_counts_a_baselines_build_made_before_the_agent(tmp_path, capsys):
    """Without a drift the final top candidates are ranked on the median over all builds of each,
    what the store holds. A baseline is built by the study before the agent runs, so the agent gets
    it as an answer without a build; its re-measured median must still count that first build."""
    # a scenario, not a statistic: on noise seed 3 all-GPU (0.6331 ms first) is rebuilt mid-run (0.7520)
    # and among the re-measured top 3 (0.6417): its median over the three builds is 0.6417 ms, the
    # least of the three medians; ranked on its two later builds only (0.6968) it lost to a plan at 0.6661
    stored, gpu = _tune_noisy_googlenet(tmp_path, 3)
    out = capsys.readouterr().out
    note = next(x for x in out.splitlines() if x.startswith("re-measured the top 3"))
    medians = [float(v) for v in re.findall(r"-> ([0-9.]+) \(\d+ builds\)", note)]
    assert len(medians) == 3
    assert len(gpu.extra["builds"]) == 3  # all-GPU is one of the re-measured top 3
    assert f"{gpu.latency_ms['median']:.4g}" == f"{min(medians):.4g}"  # the least of the combined figures
    row = _best_found(out)
    assert f"{min(medians):.3f}" in row and "slower" not in row, row  # not worse than all-GPU, as measured


def test_with_the_drift_untested_and_no_build_left_a_baseline_built_once_is_not_kept_over_the_re_measured_top(
        tmp_path, capsys):
    """A plan outside the re-measured top whose median beats them on fewer builds, with the drift
    untested, is built once more, as late as they were, and ranked with them
    (tests/test_final_ranking_drift.py). Where no build is left for it (the run holds back only the
    top's re-measurements), it is not kept: its one early build against the top's later ones may
    differ by a drift, so the re-measured ranking decides, the note says that the budget ran out,
    and the summary says that the best stored median is another plan, and which."""
    # a scenario, not a statistic: on noise seed 7 the top 3 re-measure to 0.6716, 0.7557 and 0.7013 ms,
    # all behind all-GPU's one build (0.6625 ms); the drift is not tested, and the 24 trials are spent
    stored, gpu = _tune_noisy_googlenet(tmp_path, 7)
    out = capsys.readouterr().out
    note = next(x for x in out.splitlines() if x.startswith("re-measured the top 3"))
    assert "drift: not tested" in out and not _crown_moved(note), note
    assert "a plan outside the top has a better median (0.6625), not kept: the drift was not tested" in note
    assert note.endswith("(the time budget ran out before it could be built once more)"), note
    assert len(gpu.extra.get("builds") or [None]) == 1  # all-GPU was not built again
    row = _best_found(out)
    assert "0.672" in row and "slower" in row, row  # the re-measured #1, behind all-GPU's one build as measured
    stored_best = next(x for x in out.splitlines() if x.startswith("the best stored value (median over builds)"))
    assert f"{gpu.latency_ms['median']:.4f} ms" in stored_best and "put the pick ahead of it" in stored_best
    assert "no plan better than all-GPU found" in out


def test_search_run_holds_its_reserve_back_and_remeasure_re_ranks():
    from search import Budget, BudgetExhausted, SearchRun

    ev = _ev(seed=1)
    run = SearchRun(ev, Budget(6), "mine", "layer")
    run.reserve = 4
    lucky = run.space.from_placement(Placement(ev.model, LUCKY))
    other = run.space.from_placement(Placement(ev.model, OTHER))
    run.evaluate(lucky)
    run.evaluate(other)
    assert run.exhausted and run.remaining == 0
    with pytest.raises(BudgetExhausted):
        run.remeasure(lucky)
    assert run.best_assignment == lucky
    run.reserve = 0
    with pytest.raises(BudgetExhausted):
        run.remeasure(lucky, builds=5)  # more builds than evaluations left
    run.remeasure(lucky, builds=2)
    run.remeasure(other, builds=2)
    assert run.exhausted and run.evaluations == 6 and len(run.history) == 6
    r = run.result()
    assert r.measured == 6 and run.best_assignment == other
    assert r.best_measurement.realized == ev.realise(Placement(ev.model, OTHER)).realized.as_dict()
    assert r.best_value == r.history[-1].best == r.best_measurement.latency_ms["median"]


def _built(ms, realized, **extra):
    fallback = {n: "DLA does not support this layer" for n, d in realized.items() if d == "GPU" and n != "head"}
    return Measurement(status="ok", latency_samples_ms=[ms] * 5, throughput_fps=1000.0 / ms, realized=realized,
                       fallback=fallback, backend="tensorrt", extra=dict(extra))


@pytest.mark.parametrize("rebuild", ["fell_back", "unknown"])
def test_a_rebuild_that_realised_another_placement_is_left_out_of_the_medians(rebuild):
    """A rebuild on a real board may realise another placement than the stored build's (a DLA
    subgraph that fell back this time, or a build log that could not say where the layers ran);
    its figures are not this placement's, so they are listed but never averaged into it, which
    keeps the first build's realised placement and fallback."""
    asked = {"conv1": "DLA0", "conv2": "DLA0", "head": "GPU"}
    stored = _built(4.0, asked, placement_known=True)
    if rebuild == "fell_back":
        other = _built(9.0, {"conv1": "DLA0", "conv2": "GPU", "head": "GPU"}, placement_known=True)
    else:
        other = _built(9.0, dict(asked), placement_known=False)
    same = _built(4.4, dict(asked), placement_known=True)
    m = combine_builds(stored, [other, same])
    assert [b["status"] for b in m.extra["builds"]] == ["ok", "other_placement", "ok"]
    assert "conv2" in m.extra["builds"][1]["reason"] if rebuild == "fell_back" else \
        "unknown" in m.extra["builds"][1]["reason"]
    assert m.latency_ms["median"] == pytest.approx(4.2)
    assert m.throughput_fps == pytest.approx(statistics.median([1000 / 4.0, 1000 / 4.4]))
    assert 9.0 not in m.latency_samples_ms
    # its figures kept aside, not where a build's figures are read (search/rebuilds.py Rebuilds.builds)
    assert "median_ms" not in m.extra["builds"][1] and m.extra["builds"][1]["figures"]["median_ms"] == 9.0
    assert m.realized == asked and m.fallback == {}
    assert m.extra["placement_known"] is True
