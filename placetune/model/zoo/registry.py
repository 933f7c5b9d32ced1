"""The zoo's names, descriptions and options, and building / exporting a network by name."""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto, helper

from placetune.errors import ConfigError, ModelError, UnknownNameError
from placetune.validate import batch as check_batch
from placetune.model.zoo.googlenet import googlenet
from placetune.model.zoo.graph import Graph, Net
from placetune.model.zoo.mobilenet import mobilenetv1, mobilenetv2
from placetune.model.zoo.plain import alexnet, vgg11, vgg13, vgg16, vgg19
from placetune.model.zoo.resnet import resnet18, resnet34, resnet50, resnet101, resnet152
from placetune.model.zoo.seeds import model_bn, model_gn, seed_block
from placetune.model.zoo.ssd import ssdlite_mobilenetv3
from placetune.model.zoo.unet import unet_small
from placetune.model.zoo.vit import vit_tiny
from placetune.model.zoo.yolo import (yolo11n, yolo11n_seg, yolo11s, yolo11s_seg, yolov8n, yolov8n_seg,
                                       yolov8s, yolov8s_seg)
from placetune.files.write import force_hint, read_head, user_output, write_file

#: ONNX default-domain opset of every zoo model.
OPSET = 17
#: IR version written into zoo models (the one torch.onnx.export writes at opset 17; readable by
#: the ONNX parsers of TensorRT 8.5 and later).
IR_VERSION = 8

_MAX_VIT_DEPTH = 64


@dataclass(frozen=True)
class _Entry:
    fn: Callable[..., Net]
    description: str
    options: dict[str, Any]
    #: the input tensor's name, then the outputs' (an export's own, e.g. Ultralytics' images / output0)
    io: tuple[str, ...] = ("input", "output")
    opset: int = OPSET


_ZOO: dict[str, _Entry] = {
    "seed-block": _Entry(
        seed_block,
        "seed 000: four 1x1 convs 384->384 on 384x56x56, conv1->conv2 | conv3 | conv4, "
        "Concat to 1152 channels",
        {},
    ),
    "model-gn": _Entry(
        model_gn,
        "seed 002 ModelGN (jetson_dla_tutorial): 4x [3x3/2 conv + GroupNorm(8) + ReLU] on "
        "3x32x32, GlobalAveragePool, Linear 512->10; GroupNorm as torch exports it "
        "(Reshape, InstanceNormalization, Reshape, Mul, Add)",
        {},
    ),
    "model-bn": _Entry(
        model_bn,
        "seed 002 ModelGN with BatchNorm in place of GroupNorm (the DLA-friendly variant)",
        {},
    ),
    "alexnet": _Entry(
        alexnet,
        "BVLC Caffe AlexNet on 3x227x227 (LRN, grouped conv2/4/5), ~0.72 GMACs; "
        "softmax=False gives seed 003's alexnet_noprob",
        {"softmax": True},
    ),
    "googlenet": _Entry(
        googlenet,
        "BVLC Caffe GoogLeNet / Inception v1 on 3x224x224 (LRN, 9 inception modules), "
        "~1.6 GMACs",
        {"softmax": True},
    ),
    "resnet18": _Entry(
        resnet18,
        "torchvision ResNet-18 on 3x224x224, BatchNormalization kept, ~1.81 GMACs",
        {"softmax": False},
    ),
    "resnet34": _Entry(
        resnet34,
        "torchvision ResNet-34 on 3x224x224, BatchNormalization kept, ~3.67 GMACs",
        {"softmax": False},
    ),
    "resnet50": _Entry(
        resnet50,
        "torchvision ResNet-50 (v1.5) on 3x224x224, BatchNormalization kept, ends in Softmax "
        "like seed 003's Caffe model, ~4.09 GMACs",
        {"softmax": True},
    ),
    "resnet101": _Entry(
        resnet101,
        "torchvision ResNet-101 (v1.5) on 3x224x224, BatchNormalization kept, ~7.8 GMACs "
        "(HaX-CoNN's AlexNet + ResNet-101 pair)",
        {"softmax": False},
    ),
    "resnet152": _Entry(
        resnet152,
        "torchvision ResNet-152 (v1.5) on 3x224x224, BatchNormalization kept, ~11.6 GMACs",
        {"softmax": False},
    ),
    "mobilenetv1": _Entry(
        mobilenetv1,
        "MobileNetV1 1.0/224 (MLPerf's TensorFlow model, 1001 classes), BatchNormalization kept, "
        "ReLU6 as Clip, ~0.57 GMACs",
        {"softmax": False},
    ),
    "mobilenetv2": _Entry(
        mobilenetv2,
        "torchvision MobileNetV2 on 3x224x224, BatchNormalization kept, ReLU6 as Clip, "
        "~0.30 GMACs",
        {"softmax": False},
    ),
    "vgg16": _Entry(
        vgg16,
        "torchvision VGG-16 on 3x224x224, ~15.5 GMACs",
        {"softmax": False},
    ),
    "vgg11": _Entry(
        vgg11,
        "torchvision VGG-11 on 3x224x224, ~7.6 GMACs",
        {"softmax": False},
    ),
    "vgg13": _Entry(
        vgg13,
        "torchvision VGG-13 on 3x224x224, ~11.3 GMACs",
        {"softmax": False},
    ),
    "vgg19": _Entry(
        vgg19,
        "torchvision VGG-19 on 3x224x224, ~19.6 GMACs",
        {"softmax": False},
    ),
    "unet-small": _Entry(
        unet_small,
        "small 3-level U-Net (widths 16-128) on 3x256x256 -> 2 classes, ConvTranspose and "
        "nearest Resize upsampling, Concat skips, ~2.4 GMACs",
        {},
    ),
    "vit-tiny": _Entry(
        vit_tiny,
        "timm ViT-Tiny/16 on 3x224x224 (dim 192, 3 heads), LayerNormalization, exact GELU; "
        "depth=N blocks (default 12, 42 nodes each), a many-layer stress model, ~1.25 GMACs",
        {"depth": 12, "attention": "sdpa"},
    ),
    "ssdlite-mobilenetv3": _Entry(
        ssdlite_mobilenetv3,
        "torchvision SSDLite320 MobileNetV3-Large detector on 3x320x320 (backbone and head as torch.onnx exports "
        "them, BatchNorm folded; decoding and NMS left out) -> boxes [1, 3234, 4], scores [1, 3234, 91], "
        "~0.58 GMACs",
        {}, ("images", "boxes", "scores"), 17,
    ),
    "yolo11n": _Entry(
        yolo11n,
        "Ultralytics YOLO11n detector on 3x640x640 as its ONNX export (opset 18, C3k2, SPPF, C2PSA attention "
        "with MatMul/Softmax, Detect head with depthwise class branch and DFL) -> [1, 84, 8400], ~3.3 GMACs",
        {}, ("images", "output0"), 18,
    ),
    "yolo11s": _Entry(
        yolo11s,
        "Ultralytics YOLO11s detector on 3x640x640 as its ONNX export (opset 18) -> [1, 84, 8400], ~10.8 GMACs",
        {}, ("images", "output0"), 18,
    ),
    "yolo11n-seg": _Entry(
        yolo11n_seg,
        "Ultralytics YOLO11n-seg instance segmenter on 3x640x640 as its ONNX export (opset 18; Segment head: "
        "Detect + 32 mask coefficients, Proto with ConvTranspose) -> [1, 116, 8400] and [1, 32, 160, 160], "
        "~4.9 GMACs",
        {}, ("images", "output0", "output1"), 18,
    ),
    "yolo11s-seg": _Entry(
        yolo11s_seg,
        "Ultralytics YOLO11s-seg instance segmenter on 3x640x640 as its ONNX export (opset 18) -> [1, 116, 8400] "
        "and [1, 32, 160, 160], ~16.5 GMACs",
        {}, ("images", "output0", "output1"), 18,
    ),
    "yolov8n": _Entry(
        yolov8n,
        "Ultralytics YOLOv8n detector on 3x640x640 as its ONNX export (opset 18, Conv+SiLU as Sigmoid/Mul, "
        "C2f, SPPF, Detect head with DFL decoding) -> [1, 84, 8400], ~4.4 GMACs",
        {}, ("images", "output0"), 18,
    ),
    "yolov8n-seg": _Entry(
        yolov8n_seg,
        "Ultralytics YOLOv8n-seg instance segmenter on 3x640x640 as its ONNX export (opset 18; Segment head: "
        "Detect + 32 mask coefficients, Proto with ConvTranspose) -> [1, 116, 8400] and [1, 32, 160, 160], "
        "~6.0 GMACs",
        {}, ("images", "output0", "output1"), 18,
    ),
    "yolov8s": _Entry(
        yolov8s,
        "Ultralytics YOLOv8s detector on 3x640x640 as its ONNX export (opset 18) -> [1, 84, 8400], ~14.3 GMACs",
        {}, ("images", "output0"), 18,
    ),
    "yolov8s-seg": _Entry(
        yolov8s_seg,
        "Ultralytics YOLOv8s-seg instance segmenter on 3x640x640 as its ONNX export (opset 18) -> [1, 116, 8400] "
        "and [1, 32, 160, 160], ~20.0 GMACs",
        {}, ("images", "output0", "output1"), 18,
    ),
}


def _entry(name: str) -> _Entry:
    try:
        return _ZOO[name]
    except (KeyError, TypeError):
        raise UnknownNameError(
            f"unknown zoo model {name!r}; choose one of: {', '.join(names())}"
        ) from None


def names() -> list[str]:
    """The names of the built-in networks, sorted.

    Returns:
        The zoo names, e.g. ``["alexnet", "googlenet", ...]``.

    Example:
        >>> "resnet50" in names()
        True
    """
    return sorted(_ZOO)


#: Batch sizes of the seed scenarios; everything else defaults to 1.
_DEFAULT_BATCH = {"model-gn": 32, "model-bn": 32}


def default_batch(name: str) -> int:
    """The batch a zoo model is loaded with when none is given (seed 002's ModelGN ran at 32)."""
    _entry(name)
    return _DEFAULT_BATCH.get(name, 1)


def describe(name: str) -> str:
    """A one-line description of a zoo network.

    Args:
        name: a name from :func:`names`.

    Returns:
        The description (structure, input size, approximate MACs where known).

    Raises:
        UnknownNameError: ``name`` is not in the zoo.

    Example:
        >>> describe("seed-block").startswith("seed 000")
        True
    """
    return _entry(name).description


def _options(name: str, entry: _Entry, kw: dict[str, Any]) -> dict[str, Any]:
    unknown = sorted(set(kw) - set(entry.options))
    if unknown:
        allowed = ", ".join(sorted(entry.options)) or "none"
        raise ConfigError(
            f"zoo model {name!r} has no option {', '.join(map(repr, unknown))}; "
            f"its options are: {allowed}"
        )
    opts = {**entry.options, **kw}
    if "softmax" in opts and not isinstance(opts["softmax"], bool):
        raise ConfigError(f"softmax must be True or False, not {opts['softmax']!r}")
    if "depth" in opts:
        depth = opts["depth"]
        valid = isinstance(depth, int) and not isinstance(depth, bool)
        if not valid or not 1 <= depth <= _MAX_VIT_DEPTH:
            raise ConfigError(
                f"depth must be an integer from 1 to {_MAX_VIT_DEPTH}, not {depth!r}"
            )
    if "attention" in opts and opts["attention"] not in ("sdpa", "eager"):
        raise ConfigError(
            f"attention must be 'sdpa' (torch scaled_dot_product_attention export) or "
            f"'eager' ((q @ k^T) * scale), not {opts['attention']!r}"
        )
    return opts


def build(name: str, batch: int = 1, *, weights: bool = False, **kw: Any) -> onnx.ModelProto:
    """Build a zoo network as an ONNX model (opset 17, static shapes).

    Args:
        name: a name from :func:`names`.
        batch: the batch dimension of the input ``input`` and the output ``output`` (>= 1; the
            detectors keep their export's names, ``images`` and ``output0``).
        weights: ``False`` (default) gives initializers with dims and data type but no data:
            enough for placetune's importer and for strict shape inference, but rejected by
            :func:`onnx.checker.check_model`. ``True`` fills them with deterministic float32
            values; the model then passes ``check_model(model, full_check=True)``.
        **kw: network options: ``softmax`` (bool) for the classifiers (default True for
            alexnet, googlenet and resnet50, False otherwise); ``depth`` (int, 1-64, default
            12) and ``attention`` (``"sdpa"`` default, or ``"eager"``) for vit-tiny.

    Returns:
        The model; two calls with the same arguments serialize to the same bytes.

    Raises:
        UnknownNameError: ``name`` is not in the zoo.
        ConfigError: ``batch`` is not a positive integer, or an option is unknown or invalid.

    Example:
        >>> m = build("vit-tiny", depth=2)
        >>> [o.name for o in m.graph.output]
        ['output']
    """
    entry = _entry(name)
    batch = check_batch(int(batch) if isinstance(batch, np.integer) else batch)
    opts = _options(name, entry, kw)
    model = onnx.ModelProto()
    g = Graph(bool(weights), model.graph)
    in_name, out_names = entry.io[0], entry.io[1:]
    g.new_tensor(in_name)
    out, in_shape, out_shape = entry.fn(g, batch, **opts)
    outs, shapes = ([out], [out_shape]) if isinstance(out, str) else (list(out), list(out_shape))
    graph = model.graph
    for tensor, out_name, shape in zip(outs, out_names, shapes):
        g.rename_output(tensor, out_name)
        graph.output.append(helper.make_tensor_value_info(out_name, TensorProto.FLOAT, shape))
    graph.node.extend(g.nodes)
    graph.name = name.replace("-", "_")
    graph.input.append(helper.make_tensor_value_info(in_name, TensorProto.FLOAT, in_shape))
    model.opset_import.append(helper.make_opsetid("", entry.opset))
    model.producer_name = "placetune.zoo"
    model.producer_version = "1"
    model.doc_string = entry.description
    model.ir_version = IR_VERSION
    helper.set_model_props(
        model,
        {
            "placetune.zoo.name": name,
            "placetune.zoo.batch": str(batch),
            "placetune.zoo.options": json.dumps(opts, sort_keys=True),
            "placetune.zoo.weights": "random" if weights else "none",
        },
    )
    return model


#: How a zoo network's ONNX file begins: its ``ir_version`` field, then ``producer_name`` (field 2).
_ZOO_PRODUCER = b"\x12\x0dplacetune.zoo"


def is_zoo_file(path: str | pathlib.Path) -> bool:
    """True when ``path`` is an ONNX file :func:`export` wrote (its producer is ``placetune.zoo``)."""
    try:
        head = read_head(path, 64)
    except (OSError, ValueError):
        return False
    return head[:1] == b"\x08" and _ZOO_PRODUCER in head[:32]


def export(name: str, path: str | pathlib.Path, batch: int = 1, *, force: bool = True,
           **kw: Any) -> pathlib.Path:
    """Write a zoo network with deterministic weights to an ONNX file for a real build.

    Args:
        name: a name from :func:`names`.
        path: the file to write (parent folders are created).
        batch: the static batch dimension.
        force: replace an existing file whatever it is; False: only an ONNX file of the zoo, an empty
            file, a device or a pipe (``placetune zoo export -o`` without ``--force``).
        **kw: network options, as for :func:`build`.

    Returns:
        The path written.

    Raises:
        UnknownNameError: ``name`` is not in the zoo.
        ConfigError: invalid ``batch`` or options, or the file cannot be written.

    Example:
        >>> p = export("seed-block", "/tmp/seed_block.onnx")  # doctest: +SKIP
    """
    model = build(name, batch, weights=True, **kw)
    return write_file(path, model.SerializeToString(), "ONNX model", parents=True, owned=user_output(force, is_zoo_file),
                      hint=force_hint("-o"))


#: Names a zoo option may not take: they are arguments of ``zoo.build`` / ``zoo.export`` /
#: ``Model.load`` themselves (``seed-block:batch=3`` would collide with ``--batch``).
_RESERVED_ZOO_OPTIONS = ("batch", "weights", "name", "path", "shapes", "overrides")


def parse_options(text: str) -> dict[str, Any]:
    """``depth=24,softmax=false`` -> ``{"depth": 24, "softmax": False}``.

    Raises:
        ModelError: not ``key=value`` pairs, a key given twice, or a key that is an argument of its own
            (``batch``...).
    """
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep:
            raise ModelError(f"bad zoo option {part!r}: expected key=value, e.g. vit-tiny:depth=24")
        if key.strip() in _RESERVED_ZOO_OPTIONS:
            raise ModelError(f"zoo option {key.strip()!r} in {text[:80]!r} is not a network option: "
                             + ("give the batch with --batch N (Model.load(..., batch=N))" if key.strip() == "batch"
                                else "it is an argument of its own; network options are e.g. depth=, softmax="))
        if key.strip() in out:  # depth=2,depth=3 ran depth 3 without a word
            raise ModelError(f"zoo option {key.strip()[:40]!r} is given twice in {text[:80]!r}: give each option once")
        v: Any = value.strip()
        if v.lower() in ("true", "false"):
            v = v.lower() == "true"
        else:
            try:
                v = int(v)
            except ValueError:
                pass
        out[key.strip()] = v
    return out
