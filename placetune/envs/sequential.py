"""The sequential placement environment ``placetune/Placement-v0``: one step per decision unit."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces

from placetune.envs.base import PlacementEnvBase, feature_box
from placetune.envs.ids import ENTRY_POINTS, PLACEMENT_ENV_ID
from placetune.errors import PlacementError

if TYPE_CHECKING:
    from pathlib import Path

    from placetune.hardware.platforms import Platform
    from placetune.model.model import Model

log = logging.getLogger(__name__)


class PlacementEnv(PlacementEnvBase):
    """Sequential placement: each step puts the next decision unit on a device.

    Observation (``Dict`` of fixed-shape ``Box``es):
        ``features``: ``(n_units, n_features)`` float32, :meth:`Space.features` (constant).
        ``assignment``: ``(n_units,)`` int64, device index per unit, -1 = not assigned yet.
        ``cursor``: ``(1,)`` int64, the unit the next action places (``n_units`` at the end).
        ``mask``: ``(n_devices,)`` int8, devices allowed for the cursor's unit (GPU only
        once the episode is over).

    Action: ``Discrete(n_devices)``, an index into :attr:`devices` (``GPU`` is 0 and
    always allowed). A masked action puts the unit on the GPU and sets
    ``info["invalid_action"]``.

    The episode has ``n_units`` steps; the last one measures the placement. Its info has
    ``latency_ms``, ``throughput_fps``, ``energy_mj`` (NaN when unknown), ``feasible``,
    ``status``, ``cache_hit``, ``placement`` and ``realized`` (placement documents),
    ``fallback``, ``measurement`` (the :class:`~placetune.measurement.Measurement`),
    ``objective_value``, ``baseline_value``, ``gain`` and ``reason`` (None when ok).

    Args:
        model: zoo name, ONNX path or :class:`~placetune.model.model.Model` (default ``resnet18``).
        platform: Jetson platform name or profile (default ``orin-agx``).
        mode: ``engine``, ``pipeline`` or ``replicas``.
        objective: ``latency``, ``throughput`` or ``energy`` (a pair: the first one is rewarded).
        precision: ``int8`` (default, as the command line's) or ``fp16``.
        batch: batch size of zoo models.
        granularity: ``fusion``, ``layer`` or ``scope:N`` (see :class:`~placetune.placement.space.Space`).
        backend: ``simulate`` (default), ``tensorrt``, ``trtexec`` or a backend object.
        store: a :class:`~placetune.store.store.Store`, a SQLAlchemy URL / SQLite path, or None
            for an in-memory store (nothing touches the disk).
        study: study name in the store.
        shapes: input shape overrides for ONNX files.
        penalty: reward of an infeasible or failed placement.
        evaluator: an existing :class:`~placetune.tuning.evaluator.Evaluator` to share (its model,
            platform and settings are used; leave the other measurement arguments out).
        allow_unsupported: keep DLA choices for units the DLA cannot run (to study fallback,
            or infeasibility with ``gpu_fallback=False``).
        agent: agent name recorded with each measurement.
        render_mode: None, ``ansi`` (``render()`` returns a text table) or ``rgb_array`` (the same as an
            image, for video recorders and stable-baselines3's ``make_vec_env``, which asks for it).
        info_measurement: put the whole Measurement in the final info (``info["measurement"]``);
            by default the info holds summary numbers only.
        **options: other :class:`~placetune.settings.Settings` fields: ``gpu_fallback``,
            ``dla_core``, ``trt_version``, ``noise``, ``seed``, ``iterations``...

    Example:
        >>> env = PlacementEnv(model="seed-block")
        >>> obs, info = env.reset(seed=0)
        >>> for _ in range(env.n_units):
        ...     obs, reward, terminated, truncated, info = env.step(0)   # all on the GPU
        >>> terminated, reward
        (True, 0.0)
    """

    _env_id = PLACEMENT_ENV_ID
    _entry_point = ENTRY_POINTS[PLACEMENT_ENV_ID]

    def __init__(self, model: "Model | str | Path" = "resnet18", platform: "Platform | str" = "orin-agx",
                 **kwargs: Any) -> None:
        super().__init__(model, platform, **kwargs)
        n, k, f = self.n_units, self.n_devices, self._features.shape[1]
        self.action_space = spaces.Discrete(k)
        self.observation_space = spaces.Dict(
            {
                "features": feature_box(self._features),
                "assignment": spaces.Box(-1, k - 1, shape=(n,), dtype=np.int64),
                "cursor": spaces.Box(0, n, shape=(1,), dtype=np.int64),
                "mask": spaces.Box(0, 1, shape=(k,), dtype=np.int8),
            }
        )
        assert self._features.shape == (n, f)
        self._assignment = np.full(n, -1, dtype=np.int64)
        self._cursor = 0
        self._invalid = 0

    # ---------------------------------------------------------------- masks
    def _unit_mask(self) -> np.ndarray:
        if self._cursor < self.n_units:
            return self._mask[self._cursor].copy()
        out = np.zeros(self.n_devices, dtype=np.int8)
        out[0] = 1
        return out

    def action_masks(self) -> np.ndarray:
        """Devices allowed for the current unit (bool, length ``n_devices``; sb3-contrib convention)."""
        return self._unit_mask().astype(bool)

    def _obs(self) -> dict[str, np.ndarray]:
        return {
            "features": self._features.copy(),
            "assignment": self._assignment.copy(),
            "cursor": np.array([self._cursor], dtype=np.int64),
            "mask": self._unit_mask(),
        }

    # ------------------------------------------------------------- Env API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start a placement from scratch (measures the baseline on the first call)."""
        self._check_reset_options(options)
        super().reset(seed=seed)
        self._ensure_baseline()
        self._assignment[:] = -1
        self._cursor = 0
        self._invalid = 0
        return self._obs(), {"action_mask": self._unit_mask(), "baseline_value": self.baseline_value}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Place the current unit on device ``action``; the last unit's step measures the placement."""
        if self._cursor >= self.n_units:
            raise PlacementError("the episode is over: call reset() before step()")
        self._ensure_baseline()
        a = self._check_action_int(action, self.n_devices)
        invalid = not self._allowed(self._cursor, a)
        if invalid:
            log.debug("unit %d cannot go on %s (masked): placed on the GPU", self._cursor, self.devices[a])
            self._invalid += 1
            a = 0
        self._assignment[self._cursor] = a
        self._cursor += 1
        terminated = self._cursor == self.n_units
        reward = 0.0
        info: dict[str, Any] = {"invalid_action": invalid}
        if terminated:
            reward, end = self._measure(self._assignment.tolist())
            info.update(end)
            info["invalid_actions"] = self._invalid
        info["action_mask"] = self._unit_mask()
        return self._obs(), reward, terminated, False, info

    def _render_state(self) -> tuple[list[int], int | None]:
        return self._assignment.tolist(), self._cursor

