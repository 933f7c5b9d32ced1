"""ONNX forms (opsets 13-18) the ONNX parser of TensorRT 8.5/8.6 imports as another network, without a word.

Each case is a small graph built with onnx.helper and passed by onnx's checker. Which forms are
misread, and from which TensorRT on they are read, comes from the published onnx-tensorrt sources
(8.5-GA, 8.6-GA, 10.0-GA; see placetune/model/misreads.py): checked against those sources and
doubles only (no TensorRT here).
"""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh
from onnx import version_converter

from placetune.errors import ModelError
from placetune.model.misreads import MISREADS, old_parser_misread


def _model(node: onnx.NodeProto, inits=(), opset=18, x=(1, 6, 8, 8), out_type=T.FLOAT) -> onnx.ModelProto:
    outs = [h.make_tensor_value_info(o, out_type, ["n"] if out_type == T.INT64 else list("abcd")) for o in node.output]
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", T.FLOAT, list(x))], outs, list(inits))
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(proto)
    return proto


def _i64(name, *values):
    return nh.from_array(np.array(values, np.int64), name)


def _f32(name, *values):
    return nh.from_array(np.array(values, np.float32), name)


_IDX = nh.from_array(np.zeros((1, 1, 8, 8), np.int64), "i")
_UPD = nh.from_array(np.ones((1, 1, 8, 8), np.float32), "u")

#: name -> (model, first TensorRT major that reads it (None: none), what the message names)
CASES = {
    "split_uneven": (lambda: _model(h.make_node("Split", ["x"], ["a", "b", "c", "d"], name="n", axis=1, num_outputs=4)),
                     10, "num_outputs=4 on a size of 6 (the model's chunks: [2, 2, 2, 0]"),
    "split_uneven_5": (lambda: _model(h.make_node("Split", ["x"], ["a", "b"], name="n", axis=2, num_outputs=2),
                                      x=(1, 6, 7, 8)), 10, "[4, 3]; the parser's: [3, 3]"),
    "resize_antialias": (lambda: _model(h.make_node("Resize", ["x", "", "s"], ["y"], name="n", mode="linear",
                                                    antialias=1), [_f32("s", 1, 1, .5, .5)]), None, "antialias=1"),
    "resize_policy": (lambda: _model(h.make_node("Resize", ["x", "", "", "z"], ["y"], name="n", mode="linear",
                                                 keep_aspect_ratio_policy="not_larger"), [_i64("z", 1, 6, 4, 6)]),
                      None, "keep_aspect_ratio_policy='not_larger'"),
    "resize_axes": (lambda: _model(h.make_node("Resize", ["x", "", "s"], ["y"], name="n", mode="linear", axes=[2, 3]),
                                   [_f32("s", .5, .5)]), 10, "axes=[2, 3]"),
    "scatter_elements_add": (lambda: _model(h.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="n", axis=1,
                                                        reduction="add"), [_IDX, _UPD], opset=16),
                             10, "reduction='add'"),
    "scatter_elements_max": (lambda: _model(h.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="n", axis=1,
                                                        reduction="max"), [_IDX, _UPD]), 10, "reduction='max'"),
    "scatter_nd_mul": (lambda: _model(h.make_node("ScatterND", ["x", "j", "v"], ["y"], name="n", reduction="mul"),
                                      [nh.from_array(np.zeros((1, 1), np.int64), "j"),
                                       nh.from_array(np.ones((1, 6, 8, 8), np.float32), "v")], opset=16),
                       None, "reduction='mul'"),
    "shape_start": (lambda: _model(h.make_node("Shape", ["x"], ["y"], name="n", start=2), opset=15, out_type=T.INT64),
                    10, "start=2"),
    "reduce_axes_input": (lambda: _model(h.make_node("ReduceMax", ["x", "ax"], ["y"], name="n"), [_i64("ax", 2, 3)]),
                          10, "its axes as an input"),
}

#: the same ops in the forms every parser reads as written
FINE = {
    "split_even": lambda: _model(h.make_node("Split", ["x"], ["a", "b", "c"], name="n", axis=1, num_outputs=3)),
    "split_sizes_input": lambda: _model(h.make_node("Split", ["x", "sp"], ["a", "b"], name="n", axis=1),
                                        [_i64("sp", 4, 2)]),
    "resize_plain": lambda: _model(h.make_node("Resize", ["x", "", "s"], ["y"], name="n", mode="linear", antialias=0),
                                   [_f32("s", 1, 1, .5, .5)]),
    "resize_every_axis": lambda: _model(h.make_node("Resize", ["x", "", "s"], ["y"], name="n", mode="linear",
                                                    axes=[0, 1, 2, 3]), [_f32("s", 1, 1, .5, .5)]),
    "resize_policy_without_sizes": lambda: _model(h.make_node("Resize", ["x", "", "s"], ["y"], name="n",
                                                              keep_aspect_ratio_policy="not_larger"),
                                                  [_f32("s", 1, 1, .5, .5)]),
    "scatter_elements_none": lambda: _model(h.make_node("ScatterElements", ["x", "i", "u"], ["y"], name="n", axis=1,
                                                        reduction="none"), [_IDX, _UPD], opset=16),
    "shape_whole": lambda: _model(h.make_node("Shape", ["x"], ["y"], name="n"), opset=15, out_type=T.INT64),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_silent_form_is_named_for_the_parsers_that_ignore_it(name):
    make, read_from, named = CASES[name]
    proto = make()
    for version in ("8.5.2", "8.6.2"):
        why = old_parser_misread(proto, version)
        assert why and why.startswith("node 'n' (") and named in why and f"TensorRT {version} ignores" in why, why
        assert "\n" not in why
    why10 = old_parser_misread(proto, "10.3.0")
    assert (why10 is None) is (read_from == 10), why10
    if read_from is None:
        assert "no published TensorRT ONNX parser reads it" in why10


@pytest.mark.parametrize("name", sorted(FINE))
def test_the_forms_every_parser_reads_are_not_refused(name):
    assert old_parser_misread(FINE[name](), "8.5.2") is None


@pytest.mark.parametrize("name", sorted(set(CASES) - {"reduce_axes_input"}))
def test_onnx_version_converter_cannot_take_these_forms_down_so_the_fix_says_something_else(name):
    """The Reduce forms' fix is opset 17; for the others onnx's converter has no adapter or refuses
    the attribute, so their message must not advise it."""
    proto = CASES[name][0]()
    target = {15: 14, 16: 15}.get(proto.opset_import[0].version, 17)
    with pytest.raises(RuntimeError):
        version_converter.convert_version(proto, target)
    assert "convert the model to opset 17" not in old_parser_misread(proto, "8.5.2")


def test_the_reduce_form_converts_to_opset_17():
    proto = version_converter.convert_version(CASES["reduce_axes_input"][0](), 17)
    assert old_parser_misread(proto, "8.5.2") is None


def test_the_opset_17_conversion_is_not_advised_for_a_model_with_an_opset_18_split():
    """onnx's converter has no Split 18->17 adapter: a model with an even (well read) opset-18 Split and a
    ReduceMean axes input cannot be converted, so the fix says to export it with opset 17."""
    nodes = [h.make_node("Split", ["x"], ["a", "b"], name="s", axis=1, num_outputs=2),
             h.make_node("ReduceMean", ["a", "ax"], ["y"], name="m")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 6, 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 3, 1, 1]),
                          h.make_tensor_value_info("b", T.FLOAT, [1, 3, 4, 4])], [_i64("ax", 2, 3)])
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(proto)
    with pytest.raises(RuntimeError, match="No Adapter From Version"):
        version_converter.convert_version(proto, 17)
    why = old_parser_misread(proto, "8.5.2")
    assert "'m' (ReduceMean)" in why and "convert_version" not in why and "'s' is an opset-18 Split" in why, why


@pytest.mark.parametrize("opset", [18, 19])
def test_a_split_given_its_sizes_in_an_opset_18_model_cannot_be_converted_either(opset):
    """An Ultralytics ``nms=True`` export (opset 18): its C2f Splits take their sizes as an input (no
    ``num_outputs``) and its NMS tail a ReduceMax axes input. The fix advised the opset-17 conversion,
    which fails on it ("No Adapter From Version $18 for Split"), the converter having no Split 18->17
    adapter whatever the Split's form."""
    nodes = [h.make_node("Split", ["x", "sizes"], ["a", "b"], name="/model.2/Split", axis=1),
             h.make_node("ReduceMax", ["a", "ax"], ["y"], name="/ReduceMax")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 6, 4, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 3, 1, 1]),
                          h.make_tensor_value_info("b", T.FLOAT, [1, 3, 4, 4])], [_i64("sizes", 3, 3), _i64("ax", 2, 3)])
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(proto)
    with pytest.raises(RuntimeError, match="No Adapter From Version"):
        version_converter.convert_version(proto, 17)
    why = old_parser_misread(proto, "8.6")
    assert "'/ReduceMax' (ReduceMax)" in why and "convert_version" not in why, why
    assert "'/model.2/Split' is an opset-18 Split" in why, why


def test_every_rule_cites_its_source():
    assert all(m.source and m.fix and m.effect for m in MISREADS)


def test_a_split_whose_size_is_unknown_is_not_trusted():
    proto = _model(h.make_node("Split", ["x"], ["a", "b"], name="n", axis=0, num_outputs=2), x=("N", 6, 8, 8))
    assert "unknown size" in old_parser_misread(proto, "8.6.2")


def test_a_simulated_tune_for_tensorrt_8_6_warns_in_one_line_and_still_tunes(tmp_path, caplog):
    """Before: a simulated tune with trt_version 8.6 of such a model said nothing, although its
    plans are for that TensorRT."""
    from placetune import Evaluator

    proto = _model(h.make_node("Split", ["x"], ["a", "b"], name="n", axis=2, num_outputs=2), x=(1, 6, 7, 8))
    path = tmp_path / "split.onnx"
    onnx.save(proto, str(path))
    with caplog.at_level(logging.WARNING, logger="placetune.backends.jetson"):
        Evaluator(str(path), "orin-agx", store=None, precision="fp16", trt_version="8.6")
    lines = [r.getMessage() for r in caplog.records if "built wrong" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "'n' (Split)" in lines[0], lines
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="placetune.backends.jetson"):
        Evaluator(str(path), "orin-agx", store=None, precision="fp16", trt_version="10.3")
    assert not [r for r in caplog.records if "built wrong" in r.getMessage()]


def test_the_tensorrt_backend_refuses_a_misread_form_on_a_tensorrt_8_6_board(tmp_path):
    from placetune import Evaluator
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from tests.fakes import fake_env

    path = tmp_path / "resize.onnx"
    onnx.save(CASES["resize_axes"][0](), str(path))
    be = TensorRTBackend(worker_env=fake_env("8.6.2"), cache_dir=tmp_path / "cache")
    with pytest.raises(ModelError, match=r"'n' \(Resize\) has axes=\[2, 3\].*TensorRT 8.6.2 ignores"):
        Evaluator(str(path), "orin-agx", be, store=None, precision="fp16", trt_version="8.6")


def test_the_exported_build_sh_stops_for_a_tensorrt_whose_parser_misreads_the_model(tmp_path, capsys):
    """The folder's build.sh never asks trtexec its version: a plan for TensorRT 8.6 stops before any
    build (exit 3, as `placetune build` refuses it); a plan for TensorRT 10 says in a comment that
    trtexec 8.5/8.6 would build another network. Before: both scripts built it without a word."""
    import subprocess

    import placetune
    from placetune import Placement
    from placetune.cli.main import main
    from tests.test_reduce_axes import _se_block

    model = tmp_path / "se.onnx"
    _se_block(model)
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(model), "orin-agx", mode="engine", precision="fp16", store=url, study="s",
                             trt_version="8.6") as ev:
        m = ev.evaluate(Placement(ev.model, {"conv": "DLA0"}), agent="t", trial_number=0)
    for version, out in (("8.6", tmp_path / "p86"), ("10.3", tmp_path / "p10")):
        assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(out),
                     "--measurement", str(m.extra["_id"]), "--trt-version", version]) == 0, capsys.readouterr()
    script86 = (tmp_path / "p86" / "build.sh").read_text()
    assert "exit 3" in script86 and "(ReduceMean) has its axes as an input" in script86
    fake = tmp_path / "trtexec"
    fake.write_text("#!/bin/sh\necho built >> \"$(dirname \"$0\")/calls\"\n")
    fake.chmod(0o755)
    run = subprocess.run(["sh", str(tmp_path / "p86" / "build.sh")], capture_output=True, text=True,
                         env={"TRTEXEC": str(fake), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 3 and "'mean' (ReduceMean) has its axes" in run.stderr
    assert not (tmp_path / "calls").exists()  # no engine built
    script10 = (tmp_path / "p10" / "build.sh").read_text()
    assert "exit 3" not in script10
    notes = [line for line in script10.splitlines() if line.startswith("# needs trtexec of TensorRT 10 or later")]
    assert len(notes) == 1 and "'mean' (ReduceMean)" in notes[0], script10


def test_check_says_the_parser_of_its_tensorrt_would_build_another_network(tmp_path, capsys):
    """An Ultralytics ``nms=True`` export (opset 18: ReduceMax with its axes as an input) checked for the
    default Orin rules (TensorRT 8.6): tune and measure warned that its plans would be built wrong there,
    ``placetune check``, the first command a user runs on a model, said nothing (nor its JSON)."""
    import json

    from placetune.cli.main import main

    proto = _model(h.make_node("ReduceMax", ["x", "ax"], ["y"], name="/ReduceMax", keepdims=1),
                   [_i64("ax", 2, 3)])
    path = tmp_path / "nms.onnx"
    onnx.save(proto, str(path))
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "TensorRT 8.6's ONNX parser would build another network than this model" in out
    assert "'/ReduceMax' (ReduceMax) has its axes as an input" in " ".join(out.split())
    assert main(["check", str(path), "--json"]) == 0
    assert "its axes as an input" in json.loads(capsys.readouterr().out)["summary"]["parser_misread"]
    assert main(["check", str(path), "--trt-version", "10.3"]) == 0  # TensorRT 10's parser reads the axes
    assert "would build another network" not in capsys.readouterr().out
