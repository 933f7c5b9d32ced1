"""Whether the board runs the nvpmodel mode it reports, beyond the GPU cap: the CPU cores online and each
CPU cluster's max frequency against the board's nvpmodel configuration (placetune/backends/mode_applied.py).

The configuration is NVIDIA's real AGX Orin file (tests/data/nvpmodel_conf, provenance.json); the sysfs
tree is a fake one, with the files and units of the Linux CPU and cpufreq interfaces the file's PARAM
sections name. Never run on a board."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from placetune.backends import clocks
from placetune.backends.jetson import JetsonBackend, device_fingerprint
from placetune.backends.mode_applied import (NOT_CHECKED, cpu_not_applied, format_cpu_list, parse_cpu_list,
                                              parse_nvpmodel_caps)
from placetune.backends.tensorrt import env as trt_env
from placetune.hardware.platforms import get_platform
from placetune.settings import Settings

DATA = Path(__file__).resolve().parent / "data" / "nvpmodel_conf"
AGX = DATA / "nvpmodel_p3701_0000-params-and-modes.conf"
TOP_KHZ = 2201600  # AGX Orin's CPU maximum (jetson_clocks --show at MAXN, tests/data/jetson_clocks)
#: GPU frequencies: the caps of NVIDIA's AGX Orin file and the top jetson_clocks --show gives at MAXN
#: (not the real table, which has more entries: only its top matters here)
GPU_TABLE = (408000000, 612000000, 816000000, 1300500000)


def _write(path: Path, value: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{value}\n")


def _board(root: Path, online: str, max_khz: dict[int, int], gpu_hz: int) -> Path:
    """A fake AGX Orin /sys: ``online`` cores, each cluster's first core's cpufreq (its ``scaling_max_freq``
    from ``max_khz``; an offline cluster has no cpufreq folder, as on Linux) and the GPU's devfreq."""
    _write(root / "devices/system/cpu/online", online)
    for cpu, khz in max_khz.items():
        d = root / f"devices/system/cpu/cpu{cpu}/cpufreq"
        _write(d / "scaling_max_freq", khz)
        _write(d / "cpuinfo_max_freq", TOP_KHZ)
    for name in ("cur_freq", "min_freq", "max_freq"):
        _write(root / "class/devfreq/17000000.gpu" / name, gpu_hz)
    _write(root / "class/devfreq/17000000.gpu/available_frequencies", " ".join(str(f) for f in GPU_TABLE))
    return root


def test_nvidias_file_gives_each_modes_cores_and_cluster_caps():
    conf = parse_nvpmodel_caps(AGX.read_text())
    assert [m.name for m in conf.modes.values()] == ["MAXN", "MODE_15W", "MODE_30W", "MODE_50W"]
    m30 = conf.mode("30W")
    assert m30 is conf.mode("MODE_30W") and m30.id == 2
    assert sorted(c for c, on in m30.online.items() if on) == list(range(8))
    assert sorted(c for c, on in m30.online.items() if not on) == [8, 9, 10, 11]
    assert m30.settings[("CPU_A78_0", "MAX_FREQ")] == "1728000" and ("CPU_A78_2", "MAX_FREQ") not in m30.settings
    assert [conf.core(f"CPU_A78_{i}", "MAX_FREQ") for i in range(3)] == [0, 4, 8]
    assert conf.mode("MAXN").settings[("CPU_A78_2", "MAX_FREQ")] == "-1"
    # the mode names are those the existing reader gives
    assert {i: m.name for i, m in conf.modes.items()} == trt_env.parse_nvpmodel_conf(AGX.read_text())


def test_cpu_lists_read_and_written_as_the_kernel_writes_them():
    assert parse_cpu_list("0-11\n") == set(range(12)) and parse_cpu_list("0-3,8") == {0, 1, 2, 3, 8}
    assert parse_cpu_list("") is None and parse_cpu_list("0-a") is None
    assert format_cpu_list({0, 1, 2, 3, 8}) == "0-3,8" and format_cpu_list(set(range(8))) == "0-7"


def test_a_board_in_its_reported_mode_shows_no_difference(tmp_path):
    conf = parse_nvpmodel_caps(AGX.read_text())
    root = _board(tmp_path / "sys", "0-7", {0: 1728000, 4: 1728000}, 612000000)
    assert cpu_not_applied(conf, "MODE_30W", root) == []
    root = _board(tmp_path / "maxn", "0-11", {0: TOP_KHZ, 4: TOP_KHZ, 8: TOP_KHZ}, 1300500000)
    assert cpu_not_applied(conf, "MAXN", root) == []
    # the cut Orin NX file has no CPU lines: nothing to judge, nothing said
    nx = parse_nvpmodel_caps((DATA / "nvpmodel_p3767_0001-modes.conf").read_text())
    assert cpu_not_applied(nx, "15W", root) == []


@pytest.fixture
def said(tmp_path, monkeypatch, caplog):
    """The POWER MODE NOT APPLIED lines of a study's fingerprint on a fake board (``root``) that reports
    ``reported`` (nvpmodel -q), with NVIDIA's AGX Orin file as its /etc/nvpmodel.conf."""
    monkeypatch.setattr(trt_env, "NVPMODEL_CONF", str(AGX))
    monkeypatch.setattr(trt_env, "read_l4t", lambda: "R36.4.3")
    monkeypatch.setattr(trt_env, "read_clocks", lambda: False)

    class Real(JetsonBackend):
        name = "real"

    def run(root: Path, reported: str, study: str) -> list[str]:
        monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
        monkeypatch.setattr(trt_env, "read_power_mode", lambda: reported)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            device_fingerprint(Real(), "10.3.0", get_platform("orin-agx"), Settings(power_mode=study))
        assert any(NOT_CHECKED in r.getMessage() for r in caplog.records)  # EMC and DLA: said, not guessed
        return [r.getMessage().split(": the board does not seem")[0] for r in caplog.records
                if r.getMessage().startswith("POWER MODE NOT APPLIED")]
    return run


def test_a_board_reporting_30w_that_runs_maxns_cpu_is_said_line_by_line(tmp_path, said):
    """The status file says 30W and the GPU runs 30W's cap, but every core is online and no CPU cluster
    is capped (the CPU part of the mode was not applied). Before, only the GPU cap was compared: not a
    word. Each difference is one line naming it; CPU_A78_2 has no MAX_FREQ line in 30W (its cores are
    offline in that mode), so it is not judged."""
    root = _board(tmp_path / "sys", "0-11", {0: TOP_KHZ, 4: TOP_KHZ, 8: TOP_KHZ}, 612000000)
    assert said(root, "MODE_30W", "30W") == [
        "POWER MODE NOT APPLIED: CPU cores online 0-11, but MODE_30W sets 0-7 online (CPU_ONLINE lines of "
        "nvpmodel.conf)",
        "POWER MODE NOT APPLIED: CPU cluster CPU_A78_0 (cpu0) scaling_max_freq is 2201600 kHz, but MODE_30W caps it "
        "at 1728000 kHz (MAX_FREQ in nvpmodel.conf)",
        "POWER MODE NOT APPLIED: CPU cluster CPU_A78_1 (cpu4) scaling_max_freq is 2201600 kHz, but MODE_30W caps it "
        "at 1728000 kHz (MAX_FREQ in nvpmodel.conf)",
    ]
    assert said(_board(tmp_path / "ok", "0-7", {0: 1728000, 4: 1728000}, 612000000), "MODE_30W", "30W") == []


def test_a_board_reporting_maxn_still_in_15w_is_said_with_the_gpu(tmp_path, said):
    """MAXN has no caps: an uncapped cluster is compared with its hardware maximum (cpuinfo_max_freq).
    A board left in 15W's CPU and GPU caps while reporting MAXN: the cores, the first cluster and the
    GPU each named (the GPU line as before); the offline clusters have no cpufreq files to read."""
    root = _board(tmp_path / "sys", "0-3", {0: 1113600}, 408000000)
    assert said(root, "MAXN", "MAXN") == [
        "POWER MODE NOT APPLIED: GPU 17000000.gpu devfreq max_freq is 408000000 Hz, but MAXN leaves it uncapped "
        "(the top of its available_frequencies: 1300500000 Hz)",
        "POWER MODE NOT APPLIED: CPU cores online 0-3, but MAXN sets 0-11 online (CPU_ONLINE lines of nvpmodel.conf)",
        "POWER MODE NOT APPLIED: CPU cluster CPU_A78_0 (cpu0) scaling_max_freq is 1113600 kHz, but MAXN leaves it "
        "uncapped (its cpuinfo_max_freq: 2201600 kHz)",
    ]
