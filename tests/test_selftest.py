"""placetune selftest: off a Jetson it says what it cannot check and exits 8; against the
TensorRT/pycuda/trtexec doubles every check runs and the report is written."""

from __future__ import annotations

import json
import os

from placetune.cli.main import main
from placetune.cli.selftest import EXIT_NOT_ALL_OK, run_selftest
from tests.fakes import FAKES_DIR, fake_env

NAMES = ["cuda", "tensorrt", "engine all-GPU fp16", "engine all-DLA0 fp16 (vs trtexec)",
         "engine all-DLA0 int8, no calibration cache", "pipeline GPU->DLA0->GPU K=1..3, wrong cut", "DLA0 || DLA1",
         "second run hits the engine cache", "worker exit", "power rails"]


def test_here_it_reports_what_it_cannot_check_and_exits_8(tmp_path, capsys):
    code = main(["selftest", "-o", str(tmp_path / "st")])
    out = capsys.readouterr().out
    assert code == EXIT_NOT_ALL_OK == 8
    doc = json.loads((tmp_path / "st" / "selftest.json").read_text())
    assert [c["name"] for c in doc["checks"]] == NAMES and not doc["all_ok"]
    by = {c["name"]: c for c in doc["checks"]}
    assert by["cuda"]["status"] == "failed" and "pip install --no-build-isolation pycuda" in by["cuda"]["detail"]
    assert by["tensorrt"]["status"] == "failed"
    assert by["engine all-GPU fp16"]["status"] == "skipped" and "needs TensorRT" in by["engine all-GPU fp16"]["detail"]
    assert by["worker exit"]["status"] == "ok"
    assert "[skipped] engine all-GPU fp16" in out and "send selftest.txt and selftest.json" in out
    text = (tmp_path / "st" / "selftest.txt").read_text()
    assert "[FAILED]  tensorrt" in text
    home = os.path.expanduser("~")
    raw = (tmp_path / "st" / "selftest.json").read_text()
    assert os.environ["PATH"] not in raw and (home == "/" or home not in raw)  # no environment dump


def test_against_the_doubles_every_check_runs(tmp_path):
    code, doc = run_selftest(tmp_path / "st", worker_env=fake_env("10.3.0"), trtexec=str(FAKES_DIR / "trtexec"))
    by = {c["name"]: c for c in doc["checks"]}
    assert list(by) == NAMES
    ran = [n for n in NAMES if n != "power rails"]  # rails need a Jetson's /sys
    assert all(by[n]["status"] in ("ok", "failed") for n in ran), [by[n] for n in ran]  # none skipped
    independent = ["cuda", "tensorrt", "engine all-GPU fp16", "pipeline GPU->DLA0->GPU K=1..3, wrong cut",
                   "DLA0 || DLA1", "second run hits the engine cache", "worker exit"]
    assert {n: by[n]["status"] for n in independent} == {n: "ok" for n in independent}, by
    # the DLA0 engines are compared with trtexec's: parser helpers follow their node (issue 12
    # defect 3), so the worker's engine has no more loadables than trtexec's; the latency may
    # still differ (defect 7: what each one times), which the check reports "vs trtexec"
    for n in ("engine all-DLA0 fp16 (vs trtexec)", "engine all-DLA0 int8, no calibration cache"):
        assert by[n]["status"] == "ok" or "x vs trtexec" in by[n]["detail"], by[n]
        assert by[n]["dla_loadables"]["DLA0"] <= by[n]["trtexec_loadables"]["DLA0"]
    assert by["cuda"]["detail"].startswith("pycuda 2022.2.2-fake")
    assert by["pipeline GPU->DLA0->GPU K=1..3, wrong cut"]["K3"]["period_ms"] > 0
    assert code == (0 if by["power rails"]["status"] == "ok" else EXIT_NOT_ALL_OK)
    text = (tmp_path / "st" / "selftest.txt").read_text()
    assert all(f"{n}: " in text for n in NAMES) and text.count("[ok]") >= len(independent)
