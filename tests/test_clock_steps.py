"""A clock step that comes and goes between two of the clock readings around a measurement (the GPU clock
steps and steps back, nvpmodel sets a mode and sets it back): seen where the readings allow (the devfreq
transition counter, the nvpmodel status file's write time), else the measurement's clocks between readings
are recorded as not known, never as steady. Against a fake sysfs tree only."""

from __future__ import annotations

import os
from pathlib import Path

from placetune.backends.clocks import ClockWatch
from placetune.measurement import Measurement

from tests.test_clock_watch import _orin

NODE = "class/devfreq/17000000.gpu"


def _trans_stat(root: Path, total: int) -> None:
    # as Linux's devfreq trans_stat_show prints it (drivers/devfreq/devfreq.c), a two-frequency table
    (root / NODE / "trans_stat").write_text(
        "     From  :   To\n           :1032750000 1300500000   time(ms)\n"
        f"  1032750000:         0         {total // 2}       120\n"
        f"* 1300500000:         {total - total // 2}         0     99880\n"
        f"Total transition : {total}\n")


def _ok() -> Measurement:
    return Measurement(status="ok", latency_samples_ms=[2.0, 2.0])


def test_a_gpu_clock_that_stepped_and_stepped_back_between_two_readings_is_not_kept(tmp_path):
    root = _orin(tmp_path / "sys")
    _trans_stat(root, 4)
    watch = ClockWatch(root)
    assert watch.judge(_ok(), watch.read(), watch.read()).ok  # no step: kept
    before = watch.read()
    _trans_stat(root, 6)  # down to 1032750000 and back up; cur_freq reads the locked frequency again
    m = watch.judge(_ok(), before, watch.read())
    assert not m.ok and m.extra["failure_class"] == "clocks"
    assert "gpu:17000000.gpu changed frequency 2 time(s) between two readings" in m.reason
    # the step is over: the next measurement is judged on its own readings
    assert watch.judge(_ok(), watch.read(), watch.read()).ok


def test_nvpmodel_setting_a_mode_and_setting_it_back_between_two_readings_is_not_kept(tmp_path):
    root, status = _orin(tmp_path / "sys"), tmp_path / "status"
    status.write_text("pmode:0000\n")
    _trans_stat(root, 4)
    watch = ClockWatch(root, status=status)
    assert watch.judge(_ok(), watch.read(), watch.read()).ok
    before = watch.read()
    status.write_text("pmode:0000\n")  # sudo nvpmodel -m 2; sudo nvpmodel -m 0
    t = before["nvpmodel_written"]["ns"] + 1_000_000
    os.utime(status, ns=(t, t))
    m = watch.judge(_ok(), before, watch.read())
    assert not m.ok and "nvpmodel set a power mode between two readings" in m.reason


def test_a_locked_gpu_clock_without_a_transition_counter_is_not_recorded_as_steady(tmp_path):
    root = _orin(tmp_path / "sys")  # no trans_stat: a step and back would not show
    watch = ClockWatch(root)
    m = watch.judge(_ok(), watch.read(), watch.read())
    assert m.ok  # the figures are kept: nothing says the clocks moved
    assert m.extra["clocks"]["between_readings"].startswith("not known: gpu:17000000.gpu has no transition counter")
