"""What the morning's export would refuse is refused when ``placetune tune`` starts, before anything is
stored: the export's own checks (trtexec's ``--shapes`` and ``--layerDeviceTypes`` grammar, node names
TensorRT renames), called at start with the same one-line message and exit code; ``placetune check``
lists them as problems. Also: a study file's malformed ``timeout`` is named as the file's key."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main
from placetune.errors import ConfigError


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- a study file's timeout
@pytest.mark.parametrize("value, said", [
    ('"8x"', "[study] timeout '8x': use a number of seconds"),
    ("0.5", "[study] timeout must be positive"),
    ("true", "[study] timeout must be a duration"),
])
def test_a_study_files_bad_timeout_names_the_key_and_the_file(value, said, tmp_path, capsys):
    """Before: ``timeout = "8x"`` in a study file was refused as "bad --timeout", an option never given."""
    (tmp_path / "s.toml").write_text(f'[study]\nmodel = "seed-block"\ntimeout = {value}\n')
    assert main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")]) == 6
    err = capsys.readouterr().err
    assert f"study file {tmp_path / 's.toml'}: {said}" in err and "--timeout" not in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s.db").exists()


def test_the_command_lines_bad_timeout_still_names_the_option(capsys):
    assert main(["tune", "--model", "seed-block", "--timeout", "8x"]) == 6
    assert "bad --timeout '8x'" in capsys.readouterr().err


# --------------------------------------------------------------------------- what the export refuses, at start
def _model(path, *, input_name="x", same_node_names=False, dynamic=False):
    """Four Conv+Relu blocks; ``same_node_names``: every Conv node named ``conv`` (TensorRT renames the copies)."""
    nodes, inits, prev = [], [], input_name
    for i in range(4):
        inits.append(numpy_helper.from_array(np.full((8, 8 if i else 3, 3, 3), 0.01, np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [prev, f"w{i}"], [f"c{i}"], name="conv" if same_node_names else f"conv{i}",
                                      pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        prev = f"r{i}"
    batch = "N" if dynamic else 1
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [batch, 3, 32, 32])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [batch, 8, 32, 32])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


CASES = {  # name -> (model options, tune options, exit code)
    "same node names": ({"same_node_names": True}, [], 5),
    "a comma in a dynamic input's name": ({"input_name": "a,b", "dynamic": True}, ["--shape", "a,b=1x3x32x32"], 3),
    "a quote in a dynamic input's name": ({"input_name": "a'b", "dynamic": True}, ["--shape", "a'b=1x3x32x32"], 3),
}


def _export_refusal(tmp_path, model, shapes, capsys) -> tuple[int, str]:
    """What ``placetune export --format trtexec`` says of an engine-mode plan with a DLA layer next to GPU ones
    (of a study stored before the Python API refused such a model: its start check off here)."""
    import placetune
    import placetune.tuning.evaluator as evaluator
    from placetune import Placement

    url = f"sqlite:///{tmp_path / 'made.db'}"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(evaluator, "refuse_unexportable", lambda *a: None)
        ev = placetune.Evaluator(model, "orin-agx", mode="engine", store=url, study="made", shapes=shapes or None)
    with ev:
        m = ev.evaluate(Placement(ev.model, {ev.model.names[2]: "DLA0"}), agent="t", trial_number=0)
    capsys.readouterr()
    code = main(["export", "--study", "made", "--storage", url, "--format", "trtexec", "-o", str(tmp_path / "out"),
                 "--measurement", str(m.extra["_id"])])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("case", CASES)
def test_what_the_trtexec_export_refuses_is_refused_when_tune_starts(case, tmp_path, capsys):
    """Before: ``tune`` ran its whole budget on such a model and stored a plan that ``export --format trtexec``
    (and ``placetune build``, which builds from that folder) refused in the morning."""
    options, tune_options, exit_code = CASES[case]
    model = _model(tmp_path / "m.onnx", **options)
    shapes = [tune_options[1]] if tune_options else None
    exported, export_err = _export_refusal(tmp_path, model, shapes, capsys)
    assert exported == exit_code, export_err
    code = main(["tune", "--model", model, *tune_options, "--mode", "engine", "--agent", "random", "--trials", "3",
                 "--storage", str(tmp_path / "night.db")])
    err = capsys.readouterr().err
    assert code == exit_code, err
    assert len(err.strip().splitlines()) == 1 and err == export_err  # the export's own message
    assert not (tmp_path / "night.db").exists()  # nothing stored, nothing built
    # replicas mode writes --layerDeviceTypes and --shapes too
    assert main(["tune", "--model", model, *tune_options, "--mode", "replicas", "--agent", "random", "--trials", "3",
                 "--storage", str(tmp_path / "night.db")]) == exit_code
    assert not (tmp_path / "night.db").exists()


def test_a_pipeline_of_a_model_with_same_node_names_is_tuned(tmp_path, capsys):
    """A pipeline's segments are whole on one device, built from static ONNX files: no --layerDeviceTypes,
    no --shapes, so the export takes them and tune does not refuse them."""
    model = _model(tmp_path / "m.onnx", same_node_names=True)
    code = main(["tune", "--model", model, "--mode", "pipeline", "--agent", "random", "--trials", "3",
                 "--storage", str(tmp_path / "night.db"), "--export", str(tmp_path / "p.plan.json")])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["export", "--storage", str(tmp_path / "night.db"), "--format", "trtexec", "-o",
                 str(tmp_path / "out")]) == 0, capsys.readouterr().err


def test_a_simulated_int8_tune_for_tensorrt_11_of_a_model_without_qdq_is_refused_at_start(tmp_path, capsys):
    """Before: the simulated Jetson tuned it (no build to fail) and the export refused every plan of it."""
    model = _model(tmp_path / "m.onnx")
    code = main(["tune", "--model", model, "--precision", "int8", "--trt-version", "11.4.1", "--agent", "random",
                 "--trials", "3", "--storage", str(tmp_path / "night.db")])
    err = capsys.readouterr().err
    assert code == 6 and len(err.strip().splitlines()) == 1, err
    assert "precision int8 for TensorRT 11.4.1" in err and "Q/DQ" in err
    assert not (tmp_path / "night.db").exists()


def test_check_lists_what_tune_would_refuse_as_problems(tmp_path, capsys):
    import json

    model = _model(tmp_path / "m.onnx", input_name="a,b", dynamic=True, same_node_names=True)
    assert main(["check", model, "--shape", "a,b=1x3x32x32", "--json"]) == 0
    problems = json.loads(capsys.readouterr().out)["summary"]["problems"]
    assert [(p["modes"], p["exit_code"]) for p in problems] == [(["engine", "replicas"], 3), (["engine", "replicas"], 5)]
    assert "trtexec's --shapes cannot express" in problems[0]["message"]
    assert main(["check", model, "--shape", "a,b=1x3x32x32"]) == 0
    out = capsys.readouterr().out
    assert out.count("problem in engine and replicas mode (placetune tune refuses it, exit") == 2, out
    assert main(["check", _model(tmp_path / "ok.onnx"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["problems"] == []


def test_int8_without_qdq_on_tensorrt_11_is_one_rule_with_one_message(tmp_path):
    """Before, the Jetson backends refused it in their own words ("precision int8: TensorRT 11.4.1 builds
    strongly typed networks only...") and the export and tune's start checks in others, which spoke of "this
    plan's model" at tune time too. One rule now, said the same at tune, build and export time."""
    from types import SimpleNamespace

    from placetune.backends.jetson import refuse_untyped_int8, untyped_int8
    from placetune.model.model import Model
    from placetune.plan.trtexec import export_refusals

    model = Model.load(_model(tmp_path / "m.onnx"))
    export = export_refusals(model, "engine", "int8", "11.4.1")
    with pytest.raises(ConfigError) as board:
        refuse_untyped_int8(SimpleNamespace(simulated=False), model, "int8", {"trt_version": "11.4.1"})
    built = untyped_int8(model, "int8", "11.4.1", True, {"backend": "trtexec"})
    assert [str(e) for e in export] == [str(board.value)] == [built.reason]
    assert str(board.value).startswith("precision int8 for TensorRT 11.4.1: ") and "this plan" not in str(board.value)
    assert export_refusals(model, "engine", "int8", "10.3") == []


def test_the_python_api_runs_tunes_start_checks_before_it_stores_a_study(tmp_path, capsys):
    """Before, ``Evaluator(..., store=...)`` stored a study of a model whose every plan the export refuses,
    which ``placetune tune`` refuses at its start; now it refuses it too, with tune's one-line message, and
    before the database file exists. Without a store (in memory: nothing for an export) it still measures."""
    import placetune
    from placetune import Placement
    from placetune.errors import PlacementError

    model = _model(tmp_path / "m.onnx", same_node_names=True)
    assert main(["tune", "--model", model, "--mode", "engine", "--agent", "random", "--trials", "3",
                 "--storage", str(tmp_path / "night.db")]) == 5
    said = capsys.readouterr().err.strip().removeprefix("placetune: error: ")
    with pytest.raises(PlacementError) as e:
        placetune.Evaluator(model, "orin-agx", mode="engine", store=tmp_path / "api.db")
    assert str(e.value) == said and "\n" not in str(e.value)
    assert not (tmp_path / "api.db").exists()
    with pytest.raises(ConfigError) as e:
        placetune.Evaluator(_model(tmp_path / "q.onnx"), "orin-agx", precision="int8", trt_version="11.4.1",
                            store=tmp_path / "api.db")
    assert str(e.value).startswith("precision int8 for TensorRT 11.4.1: ")
    with placetune.Evaluator(model, "orin-agx", mode="engine") as ev:  # in memory
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
