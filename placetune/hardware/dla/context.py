"""What every DLA rule works with: the Support verdict, the rule context, the G1/G2 limits, tensor helpers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from placetune.errors import ConfigError
from placetune.hardware.platforms import Platform
from placetune.model.layer import Layer, TensorInfo

MAX_BATCH = 4096  # G1
MAX_DIM = 8192  # G2
# Versions with the DRIVE-OS-only DLA ops (Div, Pow, Greater, Less, GlobalMaxPool, Sin, Cos, Atanh):
# DLA-SW lists them "as of TensorRT 8.6.12", a DRIVE OS build number. JetPack ships 8.5.2, 8.6.2
# and 10.3; TRT 10.x headers still list only kSUM/kPROD/kMAX/kMIN/kSUB for DLA ElementWise, so 10.x
# (and 11.x) are treated as not having them. Conservative; confirm with can_run_on_DLA on a device.
_DRIVE_OPS_FROM = (8, 6, 12)


@dataclass(frozen=True)
class Support:
    """Whether a layer can run on a DLA core.

    Attributes:
        supported: True when every known rule passes.
        reason: None when supported; otherwise a short human reason
            (``"Conv kernel 63x63 > 32"``, ``"dynamic shape"``, ...). A Q/DQ node that TensorRT
            fuses into its neighbours is supported with a reason that says so and cites the source.
    """

    supported: bool
    reason: str | None = None

    def __bool__(self) -> bool:
        return self.supported


class ModelLike(Protocol):
    """What the rules need of a model: its layers, and a layer by name (for the neighbour rules)."""

    layers: list[Layer]

    def layer(self, name: str) -> Layer: ...


def parse_trt_version(version: str) -> tuple[int, int, int]:
    """``"8.6"`` -> ``(8, 6, 0)``, ``"8.6.12"`` -> ``(8, 6, 12)``, ``"10.3.0.26"`` -> ``(10, 3, 0)``.

    Raises:
        ConfigError: not a dotted version number.
    """
    parts = str(version).strip().split(".")
    try:
        nums = [int(p) for p in parts[:3] if p != ""]
    except ValueError:
        nums = []
    if not nums:
        raise ConfigError(f"TensorRT version {version!r} is not a version number; use e.g. '8.6' or '10.3.0'")
    while len(nums) < 3:
        nums.append(0)
    return nums[0], nums[1], nums[2]


@dataclass(frozen=True)
class RuleContext:
    """What a DLA rule is checked against: the platform, the build precision, the TensorRT version
    (:func:`parse_trt_version`) and the model (None: the rules that look at neighbours pass)."""

    platform: Platform
    precision: str
    trt: tuple[int, int, int]
    model: ModelLike | None

    @property
    def int8(self) -> bool:
        return self.precision == "int8"

    @property
    def drive_ops(self) -> bool:
        return _DRIVE_OPS_FROM <= self.trt < (9, 0, 0)

    @property
    def trt_text(self) -> str:
        return ".".join(str(x) for x in self.trt)


def ints_of(value: Any, n: int, default: int) -> list[int]:
    """An ONNX int-or-ints attribute as ``n`` ints (``default`` each when absent, a single int repeated)."""
    if value is None:
        return [default] * n
    if isinstance(value, (int, np.integer)):
        return [int(value)] * n
    return [int(v) for v in value]


def const_values(t: TensorInfo | None) -> list[float] | None:
    """A constant tensor's values, flattened; None when the tensor is absent or not constant."""
    if t is None or t.value is None:
        return None
    return [float(v) for v in np.asarray(t.value).reshape(-1)]


def data_input(layer: Layer) -> TensorInfo | None:
    """A layer's first activation (non-constant) input; None when it has none."""
    acts = layer.activation_inputs
    return acts[0] if acts else None


def dims_text(vals: list[int]) -> str:
    """Dims as the rules' reasons show them: ``[3, 3]`` -> ``"3x3"``."""
    return "x".join(str(v) for v in vals)


def need_4d(layer: Layer, what: str) -> str | None:
    """Activation/Scale/ElementWise/... are "2D only" (two spatial dims): N,C,H,W tensors.
    Higher ranks pass: the guide counts every dim before CHW as batch (NPQRS -> N*P, G1)."""
    for t in list(layer.activation_inputs) + list(layer.outputs):
        if len(t.shape) < 4:
            return f"DLA {what} needs 4D (N,C,H,W) tensors (got {len(t.shape)}D)"
    return None


def neighbours(layer: Layer, ctx: RuleContext) -> list[Layer]:
    """A layer's producers and consumers in the context's model (none without a model, or a name it cannot find)."""
    if ctx.model is None:
        return []
    out = []
    for name in tuple(layer.producers) + tuple(layer.consumers):
        try:
            out.append(ctx.model.layer(name))
        except Exception:  # noqa: BLE001 - a model that cannot resolve a name has no neighbour rule
            continue
    return out


def safe_layer(ctx: RuleContext, name: str) -> Layer | None:
    """The context's model's layer of that name; None without a model or when the model cannot find it."""
    try:
        return ctx.model.layer(name) if ctx.model is not None else None
    except Exception:  # noqa: BLE001
        return None
