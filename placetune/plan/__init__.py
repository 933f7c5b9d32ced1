"""Plans: the exported best placement, its validation, export formats and application to TensorRT."""

from placetune.plan.export import export_plan
from placetune.plan.file import Plan, load

__all__ = ["Plan", "export_plan", "load"]
