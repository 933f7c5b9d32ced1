"""`placetune tune --backend tensorrt` end to end against each TensorRT double (worker subprocess
included): realised placements that differ from the requested ones are stored, a plan is exported."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from placetune import Store
from tests.fakes import VERSIONS, fake_env

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("version", VERSIONS)
def test_tune_with_the_tensorrt_backend(version, tmp_path):
    env = {**os.environ, **fake_env(version)}
    db = tmp_path / "pt.db"
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt",
           "--model", str(DATA / "seed_model_gn.onnx.gz"), "--mode", "engine", "--precision", "fp16",
           "--agent", "random", "--trials", "8", "--storage", f"sqlite:///{db}", "--study", "trt",
           "--export", str(tmp_path / "plan.json")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "SIMULATED" not in proc.stdout and "simulated=true" not in proc.stdout
    with Store(f"sqlite:///{db}") as store:
        study = store.study("trt")
        assert study.simulated is False and study.fingerprint["trt_version"] == version
        rows = store.measurements("trt")
    ok = [r for r in rows if r.measurement.ok]
    assert ok and all(not r.measurement.simulated for r in rows)
    # GroupNorm pieces asked on DLA ran on the GPU: what ran differs from what was asked
    assert any(r.measurement.requested != r.measurement.realized for r in ok)
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan.get("simulated") is False
    assert plan["layers"] and all("realized" in layer for layer in plan["layers"])


def test_guided_against_the_tensorrt_fakes_stores_and_fits_segment_profiles(tmp_path, monkeypatch):
    """`tune --backend tensorrt --agent guided`: segment profiles are stored and the agent's fit uses them."""
    from placetune import Model, Settings
    from placetune.calibration import observations
    from placetune.hardware.platforms import get_platform

    env = {**os.environ, **fake_env("10.3.0")}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[1]), env["PYTHONPATH"]])  # this checkout
    db = tmp_path / "pt.db"
    model = DATA / "seed_model_gn.onnx.gz"
    cmd = [sys.executable, "-m", "placetune.cli", "tune", "--backend", "tensorrt", "--model", str(model),
           "--mode", "engine", "--precision", "fp16", "--agent", "guided", "--trials", "14",
           "--storage", f"sqlite:///{db}", "--study", "g", "--export", str(tmp_path / "plan.json")]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    lines = [x for x in proc.stdout.splitlines() if x.startswith("trial=")]
    # trials 1-2 are the study's baselines (all-GPU, all-DLA0; all-DLA1, its twin, is not built);
    # the agent's evaluations show the model's prediction
    assert len(lines) == 14 and all(re.search(r" predicted_\w+=[0-9.e+-]+( |$)", x) for x in lines[2:])
    assert not any(" predicted_" in x for x in lines[:2])
    assert any(re.search(r" cv_error_pct=[0-9.]+( |$)", x) for x in lines)  # the fit ran on the measured segment profiles
    with Store(f"sqlite:///{db}") as store:
        ok = [r.measurement for r in store.measurements("g") if r.measurement.ok]
        settings = Settings(**{k: v for k, v in store.study("g").settings.items() if k in Settings.__dataclass_fields__})
    assert len(ok) >= 8 and all(m.segment_times_ms for m in ok)
    obs = observations(Model.load(str(model)), get_platform("orin-agx"), settings, ok)
    assert sum(o.kind == "segment" for o in obs) >= len(ok)
