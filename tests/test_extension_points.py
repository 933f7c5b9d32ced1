"""The declared extension points for platforms and objectives: a platform of one file
(examples/toy_platform.py) and an objective of one file (examples/toy_objective.py) are registered
and then tuned by name, by ``placetune tune`` and by the ``Evaluator``; malformed or taken names are refused."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

import placetune as pt
from placetune.cli.main import main
from placetune.errors import ConfigError, UnknownNameError
from placetune.hardware.platforms import unregister_platform
from placetune.tuning.objectives import unregister_objective
from search import Budget, get_agent

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import toy_objective  # noqa: E402
from toy_platform import TOY_ORIN  # noqa: E402


@pytest.fixture
def toy_platform():
    pt.register_platform(TOY_ORIN, aliases=("toy",))
    yield
    unregister_platform("toy-orin")


@pytest.fixture
def p99():
    toy_objective.register()
    yield
    unregister_objective("p99_latency")


def test_a_registered_platform_is_tuned_by_name(toy_platform, tmp_path, capsys):
    assert pt.get_platform("toy") is TOY_ORIN and "toy-orin" in pt.platform_names()
    ev = pt.Evaluator("seed-block", "toy-orin", mode="engine")
    assert ev.platform.devices == ("GPU", "DLA0")
    assert ev.evaluate(pt.Placement.all_dla(ev.model, 0)).ok
    assert main(["tune", "--model", "seed-block", "--platform", "toy", "--mode", "engine", "--agent", "random",
                 "--trials", "5", "--storage", f"sqlite:///{tmp_path / 'p.db'}", "--study", "t",
                 "--export", str(tmp_path / "p.json")]) == 0
    assert "toy-orin" in capsys.readouterr().out


def test_platform_registration_refuses_taken_names_and_bad_fields(toy_platform):
    with pytest.raises(ConfigError, match="'toy-orin' is taken"):
        pt.register_platform(TOY_ORIN)
    pt.register_platform(TOY_ORIN, replace=True)  # its own name again, on purpose
    with pytest.raises(ConfigError, match="'orin' is taken"):
        pt.register_platform(dataclasses.replace(TOY_ORIN, name="toy-two"), aliases=("orin",))
    with pytest.raises(ConfigError, match="'orin-agx' is taken; choose another name$"):
        pt.register_platform(dataclasses.replace(TOY_ORIN, name="orin-agx"), replace=True)
    with pytest.raises(ConfigError, match="dla_version must be 1 or 2 with DLA cores"):
        pt.register_platform(dataclasses.replace(TOY_ORIN, name="toy-three", dla_version=None))
    with pytest.raises(ConfigError, match="lower-case letters, digits and dashes"):
        pt.register_platform(dataclasses.replace(TOY_ORIN, name="Toy Orin"))
    with pytest.raises(ConfigError, match="expected a placetune Platform"):
        pt.register_platform("toy-orin")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="built in"):
        unregister_platform("orin-agx")


def test_a_registered_objective_is_searched_and_ranked(p99):
    ev = pt.Evaluator("seed-block", "orin-agx", mode="engine", objective="p99_latency")
    assert ev.objective.direction == "minimize" and ev.objective.units == ("ms",)
    result = get_agent("random", seed=0).run(ev, Budget(evaluations=6))
    placement, best = ev.best()
    values = [ev.value(r.measurement) for r in ev.store.measurements(ev.study_name, status="ok")]
    assert len(values) > 1 and min(values) == ev.value(best)  # ranked by p99, not by the median
    assert ev.value(best) == best.latency_ms["p99"] == result.best_value
    assert ev.value(pt.Measurement.failure("runtime_failed", "no figures")) is None


def test_a_measurement_computes_a_registered_objective_and_refuses_a_misspelt_one(p99):
    """A misspelt objective's None read as a failed measurement (a search keeping the lowest value skipped
    every placement without a word); a registered objective is a name the measurement knows."""
    m = pt.Evaluator("seed-block", "orin-agx", mode="engine").baseline()
    assert m.objective("latency") == m.median_ms
    assert m.objective("p99_latency") == m.latency_ms["p99"]  # what the first-build check asks it
    assert pt.Measurement.failure("runtime_failed", "no figures").objective("p99_latency") is None
    with pytest.raises(UnknownNameError, match="objectives are latency, throughput, energy, gpu_time, p99_latency$"):
        m.objective("energy_mj")
    unregister_objective("p99_latency")
    try:
        with pytest.raises(UnknownNameError, match="objectives are latency, throughput, energy, gpu_time$"):
            m.objective("p99_latency")
    finally:
        toy_objective.register()


def test_placetune_tune_searches_a_registered_objective(p99, tmp_path, capsys):
    assert main(["tune", "--model", "seed-block", "--mode", "engine", "--objective", "p99_latency",
                 "--agent", "random", "--trials", "5", "--storage", f"sqlite:///{tmp_path / 'o.db'}",
                 "--study", "t", "--export", str(tmp_path / "o.json")]) == 0
    assert "p99_latency" in capsys.readouterr().out
    assert json.loads((tmp_path / "o.json").read_text())["objective"] == "p99_latency"  # exported: ranked by p99


def test_objective_registration_refuses_taken_names_and_bad_fields(p99):
    with pytest.raises(ConfigError, match="'latency' is taken; choose another name$"):
        pt.register_objective("latency", direction="minimize", unit="ms", value=toy_objective.p99_latency)
    with pytest.raises(ConfigError, match="'p99_latency' is taken"):
        pt.register_objective("p99_latency", direction="minimize", unit="ms", value=toy_objective.p99_latency)
    with pytest.raises(ConfigError, match="direction must be"):
        pt.register_objective("fast", direction="down", unit="ms", value=toy_objective.p99_latency)
    with pytest.raises(ConfigError, match="measured_from must name built-in objectives"):
        pt.register_objective("fast", direction="minimize", unit="ms", value=toy_objective.p99_latency,
                              measured_from=("speed",))
    with pytest.raises(ConfigError, match="lower-case letters"):
        pt.register_objective("P99", direction="minimize", unit="ms", value=toy_objective.p99_latency)
    with pytest.raises(UnknownNameError, match="no registered objective"):
        unregister_objective("fast")
