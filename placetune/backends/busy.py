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

Not seen: work that starts later in the night (the load is read once, before the first build: during the
night the load is placetune's own); a process that uses only a DLA (no DLA load file is readable without
root: the DLA clocks are in debugfs, :mod:`placetune.backends.clocks`). A DeepStream pipeline whose
``nvinfer`` runs on a DLA still pre-processes on the GPU and is seen by its GPU load. The threshold and the
sampling are chosen, not measured on a board. Checked against a fake sysfs tree only.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from placetune.backends import clocks

__all__ = ["gpu_load", "gpu_busy", "BUSY_PERCENT", "SAMPLES", "INTERVAL_S", "SHARED_ENV"]

#: The load (percent) every sample must reach for the GPU to count as busy with another process's work.
BUSY_PERCENT = 10.0
#: How many times the load is read, and how far apart (seconds): a brief spike (a desktop redraw) is not
#: another process's pipeline.
SAMPLES = 5
INTERVAL_S = 0.2
#: The environment variable that lets a run time its engines beside another process's GPU work (``1``).
SHARED_ENV = "PLACETUNE_SHARED_GPU"


def gpu_load(root: str | Path | None = None) -> float | None:
    """The Jetson GPU's load now in percent (the highest of its devfreq nodes'), None when none is read."""
    base = Path(root if root is not None else clocks.SYSFS_ROOT) / "class/devfreq"
    try:
        nodes = sorted(p for p in base.iterdir() if clocks.GPU_NODE.match(p.name))
    except OSError:
        return None
    loads = []
    for node in nodes:
        try:
            loads.append(int((node / "device/load").read_text().strip()) / 10.0)
        except (OSError, ValueError):
            continue
    return max(loads) if loads else None


def gpu_busy(root: str | Path | None = None, samples: int = SAMPLES, interval_s: float = INTERVAL_S,
             sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Why the GPU is busy with another process's work (every one of ``samples`` reads of its load at
    least :data:`BUSY_PERCENT`), None when it is not or its load cannot be read. Stops reading at the
    first sample below the threshold (an idle board costs one read)."""
    seen: list[float] = []
    for i in range(max(1, samples)):
        if i:
            sleep(interval_s)
        load = gpu_load(root)
        if load is None or load < BUSY_PERCENT:
            return None
        seen.append(load)
    return (f"the GPU is busy before placetune built anything: its load read {', '.join(f'{x:g}' for x in seen)} % "
            f"over {interval_s * (len(seen) - 1):g} s (class/devfreq/<gpu>/device/load), so another process (a "
            "DeepStream pipeline, another tune or benchmark) runs on it and every timing would include its work; "
            "stop it (jtop or tegrastats shows the GPU's load) and run again, or, to tune beside work the deployment "
            f"will also run, set {SHARED_ENV}=1 (the study then records gpu_shared and keeps those timings apart)")
