"""`placetune export --format trtexec -o DIR` writes a deployment folder
whose build.sh runs end to end against the fake trtexec (which refuses what the real one refuses),
whose segment ONNX files pass the full checker and reproduce the model's output; the exported
headline is the figure `placetune tune` prints; INT8 ranges say where they come from."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

import placetune
from placetune import Placement
from placetune.cli.main import main
from placetune.model import zoo
from placetune.plan.export import export_plan
from placetune.plan.file import load
from placetune.store.store import Store
from placetune.wording import versus

FAKES = Path(__file__).resolve().parent / "fakes"
TRT_API = Path(__file__).resolve().parent / "trt_api"


def _run_build(script: Path, cwd: Path, record: Path, **env_extra: str) -> subprocess.CompletedProcess:
    """``sh build.sh`` from another directory, with the fake trtexec first on PATH."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(FAKES), os.path.dirname(sys.executable), env.get("PATH", "")])
    env.pop("TRTEXEC", None)
    env["PLACETUNE_FAKE_TRTEXEC_RECORD"] = str(record)
    env.update(env_extra)
    return subprocess.run(["sh", str(script)], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _argvs(record: Path) -> list[list[str]]:
    return [d["argv"] for d in map(json.loads, record.read_text().splitlines()) if d["event"] == "start"]


def _export(capsys, *argv: str) -> str:
    code = main(["export", *argv])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


@pytest.fixture(scope="module")
def pipeline_study(tmp_path_factory):
    """An INT8 pipeline study of seed-block with a GPU / DLA0 / DLA1 placement measured."""
    tmp = tmp_path_factory.mktemp("folder")
    url = f"sqlite:///{tmp}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8", store=url, study="p") as ev:
        ev.baselines()
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}), agent="t",
                        trial_number=0)
        yield SimpleNamespace(url=url, tmp=tmp, model=ev.model, mid=m.extra["_id"])


# --------------------------------------------------------------------------- the fake is strict
def test_the_fake_trtexec_refuses_what_trtexec_refuses(pipeline_study, tmp_path, capsys):
    """The test double behind build.sh refuses --shapes on a static model and unknown flags, and its
    option table is the one generated from trtexec's sources (tests/trt_api), not a list of its own."""
    out = tmp_path / "d"
    _export(capsys, "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o", str(out),
            "--measurement", str(pipeline_study.mid))
    fake = [sys.executable, str(FAKES / "trtexec")]
    seg = str(out / "model.seg0.onnx")
    shapes = subprocess.run([*fake, f"--onnx={seg}", "--shapes=input:1x384x56x56", "--skipInference"],
                            capture_output=True, text=True, timeout=120)
    assert shapes.returncode != 0 and "&&&& FAILED" in shapes.stdout
    unknown = subprocess.run([*fake, f"--onnx={seg}", "--noSuchFlag", "--skipInference"], capture_output=True,
                             text=True, timeout=120)
    assert unknown.returncode != 0 and "--noSuchFlag" in unknown.stdout
    table = json.loads((TRT_API / "tensorrt-8.6.json").read_text())["trtexec"]
    assert "--calib" in table["options"] and "--skipInference" in table["options"]
    assert "static_model_shapes" in table["refusals"]


# --------------------------------------------------------------------------- the folder
def test_pipeline_folder_builds_and_its_segments_reproduce_the_model(pipeline_study, tmp_path, capsys):
    out = tmp_path / "deploy"
    text = _export(capsys, "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o", str(out),
                   "--measurement", str(pipeline_study.mid))
    assert "wrote plan folder" in text and "build.sh" in text
    assert {p.name for p in out.iterdir()} == {"build.sh", "plan.json", "README.txt", ".placetune-files.json", "runtime",
                                               *(f"model.seg{i}.onnx" for i in range(4))}
    plan = load(out / "plan.json", pipeline_study.model)
    assert [e["device"] for e in plan.engines] == ["GPU", "DLA0", "DLA1", "GPU"]
    script = (out / "build.sh").read_text()
    assert 'cd "$(dirname "$0")"' in script and "--shapes" not in script

    # build.sh, run from elsewhere, builds every engine through the fake trtexec
    record = tmp_path / "record.jsonl"
    proc = _run_build(out / "build.sh", tmp_path, record)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    argvs = _argvs(record)
    assert len(argvs) == len(plan.engines)
    for eng, argv in zip(plan.engines, argvs):
        assert (out / eng["engine_file"]).is_file()
        assert f"--onnx={eng['onnx_file']}" in argv and f"--saveEngine={eng['engine_file']}" in argv
        assert not any(a.startswith("--shapes") for a in argv)
        assert ("--useDLACore=" + str(eng["dla_core"]) in argv) == (eng["device"] != "GPU")

    # every segment passes the full checker; in sequence they compute the model's output
    whole = zoo.build("seed-block", weights=True)
    x = np.random.default_rng(5).standard_normal((1, 384, 56, 56)).astype(np.float32)
    want = ReferenceEvaluator(whole).run(None, {"input": x})[0]
    env = {"input": x}
    for eng in plan.engines:
        path = out / eng["onnx_file"]
        onnx.checker.check_model(str(path), full_check=True)
        got = ReferenceEvaluator(onnx.load(str(path))).run(None, {t["name"]: env[t["name"]] for t in eng["inputs"]})
        for t, v in zip(eng["outputs"], got):
            assert list(v.shape) == t["shape"] and str(v.dtype) == t["dtype"]
            env[t["name"]] = v
    np.testing.assert_allclose(env["output"], want, rtol=1e-4, atol=1e-5)
    assert np.abs(want).max() > 0

    # the plain JSON export lists the same boundary tensors and file names as the folder's plan.json
    with Store(pipeline_study.url) as store:
        plain = export_plan(store, "p", measurement_id=pipeline_study.mid)
    keys = ("index", "onnx_file", "engine_file", "inputs", "outputs")
    assert [{k: e[k] for k in keys} for e in plain.engines] == [{k: e[k] for k in keys} for e in plan.engines]
    readme = (out / "README.txt").read_text()
    assert "sh build.sh" in readme and "trtexec --loadEngine=model.seg1.engine --useDLACore=0" in readme
    assert "placetune build ." in readme and "placetune.runtime.load(" in readme and "rt.stream(" in readme


def test_engine_and_replicas_plans_get_the_same_folder(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", store=url, study="e") as ev:
        ev.baseline()
        mid = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"})).extra["_id"]
    with placetune.Evaluator("seed-block", "orin-agx", mode="replicas", objective="throughput", store=url,
                             study="r") as ev:
        ev.baseline()
        rid = ev.evaluate(Placement.all_dla(ev.model, 0)).extra["_id"]
    for study, m, engines in (("e", mid, ["model.engine"]),
                              ("r", rid, ["model.gpu.engine", "model.dla0.engine", "model.dla1.engine"])):
        out = tmp_path / study
        _export(capsys, "--study", study, "--storage", url, "--format", "trtexec", "-o", str(out), "--measurement",
                str(m))
        deepstream = {"deepstream_nvinfer.txt"} if study == "e" else set()  # one nvinfer runs one engine
        assert {p.name for p in out.iterdir()} == {"build.sh", "plan.json", "README.txt", "model.onnx",
                                                   ".placetune-files.json", "runtime", *deepstream}
        onnx.checker.check_model(str(out / "model.onnx"), full_check=True)  # the zoo network with its weights
        assert onnx.load(str(out / "model.onnx")).graph.initializer[0].raw_data
        proc = _run_build(out / "build.sh", tmp_path, tmp_path / f"{study}.jsonl")
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
        assert [e["engine_file"] for e in load(out / "plan.json").engines] == engines
        assert all((out / e).is_file() for e in engines)
        assert all(e["inputs"][0]["name"] == "input" for e in load(out / "plan.json").engines)
    argv = _argvs(tmp_path / "e.jsonl")[0]
    assert any(a.startswith("--layerDeviceTypes=") for a in argv) and "--useDLACore=0" in argv


def test_hostile_study_name_stays_in_comments_and_names_are_quoted(tmp_path, capsys):
    """Names reach build.sh only quoted or inside escaped comments: a study named with a newline and a
    command substitution runs nothing."""
    url = f"sqlite:///{tmp_path}/pt.db"
    name = "x\ntouch PWNED $(touch PWNED2)"
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", store=url, study=name) as ev:
        ev.baseline()
    out = tmp_path / "dir with space"
    _export(capsys, "--study", name, "--storage", url, "--format", "trtexec", "-o", str(out))
    proc = _run_build(out / "build.sh", tmp_path, tmp_path / "r.jsonl")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert not list(tmp_path.glob("PWNED*")) and not list(out.glob("PWNED*"))
    assert (out / "model.engine").is_file()


def test_folder_and_script_outputs_are_told_apart(pipeline_study, tmp_path, capsys):
    """-o x.sh still writes one script, -o x.json with --format json one plan; a file in the way
    of a folder is refused in one line."""
    _export(capsys, "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o",
            str(tmp_path / "b.sh"))
    assert (tmp_path / "b.sh").read_text().startswith("#!/bin/sh")
    _export(capsys, "--study", "p", "--storage", pipeline_study.url, "-o", str(tmp_path / "p.json"))
    assert load(tmp_path / "p.json").mode == "pipeline"
    (tmp_path / "afile").write_text("x")
    code = main(["export", "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o",
                 str(tmp_path / "afile")])
    err = capsys.readouterr().err
    assert code == 6 and "is a file" in err and "Traceback" not in err


# --------------------------------------------------------------------------- the headline
@pytest.mark.parametrize("objective", ["throughput", "latency", "energy"])
def test_export_headline_is_tunes_summary_figure(objective, tmp_path, capsys):
    """Export once said "0.7x latency" for a study tune reported as 1.68x throughput."""
    url = f"sqlite:///{tmp_path}/pt.db"
    assert main(["tune", "--model", "resnet18", "--mode", "pipeline", "--objective", objective, "--trials", "8",
                 "--study", "h", "--storage", url, "--export", str(tmp_path / "t.json")]) == 0
    tuned = capsys.readouterr().out
    row = next(x for x in tuned.splitlines() if x.startswith("best found"))
    tune_gain = re.search(r"  ([\d.]+x (?:faster|slower|less energy|more energy)|same)$", row).group(1)
    text = _export(capsys, "--study", "h", "--storage", url, "-o", str(tmp_path / "plan.json"))
    head = next(x for x in text.splitlines() if x.startswith("vs all-GPU:"))
    assert head.startswith(f"vs all-GPU: {tune_gain} ({objective}, the study's objective)"), (row, head)
    plan = load(tmp_path / "plan.json")
    assert versus(plan.baselines["all-gpu"]["gain"], objective) == tune_gain
    if objective != "latency":  # the DLAs win these: the old latency ratio would differ
        assert plan.baselines["all-gpu"]["gains"]["latency"] != pytest.approx(plan.baselines["all-gpu"]["gain"])
    # units per batch and per sample, spelled out
    assert f"per batch of {plan.batch}" in text and "samples/s" in text and "mJ per sample" in text
    assert plan.measured["units"]["energy_mj"] == f"mJ per inference (one batch of {plan.batch})"


# --------------------------------------------------------------------------- INT8
def test_int8_without_calibration_says_ranges_are_placeholders(pipeline_study, tmp_path, capsys):
    out = tmp_path / "d"
    text = _export(capsys, "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o", str(out))
    doc = json.loads((out / "plan.json").read_text())
    assert doc["precision"] == "int8" and doc["int8_ranges"] == "placeholder"
    assert "INT8 ranges are PLACEHOLDERS" in text and "accuracy is NOT preserved" in text
    # where a newcomer learns how to make the file it asks for (it named the option only)
    how = "export with --calibration-cache FILE (how to make one: placetune's docs/jetson.md, INT8 ranges)"
    assert how in " ".join(text.split()) and how in " ".join((out / "README.txt").read_text().split())
    script = (out / "build.sh").read_text()
    assert "# WARNING: INT8 ranges are PLACEHOLDERS" in script and "--calib=" not in script


def test_calibration_cache_is_copied_and_passed_as_calib(pipeline_study, tmp_path, capsys):
    cache = tmp_path / "my.cache"
    cache.write_bytes(b"TRT-8601-EntropyCalibration2\ninput: 3c010a14\n")
    out = tmp_path / "d"
    text = _export(capsys, "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o", str(out),
                   "--calibration-cache", str(cache), "--measurement", str(pipeline_study.mid))
    assert (out / "calibration.cache").read_bytes() == cache.read_bytes()
    doc = json.loads((out / "plan.json").read_text())
    assert doc["int8_ranges"] == "calibration-cache" and doc["calibration_cache"] == "calibration.cache"
    assert "PLACEHOLDERS" not in text and "PLACEHOLDERS" not in (out / "build.sh").read_text()
    record = tmp_path / "r.jsonl"
    proc = _run_build(out / "build.sh", tmp_path, record)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert all("--calib=calibration.cache" in argv and "--int8" in argv for argv in _argvs(record))
    # TensorRT 11 has no --calib (strongly typed): refused in one line, nothing written
    code = main(["export", "--study", "p", "--storage", pipeline_study.url, "--format", "trtexec", "-o",
                 str(tmp_path / "d11"), "--calibration-cache", str(cache), "--trt-version", "11.1"])
    err = capsys.readouterr().err
    assert code == 6 and "--calib" in err and "Traceback" not in err and not (tmp_path / "d11").exists()


def test_calibration_cache_for_a_non_int8_plan_is_refused(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", precision="fp16", store=url, study="f") as ev:
        ev.baseline()
    cache = tmp_path / "c.cache"
    cache.write_text("x")
    code = main(["export", "--study", "f", "--storage", url, "--format", "trtexec", "-o", str(tmp_path / "d"),
                 "--calibration-cache", str(cache)])
    err = capsys.readouterr().err
    assert code == 6 and "INT8" in err and "fp16" in err
    plan = export_plan(Store(url), "f")
    assert plan.int8_ranges is None and "PLACEHOLDERS" not in plan.summary()


def _qdq_model(path: Path) -> Path:
    """A small INT8 model quantized explicitly: Q/DQ on its input, then Conv + Relu."""
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 8, 1, 1)).astype(np.float32), "w")
    s, z = numpy_helper.from_array(np.array(0.05, np.float32), "s"), numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq"),
             helper.make_node("Conv", ["xd", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["y"], name="relu")]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], [w, s, z])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_a_qdq_model_keeps_its_ranges_and_its_file_is_the_folders_model(tmp_path, capsys):
    src = _qdq_model(tmp_path / "qdq.onnx")
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(src), "orin-agx", mode="engine", precision="int8", store=url, study="q") as ev:
        ev.baseline()
    out = tmp_path / "d"
    text = _export(capsys, "--study", "q", "--storage", url, "--format", "trtexec", "-o", str(out))
    assert json.loads((out / "plan.json").read_text())["int8_ranges"] == "qdq"
    assert "PLACEHOLDERS" not in text and "Q/DQ nodes" in (out / "build.sh").read_text()
    assert onnx.load(str(out / "model.onnx")).graph == onnx.load(str(src)).graph
    proc = _run_build(out / "build.sh", tmp_path, tmp_path / "r.jsonl")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr


def test_replicas_with_their_own_batch_get_their_own_onnx(tmp_path, capsys):
    """A static model's replica at another batch is built from the model at that batch (trtexec
    refuses --shapes for static inputs): the engines the fake builds have the replicas' batches."""
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="replicas", objective="throughput", store=url,
                             study="r", replicas={"GPU": 4, "DLA0": 2, "DLA1": 2}) as ev:
        ev.baseline()
        rid = ev.evaluate(Placement.all_dla(ev.model, 0)).extra["_id"]
    out = tmp_path / "d"
    _export(capsys, "--study", "r", "--storage", url, "--format", "trtexec", "-o", str(out), "--measurement", str(rid))
    plan = load(out / "plan.json")
    assert [(e["onnx_file"], e["inputs"][0]["shape"][0]) for e in plan.engines] == [
        ("model.b4.onnx", 4), ("model.b2.onnx", 2), ("model.b2.onnx", 2)]
    proc = _run_build(out / "build.sh", tmp_path, tmp_path / "r.jsonl")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    for e in plan.engines:
        onnx.checker.check_model(str(out / e["onnx_file"]), full_check=True)
        assert json.loads((out / e["engine_file"]).read_text())["batch"] == e["batch"]  # the fake's engine file


def test_readme_of_a_simulated_plan_does_not_claim_it_was_timed(pipeline_study, tmp_path, capsys):
    out = tmp_path / "sim"
    _export(capsys, "--storage", pipeline_study.url, "--study", "p", "--format", "trtexec", "-o", str(out))
    readme = (out / "README.txt").read_text()
    assert "timed the plan" not in readme and "was measured with" not in readme
    assert "figures are SIMULATED" in readme and "nothing has timed it yet" in readme


def test_readme_runs_the_runtime_with_the_networks_own_inputs(pipeline_study, tmp_path, capsys):
    """README.txt's runtime lines fed `rt({"input name": array})`: a newcomer had to find the input's name,
    shape and type in plan.json. They are now the network's own, as the runtime takes them."""
    out = tmp_path / "inputs"
    _export(capsys, "--storage", pipeline_study.url, "--study", "p", "--format", "trtexec", "-o", str(out))
    readme = (out / "README.txt").read_text()
    name, dims = next(iter(pipeline_study.model.input_shapes.items()))
    shape = ", ".join(map(str, dims))
    assert '"input name"' not in readme
    assert f'x = numpy.zeros(({shape}), numpy.float32)' in readme, readme
    assert f'outputs = rt({{"{name}": x}})' in readme, readme


def test_readme_streams_with_the_plans_own_frames_in_flight(pipeline_study, tmp_path, capsys):
    """README.txt's runtime line said `rt.stream(batches, frames_in_flight=K)`: a placeholder a newcomer
    had to replace. It is now the number the plan was timed with (the runtime's default)."""
    out = tmp_path / "fif"
    _export(capsys, "--storage", pipeline_study.url, "--study", "p", "--format", "trtexec", "-o", str(out))
    fif = load(out / "plan.json").settings["frames_in_flight"]
    readme = (out / "README.txt").read_text()
    assert "frames_in_flight=K" not in readme
    assert f"rt.stream(batches, frames_in_flight={fif})" in readme, readme
    assert f"with {fif} frames in flight" in " ".join(readme.split()) or fif == 1


def test_exporting_another_study_into_a_plan_folder_says_whose_plan_it_replaced(tmp_path, capsys):
    """A second study exported with the same ``-o`` replaces the first one's folder (placetune's own files):
    the line says whose plan was there, so a deployment folder is never swapped without a word."""
    url = f"sqlite:///{tmp_path}/pt.db"
    for study in ("first", "second"):
        with placetune.Evaluator("seed-block", "orin-agx", mode="engine", store=url, study=study) as ev:
            ev.baseline()
            ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    out = tmp_path / "deploy"
    first = _export(capsys, "--study", "first", "--storage", url, "--format", "trtexec", "-o", str(out))
    assert "replaced" not in first
    first_id = load(out / "plan.json").source["measurement_id"]
    again = _export(capsys, "--study", "first", "--storage", url, "--format", "trtexec", "-o", str(out))
    assert "replaced" not in again  # the same plan written again replaces nothing of another's
    second = _export(capsys, "--study", "second", "--storage", url, "--format", "trtexec", "-o", str(out))
    line = next(x for x in second.splitlines() if "replaced" in x)
    assert "study 'first'" in line and f"measurement {first_id}" in line
    assert load(out / "plan.json").source["study"] == "second"
