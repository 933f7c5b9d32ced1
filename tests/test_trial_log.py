"""Evaluations on their way to the store and the Optuna study: at once, or in batches (simulated backends)."""

from __future__ import annotations

import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from placetune import Placement, Store, StoreError
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.tuning.evaluator import Evaluator

optuna = pytest.importorskip("optuna")

from optuna.trial import TrialState  # noqa: E402

from placetune.tuning.optuna_study import OptunaStudy  # noqa: E402
from tests.test_fleet import pg_url  # noqa: E402,F401 - a fresh PostgreSQL database per test

ROOT = Path(__file__).resolve().parents[1]


def _placements(ev: Evaluator, n: int) -> list[Placement]:
    """``n`` placements of distinct realisations (first layers moved to DLA0 one by one)."""
    names = ev.model.names
    return [Placement(ev.model, {x: ("DLA0" if j < i else "GPU") for j, x in enumerate(names)}) for i in range(n)]


def _trace(store: Store) -> list[str]:
    """Every statement SQLite runs from now on (the pool's connections opened anew)."""
    from sqlalchemy import event

    store.engine.dispose()
    seen: list[str] = []

    def trace(dbapi_conn, _record):
        dbapi_conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.split())))

    event.listen(store.engine, "connect", trace)
    return seen


def _rows(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as con:
        return con.execute(sql).fetchone()[0]


def test_a_batch_is_one_transaction_with_its_optuna_trials_and_callbacks_see_it_stored(tmp_path):
    db = tmp_path / "b.db"
    ev = Evaluator("resnet18", "orin-agx", mode="pipeline", precision="int8", objective="throughput",
                   store=f"sqlite:///{db}", study="b")
    OptunaStudy(ev, "layer").attach()
    ev.write_in_batches(trials=4, seconds=3600)
    seen = _trace(ev.store)
    told: list[tuple[int, int]] = []  # (measurement id, stored requests) when each callback ran
    ev.add_callback(lambda p, m: told.append((m.extra["_id"], _rows(db, "SELECT COUNT(*) FROM pt_requests"))))
    answers = [ev.evaluate(p) for p in _placements(ev, 3)]
    assert not told and _rows(db, "SELECT COUNT(*) FROM pt_requests") == 0  # waiting: nothing written yet
    assert "_id" not in answers[0].extra
    answers.append(ev.evaluate(_placements(ev, 1)[0]))  # the 4th: a cache hit of a waiting measurement
    answers += [ev.evaluate(p) for p in _placements(ev, 7)[3:]]  # the 8th: a second batch
    commits = [s for s in seen if s in ("COMMIT", "BEGIN IMMEDIATE")]
    assert commits == ["BEGIN IMMEDIATE", "COMMIT"] * 2
    # the parameters' distributions are read once (add_trial read one per parameter per trial)
    assert sum("FROM trial_params" in s for s in seen) <= len(ev.space("layer").units)
    assert [i for i, _ in told] == [m.extra["_id"] for m in answers]
    assert told[3][0] == told[0][0] and told[0][1] == 4 and told[-1][1] == 8  # stored before the callbacks
    st = optuna.load_study(study_name="b", storage=f"sqlite:///{db}")
    trials = st.get_trials(deepcopy=False)
    assert [t.number for t in trials] == list(range(8)) and [t.user_attrs["measurement_id"] for t in trials] == \
        [m.extra["_id"] for m in answers]
    assert [t.value for t in trials] == [m.throughput_fps for m in answers]
    assert trials[3].user_attrs["cache_hit"] is True
    ev.close()


def test_trials_carry_their_start_and_end_times(tmp_path, monkeypatch):
    """The dashboard's timeline was empty: every trial started and completed at the moment it was added."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30: Optuna 5 stores UTC, earlier versions local time
    time.tzset()
    try:
        measure = SimulatedJetson.measure

        def slow(self, *a, **kw):  # a real build takes minutes; 50 ms is enough to see
            time.sleep(0.05)
            return measure(self, *a, **kw)

        monkeypatch.setattr(SimulatedJetson, "measure", slow)
        db = tmp_path / "t.db"
        ev = Evaluator("resnet18", "orin-agx", mode="pipeline", precision="int8", objective="throughput",
                       store=f"sqlite:///{db}", study="t")
        OptunaStudy(ev, "fusion").attach()
        before = datetime.now()
        for p in _placements(ev, 3):
            ev.evaluate(p)
        after = datetime.now()
        trials = optuna.load_study(study_name="t", storage=f"sqlite:///{db}").get_trials(deepcopy=False)
        requests = ev.store.requests("t")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    assert len(trials) == 3
    for t, req in zip(trials, requests):
        assert before <= t.datetime_start < t.datetime_complete <= after
        assert t.duration >= timedelta(seconds=0.05)  # the measurement's own time, not a zero-length trial
        stored = req.created_at.replace(tzinfo=timezone.utc) if req.created_at.tzinfo is None else req.created_at
        local = t.datetime_complete.replace(tzinfo=timezone(timedelta(hours=5, minutes=30)))
        assert abs(stored - local) < timedelta(seconds=1)  # the same instant as the store's row


def test_trials_carry_every_measured_figure_not_only_the_objective(tmp_path):
    db = tmp_path / "m.db"
    ev = Evaluator("resnet18", "orin-agx", mode="pipeline", precision="int8", objective="throughput",
                   store=f"sqlite:///{db}", study="m")
    OptunaStudy(ev, "fusion").attach()
    ms = [ev.evaluate(p) for p in _placements(ev, 3)]
    trials = optuna.load_study(study_name="m", storage=f"sqlite:///{db}").get_trials(deepcopy=False)
    for t, m in zip(trials, ms):
        u = t.user_attrs
        assert u["latency_ms"] == m.latency_ms["median"] and u["latency_p99_ms"] == m.latency_ms["p99"]
        assert u["throughput_fps"] == m.throughput_fps == t.value
        assert u["energy_mj"] == m.energy_mj and u["power_w"] == m.power_w and u["build_s"] == m.build_seconds
        assert {k: v for k, v in u.items() if k.endswith("_loadables")} == \
            {f"{c.lower()}_loadables": n for c, n in m.dla_loadables.items()}
    assert trials[2].user_attrs["dla0_loadables"] >= 1


def _frozen_trials():
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    dists = {"a": CategoricalDistribution(["GPU", "DLA0", "DLA1"]), "x": FloatDistribution(0.0, 10.0),
             "n": IntDistribution(1, 64, log=True)}
    start = datetime(2026, 3, 29, 1, 30, 0, 123456)  # near a daylight-saving change
    out = []
    for i, (state, values) in enumerate([(TrialState.COMPLETE, [1.5, -2.0]), (TrialState.PRUNED, None),
                                         (TrialState.COMPLETE, [float("inf"), float("-inf")]),
                                         (TrialState.FAIL, None)]):
        t = optuna.trial.create_trial(
            state=state, values=values, params={"a": ("GPU", "DLA0", "DLA1")[i % 3], "x": 0.25 * i, "n": 2 ** i},
            distributions=dists, user_attrs={"status": "ok", "nested": {"k": [1, 2.5, None]}, "flag": i % 2 == 0,
                                             "text": "ü \"quoted\""},
            system_attrs={"constraints": [0.1 * i, -1.0]} if values else {})
        t.datetime_start = start + timedelta(seconds=i)
        t.datetime_complete = start + timedelta(seconds=i, milliseconds=250)
        out.append(t)
    return out


def _compare_with_add_trials(url: str) -> None:
    from placetune.tuning.optuna_rows import TrialRows, supported

    assert supported()
    directions = ["minimize", "maximize"]
    ref = optuna.create_study(study_name="ref", storage=url, directions=directions)
    ref.add_trials(_frozen_trials())
    ours = optuna.create_study(study_name="ours", storage=url, directions=directions)
    ours.add_trials(_frozen_trials()[:1])  # numbering continues after trials already there
    with Store(url) as store:
        txn = store._sqlite_txn("test", "BEGIN IMMEDIATE") if store.dialect == "sqlite" else \
            store.transaction("test", write=True)  # the driver connection on SQLite, SQLAlchemy's on a server
        with txn as conn:
            ids = TrialRows(ours._study_id).write(conn, _frozen_trials())
    assert None not in ids and len(set(ids)) == 4
    got = optuna.load_study(study_name="ours", storage=url).get_trials()[1:]
    want = optuna.load_study(study_name="ref", storage=url).get_trials()
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert g.number == w.number + 1
        for field in ("state", "values", "params", "distributions", "user_attrs", "system_attrs",
                      "intermediate_values", "datetime_start", "datetime_complete"):
            assert getattr(g, field) == getattr(w, field), field


@pytest.mark.parametrize("tz", ["UTC", "Europe/Berlin"])
def test_rows_written_straight_into_optunas_tables_are_those_add_trials_writes(tmp_path, monkeypatch, tz):
    monkeypatch.setenv("TZ", tz)
    time.tzset()
    try:
        _compare_with_add_trials(f"sqlite:///{tmp_path / 'o.db'}")
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


@pytest.mark.postgres
def test_rows_written_into_optunas_tables_on_postgresql_are_those_add_trials_writes(pg_url, monkeypatch):
    monkeypatch.setenv("TZ", "America/New_York")
    time.tzset()
    try:
        _compare_with_add_trials(pg_url)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_a_parameter_stored_with_other_choices_skips_the_trial_with_a_warning(tmp_path, caplog):
    from optuna.distributions import CategoricalDistribution

    from placetune.tuning.optuna_rows import TrialRows

    url = f"sqlite:///{tmp_path / 'c.db'}"
    st = optuna.create_study(study_name="c", storage=url)
    st.add_trial(optuna.trial.create_trial(value=1.0, params={"a": "GPU"},
                                           distributions={"a": CategoricalDistribution(["GPU", "DLA0"])}))
    other = optuna.trial.create_trial(value=2.0, params={"a": "GPU"},
                                      distributions={"a": CategoricalDistribution(["GPU", "DLA1"])})
    with Store(url) as store, store._sqlite_txn("test", "BEGIN IMMEDIATE") as conn:
        assert TrialRows(st._study_id).write(conn, [other]) == [None]
    assert "not added to the Optuna study" in caplog.text
    assert len(optuna.load_study(study_name="c", storage=url).trials) == 1


def test_a_batch_that_fails_to_write_keeps_waiting_and_is_written_by_the_next_flush(tmp_path):
    db = tmp_path / "f.db"
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", store=f"sqlite:///{db}", study="f")
    ev.write_in_batches(trials=100, seconds=3600)
    told = []
    ev.add_callback(lambda p, m: told.append(m.extra["_id"]))
    for p in _placements(ev, 3):
        ev.evaluate(p)
    real = ev.store._record_rows
    ev.store._record_rows = lambda *a, **kw: (_ for _ in ()).throw(sqlite3.OperationalError("disk I/O error"))
    with pytest.raises(StoreError, match="disk I/O error"):
        ev.flush()
    assert not told and len(ev.trial_log.pending) == 3 and _rows(db, "SELECT COUNT(*) FROM pt_requests") == 0
    ev.store._record_rows = real
    ev.flush()
    assert len(told) == 3 and len(set(told)) == 3 and _rows(db, "SELECT COUNT(*) FROM pt_measurements") == 3
    ev.close()


def test_a_real_jetsons_measurement_is_stored_before_the_next_build_starts(tmp_path, monkeypatch, capsys):
    """placetune tune batches a simulated backend's evaluations only: a hardware build (minutes) is
    never waiting in memory when the next one starts."""
    from placetune.backends import registry
    from placetune.cli.main import main

    db = tmp_path / "h.db"
    built: list[int] = []

    class HardwareDouble(SimulatedJetson):  # a real backend's contract: simulated=False, no batching
        name = "double"
        simulated = False

        def measure(self, *a, **kw):
            built.append(_rows(db, "SELECT COUNT(*) FROM pt_measurements"))  # stored before this build
            m = super().measure(*a, **kw)
            m.simulated, m.backend = False, "double-1"  # (a simulated figure relabelled would be refused)
            return m

        def fingerprint(self, *a, **kw):
            return dict(super().fingerprint(*a, **kw), backend="double")

    monkeypatch.setattr(registry, "get_backend", lambda name, **kw: HardwareDouble())
    assert main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "12", "--storage",
                 f"sqlite:///{db}", "--study", "h", "--export", str(tmp_path / "h.json")]) == 0
    assert "SIMULATED" not in capsys.readouterr().out
    assert len(built) >= 6 and built == list(range(len(built)))


def test_a_fleet_worker_writes_every_evaluation_before_it_returns(tmp_path):
    from placetune.tuning.fleet_claims import Claims

    db = tmp_path / "w.db"
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", store=f"sqlite:///{db}", study="w")
    ev.claims = Claims(ev.store, "worker-1")  # what Fleet.attach does
    ev.write_in_batches()
    for i, p in enumerate(_placements(ev, 3)):
        m = ev.evaluate(p)
        assert m.extra["_id"] and _rows(db, "SELECT COUNT(*) FROM pt_requests") == i + 1
    ev.claims.close()
    ev.close()


def test_an_evaluator_nobody_closed_writes_its_waiting_evaluations_at_exit(tmp_path):
    db = tmp_path / "x.db"
    code = ("from placetune import Evaluator, Placement\n"
            f"ev = Evaluator('seed-block', 'orin-agx', store={str(db)!r}, study='x')\n"
            "ev.write_in_batches(trials=100, seconds=3600)\n"
            "for d in ('GPU', 'DLA0'):\n"
            "    ev.evaluate(Placement(ev.model, dict.fromkeys(ev.model.names, d)))\n"
            "print(len(ev.trial_log.pending))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "2", out.stderr
    assert _rows(db, "SELECT COUNT(*) FROM pt_requests") == 2


def test_sigterm_stops_a_simulated_run_with_everything_it_showed_stored(tmp_path):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--agent", "local", "--granularity", "fusion",
           "--trials", "100000", "--study", "term"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    shown = 0
    for line in proc.stdout:
        if line.startswith("trial="):
            shown += 1
            if shown == 30:
                proc.send_signal(signal.SIGTERM)
                break
    # the rest through the same reader: communicate() reads the pipe itself and would skip the lines the
    # loop above had already read ahead into its buffer (an in-flight trial's line, seen under load)
    out = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    shown += sum(x.startswith("trial=") for x in out.splitlines())
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "stopping after the evaluation in flight (SIGTERM again" in err and "Traceback" not in err
    assert "best found" in out and "Resume with: placetune tune" in out
    db = tmp_path / "placetune.db"
    stored = _rows(db, "SELECT COUNT(*) FROM pt_requests")
    assert stored == shown  # every trial shown is stored, and every stored one was shown
    trials = optuna.load_study(study_name="term", storage=f"sqlite:///{db}").get_trials(deepcopy=False)
    assert len(trials) == stored and all(t.state == TrialState.COMPLETE for t in trials)


def test_the_agent_runs_with_one_blas_thread_and_the_limit_is_restored(tmp_path, monkeypatch):
    """The guided agent's small solves ran with a BLAS thread per core that only spun (20x the CPU
    of one thread on 2 cores): a tune runs its agent with one, and gives the caller's limit back."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    import numpy  # noqa: F401 - its BLAS is the one limited

    from placetune.tuning.studyfile import TuneConfig
    from placetune.tuning.tune import Tuner

    def blas_threads() -> set[int]:
        return {i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}

    seen: list[set[int]] = []
    evaluate = Evaluator.evaluate

    def spy(self, *a, **kw):
        seen.append(blas_threads())
        return evaluate(self, *a, **kw)

    monkeypatch.setattr(Evaluator, "evaluate", spy)
    cfg = TuneConfig(model="seed-block", agent="random", trials=6, storage=f"sqlite:///{tmp_path / 'pt.db'}",
                     export=str(tmp_path / "p.json"))
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        if blas_threads() != {2}:
            pytest.skip("no BLAS whose threads can be set")
        Tuner(cfg, out=io.StringIO()).run()
        assert blas_threads() == {2}
    assert seen[-1] == {1} and len(seen) >= 5
