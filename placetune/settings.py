"""Measurement settings shared by every backend (and hashed into the cache key)."""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping
import re

from placetune.errors import ConfigError, PlacementError
from placetune.inputdata import RANDOM_INPUT, check_timed_input
from placetune.placement.placement import DEVICES, normalise_device
from placetune.validate import batch as check_batch
from placetune.placement.realise import MODES

__all__ = ["Settings", "PRECISIONS", "DEFAULT_PRECISION", "parse_replicas", "resolve_replicas", "rules_version",
           "check_replica_devices", "check_trt_version", "MODE_ONLY", "check_mode_options", "IgnoredSettingError",
           "stored_settings"]

#: Precisions placetune builds with. DLA runs fp16 or int8 only.
PRECISIONS = ("fp16", "int8", "fp32")
#: The precision ``placetune tune`` (and ``placetune check``, so that both speak of the same
#: build) uses when none is given: INT8, which the DLA runs at its full rate.
DEFAULT_PRECISION = "int8"


def parse_replicas(text: str) -> dict[str, int]:
    """Parse ``GPU:256,DLA0:2,DLA1:2`` into ``{"GPU": 256, "DLA0": 2, "DLA1": 2}``.

    Raises:
        ConfigError: malformed text or a non-positive batch.
    """
    out: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        dev, sep, b = part.partition(":")
        if not sep:
            raise ConfigError(f"bad --replicas entry {part!r}: expected DEVICE:BATCH, e.g. GPU:256,DLA0:2")
        try:
            batch = int(b)
        except ValueError:
            raise ConfigError(f"bad batch in --replicas entry {part!r}") from None
        check_batch(batch, f"--replicas batch (in {part[:40]!r})")
        device = normalise_device(dev)
        if device in out:
            raise ConfigError(f"--replicas names {device} twice ({text[:80]!r}): one batch per device")
        out[device] = batch
    if not out:
        raise ConfigError("--replicas is empty; e.g. GPU:256,DLA0:2,DLA1:2")
    return out


#: Most frames in flight of a pipeline (10,000 ran for minutes; more frames than
#: a pipeline has engines add nothing).
MAX_FRAMES_IN_FLIGHT = 64
#: Most timed iterations per measurement.
MAX_ITERATIONS = 100_000


#: TensorRT versions whose DLA rules placetune knows (major, minor): 8.5 and 8.6, 10.x, 11.x.
TRT_VERSION_RANGE = ((8, 5), (11, 99))


def rules_version(installed: str) -> str:
    """The ``trt_version`` whose DLA rules fit an installed TensorRT: its major.minor (``10.3.0.30`` ->
    ``10.3``), the full version from TensorRT 11 on (11.4.0 and 11.4.1 differ on the DLA).

    Example:
        >>> rules_version("10.3.0.30"), rules_version("11.4.1")
        ('10.3', '11.4.1')
    """
    version = str(installed).strip()
    return version if version.startswith("11") else ".".join(version.split(".")[:2])


def check_trt_version(value: Any) -> None:
    """Refuse a TensorRT version whose DLA rules placetune does not know (``--trt-version 99``)."""
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)*", str(value).strip())
    ok = m is not None and TRT_VERSION_RANGE[0] <= (int(m.group(1)), int(m.group(2))) <= TRT_VERSION_RANGE[1] \
        and int(m.group(1)) != 9
    if not ok:
        raise ConfigError(f"trt_version must be a TensorRT version with DLA rules: 8.5, 8.6, 10.x or 11.x "
                          f"(e.g. 10.3), got {str(value)[:40]!r}")


#: settings that apply in some modes only, and those modes: given in another, they were silently ignored
#: (a pipeline's segments and replicas name their own DLA cores; only a pipeline keeps frames in flight).
#: ``concurrent`` is tune's merged networks, measured as a pipeline.
MODE_ONLY: dict[str, tuple[str, ...]] = {"dla_core": ("engine",), "frames_in_flight": ("pipeline", "concurrent")}


class IgnoredSettingError(ConfigError, ValueError):
    """A setting the mode would ignore (:data:`MODE_ONLY`), given to :class:`Settings` (the Python API:
    ``Evaluator``, the environments): a ``ValueError``, and a ``ConfigError`` (exit 6) as the command
    line's refusal of the same setting (:func:`check_mode_options`)."""


#: what a :data:`MODE_ONLY` field of :class:`Settings` is when not given
_NOT_GIVEN: dict[str, Any] = {"dla_core": None, "frames_in_flight": 1}


def check_mode_options(mode: str, given: Any, label: Any = str) -> None:
    """Refuse a setting of ``given`` (names) that ``mode`` would ignore; ``label(name)`` names it as the user
    gave it (``--dla-core``, ``[settings] dla_core``).

    Raises:
        ConfigError: naming the setting and the modes it applies to.
    """
    for key in given:
        modes = MODE_ONLY.get(key)
        if modes and mode not in modes:
            raise ConfigError(f"{label(key)} applies in {modes[0]} mode only, and this is {mode} mode, which "
                              f"would ignore it: leave it out, or use mode {modes[0]}")


def stored_settings(doc: Mapping[str, Any]) -> "Settings":
    """The :class:`Settings` of a stored ``to_dict()`` (a study's record, a plan file): fields this version
    does not know are left out, and so is a :data:`MODE_ONLY` field its mode ignored (taken before
    :class:`Settings` refused it: it changed nothing that was measured)."""
    mode = doc.get("mode", "engine")
    return Settings(**{k: v for k, v in doc.items() if k in Settings.__dataclass_fields__
                       and not (k in MODE_ONLY and mode not in MODE_ONLY[k])})


def _check_int(field: str, value: Any, lo: int, hi: int) -> None:
    """Refuse anything but an integer in ``[lo, hi]`` (a bool is not one), naming the field."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        raise ConfigError(f"{field} must be an integer from {lo} to {hi:,}, got {str(value)[:40]!r}")


@dataclass(frozen=True)
class Settings:
    """How a placement is built and timed. Everything here is part of the cache key.

    Attributes:
        mode: ``engine``, ``pipeline`` or ``replicas``.
        precision: ``int8`` (default: :data:`DEFAULT_PRECISION`, as the command line, the
            Evaluator and the environments), ``fp16`` (or ``fp32``: GPU only).
        gpu_fallback: TensorRT's GPU_FALLBACK flag.
        dla_core: engine mode: the engine's DLA core (None: the core the placement asks).
        trt_version: TensorRT version whose DLA rules apply.
        frames_in_flight: pipeline mode: frames in flight for the throughput figure.
        replicas: replicas mode: device -> batch (e.g. ``{"GPU": 8, "DLA0": 2, "DLA1": 2}``);
            None means the model's batch on every device of the platform.
        iterations: latency samples per measurement.
        noise: relative standard deviation of simulated timing noise (0 = deterministic).
        seed: noise seed.
        power_mode: Jetson power mode name (``MAXN``, ``50W``, ``30W``, ``15W``).
        timed_input: what the real backends time on: ``random-uniform`` (their random input) or the
            content hash of the input data given (:mod:`placetune.inputdata`, ``--input-data``). Left
            out of :meth:`to_dict` (and so of the hash) at its default, so the settings of every
            study made before it keep their hash.
    """

    mode: str = "engine"
    precision: str = DEFAULT_PRECISION
    gpu_fallback: bool = True
    dla_core: int | None = None
    trt_version: str = "8.6"
    frames_in_flight: int = 1
    replicas: dict[str, int] | None = field(default=None, hash=False)
    iterations: int = 50
    noise: float = 0.0
    seed: int = 0
    power_mode: str = "MAXN"
    timed_input: str = RANDOM_INPUT

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ConfigError(f"unknown mode {self.mode!r}; modes are {', '.join(MODES)}")
        if self.precision not in PRECISIONS:
            raise ConfigError(f"unknown precision {self.precision!r}; precisions are {', '.join(PRECISIONS)}")
        _check_int("seed", self.seed, 0, 2**32 - 1)
        if not isinstance(self.gpu_fallback, bool):  # (a TOML "false" is a true string: fallback on, not off)
            raise ConfigError(f"gpu_fallback must be true or false, got {str(self.gpu_fallback)[:40]!r}")
        if not isinstance(self.power_mode, str) or not self.power_mode or len(self.power_mode) > 64:
            raise ConfigError(f"power_mode must be a power mode name, got {str(self.power_mode)[:40]!r}")
        _check_int("frames_in_flight", self.frames_in_flight, 1, MAX_FRAMES_IN_FLIGHT)
        _check_int("iterations", self.iterations, 1, MAX_ITERATIONS)
        if (isinstance(self.noise, bool) or not isinstance(self.noise, numbers.Real) or not math.isfinite(self.noise)
                or not 0 <= self.noise <= 1):
            raise ConfigError(f"noise must be a number from 0 to 1 (a relative standard deviation), got "
                              f"{str(self.noise)[:40]!r}")
        check_trt_version(self.trt_version)
        check_timed_input(self.timed_input)
        if self.dla_core is not None:
            _check_int("dla_core", self.dla_core, 0, 1)
        if self.replicas is not None and self.mode != "replicas":
            raise IgnoredSettingError(f"replicas are for mode 'replicas', not {self.mode!r}: drop --replicas or use "
                                      "--mode replicas")
        for key, modes in MODE_ONLY.items():  # as the command line refuses them (check_mode_options)
            value = getattr(self, key)
            if value != _NOT_GIVEN[key] and self.mode not in modes:
                raise IgnoredSettingError(
                    f"{key}={str(value)[:20]} applies in {modes[0]} mode only, and this is {self.mode} mode, which "
                    f"would ignore it: leave {key} out (its default: {_NOT_GIVEN[key]}), or use mode={modes[0]!r}")
        if isinstance(self.replicas, str):  # "GPU:8,DLA0:2", as --replicas takes it
            object.__setattr__(self, "replicas", parse_replicas(self.replicas))
        if self.replicas is not None:
            if not isinstance(self.replicas, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool)
                    for k, v in self.replicas.items()):
                raise ConfigError(f"replicas must map devices to batches, e.g. {{GPU = 8, DLA0 = 2}}, got "
                                  f"{str(self.replicas)[:60]!r}")
            try:
                reps = {normalise_device(k): int(v) for k, v in self.replicas.items()}
            except PlacementError as exc:
                raise ConfigError(f"replicas: {exc}") from None
            for d, v in reps.items():
                check_batch(v, f"replica batch of {d}")
            object.__setattr__(self, "replicas", {d: reps[d] for d in DEVICES if d in reps})

    def replace(self, **changes: Any) -> "Settings":
        """A copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready); ``timed_input`` only where it is not the random input."""
        d = asdict(self)
        if d["timed_input"] == RANDOM_INPUT:
            del d["timed_input"]
        return d

    @property
    def hash(self) -> str:
        """Hash of the settings that change a measurement (16 hex chars)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def resolve_replicas(settings: Settings, model_batch: int, devices: tuple[str, ...],
                     platform_name: str) -> tuple[dict[str, int], str | None]:
    """The replica set of a replicas-mode measurement and why it cannot run, if it cannot.

    Args:
        settings: ``settings.replicas`` (None: every device at the model's batch).
        model_batch: the model's batch size.
        devices: the platform's devices.
        platform_name: for the message.

    Returns:
        (device -> batch, None) or (device -> batch, reason the platform lacks a device).
    """
    reps = settings.replicas or {d: int(model_batch) for d in devices}
    missing = [d for d in reps if d not in devices]
    if missing:
        return reps, (f"replicas ask for {', '.join(missing)} but {platform_name} has only "
                      f"{', '.join(devices)}; use e.g. --replicas GPU:8")
    return reps, None


def check_replica_devices(settings: Settings, devices: tuple[str, ...], platform_name: str) -> None:
    """Refuse replicas on a device the platform does not have (else every trial of a study is infeasible).

    Raises:
        ConfigError: naming the devices asked for and those the platform has.
    """
    lacking = [d for d in (settings.replicas or {}) if d not in devices]
    if settings.mode == "replicas" and lacking:
        raise ConfigError(f"replicas ask for {', '.join(lacking)}, which {platform_name} does not have: replicas "
                          f"may name {', '.join(devices)} (e.g. --replicas GPU:8)")
