"""placetune/data/published.csv: the published Jetson measurements used to validate the simulator.

Checks the file's shape only (columns, sources, splits, values); the numbers themselves come
from the public sources named in each row (see placetune/data/published.md).
"""

from __future__ import annotations

import csv
import io
import zlib
from importlib.resources import files

import pytest

REQUIRED = (
    "id", "platform", "network", "input_shape", "precision", "batch", "placement", "power_mode",
    "metric", "value", "unit", "latency_stat", "trt_version", "jetpack", "source", "url",
    "quote_or_location", "release", "seen", "split", "why", "notes",
)
PLATFORMS = {"orin-agx", "orin-nx-16gb", "orin-nx-8gb", "orin-nano", "orin-nano-super", "xavier-agx", "xavier-nx",
             "drive-orin-x"}
METRIC_UNITS = {
    "latency_ms": "ms",
    "throughput_fps": "samples/s",
    "throughput_qps": "batches/s",
    "perf_per_watt_ratio": "x",
}


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
    assert 100 <= len(rows) <= 400
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
        assert r["why"].strip(), r["id"]
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
    """fit = every row seen before the split was fixed; release 3 on (added after the stored fit, no refit):
    validate; else validate = crc32(id) % 3 == 0 (published.md)."""
    _, rows = header_and_rows
    for r in rows:
        assert r["seen"] in {"0", "1"} and r["release"] in {"1", "2", "3", "4", "5", "6"}, r["id"]
        if r["release"] == "1":
            assert r["seen"] == "1", r["id"]
        if int(r["release"]) >= 3:
            assert r["seen"] == "0" and r["split"] == "validate", r["id"]
            continue
        expected = "fit" if r["seen"] == "1" else ("validate" if zlib.crc32(r["id"].encode()) % 3 == 0 else "fit")
        assert r["split"] == expected, r["id"]
    assert "## Split rule" in _read("published.md")


def test_enough_diverse_validate_rows(header_and_rows):
    _, rows = header_and_rows
    validate = [r for r in rows if r["split"] == "validate"]
    assert len(validate) >= 10
    assert {"orin-agx", "xavier-agx", "xavier-nx"} <= {r["platform"] for r in validate}
    assert {"fp16", "int8"} <= {r["precision"] for r in validate}


def test_fit_rows_cover_both_generations_and_precisions(header_and_rows):
    """The Orin GPU and the Xavier GPU and DLA each have fit rows (the fit identifies their constants)."""
    _, rows = header_and_rows
    fit = [r for r in rows if r["split"] == "fit"]
    kinds = {(r["platform"].split("-")[0], r["placement"].split("|")[0].split("+")[0][:3], r["precision"]) for r in fit}
    assert {("orin", "gpu", "int8"), ("xavier", "gpu", "fp16"), ("xavier", "gpu", "int8"), ("xavier", "dla", "fp16"),
            ("orin", "dla", "int8")} <= kinds
