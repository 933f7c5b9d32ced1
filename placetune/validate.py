"""Checks at placetune's boundaries: numbers finite and in range, names that exist, strict JSON in and out.

Every boundary (the command line, study files, plan files, device profiles, rows read back from
the database) uses these, so that a value is refused with one message that names the field
and what is allowed, instead of overflowing in numpy, looping on a NaN or being stored:

* :func:`integer` and :func:`number`: ``--batch 2**63``, ``batch: 1e300``, ``layer_sigma = 1e300``;
* :func:`loads_json`: JSON as placetune reads it: duplicate keys, ``NaN``, ``Infinity`` and
  numbers that overflow to infinity (``1e999``) are refused, so is nesting too deep to parse;
* :func:`dumps_json`: JSON as placetune writes it: never ``NaN``/``Infinity`` (invalid JSON);
  a non-finite number is written as ``null``.

Example:
    >>> integer(8, "batch", 1, MAX_BATCH)
    8
    >>> loads_json('{"a": 1, "a": 2}', "placement")
    Traceback (most recent call last):
    ...
    placetune.errors.ConfigError: placement: key 'a' appears twice in one object
"""

from __future__ import annotations

import json
import math
import numbers
import re
import os
import sys
from typing import Any

from placetune.errors import ConfigError, PlacetuneError

__all__ = ["MAX_BATCH", "MAX_KEY_PARTS", "MAX_NESTING", "batch", "check_options", "check_shape", "integer", "number",
           "loads_json", "loads_toml", "dumps_json", "finite_json", "request"]

#: The largest batch placetune accepts anywhere (command line, study, plan, replicas, zoo).
MAX_BATCH = 65536


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def integer(value: Any, field: str, lo: int, hi: int, *, error: type[PlacetuneError] = ConfigError) -> int:
    """``value`` as an int when it is an integer (not a bool, not a float) in ``[lo, hi]``.

    Raises:
        error: naming ``field`` and the allowed range.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not lo <= value <= hi:
        raise error(f"{field} must be an integer from {lo} to {hi}, got {_shown(value)}")
    return int(value)


def batch(value: Any, field: str = "batch", *, error: type[PlacetuneError] = ConfigError) -> int:
    """``value`` as a batch size: a positive integer of at most :data:`MAX_BATCH`.

    Raises:
        error: ``batch must be a positive integer of at most 65536, got ...``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_BATCH:
        raise error(f"{field} must be a positive integer of at most {MAX_BATCH}, got {_shown(value)}")
    return int(value)


def number(value: Any, field: str, lo: float = -math.inf, hi: float = math.inf, *,
           error: type[PlacetuneError] = ConfigError) -> float:
    """``value`` as a float when it is a finite real number (not a bool) in ``[lo, hi]``.

    Raises:
        error: naming ``field`` and the allowed range.
    """
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real)
    v = float(value) if ok else math.nan
    if not ok or not math.isfinite(v) or not lo <= v <= hi:
        bounds = f" from {lo:g} to {hi:g}" if math.isfinite(lo) and math.isfinite(hi) else \
            (f" >= {lo:g}" if math.isfinite(lo) else (f" <= {hi:g}" if math.isfinite(hi) else ""))
        raise error(f"{field} must be a finite number{bounds}, got {_shown(value)}")
    return v


def check_options(owner: str, values: dict[str, Any], *, positive: tuple[str, ...] = (),
                  nonnegative: tuple[str, ...] = (), integers: dict[str, int] | None = None,
                  flags: tuple[str, ...] = (), paths: tuple[str, ...] = (), texts: tuple[str, ...] = (),
                  tables: tuple[str, ...] = (), positive_tables: tuple[str, ...] = (),
                  lists: tuple[str, ...] = (), environments: tuple[str, ...] = ()) -> None:
    """The types of a component's options as a study file's ``[backend_options]`` gives them: ``positive``
    and ``nonnegative`` finite numbers (a NaN timeout never expires, an infinite warm-up never ends),
    ``integers`` whole numbers of at least the given value, ``flags`` true or false (a TOML ``"false"`` is
    a true string), ``paths`` and ``texts`` text, ``tables`` objects, ``positive_tables`` objects of finite
    numbers > 0, ``lists`` lists of text and ``environments`` tables of environment variables (a name that is
    not empty and holds no ``=`` or NUL, a value of text or a number without NUL: subprocess refuses the others
    at the first build). None (the option left out) passes each.

    Raises:
        ConfigError: ``{owner}: {option} must be ...``, naming the option and what it takes.
    """
    def bad(name: str, what: str) -> ConfigError:
        return ConfigError(f"{owner}: {name} must be {what}, got {_shown(values[name])}")

    def real(v: Any) -> bool:
        return not isinstance(v, bool) and isinstance(v, numbers.Real) and math.isfinite(v)

    for name in positive:
        v = values.get(name)
        if v is not None and not (real(v) and v > 0):
            raise bad(name, "a finite number > 0")
    for name in nonnegative:
        v = values.get(name)
        if v is not None and not (real(v) and v >= 0):
            raise bad(name, "a finite number >= 0")
    for name, lo in (integers or {}).items():
        v = values.get(name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo):
            raise bad(name, f"an integer >= {lo}")
    for name in flags:
        if values.get(name) is not None and not isinstance(values[name], bool):
            raise bad(name, "true or false")
    for name in paths:
        v = values.get(name)
        if v is not None and not (isinstance(v, (str, os.PathLike))):
            raise bad(name, "a path (text)")
    for name in texts:
        if values.get(name) is not None and not isinstance(values[name], str):
            raise bad(name, "text")
    for name in tables:
        if values.get(name) is not None and not isinstance(values[name], dict):
            raise bad(name, "a table (an object of names and values)")
    for name in positive_tables:
        v = values.get(name)
        if v is not None and not (isinstance(v, dict) and all(real(x) and x > 0 for x in v.values())):
            raise bad(name, "a table of finite numbers > 0")
    for name in lists:
        v = values.get(name)
        if v is not None and not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
            raise bad(name, "a list of text values")
    for name in environments:
        v = values.get(name)
        if v is not None and not (isinstance(v, dict) and all(
                isinstance(k, str) and k and "=" not in k and "\0" not in k and not isinstance(x, bool)
                and isinstance(x, (str, int, float)) and "\0" not in str(x) for k, x in v.items())):
            raise bad(name, "a table of environment variables (names without '=' or NUL, values text or numbers)")


def _no_duplicates(where: str, error: type[PlacetuneError]):
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise error(f"{where}: key {_shown(key)} appears twice in one object")
            out[key] = value
        return out
    return hook


def _finite_float(where: str, error: type[PlacetuneError]):
    def parse(text: str) -> float:
        v = float(text)
        if not math.isfinite(v):
            raise error(f"{where}: the number {text[:40]} is too large (JSON numbers must be finite)")
        return v
    return parse


def _no_constant(where: str, error: type[PlacetuneError]):
    def parse(name: str) -> Any:
        raise error(f"{where}: {name} is not valid JSON (numbers must be finite)")
    return parse


#: The deepest nesting of arrays and tables (inline or dotted) a TOML or JSON document may have:
#: far beyond any placetune file, far below what makes the parsers recurse out of the stack.
MAX_NESTING = 64
#: The most parts a TOML dotted key may have (``a.b.c`` has 3): a 200 KB file with a
#: 100,000-part key once grew to 23 GB in tomllib.
MAX_KEY_PARTS = 64

_TOML_TOKENS = re.compile(r'#[^\n]*|"""(?:[^"\\]|\\.|"(?!""))*"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"'
                          r"|'[^'\n]*'|[\[\]{}.=,\n]", re.S)
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def check_shape(text: str, where: str, kind: str, *, error: type[PlacetuneError] = ConfigError) -> None:
    """A cheap scan before the parser: nesting at most :data:`MAX_NESTING` deep and (TOML) dotted
    keys of at most :data:`MAX_KEY_PARTS` parts, so that no document makes ``tomllib`` or ``json``
    recurse out of the stack or take gigabytes.

    Args:
        text: the document.
        where: what to call it in messages.
        kind: ``toml`` or ``json``.
        error: the error class raised.

    Raises:
        error: nested too deeply or a key of too many parts (the line named).
    """
    depth = parts = 0
    for m in (_TOML_TOKENS if kind == "toml" else _JSON_TOKENS).finditer(text):
        tok = m.group()
        c = tok[0]
        if c in "[{":
            depth += 1
            parts = 0
            if depth > MAX_NESTING:
                line = text.count("\n", 0, m.start()) + 1
                raise error(f"{where} is nested too deeply: arrays and tables more than {MAX_NESTING} deep "
                            f"(line {line})")
        elif c in "]}":
            depth = max(0, depth - 1)
            parts = 0
        elif c == ".":
            parts += 1
            if parts >= MAX_KEY_PARTS:
                line = text.count("\n", 0, m.start()) + 1
                raise error(f"{where}: a dotted key of more than {MAX_KEY_PARTS} parts (line {line}); keys have "
                            f"at most {MAX_KEY_PARTS}")
        elif c in "=,\n":
            parts = 0


def _toml_hint(text: str, message: str) -> str:
    """For tomllib's "Invalid value (at line N, ...)" on ``key = word``: a text value needs quotes
    (``objective = latency`` -> ``objective = "latency"``), the mistake tomllib does not name."""
    found = re.search(r"at line (\d+)", message)
    lines = text.splitlines()
    if not found or not message.startswith("Invalid value") or not 0 < int(found.group(1)) <= len(lines):
        return ""
    bare = re.match(r"\s*([A-Za-z0-9_-]{1,40})\s*=\s*([A-Za-z][A-Za-z0-9_.:/+-]{0,60})\s*(#.*)?$",
                    lines[int(found.group(1)) - 1])
    if not bare:
        return ""
    return f"; a text value needs quotes: {bare.group(1)} = \"{bare.group(2)}\""


def loads_toml(text: str, where: str, *, error: type[PlacetuneError] = ConfigError) -> dict[str, Any]:
    """Decode TOML after :func:`check_shape` (bounded nesting and keys).

    Raises:
        error: not valid TOML (with tomllib's line and column), nested too deeply, a key of too many parts.
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    # a UTF-8 byte-order mark (Windows editors write one) is no statement: tomllib refused it at line 1, column 1
    text = text.removeprefix("\ufeff")
    check_shape(text, where, "toml", error=error)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{where} is not valid TOML: {exc}{_toml_hint(text, str(exc))}") from None
    except ValueError:  # an integer of more than 4300 digits (Python's int conversion limit)
        raise error(f"{where} is not valid TOML: it holds an integer of thousands of digits, too long to read; "
                    "a value here is at most a few digits long") from None
    except (RecursionError, MemoryError):
        raise error(f"{where} is nested too deeply to be read") from None


def loads_json(text: str | bytes, where: str, *, error: type[PlacetuneError] = ConfigError) -> Any:
    """Decode JSON strictly: duplicate keys, ``NaN``, ``Infinity`` and overflowing numbers refused.

    Args:
        text: the JSON text.
        where: what to call it in messages (``plan file x.json``).
        error: the error class raised.

    Raises:
        error: invalid JSON (with line and column), a duplicate key, a non-finite number,
            nesting too deep.
    """
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise error(f"{where} is not UTF-8 text (byte {exc.start})") from None
    check_shape(text, where, "json", error=error)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(where, error),
                          parse_float=_finite_float(where, error), parse_constant=_no_constant(where, error))
    except PlacetuneError:
        raise
    except RecursionError:
        raise error(f"{where} is nested too deeply to be read") from None
    except UnicodeDecodeError as exc:
        raise error(f"{where} is not UTF-8 text (byte {exc.start})") from None
    except ValueError as exc:  # json.JSONDecodeError, or an integer of more than 4300 digits
        pos = f" at line {exc.lineno} column {exc.colno}" if hasattr(exc, "lineno") else ""
        raise error(f"{where} is not valid JSON{pos} ({getattr(exc, 'msg', str(exc)[:80])})") from None


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float (NaN, +-Infinity) replaced by None, recursively."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def dumps_json(obj: Any, **kw: Any) -> str:
    """``json.dumps`` that always writes valid JSON: a non-finite number becomes ``null``."""
    kw.setdefault("default", str)
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:  # a NaN or an infinity somewhere: the slow path, only then
        return json.dumps(finite_json(obj), allow_nan=False, **kw)


def request(agent: Any, trial_number: Any) -> None:
    """What an evaluation stores beside its measurement: ``agent`` None or a name (text of 1 to 200
    characters), ``trial_number`` None or an integer from 0 to 2**63 - 1 (an SQL BIGINT): a
    ``trial_number="x"`` was stored, and every later read of the database refused the row as corrupt;
    ``2**70`` overflowed SQLite in the middle of a batch.

    Raises:
        ConfigError: naming the argument and what is allowed.
    """
    if agent is not None and not (isinstance(agent, str) and 1 <= len(agent) <= 200):
        raise ConfigError(f"agent must be None or a name of 1 to 200 characters, got {_shown(agent)}")
    if trial_number is not None:
        integer(trial_number, "trial_number", 0, 2**63 - 1)
