"""Exported plans for a strongly typed TensorRT (11.x, JetPack 7.2.2): built in the plan's precision, or refused.

TensorRT 11 takes each tensor's type from the network ("DLA builds on NVIDIA Jetson AGX Orin use strongly
typed networks. Precision is determined by network tensor types instead of the former per-precision builder
flags", TensorRT 11.4.1 release notes); its trtexec has neither ``--fp16`` nor ``--int8`` nor ``--calib``
(``TRT@release/11.1:samples/common/sampleOptions.cpp``: no ``getAndDelOption(arguments, "--fp16"`` left, as
``tests/trt_api/tensorrt-11.1.json`` lists). Before, a plan folder for TensorRT 11 held the FP32 model and
a build.sh without those flags: an fp16 plan built FP32 engines (the DLA runs no FP32: its layers went to
the GPU), an int8 plan without Q/DQ nodes too, with only a comment in build.sh saying so; ``placetune
build`` of such an int8 plan built FP32 engines as well.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import placetune
from placetune import ConfigError, Placement
from placetune.cli.main import main
from placetune.plan.file import load
from tests.test_deploy import _run

FLOAT, FLOAT16 = onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16


def _plan(tmp: Path, precision: str) -> tuple[str, int]:
    url = f"sqlite:///{tmp}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", precision=precision, store=url,
                             study=precision) as ev:
        ev.baseline()
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}), agent="t",
                        trial_number=0)
    return url, m.extra["_id"]


def test_an_fp16_plan_for_tensorrt_11_holds_an_fp16_model(tmp_path, capsys):
    url, mid = _plan(tmp_path, "fp16")
    for version, wanted in (("11.4", FLOAT16), ("10.3", FLOAT)):
        out = tmp_path / version
        assert main(["export", "--study", "fp16", "--storage", url, "--format", "trtexec", "-o", str(out),
                     "--measurement", str(mid), "--trt-version", version]) == 0, capsys.readouterr()
        proto = onnx.load(str(out / "model.onnx"))
        assert [i.type.tensor_type.elem_type for i in proto.graph.input] == [wanted], version
        assert {t.data_type for t in proto.graph.initializer if t.dims} == {wanted}, version


def test_an_int8_plan_without_qdq_is_refused_for_tensorrt_11(tmp_path, capsys):
    url, mid = _plan(tmp_path, "int8")
    out = tmp_path / "d11"
    code = main(["export", "--study", "int8", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(mid), "--trt-version", "11.4"])
    err = capsys.readouterr().err
    assert code == 6 and "Traceback" not in err and not out.exists()
    line = [x for x in err.splitlines() if x.strip()][-1]
    assert "TensorRT 11.4" in line and "Q/DQ" in line and "--trt-version" in line
    plan_dir = tmp_path / "d10"  # the same plan for TensorRT 10.3 exports (placeholder ranges, said)
    assert main(["export", "--study", "int8", "--storage", url, "--format", "trtexec", "-o", str(plan_dir),
                 "--measurement", str(mid)]) == 0
    with pytest.raises(ConfigError, match="Q/DQ"):
        load(str(plan_dir / "plan.json")).trtexec_commands(trt_version="11.4.1")
    # built by placetune on a board with TensorRT 11.4.1: refused in one line, nothing built
    proc = _run(["placetune", "build", str(plan_dir)], tmp_path, version="11.4.1")
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "Q/DQ" in proc.stderr and "Traceback" not in proc.stderr
    assert not list(plan_dir.glob("*.engine")) and not (plan_dir / "build.json").exists()
    assert json.loads((plan_dir / "plan.json").read_text())["precision"] == "int8"


def test_an_int8_tune_without_qdq_on_tensorrt_11_is_refused_before_its_study_is_stored(tmp_path, monkeypatch,
                                                                                        capsys):
    """Before, ``placetune tune --precision int8`` of a model without Q/DQ on a board with TensorRT 11 stored
    its study, then stopped at the first build (exit 8): the study row stayed behind, its night empty."""
    import os

    from placetune.store.store import Store
    from tests.fakes import fake_env
    from tests.test_trtexec import GN
    from tests.test_tune_tensorrt import _board

    env = fake_env("11.4.1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_VERSION", "11.4.1")
    monkeypatch.setenv("PATH", str(_board(tmp_path, "MAXN")) + os.pathsep + os.environ["PATH"])
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    code = main(["tune", "--backend", "tensorrt", "--model", str(GN), "--mode", "engine", "--precision", "int8",
                 "--agent", "random", "--trials", "4", "--storage", url, "--study", "night"])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("placetune: error:")]
    assert code == 6 and len(lines) == 1 and "Traceback" not in err, err
    assert "precision int8" in lines[0] and "TensorRT 11.4.1" in lines[0] and "Q/DQ" in lines[0]
    with Store(url) as store:
        assert store.studies() == []
