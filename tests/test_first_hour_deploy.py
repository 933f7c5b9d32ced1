"""What a new user met taking a detector from ``tune`` to a deployment folder, each said where it is read now:
an Ultralytics ``nms=True`` export (opset 18) tuned under the default Orin rules (TensorRT 8.6) got a warning
on the tune's first line only; the summary, ``export --format trtexec`` and the folder's README.txt said
nothing, and its ``build.sh`` stopped (exit 3) only once copied to the board. Each failed before its fix."""

from __future__ import annotations

import json

import onnx
import pytest

from placetune.cli.main import main
from tests.test_first_hour_walk import _nms_like

STOP = "build.sh and placetune build stop on TensorRT 8.6, the TensorRT this plan is for (exit 3)"


@pytest.fixture()
def nms_study(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    onnx.save(_nms_like(), str(tmp_path / "nms.onnx"))
    assert main(["tune", "--model", "nms.onnx", "--trials", "3", "--study", "n"]) == 0
    return " ".join(capsys.readouterr().out.split())


def test_the_tune_summary_says_its_plan_will_not_build_where_it_is_for(nms_study):
    tail = nms_study.split("plan exported to", 1)[1]
    assert f"warning: {STOP}" in tail and "opset=17" in tail and "--trt-version 10.3" in tail, tail


def test_the_exported_folder_says_it_before_it_is_copied_to_the_board(nms_study, tmp_path, capsys):
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"warning: {STOP}" in out and "opset=17" in out, out
    plan = json.loads((tmp_path / "deploy" / "plan.json").read_text())
    assert any(STOP in n for n in plan["notes"]), plan["notes"]
    readme = " ".join((tmp_path / "deploy" / "README.txt").read_text().split())
    step1 = readme.split("1. Build", 1)[1].split("2. Time", 1)[0]
    assert "build.sh stops before building anything (exit 3)" in step1 and "opset=17" in step1, step1


def test_a_folder_for_a_tensorrt_that_reads_the_model_says_no_stop(nms_study, tmp_path, capsys):
    assert main(["export", "--format", "trtexec", "--trt-version", "10.3", "-o", "deploy"]) == 0
    out = capsys.readouterr().out
    assert "stop on TensorRT" not in out, out
    plan = json.loads((tmp_path / "deploy" / "plan.json").read_text())
    assert not any("stop on TensorRT" in n for n in plan["notes"]), plan["notes"]
    assert "stops before building anything" not in (tmp_path / "deploy" / "README.txt").read_text()


def test_a_plan_of_a_model_every_parser_reads_carries_no_stop(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--study", "m"]) == 0
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0
    assert "stop on TensorRT" not in capsys.readouterr().out


def test_build_off_the_board_says_nothing_was_built_and_where_it_runs(tmp_path, monkeypatch, capsys):
    """``placetune build deploy`` on the machine that tuned (no TensorRT) answered "TensorRT cannot be used here:
    ModuleNotFoundError: ...; run `placetune doctor`", which reads as an install to fix here, not a step for the
    board the plan is for."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PYTHONPATH", raising=False)  # no TensorRT double on the worker's path
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--study", "s"]) == 0
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0
    capsys.readouterr()
    assert main(["build", "deploy"]) == 8
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "nothing built: a plan's engines are built on the Jetson it is for (orin-agx, with TensorRT 8.6, " \
           "JetPack 6.0), and TensorRT cannot be used here" in " ".join(err.split()), err
    assert not any((tmp_path / "deploy").glob("*.engine"))


def test_the_deploy_example_says_what_it_takes():
    """``python examples/deploy_pipeline.py --help`` listed ``study``, ``--storage`` and ``-o`` without a word."""
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "examples" / "deploy_pipeline.py"
    done = subprocess.run([sys.executable, str(example), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "From a tuned study to a pipeline running in an application" in said, said
    assert "the study whose best plan to deploy (placetune studies lists them)" in said, said
    assert "the database the study is in (default sqlite:///placetune.db)" in said, said
    assert "the plan folder to write (default plan_dir)" in said, said
