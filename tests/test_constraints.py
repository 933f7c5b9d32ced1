"""Constraints (``latency<=2.0``...) and the ``gpu_time`` objective."""

from __future__ import annotations

import json
import math

import pytest

from placetune import ConfigError
from placetune.cli.main import main
from placetune.placement.placement import Placement
from placetune.tuning.constraints import parse_constraint, parse_constraints
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.objectives import get_objective
from placetune.tuning.studyfile import load_study_file
from search import Budget, get_agent

#: GoogLeNet, simulated AGX Orin, engine mode, INT8: all-DLA0 spends the least energy (9.7 mJ)
#: but takes 0.96 ms; all-GPU takes 0.65 ms for 24.0 mJ. A 0.8 ms bound rules the first out.
BOUND = 0.8


def _ev(**kw):
    return Evaluator("googlenet", "orin-agx", mode="engine", precision="int8", objective="energy", **kw)


# ------------------------------------------------------------------ parsing
def test_parse_constraints():
    c = parse_constraint("latency<=2.0")
    assert (c.metric, c.op, c.bound, c.text, c.unit) == ("latency", "<=", 2.0, "latency<=2", "ms")
    assert parse_constraint(" throughput >= 500 ").text == "throughput>=500"
    assert parse_constraint("energy<=40").unit == "mJ"
    assert parse_constraint("gpu_time<=1.5").unit == "ms"
    assert len(parse_constraints(["latency<=2", "latency<=2.0"])) == 1


@pytest.mark.parametrize("bad, says", [
    ("latency<2", "METRIC<=BOUND"), ("speed<=3", "unknown metric 'speed'"), ("latency<=abc", "METRIC<=BOUND"),
    ("latency<=1e999", "must be a finite number"), ("", "METRIC<=BOUND"),
])
def test_bad_constraint_is_one_line_naming_what_is_allowed(bad, says):
    with pytest.raises(ConfigError) as exc:
        parse_constraint(bad)
    msg = str(exc.value)
    assert says in msg and "\n" not in msg and msg.startswith(f"constraint {bad!r}")
    if "finite" not in says:
        assert "metrics are latency, throughput, energy, gpu_time" in msg


def test_cli_bad_constraint_exits_with_one_line(tmp_path, capsys):
    code = main(["tune", "--model", "seed-block", "--trials", "2", "--constraint", "latency=2",
                 "--storage", f"sqlite:///{tmp_path / 'pt.db'}"])
    err = capsys.readouterr().err.strip()
    assert code == ConfigError.exit_code and len(err.splitlines()) == 1
    assert "constraint 'latency=2'" in err and "Traceback" not in err
    assert not (tmp_path / "pt.db").exists() or "seed-block" not in (tmp_path / "pt.db").read_bytes().decode("latin1")


def test_study_file_constraints(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[study]\nmodel = "seed-block"\nconstraints = ["latency<=2.0", "throughput >= 500"]\n')
    assert load_study_file(f).constraints == ["latency<=2", "throughput>=500"]
    f.write_text('[study]\nmodel = "seed-block"\nconstraints = ["watts<=3"]\n')
    with pytest.raises(ConfigError, match="unknown metric 'watts'"):
        load_study_file(f)
    f.write_text('[study]\nmodel = "seed-block"\nconstraints = [3]\n')
    with pytest.raises(ConfigError, match="constraints must be a list of strings"):
        load_study_file(f)


# ------------------------------------------------------------------ gpu_time
def test_gpu_time_objective_is_the_gpu_busy_time_per_frame():
    obj = get_objective("gpu_time")
    assert obj.directions == ("minimize",) and obj.units == ("ms",) and obj.metric_names == ("gpu_time_ms",)
    ev = Evaluator("googlenet", "orin-agx", mode="engine", precision="int8", objective="gpu_time")
    gpu = ev.evaluate(Placement.all_gpu(ev.model))
    dla = ev.evaluate(Placement.all_dla(ev.model, 0))
    assert gpu.objective("gpu_time") == pytest.approx(gpu.extra["busy_ms"]["GPU"])
    assert gpu.objective("gpu_time") == pytest.approx(gpu.latency_ms["median"])  # one engine on the GPU
    assert dla.objective("gpu_time") < 0.1 * gpu.objective("gpu_time")  # only the fallback layers
    best = ev.best()
    assert best is not None and best[1].objective("gpu_time") == pytest.approx(dla.objective("gpu_time"))


# ------------------------------------------------------------------ ranking
def test_loss_ranks_feasible_before_infeasible():
    ev = _ev(constraints=[f"latency<={BOUND}"])
    gpu = ev.evaluate(Placement.all_gpu(ev.model))
    dla = ev.evaluate(Placement.all_dla(ev.model, 0))
    obj = ev.objective
    assert dla.energy_mj < gpu.energy_mj  # unconstrained, all-DLA0 wins
    assert obj.feasible(gpu) and not obj.feasible(dla)
    assert obj.loss(gpu) < obj.loss(dla) < math.inf  # penalised, not a failure
    assert obj.violations(dla)[0] == pytest.approx(dla.latency_ms["median"] - BOUND)
    assert ev.best()[1] is gpu or ev.best()[1].latency_ms["median"] <= BOUND


@pytest.mark.parametrize("agent, kw, budget", [
    ("random", {}, 25), ("local", {}, 25), ("guided", {}, 20), ("optuna", {"n_startup_trials": 5}, 25),
    ("reinforce", {}, 25),
])
def test_every_agent_returns_the_best_feasible(agent, kw, budget):
    feasible = _best_feasible(agent, kw, budget)
    if (agent, kw, budget) == ("guided", {}, 20):  # the guided run of the test below: asserted here, run once
        assert feasible, agent


def test_agents_that_start_from_baselines_find_a_feasible_plan():
    """local, guided and optuna start from the baselines (all-GPU is feasible); guided's run with these
    arguments is the one of test_every_agent_returns_the_best_feasible[guided-kw2-20], which asserts it."""
    for agent in ("local", "optuna"):
        assert _best_feasible(agent, {}, 20), agent


def _best_feasible(agent, kw, budget):
    free = get_agent(agent, seed=1, **kw).run(_ev(), Budget(evaluations=budget))
    assert free.best_measurement.latency_ms["median"] > BOUND  # the unconstrained best violates the bound
    ev = _ev(constraints=[f"latency<={BOUND}"])
    r = get_agent(agent, seed=1, **kw).run(ev, Budget(evaluations=budget))
    m = r.best_measurement
    measured = [rec.measurement for rec in ev.store.measurements(ev.study_name, status="ok")]
    feasible = [x for x in measured if x.latency_ms["median"] <= BOUND]
    if feasible:  # the best is the feasible one of least energy, though others spent less
        assert m.latency_ms["median"] <= BOUND
        assert m.energy_mj == pytest.approx(min(x.energy_mj for x in feasible))
        assert min(x.energy_mj for x in measured) < m.energy_mj
    else:  # nothing feasible measured: the one that misses the bound by least, never a failure
        assert m.latency_ms["median"] == pytest.approx(min(x.latency_ms["median"] for x in measured))
    assert ev.best()[1].energy_mj == pytest.approx(m.energy_mj)
    return bool(feasible)


def test_optuna_trials_carry_the_constraint_values():
    import optuna
    from optuna.samplers._base import _CONSTRAINTS_KEY

    from placetune.tuning.optuna_study import OptunaStudy, storage_for

    ev = _ev(constraints=[f"latency<={BOUND}"])
    st = OptunaStudy(ev).attach()
    gpu = ev.evaluate(Placement.all_gpu(ev.model))
    ev.evaluate(Placement.all_dla(ev.model, 0))
    trials = st.study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert [t.system_attrs[_CONSTRAINTS_KEY][0] <= 0 for t in trials] == [True, False]
    assert [t.user_attrs["feasible"] for t in trials] == [True, False]
    best = st.study.best_trial  # Optuna itself ranks feasible trials only
    assert best.values[0] == pytest.approx(gpu.energy_mj)
    # the optuna agent's own trials carry them too, where Optuna's samplers read them
    ev2 = _ev(constraints=[f"latency<={BOUND}"])
    r = get_agent("optuna", seed=0, n_startup_trials=3).run(ev2, Budget(evaluations=8))
    study = optuna.load_study(study_name=r.extra["study_name"], storage=storage_for(ev2.store))
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) >= 8
    by_id = {rec.id: rec.measurement for rec in ev2.store.measurements(ev2.study_name)}
    for t in done:
        (value,) = t.constraints.values()
        assert value == pytest.approx(t.user_attrs["constraints"][0])
        assert value == pytest.approx(by_id[t.user_attrs["measurement_id"]].latency_ms["median"] - BOUND)


# ------------------------------------------------------------------ tune + export
def test_constrained_tune_exports_a_plan_that_meets_the_bound(tmp_path, capsys):
    db = f"sqlite:///{tmp_path / 'pt.db'}"
    common = ["tune", "--model", "googlenet", "--mode", "engine", "--precision", "int8", "--objective", "energy",
              "--trials", "12", "--agent", "guided", "--storage", db]
    assert main([*common, "--export", str(tmp_path / "free.json")]) == 0
    assert main([*common, "--constraint", f"latency<={BOUND}", "--export", str(tmp_path / "bound.json")]) == 0
    out = capsys.readouterr().out
    assert f"constraint latency<={BOUND:g} ms: best=" in out and "holds=yes" in out
    free = json.loads((tmp_path / "free.json").read_text())
    bound = json.loads((tmp_path / "bound.json").read_text())
    assert free["measured"]["latency_ms"]["median"] > BOUND
    assert bound["measured"]["latency_ms"]["median"] <= BOUND
    assert bound["measured"]["constraints"] == [
        {"constraint": "latency<=0.8", "metric": "latency", "op": "<=", "bound": BOUND, "unit": "ms",
         "value": pytest.approx(bound["measured"]["latency_ms"]["median"]), "holds": True}]
    assert any("constraint latency<=0.8 ms: holds" in n for n in bound["notes"])
    assert bound["measured"]["objective"]["units"] == ["mJ"]
    assert bound["source"]["study"] != free["source"]["study"]  # a constrained study is a study of its own


def test_gpu_time_study_exports_and_ranks_in_the_store(tmp_path):
    from placetune import Store
    from placetune.plan.export import export_plan

    store = Store(f"sqlite:///{tmp_path / 'pt.db'}")
    ev = Evaluator("googlenet", "orin-agx", mode="engine", precision="int8", objective="gpu_time", store=store)
    ev.baseline()
    dla = ev.evaluate(Placement.all_dla(ev.model, 0))
    assert store.best(ev.study_name).measurement.objective("gpu_time") == pytest.approx(dla.objective("gpu_time"))
    plan = export_plan(store, ev.study_name)
    assert plan.measured["gpu_time_ms"] == pytest.approx(dla.objective("gpu_time"))
    assert plan.objective == "gpu_time"


def test_export_and_studies_of_a_constrained_study_rank_feasible_first(tmp_path, capsys):
    """`placetune export --study` of a constrained study exported its unconstrained best (all-DLA0,
    0.96 ms against a 0.8 ms bound) and `studies` showed it as the best: the study now records its
    constraints, and every reader ranks feasible measurements first."""
    db = f"sqlite:///{tmp_path / 'pt.db'}"
    assert main(["tune", "--model", "googlenet", "--mode", "engine", "--precision", "int8", "--objective", "energy",
                 "--trials", "12", "--agent", "guided", "--storage", db, "--study", "bound",
                 "--constraint", f"latency<={BOUND}", "--export", str(tmp_path / "tuned.json")]) == 0
    capsys.readouterr()
    assert main(["export", "--study", "bound", "--storage", db, "-o", str(tmp_path / "exported.json")]) == 0
    assert "constraint latency<=0.8 ms: holds" in capsys.readouterr().out
    tuned = json.loads((tmp_path / "tuned.json").read_text())
    exported = json.loads((tmp_path / "exported.json").read_text())
    assert exported["measured"]["latency_ms"]["median"] <= BOUND
    assert exported["source"]["measurement_id"] == tuned["source"]["measurement_id"]
    assert exported["measured"]["constraints"][0]["holds"] is True
    assert main(["studies", "--storage", db, "--json"]) == 0
    (doc,) = json.loads(capsys.readouterr().out)["studies"]
    assert doc["constraints"] == [f"latency<={BOUND:g}"]
    assert doc["best_measurement_id"] == tuned["source"]["measurement_id"]
    # the constraints are fixed like the study's settings: another bound is another study
    assert main(["tune", "--model", "googlenet", "--mode", "engine", "--precision", "int8", "--objective", "energy",
                 "--trials", "12", "--storage", db, "--study", "bound", "--constraint", "latency<=0.7"]) == ConfigError.exit_code
    assert "exists with constraints=[\"latency<=0.8\"]; this run has constraints=[\"latency<=0.7\"]" in capsys.readouterr().err
