"""Backend lookup by name: ``simulate``, ``tensorrt``, ``trtexec`` (implementations imported lazily)."""

from __future__ import annotations

from typing import Any

from placetune.backends.base import Backend
from placetune.errors import ConfigError, UnknownNameError

__all__ = ["get_backend", "backend_names"]


def backend_names() -> list[str]:
    """Names accepted by :func:`get_backend`."""
    return ["simulate", "tensorrt", "trtexec"]


def _construct(cls: Any, name: str, options: dict[str, Any]) -> Backend:
    """``cls(**options)``; an option the backend does not take is a ConfigError naming it."""
    import inspect

    params = inspect.signature(cls).parameters
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        unknown = sorted(k for k in options if k not in params)
        if unknown:
            allowed = ", ".join(k for k, p in params.items() if p.kind is not p.VAR_POSITIONAL) or "none"
            raise ConfigError(f"backend {name!r} has no option(s) {', '.join(repr(k)[:60] for k in unknown[:5])}; "
                              f"its options: {allowed}")
    return cls(**options)


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
        return _construct(SimulatedJetson, name, options)
    if profile is not None and name in backend_names():
        raise ConfigError(f"a device profile describes a simulated device: it applies to --backend simulate, "
                          f"not {name!r} (which measures the device it runs on)")
    if name == "tensorrt":
        from placetune.backends.tensorrt.backend import TensorRTBackend

        return _construct(TensorRTBackend, name, options)
    if name == "trtexec":
        from placetune.backends.trtexec.backend import TrtexecBackend

        return _construct(TrtexecBackend, name, options)
    raise UnknownNameError(f"unknown backend {name!r}; backends are {', '.join(backend_names())}")
