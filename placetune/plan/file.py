"""The plan file format: the Plan document, its validation, and reading and writing plan files.

A *plan* is what a user ships: which device each layer of their network runs on, the
engines that placement needs (one engine, one engine per pipeline segment, or one replica
per device), how it was measured (or simulated) and how it compares with the all-GPU
baseline. It is a versioned JSON document (``"format": "placetune-plan", "version": 1``)
that names layers by the names TensorRT's ONNX parser gives them, so it can be applied to
the user's own TensorRT network without placetune's model at hand.

Three ways to use a plan:

* :meth:`Plan.apply` sets the device of each layer of a TensorRT ``INetworkDefinition``
  through its ``IBuilderConfig`` (Python API; works on every TensorRT version with DLA;
  :mod:`placetune.plan.apply`).
* :func:`~placetune.plan.trtexec.trtexec_commands` writes the equivalent ``trtexec`` command lines
  (``--layerDeviceTypes`` exists from TensorRT 8.6 only).
* the plan's figures and baselines document what to expect. A plan made from the simulated
  Jetson says so (``"simulated": true`` and a ``label``): verify it on the device.

Example:
    >>> import placetune as pt
    >>> from placetune.plan.export import export_plan
    >>> from placetune.plan.trtexec import trtexec_commands
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
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError, ModelError, PlacementError, PlacetuneError
from placetune.files.kind import what_it_is
from placetune.plan.checks import (check_baselines, check_engines, check_measured, check_numbers, check_platform,
                                   check_texts, one_line)
from placetune.safetext import shown
from placetune.validate import batch as check_batch, loads_json
from placetune.validate import dumps_json
from placetune.placement.placement import DEVICES, Placement
from placetune.plan.apply import ApplyReport, apply_plan
from placetune.plan.trtexec import trtexec_commands
from placetune.wording import plural, versus
from placetune.files.read import read_text
from placetune.files.write import write_file
from placetune.model.model import Model

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["INT8_RANGES", "PLAN_FORMAT", "PLAN_VERSION", "SIMULATED_LABEL", "Plan", "load"]

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
#: Where an INT8 plan's dynamic ranges come from (:attr:`Plan.int8_ranges`).
INT8_RANGES = ("placeholder", "qdq", "calibration-cache")
_REQUIRED = ("format", "version", "model", "platform", "mode", "precision", "batch", "layers", "engines", "simulated")


def _close(name: str, names: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------- the plan
@dataclass
class Plan:
    """A placement ready to deploy, with how it was obtained and what it measured.

    Build one with :func:`export_plan`, read one with :func:`load`. Layers are named as
    TensorRT's ONNX parser names them (the ONNX node name, or ``node_of_<first output>``).

    Attributes:
        model: identity of the model: ``hash``, ``name``, ``input_shapes`` (name -> dims),
            ``dynamic_inputs`` (the inputs whose file shape has an open dimension: the only ones
            trtexec's ``--shapes`` may name), ``path`` (ONNX file or None), ``zoo`` (zoo name or
            None), ``layers`` (count).
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
            ``replicas``, ``power_mode``, ``trt_version``; ``timed_input`` (the input data's hash) when the
            study was timed on input data (``--input-data``), not on random input.
        measured: the figures: ``status``, ``latency_ms`` (median, p90, p99...),
            ``throughput_fps``, ``energy_mj``, ``power_w``, ``dla_loadables``, ``segment_times_ms``,
            ``timeline`` and, in replicas mode, ``replicas``; a study of N camera streams adds
            ``streams`` (``{"streams": N, "per_stream_fps": throughput / N}``).
        baselines: ``all-gpu`` (and ``all-dla0``/``all-dla1`` when stored): their figures,
            measurement id, and the plan's ``speedup`` over them.
        source: ``study``, ``measurement_id``, ``trial_number`` (the Optuna trial that measured it,
            as ``optuna-dashboard`` numbers it), ``agent``, ``placement_key``, ``measured_at``, ``exported_at``.
        notes: human notes (what is missing, what to check).
        label: ``SIMULATED...`` for simulated plans, else empty.
        int8_ranges: INT8 plans: where the dynamic ranges come from: ``placeholder`` (neither a
            calibration cache nor Q/DQ nodes: accuracy is NOT preserved), ``qdq`` (the model's
            Q/DQ nodes) or ``calibration-cache``; None for other precisions.
        calibration_cache: the calibration cache file (``int8_ranges == "calibration-cache"``).
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
    int8_ranges: str | None = None
    calibration_cache: str | None = None

    def __repr__(self) -> str:
        """One short line, as a Measurement's (every layer and engine: :meth:`to_dict`; it was tens of kB)."""
        counts: dict[str, int] = {}
        for device in self.realized.values():
            counts[device] = counts.get(device, 0) + 1
        return (f"Plan({self.model.get('name')!r}, {self.platform}, mode={self.mode}, precision={self.precision}, "
                f"batch={self.batch}, engines={len(self.engines)}, realized={{{', '.join(f'{d}: {n}' for d, n in counts.items())}}}, "
                f"objective={self.objective}, simulated={self.simulated})")

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

    def headline(self) -> str | None:
        """``vs all-GPU: 1.68x faster (throughput, the study's objective); latency 1.05x slower, 1.20x
        less energy``: the plan against the all-GPU baseline on the study's objective, the figure
        ``placetune tune`` prints in its summary, then the other metrics; None without an all-GPU baseline."""
        base = self.baselines.get("all-gpu")
        if not base:
            return None
        name = str(base.get("objective") or self.objective.split("+")[0].strip() or "latency")
        gains = dict(base.get("gains") or {})
        if "gain" not in base and base.get("speedup") is not None:  # a plan of an older placetune
            gains.setdefault("latency", base["speedup"])
        gain = base.get("gain", gains.get(name))

        def fmt(g: Any, metric: str) -> str:  # "1.68x faster", "1.20x less energy"
            return versus(None if g is None else float(g), metric)

        def other(v: Any, metric: str) -> str:  # "1.20x less energy" names its metric; "same" does not
            text = fmt(v, metric)
            return text if metric.replace("_", " ") in text.lower() else f"{metric} {text}"

        others = ", ".join(other(v, k) for k, v in gains.items() if k != name and v is not None)
        return f"vs all-GPU: {fmt(gain, name)} ({name}, the study's objective)" + (f"; {others}" if others else "")

    def summary(self) -> str:
        """A few human lines: what, where, how fast (per batch and per sample), compared with
        all-GPU on the study's objective, and whether INT8 ranges are placeholders."""
        sim = "SIMULATED " if self.simulated else ""
        lines = [f"{sim}plan: {self.model.get('name')} on {self.platform}, {self.mode} mode, {self.precision}, "
                 f"batch {self.batch}, {plural(len(self.engines), 'engine')}, objective {self.objective}"]
        counts: dict[str, int] = {}
        for d in self.realized.values():
            counts[d] = counts.get(d, 0) + 1
        lines.append("realised: " + ", ".join(f"{d} {counts[d]}" for d in DEVICES if d in counts))
        b = max(int(self.batch), 1)
        lat = self.measured.get("latency_ms") or {}
        parts = []
        if lat.get("median") is not None:
            text = f"latency median {lat['median']:.4g} ms"
            if lat.get("p99") is not None and self.simulated and lat["p99"] == lat["median"]:
                text += " (no spread: simulated without timing noise)"  # a p99 equal to it measured nothing
            elif lat.get("p99") is not None:
                text += f" (p99 {lat['p99']:.4g} ms)"
            parts.append(text + f" per batch of {b}")
        fps = self.measured.get("throughput_fps")
        if fps is not None:
            parts.append(f"throughput {fps:,.1f} samples/s ({fps / b:,.1f} batches/s)")
        energy = self.measured.get("energy_mj")
        if energy is not None:
            parts.append(f"energy {energy:.4g} mJ per batch of {b} ({energy / b:.4g} mJ per sample)")
        if parts:
            lines.append("; ".join(parts))
        streams = self.measured.get("streams")
        if streams:  # N camera streams of one network sharing the plan's frames evenly
            lines.append(f"per stream: {plural(streams['streams'], 'stream')} at {streams['per_stream_fps']:,.1f} "
                         f"frames/s each (the throughput shared evenly)")
        head = self.headline()
        if head:
            lines.append(head)
        if self.precision == "int8":
            if self.int8_ranges in (None, "placeholder"):
                lines.append("INT8 ranges are PLACEHOLDERS (no calibration cache, no Q/DQ nodes): accuracy is NOT "
                             "preserved; export with --calibration-cache FILE (how to make one: placetune's "
                             "docs/jetson.md, INT8 ranges)")
            elif self.int8_ranges == "calibration-cache":
                lines.append(f"INT8 ranges from the calibration cache {self.calibration_cache}")
            else:
                lines.append("INT8 ranges from the model's Q/DQ nodes")
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
            "label": one_line(self.label),
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
            "notes": [one_line(n) for n in self.notes],
            "int8_ranges": self.int8_ranges,
            "calibration_cache": self.calibration_cache,
        }

    def to_json(self, indent: int | None = 1) -> str:
        """The JSON text of :meth:`to_dict`."""
        return dumps_json(self.to_dict(), indent=indent)  # never NaN or Infinity: those are not JSON

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
        dyn = model.get("dynamic_inputs")
        if dyn is not None and not (isinstance(dyn, list) and all(isinstance(x, str) for x in dyn)):
            raise ConfigError(f"{where}: model.dynamic_inputs must be a list of input names")
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
        check_engines(engines, where)  # the types first: the layer names are read next
        for e in engines:
            for name in list(e.get("layers") or []) + list(e.get("dla_layers") or []):
                if name not in seen:
                    raise PlacementError(
                        f"{where}: engine {e.get('index')} names layer {name!r}, which the plan's layer list "
                        f"does not have{_close(name, seen)}"
                    )
            if e.get("device") is not None and e["device"] not in DEVICES:
                raise PlacementError(f"{where}: engine {e.get('index')} has unknown device {e['device']!r}")
        check_platform(doc, where)
        check_numbers(doc, model, where)
        check_measured(doc.get("measured"), where)
        check_texts(doc, where)
        check_baselines(doc.get("baselines"), where)
        ranges = doc.get("int8_ranges")
        if ranges not in (None, *INT8_RANGES):
            raise ConfigError(f"{where}: \"int8_ranges\" must be one of {', '.join(INT8_RANGES)} (or null), "
                              f"found {ranges!r}")
        batch = check_batch(doc["batch"], f"{where}: \"batch\"")
        return cls(
            model=dict(model),
            platform=str(doc["platform"]),
            mode=str(doc["mode"]),
            precision=str(doc["precision"]),
            batch=batch,
            layers=[dict(x) for x in layers],
            engines=[dict(e) for e in engines],
            simulated=doc["simulated"],
            objective=str(doc.get("objective") or "latency"),
            backend=str(doc.get("backend") or ""),
            versions=dict(doc.get("versions") or {}),
            settings=dict(doc.get("settings") or {}),
            measured=dict(doc.get("measured") or {}),
            baselines=dict(doc.get("baselines") or {}),
            source=dict(doc.get("source") or {}),
            notes=list(doc.get("notes") or []),
            label=doc.get("label") or "",
            int8_ranges=ranges,
            calibration_cache=None if doc.get("calibration_cache") is None else str(doc["calibration_cache"]),
        )

    def save(self, path: str | os.PathLike[str], *, owned: Any = None,
             hint: str = "give the plan file name with --export PATH") -> Path:
        """Write the plan as JSON through :func:`placetune.files.write.write_file`: a regular file is
        replaced atomically, a symlink, FIFO or ``/dev/stdout`` written through, never replaced.

        Args:
            path: the file.
            owned: for a name placetune chose (``<study>.plan.json``): a test whether an existing
                file is placetune's (see :func:`is_plan_file`); None: replaced whatever it is.
            hint: what to do, appended to a refusal of a file that is not placetune's.

        Raises:
            ConfigError: the file cannot be written (a directory, a FIFO nobody reads, a file
                that is not placetune's with ``owned``...).
        """
        return write_file(path, self.to_json() + "\n", "plan file", owned=owned, hint=hint)

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
        if check_hash and want not in (model.hash, model.legacy_hash):  # legacy: a plan of an older placetune
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
        """Apply the plan to a TensorRT network through its builder config: see
        :func:`~placetune.plan.apply.apply_plan` (arguments, matching rules, errors).

        Example:
            ``plan = placetune.plan.load("plan.json")``;
            ``report = plan.apply(network, config)``; ``print(report.summary())``
        """
        return apply_plan(self, network, config, segment=segment, replica=replica, trt=trt,
                          set_precision=set_precision)

    def trtexec_commands(self, onnx_path: str = "model.onnx", trt_version: str | None = None) -> list[str]:
        """See :func:`~placetune.plan.trtexec.trtexec_commands`."""
        return trtexec_commands(self, onnx_path, trt_version)


def is_plan_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a regular file holding a placetune plan (a file placetune may replace)."""
    try:
        load(path)
    except PlacetuneError:
        return False
    return True


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
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"plan file: give a file name (text or a path), got {type(path).__name__}")
    p = Path(path)
    if str(path) != "-" and p.is_dir() and (p / "plan.json").is_file():  # a plan folder: its plan file
        p = path = p / "plan.json"
    kind = what_it_is(p) if str(path) != "-" else None
    if kind == "engine":
        raise ConfigError(f"plan file {shown(p)}: a serialized TensorRT engine, not a placetune plan (JSON): give "
                          "the plan.json `placetune export` wrote; an engine is built from it on the board "
                          "(`placetune build DIR` or DIR/build.sh)")
    if kind == "onnx":
        raise ConfigError(f"plan file {shown(p)}: an ONNX model, not a placetune plan (JSON): tune it "
                          "(`placetune tune --model FILE`) and export its plan (`placetune export -o plan.json`)")
    # regular files (or -) only, at most 256 MiB; strict JSON: no duplicate keys, NaN or Infinity
    text = read_text(path, "plan file", stdin=True)
    try:
        doc = loads_json(text, f"plan file {shown(p)}")
    except ConfigError as exc:
        raise ConfigError(f"{exc}: the file is corrupt, truncated or edited; export it again with "
                          "`placetune export`") from None
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
            model = Model.load(str(model))
        try:
            plan.check_model(model, check_hash=check_hash)  # type: ignore[arg-type]
        except PlacetuneError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError) as exc:
            raise ConfigError(f"plan file {p} has malformed layer entries ({type(exc).__name__}: {exc})") from None
    return plan
