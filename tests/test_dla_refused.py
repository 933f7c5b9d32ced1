"""A DLA build refused because a layer cannot run there and GPU fallback is off is the placement's fault,
not the DLA's: it is classed ``dla_unsupported`` and names the layers, never "the DLA failed".

Real forms only (tests/data/trt_corpus): TensorRT 10.3 on an AGX Orin refusing YOLO11n's attention MatMul
(``Assertion allowGPUFallback failed. Layer '...' is not supported on DLA but GPU fallback is not enabled.``,
then ``DLA validation failed``), and TensorRT 8.0 on a Xavier NX (``Default DLA is enabled but layer 283 copy
is not supported on DLA and falling back to GPU is not enabled.``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from placetune.backends.tensorrt import engine_reply
from placetune.backends.tensorrt.buildlog import dla_failure, dla_refused, parse_build_log
from placetune.backends.trtexec.parse import parse_summary
from placetune.backends.trtexec.process import Run, classify

CORPUS = Path(__file__).parent / "data" / "trt_corpus"
TRT103 = CORPUS / "yolo11-orin-10.3-grep-strict-dla-rejected-attention-matmul" / "console.log"
TRT80 = CORPUS / "trt-1529-xavier-nx-dla-no-fallback-errors" / "console.log"


def _errors(path: Path) -> list[str]:
    return parse_build_log(Run(["trtexec"], path).lines()).errors


def test_the_layers_tensorrt_refused_to_put_on_the_dla_are_read_from_both_real_forms():
    assert dla_refused(_errors(TRT103)) == ["/model.10/m/m.0/attn/MatMul"]
    got = dla_refused(_errors(TRT80))
    assert got[:3] == ["283 copy", "319 copy", "347 copy"] and len(got) == len(set(got)) >= 9
    # an error of the DLA itself names no refused layer
    assert dla_refused(["NVMEDIA_DLA : 308, ERROR: runtime submit failed", "DLA validation failed"]) == []
    assert dla_failure(["NVMEDIA_DLA : 308, ERROR: runtime submit failed"])


@pytest.mark.parametrize("path", [TRT103, TRT80], ids=["10.3", "8.0"])
def test_trtexec_refusing_a_layer_on_the_dla_is_not_called_a_failure_of_the_dla(tmp_path, path):
    run = Run(["trtexec", "--useDLACore=0"], path, returncode=1)
    lines = run.lines()
    m = classify(run, lines, parse_summary(lines), "build", {"extra": {}}, 60.0)
    assert m is not None and m.status == "build_failed"
    assert m.extra["failure_class"] == "dla_unsupported", m.reason
    assert "the DLA failed" not in m.reason
    assert "GPU fallback" in m.reason and "gpu_fallback" in m.reason


def test_the_worker_s_build_refused_on_the_dla_is_classed_the_same(monkeypatch):
    """The tensorrt backend's reply of a failed build: the log's errors are the 10.3 ones above."""
    log = [("ERROR", e) for e in _errors(TRT103)]
    blog = parse_build_log(log)
    m = engine_reply.build_failure({"error": None}, blog, {}, 0.0, {})
    assert m.status == "build_failed" and m.extra["failure_class"] == "dla_unsupported", m.reason
    assert "/model.10/m/m.0/attn/MatMul" in m.reason and "the DLA failed" not in m.reason
