"""``placetune build`` on a board the device tree names as another module than the plan's platform.

A plan tuned for a Jetson AGX Orin (2 DLA cores, its clocks) was built on an Orin NX as if it were its
own: only the placement report said where TensorRT put the layers, never that the placement had been chosen
for another module. The device-tree strings are the ones :mod:`placetune.hardware.modules` cites
(mainline Linux ``tegra234-p3768-0000+p3767-0000.dts``). Built with the TensorRT doubles (tests/fakes).
"""

from __future__ import annotations

import pytest

import placetune
from placetune import ConfigError, Placement
from placetune.cli.main import main
from placetune.plan.build import build_plan
from tests.fakes import fake_env
from tests.test_board_module import _tree
from tests.test_tensorrt_backend import _backend

ORIN_NX = ("NVIDIA Orin NX Developer Kit", ["nvidia,p3768-0000+p3767-0000", "nvidia,p3767-0000", "nvidia,tegra234"])
AGX_ORIN = ("Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"])


@pytest.fixture
def plan_dir(tmp_path, capsys):
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", precision="fp16", store=url, study="s") as ev:
        ev.baseline()
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}), agent="t", trial_number=0)
    out = tmp_path / "plan"
    assert main(["export", "--study", "s", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0, capsys.readouterr()
    return out


def test_a_plan_for_an_agx_orin_is_refused_on_an_orin_nx(tmp_path, plan_dir, monkeypatch, capsys):
    from placetune.backends.tensorrt import env as trt_env

    monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "dt", *ORIN_NX))
    for key, value in fake_env("10.3.0").items():  # the CLI's own worker imports the doubles
        monkeypatch.setenv(key, value)
    code = main(["build", str(plan_dir)])
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if x.strip()][-1]
    assert code == 6 and "Traceback" not in err, err
    assert "Jetson AGX Orin 64GB (platform orin-agx)" in line and "Jetson Orin NX 16GB" in line
    assert "--platform orin-nx-16gb" in line and "re-tune" in line
    assert not list(plan_dir.glob("*.engine")) and not (plan_dir / "build.json").exists()


def test_a_refused_build_keeps_the_engines_built_on_the_plans_own_module(tmp_path, plan_dir, monkeypatch):
    """The older engines were removed before the board was checked: a refused build lost them."""
    from placetune.backends.tensorrt import env as trt_env

    monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "agx", *AGX_ORIN))
    be = _backend(tmp_path, "10.3.0")
    try:
        build_plan(plan_dir, backend=be)
        built = {f.name: f.read_bytes() for f in plan_dir.glob("*.engine*")}
        monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "nx", *ORIN_NX))
        with pytest.raises(ConfigError, match="Jetson Orin NX 16GB"):
            build_plan(plan_dir, backend=be)
    finally:
        be.close()
    assert built and {f.name: f.read_bytes() for f in plan_dir.glob("*.engine*")} == built


def test_the_plans_own_module_builds_and_an_unknown_one_is_noted(tmp_path, plan_dir, monkeypatch):
    from placetune.backends.tensorrt import env as trt_env

    monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "dt", *AGX_ORIN))
    be = _backend(tmp_path, "10.3.0")
    try:
        report = build_plan(plan_dir, backend=be)
        assert not any("module" in n for n in report.notes), report.notes
        monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "pi", "Raspberry Pi 4 Model B",
                                                          ["raspberrypi,4-model-b", "brcm,bcm2711"]))
        report = build_plan(plan_dir, backend=be)
    finally:
        be.close()
    note = next(n for n in report.notes if "module is not known" in n)
    assert "Raspberry Pi 4 Model B" in note and "orin-agx" in note
    assert list(plan_dir.glob("*.engine"))
