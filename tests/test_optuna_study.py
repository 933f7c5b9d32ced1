"""Every placetune study is an Optuna study of the same name in the same database."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys

import pytest

from placetune.cli.main import main
from placetune.tuning.evaluator import Evaluator

optuna = pytest.importorskip("optuna")

from optuna.trial import TrialState  # noqa: E402


def _load(db, name):
    storage = optuna.storages.RDBStorage(f"sqlite:///{db}")
    return optuna.load_study(study_name=name, storage=storage)


@pytest.mark.parametrize("agent", ["local", "random", "optuna"])
def test_tune_writes_an_optuna_study_of_the_same_name(tmp_path, monkeypatch, capsys, agent):
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--trials", "12", "--agent", agent, "--study", "s"]) == 0
    out = capsys.readouterr().out
    st = _load(tmp_path / "placetune.db", "s")
    assert [s.study_name for s in optuna.get_all_study_summaries(st._storage)] == ["s"]
    assert st.metric_names == ["throughput_fps"]
    assert st.directions == [optuna.study.StudyDirection.MAXIMIZE]
    attrs = st.user_attrs
    assert attrs["model"] == "resnet50" and attrs["platform"] == "orin-agx" and attrs["simulated"] is True
    assert {"model_hash", "mode", "precision", "backend", "tensorrt_version"} <= set(attrs)
    trials = st.get_trials(deepcopy=False)
    assert len(trials) >= 12
    assert not [t for t in trials if t.state in (TrialState.FAIL, TrialState.RUNNING)]
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    for t in done:
        assert {"status", "simulated", "cache_hit", "measurement_id", "realised_differs"} <= set(t.user_attrs)
        assert t.user_attrs["simulated"] is True
        assert all(v in ("GPU", "DLA0", "DLA1") for v in t.params.values())
    best = max(t.value for t in done)
    assert f"{best:,.1f}" in out  # the summary's best is the Optuna study's best
    # Optuna's own per-trial INFO lines stay off the console without -v
    assert "Trial 3 finished" not in out and "Trial 3 finished" not in capsys.readouterr().err


def test_failed_placements_are_pruned_trials_with_a_reason(tmp_path):
    from placetune.tuning.optuna_study import OptunaStudy
    from search import Budget, get_agent
    from tests.test_search import random_graph  # noqa: F401 - same generator as the search tests

    model = random_graph(0, 40, chain=True)
    ev = Evaluator(model, "orin-agx", mode="engine", precision="fp16", gpu_fallback=False,
                   store=str(tmp_path / "p.db"), study="inf")
    st = OptunaStudy(ev, "layer").attach()
    space = ev.space("layer")
    alternating = [(i % 2) if space.mask[i, i % 2] else 0 for i in range(space.n_units)]
    m = ev.evaluate(space.to_placement(alternating))
    assert not m.ok
    get_agent("random", seed=0, granularity="layer").run(ev, Budget(evaluations=3))
    trials = _load(tmp_path / "p.db", "inf").trials
    assert len(trials) == 4 and st.study.study_name == "inf"
    pruned = [t for t in trials if t.state == TrialState.PRUNED]
    assert pruned and all(t.user_attrs["status"] == m.status and t.user_attrs["reason"] for t in pruned)


def test_an_existing_database_gets_its_optuna_study_backfilled(tmp_path):
    """A database written before placetune kept Optuna studies: the next open adds one."""
    db = tmp_path / "old.db"
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=str(db), study="old")
    from search import Budget, get_agent

    get_agent("random", seed=0).run(ev, Budget(evaluations=7))
    n = ev.store.study("old").n_requests
    ev.close()
    with sqlite3.connect(db) as con:
        assert not con.execute("SELECT name FROM sqlite_master WHERE name='studies'").fetchall()
    from placetune.tuning.optuna_study import OptunaStudy

    ev2 = Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=str(db), study="old")
    OptunaStudy(ev2)
    st = _load(db, "old")
    assert len(st.trials) == n == 7
    assert st.metric_names == ["throughput_fps"]
    OptunaStudy(ev2)  # idempotent: opening again adds nothing
    assert len(_load(db, "old").trials) == n


def test_sigint_with_the_optuna_agent_leaves_no_traceback_and_no_fail_trial(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--model", "resnet50", "--mode", "engine",
           "--granularity", "layer", "--agent", "optuna", "--trials", "400", "--study", "sig"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = 0
    for line in proc.stdout:
        if line.startswith("trial="):
            seen += 1
            if seen == 15:
                proc.send_signal(signal.SIGINT)
                break
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "StopRequested" not in err, err
    assert "[I " not in err  # no Optuna INFO line without -v
    st = _load(tmp_path / "placetune.db", "sig")
    states = [t.state for t in st.get_trials(deepcopy=False)]
    assert TrialState.FAIL not in states and TrialState.RUNNING not in states


def test_the_study_attributes_optuna_dashboard_shows_are_sentences_not_json(tmp_path, monkeypatch, capsys):
    """The dashboard's Study User Attributes showed ``convergence`` as a JSON object of raw floats
    (``"best_then": 3399.3499558043504, "device_s_after": 1112.9597221678605, ...``), cut at the card's
    edge: it now holds the sentence the run printed, and the verdict is beside it; the figures are kept as
    a study system attribute for programs."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--trials", "15", "--study", "s"]) == 0
    out = capsys.readouterr().out
    st = _load(tmp_path / "placetune.db", "s")
    attrs = st.user_attrs
    assert all(isinstance(v, (str, int, float, bool)) for v in attrs.values()), attrs
    conv = [x for x in out.splitlines() if x.startswith(("converged at", "not converged", "not judged"))][-1]
    verdict = next(x for x in out.splitlines() if x.startswith("verdict: "))
    assert attrs["convergence"] == conv and attrs["verdict"] == verdict[len("verdict: "):]
    figures = st._storage.get_study_system_attrs(st._study_id)["placetune:convergence"]
    assert figures["trials"] == 15 and figures["direction"] == "maximize"


def test_a_trial_whose_placement_was_not_read_says_so_instead_of_claiming_it_ran_as_asked():
    """An Optuna trial of a build whose realised placement could not be read is told apart from one
    that ran as asked: ``placement_known`` False and no ``realised_differs`` (which would claim a match)."""
    from placetune.measurement import Measurement
    from placetune.tuning.optuna_study import trial_attrs

    asked = {"a": "DLA0", "b": "GPU"}
    unread = Measurement(status="ok", latency_samples_ms=[1.0], requested=dict(asked),
                         extra={"placement_known": False, "placement_unknown": "neither source says"})
    attrs = trial_attrs(unread)
    assert attrs["placement_known"] is False
    assert "realised_differs" not in attrs
    assert attrs["placement_unknown"] == "neither source says"
    ran_as_asked = Measurement(status="ok", latency_samples_ms=[1.0], requested=dict(asked),
                               realized=dict(asked))
    attrs = trial_attrs(ran_as_asked)
    assert attrs["placement_known"] is True and attrs["realised_differs"] is False
    fell_back = Measurement(status="ok", latency_samples_ms=[1.0], requested=dict(asked),
                            realized={"a": "GPU", "b": "GPU"})
    assert trial_attrs(fell_back)["realised_differs"] is True
