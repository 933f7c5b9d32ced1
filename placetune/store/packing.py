"""Compact, lossless encodings of a measurement's bulky fields in the ``pt_measurements`` payload.

A simulated measurement of a 176-layer network in pipeline mode carries about 20 kB of
per-layer times, per-segment times and timeline events, mostly floats; writing them as
JSON numbers cost more than the simulation that produced them. Here they are
stored column-wise, each all-float column as the base64 of its IEEE-754 doubles (exact,
NaN and infinities included), under the payload key :data:`PACKED`:

* a ``str -> float`` map (``layer_times_ms``): ``{"k": keys, "f": floats}``, or
  ``{"i": positions, "f": floats}`` when the keys are the realised placement's layer names
  in some order (the common case; ``positions`` in that map, null when in the same order);
* a list of objects with the same keys in the same order (``segment_times_ms``,
  ``timeline``): ``{"n": length, "c": [[key, "f", floats] | [key, "j", values], ...]}``.

Anything else (mixed types, differing keys, empty) stays a plain payload field. Rows
written before this encoding have no :data:`PACKED` key and read back unchanged; an
older placetune reading a packed row keeps the fields it knows and files the packed
object under the measurement's ``extra``.
"""

from __future__ import annotations

import base64
import binascii
import sys
import json
from array import array
from typing import Any

__all__ = ["PACKED", "PACKABLE", "pack_fields", "unpack_fields", "device_map_text", "shared_keys", "shared_values"]

#: payload key of the packed fields
PACKED = "_packed"
#: the measurement fields that are packed when their shape allows
PACKABLE = ("layer_times_ms", "segment_times_ms", "timeline")

_SWAP = sys.byteorder != "little"  # stored little-endian


def _floats_text(values: list[float]) -> str:
    a = array("d", values)
    if _SWAP:
        a.byteswap()
    return base64.b64encode(a.tobytes()).decode("ascii")


def _floats(text: Any) -> list[float]:
    if not isinstance(text, str):
        raise ValueError("packed floats are not text")
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) % 8:
        raise ValueError("packed floats are not a whole number of doubles")
    a = array("d")
    a.frombytes(raw)
    if _SWAP:
        a.byteswap()
    return a.tolist()


_FLOAT_ONLY = frozenset({float})


def _all_floats(values: Any) -> bool:
    return _FLOAT_ONLY.issuperset(map(type, values))


def _positions(names: list[str]) -> dict[str, int] | None:
    """Name -> position in ``names`` (cached per name tuple; None when a name repeats)."""
    keys = tuple(names)
    hit = _POSITIONS.get(keys)
    if hit is None:
        pos = {n: i for i, n in enumerate(keys)}
        hit = _POSITIONS[keys] = (pos if len(pos) == len(keys) else None,)
        if len(_POSITIONS) > _KEYSETS_MAX:
            _POSITIONS.pop(next(iter(_POSITIONS)))
    return hit[0]


_POSITIONS: dict[tuple[str, ...], tuple[dict[str, int] | None]] = {}


def _pack_map(d: dict[str, Any], names: list[str] | None) -> dict[str, Any] | None:
    values = list(d.values())
    if not values or not _all_floats(values):
        return None
    keys = list(d)
    if names is not None and len(keys) == len(names):
        if keys == names:
            return {"i": None, "f": _floats_text(values)}
        pos = _positions(names)
        if pos is not None:
            try:
                return {"i": list(map(pos.__getitem__, keys)), "f": _floats_text(values)}
            except (KeyError, TypeError):  # a key that is not a name (or not hashable)
                pass
    return {"k": keys, "f": _floats_text(values)}


def _pack_rows(rows: list[Any]) -> dict[str, Any] | None:
    if not rows or type(rows[0]) is not dict:
        return None
    keys = tuple(rows[0])
    for r in rows:
        if type(r) is not dict or tuple(r) != keys:
            return None
    cols = []
    for k, col in zip(keys, zip(*[r.values() for r in rows])):  # the rows' columns, transposed in C
        cols.append([k, "f", _floats_text(col)] if _all_floats(col) else [k, "j", list(col)])
    return {"n": len(rows), "c": cols}


def pack_fields(fields: dict[str, Any], realized: Any) -> None:
    """Replace the packable fields of a measurement's payload by their packed form, in place.

    ``realized`` is the measurement's realised map (its layer order names the per-layer
    times); fields that cannot be packed exactly are left as they are.
    """
    packed: dict[str, Any] = {}
    names = list(realized) if type(realized) is dict else None
    lt = fields.get("layer_times_ms")
    if type(lt) is dict:
        p = _pack_map(lt, names)
        if p is not None:
            packed["layer_times_ms"] = p
    for name in ("segment_times_ms", "timeline"):
        v = fields.get(name)
        if type(v) is list:
            p = _pack_rows(v)
            if p is not None:
                packed[name] = p
    for name in packed:
        del fields[name]
    if packed:
        fields[PACKED] = packed


def _unpack_map(p: dict[str, Any], names: list[str] | None) -> dict[str, float]:
    if "k" in p:
        keys = p["k"]
    elif names is None:
        raise ValueError("packed map refers to a realised placement that is not stored")
    else:
        idx = p["i"]
        if idx is not None and not all(type(i) is int and 0 <= i < len(names) for i in idx):
            raise ValueError("packed map positions are not positions in the realised placement")
        keys = names if idx is None else [names[i] for i in idx]
    values = _floats(p["f"])
    if not isinstance(keys, list) or len(keys) != len(values) or not all(isinstance(k, str) for k in keys):
        raise ValueError("packed map keys do not match its values")
    return dict(zip(keys, values))


def _interned(values: Any) -> Any:
    """A column of values read back, its text values interned (a device or event name recurs in
    every row: kept once in memory, not once per row)."""
    if type(values) is list and values and type(values[0]) is str:
        return [sys.intern(v) if type(v) is str else v for v in values]
    return values


def _unpack_rows(p: dict[str, Any]) -> list[dict[str, Any]]:
    n = p["n"]
    if type(n) is not int or n < 0:
        raise ValueError("packed row count is not a count")
    keys, cols = [], []
    for key, kind, data in p["c"]:
        col = _floats(data) if kind == "f" else _interned(data) if kind == "j" else None
        if not isinstance(key, str) or not isinstance(col, list) or len(col) != n:
            raise ValueError("packed column does not match the row count")
        keys.append(key)
        cols.append(col)
    return [dict(zip(keys, vals)) for vals in zip(*cols)] if cols else [{} for _ in range(n)]


def unpack_fields(d: dict[str, Any]) -> str | None:
    """Restore, in place, the fields that :func:`pack_fields` packed into ``d[PACKED]``.

    Returns:
        None, or what is wrong with the packed data (the caller reports the row corrupt).
    """
    packed = d.pop(PACKED, None)
    if packed is None:
        return None
    if not isinstance(packed, dict):
        return f"its packed fields are a {type(packed).__name__}, not an object"
    realized = d.get("realized")
    names = list(realized) if isinstance(realized, dict) else None
    for name, p in packed.items():
        if name not in PACKABLE:
            return f"packed field {str(name)[:40]!r} is unknown"
        try:
            d[name] = _unpack_map(p, names) if name == "layer_times_ms" else _unpack_rows(p)
        except (KeyError, TypeError, ValueError, binascii.Error, UnicodeError) as exc:
            return f"packed field {name!r} is invalid ({type(exc).__name__})"
    return None


# ---------------------------------------------------------------- per-layer device maps
# A realised placement's ``{layer name: device}`` map is the largest JSON value of a row (7 kB for
# resnet50) and the same layer names recur in every row of a model. Its text is assembled from
# the names' JSON fragments, encoded once per name tuple, and maps read back share one set of
# key strings per name tuple (the in-process caches then hold one copy of the names, not one
# per measurement).

_KEYSETS: dict[tuple[str, ...], tuple[tuple[str, ...], list[str]]] = {}  # names -> (names, '"name":' texts)
_KEYSETS_MAX = 64
_DEVICE_TEXT = {"GPU": '"GPU"', "DLA0": '"DLA0"', "DLA1": '"DLA1"'}
_DEVICE_NAMES = {d: d for d in _DEVICE_TEXT}


def _keyset(keys: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    hit = _KEYSETS.get(keys)
    if hit is None:
        if not all(type(k) is str for k in keys):
            raise TypeError("not a map of text keys")
        hit = _KEYSETS[keys] = (keys, [json.dumps(k) + ":" for k in keys])
        if len(_KEYSETS) > _KEYSETS_MAX:
            _KEYSETS.pop(next(iter(_KEYSETS)))
    return hit


def device_map_text(d: dict[str, Any]) -> str | None:
    """The compact JSON text of a ``{layer name: device}`` map, as ``json.dumps(d, separators=(",", ":"))``
    writes it; None when a key is not text or a value is not ``GPU``/``DLA0``/``DLA1``."""
    if not d:
        return "{}"
    try:
        values = list(map(_DEVICE_TEXT.__getitem__, d.values()))
        texts = _keyset(tuple(d))[1]
    except (KeyError, TypeError):  # another value, or an unhashable one
        return None
    return "{" + ",".join(map(str.__add__, texts, values)) + "}"


def shared_keys(d: Any) -> Any:
    """``d`` with its keys replaced by the shared copies of the same name tuple (a dict of str
    keys), so that maps decoded from many rows hold one copy of a model's layer names; anything
    else is returned as it is."""
    if type(d) is not dict or not d:
        return d
    keys = tuple(d)
    try:
        shared = _keyset(keys)[0]
    except TypeError:
        return d
    try:
        values = list(map(_DEVICE_NAMES.get, d.values()))  # one copy of each device name too
    except TypeError:  # an unhashable value (an edited row): returned as it is, for the row's checks to name
        return d
    return dict(zip(shared, d.values() if None in values else values))


_SHORT = 40  # text values up to this length are interned when read back (names, devices, modes)


def shared_values(value: Any, depth: int = 3) -> Any:
    """A JSON value read back, made to hold no more memory than the value that was written.

    ``json.loads`` makes new strings for every key and text value of every row, and a new float
    for each of a noiseless measurement's equal latency samples, where the measurement that was
    written shared them: here object keys and short text values (to ``depth`` levels) are
    interned, and a list of equal non-zero floats (bit for bit: ``-0.0`` and NaN are left alone)
    becomes one float repeated. Lists and dicts stay fresh objects.
    """
    t = type(value)
    if t is dict:
        if depth <= 0:
            return value
        return {sys.intern(k) if type(k) is str else k: shared_values(v, depth - 1) for k, v in value.items()}
    if t is list:
        if value and type(value[0]) is float:
            first = value[0]
            if first != 0.0 and all(type(x) is float and x == first for x in value):
                return [first] * len(value)
        return value
    if t is str and len(value) <= _SHORT:
        return sys.intern(value)
    return value
