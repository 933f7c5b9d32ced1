"""Gymnasium environments: search placements with any RL library or a hand-written agent.

Two environments are registered (``import placetune`` registers them; so does
:func:`register_envs`, which is idempotent):

``placetune/Placement-v0`` (:class:`PlacementEnv`)
    Sequential: one step per decision unit, in topological order. The action is a
    device index (``Discrete(n_devices)``); the episode has exactly ``n_units`` steps.
``placetune/PlacementOneShot-v0`` (:class:`PlacementOneShotEnv`)
    One step per episode: the action is the whole assignment
    (``MultiDiscrete([n_devices] * n_units)``).

Reward
    0 on every step but the last. The last step measures the placement and returns
    ``log(gain)`` over the all-GPU baseline of the objective's primary component:
    ``log(baseline_latency / latency)`` for ``latency`` (and ``energy``),
    ``log(throughput / baseline_throughput)`` for ``throughput``. The all-GPU placement
    scores exactly 0. A placement that is infeasible or fails to build/run, or that
    has no value for the objective, scores ``penalty`` (default -1.0) and
    ``info["reason"]`` says why.

Action masks
    Units the DLA cannot run have only the GPU allowed (unless ``allow_unsupported``).
    Every ``reset``/``step`` puts ``info["action_mask"]`` (int8) in the info, in the form
    ``env.action_space.sample(mask=...)`` takes (Gymnasium convention), and both envs have
    an ``action_masks()`` method returning a flat bool array (sb3-contrib MaskablePPO
    convention). A masked action is **not** an error: the unit is put on the GPU and
    ``info["invalid_action"]`` is True (``info["invalid_units"]`` lists the units in the
    one-shot env). Actions outside the action space raise :class:`~placetune.errors.PlacementError`.

Cost
    Constructing an env loads the model and builds the :class:`~placetune.placement.space.Space`
    (milliseconds, needed for the spaces' shapes); the :class:`~placetune.tuning.evaluator.Evaluator`
    (store, backend) is created on first use and the all-GPU baseline is measured on the
    first ``reset``/``step``. Measurements go through the evaluator, so repeated
    placements are cache hits (``info["cache_hit"]``).

Determinism
    Timings, and whether a step was a cache hit, are not reproducible, so both envs are
    registered with ``nondeterministic=True``; an env constructed directly (without
    ``gymnasium.make``) carries an equivalent spec, so ``check_env`` treats it the same way.

Example:
    >>> import gymnasium as gym
    >>> import placetune.envs
    >>> placetune.envs.register_envs()
    >>> env = gym.make("placetune/Placement-v0", model="seed-block")
    >>> obs, info = env.reset(seed=0)
    >>> done = False
    >>> while not done:
    ...     obs, reward, done, truncated, info = env.step(env.action_space.sample(mask=info["action_mask"]))
    >>> info["feasible"], info["latency_ms"] > 0
    (True, True)
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.envs.registration import EnvSpec

from placetune.errors import BackendError, ConfigError, PlacementError
from placetune.model.model import Model
from placetune.placement.placement import Placement
from placetune.settings import Settings

if TYPE_CHECKING:
    from placetune.backends.base import Backend
    from placetune.tuning.evaluator import Evaluator
    from placetune.measurement import Measurement
    from placetune.tuning.objectives import Objective
    from placetune.hardware.platforms import Platform
    from placetune.placement.space import Space
    from placetune.store.store import Store

__all__ = [
    "PlacementEnv",
    "PlacementOneShotEnv",
    "PLACEMENT_ENV_ID",
    "ONESHOT_ENV_ID",
    "register_envs",
    "make_env",
    "masked_random_action",
]

log = logging.getLogger(__name__)

#: Id of the sequential environment.
PLACEMENT_ENV_ID = "placetune/Placement-v0"
#: Id of the one-shot environment.
ONESHOT_ENV_ID = "placetune/PlacementOneShot-v0"

_KINDS = {
    "sequential": PLACEMENT_ENV_ID,
    "placement": PLACEMENT_ENV_ID,
    "oneshot": ONESHOT_ENV_ID,
    "one-shot": ONESHOT_ENV_ID,
    "one_shot": ONESHOT_ENV_ID,
}
_SETTINGS_FIELDS = frozenset(f.name for f in dataclasses.fields(Settings)) - {"mode", "precision"}
# Constructor defaults that must stay untouched when an existing evaluator is passed.
_EVALUATOR_DEFAULTS: dict[str, Any] = {
    "model": "resnet18",
    "platform": "orin-agx",
    "mode": "engine",
    "objective": "latency",
    "precision": "fp16",
    "batch": None,
    "backend": "simulate",
    "store": None,
    "study": None,
    "shapes": None,
}


class _SharedKwargs(dict):
    """Spec kwargs whose deep copy shares objects (evaluator, store, backend, model).

    ``gymnasium.make(spec)`` and ``check_env`` deep-copy ``spec.kwargs``; an evaluator
    holds database connections and locks, and sharing it is the point of passing it.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> "_SharedKwargs":
        plain = (str, bytes, int, float, bool, type(None), Path, list, tuple, dict)
        return _SharedKwargs({k: (copy.deepcopy(v, memo) if isinstance(v, plain) else v) for k, v in self.items()})


class _PlacementEnvBase(gym.Env):
    """Shared machinery: lazy evaluator, baseline, reward, end-of-episode info."""

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}
    _env_id: str = ""
    _entry_point: str = ""
    _spec: EnvSpec | None = None

    @property  # type: ignore[override]
    def spec(self) -> EnvSpec | None:
        """The env's spec (``gymnasium.make`` sets it; direct construction makes one)."""
        return self._spec

    @spec.setter
    def spec(self, value: EnvSpec | None) -> None:
        if value is not None and not isinstance(value.kwargs, _SharedKwargs):
            value.kwargs = _SharedKwargs(value.kwargs)
        self._spec = value

    def __init__(
        self,
        model: "Model | str | Path" = "resnet18",
        platform: "Platform | str" = "orin-agx",
        *,
        mode: str = "engine",
        objective: "str | Objective" = "latency",
        precision: str = "fp16",
        batch: int | None = None,
        granularity: str = "fusion",
        backend: "Backend | str" = "simulate",
        store: "Store | str | None" = None,
        study: str | None = None,
        shapes: Any = None,
        penalty: float = -1.0,
        evaluator: "Evaluator | None" = None,
        allow_unsupported: bool = False,
        agent: str = "env",
        render_mode: str | None = None,
        **options: Any,
    ) -> None:
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode {render_mode!r} is not supported; use None or 'ansi'")
        unknown = sorted(set(options) - _SETTINGS_FIELDS)
        if unknown:
            raise ConfigError(
                f"unknown environment option(s) {', '.join(unknown)}; measurement options are "
                f"{', '.join(sorted(_SETTINGS_FIELDS))}"
            )
        if not math.isfinite(penalty):
            raise ConfigError(f"penalty must be a finite number (got {penalty!r})")
        self.render_mode = render_mode
        self.penalty = float(penalty)
        self.granularity = granularity
        self.agent = agent
        self._owns_evaluator = evaluator is None
        self._evaluator: Evaluator | None = evaluator
        self._baseline_value: float | None = None
        self._baseline_m: Measurement | None = None
        self._closed = False
        if evaluator is not None:
            given = dict(model=model, platform=platform, mode=mode, objective=objective, precision=precision,
                         batch=batch, backend=backend, store=store, study=study, shapes=shapes)
            clash = [
                k for k, v in given.items() if not _same(v, _EVALUATOR_DEFAULTS[k]) and not _matches(evaluator, k, v)
            ]
            if clash or options:
                raise ConfigError(
                    "an evaluator was passed, so the model, platform and measurement settings are the evaluator's; "
                    f"leave out {', '.join(clash + sorted(options))}"
                )
            self.model: Model = evaluator.model
            self.settings: Settings = evaluator.settings
            self.objective: Objective = evaluator.objective
            dla_core = self.settings.dla_core or 0
            self.space: Space = evaluator.space(granularity, allow_unsupported=allow_unsupported, dla_core=dla_core)
            self._evaluator_kwargs: dict[str, Any] = {}
        else:
            from placetune.tuning.objectives import get_objective
            from placetune.hardware.platforms import get_platform
            from placetune.placement.space import Space

            self.model = model if isinstance(model, Model) else Model.load(model, shapes, batch=batch)
            self.settings = Settings(mode=mode, precision=precision, **options)
            self.objective = get_objective(objective)
            plat = get_platform(platform) if isinstance(platform, str) else platform
            self.space = Space(
                self.model, plat, mode=self.settings.mode, precision=self.settings.precision,
                granularity=granularity, trt_version=self.settings.trt_version,
                allow_unsupported=allow_unsupported, dla_core=self.settings.dla_core or 0,
            )
            self._evaluator_kwargs = dict(
                platform=plat, backend=backend, objective=self.objective, store=store, study=study,
                settings=self.settings, agent=agent,
            )
        self.n_units: int = self.space.n_units
        self.n_devices: int = self.space.n_devices
        self.devices: tuple[str, ...] = self.space.devices
        self._features = np.ascontiguousarray(self.space.features(), dtype=np.float32)
        self._mask = self.space.mask.astype(np.int8, copy=True)
        self._last: dict[str, Any] | None = None
        if self.spec is None:
            # Same nondeterminism declaration as gymnasium.make gives (gym.make overwrites it).
            kwargs = dict(model=model, platform=platform, mode=mode, objective=objective, precision=precision,
                          batch=batch, granularity=granularity, backend=backend, store=store, study=study,
                          shapes=shapes, penalty=penalty, evaluator=evaluator,
                          allow_unsupported=allow_unsupported, agent=agent, **options)
            self.spec = EnvSpec(id=self._env_id, entry_point=self._entry_point, nondeterministic=True,
                                kwargs=kwargs)

    # ------------------------------------------------------------- properties
    @property
    def evaluator(self) -> "Evaluator":
        """The evaluator (created on first access; nothing is measured by creating it)."""
        if self._evaluator is None:
            from placetune.tuning.evaluator import Evaluator

            self._evaluator = Evaluator(self.model, **self._evaluator_kwargs)
            self._closed = False
        return self._evaluator

    @property
    def baseline(self) -> "Measurement":
        """The all-GPU measurement the reward is relative to (measured on first access).

        Raises:
            BackendError: the all-GPU placement has no value for the objective.
        """
        self._ensure_baseline()
        assert self._baseline_m is not None
        return self._baseline_m

    @property
    def baseline_value(self) -> float:
        """Primary objective value of the all-GPU baseline."""
        self._ensure_baseline()
        assert self._baseline_value is not None
        return self._baseline_value

    def _ensure_baseline(self) -> None:
        if self._baseline_value is not None and self._evaluator is not None:
            return
        m = self.evaluator.baseline()
        value = self.objective.value(m)
        if value is None or not value > 0:
            raise BackendError(
                f"the all-GPU baseline of {self.model.name!r} gave no {self.objective.names[0]} value "
                f"({m.status}: {m.reason or 'no value'}); the reward is relative to it, so the environment "
                "cannot run: check the backend and settings with `placetune measure`"
            )
        self._baseline_m, self._baseline_value = m, float(value)

    # ---------------------------------------------------------------- helpers
    def _allowed(self, unit: int, action: int) -> bool:
        return bool(self._mask[unit, action])

    def _measure(self, assignment: Sequence[int]) -> tuple[float, dict[str, Any]]:
        """Evaluate a full assignment: (reward, end-of-episode info)."""
        placement = self.space.to_placement(assignment)
        m = self.evaluator.evaluate(placement, agent=self.agent)
        value = self.objective.value(m)
        base = self.baseline_value
        info: dict[str, Any] = {
            "latency_ms": _num(m.latency_ms.get("median") if m.ok else None),
            "throughput_fps": _num(m.throughput_fps if m.ok else None),
            "energy_mj": _num(m.energy_mj if m.ok else None),
            "feasible": bool(m.ok),
            "status": m.status,
            "cache_hit": bool(m.extra.get("cache_hit", False)),
            "placement": placement.to_doc(),
            "realized": Placement(self.model, m.realized).to_doc() if m.realized else None,
            "fallback": dict(m.fallback),
            "measurement": m,
            "objective_value": _num(value),
            "baseline_value": base,
            "reason": m.reason,
        }
        if m.ok and value is not None and value > 0:
            gain = self.objective.gain(float(value), base)
            reward = float(math.log(gain))
        else:
            gain = float("nan")
            reward = self.penalty
            if m.ok:
                info["reason"] = f"the measurement has no {self.objective.names[0]} value"
        info["gain"] = float(gain)
        self._last = {"assignment": list(assignment), "reward": reward, **info}
        return reward, info

    def _check_action_int(self, action: Any, n: int) -> int:
        try:
            a = int(np.asarray(action).reshape(()))
        except (TypeError, ValueError):
            raise PlacementError(f"action {action!r} is not a device index (an int in 0..{n - 1})") from None
        if not 0 <= a < n:
            raise PlacementError(f"action {a} is out of range: devices are 0..{n - 1} ({', '.join(self.devices)})")
        return a

    def _render_table(self, assignment: Sequence[int], cursor: int | None) -> str:
        lines = [
            f"{type(self).__name__}: {self.model.name} on {self.space.platform.name}, mode={self.settings.mode}, "
            f"objective={self.objective.name}, {self.n_units} units, devices={'/'.join(self.devices)}"
        ]
        for i, u in enumerate(self.space.units):
            a = assignment[i]
            dev = self.devices[a] if a >= 0 else "-"
            allowed = "/".join(d for k, d in enumerate(self.devices) if self._mask[i, k])
            mark = ">" if cursor == i else " "
            lines.append(f"{mark}{i:4d} {dev:5s} [{allowed}] {u.name} ({len(u.layers)} layers)")
        if self._last is not None:
            r = self._last
            if r["feasible"]:
                lines.append(
                    f"last: {r['status']} latency {r['latency_ms']:.3f} ms, reward {r['reward']:+.4f}, "
                    f"gain x{r['gain']:.3f}{' (cache hit)' if r['cache_hit'] else ''}"
                )
            else:
                lines.append(f"last: {r['status']}: {r['reason']}, reward {r['reward']:+.4f}")
        return "\n".join(lines)

    def close(self) -> None:
        """Close the evaluator's store if the env created it (safe to call twice).

        A shared evaluator passed as ``evaluator=`` is left open. A later ``reset``
        creates a new evaluator (with a new in-memory store when ``store`` is None).
        """
        if self._evaluator is not None and self._owns_evaluator and not self._closed:
            self._evaluator.close()
            self._evaluator = None
            self._baseline_m = self._baseline_value = None
        self._closed = True
        super().close()


class PlacementEnv(_PlacementEnvBase):
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
        precision: ``fp16`` or ``int8``.
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
        render_mode: None or ``ansi`` (``render()`` returns a text table).
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
    _entry_point = "placetune.envs:PlacementEnv"

    def __init__(self, model: "Model | str | Path" = "resnet18", platform: "Platform | str" = "orin-agx",
                 **kwargs: Any) -> None:
        super().__init__(model, platform, **kwargs)
        n, k, f = self.n_units, self.n_devices, self._features.shape[1]
        self.action_space = spaces.Discrete(k)
        self.observation_space = spaces.Dict(
            {
                "features": _feature_box(self._features),
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

    def render(self) -> str | None:
        """``ansi``: a table of the units, their allowed devices and the assignment so far."""
        if self.render_mode != "ansi":
            return None
        return self._render_table(self._assignment.tolist(), self._cursor)


class PlacementOneShotEnv(_PlacementEnvBase):
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
    _entry_point = "placetune.envs:PlacementOneShotEnv"

    def __init__(self, model: "Model | str | Path" = "resnet18", platform: "Platform | str" = "orin-agx",
                 **kwargs: Any) -> None:
        super().__init__(model, platform, **kwargs)
        n, k = self.n_units, self.n_devices
        self.action_space = spaces.MultiDiscrete(np.full(n, k, dtype=np.int64))
        self.observation_space = spaces.Dict(
            {
                "features": _feature_box(self._features),
                "mask": spaces.Box(0, 1, shape=(n * k,), dtype=np.int8),
            }
        )
        self._assignment = np.full(n, -1, dtype=np.int64)

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
        super().reset(seed=seed)
        self._ensure_baseline()
        self._assignment[:] = -1
        return self._obs(), {"action_mask": self._info_mask(), "baseline_value": self.baseline_value}

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Measure the assignment ``action`` (one device index per unit)."""
        self._ensure_baseline()
        a = np.asarray(action)
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
        info["invalid_action"] = bool(bad.size)
        info["invalid_units"] = bad.tolist()
        info["invalid_actions"] = int(bad.size)
        info["action_mask"] = self._info_mask()
        return self._obs(), reward, True, False, info

    def render(self) -> str | None:
        """``ansi``: a table of the units, their allowed devices and the last assignment."""
        if self.render_mode != "ansi":
            return None
        return self._render_table(self._assignment.tolist(), None)


# --------------------------------------------------------------------------- helpers
def _num(x: Any) -> float:
    """float, NaN for None (info values keep one type so vector envs can batch them)."""
    if x is None:
        return float("nan")
    return float(x)


def _feature_box(features: np.ndarray) -> spaces.Box:
    low = min(0.0, float(features.min(initial=0.0)))
    high = max(10.0, float(np.ceil(features.max(initial=0.0))))
    return spaces.Box(low=np.float32(low), high=np.float32(high), shape=features.shape, dtype=np.float32)


def _same(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) if not isinstance(a, np.ndarray) else False
    except Exception:  # noqa: BLE001 - objects with odd __eq__
        return a is b


def _matches(ev: "Evaluator", key: str, value: Any) -> bool:
    """True when an explicitly given argument agrees with the shared evaluator."""
    if key == "model":
        if isinstance(value, Model):
            return value.hash == ev.model.hash
        return isinstance(value, str) and value == ev.model.name
    if key == "platform":
        from placetune.hardware.platforms import get_platform

        try:
            return get_platform(value).name == ev.platform.name
        except Exception:  # noqa: BLE001 - an unknown name simply does not match
            return False
    if key == "mode":
        return value == ev.settings.mode
    if key == "precision":
        return value == ev.settings.precision
    if key == "objective":
        from placetune.tuning.objectives import get_objective

        try:
            return get_objective(value).name == ev.objective.name
        except Exception:  # noqa: BLE001
            return False
    if key == "batch":
        return value == ev.model.batch
    if key == "backend":
        return value is ev.backend or value == ev.backend.name
    if key == "store":
        return value is ev.store
    if key == "study":
        return value == ev.study_name
    return False


def register_envs() -> None:
    """Register ``placetune/Placement-v0`` and ``placetune/PlacementOneShot-v0`` (idempotent).

    ``import placetune`` calls it; calling it again does nothing.

    Example:
        >>> register_envs(); register_envs()
        >>> import gymnasium as gym
        >>> "placetune/Placement-v0" in gym.registry
        True
    """
    for env_id, entry in ((PLACEMENT_ENV_ID, PlacementEnv._entry_point),
                          (ONESHOT_ENV_ID, PlacementOneShotEnv._entry_point)):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, nondeterministic=True)


def make_env(id_or_kind: str = PLACEMENT_ENV_ID, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` for placetune envs, registering them first.

    Args:
        id_or_kind: an env id, or a kind: ``sequential`` / ``placement`` (Placement-v0),
            ``oneshot`` / ``one-shot`` (PlacementOneShot-v0).
        **kwargs: constructor arguments (see :class:`PlacementEnv`) and ``gymnasium.make``
            options (``max_episode_steps``, ``disable_env_checker``...).

    Raises:
        ConfigError: an unknown kind.

    Example:
        >>> env = make_env("oneshot", model="seed-block")
        >>> env.unwrapped.n_units
        5
    """
    register_envs()
    env_id = _KINDS.get(id_or_kind.lower(), id_or_kind)
    if env_id not in gym.registry and "/" not in env_id and ":" not in env_id:
        raise ConfigError(
            f"unknown environment {id_or_kind!r}; use {PLACEMENT_ENV_ID}, {ONESHOT_ENV_ID} or a kind "
            f"({', '.join(_KINDS)})"
        )
    return gym.make(env_id, **kwargs)


def masked_random_action(env: gym.Env, rng: np.random.Generator | None = None) -> int | np.ndarray:
    """A uniformly random allowed action for the env's current state.

    Works through wrappers (the mask is read with ``get_wrapper_attr("action_masks")``).

    Args:
        env: a :class:`PlacementEnv` or :class:`PlacementOneShotEnv`, possibly wrapped.
        rng: random generator (default: a fresh unseeded one).

    Returns:
        An ``int`` for the sequential env, an int64 array of ``n_units`` for the one-shot env.

    Example:
        >>> env = PlacementOneShotEnv(model="seed-block")
        >>> _ = env.reset(seed=0)
        >>> a = masked_random_action(env, np.random.default_rng(0))
        >>> bool(env.action_masks().reshape(env.n_units, -1)[np.arange(env.n_units), a].all())
        True
    """
    rng = rng if rng is not None else np.random.default_rng()
    base = env.unwrapped
    if not isinstance(base, _PlacementEnvBase):
        raise ConfigError(f"masked_random_action needs a placetune env, got {type(base).__name__}")
    mask = np.asarray(env.get_wrapper_attr("action_masks")(), dtype=bool)
    if isinstance(base, PlacementOneShotEnv):
        rows = mask.reshape(base.n_units, base.n_devices)
        return np.array([int(rng.choice(np.flatnonzero(r))) for r in rows], dtype=np.int64)
    return int(rng.choice(np.flatnonzero(mask)))

