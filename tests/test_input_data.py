"""Representative input data (``--input-data FILE.npz``): checked against the model at start (exit 6,
nothing stored), recorded as ``timed_input`` (the data's content hash) with every measurement and on
the study, which refuses to mix inputs; the TensorRT worker (the doubles, tests/fakes) uploads exactly
that data, trtexec gets it as ``--loadInputs`` raw files; a hardware run of a network with an NMS on
random input warns once.

trtexec's ``--loadInputs`` grammar and file format were read in NVIDIA/TensorRT release/8.5, 8.6 and 10.3
samples/common/sampleOptions.cpp (``splitNameAndValue``) and sampleUtils.cpp (``loadFromFile``); the
runs here are against the doubles only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys

import numpy as np
import pytest

from placetune.backends.registry import get_backend
from placetune.cli import main
from placetune.errors import ConfigError
from placetune.inputdata import RANDOM_INPUT, data_dependent_ops, load_input_data, timed_settings
from placetune.model.model import Model
from placetune.placement.placement import Placement
from placetune.settings import Settings
from placetune.tuning.evaluator import Evaluator

from .conftest import DATA
from .detector import write_yolov8n_nms
from .fakes import FAKES_DIR, fake_env

GN = DATA / "seed_model_gn.onnx.gz"  # input "input" 32x3x32x32 float32


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def _npz(path, **arrays):
    np.savez(path, **arrays)
    return path


def _frame(seed: int = 1, shape=(32, 3, 32, 32)) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0, 1, size=shape).astype(np.float32)


@pytest.fixture(scope="module")
def yolov8n_nms(tmp_path_factory):
    return write_yolov8n_nms(tmp_path_factory.mktemp("det"))


#: seed_block cut in three: conv1+conv2 GPU, conv3 DLA0, conv4 DLA1, concat GPU
THREE = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}


# ---------------------------------------------------------------- the file, the hash, the refusals

def test_the_hash_is_the_contents_not_the_file(tmp_path, gn):
    x = _frame()
    a = load_input_data(_npz(tmp_path / "a.npz", input=x))
    np.savez_compressed(tmp_path / "b.npz", input=x)
    b = load_input_data(tmp_path / "b.npz")
    c = load_input_data(_npz(tmp_path / "c.npz", input=_frame(2)))
    assert a.label == b.label != c.label and a.label.startswith("sha256:") and len(a.label) == 23
    a.check(gn)  # fits: no error
    assert "input 32x3x32x32 float32" in a.describe()


@pytest.mark.parametrize("arrays, words", [
    ({}, "holds no array"),
    ({"images": _frame()}, "no array for input(s) 'input'"),
    ({"input": _frame(), "extra": _frame()}, "'extra' name no input"),
    ({"input": _frame(shape=(1, 3, 64, 64))}, "input 'input' is 1x3x64x64 float32, but seed_model_gn takes 32x3x32x32"),
    ({"input": _frame().astype(np.float16)}, "float16, but seed_model_gn takes 32x3x32x32 float32"),
])
def test_data_that_does_not_fit_is_refused_at_start_with_exit_6(arrays, words, tmp_path, capsys):
    path = _npz(tmp_path / "bad.npz", **arrays)
    db = tmp_path / "pt.db"
    assert main(["tune", "--model", str(GN), "--trials", "1", "--storage", str(db), "--input-data", str(path)]) == 6
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--input-data" in err and words in err, err
    assert not db.exists()  # nothing stored
    assert main(["measure", str(GN), "--input-data", str(path)]) == 6
    assert words in capsys.readouterr().err


def test_a_missing_or_foreign_file_is_refused(tmp_path, capsys):
    assert main(["measure", str(GN), "--input-data", str(tmp_path / "nope.npz")]) == 6
    assert "input data" in capsys.readouterr().err
    (tmp_path / "x.npz").write_text("not a zip")
    assert main(["measure", str(GN), "--input-data", str(tmp_path / "x.npz")]) == 6
    assert "is not a .npz file" in capsys.readouterr().err
    assert main(["measure", str(GN), "--input-data", str(tmp_path)]) == 6
    assert "is a folder" in capsys.readouterr().err
    np.savez(tmp_path / "obj.npz", input=np.array([{"a": 1}], dtype=object))
    assert main(["measure", str(GN), "--input-data", str(tmp_path / "obj.npz")]) == 6
    assert "cannot read it as a .npz" in capsys.readouterr().err


def test_the_random_input_keeps_every_earlier_settings_hash():
    s = Settings()
    assert s.timed_input == RANDOM_INPUT and "timed_input" not in s.to_dict()
    assert s.hash == "79ab509b6e013a3c"  # as before timed_input existed: old studies resume, old caches answer
    with pytest.raises(ConfigError, match="timed_input must be"):
        Settings(timed_input="frames.npz")


# ---------------------------------------------------------------- recorded, stored, never mixed

def test_the_hash_is_recorded_with_each_measurement_and_on_the_study(tmp_path, gn, capsys, caplog, monkeypatch):
    monkeypatch.setattr("placetune.inputdata._warned", set())
    path = _npz(tmp_path / "f.npz", input=_frame())
    label = load_input_data(path).label
    db = tmp_path / "pt.db"
    with caplog.at_level(logging.WARNING, logger="placetune.inputdata"):
        ev = Evaluator(gn, "orin-agx", get_backend("simulate", input_data=str(path)), store=db, study="s")
    # the simulator says it cannot use the data
    assert [r.getMessage() for r in caplog.records] == [
        f"the simulate backend runs no network: the input data {label} is recorded (timed_input) but changes none "
        "of its figures; the tensorrt and trtexec backends time on it"]
    assert ev.settings.timed_input == label
    m = ev.evaluate(Placement.all_gpu(gn))
    assert m.extra["timed_input"] == label
    assert ev.study.settings["timed_input"] == label
    ev.close()
    plain = Evaluator(gn, "orin-agx", "simulate", store=tmp_path / "other.db")
    assert plain.evaluate(Placement.all_gpu(gn)).extra["timed_input"] == RANDOM_INPUT
    plain.close()
    assert main(["measure", str(GN), "--input-data", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["extra"]["timed_input"] == label
    assert main(["measure", str(GN), "--input-data", str(path)]) == 0
    assert f"timed on input data {label} (recorded only: the simulator runs no network)" in capsys.readouterr().out
    # the plan says what its figures were timed on
    assert main(["export", "--storage", str(db), "--study", "s", "-o", str(tmp_path / "p.json")]) == 0
    assert json.loads((tmp_path / "p.json").read_text())["settings"]["timed_input"] == label
    assert main(["export", "--storage", str(tmp_path / "other.db"), "-o", str(tmp_path / "q.json")]) == 0
    assert "timed_input" not in json.loads((tmp_path / "q.json").read_text())["settings"]


def test_a_study_refuses_to_mix_inputs(tmp_path, gn, capsys):
    db = tmp_path / "pt.db"
    Evaluator(gn, "orin-agx", "simulate", store=db, study="s").close()
    path = _npz(tmp_path / "f.npz", input=_frame())
    with pytest.raises(ConfigError, match=r"settings\.timed_input=random-uniform.*settings\.timed_input=sha256:"):
        Evaluator(gn, "orin-agx", get_backend("simulate", input_data=str(path)), store=db, study="s")
    other = _npz(tmp_path / "g.npz", input=_frame(3))
    Evaluator(gn, "orin-agx", get_backend("simulate", input_data=str(path)), store=db, study="t").close()
    with pytest.raises(ConfigError, match="timed_input"):
        Evaluator(gn, "orin-agx", get_backend("simulate", input_data=str(other)), store=db, study="t")
    # the command line: the same refusal, exit 6
    args = ["tune", "--model", str(GN), "--trials", "1", "--storage", str(db), "--study", "s", "--agent", "random"]
    assert main(args + ["--input-data", str(path)]) == 6
    assert "timed_input" in capsys.readouterr().err
    # settings that name input data need it
    with pytest.raises(ConfigError, match="no input data is given"):
        timed_settings(get_backend("simulate"), Settings(timed_input=load_input_data(path).label), gn)


def test_a_study_file_names_its_input_data(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _npz(tmp_path / "frames.npz", input=_frame())
    study = tmp_path / "s.toml"
    study.write_text(f'[study]\nname = "gn"\nmodel = "{GN}"\nagent = "random"\ntrials = 2\nmode = "engine"\n'
                     'objective = "latency"\ninput_data = "frames.npz"\nstorage = "pt.db"\n')
    assert main(["tune", str(study), "--trust-study-file"]) == 0
    capsys.readouterr()
    from placetune.store.store import Store

    st = next(s for s in Store(str(tmp_path / "pt.db")).studies() if s.name == "gn")
    assert st.settings["timed_input"] == load_input_data(tmp_path / "frames.npz").label
    # an untrusted study file's input data stays in its folder or the working folder
    (tmp_path / "sub").mkdir()
    outside = tmp_path.parent / f"{tmp_path.name}-outside.npz"
    _npz(outside, input=_frame())
    study.write_text(f'[study]\nmodel = "model-gn"\ninput_data = "{outside}"\n')
    monkeypatch.chdir(tmp_path / "sub")
    assert main(["tune", str(study)]) == 6
    assert "input_data" in capsys.readouterr().err


# ---------------------------------------------------------------- the doubles: the data reaches the device

def _trt(tmp_path, log, **kw):
    env = fake_env("10.3.0")
    env["PLACETUNE_FAKE_CUDA_HTOD_LOG"] = str(log)
    return get_backend("tensorrt", worker_env=env, cache_dir=tmp_path / "cache", warmup_ms=1, profile_iterations=0,
                       **kw)


def _uploaded(log) -> set[str]:
    return {line.split()[0] for line in log.read_text().splitlines()} if log.exists() else set()


def test_the_worker_times_on_the_data_given(tmp_path, gn):
    x = _frame(7)
    digest = hashlib.sha256(x.tobytes()).hexdigest()
    path = _npz(tmp_path / "f.npz", input=x)
    log = tmp_path / "htod.log"
    be = _trt(tmp_path, log, input_data=str(path))
    try:
        ev = Evaluator(gn, "orin-agx", be, precision="fp16", iterations=3, trt_version="10.3",
                       store=tmp_path / "pt.db")
        m = ev.evaluate(Placement.all_gpu(gn))
        assert m.ok, m.reason
        assert m.extra["timed_input"] == load_input_data(path).label
        assert digest in _uploaded(log)  # the data's bytes were copied to the device
        ev.close()
    finally:
        be.close()
    log.unlink()
    be = _trt(tmp_path, log)
    try:  # without data: random input, never those bytes
        ev = Evaluator(gn, "orin-agx", be, precision="fp16", iterations=3, trt_version="10.3",
                       store=tmp_path / "pt2.db")
        m = ev.evaluate(Placement.all_gpu(gn))
        assert m.ok and m.extra["timed_input"] == RANDOM_INPUT and digest not in _uploaded(log)
        ev.close()
    finally:
        be.close()


def _pipeline(tmp_path, model, path, racy=False):
    log = tmp_path / "htod.log"
    be = _trt(tmp_path, log, input_data=str(path))
    if racy:  # the test hook: each frame from the third on reads another slot's cut tensors
        orig = be.pool.run
        be.pool.run = lambda job, **kw: orig(dict(job, test_read_other_slot=True) if job.get("op") == "pipeline"
                                             else job, **kw)
    try:
        ev = Evaluator(model, "orin-agx", be, mode="pipeline", precision="fp16", iterations=3, trt_version="10.3",
                       frames_in_flight=2, store=tmp_path / f"pt{int(racy)}.db")
        m = ev.evaluate(Placement(model, THREE))
        ev.close()
    finally:
        be.close()
    return m, _uploaded(log)


def test_the_pipeline_is_timed_and_gated_on_the_data(tmp_path, seed_block_random):
    x = _frame(3, (1, 384, 56, 56))
    path = _npz(tmp_path / "f.npz", input=x)
    m, uploaded = _pipeline(tmp_path, Model.load(seed_block_random), path)
    assert m.ok, m.reason
    gate = m.extra["gate"]
    assert gate["checked"] and gate["passed"] and not gate.get("vacuous"), gate
    assert m.extra["timed_input"] == load_input_data(path).label
    assert hashlib.sha256(x.tobytes()).hexdigest() in uploaded  # slot 0: the data itself
    assert hashlib.sha256(x[..., ::-1].copy().tobytes()).hexdigest() in uploaded  # slot 1: its mirror image


def test_the_gate_on_data_still_sees_a_frame_that_reads_another_slot(tmp_path, seed_block_random, monkeypatch):
    """Each input slot of the pipeline holds another mirror image of the data: a pipeline that reads
    another slot's cut tensor fails the gate (identical slots would hide it)."""
    from placetune.backends.tensorrt.pool import WORKER_FILE

    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    from worker_resources import mirrored

    x = np.arange(2 * 2 * 3).reshape(2, 2, 3)
    assert [mirrored(np, x, k).tolist() for k in (0, 1, 2, 3)] == [
        x.tolist(), x[:, :, ::-1].tolist(), x[:, ::-1, :].tolist(), x[:, ::-1, ::-1].tolist()]
    assert mirrored(np, x, 4).tolist() == x[::-1].tolist()  # two samples rotated by one
    # one image (or a whole turn of the samples): every slot's variant still differs, up to 9 slots
    # (8 frames in flight); variant 4 was the image itself
    for frame in (_frame(3, (1, 3, 8, 6)), _frame(3, (2, 3, 8, 6)), _frame(3, (1, 16))):
        variants = [mirrored(np, frame, k).tobytes() for k in range(9)]
        assert len(set(variants)) == 9, frame.shape
    m, _ = _pipeline(tmp_path, Model.load(seed_block_random), _npz(tmp_path / "f.npz", input=_frame(3, (1, 384, 56, 56))), racy=True)
    assert m.status == "runtime_failed" and m.extra["gate"]["checked"] and not m.extra["gate"]["passed"], m.reason
    # the reason says what the gate compared on: the input data, not random input
    assert "on the input data" in m.reason and "random input" not in m.reason, m.reason


def test_replicas_time_the_data_repeated_to_each_replicas_batch(tmp_path, gn, monkeypatch):
    from placetune.backends.tensorrt.pool import WORKER_FILE

    monkeypatch.syspath_prepend(str(WORKER_FILE.parent))
    from worker_resources import input_values

    x = _frame(5, (3, 2))
    rng = np.random.default_rng(0)
    got = input_values(np, rng, {"input": x}, "input", (5, 2), np.dtype(np.float16))
    assert got.dtype == np.float16 and got.tolist() == x[[0, 1, 2, 0, 1]].astype(np.float16).reshape(-1).tolist()
    with pytest.raises(RuntimeError, match="no array for the engine's input 'other'"):
        input_values(np, rng, {"input": x}, "other", (3, 2), np.dtype(np.float32))
    path = _npz(tmp_path / "f.npz", input=_frame(5))
    log = tmp_path / "htod.log"
    be = _trt(tmp_path, log, input_data=str(path), replicas_duration_s=0.05)
    try:
        ev = Evaluator(gn, "orin-agx", be, mode="replicas", precision="fp16", iterations=3, trt_version="10.3",
                       replicas={"GPU": 32}, store=tmp_path / "pt.db")
        m = ev.evaluate(Placement.all_gpu(gn))
        assert m.ok, m.reason
        assert hashlib.sha256(_frame(5).tobytes()).hexdigest() in _uploaded(log)
        ev.close()
    finally:
        be.close()


def test_trtexec_loads_the_data_as_raw_files(tmp_path, gn):
    from .test_trtexec import FAKE, _records

    x = _frame(9)
    path = _npz(tmp_path / "f.npz", input=x)
    env = {"PLACETUNE_FAKE_TRTEXEC_VERSION": "10.3.0", "PLACETUNE_FAKE_TRTEXEC_RECORD": str(tmp_path / "record.jsonl"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    be = get_backend("trtexec", trtexec=str(FAKE), cache_dir=tmp_path / "cache", env=env, warmup_ms=5, duration_s=0,
                     power=False, input_data=str(path))
    ev = Evaluator(gn, "orin-agx", be, precision="fp16", iterations=3, trt_version="10.3", store=tmp_path / "pt.db")
    m = ev.evaluate(Placement.all_gpu(gn))
    assert m.ok, m.reason
    assert m.extra["timed_input"] == load_input_data(path).label
    timing = m.extra["commands"]["time"]
    [arg] = [a for a in timing if a.startswith("--loadInputs=")]
    name, _, file = arg.split("=", 1)[1].partition(":")
    assert name == "'input'" and open(file, "rb").read() == x.tobytes()  # the tensor's bytes, nothing else
    assert not any(a.startswith("--loadInputs") for a in m.extra["commands"]["build"])
    ids = np.arange(6, dtype=np.int64).reshape(2, 3)  # an INT64 input: an INT32 binding before TensorRT 10
    data = load_input_data(_npz(tmp_path / "ids.npz", ids=ids))
    old = data.raw_files(tmp_path / "raw", None, True)["ids"]
    assert open(old, "rb").read() == ids.astype(np.int32).tobytes()
    assert open(data.raw_files(tmp_path / "raw")["ids"], "rb").read() == ids.tobytes()
    assert any("--loadInputs" in " ".join(r.get("argv", [])) for r in _records(tmp_path))
    ev.close()


# ---------------------------------------------------------------- the warning

def test_a_detector_timed_on_random_input_warns_once(yolov8n_nms, tmp_path, caplog, monkeypatch):
    monkeypatch.setattr("placetune.inputdata._warned", set())
    model = Model.load(yolov8n_nms)
    assert data_dependent_ops(model) == ["EfficientNMS_TRT"]
    be = _trt(tmp_path, tmp_path / "htod.log")
    try:
        with caplog.at_level(logging.WARNING, logger="placetune.inputdata"):
            s = timed_settings(be, Settings(), model)
            timed_settings(be, s, model)  # the study's opening and its evaluator ask both
        said = [r.getMessage() for r in caplog.records if "data-dependent" in r.getMessage()]
        assert len(said) == 1 and "EfficientNMS_TRT" in said[0] and "--input-data" in said[0]
        assert "\n" not in said[0]
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="placetune.inputdata"):  # the simulator times no input
            timed_settings(get_backend("simulate"), Settings(), Model.load(yolov8n_nms))
        assert not caplog.records
    finally:
        be.close()


def test_check_names_the_data_dependent_ops(yolov8n_nms, capsys):
    assert main(["check", str(yolov8n_nms)]) == 0
    out = capsys.readouterr().out
    assert "data-dependent op(s) EfficientNMS_TRT" in out and "--input-data" in out


def test_measure_on_a_real_backend_warns_once_in_one_line(yolov8n_nms, tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setattr("placetune.inputdata._warned", set())
    for k, v in fake_env("10.3.0").items():
        monkeypatch.setenv(k, v)  # the worker imports the doubles (this process never imports tensorrt)
    monkeypatch.setenv("PLACETUNE_CACHE_DIR", str(tmp_path / "cache"))
    with caplog.at_level(logging.WARNING):
        code = main(["measure", str(yolov8n_nms), "--backend", "tensorrt", "--precision", "fp16", "--json"])
    out = capsys.readouterr()
    said = [r.getMessage() for r in caplog.records if "data-dependent" in r.getMessage()]
    assert len(said) == 1 and "EfficientNMS_TRT" in said[0] and "\n" not in said[0], (said, out.err)
    assert code == 0, out.err
    assert json.loads(out.out)["extra"]["timed_input"] == RANDOM_INPUT
    caplog.clear()
    path = _npz(tmp_path / "f.npz", images=np.zeros((1, 3, 640, 640), np.float32))
    with caplog.at_level(logging.WARNING):
        code = main(["measure", str(yolov8n_nms), "--backend", "tensorrt", "--precision", "fp16", "--json",
                     "--input-data", str(path)])
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out)["extra"]["timed_input"] == load_input_data(path).label
    assert not [r for r in caplog.records if "data-dependent" in r.getMessage()]  # timed on data: nothing to say


def test_the_selftest_times_on_the_data_and_says_so(tmp_path):
    from placetune.cli.selftest import format_report, run_selftest

    from .test_selftest import SYSFS, _device_tree

    env = fake_env("10.3.0")
    env["PLACETUNE_FAKE_TRTEXEC_VERSION"] = "10.3.0"
    env["PLACETUNE_FAKE_CUDA_HTOD_LOG"] = str(tmp_path / "htod.log")
    tree = _device_tree(tmp_path / "dt", "Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0004"])
    bad = _npz(tmp_path / "bad.npz", input=_frame())  # the tune model's batch, not the self-test's 4
    with pytest.raises(ConfigError, match="its input data is 'input' 4x3x32x32 float32 .*the file holds 'input' "
                       "32x3x32x32 float32"):
        run_selftest(tmp_path / "st0", worker_env=env, trtexec=str(FAKES_DIR / "trtexec"), quick=True,
                     device_tree=tree, power_root=SYSFS / "orin-agx", input_data=str(bad))
    assert not (tmp_path / "st0").exists()  # refused before the report folder is made
    x = _frame(11, (4, 3, 32, 32))
    path = _npz(tmp_path / "f.npz", input=x)
    code, doc = run_selftest(tmp_path / "st", worker_env=env, trtexec=str(FAKES_DIR / "trtexec"), quick=True,
                             device_tree=tree, power_root=SYSFS / "orin-agx", input_data=str(path))
    label = load_input_data(path).label
    assert doc["timed_input"].startswith(label) and f"timed on input: {label}" in format_report(doc)
    assert hashlib.sha256(x.tobytes()).hexdigest() in _uploaded(tmp_path / "htod.log")
    raw = list((tmp_path / "st" / "cache").rglob("*-b4-float32.bin"))  # trtexec's --loadInputs file of the data
    assert raw and all(f.read_bytes() == x.tobytes() for f in raw)
