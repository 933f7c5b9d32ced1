"""The placement environments' Gymnasium ids and their registration (light: imports no environment)."""

from __future__ import annotations

import gymnasium as gym

__all__ = ["PLACEMENT_ENV_ID", "ONESHOT_ENV_ID", "STAGES_ENV_ID", "ENTRY_POINTS", "register_envs"]

#: Id of the sequential environment (:class:`~placetune.envs.sequential.PlacementEnv`).
PLACEMENT_ENV_ID = "placetune/Placement-v0"
#: Id of the one-shot environment (:class:`~placetune.envs.oneshot.PlacementOneShotEnv`).
ONESHOT_ENV_ID = "placetune/PlacementOneShot-v0"
#: Id of the stages environment (:class:`~placetune.envs.stages.PlacementStagesEnv`).
STAGES_ENV_ID = "placetune/PlacementStages-v0"
#: Env id -> the entry point Gymnasium imports when the environment is made.
ENTRY_POINTS = {
    PLACEMENT_ENV_ID: "placetune.envs:PlacementEnv",
    ONESHOT_ENV_ID: "placetune.envs:PlacementOneShotEnv",
    STAGES_ENV_ID: "placetune.envs:PlacementStagesEnv",
}


def register_envs() -> None:
    """Register ``placetune/Placement-v0``, ``placetune/PlacementOneShot-v0`` and ``placetune/PlacementStages-v0``
    (idempotent).

    ``import placetune`` calls it; calling it again does nothing. Registering imports no
    environment: Gymnasium imports its entry point when the environment is made.

    Example:
        >>> register_envs(); register_envs()
        >>> import gymnasium as gym
        >>> "placetune/Placement-v0" in gym.registry
        True
    """
    for env_id, entry in ENTRY_POINTS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=entry, nondeterministic=True)
