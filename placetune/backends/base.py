"""Backend protocol and lookup: what every backend provides, :func:`get_backend`, the engine cache directory.

A backend turns a realised placement into a :class:`~placetune.measurement.Measurement`.
Backends are looked up by name with :func:`get_backend`; ``tensorrt`` and ``trtexec``
import TensorRT / run trtexec lazily, so this package imports anywhere.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from placetune.errors import UnknownNameError

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["Backend", "get_backend", "backend_names", "default_cache_dir"]


@runtime_checkable
class Backend(Protocol):
    """What every backend provides.

    Attributes:
        name: ``simulate``, ``tensorrt`` or ``trtexec``.
        simulated: True when figures are not measured on hardware.
    """

    name: str
    simulated: bool

    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """What identifies the measuring environment (backend and version, TensorRT,
        JetPack, power mode). Measurements are cache entries only within one fingerprint."""
        ...

    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> "Measurement":
        """Build and time the realised placement. Failures are returned, not raised."""
        ...


def backend_names() -> list[str]:
    """Names accepted by :func:`get_backend`."""
    return ["simulate", "tensorrt", "trtexec"]


def get_backend(name: str, **options: Any) -> Backend:
    """Create a backend by name (options go to its constructor).

    Raises:
        UnknownNameError: not a backend name.
    """
    if name in ("simulate", "sim", "simulated"):
        from placetune.backends.simulate.simulator import SimulatedJetson

        return SimulatedJetson(**options)
    if name == "tensorrt":
        from placetune.backends.tensorrt.backend import TensorRTBackend

        return TensorRTBackend(**options)
    if name == "trtexec":
        from placetune.backends.trtexec.backend import TrtexecBackend

        return TrtexecBackend(**options)
    raise UnknownNameError(f"unknown backend {name!r}; backends are {', '.join(backend_names())}")


def default_cache_dir(kind: str) -> Path:
    """Where a backend keeps built engines and timing caches: ``$PLACETUNE_CACHE_DIR/<kind>``,
    else ``$XDG_CACHE_HOME/placetune/<kind>`` (``~/.cache/placetune/<kind>``)."""
    env = os.environ.get("PLACETUNE_CACHE_DIR")
    if env:
        return Path(env) / kind
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "placetune" / kind
