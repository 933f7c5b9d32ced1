"""ONNX models TensorRT's ONNX parser refuses are refused at load (exit 3, one line), never tuned.

The rules and their sources (onnx/onnx-tensorrt's importer) are in :mod:`placetune.model.parsable`;
every model here is built with ``onnx.helper`` and goes through the real CLI.
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


def _model(*, opset=17, in_type=T.FLOAT, out_type=T.FLOAT, in_shape=(1, 3, 8, 8), extra=(), outputs=None,
           inputs=None, inits=()) -> onnx.ModelProto:
    """Conv -> Relu on a 1x3x8x8 input, with ``extra`` nodes after it."""
    w = nh.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    nodes = [h.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["y"], name="relu"), *extra]
    graph = h.make_graph(nodes, "g", inputs or [h.make_tensor_value_info("x", in_type, list(in_shape))],
                         outputs or [h.make_tensor_value_info("y", out_type, [1, 4, 8, 8])], [w, *inits])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


def _check(tmp_path, proto: onnx.ModelProto) -> tuple[int, str]:
    path = tmp_path / "m.onnx"
    onnx.save(proto, str(path))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["check", str(path)])
        except SystemExit as exc:
            code = exc.code
    return int(code or 0), err.getvalue().strip()


_twice = h.make_node("Concat", ["y", "y"], ["cc"], name="cat", axis=1)
_twice.attribute.extend([h.make_attribute("axis", [-1])])

_axes_in = [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8]), h.make_tensor_value_info("ax", T.INT64, [1])]

REFUSED = {
    "opset 6": (_model(opset=6), "opset is 6"),
    "string input": (_model(in_type=T.STRING), "graph input 'x' has STRING"),
    "complex input": (_model(in_type=T.COMPLEX64), "graph input 'x' has COMPLEX64"),
    "uint16 input": (_model(in_type=T.UINT16), "graph input 'x' has UINT16"),
    "untyped output": (_model(out_type=T.UNDEFINED), "graph output 'y' has no tensor type"),
    "complex output": (_model(out_type=T.COMPLEX128), "graph output 'y' has COMPLEX128"),
    "rank 9 input": (h.make_model(h.make_graph(
        [h.make_node("Relu", ["x"], ["y"], name="r")], "g", [h.make_tensor_value_info("x", T.FLOAT, [1] * 9)],
        [h.make_tensor_value_info("y", T.FLOAT, [1] * 9)]), opset_imports=[h.make_opsetid("", 17)]),
        "graph input 'x' has 9 dimensions"),
    "tensor produced twice": (_model(extra=[h.make_node("Relu", ["x"], ["c"], name="again")]),
                              "tensor 'c' is produced twice"),
    "output nothing produces": (_model(outputs=[h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8]),
                                                h.make_tensor_value_info("z", T.FLOAT, [1])]),
                                "graph output 'z' is produced by no node"),
    "ReduceSum axes from an input": (_model(inputs=_axes_in, extra=[h.make_node("ReduceSum", ["y", "ax"], ["s"],
                                                                                name="sum")],
                                            outputs=[h.make_tensor_value_info("s", T.FLOAT, None)]),
                                     "node 'sum' (ReduceSum) takes its axes from 'ax'"),
    "Unsqueeze axes computed from an input": (_model(
        inputs=_axes_in, extra=[h.make_node("Abs", ["ax"], ["ax2"], name="abs"),
                                h.make_node("Unsqueeze", ["y", "ax2"], ["u"], name="unsq")],
        outputs=[h.make_tensor_value_info("u", T.FLOAT, None)]), "node 'unsq' (Unsqueeze) takes its axes from 'ax2'"),
    # a fresh seed of the ONNX mutation fuzz (307831101) found it: Concat's axis given twice, the second as a list,
    # reached int() of a list in the DLA rules as an internal error
    "attribute given twice": (_model(extra=[_twice], outputs=[h.make_tensor_value_info("cc", T.FLOAT, None)]),
                              "node 'cat' (Concat): attribute 'axis' appears twice"),
    "attribute of another type": (_model(extra=[h.make_node("Concat", ["y", "y"], ["cc"], name="cat", axis=[1])],
                                         outputs=[h.make_tensor_value_info("cc", T.FLOAT, None)]),
                                  "node 'cat' (Concat): attribute 'axis' is INTS, and Concat takes INT"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_models_the_parser_refuses_are_refused_at_load(case, tmp_path):
    proto, reason = REFUSED[case]
    code, err = _check(tmp_path, proto)
    assert code == ModelError.exit_code, err
    assert reason in err and len(err.splitlines()) == 1 and "Traceback" not in err
    with pytest.raises(ModelError, match="TensorRT|onnx|opset"):  # the library refuses the proto the same way
        Model.load(proto)


ACCEPTED = {
    "opset 7": _model(opset=7),
    "DOUBLE input (the parser casts it to FLOAT)": _model(in_type=T.DOUBLE),
    "FLOAT16 output": _model(out_type=T.FLOAT16),
    "ReduceSum axes as an initializer": _model(
        extra=[h.make_node("ReduceSum", ["y", "axc"], ["s"], name="sum")],
        outputs=[h.make_tensor_value_info("s", T.FLOAT, None)], inits=[nh.from_array(np.array([1], np.int64), "axc")]),
    "Unsqueeze axes from the input's shape": _model(
        extra=[h.make_node("Shape", ["x"], ["shp"], name="shape"),
               h.make_node("Slice", ["shp", "zero", "one"], ["ax"], name="first"),
               h.make_node("Unsqueeze", ["y", "ax"], ["u"], name="unsq")],
        outputs=[h.make_tensor_value_info("u", T.FLOAT, None)],
        inits=[nh.from_array(np.array([0], np.int64), "zero"), nh.from_array(np.array([1], np.int64), "one")]),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_the_parser_imports_still_loads(case, tmp_path):
    code, err = _check(tmp_path, ACCEPTED[case])
    assert code == 0, err


def test_a_huge_unsorted_graph_is_checked_in_linear_time():
    """The constant-operand walk follows consumers from the inputs: nodes in reverse order cost no extra pass."""
    import time

    n = 20_000
    nodes = [h.make_node("Relu", [f"t{i}"], [f"t{i + 1}"], name=f"r{i}") for i in range(n)][::-1]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("t0", T.FLOAT, [1, 4])],
                         [h.make_tensor_value_info(f"t{n}", T.FLOAT, [1, 4])])
    from placetune.model.parsable import refuse_unparsable

    start = time.monotonic()
    refuse_unparsable(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))
    assert time.monotonic() - start < 5


@pytest.mark.parametrize("elem_type, name", [(T.BFLOAT16, "BFLOAT16"), (T.FLOAT8E4M3FN, "FP8"), (T.INT4, "INT4")])
def test_io_types_only_tensorrt_10_imports_are_refused_for_8_5_and_8_6(elem_type, name, tmp_path, capsys):
    """TensorRT 8.5/8.6's parser (convertDtype) has no BFLOAT16, FP8 or INT4: such a model was tuned
    for the platform's default TensorRT 8.6 as if it would build. TensorRT 10 takes it."""
    from placetune import Evaluator

    w = nh.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    nodes = [h.make_node("Cast", ["x"], ["xf"], name="cast", to=T.FLOAT),
             h.make_node("Conv", ["xf", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             h.make_node("Relu", ["c"], ["y"], name="relu")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", elem_type, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 8, 8])], [w])
    path = tmp_path / "m.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 21)]), str(path))
    capsys.readouterr()
    code = main(["tune", "--model", str(path), "--trials", "2", "--storage", str(tmp_path / "t.db")])
    err = capsys.readouterr().err
    assert code == 3 and "Traceback" not in err, err
    assert err.strip().splitlines() == [f"placetune: error: the model's input 'x' is {name}, which the ONNX parser of "
                                        "TensorRT 8.6 cannot import (TensorRT 10 can): export it as FLOAT or FLOAT16, "
                                        "or target TensorRT 10 (trt_version)"]
    ev = Evaluator(str(path), "orin-agx", trt_version="10.3")
    assert ev.model.inputs[0].dtype != "float32"
