"""The network: ONNX import (weights never loaded), constant folding, layers and their work, the built-in zoo."""

from placetune.model.layer import Layer, TensorInfo
from placetune.model.model import Model
from placetune.model.shapes import parse_shape_spec

__all__ = ["Model", "Layer", "TensorInfo", "parse_shape_spec"]
