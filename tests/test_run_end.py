"""The Python API's run (``agent.run(evaluator, budget)``) ends as ``placetune tune`` does: its final pick
(``placetune_best``) and verdict go with the study's Optuna study (placetune/tuning/run_end.py).

Real evaluators on the simulated Jetson and real Optuna; nothing is mocked."""

from __future__ import annotations

import sqlite3

import optuna

import placetune as pt
from placetune.tuning.final_pick import KEY, study_best
from placetune.tuning.optuna_study import OptunaStudy
from search import Budget, get_agent


def _ev(db: str) -> pt.Evaluator:
    return pt.Evaluator("resnet18", "orin-agx", mode="pipeline", objective="throughput", frames_in_flight=4,
                        noise=0.02, store=db, study="api")


def test_an_api_run_records_its_final_pick_and_verdict_with_the_attached_optuna_study(tmp_path):
    db = f"sqlite:///{tmp_path / 'api.db'}"
    ev = _ev(db)
    OptunaStudy(ev).attach()
    result = get_agent("guided", seed=0).run(ev, Budget(evaluations=40))
    assert result.final_rule  # under noise the guided agent re-ranks its top candidates at the end
    attrs = optuna.load_study(study_name="api", storage=db).user_attrs
    assert attrs[KEY]["rule"] == result.final_rule
    assert attrs[KEY]["measurement_id"] == result.best_measurement.extra["_id"]
    pick = study_best(ev.store, "api", ev.objective)
    assert pick is not None and pick.recorded and pick.record.id == attrs[KEY]["measurement_id"]
    trials = ev.store.study("api").n_requests
    assert attrs["verdict"].endswith(f"by guided in {trials} trials (simulated figures)")
    assert attrs["verdict"].startswith(("a plan ", "no plan better than "))
    ev.close()


def test_an_api_run_without_an_optuna_study_writes_none(tmp_path):
    path = tmp_path / "plain.db"
    ev = _ev(f"sqlite:///{path}")
    get_agent("guided", seed=0).run(ev, Budget(evaluations=12))
    ev.close()
    with sqlite3.connect(path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "studies" not in tables and "study_user_attributes" not in tables  # no Optuna tables appeared
