"""Another process's work on the GPU when a run starts: said, and the run stopped, never timed beside it.

A night's timings are the engine's alone only when nothing else runs on the accelerators. A DeepStream
pipeline (or another tune, a benchmark) left running keeps the GPU busy; every engine placetune times
then shares the GPU with it, TensorRT says nothing of it, the clocks stay where they were locked, and the
figures and the plan chosen from them are the contended ones, recorded as the board's. So when a real
backend opens a study (:func:`placetune.backends.jetson.device_fingerprint`), before it builds anything,
the GPU's load is read :data:`SAMPLES` times :data:`INTERVAL_S` apart; when every sample is at least
:data:`BUSY_PERCENT` the run stops (:class:`~placetune.errors.BackendError`, exit status 8) with one line
naming the load, unless :data:`SHARED_ENV` is ``1``: a deployment that will itself share the GPU (a camera
pipeline kept running beside the detector) may tune beside that work on purpose; the study's fingerprint then
holds ``gpu_shared: true``, so those timings are kept apart from any made alone (the cache scope's machine
part) and the run warns once.

The file read: ``<sysfs>/class/devfreq/<GPU node>/device/load``, the GPU's load in tenths of a percent,
which jtop reads as the GPU's load (rbonghi/jetson_stats ``jtop/core/gpu.py``: ``igpu_read_status`` reads
``<device>/load`` and divides it by 10; the device is the devfreq node's ``device`` link, ``find_igpu``).
Off a Jetson, or where the file cannot be read, nothing is said and nothing stops (``None``).

Work that starts later in the night (a camera pipeline started at 2 am) is watched between placetune's own
jobs (:class:`ContentionWatch`, called around each job by :meth:`placetune.backends.jetson.JetsonBackend.clocked`):
the GPU is idle between them, so a load read then is another process's. Before each job the load is read
:data:`JOB_SAMPLES` times; when every read is busy the run says so once (a ``GPU BUSY`` warning naming the
load), then waits for the GPU to be idle again, re-reading every :data:`WAIT_POLL_S` seconds up to
:data:`WAIT_S`; when it stays busy the run stops as on a signal (:class:`~placetune.errors.GpuContended`:
what was measured is stored, the plan exported, the resume command printed; exit status 8). Right after each
job (after :data:`INTERVAL_S` for placetune's own load to fall) the load is read again: when it is busy, the
other work most likely ran during the timing, and the measurement is not kept as a figure (:func:`contended`:
``failure_class`` ``gpu_contended``, measured again when asked for, as one under moved clocks); the job is
run once more when the GPU is idle again, and kept when the load after it is idle. With :data:`SHARED_ENV`
``1`` none of this runs.

Not seen: work that starts and ends inside one job (its load is never read between jobs); a process that
uses only a DLA (no DLA load file is readable without
root: the DLA clocks are in debugfs, :mod:`placetune.backends.clocks`). A DeepStream pipeline whose
``nvinfer`` runs on a DLA still pre-processes on the GPU and is seen by its GPU load. The threshold and the
sampling are chosen, not measured on a board. Checked against a fake sysfs tree only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import logging

from placetune.backends import clocks
from placetune.errors import GpuContended
from placetune.measurement import Measurement

__all__ = ["gpu_load", "gpu_busy", "busy_loads", "contended", "ContentionWatch", "BUSY_PERCENT", "SAMPLES",
           "INTERVAL_S", "SHARED_ENV", "JOB_SAMPLES", "WAIT_S", "WAIT_POLL_S"]

log = logging.getLogger(__name__)

#: The load (percent) every sample must reach for the GPU to count as busy with another process's work.
BUSY_PERCENT = 10.0
#: How many times the load is read, and how far apart (seconds): a brief spike (a desktop redraw) is not
#: another process's pipeline.
SAMPLES = 5
INTERVAL_S = 0.2
#: The environment variable that lets a run time its engines beside another process's GPU work (``1``).
SHARED_ENV = "PLACETUNE_SHARED_GPU"
#: How many times the load is read before and after each job (the start check reads :data:`SAMPLES`).
JOB_SAMPLES = 3
#: How long (seconds) a run waits for the GPU to be idle again before it stops, and how often it re-reads.
WAIT_S = 600.0
WAIT_POLL_S = 10.0
#: How long (seconds) after a job its own load may still show before the GPU counts as another process's:
#: the load a Jetson reports is an average over a window (nvgpu's PMU counters since the last read) that
#: can still hold the job's last moments. Not measured on a board: chosen well above the 0.2-0.6 s such a
#: window lags, so that a lagging figure never marks a healthy board's every job as contended (a second
#: or two of reads after a job on a board that is busy; one read on an idle one).
SETTLE_S = 3.0


def _load_reads(root: str | Path | None) -> list[tuple[str, float | None, str]]:
    """Each GPU devfreq node's load read now: (node, percent or None, why it was not read)."""
    base = Path(root if root is not None else clocks.SYSFS_ROOT) / "class/devfreq"
    try:
        nodes = sorted(p for p in base.iterdir() if clocks.GPU_NODE.match(p.name))
    except OSError:
        return []
    reads: list[tuple[str, float | None, str]] = []
    for node in nodes:
        try:
            reads.append((node.name, int((node / "device/load").read_text().strip()) / 10.0, ""))
        except (OSError, ValueError) as exc:
            reads.append((node.name, None, f"{node.name}/device/load: {type(exc).__name__}: {exc}"))
    return reads


def gpu_load(root: str | Path | None = None) -> float | None:
    """The Jetson GPU's load now in percent (the highest of its devfreq nodes'), None when none is read."""
    loads = [load for _, load, _ in _load_reads(root) if load is not None]
    return max(loads) if loads else None


def load_unread(root: str | Path | None = None) -> str | None:
    """Why a board with a GPU devfreq node gives no load (its ``device/load`` missing or unreadable:
    jtop skips such a file unsaid, ``jtop/core/gpu.py`` ``os.access(path + "/load", os.R_OK)``); None
    when a load is read, or when there is no such node (not a Jetson)."""
    reads = _load_reads(root)
    if any(load is not None for _, load, _ in reads):
        return None
    return "; ".join(why for _, _, why in reads) or None


def gpu_busy(root: str | Path | None = None, samples: int = SAMPLES, interval_s: float = INTERVAL_S,
             sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Why the GPU is busy with another process's work (every one of ``samples`` reads of its load at
    least :data:`BUSY_PERCENT`), None when it is not or its load cannot be read. Stops reading at the
    first sample below the threshold (an idle board costs one read)."""
    seen = busy_loads(root, samples, interval_s, sleep)
    if seen is None:
        return None
    return (f"the GPU is busy before placetune built anything: its load read {', '.join(f'{x:g}' for x in seen)} % "
            f"over {interval_s * (len(seen) - 1):g} s (class/devfreq/<gpu>/device/load), so another process (a "
            "DeepStream pipeline, another tune or benchmark) runs on it and every timing would include its work; "
            "stop it (jtop or tegrastats shows the GPU's load) and run again, or, to tune beside work the deployment "
            f"will also run, set {SHARED_ENV}=1 (the study then records gpu_shared and keeps those timings apart)")


def busy_loads(root: str | Path | None = None, samples: int = SAMPLES, interval_s: float = INTERVAL_S,
               sleep: Callable[[float], None] = time.sleep) -> list[float] | None:
    """The loads read (percent) when every one of ``samples`` reads is at least :data:`BUSY_PERCENT`, else
    None (also when the load cannot be read); stops at the first read below it."""
    seen: list[float] = []
    for i in range(max(1, samples)):
        if i:
            sleep(interval_s)
        load = gpu_load(root)
        if load is None or load < BUSY_PERCENT:
            return None
        seen.append(load)
    return seen


def _loads(seen: list[float]) -> str:
    return ", ".join(f"{x:g}" for x in seen)


def contended(m: Measurement, why: str) -> Measurement:
    """``m`` marked as timed beside another process's GPU work: a ``runtime_failed`` measurement
    (``failure_class`` ``gpu_contended``, ``extra["gpu_contended"]``: why) whose reason says what its
    median was, never ranked, exported or kept as a figure; a failed ``m`` keeps its own status."""
    m.extra["gpu_contended"] = why
    return m.not_kept("gpu_contended", "GPU contended", why)


class ContentionWatch:
    """Another process's GPU work between one real backend's jobs (see the module docstring):
    :meth:`run` around each job."""

    def __init__(self, root: str | Path | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.root = root
        self.sleep = sleep
        self.clock = clock
        self.warned = False
        self.unread: str | None = None  # why the load of this Jetson's GPU is not read (said once)
        self.unread_checked = False

    def _busy(self) -> list[float] | None:
        return busy_loads(self.root, JOB_SAMPLES, INTERVAL_S, self.sleep)

    def wait_until_idle(self) -> None:
        """Return once the GPU is idle (at once when it is, or its load cannot be read); say it once when
        it is not, and stop the run (:class:`GpuContended`) when it stays busy :data:`WAIT_S` seconds."""
        seen = self._busy()
        if seen is None:
            return
        if not self.warned:
            self.warned = True
            log.warning("GPU BUSY: the GPU's load read %s %% between placetune's jobs, so another process (a "
                        "DeepStream or camera pipeline, another job) now runs on it; waiting up to %g s for it to "
                        "end before timing anything more: stop it (jtop or tegrastats shows the GPU's load), or "
                        "to tune beside it run again with %s=1", _loads(seen), WAIT_S, SHARED_ENV)
        end = self.clock() + WAIT_S
        while self.clock() < end:
            self.sleep(WAIT_POLL_S)
            again = self._busy()
            if again is None:
                return
            seen = again
        raise GpuContended(
            f"the GPU stayed busy with another process's work for {WAIT_S:g} s between placetune's jobs (its load "
            f"read {_loads(seen)} %), so the run stopped rather than time beside it: stop that process (jtop or "
            f"tegrastats shows the GPU's load) and resume; to tune beside it on purpose, set {SHARED_ENV}=1")

    def after(self) -> str | None:
        """Why the job just run was likely timed beside another process's work (the GPU still busy
        :data:`SETTLE_S` seconds after it, every read; placetune's own load may show for a while after its
        work ends), None when an idle read comes first. Off a Jetson (no load read) it costs nothing."""
        if gpu_load(self.root) is None:
            self._said_unread()
            return None
        end = self.clock() + SETTLE_S
        while True:
            self.sleep(INTERVAL_S)
            seen = self._busy()
            if seen is None:
                return None
            if self.clock() >= end:
                break
        return (f"the GPU's load read {_loads(seen)} % right after this job and stayed busy {SETTLE_S:g} s, so "
                "another process ran on it while it was timed")

    def _said_unread(self) -> None:
        """On a Jetson whose GPU load cannot be read, say once that no other process's GPU work is watched."""
        if self.unread_checked:
            return
        self.unread_checked = True
        self.unread = load_unread(self.root)
        if self.unread:
            log.warning("GPU LOAD NOT WATCHED: this board's GPU load cannot be read (%s), so another process's GPU "
                        "work during a timing goes unseen; each measurement says gpu_load_not_watched", self.unread)

    def run(self, job: Callable[[], Measurement]) -> Measurement:
        """``job()`` run when the GPU is idle; when it was busy right after, the job is run once more when
        idle, and marked :func:`contended` when busy after that one too.

        Raises:
            GpuContended: the GPU stayed busy :data:`WAIT_S` seconds before a job.
        """
        self.wait_until_idle()
        m = job()
        why = self.after()
        if self.unread:  # timed, but nothing watched another process's GPU work meanwhile
            m.extra["gpu_load_not_watched"] = self.unread
        if why is None:
            return m
        log.warning("GPU CONTENDED: %s; this measurement is not kept, the job runs again when the GPU is idle", why)
        self.wait_until_idle()
        m = job()
        why = self.after()
        return m if why is None else contended(m, why)
