"""What a deployment must know about a plan folder's engines, in the words of its README: the TensorRT
and board the engines are bound to, each engine's DLA core and I/O tensors (name, shape, type and
format as ``build.sh`` builds them), how to check on the board that the built engines have the planned
placement, and a DeepStream ``nvinfer`` configuration where one nvinfer element can run the plan.

Sources: trtexec's options per TensorRT release (``samples/common/sampleOptions.cpp`` and
``sampleEngines.cpp``, NVIDIA/TensorRT release/8.5, 8.6, 10.3, 11.1); DeepStream's nvinfer keys
(``gstnvinfer_property_parser.h``: ``model-engine-file``, ``enable-dla``, ``use-dla-core``,
``network-mode``, ``batch-size``, ``onnx-file``) and what nvinfer does when an engine does not load
(``nvdsinfer_context_impl.cpp``, ``generateBackendContext``: it deserializes the engine on the
configured DLA core, and on failure, or when the engine does not match the configuration, builds a
new engine from the model files); what a YOLO head needs of nvinfer (DeepStream-Yolo's
``nvdsparsebbox_Yolo.cpp`` and ``utils/export_yolo11.py``; Ultralytics' ``engine/exporter.py`` NMSModel;
the nvinfer property table); trtexec's DIRECT_IO without ``--allowGPUFallback`` (``sampleEngines.cpp``,
NVIDIA/TensorRT#3438). Checked against those sources only: no TensorRT or DeepStream ran.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from placetune.backends.trtexec.command import strongly_typed
from placetune.model.misreads import later_rules_hint, old_parser_misread
from placetune.placement.cut_formats import plan_cut_formats
from placetune.plan.trtexec import engine_files, one_line, target_version, trtexec_type

if TYPE_CHECKING:
    from placetune.plan.file import Plan

__all__ = ["BUILD_STOP", "DEEPSTREAM_FILE", "DIRECT_IO_ENFORCED_BEFORE", "JETPACKS", "build_stop_note",
           "deepstream_config", "deepstream_refusal", "direct_io_blocks", "install_line", "io_lines", "target_lines", "tensor_formats", "verify_lines"]

#: the DeepStream nvinfer configuration a plan folder of an engine plan carries
DEEPSTREAM_FILE = "deepstream_nvinfer.txt"

#: how the note of a plan whose build stops on the TensorRT it is for begins (the folder replaces it for its own)
BUILD_STOP = "build.sh and placetune build stop on TensorRT"


def build_stop_note(proto: Any, trt_version: str) -> str | None:
    """The plan's note when the ONNX parser of ``trt_version``, the TensorRT the plan is for, would build
    another network than the model (:func:`~placetune.model.misreads.old_parser_misread`): ``build.sh`` and
    ``placetune build`` stop there before building anything (exit 3), which a simulated study only warned of
    when it started; None when that parser reads the model as written."""
    why = old_parser_misread(proto, trt_version)
    if why is None:
        return None
    return (f"{BUILD_STOP} {trt_version}, the TensorRT this plan is for (exit 3), before building anything: "
            f"{why}{later_rules_hint(proto, trt_version)}")


#: the JetPack releases that ship each TensorRT placetune targets (major.minor)
JETPACKS: dict[tuple[int, ...], str] = {(8, 5): "JetPack 5.1.x, L4T R35", (8, 6): "JetPack 6.0, L4T R36.3",
            (10, 3): "JetPack 6.1 / 6.2, L4T R36.4", (11, 4): "JetPack 7.2.2 or later, L4T R39"}

_TRT_TYPE = {"FLOAT": "fp32", "HALF": "fp16", "INT8": "int8", "INT32": "int32", "BOOL": "bool"}
_TRT_FORMAT = {"LINEAR": "chw", "CHW16": "chw16", "CHW32": "chw32", "CHW4": "chw4"}


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:2])


def _platform_title(plan: "Plan") -> str:
    from placetune.hardware.platforms import get_platform

    try:
        return f"{get_platform(plan.platform).title} ({plan.platform})"
    except Exception:  # noqa: BLE001 - a plan of a platform registered elsewhere
        return str(plan.platform)


def target_lines(plan: "Plan", trt_version: str | None) -> list[str]:
    """The TensorRT, JetPack and board the engines are bound to, and that engines are not portable."""
    version = target_version(plan, trt_version)
    jetpack = JETPACKS.get(_vt(version)[:2], "a JetPack that ships it")
    return [f"Target: TensorRT {version} ({jetpack}) on {_platform_title(plan)}.",
            "A TensorRT engine runs only with the TensorRT version that built it and on the same GPU/DLA: build",
            "the engines on the board itself, with that TensorRT, and build them again after a JetPack upgrade",
            "or on another module (an engine from elsewhere fails to deserialize)."]


def install_line(plan: "Plan", trt_version: str | None) -> str:
    """The ``pip install`` of placetune from a clone with the extra of the JetPack the plan targets
    (pyproject.toml): ``jetson-jp6`` (cuda-python 12) for JetPack 6's TensorRT 8.6 and 10.3,
    ``jetson-jp7`` (cuda-python 13, which needs CUDA 13's driver) for JetPack 7's TensorRT 10.13 and 11."""
    version = target_version(plan, trt_version)
    jp7 = _vt(version)[:2] >= (10, 13)
    extra, jetpack, binding = ("jetson-jp7", "JetPack 7", "13") if jp7 else ("jetson-jp6", "JetPack 6", "12")
    return (f'pip install -e "/path/to/placetune[{extra}]"   # the clone; {extra}: cuda-python {binding}, the '
            f"binding of {jetpack}, whose TensorRT {version} the plan is for")


def tensor_formats(plan: "Plan", trt_version: str | None) -> dict[str, str]:
    """Each engine boundary tensor's type and format as ``build.sh`` builds it, in trtexec's spelling
    (``fp16:chw16``): a pipeline cut at a DLA engine in the DLA's own format, every other tensor in
    the ONNX file's type (FP16 for an FP16 plan built strongly typed, TensorRT 11 on) and linear."""
    version = target_version(plan, trt_version)
    typed = strongly_typed(_vt(version))
    cuts = plan_cut_formats(plan.engines, plan.precision, strongly_typed=typed,
                            network_outputs=plan.model.get("outputs") or [],
                            qdq=plan.int8_ranges == "qdq",
                            measured=(plan.measured or {}).get("cut_formats")) if plan.mode == "pipeline" else {}
    out: dict[str, str] = {}
    for eng in plan.engines:
        for t in list(eng.get("inputs") or []) + list(eng.get("outputs") or []):
            if not isinstance(t, dict):
                continue
            name = str(t.get("name"))
            if name in cuts:
                out[name] = cuts[name].trtexec
                continue
            dtype = str(t.get("dtype") or "")
            if typed and plan.precision == "fp16" and dtype == "float32":
                dtype = "float16"  # the folder's ONNX files are converted to FP16 for a strongly typed build
            out.setdefault(name, f"{trtexec_type(dtype, _vt(version)) or dtype or '?'}:chw")
    return out


#: TensorRT deprecated ``BuilderFlag::kDIRECT_IO`` in 10.7 ("Unneeded API", include/NvInfer.h release/10.13 and
#: 11.1) while trtexec still sets it without ``--allowGPUFallback``: before 10.7 it is documented to fail the build
#: when an I/O reformat is needed; from 10.7 whether the builder still enforces it is not known here
DIRECT_IO_ENFORCED_BEFORE = (10, 7)

#: the formats a DLA reads and writes itself (trtexec's spelling): no GPU reformat at such a tensor
_DLA_NATIVE = ("chw16", "chw32", "dla_linear", "dla_hwc4")


def direct_io_blocks(plan: "Plan", trt_version: str | None, proto: Any = None) -> list[str]:
    """The engine I/O tensors trtexec cannot build as the plan measured them when the plan has GPU fallback
    off: ``build.sh`` then passes ``--useDLACore`` without ``--allowGPUFallback``, and trtexec sets
    ``BuilderFlag::kDIRECT_IO`` ("Reformatting runs on GPU, so avoid I/O reformatting", sampleEngines.cpp
    release/8.5:989-997, 8.6:1136-1144, 10.3:1134-1142, 11.1:716-724) after giving every network input
    and output ``setAllowedFormats`` (kLINEAR unless ``--inputIOFormats``/``--outputIOFormats`` say
    otherwise); the build then fails where a DLA layer reads or writes such a tensor, since the DLA
    reads no FP32 and no linear layout (NVIDIA/TensorRT#3438). The measurement (the TensorRT API,
    or the simulator) sets no DIRECT_IO: its GPU reformats at those tensors are what was timed.

    A tensor counts when a DLA layer of its engine reads or writes it: every tensor of a pipeline
    segment on a DLA, and in engine and replicas plans the model's inputs read and outputs written by
    the engine's DLA layers (``proto``: the model, whose node names are the layer names; without it
    only whole-DLA engines are checked). A tensor in a DLA format (a pipeline's cut, ``fp16:chw16``)
    needs no reformat. Returns one ``"engine file: tensor (format)"`` per tensor; empty with GPU fallback."""
    if plan.gpu_fallback:
        return []
    formats = tensor_formats(plan, trt_version)
    readers: dict[str, set[str]] = {}
    writers: dict[str, set[str]] = {}
    graph = getattr(proto, "graph", None)
    for node in (graph.node if graph is not None else []):
        for t in node.input:
            readers.setdefault(t, set()).add(node.name)
        for t in node.output:
            writers.setdefault(t, set()).add(node.name)
    out = []
    for eng in plan.engines:
        dla = set(eng.get("dla_layers") or [])
        layers = set(eng.get("layers") or [])
        whole = (eng.get("kind") == "segment" and str(eng.get("device", "GPU")) != "GPU") or (bool(dla) and dla >= layers)
        if not dla and not whole:
            continue
        for key, touching in (("inputs", readers), ("outputs", writers)):
            for t in eng.get(key) or []:
                name = str(t.get("name")) if isinstance(t, dict) else str(t)
                fmt = formats.get(name, "fp32:chw")
                if fmt.endswith(_DLA_NATIVE):
                    continue
                if whole or touching.get(name, set()) & dla:
                    out.append(f"{engine_files(str(plan.mode), eng)[1]}: {name} ({fmt})")
    return out


def _tensors(items: Any, formats: dict[str, str]) -> str:
    parts = []
    for t in items or []:
        if not isinstance(t, dict):
            continue
        shape = "x".join("?" if d is None else str(d) for d in (t.get("shape") or []))
        parts.append(f"{t.get('name')} [{shape} {formats.get(str(t.get('name')), t.get('dtype') or '?')}]")
    return one_line(", ".join(parts) or "-")


def io_lines(plan: "Plan", trt_version: str | None, files: list[tuple[str, str]]) -> list[str]:
    """One line per engine: its file, device and DLA core, and its inputs and outputs with shape and
    ``type:format`` (``files``: each engine's ``(onnx file, engine file)``)."""
    formats = tensor_formats(plan, trt_version)
    lines = []
    for e, (onnx_file, engine_file) in zip(plan.engines, files):
        what = {"segment": f"segment {e.get('index')} on {e.get('device')}",
                "replica": f"replica on {e.get('device')}"}.get(str(e.get("kind")), f"the engine ({e.get('device')})")
        core = e.get("dla_core")
        if core is not None:
            what += f", DLA core {core}"
        lines.append(f"  {onnx_file:18s} -> {engine_file}: {what}; inputs {_tensors(e.get('inputs'), formats)}; "
                     f"outputs {_tensors(e.get('outputs'), formats)}")
    lines.append("  (tensor types and formats as trtexec spells them: fp32/fp16/int8; chw = linear NCHW; chw16 / "
                 "chw32 = the DLA's vectorised format, channels padded to 16 / 32)")
    return lines


def verify_lines(plan: "Plan", trt_version: str | None) -> list[str]:
    """How to check on the board that the built engines have the plan's placement."""
    vt = _vt(target_version(plan, trt_version))
    level = "at INFO (trtexec prints it as is)" if vt < (10,) else "at VERBOSE (add --verbose to the line)"
    n_dla = sum(len(e.get("dla_layers") or []) for e in plan.engines)
    return ["Check the placement on the board:",
            "   `placetune build .` builds every engine through TensorRT and compares each layer's device, from the",
            "   build log and the engine inspector, with plan.json; it lists every layer TensorRT placed elsewhere.",
            "   With build.sh: TensorRT's build log reports the layers on each device (\"Layers Running on DLA\" /",
            f"   \"Layers Running on GPU\") {level}; compare it with plan.json's engines[i].dla_layers",
            f"   ({n_dla} DLA layer(s) in all). trtexec ignores a --layerDeviceTypes name the network does not have",
            "   (sampleEngines.cpp), so a renamed layer silently takes the default device: check, do not assume.",
            "   At run time a DLA engine must be loaded on its core (IRuntime.DLA_core / trtexec --useDLACore)."]


def deepstream_refusal(plan: "Plan") -> str | None:
    """Why one DeepStream nvinfer element cannot run the plan as planned; None when it can."""
    if plan.mode == "pipeline":
        return (f"DeepStream: one nvinfer element runs one engine; this plan is a DAG of {len(plan.engines)} "
                "engines chained by events, which nvinfer cannot express: run it with placetune's runtime "
                "(step 4) or your own TensorRT code; no nvinfer configuration is written.")
    if plan.mode == "replicas":
        return (f"DeepStream: this plan sends each batch to the next free one of {len(plan.engines)} engines on "
                "different devices; one nvinfer element runs one engine, and nvinfer has no such dispatch: no "
                "nvinfer configuration is written (one nvinfer per replica engine, each with its own DLA core, "
                "needs your own stream split).")
    return None


#: the nvinfer property table (cluster-mode 0 OpenCV groupRectangles, 1 DBSCAN, 2 NMS, 3 DBSCAN + NMS, 4 none;
#: network-type 0 detector ... 100 other; output-tensor-meta)
_NVINFER_DOC = "https://docs.nvidia.com/metropolis/deepstream/dev-guide/text/DS_plugin_gst-nvinfer.html"


def _yolo_head(plan: "Plan", proto: Any) -> tuple[str, str, list[int], dict[str, str]] | None:
    """``("raw" | "nms", output name, its shape, the file's metadata)`` when the engine's output is a YOLO
    detection head: an Ultralytics export (its metadata: ``author: Ultralytics``, ``task``) with a 3-D output
    ``[B, C, anchors]`` (channels first, no NMS) or, exported with ``nms=True``, ``[B, max_det, 6]``; a file
    without that metadata counts when its one 3-D output is ``[B, C, A]`` with 5 <= C < A and A >= 1000."""
    meta = {str(p.key): str(p.value) for p in getattr(proto, "metadata_props", None) or []}
    ultralytics = "ultralytics" in meta.get("author", "").lower()
    outs = [(str(t.get("name")), list(t.get("shape") or [])) for t in plan.engines[0].get("outputs") or []
            if isinstance(t, dict)]
    rank3 = [(n, s) for n, s in outs if len(s) == 3 and all(isinstance(d, int) and d > 0 for d in s)]
    for name, shape in rank3:
        _, c, a = shape
        if ultralytics and meta.get("task") == "detect" and a == 6 and c > a:
            return "nms", name, shape, meta
        if 5 <= c < a and (ultralytics or (len(rank3) == 1 and a >= 1000)):
            return "raw", name, shape, meta
    return None


def _ultralytics_input(meta: dict[str, str]) -> list[str]:
    """An Ultralytics model's input as nvinfer must make it: RGB scaled to 0..1, letterboxed in the centre
    (ultralytics LetterBox, center=True); nvinfer's defaults (net-scale-factor 1.0: pixels 0..255) would feed it
    values 255 times too large, and it would still output boxes, wrong ones."""
    if "ultralytics" not in meta.get("author", "").lower():
        return []
    return ["# INPUT: an Ultralytics model takes RGB scaled to 0..1, letterboxed in the centre (nvinfer's default",
            "# scale 1.0 would feed it pixels of 0..255, and it would still output boxes: wrong ones)",
            "net-scale-factor=0.0039215697906911373", "model-color-format=0", "maintain-aspect-ratio=1",
            "symmetric-padding=1"]


def _yolo_lines(head: tuple[str, str, list[int], dict[str, str]]) -> list[str]:
    """What nvinfer needs to parse a YOLO head, said where a wrong parser would mis-read it silently."""
    kind, name, shape, meta = head
    dims = "x".join(map(str, shape))
    task = meta.get("task")
    pre = _ultralytics_input(meta)
    if kind == "nms":
        return pre + [
            f"# DETECTOR OUTPUT: {name} [{dims}] is an Ultralytics YOLO export with NMS in the graph (nms=True): rows",
            "# of x1, y1, x2, y2, score, class in network-input pixels, zero rows as padding (ultralytics",
            "# engine/exporter.py: NMSModel, Detect.xyxy = nms). DeepStream-Yolo's NvDsInferParseYolo reads rows of",
            "# exactly that layout (nvdsparsebbox_Yolo.cpp, decodeTensorYolo); the NMS is done, so no clustering:",
            "#   parse-bbox-func-name=NvDsInferParseYolo",
            "#   custom-lib-path=<DeepStream-Yolo's nvdsinfer_custom_impl_Yolo/libnvdsinfer_custom_impl_Yolo.so>",
            "#   cluster-mode=4",
            "# (without parse-bbox-func-name nvinfer's own detector parser looks for DetectNet coverage/bbox layers",
            "# this engine does not have)"]
    what = (f"an Ultralytics YOLO {task or 'model'} head" if "ultralytics" in meta.get("author", "").lower()
            else "shaped like a YOLO head")
    classes = f"{shape[1] - 4}" if task == "detect" else "<the model's class count>"
    return pre + [
        f"# DETECTOR OUTPUT: {name} [{dims}] is {what}: per anchor (last dimension) 4 box values (cx, cy, w, h",
        "# in network-input pixels) then the class scores, channels first, no NMS. nvinfer cannot parse it as it",
        "# stands: without parse-bbox-func-name its own detector parser looks for DetectNet coverage/bbox layers,",
        "# and DeepStream-Yolo's NvDsInferParseYolo reads rows of 6 (x1, y1, x2, y2, score, class: its own",
        "# export's layout, utils/export_yolo11.py DeepStreamOutput; nvdsparsebbox_Yolo.cpp decodeTensorYolo), so",
        f"# it would read this [{shape[1]}x{shape[2]}] tensor as such rows: wrong boxes and classes, and no error.",
        "# So this file keeps nvinfer from parsing it (network-type=100) and attaches the raw tensor to each",
        "# buffer (output-tensor-meta=1) for your own probe. To get boxes from nvinfer, write a parser for",
        f"# [{shape[1]}, anchors] channels-first heads (or re-export with DeepStream-Yolo's exporter and tune that",
        "# ONNX), then set:",
        "#   network-type=0",
        "#   parse-bbox-func-name=<your parser>",
        "#   custom-lib-path=<its library>",
        f"#   num-detected-classes={classes}",
        "#   cluster-mode=2   (NMS in nvinfer: the head has none; 0 groupRectangles, 1 DBSCAN, 2 NMS, 4 none)",
        f"# (keys: {_NVINFER_DOC})",
        "network-type=100",
        "output-tensor-meta=1"]


def deepstream_config(plan: "Plan", trt_version: str | None, engine_file: str, proto: Any = None) -> str | None:
    """The ``[property]`` keys of a DeepStream nvinfer configuration that loads the engine ``build.sh``
    builds, with the source of each key; None for a plan one nvinfer cannot run
    (:func:`deepstream_refusal`). ``proto``: the model, whose metadata and output say whether it is a YOLO
    detector (:func:`_yolo_head`): nvinfer then needs a parser for its layout, and a raw head is attached
    as a tensor rather than parsed by a parser that would mis-read it."""
    if deepstream_refusal(plan) or not plan.engines:
        return None
    eng = plan.engines[0]
    core = eng.get("dla_core")
    dla = bool(eng.get("dla_layers")) or str(eng.get("device", "GPU")) != "GPU"
    core = int(core) if core is not None else 0
    mode = {"fp32": 0, "int8": 1, "fp16": 2}.get(plan.precision, 0)
    version = target_version(plan, trt_version)
    formats = tensor_formats(plan, trt_version)
    lines = [
        "# DeepStream Gst-nvinfer configuration keys for this placetune plan: merge them into your detector's",
        "# nvinfer config file ([property] group). Keys from DeepStream's gstnvinfer_property_parser.h.",
        f"# The engine is the one build.sh (or `placetune build .`) built with TensorRT {version}: DeepStream must",
        "# run on the same board with the same TensorRT (a DeepStream release built against another TensorRT",
        "# cannot load it).",
        "#",
        "# No onnx-file= on purpose: when model-engine-file fails to load (another TensorRT, another board) or",
        "# does not match this configuration, nvinfer builds a new engine from onnx-file",
        "# (nvdsinfer_context_impl.cpp, generateBackendContext -> buildModel) with its own settings: the whole network on the DLA with GPU",
        "# fallback when enable-dla=1, GPU only otherwise, which loses this plan's per-layer placement. Without",
        "# onnx-file nvinfer stops with an error instead. If you add onnx-file, check nvinfer's log for",
        "# \"Trying to create engine from model files\": it means the plan's engine was NOT used.",
        "#",
        "# Still yours to set: your detector's parser (parse-bbox-func-name, custom-lib-path; an Ultralytics YOLO",
        "# output needs a custom parser), net-scale-factor, model-color-format, labelfile-path, num-detected-classes.",
        f"# the engine's tensors: inputs {_tensors(eng.get('inputs'), formats)}; "
        f"outputs {_tensors(eng.get('outputs'), formats)}",
        "[property]",
        "# the engine placetune built (path relative to this file's folder; make it absolute if your config lives elsewhere)",
        f"model-engine-file={engine_file}",
        f"# the plan's batch; the engine is built for exactly {plan.batch} (static)",
        f"batch-size={plan.batch}",
        "# 0=FP32, 1=INT8, 2=FP16: the plan's precision",
        f"network-mode={mode}",
    ]
    if dla:
        gpu = len(set(eng.get("layers") or []) - set(eng.get("dla_layers") or []))
        lines += [f"# the plan runs the engine's DLA layers on DLA core {core} (build.sh: --useDLACore={core}); nvinfer "
                  "deserializes the engine on use-dla-core (IRuntime::setDLACore), so another value runs it on "
                  "another core than the one the plan was timed on",
                  "enable-dla=1", f"use-dla-core={core}"]
        if gpu:
            lines.append(f"# {gpu} layer(s) of the plan run on the GPU inside the same engine: that is the plan, "
                         "not a fallback")
    else:
        lines += ["# the plan puts no layer on a DLA", "enable-dla=0"]
    head = _yolo_head(plan, proto)
    if head is not None:
        lines += _yolo_lines(head)
    if plan.precision == "int8" and plan.int8_ranges not in ("qdq", "calibration-cache"):
        lines.append("# WARNING: INT8 ranges are placeholders in this plan: accuracy is not preserved")
    if plan.simulated:
        lines.append("# the plan's figures are SIMULATED: measure the pipeline before relying on them")
    return "\n".join(one_line(x) if x.startswith("#") else x for x in lines) + "\n"
