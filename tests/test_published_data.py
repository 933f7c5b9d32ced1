"""placetune/data/published.csv: the published Jetson measurements used to validate the simulator.

Checks the file's shape only (columns, sources, splits, values); the numbers themselves come
from the public sources named in each row (see placetune/data/published.md).
"""

from __future__ import annotations

import csv
import io
from importlib.resources import files

import pytest

REQUIRED = (
    "id", "platform", "network", "input_shape", "precision", "batch", "placement", "power_mode",
    "metric", "value", "unit", "latency_stat", "trt_version", "jetpack", "source", "url",
    "quote_or_location", "split", "notes",
)
PLATFORMS = {"orin-agx", "orin-nx-16gb", "orin-nx-8gb", "orin-nano", "xavier-agx", "xavier-nx", "drive-orin-x"}
METRIC_UNITS = {
    "latency_ms": "ms",
    "throughput_fps": "samples/s",
    "throughput_qps": "batches/s",
    "perf_per_watt_ratio": "x",
}
NX_PLATFORMS = {"orin-nx-16gb", "orin-nx-8gb", "xavier-nx"}


def _read(name: str) -> str:
    return (files("placetune") / "data" / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def header_and_rows() -> tuple[list[str], list[dict[str, str]]]:
    reader = csv.DictReader(io.StringIO(_read("published.csv")))
    rows = list(reader)
    return list(reader.fieldnames or []), rows


def test_required_columns(header_and_rows):
    header, _ = header_and_rows
    missing = [c for c in REQUIRED if c not in header]
    assert not missing, f"published.csv lacks columns {missing}"


def test_row_count_and_unique_ids(header_and_rows):
    _, rows = header_and_rows
    assert 30 <= len(rows) <= 80
    ids = [r["id"] for r in rows]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    assert not dupes, f"duplicate ids: {dupes}"
    assert all(i.strip() for i in ids)


def test_every_row_is_sourced(header_and_rows):
    _, rows = header_and_rows
    for r in rows:
        assert r["source"].strip(), r["id"]
        assert r["url"].startswith("https://"), r["id"]
        assert r["quote_or_location"].strip(), r["id"]
        assert r["split"] in {"fit", "validate"}, r["id"]


def test_values_positive_floats(header_and_rows):
    _, rows = header_and_rows
    for r in rows:
        value = float(r["value"])  # raises on anything that is not a number
        assert value > 0, r["id"]


def test_vocabularies(header_and_rows):
    _, rows = header_and_rows
    for r in rows:
        assert r["platform"] in PLATFORMS, r["id"]
        assert r["precision"] in {"fp16", "int8"}, r["id"]
        assert METRIC_UNITS.get(r["metric"]) == r["unit"], r["id"]
        assert r["network"].strip() and r["placement"].strip() and r["power_mode"].strip(), r["id"]


def test_split_follows_the_declared_rule(header_and_rows):
    """validate = every MLPerf row + every Orin NX / Xavier NX row; fit = the rest (published.md)."""
    _, rows = header_and_rows
    for r in rows:
        expected = "validate" if (r["source"].startswith("mlperf-") or r["platform"] in NX_PLATFORMS) else "fit"
        assert r["split"] == expected, r["id"]
    assert "## Split rule" in _read("published.md")


def test_enough_diverse_validate_rows(header_and_rows):
    _, rows = header_and_rows
    validate = [r for r in rows if r["split"] == "validate"]
    assert len(validate) >= 8
    platforms = {r["platform"] for r in validate}
    assert {"orin-agx", "orin-nx-16gb", "xavier-agx"} <= platforms
    orin_gpu_batches = {r["batch"] for r in validate
                        if r["platform"] == "orin-agx" and r["placement"] == "gpu" and r["metric"] == "latency_ms"}
    assert "1" in orin_gpu_batches and "8" in orin_gpu_batches
