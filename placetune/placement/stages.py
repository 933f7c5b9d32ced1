"""Stage structure of a placement: a few contiguous stages in topological order, one device each.

The best pipeline placements are a handful of contiguous stages (e.g. ``DLA0 51 layers | GPU 3
| DLA1 56 | GPU 66``); per-unit independent choices almost never produce them. A
:class:`~placetune.placement.space.Space` with ``granularity="stages"`` has the fusion groups
as units (in topological order, so independent branches of a block are consecutive units and
may take different devices) and draws samples and neighbours from this module: an assignment is
described by its :class:`Stage` list, and the moves add, remove or shift a cut or change a
stage's device.

A unit the DLA cannot run keeps the GPU inside a DLA stage (as GPU fallback would do): it does
not break the stage. :func:`stages_of` reads the stages back from an assignment that way.

Example:
    >>> from placetune import Model, Space
    >>> space = Space(Model.load("seed-block"), "orin-agx", mode="pipeline", granularity="stages")
    >>> a = assignment_of(space, [Stage(0, 2, 1), Stage(2, space.n_units, 0)])
    >>> [(s.start, s.end, space.devices[s.device]) for s in stages_of(space, a)]
    [(0, 2, 'DLA0'), (2, 5, 'GPU')]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np

__all__ = ["Stage", "cut_points", "stages_of", "assignment_of", "sample_stages", "stage_moves", "random_stage_move",
           "DEFAULT_MAX_STAGES"]

#: Stages a sample or a move may produce (the best pipeline plans have 3-4).
DEFAULT_MAX_STAGES = 6


class StageSpace(Protocol):
    """What the stage functions read of a space: :class:`~placetune.placement.space.Space` has it
    (the space calls these functions, so they know it by this shape, not by its class)."""

    mask: np.ndarray
    units: list[Any]
    model: Any
    devices: tuple[str, ...]
    #: What these functions compute once per space (its block boundaries, per-device tables), by name.
    stage_cache: dict[str, Any]

    @property
    def n_units(self) -> int: ...

    @property
    def n_devices(self) -> int: ...


class Stage(NamedTuple):
    """Units ``[start, end)`` of a space on device index ``device``."""

    start: int
    end: int
    device: int


def _normalise(stages: Sequence[Stage]) -> list[Stage]:
    """Drop empty stages and merge neighbours on the same device."""
    prev = -1
    for s in stages:  # most lists are already normal: returned as they are
        if s.end <= s.start or s.device == prev:
            break
        prev = s.device
    else:
        return list(stages)
    out: list[Stage] = []
    for s in stages:
        if s.end <= s.start:
            continue
        if out and out[-1].device == s.device:
            out[-1] = Stage(out[-1].start, s.end, s.device)
        else:
            out.append(Stage(s.start, s.end, s.device))
    return out


def _on_device(space: StageSpace) -> list[list[int]]:
    """Per device of the space, the device each unit takes in a stage on it: the device, or for
    a unit masked on it the GPU (or its first allowed device); cached on the space."""
    cached = space.stage_cache.get("on_device")
    if cached is not None:
        return cached
    mask = space.mask
    out = []
    for k in range(space.n_devices):
        out.append([k if mask[i, k] else (0 if mask[i, 0] else int(np.flatnonzero(mask[i])[0]))
                    for i in range(space.n_units)])
    space.stage_cache["on_device"] = out
    return out


def assignment_of(space: StageSpace, stages: Sequence[Stage]) -> list[int]:
    """Unit assignment of a stage list; units masked on their stage's device take the GPU
    (or their first allowed device)."""
    on = _on_device(space)
    out = [0] * space.n_units
    for s in stages:
        out[s.start:s.end] = on[s.device][s.start:s.end]
    return out


def stages_of(space: StageSpace, assignment: Sequence[int]) -> list[Stage]:
    """The stages of an assignment.

    A unit that is on the GPU only because its stage's device is masked for it stays in that
    stage; any other change of device starts a new stage.
    """
    mask = space.mask
    out: list[Stage] = []
    start, dev = 0, int(assignment[0]) if len(assignment) else 0
    for i in range(1, len(assignment)):
        a = int(assignment[i])
        if a == dev:
            continue
        if a == 0 and not mask[i, dev]:  # fallback inside the stage
            continue
        if dev == 0 and _fallback_run(space, assignment, start, i, a):
            # the stage so far was GPU only because it was masked for device ``a``: extend it
            dev = a
            continue
        out.append(Stage(start, i, dev))
        start, dev = i, a
    if len(assignment):
        out.append(Stage(start, len(assignment), dev))
    return out


def _fallback_run(space: StageSpace, assignment: Sequence[int], start: int, end: int, k: int) -> bool:
    """True when units ``[start, end)`` are all GPU units masked on device ``k``."""
    return k != 0 and all(int(assignment[j]) == 0 and not space.mask[j, k] for j in range(start, end))


def cut_points(space: StageSpace) -> list[int]:
    """Positions ``c`` (a cut between units ``c-1`` and ``c``) that only one tensor crosses.

    These are the block boundaries of the network (between residual blocks, inception
    modules...), where a pipeline cut costs a single boundary; cached on the space.
    """
    cached = space.stage_cache.get("cut_points")
    if cached is not None:
        return cached
    model = space.model
    unit = {n: u.index for u in space.units for n in u.layers}
    n = space.n_units
    crossing = np.zeros(n + 1, dtype=np.int64)  # tensors (producer layers) crossing each position
    for u in space.units:
        for name in u.layers:
            cons = [unit[c] for c in model.layer(name).consumers if c in unit]
            last = max(cons, default=u.index)
            if last > u.index:
                crossing[u.index + 1:last + 1] += 1
    out = [c for c in range(1, n) if crossing[c] <= 1]
    space.stage_cache["cut_points"] = out
    return out


def _devices_for(space: StageSpace, s: int, e: int) -> list[int]:
    """Devices that at least one unit of ``[s, e)`` can use (the GPU always)."""
    first = space.stage_cache.get("next_allowed")
    if first is None:  # per device, the first unit at or after each position that can use it
        nxt = np.full((space.n_units + 1, space.n_devices), space.n_units, dtype=np.intp)
        for i in range(space.n_units - 1, -1, -1):
            nxt[i] = np.where(space.mask[i] > 0, i, nxt[i + 1])
        first = space.stage_cache["next_allowed"] = nxt.tolist()
    row = first[s]
    return [k for k in range(space.n_devices) if k == 0 or row[k] < e]


def sample_stages(space: StageSpace, rng: np.random.Generator, max_stages: int = DEFAULT_MAX_STAGES) -> list[Stage]:
    """A random stage list: 1..max_stages stages, uniform cuts, each device differing from its neighbour's."""
    n = space.n_units
    k = int(rng.integers(1, min(max_stages, n) + 1))
    cuts = sorted(rng.choice(np.arange(1, n), size=k - 1, replace=False).tolist()) if k > 1 else []
    bounds = [0, *cuts, n]
    stages: list[Stage] = []
    prev = -1
    for s, e in zip(bounds[:-1], bounds[1:]):
        options = [d for d in _devices_for(space, s, e) if d != prev] or [0]
        d = int(options[int(rng.integers(0, len(options)))])
        stages.append(Stage(s, e, d))
        prev = d
    return _normalise(stages)


def stage_moves(space: StageSpace, stages: Sequence[Stage], *, max_stages: int = DEFAULT_MAX_STAGES,
                shifts: Sequence[int] = (1, 2, 4, 8, 16), cuts_only: bool = False) -> list[list[Stage]]:
    """Every neighbour of a stage list (deduplicated, never the list itself).

    Moves: shift a cut by each of ``shifts`` units either way, or to a block boundary
    (:func:`cut_points`); shift two cuts together by 1-2 units each; remove a cut (the merged stage
    takes either side's device); change a stage's device; split a stage in the middle or at a
    quarter (a new stage on another device, while fewer than ``max_stages``). ``cuts_only``:
    the shifts only (the devices and the number of stages stay).
    """
    stages = list(stages)
    n = space.n_units
    out: list[list[Stage]] = []
    seen = {tuple(stages)}

    def add(cand: list[Stage]) -> None:
        cand = _normalise(cand)
        key = tuple(cand)
        if cand and key not in seen and len(cand) <= max_stages:
            seen.add(key)
            out.append(cand)

    cuts = [s.start for s in stages[1:]]
    for j1 in range(len(cuts)):  # two cuts shifted together (ridges: a stage moves as a whole, or grows)
        for j2 in range(j1 + 1, len(cuts)):
            for d1 in (-2, -1, 1, 2):
                for d2 in (-2, -1, 1, 2):
                    new = list(cuts)
                    new[j1] += d1
                    new[j2] += d2
                    bounds = [0, *new, n]
                    if all(x < y for x, y in zip(bounds, bounds[1:])):
                        add([Stage(x, y, st.device) for x, y, st in zip(bounds, bounds[1:], stages)])
    for j in range(1, len(stages)):  # cut between stages j-1 and j
        a, b = stages[j - 1], stages[j]
        for d in shifts:
            for cut in (b.start - d, b.start + d):
                if a.start < cut < b.end:
                    add(stages[:j - 1] + [Stage(a.start, cut, a.device), Stage(cut, b.end, b.device)] + stages[j + 1:])
        for cut in cut_points(space):  # the cut to each block boundary between its neighbours
            if a.start < cut < b.end and cut != b.start:
                add(stages[:j - 1] + [Stage(a.start, cut, a.device), Stage(cut, b.end, b.device)] + stages[j + 1:])
        if cuts_only:
            continue
        for dev in (a.device, b.device):
            add(stages[:j - 1] + [Stage(a.start, b.end, dev)] + stages[j + 1:])
    for j, s in enumerate(stages if not cuts_only else []):
        for dev in _devices_for(space, s.start, s.end):
            if dev != s.device:
                add(stages[:j] + [Stage(s.start, s.end, dev)] + stages[j + 1:])
        if len(stages) < max_stages and s.end - s.start >= 2:
            length = s.end - s.start
            inner = [c for c in cut_points(space) if s.start < c < s.end]
            for cut in sorted({s.start + length // 2, s.start + max(1, length // 4), s.end - max(1, length // 4),
                               *inner}):
                if not s.start < cut < s.end:
                    continue
                for dev in _devices_for(space, cut, s.end):
                    if dev != s.device:
                        add(stages[:j] + [Stage(s.start, cut, s.device), Stage(cut, s.end, dev)] + stages[j + 1:])
                for dev in _devices_for(space, s.start, cut):
                    if dev != s.device:
                        add(stages[:j] + [Stage(s.start, cut, dev), Stage(cut, s.end, s.device)] + stages[j + 1:])
    return out if n else []


def random_stage_move(space: StageSpace, stages: Sequence[Stage], rng: np.random.Generator,
                      max_stages: int = DEFAULT_MAX_STAGES) -> list[Stage]:
    """One random neighbour (a cut moved by a random distance, added, removed, or a device changed)."""
    stages = list(stages)
    n = space.n_units
    for _ in range(20):
        kind = int(rng.integers(0, 4))
        j = int(rng.integers(0, len(stages)))
        s = stages[j]
        if kind == 0 and j > 0:  # shift the cut before stage j anywhere between its neighbours
            a = stages[j - 1]
            if s.end - a.start >= 2:
                cut = int(rng.integers(a.start + 1, s.end))
                cand = stages[:j - 1] + [Stage(a.start, cut, a.device), Stage(cut, s.end, s.device)] + stages[j + 1:]
            else:
                continue
        elif kind == 1 and len(stages) < max_stages and s.end - s.start >= 2:  # add a cut
            cut = int(rng.integers(s.start + 1, s.end))
            devs = [d for d in _devices_for(space, cut, s.end) if d != s.device]
            if not devs:
                continue
            d = devs[int(rng.integers(0, len(devs)))]
            cand = stages[:j] + [Stage(s.start, cut, s.device), Stage(cut, s.end, d)] + stages[j + 1:]
        elif kind == 2 and len(stages) > 1:  # remove a cut
            j = max(j, 1)
            a, b = stages[j - 1], stages[j]
            d = a.device if rng.random() < 0.5 else b.device
            cand = stages[:j - 1] + [Stage(a.start, b.end, d)] + stages[j + 1:]
        else:  # change a stage's device
            devs = [d for d in _devices_for(space, s.start, s.end) if d != s.device]
            if not devs:
                continue
            cand = stages[:j] + [Stage(s.start, s.end, devs[int(rng.integers(0, len(devs)))])] + stages[j + 1:]
        cand = _normalise(cand)
        if cand != stages and cand:
            return cand
    return sample_stages(space, rng, max_stages) if n else stages
