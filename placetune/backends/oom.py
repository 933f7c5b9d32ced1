"""Out of memory on the board: a build or timing that ran out of memory, or whose process the kernel's
out-of-memory killer killed, recorded as a failure of class ``memory``.

TensorRT says when an allocation failed (:data:`OUT_OF_MEMORY`, read by both real backends). The OOM
killer says nothing to the process: it sends SIGKILL. placetune's own kills are timeouts, so a SIGKILL
it did not send is most often the OOM killer on a Jetson, whose GPU shares the board's memory; the
kernel counts each of its kills in ``oom_kill`` of ``/proc/vmstat`` (mm/oom_kill.c
``__oom_kill_process``: ``count_vm_event(OOM_KILL)`` "before sending signal", Linux 4.13 on; JetPack 6's
kernel is 5.15), readable by any user. :func:`judge_kill` reads that count before and after a
measurement: a SIGKILL while it went up is an out-of-memory kill (``failure_class`` ``memory``); a
SIGKILL while it stayed is another process's kill and stays an unexplained crash. The count is the
whole system's (another process killed meanwhile counts too): the SIGKILL of our own process is what
ties it to the measurement.

The measurement stays ``crashed`` (or ``build_failed``), stored and counted as one trial of the budget;
it is never measured again in the run (a stored failure is the placement's answer). A run stops after
:data:`STOP_AFTER` memory failures in a row (:class:`~placetune.tuning.oom_stop.OutOfMemoryStop`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from placetune.measurement import Measurement

__all__ = ["VMSTAT", "OUT_OF_MEMORY", "STOP_AFTER", "oom_kills", "out_of_memory", "judge_kill", "is_memory_failure"]

#: The kernel's event counters; ``oom_kill`` is the number of processes its OOM killer killed since boot.
VMSTAT = "/proc/vmstat"
#: TensorRT out of memory: trtexec 10.3.0 on a build (NVIDIA/TensorRT#4258: "Error Code 1: Cuda Runtime (out of
#: memory)", then "User allocator error allocating N-byte buffer" and "Could not find any implementation for
#: node"), TensorRT 7's "Cuda Error in allocate: 2 (out of memory)", "Error Code 2: OutOfMemory".
OUT_OF_MEMORY = re.compile(r"\(out of memory\)|OutOfMemory|User allocator error allocating|"
                           r"could not be allocated", re.I)
#: Memory failures in a row that stop a tune (exit status 8).
STOP_AFTER = 3


def oom_kills(path: str | None = None) -> int | None:
    """The kernel's count of OOM-killer kills (``oom_kill`` in ``/proc/vmstat``); None where it cannot be read."""
    try:
        with open(path or VMSTAT, encoding="ascii", errors="replace") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    return int(value)
    except (OSError, ValueError):
        return None
    return None


def out_of_memory(errors: Iterable[str]) -> bool:
    """Whether TensorRT's error lines say an allocation failed."""
    return any(OUT_OF_MEMORY.search(e) for e in errors)


def judge_kill(m: Measurement, before: int | None, path: str | None = None) -> Measurement:
    """``m`` of class ``memory`` when its process died of a SIGKILL while the kernel's OOM-kill count went up
    from ``before`` (read just before the measurement); unchanged otherwise."""
    if m.status != "crashed" or m.extra.get("signal") != "SIGKILL" or before is None:
        return m
    after = oom_kills(path)
    if after is None:
        return m
    m.extra["oom_kills"] = after - before
    if after > before:
        m.extra["failure_class"] = "memory"
        m.reason = (f"{m.reason}; out of memory: the kernel's out-of-memory killer killed {after - before} "
                    "process(es) meanwhile (oom_kill of /proc/vmstat)")
    return m


def is_memory_failure(m: Measurement) -> bool:
    """A failure of class ``memory`` (TensorRT's allocation failed, or the OOM killer killed the process)."""
    return not m.ok and m.extra.get("failure_class") == "memory"
