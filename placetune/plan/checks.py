"""Checks of a plan document's numbers, file names and texts: what a build or a runtime would use as an
index, a file name inside the plan folder, a batch or a shape is an integer in range or a plain file
name; what a summary prints (notes, label) is one line of printable text, and a simulated plan stays
marked simulated.

:meth:`Plan.from_dict <placetune.plan.file.Plan.from_dict>` runs them on every plan it reads, so a
hand-edited ``plan.json`` with ``"index": "0/../../../x"``, ``"engine_file": "/etc/x"`` or
``"batch": 1e300`` is refused with one line before anything is built, written or loaded.
"""

from __future__ import annotations

import math
import unicodedata
from typing import Any

from placetune.errors import ConfigError, PlacementError
from placetune.files.names import file_name
from placetune.safetext import terminal_safe
from placetune.settings import check_trt_version
from placetune.validate import MAX_BATCH, integer

__all__ = ["check_engines", "check_numbers", "check_measured", "check_platform", "check_texts", "one_line",
           "PLAN_PRECISIONS"]

#: the precisions a plan is built in (``Settings``' own; a build in another would not be the plan measured)
PLAN_PRECISIONS = ("fp16", "int8", "fp32")


def check_engines(engines: list[dict[str, Any]], where: str) -> None:
    """The engine entries' numbers and file names: every value that becomes a file name or an
    index stays in range and inside the plan folder (``"index": "0/../../../x"`` is refused)."""
    n = len(engines)
    seen: set[int] = set()
    for i, e in enumerate(engines):
        what = f"{where}: engines[{i}]"
        index = integer(e.get("index", i), f"{what}.index", 0, n - 1)
        if index in seen:
            raise ConfigError(f"{what}.index {index} is listed twice")
        seen.add(index)
        if e.get("dla_core") is not None:
            integer(e["dla_core"], f"{what}.dla_core", 0, 1)
        if e.get("batch") is not None:
            integer(e["batch"], f"{what}.batch", 1, MAX_BATCH)
        preds = e.get("predecessors")
        if preds is not None and not isinstance(preds, list):  # -1 was a TypeError (not iterable)
            raise ConfigError(f"{what}.predecessors must be a list of engine indexes from 0 to {n - 1}")
        for p in preds or []:
            integer(p, f"{what}.predecessors", 0, n - 1)
        for key in ("onnx_file", "engine_file"):
            if e.get(key) is not None:
                file_name(e[key], f"{what}.{key}", hint="a plan's files are inside its folder")
        for key in ("layers", "dla_layers"):
            if e.get(key) is not None and not (isinstance(e[key], list) and all(isinstance(x, str) for x in e[key])):
                raise ConfigError(f"{what}.{key} must be a list of layer names")
        core, device = e.get("dla_core"), e.get("device")
        if core is not None and device is not None and device != f"DLA{core}":
            raise ConfigError(f"{what}.dla_core {core} contradicts its device {str(device)[:20]!r}: a DLA core "
                              "is the engine's own DLA device's (DLA0: 0, DLA1: 1), null on the GPU")
        for key in ("inputs", "outputs"):
            _tensors(e.get(key), f"{what}.{key}")
        parser = e.get("parser_layers")
        if parser is not None and not (isinstance(parser, dict) and all(
                isinstance(k, str) and v in ("GPU", "DLA") for k, v in parser.items())):
            raise ConfigError(f"{what}.parser_layers must be an object of layer name -> \"GPU\" or \"DLA\"")


def _tensors(items: Any, what: str) -> None:
    """An engine's inputs or outputs: objects with a ``name``; one in a format other than LINEAR names its
    TensorRT type too (the build asks the engine for that format and type)."""
    if items is None:
        return
    if not isinstance(items, list) or not all(isinstance(t, dict) and isinstance(t.get("name"), str) for t in items):
        raise ConfigError(f"{what} must be a list of objects with a \"name\" string")
    for t in items:
        fmt = t.get("format")
        if fmt is not None and not isinstance(fmt, str):
            raise ConfigError(f"{what}[].format must be a TensorRT format name such as \"LINEAR\", found {str(fmt)[:40]!r}")
        if fmt not in (None, "LINEAR") and not (isinstance(t.get("trt_dtype"), str) and t["trt_dtype"]):
            raise ConfigError(f"{what}[] {t['name'][:80]!r} in format {fmt[:20]!r} must name its \"trt_dtype\" "
                              "(e.g. \"HALF\", \"INT8\")")


def check_platform(doc: dict[str, Any], where: str) -> None:
    """The plan's precision is one placetune builds in, and its devices are its platform's: a plan for a
    one-DLA module (orin-nx-8gb) never runs a layer on DLA1, one for a module without a DLA (orin-nano)
    none on a DLA. A platform placetune does not ship (one a device profile registered) is not checked."""
    from placetune.hardware.platforms import BUILTIN_PLATFORMS, get_platform

    if doc["precision"] not in PLAN_PRECISIONS:
        raise ConfigError(f"{where}: \"precision\" must be one of {', '.join(PLAN_PRECISIONS)}, "
                          f"found {str(doc['precision'])[:40]!r}")
    platform = doc["platform"]
    if not isinstance(platform, str) or not platform:
        raise ConfigError(f"{where}: \"platform\" must be a platform name such as \"orin-agx\", "
                          f"found {str(platform)[:40]!r}")
    if platform not in BUILTIN_PLATFORMS:
        return
    have = get_platform(platform).devices
    used = [(f"layer {x.get('name')!r}'s {key} device", x.get(key)) for x in doc["layers"] for key in ("requested", "realized")]
    used += [(f"engines[{i}].device", e.get("device")) for i, e in enumerate(doc["engines"]) if e.get("device") is not None]
    for what, device in used:
        if device not in have:
            raise PlacementError(f"{where}: {what[:160]} is {device}, which platform {platform} does not have "
                                 f"(its devices: {', '.join(have)}): the plan was edited or is for another module")


def check_numbers(doc: dict[str, Any], model: dict[str, Any], where: str) -> None:
    """The input shapes and the settings a build or a runtime uses: integers in range."""
    renamed = model.get("renamed_layers")
    if renamed is not None and not (isinstance(renamed, dict)
                                    and all(isinstance(k, str) and isinstance(v, str) for k, v in renamed.items())):
        raise ConfigError(f"{where}: model.renamed_layers must be an object of layer name -> ONNX node name")
    shapes = model.get("input_shapes")
    if shapes is not None:
        if not isinstance(shapes, dict):
            raise ConfigError(f"{where}: model.input_shapes must be an object of input name -> dims")
        for name, dims in shapes.items():
            if not isinstance(dims, list):
                raise ConfigError(f"{where}: model.input_shapes[{name!r}] must be a list of dims")
            for d in dims:
                if d is not None:
                    integer(d, f"{where}: model.input_shapes[{name!r}] dims", 0, 2**31 - 1)
    settings = doc.get("settings")
    if settings is not None and not isinstance(settings, dict):
        raise ConfigError(f"{where}: \"settings\" must be an object")
    for key, (lo, hi) in {"frames_in_flight": (1, 64), "dla_core": (0, 1)}.items():
        if isinstance(settings, dict) and settings.get(key) is not None:
            integer(settings[key], f"{where}: settings.{key}", lo, hi)
    if isinstance(settings, dict) and settings.get("trt_version") is not None:  # (build.sh's flags follow it)
        try:
            check_trt_version(settings["trt_version"])
        except ConfigError as exc:
            raise ConfigError(f"{where}: settings.{exc}") from None
    cache = doc.get("calibration_cache")
    if cache is not None and not isinstance(cache, str):
        raise ConfigError(f"{where}: \"calibration_cache\" must be a file name or null")


def _events(items: Any, field: str, where: str) -> None:
    if items is None:
        return
    if not isinstance(items, list) or not all(isinstance(e, dict) for e in items):
        raise ConfigError(f"{where}: measured.{field} must be a list of objects")
    for e in items:
        for key in ("start_ms", "end_ms", "time_ms"):
            v = e.get(key)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                raise ConfigError(f"{where}: measured.{field}[].{key} must be a number, found {str(v)[:40]!r}")
        for key in ("frame", "index"):
            if e.get(key) is not None:
                integer(e[key], f"{where}: measured.{field}[].{key}", 0, 2**31 - 1)


def check_measured(measured: Any, where: str) -> None:
    """The figures a trace or a report draws: a timeline and segments of objects with numeric times and
    integer frames (a hand-edited ``"timeline": "x"`` was a traceback in ``placetune trace``)."""
    if measured is None:
        return
    if not isinstance(measured, dict):
        raise ConfigError(f"{where}: \"measured\" must be an object")
    status = measured.get("status")
    if status is not None and status != "ok":  # (export makes a plan of an ok measurement only)
        raise ConfigError(f"{where}: measured.status must be \"ok\" (a plan is made from an ok measurement only), "
                          f"found {str(status)[:40]!r}")
    _events(measured.get("timeline"), "timeline", where)
    _events(measured.get("segment_times_ms"), "segment_times_ms", where)
    streams = measured.get("streams")
    if streams is not None and not (
            isinstance(streams, dict) and isinstance(streams.get("streams"), int)
            and not isinstance(streams.get("streams"), bool) and streams["streams"] >= 1
            and isinstance(streams.get("per_stream_fps"), (int, float)) and not isinstance(streams["per_stream_fps"], bool)
            and math.isfinite(streams["per_stream_fps"])):
        raise ConfigError(f"{where}: measured.streams must be {{\"streams\": a whole number >= 1, "
                          f"\"per_stream_fps\": a number}}")
    lat = measured.get("latency_ms")
    if lat is not None and not (isinstance(lat, dict) and all(_figure(v) for v in lat.values())):
        raise ConfigError(f"{where}: measured.latency_ms must be an object of numbers (finite, 0 or more)")
    for key in _FIGURES:  # (a hand-edited "throughput_fps": "fast" was a ValueError named by type only)
        if not _figure(measured.get(key)):
            raise ConfigError(f"{where}: measured.{key} must be a finite number of 0 or more (or null), found "
                              f"{str(measured[key])[:40]!r}")


#: the figures of a measurement a summary prints (each a finite number of 0 or more, or null)
_FIGURES = ("throughput_fps", "energy_mj", "power_w", "energy_mj_per_sample", "period_ms", "gpu_time_ms")


def _figure(v: Any) -> bool:
    return v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0)


#: the most notes a plan holds, and the longest note, label or name field (a plan placetune writes has a
#: handful of notes of a few hundred characters: more is an edited file, kept off every terminal and report)
MAX_NOTES = 1000
MAX_TEXT = 4000


def _plain(value: Any, field: str, where: str) -> str:
    """``value`` when it is one line of text of at most :data:`MAX_TEXT` characters without control,
    format (bidi, zero-width) or separator characters."""
    if not isinstance(value, str):
        raise ConfigError(f"{where}: {field} must be a string, found {type(value).__name__}")
    if len(value) > MAX_TEXT:
        raise ConfigError(f"{where}: {field} is {len(value):,} characters long; at most {MAX_TEXT:,} are allowed")
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")), None)
    if bad is not None:
        raise ConfigError(f"{where}: {field} holds the control character U+{ord(bad):04X}; it must be one line "
                          "of printable text")
    return value


def one_line(text: Any) -> str:
    """``text`` as a plan stores a note or a label: one line of printable text of at most :data:`MAX_TEXT`
    characters (control and format characters escaped, line breaks and tabs made spaces), which
    :func:`check_texts` accepts."""
    text = terminal_safe(str(text)).replace("\r", " ").replace("\n", " ").replace("\t", " ")
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 3] + "..."


def check_texts(doc: dict[str, Any], where: str) -> None:
    """The plan's texts and flags that a summary, a report or a build prints: ``simulated`` a boolean (true
    for a plan of the simulated Jetson, whose ``label`` then says SIMULATED), ``label``, ``objective`` and
    ``backend``, ``platform``, ``calibration_cache`` and the model's ``name`` one line of text, ``notes`` a
    list of such lines, and ``versions``, ``source`` and
    ``baselines`` objects (a hand-edited ``"label": "measured on an AGX Orin"`` on a simulated plan, or
    ``"notes": "abc"`` read as three notes, were taken as they were)."""
    simulated = doc["simulated"]
    if not isinstance(simulated, bool):
        raise ConfigError(f"{where}: \"simulated\" must be true or false, found {str(simulated)[:40]!r}")
    for key in ("label", "objective", "backend", "platform", "calibration_cache"):
        if doc.get(key) is not None:
            _plain(doc[key], f"\"{key}\"", where)
    model = doc.get("model")
    if isinstance(model, dict) and model.get("name") is not None:  # (the summary's first line names it)
        _plain(model["name"], "model.name", where)
    if doc.get("backend") == "simulate" and not simulated:
        raise ConfigError(f"{where}: \"simulated\" is false but its backend is the simulated Jetson (\"simulate\"): "
                          "a simulated plan stays marked simulated; export it again")
    label = doc.get("label") or ""
    if simulated and label and not label.startswith("SIMULATED"):
        raise ConfigError(f"{where}: \"label\" of a simulated plan must start with \"SIMULATED\" (it is printed "
                          f"wherever the plan's figures are), found {label[:60]!r}")
    notes = doc.get("notes")
    if notes is not None:
        if not isinstance(notes, list):
            raise ConfigError(f"{where}: \"notes\" must be a list of strings, found {type(notes).__name__}")
        if len(notes) > MAX_NOTES:
            raise ConfigError(f"{where}: \"notes\" holds {len(notes):,} notes; at most {MAX_NOTES:,} are allowed")
        for i, note in enumerate(notes):
            _plain(note, f"notes[{i}]", where)
    for key in ("versions", "source", "baselines"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ConfigError(f"{where}: \"{key}\" must be an object, found {type(doc[key]).__name__}")


def check_baselines(baselines: Any, where: str) -> None:
    """The figures of each baseline a summary and a headline print (``all-gpu``, ``all-dla0``...): an object
    whose ``latency_ms`` and ``gains`` are objects of figures and whose throughput, energy, power, ``gain``
    and ``speedup`` are figures, each a finite number of 0 or more or null (a hand-edited ``"gain": "fast"``
    or ``"gain": -3`` was read and shown as the plan's gain)."""
    if not isinstance(baselines, dict):
        return  # (check_texts names a baselines that is not an object)
    for label, fig in baselines.items():
        name = f"baselines.{str(label)[:40]}"
        if not isinstance(fig, dict):
            raise ConfigError(f"{where}: {name} must be an object of figures, found {type(fig).__name__}")
        for key in ("latency_ms", "gains"):
            if fig.get(key) is not None and not (isinstance(fig[key], dict) and all(map(_figure, fig[key].values()))):
                raise ConfigError(f"{where}: {name}.{key} must be an object of numbers (finite, 0 or more)")
        for key in (*_FIGURES, "gain", "speedup"):
            if not _figure(fig.get(key)):
                raise ConfigError(f"{where}: {name}.{key} must be a finite number of 0 or more (or null), found "
                                  f"{str(fig[key])[:40]!r}")
