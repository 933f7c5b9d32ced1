"""A plan as a self-contained deployment folder: ``build.sh``, the ONNX files, ``plan.json`` and ``README.txt``.

``placetune export --study NAME --format trtexec -o DIR`` writes it (and
:func:`write_plan_folder` from Python). The folder holds everything needed to build the
plan's engines on the Jetson with ``trtexec``:

* ``model.onnx`` (engine and replicas plans: the model with its weights; a zoo model is
  written as ``placetune zoo export`` writes it) or one ``model.seg<i>.onnx`` per pipeline
  segment, cut from the model with its weights by :func:`~placetune.placement.cut.cut`;
* ``build.sh``: one ``trtexec`` build per engine, run from the folder itself, with the
  precision / DLA / format flags the plan was measured with (see
  :func:`~placetune.plan.trtexec.trtexec_commands`);
* ``plan.json``: the plan, each engine naming its ONNX and engine files and its boundary
  tensors (name, shape, dtype);
* ``calibration.cache`` when an INT8 plan was exported with a calibration cache;
* ``README.txt``: how to build, time each engine and run the whole plan.

Example:
    >>> import placetune as pt
    >>> from placetune.plan.export import export_plan
    >>> ev = pt.Evaluator("seed-block", "orin-agx", mode="engine")
    >>> _ = ev.baseline()
    >>> out = write_plan_folder(export_plan(ev.store, ev.study_name, model=ev.model), ev.model, "/tmp/d")  # doctest: +SKIP
    >>> sorted(p.name for p in out.files)  # doctest: +SKIP
    ['README.txt', 'build.sh', 'model.onnx', 'plan.json']
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
from google.protobuf.message import EncodeError

from placetune.errors import ConfigError, ModelError
from placetune.files.folder import OutputFolder
from placetune.files.read import check_regular, read_bytes
from placetune.hardware.power_modes import modes_of
from placetune.safetext import shown
from placetune.runtime import standalone_sources
from placetune.backends.onnx_prep import convert_to_fp16
from placetune.plan.trtexec import one_line, static_batch, target_version, trtexec_commands
from placetune.plan.trtexec import engine_files as _engine_files
from placetune.wording import plural
from placetune.model.misreads import old_parser_misread
from placetune.model.onnx_io import load_with_weights
from placetune.model.source import load_source, with_batch
from placetune.placement.cut import cut
from placetune.plan.file import Plan
from placetune.plan.deploy_notes import (BUILD_STOP, DEEPSTREAM_FILE, DIRECT_IO_ENFORCED_BEFORE, build_stop_note,
                                         deepstream_config, install_line, deepstream_refusal, direct_io_blocks, io_lines, target_lines, verify_lines)

if TYPE_CHECKING:
    from placetune.model.model import Model
    from placetune.plan.file import Plan

__all__ = ["CALIBRATION_FILE", "NVTX_SETUP", "NVTX_VERBOSITY", "PlanFolder", "write_plan_folder"]

#: The sub-folder the standalone runtime is written to (:func:`placetune.runtime.write_standalone`).
RUNTIME_DIR = "runtime"

#: The name a calibration cache is copied to inside the folder.
CALIBRATION_FILE = "calibration.cache"
_STEM = "model"

_PREAMBLE = """\
#!/bin/sh
# Builds every engine of this placetune plan with trtexec: `sh build.sh`.
# Set TRTEXEC=/path/to/trtexec when trtexec is not on PATH (JetPack installs it in /usr/src/tensorrt/bin).
set -e
cd "$(dirname "$0")"
if [ -z "${TRTEXEC:-}" ]; then
  if command -v trtexec >/dev/null 2>&1; then
    TRTEXEC=trtexec
  elif [ -x /usr/src/tensorrt/bin/trtexec ]; then
    TRTEXEC=/usr/src/tensorrt/bin/trtexec
  else
    echo "build.sh: trtexec not found: put it on PATH or set TRTEXEC=/path/to/trtexec" >&2
    exit 127
  fi
fi
"""


@dataclass
class PlanFolder:
    """What :func:`write_plan_folder` wrote.

    Attributes:
        directory: the folder.
        plan: the plan as written to ``plan.json`` (engines with files and boundary tensors).
        files: every file written, ``build.sh`` first.
        engines: the engine files ``build.sh`` writes (relative to the folder).
        replaced: the earlier plan this folder held when it was another study's or measurement's
            (``study 'a', measurement 3``), else None.
    """

    directory: Path
    plan: "Plan"
    files: list[Path] = field(default_factory=list)
    engines: list[str] = field(default_factory=list)
    replaced: str | None = None


#: the NVTX markers placetune times every engine context with (trtexec's default ``--profilingVerbosity``,
#: samples/common/sampleOptions.h release/8.5-11.1), and how an application sets them on a context of the
#: DETAILED engines ``placetune build`` writes (their NVTX markers default to the build's verbosity, which
#: "will generally increase latency in enqueueV3()", NvInferRuntime.h release/10.3:4303-4310)
NVTX_VERBOSITY = "LAYER_NAMES_ONLY"
NVTX_SETUP = {"python": "context.nvtx_verbosity = tensorrt.ProfilingVerbosity.LAYER_NAMES_ONLY",
              "c++": "context->setNvtxVerbosity(nvinfer1::ProfilingVerbosity::kLAYER_NAMES_ONLY);"}


def engine_files(plan: "Plan", engine: dict[str, Any]) -> tuple[str, str]:
    """``(onnx file, engine file)`` of one of the plan's engines inside the folder."""
    return _engine_files(plan.mode, engine, _STEM, static_batch(plan))


def _load_source(model: "Model", source: "onnx.ModelProto | str | os.PathLike[str] | None") -> onnx.ModelProto:
    if source is None:
        return load_source(model)
    if isinstance(source, onnx.ModelProto):
        return source
    try:
        return load_with_weights(source)
    except ModelError as exc:
        raise ModelError(f"--onnx: cannot read it with its weights ({exc})") from None


def _save_proto(folder: "OutputFolder", proto: onnx.ModelProto, name: str) -> None:
    """Write a model into the folder; over protobuf's 2 GiB its weights go to ``<name>.data`` beside it."""
    try:
        data = proto.SerializeToString()
    except (ValueError, EncodeError):  # over protobuf's 2 GiB: the weights go to a data file beside it
        with tempfile.TemporaryDirectory(prefix="placetune-folder-") as tmp:
            onnx.save(proto, str(Path(tmp) / name), save_as_external_data=True, location=name + ".data")
            folder.copy_in(name, Path(tmp) / name)
            folder.copy_in(name + ".data", Path(tmp) / (name + ".data"))
        return
    folder.write(name, data)


def _script(plan: "Plan", trt_version: str | None, calib: str | None, proto: onnx.ModelProto | None = None) -> str:
    lines = trtexec_commands(plan, f"{_STEM}.onnx", trt_version, build_only=True, calib=calib, folder=True)
    body = [('"$TRTEXEC"' + line[len("trtexec"):]) if line.startswith("trtexec ") else line for line in lines]
    built = " ".join(engine_files(plan, e)[1] for e in plan.engines)
    if _jetpack5(plan, trt_version) and _mixed(plan):
        # trtexec 8.5 refuses the unknown --layerDeviceTypes: stop before building any engine of the plan
        body = [f"echo 'build.sh: {_NO_LAYER_DEVICE_TYPES}' >&2", "exit 6", *body]
    blocked = direct_io_blocks(plan, trt_version, proto)
    if blocked and _target(plan, trt_version) < DIRECT_IO_ENFORCED_BEFORE:
        # trtexec without --allowGPUFallback sets DIRECT_IO: the build fails at the first such engine
        body = [f"echo {shlex.quote('build.sh: ' + _direct_io_stop(blocked))} >&2", "exit 6", *body]
    elif blocked:
        body = [one_line(f"# WARNING: {_direct_io_stop(blocked)} (TensorRT deprecated DIRECT_IO in 10.7; whether "
                          "this TensorRT still fails such a build was not checked)"), *body]
    return _PREAMBLE + "\n".join([*_parser_lines(plan, trt_version, proto), *body]) + f"\necho 'built: {built}'\n"


def _parser_lines(plan: "Plan", trt_version: str | None, proto: onnx.ModelProto | None) -> list[str]:
    """build.sh's stop (exit 3) when the target TensorRT's ONNX parser would build another network than the
    model (:func:`~placetune.model.misreads.old_parser_misread`), else a comment naming the oldest trtexec
    that reads the model as written. The script never asks trtexec its version: a target-10 script run by
    hand with trtexec 8.5 is warned against by that comment only."""
    why = old_parser_misread(proto, target_version(plan, trt_version))
    if why:
        return [f"echo {shlex.quote('build.sh: ' + why)} >&2", "exit 3"]
    old = old_parser_misread(proto, "8.6")
    return [f"# needs trtexec of TensorRT 10 or later (TensorRT 8.5 and 8.6 build another network): "
            f"{one_line(old)}"] if old else []


#: why build.sh cannot build a plan with single DLA layers on TensorRT 8.5 (sampleOptions.cpp: the
#: option first appears in release/8.6), and what to do
_NO_LAYER_DEVICE_TYPES = ("the trtexec of TensorRT 8.5 has no --layerDeviceTypes (added in 8.6) and this plan puts "
                          "single layers of an engine on a DLA: build it with placetune build . (README.txt, step 1)")


def _direct_io_stop(blocked: list[str]) -> str:
    """Why trtexec cannot build a plan with GPU fallback off as it was measured, and what to do."""
    more = f" (+{len(blocked) - 3} more)" if len(blocked) > 3 else ""
    return ("this plan has GPU fallback off, so build.sh passes no --allowGPUFallback and trtexec then sets "
            "DIRECT_IO (no GPU reformat at a network input or output, sampleEngines.cpp); a DLA layer reads or "
            f"writes {'; '.join(blocked[:3])}{more}, which needs the GPU reformat the plan was measured with, so "
            "trtexec fails that build: build with placetune build . (README.txt), which builds through the "
            "TensorRT API as measured")


def _timed_by(plan: "Plan") -> str:
    """What timed the plan's figures, said truthfully: only the tensorrt backend runs this runtime."""
    how = "(one CUDA stream per engine, events between them)"
    if plan.simulated:
        return (f"It runs the plan {how}; this plan's figures are SIMULATED (placetune's model of the "
                "Jetson): nothing has timed it yet, time it with the runtime's stream below:")
    if plan.backend == "tensorrt":
        return f"It is the runtime placetune's tensorrt backend timed the plan with {how}:"
    return f"It runs the plan {how}; the plan's figures come from the {plan.backend or 'unknown'} backend:"


def _input_lines(plan: "Plan") -> list[str]:
    """The runtime's one inference with the network's own inputs: each one's name, shape and type as the
    first engine that reads it declares it (the runtime copies an array byte for byte)."""
    shapes = plan.model.get("input_shapes") or {}
    declared = {t.get("name"): t for e in plan.engines for t in e.get("inputs") or []}
    names, lines = [], []
    for i, (name, dims) in enumerate(shapes.items()):
        var = "x" if len(shapes) == 1 else f"x{i}"
        dtype = str((declared.get(name) or {}).get("dtype") or "float32")
        lines.append(f"     {var} = numpy.zeros(({', '.join(map(str, dims))}{',' if len(dims) == 1 else ''}), "
                     f"numpy.{dtype})   # {name}: your data, as the network takes it")
        names.append(f"{json.dumps(name)}: {var}")
    if not lines:  # a plan without its inputs recorded: the shape of the call
        return ["     outputs = rt({\"input name\": array})                     # one inference"]
    return ["     import numpy", *lines, f"     outputs = rt({{{', '.join(names)}}})   # one inference"]


def _target(plan: "Plan", trt_version: str | None) -> tuple[int, ...]:
    """The major.minor of the TensorRT the plan's build.sh is written for (``target_version``)."""
    return tuple(int(x) for x in re.findall(r"\d+", target_version(plan, trt_version))[:2])


def _jetpack5(plan: "Plan", trt_version: str | None) -> bool:
    """Whether the plan targets TensorRT 8.5 (JetPack 5.1: system Python 3.8, trtexec without
    ``--layerDeviceTypes``)."""
    return _target(plan, trt_version) == (8, 5)


def _mixed(plan: "Plan") -> bool:
    """Whether an engine puts some of its layers on a DLA and others on the GPU (trtexec needs
    ``--layerDeviceTypes`` to build it)."""
    return any(e.get("dla_layers") and set(e.get("layers") or []) - set(e.get("dla_layers") or [])
               for e in plan.engines)


def _power_mode_lines(plan: "Plan") -> list[str]:
    """The power mode the plan's figures are of, and the nvpmodel command that sets it (timed in another
    mode, the engines give other figures)."""
    mode = plan.settings.get("power_mode")
    if not mode:
        return []
    table = modes_of(plan.platform, str(mode))
    found = table.mode(str(mode)) if table is not None else None
    how = f"sudo nvpmodel -m {found.id}" if found is not None else "sudo nvpmodel -m <its id in /etc/nvpmodel.conf>"
    if table is not None and table.module.endswith("-super"):
        how += ", with JetPack 6.2's Super nvpmodel.conf"
    if not plan.simulated and not (plan.versions or {}).get("power_mode"):  # the night never read the board's mode
        return [f"   The plan's figures are recorded under the study's power mode {mode}, which was never read from "
                f"the board during the night (see the plan's notes): time the engines in {mode} ({how}; "
                "`sudo nvpmodel -q` names the board's mode) and compare before trusting them."]
    return [f"   The plan's figures are of power mode {mode}: time the engines in it ({how}; "
            "`sudo nvpmodel -q` names the board's mode)."]


def _runtime_frames_in_flight(plan: "Plan") -> int:
    """The frames in flight the runtime's ``stream`` keeps by default for ``plan``: a pipeline's own, as it
    was timed; 1 for an engine or replicas plan (each of its engines runs one frame at a time)."""
    if plan.mode != "pipeline":
        return 1
    return max(1, int((plan.measured or {}).get("frames_in_flight") or plan.settings.get("frames_in_flight") or 1))


def _readme(plan: "Plan", calib: str | None, trt_version: str | None = None,
            proto: onnx.ModelProto | None = None) -> str:
    name = one_line(str(plan.model.get("name")))
    jp5 = _jetpack5(plan, trt_version)
    src = plan.source or {}
    lines = [f"placetune plan: {name} on {plan.platform}, {plan.mode} mode, {plan.precision}, batch {plan.batch}",
             one_line(f"study {src.get('study')}, measurement {src.get('measurement_id')}"
                       + (f" (Optuna trial {src['trial_number']})" if src.get("trial_number") is not None else "")
                       + f", objective {plan.objective}")]
    lines += [one_line(x) for x in plan.summary().splitlines()[1:]]
    lines += ["", *target_lines(plan, trt_version)]
    lines += ["", "Files", "  plan.json          the plan: each layer's device, the engines with their ONNX and engine "
              "files and boundary tensors, the figures", "  build.sh           builds every engine with trtexec"]
    if deepstream_refusal(plan) is None:
        lines.append(f"  {DEEPSTREAM_FILE:18s} DeepStream nvinfer keys that load the built engine (read its comments)")
    lines += io_lines(plan, trt_version, [engine_files(plan, e) for e in plan.engines])
    if calib:
        lines.append(f"  {calib:18s} the INT8 calibration cache build.sh passes as --calib")
    lines += ["", "1. Build, on the Jetson, with the TensorRT the plan targets:",
              "     sh build.sh",
              "   (TRTEXEC=/usr/src/tensorrt/bin/trtexec sh build.sh when trtexec is not on PATH)"]
    misread = old_parser_misread(proto, target_version(plan, trt_version))
    if misread:
        lines += ["   build.sh stops before building anything (exit 3), and so does `placetune build`: the ONNX parser",
                  f"   of the TensorRT this plan is for would build another network than the model: {one_line(misread)}"]
    if jp5 and _mixed(plan):
        lines += ["   TensorRT 8.5 (JetPack 5.1): its trtexec has no --layerDeviceTypes (added in 8.6) and this plan puts",
                  "   single layers of an engine on a DLA, so build.sh stops before building anything: build with",
                  "   `placetune build` instead (below), which sets each layer's device through the TensorRT API."]
    blocked = direct_io_blocks(plan, trt_version, proto)
    if blocked:
        stops = _target(plan, trt_version) < DIRECT_IO_ENFORCED_BEFORE
        lines += ["   GPU fallback is off in this plan: build.sh passes no --allowGPUFallback, and trtexec then sets",
                  "   DIRECT_IO (no GPU reformat at a network input or output). A DLA layer reads or writes",
                  *[f"     {one_line(b)}" for b in blocked[:5]],
                  "   in a format the DLA cannot use, which needs the GPU reformat the plan was measured with; so",
                  ("   build.sh stops before building anything: build with `placetune build` instead (below)." if stops
                   else "   if trtexec fails that build, build with `placetune build` instead (below).")]
    if plan.precision == "int8" and not calib and plan.int8_ranges != "qdq":
        lines.append("   INT8 ranges are PLACEHOLDERS (no calibration cache, no Q/DQ nodes): accuracy is NOT preserved;"
                     " export with --calibration-cache FILE")
        lines.append("   (how to make one: placetune's docs/jetson.md, INT8 ranges)")
    lines += ["", "2. Time each engine:"]
    for e in plan.engines:
        core = e.get("dla_core")
        dla = f" --useDLACore={core}" if core is not None else ""
        lines.append(f"     trtexec --loadEngine={engine_files(plan, e)[1]}{dla}")
    lines.append("   (an engine with DLA layers runs on the DLA core given by --useDLACore)")
    lines += _power_mode_lines(plan)
    lines += ["   " + x for x in verify_lines(plan, trt_version)]
    lines += ["", "3. Run the whole plan:"]
    if plan.mode == "engine":
        lines.append(f"   load {_STEM}.engine in the application like any TensorRT engine (one execution context"
                     + (f", its runtime on DLA core {plan.engines[0].get('dla_core')})." if plan.engines[0].get("dla_core")
                        is not None else ")."))
        fif = (plan.measured or {}).get("frames_in_flight") or plan.settings.get("frames_in_flight") or 1
        lines.append(f"   The plan was {'simulated' if plan.simulated else 'measured'} with {plural(int(fif), 'frame')}"
                     " in flight on one CUDA stream.")
    elif plan.mode == "pipeline":
        fif = (plan.measured or {}).get("frames_in_flight") or plan.settings.get("frames_in_flight") or 1
        lines += ["   the segment engines form a DAG: segment i starts when the segments it waits for are done and",
                  "   reads the tensors they output (plan.json: engines[i].inputs / outputs, by tensor name).",
                  "   Give each engine its own CUDA stream and execution context, record an event when a segment",
                  "   ends and make its successors' streams wait on it; DLA engines need their core set on the",
                  "   runtime (IRuntime.DLA_core) before deserializing.",
                  f"   The plan was {'simulated' if plan.simulated else 'measured'} with {plural(int(fif), 'frame')} in "
                  "flight: start frame n+1 on a segment while",
                  "   later segments still work on frame n, one set of boundary buffers per frame in flight."]
        for e in plan.engines:
            preds = ", ".join(map(str, e.get("predecessors") or [])) or "-"
            lines.append(f"     segment {e.get('index')} ({e.get('device')}): waits for {preds}")
    else:
        lines += ["   load one engine per device (its own runtime, DLA core and stream) and send each batch to the",
                  "   next free replica; each replica runs the whole network:"]
        for e in plan.engines:
            lines.append(f"     {engine_files(plan, e)[1]}: {e.get('device')}, batch {e.get('batch')}")
    ds = deepstream_refusal(plan)
    lines += [f"   DeepStream: {DEEPSTREAM_FILE} holds the nvinfer keys for the built engine."] if ds is None else \
        [f"   {ds}"]
    lines += ["", "   NVTX markers: the engines were timed with TensorRT's LAYER_NAMES_ONLY NVTX markers, as trtexec",
              "   times (its default --profilingVerbosity). build.sh passes no --profilingVerbosity, so its engines",
              "   are built at LAYER_NAMES_ONLY and a context runs with those markers by default. `placetune build`",
              "   builds DETAILED engines (it reads each engine's layer information to check the placement), and a",
              "   context's NVTX markers default to the build's verbosity, which TensorRT says \"will generally",
              "   increase latency in enqueueV3()\": on every execution context of those engines set, as timed,",
              f"     {NVTX_SETUP['python']}",
              f"     {NVTX_SETUP['c++']}",
              "   (build.json says each engine's verbosity; the line is harmless on build.sh's engines; trtexec",
              "   --loadEngine (step 2) and placetune's runtime (step 4) set it on every context themselves).",
              ]
    lines += ["", f"4. Or run the plan with placetune's runtime, in {RUNTIME_DIR}/: no install, any Python >= 3.8 with",
              "   numpy, TensorRT and one CUDA binding (cuda-python or pycuda), JetPack 5.1's system Python included.",
              "   " + _timed_by(plan),
              "     import sys; sys.path.insert(0, \"this folder/runtime\")",
              "     import placetune_runtime",
              "     rt = placetune_runtime.load(\"this folder\")              # after the engines are built (step 1)",
              *_input_lines(plan),
              f"     for outputs in rt.stream(batches, frames_in_flight={_runtime_frames_in_flight(plan)}):"
              "  # steady-state throughput, in order",
              "         ...",
              "", "Or with placetune on the Jetson. It is not on a package index: install it from a clone of its"]
    if jp5:
        lines += ["repository. JetPack 5.1's system Python is 3.8 and placetune needs 3.10 or newer: placetune runs",
                  "from a Python 3.11 that uv installs, its TensorRT worker on the system Python (placetune's README,",
                  "section JetPack 5.1, has every step, pycuda for /usr/bin/python3 included):",
                  "     python3 -m pip install --user uv && ~/.local/bin/uv python install 3.11",
                  "     ~/.local/bin/uv venv -p 3.11 ~/placetune-venv && . ~/placetune-venv/bin/activate",
                  "     uv pip install -e /path/to/placetune   # the clone",
                  "     placetune build . --worker-python /usr/bin/python3   # every engine through TensorRT 8.5"]
    else:
        lines += ["repository, in a venv that sees JetPack's TensorRT bindings:",
                  "     python3 -m venv --system-site-packages ~/placetune-venv && . ~/placetune-venv/bin/activate",
                  f"     {install_line(plan, trt_version)}",
                  "     placetune build .     # builds every engine through TensorRT, reports layers it placed elsewhere"]
    lines += ["   and in an application of that install (Python 3.10 or newer), the same runtime as a module:",
              "     import placetune.runtime",
              "     rt = placetune.runtime.load(\"this folder\")"]
    return "\n".join(lines) + "\n"


def check_calibration_cache(path: str | os.PathLike[str], tensors: "set[str]", whose: str) -> None:
    """Refuse a file that is not a TensorRT calibration cache, or whose ranges name none of ``tensors``
    (the cache of another model: every range TensorRT looks up would be missing).

    A cache is TensorRT's ``IInt8Calibrator.write_calibration_cache`` text: a first line
    ``TRT-<version>-<calibrator>`` (``TRT-8601-EntropyCalibration2``), then ``tensor: hex`` lines.
    """
    text = read_bytes(path, "calibration cache").decode("utf-8", "replace").splitlines()
    if not text or not re.fullmatch(r"TRT-\d+-\w+", text[0].strip()):
        raise ConfigError(f"calibration cache {shown(str(path))}: not a TensorRT calibration cache (its first line "
                          "is TRT-<version>-<calibrator>, e.g. TRT-8601-EntropyCalibration2, as TensorRT's INT8 "
                          "calibrators write it)")
    names = [line.rpartition(":")[0].strip() for line in text[1:] if ":" in line]
    if names and not tensors.intersection(names):
        raise ConfigError(f"calibration cache {shown(str(path))}: its {plural(len(names), 'range')} name none of "
                          f"{shown(whose)}'s tensors (first: {shown(names[0][:80])}): a cache of another model "
                          "or of an export with other tensor names; calibrate this model's file")


def write_plan_folder(
    plan: "Plan",
    model: "Model",
    directory: str | os.PathLike[str],
    *,
    source: "onnx.ModelProto | str | os.PathLike[str] | None" = None,
    calibration_cache: str | os.PathLike[str] | None = None,
    trt_version: str | None = None,
) -> PlanFolder:
    """Write the plan's deployment folder: ``build.sh``, the ONNX file(s), ``plan.json``, ``README.txt``.

    Args:
        plan: the plan (:func:`~placetune.plan.export.export_plan`).
        model: the plan's model (checked against the plan's hash).
        directory: the folder (created; files placetune wrote there before, unchanged since, are
            replaced, the engines and report of an earlier build removed; any other file in the
            way is refused: see :class:`~placetune.files.folder.OutputFolder`).
        source: the ONNX model with its weights (a proto or a file, ``.onnx.gz`` too); default:
            the model's file, or its zoo network with deterministic weights.
        calibration_cache: an INT8 plan's TensorRT calibration cache: copied into the folder as
            ``calibration.cache`` and passed to trtexec as ``--calib``.
        trt_version: the target TensorRT (default: the plan's).

    Returns:
        The :class:`PlanFolder`.

    Raises:
        ConfigError: the folder is a file, cannot be written, is not empty and not a plan folder,
            or holds a file in the way that placetune did not write; a calibration cache that is
            unreadable, for a plan that is not INT8, or for TensorRT 11 (no ``--calib``).
        ModelError: the model is not the plan's, or the source does not match it.
    """
    # the folder guard: a non-empty folder must be one placetune wrote, and every file it would
    # write (checked below, before anything is written) must be absent or placetune's, unchanged
    folder = OutputFolder(directory, "plan folder", must_be_ours=True)
    out = folder.directory
    p = Plan.from_dict(json.loads(plan.to_json()))  # a copy the folder's facts are written into
    p.check_model(model)
    calib = None
    if calibration_cache is not None:
        check_regular(calibration_cache, "calibration cache")
        check_calibration_cache(calibration_cache, set(model.input_shapes) | {t.name for layer in model
                                                                            for t in layer.outputs}, model.name)
        calib = CALIBRATION_FILE
        p.int8_ranges, p.calibration_cache = "calibration-cache", calib
        p.notes = [n for n in p.notes if not n.startswith("INT8 ranges are PLACEHOLDERS")]
    proto = _load_source(model, source)
    p.notes = [n for n in p.notes if not n.startswith(BUILD_STOP)]  # the plan's target, or --trt-version's
    stop = build_stop_note(proto, target_version(p, trt_version))
    if stop:
        p.notes.append(stop)
    script = _script(p, trt_version, calib, proto)  # refuses what trtexec cannot build before anything is written
    deepstream = deepstream_config(p, trt_version, engine_files(p, p.engines[0])[1], proto) if p.engines else None
    names = ["build.sh", "plan.json", "README.txt", "build.json", DEEPSTREAM_FILE, *([calib] if calib else [])]
    stale: list[str] = ["build.json", DEEPSTREAM_FILE]  # an earlier build's report and engines belong to an earlier plan
    for eng in p.engines:
        onnx_file, engine_file = engine_files(p, eng)
        names += [onnx_file, onnx_file + ".data", engine_file, engine_file + ".json"]
        stale += [engine_file, engine_file + ".json"]
    folder.check(names)
    runtime = OutputFolder(out / RUNTIME_DIR, "plan folder's runtime")  # guarded as the plan folder is
    runtime.check([name for name, _ in standalone_sources()])
    # a strongly typed TensorRT (11 on) takes the precision from the model's tensor types, and its trtexec
    # has no --fp16: an fp16 plan's ONNX files are written in FP16, as the backends and `placetune build` build
    strongly = _target(p, trt_version) >= (11,) and p.precision == "fp16"
    typed = convert_to_fp16 if strongly else (lambda m: m)
    files = [out / "build.sh"]
    written: list[tuple[dict[str, Any], str]] = []
    replaced = _earlier_plan(out / "plan.json", p)
    folder.remove_all(stale)
    if p.mode == "pipeline":
        segments = cut(model, p.placement(model), source=proto)
        by_index = {int(e.get("index", i)): e for i, e in enumerate(p.engines)}
        if sorted(by_index) != [s.index for s in segments]:
            raise ModelError(f"the plan lists segments {sorted(by_index)}, its placement cuts into "
                             f"{[s.index for s in segments]}: export the plan again")
        for s in segments:
            eng = by_index[s.index]
            # the cut's own tensor list, keeping the TensorRT type and format the plan gave each
            known = {t.get("name"): t for key in ("inputs", "outputs") for t in eng.get(key) or []
                     if isinstance(t, dict)}
            for key, tensors in s.boundary().items():
                eng[key] = [{**t, **{k: known[t["name"]][k] for k in ("trt_dtype", "format")
                                     if k in known.get(t["name"], {})}} for t in tensors]
            name = engine_files(p, eng)[0]
            folder.write(name, typed(s.proto).SerializeToString(deterministic=True))
            written.append((eng, name))
    else:
        for eng in p.engines:
            name = engine_files(p, eng)[0]
            if name not in {w for _, w in written}:
                # the model, or a replica's own batch of a static model
                own = name != f"{_STEM}.onnx"
                _save_proto(folder, typed(with_batch(model, int(eng["batch"]), proto) if own else proto), name)
            written.append((eng, name))
    for eng in p.engines:
        eng["onnx_file"], eng["engine_file"] = engine_files(p, eng)
    files.extend(out / name for name in dict.fromkeys(name for _, name in written))
    if calib is not None:
        files.append(folder.copy_in(calib, calibration_cache))  # type: ignore[arg-type]
    folder.write("build.sh", script, executable=True)
    files.append(folder.write("plan.json", p.to_json() + "\n"))
    files.append(folder.write("README.txt", _readme(p, calib, trt_version, proto)))
    if deepstream is not None:
        files.append(folder.write(DEEPSTREAM_FILE, deepstream))
    files += [runtime.copy_in(name, src) for name, src in standalone_sources()]
    return PlanFolder(out, p, files, [engine_files(p, e)[1] for e in p.engines], replaced)


def _earlier_plan(path: Path, plan: "Plan") -> str | None:
    """The plan a folder's ``plan.json`` holds when it is another study's or measurement's than ``plan``
    (``study 'a', measurement 3``): the folder guard lets placetune replace its own unchanged files, so a
    second study exported to the same folder would swap the deployment without a word."""
    try:
        old = json.loads(path.read_text(encoding="utf-8")).get("source") or {}
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    if not isinstance(old, dict) or "study" not in old:
        return None
    mine = plan.source or {}
    if (old.get("study"), old.get("measurement_id")) == (mine.get("study"), mine.get("measurement_id")):
        return None
    return f"study {old.get('study')!r}, measurement {old.get('measurement_id')}"

