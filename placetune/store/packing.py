"""Compact, lossless encodings of a measurement's bulky fields in the ``pt_measurements`` payload.

A simulated measurement of a 176-layer network in pipeline mode carries about 20 kB of
per-layer times, per-segment times and timeline events, mostly floats; writing them as
JSON numbers cost more than the simulation that produced them (issue 19). Here they are
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
from array import array
from typing import Any

__all__ = ["PACKED", "PACKABLE", "pack_fields", "unpack_fields"]

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


def _all_floats(values: list[Any]) -> bool:
    for v in values:
        if type(v) is not float:
            return False
    return True


def _pack_map(d: dict[str, Any], names: list[str] | None) -> dict[str, Any] | None:
    values = list(d.values())
    if not values or not _all_floats(values):
        return None
    keys = list(d)
    if names is not None and len(keys) == len(names):
        if keys == names:
            return {"i": None, "f": _floats_text(values)}
        pos = {n: i for i, n in enumerate(names)}
        if len(pos) == len(names) and all(k in pos for k in keys):
            return {"i": [pos[k] for k in keys], "f": _floats_text(values)}
    return {"k": keys, "f": _floats_text(values)}


def _pack_rows(rows: list[Any]) -> dict[str, Any] | None:
    if not rows or type(rows[0]) is not dict:
        return None
    keys = tuple(rows[0])
    for r in rows:
        if type(r) is not dict or tuple(r) != keys:
            return None
    cols = []
    for k in keys:
        col = [r[k] for r in rows]
        cols.append([k, "f", _floats_text(col)] if _all_floats(col) else [k, "j", col])
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


def _unpack_rows(p: dict[str, Any]) -> list[dict[str, Any]]:
    n = p["n"]
    if type(n) is not int or n < 0:
        raise ValueError("packed row count is not a count")
    keys, cols = [], []
    for key, kind, data in p["c"]:
        col = _floats(data) if kind == "f" else data if kind == "j" else None
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
