"""Backend lookup by name: ``simulate``, ``tensorrt``, ``trtexec`` (implementations imported lazily)."""

from __future__ import annotations

from typing import Any

from placetune.backends.base import Backend
from placetune.errors import UnknownNameError

__all__ = ["get_backend", "backend_names"]


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
