"""The trtexec command-line grammar: flags per TensorRT version, ``--layerDeviceTypes``, ``--shapes`` and quoting.

One place for what the trtexec backend runs and what a plan exports as ``trtexec``
commands (:mod:`placetune.plan.trtexec`), so both write the same command lines.

Example:
    >>> layer_device_types({"/conv1/Conv": "DLA0", "a:b": "GPU"})
    '/conv1/Conv:DLA,a:b:GPU'
    >>> shapes_arg({"input": [1, 3, 224, 224]}, batch=4)
    'input:4x3x224x224'
    >>> precision_flags("fp16", version_tuple("10.3.0")), precision_flags("fp16", version_tuple("11.4.1"))
    (['--fp16'], [])
    >>> precision_flags("int8", version_tuple("8.6.1"))
    ['--fp16', '--int8']
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from placetune.errors import ConfigError, ModelError, PlacementError

__all__ = [
    "MAX_ARG_CHARS",
    "load_inputs_arg",
    "LAYER_DEVICE_TYPES_SINCE",
    "version_tuple",
    "has_layer_device_types",
    "strongly_typed",
    "untyped_int8",
    "precision_flags",
    "transfer_flags",
    "serial_flags",
    "dla_flags",
    "build_only_flag",
    "profile_flags",
    "spin_wait_flags",
    "cuda_graph_flags",
    "adjust_for_dla_flags",
    "ADJUST_FOR_DLA_SINCE",
    "layer_device_types",
    "device_types_arg",
    "shapes_arg",
    "shapes_from_argv",
    "shell_line",
]

#: trtexec refuses a single argument longer than this on Linux (MAX_ARG_STRLEN is 128 KiB).
MAX_ARG_CHARS = 120_000
#: First TensorRT version whose trtexec has ``--layerDeviceTypes``.
LAYER_DEVICE_TYPES_SINCE = (8, 6)
#: First TensorRT version whose trtexec has ``--skipInference`` (``--buildOnly`` before).
_SKIP_INFERENCE_SINCE = (8, 6)
#: First TensorRT major version that is strongly typed (no ``--fp16``/``--int8``), spins by
#: default (no ``--useSpinWait``) and times end to end without ``--separateProfileRun``.
_TRT11 = 11
#: First TensorRT version with the ONNX parser flag ``ADJUST_FOR_DLA`` and trtexec's
#: ``--adjustForDLA``: both new in release/10.16 (python/src/parsers/pyOnnx.cpp:237
#: ``.value("ADJUST_FOR_DLA", ...)``; samples/common/sampleOptions.cpp:1271
#: ``getAndDelOption(arguments, "--adjustForDLA", adjustForDLA)``), absent in release/10.15.
ADJUST_FOR_DLA_SINCE = (10, 16)


# --------------------------------------------------------------------------- versions
def version_tuple(version: str) -> tuple[int, ...]:
    """The first three numbers of a TensorRT version (``(0,)`` when there are none).

    Example:
        >>> version_tuple("8.6.1.6"), version_tuple("")
        ((8, 6, 1), (0,))
    """
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:3]) or (0,)


def has_layer_device_types(vt: tuple[int, ...]) -> bool:
    """True when trtexec of TensorRT ``vt`` has ``--layerDeviceTypes`` (8.6 on)."""
    return vt[:2] >= LAYER_DEVICE_TYPES_SINCE


def strongly_typed(vt: tuple[int, ...]) -> bool:
    """True when TensorRT ``vt`` builds strongly typed networks only (11 on): no ``--fp16``/``--int8``."""
    return bool(vt) and vt[0] >= _TRT11


def untyped_int8(precision: str, version: str, has_qdq: "bool | Callable[[], bool]") -> str | None:
    """Why a model of ``precision`` cannot be built by TensorRT ``version``: INT8 on a strongly typed TensorRT
    (11 on: no INT8 flag, no calibration, the types come from the model) when the model has no Q/DQ nodes
    (``has_qdq`` False, or a function that reads them, called only when the rule needs it); None when it can. The one rule and wording of ``placetune tune``'s start checks, the
    Jetson backends' builds and the trtexec export.

    Example:
        >>> untyped_int8("int8", "10.3.0", False) is None, untyped_int8("int8", "11.4.1", True) is None
        (True, True)
        >>> untyped_int8("int8", "11.4.1", False)[:48]
        'precision int8 for TensorRT 11.4.1: it builds st'
    """
    if precision != "int8" or not strongly_typed(version_tuple(version)):
        return None
    if has_qdq() if callable(has_qdq) else has_qdq:
        return None
    return (f"precision int8 for TensorRT {version}: it builds strongly typed networks only (no INT8 flag, no "
            "calibration) and the model has no Q/DQ (QuantizeLinear/DequantizeLinear) nodes, so it would build in "
            "FP32 with its DLA layers on the GPU; quantize the model with Q/DQ nodes (e.g. with NVIDIA TensorRT "
            "Model Optimizer) and tune it again, use precision fp16, or target TensorRT 8.5-10.x (--trt-version)")


# --------------------------------------------------------------------------- flags
def precision_flags(precision: str, vt: tuple[int, ...]) -> list[str]:
    """``--fp16`` for fp16; ``--fp16 --int8`` for int8 (trtexec's ``--int8`` alone is INT8 + FP32,
    sampleOptions.cpp; the tensorrt worker builds INT8 + FP16, and so must what is compared with
    it); none for fp32 or a strongly typed TensorRT (11 on)."""
    if strongly_typed(vt):
        return []
    return {"fp16": ["--fp16"], "int8": ["--fp16", "--int8"]}.get(precision, [])


def transfer_flags(vt: tuple[int, ...]) -> list[str]:
    """Time compute only, as the tensorrt worker does: ``--noDataTransfers`` before TensorRT 11;
    11 leaves the host<->device copies out by default (``--includeDataTransfers`` adds them,
    ``--noDataTransfers`` is a deprecated no-op: sampleOptions.cpp, release/11.1)."""
    return ["--noDataTransfers"] if vt[0] < _TRT11 else []


def serial_flags() -> list[str]:
    """``--exposeDMA``: one query in flight, as the tensorrt worker times (every version 8.5-11.1 has
    it; it sets ``overlap = false``, so ``Iteration`` keeps ``1 + overlap`` = 1 slot instead of 2 and
    the host's enqueue time is no longer hidden behind the previous query: the method and its
    source lines are in :mod:`placetune.backends.timing_method`)."""
    return ["--exposeDMA"]


def dla_flags(core: int, gpu_fallback: bool) -> list[str]:
    """``--useDLACore=k`` (which makes the DLA the default device of every layer) and ``--allowGPUFallback``."""
    return [f"--useDLACore={core}"] + (["--allowGPUFallback"] if gpu_fallback else [])


def build_only_flag(vt: tuple[int, ...]) -> str:
    """The flag that builds an engine without timing it."""
    return "--skipInference" if vt[:2] >= _SKIP_INFERENCE_SINCE else "--buildOnly"


def profile_flags(path: Any, vt: tuple[int, ...]) -> list[str]:
    """``--exportProfile`` to ``path``; before TensorRT 11 with ``--separateProfileRun``
    (else trtexec prints no end-to-end timing at all)."""
    return [f"--exportProfile={path}"] + (["--separateProfileRun"] if vt[0] < _TRT11 else [])


def spin_wait_flags(vt: tuple[int, ...]) -> list[str]:
    """``--useSpinWait`` before TensorRT 11 (11 spins by default)."""
    return ["--useSpinWait"] if vt[0] < _TRT11 else []


def cuda_graph_flags(vt: tuple[int, ...]) -> list[str]:
    """No CUDA graph, as the tensorrt worker times (``execute_async_v3`` on a stream, no graph
    capture): ``--noCudaGraph`` from TensorRT 11, whose trtexec captures one by default
    (release/11.0 and 11.1 samples/common/sampleOptions.h ``bool graph{true};``,
    sampleOptions.cpp "CUDA graph is now enabled by default"); nothing before, where graphs are
    off unless ``--useCudaGraph`` (release/8.5-10.16 sampleOptions.h ``bool graph{false};``) and
    ``--noCudaGraph`` does not exist (trtexec would refuse it as an unknown option). With
    ``--useDLACore`` trtexec turns graphs off itself ("CUDA graphs and DLA offloading are not
    simultaneously supported", sampleOptions.cpp)."""
    return ["--noCudaGraph"] if vt[0] >= _TRT11 else []


def adjust_for_dla_flags(core: int, vt: tuple[int, ...]) -> list[str]:
    """``--adjustForDLA`` for a DLA engine from TensorRT 10.16 (:data:`ADJUST_FOR_DLA_SINCE`),
    as the tensorrt worker sets the parser's ``ADJUST_FOR_DLA`` wherever the bindings have it."""
    return ["--adjustForDLA"] if core >= 0 and tuple(vt[:2]) >= ADJUST_FOR_DLA_SINCE else []


# --------------------------------------------------------------------------- values
def layer_device_types(assignment: Mapping[str, str]) -> str:
    """The value of trtexec's ``--layerDeviceTypes`` for ``{layer: "GPU"|"DLA0"|"DLA1"}``.

    trtexec's grammar (``sampleOptions.cpp``): pairs separated by ``,``; each pair split on
    its **last** ``:`` into layer name and ``GPU`` / ``DLA``. So names may contain ``:``
    (and ``/``, ``.``, spaces), but a name containing ``,`` cannot be written, nor one
    containing ``'`` (trtexec treats single quotes as name quoting and drops them). From
    TensorRT 10 a name with a ``*`` is also a pattern (prefix ``*`` suffix) for the layers the list
    does not name, but a layer's exact name wins (``findPlausible``, samples/common/sampleUtils.h
    release/10.3:111-123; ``matchStringWithOneWildcard``, sampleUtils.cpp:572-585): every layer
    listed here takes its own entry, and a listed ``(Unnamed Layer* N) [Type]`` could only also
    place an unlisted layer that begins ``(Unnamed Layer`` and ends `` N) [Type]``, i.e. itself.

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


def device_types_arg(assignment: Mapping[str, str]) -> tuple[str, bool]:
    """:func:`layer_device_types` of every layer, or of the GPU layers only when that is over
    :data:`MAX_ARG_CHARS` (``--useDLACore`` makes DLA the default for the rest).

    Returns:
        ``(value, only_gpu_listed)``; the value may still be over :data:`MAX_ARG_CHARS`.

    Raises:
        PlacementError: a layer name trtexec cannot express.
    """
    spec = layer_device_types(assignment)
    if len(spec) <= MAX_ARG_CHARS:
        return spec, False
    return layer_device_types({n: d for n, d in assignment.items() if d == "GPU"}), True


def shapes_arg(shapes: Mapping[str, Any], batch: int | None = None) -> str | None:
    """The value of ``--shapes`` (``name:1x3x224x224,...``), the first dimension set to ``batch``
    when given; None when there are no inputs.

    trtexec's grammar (``sampleOptions.cpp``, ``getShapesBuild``): the list is split at every
    ``,``, each pair at its last ``:``, and single quotes are stripped from names; so a name with
    ``:`` is written as is, but one with ``,`` or ``'`` cannot be written at all.

    Raises:
        ModelError: an input name trtexec cannot express (the build would lose its shape).
    """
    parts = []
    for name, dims in shapes.items():
        d = [int(x) for x in dims]
        if batch is not None and d:
            d[0] = int(batch)
        bad = "," if "," in name else "'" if "'" in name else ""
        if bad:
            what = "splits the list at every ','" if bad == "," else "strips single quotes from input names"
            raise ModelError(
                f"model input {name[:80]!r} contains {bad!r}, which trtexec's --shapes cannot express (it "
                f"{what}): rename the ONNX input (e.g. with onnx-graphsurgeon) or build with the Python API")
        parts.append(f"{name}:{'x'.join(map(str, d))}")
    return ",".join(parts) or None


def shapes_from_argv(argv: Sequence[str]) -> dict[str, list[int]]:
    """The input shapes of a command line's ``--shapes``, parsed back (empty without one)."""
    for a in argv:
        if a.startswith("--shapes="):
            out = {}
            for part in a.split("=", 1)[1].split(","):
                name, _, dims = part.rpartition(":")
                out[name] = [int(x) for x in dims.split("x")]
            return out
    return {}


def load_inputs_arg(files: Mapping[str, str]) -> str:
    """``--loadInputs=name:file,...``: each input's raw binary file (the tensor's bytes, as many as the
    engine's binding holds: ``loadFromFile``, samples/common/sampleUtils.cpp release/10.3).

    trtexec's grammar (sampleOptions.cpp release/8.5 to 10.3, ``splitNameAndValue``): the list is split
    at every ``,``; a pair is split at its last ``:``, or, with the name in single quotes, after the
    closing quote (``'name':path``, so the path may hold ``:``). placetune quotes every name; a name or
    path with ``,`` or ``'`` cannot be written.

    Raises:
        ConfigError: an input name or file name trtexec cannot read back.
    """
    parts = []
    for name, path in files.items():
        bad = next((c for c in (",", "'") if c in name or c in str(path)), "")
        if bad:
            raise ConfigError(f"--loadInputs cannot express input {name[:80]!r} with file {str(path)[:120]!r}: "
                              f"trtexec splits its list at ',' and names at \"'\"; rename the input or use "
                              f"--backend tensorrt (or another cache folder, cache_dir)")
        parts.append(f"'{name}':{path}")
    return "--loadInputs=" + ",".join(parts)


def shell_line(argv: Sequence[str]) -> str:
    """The command line with every argument quoted for a POSIX shell."""
    return " ".join(shlex.quote(a) for a in argv)
