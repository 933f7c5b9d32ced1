"""Measurement backends: ``simulate`` (the simulated Jetson), ``tensorrt`` and ``trtexec``, and the
contract and registry a new backend uses (:mod:`placetune.backends.base`, :mod:`placetune.backends.registry`).

A backend turns a realised placement into a :class:`~placetune.measurement.Measurement`.
``tensorrt`` and ``trtexec`` import TensorRT / run trtexec lazily, so this package imports anywhere.
"""

from placetune.backends.base import Backend, BackendBase, Capabilities, default_cache_dir
from placetune.backends.registry import backend_names, get_backend, register_backend, unregister_backend

__all__ = ["Backend", "BackendBase", "Capabilities", "get_backend", "backend_names", "register_backend",
           "unregister_backend", "default_cache_dir"]
