"""The backend contract and registry: built-ins declare their capabilities, a backend of one file
(examples/toy_backend.py) registers from Python or through the ``placetune.backends`` entry point
group and is tuned by ``placetune tune`` and the ``Evaluator``; what is not a backend is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import placetune as pt
from placetune.backends import registry
from placetune.backends.base import Backend, BackendBase, Capabilities
from placetune.cli.main import main
from placetune.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))
from toy_backend import ToyBackend  # noqa: E402


@pytest.fixture
def toy():
    pt.register_backend("toy", ToyBackend, aliases=("toy-model",))
    yield
    registry.unregister_backend("toy")


def test_builtins_declare_what_they_can_do():
    caps = {n: registry.backend_capabilities(n) for n in ("simulate", "tensorrt", "trtexec")}
    assert caps["simulate"].simulated and caps["simulate"].build_counter and caps["simulate"].device_profile
    assert not caps["tensorrt"].simulated and caps["tensorrt"].probe and caps["tensorrt"].calibration_cache
    assert "pipeline" not in caps["trtexec"].modes and "energy" in caps["trtexec"].objectives
    # the tensorrt backend measures energy in engine mode with power = true, GPU busy time in pipelines only
    assert "energy" in caps["tensorrt"].objectives
    assert registry.why_unmeasurable("tensorrt", "energy", "engine", {"power": True}) is None
    assert "power = true" in registry.why_unmeasurable("tensorrt", "energy", "engine", {})
    assert "engine mode only" in registry.why_unmeasurable("tensorrt", "energy", "pipeline", {"power": True})
    assert registry.why_unmeasurable("tensorrt", "gpu_time", "pipeline") is None
    assert "pipeline mode only" in registry.why_unmeasurable("tensorrt", "gpu_time", "engine")
    assert "whole networks only" in registry.why_unmeasurable("trtexec", "latency", "pipeline")
    assert registry.why_unmeasurable("simulate", "gpu_time", "replicas") is None
    assert registry.backend_capabilities("sim") is caps["simulate"]
    sim = pt.get_backend("simulate")
    assert isinstance(sim, Backend) and sim.simulated and sim.probe() == {}


def test_registering_a_taken_name_or_an_unknown_name_is_refused(toy):
    with pytest.raises(ConfigError, match="already registered"):
        pt.register_backend("toy", ToyBackend)
    with pytest.raises(ConfigError, match="already registered"):
        pt.register_backend("sim", ToyBackend)
    with pytest.raises(UnknownNameError, match="backends are simulate, tensorrt, trtexec, toy"):
        pt.get_backend("toyy")
    with pytest.raises(ConfigError, match=r"backend 'toy' has no option\(s\) 'noise'; its options: transfer_ms"):
        pt.get_backend("toy", noise=0.1)
    assert isinstance(pt.get_backend("toy-model", transfer_ms=0.5), ToyBackend)


def test_an_object_that_keeps_no_contract_is_not_a_backend():
    class Partial:
        name = "partial"

        def measure(self, *a):  # pragma: no cover - never called
            raise AssertionError

    with pytest.raises(ConfigError, match="Partial is not a backend: it lacks capabilities.*BackendBase"):
        pt.Evaluator("seed-block", "orin-agx", Partial())
    pt.register_backend("partial", Partial)
    try:
        with pytest.raises(ConfigError, match="not a backend"):
            pt.get_backend("partial")
    finally:
        registry.unregister_backend("partial")


def test_the_toy_backend_through_the_evaluator(toy):
    ev = pt.Evaluator("seed-block", "orin-agx", backend="toy")
    gpu = ev.baseline()
    assert gpu.ok and gpu.simulated and gpu.backend == "toy-1" and ev.study.simulated
    assert gpu.median_ms == pytest.approx(0.05 * len(ev.model.names))
    m = ev.evaluate(pt.Placement.all_dla(ev.model))
    assert m.ok and m.median_ms > gpu.median_ms  # a DLA layer costs more, and every hand-over
    assert pt.Evaluator("seed-block", "orin-agx", backend="toy", mode="pipeline").baseline().status == "infeasible"
    with pytest.raises(ConfigError, match=r"objective 'latency\+energy': the toy backend does not measure energy; "
                                          "it measures latency, throughput"):
        pt.Evaluator("seed-block", "orin-agx", backend="toy", objective="latency+energy")


def test_placetune_tune_runs_a_registered_backend(toy, tmp_path, capsys):
    db = tmp_path / "toy.db"
    assert main(["tune", "--model", "seed-block", "--backend", "toy", "--mode", "engine", "--objective", "latency",
                 "--agent", "random", "--trials", "6",
                 "--storage", f"sqlite:///{db}", "--study", "t", "--export", str(tmp_path / "plan.json")]) == 0
    out = capsys.readouterr().out
    assert "backend toy" in out and "status=ok" in out and "infeasible" not in out
    # refused at start, from what the backend declares: first the mode (tune's default is pipeline), then the objective
    assert main(["tune", "--model", "seed-block", "--backend", "toy", "--objective", "energy", "--trials", "1"]) == 6
    assert capsys.readouterr().err == ("placetune: error: objective energy cannot be measured by the toy backend in "
                                       "pipeline mode: the toy backend measures engine mode(s) only\n")
    assert main(["tune", "--model", "seed-block", "--backend", "toy", "--mode", "engine", "--objective", "energy",
                 "--trials", "1"]) == 6
    assert "the toy backend measures latency, throughput only" in capsys.readouterr().err
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["simulated"] is True


def test_an_installed_package_adds_a_backend_through_its_entry_point(tmp_path):
    """A distribution on sys.path whose entry_points.txt names the toy backend, found by ``placetune tune``."""
    dist = tmp_path / "site" / "toy_backend_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[{registry.ENTRY_POINT_GROUP}]\ntoy = toy_backend:ToyBackend\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(EXAMPLES), str(tmp_path / "site")])}
    p = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", "--model", "seed-block", "--backend", "toy", "--mode", "engine",
                        "--agent", "random", "--trials", "4", "--storage", f"sqlite:///{tmp_path / 'e.db'}"],
                       capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "backend toy" in p.stdout and "status=ok" in p.stdout
    missing = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", "--model", "seed-block", "--backend",
                              "toyy", "--trials", "1"], capture_output=True, text=True, env=env, timeout=240, cwd=tmp_path)
    assert missing.returncode == 4 and "backends are simulate, tensorrt, trtexec, toy" in missing.stderr


def test_a_subclass_inherits_the_optional_parts():
    class Minimal(BackendBase):
        name = "minimal"
        capabilities = Capabilities(simulated=True, modes=("engine",))

    b = Minimal()
    assert b.simulated and b.probe() == {} and b.advance_builds("k", "engine", 3) is None and b.close() is None
    assert isinstance(b, Backend)


def test_what_the_two_jetson_backends_share(seed_block, caplog):
    """The realised-vs-predicted comparison, the INT8 refusal on strongly typed TensorRT and the
    device fingerprint with its warnings given once: one implementation for tensorrt and trtexec."""
    from placetune.backends.jetson import JetsonBackend, device_fingerprint, realized_vs_predicted, untyped_int8
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    a, b, c = seed_block.names[:3]
    predicted = {a: "DLA0", b: "DLA0", c: "GPU"}
    read = {a: "GPU", b: "DLA0", c: "DLA1"}
    assert realized_vs_predicted(predicted, read) == {a: ["DLA0", "GPU"], c: ["GPU", "DLA1"]}
    assert realized_vs_predicted(predicted, None) == {}  # an unknown placement is no disagreement

    refused = untyped_int8(seed_block, "int8", "11.4.1", True, {"backend": "trtexec"})
    assert refused.status == "infeasible" and "strongly typed networks only" in refused.reason and "Q/DQ" in refused.reason
    assert untyped_int8(seed_block, "int8", "10.3", False, {}) is None
    assert untyped_int8(seed_block, "fp16", "11.4.1", True, {}) is None

    class Real(JetsonBackend):
        name = "real"

    be = Real()
    assert not be.simulated and be.capabilities.calibration_cache
    settings = Settings(power_mode="MAXN")
    with caplog.at_level("WARNING"):
        fp = device_fingerprint(be, "10.3", get_platform("orin-agx"), settings, dla_cores=2)
        device_fingerprint(be, "10.3", get_platform("orin-agx"), settings, dla_cores=2)
    assert list(fp)[:4] == ["backend", "trt_version", "platform", "dla_cores"] and fp["backend"] == "real"
    assert {"l4t", "jetpack", "module", "power_mode", "clocks_locked"} <= set(fp)
    if fp["clocks_locked"] is not True:  # not a Jetson with locked clocks: said once, not per fingerprint
        assert sum("jetson_clocks" in r.getMessage() for r in caplog.records) == 1
