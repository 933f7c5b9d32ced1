"""Re-measuring a plan's requested placement on the simulated Jetson."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placetune.errors import ModelError, PlacetuneError
from placetune.placement.placement import Placement
from placetune.model.model import Model
from placetune.settings import stored_settings
from placetune.tuning.evaluator import Evaluator

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.plan.file import Plan

__all__ = ["simulate_plan"]


def simulate_plan(plan: "Plan", model: "Model | None" = None) -> "Measurement":
    """Measure the plan's requested placement on the simulated Jetson (nothing is stored).

    Used where a plan has no timeline (e.g. a hardware plan): the result is labelled
    simulated whatever the plan was.

    Args:
        plan: the plan.
        model: its model (default: loaded from the plan's ``zoo`` name or ``path``).

    Raises:
        ModelError: the model cannot be loaded or is not the plan's model.
    """
    if model is None:
        info = plan.model
        errors: list[str] = []
        for source, kw in ((info.get("zoo"), {"batch": plan.batch}),
                           (info.get("path"), {"shapes": {k: tuple(v) for k, v in
                                                          (info.get("input_shapes") or {}).items()} or None})):
            if not source:
                continue
            try:
                model = Model.load(str(source), **kw)
                break
            except PlacetuneError as exc:
                errors.append(str(exc))
        if model is None:
            why = "; ".join(errors) or "the plan names neither a zoo model nor an ONNX file"
            raise ModelError(f"cannot load the plan's model {info.get('name')!r} to simulate it ({why}): "
                             "pass the ONNX file (--model PATH)")
    plan.check_model(model)
    keep = {k: plan.settings[k] for k in ("gpu_fallback", "dla_core", "trt_version", "frames_in_flight", "replicas",
                                          "power_mode") if plan.settings.get(k) is not None}
    settings = stored_settings({**keep, "mode": plan.mode, "precision": plan.precision})
    ev = Evaluator(model, plan.platform, "simulate", settings=settings, store=None)
    try:
        return ev.evaluate(Placement(model, plan.requested), agent="plan")
    finally:
        ev.close()
