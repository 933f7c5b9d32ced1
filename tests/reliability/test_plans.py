"""Bad plan files: corrupted, for another model, with unknown layers or devices, randomly mutated.

Every one is refused by ``placetune.plan.load(path, model)`` with a PlacetuneError whose
message names the file or the model; none raises anything else.
"""

from __future__ import annotations

import copy
import json
import random
import traceback
from pathlib import Path

import pytest

from placetune import ConfigError, ModelError, PlacementError, PlacetuneError
from placetune.tuning.evaluator import Evaluator
from placetune.model.model import Model
from tests.seeds import FRESH, case_seed

from ._harness import COUNTS

plan_mod = pytest.importorskip("placetune.plan")


@pytest.fixture(scope="module")
def good_plan(tmp_path_factory):
    """A real plan exported from a short study of the seed block (pipeline mode)."""
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8", study="plans")
    ev.baselines()
    ev.evaluate({"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    plan = plan_mod.export_plan(ev.store, "plans", model=ev.model)
    path = tmp_path_factory.mktemp("plans") / "good.plan.json"
    plan.save(path)
    return path, ev.model


def _refused(path: Path, model, expected=PlacetuneError) -> str:
    COUNTS["plans_tried"] += 1
    with pytest.raises(expected) as info:
        plan_mod.load(path, model)
    msg = str(info.value)
    assert msg and "\n" not in msg and "Traceback" not in msg
    COUNTS["plans_refused"] += 1
    return msg


def test_good_plan_loads(good_plan):
    path, model = good_plan
    plan = plan_mod.load(path, model)
    assert plan.layer_names == list(model.names)


def test_corrupted_plan_files(good_plan, tmp_path):
    path, model = good_plan
    text = path.read_text()
    cases = {
        "truncated": text[: len(text) // 2],
        "empty": "",
        "not json": "this is not a plan\n",
        "a list": "[1, 2, 3]",
        "null": "null",
        "another format": json.dumps({"format": "something-else", "version": 1}),
        "newer version": text.replace('"version": 1', '"version": 999', 1),
        "missing fields": json.dumps({k: v for k, v in json.loads(text).items() if k not in ("layers", "engines")}),
    }
    for name, content in cases.items():
        p = tmp_path / f"{name.replace(' ', '_')}.json"
        p.write_text(content)
        msg = _refused(p, model, ConfigError)
        assert p.name in msg, (name, msg)
    binary = tmp_path / "binary.json"
    binary.write_bytes(bytes(range(256)) * 4)
    assert "binary.json" in _refused(binary, model, ConfigError)
    assert "does not exist" in _refused(tmp_path / "missing.json", model, ConfigError)
    assert "cannot read" in _refused(tmp_path, model, ConfigError)  # a directory


def test_plan_for_another_model(good_plan):
    path, _ = good_plan
    other = Model.load(Path(__file__).resolve().parents[1] / "data" / "seed_model_gn.onnx.gz")
    msg = _refused(path, other, ModelError)
    assert "the plan is for model" in msg and other.name in msg
    # without the hash check, the layer names still do not match
    COUNTS["plans_tried"] += 1
    with pytest.raises(PlacementError, match="layer"):
        plan_mod.load(path, other, check_hash=False)
    COUNTS["plans_refused"] += 1


def test_plan_with_unknown_layers_and_devices(good_plan, tmp_path):
    path, model = good_plan
    doc = json.loads(path.read_text())
    renamed = copy.deepcopy(doc)
    renamed["layers"][0]["name"] = "/conv99/Conv"
    for e in renamed["engines"]:
        e["layers"] = ["/conv99/Conv" if n == doc["layers"][0]["name"] else n for n in e.get("layers") or []]
        e["dla_layers"] = ["/conv99/Conv" if n == doc["layers"][0]["name"] else n for n in e.get("dla_layers") or []]
    p = tmp_path / "renamed.json"
    p.write_text(json.dumps(renamed))
    assert "/conv99/Conv" in _refused(p, model, PlacetuneError)
    engine_only = copy.deepcopy(doc)
    engine_only["engines"][0]["layers"] = list(engine_only["engines"][0].get("layers") or []) + ["ghost"]
    p = tmp_path / "ghost.json"
    p.write_text(json.dumps(engine_only))
    assert "ghost" in _refused(p, model, PlacementError)
    device = copy.deepcopy(doc)
    device["layers"][1]["realized"] = "DLA7"
    p = tmp_path / "device.json"
    p.write_text(json.dumps(device))
    assert "DLA7" in _refused(p, model, PlacementError)
    twice = copy.deepcopy(doc)
    twice["layers"].append(dict(twice["layers"][0]))
    p = tmp_path / "twice.json"
    p.write_text(json.dumps(twice))
    assert "twice" in _refused(p, model, ConfigError)


def _mutate(doc, rng: random.Random):
    """Delete a key, or replace a value by one of another type, somewhere in the document."""
    junk = [None, 0, -1, 1.5, float("nan"), "", "x", [], {}, [None], {"a": 1}, True, 10**30]
    node = doc
    path = []
    for _ in range(rng.randint(1, 4)):
        if isinstance(node, dict) and node:
            key = rng.choice(list(node))
        elif isinstance(node, list) and node:
            key = rng.randrange(len(node))
        else:
            break
        path.append((node, key))
        node = node[key]
    if not path:
        return doc
    parent, key = path[-1]
    if isinstance(parent, dict) and rng.random() < 0.3:
        del parent[key]
    else:
        parent[key] = rng.choice(junk)
    return doc


@pytest.mark.parametrize("seed", [7, FRESH])
def test_randomly_mutated_plans_never_crash(good_plan, tmp_path, seed):
    path, model = good_plan
    doc = json.loads(path.read_text())
    rng = random.Random(case_seed(seed))
    loaded = refused = 0
    crashes = []
    for i in range(300):
        bad = _mutate(copy.deepcopy(doc), rng)
        p = tmp_path / f"m{i}.json"
        p.write_text(json.dumps(bad))
        COUNTS["plans_tried"] += 1
        try:
            plan = plan_mod.load(p, model)
            plan.summary()
            loaded += 1
        except PlacetuneError as exc:
            assert str(exc) and "\n" not in str(exc)
            refused += 1
            COUNTS["plans_refused"] += 1
        except Exception as exc:  # noqa: BLE001 - what the test is looking for
            frames = traceback.extract_tb(exc.__traceback__)
            tb = next((f for f in reversed(frames) if "placetune" in f.filename), frames[-1])  # placetune's line
            crashes.append(f"{type(exc).__name__} at {Path(tb.filename).name}:{tb.lineno} ({tb.name}): {exc}"[:200])
    COUNTS["plans_crashed"] += len(crashes)
    assert refused > 50
    assert not crashes, crashes[:10]
