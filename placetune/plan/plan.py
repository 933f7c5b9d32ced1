"""The best-plan file: export it from a study, read and check it, apply it, or turn it into trtexec commands.

A *plan* is what a user ships: which device each layer of their network runs on, the
engines that placement needs (one engine, one engine per pipeline segment, or one replica
per device), how it was measured (or simulated) and how it compares with the all-GPU
baseline. It is a versioned JSON document (``"format": "placetune-plan", "version": 1``)
that names layers by the names TensorRT's ONNX parser gives them, so it can be applied to
the user's own TensorRT network without placetune's model at hand.

Three ways to use a plan:

* :meth:`Plan.apply` sets the device of each layer of a TensorRT ``INetworkDefinition``
  through its ``IBuilderConfig`` (Python API; works on every TensorRT version with DLA).
* :func:`trtexec_commands` writes the equivalent ``trtexec`` command lines
  (``--layerDeviceTypes`` exists from TensorRT 8.6 only).
* the plan's figures and baselines document what to expect. A plan made from the simulated
  Jetson says so (``"simulated": true`` and a ``label``): verify it on the device.

Example:
    >>> import placetune as pt
    >>> from placetune.plan import export_plan, load, trtexec_commands
    >>> ev = pt.Evaluator("seed-block", "orin-agx", mode="engine")
    >>> _ = ev.baselines()
    >>> plan = export_plan(ev.store, ev.study_name)
    >>> plan.simulated, plan.mode
    (True, 'engine')
    >>> [c for c in trtexec_commands(plan) if not c.startswith("#")][0].split()[0]
    'trtexec'
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import BackendError, ConfigError, ModelError, PlacementError, PlacetuneError, StoreError
from placetune.placement.placement import DEVICES, Placement, dla_core

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.store.records import MeasurementRecord, StudyRecord
    from placetune.store.store import Store

__all__ = [
    "PLAN_FORMAT",
    "PLAN_VERSION",
    "SIMULATED_LABEL",
    "Plan",
    "ApplyReport",
    "export_plan",
    "load",
    "load_study_model",
    "trtexec_commands",
    "trtexec_script",
    "layer_device_types",
    "onnx_node_of",
    "simulate_plan",
]

log = logging.getLogger(__name__)

#: The ``format`` field of every plan file.
PLAN_FORMAT = "placetune-plan"
#: The plan version this placetune writes and the newest it reads.
PLAN_VERSION = 1
#: The label every plan made from the simulated Jetson carries.
SIMULATED_LABEL = (
    "SIMULATED: these figures come from placetune's simulated Jetson, not from hardware; "
    "measure the plan on the device before relying on them"
)
_MODES = ("engine", "pipeline", "replicas")
_REQUIRED = ("format", "version", "model", "platform", "mode", "precision", "batch", "layers", "engines", "simulated")
#: trtexec refuses a single argument longer than this on Linux (MAX_ARG_STRLEN is 128 KiB).
_MAX_ARG_CHARS = 120_000
_ONNX_META = "[ONNX Layer: "


# --------------------------------------------------------------------------- helpers
def _version_tuple(text: Any) -> tuple[int, ...]:
    """``"8.6.1.6"`` -> ``(8, 6, 1, 6)``; non-numeric parts end the tuple."""
    out: list[int] = []
    for part in str(text).strip().lstrip("vV").split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _figures(m: "Measurement") -> dict[str, Any]:
    """The measured figures of a measurement (JSON-ready, no samples)."""
    lat = {k: _finite(v) for k, v in (m.latency_ms or {}).items() if _finite(v) is not None}
    return {
        "status": m.status,
        "latency_ms": lat,
        "throughput_fps": _finite(m.throughput_fps),
        "energy_mj": _finite(m.energy_mj),
        "power_w": _finite(m.power_w),
        "dla_loadables": dict(m.dla_loadables or {}),
    }


def _all_on(assignment: Mapping[str, str] | None, device: str) -> bool:
    return bool(assignment) and all(d == device for d in assignment.values())  # type: ignore[union-attr]


def _stem(onnx_path: str) -> str:
    """``dir/model.onnx`` -> ``dir/model`` (also for ``.onnx.gz``)."""
    for suffix in (".onnx.gz", ".onnx"):
        if onnx_path.endswith(suffix):
            return onnx_path[: -len(suffix)]
    return onnx_path


def _close(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def onnx_node_of(metadata: str | None) -> list[str]:
    """Candidate ONNX node names in a TensorRT layer's ``metadata``.

    TensorRT's ONNX parser (8.6+) sets ``layer.metadata`` to ``"[ONNX Layer: <node>]"``,
    possibly followed by ``" | Local Function: ..."``. Node names may themselves contain
    ``]``, so every prefix that ends at a ``]`` is a candidate; the one followed by the end
    of the text or by ``" |"`` comes first.

    Example:
        >>> onnx_node_of("[ONNX Layer: /conv1/Conv]")
        ['/conv1/Conv']
        >>> onnx_node_of("no metadata")
        []
    """
    if not metadata or not str(metadata).startswith(_ONNX_META):
        return []
    rest = str(metadata)[len(_ONNX_META):]
    ends = [i for i, ch in enumerate(rest) if ch == "]"]
    first = [rest[:i] for i in ends if rest[i + 1:] == "" or rest[i + 1:].startswith(" |")]
    others = [rest[:i] for i in ends if rest[:i] not in first]
    return first + others


# --------------------------------------------------------------------------- apply report
@dataclass
class ApplyReport:
    """What :meth:`Plan.apply` did to a TensorRT network.

    Attributes:
        engine: which engine of the plan was applied (``"engine"``, ``"segment 2 (DLA1)"``, ``"replica DLA0"``).
        dla_core: the DLA core set on the config (None: no DLA layer, the core was left alone).
        dla_layers: network layers set to ``DeviceType.DLA``.
        matched: network layer name -> plan layer name, for every matched layer.
        by_metadata: network layers matched through ``layer.metadata`` (helper layers of an ONNX node).
        unmatched: network layers that match no plan layer; they keep the default device (GPU).
        other_engine: network layers that belong to another engine of the plan (left on GPU).
        missing: layers of this engine in the plan that the network does not have.
        flags: builder flags set (``GPU_FALLBACK``, ``FP16``...).
        notes: anything else worth knowing.
    """

    engine: str
    dla_core: int | None = None
    dla_layers: list[str] = field(default_factory=list)
    matched: dict[str, str] = field(default_factory=dict)
    by_metadata: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    other_engine: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when every layer of the engine in the plan was found in the network."""
        return not self.missing

    def summary(self) -> str:
        """A few human lines."""
        core = "" if self.dla_core is None else f" on DLA core {self.dla_core}"
        lines = [
            f"{self.engine}: {len(self.matched)} layer(s) matched ({len(self.by_metadata)} through metadata), "
            f"{len(self.dla_layers)} set to DLA{core}; flags: {', '.join(self.flags) or 'none'}"
        ]
        if self.unmatched:
            lines.append(f"{len(self.unmatched)} network layer(s) not in the plan stay on the GPU: "
                         + ", ".join(self.unmatched[:5]) + (" ..." if len(self.unmatched) > 5 else ""))
        if self.other_engine:
            lines.append(f"{len(self.other_engine)} network layer(s) belong to another engine of the plan")
        if self.missing:
            lines.append(f"{len(self.missing)} plan layer(s) not found in the network: "
                         + ", ".join(self.missing[:5]) + (" ..." if len(self.missing) > 5 else ""))
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


# --------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """A placement ready to deploy, with how it was obtained and what it measured.

    Build one with :func:`export_plan`, read one with :func:`load`. Layers are named as
    TensorRT's ONNX parser names them (the ONNX node name, or ``node_of_<first output>``).

    Attributes:
        model: identity of the model: ``hash``, ``name``, ``input_shapes`` (name -> dims),
            ``path`` (ONNX file or None), ``zoo`` (zoo name or None), ``layers`` (count).
        platform: Jetson platform name (``orin-agx``...).
        mode: ``engine``, ``pipeline`` or ``replicas``.
        precision: ``fp16``, ``int8`` or ``fp32``.
        batch: the model's batch size.
        layers: per layer in topological order: ``name``, ``op_type`` (when known),
            ``requested`` and ``realized`` device, and ``fallback`` (why it left the DLA) when it did.
        engines: the engines the plan needs, each with ``index``, ``kind`` (``engine``,
            ``segment`` or ``replica``), ``device``, ``dla_core``, ``layers`` (all layers it
            holds), ``dla_layers`` (those on its DLA), and per kind ``predecessors`` /
            ``time_ms`` (segments) or ``batch`` / ``latency_ms`` / ``throughput_fps`` (replicas).
        simulated: True when the figures come from the simulated Jetson.
        objective: the study's objective.
        backend: measurement backend of the study.
        versions: ``tensorrt``, ``jetpack``... of the measuring machine (hardware studies),
            ``dla_rules_tensorrt`` (the TensorRT version whose DLA rules were applied) and ``placetune``.
        settings: build settings: ``gpu_fallback``, ``dla_core``, ``frames_in_flight``,
            ``replicas``, ``power_mode``, ``trt_version``.
        measured: the figures: ``status``, ``latency_ms`` (median, p90, p99...),
            ``throughput_fps``, ``energy_mj``, ``power_w``, ``dla_loadables``, ``segment_times_ms``,
            ``timeline`` and, in replicas mode, ``replicas``.
        baselines: ``all-gpu`` (and ``all-dla0``/``all-dla1`` when stored): their figures,
            measurement id, and the plan's ``speedup`` over them.
        source: ``study``, ``measurement_id``, ``trial_number``, ``agent``, ``placement_key``,
            ``measured_at``, ``exported_at``.
        notes: human notes (what is missing, what to check).
        label: ``SIMULATED...`` for simulated plans, else empty.
    """

    model: dict[str, Any]
    platform: str
    mode: str
    precision: str
    batch: int
    layers: list[dict[str, Any]]
    engines: list[dict[str, Any]]
    simulated: bool
    objective: str = "latency"
    backend: str = ""
    versions: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    measured: dict[str, Any] = field(default_factory=dict)
    baselines: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    label: str = ""

    # ------------------------------------------------------------ views
    @property
    def requested(self) -> dict[str, str]:
        """Layer -> device asked for, in topological order."""
        return {layer["name"]: layer["requested"] for layer in self.layers}

    @property
    def realized(self) -> dict[str, str]:
        """Layer -> device that ran (what was measured), in topological order."""
        return {layer["name"]: layer["realized"] for layer in self.layers}

    @property
    def layer_names(self) -> list[str]:
        """Layer names in topological order."""
        return [layer["name"] for layer in self.layers]

    @property
    def gpu_fallback(self) -> bool:
        """True when the plan was measured with TensorRT's GPU_FALLBACK flag."""
        return bool(self.settings.get("gpu_fallback", True))

    @property
    def timeline(self) -> list[dict[str, Any]]:
        """Timeline events of the measurement (may be empty)."""
        return list(self.measured.get("timeline") or [])

    def placement(self, model: "Model", which: str = "realized") -> Placement:
        """The plan's placement of ``model`` (``which`` = ``realized`` or ``requested``).

        Raises:
            ModelError / PlacementError: the plan is not a plan of this model.
        """
        self.check_model(model)
        return Placement(model, self.realized if which == "realized" else self.requested)

    def summary(self) -> str:
        """A few human lines: what, where, how fast, compared with all-GPU."""
        sim = "SIMULATED " if self.simulated else ""
        lines = [f"{sim}plan: {self.model.get('name')} on {self.platform}, {self.mode} mode, {self.precision}, "
                 f"batch {self.batch}, {len(self.engines)} engine(s)"]
        counts: dict[str, int] = {}
        for d in self.realized.values():
            counts[d] = counts.get(d, 0) + 1
        lines.append("realised: " + ", ".join(f"{d} {counts[d]}" for d in DEVICES if d in counts))
        lat = self.measured.get("latency_ms") or {}
        if lat.get("median") is not None:
            text = f"latency median {lat['median']:.4g} ms"
            if lat.get("p99") is not None:
                text += f", p99 {lat['p99']:.4g} ms"
            if self.measured.get("throughput_fps") is not None:
                text += f", {self.measured['throughput_fps']:,.1f} fps"
            if self.measured.get("energy_mj") is not None:
                text += f", {self.measured['energy_mj']:.4g} mJ/inference"
            lines.append(text)
        base = self.baselines.get("all-gpu")
        if base and base.get("speedup") is not None:
            lines.append(f"vs all-GPU: {base['speedup']:.3g}x latency")
        if self.simulated:
            lines.append(self.label or SIMULATED_LABEL)
        return "\n".join(lines)

    # ------------------------------------------------------------ (de)serialisation
    def to_dict(self) -> dict[str, Any]:
        """The JSON document (``format``, ``version`` first)."""
        return {
            "format": PLAN_FORMAT,
            "version": PLAN_VERSION,
            "simulated": bool(self.simulated),
            "label": self.label,
            "model": self.model,
            "platform": self.platform,
            "mode": self.mode,
            "precision": self.precision,
            "batch": int(self.batch),
            "objective": self.objective,
            "backend": self.backend,
            "versions": self.versions,
            "settings": self.settings,
            "layers": self.layers,
            "engines": self.engines,
            "measured": self.measured,
            "baselines": self.baselines,
            "source": self.source,
            "notes": self.notes,
        }

    def to_json(self, indent: int | None = 1) -> str:
        """The JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, default=str)

    @classmethod
    def from_dict(cls, doc: Any, *, where: str = "plan") -> "Plan":
        """Check a plan document's structure and build the Plan.

        Args:
            doc: the decoded JSON.
            where: what to call the document in messages (a file name).

        Raises:
            ConfigError: not a placetune plan, a newer version, missing or malformed fields.
            PlacementError: unknown device names.
        """
        if not isinstance(doc, dict):
            raise ConfigError(f"{where} is not a placetune plan: expected a JSON object, found {type(doc).__name__}")
        fmt = doc.get("format")
        if fmt != PLAN_FORMAT:
            raise ConfigError(
                f"{where} is not a placetune plan: its \"format\" is {fmt!r}, expected {PLAN_FORMAT!r} "
                "(write one with `placetune export --study NAME -o plan.json`)"
            )
        version = doc.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ConfigError(f"{where}: \"version\" must be a positive integer, found {version!r}")
        if version > PLAN_VERSION:
            raise ConfigError(
                f"{where} is a plan of version {version}, newer than this placetune reads (version {PLAN_VERSION}): "
                "upgrade placetune"
            )
        missing = [k for k in _REQUIRED if k not in doc]
        if missing:
            raise ConfigError(f"{where} lacks the field(s) {', '.join(missing)}: the file is incomplete or was edited")
        model = doc["model"]
        if not isinstance(model, dict) or not isinstance(model.get("hash"), str):
            raise ConfigError(f"{where}: \"model\" must be an object with the model's \"hash\"")
        if doc["mode"] not in _MODES:
            raise ConfigError(f"{where}: unknown mode {doc['mode']!r}; modes are {', '.join(_MODES)}")
        layers = doc["layers"]
        if not isinstance(layers, list) or not layers:
            raise ConfigError(f"{where}: \"layers\" must be a non-empty list of {{name, requested, realized}}")
        seen: set[str] = set()
        for i, layer in enumerate(layers):
            if not isinstance(layer, dict) or not isinstance(layer.get("name"), str):
                raise ConfigError(f"{where}: layers[{i}] must be an object with a \"name\" string")
            for key in ("requested", "realized"):
                dev = layer.get(key)
                if dev not in DEVICES:
                    raise PlacementError(
                        f"{where}: layer {layer['name']!r} has {key} device {dev!r}; devices are {', '.join(DEVICES)}"
                    )
            if layer["name"] in seen:
                raise ConfigError(f"{where}: layer {layer['name']!r} is listed twice")
            seen.add(layer["name"])
        engines = doc["engines"]
        if not isinstance(engines, list) or not engines or not all(isinstance(e, dict) for e in engines):
            raise ConfigError(f"{where}: \"engines\" must be a non-empty list of objects")
        for e in engines:
            for name in list(e.get("layers") or []) + list(e.get("dla_layers") or []):
                if name not in seen:
                    raise PlacementError(
                        f"{where}: engine {e.get('index')} names layer {name!r}, which the plan's layer list "
                        f"does not have{_close(name, seen)}"
                    )
            if e.get("device") is not None and e["device"] not in DEVICES:
                raise PlacementError(f"{where}: engine {e.get('index')} has unknown device {e['device']!r}")
        try:
            batch = int(doc["batch"])
        except (TypeError, ValueError):
            raise ConfigError(f"{where}: \"batch\" must be an integer, found {doc['batch']!r}") from None
        return cls(
            model=dict(model),
            platform=str(doc["platform"]),
            mode=str(doc["mode"]),
            precision=str(doc["precision"]),
            batch=batch,
            layers=[dict(x) for x in layers],
            engines=[dict(e) for e in engines],
            simulated=bool(doc["simulated"]),
            objective=str(doc.get("objective") or "latency"),
            backend=str(doc.get("backend") or ""),
            versions=dict(doc.get("versions") or {}),
            settings=dict(doc.get("settings") or {}),
            measured=dict(doc.get("measured") or {}),
            baselines=dict(doc.get("baselines") or {}),
            source=dict(doc.get("source") or {}),
            notes=list(doc.get("notes") or []),
            label=str(doc.get("label") or ""),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the plan as JSON (atomically: a temporary file renamed over ``path``).

        Raises:
            ConfigError: the file cannot be written.
        """
        p = Path(path)
        tmp = p.with_name(p.name + ".tmp")
        try:
            tmp.write_text(self.to_json() + "\n", encoding="utf-8")
            os.replace(tmp, p)
        except OSError as exc:
            raise ConfigError(f"cannot write plan file {p}: {exc.strerror or exc}") from None
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str], model: "Model | str | None" = None, *,
             check_hash: bool = True) -> "Plan":
        """Read a plan file; see :func:`load`."""
        return load(path, model, check_hash=check_hash)

    # ------------------------------------------------------------ checks
    def check_model(self, model: "Model", *, check_hash: bool = True) -> None:
        """Check that the plan belongs to ``model``.

        Args:
            model: the :class:`~placetune.model.model.Model` the plan is applied to.
            check_hash: compare the model hash (graph and shapes, not weights); with False
                only the layer names are checked (e.g. a re-export with another opset).

        Raises:
            ModelError: the model hash differs.
            PlacementError: the plan names layers the model does not have.
        """
        want = self.model.get("hash")
        if check_hash and want != model.hash:
            raise ModelError(
                f"the plan is for model {self.model.get('name')!r} (hash {str(want)[:12]}), but the model given is "
                f"{model.name!r} (hash {model.hash[:12]}): export a plan from a study of this model, or load the "
                "model the plan was made for (same graph and input shapes)"
            )
        names = set(model.names)
        unknown = [n for n in self.layer_names if n not in names]
        if unknown:
            shown = ", ".join(f"{n!r}{_close(n, names)}" for n in unknown[:5])
            more = f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            raise PlacementError(
                f"the plan names {len(unknown)} layer(s) that model {model.name!r} does not have: {shown}{more}"
            )

    # ------------------------------------------------------------ engines
    def engine(self, segment: int | None = None, replica: int | str | None = None) -> dict[str, Any]:
        """The engine entry of :attr:`engines` that ``apply`` / trtexec handle.

        Args:
            segment: pipeline mode: the segment index (required there, refused elsewhere).
            replica: replicas mode: the replica's device (``"DLA1"``) or index (required there).

        Raises:
            ConfigError: a missing or out-of-range segment / replica, or one given in the wrong mode.
        """
        if self.mode == "engine":
            if segment is not None or replica is not None:
                raise ConfigError("an engine-mode plan has one engine: call apply(network, config) without "
                                  "segment= or replica=")
            return self.engines[0]
        if self.mode == "pipeline":
            if replica is not None:
                raise ConfigError("replica= is for replicas-mode plans; this plan is a pipeline: use segment=")
            n = len(self.engines)
            if segment is None:
                raise ConfigError(
                    f"this pipeline plan has {n} segment engines: build each one from its own part of the ONNX "
                    "(model.seg<i>.onnx) and call apply(network, config, segment=i) for i in "
                    f"0..{n - 1}"
                )
            if not 0 <= int(segment) < n:
                raise ConfigError(f"segment {segment} does not exist: the plan has segments 0..{n - 1}")
            return self.engines[int(segment)]
        if segment is not None:
            raise ConfigError("segment= is for pipeline plans; this plan is replicas mode: use replica=")
        devices = [e.get("device") for e in self.engines]
        if replica is None:
            raise ConfigError(
                f"this replicas plan has {len(self.engines)} engines ({', '.join(map(str, devices))}): "
                "call apply(network, config, replica=DEVICE) for each"
            )
        if isinstance(replica, int):
            if not 0 <= replica < len(self.engines):
                raise ConfigError(f"replica {replica} does not exist: the plan has replicas 0..{len(self.engines) - 1}")
            return self.engines[replica]
        want = str(replica).strip().upper()
        want = "DLA0" if want == "DLA" else want
        for e in self.engines:
            if e.get("device") == want:
                return e
        raise ConfigError(f"the plan has no replica on {replica!r}; its replicas run on {', '.join(map(str, devices))}")

    # ------------------------------------------------------------ apply
    def apply(
        self,
        network: Any,
        config: Any,
        *,
        segment: int | None = None,
        replica: int | str | None = None,
        trt: Any = None,
        set_precision: bool = True,
    ) -> ApplyReport:
        """Apply the plan to a TensorRT network through its builder config.

        Sets ``config.default_device_type = GPU``; when the engine has DLA layers also
        ``config.DLA_core`` and (when the plan was measured with it) the ``GPU_FALLBACK``
        flag, and ``config.set_device_type(layer, DLA)`` for each network layer that ran on
        the DLA in the plan (the *realised* placement: what was measured). With
        ``set_precision`` the ``FP16`` / ``INT8`` builder flag of the plan's precision is set
        where this TensorRT has it (11.x is strongly typed and has none).

        Network layers are matched to plan layers by ``layer.name`` and, failing that, by
        ``layer.metadata`` (``"[ONNX Layer: <node>]"``, TensorRT 8.6+): helper layers the
        ONNX parser adds for a node (``<node>_<k>``, ``ONNXTRT_*``) follow their node.
        Layers that match nothing keep the default device (GPU) and are reported.

        Engine mode applies to the whole network. A pipeline plan needs one engine per
        segment, each built from that segment's part of the ONNX: call
        ``apply(network_i, config_i, segment=i)`` for each. A replicas plan needs one engine
        per device: ``apply(network, config, replica="DLA1")``.

        Args:
            network: a ``tensorrt.INetworkDefinition`` (or anything with ``num_layers`` and
                ``get_layer(i)`` whose layers have ``name`` and optionally ``metadata``).
            config: a ``tensorrt.IBuilderConfig`` (``default_device_type``, ``DLA_core``,
                ``set_flag``, ``set_device_type``).
            segment: pipeline mode: which segment engine this network is.
            replica: replicas mode: which replica (device name or index).
            trt: the ``tensorrt`` module (imported when None).
            set_precision: also set the FP16/INT8 builder flag of the plan's precision.

        Returns:
            An :class:`ApplyReport` of matched, unmatched and missing layers.

        Raises:
            ConfigError: wrong or missing ``segment`` / ``replica`` for the plan's mode.
            PlacementError: no network layer matches the plan (another model's network).
            BackendError: TensorRT is not installed and no ``trt`` was passed.

        Example:
            ``plan = placetune.plan.load("plan.json")``;
            ``report = plan.apply(network, config)``; ``print(report.summary())``
        """
        if trt is None:
            try:
                import tensorrt as trt  # type: ignore[import-not-found, no-redef]
            except ImportError:
                raise BackendError(
                    "TensorRT's Python package is not installed here: apply the plan on the Jetson "
                    "(JetPack ships python3-libnvinfer), or pass trt=<the tensorrt module>"
                ) from None
        eng = self.engine(segment, replica)
        what = {"engine": "engine", "segment": f"segment {eng.get('index')} ({eng.get('device')})",
                "replica": f"replica {eng.get('device')}"}.get(str(eng.get("kind")), "engine")
        report = ApplyReport(engine=what)
        plan_names = set(self.layer_names)
        scope = set(eng.get("layers") or self.layer_names)
        dla_set = set(eng.get("dla_layers") or [])
        core = eng.get("dla_core")
        if dla_set and core is None:
            core = dla_core(str(eng.get("device") or "DLA0")) or 0
        if eng.get("kind") == "segment" and not eng.get("layers"):
            raise ConfigError(f"{what} of this plan lists no layer names (the model could not be loaded at export): "
                              "export the plan again where the study's model file is readable")

        try:
            n = int(network.num_layers)
        except (AttributeError, TypeError, ValueError):
            raise PlacementError("network has no num_layers: pass a tensorrt.INetworkDefinition") from None
        # match every layer first: the config is changed only once the network is known to fit the plan
        found: set[str] = set()
        to_dla: list[Any] = []
        for i in range(n):
            layer = network.get_layer(i)
            name = str(getattr(layer, "name", ""))
            target = name if name in plan_names else None
            if target is None:
                for cand in onnx_node_of(getattr(layer, "metadata", None)):
                    if cand in plan_names:
                        target = cand
                        report.by_metadata.append(name)
                        break
            if target is None:
                report.unmatched.append(name)
                continue
            if target not in scope:
                report.other_engine.append(name)
                continue
            report.matched[name] = target
            found.add(target)
            if target in dla_set:
                to_dla.append(layer)
                report.dla_layers.append(name)
        if n and not report.matched and not report.other_engine:
            shown = ", ".join(repr(x) for x in report.unmatched[:3])
            raise PlacementError(
                f"none of the network's {n} layers matches a layer of the plan by name or by "
                f"'[ONNX Layer: ...]' metadata (first layers: {shown}); is this the network of model "
                f"{self.model.get('name')!r} parsed from its ONNX file?"
            )
        if n and not report.matched:
            raise PlacementError(
                f"the network's layers belong to other engines of the plan, none to {what}: pass the network "
                "of this engine (or another segment=/replica=)"
            )
        config.default_device_type = trt.DeviceType.GPU
        if to_dla:
            config.DLA_core = int(core)
            report.dla_core = int(core)
            for layer in to_dla:
                config.set_device_type(layer, trt.DeviceType.DLA)
            if self.gpu_fallback:
                config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
                report.flags.append("GPU_FALLBACK")
            else:
                report.notes.append("the plan was measured without GPU_FALLBACK: the build fails if a DLA layer "
                                    "cannot run on the DLA")
        if set_precision and self.precision in ("fp16", "int8"):
            flag = self.precision.upper()
            if hasattr(trt.BuilderFlag, flag):
                config.set_flag(getattr(trt.BuilderFlag, flag))
                report.flags.append(flag)
                if flag == "INT8":
                    report.notes.append("INT8: give the config a calibrator or per-tensor dynamic ranges "
                                        "(or a Q/DQ network) for accurate results")
            else:
                report.notes.append(f"this TensorRT has no BuilderFlag.{flag} (TensorRT 11 is strongly typed): "
                                    f"give the network {self.precision} tensor types instead")
        report.missing = [x for x in (eng.get("layers") or self.layer_names) if x not in found]
        if report.other_engine:
            report.notes.append(f"{len(report.other_engine)} layer(s) belong to other engines of the plan and stay "
                                "on the GPU: build each engine from its own part of the network")
        if report.missing:
            log.warning("plan layers not found in the network (%d): %s", len(report.missing),
                        ", ".join(report.missing[:5]))
        if self.simulated:
            report.notes.append("the plan's figures are SIMULATED: measure the built engine on the device")
        log.info("%s", report.summary())
        return report

    def trtexec_commands(self, onnx_path: str = "model.onnx", trt_version: str | None = None) -> list[str]:
        """See :func:`trtexec_commands`."""
        return trtexec_commands(self, onnx_path, trt_version)


# --------------------------------------------------------------------------- loading
def load(path: str | os.PathLike[str], model: "Model | str | None" = None, *, check_hash: bool = True) -> Plan:
    """Read and check a plan file.

    Args:
        path: the plan JSON file.
        model: when given (a :class:`~placetune.model.model.Model`, an ONNX path or a zoo name), the
            plan must belong to it: same model hash and only layers it has.
        check_hash: with False only the layer names are checked against ``model``.

    Returns:
        The :class:`Plan`.

    Raises:
        ConfigError: unreadable file, corrupt JSON, not a plan, a newer plan version, missing fields.
        ModelError: the plan is for another model (hash mismatch).
        PlacementError: the plan names layers the model does not have, or unknown devices.

    Example:
        ``plan = placetune.plan.load("plan.json", Model.load("model.onnx"))``
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"plan file {p} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read plan file {p}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        doc = json.loads(text)
    except ValueError as exc:
        pos = f" at line {exc.lineno} column {exc.colno}" if hasattr(exc, "lineno") else ""
        raise ConfigError(
            f"plan file {p} is not valid JSON{pos} ({getattr(exc, 'msg', exc)}): the file is corrupt or truncated; "
            "export it again with `placetune export`"
        ) from None
    try:
        plan = Plan.from_dict(doc, where=f"plan file {p}")
        plan.summary()  # every field the plan reports has the right type
    except PlacetuneError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:
        raise ConfigError(
            f"plan file {p} has a field of the wrong type ({type(exc).__name__}: {exc}); "
            "export it again with `placetune export`"
        ) from None
    if model is not None:
        if not hasattr(model, "hash"):
            from placetune.model.model import Model

            model = Model.load(str(model))
        try:
            plan.check_model(model, check_hash=check_hash)  # type: ignore[arg-type]
        except PlacetuneError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise ConfigError(f"plan file {p} has malformed layer entries ({type(exc).__name__}: {exc})") from None
    return plan


# --------------------------------------------------------------------------- export
def _model_row(store: "Store", model_hash: str) -> Any:
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from placetune.store.schema import ModelRow

    table = ModelRow.__table__
    try:
        with store.engine.connect() as conn:
            return conn.execute(select(table).where(table.c.hash == model_hash)).first()
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the models table of {store.url}: {str(exc).splitlines()[0]}") from None


def load_study_model(store: "Store", study: "StudyRecord | str") -> "Model":
    """The :class:`~placetune.model.model.Model` a study searched, loaded again from its file or the zoo.

    Uses the ``pt_models`` row of the study's model (name, path, input shapes) and checks
    that the loaded model has the stored hash.

    Raises:
        ModelError: the file is gone or changed, or the model is neither a file nor a zoo model.
        UnknownNameError: no such study.
    """
    from placetune.model import zoo
    from placetune.model.model import Model

    st = store.study(study) if isinstance(study, str) else study
    row = _model_row(store, st.model_hash)
    if row is None:
        raise ModelError(f"the database has no model row for study {st.name!r} (hash {st.model_hash[:12]})")
    shapes = {k: tuple(v) for k, v in (row.shapes or {}).items()}
    tried: list[str] = []
    candidates: list[tuple[str, Any]] = []
    if row.path:
        candidates.append((f"file {row.path}", lambda: Model.load(row.path, shapes or None)))
    base = str(row.name).partition(":")[0]
    if base in zoo.names():
        candidates.append((f"zoo model {row.name}", lambda: Model.load(str(row.name), batch=int(st.batch))))
    for what, make in candidates:
        try:
            model = make()
        except PlacetuneError as exc:
            tried.append(f"{what}: {exc}")
            continue
        if model.hash == st.model_hash:
            return model
        tried.append(f"{what} has hash {model.hash[:12]}, the study's model has {st.model_hash[:12]}")
    why = "; ".join(tried) or "it was loaded from neither a file nor the zoo"
    raise ModelError(f"cannot load the model of study {st.name!r} ({row.name}) again: {why}")


def _engines(mode: str, realized: Placement | None, realized_map: dict[str, str], m: "Measurement",
             settings: Mapping[str, Any], platform_devices: tuple[str, ...], batch: int,
             notes: list[str]) -> list[dict[str, Any]]:
    names = list(realized_map)
    dla_names = [n for n, d in realized_map.items() if d != "GPU"]
    dla_devices = sorted({d for d in realized_map.values() if d != "GPU"})
    if mode == "engine":
        device = dla_devices[0] if dla_devices else "GPU"
        return [{"index": 0, "kind": "engine", "device": device, "dla_core": dla_core(device),
                 "batch": batch, "layers": names, "dla_layers": dla_names}]
    if mode == "pipeline":
        times = {int(s.get("index", i)): s for i, s in enumerate(m.segment_times_ms or [])}
        out = []
        if realized is not None:
            for s in realized.segments(pipeline=True):
                t = times.get(s.index, {})
                out.append({"index": s.index, "kind": "segment", "device": s.device, "dla_core": dla_core(s.device),
                            "layers": list(s.layers), "dla_layers": list(s.layers) if s.device != "GPU" else [],
                            "predecessors": list(s.predecessors), "time_ms": _finite(t.get("time_ms")),
                            "start_ms": _finite(t.get("start_ms")), "end_ms": _finite(t.get("end_ms"))})
            return out
        notes.append("the model could not be loaded: the pipeline segments list no layer names; "
                     "export again where the model file is readable")
        for i, t in sorted(times.items()):
            dev = str(t.get("device", "GPU"))
            out.append({"index": i, "kind": "segment", "device": dev, "dla_core": dla_core(dev), "layers": [],
                        "dla_layers": [], "n_layers": t.get("layers"),
                        "predecessors": list(t.get("predecessors") or []), "time_ms": _finite(t.get("time_ms")),
                        "start_ms": _finite(t.get("start_ms")), "end_ms": _finite(t.get("end_ms"))})
        return out or [{"index": 0, "kind": "segment", "device": "GPU", "dla_core": None, "layers": [],
                        "dla_layers": []}]
    # replicas
    per = {str(r.get("device")): r for r in (m.extra or {}).get("replicas") or [] if isinstance(r, dict)}
    reps = settings.get("replicas") or {d: batch for d in platform_devices}
    order = [d for d in DEVICES if d in reps] + [d for d in reps if d not in DEVICES]
    out = []
    for i, dev in enumerate(order):
        info = per.get(dev, {})
        on_dla = dev != "GPU" and bool(dla_names)
        out.append({"index": i, "kind": "replica", "device": dev, "dla_core": dla_core(dev) if on_dla else None,
                    "batch": int(info.get("batch") or reps[dev]), "layers": names,
                    "dla_layers": dla_names if on_dla else [], "latency_ms": _finite(info.get("latency_ms")),
                    "throughput_fps": _finite(info.get("throughput_fps"))})
    return out


def _versions(st: "StudyRecord") -> dict[str, Any]:
    fp = st.fingerprint or {}
    from placetune.version import __version__

    def pick(*keys: str) -> Any:
        for k in keys:
            if fp.get(k) not in (None, ""):
                return fp[k]
        return None

    out = {
        "tensorrt": None if st.simulated else pick("tensorrt", "tensorrt_version", "trt_version", "trt"),
        "jetpack": None if st.simulated else pick("jetpack", "jetpack_version"),
        "l4t": None if st.simulated else pick("l4t", "l4t_version"),
        "cuda": None if st.simulated else pick("cuda", "cuda_version"),
        "module": None if st.simulated else pick("module"),
        "power_mode": pick("power_mode"),
        "clocks_locked": None if st.simulated else pick("clocks_locked"),
        "dla_rules_tensorrt": (st.settings or {}).get("trt_version"),
        "placetune": __version__,
    }
    if st.simulated:
        out["simulator"] = fp.get("version")
    return {k: v for k, v in out.items() if v is not None}


def _baselines(records: list["MeasurementRecord"], best: "MeasurementRecord", n_layers: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    ok = [r for r in records if r.measurement.ok]
    best_lat = (best.measurement.latency_ms or {}).get("median")
    for key, device in (("all-gpu", "GPU"), ("all-dla0", "DLA0"), ("all-dla1", "DLA1")):
        rec = next((r for r in ok if _all_on(r.requested, device) and len(r.requested or {}) == n_layers), None)
        if rec is None and device == "GPU":  # the same cache entry, whoever asked for it first
            rec = next((r for r in ok if _all_on(r.realized, "GPU")), None)
        if rec is None:
            continue
        fig = _figures(rec.measurement)
        fig["measurement_id"] = rec.id
        lat = fig["latency_ms"].get("median")
        fig["speedup"] = (lat / best_lat) if lat and best_lat else None
        out[key] = fig
    return out


def export_plan(
    store: "Store",
    study_name: str,
    *,
    model: "Model | None" = None,
    measurement_id: int | None = None,
) -> Plan:
    """The plan of a study's best measurement (or of one chosen measurement).

    Args:
        store: the :class:`~placetune.store.store.Store`.
        study_name: the study.
        model: the study's :class:`~placetune.model.model.Model`; None: loaded again with
            :func:`load_study_model` (without it, pipeline segments carry no layer names).
        measurement_id: export this stored measurement instead of the best one.

    Returns:
        The :class:`Plan`; :meth:`Plan.save` writes it.

    Raises:
        UnknownNameError: no such study.
        ConfigError: nothing ok is stored for the study, or ``measurement_id`` is not one of its measurements.
        ModelError: ``model`` is not the study's model.
    """
    from placetune.hardware.platforms import get_platform

    st = store.study(study_name)
    records = store.measurements(study_name)
    if measurement_id is not None:
        rec = next((r for r in records if r.id == int(measurement_id)), None)
        if rec is None:
            raise ConfigError(f"measurement {measurement_id} is not a measurement of study {study_name!r}")
        if not rec.measurement.ok:
            raise ConfigError(f"measurement {measurement_id} of study {study_name!r} has status "
                              f"{rec.measurement.status!r}: only an ok measurement makes a plan")
    else:
        objective = st.objective.split("+")[0].strip()
        rec = store.best(study_name, objective)
        if rec is None:
            raise ConfigError(
                f"study {study_name!r} has no successful measurement with a {objective} value yet: "
                "run the search (placetune tune) before exporting a plan"
            )
    m = rec.measurement
    notes: list[str] = []
    if model is None:
        try:
            model = load_study_model(store, st)
        except ModelError as exc:
            log.warning("%s", exc)
            notes.append(f"model not loaded ({exc})")
    elif model.hash != st.model_hash:
        raise ModelError(f"model {model.name!r} (hash {model.hash[:12]}) is not the model of study {study_name!r} "
                         f"({st.model_name}, hash {st.model_hash[:12]})")
    realized_map = dict(rec.realized or m.realized or {})
    requested_map = dict(rec.requested or m.requested or realized_map)
    if model is not None:
        realized_map = Placement(model, realized_map).as_dict()
        requested_map = Placement(model, requested_map).as_dict()
        ops = {layer.name: layer.op_type for layer in model.layers}
    else:
        ops = {}
    if not realized_map:
        raise ConfigError(f"measurement {rec.id} of study {study_name!r} has no realised placement to export")
    layers = []
    for name, dev in realized_map.items():
        entry: dict[str, Any] = {"name": name}
        if name in ops:
            entry["op_type"] = ops[name]
        entry["requested"] = requested_map.get(name, dev)
        entry["realized"] = dev
        if name in (m.fallback or {}):
            entry["fallback"] = m.fallback[name]
        layers.append(entry)
    try:
        devices = get_platform(st.platform).devices
    except PlacetuneError:
        devices = tuple(DEVICES)
    settings = dict(st.settings or {})
    realized_p = Placement(model, realized_map) if model is not None else None
    engines = _engines(st.mode, realized_p, realized_map, m, settings, devices, int(st.batch), notes)
    measured = _figures(m)
    measured["segment_times_ms"] = list(m.segment_times_ms or [])
    measured["timeline"] = list(m.timeline or [])
    measured["backend"] = m.backend
    if m.fallback:
        measured["fallback"] = dict(m.fallback)
    if st.mode == "replicas" and (m.extra or {}).get("replicas"):
        measured["replicas"] = list(m.extra["replicas"])
    if st.mode == "pipeline":
        measured["frames_in_flight"] = settings.get("frames_in_flight", 1)
        if (m.extra or {}).get("period_ms") is not None:
            measured["period_ms"] = _finite(m.extra["period_ms"])
    for note in (m.extra or {}).get("notes") or []:
        notes.append(str(note))
    baselines = _baselines(records, rec, len(realized_map))
    if "all-gpu" not in baselines:
        notes.append("no all-GPU measurement is stored for this study: the plan has no baseline "
                     "(Evaluator.baseline() measures it)")
    keep = ("gpu_fallback", "dla_core", "frames_in_flight", "replicas", "power_mode", "trt_version", "iterations")
    return Plan(
        model={
            "hash": st.model_hash,
            "name": st.model_name,
            "input_shapes": {k: list(v) for k, v in (model.input_shapes.items() if model is not None else
                                                     (_stored_shapes(store, st) or {}).items())},
            "path": None if model is None or model.path is None else str(model.path),
            "zoo": None if model is None else model.zoo,
            "layers": len(realized_map),
        },
        platform=st.platform,
        mode=st.mode,
        precision=st.precision,
        batch=int(st.batch),
        layers=layers,
        engines=engines,
        simulated=bool(st.simulated),
        objective=st.objective,
        backend=st.backend,
        versions=_versions(st),
        settings={k: settings.get(k) for k in keep if k in settings},
        measured=measured,
        baselines=baselines,
        source={
            "study": st.name,
            "measurement_id": rec.id,
            "trial_number": rec.trial_number,
            "agent": rec.agent,
            "placement_key": rec.placement_key,
            "measured_at": rec.created_at.isoformat() if rec.created_at else None,
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
        notes=notes,
        label=SIMULATED_LABEL if st.simulated else "",
    )


def _stored_shapes(store: "Store", st: "StudyRecord") -> dict[str, list[int]] | None:
    row = _model_row(store, st.model_hash)
    return None if row is None else dict(row.shapes or {})


# --------------------------------------------------------------------------- trtexec
def layer_device_types(assignment: Mapping[str, str]) -> str:
    """The value of trtexec's ``--layerDeviceTypes`` for ``{layer: "GPU"|"DLA0"|"DLA1"}``.

    trtexec's grammar (``sampleOptions.cpp``): pairs separated by ``,``; each pair split on
    its **last** ``:`` into layer name and ``GPU`` / ``DLA``. So names may contain ``:``
    (and ``/``, ``.``, spaces), but a name containing ``,`` cannot be written, nor one
    containing ``'`` (trtexec treats single quotes as name quoting and drops them).

    Raises:
        PlacementError: a layer name trtexec cannot express.

    Example:
        >>> layer_device_types({"/conv1/Conv": "DLA0", "a:b": "GPU"})
        '/conv1/Conv:DLA,a:b:GPU'
    """
    pairs = []
    for name, dev in assignment.items():
        if "," in name:
            raise PlacementError(
                f"layer name {name!r} contains ',', which trtexec's --layerDeviceTypes cannot express (it splits the "
                "list at every ','): apply the plan with the Python API (placetune.plan.load(...).apply(network, "
                "config)) or rename the ONNX node"
            )
        if "'" in name:
            raise PlacementError(
                f"layer name {name!r} contains a single quote, which trtexec strips from layer names in "
                "--layerDeviceTypes: apply the plan with the Python API (Plan.apply) or rename the ONNX node"
            )
        if not name:
            raise PlacementError("a layer has an empty name: trtexec cannot address it; use the Python API "
                                 "(Plan.apply)")
        pairs.append(f"{name}:{'GPU' if dev == 'GPU' else 'DLA'}")
    return ",".join(pairs)


def _shapes_arg(shapes: Mapping[str, Any], batch: int | None = None) -> str | None:
    parts = []
    for name, dims in shapes.items():
        d = [int(x) for x in dims]
        if batch is not None and d:
            d[0] = int(batch)
        if "," in name or "'" in name:
            return None
        parts.append(f"{name}:{'x'.join(map(str, d))}")
    return ",".join(parts) or None


def trtexec_commands(plan: Plan, onnx_path: str = "model.onnx", trt_version: str | None = None) -> list[str]:
    """The trtexec command lines that build the plan's engine(s), with explaining ``#`` comment lines.

    One command per engine: one in engine mode; one per segment in pipeline mode (each
    from its own part of the ONNX, ``<stem>.seg<i>.onnx``: placetune cuts these files in a
    later version); one per replica in replicas mode. A DLA engine gets ``--useDLACore=k``
    and ``--allowGPUFallback`` (when the plan used it); an engine with layers on both
    devices also ``--layerDeviceTypes`` listing every layer (``--useDLACore`` makes DLA the
    default, so GPU layers must be named). Every argument is quoted for a POSIX shell.

    Args:
        plan: the plan.
        onnx_path: the ONNX file the engines are built from.
        trt_version: the TensorRT version of the target (default: the plan's measured
            TensorRT, else the version whose DLA rules it used). Below 8.6 a ``# WARNING``
            line says that trtexec has no ``--layerDeviceTypes``; from 11 the ``--fp16`` /
            ``--int8`` flags are left out (strongly typed).

    Returns:
        Lines: comments start with ``#``; the others are commands.

    Raises:
        PlacementError: a layer name that ``--layerDeviceTypes`` cannot express (contains ``,`` or ``'``).
    """
    version = trt_version or plan.versions.get("tensorrt") or plan.settings.get("trt_version") or "8.6"
    vt = _version_tuple(version)
    q = shlex.quote
    stem = _stem(onnx_path)
    sim = " (figures SIMULATED: measure on the device)" if plan.simulated else ""
    lines = [f"# placetune plan: {plan.model.get('name')} on {plan.platform}, {plan.mode} mode, {plan.precision}, "
             f"batch {plan.batch}{sim}"]
    src = plan.source
    if src:
        lines.append(f"# study {src.get('study')}, measurement {src.get('measurement_id')}"
                     + (f", agent {src['agent']}" if src.get("agent") else "")
                     + (f", trial {src['trial_number']}" if src.get("trial_number") is not None else ""))
    lines.append(f"# target TensorRT {version}")
    precision_flags: list[str] = []
    if plan.precision in ("fp16", "int8"):
        if vt and vt[0] >= 11:
            lines.append(f"# TensorRT {version} is strongly typed (no --fp16/--int8): export the ONNX with "
                         f"{plan.precision} tensor types")
        else:
            precision_flags.append(f"--{plan.precision}")
            if plan.precision == "int8":
                lines.append("# --int8 without --calib=<cache> uses placeholder dynamic ranges: right for timing, "
                             "not for accuracy")
    warned = False
    shapes = dict(plan.model.get("input_shapes") or {})

    def command(onnx: str, engine_file: str, eng: dict[str, Any], shapes_arg: str | None) -> list[str]:
        nonlocal warned
        out: list[str] = []
        args = ["trtexec", f"--onnx={onnx}", *precision_flags]
        dla = list(eng.get("dla_layers") or [])
        whole_segment_on_dla = eng.get("kind") == "segment" and eng.get("device", "GPU") != "GPU"
        if dla or whole_segment_on_dla:
            core = eng.get("dla_core")
            core = int(core) if core is not None else (dla_core(str(eng.get("device"))) or 0)
            args.append(f"--useDLACore={core}")
            if plan.gpu_fallback:
                args.append("--allowGPUFallback")
            layers = list(eng.get("layers") or [])
            if layers and set(layers) != set(dla):
                assignment = {n: ("DLA" if n in set(dla) else "GPU") for n in layers}
                spec = layer_device_types(assignment)
                if len(spec) > _MAX_ARG_CHARS:
                    gpu_only = {n: d for n, d in assignment.items() if d == "GPU"}
                    spec = layer_device_types(gpu_only)
                    out.append("# (only the GPU layers are listed: --useDLACore makes DLA the default for the rest)")
                    if len(spec) > _MAX_ARG_CHARS:
                        raise PlacementError(
                            f"the --layerDeviceTypes list is {len(spec)} characters, over the shell's argument limit: "
                            "apply the plan with the Python API (Plan.apply)"
                        )
                if vt and vt < (8, 6) and not warned:
                    out.append(f"# WARNING: trtexec of TensorRT {version} has no --layerDeviceTypes (added in 8.6): "
                               "this command fails there; build with the Python API instead: "
                               "placetune.plan.load('plan.json').apply(network, config)")
                    warned = True
                out.append("# layers TensorRT's parser adds beyond the ONNX nodes (<node>_<k>, ONNXTRT_*) are not "
                           "listed and default to the DLA under --useDLACore; Plan.apply() places them with their node")
                args.append(f"--layerDeviceTypes={spec}")
        if shapes_arg:
            args.append(f"--shapes={shapes_arg}")
        args.append(f"--saveEngine={engine_file}")
        out.append(" ".join(q(a) for a in args))
        return out

    if plan.mode == "engine":
        eng = plan.engines[0]
        lines.extend(command(onnx_path, f"{stem}.engine", eng, _shapes_arg(shapes)))
    elif plan.mode == "pipeline":
        n = len(plan.engines)
        lines.append(f"# pipeline mode: {n} engines, one per segment, chained by the application (CUDA streams + "
                     "events; a segment starts when its predecessors are done)")
        lines.append(f"# the ONNX must be cut per segment into {stem}.seg<i>.onnx (inputs and outputs at the segment "
                     "boundaries, static shapes); placetune cuts them in a later version")
        for eng in plan.engines:
            i = eng.get("index")
            preds = ", ".join(map(str, eng.get("predecessors") or [])) or "-"
            count = len(eng.get("layers") or []) or eng.get("n_layers") or "?"
            lines.append(f"# segment {i}: {eng.get('device')}, {count} layer(s), waits for segment(s): {preds}")
            lines.extend(command(f"{stem}.seg{i}.onnx", f"{stem}.seg{i}.engine", eng, None))
    else:
        lines.append(f"# replicas mode: {len(plan.engines)} engines of the whole network, one per device, run at "
                     "the same time; each replica's batch is set with --shapes (the ONNX needs a dynamic batch "
                     "dimension, or export it once per batch)")
        for eng in plan.engines:
            dev = str(eng.get("device"))
            lines.append(f"# replica on {dev}, batch {eng.get('batch')}")
            lines.extend(command(onnx_path, f"{stem}.{dev.lower()}.engine", eng,
                                 _shapes_arg(shapes, eng.get("batch"))))
    return lines


def trtexec_script(plan: Plan, onnx_path: str = "model.onnx", trt_version: str | None = None) -> str:
    """:func:`trtexec_commands` as a POSIX shell script (``#!/bin/sh`` and ``set -e``)."""
    body = trtexec_commands(plan, onnx_path, trt_version)
    return "\n".join(["#!/bin/sh", "set -e", *body]) + "\n"


# --------------------------------------------------------------------------- re-measuring
def simulate_plan(plan: Plan, model: "Model | None" = None) -> "Measurement":
    """Measure the plan's requested placement on the simulated Jetson (nothing is stored).

    Used where a plan has no timeline (e.g. a hardware plan): the result is labelled
    simulated whatever the plan was.

    Args:
        plan: the plan.
        model: its model (default: loaded from the plan's ``zoo`` name or ``path``).

    Raises:
        ModelError: the model cannot be loaded or is not the plan's model.
    """
    from placetune.tuning.evaluator import Evaluator
    from placetune.model.model import Model
    from placetune.settings import Settings

    if model is None:
        info = plan.model
        errors: list[str] = []
        for source, kw in ((info.get("zoo"), {"batch": plan.batch}),
                           (info.get("path"), {"shapes": {k: tuple(v) for k, v in
                                                          (info.get("input_shapes") or {}).items()} or None})):
            if not source:
                continue
            try:
                model = Model.load(str(source), **kw)
                break
            except PlacetuneError as exc:
                errors.append(str(exc))
        if model is None:
            why = "; ".join(errors) or "the plan names neither a zoo model nor an ONNX file"
            raise ModelError(f"cannot load the plan's model {info.get('name')!r} to simulate it ({why}): "
                             "pass the ONNX file (--model PATH)")
    plan.check_model(model)
    keep = {k: plan.settings[k] for k in ("gpu_fallback", "dla_core", "trt_version", "frames_in_flight", "replicas",
                                          "power_mode") if plan.settings.get(k) is not None}
    settings = Settings(mode=plan.mode, precision=plan.precision, **keep)
    ev = Evaluator(model, plan.platform, "simulate", settings=settings, store=None)
    try:
        return ev.evaluate(Placement(model, plan.requested), agent="plan")
    finally:
        ev.close()
