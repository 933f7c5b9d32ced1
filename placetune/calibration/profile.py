"""Device profiles: a simulated device as a built-in platform plus multiplicative corrections.

A device profile describes how a real (or imagined) Jetson differs from the nominal simulated
one. It is what ``placetune calibrate`` learns from stored measurements and what
``--device-profile FILE`` makes the simulated backend measure with. The TOML layout::

    base = "orin-agx"          # a built-in platform
    [scale]                    # multiplicative factors on the simulator's own terms (1.0 = unchanged)
    gpu = 1.0                  # every GPU layer time
    dla = 1.0                  # every DLA layer time
    boundary = 1.0             # every GPU<->DLA boundary (reformat/copy/sync) cost
    loadable = 1.0             # per-DLA-loadable overhead
    contention = 1.0           # strength of DRAM contention between busy devices
    [scale.op_class]           # "<gpu|dla>.<op class>" = factor
    [scale.layer]              # "<gpu|dla>.<layer name>" = factor
    [add]
    engine_us = 0.0            # extra launch + synchronisation cost per engine per inference (us)
    [noise]
    layer_sigma = 0.0          # a fixed lognormal factor per (device kind, layer), seeded
    seed = 0

Everything a profiled simulator reports is still simulated.
"""

from __future__ import annotations

import hashlib
import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from placetune.errors import ConfigError
from placetune.validate import loads_toml
from placetune.files.read import read_text
from placetune.hardware.platforms import platform_names
from placetune.safetext import shown

if TYPE_CHECKING:
    from placetune.backends.simulate.costs import CostTable

__all__ = ["DeviceProfile", "load_device_profile", "OP_CLASSES", "KINDS"]

#: Op classes of the simulator (``costs.op_class``), the keys of ``[scale.op_class]`` after the kind.
OP_CLASSES = ("conv", "matmul", "depthwise", "eltwise", "pool", "norm", "shuffle", "free")
#: Device kinds of the cost table rows: row 0 = GPU, row 1 = a DLA core.
KINDS = ("gpu", "dla")
_SCALES = ("gpu", "dla", "boundary", "loadable", "contention")
_TABLES = {"base", "scale", "add", "noise"}


#: The range of every multiplicative factor, of ``add.engine_us`` and of ``noise.layer_sigma``:
#: wide enough for any real device, narrow enough that no product of them overflows to an
#: infinite or NaN time (``layer_sigma = 1e300`` made NaN times and a schedule that never ended).
FACTOR_RANGE = (1e-3, 1e3)
ENGINE_US_RANGE = (-1e6, 1e6)
LAYER_SIGMA_RANGE = (0.0, 3.0)


def _number(value: Any, key: str, *, positive: bool = False, minimum: float | None = None,
            bounds: tuple[float, float] | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"device profile: {key} must be a number, not {type(value).__name__} {value!r}")
    try:
        v = float(value)
    except OverflowError:  # an integer beyond a float
        v = math.inf
    if not math.isfinite(v):
        raise ConfigError(f"device profile: {key} must be finite, got {str(value)[:40]}")
    if positive and v <= 0:
        raise ConfigError(f"device profile: {key} must be > 0 (a multiplicative factor), got {value!r}")
    if minimum is not None and v < minimum:
        raise ConfigError(f"device profile: {key} must be >= {minimum:g}, got {value!r}")
    if bounds is not None and not bounds[0] <= v <= bounds[1]:
        raise ConfigError(f"device profile: {key} must be from {bounds[0]:g} to {bounds[1]:g}, got {value!r}")
    return v


def _factor_map(d: Any, key: str, check_class: bool) -> dict[str, float]:
    if not isinstance(d, Mapping):
        raise ConfigError(f"device profile: {key} must be a table of \"<gpu|dla>.<name>\" = factor")
    out = {}
    for k, v in d.items():
        kind, dot, name = str(k).partition(".")
        if kind not in KINDS or not dot or not name:
            raise ConfigError(f"device profile: {key} key {k!r} must look like \"gpu.<name>\" or \"dla.<name>\"")
        if check_class and name not in OP_CLASSES:
            raise ConfigError(f"device profile: {key} key {k!r}: unknown op class {name!r}; "
                              f"op classes are {', '.join(OP_CLASSES)}")
        out[str(k)] = _number(v, f"{key}.{k}", positive=True, bounds=FACTOR_RANGE)
    return dict(sorted(out.items()))


def _unit_normal(seed: int, kind: str, name: str) -> float:
    """A standard normal draw fixed by (seed, kind, layer name) (Box-Muller on two CRC32 hashes)."""
    a = zlib.crc32(f"{seed}:{kind}:{name}:a".encode())
    b = zlib.crc32(f"{seed}:{kind}:{name}:b".encode())
    u1 = (a + 0.5) / 2.0**32
    u2 = (b + 0.5) / 2.0**32
    return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


@dataclass(frozen=True)
class DeviceProfile:
    """A simulated device: a built-in platform plus multiplicative corrections of the simulator.

    Attributes:
        base: built-in platform name (``orin-agx``...).
        gpu, dla: factor on every GPU / DLA layer time.
        boundary: factor on every GPU<->DLA boundary and model input/output reformat cost.
        loadable: factor on the per-DLA-loadable overhead.
        contention: factor on the DRAM-contention sensitivity of every device.
        op_class: ``"<gpu|dla>.<op class>"`` -> factor (op classes of ``costs.op_class``).
        layer: ``"<gpu|dla>.<layer name>"`` -> factor (layers a model lacks are ignored).
        engine_us: extra launch + synchronisation cost per engine per inference, microseconds
            (added to the simulator's own per-engine cost; the sum is floored at 0).
        layer_sigma: sd of a fixed lognormal factor (median 1) per (device kind, layer), drawn
            from ``seed`` and the layer name: effects no class-level scale explains.
        seed: seed of those factors.

    Example:
        >>> p = DeviceProfile.from_dict({"base": "orin-agx", "scale": {"dla": 1.3}})
        >>> p.dla, p.gpu
        (1.3, 1.0)
    """

    base: str
    gpu: float = 1.0
    dla: float = 1.0
    boundary: float = 1.0
    loadable: float = 1.0
    contention: float = 1.0
    op_class: Mapping[str, float] = field(default_factory=dict, hash=False)
    layer: Mapping[str, float] = field(default_factory=dict, hash=False)
    engine_us: float = 0.0
    layer_sigma: float = 0.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.base, str) or self.base not in platform_names():
            raise ConfigError(f"device profile: base {self.base!r} is not a built-in platform; "
                              f"platforms are {', '.join(platform_names())}")
        for name in _SCALES:
            object.__setattr__(self, name, _number(getattr(self, name), f"scale.{name}", positive=True,
                                                   bounds=FACTOR_RANGE))
        object.__setattr__(self, "op_class", MappingProxyType(_factor_map(self.op_class, "scale.op_class", True)))
        object.__setattr__(self, "layer", MappingProxyType(_factor_map(self.layer, "scale.layer", False)))
        object.__setattr__(self, "engine_us", _number(self.engine_us, "add.engine_us", bounds=ENGINE_US_RANGE))
        object.__setattr__(self, "layer_sigma", _number(self.layer_sigma, "noise.layer_sigma", minimum=0.0,
                                                        bounds=LAYER_SIGMA_RANGE))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise ConfigError(f"device profile: noise.seed must be an integer from 0 to 4294967295, not "
                              f"{str(self.seed)[:40]!r}")

    # ------------------------------------------------------------------ constructors
    @classmethod
    def nominal(cls, base: str) -> "DeviceProfile":
        """The uncorrected simulator of platform ``base`` (every factor 1, nothing added)."""
        return cls(base=base)

    @classmethod
    def from_dict(cls, d: Mapping) -> "DeviceProfile":
        """From the TOML layout (see the module docstring).

        Raises:
            ConfigError: unknown keys or tables, wrong types, unknown base, a scale <= 0,
                non-finite numbers; the message names the key.
        """
        if not isinstance(d, Mapping):
            raise ConfigError("device profile must be a table with base, [scale], [add], [noise]")
        unknown = set(d) - _TABLES
        if unknown:
            raise ConfigError(f"device profile: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                              "allowed: base, [scale], [add], [noise]")
        if "base" not in d:
            raise ConfigError("device profile: base is missing (a built-in platform, e.g. base = \"orin-agx\")")
        kw: dict[str, Any] = {"base": d["base"]}
        for table, allowed in (("scale", set(_SCALES) | {"op_class", "layer"}), ("add", {"engine_us"}),
                               ("noise", {"layer_sigma", "seed"})):
            sub = d.get(table, {})
            if not isinstance(sub, Mapping):
                raise ConfigError(f"device profile: {table} must be a table ([{table}])")
            bad = set(sub) - allowed
            if bad:
                raise ConfigError(f"device profile: unknown key(s) in [{table}]: {', '.join(sorted(map(str, bad)))}; "
                                  f"allowed: {', '.join(sorted(allowed))}")
            kw.update(sub)
        return cls(**kw)

    # ------------------------------------------------------------------ output
    def as_dict(self) -> dict[str, Any]:
        """The TOML layout as nested dicts (only what differs from nominal, ``base`` always)."""
        scale: dict[str, Any] = {k: getattr(self, k) for k in _SCALES if getattr(self, k) != 1.0}
        if self.op_class:
            scale["op_class"] = dict(self.op_class)
        if self.layer:
            scale["layer"] = dict(self.layer)
        out: dict[str, Any] = {"base": self.base}
        if scale:
            out["scale"] = scale
        if self.engine_us:
            out["add"] = {"engine_us": self.engine_us}
        if self.layer_sigma or self.seed:
            out["noise"] = {"layer_sigma": self.layer_sigma, "seed": self.seed}
        return out

    def to_toml(self) -> str:
        """The profile as a TOML document that :func:`load_device_profile` reads back exactly."""
        def num(v: float) -> str:
            return repr(float(v))

        lines = [f"base = {json.dumps(self.base)}", "", "[scale]"]
        lines += [f"{k} = {num(getattr(self, k))}" for k in _SCALES]
        for table in ("op_class", "layer"):
            lines += ["", f"[scale.{table}]"]
            lines += [f"{json.dumps(k)} = {num(v)}" for k, v in getattr(self, table).items()]
        lines += ["", "[add]", f"engine_us = {num(self.engine_us)}",
                  "", "[noise]", f"layer_sigma = {num(self.layer_sigma)}", f"seed = {int(self.seed)}", ""]
        return "\n".join(lines)

    def digest(self) -> str:
        """A short content hash (part of the simulated backend's fingerprint)."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()[:16]

    @property
    def is_nominal(self) -> bool:
        """True when the profile changes nothing."""
        return self.as_dict() == {"base": self.base}

    # ------------------------------------------------------------------ application
    def layer_factors(self, table: "CostTable") -> np.ndarray:
        """(2, n) multiplicative factors per (GPU row, DLA row) and layer of a cost table.

        The product of the device scale, the op-class scale of the layer, the layer's own
        scale and its fixed noise factor.
        """
        g = table.g
        f = np.empty((2, g.n))
        f[0], f[1] = self.gpu, self.dla
        cls = np.asarray(g.cls)
        for key, v in self.op_class.items():
            kind, _, name = key.partition(".")
            f[KINDS.index(kind), cls == name] *= v
        for key, v in self.layer.items():
            kind, _, name = key.partition(".")
            i = g.index.get(name)
            if i is not None:
                f[KINDS.index(kind), i] *= v
        if self.layer_sigma > 0:
            for r, kind in enumerate(KINDS):
                z = np.array([_unit_normal(self.seed, kind, n) for n in g.names])
                f[r] *= np.exp(self.layer_sigma * z)
        return f


def load_device_profile(path: str | Path) -> DeviceProfile:
    """Read a device profile TOML file.

    Raises:
        ConfigError: unreadable file, TOML syntax error or a bad key (the message names the
            file and the key).
    """
    text = read_text(path, "device profile")  # regular files only (never a FIFO or a device), at most 16 MiB
    doc = loads_toml(text, f"device profile {shown(path)}")  # nesting and dotted keys bounded before tomllib
    try:
        return DeviceProfile.from_dict(doc)
    except ConfigError as exc:
        raise ConfigError(f"{shown(path)}: {exc}") from None
