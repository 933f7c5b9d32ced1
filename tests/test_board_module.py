"""A real-backend run on a board the device tree names as another module than ``--platform``.

JetPack 5.1 ships TensorRT 8.5.2 for both Xavier and Orin, so the board's TensorRT cannot tell an AGX
Xavier from an AGX Orin: a Xavier tuned with the default ``--platform orin-agx`` was measured all night
and recorded as an AGX Orin's figures under Orin's DLA rules. Jetson Thor (JetPack 7.0/7.1, TensorRT
10.13) has no DLA and no profile: its figures were recorded as the default profile's. The device tree's
strings are the ones :mod:`placetune.hardware.modules` cites (mainline Linux ``tegra194-p2972-0000.dts``:
``compatible = "nvidia,p2972-0000", "nvidia,tegra194"``; ``tegra264-p4071-0000+p3834-0008.dts``).
"""

from __future__ import annotations

import pytest

from placetune import ConfigError, Evaluator, Placement
from placetune.backends import clocks
from placetune.backends.tensorrt import env as trt_env
from tests.test_trtexec import GN, _backend  # the fake trtexec and its model

XAVIER = ("Jetson-AGX", ["nvidia,p2972-0000", "nvidia,tegra194"])
THOR = ("NVIDIA Jetson AGX Thor Developer Kit", ["nvidia,p4071-0000+p3834-0008", "nvidia,p3834-0008", "nvidia,tegra264"])
ORIN_NANO_SUPER = ("NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super",
                   ["nvidia,p3768-0000+p3767-0005-super", "nvidia,p3767-0005-super", "nvidia,tegra234"])


def _tree(path, model, compatible):
    path.mkdir()
    (path / "model").write_bytes(model.encode() + b"\x00")
    (path / "compatible").write_bytes("\x00".join(compatible).encode() + b"\x00")
    return str(path)


@pytest.fixture
def board(tmp_path, monkeypatch):
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))

    def on(model, compatible):
        monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "dt", model, compatible))
    return on


def test_a_xavier_tuned_as_the_default_orin_profile_is_refused_at_start(tmp_path, board):
    board(*XAVIER)
    with pytest.raises(ConfigError) as e:
        Evaluator(GN, "orin-agx", backend=_backend(tmp_path, "8.5.2"), iterations=5, precision="fp16",
                  trt_version="8.5")
    msg = str(e.value)
    assert e.value.exit_code == 6 and "\n" not in msg
    assert msg.startswith("platform orin-agx: this board is a Jetson AGX Xavier Developer Kit (from the compatible "
                          "p2972-0000)") and msg.endswith("pass --platform xavier-agx")
    ev = Evaluator(GN, "xavier-agx", backend=_backend(tmp_path / "b", "8.5.2"), iterations=5, precision="fp16",
                   trt_version="8.5")  # its own profile: measured
    assert ev.evaluate(Placement.all_gpu(ev.model)).ok
    ev.close()


def test_a_thor_has_no_profile_and_nothing_to_place(tmp_path, board):
    board(*THOR)
    with pytest.raises(ConfigError) as e:
        Evaluator(GN, "orin-agx", backend=_backend(tmp_path, "10.13.3"), iterations=5, precision="fp16",
                  trt_version="10.3")
    msg = str(e.value)
    assert e.value.exit_code == 6 and "\n" not in msg
    assert "Jetson AGX Thor (T5000)" in msg and "no DLA" in msg and "placetune selftest" in msg


def test_an_orin_nano_super_may_use_either_orin_nano_profile(tmp_path, board):
    """The Super modes are the same module under JetPack 6.2's nvpmodel file: both profiles fit it."""
    board(*ORIN_NANO_SUPER)
    for name in ("orin-nano", "orin-nano-super"):
        ev = Evaluator(GN, name, backend=_backend(tmp_path / name, "10.3.0"), iterations=5, precision="fp16",
                       trt_version="10.3", power_mode="MAXN_SUPER" if name.endswith("super") else "MAXN")
        ev.close()
    with pytest.raises(ConfigError, match="pass --platform orin-nano"):
        Evaluator(GN, "orin-nx-16gb", backend=_backend(tmp_path / "nx", "10.3.0"), iterations=5, precision="fp16",
                  trt_version="10.3")


def test_off_a_jetson_or_on_an_unknown_module_nothing_is_refused(tmp_path, board):
    board("Raspberry Pi 4 Model B", ["raspberrypi,4-model-b", "brcm,bcm2711"])
    ev = Evaluator(GN, "orin-agx", backend=_backend(tmp_path, "10.3.0"), iterations=5, precision="fp16",
                   trt_version="10.3")
    assert ev.evaluate(Placement.all_gpu(ev.model)).ok
    ev.close()


def test_the_selftest_takes_orin_nano_super_on_an_orin_nano_super(tmp_path):
    """Before, ``selftest --platform orin-nano-super`` on a Super board failed its module check (the
    module's rows name ``orin-nano``) although ``orin-nano-super`` is that board's Super-mode profile."""
    from tests.test_selftest import _run

    code, doc = _run(tmp_path, "10.3.0", ORIN_NANO_SUPER[0], ORIN_NANO_SUPER[1], platform="orin-nano-super",
                     DLA_CORES="0")
    by = {c["name"]: c for c in doc["checks"]}
    assert by["module"]["status"] == "ok", by["module"]["detail"]
    assert doc["platform"] == "orin-nano-super"


def test_a_jetpack5_plan_folder_says_how_to_build_it_there(tmp_path, capsys):
    """JetPack 5.1 (TensorRT 8.5.2): trtexec has no ``--layerDeviceTypes`` (``getLayerDeviceTypes`` is absent
    from ``samples/common/sampleOptions.cpp`` at TRT@release/8.5 and present at release/8.6), so build.sh
    cannot build a plan with single layers on the DLA, and the system ``python3`` is 3.8 (placetune needs
    3.10+): the folder's README.txt told such a user to ``pip install -e placetune[jetson]`` into a venv of
    that Python and to run ``sh build.sh``, both of which fail there."""
    import placetune
    from placetune.cli.main import main

    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "xavier-agx", mode="engine", precision="fp16", store=url, study="x") as ev:
        ev.baseline()
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0"}), agent="t", trial_number=0)
    out = tmp_path / "plan"
    assert main(["export", "--study", "x", "--storage", url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(m.extra["_id"])]) == 0, capsys.readouterr()
    text = (out / "README.txt").read_text()
    assert "# target TensorRT 8.5" in (out / "build.sh").read_text()
    assert "placetune build . --worker-python /usr/bin/python3" in text
    assert "has no --layerDeviceTypes" in text
    assert 'pip install -e "/path/to/placetune[jetson]"' not in text


def test_a_tensorrt_without_dla_cores_on_a_dla_module_is_refused_at_start(tmp_path, board):
    """A TensorRT whose builder reports no DLA core (``IBuilder.num_DLA_cores``: 10.8 and later 10.x, 11.0-11.4.0,
    11.4.1 off AGX Orin: TensorRT 11.4.1 release notes) on a module with DLA cores: every placement that asks
    for a DLA was built and marked infeasible one by one all night, the all-GPU engine the only figure."""
    from placetune import BackendError
    from tests.test_tensorrt_backend import _backend as trt_backend

    board("NVIDIA Orin NX Developer Kit", ["nvidia,p3768-0000+p3767-0000", "nvidia,p3767-0000", "nvidia,tegra234"])
    be = trt_backend(tmp_path, "11.4.1", faults={"DLA_CORES": "0"})
    try:
        with pytest.raises(BackendError) as e:
            Evaluator(GN, "orin-nx-16gb", backend=be, iterations=5, precision="fp16", trt_version="11.4.1")
    finally:
        be.close()
    msg = str(e.value)
    assert e.value.exit_code == 8 and "\n" not in msg
    assert msg.startswith("TensorRT 11.4.1 reports 0 DLA cores here, but a Jetson Orin NX 16GB has 2")
    assert "8.5, 8.6, 10.3" in msg  # the TensorRT releases of orin-nx-16gb's JetPacks, which have its DLA
    (tmp_path / "dt").rename(tmp_path / "dt-nx")  # now an Orin Nano: no DLA on the module, nothing refused
    board(*ORIN_NANO_SUPER)
    be = trt_backend(tmp_path / "nano", "10.3.0", faults={"DLA_CORES": "0"})
    try:
        ev = Evaluator(GN, "orin-nano", backend=be, iterations=5, precision="fp16", trt_version="10.3")
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
        ev.close()
    finally:
        be.close()


def test_the_selftest_still_times_the_gpu_of_a_thor_and_of_a_tensorrt_without_dla(tmp_path, monkeypatch):
    """The selftest reports the module and the DLA cores as checks of its own: the refusals a tune
    makes at start must not fail its GPU checks on a Jetson Thor (JetPack 7.0/7.1: TensorRT 10.13, no DLA)."""
    from tests.test_selftest import _run

    monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "tree", *THOR))
    code, doc = _run(tmp_path, "10.13.3", THOR[0], THOR[1], DLA_CORES="0")
    by = {c["name"]: c for c in doc["checks"]}
    assert by["module"]["status"] == "ok" and by["engine all-GPU fp16 (vs trtexec)"]["status"] == "ok", \
        by["engine all-GPU fp16 (vs trtexec)"]["detail"]


def test_tensorrt_11_4_1_from_pip_is_not_called_a_stray_wheel_and_its_missing_dla_says_why():
    """TensorRT 11.4.1 release notes: "Jetson AGX Orin and Jetson Thor are both served by the Linux SBSA
    package ... install the SBSA build rather than a JetPack-specific one. The SBSA build does not provide DLA
    outside NVIDIA JetPack." Before, an 11.4.1 wheel in a venv's site-packages was called a pip install that
    shadows JetPack's, to be uninstalled, and an AGX Orin whose 11.4.1 reports no DLA core was given no reason."""
    from placetune.cli.selftest import dla_count_hint, pip_wheel_hint

    venv = "/home/u/venv/lib/python3.12/site-packages/tensorrt/__init__.py"
    assert pip_wheel_hint(venv, "11.4.1") == ""
    assert "pip uninstall tensorrt" in pip_wheel_hint(venv, "10.3.0")  # JetPack 6's own is python3-libnvinfer
    hint = dla_count_hint("11.4.1", "Jetson AGX Orin 64GB")
    assert "JetPack 7.2.2" in hint and "SBSA build does not provide DLA outside" in hint


# an AGX Orin developer kit flashed with NVIDIA's emulation configuration jetson-agx-orin-devkit-as-nx-16gb:
# the compatible names the kit's module and the emulated one (NVIDIA's L4T nvpower.sh matches
# 'p3701-0000-as-p3767-0000' in /proc/device-tree/compatible and sets up nvpmodel_p3767_0000.conf)
EMULATED_NX16 = ("NVIDIA Jetson AGX Orin Developer Kit",
                 ["nvidia,p3737-0000+p3701-0000-as-p3767-0000", "nvidia,p3701-0000", "nvidia,tegra234"])


def test_an_agx_orin_kit_emulating_an_orin_nx_is_tuned_as_the_orin_nx_and_says_so(tmp_path, board):
    """The emulated module's profile is the board's: --platform orin-nx-16gb was refused ('this board is a
    Jetson AGX Orin ...: pass --platform orin-agx') and orin-agx accepted, recording an Orin NX's CPU, GPU
    and power modes as an AGX Orin's. The study records the emulation in its fingerprint."""
    board(*EMULATED_NX16)
    with pytest.raises(ConfigError) as e:
        Evaluator(GN, "orin-agx", backend=_backend(tmp_path, "10.3.0"), iterations=5, precision="fp16",
                  trt_version="10.3")
    assert "Jetson Orin NX 16GB emulated on a Jetson AGX Orin developer kit (p3701-0000)" in str(e.value)
    assert str(e.value).endswith("pass --platform orin-nx-16gb")
    ev = Evaluator(GN, "orin-nx-16gb", backend=_backend(tmp_path / "b", "10.3.0"), iterations=5, precision="fp16",
                   trt_version="10.3")
    try:
        assert ev.fingerprint["module_emulated"] == "p3767-0000 on p3701-0000"
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
    finally:
        ev.close()


# NVIDIA's emulation flash configurations for an Orin NX 8GB (one DLA) and an Orin Nano 8GB (no DLA)
EMULATED_NX8 = ("NVIDIA Jetson AGX Orin Developer Kit",
                ["nvidia,p3737-0000+p3701-0000-as-p3767-0001", "nvidia,p3701-0000", "nvidia,tegra234"])
EMULATED_NANO = ("NVIDIA Jetson AGX Orin Developer Kit",
                 ["nvidia,p3737-0000+p3701-0000-as-p3767-0003", "nvidia,p3701-0000", "nvidia,tegra234"])


@pytest.mark.parametrize("tree, platform, cores", [(EMULATED_NX8, "orin-nx-8gb", 1), (EMULATED_NANO, "orin-nano", 0)])
def test_an_agx_orin_kit_emulating_a_module_with_fewer_dla_cores_uses_only_the_module_s(tmp_path, board, caplog,
                                                                                        tree, platform, cores):
    """TensorRT on the kit still reports its 2 DLA cores: the run says so in one line and uses the
    emulated module's count (placements, and the pipeline gate's reference engine, which went to
    any core TensorRT reported), recorded as ``dla_cores_used``."""
    from placetune.backends.jetson import dla_cores_used
    from placetune.hardware.platforms import get_platform
    from tests.test_tensorrt_backend import _backend as trt_backend

    board(*tree)
    be = trt_backend(tmp_path, "10.3.0", faults={"DLA_CORES": "2"})
    try:
        with caplog.at_level("WARNING"):
            ev = Evaluator(GN, platform, backend=be, iterations=5, precision="fp16", trt_version="10.3")
        try:
            assert ev.fingerprint["dla_cores_used"] == cores and ev.fingerprint["module_emulated"].endswith("p3701-0000")
            lines = [r.getMessage() for r in caplog.records if "TensorRT reports 2 DLA cores" in r.getMessage()]
            assert len(lines) == 1 and "\n" not in lines[0] and f"which has {cores}: the run uses {cores}" in lines[0]
            if cores:
                assert ev.evaluate(Placement.all_dla(ev.model, 0)).ok
        finally:
            ev.close()
    finally:
        be.close()
    assert dla_cores_used(get_platform(platform), 2) == cores and dla_cores_used(get_platform("orin-agx"), 2) == 2
    assert dla_cores_used(get_platform(platform), None) is None


def test_an_agx_orin_kit_emulating_a_module_with_its_dla_cores_says_nothing_more(tmp_path, board, caplog):
    board(*EMULATED_NX16)
    be = _backend(tmp_path, "10.3.0")
    with caplog.at_level("WARNING"):
        ev = Evaluator(GN, "orin-nx-16gb", backend=be, iterations=5, precision="fp16", trt_version="10.3")
    ev.close()
    assert "dla_cores_used" not in ev.fingerprint
    assert not [r for r in caplog.records if "DLA cores on this AGX Orin" in r.getMessage()]
