"""Fleet tuning: several workers on one study in a shared PostgreSQL database (placetune.fleet).

The PostgreSQL tests need ``PLACETUNE_TEST_PG_URL`` (a server where the user may CREATE
DATABASE: each test gets a database of its own). ``.ci/run`` starts a throwaway cluster
(``tests/pg_cluster.sh``) and sets ``PLACETUNE_REQUIRE_PG=1``, so in CI they fail instead
of skipping when the server is missing. The claim and single-writer tests run on SQLite
everywhere.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from placetune import ConfigError, Placement, StoreError
from placetune.cli.main import main
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.fleet import is_shared_database, tune_config
from placetune.tuning.fleet_claims import CLAIMS_TABLE, Claims
from placetune.tuning.fleet_locks import SingleWriterLock
from placetune.tuning.fleet_worker import FleetOptions
from placetune.store.store import Store
from placetune.tuning.studyfile import TuneConfig

ROOT = Path(__file__).resolve().parents[1]
DRIVER = ROOT / "tests" / "reliability" / "_driver.py"
PG_URL = os.environ.get("PLACETUNE_TEST_PG_URL")


# --------------------------------------------------------------------------- PostgreSQL fixtures
def _require_pg() -> str:
    if PG_URL:
        return PG_URL
    if os.environ.get("PLACETUNE_REQUIRE_PG"):
        pytest.fail("PLACETUNE_REQUIRE_PG is set but PLACETUNE_TEST_PG_URL is not: the CI PostgreSQL did not start")
    pytest.skip("set PLACETUNE_TEST_PG_URL=postgresql+psycopg://user:pw@127.0.0.1:port/db (tests/pg_cluster.sh start)")


@pytest.fixture
def pg_url() -> str:
    """A fresh PostgreSQL database for one test (created and dropped on the test server)."""
    with fresh_pg_database(_require_pg()) as url:
        yield url


@contextlib.contextmanager
def fresh_pg_database(server_url: str):
    """The URL of a new database on the PostgreSQL server of ``server_url``, dropped on leaving: no two
    tests share one, even when they run at the same time (pytest-xdist workers)."""
    import sqlalchemy as sa

    base = sa.engine.make_url(server_url)
    name = f"pt_fleet_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    except sa.exc.SQLAlchemyError as exc:
        admin.dispose()
        pytest.fail(f"the test user cannot CREATE DATABASE on the PostgreSQL test server: {exc.orig}")
    try:
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()


def _study_file(tmp: Path, name: str, trials: int, **agent_options) -> Path:
    opts = {"heartbeat_interval": 1, "grace_period": 3, **agent_options}
    lines = [
        "[study]", f'name = "{name}"', 'model = "seed-block"', 'mode = "pipeline"', 'precision = "int8"',
        'agent = "optuna"', f"trials = {trials}", "", "[agent_options]",
        *(f"{k} = {json.dumps(v)}" for k, v in opts.items()),
    ]
    path = tmp / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _worker(study: Path, url: str, cwd: Path, *extra: str, delay: float = 0.0) -> subprocess.Popen:
    cmd = [sys.executable, str(DRIVER), "--measure-delay", str(delay), "--", "tune", str(study), "--storage", url,
           *extra]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _optuna_study(url: str, name: str):
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(url, skip_compatibility_check=True)
    return optuna.load_study(study_name=name, storage=storage), storage


def _measured_in_run(out: str) -> int:
    m = re.search(r"summary \(SIMULATED\): \d+ trials, (\d+) measured in this run", out)
    assert m, out[-2000:]
    return int(m.group(1))


def _run_results_command(argv: list[str], capsys) -> tuple[int, str, str]:
    """`placetune studies|export ...` through the main CLI, or cli_results' parsers when not wired yet."""
    results = pytest.importorskip("placetune.cli.results")
    from placetune.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    capsys.readouterr()
    if argv[0] in sub.choices:
        rc = main(argv)
    else:
        parser = argparse.ArgumentParser(prog="placetune")
        results.add_parsers(parser.add_subparsers())
        args = parser.parse_args(argv)
        rc = args.func(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def _password(url: str) -> str | None:
    import sqlalchemy as sa

    return sa.engine.make_url(url).password


# --------------------------------------------------------------------------- PostgreSQL: the fleet
@pytest.mark.postgres
@pytest.mark.slow
def test_three_workers_share_one_study(pg_url, tmp_path, capsys):
    """3 worker processes x 20 trials: 60 trials, nothing measured twice, export = table best."""
    import sqlalchemy as sa
    from optuna.trial import TrialState

    study = _study_file(tmp_path, "fleet3", trials=60)
    dirs = [tmp_path / f"w{i}" for i in range(3)]
    for d in dirs:
        d.mkdir()
    procs = [_worker(study, pg_url, d, delay=0.01) for d in dirs]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err
    st, storage = _optuna_study(pg_url, "fleet3")
    trials = st.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == TrialState.COMPLETE and not t.user_attrs.get("imported")
                and not t.user_attrs.get("repeat")]  # (a proposal answered from an earlier trial: no build)
    assert len(complete) == 60
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    workers = {t.user_attrs.get("worker") for t in complete}
    assert len(workers) == 3, workers  # every worker ran trials of the one study
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        n, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT placement_key) FROM pt_measurements")).one()
        claims = conn.execute(sa.select(sa.func.count()).select_from(CLAIMS_TABLE)).scalar()
        best_fps = conn.execute(sa.text("SELECT max(throughput_fps) FROM pt_measurements WHERE status = 'ok'")).scalar()
    engine.dispose()
    # no realised placement measured twice: the workers' backend measurements add up to the rows
    assert n == distinct == sum(_measured_in_run(out) for out, _ in outs)
    assert claims == 0
    # Optuna's best agrees with the table (pipeline mode: the objective is throughput_fps, maximised)
    assert st.metric_names == ["throughput_fps"]
    assert st.best_value == pytest.approx(best_fps)
    storage.engine.dispose()
    # placetune studies / export against the shared database
    rc, out, err = _run_results_command(["studies", "--storage", pg_url, "--json"], capsys)
    assert rc == 0, err
    doc = json.loads(out)
    row = next(s for s in doc["studies"] if s["study"] == "fleet3")
    assert row["measured"] == n and row["best"] == pytest.approx(best_fps)
    plan_path = tmp_path / "best.plan.json"
    rc, out, err = _run_results_command(["export", "--study", "fleet3", "--storage", pg_url, "-o", str(plan_path)],
                                        capsys)
    assert rc == 0, err
    with Store(pg_url) as store:
        best = store.best("fleet3")
        assert best is not None and best.measurement.throughput_fps == pytest.approx(best_fps)
    plan = json.loads(plan_path.read_text())
    assert plan["source"]["measurement_id"] == best.id
    # every worker exported the same best plan
    for d in dirs:
        assert json.loads((d / "fleet3.plan.json").read_text())["source"]["measurement_id"] == best.id
    pw = _password(pg_url)
    if pw:
        everything = "".join(o + e for o, e in outs) + plan_path.read_text()
        everything += "".join(p.read_text() for d in dirs for p in d.iterdir())
        assert pw not in everything


@pytest.mark.postgres
@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_killed_worker_trial_is_recovered_by_heartbeat(pg_url, tmp_path):
    """SIGKILL one of 3 workers mid-measurement: its trial fails by heartbeat, is re-run, the budget completes."""
    import sqlalchemy as sa
    from optuna.storages import RetryFailedTrialCallback
    from optuna.trial import TrialState

    budget = 30
    study = _study_file(tmp_path, "fleetkill", trials=budget)
    procs = [_worker(study, pg_url, tmp_path, delay=0.3) for _ in range(3)]
    victim = procs[1]
    victim_id = f"{socket.gethostname()}:{victim.pid}"
    # find the victim measuring (its trial RUNNING, labelled with its worker id), freeze it, check, kill it
    st = storage = None
    killed_trial = None
    held: list[str] = []
    deadline = time.monotonic() + 90
    try:
        while killed_trial is None and time.monotonic() < deadline:
            assert victim.poll() is None, "the victim finished before it could be killed"
            try:
                if st is None:
                    st, storage = _optuna_study(pg_url, "fleetkill")
                running = [t for t in st.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                           if t.user_attrs.get("worker") == victim_id]
            except (KeyError, sa.exc.IntegrityError, sa.exc.ProgrammingError):
                # the study does not exist yet, or a worker was creating Optuna's tables as this poll did (a
                # client without placetune's lock: the second CREATE fails; a moment later the tables exist)
                running = []
            if not running:
                time.sleep(0.05)
                continue
            os.kill(victim.pid, signal.SIGSTOP)
            still = [t for t in st.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
                     if t.user_attrs.get("worker") == victim_id]
            if still:
                killed_trial = still[0].number
                engine = sa.create_engine(pg_url)
                with engine.connect() as conn:  # was it holding a claim (measuring)?
                    held = conn.execute(sa.select(CLAIMS_TABLE.c.placement_key)
                                        .where(CLAIMS_TABLE.c.worker == victim_id)).scalars().all()
                engine.dispose()
                os.kill(victim.pid, signal.SIGKILL)
            else:
                os.kill(victim.pid, signal.SIGCONT)
        assert killed_trial is not None, "never caught the victim in a trial"
        victim.wait(timeout=10)
        assert victim.returncode == -signal.SIGKILL
        outs = [p.communicate(timeout=180) for p in (procs[0], procs[2])]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    for (out, err), p in zip(outs, (procs[0], procs[2])):
        assert p.returncode == 0, err[-3000:]
    trials = st.get_trials(deepcopy=False)
    by_number = {t.number: t for t in trials}
    assert by_number[killed_trial].state == TrialState.FAIL  # failed by the survivors' heartbeat check
    retried = [t for t in trials if RetryFailedTrialCallback.retried_trial_number(t) == killed_trial]
    assert retried and retried[0].state == TrialState.COMPLETE  # re-run with the same parameters
    assert retried[0].params == by_number[killed_trial].params
    assert retried[0].user_attrs.get("worker") != victim_id
    complete = [t for t in trials if t.state == TrialState.COMPLETE and not t.user_attrs.get("imported")
                and not t.user_attrs.get("repeat")]  # (a proposal answered from an earlier trial: no build)
    assert len(complete) == budget  # the survivors finished the budget
    assert not [t for t in trials if t.state == TrialState.RUNNING]
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        n, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT placement_key) FROM pt_measurements")).one()
        left = conn.execute(sa.select(CLAIMS_TABLE.c.worker)).scalars().all()
    engine.dispose()
    storage.engine.dispose()
    assert n == distinct
    # nobody's claim is left: the victim's was taken over by the worker that re-ran its trial
    assert left == []
    if held:
        assert any("claims of dead workers taken over: 1" in out for out, _ in outs), [o[-600:] for o, _ in outs]


@pytest.mark.postgres
def test_two_workers_count_the_study_s_trials_alike(pg_url, tmp_path):
    """Each worker's closing lines count the study's trials, every worker's: its summary, the fleet line and
    the convergence line (which counted only the trials this worker saw: "of 11" of a 15-trial study)."""
    study = _study_file(tmp_path, "fleetcount", trials=15)
    dirs = [tmp_path / f"w{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    procs = [_worker(study, pg_url, d) for d in dirs]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert re.search(r"summary \(SIMULATED\): 15 trials, ", out), out[-2000:]
        assert "fleet: the study has 15 trials of its budget" in out, out[-2000:]
    ofs = [n for out, _ in outs for n in re.findall(r"converged at trial \d+ of (\d+)", out)]
    assert ofs and set(ofs) == {"15"}, [out[-1500:] for out, _ in outs]
    st, storage = _optuna_study(pg_url, "fleetcount")
    trials = st.get_trials(deepcopy=False)
    storage.engine.dispose()
    assert len([t for t in trials if not t.user_attrs.get("repeat")]) == 15
    assert all(t.user_attrs.get("agent") in ("baseline", "optuna") and t.user_attrs.get("worker") for t in trials)


@pytest.mark.postgres
def test_mismatched_worker_refuses_to_join(pg_url, tmp_path, capsys):
    study = _study_file(tmp_path, "fp", trials=3)
    with Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8", store=pg_url, study="fp"):
        pass  # the study exists, created by a MAXN worker
    other = tmp_path / "other.toml"
    other.write_text(study.read_text() + '\n[settings]\npower_mode = "30W"\n')
    capsys.readouterr()
    assert main(["tune", str(other), "--storage", pg_url]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert "cannot join study 'fp'" in err and "power_mode: study MAXN, this worker 30W" in err
    assert "nvpmodel" in err and "Traceback" not in err
    pw = _password(pg_url)
    assert not pw or pw not in err


@pytest.mark.postgres
def test_password_never_printed_or_written(pg_url, tmp_path, capsys):
    """tune, studies, export and error paths with a password URL: the password appears nowhere."""
    import sqlalchemy as sa

    url = sa.engine.make_url(pg_url)
    if not url.password:  # a trust-auth server: give the URL a password anyway (it is ignored)
        url = url.set(password="pt-secret-" + uuid.uuid4().hex[:8])
    pw = url.password
    full = url.render_as_string(hide_password=False)
    runs = [subprocess.run([sys.executable, "-m", "placetune.cli", "-vv", "tune", "--model", "seed-block",
                            "--agent", "optuna", "--trials", "6", "--study", "pw", "--storage", full,
                            "--export", str(tmp_path / "pw.plan.json")],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)]
    assert runs[0].returncode == 0, runs[0].stderr[-2000:]
    assert "***@" in runs[0].stdout
    bad = url.set(database="no_such_db_" + uuid.uuid4().hex[:6]).render_as_string(hide_password=False)
    closed = url.set(host="127.0.0.1", port=1).render_as_string(hide_password=False)
    for u in (bad, closed):
        runs.append(subprocess.run([sys.executable, "-m", "placetune.cli", "tune", "--trials", "2", "--storage", u],
                                   cwd=tmp_path, capture_output=True, text=True, timeout=120))
        assert runs[-1].returncode == StoreError.exit_code and "***" in runs[-1].stderr
    texts = [r.stdout + r.stderr for r in runs]
    for argv in (["studies", "--storage", full], ["studies", "--storage", full, "--json"],
                 ["export", "--study", "pw", "--storage", full, "-o", str(tmp_path / "e.plan.json")],
                 ["export", "--study", "pw", "--storage", full, "--format", "trtexec", "-o", str(tmp_path / "b.sh")],
                 ["report", "--study", "pw", "--storage", full, "-o", str(tmp_path / "report")]):
        rc, out, err = _run_results_command(argv, capsys)
        assert rc == 0, err
        texts.append(out + err)
    for bad_url in (bad, closed):
        with pytest.raises(StoreError) as info:
            Store(bad_url, connect_timeout=2)
        texts.append(str(info.value) + repr(info.value))
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".plan.json") for p in files)
    texts += [p.read_text(errors="replace") for p in files]
    leaks = [t[max(0, t.find(pw) - 80):t.find(pw) + 20] for t in texts if pw in t]
    assert not leaks, leaks


@pytest.mark.postgres
def test_password_from_pgpassfile(pg_url, tmp_path, capsys, monkeypatch):
    """The documented way: no password in the URL, libpq reads it from PGPASSFILE."""
    import sqlalchemy as sa

    passfile = os.environ.get("PLACETUNE_TEST_PG_PASSFILE")
    url = sa.engine.make_url(pg_url)
    if not passfile or not url.password:
        pytest.skip("needs the CI cluster's PGPASSFILE (tests/pg_cluster.sh)")
    bare = f"{url.drivername}://{url.username}@{url.host}:{url.port}/{url.database}"  # (URL.set ignores None)
    monkeypatch.setenv("PGPASSFILE", passfile)
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "optuna", "--study", "passfile",
                 "--storage", bare]) == 0
    out = capsys.readouterr()
    assert f"study 'passfile' in {bare} " in out.out
    assert url.password not in out.out + out.err


# --------------------------------------------------------------------------- claims (any database)
def _claim_setup(tmp_path, grace: int = 2):
    store = Store(f"sqlite:///{tmp_path / 'claims.db'}")
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8", store=store, study="c")
    opts = FleetOptions(heartbeat_interval=1, grace_period=grace, poll_seconds=0.05)
    mine = Claims(store, "me:1", opts)
    other = Claims(store, "other:2", opts)
    ev.claims = mine
    p = Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    key = ev.realise(p).realized.key
    return store, ev, mine, other, p, key


def test_claimed_placement_is_waited_for_not_measured(tmp_path):
    store, ev, mine, other, p, key = _claim_setup(tmp_path)
    assert other.acquire(ev, key) is None  # the other worker is measuring it
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("m", ev.evaluate(p)))
    t.start()
    time.sleep(0.4)
    assert t.is_alive()  # waiting, not measuring
    store.record(ev.study, p.key, key, ev.backend.measure(ev.realise(p), ev.platform, ev.settings))
    other.release(ev, key)
    t.join(timeout=10)
    assert result["m"].extra["cache_hit"] and ev.stats.measured == 0 and mine.waited == 1
    assert len(store.measurements("c")) == 1
    mine.close()
    other.close()
    store.close()


def test_claim_of_a_dead_worker_expires_and_is_taken_over(tmp_path):
    store, ev, mine, other, p, key = _claim_setup(tmp_path, grace=2)
    assert other.acquire(ev, key) is None
    other._stop.set()  # the other worker "dies": no more heartbeats
    t0 = time.monotonic()
    m = ev.evaluate(p)
    waited = time.monotonic() - t0
    assert m.ok and not m.extra["cache_hit"] and ev.stats.measured == 1 and mine.taken_over == 1
    assert 1.0 < waited < 10
    with store.engine.connect() as conn:  # released after the measurement was stored
        assert conn.execute(CLAIMS_TABLE.select()).all() == []
    mine.close()
    store.close()


def test_heartbeat_keeps_a_long_measurement_claimed(tmp_path):
    """A measurement longer than the grace period (an engine build) is not taken over while its worker lives."""
    store, ev, mine, other, p, key = _claim_setup(tmp_path, grace=2)
    assert other.acquire(ev, key) is None  # heartbeats every second from now on
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("m", ev.evaluate(p)))
    t.start()
    time.sleep(3.5)  # well past the grace period
    assert t.is_alive() and mine.taken_over == 0
    store.record(ev.study, p.key, key, ev.backend.measure(ev.realise(p), ev.platform, ev.settings))
    other.release(ev, key)
    t.join(timeout=10)
    assert result["m"].extra["cache_hit"] and ev.stats.measured == 0 and mine.taken_over == 0
    other.close()
    mine.close()
    store.close()


def test_claims_do_not_change_single_worker_results(tmp_path):
    store, ev, mine, other, p, key = _claim_setup(tmp_path)
    a = ev.evaluate(p)
    b = ev.evaluate(p)
    assert a.ok and not a.extra["cache_hit"] and b.extra["cache_hit"] and ev.stats.measured == 1
    mine.close()
    other.close()
    store.close()


# --------------------------------------------------------------------------- SQLite: one writer
def test_sqlite_refuses_a_second_writer(tmp_path, capsys):
    db = tmp_path / "one.db"
    argv = ["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage", f"sqlite:///{db}",
            "--export", str(tmp_path / "p.json")]
    with SingleWriterLock(db):  # another tuner writes it
        capsys.readouterr()
        assert main(argv) == StoreError.exit_code
        err = capsys.readouterr().err
        assert "already being written by another placetune tune" in err and "SQLite is for one writer" in err
        assert f"pid {os.getpid()}" in err and "postgresql" in err
    assert main(argv) == 0  # the lock is gone with its holder
    assert main(argv) == 0  # and released after each run
    assert not Path(str(db) + ".tune-lock").exists()


def test_sqlite_writer_lock_belongs_to_the_file_not_its_name(tmp_path, capsys):
    """Through a symlink two `tune` runs once wrote one SQLite study at once (598
    trials for a budget of 300); the lock is now taken on the resolved file."""
    real = tmp_path / "real" / "pt.db"
    real.parent.mkdir()
    link = tmp_path / "link.db"
    link.symlink_to(real)
    argv = ["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--storage", f"sqlite:///{link}",
            "--export", str(tmp_path / "p.json")]
    with SingleWriterLock(real):  # a tuner writing the file under its own name
        capsys.readouterr()
        assert main(argv) == StoreError.exit_code
        assert "already being written by another placetune tune" in capsys.readouterr().err
    with SingleWriterLock(link):  # and the other way round
        with pytest.raises(StoreError, match="already being written"):
            SingleWriterLock(real).acquire()


def test_fleet_mode_selection():
    assert is_shared_database("postgresql+psycopg://u:pw@h/db") and is_shared_database("mysql://h/db")
    assert not is_shared_database("sqlite:///x.db") and not is_shared_database("x.db")
    assert not is_shared_database(":memory:") and not is_shared_database(None)
    cfg, note = tune_config(TuneConfig(storage="postgresql+psycopg://u:pw@h/db"))
    assert cfg.agent == "optuna" and "fleet mode" in note
    # any other agent runs in a fleet as it is, driven by ask/tell (placetune.tuning.fleet_steps)
    shared = TuneConfig(storage="postgresql+psycopg://u:pw@h/db", agent="random")
    assert tune_config(shared) == (shared, None)
    assert tune_config(TuneConfig(agent="random")) == (TuneConfig(agent="random"), None)
    with pytest.raises(ConfigError):
        FleetOptions(heartbeat_interval=5, grace_period=5)


def test_resume_hint_is_masked():
    from placetune.tuning.tune import Tuner

    t = Tuner(TuneConfig(), resume_hint="placetune tune --storage postgresql+psycopg://u:hunter2@db/pt")
    assert "hunter2" not in t.resume_hint and "u:***@db" in t.resume_hint


# --------------------------------------------------------------------------- any agent as a fleet worker
def _toy_on_path(tmp_path: Path, group: str = "placetune.agents", target: str = "toy_agent:ToyAgent") -> str:
    """PYTHONPATH with an example of examples/ (the toy agent by default) declared as a package's
    entry point ``toy`` in ``group``."""
    dist = tmp_path / "site" / "placetune_toy-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: placetune-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\ntoy = {target}\n")
    return os.pathsep.join([str(ROOT), str(ROOT / "examples"), str(tmp_path / "site")])


def test_any_agent_runs_as_a_fleet_worker_through_the_gate(tmp_path):
    """The fleet drives a step agent and a loop agent by ask/tell: one trial of the fleet's Optuna
    study per proposal, the gate stops the worker at the fleet's budget (SQLite: one worker)."""
    import optuna
    from optuna.trial import TrialState

    from placetune.tuning.fleet import Fleet
    from search import Budget, drive, get_agent

    sys.path.insert(0, str(ROOT / "examples"))
    from toy_agent import ToyAgent

    # toy: all-GPU, then a batch of 4 that the gate cuts to 2; random: a loop agent, one proposal at a time
    for name, agent, budget in (("toy", ToyAgent(seed=0, batch=4), 3), ("random", get_agent("random", seed=0), 5)):
        store = Store(f"sqlite:///{tmp_path / (name + '.db')}")
        ev = Evaluator("seed-block", "orin-agx", store=store, study=name)
        fleet = Fleet(store, FleetOptions(heartbeat_interval=1, grace_period=3))
        fleet.attach(ev)
        worker = fleet.configure(agent, budget, study_name=ev.study_name)
        assert worker.name == name and agent.seed != 0  # a per-worker seed
        result = drive(worker.ask_tell(ev, Budget(evaluations=50)), ev)  # the agent's own budget is larger
        fleet.close()
        assert fleet.trials_done(ev.study_name) == budget == ev.stats.requested == result.evaluations
        st = optuna.load_study(study_name=ev.study_name, storage=f"sqlite:///{tmp_path / (name + '.db')}")
        trials = st.get_trials(deepcopy=False)
        assert len(trials) == budget and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
        assert all(t.params and t.user_attrs["worker"] == fleet.worker and t.user_attrs["agent"] == name
                   for t in trials)
        assert fleet.gate.started == budget
        store.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_three_toy_agent_workers_share_one_study(pg_url, tmp_path, monkeypatch):
    """3 workers of the toy agent (a package's entry point) x 8 trials: 24 trials, nothing measured twice."""
    import sqlalchemy as sa
    from optuna.trial import TrialState

    monkeypatch.setenv("PYTHONPATH", _toy_on_path(tmp_path))
    study = _study_file(tmp_path, "fleettoy", trials=24)  # its heartbeat settings are the fleet's, not the agent's
    dirs = [tmp_path / f"w{i}" for i in range(3)]
    for d in dirs:
        d.mkdir()
    procs = [_worker(study, pg_url, d, "--agent", "toy", "--model", "resnet50", delay=0.01) for d in dirs]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err and "agent toy" in out
    st, storage = _optuna_study(pg_url, "fleettoy")
    trials = st.get_trials(deepcopy=False)
    done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
    assert len(done) == 24 and not [t for t in trials if t.state == TrialState.RUNNING]
    # the study's baselines are trials of the budget too, with their agent, as on one machine
    assert all(t.user_attrs.get("agent") in ("toy", "baseline") and t.params for t in done)
    assert [t for t in done if t.user_attrs["agent"] == "baseline"] and [t for t in done if t.user_attrs["agent"] == "toy"]
    assert len({t.user_attrs.get("worker") for t in done}) >= 2
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        n, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT placement_key) FROM pt_measurements")).one()
        claims = conn.execute(sa.select(sa.func.count()).select_from(CLAIMS_TABLE)).scalar()
    engine.dispose()
    storage.engine.dispose()
    assert n == distinct == sum(_measured_in_run(out) for out, _ in outs) and claims == 0


@pytest.mark.postgres
@pytest.mark.slow
def test_three_toy_backend_workers_share_one_study(pg_url, tmp_path, monkeypatch):
    """3 workers measuring with the toy backend (a package's entry point, one file) x 8 trials on
    PostgreSQL: 24 trials, nothing measured twice, the study marked with the toy backend."""
    import sqlalchemy as sa
    from optuna.trial import TrialState

    monkeypatch.setenv("PYTHONPATH", _toy_on_path(tmp_path, "placetune.backends", "toy_backend:ToyBackend"))
    study = _study_file(tmp_path, "fleettoybackend", trials=24)
    dirs = [tmp_path / f"w{i}" for i in range(3)]
    for d in dirs:
        d.mkdir()
    procs = [_worker(study, pg_url, d, "--backend", "toy", "--mode", "engine", "--model", "resnet50") for d in dirs]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
        assert "Traceback" not in err and "backend toy" in out
    st, storage = _optuna_study(pg_url, "fleettoybackend")
    trials = st.get_trials(deepcopy=False)
    done = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
            and not t.user_attrs.get("imported")]  # (the baselines, measured first, warm-start Optuna's sampler)
    assert len(done) == 24 and not [t for t in trials if t.state == TrialState.RUNNING]
    assert len({t.user_attrs.get("worker") for t in done}) >= 2
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        n, distinct = conn.execute(sa.text("SELECT count(*), count(DISTINCT placement_key) FROM pt_measurements")).one()
        claims = conn.execute(sa.select(sa.func.count()).select_from(CLAIMS_TABLE)).scalar()
    engine.dispose()
    storage.engine.dispose()
    assert n == distinct == sum(_measured_in_run(out) for out, _ in outs) and claims == 0


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_dead_workers_trial_is_failed_and_the_agents_finish_the_budget(tmp_path):
    """A trial whose worker stopped beating covers the budget: the live worker waits at the gate, the
    stale trial is failed (not re-queued: the proposal was the dead worker's agent's) and the live
    worker's agent runs the trial that finishes the budget."""
    import optuna
    from optuna.trial import TrialState

    from placetune.tuning.fleet import Fleet
    from placetune.tuning.optuna_study import OptunaStudy, storage_for
    from search import Budget, drive, get_agent

    store = Store(f"sqlite:///{tmp_path / 'dead.db'}")
    ev = Evaluator("seed-block", "orin-agx", store=store, study="dead")
    options = FleetOptions(heartbeat_interval=1, grace_period=2, poll_seconds=0.1)
    dead = OptunaStudy(ev, "fusion", storage=storage_for(store, heartbeat_interval=1, grace_period=2),
                       backfill=False).study
    trial = dead.ask()  # a worker that died while measuring: one heartbeat, then silence
    dead._storage.record_heartbeat(trial._trial_id)
    time.sleep(2.5)
    fleet = Fleet(store, options)
    fleet.attach(ev)
    worker = fleet.configure(get_agent("random", seed=1), 3, study_name=ev.study_name)
    result = drive(worker.ask_tell(ev, Budget(evaluations=50)), ev)
    fleet.close()
    st = optuna.load_study(study_name=ev.study_name, storage=f"sqlite:///{tmp_path / 'dead.db'}")
    states = {t.number: t.state for t in st.get_trials(deepcopy=False)}
    assert states[trial.number] == TrialState.FAIL
    assert sum(s in (TrialState.COMPLETE, TrialState.PRUNED) for s in states.values()) == 3 == result.evaluations
    assert len(states) == 4 and fleet.trials_done(ev.study_name) == 3
    store.close()


@pytest.mark.postgres
@pytest.mark.parametrize("agent", [[], ["--agent", "random"]], ids=["optuna", "random"])
def test_a_fleet_worker_whose_builds_run_out_of_memory_stops_as_tune_does(pg_url, tmp_path, agent):
    """`placetune tune --backend tensorrt` on PostgreSQL (a fleet worker) where every build with a DLA layer runs
    out of memory (the TensorRT double): one line, exit 8, as a single tune; the stopping trial of the fleet's
    Optuna study is finished (PRUNED, counted by the other workers), none is left FAIL or RUNNING, no claim."""
    import sqlalchemy as sa
    from optuna.trial import TrialState

    from tests.fakes import fake_env

    env = {**os.environ, **fake_env("10.3.0", BUILD_OOM_ON="+DLA")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env["PYTHONPATH"]])
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt", "--model",
           str(ROOT / "tests" / "data" / "seed_model_gn.onnx.gz"), "--mode", "engine", "--precision", "fp16",
           "--seed", "3", "--trials", "20", "--storage", pg_url, "--study", "oom", *agent]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    errors = [x for x in proc.stderr.splitlines() if x.startswith("placetune: error:")]
    assert proc.returncode == 8 and len(errors) == 1, proc.stderr[-3000:]
    assert "out of memory: 3 placements in a row" in errors[0] and "Traceback" not in proc.stderr
    st, storage = _optuna_study(pg_url, "oom")
    trials = st.get_trials(deepcopy=False)
    storage.engine.dispose()
    assert trials and {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}, [t.state for t in trials]
    last = max(trials, key=lambda t: t.number)
    assert last.state == TrialState.PRUNED and last.user_attrs["status"] == "build_failed"
    engine = sa.create_engine(pg_url)
    with engine.connect() as conn:
        claims = conn.execute(sa.select(sa.func.count()).select_from(CLAIMS_TABLE)).scalar()
    engine.dispose()
    assert claims == 0


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
def test_a_fleet_s_baselines_are_trials_of_its_study_within_its_budget(tmp_path, monkeypatch, capsys):
    """A fleet worker's baselines were measured outside the fleet's Optuna study, then imported by the agent as
    warm-start trials without their agent and outside the budget: the run measured budget + 3 placements and
    its lines disagreed (15 trials, converged "of 18"). Each baseline is now a trial with its agent and worker,
    counted in the budget as on one machine, and so are its builds, not the optuna agent's repeated proposals
    answered without a build (one worker on SQLite: the fleet's path without a server)."""
    import optuna

    import placetune.tuning.tune_study as tune_study
    from placetune.tuning.fleet import Fleet

    monkeypatch.setattr(tune_study, "prepare", lambda store, cfg, backend, settings: (
        Fleet(store, FleetOptions(heartbeat_interval=1, grace_period=3)), None))
    url = f"sqlite:///{tmp_path / 'f.db'}"
    assert main(["tune", "--model", "seed-block", "--mode", "pipeline", "--precision", "int8", "--agent", "optuna",
                 "--trials", "15", "--storage", url, "--study", "f", "--export", str(tmp_path / "f.json")]) == 0
    out = capsys.readouterr().out
    assert "fleet worker" in out and re.search(r"summary \(SIMULATED\): 15 trials, 15 measured in this run", out), out[-3000:]
    # every count names the same thing: the study's requests (builds and cache hits), baselines included
    assert "fleet: the study has 15 trials of its budget" in out
    assert all(n == "15" for n in re.findall(r"converged at trial \d+ of (\d+)", out)), out[-3000:]
    trials = optuna.load_study(study_name="f", storage=url).get_trials(deepcopy=False)
    assert not [t for t in trials if t.user_attrs.get("imported")]
    assert all(t.user_attrs.get("agent") in ("baseline", "optuna") for t in trials)  # a repeat names its agent too
    repeats = [t for t in trials if t.user_attrs.get("repeat")]  # proposals answered from an earlier trial
    assert f"holds {len(repeats)} repeated proposals" in out and len(trials) == 15 + len(repeats)
    baselines = [t for t in trials if t.user_attrs.get("agent") == "baseline"]
    assert len(baselines) == 3 and all(t.user_attrs.get("worker") for t in baselines)  # all-GPU, all-DLA0, split
    with Store(url) as store:
        ids = {rec.id for rec in store.measurements("f")}
        assert store.study("f").n_requests == len(ids)
    # every measurement is a trial of the study
    assert {t.user_attrs.get("measurement_id") for t in trials} - {None} == ids
