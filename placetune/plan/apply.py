"""Applying a plan to a TensorRT network: set each layer's device through the builder config, report what matched."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from placetune.errors import BackendError, ConfigError, PlacementError
from placetune.backends.tensorrt.worker_devices import constant_type, follow_helpers, is_helper
from placetune.backends.tensorrt.worker_names import onnx_nodes
from placetune.backends.trtexec.command import version_tuple
from placetune.placement.placement import dla_core
from placetune.plan.view import PlanView
from placetune.model.model import refuse_renamed


__all__ = ["ApplyReport", "apply_plan", "onnx_node_of"]

log = logging.getLogger(__name__)

def _same_version(a: str, b: str) -> bool:
    """Whether two TensorRT versions are the same release (major, minor, patch)."""
    return bool(b) and version_tuple(a)[:3] == version_tuple(b)[:3]


def onnx_node_of(metadata: str | None) -> list[str]:
    """The ONNX nodes named in a TensorRT layer's ``metadata``.

    TensorRT's ONNX parser (8.6+) sets ``layer.metadata`` to ``"[ONNX Layer: <node>]"``,
    properties following the node after ``" | "`` (doc-string lines in 8.6, ``Local Function:
    <f>`` in 10.x); a fused engine layer joins its layers' metadata with ``\\x1f``
    (:mod:`placetune.backends.tensorrt.worker_names`, shared with the worker).

    Example:
        >>> onnx_node_of("[ONNX Layer: /conv1/Conv | Local Function: Block]")
        ['/conv1/Conv']
        >>> onnx_node_of("no metadata")
        []
    """
    return onnx_nodes(metadata)


@dataclass
class ApplyReport:
    """What :meth:`Plan.apply` did to a TensorRT network.

    Attributes:
        engine: which engine of the plan was applied (``"engine"``, ``"segment 2 (DLA1)"``, ``"replica DLA0"``).
        dla_core: the DLA core set on the config (None: no DLA layer, the core was left alone).
        dla_layers: network layers set to ``DeviceType.DLA``.
        matched: network layer name -> plan layer name, for every matched layer.
        by_metadata: network layers matched through ``layer.metadata`` (helper layers of an ONNX node).
        helpers: unnamed parser helper layers (``(Unnamed Layer* N) [Type]``, weight Constants)
            set to the DLA because the node they serve is there.
        unmatched: network layers that match no plan layer and are no parser helper (GPU).
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
    helpers: list[str] = field(default_factory=list)
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
        if self.helpers:
            lines.append(f"{len(self.helpers)} parser helper layer(s) go to the DLA with the node they serve: "
                         + ", ".join(self.helpers[:5]) + (" ..." if len(self.helpers) > 5 else ""))
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


def apply_plan(
    plan: PlanView,
    network: Any,
    config: Any,
    *,
    segment: int | None = None,
    replica: int | str | None = None,
    trt: Any = None,
    set_precision: bool = True,
) -> ApplyReport:
    """Apply ``plan`` to a TensorRT network through its builder config (what :meth:`Plan.apply` does).

    With no DLA layer the config keeps ``default_device_type = GPU``. When the engine has DLA
    layers (trtexec ``--useDLACore``'s semantics): ``default_device_type = DLA``,
    ``config.DLA_core``, the ``GPU_FALLBACK`` flag when the plan was measured with it, and
    ``config.set_device_type`` on every network layer: DLA for each layer that ran on the DLA
    in the plan (the *realised* placement: what was measured), GPU for the others. With
    ``set_precision`` the builder flags the plan was measured with are set where this TensorRT
    has them (11.x is strongly typed and has none): ``FP16`` for fp16, ``FP16`` and ``INT8`` for
    int8 (as the tensorrt worker and ``trtexec --fp16 --int8`` build it).

    Network layers are matched to plan layers by ``layer.name`` and, failing that, by
    ``layer.metadata`` (``"[ONNX Layer: <node>]"``, TensorRT 8.6+): further layers the ONNX
    parser registers for a node (``<node>_<k>``) follow their node. Helpers registered for no
    node (``(Unnamed Layer* N) [Type]`` from 8.x parsers, ``ONNXTRT_*`` from 10.x, no
    metadata, e.g. a Gemm's bias add, the unsqueeze around a 1-D Conv) and weight
    Constants go with the node they serve: the device of their producer, else their consumer
    (:mod:`placetune.backends.tensorrt.worker_devices`, shared with the worker). Other layers
    that match nothing go to the GPU and are reported.

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
    eng = plan.engine(segment, replica)
    what = {"engine": "engine", "segment": f"segment {eng.get('index')} ({eng.get('device')})",
            "replica": f"replica {eng.get('device')}"}.get(str(eng.get("kind")), "engine")
    report = ApplyReport(engine=what)
    plan_names = set(plan.layer_names)
    scope = set(eng.get("layers") or plan.layer_names)
    refuse_renamed(dict(plan.model.get("renamed_layers") or {}), sorted(scope))  # names TensorRT gives its own way
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
    # the parser's own layers as measured, when this is the measured TensorRT (its parser names them)
    measured_parser = dict(eng.get("parser_layers") or {}) if str(getattr(trt, "__version__", "")) and \
        _same_version(str(trt.__version__), str(plan.versions.get("tensorrt") or "")) else {}
    layers = [network.get_layer(i) for i in range(n)]
    device: list[Any] = [False] * n  # per layer: True on the DLA, None a parser helper (decided below)
    for i, layer in enumerate(layers):
        name = str(getattr(layer, "name", ""))
        target = name if name in plan_names else None
        if target is None:
            for cand in onnx_node_of(getattr(layer, "metadata", None)):
                if cand in plan_names:
                    target = cand
                    report.by_metadata.append(name)
                    break
        if target is None and name in measured_parser:
            # a layer the parser made beyond the nodes, as the measurement built it (TensorRT 8.5's
            # <node>_<k> has no metadata and no helper's name): its measured device
            device[i] = measured_parser[name] == "DLA"
            continue
        if target is None:
            if not onnx_node_of(getattr(layer, "metadata", None)) and is_helper(layer, trt, None):
                device[i] = None  # a parser helper: it goes with the node it serves
            else:
                report.unmatched.append(name)
            continue
        if target not in scope:
            report.other_engine.append(name)
            continue
        report.matched[name] = target
        found.add(target)
        if target in dla_set:
            device[i] = True
    if None in device:
        device = follow_helpers(layers, device, constant_type(trt), False)
    for i, layer in enumerate(layers):
        name = str(getattr(layer, "name", ""))
        if device[i]:
            to_dla.append(layer)
            report.dla_layers.append(name)
            if name not in report.matched:
                report.helpers.append(name)
    if n and not report.matched and not report.other_engine:
        shown = ", ".join(repr(x) for x in report.unmatched[:3])
        raise PlacementError(
            f"none of the network's {n} layers matches a layer of the plan by name or by "
            f"'[ONNX Layer: ...]' metadata (first layers: {shown}); is this the network of model "
            f"{plan.model.get('name')!r} parsed from its ONNX file?"
        )
    if n and not report.matched:
        raise PlacementError(
            f"the network's layers belong to other engines of the plan, none to {what}: pass the network "
            "of this engine (or another segment=/replica=)"
        )
    config.default_device_type = trt.DeviceType.GPU
    if to_dla:
        # trtexec --useDLACore's semantics: DLA by default, every other layer set to the GPU
        config.default_device_type = trt.DeviceType.DLA
        config.DLA_core = int(core)
        report.dla_core = int(core)
        on_dla = {id(x) for x in to_dla}
        for layer in layers:
            config.set_device_type(layer, trt.DeviceType.DLA if id(layer) in on_dla else trt.DeviceType.GPU)
        if plan.gpu_fallback:
            config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
            report.flags.append("GPU_FALLBACK")
        else:
            report.notes.append("the plan was measured without GPU_FALLBACK: the build fails if a DLA layer "
                                "cannot run on the DLA")
    if set_precision and plan.precision in ("fp16", "int8"):
        # the flags the plan was measured with: FP16, and INT8 on top of it for int8 (the tensorrt
        # worker's build, trtexec --fp16 --int8). INT8 alone is "Int8 layer selection, with FP32
        # fallback" (NvInfer.h release/10.3:8302): a layer without an INT8 kernel would run in FP32,
        # which the DLA cannot (it goes to the GPU), so the engine would not be the measured one
        for flag in ("FP16", "INT8") if plan.precision == "int8" else ("FP16",):
            if hasattr(trt.BuilderFlag, flag):
                config.set_flag(getattr(trt.BuilderFlag, flag))
                report.flags.append(flag)
                if flag == "INT8":
                    report.notes.append("INT8: give the config a calibrator or per-tensor dynamic ranges "
                                        "(or a Q/DQ network) for accurate results")
            else:
                report.notes.append(f"this TensorRT has no BuilderFlag.{flag} (TensorRT 11 is strongly typed): "
                                    f"give the network {plan.precision} tensor types instead")
                break
    report.missing = [x for x in (eng.get("layers") or plan.layer_names) if x not in found]
    if report.other_engine:
        report.notes.append(f"{len(report.other_engine)} layer(s) belong to other engines of the plan and stay "
                            "on the GPU: build each engine from its own part of the network")
    if report.missing:
        log.warning("plan layers not found in the network (%d): %s", len(report.missing),
                    ", ".join(report.missing[:5]))
    if plan.simulated:
        report.notes.append("the plan's figures are SIMULATED: measure the built engine on the device")
    log.info("%s", report.summary())
    return report
