"""Read ONNX files without pulling weight data into memory.

ONNX files keep weights inline as ``TensorProto.raw_data`` (or as external data).
Parsing the whole protobuf would read every weight byte. Instead the file is
memory-mapped and its protobuf wire format is copied field by field, leaving out
the data of large floating-point initializers: only their ``dims``, ``data_type``
and ``name`` survive. Untouched pages of the mapping are never read.

Integer initializers (reshape targets, axes, pads) and small tensors keep their
data because shape folding needs their values.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import onnx

from placetune.errors import ModelError, PlacetuneError
from placetune.files.read import check_regular, open_regular, read_bytes, read_gzip
from placetune.files.kind import serialized_engine
from placetune.safetext import shown
from onnx.external_data_helper import ExternalDataInfo, _get_all_tensors, load_external_data_for_model, uses_external_data

__all__ = ["read_model_proto", "load_with_weights", "check_external_data", "check_initializers", "STRIP_MIN_BYTES"]

#: Initializers whose data is at least this many bytes are stripped (float-like only).
STRIP_MIN_BYTES = 4096

# TensorProto.DataType values whose data is never needed for shape logic.
_STRIPPABLE_TYPES = {1, 2, 3, 10, 11, 16, 17, 18, 19, 20}  # float, u8, i8, f16, f64, bf16, fp8s

# Field numbers (onnx.proto3).
_MODEL_GRAPH = 7
_GRAPH_INITIALIZER = 5
_TENSOR_DATA_FIELDS = {4, 5, 6, 7, 9, 10, 11}  # float/int32/string/int64/raw/double/uint64 data
_TENSOR_DATA_TYPE = 2


def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise ModelError("truncated protobuf varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ModelError("malformed protobuf varint")


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(buf: memoryview):
    """Yield (field number, wire type, start of field, start of payload, end)."""
    pos = 0
    n = len(buf)
    while pos < n:
        start = pos
        tag, pos = _varint(buf, pos)
        field, wire = tag >> 3, tag & 7
        if field == 0:
            raise ModelError("malformed protobuf: field number 0")
        if wire == 0:
            _, end = _varint(buf, pos)
            yield field, wire, start, pos, end
            pos = end
        elif wire == 1:
            end = pos + 8
            yield field, wire, start, pos, end
            pos = end
        elif wire == 2:
            length, pos = _varint(buf, pos)
            end = pos + length
            if end > n:
                raise ModelError("truncated protobuf message (the file is incomplete)")
            yield field, wire, start, pos, end
            pos = end
        elif wire == 5:
            end = pos + 4
            yield field, wire, start, pos, end
            pos = end
        else:
            raise ModelError(f"malformed protobuf: wire type {wire}")
        if pos > n:
            raise ModelError("truncated protobuf message (the file is incomplete)")


def _strip_tensor(buf: memoryview) -> tuple[bytes | None, dict[int, int]]:
    """The tensor without its data fields, or None to keep it whole; and the bytes each data field held."""
    data_type = None
    held: dict[int, int] = {}
    for field, wire, _s, p, e in _fields(buf):
        if field == _TENSOR_DATA_TYPE and wire == 0:
            data_type, _ = _varint(buf, p)
        elif field in _TENSOR_DATA_FIELDS:
            held[field] = held.get(field, 0) + e - p
    if data_type not in _STRIPPABLE_TYPES or sum(held.values()) < STRIP_MIN_BYTES:
        return None, held
    out = bytearray()
    for field, _w, s, _p, e in _fields(buf):
        if field not in _TENSOR_DATA_FIELDS:
            out += buf[s:e]
    return bytes(out), held


def _rewrite(buf: memoryview, field_no: int, transform) -> tuple[bytes, list]:
    """Copy a message, passing every length-delimited `field_no` through transform."""
    out = bytearray()
    notes: list = []
    for field, wire, s, p, e in _fields(buf):
        if field == field_no and wire == 2:
            new, note = transform(buf[p:e])
            notes.extend(note)
            out += _enc_varint((field << 3) | 2) + _enc_varint(len(new)) + new
        else:
            out += buf[s:e]
    return bytes(out), notes


def _strip_graph(graph: memoryview) -> tuple[bytes, list]:
    def tensor(t: memoryview):
        stripped, held = _strip_tensor(t)
        if stripped is None:
            return bytes(t), [None]
        return stripped, [held]

    return _rewrite(graph, _GRAPH_INITIALIZER, tensor)


def _strip(data: memoryview | bytes) -> tuple[bytes, list[dict[int, int] | None]]:
    """The model without its large weights; for each initializer of its graph, in order, the bytes each
    data field held where they were left out (None: kept whole)."""
    return _rewrite(memoryview(data), _MODEL_GRAPH, _strip_graph)


def strip_weights(data: memoryview | bytes) -> tuple[bytes, int]:
    """Strip large float initializer data from a serialized ModelProto.

    Returns:
        (serialized model without weight data, number of stripped initializers)
    """
    out, notes = _strip(data)
    return out, sum(note is not None for note in notes)


def _engine_given(p: Path) -> str | None:
    """The one-line refusal of a serialized TensorRT engine given where an ONNX model is needed."""
    if not serialized_engine(p) and not p.name.lower().endswith((".engine", ".plan", ".trt")):
        return None
    return (f"{shown(p)}: a serialized TensorRT engine, not an ONNX model: give the ONNX file it was built from "
            "(Ultralytics: model.export(format=\"onnx\")); an engine's layers are already placed and it runs only "
            "on the TensorRT and board that built it")


def _other_format(p: Path, head: bytes) -> str:
    """For a file that failed to parse as ONNX: what it is when its first bytes or its name say (a
    PyTorch checkpoint, a TensorFlow model; a TensorRT engine: :func:`_engine_given`) and what to give
    instead; empty when neither says."""
    suffix = p.suffix.lower()
    if head.startswith(b"PK\x03\x04") or head[:1] == b"\x80" or suffix in (".pt", ".pth", ".ckpt", ".torchscript"):
        return ("; it is a PyTorch checkpoint or TorchScript file: export it to ONNX first (torch.onnx.export; "
                "Ultralytics: YOLO('model.pt').export(format='onnx'))")
    if head[4:8] == b"TFL3" or suffix == ".tflite":
        return "; it is a TensorFlow Lite model: convert it to ONNX first (tf2onnx)"
    if head.startswith(b"\x89HDF") or suffix in (".h5", ".keras", ".pb"):
        return "; it is a Keras or TensorFlow model: convert it to ONNX first (tf2onnx)"
    return ""


def read_model_proto(path: str | Path) -> tuple[onnx.ModelProto, set[str]]:
    """Read an ONNX file (``.onnx`` or ``.onnx.gz``) without loading weight data.

    Returns:
        (model proto, names of initializers whose data was left out)

    Raises:
        ModelError: the file is missing, empty, not ONNX or truncated.
    """
    p = Path(path)
    if not os.path.lexists(p):
        raise ModelError(f"{shown(p)}: no such file (give an ONNX file or a zoo model name)")
    raw: bytes | mmap.mmap
    if p.suffix == ".gz":  # decompressed in chunks, refused past protobuf's 2 GiB
        raw = read_gzip(p, "model", error=ModelError)
    else:  # a regular file only: a FIFO or a device is refused without blocking
        with open_regular(p, "model", error=ModelError) as fh:
            if os.fstat(fh.fileno()).st_size == 0:
                raise ModelError(f"{shown(p)}: empty file, not an ONNX model")
            try:
                raw = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
            except (OSError, ValueError) as exc:
                raise ModelError(f"{shown(p)}: cannot read file: {exc}") from None
    try:
        stripped, held = _strip(raw)
        model = onnx.ModelProto()
        model.ParseFromString(stripped)
    except ModelError as exc:
        raise ModelError(_engine_given(p) or f"{p}: not a valid ONNX file ({exc}){_other_format(p, bytes(raw[:8]))}"
                         ) from None
    except Exception as exc:  # protobuf DecodeError and friends
        raise ModelError(_engine_given(p) or f"{p}: not a valid ONNX file ({type(exc).__name__}: {exc})"
                         f"{_other_format(p, bytes(raw[:8]))}") from None
    finally:
        if isinstance(raw, mmap.mmap):
            try:
                raw.close()
            except BufferError:  # views still held by an exception's traceback; GC closes it
                pass
    if not model.HasField("graph") or len(model.graph.node) == 0:
        raise ModelError(_engine_given(p) or f"{p}: not an ONNX model (no graph nodes found)")
    check_initializers(model, p, left_out=held)
    names = {
        t.name
        for t in model.graph.initializer
        if not t.raw_data
        and not t.float_data
        and not t.int32_data
        and not t.int64_data
        and not t.double_data
        and t.data_location != onnx.TensorProto.EXTERNAL
        and any(d != 0 for d in t.dims)
    }
    names |= {t.name for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    return model, names


def _external_files(proto: onnx.ModelProto, base: Path, error: type[PlacetuneError]) -> None:
    """Refuse external data that leaves the model's folder or is not a regular file (a FIFO would block)."""
    root = os.path.realpath(base)
    for tensor in _get_all_tensors(proto):
        if not uses_external_data(tensor):
            continue
        location = ExternalDataInfo(tensor).location or ""
        if not location:
            raise error(f"tensor {tensor.name[:80]!r} keeps its data externally but names no file (its external "
                        "data has no location): external data must be a file beside the model")
        # a NUL byte first: no path call takes one (realpath raises on it)
        if "\x00" in location or Path(location).is_absolute() or ".." in Path(location).parts \
                or os.path.commonpath([root, os.path.realpath(base / location)]) != root:
            raise error(f"tensor {tensor.name[:80]!r} keeps its data in {shown(location, 120)!r}, outside the "
                        f"model's folder {shown(base)}: external data must be a file beside the model")
        try:
            check_regular(base / location, "external data", error=error, limit=1 << 42)
        except PlacetuneError as exc:
            raise error(f"tensor {tensor.name[:80]!r}: {exc}") from None


#: bits per element of the data types ONNX packs several to a byte in ``raw_data`` (4-, 2- and 6-bit types)
_PACKED_BITS = {getattr(onnx.TensorProto, n): bits for n, bits in (
    ("INT4", 4), ("UINT4", 4), ("FLOAT4E2M1", 4), ("INT2", 2), ("UINT2", 2), ("FLOAT6E2M3", 6), ("FLOAT6E3M2", 6))
    if hasattr(onnx.TensorProto, n)}
#: the data fields of a TensorProto by field number, and the bytes one element takes in the fixed-size ones
_FIELD_NAMES = {4: "float_data", 5: "int32_data", 6: "string_data", 7: "int64_data", 9: "raw_data",
                10: "double_data", 11: "uint64_data"}
_FIXED_BYTES = {"float_data": 4, "double_data": 8}


def _elements(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims:
        n *= int(d)
    return n


def _data_bytes(t: onnx.TensorProto) -> int | None:
    """The bytes of data an initializer's dims and type give (None: a type without a fixed size)."""
    if t.data_type in (onnx.TensorProto.STRING, onnx.TensorProto.UNDEFINED):
        return None
    n = _elements(t)
    if t.data_type in _PACKED_BITS:
        return (n * _PACKED_BITS[t.data_type] + 7) // 8
    try:
        item = onnx.helper.tensor_dtype_to_np_dtype(t.data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None  # a type numpy cannot hold: the ONNX parser refuses it by name
    return n * item


def _size_refused(p: Path, t: onnx.TensorProto, got: int, want: int, error: type[PlacetuneError]) -> PlacetuneError:
    return error(f"{shown(p)}: initializer {t.name[:80]!r} holds {got:,} bytes of data, and its shape "
                 f"{'x'.join(map(str, t.dims)) or 'a scalar'} of {onnx.TensorProto.DataType.Name(t.data_type)} "
                 f"needs {want:,}: the file or its external data is truncated or was edited; export it again")


def _type_name(data_type: int) -> str | None:
    try:
        return None if data_type == onnx.TensorProto.UNDEFINED else onnx.TensorProto.DataType.Name(data_type)
    except ValueError:
        return None


def _tensor_problem(t: onnx.TensorProto, held: dict[str, int | None]) -> str | None:
    """What makes an initializer's data unreadable as its type and shape say (None: nothing).

    ``held``: the data fields that hold something, as bytes (``raw_data``) or values (the typed fields);
    None where only the field's bytes are known and its values are variable-length numbers."""
    name = _type_name(t.data_type)
    if name is None:
        last = max(onnx.TensorProto.DataType.values())
        return (f"has data type {t.data_type}, which is no ONNX tensor type (1 FLOAT .. {last} "
                f"{onnx.TensorProto.DataType.Name(last)})")
    if any(d < 0 for d in t.dims):
        return f"has a negative dimension in its shape {'x'.join(map(str, t.dims))}"
    if not held:  # a weightless initializer (placetune's own files leave weights out)
        return None
    if "raw_data" in held:
        if t.data_type == onnx.TensorProto.STRING:
            return "keeps STRING values in raw_data, which holds numbers only (strings go in string_data)"
        want, got = _data_bytes(t), held["raw_data"]
        if want is not None and got != want:
            return (f"holds {got:,} bytes of data, and its shape {'x'.join(map(str, t.dims)) or 'a scalar'} of "
                    f"{name} needs {want:,}")
        return None
    field = onnx.helper.tensor_dtype_to_field(t.data_type)
    wrong = sorted(set(held) - {field})
    if wrong:
        return f"keeps its values in {', '.join(wrong)}, which a {name} tensor does not use (its field: {field})"
    got_values = held[field]
    if got_values is None or t.data_type in _PACKED_BITS:
        return None
    want_values = _elements(t) * (2 if t.data_type in (onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128) else 1)
    if got_values != want_values:
        return (f"holds {got_values:,} values in {field}, and its shape {'x'.join(map(str, t.dims)) or 'a scalar'} "
                f"of {name} needs {want_values:,}")
    return None


def check_initializers(proto: onnx.ModelProto, path: str | Path | None = None, *,
                       left_out: list[dict[int, int] | None] | None = None,
                       error: type[PlacetuneError] = ModelError) -> None:
    """Refuse a model with an initializer (or a Constant node's value) whose data cannot be its type and
    shape: an unknown data type, ``raw_data`` of another size than its dims and type give, values in a field
    its type does not use, or too few or too many of them. Its weights, large or small, would be read as something else, and every
    segment written from it is a file TensorRT's parser refuses. Initializers kept in external data are
    :func:`check_external_data`'s; one with no data at all is a model without weights, as placetune keeps them.

    Args:
        left_out: for the initializers read without their data (:func:`read_model_proto`), in order, the
            bytes each data field held; None for those read whole.

    Raises:
        error: one line naming the initializer (or the Constant node) and what its type and shape need.
    """
    notes = left_out or []
    tensors = [(f"initializer {t.name[:80]!r}", t, notes[k] if k < len(notes) else None)
               for k, t in enumerate(proto.graph.initializer)]
    tensors += [(f"Constant node {node.name[:80]!r}: its {a.name}", a.t, None) for node in proto.graph.node
                if node.op_type == "Constant" for a in node.attribute if a.type == onnx.AttributeProto.TENSOR]
    for what, t, note in tensors:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            continue
        if note is None:
            held: dict[str, int | None] = {f: len(getattr(t, f)) for f in _FIELD_NAMES.values() if len(getattr(t, f))}
        else:  # the bytes each field held; values only where each takes a fixed size
            held = {(f := _FIELD_NAMES[field]): n if f == "raw_data" else
                    (n // _FIXED_BYTES[f] if f in _FIXED_BYTES else None) for field, n in note.items() if n}
        problem = _tensor_problem(t, held)
        if problem:
            where = f"{shown(path)}: " if path is not None else ""
            raise error(f"{where}{what} {problem}: the file or its external data is truncated or was edited, "
                        "or its exporter wrote it wrongly; export it again")


def check_external_data(path: str | Path, *, error: type[PlacetuneError] = ModelError) -> None:
    """Refuse, without reading any weight, a model whose external data :func:`load_with_weights` could not
    load: a file missing, outside the model's folder or not a regular file, an offset or length that is not
    a number, or an initializer whose data (its ``length``, else the rest of the file from its ``offset``)
    is not the size its dims and type give or does not fit in the file. A study runs it before its first
    build: the weights are read only at export, after the night.

    Raises:
        error: one line naming the initializer.
    """
    p = Path(path)
    proto = read_model_proto(p)[0]  # the file as export loads it (the model's own graph may fold some away)
    for t in _get_all_tensors(proto):
        if uses_external_data(t):
            try:
                info = ExternalDataInfo(t)
                ok = (info.offset or 0) >= 0 and (info.length or 0) >= 0  # older onnx takes negative ones
            except ValueError:
                ok = False
            if not ok:
                raise error(f"{shown(p)}: initializer {t.name[:80]!r}: its external data's offset or length is not "
                            "a byte count (a whole number, 0 or more)")
    _external_files(proto, p.parent, error)
    # (each tensor's own info: protobuf gives a new Python object on each access, so an ``id()`` taken in the
    # loop above can be another tensor's by now, and every initializer was checked against another's length)
    for t in proto.graph.initializer:
        if not uses_external_data(t):
            continue
        info = ExternalDataInfo(t)
        size = os.stat(p.parent / info.location).st_size
        offset = info.offset or 0
        got = info.length if info.length else max(size - offset, 0)
        if offset + got > size:
            raise error(f"{shown(p)}: initializer {t.name[:80]!r} keeps {got:,} bytes at offset {offset:,} of "
                        f"{shown(info.location, 120)!r}, which holds {size:,}: the external data file is truncated "
                        "or is another model's; export it again")
        want = _data_bytes(t)
        if want is not None and got != want:
            raise _size_refused(p, t, got, want, error)


def load_with_weights(path: str | Path, *, error: type[PlacetuneError] = ModelError,
                      external: bool = True) -> onnx.ModelProto:
    """An ONNX file (``.onnx`` or ``.onnx.gz``) with its weights, read through the one read path.

    Args:
        path: the file.
        error: the error class raised.
        external: also load external data (files beside the model, never outside its folder).

    Raises:
        error: not a regular file, over 2 GiB (decompressed), corrupt gzip, not ONNX, or
            external data outside the model's folder or not a regular file, or (with ``external``) an
            initializer whose data is not the size its shape and type give.
    """
    p = Path(path)
    data = read_gzip(p, "model", error=error) if p.suffix == ".gz" else read_bytes(p, "model", error=error)
    try:
        proto = onnx.load_from_string(data)
    except Exception as exc:  # noqa: BLE001 - protobuf DecodeError and friends
        raise error(_engine_given(p) or f"{shown(p)}: not a valid ONNX file ({type(exc).__name__}: {str(exc)[:200]})"
                    f"{_other_format(p, bytes(data[:8]))}") from None
    if external:
        try:
            _external_files(proto, p.parent, error)
            load_external_data_for_model(proto, str(p.parent))
        except PlacetuneError:
            raise
        except Exception as exc:  # noqa: BLE001 - onnx's own checks (bounds, links, lengths) and IO errors
            raise error(f"{shown(p)}: cannot read its external data ({type(exc).__name__}: {str(exc)[:200]})") \
                from None
        check_initializers(proto, p, error=error)
    return proto
