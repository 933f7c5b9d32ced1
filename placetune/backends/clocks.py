"""The Jetson's clocks read around every measurement of a real backend, so that a night never mixes
figures taken under other clocks into a study.

The power mode and ``jetson_clocks`` are checked once when a run starts (the fingerprint and the
first-build check ``clocks``). What happens later in the night is seen here: someone runs
``nvpmodel -m``, ``jetson_clocks --restore`` unlocks the clocks, or the board throttles (the GPU's
``cur_freq`` drops below the frequency it was locked at). A :class:`ClockWatch` reads a
:func:`snapshot` of the clocks and the nvpmodel mode just before and just after the timed part of
each measurement, not its build (files only, no subprocess: a few small reads; where the timing
runs inside an opaque job, a :class:`ClockSampler` reads them in a thread meanwhile) and compares
them with the run's first snapshot. A measurement whose
clocks moved is marked untrusted (:func:`untrusted`), never kept as a normal figure; after
:data:`STOP_AFTER` such measurements in a row the run stops with :class:`BackendError` (exit status 8).

The files read (``root`` is ``/sys``):

* GPU: ``class/devfreq/<node>/{cur_freq,min_freq,max_freq}`` (Hz), ``<node>`` ``17000000.gpu`` (Orin,
  L4T R36), ``17000000.ga10b`` (Orin, R35), ``17000000.gv11b`` (Xavier): the devfreq files jtop reads
  (rbonghi/jetson_stats ``jtop/core/gpu.py``, ``DEFAULT_IGPU_PATH = "/sys/class/devfreq/"``, ``cur_freq``);
* CPU: ``devices/system/cpu/cpufreq/policy<N>/{scaling_cur_freq,scaling_min_freq,scaling_max_freq}``
  (kHz), the Linux cpufreq policy files (jtop reads ``cpufreq/scaling_cur_freq``, ``jtop/core/cpu.py``);
* EMC, where readable (debugfs: root only, so usually not in a night run as a user):
  ``kernel/debug/bpmp/debug/clk/emc/{rate,min_rate,max_rate}`` (jtop ``jtop/core/memory.py`` ``read_emc``);
* DLA, where readable (debugfs, root only): ``kernel/debug/clk/<dla clock>/{clk_rate,clk_min_rate,
  clk_max_rate}`` for the clocks whose name starts with ``dla`` or ``nvdla`` (jtop ``jtop/core/engine.py``
  ``read_engine``, engines matched by the name ``dla``).

* the nvpmodel power mode: ``/var/lib/nvpmodel/status`` (:data:`NVPMODEL_STATUS`), the file nvpmodel
  writes the mode it set to, one line ``pmode:NNNN`` (the mode id, zero-padded), followed on older
  JetPacks by the fan mode (``pmode:0000 fmode:quiet``). NVIDIA's own readers of it: the L4T power-mode
  indicator's ``nvpmodel.py`` (``status_paths = "/var/lib/nvpmodel/status"``, ``cur_mode()`` matches
  ``pmode:(\\w+)`` and takes ``int()`` of it) and the Isaac SDK's ``CheckJetsonPerformanceModel.cpp``
  ("Format for JetPack 4.3 is: pmode:0000 fmode:quiet"); public notes of JetPack 6 boards show
  ``pmode:0000`` and ``pmode:0002`` alone (fixtures: ``tests/data/nvpmodel_status``). Read as a
  file, not ``nvpmodel -q`` (a subprocess per measurement), so that a mode change mid-night is seen
  even when it moves no frequency limit that sysfs shows (two modes can share the GPU and CPU caps
  and differ in TPCs, cores online or EMC). The file says what nvpmodel last *set*, not what the
  hardware runs (a board whose nvpmodel service failed at boot keeps the file's old mode), so the
  frequency limits above are still judged. A board where the file cannot be read is said once
  (:class:`ClockWatch`), and its mode is then not judged, never guessed.

The EMC and DLA clock files are in debugfs, which only root can read: a night run as a user cannot
watch them, so a change of the memory's or a DLA's clock that moves no CPU or GPU limit and no
nvpmodel mode would go unseen. :class:`ClockWatch` says so once (``CLOCKS NOT WATCHED``) and every
measurement's clock record names them (``extra["clocks"]["not_watched"]``, :func:`not_watched`).

Checked only against a fake sysfs tree and status file (``tests/test_clock_watch.py``), never on a board.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator

from placetune.errors import BackendError
from placetune.hardware.power_modes import modes_of
from placetune.measurement import Measurement

__all__ = ["ClockWatch", "ClockSampler", "snapshot", "clocks_moved", "steps_between", "NVPMODEL_WRITTEN", "mode_not_applied", "untrusted",
           "read_power_mode_id", "parse_nvpmodel_status", "STOP_AFTER", "SYSFS_ROOT", "NVPMODEL_STATUS",
           "SAMPLE_INTERVAL_S", "THROTTLE_TOLERANCE", "MODE_CAP_TOLERANCE", "GPU_NODE", "not_watched"]

log = logging.getLogger(__name__)

#: Where the clock files are read (tests point it at a fake tree).
SYSFS_ROOT = "/sys"
#: How often a :class:`ClockSampler` reads the clocks while an opaque job runs (seconds): a few small
#: file reads each time, in the parent process, not in the worker that times.
SAMPLE_INTERVAL_S = 0.1
#: The file nvpmodel writes its mode to (tests point it at a fixture).
NVPMODEL_STATUS = "/var/lib/nvpmodel/status"
#: Untrusted measurements in a row that stop the run (exit status 8).
STOP_AFTER = 3
#: How far below its locked frequency a locked clock may read before it counts as throttled, so that a
#: current frequency read back a little off the one set is not taken for throttling. Chosen, not
#: measured on a board (the published ``jetson_clocks --show`` of a locked AGX Orin,
#: tests/data/jetson_clocks, shows CurrentFreq equal to the locked frequency).
THROTTLE_TOLERANCE = 0.02
#: The Jetson GPU's devfreq node names (as :mod:`placetune.backends.tensorrt.env` reads them).
_GPU = re.compile(r"^[0-9a-f]+\.(?:gpu|ga10b|gv11b|gp10b)$")
GPU_NODE = _GPU
_DLA = re.compile(r"^(?:nv)?dla\d*(?:_core)?$")

Snapshot = dict[str, dict[str, int]]
#: The snapshot's entry of when nvpmodel last wrote its status file (``{"ns": st_mtime_ns}``).
NVPMODEL_WRITTEN = "nvpmodel_written"


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _clock(folder: Path, cur: str, lo: str, hi: str) -> dict[str, int] | None:
    vals = {"cur": _int(folder / cur), "min": _int(folder / lo), "max": _int(folder / hi)}
    got = {k: v for k, v in vals.items() if v is not None}
    return got or None


_PMODE = re.compile(r"^\s*pmode:\s*(\d+)\b")


def parse_nvpmodel_status(text: str) -> int | None:
    """The mode id of an nvpmodel status file's text (``pmode:0002`` -> 2, ``pmode:0000 fmode:quiet`` -> 0),
    None when no line starts with ``pmode:`` and digits.

    Example:
        >>> parse_nvpmodel_status("pmode:0000 fmode:quiet\\n"), parse_nvpmodel_status("pmode:0002\\n")
        (0, 2)
    """
    for line in (text or "").splitlines():
        m = _PMODE.match(line)
        if m:
            return int(m.group(1))
    return None


def read_power_mode_id(path: str | Path | None = None) -> tuple[int | None, str]:
    """The nvpmodel mode id from its status file (:data:`NVPMODEL_STATUS`), and why not where it is None."""
    file = Path(path if path is not None else NVPMODEL_STATUS)
    try:
        text = file.read_text(errors="replace")
    except OSError as exc:
        return None, f"{file} cannot be read ({exc.strerror or type(exc).__name__})"
    mode = parse_nvpmodel_status(text)
    return (mode, "") if mode is not None else (None, f"{file} has no pmode:<id> line ({text.strip()[:40]!r})")


def snapshot(root: str | Path | None = None, status: str | Path | None = None) -> Snapshot | None:
    """The clocks now: ``{"gpu:<node>": {"cur", "min", "max"}, "cpu:policy0": ..., "emc": ..., "dla:<clk>": ...,
    "nvpmodel": {"mode": id}}`` (only the files that could be read; ``status``: the nvpmodel status
    file, default :data:`NVPMODEL_STATUS`); None when no GPU devfreq node was read (not a Jetson:
    nothing is checked)."""
    base = Path(root if root is not None else SYSFS_ROOT)
    snap: Snapshot = {}
    snap.update(_clocks_in(base / "class/devfreq", _GPU, "gpu", ("cur_freq", "min_freq", "max_freq")))
    gpu_read = bool(snap)
    for policy in sorted((base / "devices/system/cpu/cpufreq").glob("policy[0-9]*")):
        c = _clock(policy, "scaling_cur_freq", "scaling_min_freq", "scaling_max_freq")
        if c:
            snap[f"cpu:{policy.name}"] = c
    if not gpu_read:  # a PC's cpufreq alone is not a Jetson: nothing to watch
        return None
    emc = _clock(base / "kernel/debug/bpmp/debug/clk/emc", "rate", "min_rate", "max_rate")
    if emc:
        snap["emc"] = emc
    snap.update(_clocks_in(base / "kernel/debug/clk", _DLA, "dla", ("clk_rate", "clk_min_rate", "clk_max_rate")))
    mode, _ = read_power_mode_id(status)
    if mode is not None:
        snap["nvpmodel"] = {"mode": mode}
        try:  # when nvpmodel last wrote it: a mode set and set back between two readings moves it
            snap[NVPMODEL_WRITTEN] = {"ns": Path(status if status is not None else NVPMODEL_STATUS).stat().st_mtime_ns}
        except OSError:
            pass
    return snap


_TOTAL_TRANSITIONS = re.compile(r"^\s*Total transition\s*:\s*(\d+)", re.M)


def _transitions(folder: Path) -> int | None:
    """The devfreq node's count of frequency changes (``trans_stat``'s ``Total transition : N`` line, Linux
    ``drivers/devfreq/devfreq.c`` ``trans_stat_show``); None where it cannot be read ("Not Supported.")."""
    try:
        m = _TOTAL_TRANSITIONS.search((folder / "trans_stat").read_text(errors="replace"))
    except OSError:
        return None
    return int(m.group(1)) if m else None


def _clocks_in(folder: Path, name: re.Pattern[str], kind: str, files: tuple[str, str, str]) -> Snapshot:
    """The clocks of ``folder``'s entries whose names match ``name``, as ``{"<kind>:<entry>": clock}``
    (an unreadable folder or entry: none)."""
    try:
        entries = sorted(p for p in folder.iterdir() if name.match(p.name))
    except OSError:
        return {}
    found: Snapshot = {}
    for entry in entries:
        c = _clock(entry, *files)
        if c:
            if kind == "gpu":
                n = _transitions(entry)
                if n is not None:
                    c["transitions"] = n
            found[f"{kind}:{entry.name}"] = c
    return found


def not_watched(snap: Snapshot | None) -> list[str]:
    """The clocks a snapshot of a Jetson could not read because only root can (``EMC``, ``DLA``: debugfs);
    empty off a Jetson (None)."""
    if snap is None:
        return []
    return [name for name, there in (("EMC", "emc" in snap), ("DLA", any(k.startswith("dla:") for k in snap)))
            if not there]


def _locked(c: dict[str, int]) -> bool:
    return c.get("min") is not None and c.get("min") == c.get("max")


def _problem(first: Snapshot, snap: Snapshot | None, when: str) -> str | None:
    if snap is None or not any(k.startswith("gpu:") for k in snap):
        return f"the GPU clock could not be read {when} the measurement"
    if "nvpmodel" in first:  # the mode first: a mode change is the cause of the limits it moves
        was, now_mode = first["nvpmodel"].get("mode"), (snap.get("nvpmodel") or {}).get("mode")
        if now_mode is None:
            return f"the nvpmodel power mode could not be read {when} the measurement (its status file)"
        if now_mode != was:
            return f"nvpmodel power mode {was} -> {now_mode} {when} the measurement (someone ran nvpmodel -m)"
    for name, ref in first.items():
        now = snap.get(name) or {}
        for k, cause in (("max", "the power mode changed: nvpmodel"),
                         ("min", "jetson_clocks was reset or the power mode changed")):
            if ref.get(k) is not None and now.get(k) is not None and ref[k] != now[k]:
                return f"{name} {k} frequency {ref[k]} -> {now[k]} {when} the measurement ({cause})"
        if (not name.startswith("cpu:") and _locked(ref) and now.get("cur") is not None
                and now["cur"] < ref["min"] * (1 - THROTTLE_TOLERANCE)):
            return (f"{name} ran at {now['cur']}, below its locked {ref['min']}, {when} the measurement "
                    "(thermal or power throttling)")
    return None


def clocks_moved(first: Snapshot, before: Snapshot | None, after: Snapshot | None,
                 during: Iterable[Snapshot | None] = ()) -> str | None:
    """Why a measurement taken between ``before`` and ``after`` is not under the clocks of the run's
    ``first`` snapshot (None: it is): the nvpmodel mode differs from the first snapshot's (or can no
    longer be read where it could), a frequency limit (``min``/``max``: the power mode,
    ``jetson_clocks``) differs from the first snapshot's, or a clock that was locked (``min == max``)
    runs more than :data:`THROTTLE_TOLERANCE` below its locked frequency (throttling); "during" when only the snapshot after the
    measurement shows it. The current frequency of a clock that was not locked is recorded, not
    judged (it moves with DVFS); nor is a CPU's, locked or not: Orin's cpufreq driver may give back a
    frequency regenerated from counters, off the one set
    (:func:`placetune.backends.tensorrt.env.read_throttled_sysfs` says why; before, :data:`STOP_AFTER` such
    readings in a row stopped a night on a healthy board); its limits (``min``/``max``) are judged. ``during``: snapshots read between the two (:class:`ClockSampler`),
    judged as "during" too."""
    moved = (_problem(first, s, "during") for s in during)
    return _problem(first, before, "before") or next(filter(None, moved), None) or _problem(first, after, "during")


def steps_between(readings: Iterable[Snapshot | None]) -> tuple[str | None, str | None]:
    """A clock step that the readings' values miss: one that came and went between two consecutive readings
    (the GPU clock stepped and stepped back, nvpmodel set a mode and set it back). Returns ``(why it moved,
    None)``, ``(None, why it is not known)`` where the readings cannot tell, or ``(None, None)``: no step.

    Seen where the readings allow: the GPU devfreq node's transition counter (``trans_stat``) changed
    between two readings of a GPU clock that was locked in both (an unlocked clock moves with DVFS, its
    steps are not judged), or nvpmodel's status file was written between them (the mode read may be the
    same). Not known: a locked GPU clock with no transition counter to read, so a step and back between
    two readings would not show."""
    seq = [r for r in readings if r is not None]
    unknown = None
    for a, b in zip(seq, seq[1:]):
        wa, wb = (a.get(NVPMODEL_WRITTEN) or {}).get("ns"), (b.get(NVPMODEL_WRITTEN) or {}).get("ns")
        if wa is not None and wb is not None and wa != wb:
            return ("nvpmodel set a power mode between two readings during the measurement (its status file "
                    "was written; the mode read before and after may be the same)"), None
        for name, ca in a.items():
            cb = b.get(name) or {}
            if not name.startswith("gpu:") or not (_locked(ca) and _locked(cb)):
                continue
            ta, tb = ca.get("transitions"), cb.get("transitions")
            if ta is None or tb is None:
                unknown = (f"{name} has no transition counter to read (devfreq trans_stat): a clock step and "
                           "back between two readings would not show")
            elif ta != tb:
                return (f"{name} changed frequency {tb - ta} time(s) between two readings during the measurement "
                        "(devfreq trans_stat), though both read it at its locked frequency"), None
    return None, unknown


#: How far the GPU's devfreq ``max_freq`` may be from its power mode's cap before the mode counts as not
#: applied (a cap not in the GPU's frequency table is rounded to one that is). Chosen, not measured.
MODE_CAP_TOLERANCE = 0.05


def mode_not_applied(platform: str, mode_name: str | None, snap: Snapshot | None) -> str | None:
    """Why the board does not run the nvpmodel mode it reports (None: it does, or nothing to compare):
    the GPU's devfreq ``max_freq`` is not the GPU cap (``GPU MAX_FREQ``) of that mode in NVIDIA's
    nvpmodel file for the module (:mod:`placetune.hardware.power_modes`), where the mode has one.
    nvpmodel writes that cap to ``max_freq``; a board whose nvpmodel service failed at boot reports
    the mode of its status file while it runs other clocks (a public report: an Orin Nano Super up at
    MAXN_SUPER clocks with ``pmode:0001``, its 25W, in the file)."""
    table = modes_of(platform, mode_name)  # a JetPack 6.2 Super mode: the module's _super file
    if table is None or not mode_name:
        return None
    mode = table.mode(mode_name)
    gpu = next((c for k, c in (snap or {}).items() if k.startswith("gpu:")), None)
    if mode is None or mode.gpu_max_hz is None or gpu is None or gpu.get("max") is None:
        return None
    cap, now = mode.gpu_max_hz, gpu["max"]
    if abs(now - cap) <= MODE_CAP_TOLERANCE * cap:
        return None
    return (f"nvpmodel reports {mode_name}, whose GPU cap is {cap} Hz in NVIDIA's nvpmodel file for {platform} "
            f"({table.module}), but the GPU's devfreq max_freq is {now} Hz")


def untrusted(m: Measurement, why: str) -> Measurement:
    """``m`` marked as taken under other clocks: a ``runtime_failed`` measurement (``failure_class``
    ``clocks``) whose reason says why and what its median was, so that it is never ranked, exported or
    kept as a figure of the study's clocks. A measurement that already failed keeps its own status."""
    m.extra["clocks_untrusted"] = why
    return m.not_kept("clocks", "clocks untrusted", why)


class ClockWatch:
    """The clocks of one run of a real backend: :meth:`read` before and after each measurement, then
    :meth:`judge` its result.

    What is judged is the timed part of the measurement where the backend says which it is
    (:meth:`timing` around it, or :meth:`timed` with the snapshots a :class:`ClockSampler` read
    around it): a build takes minutes and may see a clock move that is over before the engine is
    timed, which says nothing about the figures. Where no timed part was given (the build failed,
    the worker died, or its job reported no timed window), the snapshots around the whole
    measurement are judged."""

    def __init__(self, root: str | Path | None = None, stop_after: int = STOP_AFTER,
                 status: str | Path | None = None) -> None:
        self.root = root
        self.status = status
        self.stop_after = int(stop_after)
        self.first: Snapshot | None = None
        self.in_a_row = 0
        self.warned = False
        #: the snapshots around the timed part of the measurement being taken: (before, after, during)
        self.window: tuple[Snapshot | None, Snapshot | None, list[Snapshot | None]] | None = None

    def read(self) -> Snapshot | None:
        """A snapshot now; the first one read is the run's reference. When that first one has no
        power mode (the nvpmodel status file unreadable), says so once: the mode is then not judged
        per measurement, only the frequency limits it moves."""
        snap = snapshot(self.root, self.status)
        if self.first is None and snap is not None:
            self.first = snap
            if "nvpmodel" not in snap:
                log.warning("POWER MODE NOT WATCHED: %s; a power mode change during the run is seen only where it "
                            "moves a CPU or GPU frequency limit (two modes may differ only in TPCs, cores online "
                            "or EMC); check `nvpmodel -q` after the run", read_power_mode_id(self.status)[1])
            unread = not_watched(snap)
            if unread:
                log.warning("%s CLOCKS NOT WATCHED: their files are in debugfs, which only root can read "
                            "(kernel/debug/bpmp/debug/clk/emc, kernel/debug/clk/dla*); a change of only these clocks "
                            "during the run (no CPU or GPU frequency limit moved, no nvpmodel mode change) is not seen, "
                            "and each measurement's clock record names them under not_watched; run placetune as root "
                            "to watch them", " and ".join(unread))
        return snap

    def timed(self, before: Snapshot | None, after: Snapshot | None, during: Iterable[Snapshot | None] = ()) -> None:
        """The snapshots read just before and just after the timed part of the measurement being taken
        (and any between): :meth:`judge` judges these instead of the ones around the whole measurement."""
        self.window = (before, after, list(during))

    @contextmanager
    def timing(self) -> Iterator[None]:
        """Reads the clocks just before and just after the block, as the timed part (:meth:`timed`)."""
        before = self.read()
        try:
            yield
        finally:
            self.timed(before, self.read())

    def judge(self, m: Measurement, before: Snapshot | None, after: Snapshot | None) -> Measurement:
        """``m`` with its clocks recorded (``extra["clocks"]``: ``before``, ``after`` and ``span``,
        ``timing`` where the timed part's snapshots were given, :meth:`timed`, else ``measurement``:
        ``before``/``after`` as passed), marked untrusted when they moved (:func:`clocks_moved`),
        unchanged off a Jetson. The timed part's snapshots are used once.

        Raises:
            BackendError: the :data:`STOP_AFTER`-th untrusted measurement in a row (exit status 8).
        """
        window, self.window = self.window, None
        if self.first is None:  # not a Jetson (no devfreq GPU node): nothing recorded, nothing changes
            return m
        during: list[Snapshot | None] = []
        span = "measurement"
        if window is not None:
            before, after, during = window
            span = "timing"
        m.extra["clocks"] = {"before": before, "after": after, "span": span}
        unread = not_watched(self.first)
        if unread:  # the record says what it could not see, never only the terminal
            m.extra["clocks"]["not_watched"] = unread
        if during:
            m.extra["clocks"]["samples_during"] = len(during)
        why = clocks_moved(self.first, before, after, during)
        stepped, not_known = steps_between([before, *during, after])
        why = why or stepped
        if not_known and not why:  # never recorded as steady where a step between readings could not be seen
            m.extra["clocks"]["between_readings"] = f"not known: {not_known}"
        if why is None:
            self.in_a_row = 0
            return m
        self.in_a_row += 1
        if self.in_a_row >= self.stop_after:
            raise BackendError(
                f"clocks check failed: {self.in_a_row} measurements in a row under other clocks than the run's "
                f"first ({why}); the run stopped rather than measure the night under the wrong clocks: restore "
                "the power mode (`sudo nvpmodel -m <id>`) and `sudo jetson_clocks`, let the board cool, and "
                "run again (the study resumes)")
        if not self.warned:
            self.warned = True
            log.warning("CLOCKS CHANGED: %s; this measurement is marked untrusted (not kept as a figure), "
                        "and the run stops after %d in a row", why, self.stop_after)
        return untrusted(m, why)


class ClockSampler:
    """Snapshots read every ``interval_s`` in a thread while an opaque job runs (the tensorrt backend's
    worker builds and times in one job), so that the ones around its timed part can be picked
    afterwards from the window the job reports (:meth:`window`, ``time.monotonic()`` seconds, one
    clock for every process of the machine)."""

    def __init__(self, watch: ClockWatch, interval_s: float | None = None) -> None:
        self.watch = watch
        self.interval_s = float(interval_s if interval_s is not None else SAMPLE_INTERVAL_S)
        self.samples: list[tuple[float, Snapshot | None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        t = time.monotonic()
        self.samples.append((t, self.watch.read()))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> "ClockSampler":
        """Reads one snapshot now, then every ``interval_s`` until :meth:`stop`."""
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="placetune-clocks", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the thread and reads one last snapshot."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()

    def window(self, start: float, end: float) -> tuple[Snapshot | None, Snapshot | None, list[Snapshot | None]]:
        """``(before, after, during)`` of the span ``start``..``end``: the last snapshot read at or
        before ``start`` (else the first), the first read at or after ``end`` (else the last) and
        those between."""
        samples = sorted(self.samples, key=lambda x: x[0])
        before = next((s for t, s in reversed(samples) if t <= start), samples[0][1])
        after = next((s for t, s in samples if t >= end), samples[-1][1])
        return before, after, [s for t, s in samples if start < t < end]
