"""Probe the Jetson a TensorRT measurement runs on: L4T/JetPack, module, power mode, clocks, trtexec.

Every probe is robust: a missing file or command, a permission error or a timeout gives
None, never an exception (placetune also runs on laptops and in CI). The parsers are
separate pure functions so they can be tested on captured text.

Example:
    >>> parse_nv_tegra_release("# R35 (release), REVISION: 3.1, GCID: 32827747, BOARD: t186ref")
    'R35.3.1'
    >>> parse_nvpmodel("NV Power Mode: MAXN\\n0")
    'MAXN'
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from placetune.backends.clocks import THROTTLE_TOLERANCE, read_power_mode_id

__all__ = [
    "read_l4t", "read_module", "read_jetpack", "read_power_mode", "read_clocks", "read_clocks_sysfs",
    "read_clocks_state", "read_throttled", "read_throttled_sysfs", "parse_jetson_clocks_throttled",
    "parse_nv_tegra_release", "parse_nvpmodel", "parse_nvpmodel_conf", "power_mode_from_files", "parse_jetson_clocks",
    "find_trtexec", "NVPMODEL_CONF", "TRTEXEC_DIRS", "SYSTEM_DIRS", "DEVICE_TREE",
]

#: Where JetPack installs trtexec (it is not on PATH by default).
TRTEXEC_DIRS = ("/usr/src/tensorrt/bin",)
#: Where L4T installs ``nvpmodel`` (``/usr/sbin``) and ``jetson_clocks`` (``/usr/bin``): looked in
#: when they are not on PATH (cron's and systemd's PATH has no ``/usr/sbin``), so that the board's
#: power mode is read rather than silently unknown.
SYSTEM_DIRS = ("/usr/sbin", "/usr/bin", "/sbin", "/bin")
_TIMEOUT_S = 10.0
#: The device tree whose ``model`` and ``compatible`` name the module (tests point it at a fixture).
DEVICE_TREE = "/proc/device-tree"


def _program(name: str) -> str | None:
    """``name`` on PATH, else in :data:`SYSTEM_DIRS` (None: not found)."""
    found = shutil.which(name)
    if found:
        return found
    for d in SYSTEM_DIRS:
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def _run(cmd: list[str]) -> str | None:
    """stdout of a command, or None when it is missing, fails or hangs."""
    program = _program(cmd[0])
    if program is None:
        return None
    cmd = [program, *cmd[1:]]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if p.returncode != 0:
        return None
    return p.stdout


def _read(path: str | os.PathLike[str]) -> str | None:
    try:
        return Path(path).read_text(errors="replace")
    except OSError:
        return None


def parse_nv_tegra_release(text: str) -> str | None:
    """``# R35 (release), REVISION: 3.1, ...`` -> ``R35.3.1`` (None when not recognised)."""
    m = re.search(r"#\s*R(\d+)\s*\(\w+\),\s*REVISION:\s*([\d.]+)", text or "")
    return f"R{m.group(1)}.{m.group(2)}" if m else None


def read_l4t(path: str = "/etc/nv_tegra_release") -> str | None:
    """The L4T release of this Jetson (``R35.3.1``), None when not a Jetson."""
    text = _read(path)
    return parse_nv_tegra_release(text) if text else None


def read_module(path: str = "/proc/device-tree/model") -> str | None:
    """The module name from the device tree (``NVIDIA Jetson AGX Orin Developer Kit``)."""
    text = _read(path)
    if not text:
        return None
    return text.replace("\x00", "").strip() or None


def read_jetpack() -> str | None:
    """The ``nvidia-jetpack`` package version (``5.1.1-b56``), None when not installed."""
    out = _run(["dpkg-query", "-W", "-f=${Version}", "nvidia-jetpack"])
    if out is None:
        return None
    return out.strip() or None


def parse_nvpmodel(text: str) -> str | None:
    """``nvpmodel -q`` output -> the mode name (``MAXN``, ``50W``...)."""
    m = re.search(r"NV Power Mode:\s*(\S+)", text or "")
    return m.group(1) if m else None


#: The nvpmodel configuration of the module (on L4T a link to ``/etc/nvpmodel/nvpmodel_<module>.conf``):
#: its ``< POWER_MODEL ID=N NAME=... >`` sections name the modes (tests point it at a fixture).
NVPMODEL_CONF = "/etc/nvpmodel.conf"

_POWER_MODEL = re.compile(r"^\s*<\s*POWER_MODEL\s+ID=(\d+)\s+NAME=([^\s>]+)\s*>")


def parse_nvpmodel_conf(text: str) -> dict[int, str]:
    """An nvpmodel configuration file -> ``{mode id: mode name}`` from its ``< POWER_MODEL ID=0
    NAME=MAXN >`` section lines (NVIDIA's files, e.g. ``nvpmodel_p3767_0001.conf``; comment lines,
    which repeat the form as ``ID=id_num``, and ``< PARAM ... >`` sections are not modes). The names
    are those ``nvpmodel -q`` prints (``NV Power Mode: <NAME>``)."""
    modes: dict[int, str] = {}
    for line in (text or "").splitlines():
        m = _POWER_MODEL.match(line)
        if m:
            modes.setdefault(int(m.group(1)), m.group(2))
    return modes


def power_mode_from_files(status: str | Path | None = None, conf: str | Path | None = None) -> str | None:
    """The power mode's name without the ``nvpmodel`` program (a container without it): its id from
    the status file nvpmodel writes (``/var/lib/nvpmodel/status``, ``pmode:0002``), its name from the
    module's nvpmodel configuration (:data:`NVPMODEL_CONF`). None when either cannot be read, or the
    configuration has no mode of that id (a name is never guessed)."""
    mode, _ = read_power_mode_id(status)
    if mode is None:
        return None
    text = _read(conf if conf is not None else NVPMODEL_CONF)
    return parse_nvpmodel_conf(text).get(mode) if text else None


def read_power_mode() -> str | None:
    """The current nvpmodel power mode name: ``nvpmodel -q``, else, where that program is missing or
    does not answer, :func:`power_mode_from_files`; None when neither can say."""
    out = _run(["nvpmodel", "-q"])
    name = parse_nvpmodel(out) if out else None
    return name if name is not None else power_mode_from_files()


def _show_lines(text: str) -> list[tuple[str, int | None, int, int]]:
    """The online CPU lines and the GPU line of ``jetson_clocks --show`` that carry ``MinFreq``,
    ``MaxFreq`` and ``CurrentFreq``, as ``(name, current, min, max)`` (the form :func:`_sysfs_clocks`
    reads from sysfs)."""
    found: list[tuple[str, int | None, int, int]] = []
    for line in (text or "").splitlines():
        m = re.match(r"\s*(cpu\d+|GPU)\b", line)
        if not m or "Online=0" in line:
            continue
        vals = {k: int(v) for k, v in re.findall(r"(MinFreq|MaxFreq|CurrentFreq)=([0-9]{1,19})\b", line, re.ASCII)}
        if len(vals) == 3:
            found.append((m.group(1), vals["CurrentFreq"], vals["MinFreq"], vals["MaxFreq"]))
    return found


def _locked(found: list[tuple[str, int | None, int, int]]) -> bool:
    """Every clock read has its minimum equal to its maximum: what ``jetson_clocks`` sets."""
    return all(lo == hi for _, _, lo, hi in found)


def _throttled(found: list[tuple[str, int | None, int, int]]) -> list[str]:
    """The locked GPU clock (minimum == maximum) when its current frequency is below its lock (Hz).

    A CPU's current frequency is not judged: on Orin its cpufreq driver may give back a frequency
    regenerated from counters, not the one set (NVIDIA's tegra194-cpufreq patch of October 2023, "use
    refclk delta based loop instead of udelay": WFE stops the counters, "which results in bigger delta
    between the last set freq and the re-generated value from counters"), and a reader of
    ``cpuinfo_cur_freq`` such as jtop's service copies that value into ``scaling_cur_freq``. A
    thermal or power cap slows the GPU too, where it is read from devfreq."""
    return [why for name, cur, lo, hi in found if lo == hi and name == "GPU"
            for why in [_below(name, cur, hi, "Hz")] if why]


def parse_jetson_clocks(text: str) -> bool | None:
    """Whether ``jetson_clocks --show`` reports locked clocks.

    Locked means every CPU line that is online and the GPU line have ``MinFreq == MaxFreq``: what
    ``jetson_clocks`` sets (NVIDIA's script, L4T R35/R36: ``cat scaling_max_freq > scaling_min_freq``
    for each CPU, ``cat max_freq > min_freq`` for the GPU's devfreq node; jetson_stats 4.x reads the
    state the same way, ``jtop/core/jetson_clocks.py`` ``jetson_clocks_alive``: ``max != min`` is off).
    ``CurrentFreq`` is not part of it: a locked clock that a thermal or power cap slows runs below its
    ``MaxFreq`` without being unlocked (:func:`parse_jetson_clocks_throttled` says which). None when no
    such line is found.
    """
    lines = _show_lines(text)
    return _locked(lines) if lines else None


def _below(name: str, cur: int | None, locked: int, unit: str) -> str | None:
    if cur is None or cur >= locked * (1 - THROTTLE_TOLERANCE):
        return None
    return f"{name} at {cur} {unit}, below its locked {locked} {unit}"


def parse_jetson_clocks_throttled(text: str) -> list[str]:
    """The locked GPU clock of ``jetson_clocks --show`` (``MinFreq == MaxFreq``) when its ``CurrentFreq``
    is more than :data:`placetune.backends.clocks.THROTTLE_TOLERANCE` below it when read: a thermal or
    power cap slowing a locked board, not clocks left unlocked (``["GPU at 918000000 Hz, below its
    locked 1300500000 Hz"]``; a CPU's ``CurrentFreq`` is not judged, :func:`_throttled`)."""
    return _throttled(_show_lines(text))


#: the Jetson GPU's devfreq node names (``/sys/class/devfreq/<name>``): ``17000000.gpu`` (Orin,
#: L4T R36), ``17000000.ga10b`` (Orin, R35), ``17000000.gv11b`` (Xavier)
_GPU_DEVFREQ = re.compile(r"^[0-9a-f]+\.(?:gpu|ga10b|gv11b|gp10b)$")


#: a frequency as the kernel writes it in sysfs: ASCII digits (int() also reads "-5", "+5", "1_000", other
#: scripts' digits and thousands of digits), at most 19 of them
_FREQ = re.compile(r"\s*([0-9]{1,19})\s*", re.ASCII)


def _int_file(path: Path) -> int | None:
    """A positive frequency read from ``path``; None when unreadable, or not one (garbage, 0, negative)."""
    m = _FREQ.fullmatch(_read(path) or "")
    return int(m.group(1)) or None if m else None


def _sysfs_clocks(root: str | os.PathLike[str]) -> tuple[list[tuple[str, int | None, int, int]], bool]:
    """``(clocks, gpu_read)``: ``(name, cur, min, max)`` of every online CPU's cpufreq (kHz) and the
    Jetson GPU's devfreq node (Hz) whose limits could be read."""
    base = Path(root)
    found: list[tuple[str, int | None, int, int]] = []
    for cpufreq in sorted((base / "devices/system/cpu").glob("cpu[0-9]*/cpufreq")):
        if (_read(cpufreq.parent / "online") or "1").strip() == "0":
            continue
        lo, hi = _int_file(cpufreq / "scaling_min_freq"), _int_file(cpufreq / "scaling_max_freq")
        if lo is not None and hi is not None:
            found.append((cpufreq.parent.name, _int_file(cpufreq / "scaling_cur_freq"), lo, hi))
    gpu_read = False
    devfreq = base / "class/devfreq"
    for node in sorted(devfreq.iterdir()) if devfreq.is_dir() else []:
        if _GPU_DEVFREQ.match(node.name):
            lo, hi = _int_file(node / "min_freq"), _int_file(node / "max_freq")
            if lo is not None and hi is not None:
                found.append(("GPU", _int_file(node / "cur_freq"), lo, hi))
                gpu_read = True
    return found, gpu_read


def read_clocks_sysfs(root: str | os.PathLike[str] = "/sys") -> bool | None:
    """Whether the clocks are fixed, from world-readable sysfs (no root needed, unlike
    ``jetson_clocks --show``): every online CPU's ``cpufreq/scaling_min_freq == scaling_max_freq``
    and the GPU's devfreq ``min_freq == max_freq``, which is what ``jetson_clocks`` sets (its
    ``--show`` prints these as ``MinFreq``/``MaxFreq``). None unless both a CPU and the Jetson GPU's
    devfreq node were read (not a Jetson, or an unknown layout)."""
    found, gpu_read = _sysfs_clocks(root)
    return _locked(found) if gpu_read and len(found) >= 2 else None


def read_throttled_sysfs(root: str | os.PathLike[str] = "/sys") -> list[str]:
    """:func:`parse_jetson_clocks_throttled` from sysfs (the devfreq ``cur_freq``: world-readable): the
    locked GPU clock when it runs below its locked frequency now. A CPU's ``scaling_cur_freq`` is not
    judged: on Orin the cpufreq driver may give back a frequency regenerated from counters, not the one
    set (NVIDIA's tegra194-cpufreq patch of October 2023), and a reader of ``cpuinfo_cur_freq`` such as
    jtop's service copies it there."""
    return _throttled(_sysfs_clocks(root)[0])


def read_clocks_state() -> tuple[bool | None, list[str]]:
    """``(locked, throttled)``: whether jetson_clocks has locked the clocks (True/False, None when
    unknown) and which locked clocks run below their locked frequency when read (thermal or power
    cap: recorded, not taken for unlocked clocks). ``jetson_clocks --show`` first; where it cannot
    answer (it needs root, and a night usually runs as a user) the same files read from sysfs
    (:func:`read_clocks_sysfs`, :func:`read_throttled_sysfs`)."""
    out = _run(["jetson_clocks", "--show"])
    shown = parse_jetson_clocks(out) if out else None
    if shown is not None:
        return shown, parse_jetson_clocks_throttled(out or "")
    return read_clocks_sysfs(), read_throttled_sysfs()


def read_clocks() -> bool | None:
    """True when jetson_clocks has locked the clocks, False when not, None when unknown
    (:func:`read_clocks_state`)."""
    return read_clocks_state()[0]


def read_throttled() -> list[str]:
    """The locked clocks that run below their locked frequency now (:func:`read_clocks_state`)."""
    return read_clocks_state()[1]


def find_trtexec() -> str | None:
    """Path of trtexec: on PATH or in JetPack's ``/usr/src/tensorrt/bin``."""
    found = shutil.which("trtexec")
    if found:
        return found
    for d in TRTEXEC_DIRS:
        p = Path(d) / "trtexec"
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None
