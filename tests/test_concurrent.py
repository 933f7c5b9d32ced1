"""Concurrent mode, several networks placed jointly and run at once (the merged
model measured as a pipeline), with per-network latencies, latency[NETWORK] constraints, the naive
whole-network-per-device baselines, and plans that carry every network."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from placetune import ConfigError, Evaluator, Model, Placement
from placetune.cli.main import main
from placetune.model.merge import load_networks, merge_models, network_names, networks_in
from placetune.model.source import load_source
from placetune.tuning.concurrent import naive_label, naive_placements, network_latencies
from placetune.tuning.constraints import parse_constraint


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return load_networks(["seed-block", "model-gn"], directory=tmp_path_factory.mktemp("merged"))


def test_the_merged_model_computes_each_network_unchanged(pair):
    """Side by side, prefixed: fed each network's input, the merged graph gives each network's output."""
    assert networks_in(pair) == ["seed-block", "model-gn"] and pair.name == "seed-block+model-gn"
    a, b = Model.load("seed-block"), Model.load("model-gn")
    assert len(pair.names) == len(a.names) + len(b.names)
    assert all(n.startswith(("seed-block/", "model-gn/")) for n in pair.names)
    rng = np.random.default_rng(0)
    feeds = {f"{net}/{i}": rng.standard_normal(s).astype(np.float32)
             for net, m in (("seed-block", a), ("model-gn", b)) for i, s in m.input_shapes.items()}
    weighted = load_source(pair)  # the merged file holds no weights: the networks' sources give them
    merged = ReferenceEvaluator(weighted).run(None, feeds)
    for net, m in (("seed-block", a), ("model-gn", b)):
        alone = ReferenceEvaluator(load_source(m)).run(None, {i: feeds[f"{net}/{i}"] for i in m.input_shapes})
        names = [o.name for o in weighted.graph.output]
        got = [v for n, v in zip(names, merged) if n.startswith(net + "/")]
        assert all(np.allclose(x, y, rtol=1e-5, atol=1e-5) for x, y in zip(got, alone))


def test_network_names_and_merge_refusals():
    assert network_names(["resnet50", "a/b/model.onnx", "c/model.onnx.gz"]) == ["resnet50", "model", "model-2"]
    from placetune.errors import ModelError

    with pytest.raises(ModelError, match="at least two"):
        merge_models([Model.load("seed-block")])


def test_per_network_latency_and_its_constraint(pair):
    ev = Evaluator(pair, "orin-agx", mode="pipeline", precision="int8", store=None, objective="latency")
    assert ev.networks == ["seed-block", "model-gn"]
    m = ev.evaluate(Placement.all_gpu(pair))
    lat = m.extra["network_latency_ms"]
    assert set(lat) == {"seed-block", "model-gn"}
    assert max(lat.values()) == pytest.approx(m.latency_ms["median"], rel=1e-6)  # the frame ends with the last
    assert lat == network_latencies(pair, m, ev.networks)
    c = parse_constraint("latency[model-gn]<=0.001")
    assert c.text == "latency[model-gn]<=0.001" and c.value(m) == pytest.approx(lat["model-gn"])
    assert not c.holds(m)
    with pytest.raises(ConfigError, match="only latency"):
        parse_constraint("energy[model-gn]<=3")


def test_naive_placements_put_each_network_on_one_device(pair):
    nets = networks_in(pair)
    naive = naive_placements(pair, nets)
    assert len(naive) == 9 and "seed-block:DLA0,model-gn:GPU" in naive
    for label, p in naive.items():
        assert naive_label(p.as_dict(), nets) == label
    assert naive_label({**naive["seed-block:GPU,model-gn:GPU"].as_dict(), pair.names[0]: "DLA0"}, nets) is None


def test_tune_concurrent_reports_naive_baselines_and_exports_every_network(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PLACETUNE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "--model", "seed-block", "--model", "model-gn", "--objective", "latency",
                 "--trials", "25", "--storage", f"sqlite:///{tmp_path}/pt.db", "--study", "c",
                 "--constraint", "latency[model-gn]<=50"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "concurrent (2 networks at once: seed-block, model-gn" in out
    assert "seed-block:DLA0,model-gn:GPU" in out and "constraint latency[model-gn]<=50 ms" in out
    assert "  model-gn: latency" in out
    plan = json.loads(Path("c.plan.json").read_text())
    assert [n["name"] for n in plan["model"]["networks"]] == ["seed-block", "model-gn"]
    assert [(n["source"], n["batch"]) for n in plan["model"]["networks"]] == [("seed-block", 1), ("model-gn", 32)]
    assert sum(n["layers"] for n in plan["model"]["networks"]) == plan["model"]["layers"]
    assert "all-gpu" in plan["baselines"]
    # a naive plan the model rules out is listed with the reason, not measured
    assert re.search(r"^seed-block:DLA0,model-gn:GPU +not measured: the uncorrected simulator predicts it [\d.]+x worse",
                     out, re.M)
    assert "seed-block:DLA0,model-gn:GPU" not in plan["baselines"]
    best = plan["measured"]["latency_ms"]["median"]
    assert all(best <= b["latency_ms"]["median"] + 1e-9 for b in plan["baselines"].values())
    # the deployment folder cuts both networks' segments from the merged model
    assert main(["export", "--study", "c", "--storage", f"sqlite:///{tmp_path}/pt.db", "--format", "trtexec",
                 "-o", str(tmp_path / "d")]) == 0
    files = {p.name for p in (tmp_path / "d").iterdir()}
    assert {"build.sh", "plan.json"} <= files and any(f.endswith(".onnx") for f in files)


def test_concurrent_mode_refusals(capsys):
    assert main(["tune", "--model", "seed-block", "--mode", "concurrent", "--trials", "2"]) == 6
    assert "two or more" in capsys.readouterr().err
    assert main(["tune", "--model", "seed-block", "--model", "model-gn", "--mode", "pipeline", "--trials", "2"]) == 6
    assert "only in concurrent mode" in capsys.readouterr().err
    assert main(["tune", "--model", "seed-block", "--model", "seed-block", "--trials", "2"]) == 6
    assert "named twice" in capsys.readouterr().err
