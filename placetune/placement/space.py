"""Space: the decision units of a placement search, their allowed devices and features."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from placetune.errors import ConfigError, PlacementError
from placetune.placement.placement import Placement
from placetune.hardware.platforms import get_platform
from placetune.placement.realise import MODES, dla_support
from placetune.placement.stages import DEFAULT_MAX_STAGES, assignment_of, sample_stages, stage_moves, stages_of

if TYPE_CHECKING:
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform

__all__ = ["Space", "Unit", "GRANULARITIES", "OP_CLASSES", "op_class"]

#: Accepted granularities (``scope:N`` with any N >= 1).
GRANULARITIES = ("layer", "fusion", "stages", "scope:N")

#: Op classes used in features (one-hot) and by the simulator's efficiency tables.
OP_CLASSES = ("conv", "gemm", "pool", "eltwise", "activation", "norm", "shuffle", "concat", "softmax", "other")

_CLASS = {
    "Conv": "conv", "ConvTranspose": "conv",
    "Gemm": "gemm", "MatMul": "gemm",
    "MaxPool": "pool", "AveragePool": "pool", "GlobalAveragePool": "pool", "GlobalMaxPool": "pool",
    "ReduceMean": "pool", "ReduceMax": "pool", "ReduceSum": "pool", "LRN": "norm",
    "Add": "eltwise", "Sub": "eltwise", "Mul": "eltwise", "Div": "eltwise", "Max": "eltwise", "Min": "eltwise",
    "Pow": "eltwise", "Sum": "eltwise",
    "Relu": "activation", "Clip": "activation", "LeakyRelu": "activation", "Sigmoid": "activation",
    "Tanh": "activation", "PRelu": "activation", "Erf": "activation", "HardSwish": "activation",
    "HardSigmoid": "activation", "Elu": "activation", "Gelu": "activation",
    "BatchNormalization": "norm", "InstanceNormalization": "norm", "LayerNormalization": "norm",
    "GroupNormalization": "norm",
    "Reshape": "shuffle", "Flatten": "shuffle", "Transpose": "shuffle", "Squeeze": "shuffle",
    "Unsqueeze": "shuffle", "Slice": "shuffle", "Split": "shuffle", "Gather": "shuffle", "Resize": "shuffle",
    "Concat": "concat", "Softmax": "softmax",
}
_ANCHORS = {"conv", "gemm"}
_FUSIBLE = {"activation", "eltwise", "norm"}


def op_class(op_type: str) -> str:
    """Coarse class of an ONNX op (one of :data:`OP_CLASSES`)."""
    return _CLASS.get(op_type, "other")


@dataclass(frozen=True)
class Unit:
    """One decision: a group of layers that move together.

    Attributes:
        index: position in the space.
        name: the first layer's name (layer/fusion) or the scope (scope:N).
        layers: layer names, in topological order.
        choices: devices this unit may take (masked choices left out).
        eligible: device -> True when every layer of the unit can run there.
    """

    index: int
    name: str
    layers: tuple[str, ...]
    choices: tuple[str, ...]
    eligible: dict[str, bool]


class Space:
    """Decision units of one model for a platform and mode.

    Args:
        model: the network.
        platform: the Jetson profile (its DLA count sets the devices).
        mode: ``engine`` and ``replicas``: GPU or the engine's DLA core (``dla_core``);
            ``pipeline``: GPU, DLA0, DLA1 (as many as the platform has).
        precision: DLA eligibility depends on it.
        granularity: ``layer``, ``fusion`` (default: groups TensorRT fuses anyway,
            e.g. conv+bn+relu), ``stages`` (the fusion groups, but :meth:`sample` and
            :meth:`neighbours` keep a placement a few contiguous stages in topological order,
            one device each: see :mod:`placetune.placement.stages`) or ``scope:N`` (module
            prefix depth N).
        trt_version: TensorRT version of the DLA rules.
        allow_unsupported: keep DLA choices for units the DLA cannot run (to study
            fallback itself); by default they are masked.
        dla_core: engine/replicas mode: which core the engine uses.

    Example:
        >>> from placetune import Model
        >>> space = Space(Model.load("seed-block"), "orin-agx", mode="pipeline")
        >>> space.devices, space.n_units
        (('GPU', 'DLA0', 'DLA1'), 5)
        >>> p = space.to_placement([0, 0, 1, 2, 0])
        >>> space.from_placement(p)
        [0, 0, 1, 2, 0]
    """

    def __init__(
        self,
        model: "Model",
        platform: "Platform | str",
        *,
        mode: str = "engine",
        precision: str = "fp16",
        granularity: str = "fusion",
        trt_version: str = "8.6",
        allow_unsupported: bool = False,
        dla_core: int = 0,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}; modes are {', '.join(MODES)}")
        if not isinstance(allow_unsupported, (bool, np.bool_)):  # "no" is a true value: every DLA choice allowed
            raise ConfigError(f"allow_unsupported must be True or False, got {str(allow_unsupported)[:40]!r}")
        self.model = model
        self.platform = get_platform(platform) if isinstance(platform, str) else platform
        self.mode = mode
        self.precision = precision
        self.granularity = granularity
        if self.platform.dla_count == 0:
            self.devices: tuple[str, ...] = ("GPU",)
        elif mode == "pipeline":
            self.devices = tuple(self.platform.devices)
        else:
            if dla_core >= self.platform.dla_count:
                raise ConfigError(f"{self.platform.name} has no DLA core {dla_core}")
            self.devices = ("GPU", f"DLA{dla_core}")
        support = dla_support(model, self.platform, precision, trt_version)
        self._support = support
        groups = self._group(granularity)
        units = []
        for i, (name, layers) in enumerate(groups):
            ok = all(support[n].supported for n in layers)
            eligible = {d: (True if d == "GPU" else ok) for d in self.devices}
            choices = tuple(d for d in self.devices if eligible[d] or allow_unsupported)
            units.append(Unit(i, name, tuple(layers), choices, eligible))
        self.units: list[Unit] = units
        self._unit_of = {n: u.index for u in units for n in u.layers}
        self._dev_index = {d: k for k, d in enumerate(self.devices)}
        self.mask = np.zeros((len(units), len(self.devices)), dtype=np.int8)
        for u in units:
            for d in u.choices:
                self.mask[u.index, self._dev_index[d]] = 1
        self._features: np.ndarray | None = None
        #: What :mod:`placetune.placement.stages` computes once per space, by name (it is a ``StageSpace``).
        self.stage_cache: dict[str, Any] = {}

    # --------------------------------------------------------------- grouping
    def _group(self, granularity: str) -> list[tuple[str, list[str]]]:
        self.check_granularity(granularity)  # (a granularity of another type was an AttributeError)
        layers = self.model.layers
        if granularity == "layer":
            return [(layer.name, [layer.name]) for layer in layers]
        if granularity in ("fusion", "stages"):
            return self._fusion_groups()
        if granularity.startswith("scope:"):
            depth = int(granularity.split(":", 1)[1])  # ASCII digits, at least 1: check_granularity
            order: dict[str, list[str]] = {}
            for layer in layers:
                parts = layer.scope.split("/") if layer.scope else []
                key = "/".join(parts[:depth]) if parts else layer.name
                order.setdefault(key, []).append(layer.name)
            return list(order.items())
        raise ConfigError(f"unknown granularity {granularity!r}; use layer, fusion, stages or scope:N")

    @staticmethod
    def check_granularity(granularity: str) -> None:
        """Refuse a granularity no space has (before anything is measured)."""
        if granularity in ("layer", "fusion", "stages"):
            return
        if isinstance(granularity, str) and granularity.startswith("scope:"):
            tail = granularity.split(":", 1)[1]
            # ASCII digits only: isdigit() passes a superscript two, which int() cannot read
            if tail.isascii() and tail.isdigit() and int(tail) >= 1:
                return
            raise ConfigError(f"bad granularity {granularity!r}: use scope:N with N >= 1")
        raise ConfigError(f"unknown granularity {str(granularity)[:80]!r}; use layer, fusion, stages or scope:N")

    def _fusion_groups(self) -> list[tuple[str, list[str]]]:
        """Conv/Gemm + following single-consumer pointwise layers (bias, BN, activation, residual add)."""
        group_of: dict[str, int] = {}
        groups: list[list[str]] = []
        anchored: list[bool] = []
        model = self.model
        for layer in model.layers:
            cls = op_class(layer.op_type)
            target = None
            if cls in _FUSIBLE:
                for p in layer.producers:
                    g = group_of[p]
                    tail = groups[g][-1]
                    if tail == p and len(model.layer(p).consumers) == 1 and anchored[g]:
                        target = g
                        break
            if target is None:
                group_of[layer.name] = len(groups)
                groups.append([layer.name])
                anchored.append(cls in _ANCHORS or cls == "norm")
            else:
                group_of[layer.name] = target
                groups[target].append(layer.name)
        return [(g[0], g) for g in groups]

    # ------------------------------------------------------------- properties
    @property
    def n_units(self) -> int:
        """Number of decision units."""
        return len(self.units)

    @property
    def n_devices(self) -> int:
        """Number of devices a unit can choose from (before masking)."""
        return len(self.devices)

    @property
    def log10_size(self) -> float:
        """log10 of the number of masked assignments."""
        return float(sum(math.log10(len(u.choices)) for u in self.units))

    def unit_of(self, layer: str) -> Unit:
        """The unit a layer belongs to."""
        try:
            return self.units[self._unit_of[layer]]
        except KeyError:
            raise PlacementError(f"model {self.model.name!r} has no layer {layer!r}") from None

    def device_index(self, device: str) -> int:
        """Index of a device in :attr:`devices`."""
        try:
            return self._dev_index[device]
        except KeyError:
            raise PlacementError(f"device {device!r} is not in this space ({', '.join(self.devices)})") from None

    # ------------------------------------------------------------ conversion
    def to_placement(self, assignment: Sequence[int | str]) -> Placement:
        """Unit assignment (device indexes or names, one per unit) -> Placement.

        Raises:
            PlacementError: wrong length or a device index out of range.
        """
        if isinstance(assignment, (str, bytes)) or not hasattr(assignment, "__len__"):
            raise PlacementError(f"assignment must be a sequence of device indexes or names, one per unit, got "
                                 f"{type(assignment).__name__}")
        if len(assignment) != len(self.units):
            raise PlacementError(f"assignment has {len(assignment)} entries; the space has {len(self.units)} units")
        dev: dict[str, str] = dict.fromkeys(self.model.names, "GPU")  # topological order, as Placement keeps it
        for u, a in zip(self.units, assignment):
            if isinstance(a, str):
                d = a
                self.device_index(d)
            else:
                # an integer (0.0 too); 0.5 was read as 0 and NaN raised ValueError
                # a bool is an int to Python; True read as device 1 (a mask passed for an action)
                whole = not isinstance(a, bool) and (isinstance(a, (int, np.integer)) or (
                    isinstance(a, (float, np.floating)) and math.isfinite(a) and float(a).is_integer()))
                if not whole:
                    raise PlacementError(f"unit {u.name!r}: a device index is an integer from 0 to "
                                         f"{len(self.devices) - 1} or a device name ({', '.join(self.devices)}), "
                                         f"got {str(a)[:40]!r}")
                k = int(a)
                if not 0 <= k < len(self.devices):
                    raise PlacementError(f"device index {k} out of range for unit {u.name!r}")
                d = self.devices[k]
            for n in u.layers:
                dev[n] = d
        return Placement.unchecked(self.model, dev)

    def from_placement(self, placement: Placement) -> list[int]:
        """Placement -> unit assignment (a unit takes its first layer's device).

        Devices outside the space (e.g. DLA1 in engine mode) map to the space's DLA.
        """
        out = []
        for u in self.units:
            d = placement[u.layers[0]]
            if d not in self._dev_index:
                d = self.devices[-1] if d != "GPU" else "GPU"
            out.append(self._dev_index[d])
        return out

    def is_allowed(self, assignment: Sequence[int]) -> bool:
        """True when every unit's device is unmasked."""
        a = np.asarray(assignment, dtype=np.intp)
        if a.shape != (self.n_units,) or (a.size and (a.min() < 0 or a.max() >= len(self.devices))):
            return all(self.mask[i, int(x)] for i, x in enumerate(assignment))  # other shapes: unit by unit
        return bool(self.mask[np.arange(a.size), a].all())

    def sample(self, rng: np.random.Generator | None = None) -> list[int]:
        """A random masked assignment: uniform per unit, or (``stages``) a random stage list."""
        rng = rng or np.random.default_rng()
        if self.granularity == "stages":
            return assignment_of(self, sample_stages(self, rng))
        out = []
        for i in range(len(self.units)):
            allowed = np.flatnonzero(self.mask[i])
            out.append(int(rng.choice(allowed)))
        return out

    def neighbours(self, assignment: Sequence[int]) -> list[tuple[int, int]]:
        """Every (unit, device) single-unit move that stays unmasked and changes something.

        ``stages``: only the moves that keep the stage structure (a unit next to a cut takes
        its neighbour's device; the first and last units may open a stage of their own); see
        :meth:`stage_neighbours` for the multi-unit stage moves.
        """
        moves = [
            (i, k)
            for i in range(len(self.units))
            for k in np.flatnonzero(self.mask[i]).tolist()
            if k != assignment[i]
        ]
        if self.granularity != "stages":
            return moves
        out = []
        for i, k in moves:
            b = list(assignment)
            b[i] = k
            if len(stages_of(self, b)) <= DEFAULT_MAX_STAGES and len(stages_of(self, b)) <= len(
                    stages_of(self, assignment)) + 1 and (i in (0, len(b) - 1) or k in (b[i - 1], b[i + 1])):
                out.append((i, k))
        return out

    def stages(self, assignment: Sequence[int]) -> list:
        """The :class:`~placetune.placement.stages.Stage` list of an assignment (any granularity)."""
        return stages_of(self, assignment)

    def from_stages(self, stages: Sequence) -> list[int]:
        """Assignment of a stage list (units masked on their stage's device take the GPU)."""
        return assignment_of(self, stages)

    def stage_neighbours(self, assignment: Sequence[int]) -> list[list[int]]:
        """Assignments one stage move away: a cut added, removed or shifted, a stage's device changed."""
        seen = {tuple(int(a) for a in assignment)}
        out = []
        for st in stage_moves(self, stages_of(self, assignment)):
            b = assignment_of(self, st)
            if tuple(b) not in seen:
                seen.add(tuple(b))
                out.append(b)
        return out

    # --------------------------------------------------------------- features
    @property
    def feature_names(self) -> list[str]:
        """Names of the columns of :meth:`features`."""
        return (
            [f"op_{c}" for c in OP_CLASSES]
            + ["log_flops", "log_bytes", "log_weight_bytes"]
            + [f"eligible_{d}" for d in self.devices]
            + ["position", "log_fan_in", "log_fan_out", "n_layers"]
        )

    def features(self) -> np.ndarray:
        """Per-unit features (float32, shape ``(n_units, len(feature_names))``)."""
        if self._features is None:
            rows = []
            n = max(len(self.model.layers) - 1, 1)
            for u in self.units:
                layers = [self.model.layer(x) for x in u.layers]
                onehot = [0.0] * len(OP_CLASSES)
                onehot[OP_CLASSES.index(op_class(layers[0].op_type))] = 1.0
                flops = sum(x.flops for x in layers)
                nbytes = sum(x.bytes_in + x.bytes_out for x in layers)
                wbytes = sum(x.weight_bytes for x in layers)
                inside = set(u.layers)
                fan_in = len({p for x in layers for p in x.producers if p not in inside})
                fan_out = len({c for x in layers for c in x.consumers if c not in inside})
                rows.append(
                    onehot
                    + [math.log1p(flops) / 25.0, math.log1p(nbytes) / 25.0, math.log1p(wbytes) / 25.0]
                    + [1.0 if u.eligible[d] else 0.0 for d in self.devices]
                    + [layers[0].index / n, math.log1p(fan_in), math.log1p(fan_out), math.log1p(len(layers))]
                )
            self._features = np.asarray(rows, dtype=np.float32)
        return self._features

    def __repr__(self) -> str:
        return (
            f"Space({self.model.name!r}, {self.platform.name}, mode={self.mode}, granularity={self.granularity}, "
            f"units={self.n_units}, devices={self.devices})"
        )
