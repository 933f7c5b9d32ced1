"""Gymnasium conventions a reinforcement-learning library relies on: the ``rgb_array`` render mode
(stable-baselines3's ``make_vec_env`` asks every environment made by id for it), pickling and
``copy.deepcopy`` (lookahead copies, vector-env workers), each on all three registered environments."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from placetune.envs import ONESHOT_ENV_ID, PLACEMENT_ENV_ID, STAGES_ENV_ID, register_envs
from placetune.errors import ConfigError
from placetune.tuning.evaluator import Evaluator

register_envs()

TASK = dict(model="seed-block", platform="orin-agx", mode="pipeline", objective="throughput")
IDS = [PLACEMENT_ENV_ID, ONESHOT_ENV_ID, STAGES_ENV_ID]


def _masked(env: gym.Env, rng: np.random.Generator):
    """A random allowed action (a device per unit for the one-shot env)."""
    base = env.unwrapped
    mask = np.asarray(base.action_masks(), dtype=bool)
    if isinstance(env.action_space, gym.spaces.MultiDiscrete):
        rows = mask.reshape(base.n_units, base.n_devices)
        return np.array([rng.choice(np.flatnonzero(r)) for r in rows])
    return int(rng.choice(np.flatnonzero(mask)))


def _episode(env: gym.Env, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    rewards, done = [], False
    while not done:
        _, r, terminated, truncated, _ = env.step(_masked(env, rng))
        rewards.append(r)
        done = terminated or truncated
    return rewards


@pytest.mark.parametrize("env_id", IDS)
def test_rgb_array_render_mode_as_stable_baselines_asks_for_it(env_id):
    # make_vec_env(id) calls gym.make(id, render_mode="rgb_array", **env_kwargs) and falls back only on TypeError
    env = gym.make(env_id, render_mode="rgb_array", **TASK)
    assert "rgb_array" in env.metadata["render_modes"]
    env.reset(seed=0)
    first = env.render()
    env.step(_masked(env, np.random.default_rng(0)))
    after = env.render()
    assert isinstance(first, np.ndarray) and first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3
    assert first.shape == after.shape
    assert not np.array_equal(first, after)  # the placed unit is drawn
    check_env(gym.make(env_id, render_mode="rgb_array", **TASK).unwrapped)  # render checks included
    env.close()


def test_unknown_render_mode_is_one_line_naming_the_modes():
    with pytest.raises(ConfigError, match="use None, 'ansi' or 'rgb_array'"):
        gym.make(PLACEMENT_ENV_ID, render_mode="depth_array", **TASK)


@pytest.mark.parametrize("env_id", IDS)
def test_a_stepped_env_pickles_and_deep_copies_and_the_copy_continues_alike(env_id):
    env = gym.make(env_id, **TASK)
    env.reset(seed=3)
    if env_id != ONESHOT_ENV_ID:  # mid-episode
        env.step(_masked(env, np.random.default_rng(1)))
    deep = copy.deepcopy(env)
    loaded = pickle.loads(pickle.dumps(env))
    ours, theirs, third = _episode(env, 5), _episode(deep, 5), _episode(loaded, 5)
    assert ours == theirs == third
    # the copies reset as the original does: same seed, same episode
    deep.reset(seed=9)
    env.reset(seed=9)
    assert _episode(env, 2) == _episode(deep, 2)
    for e in (env, deep, loaded):
        e.close()


def test_an_env_sharing_an_evaluator_refuses_pickling_in_one_line(tmp_path):
    ev = Evaluator("seed-block", "orin-agx", store=f"sqlite:///{tmp_path / 'p.db'}")
    env = gym.make(PLACEMENT_ENV_ID, evaluator=ev)
    with pytest.raises(TypeError, match="shared evaluator= and cannot be pickled"):
        pickle.dumps(env.unwrapped)
    ev.close()


@pytest.mark.parametrize("env_id", IDS)
def test_same_reset_seed_same_episode_with_timing_noise_seeded_by_the_seed_option(env_id):
    """README: the same ``reset(seed=...)`` and actions give the same episode on the simulated Jetson; the
    timing noise is seeded by the ``seed=`` option, not by ``reset``."""
    def episode(seed_option: int, reset_seed: int):
        env = gym.make(env_id, noise=0.05, seed=seed_option, **TASK)
        env.reset(seed=reset_seed)
        out = _episode(env, 11)
        env.close()
        return out

    assert episode(0, 4) == episode(0, 4)
    assert episode(0, 4) == episode(0, 5)  # the device's noise, not the episode's
    assert episode(0, 4) != episode(1, 4)


def test_an_env_given_a_store_object_copies_with_the_stores_url(tmp_path):
    from placetune.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 's.db'}")
    env = gym.make(PLACEMENT_ENV_ID, store=store, study="s", **{k: v for k, v in TASK.items()})
    env.reset(seed=0)
    twin = copy.deepcopy(env)
    twin.reset(seed=0)
    assert _episode(twin, 3) == _episode(env, 3)
    assert twin.unwrapped.evaluator.store.url == store.url
    twin.close()
    env.close()
    store.close()


def test_a_misspelt_environment_argument_is_named_with_the_arguments_the_env_takes():
    """``granularty=`` was answered with the measurement options only, as if the environment took nothing else."""
    with pytest.raises(ConfigError) as exc:
        gym.make(STAGES_ENV_ID, granularty="fusion", **TASK)
    msg = str(exc.value)
    assert "granularty" in msg and "\n" not in msg
    for name in ("granularity", "max_stages", "penalty", "render_mode", "frames_in_flight"):
        assert name in msg, msg
