"""Discrete-event scheduler of the simulated Jetson, with shared-DRAM contention.

Tasks are engine segments (or whole engines) bound to one device. A DLA core runs one task
at a time in priority order (two engines on one core serialise). The GPU runs one task per
*stream* at a time and shares itself equally between the streams that have a task running
(processor sharing: replicas interleave their kernels).

Processes: every task has a ``context`` (its process's CUDA context). With ``slice_wait_ms`` > 0,
contexts share the GPU by time-slicing: a GPU task that is ready while a task of *another*
context runs on the GPU first waits ``slice_wait_ms`` (the expected rest of the running time
slice; :data:`GPU_TIMESLICE_US`), or until no other context's task runs, whichever is first; its
stream is held meanwhile. Tasks of one context (streams of one process) never wait for each other.

Contention: while devices run at the same time, each running task progresses at

    rate = share / (1 + sensitivity[device] * sum(DRAM demand of the *other* busy devices))

where a device's DRAM demand is the fraction of the DRAM bandwidth its running task(s) use
when alone (bytes / (alone time * bandwidth), capped at 1). Rates are piecewise constant
between events, so progress is exact for this model.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = ["Task", "Schedule", "run", "run_one_frame", "run_closed_loops", "GPU_TIMESLICE_US"]

#: Default time slice of a GPU context on Jetson (Tegra nvgpu driver: ``NVGPU_TSG_TIMESLICE_DEFAULT_US``
#: = 1024 us, "Default TSG timeslice value in microseconds. Currently it is 1024 us",
#: drivers/gpu/nvgpu/include/nvgpu/tsg.h of OE4T/linux-tegra-4.9 and -5.10). A task of another
#: process that becomes ready at a random moment of a running slice waits half of it on average.
GPU_TIMESLICE_US = 1024.0


@dataclass(slots=True)
class Task:
    """One unit of work on one device.

    Attributes:
        device: ``GPU``, ``DLA0`` or ``DLA1``.
        work_ms: duration when running alone on an idle system.
        demand: DRAM bandwidth fraction it uses when alone (0..1).
        preds: indexes of tasks that must finish first.
        key: priority (smaller first) among ready tasks of one device.
        stream: GPU stream: one task per stream at a time (ignored on DLAs).
        label: name for the timeline.
        frame: frame / iteration number for the timeline.
        group: owner (e.g. replica instance) for reporting.
        context: the process (CUDA context) that owns the task: GPU tasks of different contexts
            share the GPU by time slices when :func:`run` has ``slice_wait_ms`` > 0.
    """

    device: str
    work_ms: float
    demand: float = 0.0
    preds: tuple[int, ...] = ()
    key: tuple = ()
    stream: int = 0
    label: str = ""
    frame: int = 0
    group: int = 0
    context: int = 0
    start: float = math.nan
    end: float = math.nan


@dataclass
class Schedule:
    """Result of :func:`run`: the tasks with start/end set, and busy intervals per device."""

    tasks: list[Task]
    makespan: float
    busy: dict[str, list[list[float]]] = field(default_factory=dict)

    def busy_ms(self, device: str, t0: float = 0.0, t1: float = math.inf) -> float:
        """Time ``device`` had at least one task running within [t0, t1]."""
        total = 0.0
        for a, b in self.busy.get(device, ()):
            lo, hi = max(a, t0), min(b, t1)
            if hi > lo:
                total += hi - lo
        return total


def run(tasks: list[Task], sensitivity: dict[str, float], spawn: Callable[[int], Iterable[Task]] | None = None,
        stop: Callable[[], bool] | None = None, slice_wait_ms: float = 0.0) -> Schedule:
    """Simulate ``tasks`` (a DAG through ``preds``) and fill in their start/end times.

    Args:
        tasks: the tasks; ``preds`` index into this list (the list grows when ``spawn`` adds).
        sensitivity: per device, how strongly others' DRAM traffic slows it (see module doc).
        spawn: called with the index of each finished task; the tasks it returns are
            appended (their ``preds`` may name any task, finished or not).
        stop: checked after every event; True ends the simulation (unfinished tasks keep
            ``end`` = nan).
        slice_wait_ms: a GPU task ready while another context's task runs on the GPU waits this
            long first (or until no other context's task runs); 0: no wait (one process).

    Raises:
        ValueError: the dependencies contain a cycle.
    """
    waiting: list[int] = []
    succ: list[list[int]] = []
    finished_flag: list[bool] = []
    ready: dict[str, list] = {}
    running: dict[str, dict[int, float]] = {}  # device -> task -> remaining alone-work
    busy: dict[str, list[list[float]]] = {}

    def add(i: int) -> None:
        t = tasks[i]
        if t.device not in ready:
            ready[t.device], running[t.device], busy[t.device] = [], {}, []
        waiting.append(0)
        succ.append([])
        finished_flag.append(False)
        for p in t.preds:
            if not finished_flag[p]:
                waiting[i] += 1
                succ[p].append(i)
        if waiting[i] == 0:
            heapq.heappush(ready[t.device], (t.key, i))

    for i in range(len(tasks)):
        add(i)
    streams: set[int] = set()
    slice_end: dict[int, float] = {}  # GPU task waiting for another context's time slice -> its end
    now = 0.0
    done = 0
    while done < len(tasks):
        # ---- start what can start
        for dev, heap in ready.items():
            if not heap:
                continue
            if dev == "GPU":
                held = []
                while heap:
                    k, i = heapq.heappop(heap)
                    s = tasks[i].stream
                    if s in streams:
                        held.append((k, i))
                        continue
                    streams.add(s)
                    if slice_wait_ms > 0 and _foreign(tasks, running[dev], tasks[i].context):
                        slice_end[i] = now + slice_wait_ms  # waits for the running slice to end
                        continue
                    running[dev][i] = tasks[i].work_ms
                    tasks[i].start = now
                for item in held:
                    heapq.heappush(heap, item)
            elif not running[dev]:
                _, i = heapq.heappop(heap)
                running[dev][i] = tasks[i].work_ms
                tasks[i].start = now
        for i in [i for i, t_end in slice_end.items()
                  if t_end <= now + 1e-12 or not _foreign(tasks, running["GPU"], tasks[i].context)]:
            del slice_end[i]
            running["GPU"][i] = tasks[i].work_ms
            tasks[i].start = now
        active = [d for d, r in running.items() if r]
        if not active:
            raise ValueError("task graph has a cycle or a task waits on a missing predecessor")
        # ---- progress rates (piecewise constant until the next completion)
        demand = {d: sum(tasks[i].demand for i in running[d]) / len(running[d]) for d in active}
        total_demand = sum(demand.values())
        rates: dict[str, float] = {}
        dt = math.inf
        for d in active:
            rate = 1.0 / len(running[d]) / (1.0 + sensitivity.get(d, 0.0) * (total_demand - demand[d]))
            rates[d] = rate
            dt = min(dt, min(running[d].values()) / rate)
        if slice_end:
            dt = min(dt, min(slice_end.values()) - now)
        dt = max(dt, 0.0)
        # ---- advance
        end = now + dt
        for d in active:
            iv = busy[d]
            if iv and iv[-1][1] >= now - 1e-12:
                iv[-1][1] = end
            else:
                iv.append([now, end])
        now = end
        for d in active:
            run_d, step = running[d], rates[d] * dt
            finished = []
            for i in run_d:
                run_d[i] -= step
                if run_d[i] <= 1e-9 * max(1.0, tasks[i].work_ms):
                    finished.append(i)
            for i in finished:
                del run_d[i]
                tasks[i].end = now
                finished_flag[i] = True
                if d == "GPU":
                    streams.discard(tasks[i].stream)
                done += 1
                for j in succ[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heapq.heappush(ready[tasks[j].device], (tasks[j].key, j))
                if spawn is not None:
                    for t in spawn(i):
                        tasks.append(t)
                        add(len(tasks) - 1)
        if stop is not None and stop():
            break
    return Schedule(tasks, now, busy)


def _foreign(tasks: list[Task], running: dict[int, float], context: int) -> bool:
    """Whether a task of a context other than ``context`` runs (``running``: the GPU's tasks)."""
    return any(tasks[j].context != context for j in running)


def run_one_frame(device: list[int], work: list[float], demand: list[float], preds: list[tuple[int, ...]],
                  sensitivity: tuple[float, float, float],
                  law: Callable[[int, float], float] | None = None) -> tuple[float, list[tuple[int, float]]]:
    """:func:`run` of one frame of a segment DAG (one GPU stream), on plain lists, no :class:`Task`.

    The same events and the same floating-point operations in the same order as :func:`run` of
    the tasks ``Task(CODE_DEVICE[device[i]], work[i], demand[i], preds[i], key=(0, i))`` (what the
    simulator's pipeline mode builds for one frame), so the figures are identical; the
    incremental evaluation calls it once per searched placement.

    Args:
        device: device code per segment (0 GPU, 1 DLA0, 2 DLA1), segments in topological order.
        work: alone time per segment (ms).
        demand: DRAM demand per segment (0..1).
        preds: predecessor segment numbers per segment (no duplicates).
        sensitivity: contention sensitivity per device code.
        law: another contention law: the stretch of device code ``d`` when the others' DRAM demand
            is ``x``, ``law(d, x)`` (default ``1 + sensitivity[d] * x``; e.g. a benchmark's device
            whose contention saturates).

    Returns:
        ``(makespan, busy)``: busy = ``[(device code, busy ms), ...]`` for the devices with busy
        time > 0, in order of first use (``Schedule.busy_ms`` of each device of ``run``'s result).

    Raises:
        ValueError: the dependencies contain a cycle.
    """
    k = len(device)
    order: list[int] = []  # device codes in order of first appearance (run()'s dict order)
    for d in device:
        if d not in order:
            order.append(d)
            if len(order) == 3:
                break
    waiting = [len(p) for p in preds]
    succ: list[list[int]] = [[] for _ in range(k)]
    ready: list[list[int]] = [[], [], []]
    for i, p in enumerate(preds):
        for q in p:
            succ[q].append(i)
        if not p:
            ready[device[i]].append(i)  # ascending: already a heap
    cur = [-1, -1, -1]  # running segment per device code
    rem = [0.0, 0.0, 0.0]
    rates = [0.0, 0.0, 0.0]
    busy: list[list[list[float]]] = [[], [], []]
    now, done = 0.0, 0
    heappush, heappop = heapq.heappush, heapq.heappop
    while done < k:
        for d in order:
            if cur[d] < 0 and ready[d]:
                i = heappop(ready[d])
                cur[d] = i
                rem[d] = work[i]
        active = [d for d in order if cur[d] >= 0]
        if not active:
            raise ValueError("task graph has a cycle or a task waits on a missing predecessor")
        total_demand = sum([demand[cur[d]] for d in active])
        dt = math.inf
        for d in active:
            if law is None:
                rate = 1.0 / 1 / (1.0 + sensitivity[d] * (total_demand - demand[cur[d]]))
            else:
                rate = 1.0 / law(d, total_demand - demand[cur[d]])
            rates[d] = rate
            dt = min(dt, rem[d] / rate)
        dt = max(dt, 0.0)
        end = now + dt
        for d in active:
            iv = busy[d]
            if iv and iv[-1][1] >= now - 1e-12:
                iv[-1][1] = end
            else:
                iv.append([now, end])
        now = end
        for d in active:
            i = cur[d]
            rem[d] -= rates[d] * dt
            if rem[d] <= 1e-9 * max(1.0, work[i]):
                cur[d] = -1
                done += 1
                for j in succ[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heappush(ready[device[j]], j)
    out = []
    for d in order:
        total = 0.0
        for a, b in busy[d]:
            lo, hi = max(a, 0.0), min(b, math.inf)
            if hi > lo:
                total += hi - lo
        if total > 0:
            out.append((d, total))
    return now, out


def run_closed_loops(loops: list[list[tuple[str, float, float]]], sensitivity: dict[str, float],
                     iterations: int = 3, max_tasks: int = 20000, separate_processes: bool = False,
                     slice_wait_ms: float = GPU_TIMESLICE_US / 2000.0) -> tuple[list[float], Schedule, float]:
    """Run several engines concurrently, each in a closed loop (next inference when one ends).

    Args:
        loops: per engine, its sequence of parts ``(device, alone_ms, demand)``.
        sensitivity: see :func:`run`.
        iterations: completed inferences every engine needs before the simulation stops
            (the first one is warm-up, so at least 2).
        max_tasks: cap on simulated tasks.
        separate_processes: every engine is its own process (CUDA context): a GPU part that is
            ready while another engine's GPU part runs waits ``slice_wait_ms`` first (the expected
            rest of that process's time slice; its DLA idles meanwhile). False: one process, the
            engines are streams of one context (no wait).
        slice_wait_ms: that wait (default half of :data:`GPU_TIMESLICE_US`).

    Returns:
        ``(periods, schedule, t1)``: the steady-state time per inference of each engine,
        measured while all engines run (up to ``t1``, the end of the simulation), and the
        schedule.
    """
    need = max(2, int(iterations))
    ends: list[list[float]] = [[] for _ in loops]
    tasks: list[Task] = []
    pending = [len(loops)]  # engines that have not completed `need` inferences yet

    def part(g: int, k: int, j: int) -> Task:
        dev, ms, demand = loops[g][j]
        return Task(dev, ms, demand, (), key=(k, g, j), stream=g, label=f"engine{g} part{j}", frame=k, group=g,
                    context=g if separate_processes else 0)

    def spawn(i: int) -> list[Task]:
        t = tasks[i]
        g, k, j = t.group, t.frame, t.key[2]
        if j + 1 < len(loops[g]):
            return [part(g, k, j + 1)]
        ends[g].append(t.end)
        if len(ends[g]) == need:
            pending[0] -= 1
        return [part(g, k + 1, 0)]

    def stop() -> bool:
        return pending[0] == 0 or len(tasks) > max_tasks

    tasks.extend(part(g, 0, 0) for g in range(len(loops)))
    sched = run(tasks, sensitivity, spawn=spawn, stop=stop, slice_wait_ms=slice_wait_ms if separate_processes else 0.0)
    t1 = sched.makespan
    periods = []
    for g, e in enumerate(ends):
        if len(e) >= 2:
            periods.append((e[-1] - e[0]) / (len(e) - 1))
        elif e:
            periods.append(e[0])
        else:  # capped before one inference ended: extrapolate from the progress made
            done_ms = sum(t.end - t.start for t in tasks if t.group == g and t.end == t.end)
            frac = max(done_ms, 1e-9) / max(sum(p[1] for p in loops[g]), 1e-9)
            periods.append(t1 / min(1.0, frac))
    return periods, sched, t1
