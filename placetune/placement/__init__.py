"""Placements: layer -> device maps, what TensorRT realises of them, the search space, ONNX cuts per segment."""

from placetune.placement.placement import DEVICES, Placement, Segment
from placetune.placement.realise import InfeasiblePlacement, Realisation, realise
from placetune.placement.space import Space, Unit

__all__ = ["DEVICES", "Placement", "Segment", "InfeasiblePlacement", "Realisation", "realise", "Space", "Unit"]
