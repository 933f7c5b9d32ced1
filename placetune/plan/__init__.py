"""Plans: the exported best placement, its validation, export formats and application to TensorRT."""

from placetune.plan.plan import Plan, export_plan, load

__all__ = ["Plan", "export_plan", "load"]
