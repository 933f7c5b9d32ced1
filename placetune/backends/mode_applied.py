"""Whether the Jetson runs the nvpmodel power mode it reports, judged from what a user can read.

nvpmodel's status file (``/var/lib/nvpmodel/status``, ``pmode:NNNN``) and ``nvpmodel -q`` say which
mode nvpmodel last *set*, not what the board runs: a board whose nvpmodel service failed at boot
reports its file's mode while running other clocks. A mode is a set of writes to sysfs files, which
the module's nvpmodel configuration (``/etc/nvpmodel.conf``, world-readable; NVIDIA's files, e.g.
``nvpmodel_p3701_0000.conf``) lists: each ``< PARAM TYPE=... NAME=... >`` section names the file
each argument writes (``CPU_A78_0``'s ``MAX_FREQ`` is ``/sys/devices/system/cpu/cpu0/cpufreq/
scaling_max_freq``), each ``< POWER_MODEL ID=.. NAME=.. >`` section the values of its mode
(``CPU_ONLINE CORE_8 0``, ``CPU_A78_0 MAX_FREQ 1728000``; ``-1``: no cap). This module reads the
files back, as a user, and names every one that differs (:func:`cpu_not_applied`):

* **CPU cores online**: ``/sys/devices/system/cpu/online`` (the kernel's list, ``0-7``) against the
  mode's ``CPU_ONLINE CORE_<n>`` lines;
* **CPU max frequency per cluster**: the ``scaling_max_freq`` file each ``CPU_*`` clock's ``MAX_FREQ``
  writes, against the mode's value (``-1``: the cluster's ``cpuinfo_max_freq``, its hardware
  maximum), within :data:`~placetune.backends.clocks.MODE_CAP_TOLERANCE`; a cluster the mode gives no
  ``MAX_FREQ`` line (its cores offline: AGX Orin 15W's ``CPU_A78_1``/``CPU_A78_2``) is not judged;
* the GPU cap: :func:`placetune.backends.clocks.mode_not_applied` (devfreq ``max_freq`` against the
  cap of NVIDIA's file as transcribed); where the mode leaves the GPU uncapped (``GPU MAX_FREQ -1``:
  MAXN), :func:`gpu_uncapped_not_applied` compares ``max_freq`` with the top of the node's
  ``available_frequencies``.

**Not checked: the EMC and DLA caps.** nvpmodel writes them to ``/sys/kernel/nvpmodel_emc_cap/
emc_iso_cap`` and ``.../nvdla<n>/acm/clk_cap/dla<n>_core`` (the files' PARAM sections); no source
here says a user may read those, and jetson_stats, the reference reader, runs as root (its
``jtop.service`` has no ``User=``) and reads the EMC and DLA clocks from debugfs
(``/sys/kernel/debug/bpmp/debug/clk/emc``, ``/sys/kernel/debug/clk/<dla>``: root only) and
``emc_iso_cap`` behind ``os.access`` (``jtop/core/memory.py``, ``jtop/core/engine.py``). So they are
said to be not checked (:data:`NOT_CHECKED`), never guessed.

Checked against NVIDIA's real nvpmodel files (tests/data/nvpmodel_conf) and a fake sysfs tree; the
world-readability of the CPU files is the Linux kernel's (``online`` and the cpufreq files are
readable by every user), not checked on a board.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from placetune.backends.clocks import MODE_CAP_TOLERANCE

__all__ = ["ConfMode", "NvpmodelConf", "parse_nvpmodel_caps", "parse_cpu_list", "format_cpu_list",
           "cpu_not_applied", "gpu_uncapped_not_applied", "NOT_CHECKED"]

#: What is not compared with the mode, said once where the mode is judged.
NOT_CHECKED = ("EMC and DLA caps not checked: nvpmodel writes them to files (nvpmodel_emc_cap/emc_iso_cap, "
               "nvdla*/acm/clk_cap) that no source here shows a user can read, and their clocks are in debugfs "
               "(root only)")

_SECTION = re.compile(r"^\s*<\s*(PARAM|POWER_MODEL|PM_CONFIG)\b([^>]*)>")
_ATTR = re.compile(r"(\w+)=(\S+)")
_CPU_FILE = re.compile(r"^/sys/devices/system/cpu/cpu(\d+)/")


@dataclass(frozen=True)
class ConfMode:
    """One ``POWER_MODEL`` section: ``online`` (core -> 1/0 from ``CPU_ONLINE CORE_<n>``) and
    ``settings`` (``(param, arg) -> value`` as written, e.g. ``("CPU_A78_0", "MAX_FREQ") -> "1728000"``)."""

    id: int
    name: str
    online: dict[int, bool] = field(default_factory=dict)
    settings: dict[tuple[str, str], str] = field(default_factory=dict)


@dataclass(frozen=True)
class NvpmodelConf:
    """An nvpmodel configuration: ``params`` (PARAM name -> ``{arg: sysfs path}``) and ``modes`` by id."""

    params: dict[str, dict[str, str]]
    modes: dict[int, ConfMode]

    def mode(self, name: str) -> ConfMode | None:
        """The mode called ``name`` as ``nvpmodel -q`` prints it (any case; ``MODE_`` prefix optional)."""
        def norm(n: str) -> str:
            key = str(n).strip().upper()
            return key[len("MODE_"):] if key.startswith("MODE_") else key

        return next((m for m in self.modes.values() if norm(m.name) == norm(name)), None)

    def core(self, param: str, arg: str) -> int | None:
        """The CPU core whose sysfs file ``param``'s ``arg`` writes (``/sys/devices/system/cpu/cpu4/...`` -> 4)."""
        m = _CPU_FILE.match(self.params.get(param, {}).get(arg, ""))
        return int(m.group(1)) if m else None


def parse_nvpmodel_caps(text: str) -> NvpmodelConf:
    """An nvpmodel configuration file's PARAM and POWER_MODEL sections (comment lines and unknown
    lines ignored; a malformed line is skipped, never raised on).

    Example:
        >>> conf = parse_nvpmodel_caps("< PARAM TYPE=FILE NAME=CPU_ONLINE >\\n"
        ...     "CORE_4 /sys/devices/system/cpu/cpu4/online\\n< POWER_MODEL ID=1 NAME=MODE_15W >\\n"
        ...     "CPU_ONLINE CORE_4 0\\nCPU_A78_0 MAX_FREQ 1113600\\n")
        >>> m = conf.mode("15W"); m.online, m.settings[("CPU_A78_0", "MAX_FREQ")]
        ({4: False}, '1113600')
    """
    params: dict[str, dict[str, str]] = {}
    modes: dict[int, ConfMode] = {}
    section: dict[str, str] | None = None
    current: ConfMode | None = None
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        head = _SECTION.match(line)
        if head:
            attrs = dict(_ATTR.findall(head.group(2)))
            section, current = None, None
            if head.group(1) == "PARAM" and "NAME" in attrs:
                section = params.setdefault(attrs["NAME"], {})
            elif head.group(1) == "POWER_MODEL" and attrs.get("ID", "").isdigit() and "NAME" in attrs:
                current = modes.setdefault(int(attrs["ID"]), ConfMode(int(attrs["ID"]), attrs["NAME"]))
            continue
        words = line.split()
        if section is not None and len(words) == 2:
            section.setdefault(words[0], words[1])
        elif current is not None and len(words) == 3:
            current.settings.setdefault((words[0], words[1]), words[2])
    conf = NvpmodelConf(params, modes)
    for m in modes.values():
        for (param, arg), value in m.settings.items():
            if param == "CPU_ONLINE" and value in ("0", "1"):
                core = conf.core(param, arg)
                if core is None and arg.startswith("CORE_") and arg[5:].isdigit():
                    core = int(arg[5:])
                if core is not None:
                    m.online[core] = value == "1"
    return conf


def parse_cpu_list(text: str) -> set[int] | None:
    """The kernel's CPU list (``/sys/devices/system/cpu/online``: ``0-3,8``) -> ``{0, 1, 2, 3, 8}``;
    None when it is not one.

    Example:
        >>> sorted(parse_cpu_list("0-3,8\\n")), parse_cpu_list("x")
        ([0, 1, 2, 3, 8], None)
    """
    cpus: set[int] = set()
    for part in (text or "").strip().split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            return None
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus or None


def format_cpu_list(cpus: set[int]) -> str:
    """``{0, 1, 2, 3, 8}`` -> ``0-3,8`` (the kernel's form); ``none`` when empty."""
    out: list[str] = []
    for c in sorted(cpus):
        if out and "-" in out[-1] and int(out[-1].split("-")[1]) == c - 1:
            out[-1] = f"{out[-1].split('-')[0]}-{c}"
        elif out and "-" not in out[-1] and int(out[-1]) == c - 1:
            out[-1] = f"{out[-1]}-{c}"
        else:
            out.append(str(c))
    return ",".join(out) or "none"


def _int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _under(root: Path, sys_path: str) -> Path:
    """``/sys/devices/...`` as a path under ``root`` (the tree that stands for ``/sys``)."""
    return root / sys_path[len("/sys/"):] if sys_path.startswith("/sys/") else Path(sys_path)


def cpu_not_applied(conf: NvpmodelConf, mode_name: str, root: str | Path) -> list[str]:
    """One line per CPU setting of mode ``mode_name`` (as ``conf`` defines it) that the board's sysfs
    under ``root`` (standing for ``/sys``) does not show: the cores online, then each cluster's max
    frequency (the module doc says what and why). Empty when all agree, or where the mode is not in
    ``conf`` or a file cannot be read (that setting is not judged)."""
    mode = conf.mode(mode_name)
    if mode is None:
        return []
    base = Path(root)
    lines: list[str] = []
    try:
        online = parse_cpu_list((base / "devices/system/cpu/online").read_text())
    except OSError:
        online = None
    if online is not None and mode.online:
        want = {c for c, on in mode.online.items() if on}
        now = {c for c in online if c in mode.online}
        if now != want:
            lines.append(f"CPU cores online {format_cpu_list(now)}, but {mode.name} sets {format_cpu_list(want)} "
                         f"online (CPU_ONLINE lines of nvpmodel.conf)")
    for (param, arg), value in sorted(mode.settings.items()):
        if not param.startswith("CPU_") or arg != "MAX_FREQ" or param == "CPU_ONLINE":
            continue
        path = conf.params.get(param, {}).get("MAX_FREQ", "")
        if "/cpufreq/" not in path:
            continue
        now_khz = _int(_under(base, path))
        try:
            cap: int | None = int(value)
        except ValueError:
            continue
        uncapped = cap == -1
        if uncapped:  # no cap: the cluster's hardware maximum
            cap = _int(_under(base, path).with_name("cpuinfo_max_freq"))
        if now_khz is None or cap is None or cap <= 0 or abs(now_khz - cap) <= MODE_CAP_TOLERANCE * cap:
            continue
        how = (f"leaves it uncapped (its cpuinfo_max_freq: {cap} kHz)" if uncapped
               else f"caps it at {cap} kHz (MAX_FREQ in nvpmodel.conf)")
        lines.append(f"CPU cluster {param} (cpu{conf.core(param, 'MAX_FREQ')}) scaling_max_freq is {now_khz} kHz, "
                     f"but {mode.name} {how}")
    return lines


_GPU = re.compile(r"^[0-9a-f]+\.(?:gpu|ga10b|gv11b|gp10b)$")


def gpu_uncapped_not_applied(conf: NvpmodelConf, mode_name: str, root: str | Path) -> list[str]:
    """One line when mode ``mode_name`` leaves the GPU uncapped (``GPU MAX_FREQ -1`` in ``conf``) but the
    GPU's devfreq ``max_freq`` (under ``root``, standing for ``/sys``) is more than
    :data:`~placetune.backends.clocks.MODE_CAP_TOLERANCE` below the highest of its
    ``available_frequencies``; else none (a capped GPU is judged by
    :func:`placetune.backends.clocks.mode_not_applied`; a file not read: not judged)."""
    mode = conf.mode(mode_name)
    if mode is None or mode.settings.get(("GPU", "MAX_FREQ")) != "-1":
        return []
    folder = Path(root) / "class/devfreq"
    try:
        nodes = sorted(p for p in folder.iterdir() if _GPU.match(p.name))
    except OSError:
        return []
    for node in nodes:
        now = _int(node / "max_freq")
        try:
            table = [int(v) for v in (node / "available_frequencies").read_text().split()]
        except (OSError, ValueError):
            continue
        if now is None or not table:
            continue
        top = max(table)
        if now < top * (1 - MODE_CAP_TOLERANCE):
            return [f"GPU {node.name} devfreq max_freq is {now} Hz, but {mode.name} leaves it uncapped (the top of "
                    f"its available_frequencies: {top} Hz)"]
    return []
