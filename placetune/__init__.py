"""placetune: find the best placement of a network's layers on a Jetson's GPU and DLA cores.

The public API (everything a custom search agent needs)::

    import placetune as pt

    ev = pt.Evaluator("resnet50", "orin-agx", mode="engine", precision="int8")
    space = ev.space()                       # decision units and masks
    m = ev.evaluate(space.to_placement(space.sample()))
    print(m.latency_ms["median"], m.simulated)

Importing placetune registers the Gymnasium environments ``placetune/Placement-v0``
and ``placetune/PlacementOneShot-v0``. TensorRT and PyCUDA are imported only by the
backends that need them.
"""

from __future__ import annotations

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
from placetune.tuning.evaluator import Evaluator, EvaluatorStats
from placetune.model.layer import Layer, TensorInfo
from placetune.measurement import Measurement
from placetune.model.model import Model
from placetune.model.shapes import parse_shape_spec
from placetune.tuning.constraints import Constraint, parse_constraint
from placetune.tuning.baselines import Baseline, study_baselines
from placetune.tuning.convergence import Convergence, ConvergenceWatch
from placetune.tuning.verdict import verdict
from placetune.tuning.objectives import Objective, get_objective
from placetune.placement.placement import DEVICES, Placement, Segment
from placetune.plan.export import export_plan
from placetune.plan.file import Plan
from placetune.plan.file import load as load_plan
from placetune.plan.folder import PlanFolder, write_plan_folder
from placetune.plan.build import BuildReport, build_plan
from placetune import runtime
from placetune.runtime import PlanRuntime
from placetune.placement.cut_formats import CutFormat, cut_formats
from placetune.backends.base import Backend
from placetune.backends.registry import get_backend
from placetune.calibration import DeviceProfile, FitResult, calibrate, fit_profile, load_device_profile
from placetune.backends.simulate.incremental import Evaluation, IncrementalSimulator
from placetune.hardware.platforms import Platform, get_platform, platform_names
from placetune.placement.realise import InfeasiblePlacement, Realisation, realise
from placetune.settings import Settings
from placetune.placement.space import Space, Unit
from placetune.store import Store, mask_url
from placetune.envs import PlacementEnv, PlacementOneShotEnv, make_env, register_envs

register_envs()

from placetune.version import __version__  # noqa: E402

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
    "Baseline",
    "study_baselines",
    "Convergence",
    "ConvergenceWatch",
    "verdict",
    "Store",
    "mask_url",
    "Backend",
    "get_backend",
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
