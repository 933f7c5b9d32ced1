"""Hostile and odd input, round 14: a SQLite URL's own ``timeout`` named wrongly in the locked-database
message, options accepted in a mode that ignores them, ``~`` in path-valued environment variables, a SIGTERM
before the study is open, a refused layer whose advice named a layer that does not follow it, a Constant
node whose value is corrupt refused without naming it, a device given to ``build`` as its plan called
missing, and a ``selftest --worker-python`` that does not exist run to the end. (Corrupt initializers:
tests/reliability/test_onnx_fuzz.py.)

Each input is checked against the rule of every round (``tests.hostile.one_line``).
"""

from __future__ import annotations

import os
import sqlite3
import time

import pytest

from placetune.cli.main import main
from tests.hostile import one_line as _one_line


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- the busy timeout really used
def test_a_locked_database_names_the_timeout_of_the_url(tmp_path):
    """``sqlite:///f.db?timeout=0.3``: the Optuna engine waits 0.3 s, the store waited 30 s and its message
    said "busy timeout (30 s)": the URL's timeout is the one both wait, and the one the message names."""
    from placetune.errors import StoreError
    from placetune.store import Store

    db = tmp_path / "t.db"
    Store(db).close()  # the schema, made before the lock is held
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        t0 = time.monotonic()
        with pytest.raises(StoreError, match="is locked") as err:
            with Store(f"sqlite:///{db}?timeout=0.3") as store:
                with store.transaction("writing", write=True) as conn:
                    conn.exec_driver_sql("CREATE TABLE x (a)")
        assert time.monotonic() - t0 < 10
        assert "busy timeout (0.3 s)" in str(err.value), err.value
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_without_a_url_timeout_the_store_keeps_its_own(tmp_path):
    from placetune.store import Store

    with Store(tmp_path / "t.db", busy_timeout=0.2) as store:
        assert store.busy_timeout == 0.2
    with Store(f"sqlite:///{tmp_path / 't.db'}?timeout=2.5", busy_timeout=0.2) as store:
        assert store.busy_timeout == 2.5


# --------------------------------------------------------------------------- a Pad's advice names what follows
def _pad_then(op: str):
    import numpy as np

    from placetune.model.layer import Layer, TensorInfo

    x = TensorInfo("x", (1, 16, 13, 13), "float32", False, None)
    y = TensorInfo("y", (1, 16, 14, 14), "float32", False, None)
    z = TensorInfo("z", (1, 16, 13, 13), "float32", False, None)
    pads = TensorInfo("p", (8,), "int64", True, np.array([0, 0, 0, 0, 0, 0, 1, 1]))
    attrs = {"kernel_shape": [2, 2], "strides": [1, 1], "pads": [0, 0, 0, 0]}
    pad = Layer(name="/model.11/Pad", op_type="Pad", index=0, attrs={"mode": "constant"}, inputs=(x, pads),
                outputs=(y,), producers=(), consumers=("/model.11/next",))
    nxt = Layer(name="/model.11/next", op_type=op, index=1, attrs=attrs, inputs=(y,), outputs=(z,),
                producers=("/model.11/Pad",), consumers=())

    class Model:
        layers = [pad, nxt]

        def layer(self, name):
            return {"/model.11/Pad": pad, "/model.11/next": nxt}[name]

    return pad, Model()


def test_a_pad_before_a_maxpool_is_not_told_to_fold_into_a_conv():
    """yolov3-tinyu's ZeroPad2d feeds a MaxPool: the advice said "fold it into the next Conv's pads"."""
    from placetune.hardware.dla import check_layer

    pad, model = _pad_then("MaxPool")
    reason = check_layer(pad, "orin-agx", "fp16", "8.6", model=model).reason or ""
    assert "fold it" not in reason and "MaxPool '/model.11/next'" in reason, reason
    pad, model = _pad_then("Conv")
    reason = check_layer(pad, "orin-agx", "fp16", "8.6", model=model).reason or ""
    assert "fold it into the next Conv's pads ('/model.11/next')" in reason, reason
    reason = check_layer(pad, "orin-agx", "fp16", "8.6").reason or ""  # no model: no neighbour to name
    assert "Conv" not in reason and "no DLA rule" in reason, reason


# --------------------------------------------------------------------------- ~ in path-valued variables and options
def test_a_cache_dir_variable_with_a_tilde_is_under_the_home_folder(tmp_path, monkeypatch):
    """``PLACETUNE_CACHE_DIR="~/x"`` (quoted: the shell leaves the ``~``) made a folder named ``~``."""
    from placetune.caches import default_cache_dir

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PLACETUNE_CACHE_DIR", "~/x")
    assert default_cache_dir("trtexec") == tmp_path / "home" / "x" / "trtexec"
    monkeypatch.delenv("PLACETUNE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "~/xdg")
    assert default_cache_dir("tensorrt") == tmp_path / "home" / "xdg" / "placetune" / "tensorrt"


def test_a_trtexec_variable_with_a_tilde_is_found(tmp_path, monkeypatch):
    from placetune.backends.trtexec.find import find_trtexec

    exe = tmp_path / "home" / "bin" / "trtexec"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PLACETUNE_TRTEXEC", "~/bin/trtexec")
    assert find_trtexec() == str(exe)


def test_a_path_option_with_a_tilde_after_its_equals_sign_is_under_the_home_folder(tmp_path, monkeypatch, capsys):
    """``--export=~/p.json``: the shell expands no ``~`` after ``=``, and a folder named ``~`` was made."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    code = main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "2",
                 "--storage", str(tmp_path / "t.db"), "--export=~/p.json"])
    capsys.readouterr()
    assert code == 0
    assert (tmp_path / "home" / "p.json").is_file() and not (tmp_path / "~").exists()


def test_a_trusted_study_files_export_and_a_backends_folders_with_a_tilde_are_under_the_home_folder(
        tmp_path, monkeypatch, capsys):
    from placetune.backends.trtexec.backend import TrtexecBackend

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\nagent = "random"\ntrials = 2\n'
                                     'export = "~/q.json"\n')
    code = main(["tune", str(tmp_path / "s.toml"), "--trust-study-file", "--storage", str(tmp_path / "t.db")])
    capsys.readouterr()
    assert code == 0 and (home / "q.json").is_file() and not (tmp_path / "~").exists()
    be = TrtexecBackend(trtexec="/bin/true", cache_dir="~/engines", power_root="~/sys")
    assert be.cache_dir == home / "engines" and be.power_root == str(home / "sys")


# --------------------------------------------------------------------------- SIGTERM before the study is open
@pytest.mark.parametrize("delay", [0.05, 0.4, 1.2])
def test_sigterm_before_the_study_is_open_says_terminated(delay, tmp_path):
    """A SIGTERM while placetune imported its packages or before the study opened killed the process with no
    word (exit 143, "Terminated" from the shell at best); Ctrl-C said "placetune: interrupted"."""
    import signal

    from tests.test_interrupt_early import _interrupted_at

    proc, _, err = _interrupted_at(delay, tmp_path, signal.SIGTERM)
    assert proc.returncode == 143, (proc.returncode, err)
    assert "Traceback" not in err, err
    if "stopping after the evaluation in flight" not in err:  # before the study opened: one line
        assert err.strip().splitlines() == ["placetune: terminated"], err


# --------------------------------------------------------------------------- options a mode would ignore
@pytest.mark.parametrize("argv, option, modes", [
    (["--mode", "pipeline", "--dla-core", "1"], "--dla-core", "engine"),
    (["--mode", "replicas", "--dla-core", "0"], "--dla-core", "engine"),
    (["--frames-in-flight", "4"], "--frames-in-flight", "pipeline"),
    (["--mode", "replicas", "--frames-in-flight", "2"], "--frames-in-flight", "pipeline"),
])
def test_measure_refuses_an_option_its_mode_ignores(argv, option, modes, capsys):
    """``measure --mode pipeline --dla-core 1`` measured as if the option were not there (pipeline segments
    name their own cores; replicas run on DLA0; frames in flight are a pipeline's)."""
    code = main(["measure", "seed-block", *argv])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err), err
    assert option in err and f"{modes} mode" in err, err


@pytest.mark.parametrize("argv", [["--dla-core", "1", "--placement", "dla1"], ["--mode", "pipeline", "--frames-in-flight", "4"]])
def test_measure_keeps_an_option_in_its_own_mode(argv, capsys):
    assert main(["measure", "seed-block", *argv]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("mode, key, value, modes", [("pipeline", "dla_core", 1, "engine"),
                                                      ("replicas", "dla_core", 0, "engine"),
                                                      ("engine", "frames_in_flight", 4, "pipeline"),
                                                      ("replicas", "frames_in_flight", 4, "pipeline")])
def test_a_study_file_refuses_a_setting_its_mode_ignores(mode, key, value, modes, tmp_path, capsys):
    (tmp_path / "s.toml").write_text(f'[study]\nmodel = "seed-block"\nagent = "random"\ntrials = 2\n'
                                     f'mode = "{mode}"\n[settings]\n{key} = {value}\n')
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and f"[settings] {key}" in err and f"{modes} mode" in err, err
    assert not (tmp_path / "s.db").exists()


def test_a_mode_given_on_the_command_line_is_checked_against_the_study_files_settings(tmp_path, capsys):
    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\nagent = "random"\ntrials = 2\n'
                                     'mode = "engine"\n[settings]\ndla_core = 0\n')
    code = main(["tune", str(tmp_path / "s.toml"), "--mode", "pipeline", "--storage", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and "[settings] dla_core" in err, err


# --------------------------------------------------------------------------- a Constant whose value is corrupt
def _with_constant(tmp_path, corrupt) -> str:
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    value = numpy_helper.from_array(np.ones((1, 4, 8, 8), np.float32), "c")
    corrupt(value)
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["c"], name="bias", value=value),
         helper.make_node("Add", ["x", "c"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])])
    path = tmp_path / "const.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return str(path)


@pytest.mark.parametrize("corrupt, says", [
    (lambda t: setattr(t, "data_type", 99), "has data type 99, which is no ONNX tensor type"),
    (lambda t: setattr(t, "raw_data", t.raw_data[:10]), "holds 10 bytes of data, and its shape 1x4x8x8 of FLOAT needs 1,024"),
    (lambda t: setattr(t, "data_type", 8), "keeps STRING values in raw_data"),
])
def test_a_constant_whose_value_is_corrupt_is_named(tmp_path, capsys, corrupt, says):
    """A Constant node's value is a tensor as an initializer is: one of an unknown type or with too few bytes
    was refused as 'malformed ONNX graph (KeyError: 99)', naming neither the node nor what its value needs."""
    from placetune.errors import ModelError

    code = main(["check", _with_constant(tmp_path, corrupt)])
    err = capsys.readouterr().err
    assert code == ModelError.exit_code and _one_line(err), err
    assert "Constant node 'bias'" in err and says in err, err


# --------------------------------------------------------------------------- build and selftest inputs
@pytest.mark.parametrize("device", ["/dev/null", "/dev/zero"])
def test_build_names_a_device_given_as_its_plan_as_one(device, capsys):
    """``placetune build /dev/zero`` said 'no such file or folder' of a file that exists."""
    from placetune.errors import ConfigError

    code = main(["build", device])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and _one_line(err), err
    assert "no such file" not in err and "character device, not a regular file" in err, err


def test_build_says_a_missing_plan_is_missing(tmp_path, capsys):
    code = main(["build", str(tmp_path / "gone.json")])
    err = capsys.readouterr().err
    assert code == 6 and _one_line(err) and "no such file or folder" in err, err


def test_selftest_refuses_a_worker_python_that_does_not_exist_before_it_runs(tmp_path, capsys):
    """``--worker-python /typo`` ran the whole self-test (its report saying only that no check passed) where
    tune and build refuse it in one line: the self-test refuses it too, and makes no report folder."""
    from placetune.errors import ConfigError

    code = main(["selftest", "--worker-python", str(tmp_path / "no-python"), "-o", str(tmp_path / "st")])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and _one_line(err), err
    assert "worker Python" in err and "--worker-python" in err and "does not exist" in err, err
    assert not (tmp_path / "st").exists()


# --------------------------------------------------------------------------- SIGHUP: the terminal closed
def test_a_hangup_stops_a_tune_after_the_evaluation_in_flight(tmp_path, capsys, monkeypatch):
    """A closed terminal (an ssh session dropped) sends SIGHUP: it killed a tune at once, without a word, its
    evaluation in flight lost, no plan exported and the run's lock left behind. It now stops as SIGTERM does
    (exit 129): what was measured is stored, the plan exported, the command to resume printed."""
    import signal

    from placetune.backends.simulate.simulator import SimulatedJetson

    real = SimulatedJetson.measure
    calls = []

    def measure(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGHUP)
        return real(self, *args, **kwargs)

    def outside(signum, frame):  # the handler around the run (pytest's process is not to be hung up)
        raise KeyboardInterrupt

    monkeypatch.setattr(SimulatedJetson, "measure", measure)
    previous = signal.signal(signal.SIGHUP, outside)
    try:
        db = tmp_path / "h.db"
        code = main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "20", "--storage", str(db),
                     "--study", "h"])
        assert signal.getsignal(signal.SIGHUP) is outside  # the run's own handler is gone again
    finally:
        signal.signal(signal.SIGHUP, previous)
    out = capsys.readouterr()
    assert code == 128 + signal.SIGHUP, out
    assert "stopping after the evaluation in flight (SIGHUP again to stop at once)" in out.err, out.err
    assert "everything measured is stored. Resume with:" in out.out and (tmp_path / "h.plan.json").is_file(), out
    assert sqlite3.connect(db).execute("SELECT COUNT(*) FROM pt_requests").fetchone()[0] == 3
    assert not list(tmp_path.glob("*.tune-lock"))
