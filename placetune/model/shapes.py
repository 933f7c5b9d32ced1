"""Input shapes: ``name=1x3x224x224`` specs, and the static dims and dtypes of a graph's tensors."""

from __future__ import annotations

import logging
import numbers
import re
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper

from placetune.errors import ShapeError
from placetune.model.layer import TensorInfo

__all__ = ["parse_shape_spec", "ShapeSpec", "declared_dims", "dtype_name", "fix_inputs", "normalise_shapes"]

log = logging.getLogger(__name__)

ShapeSpec = Mapping[str, Sequence[int]]


def split_shape_specs(spec: str) -> list[str]:
    """One ``--shape`` text as its input specs: ``name=dims`` is one; trtexec's ``name:dims[,name:dims]``
    and Polygraphy's ``name:[d,d,...] name:[...]`` may list several (split at commas and spaces outside
    brackets).

    Example:
        >>> split_shape_specs("images:1x3x640x640,mask:1x1x640x640")
        ['images:1x3x640x640', 'mask:1x1x640x640']
        >>> split_shape_specs("input:[1,3,224,224] other:[1,10]")
        ['input:[1,3,224,224]', 'other:[1,10]']
    """
    if "=" in spec or ":" not in spec:
        return [spec]
    items, depth, cur = [], 0, ""
    for ch in spec:
        depth += (ch == "[") - (ch == "]")
        if depth == 0 and (ch == "," or ch.isspace()):
            items.append(cur)
            cur = ""
        else:
            cur += ch
    return [x for x in [*items, cur] if x.strip()]


#: a ``name:dims`` (or ``name=dims``) spec and its comma inside the text before a ``=``: two specs in one
_SPEC_BEFORE_COMMA = re.compile(r"[:=]\s*\[?\d+(?:\s*[x,]\s*\d+)*\]?\s*,")


#: one dimension of a --shape: ASCII digits, blanks around them allowed
_DIM = re.compile(r"\s*-?[0-9]+\s*", re.ASCII)
#: the largest dimension a --shape may give (TensorRT 8's Dims hold int32)
_MAX_DIM = 2**31 - 1


def parse_shape_spec(spec: str) -> tuple[str | None, tuple[int, ...]]:
    """Parse ``name=1x3x224x224`` (or ``1x3x224x224`` for a single-input model), trtexec's
    ``name:1x3x224x224`` or Polygraphy's ``name:[1,3,224,224]``.

    Example:
        >>> parse_shape_spec("input=32x3x32x32")
        ('input', (32, 3, 32, 32))
        >>> parse_shape_spec("input:[32,3,32,32]")
        ('input', (32, 3, 32, 32))

    Raises:
        ShapeError: the text is not ``name=AxBxC`` with positive integers (one input per ``name=``).
    """
    if not isinstance(spec, str):
        raise ShapeError(f"bad --shape of type {type(spec).__name__}: give text such as input=1x3x224x224")
    # name=dims,name=dims (or name:dims,name=dims): the first spec would become part of an input's name; a
    # comma in a name alone (an ONNX input "in,put") is a name
    if spec.count("=") > 1 or _SPEC_BEFORE_COMMA.search(spec.rpartition("=")[0]):
        raise ShapeError(f"bad --shape {spec[:120]!r}: one input per --shape with name=1x3x224x224 (repeat --shape for "
                         "each input: --shape a=1x3x224x224 --shape b=1x10), or trtexec's name:dims,name:dims")
    name, sep, dims = spec.rpartition("=")
    if not sep and ":" in spec:
        name, sep, dims = spec.rpartition(":")
        if dims.strip().startswith("[") and dims.strip().endswith("]"):
            dims = dims.strip()[1:-1]
    if sep and not name.strip():
        # "=1x3x224x224": a name was meant and left out; taking it as a single-input shape hides the typo
        raise ShapeError(f"bad --shape {spec[:120]!r}: empty input name before {sep!r}; use NAME=DIMS (e.g. "
                         "input=1x3x224x224) or DIMS alone for a single-input model")
    text = dims.strip().lower().replace(",", "x")
    parts = text.split("x")
    # ASCII digits only: int() also reads "2_24", "+3" and other scripts' digits, a typo taken as a size
    if not all(_DIM.fullmatch(d) for d in parts):
        raise ShapeError(f"bad --shape {spec!r}: expected name=1x3x224x224 (or trtexec's name:1x3x224x224, "
                         "Polygraphy's name:[1,3,224,224])")
    shape = tuple(int(d) for d in parts)
    if not shape or any(d <= 0 for d in shape):
        raise ShapeError(f"bad --shape {spec!r}: every dimension must be a positive integer")
    if any(d > _MAX_DIM for d in shape):
        raise ShapeError(f"bad --shape {spec[:120]!r}: every dimension must be at most {_MAX_DIM} (TensorRT's dimensions "
                         "are 32-bit)")
    return (name.strip() or None) if sep else None, shape


def dtype_name(elem_type: int) -> str:
    """The numpy dtype name of an ONNX element type (``1`` -> ``"float32"``); ``"float32"`` for an unknown one."""
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:  # noqa: BLE001 - unknown / undefined element types
        return "float32"


def declared_dims(type_proto: onnx.TypeProto) -> list[int | str | None] | None:
    """The dims a tensor type declares: an int for a fixed one, the name of a symbolic one, None for an
    open one (or one fixed at 0); None when the type declares no shape at all."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return None
    dims: list[int | str | None] = []
    for d in type_proto.tensor_type.shape.dim:
        if d.HasField("dim_value") and d.dim_value > 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return dims


def _zero_axes(type_proto: onnx.TypeProto) -> list[int]:
    """The axes a tensor type fixes at 0 (:func:`declared_dims` reports them as open, ``None``)."""
    if not type_proto.HasField("tensor_type") or not type_proto.tensor_type.HasField("shape"):
        return []
    return [axis for axis, d in enumerate(type_proto.tensor_type.shape.dim)
            if d.HasField("dim_value") and d.dim_value == 0]


def empty_tensors(proto: onnx.ModelProto) -> dict[str, list[int | None]]:
    """The tensors ONNX shape inference sizes 0 on some axis (empty tensors), with their dims (0 there,
    None where open); {} when inference fails. Asked only when a load is refused, to say why."""
    try:
        inferred = onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - the refusal falls back to its general words
        return {}
    empty: dict[str, list[int | None]] = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        zero = _zero_axes(vi.type)
        if zero:
            empty[vi.name] = [0 if axis in zero else int(d.dim_value) if d.HasField("dim_value") else None
                              for axis, d in enumerate(vi.type.tensor_type.shape.dim)]
    return empty


def _zero_sized(name: str, dims: Sequence[int | str | None], zero: Sequence[int]) -> str:
    """The refusal of an input whose file fixes a dimension at 0: an empty tensor, not a dynamic one."""
    shown = "x".join("0" if axis in zero else (str(d) if d is not None else "?") for axis, d in enumerate(dims))
    which = (f"dimension {zero[0]} is" if len(zero) == 1
             else f"dimensions {', '.join(map(str, zero[:-1]))} and {zero[-1]} are")
    example = "x".join(str(d) if isinstance(d, int) else "1" for d in dims)
    return (f"input {name!r} [{shown}]: {which} 0 (an empty tensor); every input dimension must be 1 or more, "
            f"fixed in the file or given with --shape (e.g. --shape {name}={example})")


def exporter_image_size(proto: onnx.ModelProto) -> tuple[int, int] | None:
    """The image size an exporter recorded in the file's metadata (Ultralytics writes ``imgsz: [640, 640]``),
    for the ``--shape`` a dynamic export is told to give; None when the file says none."""
    for prop in proto.metadata_props:
        if prop.key == "imgsz":
            try:
                size = [int(v) for v in str(prop.value).strip("[]() ").split(",")]
            except ValueError:
                return None
            return (size[0], size[-1]) if len(size) in (1, 2) and all(0 < v <= 1 << 16 for v in size) else None
    return None


def example_dims(dims: Sequence[int | str | None], image_size: tuple[int, int] | None = None,
                 batch: int = 1) -> str:
    """An input's dims for a suggested ``--shape``: open ones as the batch (dimension 0), the exporter's
    image size (the last two of an NCHW input), else a named placeholder (``<height>``) to fill in."""
    out = []
    for axis, d in enumerate(dims):
        if isinstance(d, int):
            out.append(str(d))
        elif axis == 0:
            out.append(str(batch))
        elif image_size is not None and len(dims) == 4 and axis >= 2:
            out.append(str(image_size[axis - 2]))
        else:
            out.append(f"<{d}>" if isinstance(d, str) and d.isidentifier() and len(d) <= 32 else f"<dim{axis}>")
    return "x".join(out)


def normalise_shapes(shapes: ShapeSpec | Sequence[str] | None) -> dict[str | None, tuple[int, ...]]:
    """The input shapes a caller gives (a mapping ``{"input": (1, 3, 224, 224)}`` or ``--shape`` texts), checked,
    as ``{input name: dims}``; the key None stands for the unnamed input of a one-input model.

    Raises:
        ShapeError: a dimension that is not a positive integer, too large, or an input given twice.
    """
    if not shapes:
        return {}
    if isinstance(shapes, Mapping):
        out: dict[str | None, tuple[int, ...]] = {}
        for k, v in shapes.items():
            # a sequence of whole numbers: int() of a text's letters, of 1.5 or of True was a traceback or a guess
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not all(
                    isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in v):
                raise ShapeError(f"bad shape for {str(k)[:40]!r}: {str(v)[:60]!r}; give a sequence of positive "
                                 "integers, e.g. {'input': (1, 3, 224, 224)}")
            dims = tuple(int(d) for d in v)
            if not dims or any(d <= 0 for d in dims):
                raise ShapeError(f"bad shape for {k!r}: {v!r} (positive integers needed)")
            if any(d > _MAX_DIM for d in dims):
                raise ShapeError(f"bad shape for {str(k)[:40]!r}: every dimension must be at most {_MAX_DIM}")
            out[k] = dims
        return out
    out = {}
    for spec in (item for text in shapes for item in split_shape_specs(text)):
        name, dims = parse_shape_spec(spec)
        if name in out:  # the last one would win without a word
            what = f"input {name!r}" if name is not None else "the (unnamed) input"
            raise ShapeError(f"bad --shape: it gives {what} twice ({'x'.join(map(str, out[name]))} and "
                             f"{'x'.join(map(str, dims))}); give each input once, as name=1x3x224x224")
        out[name] = dims
    return out


def fix_inputs(graph: onnx.GraphProto, init_names: set[str], overrides: dict,
               image_size: tuple[int, int] | None = None) -> list[TensorInfo]:
    """Write static dims into the graph's real inputs (those not in ``init_names``), from ``overrides``
    (:func:`normalise_shapes`) or from the file, and return their tensors.

    Raises:
        ShapeError: an input left dynamic, given a shape of the wrong rank, a fixed dimension changed
            (only the batch may be), or an unknown input named; ``image_size`` fills the suggested ``--shape``.
    """
    real_inputs = [i for i in graph.input if i.name not in init_names]
    names = [i.name for i in real_inputs]
    if None in overrides:
        if len(real_inputs) != 1:
            raise ShapeError(
                f"the model has {len(real_inputs)} inputs ({', '.join(names)}); "
                "name the input in --shape, e.g. --shape input=1x3x224x224"
            )
        overrides = {names[0]: overrides[None]}
    for key in overrides:
        if key not in names:
            raise ShapeError(f"--shape names {key!r}, but the model's inputs are: {', '.join(names)}")
    fixed = []
    for inp in real_inputs:
        dims = declared_dims(inp.type)
        dynamic = dims is None or any(not isinstance(d, int) for d in dims)
        if inp.name in overrides:
            new = overrides[inp.name]
            if dims is not None and len(dims) != len(new):
                raise ShapeError(
                    f"--shape for input {inp.name!r} has rank {len(new)}, the model's input has rank {len(dims)}"
                )
            for axis, (old, nd) in enumerate(zip(dims or [], new)):
                if isinstance(old, int) and old != nd:
                    if axis != 0:  # the file fixes it: the weights and every layer after depend on it
                        raise ShapeError(
                            f"--shape for input {inp.name!r} sets dimension {axis} to {nd}, but the model fixes it "
                            f"at {old}; only the batch (dimension 0) and dynamic dimensions may be set")
                    log.info("input %s: overriding static batch %d with %d", inp.name, old, nd)
            dims = list(new)
        if dims is None:
            raise ShapeError(
                f"input {inp.name!r} has no shape in the file; pass --shape {inp.name}=1x3x224x224"
            )
        zero = [] if inp.name in overrides else _zero_axes(inp.type)
        if zero:
            raise ShapeError(_zero_sized(inp.name, dims, zero))
        if any(not isinstance(d, int) for d in dims):
            shown = "x".join(str(d) if d is not None else "?" for d in dims)
            said = (f"the {image_size[0]}x{image_size[1]} the exporter recorded in the file" if image_size
                    else "fill in your sizes")
            raise ShapeError(
                f"input {inp.name!r} has a dynamic shape [{shown}]; DLA needs static shapes: "
                f"pass --shape {inp.name}={example_dims(dims, image_size)} (batch 1, or yours; {said})"
            )
        shape_proto = inp.type.tensor_type.shape
        del shape_proto.dim[:]
        for d in dims:
            shape_proto.dim.add().dim_value = int(d)
        fixed.append(TensorInfo(inp.name, tuple(int(d) for d in dims), dtype_name(inp.type.tensor_type.elem_type),
                                dynamic=dynamic))
    return fixed


def has_schema(op_type: str, domain: str, local: set[tuple[str, str]] = frozenset()) -> bool:
    """Whether ONNX knows ``domain.op_type`` (a standard op, or a function the file defines):
    anything else is a TensorRT plugin (``EfficientNMS_TRT``) or another custom op."""
    dom = "" if domain in ("", "ai.onnx") else domain
    if (dom, op_type) in local:
        return True
    try:
        return bool(onnx.defs.has(op_type, dom))
    except Exception:  # noqa: BLE001 - onnx raises on odd domain strings
        return False


def declared_plugin_shapes(graph: onnx.GraphProto, original: Mapping[str, list | None],
                           fixed: Sequence[TensorInfo], local: set[tuple[str, str]]) -> dict[str, onnx.ValueInfoProto]:
    """The shapes the file declares (``value_info``, graph outputs) for the outputs of ops ONNX
    cannot infer (plugins), made static with the inputs' fixed shapes.

    A declared dimension named like an input's open dimension (``batch``) takes the value that
    input was fixed at; one named by decimal digits (``"100"``, as yolov7's end2end export writes
    its EfficientNMS_TRT outputs) is that size; a declared leading dimension equal to the inputs'
    file batch follows a changed batch. A dimension that stays open is left out (the layer is then
    refused).

    Args:
        graph: the graph before placetune drops its value_info (inference redoes the others).
        original: input name -> its dims as the file declares them (before ``--shape``).
        fixed: the inputs with their fixed shapes.
        local: ``(domain, name)`` of the functions the file defines.

    Returns:
        tensor name -> a value_info with static dims, for every plugin output the file declares.
    """
    symbols: dict[str, int] = {}
    batches = set()
    for t in fixed:
        dims = original.get(t.name) or []
        for d, n in zip(dims, t.shape):
            if isinstance(d, str):
                symbols.setdefault(d, int(n))
        if dims and isinstance(dims[0], int) and t.shape and dims[0] != t.shape[0]:
            batches.add((dims[0], int(t.shape[0])))
    rebatch = dict(batches) if len({b for b, _ in batches}) == len(batches) else {}
    plugin_outputs = {o for n in graph.node if not has_schema(n.op_type, n.domain, local) for o in n.output if o}
    out: dict[str, onnx.ValueInfoProto] = {}
    for vi in list(graph.value_info) + list(graph.output):
        if vi.name not in plugin_outputs or vi.name in out:
            continue
        dims = declared_dims(vi.type)
        if dims is None:
            continue
        # a name of decimal digits is that size: yolov7, yolov9 and mmyolo's end2end exports rewrite every
        # output dimension as ``dim_param = str(size)`` ("1", "100", "4")
        dims = [int(d) if isinstance(d, str) and d.isascii() and d.isdigit() and d not in symbols else d
                for d in dims]
        static = [symbols.get(d) if isinstance(d, str) else d for d in dims]
        if static and isinstance(dims[0], int) and dims[0] in rebatch:
            static[0] = rebatch[dims[0]]
        if any(not isinstance(d, int) or d <= 0 for d in static):
            continue
        out[vi.name] = helper.make_tensor_value_info(vi.name, vi.type.tensor_type.elem_type, static)
    return out


def keep_declared_plugin_shapes(proto: onnx.ModelProto, original: Mapping[str, list | None],
                                fixed: Sequence[TensorInfo]) -> dict[str, onnx.ValueInfoProto]:
    """Drop the graph's value_info and output shapes, which may be stale (a changed batch) and which
    inference redoes, except those of plugin outputs (:func:`declared_plugin_shapes`, returned)."""
    graph = proto.graph
    declared = declared_plugin_shapes(graph, original, fixed, local_functions(proto))
    outputs = {o.name for o in graph.output}
    del graph.value_info[:]
    graph.value_info.extend(v for k, v in declared.items() if k not in outputs)
    for out in graph.output:
        if out.name in declared:
            out.CopyFrom(declared[out.name])
        elif out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    return declared


def local_functions(proto: onnx.ModelProto) -> set[tuple[str, str]]:
    """``(domain, name)`` of the functions a model defines: ONNX infers those, they are no plugins."""
    return {(f.domain, f.name) for f in proto.functions}


def batch_overrides(graph: onnx.GraphProto, init_names: set[str], overrides: dict, batch: int,
                    image_size: tuple[int, int] | None = None) -> dict:
    """``--batch`` on an ONNX file: the leading dimension of every input the file leaves open.

    Raises:
        ShapeError: an input's leading dimension is static and not ``batch`` (naming the exact
            ``--shape`` to give instead), or ``--shape`` already sets that input.
    """
    out = dict(overrides)
    for inp in graph.input:
        if inp.name in init_names:
            continue
        dims = declared_dims(inp.type)
        if not dims:
            raise ShapeError(f"--batch {batch}: input {inp.name!r} has no shape in the file; "
                             f"pass --shape {inp.name}=<dims> instead")
        if inp.name in out or (None in out and len(out) == 1):
            raise ShapeError(f"--batch {batch} and --shape both set input {inp.name!r}: give the batch in --shape")
        if isinstance(dims[0], int):
            if dims[0] == batch:
                continue
            shown = "x".join(str(d) if isinstance(d, int) else "1" for d in [batch, *dims[1:]])
            raise ShapeError(
                f"--batch {batch}: input {inp.name!r} has a static batch of {dims[0]} in the file, so --batch "
                f"cannot set it; to override the file's batch, pass --shape {inp.name}={shown} (the graph may "
                "still fix the batch in its reshapes: a re-export at that batch is the safe way)")
        out[inp.name] = tuple([batch, *[d if isinstance(d, int) else None for d in dims[1:]]])
        zero = [axis for axis in _zero_axes(inp.type) if axis > 0]
        if zero:
            raise ShapeError(f"--batch {batch}: " + _zero_sized(inp.name, out[inp.name], zero))
        if None in out[inp.name]:
            shown = "x".join(str(d) if isinstance(d, int) else "?" for d in [batch, *dims[1:]])
            raise ShapeError(f"--batch {batch}: input {inp.name!r} [{shown}] has other dynamic dimensions: "
                             f"pass --shape {inp.name}={example_dims(dims, image_size, batch)}")
    return out


#: TensorRT's NMS plugins whose four output shapes follow from their attributes and their boxes input
#: (TensorRT's plugin/efficientNMSPlugin/README.md and plugin/batchedNMSPlugin/README.md, "Outputs"):
#: op -> the attribute of the boxes kept per image. num_detections ``[batch, 1]`` INT32; boxes
#: ``[batch, K, 4]``; scores ``[batch, K]``; classes ``[batch, K]``, INT32 for EfficientNMS_TRT and
#: FLOAT32 for BatchedNMS, whose boxes, scores and classes the README gives as float32 tensors.
NMS_KEEP = {"EfficientNMS_TRT": "max_output_boxes", "BatchedNMS_TRT": "keepTopK", "BatchedNMSDynamic_TRT": "keepTopK"}


def nms_plugin_shapes(graph: onnx.GraphProto, info: Mapping[str, tuple[list | None, int]],
                      known: Mapping[str, onnx.ValueInfoProto]) -> dict[str, onnx.ValueInfoProto]:
    """The output shapes of the NMS plugin nodes (:data:`NMS_KEEP`) the file declares none for (``known``:
    the declared ones), from the plugin's attribute (``max_output_boxes``, ``keepTopK``) and the batch of its
    boxes input (``info``: ONNX inference's dims and element types), where that is unambiguous: four outputs,
    a positive whole attribute, boxes and scores inputs of one known static batch, of float32 (or float16 for
    EfficientNMS_TRT, whose boxes and scores outputs take their inputs' type). Any other node keeps its
    refusal (placetune needs every layer's shape)."""
    out: dict[str, onnx.ValueInfoProto] = {}
    for node in graph.node:
        key = NMS_KEEP.get(node.op_type)
        outputs = list(node.output)
        if key is None or len(outputs) != 4 or len(node.input) < 2 or all(o in known for o in outputs if o):
            continue
        attrs = {a.name: a for a in node.attribute}
        k = attrs[key].i if key in attrs and attrs[key].type == onnx.AttributeProto.INT else 0
        boxes, scores = (info.get(x, (None, 0)) for x in node.input[:2])
        batches = {d[0] for d, _ in (boxes, scores) if d}
        floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16) if node.op_type == "EfficientNMS_TRT" else (onnx.TensorProto.FLOAT,)
        if k <= 0 or not boxes[0] or not scores[0] or len(batches) != 1 or boxes[1] not in floats \
                or scores[1] not in floats:
            continue
        batch = batches.pop()
        if not isinstance(batch, int) or batch <= 0:
            continue
        classes = onnx.TensorProto.INT32 if node.op_type == "EfficientNMS_TRT" else onnx.TensorProto.FLOAT
        shapes = [(onnx.TensorProto.INT32, [batch, 1]), (boxes[1], [batch, k, 4]), (scores[1], [batch, k]),
                  (classes, [batch, k])]
        for name, (elem, dims) in zip(outputs, shapes):
            if name and name not in known:
                out[name] = helper.make_tensor_value_info(name, elem, dims)
    return out
