"""The self-test's timing agreement (10 % + 50 us) against real repeat timings of one DLA engine.

The self-test times each of its engines twice, once by the worker and once by ``trtexec --loadEngine``, in two
processes one after the other, and fails when the two medians are further apart than
:data:`~placetune.cli.selftest_checks.LATENCY_TOLERANCE` plus the fixed allowance. Part of that risk on a healthy
board is the run-to-run spread of one engine between two processes. The corpus holds real pairs: two YOLO11n
engines on a TensorRT 10.3 AGX Orin (JetPack 6, L4T R36.4.4, jetson_clocks off), each timed by two trtexec
processes a minute apart (tests/data/trt_corpus/yolo11*-grep-dla-*-run). What they bound is the spread between
processes only, not the worker's method against trtexec's (no published run of the worker exists).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from placetune.backends.trtexec.parse import parse_summary
from placetune.cli.selftest_checks import LATENCY_TOLERANCE, within_tolerance

CORPUS = Path(__file__).parent / "data" / "trt_corpus"
PAIRS = {
    "one DLA loadable (the DLA-adapted YOLO11n)": ("yolo11-dla-orin-10.3-grep-dla-engine-benchmark-run",
                                                   "yolo11-dla-orin-10.3-grep-dla-engine-profile-run"),
    "4 DLA loadables and 11 GPU layers (stock YOLO11n)": ("yolo11n-orin-10.3-grep-dla-fallback-engine-benchmark-run",
                                                         "yolo11n-orin-10.3-grep-dla-fallback-engine-profile-run"),
}


def _median(artefact: str) -> float:
    s = parse_summary((CORPUS / artefact / "console.log").read_text(encoding="utf-8").splitlines())
    assert s.status == "PASSED" and s.version == "10.3.0"
    return float(s.gpu_compute_ms["median"])


@pytest.mark.parametrize("engine", sorted(PAIRS))
def test_two_real_timings_of_one_dla_engine_agree_well_inside_the_selftest_tolerance(engine):
    a, b = (_median(x) for x in PAIRS[engine])
    assert a != b  # two runs, two figures
    assert within_tolerance(a, b) and within_tolerance(b, a)
    spread = abs(a - b) / min(a, b)
    # the real spread (0.25 % and 0.08 %) is a twentieth of the tolerance or less: a healthy AGX Orin's
    # run-to-run spread alone does not fail the DLA agreement, even with its clocks not locked
    assert spread < LATENCY_TOLERANCE / 20, (engine, a, b)
