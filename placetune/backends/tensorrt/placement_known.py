"""Whether the realised placement is known: the build log and the engine's own layer information, cross-checked.

Two sources say where TensorRT placed the layers of a DLA engine:

* the build log (:mod:`placetune.backends.tensorrt.buildlog`): the ``Layers Running on DLA/GPU``
  report, TensorRT 10.3's ``successfully offloaded to DLA`` lines, a whole-network fallback;
* the engine inspector (``IEngineInspector.get_engine_information(LayerInformationFormat.JSON)``
  with ``ProfilingVerbosity.DETAILED``; trtexec ``--exportLayerInfo --profilingVerbosity=detailed``):
  one entry per engine layer. Read from it only what real exports carry (TREx's parser and the
  corpus: TensorRT 8.4, 10.1 on a JetPack 6.1 Orin, 10.4): ``Name``, ``LayerType`` and, from 8.6,
  ``Metadata`` (``[ONNX Layer: A]`` records joined by ``\\x1e``/``\\x1f``: the ONNX nodes of a
  fused layer or of a TensorRT 10 Myelin kernel such as ``/fc/Gemm_myl9_2``, whose name is not
  the node's). A DLA loadable is a ``{ForeignNode[...]}`` engine layer; its input/output copies
  are engine layers named ``<tensor> to nvm`` / ``<tensor> from nvm`` / ``<tensor> copy finish``
  (the real profile of NVIDIA/TensorRT#3143: ``images to nvm``, ``{ForeignNode[Conv_0...Concat_198]}``,
  ``head_3 from nvm``). A Myelin subgraph is a ``{ForeignNode[...]}`` too (``LayerType``
  ``Myelin`` in 8.x); TensorRT 10 lists Myelin regions kernel by kernel (``kgen``, ``gemm``). So a
  ForeignNode is read as on the DLA when it follows a ``to nvm`` copy or precedes a ``from nvm``
  copy and is not typed ``Myelin``, when its ``LayerType`` names the DLA, or when the build log names
  it as a DLA loadable (a loadable fed by a GPU layer has no nvm copy beside it: the real profile of
  corpus hax-conn-googlenet-gpu-to-dla-transition-profile). A real TensorRT 10.3 DLA engine's
  layer information (AGX Orin, JetPack 6: corpus yolo11-dla-orin-10.3-layer-types, its layers'
  ``Name`` and ``LayerType`` as published) types each loadable ``DLA`` with no nvm copy beside it;
  its loadables' names give their first and last layers, which need not bound an interval of the
  network (the attention block of that YOLO11n lies between the ends of a loadable it is not in).
  Where the inspector cannot place a layer the engine was asked to put on the DLA, the placement
  is unknown, never the GPU.

:func:`decide` gives the realised placement, or says it is unknown (``known=False`` with the
reason) when the two disagree or neither can be read: never "realised = requested" for the engine.
A single layer that neither names (optimised away, folded) keeps its requested device, and is
listed (``Known.from_request``, ``extra["placement_from_request"]``). Without a placement report
in the log, a ForeignNode the inspector reading cannot place leaves the placement unknown. A layer asked
on the DLA is read as the GPU's only where a source says so positively: a fallback warning naming it
(TensorRT warns of each layer it moves off the DLA, at WARNING, which is always captured), the log's
placement report listing it on the GPU or saying that nothing ran on the DLA (a whole-network fallback,
``0 out of N`` DLA candidates offloaded), or layer information that places some DLA loadable in the form
read here and lists it among the GPU's layers. Layer information showing no DLA layer in that form (a
loadable in a form not read here would look so) says nothing of where the layers asked on the DLA ran:
those no fallback warning names are unknown, never the GPU's (``Known.fallback_warned`` keeps the layers
a warning names: the GPU's, whatever else is unknown); with a placement report naming DLA loadables, such
layer information is not taken as evidence against it.

Example:
    >>> from placetune.backends.tensorrt.buildlog import parse_build_log, locate
    >>> blog = parse_build_log(["All dla layers are falling back to GPU"])
    >>> k = decide({"a": "DLA0"}, 0, blog, locate(blog, ["a"]), ["a"])
    >>> k.known, k.realized, k.source
    (True, {'a': 'GPU'}, 'build log')
    >>> k = decide({"a": "DLA0"}, 0, parse_build_log([]), locate(parse_build_log([]), ["a"]), ["a"])
    >>> k.known, k.realized
    (False, None)
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placetune.backends.tensorrt.buildlog import DLA_COPY_SUFFIXES, BuildLog, LogPlacement, NameResolver
from placetune.backends.tensorrt.worker_names import onnx_nodes

__all__ = ["Known", "decide", "inspector_dla_layers", "inspector_layers", "metadata_nodes", "mark_known",
           "say_unknown", "say_unchecked",
           "DLA_COPY_SUFFIXES"]

log = logging.getLogger(__name__)

#: a TensorRT 10 Myelin kernel named after the ONNX node it computes (corpus
#: evpe-rtx3060-trtexec-10.4-alexnet-layerinfo: /classifier/classifier_1/Gemm_myl9_2)
_MYELIN_KERNEL = re.compile(r"^(?P<base>.+?)_myl\d+_\d+$")
#: the rows real DLA profiles show around a DLA group, named after it or its last layer but standing
#: for no layer of the model: ``loss3/classifier finish``, ``{...} reformatted input 0 finish``,
#: ``{...} output to be reformatted 0 finish``, ``{...} output reformatter 0`` (corpus
#: hax-conn-googlenet-gpu-to-dla-transition-profile, hax-conn-googlenet-dla-whole-network-profile)
#: TensorRT 8+'s names of a reformat the builder inserts (also between a GPU layer and a DLA loadable)
_REFORMAT_PREFIXES = ("Reformatting CopyNode", "Reformat ")
#: the GPU shuffle TensorRT adds after a Gemm it runs on the DLA, named after the Gemm (``[GpuLayer] SHUFFLE:
#: reshape_after_/fc/Gemm`` beside ``{ForeignNode[/fc/Gemm + ...]} successfully offloaded to DLA.``: corpus
#: orin-agx-trt10.3-dla-offloaded; ``reshape_after_/linear/Gemm``, dlatutorial-repro-orin64-8.5.2-model-bn):
#: the builder's, standing for no layer of the model whatever its Metadata says
_BUILDER_SHUFFLE = ("reshape_after_",)
_DLA_SYNC_ROW = re.compile(r" finish$| (?:input|output) reformatter \d+$")


@dataclass
class Known:
    """The realised placement and how far it is known.

    Attributes:
        realized: layer -> device, or None when unknown.
        known: False when the sources disagree or none can be read.
        reason: why it is unknown (None when known).
        source: ``build log``, ``engine inspector``, ``build log and engine inspector`` or ``GPU engine``.
        loadables: DLA loadables, or None when unknown (the sources disagree or none says).
        from_request: layers neither source names (optimised away, folded, or renamed beyond
            recognition): their realised device is the requested one, a guess that is recorded.
        unchecked: why the second source could not check the first (the placement rests on one
            source), None when both were compared or only one was read.
        fallback_warned: of an unknown placement, the layers asked on the DLA that a fallback
            warning of the build log names: on the GPU whatever else is unknown (their reasons are
            the log's, ``LogPlacement.fallback``).
    """

    realized: dict[str, str] | None
    known: bool
    reason: str | None
    source: str
    loadables: int | None
    from_request: list[str] = field(default_factory=list)
    unchecked: str | None = None
    fallback_warned: list[str] = field(default_factory=list)


def _name(layer: object) -> str:
    return str(layer.get("Name", "")) if isinstance(layer, Mapping) else str(layer)


def metadata_nodes(layer: object) -> list[str]:
    """The ONNX nodes an engine layer's ``Metadata`` names (TensorRT 8.6+ DETAILED), [] without."""
    return onnx_nodes(str(layer.get("Metadata") or "")) if isinstance(layer, Mapping) else []


def _layer_type(layer: object) -> str:
    return str(layer.get("LayerType", "")) if isinstance(layer, Mapping) else ""


def inspector_dla_layers(layers: Sequence[object] | None, named: Collection[str] = ()) -> list[str] | None:
    """Engine layers the inspector's JSON puts on a DLA (names as written), or None when it has no
    layers to say it with: a ``{ForeignNode[...]}`` right after a ``to nvm`` copy or right before a
    ``from nvm`` copy (the order of the real profile of NVIDIA/TensorRT#3143) and not typed
    ``Myelin`` (a GPU subgraph), a layer whose ``LayerType`` names the DLA, or a ``{ForeignNode[...]}``
    not typed ``Myelin`` whose name is in ``named``: the loadables the build log names
    (``BuildLog.dla_nodes``, TensorRT's own ``[DlaLayer]`` / ``successfully offloaded to DLA`` lines). A
    loadable fed by a GPU layer has no nvm copy beside it (the real profile of corpus
    hax-conn-googlenet-gpu-to-dla-transition-profile: a GPU reformatter before the DLA group, the GPU's
    reformatter after it)."""
    if not layers:
        return None
    names = [_name(x) for x in layers]
    logged = {n for n in named if n.startswith("{ForeignNode[")}
    out: list[str] = []
    for i, (name, layer) in enumerate(zip(names, layers)):
        if name.endswith(DLA_COPY_SUFFIXES) or name.startswith(_REFORMAT_PREFIXES) or _DLA_SYNC_ROW.search(name):
            continue  # the builder's copies, reformats and synchronisation rows around a loadable
        ltype = _layer_type(layer).lower()
        if ltype == "myelin":
            continue
        after_input_copy = i > 0 and names[i - 1].endswith(" to nvm")
        before_output_copy = i + 1 < len(names) and names[i + 1].endswith(" from nvm")
        if "dla" in ltype or name in logged or (name.startswith("{ForeignNode[") and (after_input_copy or before_output_copy)):
            out.append(name)
    return out


def _unresolved(ranges: Sequence[tuple[str, str]]) -> str:
    """Why a placement with a ``{ForeignNode[A...B]}`` range whose end the parser never registered is unknown."""
    name, end = ranges[0]
    more = f" (and {len(ranges) - 1} more such range(s))" if len(ranges) > 1 else ""
    return (f"{name} is named by its end {end}, a layer the ONNX parser made without registering it (no "
            f"'Registering layer' line names it), so the layers between its ends cannot be read{more}")


def decide(
    predicted: Mapping[str, str],
    core: int,
    blog: BuildLog,
    loc: LogPlacement,
    model_names: Sequence[str],
    network: Sequence[tuple[str, str | None]] | None = None,
    inspector_layers: Sequence[Any] | None = None,
) -> Known:
    """The realised placement of one engine from its build log and (where read) its layer information.

    Args:
        predicted: layer -> device placetune predicted (only its layers are reported).
        core: the engine's DLA core (-1: a GPU engine).
        blog, loc: the parsed build log and its mapping onto the model.
        model_names, network: as for :class:`~placetune.backends.tensorrt.buildlog.NameResolver`.
        inspector_layers: the inspector's ``Layers`` (dicts or names), None when not read.

    An unknown placement lists the layers asked on the DLA that a fallback warning names
    (``fallback_warned``): TensorRT said they left the DLA, whatever else cannot be read.
    """
    known = _decide(predicted, core, blog, loc, model_names, network, inspector_layers)
    if not known.known:
        known.fallback_warned = [n for n, d in predicted.items() if d != "GPU" and n in loc.fallback]
    return known


def _decide(
    predicted: Mapping[str, str],
    core: int,
    blog: BuildLog,
    loc: LogPlacement,
    model_names: Sequence[str],
    network: Sequence[tuple[str, str | None]] | None = None,
    inspector_layers: Sequence[Any] | None = None,
) -> Known:
    """:func:`decide`, before the fallback-warned layers of an unknown placement are listed."""
    if core < 0:
        return Known({n: "GPU" for n in predicted}, True, None, "GPU engine", 0)
    target = f"DLA{core}"
    counts = {"[DlaLayer] lines": len(blog.dla_subgraphs), "'successfully offloaded' lines": len(blog.dla_offloaded)}
    if blog.dla_candidates is not None:
        counts["'Number of DLA node candidates offloaded'"] = blog.dla_candidates[0]
    said = {k: v for k, v in counts.items() if v or (k.startswith("'Number") and blog.dla_offloaded)}
    if len(set(said.values())) > 1:  # the log contradicts itself (or was cut): its count is not trusted
        return Known(None, False, "the build log's loadable counts disagree (" + ", ".join(
            f"{k}: {v}" for k, v in said.items()) + ")", "build log", None)
    if loc.unresolved:  # the members of such a range are unknown: never filled in from the prediction
        return Known(None, False, _unresolved(loc.unresolved), "build log", blog.loadables or None)
    from_log: dict[str, str | None] | None = None
    if blog.reports_placement:
        from_log = {n: (target if loc.devices[n] == "DLA" else "GPU") if n in loc.devices else None for n in predicted}
    dla_engine = inspector_dla_layers(inspector_layers, blog.dla_nodes)
    unchecked: str | None = None
    if dla_engine == [] and from_log is not None and blog.dla_nodes:
        # the log (TensorRT's own report, read from real logs) names DLA loadables and the inspector
        # shows none in the form placetune reads (checked against the doubles only): its DLA form is
        # not understood, so it is no evidence against the log; recorded, as a real form to read
        dla_engine = None
        unchecked = (f"engine's layer information not compared: it shows no DLA layer in a form placetune reads "
                     f"while the build log names {len(blog.dla_nodes)} DLA loadable(s)")
    from_ins: dict[str, str | None] | None = None
    unnamed_gpu: list[str] = []
    branch: tuple[list[str], list[str]] = ([], [])  # a range's interior: asked on the DLA and on the GPU, and unnamed
    if dla_engine is not None:
        resolver = NameResolver(model_names, network)
        dla_set = set(dla_engine)
        on_dla = {m for x in inspector_layers or [] if _name(x) in dla_set for m in _model_layers(x, resolver)}
        # a ForeignNode[A...B] range holds every layer between A and B but those the GPU's engine layers name
        on_gpu = {m for x in inspector_layers or [] if _name(x) not in dla_set
                  and not _name(x).endswith(DLA_COPY_SUFFIXES) for m in _model_layers(x, resolver)}
        on_dla -= on_gpu
        # GPU engine layers naming no model layer (a Myelin kernel without Metadata): a candidate the DLA
        # did not take may be in one, so they cannot say that a range's interior is not on the GPU
        unnamed_gpu = [_name(x) for x in inspector_layers or [] if _name(x) not in dla_set
                       and not _name(x).endswith(DLA_COPY_SUFFIXES) and _layer_type(x) != "Reformat"
                       and not _DLA_SYNC_ROW.search(_name(x)) and not _name(x).startswith(_BUILDER_SHUFFLE)
                       and resolver.network_layers(_name(x)) is not None and not _model_layers(x, resolver)]
        branch = _fallen_in_range(predicted, inspector_layers or [], dla_set, on_gpu, resolver)
        if resolver.unresolved and from_log is None:
            return Known(None, False, _unresolved(resolver.unresolved), "engine inspector", len(dla_engine))
        if resolver.unresolved:
            # the log placed every layer it names; the inspector's range cannot be opened, so it can
            # neither confirm nor contradict the log: the log decides, and the measurement says so
            unchecked = "engine's layer information not compared: " + _unresolved(resolver.unresolved)
            dla_engine = None
        else:
            # a layer no engine layer names is not read as the GPU's: None (see below); but one TensorRT's own
            # fallback warning names is, as the build log's reading takes it (buildlog.locate): the warning beats
            # a range's interior and fills a layer no engine layer names (a YOLO head's Slice_1 and Concat_2,
            # warned of and named by no layer of a real 10.3 DLA engine: corpus yolo11-dla-orin-10.3-layer-types)
            own, helped = _warned(blog, resolver, predicted)
            warned_off = own | (helped - on_dla)
            from_ins = {n: target if n in on_dla and n not in warned_off else "GPU" if n in on_gpu or n in warned_off
                        else None for n in predicted}
    log_n = blog.loadables if from_log is not None else None
    ins_n = len(dla_engine) if dla_engine is not None else None
    loadables = log_n if ins_n is None else ins_n if log_n is None else (log_n if log_n == ins_n else None)
    if from_log is None and from_ins is None:
        return Known(None, False, "neither the build log nor the engine's layer information says where the layers "
                     "ran (no placement report in the log; no layer information read)", "none", None)
    if from_log is None and dla_engine == [] and any(_name(x).startswith("{ForeignNode[") for x in inspector_layers or []):
        # the inspector's DLA form is read from the doubles only: a ForeignNode it cannot place is no
        # evidence that every layer ran on the GPU (a DLA loadable is a ForeignNode too)
        foreign = next(_name(x) for x in inspector_layers or [] if _name(x).startswith("{ForeignNode["))
        return Known(None, False, "the build log has no placement report and the engine's layer information names "
                     f"{foreign[:120]} without saying whether it ran on the DLA (no DLA layer type, no 'to nvm'/"
                     "'from nvm' copy beside it)", "engine inspector", None)
    if from_log is not None and from_ins is not None:
        differ = [n for n in predicted if from_log[n] is not None and from_ins[n] is not None
                  and from_log[n] != from_ins[n]]
        if differ:
            return Known(None, False, f"the build log and the engine's layer information disagree on {len(differ)} "
                         f"layer(s) ({', '.join(differ[:5])}{', ...' if len(differ) > 5 else ''})",
                         "build log and engine inspector", loadables)
        if loadables is None:
            return Known(None, False, f"the build log counts {log_n} DLA loadable(s), the engine's layer "
                         f"information {ins_n}", "build log and engine inspector", None)
    # a loadable's name gives its first and last layers, not an interval of the network (a real 10.3 YOLO11n DLA
    # engine names one {ForeignNode[/model.10/Split.../model.23/cv2.2/cv2.2.2/Conv]} whose ends span its attention
    # block, which ran on the GPU and on other loadables: corpus yolo11-dla-orin-10.3-layer-types). A build log with
    # its placement report, every candidate offloaded and a fallback warning for each such layer says where the rest
    # ran: TensorRT warns of each layer it moves off the DLA, so no unwarned layer of the range went with them
    partial = blog.dla_candidates is not None and blog.dla_candidates[0] < blog.dla_candidates[1]
    explained = from_log is not None and not partial and all(n in loc.fallback for n in branch[0])
    if from_ins is not None and branch[0] and branch[1] and not explained:
        # a GPU engine layer computes a layer asked on the DLA that lies inside a DLA loadable's {ForeignNode[A...B]}
        # range: a branch in the range fell back, and its layers no engine layer names (fused into that kernel
        # without a Metadata record of their own) may be on the GPU with it: unknown, never the range's
        fell, unnamed = branch
        return Known(None, False, f"the engine's layer information puts {len(fell)} layer(s) asked on the DLA "
                     f"({_some(fell)}) on the GPU although they lie inside a DLA loadable's {{ForeignNode[A...B]}} "
                     f"range, so a branch of that range fell back; {len(unnamed)} other layer(s) of the range "
                     f"({_some(unnamed)}) are named by no engine layer and may have fallen back with it",
                     "engine inspector" if from_log is None else "build log and engine inspector", None)
    # the inspector's "GPU" for a layer asked on the DLA is evidence only where it places some DLA
    # loadable in the form read here, or where the log says nothing ran on the DLA
    gpu_said = bool(dla_engine) or _log_says_no_dla(blog)
    if from_log is not None:
        fill = {n: d for n, d in (from_ins or {}).items() if gpu_said or d != "GPU" or predicted[n] == "GPU"}
        # a layer the log does not name (folded, optimised away): the inspector's word, else the prediction
        realized = {n: d if d is not None else fill.get(n) or predicted[n] for n, d in from_log.items()}
        guessed = [n for n, d in from_log.items() if d is None and not fill.get(n)]
        if blog.dla_nodes and not any(d == target for d in from_log.values()) and from_ins is None:
            # loadables exist but none maps onto a layer: the names did not match (never "as requested")
            return Known(None, False, f"the build log names {len(blog.dla_nodes)} DLA loadable(s) "
                         f"({', '.join(x[:60] for x in blog.dla_nodes[:2])}) but none maps onto a layer of the model",
                         "build log", loadables)
        lost = [n for n in guessed if predicted[n] != "GPU"]
        if lost and not blog.reports_dla:
            # [GpuLayer] lines read, but nothing of the DLA side: its report is in a form not read here
            return Known(None, False, f"the build log lists GPU layers but says nothing of the DLA in a form placetune "
                         f"reads (no DLA loadable, DLA section or offload count), and {len(lost)} layer(s) asked on "
                         f"the DLA are in no line ({', '.join(lost[:3])}{', ...' if len(lost) > 3 else ''})",
                         "build log", None)
        if lost and blog.dla_candidates is not None and blog.dla_candidates[0] < blog.dla_candidates[1]:
            # TensorRT says some DLA candidate subgraphs were not offloaded: a layer asked on the DLA
            # that no line places may have been in one of them (on the GPU now), so never the request
            done, of = blog.dla_candidates
            return Known(None, False, f"TensorRT offloaded only {done} of {of} DLA candidate subgraph(s) ('Number of "
                         f"DLA node candidates offloaded : {done} out of {of}') and the build log places "
                         f"{len(lost)} layer(s) asked on the DLA nowhere ({', '.join(lost[:3])}"
                         f"{', ...' if len(lost) > 3 else ''}): they may have run on the GPU", "build log", loadables)
        inside = [n for n, d in from_log.items() if d == target and predicted[n] != "GPU" and n in loc.range_interior]
        if inside and (from_ins is None or unnamed_gpu) and blog.dla_candidates is not None \
                and blog.dla_candidates[0] < blog.dla_candidates[1]:
            # a candidate TensorRT did not offload went to the GPU without a word ("layers that cannot run
            # on DLA silently fall back", TensorRT's DLA docs: GPU fallback mode); its layers may lie between
            # the ends of an offloaded {ForeignNode[A...B]} range (a parallel branch), and the GPU report,
            # printed before the DLA compiles (corpus nvforum-337313-drive-orin-offloaded), cannot list them
            done, of = blog.dla_candidates
            return Known(None, False, f"TensorRT offloaded only {done} of {of} DLA candidate subgraph(s) ('Number of "
                         f"DLA node candidates offloaded : {done} out of {of}') and {len(inside)} layer(s) asked on "
                         f"the DLA ({_some(inside)}) are placed on it only by lying "
                         "between the ends of a {ForeignNode[A...B]} range, where a candidate that was not offloaded "
                         "may lie too (" + ("the engine's layer information, which would tell, was not compared)"
                         if from_ins is None else f"the engine's layer information reads them from the same range and "
                         f"has {len(unnamed_gpu)} GPU layer(s) naming no layer of the model, where that candidate may "
                         f"be: {_some(unnamed_gpu)})"), "build log" if from_ins is None else
                         "build log and engine inspector", loadables)
        if len(guessed) >= 3 and 2 * len(guessed) > len(predicted):
            return Known(None, False, f"the build log names only {len(predicted) - len(guessed)} of the "
                         f"{len(predicted)} layers ({', '.join(guessed[:3])}, ... are in no placement line): its "
                         "names do not match the model's", "build log", loadables)
        return Known(realized, True, None, "build log" if from_ins is None else "build log and engine inspector",
                     loadables, guessed, unchecked)
    assert from_ins is not None
    known = _from_inspector(predicted, from_ins, loadables)
    moved = [n for n, d in (known.realized or {}).items() if predicted[n] != "GPU" and d == "GPU"]
    unsaid = [n for n in moved if n not in loc.fallback]
    if known.known and not gpu_said and unsaid:
        # the inspector shows no DLA layer in a form read here, and no fallback warning names these
        # layers (TensorRT warns at WARNING of each layer it moves off the DLA): an unread form, not the GPU
        unread = ("the engine's layer information shows no DLA layer in a form placetune reads (the DLA loadable "
                  "may be in a form not read here)")
        warned = [n for n in moved if n in loc.fallback]
        if not warned:
            return Known(None, False, f"{unread} and reads the {len(unsaid)} layer(s) asked on {target} "
                         f"({_some(unsaid)}) as the GPU's, but the build log has no placement report and warns of no "
                         "fallback to the GPU (TensorRT warns of each)", "engine inspector", None)
        return Known(None, False, f"the build log has no placement report and its fallback warnings put "
                     f"{len(warned)} layer(s) on the GPU ({_some(warned)}), but of the other {len(unsaid)} layer(s) "
                     f"asked on {target} ({_some(unsaid)}) neither source says where they ran: {unread}, and no "
                     "fallback warning names them", "engine inspector", None)
    return known


def _fallen_in_range(predicted: Mapping[str, str], layers: Sequence[Any], dla_set: set[str], on_gpu: set[str],
                     resolver: NameResolver) -> tuple[list[str], list[str]]:
    """The interior of the inspector's DLA ranges (``{ForeignNode[A...B]}``, their ends left out): the layers
    asked on the DLA that a GPU engine layer computes, and those no engine layer names but the range."""
    interior: set[str] = set()
    for x in layers:
        ends = resolver.range_ends(_name(x)) if _name(x) in dla_set else None
        if ends is not None:
            end_layers = {resolver.model_layer(e) for e in ends}
            interior.update(m for m in resolver.model_layers(_name(x)) if m not in end_layers)
    # a GPU kernel that names the layer only in its Metadata (a Myelin kernel, named after no model layer) may have
    # fused the branch's other layers without a record of their own; an engine layer named after the model layer
    # itself is that layer alone, and the range's other layers keep what the range says
    by_metadata: set[str] = set()
    for x in layers:
        if _name(x) in dla_set:
            continue
        own = set(resolver.model_layers(_name(x))) if resolver.network_layers(_name(x)) is not None else set()
        by_metadata.update(n for n in metadata_nodes(x) if n in resolver.model_set and n not in own)
    asked = [n for n in predicted if n in interior and predicted[n] != "GPU"]
    fell = [n for n in asked if n in on_gpu and n in by_metadata]
    return fell, [n for n in asked if n not in on_gpu]


def _warned(blog: BuildLog, resolver: NameResolver, predicted: Mapping[str, str]) -> tuple[set[str], set[str]]:
    """Model layers asked on a DLA that a fallback warning of the build log names: itself (on the GPU
    whatever else says), and through a helper layer the parser made for it only (on the GPU unless a
    DLA loadable names it): the rule of :func:`~placetune.backends.tensorrt.buildlog.locate`."""
    own = {n for n in blog.fallbacks if n in resolver.model_set and predicted.get(n, "GPU") != "GPU"}
    helped = {m for n in blog.fallbacks if (m := resolver.model_layer(n)) is not None
              and predicted.get(m, "GPU") != "GPU"} - own
    return own, helped


def _some(names: Sequence[str], k: int = 3) -> str:
    """The first ``k`` names, joined, with ``...`` where there are more."""
    return ", ".join(names[:k]) + (", ..." if len(names) > k else "")


def _log_says_no_dla(blog: BuildLog) -> bool:
    """Whether the build log says positively that no layer ran on the DLA: a whole-network fallback,
    none of TensorRT's DLA candidates offloaded (``0 out of N``), or a DLA section naming no loadable."""
    if blog.dla_nodes:
        return False
    none_offloaded = blog.dla_candidates is not None and blog.dla_candidates[0] == 0
    return blog.all_gpu is not None or none_offloaded or blog.dla_section


def _model_layers(layer: object, resolver: NameResolver) -> list[str]:
    """The model layers an inspector layer stands for: those its name names, and those its
    ``Metadata`` names (TensorRT 10's Myelin kernels are named after no layer of the model). A
    reformat or copy the builder made stands for none, whatever its ``Metadata`` says (a copy may
    carry the metadata of the layer it feeds, which may have run elsewhere)."""
    if resolver.network_layers(_name(layer)) is None or _layer_type(layer) == "Reformat" \
            or ((_DLA_SYNC_ROW.search(_name(layer)) or _name(layer).startswith(_BUILDER_SHUFFLE))
                and _name(layer) not in resolver.model_set):
        return []
    found = set(resolver.model_layers(_name(layer)))
    found.update(n for n in metadata_nodes(layer) if n in resolver.model_set)
    kernel = _MYELIN_KERNEL.match(_name(layer))
    if not found and kernel:  # /fc/Gemm_myl9_2 (10.4: '.' written '_'), /model.0/conv/Conv_myl0_4
        base = kernel.group("base")
        hits = [n for n in resolver.model_names if n == base or n.replace(".", "_") == base.replace(".", "_")]
        found.update(hits[:1] if len(hits) == 1 else [])
    return [n for n in resolver.model_names if n in found]


def _from_inspector(predicted: Mapping[str, str], from_ins: Mapping[str, str | None], loadables: int | None) -> Known:
    """The inspector's placement alone. A layer it does not name keeps its requested device and is
    listed (``from_request``), never read as the GPU's; when it names none of the layers asked for
    the DLA (a loadable in a form placetune does not read would look so), or only a few of all the
    layers, the placement is unknown."""
    unnamed = [n for n, d in from_ins.items() if d is None]
    asked = [n for n, d in predicted.items() if d != "GPU"]
    if asked and all(from_ins[n] is None for n in asked):
        return Known(None, False, f"the engine's layer information names none of the {len(asked)} layer(s) asked "
                     f"for the DLA ({', '.join(asked[:3])}{', ...' if len(asked) > 3 else ''}): neither as a DLA "
                     "loadable in a form placetune reads nor as a GPU layer", "engine inspector", None)
    if len(unnamed) >= 3 and 2 * len(unnamed) > len(predicted):
        return Known(None, False, f"the engine's layer information names only {len(predicted) - len(unnamed)} of "
                     f"the {len(predicted)} layers ({', '.join(unnamed[:3])}, ... in no engine layer's name or "
                     "Metadata): its names do not match the model's", "engine inspector", loadables)
    realized = {n: d if d is not None else predicted[n] for n, d in from_ins.items()}
    return Known(realized, True, None, "engine inspector", loadables, unnamed)


def inspector_layers(text: object) -> list[Any] | None:
    """The ``Layers`` of the inspector's JSON text (None when absent or not JSON)."""
    if not text:
        return None
    try:
        doc = json.loads(str(text))
    except (ValueError, RecursionError):  # (RecursionError: nested too deeply)
        return None
    layers = doc.get("Layers") if isinstance(doc, dict) else None
    return list(layers) if isinstance(layers, list) else None


_WARNED: list[bool] = []  # a warning was logged in this process


def mark_known(extra: dict[str, Any], known: Known, blog: BuildLog) -> None:
    """Record in a measurement's ``extra`` whether its placement is known (``placement_known``,
    ``placement_source``, ``placement_unknown``, ``dla_loadables_known``, ``dla_candidates``,
    ``all_gpu_fallback``, ``placement_from_request``, ``placement_unchecked``); the first unknown one and the first unchecked
    one of the process are logged as a warning (at the first build of a run), later ones at debug level."""
    extra["placement_known"] = known.known
    extra["placement_source"] = known.source
    extra["dla_loadables_known"] = known.loadables is not None
    if blog.dla_candidates is not None:
        extra["dla_candidates"] = list(blog.dla_candidates)
    if blog.all_gpu is not None:
        extra["all_gpu_fallback"] = blog.all_gpu
    if known.from_request:
        extra["placement_from_request"] = known.from_request[:50]
    if known.unchecked:
        extra["placement_unchecked"] = known.unchecked
        say_unchecked(known.unchecked)
    if not known.known:
        extra["placement_unknown"] = known.reason
        say_unknown(str(known.reason), "unknown" if known.loadables is None else str(known.loadables))


def say_unknown(reason: str, loadables: str = "unknown") -> None:
    """Log that a measurement's realised placement is unknown: the first time in the process as a
    warning (at the first build of a run, whatever the mode), later ones at debug level."""
    (log.debug if _WARNED else log.warning)(
        "the realised placement is UNKNOWN: %s; this measurement records no realised placement "
        "(placement_known=False) and its DLA loadable count is %s", reason, loadables)
    _WARNED.append(True)


_UNCHECKED_SAID: list[bool] = []  # an unchecked placement was logged in this process


def say_unchecked(why: str) -> None:
    """Log that a measurement's realised placement rests on the build log alone (the layer
    information was read but could not check it): the first time in the process as a warning (at the
    first build of a run, whatever the mode), later ones at debug level."""
    (log.debug if _UNCHECKED_SAID else log.warning)(
        "the realised placement is UNCHECKED: %s; the build log alone places the layers (recorded as "
        "placement_unchecked; later ones are recorded only)", why)
    _UNCHECKED_SAID.append(True)
