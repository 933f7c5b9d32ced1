"""The Backend protocol (what every backend provides) and the engine cache directory.

A backend turns a realised placement into a :class:`~placetune.measurement.Measurement`.
Backends are looked up by name with :func:`placetune.backends.registry.get_backend`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from placetune.settings import default_cache_dir  # noqa: F401 - re-exported (placetune.backends)


if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["Backend", "default_cache_dir"]


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
