"""`placetune check`, `zoo list|export` and bad input through the real command line."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from placetune.cli.main import main

from .conftest import DATA


def run_cli(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "placetune.cli", *argv], capture_output=True, text=True)


def test_check_resnet18_table(capsys):
    assert main(["check", "resnet18", "--platform", "orin-agx", "--layers"]) == 0  # the table is on request
    out = capsys.readouterr().out
    assert "/conv1/Conv" in out and "DLA-eligible" in out and "island" in out


def test_check_seed_model_gn_int8_json(capsys):
    path = str(DATA / "seed_model_gn.onnx.gz")
    code = main(["check", path, "--platform", "orin-agx", "--precision", "int8", "--shape", "input=32x3x32x32", "--json"])
    assert code == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["platform"] == "orin-agx" and doc["precision"] == "int8"
    by_op: dict[str, list[dict]] = {}
    for layer in doc["layers"]:
        by_op.setdefault(layer["op_type"], []).append(layer)
        assert set(layer) >= {"name", "op_type", "dla", "reason"}
    # the GroupNorm pieces are GPU-only with a reason
    for layer in by_op["InstanceNormalization"] + by_op["Reshape"][:8]:
        assert layer["dla"] is False and layer["reason"]
    # convolutions and ReLUs are DLA-eligible
    assert all(layer["dla"] and layer["reason"] is None for layer in by_op["Conv"] + by_op["Relu"])
    s = doc["summary"]
    assert s["layers"] == 31 and 0 < s["dla_eligible"] < 31
    assert s["dla_islands"] >= 5  # the seed 002 log shows 5 loadables


def test_check_xavier_softmax_reason(capsys):
    assert main(["check", "resnet50", "--platform", "xavier-agx", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    soft = [x for x in doc["layers"] if x["op_type"] == "Softmax"]
    assert soft and not soft[0]["dla"] and "Xavier" in soft[0]["reason"]


def test_check_orin_nano_has_no_dla(capsys):
    assert main(["check", "seed-block", "--platform", "orin-nano", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["summary"]["dla_eligible"] == 0 and doc["summary"]["dla_islands"] == 0


def test_zoo_list_and_export(tmp_path, capsys):
    assert main(["zoo", "list"]) == 0
    assert "resnet50" in capsys.readouterr().out
    out = tmp_path / "sb.onnx"
    assert main(["zoo", "export", "seed-block", "-o", str(out), "--batch", "2"]) == 0
    proto = onnx.load(str(out))
    onnx.checker.check_model(proto)
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 2


def _assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode not in (0, 1), proc
    err = proc.stderr.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("placetune: error:")
    for n in needles:
        assert n in err, err


def test_bad_input_is_one_line(tmp_path):
    notonnx = tmp_path / "model.onnx"
    notonnx.write_text("hello")
    _assert_one_line_error(run_cli("check", str(notonnx)), "not a valid ONNX")

    raw = gzip.open(DATA / "resnet18.onnx.gz").read()
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(raw[:1000])
    _assert_one_line_error(run_cli("check", str(trunc)))

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 1, 1], np.zeros(12, np.float32))
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], "g", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    dyn = tmp_path / "dyn.onnx"
    onnx.save(helper.make_model(g), str(dyn))
    _assert_one_line_error(run_cli("check", str(dyn)), "dynamic", "--shape x=")
    assert run_cli("check", str(dyn), "--shape", "x=1x3x8x8").returncode == 0

    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    custom = helper.make_model(
        helper.make_graph([helper.make_node("Frob", ["x"], ["y"], name="frob", domain="acme")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])], [y]),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("acme", 1)])
    cpath = tmp_path / "custom.onnx"
    onnx.save(custom, str(cpath))
    _assert_one_line_error(run_cli("check", str(cpath)), "no shape inference")

    _assert_one_line_error(run_cli("check", "resnet-9000"), "zoo")
    _assert_one_line_error(run_cli("check", "resnet18", "--platform", "jetson-tx1"), "jetson-tx1")


@pytest.mark.parametrize("argv", [["--version"], ["zoo", "list", "--json"]])
def test_console_entry_points(argv):
    proc = run_cli(*argv)
    assert proc.returncode == 0 and proc.stdout


def test_check_applies_the_platforms_tensorrt_rules_by_default(capsys):
    """`check --platform xavier-agx` once applied TensorRT 8.6 rules; Xavier's last JetPack ships 8.5."""
    assert main(["check", "resnet50", "--platform", "xavier-agx", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trt_version"] == "8.5"
    assert main(["check", "resnet50", "--platform", "orin-agx", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trt_version"] == "8.6"
    assert main(["check", "resnet50", "--platform", "xavier-agx", "--trt-version", "8.6", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["trt_version"] == "8.6"


# ---------------------------------------------------------------- input grammar of trtexec and Polygraphy


def _two_input_file(tmp_path, batch="batch"):
    """images [batch,3,8,8] and mask [batch,1,8,8] -> Concat (a dynamic batch unless ``batch`` is an int)."""
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, 8, 8])
    m = helper.make_tensor_value_info("mask", TensorProto.FLOAT, [batch, 1, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph([helper.make_node("Concat", ["images", "mask"], ["y"], name="/cat/Concat", axis=1)], "g",
                          [x, m], [y])
    path = tmp_path / f"two_{batch}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("argv", [
    ["--shapes", "images:2x3x8x8,mask:2x1x8x8"],                 # trtexec
    ["--shapes", "images:[2,3,8,8] mask:[2,1,8,8]"],             # Polygraphy
    ["--shape", "images=2x3x8x8", "--shape", "mask=2x1x8x8"],   # placetune's own
    ["--batch", "2"],                                            # the open leading dimension of every input
])
def test_input_shapes_in_trtexec_and_polygraphy_grammar(tmp_path, capsys, argv):
    assert main(["check", str(_two_input_file(tmp_path)), *argv, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["layers"]
    assert (row["input_shape"], row["output_shape"]) == ([2, 3, 8, 8], [2, 4, 8, 8])  # both inputs at batch 2


def test_batch_on_a_static_file_is_refused_with_the_shape_to_give(tmp_path):
    path = _two_input_file(tmp_path, batch=1)
    _assert_one_line_error(run_cli("check", str(path), "--batch", "4"),
                           "static batch of 1", "--shape images=4x3x8x8")
    assert run_cli("check", str(path), "--batch", "1").returncode == 0  # the file's own batch: nothing to change


def test_verbose_after_the_command_and_zoo_alone_shows_its_help():
    from placetune.cli.main import build_parser
    assert build_parser().parse_args(["check", "resnet18", "-vv"]).verbose == 2
    assert build_parser().parse_args(["-v", "zoo", "list"]).verbose == 1
    proc = run_cli("zoo")
    assert proc.returncode == 2 and proc.stdout.startswith("usage: placetune zoo") and "list" in proc.stdout


def test_check_and_tune_default_to_the_same_precision():
    from placetune.cli.main import build_parser
    from placetune.tuning.studyfile import TuneConfig
    assert build_parser().parse_args(["check", "resnet18"]).precision == TuneConfig().precision == "int8"
