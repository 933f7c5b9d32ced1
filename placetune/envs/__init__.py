"""Gymnasium environments: search placements with any RL library or a hand-written agent.

Three environments are registered (``import placetune`` registers them; so does
:func:`register_envs`, which is idempotent):

``placetune/Placement-v0`` (:class:`PlacementEnv`)
    Sequential: one step per decision unit, in topological order. The action is a
    device index (``Discrete(n_devices)``); the episode has exactly ``n_units`` steps.
``placetune/PlacementOneShot-v0`` (:class:`PlacementOneShotEnv`)
    One step per episode: the action is the whole assignment
    (``MultiDiscrete([n_devices] * n_units)``).
``placetune/PlacementStages-v0`` (:class:`PlacementStagesEnv`)
    Sequential over blocks: one step per block of the network (the units between two block
    boundaries), ``Discrete(n_devices)``; consecutive blocks on one device form a stage and
    the action mask keeps at most ``max_stages`` stages. The space where pipeline placements
    live: ResNet-18 has 13 blocks.

Reward
    0 on every step but the last. The last step measures the placement and returns
    ``log(gain)`` over the all-GPU baseline of the objective's primary component:
    ``log(baseline_latency / latency)`` for ``latency`` (and ``energy``),
    ``log(throughput / baseline_throughput)`` for ``throughput``. The all-GPU placement
    scores exactly 0. A placement that is infeasible or fails to build/run, or that
    has no value for the objective, scores ``penalty`` (default -1.0) and
    ``info["reason"]`` says why.

Final info
    Summary numbers (``latency_ms``, ``throughput_fps``, ``energy_mj``, ``objective_value``,
    ``baseline_value``, ``gain``, ``feasible``, ``status``, ``reason``, ``cache_hit``,
    ``measurement_id``) and the requested / realised placements; the whole
    :class:`~placetune.measurement.Measurement` (``info["measurement"]``, with its latency
    samples) only with ``info_measurement=True``.

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
    On the simulated Jetson an episode is reproducible: the same ``reset(seed=...)`` and the same
    actions give the same observations, rewards and infos (the timing noise, ``noise=``, is seeded
    by the ``seed`` measurement option, a property of the device, not by ``reset``'s seed). On a
    real backend timings are not. The envs are registered with ``nondeterministic=True`` for every
    backend, the simulated one included, for two reasons: the flag belongs to the registration
    (one id for every backend; ``gymnasium.make`` overwrites the env's spec with the registered
    one), and even on the simulated Jetson a step is not repeatable in Gymnasium's sense, which
    compares infos too: the same action after the same ``reset(seed=...)`` is a cache hit the
    second time (``info["cache_hit"]`` True; the store remembers the first measurement, with the
    same figures), and Gymnasium's ``check_step_determinism`` fails on that info. An env
    constructed directly (without ``gymnasium.make``) carries an equivalent spec, so ``check_env``
    treats it the same way.

Masks
    ``info["action_mask"]`` is in the form ``action_space.sample(mask=...)`` takes (int8; a tuple of
    per-unit masks for the one-shot env); ``action_masks()`` is sb3-contrib's (bool, flat).

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

from typing import TYPE_CHECKING, Any
import importlib

from placetune.envs.ids import ONESHOT_ENV_ID, PLACEMENT_ENV_ID, STAGES_ENV_ID, register_envs

__all__ = [
    "PlacementEnv",
    "PlacementOneShotEnv",
    "PlacementStagesEnv",
    "PLACEMENT_ENV_ID",
    "ONESHOT_ENV_ID",
    "STAGES_ENV_ID",
    "register_envs",
    "make_env",
    "masked_random_action",
]

#: Name -> its module, imported on first use (registering the environments imports none of them).
_LAZY = {
    "PlacementEnv": "placetune.envs.sequential",
    "PlacementOneShotEnv": "placetune.envs.oneshot",
    "PlacementStagesEnv": "placetune.envs.stages",
    "make_env": "placetune.envs.registry",
    "masked_random_action": "placetune.envs.actions",
}


def __getattr__(name: str) -> Any:
    """The environments and helpers, each imported from its module the first time it is used."""
    if name not in _LAZY:
        raise AttributeError(f"module 'placetune.envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from placetune.envs.actions import masked_random_action
    from placetune.envs.oneshot import PlacementOneShotEnv
    from placetune.envs.registry import make_env
    from placetune.envs.sequential import PlacementEnv
    from placetune.envs.stages import PlacementStagesEnv
