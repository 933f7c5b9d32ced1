"""`placetune measure`: JSON contract, modes, placements and bad input."""

from __future__ import annotations

import json
import re

import pytest

from placetune.cli.main import main


def _measure(capsys, *argv):
    code = main(["measure", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def test_json_keys_and_simulated_label(capsys):
    code, doc = _measure(capsys, "resnet18", "--platform", "orin-agx", "--precision", "int8", "--placement", "all-dla")
    assert code == 0 and doc["status"] == "ok" and doc["simulated"] is True
    for key in ("latency_ms", "throughput_fps", "realized", "dla_loadables", "energy_mj"):
        assert key in doc
    assert doc["latency_ms"]["median"] > 0 and doc["latency_ms"]["p99"] >= doc["latency_ms"]["median"]
    assert doc["dla_loadables"]["DLA0"] >= 1
    assert "latency_samples_ms" not in doc


def test_human_output_says_simulated(capsys):
    assert main(["measure", "seed-block", "--mode", "pipeline"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SIMULATED measurement") and "median" in out


def test_placement_file_and_pipeline_overlap(tmp_path, capsys):
    pfile = tmp_path / "p.json"
    pfile.write_text(json.dumps({"default": "GPU", "layers": {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}}))
    code, doc = _measure(capsys, "seed-block", "--mode", "pipeline", "--placement", str(pfile))
    assert code == 0
    segs = {s["device"]: s for s in doc["segment_times_ms"]}
    # the DLA branches start together with the GPU branch
    assert segs["DLA0"]["start_ms"] == 0 and segs["DLA1"]["start_ms"] == 0
    assert doc["latency_ms"]["median"] < doc["extra"]["serial_sum_ms"]


def test_replicas(capsys):
    code, doc = _measure(capsys, "resnet50", "--mode", "replicas", "--precision", "int8",
                         "--replicas", "GPU:8,DLA0:2,DLA1:2", "--placement", "all-dla")
    assert code == 0 and doc["throughput_fps"] > 0 and "replicas" in doc["extra"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["seed-block", "--placement", '{"/conv9/Conv": "DLA0"}'], "does not have"),
        (["seed-block", "--platform", "orin-nx-8gb", "--mode", "pipeline", "--placement", "dla1"], "DLA1"),
        (["seed-block", "--placement", "nowhere.json"], "--placement"),
        (["seed-block", "--mode", "replicas", "--replicas", "GPU:0"], "replicas"),
    ],
)
def test_bad_input_errors(capsys, argv, needle):
    code = main(["measure", *argv])
    err = capsys.readouterr().err
    assert code not in (0, 1) and needle in err and err.count("\n") == 1


def test_infeasible_is_reported_not_raised(capsys):
    code = main(["measure", "resnet50", "--platform", "orin-nano", "--mode", "replicas", "--replicas", "GPU:8,DLA0:2"])
    out = capsys.readouterr().out
    assert code == 1 and "infeasible" in out and "orin-nano" in out
    code = main(["measure", "resnet50", "--platform", "xavier-agx", "--placement", "all-dla", "--no-gpu-fallback"])
    out = capsys.readouterr().out
    assert code == 1 and "infeasible" in out and "Softmax" in out


def test_replicas_run_the_network_on_their_dla_by_default(capsys):
    """DLA0:n / DLA1:n instances run on their DLA (GPU fallback) unless --placement says otherwise;
    the header shows each instance's batch."""
    assert main(["measure", "resnet50", "--mode", "replicas", "--replicas", "GPU:8,DLA0:2,DLA1:2"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    assert "GPU batch 8, DLA0 batch 2, DLA1 batch 2" in header and "batch 1" not in header
    assert "the DLA replicas run on the GPU" not in out
    assert "DLA loadables: DLA0 2, DLA1 2" in out
    code, doc = _measure(capsys, "resnet50", "--mode", "replicas", "--replicas", "GPU:8,DLA1:2")
    assert code == 0 and doc["dla_loadables"]["DLA1"] >= 1 and doc["dla_loadables"]["DLA0"] == 0
    assert sum(d != "GPU" for d in doc["realized"].values()) > 100
    code, doc = _measure(capsys, "resnet50", "--mode", "replicas", "--replicas", "GPU:8,DLA0:2",
                         "--placement", "all-gpu")
    assert code == 0 and set(doc["realized"].values()) == {"GPU"}  # --placement overrides
    assert "the DLA replicas run on the GPU" in " ".join(doc["extra"]["notes"])


def test_replicas_output_shows_every_replica_and_whose_segments_the_table_holds(capsys):
    """The replicas summary printed one engine's segment table (the DLA0 replica's) as if it were the run."""
    assert main(["measure", "resnet18", "--mode", "replicas", "--replicas", "GPU:8,DLA0:2,DLA1:2"]) == 0
    out = capsys.readouterr().out
    for device, batch in (("GPU", 8), ("DLA0", 2), ("DLA1", 2)):
        assert re.search(rf"^replica {device}: batch {batch}, [\d.]+ ms per batch, [\d,.]+ fps$", out, re.M), out
    assert "segments of the DLA0 replica, timed alone (every DLA replica runs the same on its own core):" in out


def test_measure_check_and_tune_default_to_one_precision(capsys):
    """One precision default across the commands: a plain `measure` measures what `tune` tunes and `check` checks."""
    from placetune.tuning.studyfile import DEFAULT_PRECISION

    code, doc = _measure(capsys, "resnet18")
    assert code == 0 and doc["precision"] == DEFAULT_PRECISION == "int8"
    assert main(["measure", "resnet18"]) == 0
    assert ", int8, " in capsys.readouterr().out
    assert main(["check", "resnet18", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["precision"] == DEFAULT_PRECISION


def test_measure_on_a_board_applies_the_dla_rules_of_its_own_tensorrt(tmp_path, monkeypatch, capsys, caplog):
    """``placetune measure --backend tensorrt`` without ``--trt-version`` predicted with the platform's
    default rules (TensorRT 8.6 on Orin) while a JetPack 6.1 board built with 10.3, and said so only in
    a warning; it now takes the board's TensorRT, as ``tune`` does."""
    import logging
    import os
    from pathlib import Path

    from placetune.backends import clocks
    from tests.fakes import fake_env

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))
    env = fake_env("10.3.0")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_VERSION", "10.3.0")
    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.WARNING):
        code = main(["measure", "seed-block", "--backend", "tensorrt", "--precision", "fp16", "--placement", "all-gpu",
                     "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["status"] == "ok", doc
    assert not [r for r in caplog.records if "DLA rules are for TensorRT" in r.getMessage()]
