"""What a new user met walking README's first hour with a detector, each a one-line answer now: a
transposed option (``--modle`` was answered "did you mean --mode?" only), a command by another name
(``placetune show``: only the list of commands), a misspelt or misplaced key of a study file's ``[study]``
(named without a suggestion, while ``[settings]`` suggested one), a text value without quotes (tomllib's
"Invalid value"), the plan file tune wrote given to ``measure --placement`` (refused for its unknown keys
'backend', 'baselines', ...) and an Ultralytics ``nms=True`` export (opset 18) under the default Orin rules,
whose fix did not say how to export with opset 17 nor that TensorRT 10.3's rules read it. Each failed
before its fix."""

from __future__ import annotations

import json

import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from placetune.cli.main import main


def _one_line_error(argv: list[str], capsys, code: int) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == code
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    return err


def test_a_transposed_option_names_both_options_it_may_mean(capsys):
    err = _one_line_error(["tune", "--modle", "yolo.onnx"], capsys, 2)
    assert "--modle (did you mean --model or --mode?)" in err, err
    err = _one_line_error(["tune", "--shpe", "images=1x3x640x640"], capsys, 2)
    assert "--shpe (did you mean --shape?)" in err, err  # --shape and --shapes are one option
    err = _one_line_error(["tune", "--trails", "5"], capsys, 2)
    assert "--trails (did you mean --trials?)" in err, err


@pytest.mark.parametrize("word, meant", [("show", "studies"), ("list", "studies"), ("tunee", "tune"),
                                         ("plots", "report")])
def test_a_command_by_another_name_names_the_command(capsys, word, meant):
    err = _one_line_error([word], capsys, 2)
    assert f"invalid choice: '{word}'" in err and f"did you mean placetune {meant}?" in err, err


def test_no_command_is_guessed_for_a_word_like_none(capsys):
    err = _one_line_error(["frobnicate"], capsys, 2)
    assert "did you mean" not in err, err


def test_a_misspelt_study_key_is_named_with_the_key_meant(tmp_path, capsys):
    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\ntrails = 30\n')
    assert main(["tune", str(tmp_path / "s.toml")]) == 6
    err = capsys.readouterr().err
    assert "unknown key(s) in [study]: trails; did you mean 'trials'?" in err, err
    assert "the keys of [study] are: agent," in err and "name," in err and "'study'" not in err, err


def test_a_settings_key_in_study_says_where_it_belongs(tmp_path, capsys):
    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\ntrt_version = "10.3"\n')
    assert main(["tune", str(tmp_path / "s.toml")]) == 6
    assert "trt_version belongs in [settings]" in capsys.readouterr().err


@pytest.mark.parametrize("line, fix", [("objective = latency", 'objective = "latency"'),
                                       ("model = yolo11n.onnx  # mine", 'model = "yolo11n.onnx"')])
def test_a_text_value_without_quotes_is_told_to_quote_it(tmp_path, capsys, line, fix):
    (tmp_path / "s.toml").write_text(f'[study]\n{line}\n')
    assert main(["tune", str(tmp_path / "s.toml")]) == 6
    err = capsys.readouterr().err
    assert "is not valid TOML: Invalid value (at line 2" in err and f"a text value needs quotes: {fix}" in err, err


def test_other_toml_errors_get_no_quote_hint(tmp_path, capsys):
    (tmp_path / "s.toml").write_text('[study]\ntrials = 3x\n')
    assert main(["tune", str(tmp_path / "s.toml")]) == 6
    assert "needs quotes" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A pipeline study of seed-block on an Orin NX (not measure's defaults), its plan and plan folder."""
    d = tmp_path_factory.mktemp("walk")
    plan = d / "plan.json"
    assert main(["tune", "--model", "seed-block", "--platform", "orin-nx-16gb", "--trials", "12",
                 "--storage", f"sqlite:///{d / 'p.db'}", "--study", "walk", "--export", str(plan)]) == 0
    assert main(["export", "--storage", f"sqlite:///{d / 'p.db'}", "--study", "walk", "--format", "trtexec",
                 "-o", str(d / "deploy")]) == 0
    return plan, d / "deploy"


def test_measure_of_the_plan_tune_wrote_measures_it_as_it_was_tuned(tuned, capsys):
    """README's `placetune measure my.onnx --placement my.plan.json` stopped with exit 6 ("measure it as it
    was tuned with --platform ... --mode pipeline --frames-in-flight 4"): a newcomer had to type back what
    the plan already says. Options left out now take the plan's; one given otherwise is still refused."""
    plan, folder = tuned
    doc = json.loads(plan.read_text())
    for given in (plan, folder):
        capsys.readouterr()
        assert main(["measure", "seed-block", "--placement", str(given), "--json"]) == 0
        measured = json.loads(capsys.readouterr().out)
        assert measured["platform"] == "orin-nx-16gb" and measured["mode"] == "pipeline"
        assert measured["throughput_fps"] == pytest.approx(doc["measured"]["throughput_fps"], rel=1e-9)
        assert measured["realized"] == {layer["name"]: layer["realized"] for layer in doc["layers"]}
    assert main(["measure", "seed-block", "--placement", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "as tuned (from the plan): --platform orin-nx-16gb --mode pipeline --frames-in-flight 4" in out, out
    assert main(["measure", "seed-block", "--placement", str(plan), "--mode", "engine"]) == 6
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a plan of seed-block on orin-nx-16gb, pipeline mode, int8" in err, err
    assert err.rstrip().endswith("measure it as it was tuned with --mode pipeline (or leave the option out)"), err
    assert main(["measure", "seed-block", "--placement", str(plan), "--platform", "orin-nx-16gb", "--mode",
                 "pipeline", "--frames-in-flight", "4", "--json"]) == 0


def test_a_placement_file_is_still_read_as_one(tuned, tmp_path, capsys):
    (tmp_path / "p.json").write_text('{"default": "GPU", "layers": {}}')
    assert main(["measure", "seed-block", "--placement", str(tmp_path / "p.json")]) == 0


def _nms_like(opset: int = 18) -> onnx.ModelProto:
    """An Ultralytics ``nms=True`` export's two forms: an opset-18 Split and a ReduceMax axes input."""
    sizes = numpy_helper.from_array(__import__("numpy").array([3, 3], dtype="int64"), "sizes")
    axes = numpy_helper.from_array(__import__("numpy").array([2, 3], dtype="int64"), "ax")
    nodes = [h.make_node("Split", ["x", "sizes"], ["a", "b"], name="/model.2/Split", axis=1),
             h.make_node("ReduceMax", ["a", "ax"], ["y"], name="/ReduceMax")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 6, 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 3, 1, 1]),
                          h.make_tensor_value_info("b", T.FLOAT, [1, 3, 4, 4])], [sizes, axes])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def test_an_opset_18_detector_is_told_how_to_export_it_and_which_rules_read_it(tmp_path, capsys):
    path = tmp_path / "nms.onnx"
    onnx.save(_nms_like(), str(path))
    assert main(["check", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "export(format='onnx', opset=17)" in out, out
    assert "for a Jetson Orin with JetPack 6.1 or later (TensorRT 10.3, whose parser reads it), give " \
           "--trt-version 10.3" in out, out
    assert main(["check", str(path), "--platform", "xavier-agx"]) == 0  # JetPack 5.1 is Xavier's last
    out = " ".join(capsys.readouterr().out.split())
    assert "would build another network" in out and "--trt-version 10.3" not in out, out


def test_the_simulated_tune_of_it_warns_with_both_fixes(tmp_path, capsys, caplog):
    path = tmp_path / "nms.onnx"
    onnx.save(_nms_like(), str(path))
    from placetune.backends.jetson import refuse_for_board
    from placetune.backends.registry import get_backend
    from placetune.model.model import Model
    from placetune.settings import Settings

    with caplog.at_level("WARNING"):
        refuse_for_board(get_backend("simulate"), Model.load(str(path)), Settings(trt_version="8.6"), {})
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "would be built wrong there" in said and "opset=17" in said and "give --trt-version 10.3" in said, said


def test_a_study_file_naming_a_missing_model_says_where_it_looked(tmp_path, monkeypatch, capsys):
    """The template's ``model = "my_model.onnx"`` copied as it is: the error named the zoo ("placetune zoo list
    names the built-in models"), not the study file nor that its paths are relative to its folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "s.toml").write_text('[study]\nmodel = "my_model.onnx"\ntrials = 2\n'
                                                  'storage = "sqlite:///p.db"\n')
    assert main(["tune", "studies/s.toml"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "study file studies/s.toml: model " in err, err
    assert f"{tmp_path / 'studies' / 'my_model.onnx'}: no such file (a model path in a study file is relative to " \
           "the study file's folder)" in err, err
    assert main(["tune", "studies/s.toml", "--model", "seed-block"]) == 0  # a model given replaces the file's


def test_a_replicas_summary_says_what_its_latency_is(tmp_path, monkeypatch, capsys):
    """Four cameras on replicas: the table's "latency ms" is the slowest replica's time per batch (the GPU's
    batch of 4 in multi-camera.toml), which a camera engineer reads as a frame's latency unless told."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--mode", "replicas", "--trials", "3", "--study", "r"]) == 0
    out = capsys.readouterr().out
    assert "latency ms in replicas mode: the slowest replica's time per batch; throughput fps: all replicas' " \
           "frames together" in " ".join(out.split()), out
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--study", "p"]) == 0
    assert "in replicas mode" not in capsys.readouterr().out


def test_a_warning_reads_as_placetune_speaks_not_as_a_module_logs(tmp_path):
    """The first line of a tune of an opset-18 detector was ``WARNING placetune.backends.jetson: ...``; now it
    is said as errors are (``placetune: warning: ...``), the module's name kept for ``-v``."""
    import subprocess
    import sys

    path = tmp_path / "nms.onnx"
    onnx.save(_nms_like(), str(path))
    for verbose, head in (([], "placetune: warning: trt_version 8.6: the plans of this study would be built wrong"),
                          (["-v"], "WARNING placetune.backends.jetson: trt_version 8.6: the plans")):
        done = subprocess.run([sys.executable, "-m", "placetune.cli", *verbose, "tune", "--model", str(path),
                               "--trials", "2", "--storage", f"sqlite:///{tmp_path / 'p.db'}", "--study",
                               f"s{len(verbose)}"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        said = [line for line in done.stderr.splitlines() if "would be built wrong" in line]
        assert said and said[0].startswith(head), done.stderr[-2000:]


def test_a_precision_or_mode_in_capitals_is_taken(tmp_path, monkeypatch, capsys):
    """TensorRT writes INT8 and FP16 (trtexec --int8, DLA docs); ``--precision INT8`` was refused as an
    invalid choice."""
    monkeypatch.chdir(tmp_path)
    assert main(["check", "seed-block", "--precision", "FP16", "--json"]) == 0
    assert main(["measure", "seed-block", "--precision", "INT8", "--mode", "Pipeline", "--json"]) == 0
    capsys.readouterr()
    assert main(["tune", "--model", "seed-block", "--precision", "INT8", "--mode", "ENGINE", "--trials", "2"]) == 0
    assert "engine mode" in capsys.readouterr().out


def test_a_throughput_summary_says_its_best_frame_takes_longer_than_all_gpus(tmp_path, capsys):
    """The summary of a YOLOv8n tune (pipeline, throughput) read `best found 2.849 ms ... 1.23x faster`
    beside all-GPU's 1.220 ms: a newcomer tuning a camera's detector took "faster" for its frame. It now
    says under the table that the ratio is throughput's and how much longer a frame takes."""
    db = f"sqlite:///{tmp_path / 'p.db'}"
    assert main(["tune", "--model", "yolov8n", "--trials", "12", "--storage", db, "--export",
                 str(tmp_path / "y.plan.json")]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.startswith(("all-GPU ", "best found"))}
    base, best = float(rows["all-GPU"][1]), float(rows["best"][2])
    assert best > base, out
    said = f"vs all-GPU compares throughput, the objective: a frame of best found takes {best / base:.2f}x as long " \
           "(4 frames in flight; --objective latency tunes for one frame's time)"
    assert said in out, out
    assert main(["tune", "--model", "seed-block", "--objective", "latency", "--trials", "8", "--storage", db,
                 "--export", str(tmp_path / "s.plan.json")]) == 0
    assert "compares throughput" not in capsys.readouterr().out
