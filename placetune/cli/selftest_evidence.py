"""What a DLA check of ``placetune selftest`` read, kept beside the report: each DLA engine's layer information and build log.

The DLA form of TensorRT's engine layer information (``IEngineInspector`` JSON with DETAILED
verbosity, trtexec ``--exportLayerInfo``) has never been observed: no published export of a DLA
engine's was found (docs/trust.md), and every DLA check reads the placement from it and from the
build log (:func:`placetune.backends.tensorrt.placement_known.decide`). A DLA check whose placement
rests on one source or is unknown asks for the report, so the report holds what was read: for each
engine DLA check, the worker's and trtexec's engine layer information (``<check>-<side>-layerinfo.json``,
the text as TensorRT wrote it; of a pipeline check each DLA segment's, ``-seg<k>-layerinfo.json``, of the
DLA0 || DLA1 check each DLA replica's, ``-DLA<n>-layerinfo.json``) and the build log lines the backend kept (``<check>-<side>-buildlog.txt``:
placement lines, warnings, errors), in ``evidence/`` beside ``selftest.json``, whose check names
them (``evidence``). Paths under the home directory are written as ``~``, as in the report.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Callable

__all__ = ["EVIDENCE_DIR", "save_evidence", "evidence_line", "engine_digest"]

#: the folder of the report that holds the evidence files
EVIDENCE_DIR = "evidence"


def _slug(check: str) -> str:
    """``engine all-DLA0 fp16 (vs trtexec)`` -> ``engine-all-DLA0-fp16-vs-trtexec``."""
    return re.sub(r"[^A-Za-z0-9]+", "-", check).strip("-")


def save_evidence(out: Path, check: str, side: str, extra: dict[str, Any] | None,
                  scrub: Callable[[str], str] = lambda s: s) -> list[str]:
    """Write the engine layer information and kept build log lines of one measurement's ``extra``
    (``engine_inspector``, each ``segment_placements`` and ``replica_placements`` row's, ``build_log``) into
    ``out/evidence/``; returns the files written, relative to
    ``out`` (none when the measurement kept neither; a file that cannot be written is left out).

    Example:
        >>> import tempfile
        >>> save_evidence(Path(tempfile.mkdtemp()), "engine all-DLA0 fp16", "placetune",
        ...               {"engine_inspector": '{"Layers": []}', "build_log": ["[V] x"]})
        ['evidence/engine-all-DLA0-fp16-placetune-layerinfo.json', 'evidence/engine-all-DLA0-fp16-placetune-buildlog.txt']
    """
    extra = extra or {}
    wanted = []
    if extra.get("engine_inspector"):
        wanted.append(("layerinfo.json", str(extra["engine_inspector"])))
    for row in extra.get("segment_placements") or []:  # a pipeline: each DLA segment's engine
        if isinstance(row, dict) and row.get("engine_inspector"):
            wanted.append((f"seg{row.get('index')}-layerinfo.json", str(row["engine_inspector"])))
    for row in extra.get("replica_placements") or []:  # replicas: each DLA replica's engine
        if isinstance(row, dict) and row.get("engine_inspector"):
            wanted.append((f"{row.get('device')}-layerinfo.json", str(row["engine_inspector"])))
    if extra.get("build_log"):
        wanted.append(("buildlog.txt", "\n".join(str(x) for x in extra["build_log"]) + "\n"))
    written = []
    for suffix, text in wanted:
        name = f"{EVIDENCE_DIR}/{_slug(check)}-{side}-{suffix}"
        try:
            (out / EVIDENCE_DIR).mkdir(parents=True, exist_ok=True)
            (out / name).write_text(scrub(text))
        except OSError:
            continue
        written.append(name)
    return written


def evidence_line(checks: list[dict[str, Any]]) -> str | None:
    """The report's line naming the evidence files (None when no check kept any)."""
    files = [f for c in checks for f in c.get("evidence") or []]
    if not files:
        return None
    return (f"the DLA engines' layer information and build log lines the DLA checks read are in {EVIDENCE_DIR}/ "
            f"({len(files)} files): send them with selftest.txt and selftest.json when a DLA line asks for the report "
            "(no published DLA engine's layer information exists to check placetune's reading against)")


def engine_digest(path: str | Path) -> str | None:
    """A digest of the engine file a run timed (None when it cannot be read): the self-test's second
    timing rebuilds the engine into the same file, so the digest says whether two runs timed one engine."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None
