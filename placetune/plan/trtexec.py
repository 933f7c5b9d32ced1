"""A plan as trtexec command lines: one ``trtexec`` build per engine, with explaining comments, or a shell script."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError, ModelError, PlacementError, PlacetuneError
from placetune.files.write import read_head
from placetune.backends.trtexec.command import (
    MAX_ARG_CHARS,
    adjust_for_dla_flags,
    build_only_flag,
    device_types_arg,
    dla_flags,
    has_layer_device_types,
    layer_device_types,
    precision_flags,
    shapes_arg,
    shell_line,
    strongly_typed,
    untyped_int8,
)
from placetune.model.model import refuse_renamed
from placetune.backends.onnx_prep import source_has_qdq
from placetune.placement.cut_formats import plan_cut_formats, trtexec_io_formats
from placetune.placement.placement import dla_core
from placetune.plan.view import PlanView
from placetune.settings import check_trt_version
from placetune.wording import plural

if TYPE_CHECKING:
    from placetune.model.model import Model


__all__ = ["engine_files", "export_refusals", "is_build_script", "one_line", "refuse_unexportable", "static_batch",
           "target_version", "trtexec_commands", "trtexec_script", "untyped_int8_plan"]


def _version_tuple(text: Any) -> tuple[int, ...]:
    """``"8.6.1.6"`` -> ``(8, 6, 1, 6)``; non-numeric parts end the tuple."""
    out: list[int] = []
    for part in str(text).strip().lstrip("vV").split("."):
        m = re.match(r"\d+", part)
        if not m:
            break
        out.append(int(m.group()))
    return tuple(out)


def target_version(plan: PlanView, trt_version: str | None = None) -> str:
    """The TensorRT a plan's commands are written for: ``trt_version``, else the plan's measured TensorRT,
    else the version whose DLA rules it used, else 8.6.

    Raises:
        ConfigError: ``trt_version`` is not a TensorRT version with DLA rules (``--trt-version -1``).
    """
    if trt_version is not None:
        check_trt_version(trt_version)
    return str(trt_version or plan.versions.get("tensorrt") or plan.settings.get("trt_version") or "8.6")


def untyped_int8_plan(plan: PlanView, version: str, has_qdq: bool | None = None) -> str | None:
    """:func:`~placetune.backends.trtexec.command.untyped_int8` of a plan: its model's Q/DQ nodes from ``has_qdq``, else the plan's ``int8_ranges``."""
    return untyped_int8(plan.precision, version, plan.int8_ranges == "qdq" if has_qdq is None else has_qdq)


def export_refusals(model: "Model", mode: str, precision: str, trt_version: str) -> list[PlacetuneError]:
    """What :func:`trtexec_commands` (``placetune export --format trtexec``, and ``placetune build``, which
    builds from the folder it writes) would refuse for the plans of ``model`` tuned in ``mode`` and
    ``precision`` for TensorRT ``trt_version``, found from the model and the settings alone, each as the
    error the export raises (its own check functions, called here): an INT8 model without Q/DQ nodes for a
    strongly typed TensorRT (:func:`~placetune.backends.trtexec.command.untyped_int8`); in engine and replicas mode, a dynamic input name
    ``--shapes`` cannot carry (:func:`~placetune.backends.trtexec.command.shapes_arg`), and, for a plan
    with layers of one engine on both devices (what such a study searches for), a layer name
    ``--layerDeviceTypes`` cannot carry (:func:`~placetune.backends.trtexec.command.layer_device_types`)
    or a node TensorRT renames (:func:`~placetune.model.model.refuse_renamed`). A pipeline's segments are
    whole on one device and built from static ONNX files: neither flag is written for them."""
    out: list[PlacetuneError] = []
    untyped = untyped_int8(precision, trt_version, lambda: source_has_qdq(model))
    if untyped:
        out.append(ConfigError(untyped))
    if mode not in ("engine", "replicas"):
        return out
    dynamic = {n: s for n, s in model.input_shapes.items() if n in model.dynamic_input_shapes}
    for check in (lambda: shapes_arg(dynamic), lambda: refuse_renamed(model.renamed, model.names),
                  lambda: layer_device_types({n: "GPU" for n in model.names})):
        try:
            check()
        except (ModelError, PlacementError) as exc:
            out.append(exc)
    return out


def refuse_unexportable(model: "Model", mode: str, precision: str, trt_version: str) -> None:
    """Raise the first of :func:`export_refusals`: ``placetune tune`` calls it before anything is built or
    stored, so that a night never ends with a plan its export refuses.

    Raises:
        ConfigError, ModelError, PlacementError: the export's own one-line refusal (exit 6, 3, 5).
    """
    errors = export_refusals(model, mode, precision, trt_version)
    if errors:
        raise errors[0]


def _stem(onnx_path: str) -> str:
    """``dir/model.onnx`` -> ``dir/model`` (also for ``.onnx.gz``)."""
    for suffix in (".onnx.gz", ".onnx"):
        if onnx_path.endswith(suffix):
            return onnx_path[: -len(suffix)]
    return onnx_path


def static_batch(plan: PlanView) -> int | None:
    """The plan's batch when every model input is static (a replica with another batch then
    needs its own ONNX file, ``<stem>.b<batch>.onnx``); None for a model with dynamic inputs."""
    dynamic = plan.model.get("dynamic_inputs")
    return int(plan.batch) if isinstance(dynamic, list) and not dynamic else None


def engine_files(mode: str, engine: dict[str, Any], stem: str = "model",
                 static_batch: int | None = None) -> tuple[str, str]:
    """``(onnx file, engine file)`` of one of a plan's engines, as the trtexec commands name them:
    ``<stem>.onnx`` / ``<stem>.engine`` in engine mode, ``<stem>.seg<i>.onnx`` /
    ``<stem>.seg<i>.engine`` per pipeline segment, ``<stem>.onnx`` / ``<stem>.<device>.engine``
    per replica (``model.dla0.engine``); a replica whose batch is not ``static_batch`` (the
    static batch of the model's inputs) is built from ``<stem>.b<batch>.onnx``.

    Example:
        >>> engine_files("pipeline", {"index": 2})
        ('model.seg2.onnx', 'model.seg2.engine')
    """
    if mode == "pipeline":
        i = engine.get("index")
        return f"{stem}.seg{i}.onnx", f"{stem}.seg{i}.engine"
    if mode == "replicas":
        batch = engine.get("batch")
        own = static_batch is not None and batch is not None and int(batch) != int(static_batch)
        return f"{stem}.b{batch}.onnx" if own else f"{stem}.onnx", f"{stem}.{str(engine.get('device')).lower()}.engine"
    return f"{stem}.onnx", f"{stem}.engine"


def trtexec_commands(plan: PlanView, onnx_path: str = "model.onnx", trt_version: str | None = None, *,
                     build_only: bool = False, calib: str | None = None, folder: bool = False) -> list[str]:
    """The trtexec command lines that build the plan's engine(s), with explaining ``#`` comment lines.

    One command per engine: one in engine mode; one per segment in pipeline mode (each
    from its own part of the ONNX, ``<stem>.seg<i>.onnx``, which the folder export
    :func:`~placetune.plan.folder.write_plan_folder` cuts); one per replica in replicas mode. A DLA engine gets ``--useDLACore=k``
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
        build_only: build without timing (``--skipInference``; ``--buildOnly`` before 8.6).
        calib: an INT8 plan's calibration cache file, passed as ``--calib=<file>`` (TensorRT
            below 11; 11 has no ``--calib``: quantize the ONNX with Q/DQ nodes instead).
        folder: the ``<stem>.seg<i>.onnx`` files (and ``<stem>.b<batch>.onnx`` for replicas with
            their own batch of a static model) exist: a folder export wrote them.

    Returns:
        Lines: comments start with ``#``; the others are commands.

    Raises:
        PlacementError: a layer name that ``--layerDeviceTypes`` cannot express (contains ``,`` or ``'``).
        ConfigError: ``calib`` for a plan that is not INT8, or for TensorRT 11 and later.
    """
    version = target_version(plan, trt_version)
    vt = _version_tuple(version)
    stem = _stem(onnx_path)
    sim = " (figures SIMULATED: measure on the device)" if plan.simulated else ""
    lines = [f"{_HEADER}{plan.model.get('name')} on {plan.platform}, {plan.mode} mode, {plan.precision}, "
             f"batch {plan.batch}{sim}"]
    src = plan.source
    if src:
        lines.append(f"# study {src.get('study')}, measurement {src.get('measurement_id')}"
                     + (f", agent {src['agent']}" if src.get("agent") else "")
                     + (f", Optuna trial {src['trial_number']}" if src.get("trial_number") is not None else ""))
    lines.append(f"# target TensorRT {version}")
    flags = precision_flags(plan.precision, vt)
    if calib is not None:
        if plan.precision != "int8":
            raise ConfigError(f"--calibration-cache is for INT8 plans; this plan is {plan.precision}")
        if strongly_typed(vt):
            raise ConfigError(f"--calibration-cache: trtexec of TensorRT {version} has no --calib (strongly typed): "
                              "quantize the ONNX with Q/DQ nodes instead, or target TensorRT 8.5-10.x with "
                              "--trt-version")
        flags = [*flags, f"--calib={calib}"]
    untyped = untyped_int8_plan(plan, version)
    if untyped:
        raise ConfigError(untyped)
    if plan.precision in ("fp16", "int8"):
        if strongly_typed(vt):
            lines.append(f"# TensorRT {version} is strongly typed (no --fp16/--int8): export the ONNX with "
                         f"{plan.precision} tensor types")
    if plan.precision == "int8":
        ranges = "calibration-cache" if calib is not None else (plan.int8_ranges or "placeholder")
        if ranges == "calibration-cache":
            lines.append(f"# INT8 dynamic ranges from the calibration cache {calib} (--calib)")
        elif ranges == "qdq":
            lines.append("# INT8 dynamic ranges from the model's Q/DQ nodes (explicit quantization)")
        else:
            lines.append("# WARNING: INT8 ranges are PLACEHOLDERS (no calibration cache, no Q/DQ nodes): the engines "
                         "time right but accuracy is NOT preserved; export with --calibration-cache FILE")
    if build_only:
        flags = [*flags, build_only_flag(vt)]
    lines.extend(plugin_comments(plan.model.get("plugins"), vt))
    warned = False
    input_shapes = dict(plan.model.get("input_shapes") or {})
    dynamic = plan.model.get("dynamic_inputs")
    # trtexec fails the build when --shapes names a model whose inputs are all static: shapes
    # only for the inputs the ONNX file leaves open (a plan without the list: none)
    input_shapes = {k: v for k, v in input_shapes.items() if isinstance(dynamic, list) and k in dynamic}
    if not isinstance(dynamic, list):
        lines.append("# this plan does not say which model inputs are dynamic: no --shapes is passed (trtexec refuses "
                     "it for static inputs); for a dynamic model add --shapes=<input>:<dims>")

    # a pipeline's cut tensors at a DLA engine in the DLA's own type and format on both sides (as
    # the tensorrt backend measured them): no GPU reformat at the cut
    cuts = plan_cut_formats(plan.engines, plan.precision, strongly_typed=strongly_typed(vt),
                            network_outputs=plan.model.get("outputs") or [],
                            qdq=plan.int8_ranges == "qdq",
                            measured=(plan.measured or {}).get("cut_formats")) if plan.mode == "pipeline" else {}

    def io_format_args(eng: dict[str, Any]) -> list[str]:
        names = lambda key: [str(t.get("name")) if isinstance(t, dict) else str(t) for t in eng.get(key) or []]
        args = []
        # a tensor without a cut format keeps the ONNX file's type: FP16 in the FP16 files a strongly typed
        # build gets (trtexec's setType would otherwise turn an FP16 input into FP32, sampleEngines.cpp)
        default = "fp16:chw" if strongly_typed(vt) and plan.precision == "fp16" else "fp32:chw"
        for flag, key in (("--inputIOFormats", "inputs"), ("--outputIOFormats", "outputs")):
            if not any(n in cuts for n in names(key)):
                continue  # no list: trtexec leaves every tensor's type as the ONNX file has it
            own = {str(t.get("name")): _io_format(t, default, vt, version) for t in eng.get(key) or []
                   if isinstance(t, dict)}
            value = trtexec_io_formats(names(key), cuts, default)
            if value:
                value = ",".join(f if n in cuts else own.get(n, f) for n, f in zip(names(key), value.split(",")))
                args.append(f"{flag}={value}")
        return args

    def command(onnx: str, engine_file: str, eng: dict[str, Any], shapes: str | None) -> list[str]:
        nonlocal warned
        out: list[str] = []
        args = ["trtexec", f"--onnx={onnx}", *flags, *io_format_args(eng)]
        dla = list(eng.get("dla_layers") or [])
        whole_segment_on_dla = eng.get("kind") == "segment" and eng.get("device", "GPU") != "GPU"
        if dla or whole_segment_on_dla:
            core = eng.get("dla_core")
            core = int(core) if core is not None else (dla_core(str(eng.get("device"))) or 0)
            args.extend(dla_flags(core, plan.gpu_fallback))
            # TensorRT 10.16 on: the ONNX parser's ADJUST_FOR_DLA rewrites, as the backends measured and
            # `placetune build` builds (worker_build.py; trtexec backend engine.py)
            args.extend(adjust_for_dla_flags(core, vt))
            layers = list(eng.get("layers") or [])
            if layers and set(layers) != set(dla):
                assignment = {n: ("DLA" if n in set(dla) else "GPU") for n in layers}
                refuse_renamed(dict(plan.model.get("renamed_layers") or {}), assignment)
                parser_layers = _parser_layers(eng, plan, vt, assignment)
                spec, only_gpu = device_types_arg({**assignment, **parser_layers})
                if only_gpu:
                    out.append("# (only the GPU layers are listed: --useDLACore makes DLA the default for the rest)")
                    if len(spec) > MAX_ARG_CHARS:
                        raise PlacementError(
                            f"the --layerDeviceTypes list is {len(spec)} characters, over the shell's argument limit: "
                            "apply the plan with the Python API (Plan.apply)"
                        )
                if vt and not has_layer_device_types(vt) and not warned:
                    out.append(f"# WARNING: trtexec of TensorRT {version} has no --layerDeviceTypes (added in 8.6): "
                               "this command fails there; build with `placetune build DIR --worker-python "
                               "/usr/bin/python3` (the TensorRT API in a worker on the Python that has TensorRT: "
                               "JetPack 5.1's is 3.8, which cannot import placetune itself) or, in your own "
                               "TensorRT code, placetune.plan.load('plan.json').apply(network, config)")
                    warned = True
                measured = plan.versions.get("tensorrt")
                if parser_layers:
                    out.append(f"# {len(parser_layers)} layer(s) TensorRT {measured}'s ONNX parser made beyond the "
                               "nodes (<node>_<k>, ONNXTRT_*, weights) are listed as measured: --useDLACore would "
                               "put them on the DLA")
                elif eng.get("parser_layers") and measured:
                    out.append(f"# the parser's layers beyond the ONNX nodes were measured on TensorRT {measured}; "
                               f"TensorRT {version} names them its own way, so they are not listed and default to the "
                               "DLA under --useDLACore; Plan.apply() places them with their node")
                else:
                    out.append("# layers TensorRT's parser adds beyond the ONNX nodes (<node>_<k>, ONNXTRT_*) are not "
                               "listed and default to the DLA under --useDLACore; Plan.apply() places them with their "
                               "node")
                args.append(f"--layerDeviceTypes={spec}")
        if shapes:
            args.append(f"--shapes={shapes}")
        args.append(f"--saveEngine={engine_file}")
        out.append(shell_line(args))
        return out

    if plan.mode == "engine":
        eng = plan.engines[0]
        lines.extend(command(onnx_path, engine_files("engine", eng, stem)[1], eng, shapes_arg(input_shapes)))
    elif plan.mode == "pipeline":
        n = len(plan.engines)
        lines.append(f"# pipeline mode: {n} engines, one per segment, chained by the application (CUDA streams + "
                     "events; a segment starts when its predecessors are done)")
        if folder:
            lines.append(f"# each segment is built from its own ONNX file, {stem}.seg<i>.onnx, cut from the model "
                         "with its weights (inputs and outputs at the segment boundaries, static shapes)")
        else:
            lines.append(f"# the ONNX must be cut per segment into {stem}.seg<i>.onnx (inputs and outputs at the "
                         "segment boundaries, static shapes): `placetune export --format trtexec -o DIR` writes "
                         "them into DIR with this script")
        if cuts:
            lines.append("# cut tensors at a DLA engine travel in the DLA's own format on both sides "
                         "(--inputIOFormats/--outputIOFormats): " + ", ".join(f"{t} {f.trtexec}" for t, f in cuts.items()))
            if plan.precision == "int8" and calib is None and not strongly_typed(vt):
                lines.append("# WARNING: without --calib each trtexec build gives an INT8 cut tensor its own placeholder "
                             "range (+-4 as an output, +-2 as an input): the values crossing a cut are rescaled")
        for eng in plan.engines:
            i = eng.get("index")
            waits = list(eng.get("predecessors") or [])
            preds = ", ".join(map(str, waits)) or "-"
            count = len(eng.get("layers") or []) or eng.get("n_layers")
            layers = plural(count, "layer") if isinstance(count, int) else "? layers"
            lines.append(f"# segment {i}: {eng.get('device')}, {layers}, waits for "
                         f"{'segment' if len(waits) == 1 else 'segments'}: {preds}")
            onnx_file, engine_file = engine_files("pipeline", eng, stem)
            lines.extend(command(onnx_file, engine_file, eng, None))
    else:
        lines.append(f"# replicas mode: {len(plan.engines)} engines of the whole network, one per device, run at "
                     "the same time; each replica's batch is set with --shapes when the ONNX has a dynamic batch "
                     "dimension (else export it once per batch)")
        for eng in plan.engines:
            dev = str(eng.get("device"))
            lines.append(f"# replica on {dev}, batch {eng.get('batch')}")
            onnx_file, engine_file = engine_files("replicas", eng, stem, static_batch(plan) if folder else None)
            if folder and onnx_file != f"{stem}.onnx":
                lines.append(f"# built from {onnx_file}: the model at this replica's batch (its inputs are static)")
            elif not input_shapes and eng.get("batch") not in (None, plan.batch):
                lines.append(f"# the model's inputs are static (batch {plan.batch}): export the ONNX at batch "
                             f"{eng.get('batch')} for this replica (trtexec takes --shapes only for dynamic inputs)")
                onnx_file = onnx_path
            else:
                onnx_file = onnx_path
            lines.extend(command(onnx_file, engine_file, eng, shapes_arg(input_shapes, eng.get("batch"))))
    if any("\x00" in line for line in lines):
        raise ConfigError("the plan holds a NUL byte in a name (model, study, layer or file): a shell script cannot "
                          "carry it; rename it in the ONNX model or the study")
    # nothing user-controlled may start a new line: a study named "x\ntouch PWNED" stays inside its
    # comment; the commands themselves are quoted by shell_line
    return [one_line(line) if line.startswith("#") else line for line in lines]


#: ONNX element types -> trtexec's --inputIOFormats type (sampleOptions.cpp stringToValue<DataType>: release/8.5
#: fp32 fp16 int8 int32; 8.6 adds fp8; 10.3 adds bf16 int64 bool uint8 int4)
_IO_TYPES = {"float16": "fp16", "bfloat16": "bf16", "int8": "int8", "int32": "int32", "int64": "int64", "bool": "bool",
             "uint8": "uint8"}
_IO_TYPES_SINCE_10 = frozenset({"bf16", "int64", "bool", "uint8"})


def trtexec_type(dtype: str, vt: tuple[int, ...]) -> str | None:
    """trtexec's spelling (``--inputIOFormats``) of an ONNX element type (``float16``) for a target of TensorRT
    ``vt``: INT64 is ``int32`` before TensorRT 10 (its ONNX parser makes an INT64 tensor INT32); None for a type
    that trtexec of that version cannot spell (bool, uint8, bf16 before 10; any other)."""
    spelled = "fp32" if dtype == "float32" else _IO_TYPES.get(dtype)
    if spelled == "int64" and vt[:1] < (10,):
        spelled = "int32"
    if spelled is None or (spelled in _IO_TYPES_SINCE_10 and vt[:1] < (10,)):
        return None
    return spelled


def _io_format(tensor: dict[str, Any], default: str, vt: tuple[int, ...], version: str) -> str:
    """trtexec's ``type:chw`` of an engine I/O tensor that has no cut format, in the ONNX file's own type: a
    list given to ``--inputIOFormats`` sets every tensor's type (``setType``, sampleEngines.cpp), so an INT32,
    INT64, bool or FP16 tensor listed as ``fp32`` would change the network. TensorRT 8 parses INT64 as INT32.

    Raises:
        ConfigError: a type the target's trtexec cannot spell (bool, uint8 before TensorRT 10).
    """
    dtype = str(tensor.get("dtype") or "float32")
    if dtype in ("float32", "float"):
        return default
    spelled = trtexec_type(dtype, vt)
    if spelled is None:
        raise ConfigError(f"engine tensor {str(tensor.get('name'))[:80]!r} is {dtype}, which trtexec of TensorRT "
                          f"{version} cannot give in --inputIOFormats/--outputIOFormats next to the DLA cut formats: "
                          "build with `placetune build` (the TensorRT API) or target TensorRT 10 (--trt-version)")
    return f"{spelled}:chw"


def _parser_layers(eng: dict[str, Any], plan: PlanView, vt: tuple[int, ...], nodes: dict[str, str]) -> dict[str, str]:
    """The engine's layers the ONNX parser made beyond the nodes (``parser_layers``: name -> device,
    as the measurement placed them) when the target TensorRT is the measured one: the parser names
    them by its version's rules (a global ``_<k>`` counter, ``ONNXTRT_*``), so another version's
    names would not match. Names ``--layerDeviceTypes`` cannot carry are left out."""
    measured = plan.versions.get("tensorrt")
    layers = eng.get("parser_layers")
    if not isinstance(layers, dict) or not measured or _version_tuple(measured)[:3] != tuple(vt[:3]):
        return {}
    return {str(n): ("GPU" if d == "GPU" else "DLA") for n, d in layers.items()
            if n and n not in nodes and "," not in str(n) and "'" not in str(n)}


#: Plugins built into TensorRT's libnvinfer_plugin (TensorRT's plugin/ folder, 8.5-10.x), which trtexec
#: and the ONNX parser register by default: a model using only these needs no plugin library.
BUILTIN_PLUGINS = frozenset({
    "BatchedNMS_TRT", "BatchedNMSDynamic_TRT", "BatchTilePlugin_TRT", "Clip_TRT", "CoordConvAC", "CropAndResize",
    "CropAndResizeDynamic", "DecodeBbox3DPlugin", "DetectionLayer_TRT", "EfficientNMS_TRT",
    "EfficientNMS_ONNX_TRT", "EfficientNMS_Explicit_TF_TRT", "EfficientNMS_Implicit_TF_TRT", "FlattenConcat_TRT",
    "GenerateDetection_TRT", "GridAnchor_TRT", "GridAnchorRect_TRT", "GroupNormalizationPlugin",
    "InstanceNormalization_TRT", "LReLU_TRT", "ModulatedDeformConv2d", "MultilevelCropAndResize_TRT",
    "MultilevelProposeROI_TRT", "MultiscaleDeformableAttnPlugin_TRT", "NMS_TRT", "NMSDynamic_TRT", "Normalize_TRT",
    "PillarScatterPlugin", "PriorBox_TRT", "ProposalDynamic", "ProposalLayer_TRT", "Proposal", "PyramidROIAlign_TRT",
    "Region_TRT", "Reorg_TRT", "ResizeNearest_TRT", "ROIAlign_TRT", "RPROI_TRT", "ScatterND", "SpecialSlice_TRT",
    "Split", "VoxelGeneratorPlugin", "DisentangledAttention_TRT", "CustomEmbLayerNormPluginDynamic",
    "CustomFCPluginDynamic", "CustomGeluPluginDynamic", "CustomQKVToContextPluginDynamic",
    "CustomSkipLayerNormPluginDynamic",
})


def plugin_comments(plugins: Any, vt: tuple[int, ...]) -> list[str]:
    """Comment lines for a plan whose model has TensorRT plugin layers (layer name -> op).

    Built-in plugins (:data:`BUILTIN_PLUGINS`) need nothing; any other needs its library loaded
    by trtexec: ``--staticPlugins=lib.so`` from TensorRT 10, ``--plugins=lib.so`` before."""
    if not isinstance(plugins, dict) or not plugins:
        return []
    ops = sorted({str(op) for op in plugins.values()})
    lines = [f"# plugin layers (GPU only, never on the DLA): {', '.join(ops)}"]
    custom = [op for op in ops if op not in BUILTIN_PLUGINS]
    if custom:
        flag = "--staticPlugins" if vt and vt[0] >= 10 else "--plugins"
        lines.append(f"# WARNING: {', '.join(custom)} is not one of TensorRT's built-in plugins: add "
                     f"{flag}=<your plugin library .so> to each trtexec line below")
    else:
        lines.append("# they are TensorRT built-in plugins: trtexec registers them, no plugin library is needed")
    return lines


_CONTROL = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def one_line(comment: str) -> str:
    """A comment (or any text a script or note quotes) with every control character (newline,
    carriage return...) written as an escape: it stays on one line."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], comment)


#: The first comment of every build script :func:`trtexec_script` writes.
_HEADER = "# placetune plan: "


def is_build_script(path: Any) -> bool:
    """True when ``path`` is a build script :func:`trtexec_script` wrote (``#!`` and the plan's header line)."""
    try:
        head = read_head(path)
    except (OSError, ValueError):
        return False
    return head.startswith(b"#!") and b"\n" + _HEADER.encode() in head


def trtexec_script(plan: PlanView, onnx_path: str = "model.onnx", trt_version: str | None = None, *,
                   calib: str | None = None) -> str:
    """:func:`trtexec_commands` as a POSIX shell script (``#!/bin/sh`` and ``set -e``)."""
    body = trtexec_commands(plan, onnx_path, trt_version, calib=calib)
    return "\n".join(["#!/bin/sh", "set -e", *body]) + "\n"
