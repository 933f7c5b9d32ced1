"""placetune: find the best placement of a network's layers on a Jetson's GPU and DLA cores.

The public API (everything a custom search agent needs)::

    import placetune as pt

    ev = pt.Evaluator("resnet50", "orin-agx", mode="engine", precision="int8")
    space = ev.space()                       # decision units and masks
    m = ev.evaluate(space.to_placement(space.sample()))
    print(m.median_ms, m.simulated)          # median latency in ms; m.latency_ms holds p90, p99...

Importing placetune registers the Gymnasium environments ``placetune/Placement-v0``,
``placetune/PlacementOneShot-v0`` and ``placetune/PlacementStages-v0``. TensorRT and PyCUDA are imported only by the
backends that need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from placetune.errors import (
    BackendError,
    ConfigError,
    ModelError,
    PlacementError,
    PlacetuneError,
    ShapeError,
    StoreError,
    UnknownNameError,
)
from placetune.envs.ids import register_envs
from placetune.version import __version__

#: Public name -> the module that defines it, imported on first use (``import placetune`` stays light:
#: no SQLAlchemy, ONNX, numpy-heavy module, Optuna, TensorRT, PyCUDA or matplotlib until needed).
_LAZY = {
    "Evaluator": "placetune.tuning.evaluator",
    "EvaluatorStats": "placetune.tuning.stats",
    "Layer": "placetune.model.layer",
    "TensorInfo": "placetune.model.layer",
    "Measurement": "placetune.measurement",
    "Model": "placetune.model.model",
    "parse_shape_spec": "placetune.model.shapes",
    "Constraint": "placetune.tuning.constraints",
    "parse_constraint": "placetune.tuning.constraints",
    "Objective": "placetune.tuning.objectives",
    "get_objective": "placetune.tuning.objectives",
    "register_objective": "placetune.tuning.objectives",
    "Baseline": "placetune.tuning.baselines",
    "study_baselines": "placetune.tuning.baselines",
    "Convergence": "placetune.tuning.convergence",
    "ConvergenceWatch": "placetune.tuning.convergence",
    "verdict": "placetune.tuning.verdict",
    "DEVICES": "placetune.placement.placement",
    "Placement": "placetune.placement.placement",
    "Segment": "placetune.placement.placement",
    "export_plan": "placetune.plan.export",
    "Plan": "placetune.plan.file",
    "load_plan": "placetune.plan.file:load",  # (module:attribute where the name differs)
    "PlanFolder": "placetune.plan.folder",
    "write_plan_folder": "placetune.plan.folder",
    "BuildReport": "placetune.plan.build",
    "build_plan": "placetune.plan.build",
    "runtime": "placetune.runtime:",  # (module: the module itself)
    "PlanRuntime": "placetune.runtime",
    "CutFormat": "placetune.placement.cut_formats",
    "cut_formats": "placetune.placement.cut_formats",
    "Backend": "placetune.backends.base",
    "BackendBase": "placetune.backends.base",
    "Capabilities": "placetune.backends.base",
    "get_backend": "placetune.backends.registry",
    "register_backend": "placetune.backends.registry",
    "DeviceProfile": "placetune.calibration",
    "FitResult": "placetune.calibration",
    "calibrate": "placetune.calibration",
    "fit_profile": "placetune.calibration",
    "load_device_profile": "placetune.calibration",
    "Evaluation": "placetune.backends.simulate.incremental",
    "IncrementalSimulator": "placetune.backends.simulate.incremental",
    "Platform": "placetune.hardware.platforms",
    "get_platform": "placetune.hardware.platforms",
    "platform_names": "placetune.hardware.platforms",
    "register_platform": "placetune.hardware.platforms",
    "JetsonModule": "placetune.hardware.modules",
    "identify_module": "placetune.hardware.modules",
    "InfeasiblePlacement": "placetune.placement.realise",
    "Realisation": "placetune.placement.realise",
    "realise": "placetune.placement.realise",
    "Settings": "placetune.settings",
    "Space": "placetune.placement.space",
    "Unit": "placetune.placement.space",
    "Store": "placetune.store.store",
    "mask_url": "placetune.store.url",
    "mask_secrets": "placetune.safetext",
    "terminal_safe": "placetune.safetext",
    "PlacementEnv": "placetune.envs.sequential",
    "PlacementOneShotEnv": "placetune.envs.oneshot",
    "PlacementStagesEnv": "placetune.envs.stages",
    "make_env": "placetune.envs.registry",
}

register_envs()


def __getattr__(name: str) -> Any:
    """The public API, each name imported from its module the first time it is used."""
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'placetune' has no attribute {name!r}")
    module, colon, attr = where.partition(":")
    value: Any = importlib.import_module(module)
    if not colon or attr:
        value = getattr(value, attr or name)
    globals()[name] = value  # the next use is a plain global
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # what type checkers and IDEs see: the same names, imported eagerly
    from placetune import runtime
    from placetune.backends.base import Backend, BackendBase, Capabilities
    from placetune.backends.registry import get_backend, register_backend
    from placetune.backends.simulate.incremental import Evaluation, IncrementalSimulator
    from placetune.calibration import DeviceProfile, FitResult, calibrate, fit_profile, load_device_profile
    from placetune.envs.oneshot import PlacementOneShotEnv
    from placetune.envs.registry import make_env
    from placetune.envs.sequential import PlacementEnv
    from placetune.envs.stages import PlacementStagesEnv
    from placetune.hardware.modules import JetsonModule, identify_module
    from placetune.hardware.platforms import Platform, get_platform, platform_names, register_platform
    from placetune.measurement import Measurement
    from placetune.model.layer import Layer, TensorInfo
    from placetune.model.model import Model
    from placetune.model.shapes import parse_shape_spec
    from placetune.placement.cut_formats import CutFormat, cut_formats
    from placetune.placement.placement import DEVICES, Placement, Segment
    from placetune.placement.realise import InfeasiblePlacement, Realisation, realise
    from placetune.placement.space import Space, Unit
    from placetune.plan.build import BuildReport, build_plan
    from placetune.plan.export import export_plan
    from placetune.plan.file import Plan
    from placetune.plan.file import load as load_plan
    from placetune.plan.folder import PlanFolder, write_plan_folder
    from placetune.runtime import PlanRuntime
    from placetune.safetext import mask_secrets, terminal_safe
    from placetune.settings import Settings
    from placetune.store.store import Store
    from placetune.store.url import mask_url
    from placetune.tuning.constraints import Constraint, parse_constraint
    from placetune.tuning.evaluator import Evaluator
    from placetune.tuning.stats import EvaluatorStats
    from placetune.tuning.objectives import Objective, get_objective, register_objective

__all__ = [
    "__version__",
    # model and placement
    "Model",
    "Layer",
    "TensorInfo",
    "parse_shape_spec",
    "Placement",
    "Segment",
    "DEVICES",
    "Platform",
    "get_platform",
    "platform_names",
    "register_platform",
    "JetsonModule",
    "identify_module",
    "realise",
    "Realisation",
    "InfeasiblePlacement",
    # search API
    "Space",
    "Unit",
    "Evaluator",
    "EvaluatorStats",
    "Measurement",
    "Settings",
    "Objective",
    "Constraint",
    "parse_constraint",
    "get_objective",
    "register_objective",
    "Baseline",
    "study_baselines",
    "Convergence",
    "ConvergenceWatch",
    "verdict",
    "Store",
    "mask_url",
    "mask_secrets",
    "terminal_safe",
    "Backend",
    "BackendBase",
    "Capabilities",
    "get_backend",
    "register_backend",
    # device profiles and calibration
    "DeviceProfile",
    "IncrementalSimulator",
    "Evaluation",
    "load_device_profile",
    "fit_profile",
    "FitResult",
    "calibrate",
    # plans
    "Plan",
    "export_plan",
    "load_plan",
    "write_plan_folder",
    "BuildReport",
    "build_plan",
    "runtime",
    "PlanRuntime",
    "CutFormat",
    "cut_formats",
    "PlanFolder",
    "make_env",
    "register_envs",
    "PlacementEnv",
    "PlacementOneShotEnv",
    "PlacementStagesEnv",
    # errors
    "PlacetuneError",
    "ModelError",
    "ShapeError",
    "UnknownNameError",
    "PlacementError",
    "ConfigError",
    "StoreError",
    "BackendError",
]
