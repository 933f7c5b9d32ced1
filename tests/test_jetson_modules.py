"""Jetson module identification: real device-tree strings (each with where it was seen) -> module and profile."""

from __future__ import annotations

import pytest

from placetune.hardware.modules import MODULES, identify_module, read_device_tree
from placetune.hardware.platforms import get_platform

# (model, compatible, module part, platform, source). Compatible strings pasted in issue threads
# lost their NULs ("...p3701-0005nvidia,p3701-0005..."): kept as published.
SEEN = [
    ("Jetson AGX Orin", "nvidia,p3737-0000+p3701-0004\0nvidia,p3701-0004\0nvidia,tegra234\0nvidia,tegra23x",
     "p3701-0004", "orin-agx", "rbonghi/jetson_stats#617 (JetPack 5.1.1, model as JetPack 5 prints it)"),
    ("NVIDIA Jetson AGX Orin Developer Kit", "nvidia,p3737-0000+p3701-0005nvidia,p3701-0005nvidia,tegra234nvidia,"
     "tegra23x", "p3701-0005", "orin-agx", "NVIDIA/jetson-gpio#125 (AGX Orin 64GB devkit)"),
    ("NVIDIA Jetson AGX Orin Developer Kit", "nvidia,p3737-0000+p3701-0000", "p3701-0000", "orin-agx",
     "rbonghi/jetson_stats#864 (L4T 39.2) and torvalds/linux tegra234-p3737-0000+p3701-0000.dts"),
    ("NVIDIA Jetson AGX Orin Developer Kit", "nvidia,p3737-0000+p3701-0008\0nvidia,p3701-0008\0nvidia,tegra234",
     "p3701-0008", "orin-agx", "torvalds/linux tegra234-p3737-0000+p3701-0008.dts"),
    ("Jetson AGX Orin Industrial", None, "p3701-0005", "orin-agx", "rbonghi/jetson_stats#598 (L4T 35.4.1)"),
    ("NVIDIA Orin Nano Developer Kit", "nvidia,p3768-0000+p3767-0003nvidia,p3768-0000+p3767-0005nvidia,p3767-0003"
     "nvidia,p3767-0005nvidia,tegra234nvidia,tegra23x", "p3767-0003", "orin-nano",
     "rbonghi/jetson_stats#400 (JetPack 5.1.1)"),
    ("NVIDIA Jetson Orin Nano Developer Kit", "nvidia,p3768-0000+p3767-0005\0nvidia,p3767-0005\0nvidia,tegra234",
     "p3767-0005", "orin-nano", "torvalds/linux tegra234-p3768-0000+p3767-0005.dts"),
    (None, "nvidia,p3768-0000+p3767-0005-super", "p3767-0005-super", "orin-nano",
     "NVIDIA/jetson-gpio gpio_pin_data.py compats_jetson_orins_nano (Orin Nano Super)"),
    (None, "nvidia,p3509-0000+p3767-0004", "p3767-0004", "orin-nano", "NVIDIA/jetson-gpio compats_jetson_orins_nano"),
    ("NVIDIA Jetson Orin NX Engineering Reference Developer Kit", "nvidia,p3768-0000+p3767-0000\0nvidia,p3767-0000"
     "\0nvidia,tegra234", "p3767-0000", "orin-nx-16gb", "torvalds/linux tegra234-p3768-0000+p3767-0000.dts"),
    (None, "nvidia,p3509-0000+p3767-0001", "p3767-0001", "orin-nx-8gb", "NVIDIA/jetson-gpio compats_jetson_orins_nx"),
    ("NVIDIA Orin NX Developer Kit", None, "p3767-0000", "orin-nx-16gb", "ultralytics/ultralytics#9876"),
    ("NVIDIA Jetson Xavier NX Developer Kit", "nvidia,p3449-0000+p3668-0000nvidia,p3509-0000+p3668-0000nvidia,"
     "tegra194", "p3668-0000", "xavier-nx", "rbonghi/jetson_stats#525 (L4T 35.3.1)"),
    ("NVIDIA Jetson Xavier NX Developer Kit (SD-card)", "nvidia,p3509-0000+p3668-0000\0nvidia,tegra194",
     "p3668-0000", "xavier-nx", "torvalds/linux tegra194-p3509-0000+p3668-0000.dts"),
    (None, "nvidia,p3449-0000+p3668-0003", "p3668-0003", "xavier-nx", "NVIDIA/jetson-gpio compats_nx (16GB)"),
    ("Jetson-AGX", "nvidia,p2972-0000\0nvidia,tegra194", "p2972-0000", "xavier-agx",
     "adafruit/Adafruit_Python_PlatformDetect#37 (L4T 32.2 on); compatible: tegra194-p2972-0000.dts"),
    ("Jetson-AGX", None, "p2888-0004", "xavier-agx", "adafruit/Adafruit_Python_PlatformDetect#37"),
    ("NVIDIA Jetson AGX Xavier Developer Kit", "nvidia,p2972-0000\0nvidia,tegra194", "p2972-0000", "xavier-agx",
     "torvalds/linux tegra194-p2972-0000.dts"),
    (None, "nvidia,jetson-xavier-industrial", "p2888-0008", "xavier-agx", "NVIDIA/jetson-gpio compats_xavier"),
    ("NVIDIA Jetson AGX Thor Developer Kit", "nvidia,p4071-0000+p3834-0008nvidia,p3834-0008nvidia,tegra264",
     "p3834-0008", None, "rbonghi/jetson_stats#711 (L4T 38.2); torvalds/linux tegra264-p4071-0000+p3834-0008.dts"),
]


@pytest.mark.parametrize("model, compatible, part, platform, source", SEEN, ids=[s[4][:40] for s in SEEN])
def test_every_real_module_string_names_its_module_and_profile(model, compatible, part, platform, source):
    m = identify_module(model, compatible)
    assert m.known and m.module.part == part and m.platform == platform, (m, source)
    assert m.by == ("compatible" if compatible else "model")
    if platform is not None:
        p = get_platform(platform)  # a profile that exists, with the module's DLA cores
        assert p.dla_count == m.module.dla_cores or not m.module.exact
    assert m.module.title in m.describe()


def test_every_table_row_has_a_profile_or_says_it_has_none_and_a_source():
    for part, mod in MODULES.items():
        assert part == mod.part and mod.source
        if mod.platform is not None:
            assert get_platform(mod.platform).name == mod.platform
        else:
            assert mod.dla_cores == 0  # Jetson Thor: no DLA, no profile


def test_the_model_string_cannot_tell_orin_nx_8gb_from_16gb_but_tensorrts_dla_count_can():
    m = identify_module("NVIDIA Orin NX Developer Kit", None)
    assert {c.platform for c in m.candidates} == {"orin-nx-16gb", "orin-nx-8gb"}
    assert m.resolve(1).platform == "orin-nx-8gb" and m.resolve(2).platform == "orin-nx-16gb"
    assert m.resolve(None) is m and m.resolve(0) is m  # no SKU of the family has 0: the match stays


@pytest.mark.parametrize("model, compatible", [
    ("NVIDIA Jetson Nano Developer Kit", "nvidia,p3450-0000\0nvidia,tegra210"),  # no DLA; not a placetune target
    ("Raspberry Pi 4 Model B Rev 1.4", "raspberrypi,4-model-b\0brcm,bcm2711"),
    (None, None),
])
def test_an_unknown_module_is_said_so_never_guessed(model, compatible):
    m = identify_module(model, compatible)
    assert not m.known and m.platform is None and m.by == "none"
    assert "unknown module" in m.describe()


def test_read_device_tree_strips_nuls_and_splits_compatible(tmp_path):
    assert read_device_tree(tmp_path / "nowhere") == (None, ())
    (tmp_path / "model").write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\x00")
    (tmp_path / "compatible").write_bytes(b"nvidia,p3737-0000+p3701-0005\x00nvidia,p3701-0005\x00nvidia,tegra234\x00")
    model, comp = read_device_tree(tmp_path)
    assert model == "NVIDIA Jetson AGX Orin Developer Kit"
    assert comp == ("nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234")
    assert identify_module(model, comp).module.part == "p3701-0005"


@pytest.mark.parametrize("emulated, platform", [("p3767-0000", "orin-nx-16gb"), ("p3767-0001", "orin-nx-8gb"),
                                                ("p3767-0003", "orin-nano"), ("p3701-0004", "orin-agx")])
def test_an_agx_orin_kit_flashed_to_emulate_another_module_is_that_module(emulated, platform):
    """NVIDIA's emulation flash configurations (jetson-agx-orin-devkit-as-nx-16gb, ...) name both modules in
    one compatible string, <kit>-as-<emulated>; L4T's nvpower.sh matches it to set up the emulated module's
    nvpmodel file. The board is the emulated module, never the AGX Orin whose part number comes first."""
    m = identify_module("NVIDIA Jetson AGX Orin Developer Kit",
                        f"nvidia,p3737-0000+p3701-0000-as-{emulated}\0nvidia,p3701-0000\0nvidia,tegra234")
    assert m.module.part == emulated and m.platform == platform and m.emulated_on == "p3701-0000"
    assert "emulated on a Jetson AGX Orin developer kit (p3701-0000)" in m.describe()
    assert f"compatible p3701-0000-as-{emulated}" in m.describe()
    assert m.resolve(2).emulated_on == "p3701-0000" or m.resolve(2) is m
    assert identify_module(None, "nvidia,p3737-0000+p3701-0000\0nvidia,tegra234").emulated_on is None
