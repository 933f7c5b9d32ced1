"""The one-shot placement environment ``placetune/PlacementOneShot-v0``: the whole assignment in one step."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from placetune.envs.base import PlacementEnvBase, feature_box
from placetune.envs.ids import ENTRY_POINTS, ONESHOT_ENV_ID
from placetune.errors import PlacementError

if TYPE_CHECKING:
    from pathlib import Path

    from placetune.hardware.platforms import Platform
    from placetune.model.model import Model


class PlacementOneShotEnv(PlacementEnvBase):
    """One-shot placement: the single action of an episode is the whole assignment.

    Observation (``Dict`` of fixed-shape ``Box``es):
        ``features``: ``(n_units, n_features)`` float32 (constant).
        ``mask``: ``(n_units * n_devices,)`` int8, row-major: entry ``i * n_devices + k``
        is 1 when unit ``i`` may go on device ``k``.

    Action: ``MultiDiscrete([n_devices] * n_units)``. Masked entries are put on the GPU;
    ``info["invalid_action"]`` is True and ``info["invalid_units"]`` lists them.
    ``info["action_mask"]`` is a tuple of per-unit int8 arrays (what
    ``MultiDiscrete.sample(mask=...)`` takes); :meth:`action_masks` is the flat bool
    array of length ``sum(nvec)`` MaskablePPO expects.

    The step's info is that of :class:`PlacementEnv`'s last step. Arguments are those of
    :class:`PlacementEnv`.

    Example:
        >>> env = PlacementOneShotEnv(model="seed-block")
        >>> obs, info = env.reset(seed=0)
        >>> action = env.action_space.sample(mask=info["action_mask"])
        >>> obs, reward, terminated, truncated, info = env.step(action)
        >>> terminated, info["feasible"]
        (True, True)
    """

    _env_id = ONESHOT_ENV_ID
    _entry_point = ENTRY_POINTS[ONESHOT_ENV_ID]

    def __init__(self, model: "Model | str | Path" = "resnet18", platform: "Platform | str" = "orin-agx",
                 **kwargs: Any) -> None:
        super().__init__(model, platform, **kwargs)
        n, k = self.n_units, self.n_devices
        self.action_space = spaces.MultiDiscrete(np.full(n, k, dtype=np.int64))
        self.observation_space = spaces.Dict(
            {
                "features": feature_box(self._features),
                "mask": spaces.Box(0, 1, shape=(n * k,), dtype=np.int8),
            }
        )
        self._assignment = np.full(n, -1, dtype=np.int64)
        self._over = False  # the one step of the episode was taken: step() again needs a reset() first

    def action_masks(self) -> np.ndarray:
        """Flat bool mask of length ``n_units * n_devices`` (sb3-contrib MultiDiscrete convention)."""
        return self._mask.reshape(-1).astype(bool)

    def _info_mask(self) -> tuple[np.ndarray, ...]:
        return tuple(row.copy() for row in self._mask)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"features": self._features.copy(), "mask": self._mask.reshape(-1).copy()}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start an episode (measures the baseline on the first call)."""
        self._check_reset_options(options)
        super().reset(seed=seed)
        self._ensure_baseline()
        self._assignment[:] = -1
        self._over = False
        return self._obs(), {"action_mask": self._info_mask(), "baseline_value": self.baseline_value}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Measure the assignment ``action`` (one device index per unit): the episode's one step."""
        if self._over:
            raise PlacementError("the episode is over: call reset() before step()")
        self._ensure_baseline()
        try:
            a = np.asarray(action)
        except (ValueError, TypeError):  # ragged or odd nested sequences
            raise PlacementError(f"action must be {self.n_units} integer device indexes (one per unit), got "
                                 f"{repr(action)[:60]}") from None
        if a.shape != (self.n_units,) or not np.issubdtype(a.dtype, np.integer):
            raise PlacementError(
                f"action must be {self.n_units} integer device indexes (one per unit), got shape {a.shape} "
                f"dtype {a.dtype}"
            )
        if a.min(initial=0) < 0 or a.max(initial=0) >= self.n_devices:
            raise PlacementError(
                f"action has device indexes outside 0..{self.n_devices - 1} ({', '.join(self.devices)})"
            )
        a = a.astype(np.int64)
        bad = np.flatnonzero(self._mask[np.arange(self.n_units), a] == 0)
        a[bad] = 0
        self._assignment[:] = a
        reward, info = self._measure(a.tolist())
        self._over = True
        info["invalid_action"] = bool(bad.size)
        info["invalid_units"] = bad.tolist()
        info["invalid_actions"] = int(bad.size)
        info["action_mask"] = self._info_mask()
        return self._obs(), reward, True, False, info

    def _render_state(self) -> tuple[list[int], int | None]:
        return self._assignment.tolist(), None

