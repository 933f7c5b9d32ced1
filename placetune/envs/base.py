"""Shared machinery of the placement environments: construction, lazy evaluator, baseline, reward, rendering."""

from __future__ import annotations

import copy
import inspect
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
from placetune.settings import DEFAULT_PRECISION, Settings
from placetune.wording import plural, versus
from placetune.hardware.platforms import get_platform
from placetune.placement.space import Space
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.objectives import get_objective
from placetune.tuning.study_setup import SETTINGS_OPTIONS

if TYPE_CHECKING:
    from placetune.backends.base import Backend
    from placetune.tuning.evaluator import Evaluator
    from placetune.measurement import Measurement
    from placetune.tuning.objectives import Objective
    from placetune.hardware.platforms import Platform
    from placetune.placement.space import Space
    from placetune.store.store import Store

_SETTINGS_FIELDS = frozenset(SETTINGS_OPTIONS)  # the Settings fields an evaluator takes too
# Constructor defaults that must stay untouched when an existing evaluator is passed.
_EVALUATOR_DEFAULTS: dict[str, Any] = {
    "model": "resnet18",
    "platform": "orin-agx",
    "mode": "engine",
    "objective": "latency",
    "precision": DEFAULT_PRECISION,
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



class PlacementEnvBase(gym.Env):
    """Shared machinery: lazy evaluator, baseline, reward, end-of-episode info."""

    metadata: dict[str, Any] = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}
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
        precision: str = DEFAULT_PRECISION,
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
        info_measurement: bool = False,
        **options: Any,
    ) -> None:
        #: put the whole :class:`~placetune.measurement.Measurement` in the final info (``"measurement"``)
        self.info_measurement = bool(info_measurement)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(f"render_mode {str(render_mode)[:40]!r} is not supported; "
                              "use None, 'ansi' or 'rgb_array'")
        unknown = sorted(set(options) - _SETTINGS_FIELDS)
        if unknown:
            own = [p for p in inspect.signature(type(self).__init__).parameters if p not in ("self", "kwargs")]
            own += [p for p in inspect.signature(PlacementEnvBase.__init__).parameters
                    if p not in ("self", "options") and p not in own]
            raise ConfigError(
                f"unknown environment option(s) {', '.join(u[:40] for u in unknown[:5])}; the environment takes "
                f"{', '.join(own)} and the measurement options {', '.join(sorted(_SETTINGS_FIELDS))}"
            )
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not math.isfinite(penalty):
            raise ConfigError(f"penalty must be a finite number (got {str(penalty)[:40]!r})")
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
            self.model = model if isinstance(model, Model) else Model.load(model, shapes, batch=batch)
            plat = get_platform(platform)  # a Platform as it is; anything but a name is refused, naming them
            options.setdefault("trt_version", plat.trt_version_for(options.get("power_mode")))
            self.settings = Settings(mode=mode, precision=precision, **options)
            self.objective = get_objective(objective)
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

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and ``copy.deepcopy`` (lookahead copies, ``AsyncVectorEnv`` workers): the state but
        not the evaluator the environment made (its store's connections and locks), which the copy makes
        again on first use (the same URL, a ``Store`` object's too; a new in-memory store when ``store`` is None). An environment
        given a shared ``evaluator=`` cannot be copied: it would no longer share it."""
        if self._evaluator is not None and not self._owns_evaluator:
            raise TypeError(f"{type(self).__name__} was given a shared evaluator= and cannot be pickled or copied; "
                            "create it with the model, platform and store instead")
        state = self.__dict__.copy()
        store = self._evaluator_kwargs.get("store")
        if store is not None and not isinstance(store, (str, Path)):  # a Store object: the copy opens its URL
            if store.has_password:  # its shown URL hides the password: the copy could not open it
                raise TypeError(f"{type(self).__name__} was given a Store object whose URL has a password and cannot "
                                "be pickled or copied; pass store= as the URL instead")
            state["_evaluator_kwargs"] = {**self._evaluator_kwargs, "store": store.url}
        state["_evaluator"] = None
        state["_closed"] = False
        return state

    # ------------------------------------------------------------- properties
    @property
    def evaluator(self) -> "Evaluator":
        """The evaluator (created on first access; nothing is measured by creating it)."""
        if self._evaluator is None:
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
            "measurement_id": m.extra.get("_id"),
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
        if self.info_measurement:
            info["measurement"] = m
        self._last = {"assignment": list(assignment), "reward": reward, **info}
        return reward, info

    @staticmethod
    def _check_reset_options(options: Any) -> None:
        """``reset(options=...)``: these environments take no reset options; refuse them rather than
        silently ignore them."""
        if options is None or (isinstance(options, dict) and not options):
            return
        shown = ", ".join(repr(k)[:40] for k in list(options)[:5]) if isinstance(options, dict) else \
            type(options).__name__
        raise ConfigError(f"reset() takes no options (got {shown}): set the model, platform, objective and "
                          "granularity when creating the environment")

    def _check_action_int(self, action: Any, n: int) -> int:
        try:
            arr = np.asarray(action).reshape(())
            if arr.dtype.kind not in "iu":  # 1.7, "1", inf, True: not a device index
                raise TypeError
            a = int(arr)
        except (TypeError, ValueError, OverflowError):
            raise PlacementError(f"action {str(action)[:40]!r} is not a device index (an int in 0..{n - 1})") from None
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
            lines.append(f"{mark}{i:4d} {dev:5s} [{allowed}] {u.name} ({plural(len(u.layers), 'layer')})")
        if self._last is not None:
            r = self._last
            if r["feasible"]:
                lines.append(
                    f"last: {r['status']} latency {r['latency_ms']:.3f} ms, reward {r['reward']:+.4f}, "
                    f"{versus(r['gain'], self.objective.names[0])} vs all-GPU{' (cache hit)' if r['cache_hit'] else ''}"
                )
            else:
                lines.append(f"last: {r['status']}: {r['reason']}, reward {r['reward']:+.4f}")
        return "\n".join(lines)

    def _render_state(self) -> tuple[list[int], int | None]:
        """The assignment to draw (-1: not placed yet) and the unit under the cursor (None: none)."""
        raise NotImplementedError

    def render(self) -> "str | np.ndarray | None":
        """``ansi``: a text table of the units, their allowed devices and the assignment so far;
        ``rgb_array``: the same as an image (one column per unit, one band per device: the device's
        colour where the unit is placed, grey where it may go, black where it may not; a white bar
        under the unit at the cursor), an ``(H, W, 3)`` uint8 array for video recorders."""
        if self.render_mode is None:
            return None
        assignment, cursor = self._render_state()
        if self.render_mode == "ansi":
            return self._render_table(assignment, cursor)
        return self._render_image(assignment, cursor)

    def _render_image(self, assignment: Sequence[int], cursor: int | None) -> np.ndarray:
        cell = 4
        n, d = self.n_units, self.n_devices
        img = np.zeros(((d + 1) * cell * 2, max(n, 1) * cell, 3), dtype=np.uint8)
        for i in range(n):
            cols = slice(i * cell, (i + 1) * cell)
            for k in range(d):
                rows = slice(k * cell * 2, (k + 1) * cell * 2)
                if assignment[i] == k:
                    img[rows, cols] = _DEVICE_COLOURS[k % len(_DEVICE_COLOURS)]
                elif self._mask[i, k]:
                    img[rows, cols] = 80
            if cursor == i:
                img[d * cell * 2:, cols] = 255
        return img

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



#: rgb_array colours of the devices, in the space's device order (GPU, DLA0, DLA1)
_DEVICE_COLOURS = ((118, 185, 0), (0, 120, 215), (230, 120, 0))


def _num(x: Any) -> float:
    """float, NaN for None (info values keep one type so vector envs can batch them)."""
    if x is None:
        return float("nan")
    return float(x)


def feature_box(features: np.ndarray) -> spaces.Box:
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
        try:
            return get_platform(value).name == ev.platform.name
        except Exception:  # noqa: BLE001 - an unknown name simply does not match
            return False
    if key == "mode":
        return value == ev.settings.mode
    if key == "precision":
        return value == ev.settings.precision
    if key == "objective":
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

