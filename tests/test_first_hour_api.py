"""What a researcher meets at the Python prompt: a plan and a stored record printed the whole of their layer
maps (``print(plan)`` of the default tune's plan ran to about 40 kB, a record to 15 kB) where a Measurement,
a Placement or a Model print one short line. They print one line too now."""

from __future__ import annotations

import re

import placetune as pt


def test_a_plan_and_a_stored_record_print_in_one_short_line(tmp_path):
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    with pt.Evaluator("resnet18", "orin-agx", mode="pipeline", store=url, study="s") as ev:
        ev.baselines()
    store = pt.Store(url)
    try:
        record = list(store.measurements("s"))[0]
        plan = pt.export_plan(store, "s")
    finally:
        store.close()
    for shown in (repr(plan), repr(record)):
        assert len(shown) < 400 and "\n" not in shown, shown
    assert re.fullmatch(r"Plan\('resnet18', orin-agx, mode=pipeline, precision=int8, batch=1, engines=\d+, "
                        r"realized=\{(\w+: \d+(, )?)+\}, objective=latency, simulated=True\)", repr(plan)), repr(plan)
    assert repr(record).startswith(f"MeasurementRecord(id={record.id}, study='s', ")
    assert repr(record.measurement) in repr(record)
