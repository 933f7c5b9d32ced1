"""What the plan's appliers read of a plan: :class:`PlanView`, the shape of a
:class:`~placetune.plan.file.Plan` that :mod:`placetune.plan.apply` and :mod:`placetune.plan.trtexec` need.

``Plan.apply`` and ``Plan.trtexec_commands`` call those modules, so they know the plan by this shape,
not by its class (no import back into :mod:`placetune.plan.file`).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["PlanView"]


class PlanView(Protocol):
    """The fields and methods of a :class:`~placetune.plan.file.Plan` that applying it or writing its
    ``trtexec`` commands reads."""

    model: dict[str, Any]
    platform: str
    mode: str
    precision: str
    batch: int
    engines: list[dict[str, Any]]
    simulated: bool
    versions: dict[str, Any]
    settings: dict[str, Any]
    source: dict[str, Any]
    int8_ranges: str | None
    measured: dict[str, Any]

    @property
    def layer_names(self) -> list[str]: ...

    @property
    def gpu_fallback(self) -> bool: ...

    def engine(self, segment: int | None = None, replica: int | str | None = None) -> dict[str, Any]: ...
