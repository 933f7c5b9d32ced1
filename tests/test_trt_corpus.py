"""Every reader of TensorRT output, on every artefact of the corpus of real TensorRT output.

``tests/data/trt_corpus/<id>/`` holds one published artefact (trtexec console output, a Python
API build log, ``--exportLayerInfo`` / ``--exportProfile`` / ``--exportTimes`` files, parser
errors), kept as published and only trimmed, and ``provenance.json``: where it comes from
(URL, TensorRT version and the basis for it, platform, command) and the facts read from it by
hand, per reader. Every reader runs on every artefact: where the provenance lists no facts for a
reader, the reader must find nothing (a layer-info reader finds no layers in a console log).
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import re
from pathlib import Path

import pytest

from placetune.backends.tensorrt.buildlog import parse_build_log, split_prefix
from placetune.backends.tensorrt.placement_known import inspector_dla_layers, metadata_nodes
from placetune.backends.tensorrt.worker_names import is_placement_line, parser_layers
from placetune.backends.trtexec.parse import (
    error_lines,
    parse_export_profile,
    parse_export_times,
    parse_layer_info,
    parse_summary,
    version_from_text,
)
from placetune.backends.trtexec.process import Run
from placetune.backends.trtexec.timing import read_times

CORPUS = Path(__file__).parent / "data" / "trt_corpus"
IDS = sorted(p.name for p in CORPUS.iterdir() if (p / "provenance.json").is_file())
READERS = ("build_log", "summary", "version_text", "error_lines", "export_profile", "export_times", "layer_info",
           "parser_layers", "inspector_types_table")
_EMPTY_BUILD_LOG = {"has_sections": False, "dla_subgraphs": [], "gpu_layers": [], "fallback_layers": [],
                    "subgraph_limit": [], "errors": 0, "warnings": 0, "dla_offloaded": [], "dla_candidates": None,
                    "all_gpu": None, "loadables": 0}
_EMPTY_SUMMARY = {"version": None, "status": None, "command": None, "has_summary": False, "throughput_qps": None,
                  "latency_ms": {}, "gpu_compute_ms": {}, "enqueue_ms": {}, "h2d_ms": {}, "d2h_ms": {},
                  "host_walltime_s": None, "gpu_compute_s": None, "legacy_ms": []}


def _load(artefact: str) -> tuple[dict, Path, str]:
    prov = json.loads((CORPUS / artefact / "provenance.json").read_text())
    path = CORPUS / artefact / prov["file"]
    return prov, path, path.read_text(encoding="utf-8")


def _says_placement(blog) -> bool:
    return blog.reports_placement or blog.dla_candidates is not None


def _build_log(path: Path, text: str) -> dict:
    # read as the trtexec backend reads its output file (Run.lines: no [V] lines but the placement)
    lines = Run(["trtexec"], path).lines()
    blog = parse_build_log(lines)
    got = {"has_sections": blog.has_sections, "dla_subgraphs": blog.dla_subgraphs,
           "gpu_layers": [list(x) for x in blog.gpu_layers], "fallback_layers": list(blog.fallbacks),
           "subgraph_limit": blog.subgraph_limit, "errors": len(blog.errors), "warnings": len(blog.warnings),
           "dla_offloaded": blog.dla_offloaded,
           "dla_candidates": list(blog.dla_candidates) if blog.dla_candidates else None,
           "all_gpu": blog.all_gpu, "loadables": blog.loadables}
    # the worker keeps these lines whatever its log level: every one is read by the reader, and every
    # line that alone says where layers ran is kept (a TensorRT 7 list needs its header line before it)
    for x in text.splitlines():
        # the message as TensorRT gave it to the logger: the printing tool's prefix stripped (TensorRT 8.0's Python
        # logger prints "[TensorRT] INFO: " before it, no "[TRT]")
        msg = split_prefix(re.sub(r"^.*?\[TRT\]:?\s*(\[[IWEV]\]\s*)?", "", x).strip())[1]
        alone = parse_build_log([x])
        if is_placement_line(msg):
            assert _says_placement(alone), x
        elif _says_placement(alone) and not re.search(r"layers running on (dla|gpu)", x, re.I):
            raise AssertionError(f"the worker's filter would drop a placement line: {x}")
    return got


def _summary(path: Path, text: str) -> dict:
    s = parse_summary(text.splitlines())
    return {"version": s.version, "status": s.status, "command": s.command, "has_summary": s.has_summary,
            "throughput_qps": s.throughput_qps, "latency_ms": s.latency_ms, "gpu_compute_ms": s.gpu_compute_ms,
            "enqueue_ms": s.enqueue_ms, "h2d_ms": s.h2d_ms, "d2h_ms": s.d2h_ms,
            "host_walltime_s": s.host_walltime_s, "gpu_compute_s": s.gpu_compute_s, "legacy_ms": s.legacy_ms}


def _export_profile(path: Path, text: str) -> dict | None:
    count, entries = parse_export_profile(text)
    if count is None and not entries:
        return None
    return {"count": count, "entries": len(entries), "first": [entries[0].name, entries[0].average_ms],
            "last": [entries[-1].name, entries[-1].average_ms], "median_ms": entries[0].median_ms is not None}


def _export_times(path: Path, text: str) -> dict | None:
    recs = parse_export_times(text)
    assert read_times(path) == recs  # the trtexec backend's reader of the file
    if not recs:
        return None
    return {"records": len(recs), "first_latency_ms": recs[0]["latencyMs"], "last_latency_ms": recs[-1]["latencyMs"],
            "h2d_ms": recs[0]["h2dMs"]}


def _layer_info(path: Path, text: str) -> dict | None:
    info = parse_layer_info(text)
    if not info.layers and not info.bindings:
        return None
    return {"valid_json": info.valid_json, "layers": len(info.layers), "first": info.names[0], "last": info.names[-1],
            "bindings": info.bindings,
            "layer_types": sorted({str(x["LayerType"]) for x in info.layers if "LayerType" in x}),
            # the placement reading: the layers read as DLA loadables, the ONNX nodes Metadata names
            "dla_layers": inspector_dla_layers(info.layers),
            "metadata_nodes": len({n for x in info.layers for n in metadata_nodes(x)})}


def _parser_layers(path: Path, text: str) -> list | None:
    # the ONNX parser's Parsing node / Registering layer lines, as the worker's logger gets them (bare)
    got = parser_layers([split_prefix(x)[1] for x in text.splitlines()])
    if "] [V] " in text:  # a trtexec --verbose log: the trtexec backend reads the same from its file
        assert parser_layers(Run(["trtexec"], path).parser_messages()) == got
    return [list(x) for x in got] or None


def inspector_types_table(text: str) -> dict[str, list[dict]]:
    """A published table of engine layers and their inspector ``LayerType`` (columns ``configuration``,
    ``name``, ``inspector_type``: the ``Name`` and ``LayerType`` of each layer of the engine's
    ``--exportLayerInfo``), as the layer information's ``Layers`` of each engine; {} for any other text."""
    rows = list(csv.DictReader(io.StringIO(text)))
    if not rows or not {"configuration", "name", "inspector_type"} <= set(rows[0]):
        return {}
    engines: dict[str, list[dict]] = {}
    for r in rows:
        engines.setdefault(r["configuration"], []).append({"Name": r["name"], "LayerType": r["inspector_type"]})
    return engines


def _inspector_types_table(path: Path, text: str) -> dict | None:
    engines = inspector_types_table(text)
    return {"engines": [{"engine": k, "layers": len(v), "layer_types": sorted({x["LayerType"] for x in v}),
                         "dla_layers": inspector_dla_layers(v)} for k, v in engines.items()]} if engines else None


_READ = {
    "build_log": (_build_log, _EMPTY_BUILD_LOG),
    "summary": (_summary, _EMPTY_SUMMARY),
    "version_text": (lambda path, text: version_from_text(text), None),
    "error_lines": (lambda path, text: error_lines(text.splitlines()), []),
    "export_profile": (_export_profile, None),
    "export_times": (_export_times, None),
    "layer_info": (_layer_info, None),
    "parser_layers": (_parser_layers, None),
    "inspector_types_table": (_inspector_types_table, None),
}


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("artefact", IDS)
def test_every_reader_extracts_the_hand_checked_facts(artefact, reader):
    prov, path, text = _load(artefact)
    read, nothing = _READ[reader]
    got = read(path, text)
    want = prov["facts"].get(reader, nothing)
    if isinstance(nothing, dict) and isinstance(want, dict):  # fields a provenance leaves out: the "nothing"
        want = {**nothing, **want}
    if reader == "build_log" and "loadables" not in prov["facts"].get(reader, {}):
        want["loadables"] = len(want["dla_subgraphs"] or want["dla_offloaded"])
    if isinstance(want, dict) and isinstance(got, dict):
        for key in set(want) | set(got):
            w, g = want.get(key), got.get(key)
            if isinstance(w, float) or isinstance(g, float):
                assert g == pytest.approx(w), key
            elif isinstance(w, dict):
                assert g == pytest.approx(w), key
            else:
                assert g == w, key
    else:
        assert got == want


def test_every_artefact_has_its_provenance():
    assert len(IDS) >= 30
    for artefact in IDS:
        prov, path, text = _load(artefact)
        assert prov["id"] == artefact and text.strip()
        source = prov["source"]
        if source.get("repository_unidentified"):  # found in the public code index, its repository unnamed
            assert source.get("index_file_id") and source.get("via"), artefact
        else:
            assert source["url"].startswith(("https://github.com/", "https://forums.developer.nvidia.com/")), artefact
        for key in ("kind", "excerpt", "trt_version", "trt_version_basis", "platform", "command", "facts"):
            assert prov.get(key), (artefact, key)
        assert set(prov["facts"]) <= set(READERS), artefact
        assert sorted(p.name for p in (CORPUS / artefact).iterdir()) == sorted(["provenance.json", prov["file"]])



def test_the_readme_counts_the_corpus_as_it_is():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    said = re.search(r"`tests/data/trt_corpus` holds (\d+) published TensorRT artefacts", readme)
    assert said and int(said.group(1)) == len(IDS)

def test_the_corpus_spans_the_tensorrt_versions_and_stays_small():
    versions = [_load(a)[0]["trt_version"] for a in IDS]
    lines = {"8.4/8.5": ("8.4", "8.5"), "8.6": ("8.6",), "10.x": ("10.",), "11.x": ("11.",)}
    for line, prefixes in lines.items():
        assert any(v.startswith(prefixes) for v in versions), line
    dla = [a for a in IDS if _load(a)[0]["facts"].get("build_log", {}).get("dla_subgraphs")]
    assert len(dla) >= 4  # published DLA placement reports
    # excerpts, never whole dumps: about 3 kB an artefact on average
    assert sum(p.stat().st_size for p in CORPUS.rglob("*") if p.is_file()) < 1_100_000


@pytest.mark.parametrize("artefact", ["trex-a100-resnet18-fp16-layerinfo", "evpe-rtx3060-trtexec-10.4-alexnet-layerinfo",
                                      "samples-hackathon-18-layerinfo-names"])
def test_the_doubles_write_the_inspectors_text_in_the_layout_of_the_real_exports(artefact):
    """The TensorRT and trtexec doubles write the inspector's JSON with tests/fakes/_layerinfo.py:
    given a real export's layers it writes that export again, byte for byte (trtexec's file ends
    with a newline)."""
    spec = importlib.util.spec_from_file_location("_layerinfo", Path(__file__).parent / "fakes" / "_layerinfo.py")
    layerinfo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layerinfo)
    prov, path, text = _load(artefact)
    doc = json.loads(text)
    assert layerinfo.render(doc["Layers"], doc["Bindings"]) + "\n" == text
