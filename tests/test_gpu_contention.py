"""Another process's GPU work that starts in the middle of a night (a camera pipeline started at 2 am):
seen between placetune's own jobs, said once, waited out, and never recorded as a trusted timing; a GPU
that stays busy stops the run as a signal does, with exit status 8. Against a fake sysfs load node and the
TensorRT doubles only."""

from __future__ import annotations

from pathlib import Path

import pytest

from placetune import Evaluator, Placement
from placetune.backends import busy, clocks
from placetune.backends.busy import ContentionWatch
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.errors import GpuContended
from placetune.tuning.remeasure import measured_again
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
GN = DATA / "seed_model_gn.onnx.gz"


def _load_node(tmp_path: Path) -> Path:
    """An idle Jetson GPU's devfreq ``device/load`` (tenths of a percent), in a fake sysfs tree."""
    load = tmp_path / "sys/class/devfreq/17000000.gpu/device/load"
    load.parent.mkdir(parents=True)
    load.write_text("0\n")
    return load


def _busy_after(monkeypatch, load: Path, jobs: int, during: bool = True) -> list[int]:
    """The load node turns busy (45 %) during (or right after) the ``jobs``-th timed job: the count of jobs run."""
    done: list[int] = []
    measure = TensorRTBackend._measure_caught

    def counted(self, *a):
        m = measure(self, *a)
        done.append(1)
        if len(done) == jobs:
            load.write_text("450\n")
        return m

    monkeypatch.setattr(TensorRTBackend, "_measure_caught", counted)
    return done


@pytest.fixture
def fast(monkeypatch):
    monkeypatch.setattr(busy, "INTERVAL_S", 0.0)
    monkeypatch.setattr(busy, "WAIT_POLL_S", 0.0)
    monkeypatch.setattr(busy, "WAIT_S", 0.0)
    monkeypatch.setattr(busy, "SETTLE_S", 0.0)


def _ev(tmp_path: Path) -> tuple[TensorRTBackend, Evaluator]:
    be = TensorRTBackend(worker_env=fake_env("10.3.0"), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2)
    ev = Evaluator(str(GN), "orin-agx", backend=be, store=None, trt_version="10.3", iterations=3, precision="fp16")
    return be, ev


def _one_dla(ev: Evaluator) -> Placement:
    name = next(n for n in ev.model.names if ev.model.layer(n).op_type == "Conv")
    return Placement(ev.model, {name: "DLA0"})


def test_a_job_timed_as_other_work_started_is_not_kept_and_runs_again_once_the_gpu_is_idle(tmp_path, monkeypatch,
                                                                                          fast, caplog):
    load = _load_node(tmp_path)
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "sys"))
    monkeypatch.setattr(busy, "WAIT_S", 60.0)
    monkeypatch.setattr(busy, "WAIT_POLL_S", 5.0)
    jobs = _busy_after(monkeypatch, load, 2)
    be, ev = _ev(tmp_path)

    def pipeline_ends(s: float) -> None:  # the other process's work ends while the run waits for it
        if s == 5.0:
            load.write_text("0\n")

    be.contention = ContentionWatch(sleep=pipeline_ends)
    try:
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
        m = ev.evaluate(_one_dla(ev))
        assert len(jobs) == 3  # the contended job ran again, once the GPU was idle
        assert m.ok and "gpu_contended" not in m.extra, m.reason
    finally:
        ev.close()
        be.close()
    assert sum("GPU CONTENDED" in r.getMessage() for r in caplog.records) == 1
    busy_lines = [r.getMessage() for r in caplog.records if "GPU BUSY" in r.getMessage()]
    assert len(busy_lines) == 1 and "45, 45, 45 %" in busy_lines[0] and "PLACETUNE_SHARED_GPU=1" in busy_lines[0]


def test_a_job_contended_twice_is_marked_and_measured_again_when_asked_again(tmp_path, monkeypatch, fast):
    load = _load_node(tmp_path)
    monkeypatch.setattr(busy, "WAIT_S", 60.0)
    monkeypatch.setattr(busy, "WAIT_POLL_S", 5.0)
    sim = Evaluator("seed-block", "orin-agx", "simulate", store=None)
    ran: list[int] = []

    def job():  # another process's work starts during every timing
        ran.append(1)
        load.write_text("450\n")
        return sim.evaluate(Placement.all_gpu(sim.model))

    def waited(s: float) -> None:  # ... and ends while the run waits for it
        if s == 5.0:
            load.write_text("0\n")

    m = ContentionWatch(root=tmp_path / "sys", sleep=waited).run(job)
    assert len(ran) == 2  # run again once, when idle
    assert not m.ok and m.extra["failure_class"] == "gpu_contended" and measured_again(m)
    assert "45, 45, 45 % right after this job and stayed busy" in m.extra["gpu_contended"] and "are not kept" in (m.reason or "")


def test_a_gpu_that_stays_busy_stops_the_evaluator_as_a_signal_does(tmp_path, monkeypatch, fast):
    load = _load_node(tmp_path)
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "sys"))
    jobs = _busy_after(monkeypatch, load, 99)
    be, ev = _ev(tmp_path)
    try:
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
        load.write_text("450\n")  # a pipeline starts between two jobs and keeps running
        with pytest.raises(GpuContended, match=r"stayed busy with another process's work .* load read 45, 45, 45 %"):
            ev.evaluate(_one_dla(ev))
        assert ev.stop_requested and ev.stop_cause is not None and ev.stop_cause.exit_code == 8
        assert len(jobs) == 1  # nothing more was timed beside it
    finally:
        ev.close()
        be.close()


def test_a_run_that_shares_the_gpu_on_purpose_is_not_watched(tmp_path, monkeypatch, fast):
    load = _load_node(tmp_path)
    load.write_text("450\n")
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "sys"))
    monkeypatch.setenv("PLACETUNE_SHARED_GPU", "1")
    jobs = _busy_after(monkeypatch, load, 99)
    be, ev = _ev(tmp_path)
    try:
        assert ev.evaluate(Placement.all_gpu(ev.model)).ok
        assert ev.evaluate(_one_dla(ev)).ok
        assert len(jobs) == 2
    finally:
        ev.close()
        be.close()


def test_a_night_whose_gpu_another_process_takes_stops_with_8_its_plan_exported_and_resumable(tmp_path, monkeypatch,
                                                                                             fast, capsys):
    from tests.fakes.board import on_a_board, tune_on_the_board

    load = _load_node(tmp_path)
    on_a_board(monkeypatch, tmp_path, tmp_path / "sys")
    jobs = _busy_after(monkeypatch, load, 2)
    rc = tune_on_the_board(tmp_path, "--export", str(tmp_path / "plan.json"))
    out, err = capsys.readouterr()
    assert rc == 8, out + err
    assert len(jobs) == 2  # the contended job was not run again beside the other work
    assert "stopped: the GPU stayed busy" in out and "Resume with: placetune tune" in out, out
    assert (tmp_path / "plan.json").is_file()  # the first job's plan, measured alone


def test_a_load_figure_that_falls_within_the_settle_time_after_a_job_is_the_job_s_own(tmp_path):
    """The load a Jetson reports can lag the work (an average over a window that may still hold the job's
    last moments): a load still busy at the first reads after a job but idle within SETTLE_S is placetune's
    own, not another process's; one busy through the whole settle time is."""
    load = _load_node(tmp_path)
    now = [0.0]
    sleeps: list[float] = []

    def sleep(s: float) -> None:
        sleeps.append(s)
        now[0] += max(s, 0.2)
        if falls_after is not None and len(sleeps) == falls_after:
            load.write_text("0\n")

    watch = ContentionWatch(tmp_path / "sys", sleep=sleep, clock=lambda: now[0])
    for falls_after in (4, None):
        load.write_text("450\n")
        sleeps.clear()
        why = watch.after()
        if falls_after is None:
            assert why is not None and "right after this job" in why and now[0] >= busy.SETTLE_S
        else:
            assert why is None, why
