"""``placetune build`` builds an exported plan folder through the TensorRT
worker and reports where TensorRT put each layer; ``placetune.runtime`` runs the built plan in an
application (the worker's own pipeline runtime). Both run against the TensorRT/CUDA doubles
(tests/fakes), in a subprocess so the test process never imports a fake ``tensorrt``; the doubles
compute real outputs with onnx's reference evaluator, so outputs are compared with numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest

import placetune
from placetune import Placement
from placetune.cli.main import main
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
THREE = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}


def _run(args: list[str], cwd: Path, version: str = "10.3.0", timeout: int = 300, **fake: str
         ) -> subprocess.CompletedProcess:
    env = {**os.environ, **fake_env(version, **fake)}
    # the doubles, then this checkout's placetune (not whichever placetune is installed)
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[1])])
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _study(tmp: Path, model: Path, mode: str, placement: dict | str, **kw) -> str:
    """A simulated study with one measured placement, exported as a plan folder; returns the folder."""
    url = f"sqlite:///{tmp}/pt.db"
    with placetune.Evaluator(str(model), "orin-agx", mode=mode, precision="fp16", store=url, study=mode, **kw) as ev:
        ev.baselines()
        p = Placement.all_dla(ev.model) if placement == "all-dla" else Placement(ev.model, placement)
        m = ev.evaluate(p, agent="t", trial_number=0)
    out = tmp / f"{mode}-plan"
    assert main(["export", "--study", mode, "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0
    return str(out)


RUN = r'''
import json, sys
import numpy as np, onnx
from onnx.reference import ReferenceEvaluator
import placetune.runtime
folder, model, n, k = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
rt = placetune.runtime.load(folder)
shape = rt.inputs["input"][0]
xs = [np.random.default_rng(i).uniform(-1, 1, shape).astype(np.float32) for i in range(n)]
ref = ReferenceEvaluator(onnx.load(model))
want = [ref.run(None, {"input": x})[0] for x in xs]
one = rt({"input": xs[0]})["output"]
outs = [o["output"] for o in rt.stream(({"input": x} for x in xs), frames_in_flight=k)]
err = lambda a, b: float(np.abs(a - b).max() / np.abs(b).max())
print(json.dumps({"mode": rt.mode, "k": rt.frames_in_flight, "one": err(one, want[0]),
                  "stream": [err(o, w) for o, w in zip(outs, want)], "n": len(outs),
                  "shuffled": err(outs[1], want[0]), "repr": repr(rt)}))
rt.close()
'''


SAME = r'''
import json, sys
import numpy as np
import placetune.runtime
pipe, single, n = placetune.runtime.load(sys.argv[1]), placetune.runtime.load(sys.argv[2]), int(sys.argv[3])
shape = pipe.inputs["input"][0]
xs = [{"input": np.random.default_rng(7 + i).uniform(-1, 1, shape).astype(np.float32)} for i in range(n)]
a = [o["output"] for o in pipe.stream(xs, frames_in_flight=2)]
b = [single(x)["output"] for x in xs]
print(json.dumps({"max_rel_diff": max(float(np.abs(p - q).max() / np.abs(q).max()) for p, q in zip(a, b))}))
'''


def test_build_then_run_a_pipeline_plan(seed_block_random, tmp_path):
    folder = _study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=2)
    proc = _run([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "built 4 engines with TensorRT 10.3.0" in proc.stdout and "every layer runs where the plan says" in proc.stdout
    report = json.loads((Path(folder) / "build.json").read_text())
    assert [e["device"] for e in report["engines"]] == ["GPU", "DLA0", "DLA1", "GPU"]
    assert report["differences"] == []
    for e in report["engines"]:
        assert (Path(folder) / e["engine_file"]).stat().st_size > 0
    # the DLA segments' cut tensors were built in the DLA's format on both sides
    assert report["engines"][1]["io_formats"] == {"/conv2/Conv_output_0": ["HALF", "CHW16"],
                                                  "/conv3/Conv_output_0": ["HALF", "CHW16"]} or \
        all(v == ["HALF", "CHW16"] for v in report["engines"][1]["io_formats"].values())
    # the application runs it: one input, then a stream with 2 frames in flight, in order
    run = _run([sys.executable, "-c", RUN, folder, str(seed_block_random), "5", "2"], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    assert got["mode"] == "pipeline" and got["k"] == 2 and got["n"] == 5
    assert got["one"] < 2e-3 and max(got["stream"]) < 2e-3  # fp16 engines against the float32 model
    assert got["shuffled"] > 0.1  # a different input's output is far off: the comparison can fail
    # and the pipeline's outputs equal those of one all-GPU engine of the whole model, run the same way
    (tmp_path / "single").mkdir()
    single = _study(tmp_path / "single", seed_block_random, "engine", {})
    assert _run([sys.executable, "-m", "placetune.cli", "build", single], tmp_path).returncode == 0
    both = _run([sys.executable, "-c", SAME, folder, single, "3"], tmp_path)
    assert both.returncode == 0, both.stderr[-3000:]
    assert json.loads(both.stdout)["max_rel_diff"] < 2e-3


NVTX = r'''
import json, os, sys
import numpy as np
import placetune.runtime
folder = sys.argv[1]
sys.path.insert(0, os.path.join(folder, "runtime"))
import placetune_runtime  # the plan folder's own runtime (standalone copy)
import tensorrt
setup = json.load(open(os.path.join(folder, "build.json")))["nvtx_setup"]["python"]
out = {}
for mod in (placetune.runtime, placetune_runtime):
    with mod.load(folder) as rt:
        assert rt.nvtx_verbosity == "LAYER_NAMES_ONLY", rt.nvtx_verbosity
        rt({"input": np.zeros(rt.inputs["input"][0], np.float32)})
        list(rt.stream([{"input": np.zeros(rt.inputs["input"][0], np.float32)}] * 3, frames_in_flight=2))
        # an application's own context of the same engine: the build's markers until the documented line
        context = rt._pipes[0].engines[1].engine.create_execution_context()
        before = context.nvtx_verbosity.name
        exec(setup, {"tensorrt": tensorrt, "context": context})
        out[mod.__name__] = [before, context.nvtx_verbosity.name]
        context = None
print(json.dumps(out))
'''


def test_deployed_engines_run_with_the_nvtx_markers_they_were_timed_with(seed_block_random, tmp_path):
    """`placetune build` builds DETAILED engines (it reads their layer information), and a context's
    NVTX markers default to the build's verbosity, which TensorRT says "will generally increase latency
    in enqueueV3()" (NvInferRuntime.h release/10.3:4303-4310); every engine was timed at trtexec's
    LAYER_NAMES_ONLY. build.json and README.txt now say which verbosity the engines carry and the line
    an application sets on each context; build.sh keeps trtexec's default (no --profilingVerbosity), and
    placetune's runtime and the folder's standalone runtime run every context at LAYER_NAMES_ONLY."""
    folder = Path(_study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=2))
    assert "--profilingVerbosity" not in (folder / "build.sh").read_text()  # trtexec's default: LAYER_NAMES_ONLY
    readme = (folder / "README.txt").read_text()
    assert "context.nvtx_verbosity = tensorrt.ProfilingVerbosity.LAYER_NAMES_ONLY" in readme
    assert "context->setNvtxVerbosity(nvinfer1::ProfilingVerbosity::kLAYER_NAMES_ONLY);" in readme
    proc = _run([sys.executable, "-m", "placetune.cli", "build", str(folder)], tmp_path)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "LAYER_NAMES_ONLY NVTX markers" in proc.stdout
    report = json.loads((folder / "build.json").read_text())
    assert [e["profiling_verbosity"] for e in report["engines"]] == ["DETAILED"] * 4
    assert report["nvtx_verbosity"] == "LAYER_NAMES_ONLY"
    assert report["nvtx_setup"]["c++"] == "context->setNvtxVerbosity(nvinfer1::ProfilingVerbosity::kLAYER_NAMES_ONLY);"
    log = tmp_path / "enqueues.txt"
    run = _run([sys.executable, "-c", NVTX, str(folder)], tmp_path, ENQUEUE_LOG=str(log))
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout) == {"placetune.runtime": ["DETAILED", "LAYER_NAMES_ONLY"],
                                      "placetune_runtime": ["DETAILED", "LAYER_NAMES_ONLY"]}
    levels = [line.split()[3] for line in log.read_text().splitlines()]
    assert len(levels) >= 2 * 4 * 4 and set(levels) == {"LAYER_NAMES_ONLY"}  # every enqueue of every context


def test_build_reports_layers_tensorrt_put_elsewhere(tmp_path):
    """An all-DLA engine plan of the GroupNorm model under TensorRT 8.6's rules: they predicted the flatten
    (/Reshape) before /linear/Gemm on the DLA; TensorRT 10.3 (the double, as a published 10.3 build) runs it
    on the GPU, and build says so with TensorRT's reason."""
    folder = _study(tmp_path, DATA / "seed_model_gn.onnx.gz", "engine", "all-dla")
    proc = _run([sys.executable, "-m", "placetune.cli", "build", folder, "--json"], tmp_path)
    assert proc.returncode == 1, proc.stderr + proc.stdout  # built, but not as planned: a script must see it
    report = json.loads(proc.stdout)
    diff = {d["layer"]: d for d in report["differences"]}
    assert diff["/Reshape"]["plan"] == "DLA0" and diff["/Reshape"]["built"] == "GPU"
    assert "Unsupported on DLA" in diff["/Reshape"]["reason"]
    assert report["realized"]["/cnn/cnn.0/Conv"] == "DLA0" and report["realized"]["/linear/Gemm"] == "DLA0"


def test_build_whose_placement_cannot_be_read_says_unknown(tmp_path, monkeypatch):
    """A build log without placement lines and no engine layer information (the inspector raised):
    where TensorRT put the layers is unknown, so build never reports them where the plan says (the
    engine-mode reading's rule, placement_known.decide: never "realised = requested"), and says why
    the layer information is missing."""
    folder = _study(tmp_path, DATA / "seed_model_gn.onnx.gz", "engine", "all-dla")
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_NO_PLACEMENT_LOG", "1")
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_INSPECTOR_FAIL", "1")
    proc = _run([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert proc.returncode == 1, proc.stderr + proc.stdout  # not known to be as planned
    assert "every layer runs where the plan says" not in proc.stdout
    assert "UNKNOWN" in proc.stdout.splitlines()[1], proc.stdout
    report = json.loads((Path(folder) / "build.json").read_text())
    assert report["placement_known"] is False and report["placement_unknown"]
    assert "its layer information was not read (RuntimeError: fake: the engine inspector" in report["placement_unknown"][0]
    assert "the engine inspector gave no layer information" in report["engines"][0]["inspector_error"]
    assert report["realized"]["/cnn/cnn.0/Conv"] == "unknown"  # asked on the DLA: not known to run there
    assert report["engines"][0]["placement_known"] is False and report["engines"][0]["dla_loadables"] is None
    assert report["differences"] == []


def test_build_reads_the_placement_from_the_engine_s_layer_information_too(tmp_path, monkeypatch):
    """placetune build reads where TensorRT put the layers from both sources a tune reads (the build
    log and each DLA engine's layer information, placement_known.decide): a log without placement
    lines no longer makes the placement unknown when the layer information gives it. It read the
    log alone, so the same board's tune knew a placement its build called UNKNOWN."""
    folder = _study(tmp_path, DATA / "seed_model_gn.onnx.gz", "engine", "all-dla")
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_NO_PLACEMENT_LOG", "1")
    proc = _run([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
    assert proc.returncode == 1, proc.stderr + proc.stdout  # known, and /Reshape runs elsewhere than planned
    assert "UNKNOWN" not in proc.stdout, proc.stdout
    report = json.loads((Path(folder) / "build.json").read_text())
    assert report["placement_known"] is True and report["engines"][0]["placement_known"] is True
    assert report["realized"]["/cnn/cnn.0/Conv"] == "DLA0" and report["realized"]["/Reshape"] == "GPU"
    assert any("realised placement from the engine's layer information only" in n for n in report["notes"])


def test_build_whose_two_sources_disagree_records_unknown(tmp_path):
    """Where the build log and the engine's layer information disagree on a layer, build records the
    engine's layers asked on the DLA as unknown (the worker's cross-check), never the log's word."""
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from placetune.plan.build import build_plan

    folder = _study(tmp_path, DATA / "seed_model_gn.onnx.gz", "engine", "all-dla")
    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache")
    run = be.pool.run

    def gpu_relu(job, **kw):  # the layer information names /cnn/cnn.2/Relu as a GPU layer; the log puts it on DLA0
        reply = run(job, **kw)
        for info in reply.result.get("engines") or []:
            doc = json.loads(info["inspector"])
            doc["Layers"].insert(len(doc["Layers"]) - 2, {"Name": "/cnn/cnn.2/Relu", "LayerType": "PointWiseV2"})
            info["inspector"] = json.dumps(doc)
        return reply

    be.pool.run = gpu_relu
    try:
        report = build_plan(folder, backend=be)
    finally:
        be.close()
    assert not report.to_dict()["placement_known"]
    assert "disagree on 1 layer(s) (/cnn/cnn.2/Relu)" in report.unknown[0]
    assert report.realized["/cnn/cnn.2/Relu"] == "unknown" and report.realized["/cnn/cnn.0/Conv"] == "unknown"
    assert report.engines[0]["placement_known"] is False and "UNKNOWN" in report.summary()


def test_engine_and_replicas_plans_run_and_match_the_model(seed_block_random, tmp_path):
    for mode, placement, kw in (("engine", THREE, {}), ("replicas", "all-dla", {"replicas": "GPU:1,DLA0:1"})):
        folder = _study(tmp_path, seed_block_random, mode, placement, **kw)
        proc = _run([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path)
        assert proc.returncode == 0, proc.stderr + proc.stdout
        run = _run([sys.executable, "-c", RUN, folder, str(seed_block_random), "4", "1"], tmp_path)
        assert run.returncode == 0, run.stderr[-3000:]
        got = json.loads(run.stdout)
        assert got["mode"] == mode and got["n"] == 4
        assert got["one"] < 2e-3 and max(got["stream"]) < 2e-3, got


def test_build_refuses_another_model_before_asking_for_tensorrt(tmp_path, capsys):
    """``build DIR --model other.onnx``: the model mismatch (exit 3) is said first, not a missing TensorRT
    (exit 8) on a machine without it (this one: the doubles are not on the path in-process)."""
    folder = _study(tmp_path, DATA / "seed_model_gn.onnx.gz", "engine", "all-dla")
    capsys.readouterr()
    assert main(["build", folder, "--model", str(DATA / "seed_block.onnx.gz")]) == 3
    err = capsys.readouterr().err
    assert "TensorRT" not in err and "model" in err and len(err.strip().splitlines()) == 1, err


def test_build_and_load_refuse_what_is_not_a_built_plan(tmp_path, capsys):
    assert main(["build", str(tmp_path)]) == 6
    assert "not a plan folder" in capsys.readouterr().err
    (tmp_path / "plan.json").write_text("{}")
    from placetune.errors import ConfigError

    with pytest.raises(ConfigError):
        placetune.runtime.load(tmp_path / "nowhere")


def _tune_and_run_the_deploy_example(model, tmp_path):
    """A pipeline study of ``model`` (its baselines and one placement) in a fresh SQLite store, then
    examples/deploy_pipeline.py run on it as a user runs it; its finished process."""
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(model), "orin-agx", mode="pipeline", precision="fp16", store=url,
                             study="s", frames_in_flight=2) as ev:
        ev.baselines()
        ev.evaluate(Placement(ev.model, THREE), agent="t", trial_number=0)
    example = Path(__file__).resolve().parents[1] / "examples" / "deploy_pipeline.py"
    return _run([sys.executable, str(example), "s", "--storage", url, "-o", str(tmp_path / "d")], tmp_path)


def test_the_deploy_example_runs_end_to_end_against_the_doubles(seed_block_random, tmp_path):
    """examples/deploy_pipeline.py: export, build and run a tuned pipeline study (doubles here)."""
    proc = _tune_and_run_the_deploy_example(seed_block_random, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "build.sh" in proc.stdout and "with TensorRT 10.3.0" in proc.stdout
    assert "64 frames, 2 in flight" in proc.stdout and "output (1, 1152, 56, 56)" in proc.stdout
    assert not list((tmp_path / "d").glob("*.lock"))


def test_the_deploy_example_runs_a_network_whose_input_is_not_named_input(seed_block_random, tmp_path):
    """examples/deploy_pipeline.py fed its frames to an input called "input": on a YOLO export (its input is
    "images") it ended in a KeyError traceback after building the engines. It feeds every input the plan has."""
    model = onnx.load(str(seed_block_random))
    old = model.graph.input[0].name
    for node in model.graph.node:
        node.input[:] = ["images" if name == old else name for name in node.input]
    model.graph.input[0].name = "images"
    path = tmp_path / "images.onnx"
    onnx.save(model, str(path))
    proc = _tune_and_run_the_deploy_example(path, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "64 frames, 2 in flight" in proc.stdout, proc.stdout


def test_calibration_cache_reaches_tune_and_measure_builds(seed_block_random, tmp_path):
    """--calibration-cache on tune and measure goes to the tensorrt backend's INT8
    builds (the double's calibrator reads it), and the measurement says where its ranges came from;
    the simulated backend refuses it in one line."""
    cache = tmp_path / "calib.cache"
    cache.write_bytes(b"TRT-8601-EntropyCalibration2\ninput: 3c010a14\n")
    base = [sys.executable, "-m", "placetune.cli", "measure", str(seed_block_random), "--precision", "int8",
            "--placement", "all-dla", "--json"]
    with_cache = _run([*base, "--backend", "tensorrt", "--calibration-cache", str(cache)], tmp_path)
    assert with_cache.returncode == 0, with_cache.stderr[-2000:]
    assert json.loads(with_cache.stdout)["extra"]["int8_ranges"] == "calibration-cache"
    without = _run([*base, "--backend", "tensorrt"], tmp_path)
    assert json.loads(without.stdout)["extra"]["int8_ranges"] == "placeholder"
    sim = _run([*base, "--calibration-cache", str(cache)], tmp_path)
    assert sim.returncode == 6 and "--calibration-cache is for the tensorrt and trtexec backends" in sim.stderr
    missing = _run([*base, "--backend", "tensorrt", "--calibration-cache", str(tmp_path / "no")], tmp_path)
    assert missing.returncode == 6 and "no such file" in missing.stderr and "Traceback" not in missing.stderr
    tune = _run([sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt", "--model", str(seed_block_random),
                 "--mode", "engine", "--precision", "int8", "--agent", "random", "--trials", "3", "--storage",
                 f"sqlite:///{tmp_path}/t.db", "--study", "c", "--calibration-cache", str(cache)], tmp_path)
    assert tune.returncode == 0, tune.stderr[-2000:]
    from placetune.store import Store

    with Store(f"sqlite:///{tmp_path}/t.db") as store:
        rows = [r for r in store.measurements("c") if r.measurement.ok]
    assert rows and all(r.measurement.extra.get("int8_ranges") == "calibration-cache" for r in rows)


LOAD = r'''
import sys
import placetune.runtime
from placetune.errors import BackendError
try:
    placetune.runtime.load(sys.argv[1])
except BackendError as exc:
    print("refused:", exc)
else:
    print("loaded")
'''


def test_the_runtime_refuses_an_engine_whose_network_input_is_not_linear(seed_block_random, tmp_path):
    """The runtime copies an application's arrays into the network inputs byte for byte: an engine built with
    its network input in the DLA's vectorised format (as ``--inputIOFormats=fp16:chw16`` would, or a plan.json
    edited to ask it) would get linear bytes in a CHW16 buffer, and run without an error. It is refused by name."""
    folder = Path(_study(tmp_path, seed_block_random, "pipeline", THREE))
    plan = json.loads((folder / "plan.json").read_text())
    dla = next(e for e in plan["engines"] if e["device"] == "DLA0")
    for t in dla["inputs"]:
        if t["name"] == "input":
            t.update(trt_dtype="HALF", format="CHW16")
    (folder / "plan.json").write_text(json.dumps(plan))
    proc = _run([sys.executable, "-m", "placetune.cli", "build", str(folder)], tmp_path)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout
    report = json.loads((folder / "build.json").read_text())
    assert report["engines"][1]["io_formats"]["input"] == ["HALF", "CHW16"]  # the double built what was asked
    run = _run([sys.executable, "-c", LOAD, str(folder)], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.startswith("refused:"), run.stdout
    assert "network input 'input' is FLOAT16 in format CHW16" in run.stdout and "build.sh" in run.stdout


IN_FLIGHT = r'''
import json, sys
import numpy as np
import placetune.runtime
rt = placetune.runtime.load(sys.argv[1])
seen = []
inner = rt._stream_frames
def spy(np_, pipe, batches, k):
    seen.append(k)
    return inner(np_, pipe, batches, k)
rt._stream_frames = spy
x = {"input": np.zeros(rt.inputs["input"][0], np.float32)}
n = len(list(rt.stream([x] * 4)))
n += len(list(rt.stream([x] * 4, frames_in_flight=2)))
print(json.dumps({"loaded": rt.frames_in_flight, "planned": rt.planned_frames_in_flight, "k": seen, "n": n}))
rt.close()
'''


@pytest.mark.parametrize("timed_with", [1, 2])
def test_stream_keeps_the_frames_in_flight_the_plan_was_timed_with(seed_block_random, tmp_path, timed_with):
    """stream() without frames_in_flight keeps the plan's frames in flight, as documented and as the plan's
    figures were timed: a plan timed with one frame in flight does not run two by default (its later segments
    would overlap the next frame's first, another schedule than the measured one); more stays allowed up to
    the number loaded (at least 2)."""
    folder = _study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=timed_with)
    assert _run([sys.executable, "-m", "placetune.cli", "build", folder], tmp_path).returncode == 0
    run = _run([sys.executable, "-c", IN_FLIGHT, folder], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout)
    assert got == {"loaded": 2, "planned": timed_with, "k": [timed_with, 2], "n": 8}


CORES = r'''
import json, sys
import placetune.runtime
with placetune.runtime.load(sys.argv[1]) as rt:
    print(json.dumps([e.engine._runtime_core for p in rt._pipes for e in p.engines]))
'''


def test_a_dla_engine_without_its_core_in_plan_json_runs_on_its_device_s_core(seed_block_random, tmp_path):
    """plan.json may leave an engine's dla_core null (the checks allow it; build.sh then builds on its device's
    core): placetune build builds the DLA1 replica on DLA1 and the runtime sets DLA core 1 before deserializing
    it (IRuntime.DLA_core; unset, TensorRT runs it on core 0), instead of a GPU build and a load on core 0."""
    folder = Path(_study(tmp_path, seed_block_random, "replicas", {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"},
                         replicas="GPU:1,DLA0:1,DLA1:1"))
    plan = json.loads((folder / "plan.json").read_text())
    assert [e["device"] for e in plan["engines"]] == ["GPU", "DLA0", "DLA1"] and plan["engines"][2]["dla_layers"]
    plan["engines"][2]["dla_core"] = None
    (folder / "plan.json").write_text(json.dumps(plan))
    assert "--useDLACore=1" in (folder / "build.sh").read_text()
    proc = _run([sys.executable, "-m", "placetune.cli", "build", str(folder)], tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    run = _run([sys.executable, "-c", CORES, str(folder)], tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout) == [-1, 0, 1]
