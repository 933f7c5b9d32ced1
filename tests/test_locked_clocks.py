"""A study records the frequencies jetson_clocks locked the clocks at, and resumes (or lets a fleet worker
join) only under the same lock, within LOCK_TOLERANCE (placetune/hardware/locked_clocks.py).

Against the fake trtexec and a fake sysfs tree (tests/test_clock_watch.py's: the devfreq and cpufreq
files jtop reads, the locked values of a published ``jetson_clocks --show`` of an AGX Orin at MAXN),
never on a board."""

from __future__ import annotations

import logging

import pytest

from placetune import ConfigError, Evaluator, Store
from placetune.backends import clocks, jetson
from placetune.hardware.locked_clocks import LOCK_TOLERANCE, lock_differences, locked_frequencies
from placetune.model.model import Model
from placetune.tuning.fleet import check_environment

from tests.test_clock_watch import CPU_KHZ, GPU_HZ, _cpu, _gpu, _orin
from tests.test_trtexec import GN, _backend

GPU = "gpu:17000000.gpu"


def _open(tmp_path, root, monkeypatch) -> Evaluator:
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(root))
    monkeypatch.setattr(clocks, "NVPMODEL_STATUS", str(tmp_path / "no-status"))
    return Evaluator(GN, "orin-agx", backend=_backend(tmp_path, "8.6.1"), iterations=5, precision="fp16",
                     trt_version="8.6", store=str(tmp_path / "s.db"), study="night")


def test_the_study_records_at_what_its_clocks_are_locked(tmp_path, monkeypatch):
    ev = _open(tmp_path, _orin(tmp_path / "sys"), monkeypatch)
    assert ev.study.fingerprint["locked_clocks"] == {GPU: GPU_HZ, "cpu:policy0": CPU_KHZ, "cpu:policy4": CPU_KHZ,
                                                     "cpu:policy8": CPU_KHZ}
    ev.close()


def test_a_study_resumed_under_another_gpu_lock_is_refused_as_under_another_mode(tmp_path, monkeypatch):
    """The same mode name and clocks locked, but the GPU locked at 50W's cap instead of MAXN's (a
    `jetson_clocks --restore` of a file stored under another mode). Before, only the mode name and
    "locked" were compared: the study resumed and mixed both nights' figures."""
    root = _orin(tmp_path / "sys")
    _open(tmp_path, root, monkeypatch).close()
    _gpu(root, cur=816000000, lo=816000000, hi=816000000)
    with pytest.raises(ConfigError) as e:
        _open(tmp_path, root, monkeypatch)
    msg = str(e.value)
    assert e.value.exit_code == 6 and "\n" not in msg
    assert f"exists with fingerprint.locked_clocks.{GPU}={GPU_HZ}; this run has " \
           f"fingerprint.locked_clocks.{GPU}=816000000" in msg
    assert "locked at other frequencies than the study's, more than 2% apart" in msg and "jetson_clocks" in msg


def test_a_study_resumed_under_another_cpu_lock_is_refused(tmp_path, monkeypatch):
    root = _orin(tmp_path / "sys")
    _open(tmp_path, root, monkeypatch).close()
    _cpu(root, cur=1728000, lo=1728000, hi=1728000)  # every cluster locked at 30W's CPU cap
    with pytest.raises(ConfigError, match=r"fingerprint\.locked_clocks\.cpu:policy0=2201600, .*this run has "
                                          r"fingerprint\.locked_clocks\.cpu:policy0=1728000"):
        _open(tmp_path, root, monkeypatch)


def test_a_lock_read_back_within_the_tolerance_resumes_and_keeps_the_studys_record(tmp_path, monkeypatch):
    root = _orin(tmp_path / "sys")
    _open(tmp_path, root, monkeypatch).close()
    near = int(GPU_HZ * (1 - LOCK_TOLERANCE / 2))
    _gpu(root, cur=near, lo=near, hi=near)
    ev = _open(tmp_path, root, monkeypatch)
    assert ev.study.fingerprint["locked_clocks"][GPU] == GPU_HZ  # the study's record is never rewritten
    assert ev.fingerprint["locked_clocks"][GPU] == near  # this run's reading, as read
    ev.close()


def test_a_study_that_did_not_record_its_lock_resumes_and_says_so(tmp_path, monkeypatch, caplog):
    root = _orin(tmp_path / "sys")
    monkeypatch.setattr(jetson, "locked_frequencies", lambda snap: None)  # as an older placetune recorded it
    _open(tmp_path, root, monkeypatch).close()
    monkeypatch.setattr(jetson, "locked_frequencies", locked_frequencies)
    with caplog.at_level(logging.WARNING):
        _open(tmp_path, root, monkeypatch).close()
    assert any("did not record the frequencies its clocks were locked at" in r.getMessage() for r in caplog.records)


def test_what_counts_as_the_same_lock():
    study = {GPU: GPU_HZ, "cpu:policy0": CPU_KHZ, "emc": 3199000000}
    assert lock_differences(study, {GPU: GPU_HZ, "cpu:policy0": CPU_KHZ}) == []  # EMC unread now (not root)
    assert lock_differences(study, {"cpu:policy0": CPU_KHZ}) == [(GPU, str(GPU_HZ), "not locked")]
    assert lock_differences(study, None) == [("clocks", "locked", "not locked")]
    assert lock_differences(None, None) == []
    assert lock_differences({GPU: 1000}, {GPU: 1020}) == [] and lock_differences({GPU: 1000}, {GPU: 1021}) != []
    # the same bound a locked clock's reading is held to during a night
    assert LOCK_TOLERANCE == clocks.THROTTLE_TOLERANCE


def test_a_fleet_worker_locked_at_other_frequencies_cannot_join(tmp_path):
    store = Store.memory()
    model = Model.load(GN)
    fp = {"power_mode": "MAXN", "clocks_locked": True, "locked_clocks": {GPU: GPU_HZ}}
    store.create_or_open_study("night", model, "orin-agx", "trtexec", "engine", "latency", "fp16", 1, {}, fp, False)
    kw = dict(platform="orin-agx", backend="trtexec", simulated=False, worker="w2")
    check_environment(store, "night", fingerprint=fp, **kw)
    with pytest.raises(ConfigError, match=rf"locked_clocks\.{GPU}: study {GPU_HZ}, this worker 612000000"):
        check_environment(store, "night", fingerprint={**fp, "locked_clocks": {GPU: 612000000}}, **kw)
