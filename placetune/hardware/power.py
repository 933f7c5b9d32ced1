"""Jetson power rails (INA3221) sampled during timed runs -> mean power (W) and energy (mJ).

Jetson modules carry INA3221 power monitors whose rails Linux exposes in sysfs. The layout
and the rail names differ between generations, so rails are discovered, not hard-coded:

* **Orin (JetPack 5/6, mainline ``ina3221`` hwmon driver)**::

      /sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in1_label     VDD_GPU_SOC (AGX) / VDD_IN (NX, Nano)
      /sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/in1_input     bus voltage, mV
      /sys/bus/i2c/drivers/ina3221/1-0040/hwmon/hwmon3/curr1_input   current, mA

  channels 1-3 (``in4``-``in6`` are shunt voltages in uV and ``in7`` their sum: not rails);
  labels ``NC`` are unconnected channels. Power = mV x mA.
* **Xavier (JetPack 4/5, NVIDIA's ``ina3221x`` IIO driver)**::

      /sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0/rail_name_0        GPU (AGX) / VDD_IN (NX)
      /sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0/in_power0_input    mW
      /sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0/in_current0_input  mA
      /sys/bus/i2c/drivers/ina3221x/1-0040/iio:device0/in_voltage0_input  mV

The **module total** counts every current once. It is the input rail where the module has one
(``VDD_IN`` on Orin NX/Nano and Xavier NX, ``POM_5V_IN`` on Nano), else the sum of the rails
that no other rail contains (:data:`SUB_RAILS`): AGX Orin ``VDD_GPU_SOC + VDD_CPU_CV +
VIN_SYS_5V0`` (``VDDQ_VDD2_1V8AO`` is fed from ``VIN_SYS_5V0`` and already inside it), AGX
Xavier ``GPU + CPU + SOC + CV + VDDRQ + SYS5V`` (six supplies in parallel). jetson-stats adds
all four AGX Orin rails; the Developer Guide's rail table says not to (sources per module at
:data:`SUB_RAILS` and in ``docs/power-modes.md``, "Energy"). Pass ``total_rails`` to choose.

Where no rail can be read (not a Jetson, a container without ``/sys``, no permission) the
power and the energy are **unknown** (None), never zero. So are they where a rail of the module
total cannot be read or is absent while rails inside it are found (Orin NX's ``VDD_IN`` with its
``VDD_CPU_GPU_CV`` and ``VDD_SOC``): the sum of the inner rails leaves the memory, IO and
regulators out, a figure lower than the module's that would pass for it. The reading's
``reason`` names the rail and why (its file, the error).

Layouts and names come from the Linux ``ina3221`` hwmon documentation and public Jetson
rail tables (energymon ``JetsonPowerRails.md``, jetson-stats); they were checked against
fake trees in ``tests/fakes/sysfs`` only, not on a device.

Hooking it into a runner: sample for the whole run and ask for the timed window afterwards.
Stamps are ``time.monotonic()`` (CLOCK_MONOTONIC, the same in every process on Linux), so a
worker process can report when its timed loop started and ended and the parent gets the
power of exactly that window::

    with PowerSampler() as ps:
        reply = run_the_worker()          # it returns t0 = time.monotonic() before, t1 after timing
    reading = ps.reading(reply["t0"], reply["t1"])
    energy = energy_per_inference_mj(reading.mean_w, ms_per_inference=reply["ms_per_inference"])

Example:
    >>> from placetune.hardware.power import PowerSampler, energy_per_inference_mj
    >>> with PowerSampler(root="tests/fakes/sysfs/orin-nx", interval_s=0.01) as ps:  # doctest: +SKIP
    ...     run_inferences()
    >>> r = ps.reading()                                                       # doctest: +SKIP
    >>> r.mean_w, energy_per_inference_mj(r.mean_w, qps=250.0)                  # doctest: +SKIP
    (7.2, 28.8)
"""

from __future__ import annotations

import glob
import logging
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "Rail", "PowerReading", "PowerSampler", "discover_rails", "default_total_rails", "energy_per_inference_mj",
    "INPUT_RAILS", "SUB_RAILS", "HWMON_GLOB", "IIO_GLOB",
]

log = logging.getLogger(__name__)

#: Rails that measure the whole module's input (used alone as the total when present).
INPUT_RAILS = ("VDD_IN", "POM_5V_IN", "5V_IN")
#: Rails measured downstream of another rail: their current is already inside that rail, so they
#: are never added to it (still sampled and reported per rail). Sources, per module:
SUB_RAILS = {
    # AGX Orin (p3701), INA3221 0x40: VDD_GPU_SOC, VDD_CPU_CV, VIN_SYS_5V0; 0x41: NC,
    # VDDQ_VDD2_1V8AO, NC. Jetson Linux Developer Guide (r35/r36), Platform Power and Performance,
    # "Software-Based Power Consumption Modeling", rail VIN_SYS_5V0: "Power consumed by system 5V
    # rail which supplies to various IOs e.g. HDMI, USB, UPHY, UFS, SDMMC, EMMC, DDR etc.
    # VDDQ_VDD2_1V8AO power is also included in VIN_SYS_5V0 power." (as public code copies the
    # guide's table; the page itself was not read past its opening). Also energymon
    # jetson/JetsonPowerRails.md ("VIN_SYS_5V0 in turn supplies VDDQ_VDD2_1V8AO", after NVIDIA
    # forum thread 223111), whose AGX Orin default is the other three rails.
    "VDDQ_VDD2_1V8AO": "VIN_SYS_5V0",
    # Orin NX / Orin Nano (p3767) and Xavier NX (p3668), INA3221 0x40: VDD_IN, VDD_CPU_GPU_CV,
    # VDD_SOC. VDD_IN is the module's power input pin (Orin NX/Nano Product Design Guide DG-10931
    # 6.1); Xavier NX: NVIDIA forum 200883, "VDD_IN is the total power of module"; jetson-stats
    # jtop/core/power.py total_power takes VDD_IN alone (after NVIDIA forum 242804/5, Orin NX).
    "VDD_CPU_GPU_CV": "VDD_IN",
    "VDD_SOC": "VDD_IN",
    # Nano (p3448; no DLA, no placetune platform): POM_5V_IN, POM_5V_GPU, POM_5V_CPU. NVIDIA forum
    # 73608/8: "POM_5V_IN ... represents the total power consumption. You don't need to add
    # POM_5V_GPU and POM_5V_CPU to it" (rbonghi/jetson_stats#51).
    "POM_5V_GPU": "POM_5V_IN",
    "POM_5V_CPU": "POM_5V_IN",
    # AGX Xavier (p2888): GPU, CPU, SOC / CV, VDDRQ, SYS5V: none is inside another. Jetson AGX
    # Xavier Series Product Design Guide (DG-09840) 5.6.2 and 5.2: SYS_VIN_HV feeds the GPU, CPU,
    # SOC, CV and DDRQ supplies and SYS_VIN_MV the 5V one, both derived from the main input and
    # not one from the other; so the sum of the six (jetson-stats and energymon alike).
}
#: Orin (hwmon) and Xavier (IIO) rail directories, relative to the sysfs root.
HWMON_GLOB = "sys/bus/i2c/drivers/ina3221/*/hwmon/hwmon*"
IIO_GLOB = "sys/bus/i2c/drivers/ina3221x/*/iio:device*"
_SKIP_LABELS = {"NC", "", "SUM OF SHUNT VOLTAGES"}


def _read_number(path: str) -> float | None:
    try:
        with open(path, "rb") as fh:
            text = fh.read(64).decode("ascii", "replace").strip()
        return float(text)
    except (OSError, ValueError):
        return None


def _read_text(path: str) -> str | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(256).decode("utf-8", "replace").strip().strip("\x00")
    except OSError:
        return None


@dataclass(frozen=True)
class Rail:
    """One power rail.

    Attributes:
        name: the rail's label (``VDD_GPU_SOC``, ``GPU``, ``VDD_IN``...).
        device: the I2C device directory (``1-0040``).
        channel: channel number as the driver numbers it (hwmon: 1-3; IIO: 0-2).
        kind: ``hwmon`` (Orin) or ``iio`` (Xavier).
        power_path: a file giving power directly (IIO ``in_power<N>_input``, mW), or None.
        voltage_path: bus voltage (mV), when power is computed.
        current_path: current (mA), when power is computed.
    """

    name: str
    device: str
    channel: int
    kind: str
    power_path: str | None = None
    voltage_path: str | None = None
    current_path: str | None = None

    def problem(self) -> str | None:
        """Why :meth:`read_w` gives None (the file and the error), None when it reads."""
        paths = [self.power_path] if self.power_path is not None else []
        if not paths or _read_number(paths[0]) is None:
            paths += [p for p in (self.voltage_path, self.current_path) if p is not None]
        for path in paths:
            try:
                with open(path, "rb") as fh:
                    text = fh.read(64).decode("ascii", "replace").strip()
            except OSError as exc:
                return f"{os.path.basename(path)} cannot be read ({exc.strerror or exc})"
            try:
                float(text)
            except ValueError:
                if path != self.power_path or self.voltage_path is None:
                    return f"{os.path.basename(path)} cannot be read as a number ({text[:20]!r})"
        if self.read_w() is not None:
            return None
        return f"{os.path.basename(str(self.power_path))} is not a number and no voltage and current read"

    def read_w(self) -> float | None:
        """Instantaneous power in watts (None when a file cannot be read)."""
        if self.power_path is not None:
            mw = _read_number(self.power_path)
            if mw is not None:
                return mw / 1000.0
        if self.voltage_path is None or self.current_path is None:
            return None
        mv = _read_number(self.voltage_path)
        ma = _read_number(self.current_path)
        if mv is None or ma is None:
            return None
        return mv * ma / 1e6


def _hwmon_rails(base: str) -> list[Rail]:
    rails = []
    device = Path(base).parent.parent.name
    for label_path in sorted(glob.glob(os.path.join(base, "in*_label"))):
        m = re.fullmatch(r"in(\d+)_label", os.path.basename(label_path))
        if not m:
            continue
        ch = int(m.group(1))
        label = _read_text(label_path)
        curr = os.path.join(base, f"curr{ch}_input")
        volt = os.path.join(base, f"in{ch}_input")
        if label is None or label.upper() in _SKIP_LABELS or not 1 <= ch <= 3:
            continue  # unconnected channel, or the shunt-voltage sum (in7) that has no current
        # a labelled channel whose files are missing is kept: unreadable, not absent (discover_rails)
        rails.append(Rail(label, device, ch, "hwmon", voltage_path=volt, current_path=curr))
    return rails


def _iio_rails(base: str) -> list[Rail]:
    rails = []
    device = Path(base).parent.name
    for name_path in sorted(glob.glob(os.path.join(base, "rail_name_*"))):
        m = re.fullmatch(r"rail_name_(\d+)", os.path.basename(name_path))
        if not m:
            continue
        ch = int(m.group(1))
        label = _read_text(name_path)
        if label is None or label.upper() in _SKIP_LABELS:
            continue
        power = os.path.join(base, f"in_power{ch}_input")
        volt = os.path.join(base, f"in_voltage{ch}_input")
        curr = os.path.join(base, f"in_current{ch}_input")
        if not os.path.exists(power) and not (os.path.exists(volt) and os.path.exists(curr)):
            # named but not readable: kept with its files, so that discover_rails says which is missing
            rails.append(Rail(label, device, ch, "iio", power_path=power, voltage_path=volt, current_path=curr))
            continue
        rails.append(Rail(label, device, ch, "iio", power_path=power if os.path.exists(power) else None,
                          voltage_path=volt if os.path.exists(volt) else None,
                          current_path=curr if os.path.exists(curr) else None))
    return rails


def discover_rails(root: str | os.PathLike[str] = "/") -> list[Rail]:
    """Every readable INA3221 rail under ``root`` (the sysfs root: ``/`` on a Jetson, a
    fake tree in tests), Orin's hwmon layout and Xavier's IIO layout alike.

    Rails whose files cannot be read now are left out; an empty list means no power
    measurement here.

    Example:
        >>> [r.name for r in discover_rails("tests/fakes/sysfs/xavier-nx")]  # doctest: +SKIP
        ['VDD_IN', 'VDD_CPU_GPU_CV', 'VDD_SOC']
    """
    return _scan(root)[0]


def _scan(root: str | os.PathLike[str]) -> tuple[list[Rail], dict[str, str]]:
    """The readable rails, and ``{name: why}`` of the labelled rails that cannot be read now."""
    root = str(root)
    rails: list[Rail] = []
    for base in sorted(glob.glob(os.path.join(root, HWMON_GLOB))):
        rails.extend(_hwmon_rails(base))
    for base in sorted(glob.glob(os.path.join(root, IIO_GLOB))):
        rails.extend(_iio_rails(base))
    seen: set[str] = set()
    out = []
    unreadable: dict[str, str] = {}
    for r in rails:
        key = r.name if r.name not in seen else f"{r.name}@{r.device}:{r.channel}"
        seen.add(key)
        if r.read_w() is None:
            unreadable[key] = f"{r.device} channel {r.channel}: {r.problem()}"
            log.debug("power rail %s (%s) is not readable: left out", r.name, r.device)
            continue
        out.append(r if key == r.name else Rail(key, r.device, r.channel, r.kind, r.power_path,
                                                r.voltage_path, r.current_path))
    return out, unreadable


def default_total_rails(names: list[str]) -> list[str]:
    """The rails whose sum is the module's power: an input rail alone (``VDD_IN``,
    ``POM_5V_IN``, ``5V_IN``) when there is one, else every rail that is not inside another
    rail (:data:`SUB_RAILS`: AGX Orin's ``VDDQ_VDD2_1V8AO`` is inside ``VIN_SYS_5V0``).

    A rail inside another is never summed: where ``names`` has it without the rail it is inside
    (``VDD_SOC`` without ``VDD_IN``: unreadable or absent), that outer rail is still in the
    total, and the sampler then gives the power as unknown, not as the inner rails' sum.

    Example:
        >>> default_total_rails(["VDD_GPU_SOC", "VDD_CPU_CV", "VIN_SYS_5V0", "VDDQ_VDD2_1V8AO"])
        ['VDD_GPU_SOC', 'VDD_CPU_CV', 'VIN_SYS_5V0']
        >>> default_total_rails(["VDD_CPU_GPU_CV", "VDD_SOC"])
        ['VDD_IN']
    """
    for n in INPUT_RAILS:
        if n in names:
            return [n]
    outer = list(dict.fromkeys(SUB_RAILS[n] for n in names if n in SUB_RAILS))
    if any(n in INPUT_RAILS for n in outer):
        return [n for n in outer if n in INPUT_RAILS][:1]
    return [n for n in names if n not in SUB_RAILS] + [n for n in outer if n not in names]


def energy_per_inference_mj(power_w: float | None, *, qps: float | None = None,
                            ms_per_inference: float | None = None) -> float | None:
    """Energy of one inference (one batch) in mJ: mean power x time per inference.

    ``qps`` (inferences per second) or ``ms_per_inference`` gives the time; None in, None out.

    Example:
        >>> energy_per_inference_mj(10.0, qps=500.0)   # 10 W for 2 ms
        20.0
    """
    if power_w is None:
        return None
    if ms_per_inference is None:
        if not qps or qps <= 0:
            return None
        ms_per_inference = 1000.0 / qps
    return float(power_w) * float(ms_per_inference)  # W x ms = mJ


@dataclass
class PowerReading:
    """The power over a sampled window.

    Attributes:
        mean_w: mean module power (W) over the window: the sum of ``total_rails``; None
            when unknown (no rails, or no sample in the window).
        rails_mean_w: mean power of every rail (W).
        total_rails: the rails summed into ``mean_w``.
        samples: samples in the window.
        window_s: the window's length (s).
        reason: why ``mean_w`` is None.
    """

    mean_w: float | None
    rails_mean_w: dict[str, float] = field(default_factory=dict)
    total_rails: list[str] = field(default_factory=list)
    samples: int = 0
    window_s: float = 0.0
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {"mean_w": self.mean_w, "rails_mean_w": self.rails_mean_w, "total_rails": self.total_rails,
                "samples": self.samples, "window_s": self.window_s, "reason": self.reason}


class PowerSampler:
    """Sample the power rails on a background thread; a context manager.

    Args:
        root: sysfs root (``/`` on the Jetson; a fake tree in tests). Default: the
            ``PLACETUNE_SYSFS_ROOT`` environment variable, else ``/``.
        interval_s: time between samples (the INA3221 itself averages over its
            conversion window; 20-100 ms is a sensible range).
        rails: rails to sample (default: :func:`discover_rails`).
        total_rails: rail names whose sum is the module power (default:
            :func:`default_total_rails`). A name that is not discovered makes the power unknown.

    Samples carry ``time.monotonic()`` stamps, so a caller can ask for the mean power of
    the exact timed window (:meth:`reading` with ``start``/``end``).

    Example:
        >>> with PowerSampler(root="/nonexistent") as ps:
        ...     pass
        >>> ps.available, ps.reading().mean_w
        (False, None)
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        interval_s: float = 0.05,
        *,
        rails: list[Rail] | None = None,
        total_rails: list[str] | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError("interval_s must be > 0")
        self.root = str(root if root is not None else os.environ.get("PLACETUNE_SYSFS_ROOT", "/"))
        self.interval_s = float(interval_s)
        self.rails, self._unreadable = (list(rails), {}) if rails is not None else _scan(self.root)
        names = [r.name for r in self.rails]
        self.total_rails = list(total_rails) if total_rails is not None else default_total_rails(names)
        self._missing_total = [n for n in self.total_rails if n not in names]
        self._samples: list[tuple[float, dict[str, float]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.started_at: float | None = None
        self.stopped_at: float | None = None

    @property
    def available(self) -> bool:
        """True when there are rails to sample (and every total rail exists)."""
        return bool(self.rails) and not self._missing_total

    def __repr__(self) -> str:
        return f"PowerSampler(root={self.root!r}, rails={[r.name for r in self.rails]}, interval_s={self.interval_s})"

    # ----------------------------------------------------------------- sampling
    def sample(self) -> dict[str, float]:
        """Read every rail once (W) and keep the sample."""
        now = time.monotonic()
        values = {}
        for r in self.rails:
            w = r.read_w()
            if w is not None:
                values[r.name] = w
        with self._lock:
            self._samples.append((now, values))
        return values

    def _run(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self.sample()
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (slow sysfs reads): do not burst
                next_t = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def start(self) -> "PowerSampler":
        """Start sampling (nothing happens when no rail is available)."""
        self.started_at = time.monotonic()
        if self.available and self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="placetune-power", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (one last sample is taken so that short windows have an end point)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(timeout=max(1.0, 5 * self.interval_s))
            self._thread = None
            self.sample()
        self.stopped_at = time.monotonic()

    def __enter__(self) -> "PowerSampler":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ----------------------------------------------------------------- results
    @property
    def samples(self) -> list[tuple[float, dict[str, float]]]:
        """``(monotonic time, {rail: W})`` of every sample so far."""
        with self._lock:
            return list(self._samples)

    def _missing_reason(self) -> str:
        """Why the module power is unknown: each total rail that was not read, and why."""
        names = [r.name for r in self.rails]
        parts = []
        for n in self._missing_total:
            inner = [x for x in names if SUB_RAILS.get(x) == n]
            why = (f"rail {n} was found but cannot be read ({self._unreadable[n]})" if n in self._unreadable
                   else f"rail {n} not found")
            if inner:
                why += (f"; {', '.join(inner)} {'is' if len(inner) == 1 else 'are'} inside it, so their sum"
                        f" is not the module's power")
            parts.append(why)
        return "; ".join(parts) + f"; rails here: {', '.join(names) or 'none'}"

    def reading(self, start: float | None = None, end: float | None = None) -> PowerReading:
        """Mean power over ``[start, end]`` (``time.monotonic()`` values; default: all samples).

        A window with no sample of its own takes the samples next to it (a run shorter than
        the sampling interval still gets the power around it)."""
        if not self.rails:
            return PowerReading(None, reason=f"no INA3221 power rails under {self.root} "
                                "(sys/bus/i2c/drivers/ina3221*/): not a Jetson, or /sys is not readable here")
        if self._missing_total:
            return PowerReading(None, total_rails=self.total_rails, reason=self._missing_reason())
        samples = self.samples
        lo = start if start is not None else (samples[0][0] if samples else 0.0)
        hi = end if end is not None else (samples[-1][0] if samples else 0.0)
        inside = [s for s in samples if lo <= s[0] <= hi]
        if not inside and samples:
            before = [s for s in samples if s[0] < lo][-1:]
            after = [s for s in samples if s[0] > hi][:1]
            inside = before + after
        inside = [s for s in inside if all(n in s[1] for n in self.total_rails)]
        if not inside:
            return PowerReading(None, total_rails=self.total_rails, window_s=max(0.0, hi - lo),
                                reason="no power sample could be read during the timed run")
        names = sorted({n for _, v in inside for n in v})
        rails_mean = {n: sum(v.get(n, 0.0) for _, v in inside) / len(inside) for n in names}
        mean_w = sum(sum(v[n] for n in self.total_rails) for _, v in inside) / len(inside)
        return PowerReading(float(mean_w), rails_mean, list(self.total_rails), len(inside), max(0.0, hi - lo))
