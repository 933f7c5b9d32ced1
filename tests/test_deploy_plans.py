"""Every consumer of an exported plan reads what this placetune exports and what an older one did:
``placetune.plan.load``, ``placetune build`` (against the TensorRT doubles, tests/fakes, in a
subprocess so the test process never imports a fake ``tensorrt``), ``placetune.runtime.load`` and
the plan folder's standalone runtime, ``build.sh`` and ``placetune measure --placement plan.json``;
plans of the three modes, of a JetPack 6.2 Super power mode, with a faster plan not exported (its
placement was not read) and of the format placetune wrote before plan folders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import placetune
from placetune import Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.cli.main import main
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
THREE = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}

RUN = r'''
import json, os, sys
import numpy as np, onnx
from onnx.reference import ReferenceEvaluator
folder, model, standalone = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
if standalone:  # the plan folder's own copy: no placetune on the path
    sys.path = [p for p in sys.path if not os.path.isdir(os.path.join(p, "placetune"))]
    sys.path.insert(0, os.path.join(folder, "runtime"))
    import placetune_runtime as runtime
    assert "placetune" not in sys.modules
else:
    import placetune.runtime as runtime
with runtime.load(folder) as rt:
    x = np.random.default_rng(0).uniform(-1, 1, rt.inputs["input"][0]).astype(np.float32)
    got = rt({"input": x})["output"]
    mode = rt.mode
want = ReferenceEvaluator(onnx.load(model)).run(None, {"input": x})[0]
print(json.dumps({"mode": mode, "err": float(np.abs(got - want).max() / np.abs(want).max())}))
'''


def _run(args: list[str], cwd: Path, **fake: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **fake_env("10.3.0", **fake)}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[1])])
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def _export(tmp: Path, model: Path, mode: str, placement: dict | str, platform: str = "orin-agx", **kw) -> Path:
    """A simulated study with one measured placement, exported as a plan folder."""
    url = f"sqlite:///{tmp}/pt.db"
    with placetune.Evaluator(str(model), platform, mode=mode, precision="fp16", store=url, study=mode, **kw) as ev:
        ev.baselines()
        p = Placement.all_dla(ev.model) if placement == "all-dla" else Placement(ev.model, placement)
        m = ev.evaluate(p, agent="t", trial_number=0)
    out = tmp / "plan"
    assert main(["export", "--study", mode, "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0
    return out


def _build_and_run(folder: Path, model: Path, cwd: Path, mode: str) -> dict:
    """``placetune build`` of the folder, then one input through placetune.runtime and the standalone copy."""
    built = _run([sys.executable, "-m", "placetune.cli", "build", str(folder)], cwd)
    assert built.returncode == 0, built.stderr + built.stdout
    report = json.loads((folder / "build.json").read_text())
    for standalone in ("0", "1"):
        ran = _run([sys.executable, "-c", RUN, str(folder), str(model), standalone], cwd)
        assert ran.returncode == 0, ran.stderr[-3000:]
        got = json.loads(ran.stdout)
        assert got["mode"] == mode and got["err"] < 2e-3, got
    return report


CASES = {  # name: mode, placement, platform, settings
    "engine": ("engine", THREE, "orin-agx", {}),
    "pipeline": ("pipeline", THREE, "orin-agx", {"frames_in_flight": 2}),
    "replicas": ("replicas", "all-dla", "orin-agx", {"replicas": "GPU:1,DLA0:1"}),
    "super": ("engine", THREE, "orin-nx-16gb", {"power_mode": "MAXN_SUPER"}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_exported_plan_round_trips_through_load_build_and_the_runtimes(case, seed_block_random, tmp_path):
    mode, placement, platform, kw = CASES[case]
    folder = _export(tmp_path, seed_block_random, mode, placement, platform, **kw)
    plan = placetune.plan.load(folder)
    assert plan.to_dict() == {**json.loads((folder / "plan.json").read_text()), "version": 1}
    assert plan.mode == mode and plan.platform == platform
    assert plan.settings.get("power_mode") == kw.get("power_mode", "MAXN")
    report = _build_and_run(folder, seed_block_random, tmp_path, mode)
    assert report["differences"] == [] and len(report["engines"]) == len(plan.engines)


def _older(doc: dict) -> dict:
    """The plan document as placetune wrote it before plan folders (the fields a plan of commit fc8b73e
    lacks, compared field by field with one exported now of the same study): no file names nor tensors
    per engine, no dynamic inputs nor outputs of the model, no INT8 ranges, no units."""
    old = json.loads(json.dumps(doc))
    for key in ("int8_ranges", "calibration_cache"):
        old.pop(key)
    for key in ("dynamic_inputs", "outputs"):
        old["model"].pop(key, None)
    for key in ("units", "energy_mj_per_sample", "gpu_time_ms"):
        old["measured"].pop(key, None)
    for e in old["engines"]:
        for key in ("engine_file", "onnx_file", "inputs", "outputs"):
            e.pop(key, None)
    return old


@pytest.mark.parametrize("mode", ["engine", "pipeline"])
def test_a_plan_file_of_an_older_placetune_builds_into_a_folder_and_runs(mode, seed_block_random, tmp_path, capsys):
    """A plan file written before plan folders, put beside its model as ``DIR/plan.json``: ``placetune
    build DIR`` said "onnx_file of plan.json None is not a plain file name (it is NoneType, not text)";
    it now says it is a plan file and how to build it, and ``placetune build plan.json -o DIR`` does."""
    mode, placement, platform, kw = CASES[mode]
    exported = _export(tmp_path, seed_block_random, mode, placement, platform, **kw)
    doc = _older(json.loads((exported / "plan.json").read_text()))
    old = tmp_path / "old"
    old.mkdir()
    (old / "plan.json").write_text(json.dumps(doc))
    (old / "model.onnx").write_bytes(seed_block_random.read_bytes())
    plan = placetune.plan.load(old)
    assert plan.mode == mode and plan.realized == {x["name"]: x["realized"] for x in doc["layers"]}
    capsys.readouterr()
    assert main(["build", str(old)]) == 6  # before TensorRT is asked for
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names no ONNX file per engine" in err, err
    assert f"placetune build {old / 'plan.json'} -o DIR" in err
    folder = tmp_path / "built"
    built = _run([sys.executable, "-m", "placetune.cli", "build", str(old / "plan.json"), "-o", str(folder)],
                 tmp_path)
    assert built.returncode == 0, built.stderr + built.stdout
    assert json.loads((folder / "build.json").read_text())["differences"] == []
    ran = _run([sys.executable, "-c", RUN, str(folder), str(seed_block_random), "0"], tmp_path)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert json.loads(ran.stdout)["err"] < 2e-3


def test_measure_takes_a_super_power_mode_plan_at_its_power_mode(seed_block_random, tmp_path, capsys):
    """``measure --placement plan.json`` of a MAXN_SUPER plan timed it at measure's default MAXN without a
    word (6.08 ms against the plan's 4.43 ms); left out, the power mode is now the plan's, and one other
    than the plan's is refused like its platform or mode, naming the option."""
    mode, placement, platform, kw = CASES["super"]
    folder = _export(tmp_path, seed_block_random, mode, placement, platform, **kw)
    plan = json.loads((folder / "plan.json").read_text())
    args = ["measure", str(seed_block_random), "--precision", "fp16", "--platform", platform,
            "--placement", str(folder / "plan.json")]
    capsys.readouterr()
    assert main(args + ["--power-mode", "MAXN"]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.rstrip().endswith("measure it as it was tuned with --power-mode MAXN_SUPER "
                                                           "(or leave the option out)")
    assert main(args + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["power_mode"] == "MAXN_SUPER"
    assert main(args + ["--power-mode", "maxn_super", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["power_mode"] == "MAXN_SUPER"
    assert got["latency_ms"]["median"] == pytest.approx(plan["measured"]["latency_ms"]["median"], rel=1e-9)


def test_a_plan_with_a_faster_plan_not_exported_builds_the_exported_placement(seed_block_random, tmp_path):
    """The study's best pipeline has an unread DLA segment: the plan exports the best known one and
    names the faster in ``measured.not_exported`` with its requested placement. build.sh, the
    trtexec commands and ``placetune build`` use the exported placement, never the passed-over one.
    The notes' `placetune measure` command for the passed-over one named only --backend and --mode:
    measure's defaults (another platform, precision, frames in flight) timed another plan; it names
    the study's options now."""
    be = TensorRTBackend(worker_env=fake_env("10.3.0", UNREADABLE_ON="/conv3/Conv"), cache_dir=tmp_path / "cache",
                         warmup_ms=1, profile_iterations=2)
    ev = placetune.Evaluator(str(seed_block_random), "orin-agx", backend=be, store=tmp_path / "pt.db", trt_version="10.3",
                             iterations=5, mode="pipeline", precision="fp16", study="gpu-free", objective="gpu_time")
    try:
        partly = ev.evaluate(Placement(ev.model, THREE))
        known = ev.evaluate(Placement(ev.model, {"/conv4/Conv": "DLA1"}))
        ev.evaluate(Placement.all_gpu(ev.model))
    finally:
        ev.close()
        be.close()
    assert partly.segments_read == (3, 4) and known.placement_known
    folder = tmp_path / "plan"
    assert main(["export", "--study", "gpu-free", "--storage", f"sqlite:///{tmp_path}/pt.db", "--format", "trtexec",
                 "-o", str(folder)]) == 0
    plan = placetune.plan.load(folder)
    passed = plan.measured["not_exported"]
    assert passed["requested"]["/conv3/Conv"] == "DLA0" and plan.realized["/conv3/Conv"] == "GPU"
    # the notes' command times the passed-over placement as the study did, not at measure's defaults
    (command,) = [n for n in plan.notes if "placetune measure MODEL" in n]
    assert "--placement FILE.json --platform orin-agx --precision fp16 --frames-in-flight 1 --trt-version 10.3`" \
        in command, command
    script = (folder / "build.sh").read_text()
    assert "--useDLACore=1" in script and "--useDLACore=0" not in script
    devices = [e["device"] for e in plan.engines]
    assert "DLA1" in devices and "DLA0" not in devices
    report = _build_and_run(folder, seed_block_random, tmp_path, "pipeline")
    assert [e["device"] for e in report["engines"]] == devices and report["differences"] == []


def test_the_plan_folder_s_readme_names_the_power_mode_its_figures_are_of(seed_block_random, tmp_path):
    """The README said how to time the engines but not in which power mode: a MAXN_SUPER plan timed at
    the board's default mode gives other figures. Step 2 now names the mode and its nvpmodel command."""
    mode, placement, platform, kw = CASES["super"]
    readme = (_export(tmp_path, seed_block_random, mode, placement, platform, **kw) / "README.txt").read_text()
    assert "figures are of power mode MAXN_SUPER: time the engines in it (sudo nvpmodel -m 0, with JetPack " \
           "6.2's Super nvpmodel.conf;" in readme
    (tmp_path / "agx").mkdir()
    readme = (_export(tmp_path / "agx", seed_block_random, mode, placement) / "README.txt").read_text()
    assert "figures are of power mode MAXN: time the engines in it (sudo nvpmodel -m 0;" in readme
