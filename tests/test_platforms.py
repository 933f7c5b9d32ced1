"""Jetson platform profiles."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

import placetune
from placetune.errors import PlacetuneError, UnknownNameError
from placetune.hardware.platforms import ALIASES, PLATFORMS, Platform, get_platform, platform_names

EXPECTED_DLA = {
    "orin-agx": 2,
    "orin-nx-16gb": 2,
    "orin-nx-8gb": 1,
    "orin-nano": 0,
    "orin-nano-super": 0,
    "xavier-agx": 2,
    "xavier-nx": 2,
}
ORIN_WITH_DLA = ["orin-agx", "orin-nx-16gb", "orin-nx-8gb"]


def test_names():
    assert platform_names() == list(EXPECTED_DLA)
    assert all(isinstance(get_platform(n), Platform) for n in platform_names())


@pytest.mark.parametrize("name,count", EXPECTED_DLA.items())
def test_dla_counts_and_devices(name, count):
    p = get_platform(name)
    assert p.name == name
    assert p.dla_count == count
    assert p.devices == ("GPU",) + tuple(f"DLA{i}" for i in range(count))
    assert p.has_device("GPU") and p.has_device("gpu")
    assert p.has_device("DLA0") is (count >= 1)
    assert p.has_device("dla1") is (count >= 2)
    assert not p.has_device("DLA2")
    assert p.has_dla is (count > 0)


def test_devices_examples():
    assert get_platform("orin-agx").devices == ("GPU", "DLA0", "DLA1")
    assert get_platform("orin-nx-8gb").devices == ("GPU", "DLA0")
    assert get_platform("orin-nano").devices == ("GPU",)


@pytest.mark.parametrize("alias,name", [
    ("agx-orin", "orin-agx"), ("orin", "orin-agx"), ("AGX Orin", "orin-agx"), ("jetson_agx_orin", "orin-agx"),
    ("ORIN-AGX", "orin-agx"), ("xavier", "xavier-agx"), ("agx-xavier", "xavier-agx"), ("orin-nx", "orin-nx-16gb"),
    ("orin-nano-8gb", "orin-nano"), ("jetson-xavier-nx", "xavier-nx"),
])
def test_aliases(alias, name):
    assert get_platform(alias).name == name


def test_aliases_point_to_profiles():
    assert set(ALIASES.values()) <= set(PLATFORMS)


def test_platform_passes_through():
    p = get_platform("orin-agx")
    assert get_platform(p) is p


def test_unknown_platform_error():
    with pytest.raises(UnknownNameError) as err:
        get_platform("tx2")
    msg = str(err.value)
    for name in EXPECTED_DLA:
        assert name in msg
    assert isinstance(err.value, PlacetuneError)
    assert err.value.exit_code == 4


def test_close_match_hint():
    with pytest.raises(UnknownNameError, match="did you mean"):
        get_platform("orin-agxx")


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_platform("orin-agx").dla_count = 3  # type: ignore[misc]


def test_dla_versions():
    assert {get_platform(n).dla_version for n in ORIN_WITH_DLA} == {2}
    assert get_platform("xavier-agx").dla_version == get_platform("xavier-nx").dla_version == 1
    assert get_platform("orin-nano").dla_version is None


def test_reference_figures():
    agx = get_platform("orin-agx")
    assert agx.gpu_int8_tops == pytest.approx(171 / 2)  # dense = sparse / 2
    assert agx.dla_int8_tops == pytest.approx(105 / 4)  # 105 sparse for both DLAs
    assert agx.dram_gbps == pytest.approx(204.8)
    assert agx.dla_sram_mib == 1.0
    xav = get_platform("xavier-agx")
    assert (xav.dla_fp16_tflops, xav.dla_int8_tops) == (2.5, 5.0)
    assert xav.dram_gbps == pytest.approx(136.5)
    assert get_platform("orin-nx-16gb").dla_int8_tops == pytest.approx(10.0)
    assert get_platform("xavier-nx").dram_gbps == pytest.approx(59.7)


def test_orin_dla_fp16_peak_is_half_of_xaviers():
    """NVIDIA: FP16 convolutions on the Orin DLA take up to 2x Xavier's latency (read at each module's
    top DLA clock): AGX Orin's per-core FP16 peak is half AGX Xavier's, and every Orin DLA keeps that
    FP16 / INT8 ratio (the same core at its own clock)."""
    xav, agx = get_platform("xavier-agx"), get_platform("orin-agx")
    assert agx.dla_fp16_tflops == pytest.approx(xav.dla_fp16_tflops / 2)
    for name in ORIN_WITH_DLA:
        p = get_platform(name)
        assert p.dla_fp16_tflops / p.dla_int8_tops == pytest.approx(agx.dla_fp16_tflops / agx.dla_int8_tops)


def test_sanity_relations():
    xav = get_platform("xavier-agx")
    agx = get_platform("orin-agx")
    # Orin's DLA has several times Xavier's INT8 ...
    assert agx.dla_int8_tops >= 4 * xav.dla_int8_tops
    # ... but weaker FP16 convolution compute (DLA-SW FAQ), on every Orin with DLA
    for name in ORIN_WITH_DLA:
        assert xav.dla_fp16_tflops > get_platform(name).dla_fp16_tflops
        p = get_platform(name)
        assert p.dla_fp16_tflops < p.dla_int8_tops / 4
    # Orin generation over Xavier, AGX over NX over Nano
    assert agx.gpu_int8_tops > get_platform("orin-nx-16gb").gpu_int8_tops > get_platform("orin-nano").gpu_int8_tops
    assert xav.gpu_int8_tops > get_platform("xavier-nx").gpu_int8_tops
    for p in PLATFORMS.values():
        assert p.gpu_int8_tops > p.gpu_fp16_tflops > 0
        assert p.gpu_int8_tops > p.dla_int8_tops
        assert p.dram_gbps > 0 and p.gpu_sm_count > 0 and p.idle_w > 0 and p.gpu_active_w > 0
        assert p.power_modes and p.jetpack_trt and p.source
        if p.has_dla:
            assert p.dla_int8_tops > p.dla_fp16_tflops > 0 and p.dla_active_w > 0 and p.dla_sram_mib > 0
            # DLA is the power-efficient engine (DLA-SW README: 3x-5x)
            assert p.dla_int8_tops / p.dla_active_w > p.gpu_int8_tops / p.gpu_active_w


def test_orin_nano_super():
    """ref §1: 67 sparse INT8 TOPS and 102 GB/s in the Super modes; no DLA; its modes from
    nvpmodel_p3767_0003_super.conf."""
    sup = get_platform("nano-super")
    assert sup.name == "orin-nano-super" and sup.devices == ("GPU",)
    assert sup.gpu_int8_tops == pytest.approx(67 / 2) and sup.dram_gbps == pytest.approx(102.4)
    assert sup.power_modes == ("MAXN_SUPER", "25W", "15W") and sup.has_power_mode("MAXN")
    assert sup.gpu_int8_tops > get_platform("orin-nano").gpu_int8_tops


def test_orin_nano_has_no_dla():
    nano = get_platform("orin-nano")
    assert nano.dla_count == 0 and not nano.has_dla
    assert nano.dla_int8_tops == nano.dla_fp16_tflops == nano.dla_active_w == 0


def test_peak_tops():
    agx = get_platform("orin-agx")
    assert agx.peak_tops("DLA1", "int8") == agx.dla_int8_tops
    assert agx.peak_tops("gpu", "fp16") == agx.gpu_fp16_tflops
    with pytest.raises(UnknownNameError):
        get_platform("orin-nano").peak_tops("DLA0", "int8")
    with pytest.raises(UnknownNameError):
        agx.peak_tops("GPU", "fp32")


def test_trt_versions():
    assert get_platform("orin-agx").jetpack_trt == ("8.5", "8.6", "10.3", "11.4")
    assert get_platform("orin-agx").ships_trt("10.3.0.30")
    assert get_platform("xavier-agx").ships_trt("8.5.2")
    assert not get_platform("xavier-agx").ships_trt("10.3")


def test_packaged_reference_copy():
    pkg = Path(placetune.__file__).parent / "data" / "jetson-measurements.md"
    text = pkg.read_text(encoding="utf-8")
    assert "## 1. Hardware peaks" in text
    shared = Path(__file__).resolve().parents[2] / "shared" / "reference" / "jetson-measurements.md"
    if shared.exists():
        assert text == shared.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", ["jetson-nano", "nano", "Jetson Nano"])
def test_the_original_jetson_nano_is_refused_not_taken_for_the_orin_nano(name):
    with pytest.raises(UnknownNameError) as err:
        get_platform(name)
    msg = str(err.value)
    assert "original Jetson Nano" in msg and "no DLA" in msg and "TensorRT 8.5+" in msg and "orin-nano" in msg


def test_which_tensorrt_each_modules_jetpacks_ship():
    """The reference's JetPack table (tensorrt-dla.md §3.4): Orin 8.5, 8.6, 10.3 (and 11.4.1 on AGX Orin,
    JetPack 7.2.2+); Xavier 8.5 only."""
    agx, nx, xavier = get_platform("orin-agx"), get_platform("orin-nx-16gb"), get_platform("xavier-agx")
    assert agx.ships_trt("11.4.1") and not nx.ships_trt("11.4.1") and agx.default_trt_version == "8.6"
    assert agx.ships_trt_major("10.7.0") and not xavier.ships_trt_major("10.3.0") and xavier.ships_trt_major("8.6")


def test_a_simulated_study_of_a_tensorrt_the_module_never_shipped_says_so_in_one_line(caplog):
    """Before, ``--trt-version 10.3`` on Xavier (whose last JetPack, 5.1, ships 8.5) was taken silently."""
    import logging

    from placetune import Evaluator

    with caplog.at_level(logging.WARNING):
        Evaluator("seed-block", "xavier-agx", trt_version="10.3").close()
        Evaluator("seed-block", "xavier-agx", trt_version="8.5").close()
    said = [r.getMessage() for r in caplog.records if "no JetPack for" in r.getMessage()]
    assert said == ["trt_version 10.3: no JetPack for xavier-agx ships TensorRT 10.3 (its JetPacks: 8.5); the "
                    "simulated Jetson applies that version's DLA rules anyway"]
