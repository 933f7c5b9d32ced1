"""The baselines every run measures first (all-GPU, all-DLA with fallback, the per-core split), and
assignments up to masks and DLA-core relabelling."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from placetune.placement.placement import Placement

if TYPE_CHECKING:
    from placetune.placement.space import Space

__all__ = ["baseline_assignments", "canonical", "project"]


def project(space: "Space", assignment: Sequence[int]) -> list[int]:
    """Replace masked devices by the unit's first allowed device (the GPU when allowed).

    This is what realisation does with GPU fallback for layers the DLA cannot run.
    """
    out = []
    for i, a in enumerate(assignment):
        a = int(a)
        if not space.mask[i, a]:
            allowed = np.flatnonzero(space.mask[i])
            a = 0 if space.mask[i, 0] else int(allowed[0])
        out.append(a)
    return out


def baseline_assignments(space: "Space") -> dict[str, list[int]]:
    """The baselines of :meth:`placetune.tuning.evaluator.Evaluator.baselines` as masked assignments.

    All-GPU, all-DLA on each DLA device of the space (masked units stay on the GPU, as
    GPU fallback would do) and, when the space has two DLA cores (pipeline mode), the
    first half of the layers on DLA0 and the second half on DLA1.
    """
    out: dict[str, list[int]] = {"all-gpu": project(space, [0] * space.n_units)}
    dlas = [k for k, d in enumerate(space.devices) if d != "GPU"]
    for k in dlas:
        out[f"all-{space.devices[k].lower()}"] = project(space, [k] * space.n_units)
    if len(dlas) >= 2:
        out["split-dla0-dla1"] = project(space, space.from_placement(Placement.split_dla(space.model)))
    seen: set[tuple[int, ...]] = set()
    unique = {}
    for k, a in out.items():
        if tuple(a) not in seen:
            seen.add(tuple(a))
            unique[k] = a
    return unique


def canonical(space: "Space", assignment: Sequence[int]) -> tuple[int, ...]:
    """An assignment up to relabelling the DLA cores (identical hardware: DLA0 <-> DLA1), so that
    twins have one key: the first DLA core used is called DLA0.

    Example:
        >>> from placetune import Model, Space
        >>> space = Space(Model.load("seed-block"), "orin-agx", mode="pipeline")
        >>> canonical(space, [2] * space.n_units) == canonical(space, [1] * space.n_units)
        True
    """
    dlas = [k for k, d in enumerate(space.devices) if d != "GPU"]
    if len(dlas) < 2:
        return tuple(int(x) for x in assignment)
    order: dict[int, int] = {}
    for x in assignment:
        if x in dlas and x not in order:
            order[int(x)] = dlas[len(order)]
    plain = tuple(map(int, assignment))
    if all(k == v for k, v in order.items()):  # DLA0 already comes first
        return plain
    swapped = tuple(order.get(x, x) for x in plain)
    return swapped if space.is_allowed(swapped) else plain
