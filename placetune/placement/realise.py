"""Realisation: what TensorRT would actually run for a requested placement.

Requested placement is not realised placement (DESIGN.md): layers the DLA cannot run
fall back to the GPU (with GPU_FALLBACK) or fail the build (without); DLA islands
beyond 16 per core are switched to the GPU; one engine uses one DLA core.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from placetune.errors import PlacementError
from placetune.placement.placement import DEVICES, Placement
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    from placetune.hardware import dla as dla_rules
else:  # the DLA rules read layers of a loaded model: imported when a model is first checked
    dla_rules = lazy_import("placetune.hardware.dla")

if TYPE_CHECKING:
    from placetune.hardware.dla import Support
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform

__all__ = ["Realisation", "InfeasiblePlacement", "realise", "MAX_LOADABLES_PER_CORE", "MODES", "dla_support"]

log = logging.getLogger(__name__)

#: "only 16 DLA loadable can be loaded concurrently per core" (TensorRT DLA guide, G5).
MAX_LOADABLES_PER_CORE = 16
#: Execution modes (DESIGN.md).
MODES = ("engine", "pipeline", "replicas")

_SUPPORT_CACHE: dict[tuple, dict[str, "Support"]] = {}


class InfeasiblePlacement(PlacementError):
    """The placement cannot be built as asked (e.g. unsupported DLA layers without GPU fallback).

    Attributes:
        layers: the layer names at fault (may be empty).
    """

    def __init__(self, message: str, layers: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.layers = layers


@dataclass
class Realisation:
    """Requested vs realised placement.

    Attributes:
        requested: the placement asked for.
        realized: what would run.
        fallback: layer -> reason, for layers asked on a DLA that run on the GPU.
        dla_core: the engine's DLA core in ``engine`` mode (None when no DLA is used).
        loadables: DLA loadables per core of the realised placement.
        notes: human notes (core remapping, loadable limit hits).
    """

    requested: Placement
    realized: Placement
    fallback: dict[str, str] = field(default_factory=dict)
    dla_core: int | None = None
    loadables: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def dla_support(model: "Model", platform: "Platform", precision: str, trt_version: str) -> dict[str, "Support"]:
    """DLA support of every layer, cached per (model, platform, precision, TensorRT version)."""
    key = (model.hash, platform.name, precision, trt_version)
    cached = _SUPPORT_CACHE.get(key)
    if cached is None:
        cached = _SUPPORT_CACHE[key] = dla_rules.check_model(model, platform, precision=precision, trt_version=trt_version)
        if len(_SUPPORT_CACHE) > 64:
            _SUPPORT_CACHE.pop(next(iter(_SUPPORT_CACHE)))
    return cached


_UNSUPPORTED_CACHE: dict[tuple, dict[str, str]] = {}


def _unsupported(model: "Model", platform: "Platform", precision: str, trt_version: str) -> dict[str, str]:
    """Layer -> why the DLA cannot run it, for the layers it cannot run (topological order; cached)."""
    key = (model.hash, platform.name, precision, trt_version)
    cached = _UNSUPPORTED_CACHE.get(key)
    if cached is None:
        support = dla_support(model, platform, precision, trt_version)
        cached = _UNSUPPORTED_CACHE[key] = {n: support[n].reason or "not supported" for n in model.names
                                            if not support[n].supported}
        if len(_UNSUPPORTED_CACHE) > 64:
            _UNSUPPORTED_CACHE.pop(next(iter(_UNSUPPORTED_CACHE)))
    return cached


def realise(
    placement: Placement,
    platform: "Platform",
    *,
    mode: str = "engine",
    precision: str = "fp16",
    gpu_fallback: bool = True,
    dla_core: int | None = None,
    trt_version: str = "8.6",
) -> Realisation:
    """Compute the realised placement.

    Args:
        placement: requested layer -> device.
        platform: the Jetson profile (its DLA count bounds the devices).
        mode: ``engine`` (one engine, one DLA core), ``pipeline`` (one engine per
            segment, any core), or ``replicas`` (the DLA layers of the placement are the
            layers each DLA replica runs on its DLA; reported on DLA0).
        precision: ``fp16`` or ``int8`` (``fp32`` makes every DLA layer fall back).
        gpu_fallback: TensorRT's GPU_FALLBACK flag.
        dla_core: engine mode only: the core of the engine (default: the core most
            layers ask for).
        trt_version: TensorRT version for version-gated DLA rules.

    Raises:
        PlacementError: a device the platform does not have.
        InfeasiblePlacement: without GPU fallback, a DLA layer that the DLA cannot run,
            or more than 16 loadables on a core.
    """
    if mode not in MODES:
        raise PlacementError(f"unknown mode {mode!r}; modes are {', '.join(MODES)}")
    model = placement.model
    allowed = platform.devices
    counts = placement.counts()
    bad = [d for d in DEVICES if counts[d] and d not in allowed]
    if bad:
        have = ", ".join(allowed)
        raise PlacementError(
            f"placement uses {', '.join(bad)} but {platform.name} has only {have}"
        )
    notes: list[str] = []
    dev = placement.as_dict()
    core: int | None = None
    if mode in ("engine", "replicas"):
        used = [d for d in DEVICES[1:] if counts[d]]
        if used:
            if mode == "replicas":
                core = 0
            elif dla_core is not None:
                core = dla_core
            else:
                core = int(max(used, key=lambda d: (counts[d], -int(d[3:])))[3:])
            target = f"DLA{core}"
            if target not in allowed:
                raise PlacementError(f"DLA core {core} requested but {platform.name} has only {', '.join(allowed)}")
            moved = [d for d in used if d != target]
            if moved:
                notes.append(f"{mode} mode uses one DLA core: {', '.join(moved)} layers run on {target}")
                for n, d in dev.items():
                    if d != "GPU":
                        dev[n] = target
    fallback: dict[str, str] = {}
    if any(d != "GPU" for d in dev.values()):
        unsupported = [(n, reason) for n, reason in _unsupported(model, platform, precision, trt_version).items()
                       if dev[n] != "GPU"]
        if unsupported and not gpu_fallback:
            shown = "; ".join(f"{n}: {r}" for n, r in unsupported[:5])
            more = f" (+{len(unsupported) - 5} more)" if len(unsupported) > 5 else ""
            raise InfeasiblePlacement(
                f"{len(unsupported)} layer(s) asked on DLA cannot run there and GPU fallback is off: {shown}{more}",
                tuple(n for n, _ in unsupported),
            )
        for n, reason in unsupported:
            dev[n] = "GPU"
            fallback[n] = reason
    realized = Placement.unchecked(model, dev)
    loadables = realized.dla_islands(pipeline=mode == "pipeline")
    over = {d: k for d, k in loadables.items() if k > MAX_LOADABLES_PER_CORE}
    if over:
        if not gpu_fallback:
            d, k = next(iter(over.items()))
            raise InfeasiblePlacement(
                f"{k} DLA loadables on {d}; DLA supports only {MAX_LOADABLES_PER_CORE} per core and GPU fallback is off"
            )
        segs = realized.segments(pipeline=(mode == "pipeline"))
        seen = dict.fromkeys(over, 0)
        for s in segs:
            if s.device in over:
                seen[s.device] += 1
                if seen[s.device] > MAX_LOADABLES_PER_CORE:
                    for n in s.layers:
                        dev[n] = "GPU"
                        fallback[n] = (
                            f"DLA supports only {MAX_LOADABLES_PER_CORE} subgraphs per DLA core; switched to GPU"
                        )
        for d, k in over.items():
            notes.append(f"{d}: {k} loadables > {MAX_LOADABLES_PER_CORE}; the rest run on the GPU")
        realized = Placement.unchecked(model, dev)
        loadables = realized.dla_islands(pipeline=mode == "pipeline")
    loadables = {d: k for d, k in loadables.items() if d in allowed}
    return Realisation(placement, realized, fallback, core if any(v != "GPU" for v in dev.values()) else None, loadables, notes)
