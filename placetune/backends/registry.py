"""Backends by name: :func:`register_backend`, :func:`get_backend`, :func:`backend_names`.

The built-in backends (``simulate``, ``tensorrt``, ``trtexec``) register themselves here as
``"module:Class"`` strings, imported on first use, so ``import placetune`` stays light. Other
backends register from Python (:func:`register_backend`) or, installed as a package, through the
entry point group ``placetune.backends`` (``name = "package.module:Class"``), read on the first
look-up of a name that is not registered (as pytest and Gymnasium find their plug-ins).
The name is all that the rest of placetune compares: what a backend can do is its declared
:class:`~placetune.backends.base.Capabilities`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Union

from collections.abc import Mapping
import inspect
from importlib.metadata import entry_points

from placetune.backends.base import Backend, BackendBase, Capabilities, check_backend
from placetune.errors import ConfigError, UnknownNameError

__all__ = ["get_backend", "backend_names", "register_backend", "unregister_backend", "backend_capabilities",
           "why_unmeasurable", "ENTRY_POINT_GROUP"]

#: The entry point group installed packages add backends to.
ENTRY_POINT_GROUP = "placetune.backends"

Factory = Union[Callable[..., Backend], str]


@dataclass
class _Entry:
    name: str
    factory: Factory  # a class or callable, or "module:attribute" imported on first use
    aliases: tuple[str, ...]

    def resolve(self) -> Callable[..., Backend]:
        if isinstance(self.factory, str):
            module, _, attr = self.factory.partition(":")
            try:
                obj: Any = importlib.import_module(module)
                for part in attr.split("."):
                    obj = getattr(obj, part)
            except (ImportError, AttributeError) as exc:
                raise ConfigError(f"backend {self.name!r}: cannot import {self.factory!r} ({exc})") from None
            self.factory = obj
        factory = self.factory
        assert not isinstance(factory, str)
        return factory


_ENTRIES: dict[str, _Entry] = {}
_ALIASES: dict[str, str] = {}  # alias -> name
_entry_points_read = False


def register_backend(name: str, factory: Factory, *, aliases: tuple[str, ...] | list[str] = (),
                     replace: bool = False) -> None:
    """Make ``get_backend(name, **options)`` return ``factory(**options)``.

    Args:
        name: the backend's name (``--backend NAME``, ``[study] backend``).
        factory: a backend class (or any callable returning a backend), or ``"module:Class"``
            imported on first use. A class declares its :class:`Capabilities` as ``capabilities``.
        aliases: other names for it.
        replace: allow replacing a registered name (else a ConfigError).

    Raises:
        ConfigError: the name or an alias is taken (and ``replace`` is False), or empty.
    """
    names = (name, *aliases)
    if any(not isinstance(n, str) or not n.strip() for n in names):
        raise ConfigError(f"a backend name must be a non-empty string (got {names!r})")
    if not replace:
        taken = [n for n in names if n in _ENTRIES or n in _ALIASES]
        if taken:
            raise ConfigError(f"backend name {taken[0]!r} is already registered; pass replace=True to replace it")
    unregister_backend(name)
    _ENTRIES[name] = _Entry(name, factory, tuple(aliases))
    for alias in aliases:
        _ALIASES[alias] = name


def unregister_backend(name: str) -> None:
    """Forget a registered backend and its aliases (nothing when it is not registered)."""
    entry = _ENTRIES.pop(name, None)
    if entry is not None:
        for alias in entry.aliases:
            _ALIASES.pop(alias, None)


def _read_entry_points() -> None:
    """Register the ``placetune.backends`` entry points of installed packages (once)."""
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _ENTRIES and ep.name not in _ALIASES:
            _ENTRIES[ep.name] = _Entry(ep.name, ep.value, ())


def _entry(name: str) -> _Entry:
    key = _ALIASES.get(name, name)
    if key not in _ENTRIES:
        _read_entry_points()
        key = _ALIASES.get(name, name)
    if key not in _ENTRIES:
        raise UnknownNameError(f"unknown backend {str(name)[:60]!r}; backends are {', '.join(backend_names())}")
    return _ENTRIES[key]


def backend_names() -> list[str]:
    """Names accepted by :func:`get_backend` (registered and installed; aliases left out)."""
    _read_entry_points()
    return list(_ENTRIES)


def backend_capabilities(name: str) -> Capabilities:
    """The declared capabilities of the backend registered as ``name`` (imports its class, creates nothing).

    Raises:
        UnknownNameError: not a backend name.
        ConfigError: its factory declares no :class:`Capabilities` (a plain function).
    """
    factory = _entry(name).resolve()
    caps = getattr(factory, "capabilities", None) if isinstance(factory, type) else None
    if not isinstance(caps, Capabilities):
        raise ConfigError(f"backend {name!r} declares no capabilities: register a class with a "
                          "`capabilities = Capabilities(...)` attribute")
    return caps


def why_unmeasurable(name: str, metric: str, mode: str, options: Mapping[str, Any] | None = None) -> str | None:
    """Why the backend registered as ``name``, created with ``options``, never reports ``metric`` in
    ``mode`` (None: it does); asked of its class, creating nothing (:meth:`BackendBase.why_unmeasurable`;
    a factory that is no such class answers from its declared capabilities).

    Raises:
        UnknownNameError: not a backend name.
    """
    factory = _entry(name).resolve()
    if isinstance(factory, type) and issubclass(factory, BackendBase):
        return factory.why_unmeasurable(metric, mode, options or {})
    return backend_capabilities(name).why_unmeasurable(name, metric, mode)


def _construct(factory: Callable[..., Backend], name: str, options: dict[str, Any]) -> Backend:
    """``factory(**options)``; an option the backend does not take is a ConfigError naming it."""
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin or C callable: no signature to check against
        params = None
    if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(k for k in options if k not in params)
        if "device_profile" in unknown:
            raise ConfigError(f"a device profile describes a simulated device: it applies to --backend simulate, "
                              f"not {name!r} (which measures the device it runs on)")
        if unknown:
            allowed = ", ".join(k for k, p in params.items() if p.kind is not p.VAR_POSITIONAL) or "none"
            raise ConfigError(f"backend {name!r} has no option(s) {', '.join(repr(k)[:60] for k in unknown[:5])}; "
                              f"its options: {allowed}")
    return check_backend(factory(**options))


def get_backend(name: str, **options: Any) -> Backend:
    """Create a backend by name (options go to its factory).

    ``device_profile`` (a :class:`~placetune.calibration.profile.DeviceProfile` or the path of its
    TOML file) makes the simulated backend measure the device the profile describes.

    Raises:
        UnknownNameError: not a backend name.
        ConfigError: an option the backend does not take (a device profile for a backend that is
            not simulated), a bad profile, or a factory that returns no backend.
    """
    entry = _entry(name)
    return _construct(entry.resolve(), name, options)


register_backend("simulate", "placetune.backends.simulate.simulator:SimulatedJetson", aliases=("sim", "simulated"))
register_backend("tensorrt", "placetune.backends.tensorrt.backend:TensorRTBackend")
register_backend("trtexec", "placetune.backends.trtexec.backend:TrtexecBackend")
