"""A plan taken to a board unlike the one it was made for: ``placetune build`` refuses DLA cores the
board lacks and says when its TensorRT is not the one whose DLA rules the plan was searched under;
``placetune.runtime.load`` refuses engines another TensorRT built. Against the TensorRT/CUDA doubles
(``tests/fakes``: ``PLACETUNE_FAKE_TRT_VERSION``, ``PLACETUNE_FAKE_TRT_DLA_CORES``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.fakes import fake_env

from .test_deploy import THREE, _study

BUILD = [sys.executable, "-m", "placetune.cli", "build"]


def _run(args: list[str], cwd: Path, version: str, **extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **fake_env(version, **extra)}
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[1])])
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_plan_on_dla1_is_refused_on_a_board_with_one_dla_core(seed_block_random, tmp_path):
    """It used to build (the DLA1 engine's core missing) and say every layer runs where the plan says."""
    folder = _study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=2)
    for cores, have in (("1", "1 DLA core (DLA0)"), ("0", "no DLA core")):
        proc = _run([*BUILD, folder], tmp_path, "8.6.2", DLA_CORES=cores)
        assert proc.returncode == 8, proc.stdout + proc.stderr
        err = proc.stderr.strip().splitlines()
        assert len(err) == 1 and "runs engines on DLA0, DLA1 (platform orin-agx)" in err[0] and have in err[0], err
        assert not list(Path(folder).glob("*.engine"))
    assert _run([*BUILD, folder], tmp_path, "8.6.2", DLA_CORES="2").returncode == 0


def test_build_says_when_the_board_s_tensorrt_is_not_the_plan_s(seed_block_random, tmp_path):
    folder = _study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=2)  # searched under 8.6's rules
    same = _run([*BUILD, folder], tmp_path, "8.6.2")
    assert same.returncode == 0 and "DLA rules" not in same.stdout, same.stdout + same.stderr
    other = _run([*BUILD, folder], tmp_path, "10.3.0")
    assert other.returncode == 0, other.stdout + other.stderr
    assert ("the plan was searched under TensorRT 8.6's DLA rules; this board builds with TensorRT 10.3.0"
            in other.stdout) and "--trt-version 10.3" in other.stdout
    assert any("8.6's DLA rules" in n for n in json.loads((Path(folder) / "build.json").read_text())["notes"])


LOAD = r'''
import sys
import numpy as np
import placetune.runtime
from placetune.errors import BackendError
try:
    with placetune.runtime.load(sys.argv[1]) as rt:
        rt({"input": np.zeros(rt.inputs["input"][0], np.float32)})
    print("ran")
except BackendError as exc:
    print("refused:", exc)
'''


def test_the_runtime_refuses_engines_another_tensorrt_built(seed_block_random, tmp_path):
    folder = _study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=2)
    assert _run([*BUILD, folder], tmp_path, "10.3.0").returncode == 0
    assert _run([sys.executable, "-c", LOAD, folder], tmp_path, "10.3.0").stdout.strip() == "ran"
    got = _run([sys.executable, "-c", LOAD, folder], tmp_path, "8.6.2").stdout.strip()
    assert got.startswith("refused:") and "built with TensorRT 10.3.0 (build.json)" in got \
        and "this Python has TensorRT 8.6.2" in got and "placetune build" in got, got


def test_build_does_not_claim_a_placement_it_could_not_read(seed_block_random, tmp_path):
    """With no placement lines in the build log and no layer information (the inspector raised), a DLA
    engine's placement is unknown: the summary no longer says that every layer runs where the plan says."""
    folder = _study(tmp_path, seed_block_random, "pipeline", THREE, frames_in_flight=2)
    proc = _run([*BUILD, folder], tmp_path, "8.6.2", NO_PLACEMENT_LOG="1", INSPECTOR_FAIL="1")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # built, not known to be as planned
    assert "UNKNOWN" in proc.stdout and "every layer runs where the plan says" not in proc.stdout
    assert "some engines' placement is UNKNOWN" in proc.stdout


def test_export_refuses_a_calibration_cache_that_is_not_this_model_s(seed_block_random, tmp_path, capsys):
    """A cache of another model (or no cache at all) was copied in and the plan said its INT8 ranges came
    from a calibration cache: accuracy claimed, nothing calibrated."""
    import placetune
    from placetune import Placement
    from placetune.cli.main import main

    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(seed_block_random), "orin-agx", mode="pipeline", precision="int8", store=url,
                             study="s") as ev:
        ev.evaluate(Placement(ev.model, THREE), agent="t", trial_number=0)
    other, junk, good = tmp_path / "other.cache", tmp_path / "junk.cache", tmp_path / "good.cache"
    other.write_bytes(b"TRT-8601-EntropyCalibration2\n/backbone/conv1/Conv_output_0: 3c010a14\n")
    junk.write_bytes(b"not a cache\n")
    good.write_bytes(b"TRT-8601-EntropyCalibration2\ninput: 3c010a14\n/conv3/Conv_output_0: 3caa54fc\n")
    export = ["export", "--study", "s", "--storage", url, "--format", "trtexec", "--calibration-cache"]
    assert main([*export, str(other), "-o", str(tmp_path / "a")]) == 6
    assert "name none of" in capsys.readouterr().err and not (tmp_path / "a" / "plan.json").exists()
    assert main([*export, str(junk), "-o", str(tmp_path / "b")]) == 6
    assert "not a TensorRT calibration cache" in capsys.readouterr().err
    assert main([*export, str(good), "-o", str(tmp_path / "c")]) == 0
    assert json.loads((tmp_path / "c" / "plan.json").read_text())["int8_ranges"] == "calibration-cache"


def test_build_refuses_another_model_s_calibration_cache(seed_block_random, tmp_path):
    import placetune
    from placetune import Placement
    from placetune.cli.main import main

    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(seed_block_random), "orin-agx", mode="pipeline", precision="int8", store=url,
                             study="s") as ev:
        ev.evaluate(Placement(ev.model, THREE), agent="t", trial_number=0)
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(tmp_path / "f")]) == 0
    other = tmp_path / "other.cache"
    other.write_bytes(b"TRT-8601-EntropyCalibration2\n/backbone/conv1/Conv_output_0: 3c010a14\n")
    proc = _run([*BUILD, str(tmp_path / "f"), "--calibration-cache", str(other)], tmp_path, "8.6.2")
    assert proc.returncode == 6 and "name none of" in proc.stderr, proc.stdout + proc.stderr
    assert not list((tmp_path / "f").glob("*.engine"))
