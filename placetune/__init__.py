"""placetune: find the best placement of a network's layers on a Jetson's GPU and DLA cores."""

from __future__ import annotations

from .errors import (
    BackendError,
    ConfigError,
    ModelError,
    PlacementError,
    PlacetuneError,
    ShapeError,
    StoreError,
    UnknownNameError,
)
from .layer import Layer, TensorInfo
from .model import Model, parse_shape_spec

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "Model",
    "Layer",
    "TensorInfo",
    "parse_shape_spec",
    "PlacetuneError",
    "ModelError",
    "ShapeError",
    "UnknownNameError",
    "PlacementError",
    "ConfigError",
    "StoreError",
    "BackendError",
]
