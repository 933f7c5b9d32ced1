"""Power rails: discovery on fake Orin (hwmon) and Xavier (IIO) sysfs trees, the sampler
thread, the module total, and "unknown, not zero" when there are no rails."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from placetune.hardware.power import (
    PowerSampler,
    default_total_rails,
    discover_rails,
    energy_per_inference_mj,
)

SYSFS = Path(__file__).parent / "fakes" / "sysfs"
ORIN_AGX_0040 = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3"
ORIN_NX_0040 = "sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon1"
XAVIER_AGX_0040 = "sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0"


def _tree(tmp_path: Path, name: str) -> Path:
    dst = tmp_path / name
    shutil.copytree(SYSFS / name, dst)
    return dst


def test_orin_agx_hwmon_rails_are_discovered_with_nc_and_shunt_sum_left_out():
    rails = discover_rails(SYSFS / "orin-agx")
    assert [r.name for r in rails] == ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"]
    assert {r.kind for r in rails} == {"hwmon"}
    gpu = rails[0]
    assert (gpu.device, gpu.channel) == ("1-0040", 1) and gpu.power_path is None
    assert gpu.read_w() == pytest.approx(19.120 * 0.312)  # in1_input mV x curr1_input mA
    assert rails[3].device == "1-0041" and rails[3].channel == 2


# The module's power per module, from the Jetson Linux Developer Guide's rail tables (sources per
# module at SUB_RAILS in placetune/hardware/power.py and in docs/power-modes.md, "Energy").
MODULE_TOTALS = {
    # AGX Orin: no input rail; VDDQ_VDD2_1V8AO is fed from VIN_SYS_5V0, so it is already inside it
    "orin-agx": ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"],
    "orin-nx": ["VDD_IN"],       # VDD_CPU_GPU_CV and VDD_SOC are inside VDD_IN
    "orin-nano": ["VDD_IN"],     # the same INA3221 at 0x40 as Orin NX
    "xavier-agx": ["GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"],  # six supplies in parallel off VIN
    "xavier-nx": ["VDD_IN"],
}


def _module_tree(tmp_path: Path, module: str) -> Path:
    if module == "orin-nano":  # the Developer Guide gives Orin Nano the table of Orin NX
        dst = tmp_path / module
        shutil.copytree(SYSFS / "orin-nx", dst)
        return dst
    return SYSFS / module


@pytest.mark.parametrize("module", sorted(MODULE_TOTALS))
def test_the_module_power_sums_each_current_once(module, tmp_path):
    root = _module_tree(tmp_path, module)
    rails = discover_rails(root)
    watts = {r.name: r.read_w() for r in rails}
    assert default_total_rails(list(watts)) == MODULE_TOTALS[module]
    with PowerSampler(root=root, interval_s=0.005) as ps:
        time.sleep(0.02)
    r = ps.reading()
    assert r.total_rails == MODULE_TOTALS[module]
    assert r.mean_w == pytest.approx(sum(watts[n] for n in MODULE_TOTALS[module]))


def test_agx_orin_ddr_rail_is_not_added_on_top_of_the_5v_rail_it_is_part_of():
    rails = discover_rails(SYSFS / "orin-agx")
    with PowerSampler(root=SYSFS / "orin-agx", interval_s=0.005) as ps:
        time.sleep(0.02)
    r = ps.reading()
    every_rail = sum(x.read_w() for x in rails)
    ddr = next(x for x in rails if x.name == "VDDQ_VDD2_1V8AO").read_w()
    assert r.mean_w == pytest.approx(every_rail - ddr)
    assert r.rails_mean_w["VDDQ_VDD2_1V8AO"] == pytest.approx(ddr)  # still sampled and reported per rail


def test_orin_nx_total_is_vdd_in():
    rails = discover_rails(SYSFS / "orin-nx")
    names = [r.name for r in rails]
    assert names == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    assert default_total_rails(names) == ["VDD_IN"]
    with PowerSampler(root=SYSFS / "orin-nx", interval_s=0.005) as ps:
        time.sleep(0.03)
    r = ps.reading()
    assert r.mean_w == pytest.approx(5.016 * 1.436) and r.total_rails == ["VDD_IN"]
    assert r.samples >= 2 and set(r.rails_mean_w) == set(names)


def test_xavier_agx_iio_rails_use_in_power():
    rails = discover_rails(SYSFS / "xavier-agx")
    assert [r.name for r in rails] == ["GPU", "CPU", "SOC", "CV", "VDDRQ", "SYS5V"]
    assert {r.kind for r in rails} == {"iio"}
    assert rails[0].power_path.endswith("in_power0_input") and rails[0].channel == 0
    assert rails[0].read_w() == pytest.approx(2.155)  # in_power0_input is mW
    with PowerSampler(root=SYSFS / "xavier-agx", interval_s=0.005) as ps:
        time.sleep(0.02)
    assert ps.reading().mean_w == pytest.approx(sum(r.read_w() for r in rails))


def test_xavier_nx_total_is_vdd_in():
    rails = discover_rails(SYSFS / "xavier-nx")
    assert [r.name for r in rails] == ["VDD_IN", "VDD_CPU_GPU_CV", "VDD_SOC"]
    with PowerSampler(root=SYSFS / "xavier-nx", interval_s=0.005) as ps:
        time.sleep(0.02)
    assert ps.reading().mean_w == pytest.approx(4.402)


def test_iio_without_power_file_computes_volts_times_amps(tmp_path):
    root = _tree(tmp_path, "xavier-nx")
    (root / "sys/bus/i2c/drivers/ina3221x/7-0040/iio:device0/in_power0_input").unlink()
    r = discover_rails(root)[0]
    assert r.power_path is None and r.read_w() == pytest.approx(5.048 * 0.872)


@pytest.mark.parametrize("where", ["empty", "no-rails"])
def test_absent_rails_give_unknown_power_not_zero(where, tmp_path):
    root = tmp_path if where == "empty" else SYSFS / "no-rails"
    assert discover_rails(root) == []
    with PowerSampler(root=root, interval_s=0.005) as ps:
        time.sleep(0.01)
    assert not ps.available and ps.samples == []
    r = ps.reading()
    assert r.mean_w is None and "no INA3221 power rails" in r.reason
    assert energy_per_inference_mj(r.mean_w, qps=100.0) is None


def test_an_unreadable_rail_is_left_out_and_a_missing_total_rail_makes_power_unknown(tmp_path):
    root = _tree(tmp_path, "orin-nx")
    (root / ORIN_NX_0040 / "curr1_input").unlink()  # VDD_IN cannot be read
    assert [r.name for r in discover_rails(root)] == ["VDD_CPU_GPU_CV", "VDD_SOC"]
    # VDD_CPU_GPU_CV and VDD_SOC are inside VDD_IN: their sum leaves the memory, IO and regulators
    # out, so the module's power is unknown (not that sum) and the reason names VDD_IN and why
    with PowerSampler(root=root, interval_s=0.005) as ps:
        time.sleep(0.01)
    r = ps.reading()
    assert not ps.available and r.mean_w is None and r.total_rails == ["VDD_IN"]
    assert "VDD_IN" in r.reason and "curr1_input" in r.reason and "cannot be read" in r.reason
    assert energy_per_inference_mj(r.mean_w, qps=100.0) is None
    with PowerSampler(root=root, interval_s=0.005, total_rails=["VDD_IN"]) as ps:
        time.sleep(0.01)
    r = ps.reading()
    assert not ps.available and r.mean_w is None and "VDD_IN" in r.reason


def test_the_input_rail_is_required_where_rails_inside_it_are_found():
    assert default_total_rails(["VDD_CPU_GPU_CV", "VDD_SOC"]) == ["VDD_IN"]
    assert default_total_rails(["POM_5V_GPU", "POM_5V_CPU"]) == ["POM_5V_IN"]
    # AGX Orin: VDDQ_VDD2_1V8AO is inside VIN_SYS_5V0, which the total then needs
    assert default_total_rails(["VDD_GPU_SOC", "VDD_CPU_CV", "VDDQ_VDD2_1V8AO"]) == \
        ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]
    assert default_total_rails(["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]) == \
        ["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0"]  # JetPack releases that list only the 0x40 rails


@pytest.mark.parametrize("case", ["orin-nx-absent", "orin-nx-garbage", "xavier-nx-unreadable", "orin-agx-5v"])
def test_a_total_rail_absent_or_unreadable_makes_the_module_power_unknown(case, tmp_path):
    module = case.rsplit("-", 1)[0] if case != "orin-agx-5v" else "orin-agx"
    root = _tree(tmp_path, module)
    if case == "orin-nx-absent":  # no VDD_IN channel at all, where the module's table has one
        (root / ORIN_NX_0040 / "in1_label").unlink()
        rail, why = "VDD_IN", "not found"
    elif case == "orin-nx-garbage":  # the node is there but does not read as a number
        (root / ORIN_NX_0040 / "curr1_input").write_text("busy\n")
        rail, why = "VDD_IN", "curr1_input"
    elif case == "xavier-nx-unreadable":
        base = root / "sys/bus/i2c/drivers/ina3221x/7-0040/iio:device0"
        for f in ("in_power0_input", "in_current0_input"):
            (base / f).unlink()
        rail, why = "VDD_IN", "cannot be read"
    else:
        (root / ORIN_AGX_0040 / "curr3_input").write_text("")
        rail, why = "VIN_SYS_5V0", "cannot be read"
    with PowerSampler(root=root, interval_s=0.005) as ps:
        time.sleep(0.01)
    r = ps.reading()
    assert r.mean_w is None and rail in r.total_rails
    assert rail in r.reason and why in r.reason


def test_total_rails_can_be_chosen():
    with PowerSampler(root=SYSFS / "orin-agx", interval_s=0.005, total_rails=["VDD_GPU_SOC", "VDD_CPU_CV"]) as ps:
        time.sleep(0.01)
    assert ps.reading().mean_w == pytest.approx(19.120 * (0.312 + 0.098))


def test_the_sampler_thread_follows_changes_and_windows_select_samples(tmp_path):
    root = _tree(tmp_path, "orin-agx")
    curr = root / ORIN_AGX_0040 / "curr1_input"
    with PowerSampler(root=root, interval_s=0.005) as ps:
        time.sleep(0.05)
        t_change = time.monotonic()
        curr.write_text("1312\n")  # the GPU rail draws 1 A more
        time.sleep(0.06)
        t_end = time.monotonic()
    before = ps.reading(end=t_change - 0.01)
    after = ps.reading(start=t_change + 0.01, end=t_end)
    assert after.mean_w - before.mean_w == pytest.approx(19.120 * 1.0, rel=1e-6)
    assert before.samples >= 3 and after.samples >= 3
    whole = ps.reading()
    assert before.mean_w < whole.mean_w < after.mean_w
    # a window shorter than the interval takes its neighbours instead of giving nothing
    tiny = ps.reading(start=t_change + 0.030, end=t_change + 0.0301)
    assert tiny.mean_w == pytest.approx(after.mean_w) and tiny.samples >= 1


def test_sysfs_root_from_the_environment(monkeypatch):
    monkeypatch.setenv("PLACETUNE_SYSFS_ROOT", str(SYSFS / "xavier-nx"))
    assert PowerSampler().rails[0].name == "VDD_IN"


def test_energy_per_inference():
    assert energy_per_inference_mj(10.0, qps=500.0) == pytest.approx(20.0)  # 10 W for 2 ms
    assert energy_per_inference_mj(10.0, ms_per_inference=4.0) == pytest.approx(40.0)
    assert energy_per_inference_mj(10.0, qps=0.0) is None and energy_per_inference_mj(None, qps=5.0) is None
    with pytest.raises(ValueError):
        PowerSampler(root=SYSFS / "orin-nx", interval_s=0)
