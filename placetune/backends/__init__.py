"""Measurement backends: ``simulate`` (the simulated Jetson), ``tensorrt`` and ``trtexec``.

A backend turns a realised placement into a :class:`~placetune.measurement.Measurement`.
``tensorrt`` and ``trtexec`` import TensorRT / run trtexec lazily, so this package imports anywhere.
"""

from placetune.backends.base import Backend, default_cache_dir
from placetune.backends.registry import backend_names, get_backend

__all__ = ["Backend", "get_backend", "backend_names", "default_cache_dir"]
