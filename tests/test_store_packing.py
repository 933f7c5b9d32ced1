"""A store that costs less than the simulator: packed bulky fields (exact round trips, old rows,
corrupt rows), fewer statements and checkpoints per evaluation."""

from __future__ import annotations

import json
import math
import sqlite3

import pytest

from placetune import Evaluator
from placetune.errors import StoreError
from placetune.measurement import Measurement
from placetune.placement.placement import Placement
from placetune.store import packing
from placetune.store.store import Store

from .test_store import db_path, model, ok_measurement, open_study  # noqa: F401 (fixtures)


def _same(a: Measurement, b: Measurement) -> None:
    """Equal field by field, floats bit for bit (NaN included), dict key order included."""
    da, db = a.to_dict(), b.to_dict()
    assert json.dumps(da, sort_keys=False) == json.dumps(db, sort_keys=False)
    assert list(a.layer_times_ms) == list(b.layer_times_ms)


def bulky(model, order=None) -> Measurement:
    """A measurement whose per-layer times, segments and timeline are packable, with awkward floats."""
    m = ok_measurement(model)
    names = list(model.names) if order is None else order
    m.layer_times_ms = {n: [0.1 + 0.2, -0.0, math.inf, 1e-310, 5e300][k % 5] for k, n in enumerate(names)}
    m.layer_times_ms[names[1]] = math.nan
    m.segment_times_ms = [{"index": i, "device": "DLA0" if i % 2 else "GPU", "layers": 2, "time_ms": 0.1 * i,
                           "predecessors": [i - 1] if i else [], "ranges": [[i, i + 1]]} for i in range(5)]
    m.timeline = [{"device": "GPU", "name": f"seg{i}", "start_ms": i / 3, "end_ms": i / 3 + 0.5, "frame": i // 2}
                  for i in range(6)]
    return m


@pytest.mark.parametrize("order", ["same", "reversed", "other keys"])
def test_bulky_fields_are_stored_packed_and_read_back_exactly(db_path, model, order):
    names = list(model.names)
    keys = {"same": names, "reversed": names[::-1], "other keys": [n + "#" for n in names]}[order]
    m = bulky(model, keys)
    with Store(db_path, cache_size=0) as store:  # no LRU: read from the database
        st = open_study(store, model)
        store.record(st, "r", "k", m)
        _same(store.lookup(*st.scope, "k"), m)
        _same(store.measurements("s1")[0].measurement, m)
    raw = json.loads(sqlite3.connect(db_path).execute("select payload from pt_measurements").fetchone()[0])
    assert set(raw[packing.PACKED]) == {"layer_times_ms", "segment_times_ms", "timeline"}
    assert not {"layer_times_ms", "segment_times_ms", "timeline"} & set(raw)
    lt = raw[packing.PACKED]["layer_times_ms"]
    assert ("k" in lt) == (order == "other keys") and (lt.get("i") is None) == (order != "reversed")


def test_unpackable_fields_stay_plain(db_path, model):
    m = ok_measurement(model)
    m.layer_times_ms = {n: 1 for n in model.names}  # ints: a float column would not give them back
    m.timeline = [{"device": "GPU", "start_ms": 0.0}, {"device": "GPU", "end_ms": 1.0}]  # differing keys
    m.segment_times_ms = []
    with Store(db_path, cache_size=0) as store:
        st = open_study(store, model)
        store.record(st, "r", "k", m)
        _same(store.lookup(*st.scope, "k"), m)
    raw = json.loads(sqlite3.connect(db_path).execute("select payload from pt_measurements").fetchone()[0])
    assert packing.PACKED not in raw and raw["timeline"] == m.timeline


def test_rows_written_before_packing_still_read(db_path, model, monkeypatch):
    m = bulky(model)
    monkeypatch.setattr("placetune.store.rows.pack_fields", lambda payload, realized: None)  # the old writer
    with Store(db_path, cache_size=0) as store:
        st = open_study(store, model)
        store.record(st, "r", "k", m)
    raw = json.loads(sqlite3.connect(db_path).execute("select payload from pt_measurements").fetchone()[0])
    assert packing.PACKED not in raw and "timeline" in raw
    monkeypatch.undo()
    with Store(db_path, cache_size=0) as store:
        _same(store.lookup(*open_study(store, model).scope, "k"), m)


@pytest.mark.parametrize("packed", [
    '5', '{"bogus": {}}', '{"timeline": {"n": 2, "c": [["a", "f", "AAAA"]]}}',
    '{"timeline": {"n": 1, "c": [["a", "f", "!!"]]}}', '{"layer_times_ms": {"i": [-1], "f": ""}}',
    '{"layer_times_ms": {"k": ["a", "b"], "f": "AAAAAAAAAAA="}}', '{"segment_times_ms": []}',
])
def test_corrupt_packed_fields_are_a_store_error(db_path, model, packed):
    with Store(db_path, cache_size=0) as store:
        st = open_study(store, model)
        store.record(st, "r", "k", bulky(model))
    con = sqlite3.connect(db_path)
    con.execute("update pt_measurements set payload = json_set(payload, '$._packed', json(?))", (packed,))
    con.commit()
    con.close()
    with Store(db_path, cache_size=0) as store:
        st = open_study(store, model)
        with pytest.raises(StoreError, match="corrupt"):
            store.lookup(*st.scope, "k")
        with pytest.raises(StoreError, match="corrupt"):
            store.measurements("s1")


def test_simulated_measurements_round_trip_through_a_file_store(db_path):
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", store=Store(db_path, cache_size=0),
                   frames_in_flight=2)
    names = ev.model.names
    fresh = [ev.evaluate(Placement(ev.model, {n: ("DLA0", "GPU", "DLA1")[(k + i) % 3] for k, n in enumerate(names)}))
             for i in range(3)]
    ev.close()
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", store=db_path, frames_in_flight=2)
    for m in fresh:
        again = ev.evaluate(Placement(ev.model, m.requested))
        assert again.extra["cache_hit"] and again.timeline and again.layer_times_ms
        for f in ("timeline", "segment_times_ms", "layer_times_ms", "latency_ms", "realized"):
            assert json.dumps(getattr(again, f)) == json.dumps(getattr(m, f))
    ev.close()


def test_sqlite_checkpoints_the_wal_every_ten_thousand_pages(db_path, model):
    with Store(db_path) as store:
        with store.transaction("test") as conn:
            assert conn.exec_driver_sql("pragma wal_autocheckpoint").scalar() == 10_000


def test_an_evaluation_costs_sqlite_only_its_own_statements(db_path, model):
    # every statement SQLite runs, traced on the driver connection: no look-up before the insert,
    # one transaction per record, none around a single-statement look-up or request log
    from sqlalchemy import event

    with Store(db_path) as store:
        st = open_study(store, model)
        store.engine.dispose()
        seen: list[str] = []

        def trace(dbapi_conn, _record):
            dbapi_conn.set_trace_callback(lambda sql: seen.append(" ".join(sql.split()[:2]).upper()))

        event.listen(store.engine, "connect", trace)
        assert store.lookup(*st.scope, "k") is None
        assert [s for s in seen if not s.startswith("PRAGMA")] == ["SELECT ID,"]
        seen.clear()
        mid = store.record(st, "r", "k", bulky(model))
        assert seen == ["BEGIN IMMEDIATE", "INSERT INTO", "INSERT INTO", "COMMIT"]
        seen.clear()
        assert store.record(st, "r2", "k", bulky(model)) == mid  # already stored: the first is kept
        assert seen == ["BEGIN IMMEDIATE", "INSERT INTO", "SELECT ID", "INSERT INTO", "COMMIT"]
        seen.clear()
        store.record_request(st, "r3", "k", mid)
        assert seen == ["INSERT INTO"]
        assert [r.requested_key for r in store.requests(st.name)] == ["r", "r2", "r3"]


def test_a_failed_sqlite_write_is_rolled_back_and_the_connection_reused(db_path, model):
    with Store(db_path) as store:
        st = open_study(store, model)
        store.record(st, "r", "k", bulky(model))
        real = store._record_rows

        def broken(db, *a, **kw):
            real(db, *a, **kw)  # both rows inserted, then the write fails
            raise sqlite3.OperationalError("disk I/O error")

        store._record_rows = broken
        with pytest.raises(StoreError, match=r"cannot write database .* \(disk I/O error\)"):
            store.record(st, "r2", "k2", bulky(model))
        del store._record_rows
        assert store.lookup(*st.scope, "k2") is None and len(store.requests(st.name)) == 1  # nothing kept
        store.record(st, "r3", "k3", bulky(model))
        assert [m.placement_key for m in store.measurements()] == ["k", "k3"]


@pytest.mark.parametrize("m", [
    {"a": "GPU", 'b"q': "DLA0", "é\\/x": "DLA1", "\u2028": "GPU"},
    {},
    {"a": "CPU"},
    {"a": None},
    {1: "GPU"},
])
def test_device_maps_are_written_as_json_writes_them(m):
    from placetune.store.schema import dumps

    text = packing.device_map_text(m)
    assert text is None or text == dumps(m)
    assert (text is None) == (m not in ({}, {"a": "GPU", 'b"q': "DLA0", "é\\/x": "DLA1", "\u2028": "GPU"}))


def test_measurements_read_back_share_the_layer_names(db_path, model):
    # every row of a model names the same layers: read back, they are one set of strings, not one per row
    names = list(model.names)
    with Store(db_path, cache_size=0) as store:
        st = open_study(store, model)
        for k in range(3):
            m = ok_measurement(model)
            m.realized = {n: ("GPU", "DLA0")[(i + k) % 2] for i, n in enumerate(names)}
            m.requested = {n: "DLA1" for n in names}
            store.record(st, f"r{k}", f"k{k}", m)
        got = [store.lookup(*st.scope, f"k{k}") for k in range(3)] + [r.measurement for r in store.measurements("s1")]
    raw = sqlite3.connect(db_path).execute("select realized from pt_measurements order by id").fetchall()
    assert [json.loads(r[0]) for r in raw] == [g.realized for g in got[:3]]
    first = [list(g.realized) for g in got]
    for g in got:
        assert list(g.realized) == names
        assert all(a is b for a, b in zip(g.realized, first[0]))  # the same string objects
        assert all(a is b for a, b in zip(g.requested, first[0]))
    assert len({id(v) for g in got for v in g.realized.values()}) == 2  # one "GPU", one "DLA0"


@pytest.mark.parametrize("samples", [[2.5] * 4, [-0.0] * 3, [0.0, -0.0], [1.0, 2.0, 1.0]])
def test_latency_samples_read_back_exactly_and_equal_ones_shared(db_path, model, samples):
    m = ok_measurement(model)
    m.latency_samples_ms = list(samples)
    with Store(db_path, cache_size=0) as store:
        st = open_study(store, model)
        store.record(st, "r", "k", m)
        got = store.lookup(*st.scope, "k").latency_samples_ms
    assert json.dumps(got) == json.dumps(samples)  # bit for bit: -0.0 stays -0.0
    assert [math.copysign(1, x) for x in got] == [math.copysign(1, x) for x in samples]
    if samples == [2.5] * 4:  # a noiseless run's samples: one float, as the simulator wrote them
        assert len({id(x) for x in got}) == 1


def test_values_read_back_intern_short_text_and_keys():
    a = packing.shared_values(json.loads('{"extra": {"mode_name": "pipeline"}, "long": "' + "x" * 50 + '"}'))
    b = packing.shared_values(json.loads('{"extra": {"mode_name": "pipeline"}, "long": "' + "x" * 50 + '"}'))
    ka, kb = next(iter(a["extra"])), next(iter(b["extra"]))
    assert ka is kb and a["extra"]["mode_name"] is b["extra"]["mode_name"]
    assert a["long"] == b["long"] and a == b
