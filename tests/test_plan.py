"""Plan export, the plan file, apply() on a duck-typed TensorRT network, and trtexec commands."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
from types import SimpleNamespace

import numpy as np
import pytest

import placetune
from placetune import Placement
from placetune.errors import ConfigError, ModelError, PlacementError, PlacetuneError, UnknownNameError
from placetune.backends.trtexec.command import layer_device_types
from placetune.plan.apply import onnx_node_of
from placetune.plan.export import export_plan
from placetune.plan.file import PLAN_FORMAT, PLAN_VERSION, Plan, load
from placetune.plan.simulate import simulate_plan
from placetune.plan.trtexec import trtexec_commands, trtexec_script
from placetune.store.store import Store


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A small pipeline study of seed-block: baselines, a few sampled placements, one DLA placement."""
    tmp = tmp_path_factory.mktemp("plan")
    url = f"sqlite:///{tmp}/pt.db"
    ev = placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", store=url, study="s")
    ev.baselines()
    space = ev.space()
    rng = np.random.default_rng(3)  # seeded: an unseeded sample could realise the DLA placement below first
    for i in range(4):
        ev.evaluate(space.to_placement(space.sample(rng)), agent="random", trial_number=i)
    m = ev.evaluate(Placement(ev.model, {"/conv4/Conv": "DLA1", "/conv3/Conv": "DLA0"}), agent="local",
                    trial_number=0)
    yield SimpleNamespace(url=url, tmp=tmp, ev=ev, model=ev.model, dla_id=m.extra["_id"])
    ev.close()


@pytest.fixture(scope="module")
def engine_plan():
    """An engine-mode FP16 plan whose realised placement puts two convolutions on DLA0."""
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", precision="fp16", study="e") as ev:
        ev.baseline()
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}), agent="t",
                        trial_number=7)
        plan = export_plan(ev.store, "e", measurement_id=m.extra["_id"], model=ev.model)
    return plan


# --------------------------------------------------------------------------- fakes of TensorRT
class FakeLayer:
    """A network layer: name, optional metadata, and (optionally) the tensor names it reads and writes."""

    def __init__(self, name: str, metadata: str | None = None, ins: tuple[str, ...] = (),
                 outs: tuple[str, ...] = ()) -> None:
        self.name = name
        if metadata is not None:
            self.metadata = metadata
        self._ins, self._outs = [SimpleNamespace(name=t) for t in ins], [SimpleNamespace(name=t) for t in outs]
        self.num_inputs, self.num_outputs = len(ins), len(outs)

    def get_input(self, i: int):
        return self._ins[i]

    def get_output(self, i: int):
        return self._outs[i]


class FakeNetwork:
    def __init__(self, layers: list[FakeLayer]) -> None:
        self._layers = layers

    @property
    def num_layers(self) -> int:
        return len(self._layers)

    def get_layer(self, i: int) -> FakeLayer:
        return self._layers[i]


class FakeConfig:
    def __init__(self) -> None:
        self.default_device_type = None
        self.DLA_core = -1
        self.flags: list[str] = []
        self.devices: dict[str, str] = {}

    def set_flag(self, flag: str) -> None:
        self.flags.append(flag)

    def set_device_type(self, layer: FakeLayer, device: str) -> None:
        self.devices[layer.name] = device


FAKE_TRT = SimpleNamespace(
    DeviceType=SimpleNamespace(GPU="kGPU", DLA="kDLA"),
    BuilderFlag=SimpleNamespace(GPU_FALLBACK="kGPU_FALLBACK"),
)


# --------------------------------------------------------------------------- export / load
def test_export_load_round_trip(study):
    store = Store(study.url)
    plan = export_plan(store, "s")
    store.close()
    path = plan.save(study.tmp / "plan.json")
    doc = json.loads(path.read_text())
    assert doc["format"] == PLAN_FORMAT and doc["version"] == PLAN_VERSION
    assert doc["simulated"] is True and doc["label"].startswith("SIMULATED")
    assert doc["model"]["hash"] == study.model.hash
    assert doc["model"]["input_shapes"] == {"input": [1, 384, 56, 56]}
    assert doc["model"]["zoo"] == "seed-block"
    assert [layer["name"] for layer in doc["layers"]] == study.model.names
    assert all({"requested", "realized"} <= set(layer) for layer in doc["layers"])
    assert doc["measured"]["latency_ms"]["median"] > 0 and doc["measured"]["latency_ms"]["p99"] > 0
    assert doc["measured"]["throughput_fps"] > 0 and doc["measured"]["energy_mj"] > 0
    assert doc["baselines"]["all-gpu"]["measurement_id"] >= 1
    assert doc["source"]["study"] == "s" and doc["source"]["measurement_id"] == plan.source["measurement_id"]
    assert doc["versions"]["dla_rules_tensorrt"] == "8.6" and "tensorrt" not in doc["versions"]
    # pipeline: the segments hold every layer exactly once
    seg_layers = [n for e in doc["engines"] for n in e["layers"]]
    assert sorted(seg_layers) == sorted(study.model.names)
    assert all(e["kind"] == "segment" for e in doc["engines"])

    again = load(path, study.model)
    assert again.to_dict() == plan.to_dict()
    assert Plan.load(path).realized == plan.realized


def test_export_chosen_measurement_has_dla_segments(study):
    with Store(study.url) as store:
        plan = export_plan(store, "s", measurement_id=study.dla_id)
    assert plan.source["measurement_id"] == study.dla_id and plan.source["agent"] == "local"
    assert plan.requested["/conv3/Conv"] == "DLA0" and plan.requested["/conv4/Conv"] == "DLA1"
    dla = [e for e in plan.engines if e["device"] != "GPU"]
    assert {(e["device"], e["dla_core"]) for e in dla} == {("DLA0", 0), ("DLA1", 1)}
    for e in dla:
        assert e["dla_layers"] == e["layers"]
    assert plan.baselines["all-gpu"]["speedup"] is not None
    assert "SIMULATED" in plan.summary()


def test_export_errors(study):
    with Store(study.url) as store:
        with pytest.raises(UnknownNameError):
            export_plan(store, "no-such-study")
        with pytest.raises(ConfigError, match="not a measurement of study"):
            export_plan(store, "s", measurement_id=10_000)
        other = placetune.Model.load("resnet18", batch=1)
        with pytest.raises(ModelError, match="is not the model of study"):
            export_plan(store, "s", model=other)


def test_load_against_another_model(study):
    with Store(study.url) as store:
        path = export_plan(store, "s").save(study.tmp / "p_other.json")
    other = placetune.Model.load("model-gn")
    with pytest.raises(ModelError) as exc:
        load(path, other)
    msg = str(exc.value)
    assert "seed-block" in msg and "model-gn" in msg and study.model.hash[:12] in msg


def test_load_unknown_layer_names(study):
    with Store(study.url) as store:
        doc = export_plan(store, "s").to_dict()
    doc["layers"][1]["name"] = "/conv2/Conv_renamed"
    for e in doc["engines"]:
        e["layers"] = ["/conv2/Conv_renamed" if n == "/conv2/Conv" else n for n in e["layers"]]
    path = study.tmp / "p_unknown.json"
    path.write_text(json.dumps(doc))
    load(path)  # consistent on its own
    with pytest.raises(PlacementError, match=r"/conv2/Conv_renamed.*did you mean '/conv2/Conv'"):
        load(path, study.model)


@pytest.mark.parametrize(
    "mutate, error, pattern",
    [
        (lambda text: text[: len(text) // 2], ConfigError, "not valid JSON.*line"),
        (lambda text: "[1, 2]", ConfigError, "expected a JSON object"),
        (lambda text: text.replace('"placetune-plan"', '"other-format"'), ConfigError, "format.*other-format"),
        (lambda text: text.replace('"version": 1', '"version": 99', 1), ConfigError, "version 99, newer"),
        (lambda text: text.replace('"realized": "GPU"', '"realized": "TPU"', 1), PlacementError, "TPU"),
        (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "layers"}), ConfigError,
         "lacks the field.*layers"),
    ],
)
def test_load_corrupt_files(study, mutate, error, pattern):
    with Store(study.url) as store:
        text = export_plan(store, "s").to_json()
    path = study.tmp / "bad.json"
    path.write_text(mutate(text))
    with pytest.raises(error, match=pattern):
        load(path)


def test_load_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "nope.json")


# --------------------------------------------------------------------------- apply
def test_onnx_node_of_metadata():
    assert onnx_node_of("[ONNX Layer: /conv1/Conv]") == ["/conv1/Conv"]
    # onnx-tensorrt 10.x: properties inside the brackets after " | "; a name may hold "]"
    assert onnx_node_of("[ONNX Layer: a]b | Local Function: f]") == ["a]b"]
    assert onnx_node_of(None) == [] and onnx_node_of("") == []


def test_apply_engine_mode(engine_plan):
    plan = engine_plan
    assert plan.mode == "engine" and plan.engines[0]["dla_core"] == 0
    dla = {n for n, d in plan.realized.items() if d == "DLA0"}
    assert dla == {"/conv3/Conv", "/conv4/Conv"}
    net = FakeNetwork([
        FakeLayer("/conv1/Conv", "[ONNX Layer: /conv1/Conv]"),
        FakeLayer("/conv2/Conv"),
        FakeLayer("/conv3/Conv"),
        FakeLayer("/conv3/Conv_7", "[ONNX Layer: /conv3/Conv]", outs=("c3",)),  # helper layer of a DLA node
        # onnx-tensorrt 10.x leaves a bias add unregistered: TensorRT's default name, no metadata
        FakeLayer("(Unnamed Layer* 5) [ElementWise]", ins=("c3",), outs=("c3b",)),
        FakeLayer("/conv4/Conv", ins=("c3b",)),
        FakeLayer("ONNXTRT_ShapeShuffle_0"),  # an onnx-tensorrt 10.x helper serving nothing here: GPU
        FakeLayer("(Unnamed Layer* 8) [Shuffle]", ins=("g",), outs=("g2",)),  # serves a GPU layer
        FakeLayer("/Concat", ins=("g2",)),
    ])
    config = FakeConfig()
    report = plan.apply(net, config, trt=FAKE_TRT)
    # trtexec --useDLACore's semantics: DLA by default, every layer set explicitly
    assert config.default_device_type == "kDLA"
    assert config.DLA_core == 0
    assert config.flags == ["kGPU_FALLBACK"]
    on_dla = {n for n, d in config.devices.items() if d == "kDLA"}
    assert on_dla == {"/conv3/Conv", "/conv3/Conv_7", "(Unnamed Layer* 5) [ElementWise]", "/conv4/Conv"}
    assert set(config.devices) == {layer.name for layer in net._layers}
    assert report.helpers == ["(Unnamed Layer* 5) [ElementWise]"]
    assert report.dla_core == 0 and report.ok
    assert report.by_metadata == ["/conv3/Conv_7"]
    assert report.unmatched == [] and config.devices["ONNXTRT_ShapeShuffle_0"] == "kGPU"
    assert report.matched["/conv3/Conv_7"] == "/conv3/Conv"
    assert "GPU_FALLBACK" in report.flags and "FP16" not in report.flags  # the fake has no BuilderFlag.FP16
    assert any("FP16" in n for n in report.notes)
    assert "SIMULATED" in " ".join(report.notes)


def test_apply_sets_precision_flag_and_reports_missing(engine_plan):
    trt = SimpleNamespace(DeviceType=FAKE_TRT.DeviceType,
                          BuilderFlag=SimpleNamespace(GPU_FALLBACK="kGPU_FALLBACK", FP16="kFP16"))
    config = FakeConfig()
    report = engine_plan.apply(FakeNetwork([FakeLayer("/conv1/Conv"), FakeLayer("/conv4/Conv")]), config, trt=trt)
    assert config.flags == ["kGPU_FALLBACK", "kFP16"]
    assert set(report.missing) == {"/conv2/Conv", "/conv3/Conv", "/Concat"} and not report.ok


def test_apply_int8_sets_fp16_too_as_measured(engine_plan):
    """An int8 plan was measured with FP16 and INT8 set (the tensorrt worker's build; trtexec --fp16
    --int8). INT8 alone is "Int8 layer selection, with FP32 fallback" (TensorRT release/10.3
    include/NvInfer.h:8302), and the DLA runs no FP32: the engine built from the plan would differ."""
    trt = SimpleNamespace(DeviceType=FAKE_TRT.DeviceType,
                          BuilderFlag=SimpleNamespace(GPU_FALLBACK="kGPU_FALLBACK", FP16="kFP16", INT8="kINT8"))
    config = FakeConfig()
    plan = dataclasses.replace(engine_plan, precision="int8")
    report = plan.apply(FakeNetwork([FakeLayer("/conv1/Conv"), FakeLayer("/conv4/Conv")]), config, trt=trt)
    assert config.flags == ["kGPU_FALLBACK", "kFP16", "kINT8"]
    assert report.flags == ["GPU_FALLBACK", "FP16", "INT8"]


def test_apply_refuses_a_foreign_network(engine_plan):
    config = FakeConfig()
    with pytest.raises(PlacementError, match="none of the network's 2 layers"):
        engine_plan.apply(FakeNetwork([FakeLayer("fc1"), FakeLayer("fc2")]), config, trt=FAKE_TRT)
    assert config.default_device_type is None and config.flags == [] and config.devices == {}  # untouched
    with pytest.raises(ConfigError, match="one engine"):
        engine_plan.apply(FakeNetwork([]), FakeConfig(), segment=0, trt=FAKE_TRT)


def test_apply_pipeline_per_segment(study):
    with Store(study.url) as store:
        plan = export_plan(store, "s", measurement_id=study.dla_id)
    with pytest.raises(ConfigError, match="segment engines"):
        plan.apply(FakeNetwork([]), FakeConfig(), trt=FAKE_TRT)
    with pytest.raises(ConfigError, match="does not exist"):
        plan.apply(FakeNetwork([]), FakeConfig(), segment=99, trt=FAKE_TRT)
    seg = next(e for e in plan.engines if e["device"] == "DLA1")
    config = FakeConfig()
    report = plan.apply(FakeNetwork([FakeLayer(n) for n in seg["layers"]]), config, segment=seg["index"],
                        trt=FAKE_TRT)
    assert config.DLA_core == 1 and set(config.devices) == set(seg["layers"])
    assert report.engine == f"segment {seg['index']} (DLA1)" and report.ok
    gpu = next(e for e in plan.engines if e["device"] == "GPU")
    config = FakeConfig()
    report = plan.apply(FakeNetwork([FakeLayer(n) for n in plan.layer_names]), config, segment=gpu["index"],
                        trt=FAKE_TRT)
    assert config.devices == {} and config.DLA_core == -1 and config.default_device_type == "kGPU"
    assert report.other_engine  # the whole network was passed: the other segments' layers are reported


def test_apply_without_tensorrt_is_a_clear_error(engine_plan, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "tensorrt", None)
    with pytest.raises(placetune.BackendError, match="TensorRT"):
        engine_plan.apply(FakeNetwork([]), FakeConfig())


# --------------------------------------------------------------------------- trtexec
def _trtexec_layer_device_types(value: str) -> dict[str, str]:
    """trtexec's grammar (sampleOptions.cpp): split the list on ',', each pair on its LAST ':'."""
    out = {}
    for pair in value.split(","):
        name, sep, device = pair.rpartition(":")
        assert sep and device in ("GPU", "DLA"), pair
        out[name] = device
    return out


def _engine_doc(names_devices: dict[str, str], **kw) -> dict:
    layers = [{"name": n, "requested": d, "realized": d} for n, d in names_devices.items()]
    dla = [n for n, d in names_devices.items() if d != "GPU"]
    doc = {
        "format": PLAN_FORMAT, "version": 1, "simulated": True, "model": {"hash": "x", "name": "net",
                                                                         "input_shapes": {"in:0": [1, 3, 8, 8]},
                                                                         "dynamic_inputs": ["in:0"]},
        "platform": "orin-agx", "mode": "engine", "precision": "fp16", "batch": 1, "layers": layers,
        "engines": [{"index": 0, "kind": "engine", "device": "DLA0", "dla_core": 0, "layers": list(names_devices),
                     "dla_layers": dla}],
        "settings": {"gpu_fallback": True, "trt_version": "8.6"},
    }
    doc.update(kw)
    return doc


def test_trtexec_layer_device_types_grammar():
    names = {
        "/backbone/layer1.0/conv1/Conv": "DLA0",
        "ns:block:7": "GPU",
        "head.fc": "DLA0",
        "node_of_out:0": "GPU",
        "weird name with spaces": "DLA0",
        "a=b": "GPU",
    }
    plan = Plan.from_dict(_engine_doc(names))
    lines = trtexec_commands(plan, onnx_path="my models/net.onnx")
    commands = [c for c in lines if not c.startswith("#")]
    assert len(commands) == 1
    argv = shlex.split(commands[0])
    assert argv[0] == "trtexec"
    assert "--onnx=my models/net.onnx" in argv and "--fp16" in argv
    assert "--useDLACore=0" in argv and "--allowGPUFallback" in argv
    assert "--shapes=in:0:1x3x8x8" in argv and "--saveEngine=my models/net.engine" in argv
    value = next(a for a in argv if a.startswith("--layerDeviceTypes=")).partition("=")[2]  # trtexec: first '='
    parsed = _trtexec_layer_device_types(value)
    assert parsed == {n: ("GPU" if d == "GPU" else "DLA") for n, d in names.items()}
    assert layer_device_types({"x:y": "DLA1"}) == "x:y:DLA"


def test_trtexec_refuses_names_it_cannot_express():
    plan = Plan.from_dict(_engine_doc({"/a/Conv": "DLA0", "concat,1": "GPU"}))
    with pytest.raises(PlacementError, match=r"'concat,1' contains ','.*Python API"):
        trtexec_commands(plan)
    with pytest.raises(PlacementError, match="single quote"):
        layer_device_types({"it's": "DLA0"})


def test_trtexec_old_and_new_tensorrt():
    plan = Plan.from_dict(_engine_doc({"/a/Conv": "DLA0", "/b/Softmax": "GPU"}))
    old = trtexec_commands(plan, trt_version="8.5.2")
    warning = [c for c in old if c.startswith("# WARNING")]
    assert len(warning) == 1 and "--layerDeviceTypes" in warning[0] and "apply" in warning[0]
    assert not any(c.startswith("# WARNING") for c in trtexec_commands(plan, trt_version="10.3"))
    new = [c for c in trtexec_commands(plan, trt_version="11.4") if not c.startswith("#")]
    assert "--fp16" not in shlex.split(new[0])
    # a whole-DLA engine needs no --layerDeviceTypes, so no warning either
    all_dla = Plan.from_dict(_engine_doc({"/a/Conv": "DLA0", "/b/Conv": "DLA0"}))
    lines = trtexec_commands(all_dla, trt_version="8.5")
    assert not any("layerDeviceTypes=" in c for c in lines) and not any(c.startswith("# WARNING") for c in lines)
    script = trtexec_script(all_dla)
    assert script.startswith("#!/bin/sh\nset -e\n") and "trtexec --onnx=model.onnx" in script


def test_trtexec_pipeline_one_command_per_segment(study):
    with Store(study.url) as store:
        plan = export_plan(store, "s", measurement_id=study.dla_id)
    lines = trtexec_commands(plan, onnx_path="net.onnx")
    commands = [shlex.split(c) for c in lines if not c.startswith("#")]
    assert len(commands) == len(plan.engines)
    for e, argv in zip(plan.engines, commands):
        assert f"--onnx=net.seg{e['index']}.onnx" in argv and f"--saveEngine=net.seg{e['index']}.engine" in argv
        if e["device"] == "GPU":
            assert not any(a.startswith("--useDLACore") for a in argv)
        else:
            assert f"--useDLACore={e['dla_core']}" in argv
    assert any("placetune export --format trtexec -o DIR" in c for c in lines if c.startswith("#"))
    assert any("SIMULATED" in c for c in lines if c.startswith("#"))


def test_trtexec_replicas_one_command_per_device():
    with placetune.Evaluator("seed-block", "orin-agx", mode="replicas", objective="throughput", study="r",
                             replicas={"GPU": 4, "DLA0": 2, "DLA1": 2}) as ev:
        p = Placement.all_dla(ev.model, 0)
        m = ev.evaluate(p)
        plan = export_plan(ev.store, "r", measurement_id=m.extra["_id"], model=ev.model)
    assert [(e["device"], e["batch"]) for e in plan.engines] == [("GPU", 4), ("DLA0", 2), ("DLA1", 2)]
    commands = [shlex.split(c) for c in trtexec_commands(plan) if not c.startswith("#")]
    assert len(commands) == 3
    assert not any(a.startswith("--useDLACore") for a in commands[0])
    assert "--useDLACore=1" in commands[2] and "--saveEngine=model.dla1.engine" in commands[2]
    # seed-block's inputs are static: no --shapes (trtexec refuses it); the script says to export per batch
    assert not any(a.startswith("--shapes") for c in commands for a in c)
    assert any("export the ONNX at batch 2" in c for c in trtexec_commands(plan))
    config = FakeConfig()
    report = plan.apply(FakeNetwork([FakeLayer(n) for n in plan.layer_names]), config, replica="DLA1", trt=FAKE_TRT)
    assert config.DLA_core == 1 and report.engine == "replica DLA1"


# --------------------------------------------------------------------------- re-simulating a plan
def test_simulate_plan(engine_plan):
    m = simulate_plan(engine_plan)
    assert m.ok and m.simulated and m.timeline
    assert m.realized == engine_plan.realized


# --------------------------------------------------------------------------- CLI
def _cli(*argv: str) -> int:
    from placetune.cli.results import add_parsers

    parser = argparse.ArgumentParser(prog="placetune")
    add_parsers(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_export_json_and_trtexec(study, capsys):
    out = study.tmp / "cli_plan.json"
    assert _cli("export", "--study", "s", "--storage", study.url, "-o", str(out)) == 0
    text = capsys.readouterr().out
    assert "SIMULATED" in text and f"wrote plan {out}" in text
    assert load(out, study.model).source["study"] == "s"
    script = study.tmp / "build.sh"
    assert _cli("export", "--study", "s", "--storage", study.url, "-o", str(script), "--format", "trtexec",
                "--onnx", "seed.onnx", "--measurement", str(study.dla_id)) == 0
    body = script.read_text()
    assert body.startswith("#!/bin/sh") and "--onnx=seed.seg0.onnx" in body and "--useDLACore=1" in body
    capsys.readouterr()
    assert _cli("export", "--study", "s", "--storage", study.url) == 0  # JSON on stdout
    assert json.loads(capsys.readouterr().out)["format"] == PLAN_FORMAT


def test_cli_export_errors(study, tmp_path):
    with pytest.raises(UnknownNameError, match="no study 'nope'"):
        _cli("export", "--study", "nope", "--storage", study.url)
    with pytest.raises(PlacetuneError, match="does not exist"):
        _cli("export", "--study", "s", "--storage", f"sqlite:///{tmp_path}/missing.db")
    assert not (tmp_path / "missing.db").exists()  # never creates an empty database


def test_export_hardware_study_takes_versions_from_the_fingerprint(tmp_path):
    from placetune.measurement import Measurement

    model = placetune.Model.load("seed-block")
    fingerprint = {"backend": "tensorrt", "trt_version": "8.5.2.2", "jetpack": "5.1.1-b56", "l4t": "35.3.1",
                   "module": "p3701-0005", "power_mode": "MAXN", "clocks_locked": True}
    with Store(f"sqlite:///{tmp_path}/hw.db") as store:
        st = store.create_or_open_study("hw", model, "orin-agx", "tensorrt", "engine", "latency", "fp16", 1,
                                        {"gpu_fallback": True, "trt_version": "8.5"}, fingerprint, False)
        dev = {n: ("DLA0" if n in ("/conv3/Conv", "/conv4/Conv") else "GPU") for n in model.names}
        store.record(st, "k", "k", Measurement("ok", latency_samples_ms=[2.0, 2.2], requested=dev, realized=dev,
                                               backend="tensorrt-8.5"), agent="manual")
        plan = export_plan(store, "hw")
    assert not plan.simulated and plan.label == "" and "SIMULATED" not in plan.summary()
    assert plan.versions["tensorrt"] == "8.5.2.2" and plan.versions["jetpack"] == "5.1.1-b56"
    assert plan.versions["module"] == "p3701-0005" and "simulator" not in plan.versions
    assert "no all-GPU measurement" in " ".join(plan.notes)
    lines = trtexec_commands(plan)  # target = the measured TensorRT 8.5: no --layerDeviceTypes there
    assert any(c.startswith("# WARNING") and "8.5.2.2" in c for c in lines)
    assert not any("SIMULATED" in c for c in lines)


def test_exported_script_cannot_be_injected_through_names(engine_plan, tmp_path):
    """A study named "x\\ntouch PWNED" once put `touch PWNED` on a line of its own in
    the script's '# study' comment, and running the script ran it. Every comment stays one
    line; a NUL byte, which no shell script can carry, is refused."""
    import copy
    import subprocess

    from placetune.plan.trtexec import trtexec_script

    plan = copy.deepcopy(engine_plan)
    plan.source["study"] = "x\ntouch PWNED\r\n$(touch PWNED2)"
    plan.source["agent"] = "a\u2028touch PWNED3"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "trtexec").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "trtexec").chmod(0o755)
    script = tmp_path / "build.sh"
    script.write_text(trtexec_script(plan, onnx_path="net work.onnx", trt_version="10.3"))
    r = subprocess.run(["sh", str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                       env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert not list(tmp_path.glob("PWNED*"))
    assert "# study x\\ntouch PWNED\\r\\n$(touch PWNED2)" in script.read_text()
    plan.source["study"] = "nul\x00byte"
    with pytest.raises(ConfigError, match="NUL byte"):
        trtexec_script(plan)


def test_export_decodes_only_the_rows_it_reports(study, monkeypatch):
    """Exporting read and decoded every stored measurement of the study to find its baselines: a
    second per 2,000 rows at the end of every tune. It reads the best and the baseline rows."""
    from placetune.store import queries

    with Store(study.url) as store:
        every = {r.id: r for r in store.measurements("s")}
        full = export_plan(store, "s", model=study.model).to_dict()
        decoded: list[int] = []
        real = queries.measurement_record
        monkeypatch.setattr(queries, "measurement_record", lambda row: decoded.append(row.id) or real(row))
        doc = export_plan(store, "s", model=study.model).to_dict()
    assert set(doc["baselines"]) == {"all-gpu", "all-dla0", "all-dla1"}
    assert {k: v["measurement_id"] for k, v in doc["baselines"].items()} == \
        {k: v["measurement_id"] for k, v in full["baselines"].items()}
    assert all(every[v["measurement_id"]].requested and set(every[v["measurement_id"]].requested.values()) ==
               {k.split("-")[1].upper()} for k, v in doc["baselines"].items())
    assert len(decoded) <= 4 < len(every)  # the best and the three baselines, not all nine rows


def test_plugin_comments_in_the_trtexec_script():
    from placetune.plan.trtexec import plugin_comments
    assert plugin_comments(None, (8, 6)) == []
    builtin = plugin_comments({"/nms": "EfficientNMS_TRT"}, (8, 6))
    assert builtin[0] == "# plugin layers (GPU only, never on the DLA): EfficientNMS_TRT"
    assert "no plugin library" in builtin[1]
    custom = plugin_comments({"/nms": "EfficientNMS_TRT", "/mine": "MyDecode"}, (10, 3))
    assert "MyDecode is not one of TensorRT's built-in plugins" in custom[1] and "--staticPlugins=" in custom[1]
    assert "--plugins=" in plugin_comments({"/mine": "MyDecode"}, (8, 5))[1]


def test_export_refuses_a_measurement_whose_realised_placement_is_unknown(study):
    from placetune.measurement import Measurement

    m = Measurement(status="ok", latency_samples_ms=[1.0, 1.1], requested={"/conv3/Conv": "DLA0"}, realized=None,
                    simulated=True, backend="simulate-1", mode="pipeline",
                    extra={"placement_known": False, "placement_unknown": "neither the build log nor ... says"})
    with Store(study.url) as store:
        mid = store.record("s", "unknown-request", "unknown-placement", m, agent="t", trial_number=99)
        with pytest.raises(ConfigError, match="no known realised placement .neither the build log"):
            export_plan(store, "s", measurement_id=mid, model=study.model)


def test_trtexec_lists_the_parsers_own_layers_as_measured_on_the_same_tensorrt():
    """Under --useDLACore a layer --layerDeviceTypes does not name goes to the DLA
    (sampleEngines.cpp: setDefaultDeviceType(kDLA), then setLayerDeviceTypes by name), so the
    exported command left a GPU node's further layers (``max_3``: onnx-tensorrt elementwiseHelper,
    generateUniqueName) on the DLA. The plan keeps them as measured; the command lists them when
    it targets the measured TensorRT (another version's parser names them its own way)."""
    doc = _engine_doc({"/a/Conv": "DLA0", "max": "GPU", "/b/Conv": "DLA0"}, versions={"tensorrt": "10.3.0"})
    doc["engines"][0]["parser_layers"] = {"max_3": "GPU", "ONNXTRT_Broadcast_5": "GPU", "w,1": "GPU"}
    plan = Plan.from_dict(doc)

    def spec(version):
        lines = trtexec_commands(plan, trt_version=version)
        argv = shlex.split(next(c for c in lines if not c.startswith("#")))
        value = next(a for a in argv if a.startswith("--layerDeviceTypes=")).partition("=")[2]
        return _trtexec_layer_device_types(value), lines

    same, lines = spec("10.3.0")
    assert same == {"/a/Conv": "DLA", "max": "GPU", "/b/Conv": "DLA", "max_3": "GPU", "ONNXTRT_Broadcast_5": "GPU"}
    assert any("listed as measured" in c for c in lines)
    other, lines = spec("8.6.1")
    assert "max_3" not in other and any("names them its own way" in c for c in lines)
    doc["engines"][0]["parser_layers"] = {"max_3": "CPU"}
    with pytest.raises(ConfigError, match=r"parser_layers must be an object of layer name"):
        Plan.from_dict(doc)


def test_apply_places_the_parsers_own_layers_as_measured_on_the_same_tensorrt(engine_plan):
    """TensorRT 8.5's parser gives a node's second layer ``<node>_<k>`` with no metadata
    (onnx-tensorrt 8.5-GA generateUniqueName, no processMetadata before 8.6-GA): apply matched it to
    nothing and left it on the GPU, splitting the node's DLA island. The plan's measured
    ``parser_layers`` say where it was built; they are used on the measured TensorRT only."""
    import copy

    plan = copy.deepcopy(engine_plan)
    plan.engines[0]["parser_layers"] = {"/conv3/Conv_7": "DLA", "/Concat_9": "GPU"}
    plan.versions["tensorrt"] = "8.5.2"

    def net():
        return FakeNetwork([FakeLayer("/conv3/Conv"), FakeLayer("/conv3/Conv_7"), FakeLayer("/conv4/Conv"),
                            FakeLayer("/Concat"), FakeLayer("/Concat_9")])

    trt85 = SimpleNamespace(__version__="8.5.2.2", **vars(FAKE_TRT))
    config = FakeConfig()
    report = plan.apply(net(), config, trt=trt85)
    assert config.devices["/conv3/Conv_7"] == "kDLA" and config.devices["/Concat_9"] == "kGPU"
    assert "/conv3/Conv_7" not in report.unmatched and "/Concat_9" not in report.unmatched
    config = FakeConfig()
    report = plan.apply(net(), config, trt=SimpleNamespace(__version__="8.6.1", **vars(FAKE_TRT)))
    assert config.devices["/conv3/Conv_7"] == "kGPU" and "/conv3/Conv_7" in report.unmatched


@pytest.mark.parametrize("name", ["in,0", "in'0", "a,b'c"])
def test_trtexec_script_refuses_an_input_name_shapes_cannot_express(name):
    """trtexec splits --shapes at every ',' and strips single quotes from names (sampleOptions.cpp): a dynamic
    input so named is refused with one line naming it, never silently left without its --shapes."""
    doc = _engine_doc({"/conv1/Conv": "DLA0", "/relu/Relu": "GPU"})
    doc["model"].update(input_shapes={name: [4, 3, 8, 8]}, dynamic_inputs=[name])
    plan = Plan.from_dict(doc)
    with pytest.raises(ModelError) as exc:
        trtexec_commands(plan, onnx_path="net.onnx")
    assert repr(name) in str(exc.value) and "--shapes" in str(exc.value) and "\n" not in str(exc.value)
    doc["model"].update(dynamic_inputs=[])  # a static input takes no --shapes: nothing to refuse
    assert not any("--shapes" in c for c in trtexec_commands(Plan.from_dict(doc), onnx_path="net.onnx"))


@pytest.mark.parametrize("missing, said", [
    ({"power_mode": None}, "power mode was never read from the board"),
    ({"clocks_locked": None}, "whether jetson_clocks had locked the clocks was never read"),
])
def test_a_night_whose_board_power_mode_or_clock_lock_was_not_read_says_so_in_the_plan(tmp_path, missing, said):
    """In a container without nvpmodel (a JetPack 6 image with /var/lib/nvpmodel/status not mounted) the
    night records every figure under the study's power_mode, said once on the night's terminal; the plan
    said 'The plan's figures are of power mode MAXN' as a fact. It now says the mode was never read."""
    from placetune.measurement import Measurement
    from placetune.plan.folder import write_plan_folder

    model = placetune.Model.load("seed-block")
    fingerprint = {"backend": "tensorrt", "trt_version": "10.3.0", "jetpack": "6.2", "l4t": "36.4.3",
                   "module": "p3701-0005", "power_mode": "MAXN", "clocks_locked": True, **missing}
    with Store(f"sqlite:///{tmp_path}/hw.db") as store:
        st = store.create_or_open_study("hw", model, "orin-agx", "tensorrt", "engine", "latency", "fp16", 1,
                                        {"gpu_fallback": True, "trt_version": "10.3", "power_mode": "MAXN"},
                                        fingerprint, False)
        dev = {n: "GPU" for n in model.names}
        store.record(st, "k", "k", Measurement("ok", latency_samples_ms=[2.0, 2.2], requested=dev, realized=dev,
                                               backend="tensorrt-10.3"), agent="manual")
        plan = export_plan(store, "hw")
    assert any(said in n for n in plan.notes), plan.notes
    readme = (write_plan_folder(plan, model, tmp_path / "folder").directory / "README.txt").read_text()
    if "power_mode" in missing:
        assert "figures are of power mode MAXN" not in readme and "never read from the board" in readme


def test_a_board_that_reported_its_power_mode_and_lock_gets_no_such_note(tmp_path):
    from placetune.measurement import Measurement

    model = placetune.Model.load("seed-block")
    fingerprint = {"backend": "tensorrt", "trt_version": "10.3.0", "l4t": "36.4.3", "power_mode": "MAXN",
                   "clocks_locked": True}
    with Store(f"sqlite:///{tmp_path}/hw.db") as store:
        st = store.create_or_open_study("hw", model, "orin-agx", "tensorrt", "engine", "latency", "fp16", 1,
                                        {"gpu_fallback": True, "trt_version": "10.3"}, fingerprint, False)
        dev = {n: "GPU" for n in model.names}
        store.record(st, "k", "k", Measurement("ok", latency_samples_ms=[2.0], requested=dev, realized=dev,
                                               backend="tensorrt-10.3"), agent="manual")
        plan = export_plan(store, "hw")
    assert not any("never read" in n for n in plan.notes), plan.notes
