"""Engine mode times the engine a first build kept (``save_plans``) when it measures the same placement again.

A re-measurement of a top plan, or selftest's second timing, used to build the engine again: minutes on
a board, and a rebuild may pick other tactics. The kept engine is named by the engine cache key (the
ONNX content, TensorRT, L4T, clocks and build options: what a pipeline segment's engine is keyed by),
its build record beside it, and is loaded when the key is the same; the record says so.
"""

from __future__ import annotations

from pathlib import Path

from placetune import Evaluator, Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from tests.fakes import fake_env


def _backend(tmp_path: Path, **kw) -> TensorRTBackend:
    return TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "trt", save_plans=tmp_path / "plans",
                           warmup_ms=1, iterations=5, profile_iterations=0, **kw)


def _first_and_again(seed_block, tmp_path: Path, **kw):
    be = _backend(tmp_path, **kw)
    ev = Evaluator(seed_block, "orin-agx", be, store=tmp_path / "pt.db", precision="fp16", trt_version="10.3")
    try:
        p = Placement.all_dla(ev.model)
        first = ev.evaluate(p)
        assert first.ok, first.reason
        again = ev.remeasure(p, builds=1)
    finally:
        ev.close()
        be.close()
    return first, again


def test_a_re_measurement_times_the_engine_the_first_build_kept(seed_block, tmp_path):
    first, again = _first_and_again(seed_block, tmp_path)
    assert first.extra["engine_cache"] == {"hits": 0, "misses": 1} and first.build_seconds > 0
    digest = first.extra["engine_digest"]
    assert first.extra["plan_file"].endswith(".plan") and Path(first.extra["plan_file"] + ".json").is_file()
    # the second timing loaded the kept engine: nothing was built, and the record says it was the same one
    assert again.ok and again.build_seconds == first.build_seconds
    old, new = again.extra["builds"]
    assert old["engine"] == digest and new["engine"] == digest and new["same_engine"] is True
    assert again.realized == first.realized and again.dla_loadables == first.dla_loadables
    assert sorted(p.name for p in (tmp_path / "plans").iterdir() if p.suffix == ".plan") == \
        [Path(first.extra["plan_file"]).name]


def test_without_the_engine_cache_the_re_measurement_builds_again(seed_block, tmp_path):
    first, again = _first_and_again(seed_block, tmp_path, engine_cache=False)
    assert again.ok and again.build_seconds > first.build_seconds  # built a second time
    assert again.extra["builds"][1]["engine"] is not None


def test_an_engine_kept_under_other_build_options_is_not_loaded(seed_block, tmp_path):
    """The memory pools change the engine: another key, another file, built."""
    pools = {"dla_sram": 1 << 19}
    be, other = _backend(tmp_path), _backend(tmp_path, dla_memory_pools=pools)
    try:
        ms = []
        for b in (be, other):
            ev = Evaluator(seed_block, "orin-agx", b, store=None, precision="fp16", trt_version="10.3")
            ms.append(ev.evaluate(Placement.all_dla(ev.model)))
            ev.close()
    finally:
        be.close()
        other.close()
    assert all(m.ok and m.extra["engine_cache"] == {"hits": 0, "misses": 1} for m in ms), [m.reason for m in ms]
    assert ms[0].extra["plan_file"] != ms[1].extra["plan_file"]
