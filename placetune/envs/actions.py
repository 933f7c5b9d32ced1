"""Uniformly random allowed actions for the placement environments, read through any wrappers."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from placetune.envs.base import PlacementEnvBase
from placetune.envs.oneshot import PlacementOneShotEnv
from placetune.errors import ConfigError


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
    if not isinstance(base, PlacementEnvBase):
        raise ConfigError(f"masked_random_action needs a placetune env, got {type(base).__name__}")
    mask = np.asarray(env.get_wrapper_attr("action_masks")(), dtype=bool)
    if isinstance(base, PlacementOneShotEnv):
        rows = mask.reshape(base.n_units, base.n_devices)
        return np.array([int(rng.choice(np.flatnonzero(r))) for r in rows], dtype=np.int64)
    return int(rng.choice(np.flatnonzero(mask)))

