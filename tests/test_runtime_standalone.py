"""placetune.runtime for JetPack 5.1: one file (plus the worker modules) that runs a built plan on
Python 3.8 with only numpy, TensorRT and one CUDA binding, placetune itself not installed."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

import placetune.runtime
from placetune import Model
from placetune.model.source import load_source, randomize_weights
from tests.fakes import FAKES_DIR, fake_env
from tests.test_deploy import THREE, _run, _study

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ROOT / "placetune" / "runtime.py"
#: what a JetPack 5 deployment does not have (placetune's own dependencies, and placetune)
ABSENT = ("onnx", "optuna", "sqlalchemy", "gymnasium", "placetune", "matplotlib", "scipy")

# a meta-path finder that refuses the absent packages to everything but the test doubles (the
# TensorRT double computes its outputs with onnx's reference evaluator: real TensorRT needs no onnx)
RUN = r'''
import importlib.abc, json, sys
ABSENT, FAKES, refused = set(sys.argv[3].split(",")), sys.argv[4], []

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in ABSENT:
            return None
        f = sys._getframe(1)
        while f is not None:
            if f.f_code.co_filename.startswith(FAKES):
                return None
            f = f.f_back
        refused.append(name)
        raise ImportError("%s is not installed (JetPack 5 deployment)" % name)

sys.meta_path.insert(0, Absent())
sys.path.insert(0, sys.argv[1])
import numpy as np
import placetune_runtime
rt = placetune_runtime.load(sys.argv[2])
shape = rt.inputs["input"][0]
xs = [np.random.default_rng(3 + i).uniform(-1, 1, shape).astype(np.float32) for i in range(int(sys.argv[5]))]
outs = [o["output"].tolist() for o in rt.stream(({"input": x} for x in xs), frames_in_flight=2)]
try:
    placetune_runtime.load(sys.argv[1])
except placetune_runtime.ConfigError as exc:
    error = str(exc)
rt.close()
print(json.dumps({"outs": outs, "shape": list(shape), "error": error, "python": sys.version_info[:2],
                  "refused": refused, "placetune": sorted(m for m in sys.modules if m.split(".")[0] == "placetune")}))
'''

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A pipeline plan folder built against the doubles, and the standalone runtime written out."""
    tmp = tmp_path_factory.mktemp("standalone")
    model = tmp / "sb.onnx"
    onnx.save(randomize_weights(load_source(Model.load(ROOT / "tests" / "data" / "seed_block.onnx.gz")), seed=1),
              str(model))
    folder = _study(tmp, model, "pipeline", THREE, frames_in_flight=2)
    proc = _run([sys.executable, "-m", "placetune.cli", "build", folder], tmp, version="8.5.2")  # JetPack 5.1
    assert proc.returncode == 0, proc.stdout + proc.stderr
    files = placetune.runtime.write_standalone(tmp / "rt")
    return tmp, Path(folder), files, model


def test_the_export_folder_carries_the_standalone_runtime_and_says_how_to_use_it(built):
    """A deployment needs no placetune install: the plan folder's runtime/ is the standalone runtime."""
    tmp, folder, files, _ = built
    assert sorted(p.name for p in (folder / "runtime").iterdir() if not p.name.startswith(".")) == sorted(
        f.name for f in files)
    assert all((folder / "runtime" / f.name).read_bytes() == f.read_bytes() for f in files)
    readme = (folder / "README.txt").read_text()
    assert "sys.path.insert(0, \"this folder/runtime\")" in readme and "import placetune_runtime" in readme
    assert "pip install placetune" not in readme


def test_the_standalone_runtime_runs_a_plan_without_onnx_optuna_sqlalchemy_or_placetune(built):
    tmp, folder, files, model = built
    assert files[0].name == "placetune_runtime.py" and {f.name for f in files[1:]} >= {
        "worker_build.py", "worker_cuda.py", "worker_resources.py", "worker_time.py", "worker_pipeline.py"}
    env = {**os.environ, **fake_env("8.5.2")}
    p = subprocess.run([sys.executable, "-c", RUN, str(folder / "runtime"), str(folder), ",".join(ABSENT), str(FAKES_DIR), "2"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout)
    assert got["refused"] == [] and got["placetune"] == []  # it asked for none of them, and no placetune loaded
    assert "not a plan folder" in got["error"]  # its own ConfigError, standalone
    # the model's outputs (the doubles compute the engines' real arithmetic; FP16 rounding at the cuts)
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(onnx.load(str(model)))
    for i, out in enumerate(got["outs"]):
        x = np.random.default_rng(3 + i).uniform(-1, 1, got["shape"]).astype(np.float32)  # frame i's input
        want = ref.run(None, {"input": x})[0]
        assert np.abs(np.array(out) - want).max() / np.abs(want).max() < 2e-2


def test_the_runtime_and_the_worker_modules_keep_to_python_38_and_import_no_placetune_at_module_level():
    pytest.importorskip("vermin")
    files = [RUNTIME] + sorted((ROOT / "placetune" / "backends" / "tensorrt").glob("worker*.py"))
    cmd = [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "-t=3.8-", "--violations",
           "--no-tips", "--eval-annotations"]
    p = subprocess.run(cmd + [str(f) for f in files], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    tree = ast.parse(RUNTIME.read_text())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name.split(".")[0] for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module.split(".")[0] for n in top if isinstance(n, ast.ImportFrom) and n.module}
    assert names <= {"__future__", "collections", "importlib", "json", "os", "shutil", "sys", "pathlib", "typing"}
    # placetune's errors only under `if __package__ == "placetune":` (inside the package)
    guarded = [n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "__package__ == 'placetune'"]
    assert guarded and "placetune.errors" in ast.unparse(guarded[0].body[0])


@pytest.mark.skipif(not os.environ.get("PLACETUNE_TEST_PYTHON38"), reason="set PLACETUNE_TEST_PYTHON38 to a Python "
                    "3.8 with numpy (and onnx, for the TensorRT double) to run the runtime on it")
def test_on_a_real_python_38(built):
    """JetPack 5.1's Python: e.g. pyenv's 3.8 with numpy 1.17.4 (Ubuntu 20.04's) and onnx 1.14.1."""
    tmp, folder, _, _ = built
    # the double's arithmetic off (onnx 1.14's reference convolution takes minutes on Python 3.8):
    # everything else runs as on the Jetson, the outputs are the double's zeros
    env = {**os.environ, **fake_env("8.5.2", NO_COMPUTE="1")}
    p = subprocess.run([os.environ["PLACETUNE_TEST_PYTHON38"], "-c", RUN, str(tmp / "rt"), str(folder),
                        ",".join(ABSENT), str(FAKES_DIR), "4"], capture_output=True, text=True, timeout=300, env=env,
                       cwd=str(tmp))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout)
    assert got["python"] == [3, 8] and got["refused"] == [] and got["placetune"] == [] and len(got["outs"]) == 4
    assert "not a plan folder" in got["error"]


@pytest.mark.parametrize("engine_file", ["../outside.engine", "/etc/hostname", "sub/../../x.engine"])
def test_the_standalone_runtime_refuses_an_engine_file_outside_its_folder(built, tmp_path, engine_file):
    """Standalone, as inside the package: a plan.json whose engine_file leaves the folder is refused, never read."""
    import shutil

    _, folder, _, _ = built
    copy = tmp_path / "plan"
    shutil.copytree(folder, copy)
    doc = json.loads((copy / "plan.json").read_text())
    doc["engines"][0]["engine_file"] = engine_file
    (copy / "plan.json").write_text(json.dumps(doc))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import placetune_runtime\n"
            "try:\n    placetune_runtime.load(sys.argv[2])\n"
            "except placetune_runtime.ConfigError as exc:\n    print(exc)\n")
    env = {**os.environ, **fake_env("8.5.2")}
    p = subprocess.run([sys.executable, "-c", code, str(copy / "runtime"), str(copy)], capture_output=True, text=True,
                       timeout=300, env=env, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "engine 0's engine_file" in p.stdout and "not a plain file name" in p.stdout


# load, run and close a plan again and again, and loads that fail half-way: what the doubles hold
# (tests/fakes/_fakegpu.py: streams, events, pinned and device buffers, execution contexts) after each
LIFECYCLE = r'''
import json, os, shutil, sys, tempfile
import numpy as np
import _fakegpu as g
where, folder, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
if where == "package":
    import placetune.runtime as R
else:
    sys.path.insert(0, where)
    import placetune_runtime as R
out = {"start": g.live(), "after": []}
for i in range(n):
    rt = R.load(folder)
    x = {"input": np.zeros(rt.inputs["input"][0], np.float32)}
    rt(x)
    assert len(list(rt.stream([x] * 3, frames_in_flight=2))) == 3
    out.setdefault("loaded", g.live())
    rt.close()
    rt.close()  # harmless
    out["after"].append(g.live())  # rt still referenced: what close() freed, not what went with the object
with R.load(folder) as rt2:
    rt2(x)
out["with"] = g.live()
rt3 = R.load(folder)
frames = rt3.stream([x] * 4, frames_in_flight=2)
next(frames)
rt3.close()
try:
    next(frames)
    out["stream_after_close"] = "ran"
except R.ConfigError as exc:
    out["stream_after_close"] = str(exc)
out["closed_mid_stream"] = g.live()
# a load that fails half-way: the last engine damaged (the engines before it are made) ...
bad = os.path.join(tempfile.mkdtemp(), "plan")
shutil.copytree(folder, bad)
doc = json.load(open(os.path.join(bad, "plan.json")))
open(os.path.join(bad, doc["engines"][-1]["engine_file"]), "wb").write(b"not an engine")
try:
    R.load(bad)
except R.BackendError as exc:
    out["damaged"] = str(exc)
out["after_damaged"] = g.live()
# ... and one that fails once its pipeline made its streams, events and buffers
pipeline = sys.modules["worker_pipeline"].Pipeline
made = {}
def failing(self, *a, **k):
    original(self, *a, **k)
    made.update(g.live())
    raise RuntimeError("cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2)")
original, pipeline.__init__ = pipeline.__init__, failing
try:
    R.load(folder)
except R.BackendError as exc:
    out["late"] = str(exc)
pipeline.__init__ = original
out["late_made"], out["after_late"] = made, g.live()
# a sticky CUDA error: close() says so, frees everything else all the same; a second close is quiet
rt4 = R.load(folder)
rt4(x)
def sticky():
    raise RuntimeError("cuCtxSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)")
rt4._cuda.layer.synchronize = sticky
try:
    rt4.close()
except R.BackendError as exc:
    out["sticky"] = str(exc)
del rt4._cuda.layer.synchronize
rt4.close()
out["after_sticky"] = g.live()
print(json.dumps(out))
'''


@pytest.mark.parametrize("binding", ["pycuda", "cuda-python"])
@pytest.mark.parametrize("where", ["package", "standalone"])
def test_closing_a_plan_runtime_frees_every_cuda_resource_it_made(built, binding, where):
    """A service that loads and closes plans (a reloaded plan, a test harness) on an 8-16 GB Jetson:
    close(), ``with`` and a load that fails half-way free the streams, events, pinned (unswappable)
    and device buffers and the execution contexts, on both CUDA bindings, in the package and standalone."""
    tmp, folder, _, _ = built
    env = {**os.environ, **fake_env("8.5.2", NO_COMPUTE="1"), "PLACETUNE_CUDA": binding,
           "PYTHONPATH": os.pathsep.join([str(FAKES_DIR)] + ([str(ROOT)] if where == "package" else []))}
    if binding == "cuda-python":
        env["PLACETUNE_FAKE_CUDA_PYTHON"] = "1"
    p = subprocess.run([sys.executable, "-c", LIFECYCLE, "package" if where == "package" else str(folder / "runtime"),
                        str(folder), "3"], capture_output=True, text=True, timeout=300, env=env, cwd=str(tmp))
    assert p.returncode == 0, p.stderr[-3000:]
    got = json.loads(p.stdout)
    start = got["start"]
    assert start["streams"] == start["pinned_buffers"] == start["device_buffers"] == start["trt_contexts"] == 0
    loaded = got["loaded"]  # 4 engines: a stream and a context each; pinned inputs and outputs; cut buffers
    assert loaded["streams"] >= 4 and loaded["trt_contexts"] == 4 and loaded["events"] > 0
    assert loaded["pinned_buffers"] > 0 and loaded["pinned_bytes"] > 0 and loaded["device_buffers"] > 0
    assert got["after"] == [start] * 3 and got["with"] == start
    assert "closed while stream() ran" in got["stream_after_close"] and got["closed_mid_stream"] == start
    assert "Magic tag does not match" in got["damaged"] and got["after_damaged"] == start
    assert got["late_made"]["pinned_buffers"] > 0 and got["late_made"]["trt_contexts"] == 4
    assert "CUDA_ERROR_OUT_OF_MEMORY" in got["late"] and got["after_late"] == start
    assert "could not free 1 CUDA resource(s): synchronize: RuntimeError: cuCtxSynchronize failed" in got["sticky"]
    assert got["after_sticky"] == start


NO_TRT = r'''
import importlib.abc, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorrt", "placetune"):
            raise ImportError("No module named %r" % name)
        return None

sys.meta_path.insert(0, Absent())
sys.path.insert(0, sys.argv[1])
import placetune_runtime
try:
    placetune_runtime.load(sys.argv[2])
except placetune_runtime.BackendError as exc:
    print(exc)
'''


def test_without_tensorrt_the_standalone_runtime_says_what_to_do_on_a_board_without_placetune(built):
    """On JetPack 5's Python 3.8 placetune is not installed, yet the runtime's only advice was `run placetune
    doctor`. It names JetPack's apt package of TensorRT's Python bindings, the one-line check, the Python that
    looked, and the doctor only where placetune is installed."""
    tmp, folder, _, _ = built
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run([sys.executable, "-c", NO_TRT, str(folder / "runtime"), str(folder)], capture_output=True,
                       text=True, timeout=120, env=env, cwd=str(tmp))
    said = p.stdout.strip()
    assert p.returncode == 0 and len(said.splitlines()) == 1, p.stdout + p.stderr[-3000:]
    assert "sudo apt install python3-libnvinfer" in said, said
    assert "python3 -c \"import tensorrt; print(tensorrt.__version__)\"" in said, said
    assert sys.executable in said and "--system-site-packages" in said, said
    assert "where placetune is installed, `placetune doctor`" in said, said
    assert "run `placetune doctor`" not in said, said
