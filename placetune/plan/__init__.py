"""Plans: the exported best placement, its validation, export formats and application to TensorRT."""

from placetune.plan.export import export_plan
from placetune.plan.file import Plan, load
from placetune.plan.folder import PlanFolder, write_plan_folder

__all__ = ["Plan", "PlanFolder", "export_plan", "load", "write_plan_folder"]
