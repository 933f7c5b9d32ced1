"""A night of unattended builds on a board: what a killed build, an out-of-memory kill or bad input data
leave behind must not fail the builds after it, and what cannot go on is said once, plainly.

Against the doubles (tests/fakes/trtexec, tests/fakes/tensorrt); the premises are read in TensorRT's
sources (cited where used)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from placetune import Evaluator, Model, Placement

from tests.test_trtexec import GN, _backend, _ev, _processes


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def _shared_cache(tmp: Path) -> Path:
    found = list((tmp / "cache" / "timing").glob("*.cache"))
    assert len(found) == 1, found
    return found[0]


def test_a_build_killed_while_trtexec_writes_its_timing_cache_does_not_fail_the_next_builds(tmp_path, gn):
    """trtexec truncates and rewrites its --timingCacheFile in place at the end of a build (common.h
    release/8.6:1168 updateTimingCacheFile, std::ofstream); killed meanwhile it left the shared cache
    half-written, and every later build failed with "TimingCache creation failed" (sampleEngines.cpp
    release/8.6:1197)."""
    ok = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert ok.status == "ok", ok.reason
    whole = _shared_cache(tmp_path).read_bytes()
    killed = _ev(gn, _backend(tmp_path, "8.6.1", fake={"KILL": "cache_write"}), tmp_path,
                 trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert killed.status == "crashed" and killed.extra["signal"] == "SIGKILL", killed.reason
    assert _shared_cache(tmp_path).read_bytes() == whole  # the shared cache was never written by trtexec
    later = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert later.status == "ok", later.reason
    # the later build's entries were kept: the shared cache grew, and it is whole
    assert json.loads(_shared_cache(tmp_path).read_bytes())["entries"]


def test_a_timing_cache_trtexec_cannot_read_is_set_aside_and_the_build_runs_again_without_it(tmp_path, gn, caplog):
    """A cache damaged before placetune kept builds whole (an older version's half-written file): the
    build's "TimingCache creation failed" is read from its log, the file renamed aside, said in one line,
    and the build run once more, on a new cache."""
    first = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert first.status == "ok", first.reason
    cache = _shared_cache(tmp_path)
    half = cache.read_bytes()[:40]
    cache.write_bytes(half)
    with caplog.at_level(logging.WARNING, logger="placetune"):
        m = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert m.status == "ok", m.reason
    aside = list(cache.parent.glob(f"{cache.name}.unreadable-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == half
    said = [r.getMessage() for r in caplog.records if "timing cache" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0] and "set aside as" in said[0] and "TimingCache creation failed" in \
        said[0], said
    assert any("built again without it" in n for n in m.extra["notes"])
    assert json.loads(cache.read_bytes())["entries"]  # the retry's cache is the shared one now
    assert len(_processes(tmp_path, "build")) == 3  # first, the failed one, the retry: never a loop


def test_a_build_that_keeps_failing_on_its_timing_cache_is_retried_once_only(tmp_path, gn, monkeypatch):
    """A retry that fails too is the build's failure, not a third attempt."""
    from placetune.backends.trtexec import engine as trtexec_engine

    monkeypatch.setattr(trtexec_engine, "set_aside", lambda shared, private: None)
    first = _ev(gn, _backend(tmp_path, "8.6.1"), tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert first.status == "ok", first.reason
    _shared_cache(tmp_path).write_bytes(b"{not a cache")
    be = _backend(tmp_path, "8.6.1", fake={"FAIL": "build"})
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_dla(gn))
    assert m.status == "build_failed", m.reason
    assert len(_processes(tmp_path, "build")) == 3


def test_the_tensorrt_workers_unreadable_timing_cache_is_set_aside_not_a_failure_of_every_build(tmp_path, gn, caplog):
    """The binding returns None for a cache TensorRT cannot deserialise (pyCore.cpp release/8.6:270 returns
    createTimingCache's null); the worker passed it to set_timing_cache, which fails: this build and every
    later one. It is set aside, said in one line, and the build runs on a new cache that is then written
    whole (a temporary name, flushed, renamed)."""
    from tests.test_tensorrt_backend import _backend as trt_backend

    be = trt_backend(tmp_path, "8.6.2")
    try:
        ev = Evaluator(gn, "orin-agx", backend=be, iterations=5, precision="fp16", trt_version="8.6")
        first = ev.evaluate(Placement.all_gpu(gn))
        assert first.status == "ok", first.reason
        cache = _shared_cache(tmp_path)
        cache.write_bytes(cache.read_bytes()[:30])
        with caplog.at_level(logging.WARNING, logger="placetune"):
            m = ev.evaluate(Placement.all_dla(gn))
        assert m.status == "ok", m.reason
        said = [r.getMessage() for r in caplog.records if "timing cache" in r.getMessage()]
        assert len(said) == 1 and "set aside as" in said[0] and "\n" not in said[0], said
        assert any("set aside as" in n for n in m.extra["notes"])
        assert len(list(cache.parent.glob(f"{cache.name}.unreadable-*"))) == 1
        assert json.loads(cache.read_bytes())["entries"] and not list(cache.parent.glob("*.tmp"))
    finally:
        be.close()
