"""Placement: which device each layer is asked to run on, and the segments it forms."""

from __future__ import annotations

import difflib

import hashlib
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from placetune.errors import PlacementError, StoreError
from placetune.placement.segmenting import ProducerArrays, SegmentArrays, segment_arrays
from placetune.validate import loads_json

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["Placement", "Segment", "DEVICES", "normalise_device", "dla_core", "stored_placement"]

#: Every device name placetune knows; a platform offers a prefix of it.
DEVICES = ("GPU", "DLA0", "DLA1")


def _short(value: object, limit: int = 60) -> str:
    """``repr`` of a value, cut to ``limit`` characters (bad input may be huge)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + f'... ({len(text):,} characters)'


def normalise_device(device: str) -> str:
    """``gpu`` -> ``GPU``, ``dla``/``DLA`` -> ``DLA0``, ``dla1`` -> ``DLA1``.

    Raises:
        PlacementError: not a device name.
    """
    d = str(device).strip().upper().replace(":", "")
    if d == "DLA":
        d = "DLA0"
    if d not in DEVICES:
        raise PlacementError(f"unknown device {_short(device)}; devices are {', '.join(DEVICES)}")
    return d


def dla_core(device: str) -> int | None:
    """DLA core number of a device name (None for the GPU)."""
    return int(device[3:]) if device.startswith("DLA") else None


def _check_map(value: object, field: str) -> None:
    """A placement's ``layers``/``scopes`` must map names to device names."""
    if not isinstance(value, Mapping):
        raise PlacementError(f"placement {field!r} must be an object mapping names to devices "
                             f"({', '.join(DEVICES)}), not {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise PlacementError(f"placement {field!r}: {_short(k)} -> {_short(v)}: names and devices must be "
                                 f"strings (devices: {', '.join(DEVICES)})")


def _unknown_layers(model: "Model", unknown: list[str]) -> PlacementError:
    """The error for layer names the model lacks, with the model's closest names to the first of them
    (``conv1`` -> ``/conv1/Conv``, as torch exports name a module's layer) and where to find the names."""
    shown = ", ".join(_short(n) for n in unknown[:5])
    more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
    first = str(unknown[0])
    close = [n for n in model.names if f"/{first}/" in n or n.endswith(f"/{first}")][:3] \
        or difflib.get_close_matches(first, list(model.names), n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(_short(n) for n in close)}?" if close else ""
    return PlacementError(f"placement names layers that model {model.name!r} does not have: {shown}{more}{hint} "
                          "(placetune check MODEL lists its layers; \"scopes\" places a module's layers)")


def _checked_layers(model: "Model", layers: Mapping[str, str]) -> dict[str, str]:
    unknown = [n for n in layers if n not in model]
    if unknown:
        raise _unknown_layers(model, unknown)
    return {n: normalise_device(d) for n, d in layers.items()}


def stored_placement(model: "Model", layers: Mapping[str, str] | None, where: str) -> "Placement":
    """A placement read back from the store: a map that does not fit the study's own model (a layer
    it lacks, a device that is none) is a damaged or edited row, not a bad placement of the user's.

    Args:
        where: the row and field, for the message (``"measurement 3 of study 's', field requested"``).

    Raises:
        StoreError: one line naming ``where`` and what is wrong (exit 7, not a placement error's 5).
    """
    try:
        return Placement(model, layers or {})
    except PlacementError as exc:
        raise StoreError(f"stored {where} is corrupt ({exc}): the database was edited or damaged (restore it "
                         "from a backup, or delete that row)") from None


@dataclass(frozen=True)
class Segment:
    """A maximal convex connected region of layers on one device.

    Attributes:
        index: position among the placement's segments (topological).
        device: ``GPU``, ``DLA0`` or ``DLA1``.
        layers: layer names in topological order.
        predecessors: indexes of segments this one reads from.
    """

    index: int
    device: str
    layers: tuple[str, ...]
    predecessors: tuple[int, ...]


class Placement(Mapping[str, str]):
    """A complete layer -> device assignment for one model.

    Layers not named get ``default``. Two placements with the same assignment have the
    same :attr:`key`, however they were built.

    Example:
        >>> from placetune import Model, Placement
        >>> m = Model.load("seed-block")
        >>> p = Placement(m, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"})
        >>> [(s.device, len(s.layers)) for s in p.segments(pipeline=True)]
        [('GPU', 2), ('DLA0', 1), ('DLA1', 1), ('GPU', 1)]

    Raises:
        PlacementError: unknown layer or device names.
    """

    __slots__ = ("model", "_dev", "_key", "_segments", "_arrays")

    def __init__(self, model: "Model", assignment: Mapping[str, str] | None = None, default: str = "GPU") -> None:
        self.model = model
        default = normalise_device(default)
        dev = dict.fromkeys(model.names, default)
        if assignment is not None and not isinstance(assignment, (dict, Mapping)):
            raise PlacementError(f"a placement's assignment must map layer names to devices ({', '.join(DEVICES)}), "
                                 f"got {type(assignment).__name__}: a list of device indexes, one per decision "
                                 "unit, is read by Space.to_placement")
        if assignment:
            unknown = [n for n in assignment if n not in dev]
            if unknown:
                raise _unknown_layers(model, unknown)
            cache: dict[str, str] = {}
            for name, d in assignment.items():
                nd = cache.get(d) if isinstance(d, str) else None  # (a list or dict as a device is no key)
                if nd is None:
                    nd = normalise_device(d)
                    if isinstance(d, str):
                        cache[d] = nd
                dev[name] = nd
        self._dev = dev
        self._key: str | None = None
        self._segments: dict[bool, list[Segment]] | None = None
        self._arrays: dict[bool, SegmentArrays] | None = None

    @classmethod
    def unchecked(cls, model: "Model", dev: dict[str, str]) -> "Placement":
        """The placement of ``dev``, taken as it is: no check and no copy. ``dev`` must already map every layer of
        ``model`` to a canonical device (``GPU``, ``DLA0``, ``DLA1``) and not change afterwards. For the paths that
        build such a map themselves, many times a second (realising a placement, decoding a search point, the
        simulator); anything else uses the constructor, which checks names and devices."""
        p = cls.__new__(cls)
        p.model, p._dev, p._key, p._segments, p._arrays = model, dev, None, None, None
        return p

    # ----------------------------------------------------------- constructors
    @classmethod
    def all_gpu(cls, model: "Model") -> "Placement":
        """Every layer on the GPU."""
        return cls.unchecked(model, dict.fromkeys(model.names, "GPU"))

    @classmethod
    def all_dla(cls, model: "Model", core: int = 0) -> "Placement":
        """Every layer asked on DLA core ``core`` (unsupported ones fall back when realised)."""
        return cls.unchecked(model, dict.fromkeys(model.names, normalise_device(f"DLA{core}")))

    @classmethod
    def split_dla(cls, model: "Model") -> "Placement":
        """The first half of the layers (network order) asked on DLA0, the rest on DLA1: the
        baseline split over both cores."""
        half = len(model.names) // 2
        return cls.unchecked(model, {n: ("DLA0" if i < half else "DLA1") for i, n in enumerate(model.names)})

    @classmethod
    def from_scopes(cls, model: "Model", scopes: Mapping[str, str], default: str = "GPU",
                    layers: Mapping[str, str] | None = None) -> "Placement":
        """Assign by module scope; the most specific (longest) matching scope wins.

        Same semantics as torch2trt's ``device_types``: ``{"layer1": "DLA0",
        "layer1/layer1.0": "GPU"}`` puts all of layer1 on DLA0 except block layer1.0.
        A scope matches a layer whose scope equals it or starts with it plus ``/``;
        ``""`` matches everything. A scope that matches no layer is an error.
        ``layers`` (layer name -> device) override the scopes: a layer is the most specific scope.
        """
        _check_map(scopes, "scopes")
        norm = {s.strip("/"): normalise_device(d) for s, d in scopes.items()}
        ordered = sorted(norm, key=lambda s: len(s.split("/")) if s else 0, reverse=True)
        dev = {}
        hits = dict.fromkeys(norm, 0)
        default = normalise_device(default)
        for layer in model.layers:
            chosen = default
            for s in ordered:
                if s == "" or layer.scope == s or layer.scope.startswith(s + "/") or layer.name == s:
                    chosen = norm[s]
                    hits[s] += 1
                    break
            dev[layer.name] = chosen
        missing = [s for s, n in hits.items() if n == 0]
        if missing:
            raise PlacementError(f"scopes match no layer of {model.name!r}: {', '.join(_short(m) for m in missing[:5])}")
        if layers:
            dev.update(_checked_layers(model, layers))
        return cls.unchecked(model, dev)

    @classmethod
    def from_json(cls, model: "Model", text: str | Mapping) -> "Placement":
        """Read ``{"default": "GPU", "layers": {name: device}}`` or a plain ``{name: device}``.

        Also accepts ``{"scopes": {...}}`` (see :meth:`from_scopes`); with both ``scopes`` and
        ``layers``, the layers override the scopes.

        Raises:
            PlacementError: not JSON, nested too deeply, wrong types, unknown keys, layers or devices.
        """
        if isinstance(text, str):
            # strict: a layer named twice is refused (not "the last one wins"), so are NaN and Infinity
            doc = loads_json(text, "placement JSON", error=PlacementError)
        else:
            doc = dict(text)
        if not isinstance(doc, dict):
            raise PlacementError('placement JSON must be an object, e.g. {"layers": {"layer name": "DLA0"}}')
        if "placement" in doc and isinstance(doc["placement"], dict):
            doc = doc["placement"]
        structured = "layers" in doc or "scopes" in doc
        default = doc.get("default", "GPU") if structured else "GPU"
        if "default" in doc and not structured and "default" not in model.names:
            # {"default": "DLA0"} alone, or with a plain {name: device} map beside it
            default = doc["default"]
            doc = {"layers": {k: v for k, v in doc.items() if k != "default"}}
        elif structured:
            unknown = sorted(set(doc) - {"default", "layers", "scopes"})
            if unknown:
                raise PlacementError(f"placement has unknown key(s) {', '.join(_short(k) for k in unknown[:5])}; "
                                     "allowed: default, layers, scopes")
        if not isinstance(default, str):
            raise PlacementError(f"placement 'default' must be a device name ({', '.join(DEVICES)}), "
                                 f"not {_short(default)}")
        if "scopes" in doc:
            layers = doc.get("layers", {})
            _check_map(layers, "layers")
            return cls.from_scopes(model, doc["scopes"], default=default, layers=layers)
        layers = doc.get("layers", doc)
        _check_map(layers, "layers")
        return cls(model, layers, default=default)

    # ------------------------------------------------------------- mapping API
    def __getitem__(self, name: str) -> str:
        try:
            return self._dev[name]
        except KeyError:
            raise PlacementError(f"model {self.model.name!r} has no layer {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._dev)

    def __len__(self) -> int:
        return len(self._dev)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Placement):
            return self.model.hash == other.model.hash and self._dev == other._dev
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        counts = ", ".join(f"{d}={n}" for d, n in self.counts().items() if n)
        return f"Placement({self.model.name!r}, {counts}, key={self.key[:10]})"

    # ---------------------------------------------------------------- helpers
    @property
    def key(self) -> str:
        """Canonical key: same assignment -> same key (40 hex chars)."""
        if self._key is None:
            code = {"GPU": "g", "DLA0": "0", "DLA1": "1"}
            text = self.model.hash + ":" + "".join(code[self._dev[n]] for n in self.model.names)
            self._key = hashlib.sha1(text.encode()).hexdigest()
        return self._key

    def as_dict(self) -> dict[str, str]:
        """Layer -> device, in topological order."""
        return dict(self._dev)

    def to_json(self, compact: bool = True) -> str:
        """``{"default": D, "layers": {name: device != D}}`` with D the most common device."""
        return json.dumps(self.to_doc(), separators=(",", ":") if compact else None, indent=None if compact else 2)

    def to_doc(self) -> dict:
        """The JSON document of :meth:`to_json` as a dict."""
        counts = self.counts()
        default = max(counts, key=lambda d: counts[d])
        return {"default": default, "layers": {n: d for n, d in self._dev.items() if d != default}}

    def counts(self) -> dict[str, int]:
        """Number of layers per device (every device in DEVICES is a key)."""
        out = dict.fromkeys(DEVICES, 0)
        out.update(Counter(self._dev.values()))
        return out

    @property
    def devices_used(self) -> tuple[str, ...]:
        """Devices with at least one layer, in DEVICES order."""
        c = self.counts()
        return tuple(d for d in DEVICES if c[d])

    def with_devices(self, changes: Mapping[str, str]) -> "Placement":
        """A copy with some layers moved."""
        dev = dict(self._dev)
        for n, d in changes.items():
            if n not in dev:
                raise PlacementError(f"model {self.model.name!r} has no layer {n!r}")
            dev[n] = normalise_device(d)
        return Placement.unchecked(self.model, dev)

    def segments(self, pipeline: bool = False) -> list[Segment]:
        """Maximal convex connected same-device regions, in topological order.

        Convex means no path leaves a segment and comes back into it, so the segments
        form a DAG. With ``pipeline=False`` they are what TensorRT makes of one engine
        (the DLA segments are its DLA loadables). With ``pipeline=True`` a layer does not
        join a segment when that would make the segment wait for another segment it did
        not already wait for: every segment can then be its own engine that starts as
        soon as its inputs exist, so independent branches overlap.
        """
        if self._segments is None:
            self._segments = {}
        if pipeline not in self._segments:
            self._segments[pipeline] = _named_segments(self.model, self._segment_arrays(pipeline))
        return self._segments[pipeline]

    def _segment_arrays(self, pipeline: bool) -> SegmentArrays:
        """The segmentation as integer arrays (cached): what :meth:`segments` names."""
        if self._arrays is None:
            self._arrays = {}
        sa = self._arrays.get(pipeline)
        if sa is None:
            pa, _, names = _model_arrays(self.model)
            dev = self._dev
            sa = self._arrays[pipeline] = segment_arrays(pa, [_CODE[dev[n]] for n in names], pipeline)
        return sa

    def dla_islands(self, pipeline: bool = False) -> dict[str, int]:
        """DLA segments (loadables) per DLA device, e.g. ``{"DLA0": 2, "DLA1": 0}``: of the one
        engine TensorRT builds (default), or with ``pipeline`` of :meth:`segments` ``(pipeline=True)``,
        one engine each. Counted without naming the segments' layers."""
        counts = Counter(self._segment_arrays(pipeline).device)
        return {d: counts[c] for c, d in enumerate(DEVICES) if c}


def producer_indexes(model: "Model") -> list[tuple[int, ...]]:
    """Per layer (topological order), the numbers of the layers it reads from (cached per model)."""
    cached = _PRODUCERS.get(model.hash)
    if cached is None:
        pos = {n: i for i, n in enumerate(model.names)}
        cached = _PRODUCERS[model.hash] = [tuple(pos[p] for p in layer.producers) for layer in model.layers]
        if len(_PRODUCERS) > 64:
            _PRODUCERS.pop(next(iter(_PRODUCERS)))
    return cached


_PRODUCERS: dict[str, list[tuple[int, ...]]] = {}
_PRODUCER_ARRAYS: dict[str, tuple[ProducerArrays, np.ndarray, list[str]]] = {}
_CODE = {d: i for i, d in enumerate(DEVICES)}


def producer_arrays(model: "Model") -> ProducerArrays:
    """The model's :class:`~placetune.placement.segmenting.ProducerArrays` (cached per model)."""
    return _model_arrays(model)[0]


def _model_arrays(model: "Model") -> tuple[ProducerArrays, np.ndarray, list[str]]:
    cached = _PRODUCER_ARRAYS.get(model.hash)
    if cached is None:
        names = model.names
        name_array = np.empty(len(names), dtype=object)
        name_array[:] = names
        cached = _PRODUCER_ARRAYS[model.hash] = (ProducerArrays(producer_indexes(model)), name_array, names)
        if len(_PRODUCER_ARRAYS) > 64:
            _PRODUCER_ARRAYS.pop(next(iter(_PRODUCER_ARRAYS)))
    return cached


def _named_segments(model: "Model", sa: SegmentArrays) -> list[Segment]:
    """The :class:`Segment` list of a segmentation (:func:`placetune.placement.segmenting.segment_arrays`:
    greedy convex clustering in topological order)."""
    name_array = _model_arrays(model)[1]
    # the layer names of each segment, in topological order: one stable sort, then slices
    order = np.argsort(sa.seg_of, kind="stable")
    ends = np.cumsum(np.bincount(sa.seg_of, minlength=len(sa.device))).tolist()
    ordered = name_array[order].tolist()
    out, start = [], 0
    for k, (d, pr, end) in enumerate(zip(sa.device, sa.preds, ends)):
        out.append(Segment(k, DEVICES[d], tuple(ordered[start:end]), pr))
        start = end
    return out
