"""Hostile and odd input, round 9: input data (.npz) forged, damaged, non-finite or scalar; study files with an
unknown mode or a byte-order mark; the lock message of a database another process writes; a tune into an
in-memory database (ended or interrupted); an ONNX graph input that is also a graph output.

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from placetune.cli.main import main
from placetune.errors import ConfigError, StoreError
from placetune.inputdata import load_input_data
from placetune.store import Store
from placetune.validate import loads_toml
from tests.hostile import alarm, memory_cap


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("placetune: error: "), err
    return lines[0]


def _forged_npz(path, shape, descr="<f8", data=b""):
    """A .npz whose one array's header claims ``shape`` while its entry holds only ``data``."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": descr, "fortran_order": False, "shape": shape})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("input.npy", header.getvalue() + data)
    return path


# --------------------------------------------------------------------------- input data (.npz)
@pytest.mark.parametrize("shape", [(10**12,), (1 << 20, 1 << 20), (100_000_000,), (1, 384, 56, 56)])
def test_input_data_whose_header_claims_more_than_it_holds_is_refused_unread(shape, tmp_path, capsys):
    """numpy allocates the array a ``.npy`` header claims before it reads a byte: a 244-byte .npz claiming
    7 TiB was a MemoryError traceback ("internal error"), one claiming 800 MB allocated it. The claim is
    checked against the bytes the entry holds first."""
    path = _forged_npz(tmp_path / "forged.npz", shape)
    with alarm(30), memory_cap(512 << 20):
        code = main(["measure", "seed-block", "--input-data", str(path)])
    assert code == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "--input-data" in line and "array 'input' claims shape" in line and "its entry holds 0" in line, line


def test_input_data_a_little_short_of_its_claim_is_refused(tmp_path):
    path = _forged_npz(tmp_path / "short.npz", (4,), "<f4", np.ones(3, np.float32).tobytes())
    with pytest.raises(ConfigError, match=r"claims shape 4 float32 \(16 bytes\) but its entry holds 12"):
        load_input_data(path)


def test_compressed_and_plain_input_data_still_read(tmp_path):
    x = np.ones((1, 384, 56, 56), np.float32)
    np.savez_compressed(tmp_path / "c.npz", input=x)
    np.savez(tmp_path / "p.npz", input=x)
    assert load_input_data(tmp_path / "c.npz").label == load_input_data(tmp_path / "p.npz").label


def _damaged(path, how):
    """A real .npz of seed-block's input, damaged as ``how`` says."""
    x = np.random.default_rng(0).standard_normal((1, 384, 56, 56)).astype(np.float32)
    (np.savez_compressed if how == "deflate" else np.savez)(path, input=x)
    b = bytearray(path.read_bytes())
    if how == "deflate":  # the compressed stream of the array: zlib.error where the header expects data
        start = b.find(b"PK\x03\x04") + 30 + len("input.npy")
        for k in range(start + 100, start + 140):
            b[k] ^= 0x55
    elif how == "header":  # the .npy header's dict: numpy's header parser raised tokenize.TokenError
        start = b.find(b"{'descr'")
        b[start + 1: start + 8] = b"((((((("
    elif how == "method":  # a compression method zipfile does not know: NotImplementedError
        b[b.find(b"PK\x03\x04") + 8] = 99
        b[b.find(b"PK\x01\x02") + 10] = 99
    path.write_bytes(bytes(b))
    return path


@pytest.mark.parametrize("how", ["deflate", "header", "method"])
def test_a_damaged_input_data_file_is_one_line(how, tmp_path, capsys):
    """Seen by the input data fuzz property (PLACETUNE_FUZZ_SEED=3491523000): damaged deflate data
    (zlib.error), a damaged .npy header (tokenize.TokenError from numpy's header parser) or an unknown
    compression method (NotImplementedError) escaped as 'internal error' tracebacks."""
    path = _damaged(tmp_path / f"{how}.npz", how)
    assert main(["measure", "seed-block", "--input-data", str(path)]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert f"--input-data {path}: cannot read it as a .npz of arrays" in line, line


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
def test_non_finite_input_data_is_refused(value, dtype, tmp_path, capsys):
    """Input data holding NaN or infinity was taken: on a board the all-GPU reference output is then not
    finite and the accuracy gate fails every pipeline plan, hours of builds, each stored as failed."""
    x = np.zeros((1, 384, 56, 56), dtype)
    x[0, 7, 3, 2] = value
    np.savez(tmp_path / "x.npz", input=x)
    assert main(["measure", "seed-block", "--input-data", str(tmp_path / "x.npz")]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "array 'input' holds 1 NaN or infinite value(s); input data must be finite numbers" in line, line


def _scalar_model(path):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "scalar",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_a_scalar_input_takes_scalar_input_data(tmp_path, capsys):
    """A network with a 0-d (scalar) input could never be given input data: the array was read through
    np.ascontiguousarray, which makes a scalar 1-d, so it was refused as '1 float32' against 'float32'."""
    model = _scalar_model(tmp_path / "scalar.onnx")
    np.savez(tmp_path / "s.npz", x=np.float32(0.5))
    data = load_input_data(tmp_path / "s.npz")
    assert data.arrays["x"].shape == ()
    assert main(["measure", str(model), "--input-data", str(tmp_path / "s.npz")]) == 0
    capsys.readouterr()
    # a batch of one where a scalar is taken says so in words
    np.savez(tmp_path / "v.npz", x=np.ones(1, np.float32))
    assert main(["measure", str(model), "--input-data", str(tmp_path / "v.npz")]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "input 'x' is 1 float32, but scalar takes a scalar float32" in line, line


# --------------------------------------------------------------------------- study files
def test_an_unknown_mode_in_a_study_file_names_the_modes(tmp_path, capsys, monkeypatch):
    """mode = "bogus" in a study file was refused as 'objective throughput cannot be measured by the simulate
    backend in bogus mode', which names neither the field's fault nor the modes there are; nothing is stored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[study]\nname = "s"\nmodel = "seed-block"\nstorage = "sqlite:///s.db"\n'
                                     'mode = "bogus\\u001b[31m"\n')
    assert main(["tune", "s.toml"]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert line == ("placetune: error: unknown mode 'bogus\\x1b[31m'; modes are engine, pipeline, replicas, "
                    "concurrent"), line
    assert not (tmp_path / "s.db").exists()


def test_a_study_file_saved_with_a_byte_order_mark_reads(tmp_path, capsys, monkeypatch):
    """Windows editors save UTF-8 with a byte-order mark; tomllib refused such a study file as 'Invalid
    statement (at line 1, column 1)', a character the user cannot see."""
    assert loads_toml("\ufeff[study]\nname = \"s\"\n", "study file s.toml") == {"study": {"name": "s"}}
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_bytes(b"\xef\xbb\xbf" + b'[study]\r\nname = "s"\r\nmodel = "seed-block"\r\n'
                                      b'storage = "sqlite:///s.db"\r\nagent = "random"\r\ntrials = 2\r\n')
    assert main(["tune", "s.toml"]) == 0
    with Store("sqlite:///s.db") as store:
        assert store.study("s").n_requests == 2
    # a mark anywhere but at the start is still refused, by line and column
    with pytest.raises(ConfigError, match="not valid TOML"):
        loads_toml('[study]\n\ufeffname = "s"\n', "study file s.toml")


# --------------------------------------------------------------------------- a database another process writes
def test_the_lock_message_names_the_process_holding_the_lock_not_this_one(tmp_path, capsys, monkeypatch):
    """A tune on a database another process held in a write transaction said 'another connection of this
    process (pid N) and pid M (...) holds its write lock': this process's own connections hold WRITE locks on
    slots of the -shm file too. Only the other process is named; nothing is stored."""
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "lk.db"
    with Store(f"sqlite:///{db}"):
        pass
    init = Store.__init__

    def short_wait(self, *args, **kwargs):  # the default busy timeout is 30 s
        init(self, *args, **{"busy_timeout": 0.3, **kwargs})

    monkeypatch.setattr(Store, "__init__", short_wait)
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time\n"
                               f"c = sqlite3.connect({str(db)!r}, isolation_level=None)\n"
                               "c.execute('BEGIN EXCLUSIVE'); print('locked', flush=True); time.sleep(120)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with alarm(100):
            code = main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "1", "--storage",
                         str(db)])
    finally:
        holder.kill()
        holder.wait()
    assert code == StoreError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "is locked" in line and f"pid {holder.pid} (" in line, line
    assert "this process" not in line and f"pid {os.getpid()}" not in line, line
    monkeypatch.undo()
    with Store(f"sqlite:///{db}") as store:
        assert store.studies() == []


# --------------------------------------------------------------------------- an in-memory database
@pytest.mark.parametrize("storage", [":memory:", "sqlite://", "sqlite:///:memory:"])
def test_a_tune_into_an_in_memory_database_names_no_command_that_reads_it_again(storage, tmp_path, capsys):
    """A tune with --storage :memory: ended with 'next: placetune export --storage sqlite:///:memory: ...', a
    command that finds nothing: the database is gone with the run. It now says so, and that the plan remains."""
    plan = tmp_path / "p.json"
    assert main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "2", "--storage", storage,
                 "--export", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "next: placetune" not in out and "--storage sqlite:///:memory:" not in out, out
    assert "the study was kept in an in-memory database, gone with this run: the plan file is what remains" in out
    assert plan.exists()


# --------------------------------------------------------------------------- ONNX: a graph input passed straight out
def _passthrough_model(path, through_identity):
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Relu", ["x"], ["y"])]
    outputs = [vi("y", TensorProto.FLOAT, None)]
    if through_identity:
        nodes.append(helper.make_node("Identity", ["x"], ["passed"]))
        outputs.append(vi("passed", TensorProto.FLOAT, None))
    else:
        outputs.append(vi("x", TensorProto.FLOAT, [1, 3, 8, 8]))
    model = helper.make_model(helper.make_graph(nodes, "g", [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])], outputs),
                              opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("through_identity", [False, True])
def test_a_graph_input_that_is_also_a_graph_output_loads(through_identity, tmp_path, capsys):
    """A valid model whose graph input is also a graph output (directly, or through an Identity the folding
    removes) was refused: 'layer node_of_y (Relu) has no shape inference for output y ... the node breaks the
    ONNX spec of Relu'. The rebuilt graph listed that output with no type under the input's name, which hid the
    input's shape from ONNX shape inference."""
    model = _passthrough_model(tmp_path / "m.onnx", through_identity)
    assert main(["check", str(model), "--json"]) == 0, capsys.readouterr().err
    layers = json.loads(capsys.readouterr().out)["layers"]
    assert [row["name"] for row in layers] == ["node_of_y"]
    assert main(["measure", str(model)]) == 0


def test_an_interrupted_tune_into_an_in_memory_database_offers_no_resume(tmp_path):
    """Ctrl-C on a tune with --storage :memory: said 'everything measured is stored. Resume with: ...', a command
    that starts from nothing: the database is gone with the run."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--model", "resnet50", "--mode", "engine", "--granularity",
           "layer", "--agent", "random", "--trials", "400", "--storage", ":memory:", "--export", str(tmp_path / "p.json")]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = 0
    for line in proc.stdout:
        if line.startswith("trial="):
            seen += 1
            if seen == 5:
                proc.send_signal(signal.SIGINT)
                break
    out = proc.stdout.read()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Resume with" not in out + err, out[-800:]
    assert "the study was in an in-memory database, gone with this run: nothing to resume" in out, out[-800:]
