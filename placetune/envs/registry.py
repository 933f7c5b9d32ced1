"""Making a placement environment by id or kind (registering them: :mod:`placetune.envs.ids`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from placetune.envs.ids import ONESHOT_ENV_ID, PLACEMENT_ENV_ID, STAGES_ENV_ID, register_envs
from placetune.errors import ConfigError

__all__ = ["register_envs", "make_env"]

_KINDS = {
    "sequential": PLACEMENT_ENV_ID,
    "placement": PLACEMENT_ENV_ID,
    "oneshot": ONESHOT_ENV_ID,
    "one-shot": ONESHOT_ENV_ID,
    "one_shot": ONESHOT_ENV_ID,
    "stages": STAGES_ENV_ID,
}


def make_env(id_or_kind: str = PLACEMENT_ENV_ID, **kwargs: Any) -> gym.Env:
    """``gymnasium.make`` for placetune envs, registering them first.

    Args:
        id_or_kind: an env id, or a kind: ``sequential`` / ``placement`` (Placement-v0),
            ``oneshot`` / ``one-shot`` (PlacementOneShot-v0), ``stages`` (PlacementStages-v0).
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
            f"unknown environment {id_or_kind!r}; use {PLACEMENT_ENV_ID}, {ONESHOT_ENV_ID}, {STAGES_ENV_ID} or a "
            f"kind "
            f"({', '.join(_KINDS)})"
        )
    return gym.make(env_id, **kwargs)

