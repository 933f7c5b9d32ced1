"""A Q/DQ model quantized asymmetrically (a non-zero zero point, as onnxruntime's ``quantize_static`` writes by
default for activations) is refused at load: TensorRT's ONNX parser refuses it ("TensorRT only supports
symmetric quantization. The zero point for the QuantizeLinear/DequantizeLinear operator must be all zeros.",
onnx-tensorrt 8.6-GA builtin_op_importers.cpp:1220, 10.1-GA onnxOpImporters.cpp:1492) unless the parser flag
kENABLE_UINT8_AND_ASYMMETRIC_QUANTIZATION_DLA (TensorRT 10.16 and 11.x, off by default) is set, which
placetune's builds do not set. Such a model was checked, measured and tuned as if it would build."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from placetune.errors import ModelError
from placetune.model.model import Model
from tests.test_onnx_refused import _check, _model


def _qdq(zero_point: np.ndarray, as_constant_node: bool = False):
    """Conv -> Relu, then the Relu's output through QuantizeLinear and DequantizeLinear."""
    nodes = [h.make_node("QuantizeLinear", ["y", "s", "zp"], ["q"], name="/relu/Relu_output_0_QuantizeLinear"),
             h.make_node("DequantizeLinear", ["q", "s", "zp"], ["dq"], name="/relu/Relu_output_0_DequantizeLinear")]
    inits = [nh.from_array(np.array(0.05, np.float32), "s")]
    if as_constant_node:
        nodes.insert(0, h.make_node("Constant", [], ["zp"], name="zp_const", value=nh.from_array(zero_point, "zp")))
    else:
        inits.append(nh.from_array(zero_point, "zp"))
    return _model(extra=nodes, inits=inits, outputs=[h.make_tensor_value_info("dq", T.FLOAT, [1, 4, 8, 8])])


@pytest.mark.parametrize("zp,const_node", [(np.array(-128, np.int8), False), (np.array(3, np.int8), True),
                                           (np.array(128, np.uint8), False)],
                         ids=["int8-initializer", "int8-constant-node", "uint8"])
def test_an_asymmetric_qdq_model_is_refused_at_load(tmp_path, zp, const_node):
    code, err = _check(tmp_path, _qdq(zp, const_node))
    assert code == ModelError.exit_code, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "'/relu/Relu_output_0_QuantizeLinear' (QuantizeLinear)" in err and "zero point" in err, err
    assert "symmetric" in err and "ActivationSymmetric" in err, err
    with pytest.raises(ModelError, match="symmetric"):
        Model.load(_qdq(zp, const_node))


@pytest.mark.parametrize("zp", [np.array(0, np.int8), np.zeros(1, np.uint8)], ids=["int8", "uint8"])
def test_a_symmetric_qdq_model_still_loads(tmp_path, zp):
    """A zero point of zeros imports (10.x takes a UINT8 one as INT8, with a warning)."""
    code, err = _check(tmp_path, _qdq(zp))
    assert code == 0, err
