"""Hostile and odd input, round 12: values that hold a database URL echoed cut short in an error, ONNX models
that point outside their folder or are no file, study files with odd types and numbers, plans fed to the
runtime and the deploy writers edited, the Python API and the Gymnasium environments given wrong types, and
tunes stopped by a signal or sharing one SQLite file.

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import pytest

from placetune.cli.main import main
from placetune.safetext import mask_secrets

SECRET_URL = "postgresql+psycopg://tuner:s3cr%2FetPW%40%23x@127.0.0.1:1/db"
LEAKS = ("s3cr", "etPW")


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- a URL cut short in a message
@pytest.mark.parametrize("key, table", [
    ("dla_core", "settings"), ("trt_version", "settings"), ("batch", "settings"), ("trials", "study"),
    ("timeout", "study"), ("streams", "study"), ("stop_when_converged", "study")])
def test_a_database_url_given_as_another_setting_hides_its_password_when_cut_short(key, table, tmp_path, capsys):
    """Seen by the study-file fuzz property (PLACETUNE_FUZZ_SEED=573201523): a value shown at most 40
    characters long was cut inside the password of a URL, and with no ``@`` left the masking let the
    password's first characters through."""
    study = {"model": '"seed-block"', "trials": "2", "agent": '"random"', "backend": '"simulate"'}
    body = {"study": dict(study), "settings": {}}
    body[table][key] = f'"{SECRET_URL}"'
    text = "".join(f"[{t}]\n" + "".join(f"{k} = {v}\n" for k, v in kv.items()) for t, kv in body.items())
    (tmp_path / "s.toml").write_text(text)
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    out = capsys.readouterr()
    assert code == 6, out
    said = out.out + out.err
    assert key in said and not any(leak in said for leak in LEAKS), said
    assert len(out.err.strip().splitlines()) == 1


@pytest.mark.parametrize("text, masked", [
    ("got 'postgresql+psycopg://tuner:s3cr%2FetPW%4'", "got 'postgresql+psycopg://tuner:***'"),
    ("got postgresql://u:s3cr/etP... (300 characters)", "got postgresql://u:*** (300 characters)"),
    ('got "mysql+pymysql://u:s3cr"', 'got "mysql+pymysql://u:***"'),
    ("postgresql+psycopg:/tuner:s3cr", "postgresql+psycopg:/tuner:***"),
])
def test_a_url_cut_inside_its_password_is_masked(text, masked):
    assert mask_secrets(text) == masked


@pytest.mark.parametrize("text", [
    "postgresql://db:5432/placetune refused", "got 'postgresql://db:5432'", "sqlite:///runs/p.db",
    "sqlite:////tmp/a:b.db", "postgresql+psycopg://tuner:***@db/x", "see https://docs.nvidia.com/x: y",
    "layer /conv1/Conv: GPU", "trt_version 10.3: no JetPack"])
def test_text_with_no_cut_password_is_unchanged(text):
    assert mask_secrets(text) == text


# --------------------------------------------------------------------------- ONNX external data
def _external_model(folder, location):
    """A Conv whose 4x3x3x3 float weight is external data at ``location`` (written as onnx writes it)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(exist_ok=True)
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "432")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("Conv", ["x", "W"], ["y"], name="conv")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = folder / "model.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return path


@pytest.mark.parametrize("location, said", [
    ("w\x00.bin", "outside the model's folder"),  # a NUL byte: realpath raised ValueError, a traceback
    ("", "names no file"),  # no location at all: was said to be "outside the model's folder"
])
def test_external_data_whose_location_no_path_can_hold_is_refused_in_one_line(location, said, tmp_path, capsys):
    path = _external_model(tmp_path / "m", location)
    code = main(["tune", "--model", str(path), "--agent", "random", "--trials", "2",
                 "--storage", str(tmp_path / "t.db"), "--study", "w"])
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert said in err and "'W'" in err, err


@pytest.mark.parametrize("where", ["/dev/zero", "absolute", "fifo", "link-out"])
def test_external_data_at_a_device_a_fifo_or_outside_its_folder_is_refused_without_reading(where, tmp_path, capsys):
    import os

    folder = tmp_path / "m"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 432)
    location = {"/dev/zero": "/dev/zero", "absolute": str(tmp_path / "secret.bin")}.get(where, "w.bin")
    if where == "fifo":
        os.mkfifo(folder / "w.bin")  # reading it would block for ever
    elif where == "link-out":
        os.symlink(tmp_path / "secret.bin", folder / "w.bin")
    path = _external_model(folder, location)
    code = main(["tune", "--model", str(path), "--agent", "random", "--trials", "2",
                 "--storage", str(tmp_path / "t.db"), "--study", "w"])
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1 and "'W'" in err, err


# --------------------------------------------------------------------------- study files and device profiles
@pytest.mark.parametrize("where", ["study", "settings"])
def test_a_study_file_integer_of_thousands_of_digits_is_one_line_not_a_traceback(where, tmp_path, capsys):
    """tomllib reads an integer with ``int()``, which raises ValueError past 4300 digits: a traceback."""
    body = '[study]\nmodel = "seed-block"\nagent = "random"\n'
    body += f"trials = {'9' * 5000}\n" if where == "study" else f"trials = 2\n[settings]\ndla_core = {'9' * 5000}\n"
    (tmp_path / "s.toml").write_text(body)
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 6 and len(err.strip().splitlines()) == 1 and "not valid TOML" in err, err
    assert not (tmp_path / "s.db").exists()


def test_a_device_profile_integer_of_thousands_of_digits_is_refused():
    from placetune.errors import ConfigError
    from placetune.validate import loads_toml

    with pytest.raises(ConfigError, match="too long to read"):
        loads_toml(f"[noise]\nseed = {'1' * 4400}\n", "device profile p.toml")


@pytest.mark.parametrize("body, field", [
    ("trials = nan", "trials"), ("trials = inf", "trials"), ("trials = 2\ntimeout = nan", "timeout"),
    ("trials = 2\ntimeout = -0.0", "timeout"), ("trials = 2\nstreams = nan", "streams"),
    ('trials = 2\nconstraints = ["latency<=1e400"]', "finite"), ("trials = 2\nobjective = nan", "objective"),
])
def test_non_finite_numbers_in_a_study_file_name_their_key(body, field, tmp_path, capsys):
    (tmp_path / "s.toml").write_text(f'[study]\nmodel = "seed-block"\nagent = "random"\n{body}\n')
    code = main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")])
    err = capsys.readouterr().err
    assert code == 6 and len(err.strip().splitlines()) == 1 and field in err, err


# --------------------------------------------------------------------------- the Python API given wrong types
@pytest.fixture(scope="module")
def evaluator():
    from placetune import Evaluator

    return Evaluator("seed-block")


@pytest.mark.parametrize("assignment", [
    "array of NaN",  # numpy's truth value of a long array raised ValueError ("ambiguous")
    ["/conv1/Conv"], ("/conv1/Conv",), 5, float("nan"), "GPU",  # AttributeError / TypeError, or 'G', 'P', 'U'
])
def test_evaluate_of_an_assignment_that_is_no_mapping_is_a_placement_error(assignment, evaluator):
    import numpy as np

    from placetune.errors import PlacementError

    if assignment == "array of NaN":
        assignment = np.full(100, np.nan)
    with pytest.raises(PlacementError, match="assignment must map layer names to devices .*Space.to_placement"):
        evaluator.evaluate(assignment)


@pytest.mark.parametrize("device", [[1], {"a": 1}, None, float("nan"), b"GPU"])
def test_a_device_that_is_no_text_is_an_unknown_device(device, evaluator):
    from placetune.errors import PlacementError

    with pytest.raises(PlacementError, match="unknown device"):
        evaluator.evaluate({"/conv1/Conv": device})  # a list or dict raised TypeError (unhashable)


def test_mappings_and_placements_still_evaluate(evaluator):
    from placetune import Placement

    a = evaluator.evaluate({"/conv1/Conv": "DLA0"})
    b = evaluator.evaluate(Placement(evaluator.model, {"/conv1/Conv": "dla"}))
    assert a.status == b.status == "ok" and a.median_ms == b.median_ms


def test_parse_shape_spec_and_load_plan_of_no_text_raise_placetune_errors():
    from placetune import load_plan, parse_shape_spec
    from placetune.errors import ConfigError, ShapeError

    with pytest.raises(ShapeError, match="give text such as input=1x3x224x224"):
        parse_shape_spec(float("nan"))  # AttributeError: 'float' object has no attribute 'count'
    with pytest.raises(ConfigError, match="plan file: give a file name"):
        load_plan(float("nan"))  # TypeError from Path()


# --------------------------------------------------------------------------- SQLite URL options
@pytest.mark.parametrize("option, said", [
    ("timeout=nan", "timeout must be a number of seconds from 0 to 2147483"),  # an undefined busy timeout
    ("timeout=inf", "timeout must be a number of seconds"), ("timeout=-5", "timeout must be"),
    ("timeout=1e10", "timeout must be"),
    ("cached_statements=99999999999999999999", "cached_statements must be a whole number"),  # OverflowError
    ("detect_types=99999999999999999999", "detect_types must be 0, 1"),  # OverflowError
    ("cached_statements=-1", "cached_statements must be"), ("timeout=5&timeout=nan", "timeout must be"),
    ("uri=true&timeout=nan", "timeout must be"),
])
def test_a_sqlite_url_option_out_of_the_drivers_range_is_a_database_error(option, said, tmp_path, capsys):
    code = main(["tune", "--model", "seed-block", "--trials", "1", "--agent", "random",
                 "--storage", f"sqlite:///{tmp_path}/q.db?{option}"])
    err = capsys.readouterr().err
    assert code == 7 and len(err.strip().splitlines()) == 1 and said in err and "Traceback" not in err, err
    assert not (tmp_path / "q.db").exists()


@pytest.mark.parametrize("option", ["timeout=5", "timeout=0.5", "cached_statements=100", "detect_types=3"])
def test_sqlite_url_options_in_range_still_open(option, tmp_path, capsys):
    assert main(["tune", "--model", "seed-block", "--trials", "1", "--agent", "random",
                 "--storage", f"sqlite:///{tmp_path}/q.db?{option}"]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("kw", ["trt_version", "dla_core", "power_mode", "seed", "batch"])
def test_the_python_api_hides_a_url_given_as_another_setting(kw):
    """The same value given to the Python API: its exception (a caller's traceback) showed the password's start."""
    from placetune import Evaluator
    from placetune.errors import PlacetuneError

    with pytest.raises(PlacetuneError) as info:
        Evaluator("seed-block", **{kw: SECRET_URL})
    assert not any(leak in str(info.value) for leak in LEAKS), str(info.value)


def test_an_error_built_with_a_url_masks_it_and_still_pickles():
    import pickle

    from placetune.errors import ConfigError, StoreError

    e = StoreError(f"cannot open {SECRET_URL}")
    assert "s3cr" not in str(e) and "tuner:***@127.0.0.1" in str(e)
    assert str(pickle.loads(pickle.dumps(e))) == str(e) and ConfigError(5).args == (5,)


# --------------------------------------------------------------------------- ONNX: a Conv's kernel_shape
def _conv_model(tmp_path, kernel_shape, weight=(4, 3, 3, 3)):
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    attrs = {"kernel_shape": kernel_shape} if kernel_shape is not None else {}
    node = helper.make_node("Conv", ["x", "W"], ["y"], name="conv", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(np.ones(weight, np.float32), "W")])
    path = tmp_path / "k.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    return path


def test_a_conv_whose_kernel_shape_is_not_its_weights_kernel_is_refused(tmp_path, capsys):
    """ONNX shape inference took kernel_shape=5x5 over the 3x3 weight (an output of 12x12, simulated and tuned);
    TensorRT's ONNX parser refuses the node (onnx-tensorrt importConv: "The size of spatial dimension and the
    size of kernel shape are not equal for the Conv operator")."""
    code = main(["check", str(_conv_model(tmp_path, [5, 5]))])
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1, err
    assert "kernel_shape=[5, 5]" in err and "whose kernel is 3x3" in err, err


@pytest.mark.parametrize("kernel_shape", [None, [3, 3]])
def test_a_conv_whose_kernel_shape_matches_or_is_left_out_loads(kernel_shape, tmp_path):
    from placetune import Model

    assert Model.load(_conv_model(tmp_path, kernel_shape)).layer("conv").outputs[0].shape == (1, 4, 14, 14)


def test_a_graph_without_outputs_is_refused_at_load(tmp_path, capsys):
    """It was simulated and tuned; TensorRT builds nothing of it ("Network must have at least one output")."""
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])], [])
    path = tmp_path / "no_output.onnx"
    path.write_bytes(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    code = main(["check", str(path)])
    err = capsys.readouterr().err
    assert code == 3 and len(err.strip().splitlines()) == 1 and "has no output" in err, err


# --------------------------------------------------------------------------- names that become file names
@pytest.mark.parametrize("study", ["a\nb", "a\tb"])
def test_a_study_name_with_a_newline_or_tab_makes_no_plan_file_of_that_name(study, tmp_path, capsys):
    """ESC and bidi characters were refused in a file name placetune makes, a newline or tab was not: the
    default plan file was written as ``a<newline>b.plan.json``, which a shell loop over ``ls`` splits in two."""
    code = main(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random",
                 "--storage", str(tmp_path / "n.db"), "--study", study])
    err = capsys.readouterr().err
    assert code == 6 and "control or bidi characters" in err and "--export PATH" in err, err
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".plan.json")]


def test_the_same_study_exported_to_a_plain_name_runs(tmp_path, capsys):
    assert main(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--storage",
                 str(tmp_path / "n.db"), "--study", "a\nb", "--export", str(tmp_path / "ab.plan.json")]) == 0
    assert (tmp_path / "ab.plan.json").is_file()
