"""Hostile and odd input, round 16: ``calibrate -o`` naming its database refused as "output" (no option of
that name), and an ``--exportProfile`` file that is valid JSON with a count or a time of another kind (a
list, a string, null, a number past a float) read by the trtexec backend (a traceback), and ``trace PLAN
--shape S`` without --model, which ignored the shape (a malformed one too), a plan folder whose ONNX file is
cut short or no ONNX given to ``build`` (a traceback), and a plan.json whose model.input_shapes or an engine's
batch are of another kind loaded by the standalone runtime (a traceback in the application), and a prepared
ONNX file or pipeline segment in the cache folder cut short, edited or replaced by a link (reused as it was:
every later build failed, a link was written through), and JSON nested past Python's recursion limit in
trtexec's export files, the engine inspector's text, the engine cache's records, a merged model's metadata and
a plan folder's build.json (json's RecursionError escaped readers that took ValueError for a damaged file), a
trusted study file's backend environment table with names or values no process can have (subprocess's
ValueError at the first build), and an --exportTimes record with an infinite time (found by a fresh seed of
the readers' property on this machine). Found by the widened fuzzing of
``tests/test_fuzz_surfaces.py`` and by reading what it reached.

Each input is checked against the rule of every round (``tests.hostile.one_line``).
"""

from __future__ import annotations

import math

import pytest

from placetune.cli.main import main
from tests.hostile import one_line


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- calibrate -o naming its own input
def test_calibrate_output_naming_its_database_names_the_option(tmp_path, capsys):
    db = tmp_path / "c.db"
    assert main(["tune", "--model", "seed-block", "--trials", "10", "--agent", "random", "--storage", str(db),
                 "--study", "s"]) == 0
    capsys.readouterr()
    before = db.read_bytes()
    assert main(["calibrate", "--study", "s", "--storage", str(db), "-o", str(db)]) == 6
    err = capsys.readouterr().err
    assert one_line(err) and "-o/--output" in err and "--storage" in err, err
    assert db.read_bytes() == before


# --------------------------------------------------------------------------- --exportProfile of other kinds
@pytest.mark.parametrize("text", [
    '[{"count": "x"}]', '[{"count": [1]}]', '[{"count": 1e999}]', '[{"count": -3}]', '[{"count": true}]',
    '[{"name": "a", "timeMs": "x"}]', '[{"name": "a", "timeMs": null}]', '[{"name": "a", "averageMs": [1]}]',
    '[{"name": "a", "medianMs": {}}]', '[{"name": ["a"], "averageMs": 1}]', '[{"name": "a", "percentage": "5%"}]',
])
def test_an_export_profile_of_other_kinds_reads_as_no_figure(text):
    from placetune.backends.trtexec.parse import parse_export_profile

    count, entries = parse_export_profile(text)  # was a ValueError / TypeError / OverflowError traceback
    assert count is None or (isinstance(count, int) and count >= 0)
    for e in entries:
        assert isinstance(e.name, str)
        for v in (e.time_ms, e.average_ms, e.percentage, e.median_ms):
            assert v is None or (isinstance(v, float) and (math.isnan(v) or math.isfinite(v)))


def test_a_good_export_profile_in_json_is_still_read():
    from placetune.backends.trtexec.parse import parse_export_profile

    count, entries = parse_export_profile('[{"count": 10}, {"name": "conv1", "timeMs": 2.5, "averageMs": 0.25, '
                                          '"medianMs": 0.24, "percentage": 100}]')
    assert count == 10 and [(e.name, e.average_ms, e.median_ms) for e in entries] == [("conv1", 0.25, 0.24)]


# --------------------------------------------------------------------------- trace --shape without --model
@pytest.mark.parametrize("shape", ["1", "input=1x384x56x56"])
def test_trace_refuses_a_shape_without_the_model_it_shapes(shape, tmp_path, capsys):
    """``trace PLAN --shape S`` without --model wrote the plan's trace as if --shape were not there (a malformed
    shape too): --shape is the input shape of --model."""
    db = tmp_path / "t.db"
    assert main(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(tmp_path / "p.plan.json")]) == 0
    capsys.readouterr()
    code = main(["trace", str(tmp_path / "p.plan.json"), "--shape", shape, "-o", str(tmp_path / "t.json")])
    err = capsys.readouterr().err
    assert code == 6 and one_line(err) and "--shape" in err and "--model" in err, err
    assert not (tmp_path / "t.json").exists()


# --------------------------------------------------------------------------- build of a folder with a corrupt ONNX
def test_build_names_a_plan_folders_corrupt_onnx_file(tmp_path, capsys, monkeypatch):
    """A plan folder whose ONNX file is cut short or is no ONNX at all, built on a board of TensorRT 10.3
    (the double): protobuf's DecodeError escaped from the check of the parser's known misreadings."""
    from pathlib import Path

    db = tmp_path / "b.db"
    assert main(["tune", "--model", "seed-block", "--trials", "4", "--agent", "random", "--storage", str(db),
                 "--study", "s"]) == 0
    assert main(["export", "--study", "s", "--storage", str(db), "--format", "trtexec", "-o",
                 str(tmp_path / "plan")]) == 0
    capsys.readouterr()
    target = sorted((tmp_path / "plan").glob("*.onnx"))[0]
    target.write_bytes(target.read_bytes()[:100])
    tests = Path(__file__).parent
    monkeypatch.setenv("PYTHONPATH", f"{tests / 'fakes'}:{tests.parent}")
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_VERSION", "10.3.0")
    monkeypatch.setenv("PLACETUNE_CACHE_DIR", str(tmp_path / "cache"))
    code = main(["build", str(tmp_path / "plan")])
    err = capsys.readouterr().err
    assert code == 3 and one_line(err) and target.name in err and "not a valid ONNX file" in err, (code, err)


# --------------------------------------------------------------------------- the runtime's input shapes and batch
_LOAD = r'''
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import placetune_runtime
for folder in sys.argv[3:]:  # one line per plan folder
    try:
        placetune_runtime.load(folder).close()
        print("loaded")
    except (placetune_runtime.ConfigError, placetune_runtime.BackendError) as exc:
        print(str(exc).replace(chr(10), " "))
'''

#: plan.json edits, what the refusal names (None: loaded); each was a traceback in the application, or read wrongly
_RUNTIME_EDITS = [
    ({}, None),                                                          # the plan as built loads
    ({"input_shapes": {"input": "abc"}}, "model.input_shapes"),         # was a ValueError traceback
    ({"input_shapes": {"input": ["x", 384, 56, 56]}}, "model.input_shapes"),  # was a ValueError traceback
    ({"input_shapes": [1, 384, 56, 56]}, "model.input_shapes"),         # was an AttributeError traceback
    ({"input_shapes": {"input": [None, 384, 56, 56]}}, "model.input_shapes"),  # was a TypeError traceback
    ({"input_shapes": {"input": [1.5, 384, 56, 56]}}, "model.input_shapes"),  # was read as 1
    ({"batch": "x"}, "batch"),                                           # replicas: was a ValueError traceback
    ({"device": "DLA2"}, "device"),                     # was DLA core 2 set on TensorRT's runtime
    ({"device": "DLA\u0660"}, "device"),               # an Arabic-Indic zero: int() reads it as core 0
]


def test_the_standalone_runtime_names_input_shapes_a_batch_and_a_device_of_another_kind(tmp_path, monkeypatch):
    """plan.json's model.input_shapes, an engine's batch and device, which the standalone runtime (no placetune's
    Plan to check them) turned into integers with int(): a traceback in the application, 1.5 read as 1, or a DLA
    core the board does not have asked of TensorRT. The folder is built with the TensorRT 10.3 double."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    import placetune.runtime
    from tests.fakes import FAKES_DIR

    tests = Path(__file__).parent
    monkeypatch.setenv("PYTHONPATH", f"{tests / 'fakes'}:{tests.parent}")
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_VERSION", "10.3.0")
    monkeypatch.setenv("PLACETUNE_CACHE_DIR", str(tmp_path / "cache"))
    assert main(["tune", "--model", "seed-block", "--trials", "4", "--agent", "random", "--storage",
                 str(tmp_path / "b.db"), "--study", "s", "--mode", "pipeline"]) == 0
    assert main(["export", "--study", "s", "--storage", str(tmp_path / "b.db"), "--format", "trtexec", "-o",
                 str(tmp_path / "plan")]) == 0
    assert main(["build", str(tmp_path / "plan")]) == 0
    placetune.runtime.write_standalone(tmp_path / "rt")
    folders = []
    for k, (edit, _) in enumerate(_RUNTIME_EDITS):
        folder = tmp_path / f"plan{k}"
        shutil.copytree(tmp_path / "plan", folder)
        doc = json.loads((folder / "plan.json").read_text())
        if "batch" in edit:
            doc["mode"] = "replicas"
            doc["engines"][0]["batch"] = edit["batch"]
        elif "device" in edit:
            doc["engines"][0].update(edit, dla_core=None)
        else:
            doc["model"].update(edit)
        (folder / "plan.json").write_text(json.dumps(doc))
        folders.append(str(folder))
    proc = subprocess.run([sys.executable, "-c", _LOAD, str(tmp_path / "rt"), str(FAKES_DIR), *folders],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(_RUNTIME_EDITS), proc.stdout
    for (edit, said), line in zip(_RUNTIME_EDITS, lines):
        assert line == "loaded" if said is None else said in line and line != "loaded", (edit, line)


# --------------------------------------------------------------------------- a damaged prepared ONNX in the cache
@pytest.mark.parametrize("damage", ["truncated", "flipped", "link"])
def test_a_damaged_prepared_onnx_in_the_cache_is_made_again(damage, tmp_path):
    """The ONNX file a backend prepares for TensorRT (decompressed, exported, FP16) is kept in the cache folder
    by the model's digest and was reused whatever it held: a copy cut short (a full disk, a power cut) or edited
    failed every build of every later run, and a link placed there was written through."""
    from placetune import Model
    from placetune.backends.onnx_prep import prepare_onnx

    model = Model.load("seed-block")
    first = prepare_onnx(model, tmp_path, fp16=False)
    good = first.read_bytes()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    if damage == "truncated":
        first.write_bytes(good[: len(good) // 3])
    elif damage == "flipped":
        first.write_bytes(good[:100] + bytes(b ^ 0x5A for b in good[100:140]) + good[140:])
    else:
        first.unlink()
        first.symlink_to(outside)
    again = prepare_onnx(model, tmp_path, fp16=False)
    assert again == first and again.read_bytes() == good and not again.is_symlink()
    assert outside.read_text() == "precious"


def test_an_intact_prepared_onnx_is_reused_not_written_again(tmp_path):
    from placetune import Model
    from placetune.backends.onnx_prep import prepare_onnx

    model = Model.load("seed-block")
    first = prepare_onnx(model, tmp_path, fp16=False)
    before = first.stat().st_mtime_ns, first.stat().st_ino
    assert prepare_onnx(model, tmp_path, fp16=False) == first
    assert (first.stat().st_mtime_ns, first.stat().st_ino) == before


def test_a_damaged_segment_in_the_engine_cache_is_made_again(tmp_path):
    """The pipeline's segment files (the sub-models TensorRT builds each engine from) had the same reuse."""
    from placetune import Model
    from placetune.backends.tensorrt.cache import EngineCache

    proto = Model.load("seed-block").proto
    cache = EngineCache(tmp_path)
    first = cache.segment_file("abc", proto)
    good = first.read_bytes()
    first.write_bytes(good[:50])
    assert cache.segment_file("abc", lambda: proto).read_bytes() == good


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"trt_version": ' * 50_000 + "1" + "}" * 50_000])
def test_the_runtime_reads_a_build_json_nested_too_deeply_as_no_record(text, tmp_path):
    """build.json (which TensorRT built the engines) nested past Python's recursion limit: a RecursionError
    traceback where a damaged build.json is read as no record (the folder is not checked)."""
    from placetune.runtime import _same_tensorrt

    (tmp_path / "build.json").write_text(text)
    _same_tensorrt(tmp_path, "10.3.0")  # was a RecursionError traceback


# --------------------------------------------------------------------------- JSON nested past the recursion limit
_DEEP = "[" * 100_000 + "]" * 100_000


def _engine_cache_has(tmp_path):
    from placetune.backends.tensorrt.cache import EngineCache

    (tmp_path / "engines").mkdir()
    (tmp_path / "engines" / "k.plan").write_bytes(b"x")
    (tmp_path / "engines" / "k.plan.json").write_text(_DEEP)
    assert EngineCache(tmp_path).has("k", "10.3.0") is False


def _worker_cached_plan(tmp_path):
    from placetune.backends.tensorrt.worker_cache import read_cached_plan

    (tmp_path / "k.plan").write_bytes(b"x")
    (tmp_path / "k.plan.json").write_text(_DEEP)
    assert read_cached_plan(str(tmp_path / "k.plan"), "10.3.0") == (None, {})


def _merged_networks(tmp_path):  # noqa: ARG001
    import onnx

    from placetune.model.merge import META_KEY, source_networks

    proto = onnx.ModelProto()
    prop = proto.metadata_props.add()
    prop.key, prop.value = META_KEY, _DEEP
    assert source_networks(proto) is None


@pytest.mark.parametrize("read", [
    lambda tmp_path: __import__("placetune.backends.trtexec.parse", fromlist=["x"]).parse_export_times(_DEEP),
    lambda tmp_path: __import__("placetune.backends.trtexec.parse", fromlist=["x"]).parse_export_profile(_DEEP),
    lambda tmp_path: __import__("placetune.backends.trtexec.parse", fromlist=["x"]).parse_layer_info(_DEEP),
    lambda tmp_path: __import__("placetune.backends.tensorrt.placement_known", fromlist=["x"]).inspector_layers(_DEEP),
    _engine_cache_has, _worker_cached_plan, _merged_networks,
], ids=["export-times", "export-profile", "layer-info", "inspector", "engine-cache", "worker-cache", "merged-model"])
def test_json_nested_past_the_recursion_limit_reads_as_damaged(read, tmp_path):
    """trtexec's export files, the engine inspector's text, the engine cache's records and a merged model's
    metadata nested past Python's recursion limit: json's RecursionError escaped every reader that took a
    ValueError for a damaged file (a traceback); each now reads it as the damaged file it is."""
    read(tmp_path)


# --------------------------------------------------------------------------- a backend's environment table
@pytest.mark.parametrize("backend, option", [("trtexec", "env"), ("tensorrt", "worker_env")])
@pytest.mark.parametrize("table", [{"A=B": "x"}, {"A": "x\0y"}, {"": "x"}, {"A": ["x"]}, {"A\0": "x"}])
def test_a_backends_environment_table_names_variables_a_process_can_have(backend, option, table, tmp_path):
    """A trusted study file's [backend_options] env / worker_env with a name holding '=' or a NUL byte, an empty
    name, or a value that is a list: subprocess's ValueError ("illegal environment variable name", "embedded
    null byte") escaped as a traceback at the first build."""
    from placetune.backends.registry import get_backend
    from placetune.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        get_backend(backend, cache_dir=tmp_path / "cache", **_found(backend), **{option: table})
    assert f"{option} must be a table of environment variables" in str(err.value) and one_line(str(err.value))


@pytest.mark.parametrize("backend, option", [("trtexec", "env"), ("tensorrt", "worker_env")])
def test_a_backends_environment_table_of_text_and_numbers_is_kept(backend, option, tmp_path):
    from placetune.backends.registry import get_backend

    be = get_backend(backend, cache_dir=tmp_path / "cache", **_found(backend),
                     **{option: {"CUDA_DEVICE_MAX_CONNECTIONS": 1, "X": "y"}})
    be.close()


def _found(backend: str) -> dict:
    """The trtexec backend looks for trtexec when it is made: the double's."""
    from pathlib import Path

    return {"trtexec": str(Path(__file__).parent / "fakes" / "trtexec")} if backend == "trtexec" else {}


# --------------------------------------------------------------------------- --exportTimes with figures past a float
@pytest.mark.parametrize("text", [
    '[{"count": null, "name": null, "timeMs": null, "startComputeMs": inf}]',  # (a fresh fuzz seed's find)
    '[{"startComputeMs": 1.0, "endComputeMs": inf}]', '[{"startComputeMs": Infinity, "endComputeMs": 2}]',
    '[{"startComputeMs": 1e999, "endComputeMs": 2}]', '[{"startComputeMs": ' + "9" * 400 + ', "endComputeMs": 2}]',
    '[{"startComputeMs": true, "endComputeMs": 2}]', '{"startComputeMs": -inf, "endComputeMs": nan}',
])
def test_export_times_past_a_float_read_as_no_figure(text):
    """An --exportTimes record with an infinite time (a C++ stream prints a float's infinity as ``inf``; JSON's
    ``Infinity``, ``1e999``) was read as an infinite time, a 400-digit integer raised OverflowError, true was
    read as 1 ms: each is no figure (NaN), as every other time that cannot be read."""
    from placetune.backends.trtexec.parse import parse_export_times

    for rec in parse_export_times(text):
        assert all(isinstance(v, float) and (math.isnan(v) or math.isfinite(v)) for v in rec.values()), rec
