"""Evaluator: cache, realisation-level hits, persistence across processes, SIGKILL, bad input."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from placetune import (
    ConfigError,
    Evaluator,
    Model,
    Placement,
    PlacementError,
    Store,
    StoreError,
    UnknownNameError,
)


def test_same_placement_twice_is_one_measurement():
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline")
    p = Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
    a = ev.evaluate(p)
    b = ev.evaluate(Placement.from_json(ev.model, p.to_json()))
    assert a.ok and b.ok and a.simulated
    assert ev.stats.measured == 1 and ev.stats.cache_hits == 1 and ev.stats.requested == 2
    assert a.extra["cache_hit"] is False and b.extra["cache_hit"] is True
    assert a.latency_ms == b.latency_ms


def test_equal_realisation_is_a_cache_hit():
    # On Xavier the final Softmax cannot run on DLA: asking for it there realises to the GPU.
    ev = Evaluator("resnet50", "xavier-agx", precision="fp16")
    soft = [layer.name for layer in ev.model.layers if layer.op_type == "Softmax"][0]
    p1 = Placement.all_dla(ev.model)
    p2 = p1.with_devices({soft: "GPU"})
    assert p1.key != p2.key
    m1 = ev.evaluate(p1)
    m2 = ev.evaluate(p2)
    assert soft in m1.fallback and ev.stats.measured == 1 and m2.extra["cache_hit"]
    assert m2.requested[soft] == "GPU" and m1.requested[soft] == "DLA0"


def test_cache_survives_a_new_process(tmp_path):
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    ev = Evaluator("resnet18", "orin-agx", store=url, precision="int8")
    m = ev.evaluate(Placement.all_dla(ev.model))
    ev.close()
    code = textwrap.dedent(f"""
        from placetune import Evaluator, Placement
        ev = Evaluator("resnet18", "orin-agx", store={url!r}, precision="int8")
        m = ev.evaluate(Placement.all_dla(ev.model))
        print(ev.stats.measured, ev.stats.cache_hits, m.latency_ms["median"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[:2] == ["0", "1"]
    assert float(out[2]) == pytest.approx(m.latency_ms["median"])


def test_failures_are_stored_and_not_remeasured(tmp_path):
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    ev = Evaluator("resnet50", "xavier-agx", store=url, gpu_fallback=False)
    m = ev.evaluate(Placement.all_dla(ev.model))
    assert m.status == "infeasible" and "Softmax" in m.reason
    ev2 = Evaluator("resnet50", "xavier-agx", store=url, gpu_fallback=False)
    again = ev2.evaluate(Placement.all_dla(ev2.model))
    assert again.status == "infeasible" and ev2.stats.measured == 0 and ev2.stats.cache_hits == 1


def test_baselines_and_best():
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", precision="int8")
    base = ev.baselines()
    assert set(base) == {"all-GPU", "all-DLA0", "all-DLA1", "split-DLA0-DLA1"}  # named as the tables print them
    best_p, best_m = ev.best()
    values = [m.latency_ms["median"] for _, m in base.values() if m.ok]
    assert best_m.latency_ms["median"] == pytest.approx(min(values))


def test_unknown_objective_and_study_mismatch(tmp_path):
    with pytest.raises(UnknownNameError, match="objective"):
        Evaluator("seed-block", "orin-agx", objective="speed")
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    ev = Evaluator("seed-block", "orin-agx", store=url, study="night")
    ev.evaluate(Placement.all_dla(ev.model))
    ev.close()
    with pytest.raises(ConfigError, match="platform=orin-agx.*xavier-agx"):
        Evaluator("seed-block", "xavier-agx", store=url, study="night")
    with pytest.raises(ConfigError, match="model"):
        Evaluator("resnet18", "orin-agx", store=url, study="night")
    # nothing lost
    with Store(url) as store:
        assert len(store.measurements("night")) == 1


def test_placement_of_another_model_or_missing_dla():
    ev = Evaluator("seed-block", "orin-nx-8gb", mode="pipeline")
    with pytest.raises(PlacementError, match="DLA1"):
        ev.evaluate(Placement.all_dla(ev.model, 1))
    other = Model.load("resnet18")
    with pytest.raises(PlacementError, match="resnet18"):
        ev.evaluate(Placement.all_gpu(other))


def test_locked_database_is_a_clear_error_and_keeps_rows(tmp_path):
    path = tmp_path / "pt.db"
    ev = Evaluator("seed-block", "orin-agx", store=Store(f"sqlite:///{path}", busy_timeout=0.2))
    ev.evaluate(Placement.all_gpu(ev.model))
    holder = sqlite3.connect(path, timeout=0.1)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError, match="locked"):
            ev.evaluate(Placement.all_dla(ev.model))
    finally:
        holder.rollback()
        holder.close()
    with Store(f"sqlite:///{path}") as store:
        assert [r.status for r in store.measurements()] == ["ok"]


def test_read_only_database(tmp_path):
    path = tmp_path / "pt.db"
    ev = Evaluator("seed-block", "orin-agx", store=f"sqlite:///{path}", study="s")
    ev.evaluate(Placement.all_gpu(ev.model))
    ev.close()
    ro = f"sqlite:///file:{path}?mode=ro&uri=true"
    with pytest.raises(StoreError, match="read-only"):
        ev2 = Evaluator("seed-block", "orin-agx", store=ro, study="s")
        ev2.evaluate(Placement.all_dla(ev2.model))


_STREAM = """
import sys
from placetune import Evaluator, Space
import numpy as np
ev = Evaluator("resnet50", "orin-agx", store=sys.argv[1], precision="int8", study="stream")
space = ev.space()
rng = np.random.default_rng(int(sys.argv[2]))
for i in range(100000):
    ev.evaluate(space.to_placement(space.sample(rng)), trial_number=i)
    if i == 5:
        print("running", flush=True)
"""


def test_sigkill_mid_stream_leaves_a_sound_database(tmp_path):
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    for seed in (1, 2):
        proc = subprocess.Popen([sys.executable, "-c", _STREAM, url, str(seed)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "running"
        time.sleep(0.3 * seed)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    with Store(url) as store:
        rows = store.measurements("stream")
        assert len(rows) > 10
        assert all(r.measurement.ok and r.measurement.latency_ms["median"] > 0 for r in rows)
    # and the study resumes: everything already stored is a cache hit
    ev = Evaluator("resnet50", "orin-agx", store=url, precision="int8", study="stream")
    for r in rows[:10]:
        ev.evaluate(Placement(ev.model, r.measurement.requested))
    assert ev.stats.measured == 0
    with sqlite3.connect(tmp_path / "pt.db") as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_engine_mode_baselines_use_the_engine_core_only():
    ev = Evaluator("seed-block", "orin-agx", mode="engine", precision="int8")
    assert set(ev.baselines()) == {"all-GPU", "all-DLA0"}
    ev1 = Evaluator("seed-block", "orin-agx", mode="engine", precision="int8", dla_core=1)
    assert set(ev1.baselines()) == {"all-GPU", "all-DLA1"}


def test_baseline_names_are_the_printed_ones_and_the_old_ones_still_work(capsys):
    """baselines() keyed all-gpu while every table printed all-GPU: the keys are now the printed
    names, and code written against the old names keeps working."""
    from placetune.cli.main import main

    ev = Evaluator("seed-block", "orin-agx", mode="engine", precision="int8")
    base = ev.baselines()
    assert main(["tune", "--model", "seed-block", "--mode", "engine", "--precision", "int8", "--trials", "3",
                 "--storage", ":memory:", "--export", os.devnull]) == 0
    printed = [x.split()[0] for x in capsys.readouterr().out.splitlines() if x.startswith("all-")]
    assert set(base) <= set(printed), (set(base), printed)
    assert base["all-gpu"] is base["all-GPU"] and "all-dla0" in base and base.get("ALL-DLA0") == base["all-DLA0"]
    assert "all-dla1" not in base and base.get("all-dla1") is None


def test_api_default_precision_is_the_command_lines():
    """The Evaluator and the Gymnasium environments build at the precision `placetune check`,
    `measure` and `tune` default to (one constant, INT8), not FP16 as they once did: the same
    model measured from Python and from the terminal is the same build."""
    import gymnasium as gym

    from placetune.cli.main import build_parser
    from placetune.settings import DEFAULT_PRECISION
    from placetune.tuning.studyfile import TuneConfig

    assert DEFAULT_PRECISION == "int8"
    parser = build_parser()
    assert parser.parse_args(["check", "seed-block"]).precision == DEFAULT_PRECISION
    # measure leaves it unset while parsing (a plan given to --placement fills it), then takes the default
    from placetune.cli.measure import _plan_options
    args = parser.parse_args(["measure", "seed-block"])
    _plan_options(None, None, args)
    assert args.precision == DEFAULT_PRECISION
    assert TuneConfig().precision == DEFAULT_PRECISION  # tune's
    ev = Evaluator("seed-block", "orin-agx")
    assert ev.settings.precision == DEFAULT_PRECISION and ev.study.precision == DEFAULT_PRECISION
    for env_id in ("placetune/Placement-v0", "placetune/PlacementOneShot-v0", "placetune/PlacementStages-v0"):
        env = gym.make(env_id, model="seed-block", mode="pipeline")
        try:
            assert env.unwrapped.settings.precision == DEFAULT_PRECISION, env_id
        finally:
            env.close()
    # an evaluator passed to an environment keeps its own precision, whichever it is
    for precision in ("fp16", "int8"):
        shared = Evaluator("seed-block", "orin-agx", mode="pipeline", precision=precision)
        env = gym.make("placetune/Placement-v0", evaluator=shared)
        assert env.unwrapped.settings.precision == precision
        env.close()


def test_settings_default_to_the_command_lines_precision():
    """``Settings`` itself defaults to the precision the command line, the Evaluator and the environments
    use: an Evaluator given ``settings=Settings(mode=...)`` builds INT8 as ``Evaluator(mode=...)`` does, not
    FP16 without a word. An explicit precision keeps its settings hash (stored studies reopen)."""
    from placetune.settings import DEFAULT_PRECISION, Settings

    assert Settings().precision == DEFAULT_PRECISION == "int8"
    ev = Evaluator("seed-block", "orin-agx", settings=Settings(mode="pipeline", frames_in_flight=4))
    assert ev.settings.precision == ev.study.precision == "int8"
    m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}))
    assert m.ok and m.precision == "int8"
    same = Evaluator("seed-block", "orin-agx", mode="pipeline", frames_in_flight=4, trt_version="8.6")
    assert same.settings == ev.settings and same.study_name == ev.study_name
    # an explicit precision hashes as studies were stored with it (values from before the default moved)
    assert Settings(precision="fp16").hash == "3e4d665f1e903f79"
    assert Settings(precision="int8").hash == "79ab509b6e013a3c" == Settings().hash
    assert ev.settings.hash == "d08948b0188e5c4b"  # the default tune's study name ends in its first 6 characters


@pytest.mark.parametrize("kw, named", [
    ({"bogus": 1}, "bogus"),
    ({"gpu_falback": False}, "gpu_falback"),
    ({"settings": 5}, "settings"),
    ({"shapes": 5}, "shapes"),
    ({"constraints": 5}, "constraints"),
    ({"agent": 5}, "agent"),
])
def test_an_unknown_or_ill_typed_keyword_is_one_line_naming_it_and_what_is_allowed(kw, named):
    """Before, ``Evaluator(..., bogus=1)`` raised a plain TypeError from Settings (and ``settings=5`` an
    AttributeError, ``shapes=5`` and ``constraints=5`` a TypeError, ``agent=5`` was taken), where
    ``gymnasium.make(..., bogus=1)`` refused it in one line listing the options."""
    with pytest.raises(ConfigError) as info:
        Evaluator("seed-block", "orin-agx", **kw)
    line = str(info.value)
    assert "\n" not in line and named in line
    if named in ("bogus", "gpu_falback"):  # the allowed ones listed: the evaluator's arguments and Settings fields
        assert "objective" in line and "gpu_fallback" in line and "noise" in line and "trt_version" in line
