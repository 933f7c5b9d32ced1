"""A fleet's baselines are measured once for the study: two workers starting together do not both request them
(the second waits for the first's measurement and reads it back), on PostgreSQL and on SQLite alike."""

from __future__ import annotations

import threading
import time

import pytest

from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.store.store import Store
from placetune.tuning.baselines import measure_study_baselines
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.fleet_claims import Claims
from placetune.tuning.fleet_worker import FleetOptions

from tests.test_fleet import _optuna_study, _study_file, _worker, pg_url  # noqa: F401 - pg_url: a fixture


def _two_workers_measure_the_baselines(url: str, monkeypatch) -> tuple[list[Evaluator], list[list]]:
    measure = SimulatedJetson.measure

    def slow(self, *a, **k):  # a build takes a while: both workers reach the baselines before either stored one
        time.sleep(0.3)
        return measure(self, *a, **k)

    monkeypatch.setattr(SimulatedJetson, "measure", slow)
    opts = FleetOptions(heartbeat_interval=1, grace_period=30, poll_seconds=0.05)
    evs = []
    for worker in ("jetson-1:1", "jetson-2:2"):  # each its own connection, as two machines have
        ev = Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8", store=Store(url), study="fleet")
        ev.claims = Claims(ev.store, worker, opts)
        evs.append(ev)
    found: list[list] = [[], []]
    start = threading.Barrier(2)

    def run(i: int) -> None:
        start.wait()
        found[i] = measure_study_baselines(evs[i], lambda: True)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return evs, found


def test_two_sqlite_workers_request_each_baseline_once(tmp_path, monkeypatch):
    evs, found = _two_workers_measure_the_baselines(f"sqlite:///{tmp_path / 'fleet.db'}", monkeypatch)
    try:
        # every worker has the figures of all-GPU, all-DLA0 and the split (all-DLA1: DLA0's with the cores
        # swapped), for its summary and its agent
        for f in found:
            assert [b.name for b, _, m in f if m is not None and m.ok] == ["all-gpu", "all-dla0", "split-dla0-dla1"]
        assert sum(ev.stats.measured for ev in evs) == 3  # each built once
        keys = [k for k, _ in evs[0].store.request_keys("fleet")]
        assert len(keys) == 3 == len(set(keys)), keys  # each requested once: three trials of the budget, not six
    finally:
        for ev in evs:
            ev.claims.close()
            ev.store.close()


@pytest.mark.postgres
@pytest.mark.slow
def test_two_postgres_workers_run_the_baselines_once(pg_url, tmp_path):  # noqa: F811 - the fixture
    study = _study_file(tmp_path, "fleetbase", trials=8)
    dirs = [tmp_path / f"w{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
    procs = [_worker(study, pg_url, d, delay=0.5) for d in dirs]  # builds slow enough for both to reach them
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err[-3000:]
    st, storage = _optuna_study(pg_url, "fleetbase")
    trials = st.get_trials(deepcopy=False)
    storage.engine.dispose()
    baselines = [t for t in trials if t.user_attrs.get("agent") == "baseline"]
    assert len(baselines) == 3, [(t.number, t.user_attrs) for t in trials]
    assert len({t.user_attrs.get("measurement_id") for t in baselines}) == 3
    assert len([t for t in trials if not t.user_attrs.get("repeat")]) == 8  # the rest of the budget searched
