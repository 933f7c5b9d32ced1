"""The stage-by-stage placement environment ``placetune/PlacementStages-v0``: one step per block.

The best pipeline placements are a few contiguous stages, one device each (see
:mod:`placetune.placement.stages`); per-unit choices, as ``Placement-v0`` makes them, almost
never produce one (a uniformly random ResNet-18 assignment changes device about 15 times and, as
a pipeline, runs at a quarter of all-GPU's throughput), so an agent spends its episodes learning to keep
neighbouring units together. Here an episode walks the network's blocks instead: the segments
between its block boundaries (:func:`~placetune.placement.stages.cut_points`, where a single
tensor crosses), and each step puts the next block on a device. Consecutive blocks on the same
device form one stage; the action mask keeps the placement within ``max_stages`` stages.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from placetune.envs.base import PlacementEnvBase, feature_box
from placetune.envs.ids import ENTRY_POINTS, STAGES_ENV_ID
from placetune.errors import ConfigError, PlacementError
from placetune.placement.stages import DEFAULT_MAX_STAGES, Stage, assignment_of, cut_points, stages_of

if TYPE_CHECKING:
    from pathlib import Path

    from placetune.hardware.platforms import Platform
    from placetune.model.model import Model

log = logging.getLogger(__name__)


class PlacementStagesEnv(PlacementEnvBase):
    """Stage-by-stage placement: each step puts the next block of the network on a device.

    The blocks are the units (``granularity``, default ``stages``: the fusion groups) between
    consecutive block boundaries (:func:`~placetune.placement.stages.cut_points`), in
    topological order: 13 blocks for ResNet-18 (the stem convolution, the pooling, eight residual
    blocks and three head layers). A unit
    the chosen device cannot run takes the GPU inside its stage, as GPU fallback would.

    Observation (``Dict`` of fixed-shape ``Box``es):
        ``features``: ``(n_blocks * n_features,)`` float32, row-major: for each block the mean
        of its units' features (the :meth:`Space.features` columns; constant).
        ``assignment``: ``(n_blocks * n_devices,)`` int8, row-major: for each block the one-hot
        device it was put on (zeros: not placed yet).
        ``cursor``: ``(n_blocks + 1,)`` int8, one-hot index of the block the next action
        places (the last entry at the end of the episode).
        ``mask``: ``(n_devices,)`` int8, devices allowed for that block.

    Action: ``Discrete(n_devices)``, an index into :attr:`devices` (``GPU`` is 0). The mask
    allows the previous block's device (the stage goes on) and, for a new stage, the devices at
    least one unit of the block can run, while the placement has fewer than ``max_stages``
    stages and the device fewer than ``stages_per_dla`` stages (DLA cores only). A masked action
    puts the block on the GPU and sets ``info["invalid_action"]`` (a masked policy never does).

    Why one stage per DLA core by default: from all-GPU, moving one block to a DLA costs two
    GPU<->DLA boundaries and rarely pays; only a run of well-chosen blocks does. With stages
    free to open anywhere, a policy that starts uniform learns first that the GPU is the safe
    choice everywhere and settles on all-GPU (MaskablePPO on ResNet-18 did, with entropy bonuses
    up to 0.1 and with a reward shaped at every block). With one contiguous stretch per DLA
    core, the shape of the best pipeline plans (``DLA1 | GPU | DLA0 | GPU``), the early
    decisions are the ones that pay, and it learns them.

    Reward and final info: as :class:`~placetune.envs.PlacementEnv` (0 until the last block,
    then ``log`` of the gain over all-GPU); the final info also has ``stages``, the
    ``(first unit, end unit, device)`` triples of the placement, read from its units as
    :func:`~placetune.placement.stages.stages_of` reads them (one list per placement, whichever
    actions made it).

    Args:
        model: zoo name, ONNX path or :class:`~placetune.model.model.Model` (default ``resnet18``).
        platform: Jetson platform name or profile (default ``orin-agx``).
        max_stages: the most stages a placement may have (None: no limit; default 6, as the
            ``guided`` agent's stage moves).
        stages_per_dla: the most stages on each DLA core (None: no limit; default 1).
        granularity: the units blocks are made of (default ``stages``).
        **kwargs: the other arguments of :class:`~placetune.envs.PlacementEnv` (``mode``,
            ``objective``, ``precision``, ``backend``, ``store``, ``evaluator``, settings such
            as ``frames_in_flight``...).

    Example:
        >>> env = PlacementStagesEnv(model="resnet18", mode="pipeline", precision="int8",
        ...                          objective="throughput", frames_in_flight=4)
        >>> env.n_blocks
        13
        >>> obs, info = env.reset(seed=0)
        >>> for _ in range(env.n_blocks):
        ...     obs, reward, terminated, truncated, info = env.step(0)   # all on the GPU
        >>> terminated, reward, info["stages"]
        (True, 0.0, [(0, 24, 'GPU')])
    """

    _env_id = STAGES_ENV_ID
    _entry_point = ENTRY_POINTS[STAGES_ENV_ID]

    def __init__(self, model: "Model | str | Path" = "resnet18", platform: "Platform | str" = "orin-agx", *,
                 max_stages: int | None = DEFAULT_MAX_STAGES, stages_per_dla: int | None = 1,
                 granularity: str = "stages", **kwargs: Any) -> None:
        for name, value in (("max_stages", max_stages), ("stages_per_dla", stages_per_dla)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be an integer >= 1 or None, got {str(value)[:40]!r}")
        super().__init__(model, platform, granularity=granularity, **kwargs)
        if self.spec is not None:  # direct construction: the spec gets this env's own arguments too
            self.spec.kwargs.setdefault("max_stages", max_stages)
            self.spec.kwargs.setdefault("stages_per_dla", stages_per_dla)
        #: the most stages of a placement (None: no limit)
        self.max_stages = max_stages
        #: the most stages on each DLA core (None: no limit)
        self.stages_per_dla = stages_per_dla
        bounds = [0, *cut_points(self.space), self.n_units]
        #: ``(first unit, end unit)`` of each block, in topological order
        self.blocks: list[tuple[int, int]] = list(zip(bounds[:-1], bounds[1:]))
        self.n_blocks: int = len(self.blocks)
        n, k = self.n_blocks, self.n_devices
        self._block_mask = np.stack([self._mask[s:e].max(axis=0) for s, e in self.blocks]).astype(np.int8)
        self._block_mask[:, 0] = 1
        unit_features = self._features
        self._block_features = np.stack([unit_features[s:e].mean(axis=0) for s, e in self.blocks]).astype(np.float32)
        self.action_space = spaces.Discrete(k)
        self.observation_space = spaces.Dict(
            {
                "features": feature_box(self._block_features.reshape(-1)),
                "assignment": spaces.Box(0, 1, shape=(n * k,), dtype=np.int8),
                "cursor": spaces.Box(0, 1, shape=(n + 1,), dtype=np.int8),
                "mask": spaces.Box(0, 1, shape=(k,), dtype=np.int8),
            }
        )
        self._devices_chosen = np.full(n, -1, dtype=np.int64)
        self._device_stages = np.zeros(k, dtype=np.int64)
        self._cursor = 0
        self._stages = 0
        self._invalid = 0

    # ---------------------------------------------------------------- masks
    def _block_allowed(self) -> np.ndarray:
        out = np.zeros(self.n_devices, dtype=np.int8)
        if self._cursor >= self.n_blocks:
            out[0] = 1
            return out
        out[:] = self._block_mask[self._cursor]
        if self._cursor == 0:
            return out
        if self.stages_per_dla is not None:
            out[1:][self._device_stages[1:] >= self.stages_per_dla] = 0
        if self.max_stages is not None and self._stages >= self.max_stages:
            out[:] = 0
        out[int(self._devices_chosen[self._cursor - 1])] = 1  # the stage goes on
        return out

    def action_masks(self) -> np.ndarray:
        """Devices allowed for the current block (bool, length ``n_devices``; sb3-contrib convention)."""
        return self._block_allowed().astype(bool)

    def _obs(self) -> dict[str, np.ndarray]:
        assignment = np.zeros((self.n_blocks, self.n_devices), dtype=np.int8)
        placed = self._devices_chosen[:self._cursor]
        assignment[np.arange(len(placed)), placed] = 1
        cursor = np.zeros(self.n_blocks + 1, dtype=np.int8)
        cursor[self._cursor] = 1
        return {"features": self._block_features.reshape(-1).copy(), "assignment": assignment.reshape(-1),
                "cursor": cursor,
                "mask": self._block_allowed()}

    def unit_assignment(self) -> list[int]:
        """Device index of every unit for the blocks placed so far (-1: block not placed yet)."""
        stages = [Stage(*self.blocks[b], int(d)) for b, d in enumerate(self._devices_chosen[:self._cursor])]
        out = assignment_of(self.space, stages)
        start = self.blocks[self._cursor][0] if self._cursor < self.n_blocks else self.n_units
        out[start:] = [-1] * (self.n_units - start)
        return out

    # ------------------------------------------------------------- Env API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start a placement from the first block (measures the baseline on the first call)."""
        self._check_reset_options(options)
        super().reset(seed=seed)
        self._ensure_baseline()
        self._devices_chosen[:] = -1
        self._device_stages[:] = 0
        self._cursor = 0
        self._stages = 0
        self._invalid = 0
        return self._obs(), {"action_mask": self._block_allowed(), "baseline_value": self.baseline_value}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Put the current block on device ``action``; the last block's step measures the placement."""
        if self._cursor >= self.n_blocks:
            raise PlacementError("the episode is over: call reset() before step()")
        self._ensure_baseline()
        a = self._check_action_int(action, self.n_devices)
        invalid = not bool(self._block_allowed()[a])
        if invalid:
            log.debug("block %d cannot go on %s (masked): placed on the GPU", self._cursor, self.devices[a])
            self._invalid += 1
            a = 0
        if self._cursor == 0 or a != self._devices_chosen[self._cursor - 1]:
            self._stages += 1
            self._device_stages[a] += 1
        self._devices_chosen[self._cursor] = a
        self._cursor += 1
        terminated = self._cursor == self.n_blocks
        reward = 0.0
        info: dict[str, Any] = {"invalid_action": invalid}
        if terminated:
            assignment = self.unit_assignment()
            reward, end = self._measure(assignment)
            info.update(end)
            info["invalid_actions"] = self._invalid
            info["stages"] = self._stage_triples(assignment)
        info["action_mask"] = self._block_allowed()
        return self._obs(), reward, terminated, False, info

    def _stage_triples(self, assignment: list[int]) -> list[tuple[int, int, str]]:
        """The placement's stages as :func:`stages_of` reads them, not as the blocks were chosen: after a
        DLA stage, a block the DLA cannot run put on the GPU and the same block left in the DLA stage (it
        falls back to the GPU) are one placement, and get one stage list."""
        return [(s, e, self.devices[d]) for s, e, d in stages_of(self.space, assignment)]

    def _render_state(self) -> tuple[list[int], int | None]:
        cursor = self.blocks[self._cursor][0] if self._cursor < self.n_blocks else None
        return list(self.unit_assignment()), cursor
