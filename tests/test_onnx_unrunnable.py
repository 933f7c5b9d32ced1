"""ONNX models the operator spec forbids, or no Jetson could hold, are refused at load (exit 3, one line).

ONNX shape inference writes a shape for such nodes, so they used to be checked, simulated and
"measured" as if valid (a Pad to 2^41 elements measured at a median of 8.9e16 ms, ``ok``). The
rules and their sources are in :mod:`placetune.model.runnable`; every model here is built with
``onnx.helper`` and goes through the real CLI.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from placetune.cli.main import main
from placetune.errors import ModelError
from placetune.model.model import Model


def _i64(name, values):
    return nh.from_array(np.array(values, np.int64), name)


def _model(node, inits=(), *, opset=17, weight=(4, 3, 3, 3)) -> onnx.ModelProto:
    """Relu on a 1x3x8x8 input, then ``node`` (reading ``r``, writing ``y``)."""
    w = nh.from_array(np.ones(weight, np.float32), "W")
    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu"), node], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], [w, *inits])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _run(tmp_path, proto: onnx.ModelProto, *args: str) -> tuple[int, str]:
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main([args[0], str(path), *args[1:]]) if args else main(["check", str(path)])
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), err.getvalue().strip()


_BIG = "a tensor must fit in the memory of a Jetson (at most 64 GB, AGX Orin 64GB), or TensorRT cannot build it"
_GROUP = ("ONNX's Conv takes group >= 1 dividing the input's 3 channels and the weight's 4 output maps, with weight "
          "'W' of shape M x C/group x kH x kW (here 4x3x3x3)")

REFUSED = {
    "Reshape changing the element count": (
        _model(h.make_node("Reshape", ["r", "s"], ["y"], name="rs"), [_i64("s", [0, 7])]),
        "node 'rs' (Reshape): input 'shape' 's' = [0, 7] makes 1x7 (7 elements) of input 'r' 1x3x8x8 (192 elements); "
        "ONNX's Reshape keeps the element count (0 copies the input's dimension, one -1 is inferred): export the "
        "model again"),
    "Pad to 2^41 elements": (
        _model(h.make_node("Pad", ["r", "p"], ["y"], name="pad"), [_i64("p", [0, 0, 0, 0, 0, 0, 2**20, 2**20])]),
        "node 'pad' (Pad): output 'y' (set by its input 'pads' 'p') is 1x3x1048584x1048584, 3.3e+12 elements "
        f"(1.32e+04 GB as float32); {_BIG}"),
    "Expand to 2^46 elements": (
        _model(h.make_node("Expand", ["r", "s"], ["y"], name="ex"), [_i64("s", [2**40, 3, 8, 8])]),
        "node 'ex' (Expand): output 'y' (set by its input 'shape' 's') is 1099511627776x3x8x8, 2.11e+14 elements "
        f"(8.44e+05 GB as float32); {_BIG}"),
    "Tile to 2^81 elements": (
        _model(h.make_node("Tile", ["r", "s"], ["y"], name="tile"), [_i64("s", [2**40, 1, 2**40, 1])]),
        "node 'tile' (Tile): output 'y' (set by its input 'repeats' 's') is 1099511627776x3x8796093022208x8, "
        f"2.32e+26 elements (9.28e+17 GB as float32); {_BIG}"),
    "Resize with a NaN scale": (
        _model(h.make_node("Resize", ["r", "", "sc"], ["y"], name="rsz"),
               [nh.from_array(np.array([1, 1, np.nan, 2], np.float32), "sc")]),
        "node 'rsz' (Resize): input 'scales' 'sc' = [1.0, 1.0, nan, 2.0]; ONNX's Resize takes scales that are finite "
        "and greater than 0"),
    "Resize with a zero scale (opset 10)": (
        _model(h.make_node("Resize", ["r", "sc"], ["y"], name="rsz"),
               [nh.from_array(np.array([1, 1, 0, 2], np.float32), "sc")], opset=10),
        "node 'rsz' (Resize): input 'scales' 'sc' = [1.0, 1.0, 0.0, 2.0]; ONNX's Resize takes scales that are finite "
        "and greater than 0"),
    "Conv with group 0": (
        _model(h.make_node("Conv", ["r", "W"], ["y"], name="conv", group=0)),
        f"node 'conv' (Conv): attribute group=0 on input 'r' 1x3x8x8; {_GROUP}"),
    "Conv whose group does not divide the channels": (
        _model(h.make_node("Conv", ["r", "W"], ["y"], name="conv", group=2)),
        f"node 'conv' (Conv): attribute group=2 on input 'r' 1x3x8x8; {_GROUP}"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_models_that_cannot_run_are_refused_at_load(case, tmp_path):
    proto, reason = REFUSED[case]
    code, err = _run(tmp_path, proto)
    assert code == ModelError.exit_code, err
    assert err.splitlines() == [f"placetune: error: {reason}"]
    with pytest.raises(ModelError, match="ONNX's|Jetson"):  # the library refuses the proto the same way
        Model.load(proto)


def test_measure_refuses_a_tensor_no_jetson_holds_instead_of_reporting_it(tmp_path):
    """``measure`` reported a median of 8.9e16 ms as ``ok`` for such a Pad."""
    proto, reason = REFUSED["Pad to 2^41 elements"]
    code, err = _run(tmp_path, proto, "measure", "--placement", "all-gpu")
    assert code == ModelError.exit_code and err.splitlines() == [f"placetune: error: {reason}"]


ACCEPTED = {
    "Reshape with 0 and -1": _model(h.make_node("Reshape", ["r", "s"], ["y"], name="rs"), [_i64("s", [0, -1])]),
    "depthwise Conv (group = channels)": _model(h.make_node("Conv", ["r", "W"], ["y"], name="conv", group=3),
                                                weight=(3, 1, 3, 3)),
    "Resize by 2": _model(h.make_node("Resize", ["r", "", "sc"], ["y"], name="rsz"),
                          [nh.from_array(np.array([1, 1, 2, 2], np.float32), "sc")]),
    "Resize to sizes": _model(h.make_node("Resize", ["r", "", "", "sz"], ["y"], name="rsz"),
                              [_i64("sz", [1, 3, 16, 16])]),
    "Pad by 2": _model(h.make_node("Pad", ["r", "p"], ["y"], name="pad"), [_i64("p", [0, 0, 2, 2, 0, 0, 2, 2])]),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_valid_uses_of_the_same_ops_still_load(case, tmp_path):
    code, err = _run(tmp_path, ACCEPTED[case])
    assert code == 0, err
