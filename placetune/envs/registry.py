"""Gymnasium registration of the placement environments, and making one by id or kind."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from placetune.envs.oneshot import ONESHOT_ENV_ID, PlacementOneShotEnv
from placetune.envs.sequential import PLACEMENT_ENV_ID, PlacementEnv
from placetune.envs.stages import STAGES_ENV_ID, PlacementStagesEnv
from placetune.errors import ConfigError

_KINDS = {
    "sequential": PLACEMENT_ENV_ID,
    "placement": PLACEMENT_ENV_ID,
    "oneshot": ONESHOT_ENV_ID,
    "one-shot": ONESHOT_ENV_ID,
    "one_shot": ONESHOT_ENV_ID,
    "stages": STAGES_ENV_ID,
}


def register_envs() -> None:
    """Register ``placetune/Placement-v0``, ``placetune/PlacementOneShot-v0`` and ``placetune/PlacementStages-v0``
    (idempotent).

    ``import placetune`` calls it; calling it again does nothing.

    Example:
        >>> register_envs(); register_envs()
        >>> import gymnasium as gym
        >>> "placetune/Placement-v0" in gym.registry
        True
    """
    for env_id, entry in ((PLACEMENT_ENV_ID, PlacementEnv._entry_point),
                          (ONESHOT_ENV_ID, PlacementOneShotEnv._entry_point),
                          (STAGES_ENV_ID, PlacementStagesEnv._entry_point)):
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, nondeterministic=True)


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

