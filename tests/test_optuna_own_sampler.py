"""The ``optuna`` agent as an Optuna user drives it: a sampler of one's own (an Optuna sampler object,
a ``BaseSampler`` subclass), a sampler whose dependency is missing, and a run's result against the
study it ran in (resumed, or warm-started from another study of the same database)."""

from __future__ import annotations

import importlib.util
import warnings

import optuna
import pytest

from placetune import ConfigError, Evaluator
from search import Budget, get_agent

optuna.logging.set_verbosity(optuna.logging.WARNING)

TASK = dict(mode="pipeline", objective="throughput", frames_in_flight=4)


def _ev(url: str, study: str) -> Evaluator:
    return Evaluator("resnet18", "orin-agx", store=url, study=study, **TASK)


class Cycle(optuna.samplers.BaseSampler):
    """Trial n puts parameter k on allowed device (n + k) mod choices (a sampler written against Optuna's
    documented API: no two trials alike for a while, every placement a DLA-heavy one)."""

    def __init__(self) -> None:
        self.calls = 0

    def infer_relative_search_space(self, study, trial):
        return {}

    def sample_relative(self, study, trial, search_space):
        return {}

    def sample_independent(self, study, trial, param_name, param_distribution):
        self.calls += 1
        k = sorted(trial.distributions).index(param_name) if param_name in trial.distributions else len(trial.params)
        return param_distribution.choices[(trial.number + k + 1) % len(param_distribution.choices)]


def test_a_sampler_object_of_ones_own_is_used_as_it_is(tmp_path):
    url = f"sqlite:///{tmp_path / 'own.db'}"
    sampler = Cycle()
    agent = get_agent("optuna", sampler=sampler)
    r = agent.run(_ev(url, "own"), Budget(evaluations=5))
    assert sampler.calls > 0
    assert r.extra["sampler"] == "Cycle"
    assert agent.study(_ev(url, "own")).sampler is sampler
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        qmc = get_agent("optuna", sampler=optuna.samplers.QMCSampler(seed=0)).run(_ev(url, "qmc"), Budget(6))
    assert qmc.evaluations == 6 and qmc.extra["sampler"] == "QMCSampler"


def test_an_unknown_sampler_is_one_line_naming_the_choices():
    with pytest.raises(ConfigError, match="tpe, nsga2, random, gp or an optuna.samplers.BaseSampler") as exc:
        get_agent("optuna", sampler="cmaes")
    assert "\n" not in str(exc.value)


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None, reason="torch is installed here")
def test_gp_without_torch_is_refused_before_any_trial():
    with pytest.raises(ConfigError, match="sampler 'gp' .* needs torch") as exc:
        get_agent("optuna", sampler="gp")
    assert "\n" not in str(exc.value)


def test_a_resumed_run_reports_the_studys_best(tmp_path):
    url = f"sqlite:///{tmp_path / 'resume.db'}"
    get_agent("optuna", seed=0, sampler="random", warm_start=False).run(_ev(url, "s"), Budget(evaluations=12))
    again = get_agent("optuna", seed=1, sampler="random", warm_start=False).run(_ev(url, "s"), Budget(3))
    best = optuna.load_study(study_name="s", storage=url).best_value
    assert again.best_value == pytest.approx(best)


def test_a_warm_started_run_reports_no_plan_worse_than_all_gpu(tmp_path):
    """Warm start imports another study's trials, all-GPU among them; the run still measures it for its
    own study (the store's answer, no build), so its result and its export never fall below it."""
    url = f"sqlite:///{tmp_path / 'warm.db'}"
    first = _ev(url, "first")
    all_gpu = first.value(first.baseline())
    get_agent("optuna", seed=0, sampler="random").run(first, Budget(evaluations=10))
    ev = _ev(url, "second")
    r = get_agent("optuna", seed=0, sampler="random").run(ev, Budget(evaluations=5))
    assert r.extra["imported"] > 0
    assert r.best_value >= all_gpu
    assert max(rec.measurement.throughput_fps or 0 for rec in ev.store.measurements("second")) >= all_gpu


def test_an_attached_optuna_study_gets_one_trial_per_evaluation_of_the_optuna_agent(tmp_path):
    """README: ``OptunaStudy(ev).attach()`` puts any agent's study in Optuna; with the ``optuna`` agent, which
    writes its trials itself, every evaluation was two trials."""
    from placetune.tuning.optuna_study import OptunaStudy

    url = f"sqlite:///{tmp_path / 'attached.db'}"
    ev = _ev(url, "att")
    OptunaStudy(ev).attach()
    r = get_agent("optuna", seed=0, sampler="random", warm_start=False).run(ev, Budget(evaluations=8))
    ev.baseline()  # measured by the agent already: a request answered by the store, one more trial
    ev.close()
    trials = optuna.load_study(study_name="att", storage=url).trials
    fresh = [t for t in trials if not t.user_attrs.get("repeat")]
    assert len(fresh) == r.evaluations + 1, [(t.number, t.user_attrs.get("agent")) for t in trials]
