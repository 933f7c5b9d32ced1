"""placetune doctor: what works here, what does not, and the fix; Jetson probes are robust."""

from __future__ import annotations

import importlib.util

import pytest

from placetune.backends import doctor
from placetune.cli.main import main
from placetune.backends.tensorrt import env as trt_env
from tests.fakes import fake_env


def _by_name(checks):
    return {c.name: c for c in checks}


@pytest.mark.skipif(importlib.util.find_spec("tensorrt") is not None, reason="TensorRT is installed here")
def test_here_tensorrt_is_missing_and_the_fix_is_given():
    checks = doctor.run()
    c = _by_name(checks)
    assert all(hasattr(x, "name") and hasattr(x, "ok") and hasattr(x, "detail") and hasattr(x, "fix") for x in checks)
    assert c["python"].ok
    assert not c["tensorrt"].ok and "No module named 'tensorrt'" in c["tensorrt"].detail
    assert "--system-site-packages" in c["tensorrt"].fix and "/usr/bin/python3" in c["tensorrt"].fix
    assert not c["cuda"].ok and "pip install --no-build-isolation pycuda" in c["cuda"].fix
    assert "pip install cuda-python" in c["cuda"].fix
    assert c["backend simulate"].ok
    assert not c["backend tensorrt"].ok and "tensorrt" in c["backend tensorrt"].detail
    assert c["backend tensorrt"].fix == "see tensorrt and cuda above"
    text = doctor.format(checks)
    assert "[FAIL] tensorrt:" in text and "fix: " in text and "[ok]   backend simulate" in text
    if trt_env.read_l4t() is None:  # not a Jetson: no power mode or clocks to check
        assert not c["jetpack"].ok and "power mode" not in c and "clocks" not in c
        assert doctor.verdict(checks)[0] == 8


def test_on_a_non_jetson_no_fix_is_printed_twice_and_one_line_concludes(capsys):
    """`placetune doctor` here printed the CUDA fix three times and the TensorRT fix twice, exited 0
    and ended on a FAIL line: each fix is printed once, the last line says what works, exit 8."""
    code = main(["doctor"])
    out = capsys.readouterr().out
    lines = out.rstrip("\n").splitlines()
    fixes = [x.strip() for x in lines if x.strip().startswith("fix: ")]
    assert len(fixes) == len(set(fixes)), fixes
    assert not any(x.count("pip install cuda-python") > 1 for x in lines)
    assert code == 8 and lines[-2] == ""
    assert lines[-1].startswith("works here: the simulated Jetson only") and "next: " in lines[-1]
    if trt_env.read_l4t() is None:
        assert "install placetune on a Jetson with JetPack and run placetune doctor there" in lines[-1]
        assert sum(x.startswith("[FAIL]") for x in lines) == 6  # tensorrt, cuda, trtexec, jetpack, 2 backends


def test_verdict_names_what_works_and_the_next_step():
    ok_trt = [doctor.Check("backend simulate", True, "always"), doctor.Check("backend tensorrt", True, "usable"),
              doctor.Check("backend trtexec", False, "unusable: no trtexec", "see trtexec above")]
    code, line = doctor.verdict(ok_trt)
    assert code == 0 and line.startswith("works here: the tensorrt backend and the simulated Jetson")
    assert "next: placetune selftest -o selftest, then placetune tune --backend tensorrt" in line
    gpu_only = [doctor.Check("backend tensorrt", False, "usable for GPU-only placements", "see dla above")]
    code, line = doctor.verdict(gpu_only)
    assert code == 0 and "the tensorrt backend (GPU-only placements: no DLA here)" in line
    on_jetson = [doctor.Check("jetpack", True, "L4T R36.4.0"), doctor.Check("tensorrt", False, "cannot import", "x"),
                 doctor.Check("backend tensorrt", False, "unusable: tensorrt", "see tensorrt above"),
                 doctor.Check("backend trtexec", False, "unusable: no trtexec", "see trtexec above")]
    code, line = doctor.verdict(on_jetson)
    assert code == 8 and "apply the fix of tensorrt above and run placetune doctor again" in line


def test_with_tensorrt_and_pycuda_present():
    c = _by_name(doctor.run(env=fake_env("10.3.0")))
    assert c["tensorrt"].ok and "10.3.0" in c["tensorrt"].detail
    assert c["tensorrt version"].ok and c["dla"].ok and "= 2" in c["dla"].detail
    assert c["cuda"].ok and c["cuda"].detail.startswith("pycuda 2022.2.2-fake on Orin (fake)")
    assert c["backend tensorrt"].ok and c["backend tensorrt"].fix == ""


def test_tensorrt_without_dla():
    c = _by_name(doctor.run(env=fake_env("11.1.0", DLA_CORES="0")))
    assert not c["tensorrt version"].ok and "11.0-11.4.0" in c["tensorrt version"].detail
    assert not c["dla"].ok and "no DLA" in c["dla"].fix
    assert not c["backend tensorrt"].ok and "GPU-only" in c["backend tensorrt"].detail


def test_a_worker_python_that_does_not_exist():
    c = _by_name(doctor.run(worker_python="/nonexistent/python3", timeout_s=10))
    assert not c["python"].ok and "--worker-python" in c["python"].fix
    assert not c["tensorrt"].ok


@pytest.mark.parametrize("version, ok", [("8.5.2.2", True), ("8.6.2", True), ("10.3.0", True), ("10.8.0", False),
                                         ("11.2.0", False), ("11.4.0", False), ("11.4.1", True), ("8.4.1", False)])
def test_version_support(version, ok):
    assert doctor._trt_support(version)[0] is ok


def test_probes_are_robust_when_nothing_is_there(tmp_path):
    assert trt_env.read_l4t(str(tmp_path / "missing")) is None
    assert trt_env.read_module(str(tmp_path / "missing")) is None
    (tmp_path / "model").write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\x00")
    assert trt_env.read_module(str(tmp_path / "model")) == "NVIDIA Jetson AGX Orin Developer Kit"
    # these commands are absent here (or fail without root): None, never an exception
    for probe in (trt_env.read_power_mode, trt_env.read_clocks, trt_env.read_jetpack, trt_env.find_trtexec):
        probe()


def test_nvpmodel_off_path_is_still_read(tmp_path, monkeypatch):
    """cron's and systemd's PATH has no /usr/sbin, where L4T installs nvpmodel: the probe looks
    there too, else the board's power mode would be silently unknown for the whole night."""
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    nv = sbin / "nvpmodel"
    nv.write_text("#!/bin/sh\nprintf 'NV Power Mode: MODE_30W\\n2\\n'\n")
    nv.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(trt_env, "SYSTEM_DIRS", (str(sbin),))
    assert trt_env.read_power_mode() == "MODE_30W"


def test_without_nvpmodel_the_mode_is_named_from_its_status_file_and_the_modules_conf(tmp_path, monkeypatch):
    """In a container without the ``nvpmodel`` program the mode's name is still read: its id from the
    status file nvpmodel writes, its name from the module's nvpmodel file (NVIDIA's Orin NX 8GB file,
    its form lines: tests/data/nvpmodel_conf/provenance.json). A comment that repeats the section
    form, a PARAM section, an id the file lacks or a missing file give no name, never a guess."""
    from pathlib import Path

    from placetune.backends import clocks
    from placetune.hardware.power_modes import modes_of

    data = Path(__file__).parent / "data" / "nvpmodel_status"
    conf = Path(__file__).parent / "data" / "nvpmodel_conf" / "nvpmodel_p3767_0001-modes.conf"
    modes = trt_env.parse_nvpmodel_conf(conf.read_text())
    assert modes == {0: "MAXN", 1: "10W", 2: "15W", 3: "20W"}
    assert modes == {m.id: m.name for m in modes_of("orin-nx-8gb").modes}  # the table transcribed from it
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(trt_env, "SYSTEM_DIRS", ())
    monkeypatch.setattr(trt_env, "NVPMODEL_CONF", str(conf))
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(data / "jetpack4.3-fmode.txt"))  # pmode:0000 fmode:quiet
    assert trt_env.read_power_mode() == "MAXN"
    status = tmp_path / "status"
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(status))
    status.write_text("pmode:0003\n")
    assert trt_env.read_power_mode() == "20W"
    status.write_text("pmode:0007\n")  # no such mode in the file
    assert trt_env.read_power_mode() is None
    status.write_text("pmode:0001\n")
    monkeypatch.setattr(trt_env, "NVPMODEL_CONF", str(tmp_path / "missing.conf"))
    assert trt_env.read_power_mode() is None
    monkeypatch.setattr(trt_env, "NVPMODEL_CONF", str(conf))
    status.unlink()
    assert trt_env.read_power_mode() is None


def test_published_jetson_clocks_outputs_read_right():
    """Real ``jetson_clocks --show`` outputs (tests/data/jetson_clocks/provenance.json): a locked AGX
    Orin on L4T R39.2 whose CPU lines carry no ``Online=`` field, and two boards whose clocks were not
    fixed (Orin on JetPack 5.0, Xavier NX on JetPack 4.5.1)."""
    import json
    from pathlib import Path

    folder = Path(__file__).parent / "data" / "jetson_clocks"
    files = json.loads((folder / "provenance.json").read_text())["files"]
    assert len(files) == 3
    for name, prov in files.items():
        assert trt_env.parse_jetson_clocks((folder / name).read_text()) is prov["locked"], name


def test_a_locked_board_that_throttles_is_read_locked_and_its_slowed_clocks_named():
    """``jetson_clocks`` locks a clock by writing its maximum to its minimum (NVIDIA's script, L4T
    R35/R36: ``cat scaling_max_freq > scaling_min_freq``, ``cat max_freq > min_freq`` of the GPU's
    devfreq node; jetson_stats 4.x reads it as ``max == min``); the current frequency is not part of it.
    The published ``jetson_clocks --show`` of a locked AGX Orin (tests/data/jetson_clocks) with its
    GPU's and one CPU's CurrentFreq lowered, as a thermal or power cap slows a locked board: still
    locked, the slowed clocks named. Before, such a board read as root was taken for unlocked (and a
    tune as root stopped at its first build)."""
    from pathlib import Path

    text = (Path(__file__).parent / "data" / "jetson_clocks" / "orin-agx-r39.2-locked.txt").read_text()
    hot = text.replace("GPU MinFreq=1300500000 MaxFreq=1300500000 CurrentFreq=1300500000",
                       "GPU MinFreq=1300500000 MaxFreq=1300500000 CurrentFreq=918000000").replace(
        "cpu1:  Governor=schedutil MinFreq=2201600 MaxFreq=2201600 CurrentFreq=2201600",
        "cpu1:  Governor=schedutil MinFreq=2201600 MaxFreq=2201600 CurrentFreq=1497600")
    assert hot != text and "CurrentFreq=918000000" in hot
    assert trt_env.parse_jetson_clocks(hot) is True
    # the CPU's CurrentFreq is not judged: Orin's cpufreq may read back a counter estimate off the set one
    assert trt_env.parse_jetson_clocks_throttled(hot) == ["GPU at 918000000 Hz, below its locked 1300500000 Hz"]
    assert trt_env.parse_jetson_clocks_throttled(text) == []
    # a current frequency read back a little off the locked one (within THROTTLE_TOLERANCE) is not throttling
    assert trt_env.parse_jetson_clocks_throttled(text.replace("CurrentFreq=1300500000", "CurrentFreq=1293750000")) == []
    # unlocked clocks below their maximum are DVFS, not throttling: never named as throttled
    unlocked = (Path(__file__).parent / "data" / "jetson_clocks" / "orin-r35-jetson-stats-381-unlocked.txt").read_text()
    assert trt_env.parse_jetson_clocks(unlocked) is False and trt_env.parse_jetson_clocks_throttled(unlocked) == []


def test_a_throttled_locked_board_read_from_sysfs(tmp_path):
    """The same without root: sysfs limits equal (locked), the GPU's devfreq ``cur_freq`` below them."""
    root = _sysfs(tmp_path / "a", 2201600, 1300500000)
    (root / "class/devfreq/17000000.gpu/cur_freq").write_text("612000000\n")
    (root / "devices/system/cpu/cpu0/cpufreq/scaling_cur_freq").write_text("2201600\n")
    assert trt_env.read_clocks_sysfs(root) is True
    assert trt_env.read_throttled_sysfs(root) == ["GPU at 612000000 Hz, below its locked 1300500000 Hz"]
    unlocked = _sysfs(tmp_path / "b", 2201600, 306000000)
    (unlocked / "class/devfreq/17000000.gpu/cur_freq").write_text("306000000\n")
    assert trt_env.read_clocks_sysfs(unlocked) is False and trt_env.read_throttled_sysfs(unlocked) == []


def _sysfs(root, cpu_min, gpu_min, gpu_node="17000000.gpu"):
    """An Orin's cpufreq and GPU devfreq files: 2 CPUs (cpu1 offline) and the GPU, maxima as
    ``jetson_clocks --show`` prints them on an AGX Orin (2201600 kHz, 1300500000 Hz)."""
    for i, online in ((0, None), (1, "0"), (2, "1")):
        d = root / "devices/system/cpu" / f"cpu{i}" / "cpufreq"
        d.mkdir(parents=True)
        (d / "scaling_min_freq").write_text(f"{cpu_min if i != 1 else 115200}\n")
        (d / "scaling_max_freq").write_text("2201600\n")
        if online is not None:
            (d.parent / "online").write_text(online + "\n")
    g = root / "class/devfreq" / gpu_node
    g.mkdir(parents=True)
    (g / "min_freq").write_text(f"{gpu_min}\n")
    (g / "max_freq").write_text("1300500000\n")
    (root / "class/devfreq/15340000.vic").mkdir()  # not the GPU: never read
    return root


def test_locked_clocks_are_read_without_root_from_sysfs(tmp_path, monkeypatch):
    """``jetson_clocks --show`` needs root and a night runs as a user: the same limits are read from
    sysfs, so unlocked clocks stop the first build instead of only being warned about."""
    assert trt_env.read_clocks_sysfs(_sysfs(tmp_path / "a", 2201600, 1300500000)) is True
    assert trt_env.read_clocks_sysfs(_sysfs(tmp_path / "b", 729600, 1300500000)) is False  # CPU DVFS on
    assert trt_env.read_clocks_sysfs(_sysfs(tmp_path / "c", 2201600, 306000000, "17000000.ga10b")) is False
    assert trt_env.read_clocks_sysfs(tmp_path / "none") is None  # not a Jetson: unknown, not unlocked
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(trt_env, "SYSTEM_DIRS", ())
    monkeypatch.setattr(trt_env, "read_clocks_sysfs", lambda root="/sys": False)
    assert trt_env.read_clocks() is False  # no jetson_clocks to ask: sysfs answers


def test_an_unreadable_power_mode_on_a_jetson_is_said(monkeypatch, caplog):
    from placetune.backends.jetson import JetsonBackend, device_fingerprint
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    monkeypatch.setattr(trt_env, "read_l4t", lambda: "R36.4.3")
    monkeypatch.setattr(trt_env, "read_power_mode", lambda: None)
    monkeypatch.setattr(trt_env, "read_clocks", lambda: True)

    class Real(JetsonBackend):
        name = "real"

    with caplog.at_level("WARNING"):
        fp = device_fingerprint(Real(), "10.3.0", get_platform("orin-agx"), Settings(power_mode="MAXN"))
    assert fp["power_mode"] is None
    said = [r.getMessage() for r in caplog.records if "nvpmodel power mode could not be read" in r.getMessage()]
    assert len(said) == 1 and "power_mode MAXN UNCHECKED" in said[0]


def test_parsers():
    assert trt_env.parse_nv_tegra_release(
        "# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref, EABI: aarch64, DATE: Sun Mar 19 15:19:21 UTC 2023"
    ) == "R35.3.1"
    assert trt_env.parse_nv_tegra_release("garbage") is None
    assert trt_env.parse_nvpmodel("NV Power Mode: MAXN\n0\n") == "MAXN"
    assert trt_env.parse_nvpmodel("NV Power Mode: 30W\n2") == "30W"
    assert trt_env.parse_nvpmodel("") is None
    # jetson_clocks --show lines (the form of the published outputs in tests/data/jetson_clocks)
    unlocked = ("cpu0: Online=1 Governor=schedutil MinFreq=729600 MaxFreq=2201600 CurrentFreq=1651200 IdleStates: WFI=1\n"
                "cpu1: Online=0 Governor=schedutil MinFreq=729600 MaxFreq=2201600 CurrentFreq=729600\n"
                "GPU MinFreq=306000000 MaxFreq=1300500000 CurrentFreq=306000000\n"
                "EMC MinFreq=204000000 MaxFreq=3199000000 CurrentFreq=3199000000 FreqOverride=0\n")
    locked = ("cpu0: Online=1 Governor=schedutil MinFreq=2201600 MaxFreq=2201600 CurrentFreq=2201600 IdleStates: WFI=0\n"
              "GPU MinFreq=1300500000 MaxFreq=1300500000 CurrentFreq=1300500000\n")
    assert trt_env.parse_jetson_clocks(unlocked) is False
    assert trt_env.parse_jetson_clocks(locked) is True
    assert trt_env.parse_jetson_clocks("") is None


def test_format_lists_fixes_only_for_failures():
    text = doctor.format([doctor.Check("a", True, "fine", ""), doctor.Check("b", False, "broken", "do x")])
    assert text.splitlines()[:3] == ["[ok]   a: fine", "[FAIL] b: broken", "       fix: do x"]
    assert text.splitlines()[3:4] == [""] and text.splitlines()[4].startswith("works here: ")


def test_a_pycuda_whose_driver_does_not_load_is_not_ok():
    """`import pycuda` loads only the version module; JetPack 5.1's pip-built pycuda fails in
    pycuda.driver (numpy ABI). The probe initialises the driver and says what to install."""
    c = _by_name(doctor.run(env=fake_env("8.5.2", **{"PYCUDA_DRIVER_ERROR": "numpy.core.multiarray failed to import"})))
    assert not c["cuda"].ok and "numpy.core.multiarray failed to import" in c["cuda"].detail
    assert "pip install --no-build-isolation pycuda" in c["cuda"].fix and "pycuda>=2025.1.2" in c["cuda"].fix
    # the system numpy 1.17.4 from apt (PyPI has no aarch64 wheel of it for Python 3.8: pip would compile
    # it) and python3-dev for pycuda's build
    assert "python3-numpy" in c["cuda"].fix and "python3-dev" in c["cuda"].fix and "numpy==" not in c["cuda"].fix
    assert not c["backend tensorrt"].ok and "cuda" in c["backend tensorrt"].detail


@pytest.mark.parametrize("l4t, binding, version, ok", [
    ("R36.4.0", "cuda-python", "13.0.1", False),  # cuda-python 13 on JetPack 6's CUDA 12 driver
    ("R36.4.0", "cuda-python", "12.6.2", True),
    ("R38.2.1", "cuda-python", "12.9.0", False),
    ("R39.2.0", "cuda-python", "13.2.0", True),
    ("R36.3.0", None, None, False),                # nothing initialised: the pin of this JetPack is named
])
def test_the_cuda_python_of_each_jetpack(l4t, binding, version, ok):
    """The `jetson` extra once installed cuda-python 13 everywhere, which needs a CUDA 13 driver
    (580+): JetPack 6 (L4T R36, CUDA 12.x) needs cuda-python 12, JetPack 7 (R38/R39) 13."""
    c = doctor.cuda_python_check(l4t, binding, version)
    assert c is not None and c.ok is ok
    assert c.fix == "" if ok else ("cuda-python>=12,<13" if l4t.startswith("R36") else "cuda-python>=13") in c.fix


def test_no_cuda_python_verdict_off_jetpack_6_and_7_or_with_pycuda():
    assert doctor.cuda_python_check(None, "cuda-python", "13.0.1") is None
    assert doctor.cuda_python_check("R35.4.1", None, None) is None  # JetPack 5: pycuda (README)
    assert doctor.cuda_python_check("R36.4.0", "pycuda", "2024.1") is None


def test_json_report_is_one_object_per_check(capsys):
    """`placetune doctor --json`: every check as {name, ok, detail, fix}, in the order of the text report."""
    import json

    main(["doctor", "--json"])
    rows = json.loads(capsys.readouterr().out)
    assert rows and all(set(r) == {"name", "ok", "detail", "fix"} for r in rows)
    assert [r["name"] for r in rows] == [c.name for c in doctor.run()]


def test_the_doctor_says_whether_the_power_mode_can_be_read_per_measurement(tmp_path, monkeypatch):
    """The clocks watch reads the nvpmodel mode from the file nvpmodel writes; where it cannot, the doctor
    says so before the night (it said nothing: the night's first line was the only word of it)."""
    from pathlib import Path

    from placetune.backends import clocks

    monkeypatch.setattr(trt_env, "read_power_mode", lambda: "MAXN")
    monkeypatch.setattr(trt_env, "read_clocks", lambda: True)
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(Path(__file__).parent / "data/nvpmodel_status/jetpack4.3-fmode.txt"))
    checks = []
    doctor._jetson_checks(checks)
    c = _by_name(checks)["power mode per measurement"]
    assert c.ok and c.detail.startswith("nvpmodel mode 0 (") and "jetpack4.3-fmode.txt" in c.detail
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(tmp_path / "status"))
    checks = []
    doctor._jetson_checks(checks)
    c = _by_name(checks)["power mode per measurement"]
    assert not c.ok and "cannot be read" in c.detail and "sudo nvpmodel -m" in c.fix
