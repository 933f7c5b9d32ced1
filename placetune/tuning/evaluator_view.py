"""What the study's baselines and its trial log use of an evaluator: :class:`EvaluatorView`, the
shape of a :class:`~placetune.tuning.evaluator.Evaluator` that :mod:`placetune.tuning.baselines`,
:mod:`placetune.tuning.concurrent` and :mod:`placetune.tuning.trial_log` are written against.

The evaluator calls those modules, so they know it by this shape, not by its class (no import back
into :mod:`placetune.tuning.evaluator`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from placetune.hardware.platforms import Platform
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.placement.placement import Placement
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings
    from placetune.store.store import Store
    from placetune.tuning.objectives import Objective

__all__ = ["EvaluatorView"]


class EvaluatorView(Protocol):
    """The members of an :class:`~placetune.tuning.evaluator.Evaluator` the baselines and the trial log use."""

    model: Model
    settings: Settings
    platform: Platform
    networks: list[str]
    objective: Objective
    store: Store
    study_name: str
    study: Any
    claims: Any  # a fleet worker's claims (placetune.tuning.fleet_claims.Claims), else None

    def realise(self, placement: Placement) -> Realisation: ...

    def evaluate(self, placement: Placement | dict[str, str], *, agent: str | None = None,
                 trial_number: int | None = None, annotation: dict[str, Any] | None = None) -> Measurement: ...

    def peek(self, placement: Placement) -> Measurement | None: ...

    def realised_key(self, placement: Placement) -> str: ...

    def baseline(self) -> Measurement: ...

    def notify_callbacks(self, placement: Placement, m: Measurement) -> Measurement: ...
