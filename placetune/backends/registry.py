"""Backend lookup by name: ``simulate``, ``tensorrt``, ``trtexec`` (implementations imported lazily)."""

from __future__ import annotations

from typing import Any

from placetune.backends.base import Backend
from placetune.errors import ConfigError, UnknownNameError

__all__ = ["get_backend", "backend_names"]


def backend_names() -> list[str]:
    """Names accepted by :func:`get_backend`."""
    return ["simulate", "tensorrt", "trtexec"]


def get_backend(name: str, **options: Any) -> Backend:
    """Create a backend by name (options go to its constructor).

    ``device_profile`` (a :class:`~placetune.calibration.profile.DeviceProfile` or the path of its
    TOML file) makes the simulated backend measure the device the profile describes.

    Raises:
        UnknownNameError: not a backend name.
        ConfigError: a device profile for a backend that is not simulated, or a bad profile.
    """
    profile = options.pop("device_profile", None)
    if name in ("simulate", "sim", "simulated"):
        from placetune.backends.simulate.simulator import SimulatedJetson

        if profile is not None:
            options["profile"] = profile
        return SimulatedJetson(**options)
    if profile is not None and name in backend_names():
        raise ConfigError(f"a device profile describes a simulated device: it applies to --backend simulate, "
                          f"not {name!r} (which measures the device it runs on)")
    if name == "tensorrt":
        from placetune.backends.tensorrt.backend import TensorRTBackend

        return TensorRTBackend(**options)
    if name == "trtexec":
        from placetune.backends.trtexec.backend import TrtexecBackend

        return TrtexecBackend(**options)
    raise UnknownNameError(f"unknown backend {name!r}; backends are {', '.join(backend_names())}")
