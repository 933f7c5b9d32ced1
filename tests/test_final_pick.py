"""One best plan: an agent's final pick is what the run prints, exports, records and later exports.

An agent that ends its run with a pick of its own (the guided agent's final, possibly
drift-corrected ranking; here a scripted agent that picks the runner-up by a rule of its own)
must be the plan the summary calls best, the plan file, ``placetune export`` from the database
alone, ``placetune studies`` and the Optuna study's ``placetune_best`` user attribute; once the
study measured more, the recorded pick is not followed (it no longer rests on all the evidence)
and every one of them says so. Real SQLite, real Optuna, the simulated Jetson.
"""

from __future__ import annotations

import io
import json

import optuna
import pytest

import search
from search import Agent, Budget, BudgetExhausted, SearchResult, SearchRun, get_agent, register_agent

from placetune.cli.main import main
from placetune.plan.export import export_plan
from placetune.store.store import Store
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.final_pick import KEY, STORE_RULE, study_best
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune import run_tune

RULE = "a scripted final ranking: the runner-up"


class RunnerUpAgent(Agent):
    """Measures random plans, then ends its run with the runner-up as its pick, by a rule of its own."""

    name = "runner-up"
    picked: int | None = None  # the measurement id of its last run's pick

    def search(self, evaluator: Evaluator, budget: Budget) -> SearchResult:
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        rng = run.rng(self.seed)
        tried = []
        try:
            run.measure_baselines()
            while not run.exhausted:
                a = run.space.sample(rng)
                run.evaluate(a)
                tried.append(a)
        except BudgetExhausted:
            pass
        evaluator.flush()  # the rows' ids (a simulated run writes in batches)
        ranked = sorted({tuple(a): run.known(a) for a in tried if run.known(a) is not None and run.known(a).ok}.items(),
                        key=lambda t: run.loss(t[1]))
        seen, distinct = set(), []
        for a, m in ranked:
            if m.extra["_id"] not in seen:
                seen.add(m.extra["_id"])
                distinct.append((a, m))
        a, m = distinct[1]  # the runner-up of its own plans
        RunnerUpAgent.picked = m.extra["_id"]
        run.best_assignment, run.best_placement = list(a), run.space.to_placement(list(a))
        run.best_measurement, run.best_value = m, run.objective.value(m)
        run.final_rule = RULE
        return run.result()


@pytest.fixture
def runner_up(monkeypatch):
    monkeypatch.setattr(search, "_REGISTRY", dict(search._REGISTRY))
    register_agent("runner-up", RunnerUpAgent)


def _tune(tmp_path, trials: int, agent: str = "runner-up") -> tuple:
    out = io.StringIO()
    cfg = TuneConfig(model="seed-block", agent=agent, trials=trials, storage=f"sqlite:///{tmp_path}/s.db",
                     study="s", export=str(tmp_path / "best.plan.json"), agent_options={"seed": 1})
    return run_tune(cfg, out=out), out.getvalue()


def _ids(store: Store) -> tuple[int, int]:
    """The study's best stored value's measurement id, and the scripted agent's last pick."""
    best = max(store.measurements("s", status="ok"), key=lambda r: (r.measurement.throughput_fps, -r.id))
    assert RunnerUpAgent.picked is not None and RunnerUpAgent.picked != best.id
    return best.id, RunnerUpAgent.picked


def test_the_agents_final_pick_is_printed_exported_recorded_and_exported_again_from_the_database(tmp_path, runner_up,
                                                                                                   capsys):
    outcome, text = _tune(tmp_path, 12)
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        best_id, runner_id = _ids(store)
        assert best_id != runner_id
        # the summary's best, the plan file
        assert outcome.best[1].extra.get("_id") in (None, runner_id)
        assert outcome.pick.record.id == runner_id and outcome.pick.recorded
        assert outcome.best[1].throughput_fps == store.measurements("s", ids=[runner_id])[0].measurement.throughput_fps
        plan = json.loads((tmp_path / "best.plan.json").read_text())
        assert plan["source"]["measurement_id"] == runner_id
        assert any(RULE in n for n in plan["notes"])
        assert any(f"measurement {best_id}" in n and "put the pick ahead of it" in n for n in plan["notes"])
        # the summary says which plan, why, and names the best stored median it outranked
        assert f"best plan: measurement {runner_id} (Optuna trial " in text and RULE in text
        assert f"the best stored value (median over builds) is measurement {best_id}," in text
        # the database alone (no agent state): export, studies, the Optuna study's attribute
        later = export_plan(store, "s")
        assert later.source["measurement_id"] == runner_id and any(RULE in n for n in later.notes)
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/s.db")
    doc = study.user_attrs[KEY]
    assert doc["measurement_id"] == runner_id and doc["rule"] == RULE and doc["store_best_measurement_id"] == best_id
    assert study.trials[doc["trial"]].user_attrs["measurement_id"] == runner_id
    capsys.readouterr()
    assert main(["studies", "--storage", f"sqlite:///{tmp_path}/s.db", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["studies"][0]
    assert row["best_measurement_id"] == runner_id
    assert main(["export", "--storage", f"sqlite:///{tmp_path}/s.db", "-o", str(tmp_path / "later.json")]) == 0
    printed = capsys.readouterr()
    assert json.loads((tmp_path / "later.json").read_text())["source"]["measurement_id"] == runner_id
    assert RULE in printed.out + printed.err


def test_a_spent_budget_shows_the_recorded_pick_and_more_evidence_retires_it(tmp_path, runner_up):
    _tune(tmp_path, 12)
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        best_id, runner_id = _ids(store)
    again, text = _tune(tmp_path, 12)  # nothing left to measure: the same evidence, the same pick
    assert again.pick.record.id == runner_id and again.pick.recorded and RULE in text
    more, text = _tune(tmp_path, 20, agent="random")  # another agent measured more: the record is stale
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        pick = study_best(store, "s")
        assert pick.rule == STORE_RULE and not pick.recorded
        top = max(store.measurements("s", status="ok"), key=lambda r: (r.measurement.throughput_fps, -r.id))
        assert pick.record.id == top.id == more.pick.record.id
        assert pick.ignored and f"measurement {runner_id}" in pick.ignored and "requested since" in pick.ignored
        later = export_plan(store, "s")
        assert later.source["measurement_id"] == pick.record.id
        assert any("is not followed" in n for n in later.notes)
    assert "is not followed" in text


def test_a_study_without_a_recorded_pick_keeps_the_best_stored_value(tmp_path):
    outcome, text = _tune(tmp_path, 12, agent="random")
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        best_id = max(store.measurements("s", status="ok"), key=lambda r: (r.measurement.throughput_fps, -r.id)).id
        assert outcome.pick.record.id == best_id and outcome.pick.rule == STORE_RULE
        assert export_plan(store, "s").source["measurement_id"] == best_id
    assert "best plan: measurement" not in text
    assert KEY not in optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/s.db").user_attrs


def test_a_recorded_pick_that_is_not_placetunes_is_ignored_with_a_warning(tmp_path, runner_up, caplog):
    _tune(tmp_path, 12)
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/s.db")
    study.set_user_attr(KEY, {"measurement_id": "three"})
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        pick = study_best(store, "s")
        assert pick.rule == STORE_RULE and pick.record.id == _ids(store)[0]
    assert "not one placetune wrote" in caplog.text


def test_the_guided_agents_final_ranking_is_its_final_rule():
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", noise=0.03, seed=2)
    r = get_agent("guided", seed=0).run(ev, Budget(30))
    assert r.final_rule is not None and "final ranking of its top" in r.final_rule
    assert f"(measurement {r.best_measurement.extra['_id']})" in r.final_rule.split("#1 ", 1)[1].split(", #2", 1)[0]
    # its scores read as every other figure of the run (figure(): 6,702 fps, not 6702 fps)
    import re

    scores = re.findall(r"#\d+ (\S+) fps", r.final_rule)
    assert scores and all(re.fullmatch(r"\d{1,3}(,\d{3})+|\d{1,3}(\.\d+)?", x) for x in scores), r.final_rule


def test_the_convergence_line_names_the_best_it_watched_when_the_pick_is_another(tmp_path, runner_up):
    """Before, after a run whose pick was not the best stored value, the convergence line spoke of "the best"
    (the store's: "found nothing better (best 6,768 fps)") two lines under the pick's own row and figure."""
    outcome, text = _tune(tmp_path, 12)
    assert outcome.pick.store_best is not None
    line = next(x for x in text.splitlines() if x.startswith("converged at trial ") and " of 12:" in x)
    assert "the best stored value stopped improving" in line and "(best stored value " in line, line
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path}/s.db")
    assert study.user_attrs["convergence"] == line  # the line the run printed is the one kept with the study


def test_an_in_memory_study_follows_the_pick_in_its_own_run(tmp_path, runner_up):
    out = io.StringIO()
    cfg = TuneConfig(model="seed-block", agent="runner-up", trials=12, storage="sqlite:///:memory:", study="s",
                     export=str(tmp_path / "best.plan.json"), agent_options={"seed": 1})
    outcome = run_tune(cfg, out=out)
    assert outcome.pick.recorded and outcome.pick.record.id == RunnerUpAgent.picked
    assert json.loads((tmp_path / "best.plan.json").read_text())["source"]["measurement_id"] == RunnerUpAgent.picked
    assert RULE in out.getvalue()


def test_a_recorded_pick_whose_placement_is_unknown_gives_way_to_the_best_known_by_the_stored_ranking(
        tmp_path, runner_up):
    """The rule of :func:`exportable`: a run's recorded pick whose realised placement was not read (as a
    real Jetson's can be; made so here in memory, the database untouched) is passed over for the best
    measurement whose placement is known by the study's stored ranking, with the lines that say so."""
    from dataclasses import replace

    from placetune.tuning.final_pick import exportable
    from placetune.tuning.objectives import get_objective

    _tune(tmp_path, 12)
    with Store(f"sqlite:///{tmp_path}/s.db") as store:
        best_id, runner_id = _ids(store)
        pick = study_best(store, "s")
        assert pick.recorded and pick.record.id == runner_id and exportable(store, "s", pick).passed_over is None
        m = pick.record.measurement
        unread = replace(m, realized=None, extra={**m.extra, "placement_known": False,
                                                  "placement_unknown": "no placement report in the log"})
        chosen = exportable(store, "s", replace(pick, record=replace(pick.record, measurement=unread)))
        assert chosen is not None and chosen.passed_over.id == runner_id
        # the store's ranking among the known ones: its best stored value (the pick's own row is read
        # from the database, known there, but it is not better than the store's best)
        assert chosen.record.id == best_id
        lines = chosen.lines(get_objective("throughput"), store.find_study("s"))
        assert lines[0].startswith(f"NOT EXPORTED: the better plan, measurement {runner_id} (")
        assert "(no placement report in the log)" in lines[0]
        assert lines[1].startswith(f"exported instead: measurement {best_id} (")


def test_layers_no_placement_source_named_are_said_in_the_exported_plan(tmp_path):
    """A layer neither the build log nor the engine's layer information names (optimised away, folded)
    keeps its requested device in the realised placement (``extra["placement_from_request"]``). That is
    the one device in a plan that was not read: the plan's notes say which layers. Before, only the
    measurement's extra held it, and the exported plan claimed them like every other layer."""
    from dataclasses import replace

    from placetune.placement.placement import Placement

    storage = f"sqlite:///{tmp_path}/u.db"
    ev = Evaluator("seed-block", "orin-agx", store=storage, study="u")
    m = ev.evaluate(Placement.all_gpu(ev.model))
    ev.flush()
    ev.close()
    with Store(storage) as store:
        best = study_best(store, "u")
        assert best is not None and best.record.measurement.ok
        plain = export_plan(store, "u")
        assert not any("no placement source named" in n for n in plain.notes)
        rec = best.record
        store.update_measurement(rec.id, replace(rec.measurement, extra={
            **rec.measurement.extra, "placement_from_request": ["/Flatten", "/Reshape"]}))
        plan = export_plan(store, "u")
    assert m.ok
    said = [n for n in plan.notes if "no placement source named" in n]
    assert said and "2 layers" in said[0] and "/Flatten, /Reshape" in said[0] and "not one that was read" in said[0]
