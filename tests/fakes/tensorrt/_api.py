"""Holds the fake ``tensorrt`` to the API table of the TensorRT version it emulates.

The tables (``tests/trt_api/tensorrt-<ver>.json``) are generated from TensorRT's pybind11
sources by ``tests/trt_api/generate.py``. :func:`enforce` makes the fake module behave like the
real bindings towards its callers:

* a module attribute, class member or enum member the table lacks raises AttributeError
  (``hasattr`` is False), whatever the fake defines for its own use;
* a call to a method, function or constructor with an unknown keyword, a missing argument or
  too many arguments raises TypeError (pybind11's "incompatible function arguments"); a class
  the bindings give no constructor raises TypeError when instantiated from outside;
* a read-only property (and an attribute the class does not have) cannot be set from outside;
* enums are not iterable or subscriptable (pybind11 enums are not Python enums).

Calls and accesses from the fake's own code (``tensorrt`` and ``tensorrt._api``) are not
checked: the fake may keep private helpers and construct its objects as it likes. The fake
itself must not create public attributes the real class lacks (a RuntimeError says so).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from enum import EnumMeta, IntEnum
from pathlib import Path
from types import ModuleType

#: where the generated tables live (tests/trt_api next to tests/fakes)
TABLE_DIR = Path(os.environ.get("PLACETUNE_FAKE_TRT_API_DIR") or Path(__file__).resolve().parents[2] / "trt_api")
_INTERNAL = {"tensorrt", __name__, "enum", "functools", "copy", "copyreg", "pickle", "json", "inspect", "typing",
             "abc", "dataclasses", "pprint", "reprlib", "types"}


def table_version(version: str) -> str:
    """The table a TensorRT version is held to: 8.5.x -> 8.5, 8.6.x -> 8.6, 10.0-10.15 -> 10.3,
    10.16 on -> 10.16 (the ONNX parser's ADJUST_FOR_DLA and trtexec's ``--adjustForDLA`` are new in
    10.16), 11.x -> the newest 11.* table."""
    parts = [int(x) for x in version.split(".")[:2]]
    major, minor = parts[0], (parts[1] if len(parts) > 1 else 0)
    if major == 8 and minor in (5, 6):
        return f"8.{minor}"
    if major == 10:
        return "10.16" if minor >= 16 else "10.3"
    if major == 11:
        elevens = sorted((p.stem.split("-", 1)[1] for p in TABLE_DIR.glob("tensorrt-11.*.json")),
                         key=lambda v: tuple(int(x) for x in v.split(".")))
        if elevens:
            return elevens[-1]
    raise ImportError(f"fake tensorrt: no API table for TensorRT {version} (have 8.5.x, 8.6.x, 10.x, 11.x)")


def load_table(version: str) -> dict:
    path = TABLE_DIR / f"tensorrt-{table_version(version)}.json"
    with open(path) as fh:
        return json.load(fh)


def _external(depth: int = 2) -> bool:
    """Whether the caller ``depth`` frames up is outside the fake."""
    try:
        f = sys._getframe(depth)
    except ValueError:  # pragma: no cover
        return True
    return f.f_globals.get("__name__") not in _INTERNAL


# ------------------------------------------------------------------------------ signatures
def describe(sig) -> str:
    if sig is None:
        return "(self, *args)"
    return "(self" + "".join(", " + ("arg%d" % k if p == "?" else p.rstrip("=") + ("=..." if p.endswith("=") else ""))
                             for k, p in enumerate(sig)) + ")"


def accepts(sig, args: tuple, kwargs: dict) -> bool:
    """pybind11's overload match, by arity and keyword names only."""
    if sig is None:
        return not kwargs
    if len(args) > len(sig):
        return False
    rest = sig[len(args):]
    names = {p.rstrip("="): p.endswith("=") for p in rest if p != "?"}
    if any(k not in names for k in kwargs):
        return False
    for p in rest:
        if p == "?" or (not p.endswith("=") and p not in kwargs):
            return False
    return True


def incompatible(qual: str, sigs: list, args: tuple, kwargs: dict) -> TypeError:
    lines = "\n".join(f"    {k + 1}. {describe(s)}" for k, s in enumerate(sigs))
    shown = ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])
    return TypeError(f"{qual}(): incompatible function arguments. The following argument types are supported:\n"
                     f"{lines}\n\nInvoked with: {shown}")


def checked(fn, qual: str, sigs: list, bound: bool = True):
    """``fn`` that raises TypeError when called (from outside) in a shape no overload accepts."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        call_args = args[1:] if bound else args
        if not any(accepts(s, call_args, kwargs) for s in sigs) and _external():
            raise incompatible(qual, sigs, call_args, kwargs)
        return fn(*args, **kwargs)

    wrapper.__trt_signatures__ = sigs
    return wrapper


def checked_init(fn, qual: str, sigs: list | None):
    @functools.wraps(fn)
    def __init__(self, *args, **kwargs):
        if _external():
            if sigs is None and type(self).__module__ == "tensorrt":
                raise TypeError(f"{qual}: No constructor defined!")
            if sigs is not None and not any(accepts(s, args, kwargs) for s in sigs):
                raise incompatible(f"{qual}.__init__", sigs, args, kwargs)
        if fn is object.__init__:
            fn(self)
        else:
            fn(self, *args, **kwargs)

    return __init__


# ------------------------------------------------------------------------------ enums
class PybindEnumMeta(EnumMeta):
    """A pybind11 enum: members by attribute, ``__members__``, construction from int; no
    iteration, ``len``, ``in`` or ``Enum["NAME"]`` from outside."""

    def __iter__(cls):
        if _external():
            raise TypeError(f"'pybind11_type' object is not iterable ({cls.__name__})")
        return super().__iter__()

    def __len__(cls):
        if _external():
            raise TypeError(f"object of type 'pybind11_type' has no len() ({cls.__name__})")
        return super().__len__()

    def __contains__(cls, member):
        if _external():
            raise TypeError(f"argument of type 'pybind11_type' is not iterable ({cls.__name__})")
        return super().__contains__(member)

    def __getitem__(cls, name):
        if _external():
            raise TypeError(f"'pybind11_type' object is not subscriptable ({cls.__name__})")
        return super().__getitem__(name)


class PybindEnum(IntEnum, metaclass=PybindEnumMeta):
    def __str__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__}.{self.name}: {int(self)}>"


def make_enum(table: dict, name: str) -> type:
    spec = table["enums"][name]
    members = spec if isinstance(spec, list) else spec["members"]
    short = name.rpartition(".")[2]
    enum = PybindEnum(short, [(m, i) for i, m in enumerate(members)])
    enum.__module__ = "tensorrt"
    enum.__qualname__ = name
    return enum


def enum_members(table: dict, name: str) -> list[str]:
    spec = table["enums"][name]
    return spec if isinstance(spec, list) else spec["members"]


# ------------------------------------------------------------------------------ classes
def class_members(table: dict, name: str) -> dict[str, str]:
    """Every member of class ``name`` (its bases included): name -> kind, kind one of
    ``method``, ``ro``, ``rw``, ``wo`` (properties) or ``attr``."""
    out: dict[str, str] = {}
    todo = [name]
    while todo:
        c = table["classes"].get(todo.pop(0))
        if c is None:
            continue
        for m in c["methods"]:
            out.setdefault(m, "method")
        for p, mode in c["properties"].items():
            out.setdefault(p, mode)
        for a in c["attributes"]:
            out.setdefault(a, "attr")
        todo.extend(c["bases"])
    return out


def method_signatures(table: dict, name: str, method: str) -> list | None:
    todo = [name]
    while todo:
        c = table["classes"].get(todo.pop(0))
        if c is None:
            continue
        if method in c["methods"]:
            return c["methods"][method]
        todo.extend(c["bases"])
    return None


def _public(name: str) -> bool:
    return not name.startswith("_")


def enforce_class(cls: type, table: dict, api_name: str) -> None:
    members = class_members(table, api_name)
    qual = f"tensorrt.{api_name}"
    for name, value in list(vars(cls).items()):
        if name == "__init__":
            spec = table["classes"][api_name]
            setattr(cls, "__init__", checked_init(value, qual, spec["init"]))
            continue
        if not _public(name):
            continue
        kind = members.get(name)
        if kind is None:
            delattr(cls, name)  # the real class has no such member
        elif kind == "method" and callable(value) and not isinstance(value, (type, staticmethod, classmethod)):
            sigs = method_signatures(table, api_name, name)
            setattr(cls, name, checked(value, f"{qual}.{name}", sigs))
        elif isinstance(value, property) and kind == "ro" and value.fset is not None:
            setattr(cls, name, property(value.fget, None, None, value.__doc__))
    if "__init__" not in vars(cls):
        # inherited constructor: still held to this class's table entry
        base_init = cls.__init__
        setattr(cls, "__init__", checked_init(base_init, qual, table["classes"][api_name]["init"]))
    cls.__trt_members__ = members
    cls.__trt_name__ = api_name
    if "__setattr__" not in vars(cls):
        cls.__setattr__ = _setattr


def _setattr(self, name: str, value) -> None:
    if _public(name):
        members = type(self).__trt_members__
        kind = members.get(name)
        fake_class = type(self).__module__ == "tensorrt"
        if not _external():
            if kind is None and fake_class:
                raise RuntimeError(f"fake tensorrt bug: {type(self).__trt_name__}.{name} is not in the API table; "
                                   "keep the fake's own state in private attributes")
        elif kind in ("ro", "method") or (kind in (None, "attr") and fake_class):
            raise AttributeError(f"'tensorrt.{type(self).__trt_name__}' object attribute '{name}' is read-only"
                                 if kind else f"'tensorrt.{type(self).__trt_name__}' object has no attribute '{name}'")
    object.__setattr__(self, name, value)


# ------------------------------------------------------------------------------ module
class CheckedModule(ModuleType):
    """The fake module: names the table lacks are hidden from everybody but the fake."""

    def __getattribute__(self, name: str):
        if _public(name) and name not in ModuleType.__getattribute__(self, "__trt_allowed__") and _external():
            raise AttributeError(f"module 'tensorrt' has no attribute '{name}'")
        return ModuleType.__getattribute__(self, name)

    def __dir__(self):
        allowed = ModuleType.__getattribute__(self, "__trt_allowed__")
        return sorted(n for n in ModuleType.__dir__(self) if not _public(n) or n in allowed)


def enforce(module_name: str, table: dict) -> None:
    mod = sys.modules[module_name]
    g = vars(mod)
    allowed = set(table["module"]["functions"]) | set(table["module"]["attributes"])
    allowed |= {c for c in table["classes"] if "." not in c}
    allowed |= {e for e in table["enums"] if "." not in e}
    for name, value in list(g.items()):
        if not _public(name) or name not in allowed:
            continue
        if isinstance(value, type) and value.__module__ == "tensorrt" and name in table["classes"]:
            enforce_class(value, table, name)
        elif callable(value) and not isinstance(value, type) and name in table["module"]["functions"]:
            g[name] = checked(value, f"tensorrt.{name}", table["module"]["functions"][name], bound=False)
    g["__trt_allowed__"] = frozenset(allowed)
    g["__trt_table__"] = table
    mod.__class__ = CheckedModule
