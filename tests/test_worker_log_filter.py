"""The worker keeps a VERBOSE TensorRT message only when it is a placement line
(``worker_build.make_logger``): over every real published log in the corpus that holds ``[V]``
lines, the build log read from the lines the worker keeps is the one read from all of them, so no
line the placement is read from is filtered away (TensorRT 10.x prints its placement at VERBOSE)."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from pathlib import Path

from placetune.backends.tensorrt.buildlog import parse_build_log
from placetune.backends.tensorrt.logprefix import split_prefix
from placetune.backends.tensorrt.pool import WORKER_FILE

CORPUS = Path(__file__).parent / "data" / "trt_corpus"
SEVERITY = {"V": "VERBOSE", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "INTERNAL_ERROR"}


def _is_placement_line():
    sys.path.insert(0, str(WORKER_FILE.parent))
    try:
        return importlib.import_module("worker_names").is_placement_line
    finally:
        sys.path.remove(str(WORKER_FILE.parent))


def test_the_worker_keeps_every_verbose_line_a_placement_is_read_from():
    keep = _is_placement_line()
    read = 0
    for path in sorted(CORPUS.glob("*/*")):
        if path.suffix == ".json" or not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if "[V]" not in text:
            continue
        every = []
        for raw in text.splitlines():
            prefix, msg = split_prefix(raw)
            if prefix in SEVERITY:
                every.append([SEVERITY[prefix], msg])
        kept = [line for line in every if line[0] != "VERBOSE" or keep(line[1])]
        whole, filtered = dataclasses.asdict(parse_build_log(every)), dataclasses.asdict(parse_build_log(kept))
        assert filtered == whole, path.parent.name
        read += 1
    assert read >= 20  # the corpus's verbose logs (26 when written), TensorRT 10.3's among them
