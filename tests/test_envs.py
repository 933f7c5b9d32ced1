"""Gymnasium environments: API conformance, masks, rewards, infeasibility, vectorisation."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from placetune.envs import (
    ONESHOT_ENV_ID,
    PLACEMENT_ENV_ID,
    PlacementEnv,
    PlacementOneShotEnv,
    make_env,
    masked_random_action,
    register_envs,
)
from placetune.errors import ConfigError, PlacementError
from placetune.tuning.evaluator import Evaluator

register_envs()

ENV_CLASSES = {PLACEMENT_ENV_ID: PlacementEnv, ONESHOT_ENV_ID: PlacementOneShotEnv}


def _check_env_no_warnings(env: gym.Env) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env)
    relevant = [str(w.message) for w in caught if "gymnasium" in w.filename or "env_checker" in str(w.message)]
    assert not relevant, relevant


def _run_sequential(env: gym.Env, actions):
    obs, info = env.reset(seed=0)
    steps, reward, terminated = 0, 0.0, False
    for a in actions:
        obs, reward, terminated, truncated, info = env.step(a)
        steps += 1
        assert not truncated
        if terminated:
            break
    return steps, reward, terminated, info


# ----------------------------------------------------------------- API checks
@pytest.mark.parametrize("env_id", [PLACEMENT_ENV_ID, ONESHOT_ENV_ID])
@pytest.mark.parametrize("model", ["seed-block", "resnet18"])
def test_check_env_through_make(env_id: str, model: str) -> None:
    env = gym.make(env_id, model=model)
    assert env.spec is not None and env.spec.nondeterministic is True
    _check_env_no_warnings(env.unwrapped)
    env.close()


@pytest.mark.parametrize("env_id", [PLACEMENT_ENV_ID, ONESHOT_ENV_ID])
@pytest.mark.parametrize("model", ["seed-block", "resnet18"])
def test_check_env_on_instance(env_id: str, model: str) -> None:
    env = ENV_CLASSES[env_id](model=model)
    # Constructed directly, the env still declares itself nondeterministic (timings, cache hits).
    assert env.spec is not None and env.spec.nondeterministic is True and env.spec.id == env_id
    _check_env_no_warnings(env)
    env.close()


def test_register_is_idempotent_and_make_env_kinds() -> None:
    register_envs()
    register_envs()
    assert gym.spec(PLACEMENT_ENV_ID).nondeterministic
    assert gym.spec(ONESHOT_ENV_ID).nondeterministic
    assert isinstance(make_env("sequential", model="seed-block").unwrapped, PlacementEnv)
    assert isinstance(make_env("oneshot", model="seed-block").unwrapped, PlacementOneShotEnv)
    assert isinstance(make_env(ONESHOT_ENV_ID, model="seed-block").unwrapped, PlacementOneShotEnv)
    with pytest.raises(ConfigError, match="unknown environment"):
        make_env("nonsense")


def test_construction_is_cheap() -> None:
    env = gym.make(PLACEMENT_ENV_ID, model="resnet18")
    assert env.unwrapped._evaluator is None  # nothing created yet
    assert env.unwrapped.evaluator.stats.requested == 0  # creating it measures nothing
    env.reset(seed=0)
    assert env.unwrapped.evaluator.stats.requested == 1  # the baseline, on first reset

    ev = Evaluator("seed-block", "orin-agx")
    shared = gym.make(ONESHOT_ENV_ID, evaluator=ev)
    assert ev.stats.requested == 0
    shared.close()


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="unknown environment option"):
        PlacementEnv(model="seed-block", gpu_falback=False)
    with pytest.raises(ConfigError, match="render_mode"):
        PlacementEnv(model="seed-block", render_mode="human")
    ev = Evaluator("seed-block", "orin-agx")
    with pytest.raises(ConfigError, match="leave out model"):
        PlacementEnv(model="resnet50", evaluator=ev)
    PlacementEnv(model="seed-block", evaluator=ev)  # agreeing arguments are fine


# ----------------------------------------------------------------- episodes
@pytest.mark.parametrize("model", ["seed-block", "resnet18"])
def test_episode_length_and_reward_matches_independent_baseline(model: str) -> None:
    env = gym.make(PLACEMENT_ENV_ID, model=model, info_measurement=True)
    n = env.unwrapped.n_units
    env.action_space.seed(1)
    obs, info = env.reset(seed=1)
    assert obs["cursor"][0] == 0 and (obs["assignment"] == -1).all()
    rewards = []
    for t in range(n):
        a = env.action_space.sample(mask=info["action_mask"])
        obs, r, terminated, truncated, info = env.step(a)
        rewards.append(r)
        assert obs["cursor"][0] == t + 1
        assert terminated == (t == n - 1)
    assert all(r == 0.0 for r in rewards[:-1])
    assert info["feasible"] and info["reason"] is None
    m = info["measurement"]
    assert info["latency_ms"] == m.latency_ms["median"]
    baseline = Evaluator(model, "orin-agx").baseline().latency_ms["median"]
    assert rewards[-1] == pytest.approx(math.log(baseline / info["latency_ms"]), rel=1e-9)
    for key in ("throughput_fps", "energy_mj", "cache_hit", "placement", "measurement", "reason"):
        assert key in info
    assert set(info["placement"]) == {"default", "layers"}
    with pytest.raises(PlacementError, match="reset"):
        env.step(0)


def test_throughput_reward_is_log_of_ratio() -> None:
    env = PlacementOneShotEnv(model="seed-block", objective="throughput")
    env.reset(seed=0)
    action = np.ones(env.n_units, dtype=np.int64)
    _, r, terminated, _, info = env.step(action)
    base = Evaluator("seed-block", "orin-agx", objective="throughput").baseline().throughput_fps
    assert terminated and info["feasible"]
    assert r == pytest.approx(math.log(info["throughput_fps"] / base), rel=1e-9)


@pytest.mark.parametrize("env_id", [PLACEMENT_ENV_ID, ONESHOT_ENV_ID])
def test_all_gpu_episode_scores_zero(env_id: str) -> None:
    env = gym.make(env_id, model="resnet18")
    n = env.unwrapped.n_units
    env.reset(seed=0)
    if env_id == PLACEMENT_ENV_ID:
        steps, r, terminated, info = _run_sequential(env, [0] * n)
        assert steps == n
    else:
        _, r, terminated, _, info = env.step(np.zeros(n, dtype=np.int64))
    assert terminated and r == 0.0
    assert info["gain"] == 1.0 and info["placement"] == {"default": "GPU", "layers": {}}


def test_repeat_placement_is_a_cache_hit() -> None:
    env = PlacementOneShotEnv(model="seed-block")
    env.reset(seed=0)
    a = np.array([1, 0, 1, 0, 0])
    _, r1, _, _, i1 = env.step(a)
    env.reset()
    _, r2, _, _, i2 = env.step(a)
    assert not i1["cache_hit"] and i2["cache_hit"] and r1 == r2
    stats = env.evaluator.stats
    assert stats.requested == 3 and stats.cache_hits == 1


# ----------------------------------------------------------------- masks
@pytest.mark.parametrize(
    ("model", "platform", "precision"),
    [("model-gn", "orin-agx", "int8"), ("resnet50", "xavier-agx", "fp16")],
)
def test_masked_random_agent_respects_masks(model: str, platform: str, precision: str) -> None:
    env = gym.make(PLACEMENT_ENV_ID, model=model, platform=platform, precision=precision,
                   info_measurement=True)
    base = env.unwrapped
    space = base.space
    masked_units = [i for i in range(base.n_units) if not space.mask[i].all()]
    assert masked_units, "the model should have units the DLA cannot run"
    env.action_space.seed(7)
    for episode in range(5):
        obs, info = env.reset(seed=episode)
        steps, terminated = 0, False
        while not terminated:
            mask = info["action_mask"]
            assert mask.dtype == np.int8 and mask.shape == (base.n_devices,)
            assert (obs["mask"] == mask).all()
            assert (base.action_masks() == mask.astype(bool)).all()
            a = env.action_space.sample(mask=mask)
            assert mask[a] == 1 and space.mask[steps, a] == 1
            obs, r, terminated, truncated, info = env.step(a)
            assert not info["invalid_action"]
            steps += 1
        assert steps == base.n_units
        m = info["measurement"]
        for i in masked_units:
            for layer in space.units[i].layers:
                assert m.requested[layer] == "GPU"
                assert m.realized[layer] == "GPU"
                assert layer not in m.fallback
        assert info["invalid_actions"] == 0


def test_masked_action_is_mapped_to_gpu_with_a_flag() -> None:
    env = PlacementEnv(model="resnet50", platform="xavier-agx", info_measurement=True)
    masked = [i for i in range(env.n_units) if not env.space.mask[i, 1]]
    env.reset(seed=0)
    for i in range(env.n_units):
        _, _, terminated, _, info = env.step(1)  # DLA everywhere, including masked units
        assert info["invalid_action"] == (i in masked)
    assert terminated and info["invalid_actions"] == len(masked)
    for i in masked:
        assert info["measurement"].requested[env.space.units[i].layers[0]] == "GPU"

    one = PlacementOneShotEnv(model="resnet50", platform="xavier-agx")
    obs, info = one.reset(seed=0)
    assert len(info["action_mask"]) == one.n_units
    assert one.action_masks().shape == (int(one.action_space.nvec.sum()),)
    assert one.action_masks().dtype == bool
    assert (obs["mask"].astype(bool) == one.action_masks()).all()
    _, _, _, _, info = one.step(np.ones(one.n_units, dtype=np.int64))
    assert info["invalid_action"] and info["invalid_units"] == masked


def test_out_of_range_actions_raise() -> None:
    env = PlacementEnv(model="seed-block")
    env.reset(seed=0)
    with pytest.raises(PlacementError, match="out of range"):
        env.step(5)
    one = PlacementOneShotEnv(model="seed-block")
    one.reset(seed=0)
    with pytest.raises(PlacementError):
        one.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(PlacementError):
        one.step(np.full(one.n_units, 2, dtype=np.int64))


def test_masked_random_action_helper() -> None:
    rng = np.random.default_rng(0)
    env = gym.make(PLACEMENT_ENV_ID, model="model-gn", precision="int8")
    _, info = env.reset(seed=0)
    terminated = False
    while not terminated:
        a = masked_random_action(env, rng)
        assert info["action_mask"][a] == 1
        _, _, terminated, _, info = env.step(a)
        assert not info["invalid_action"]
    one = gym.make(ONESHOT_ENV_ID, model="model-gn", precision="int8")
    one.reset(seed=0)
    a = masked_random_action(one, rng)
    _, _, _, _, info = one.step(a)
    assert not info["invalid_action"] and info["feasible"]


# ----------------------------------------------------------------- infeasibility
def test_infeasible_placement_ends_with_penalty() -> None:
    # No GPU fallback and DLA choices kept for unsupported units: asking the DLA for
    # GroupNorm's pieces cannot be built.
    ev = Evaluator("model-gn", "orin-agx", precision="int8", gpu_fallback=False)
    env = gym.make(PLACEMENT_ENV_ID, evaluator=ev, allow_unsupported=True, penalty=-3.5)
    assert env.unwrapped.space.mask.all()
    steps, r, terminated, info = _run_sequential(env, [1] * env.unwrapped.n_units)
    assert terminated and steps == env.unwrapped.n_units
    assert r == -3.5
    assert not info["feasible"] and info["status"] == "infeasible"
    assert "GPU fallback is off" in info["reason"]
    assert math.isnan(info["latency_ms"]) and math.isnan(info["gain"])
    env.close()
    assert ev.stats.requested == 2  # the shared evaluator stays usable after env.close()


def test_loadable_limit_without_fallback_is_infeasible() -> None:
    # Every other unit on the DLA: more than 16 DLA loadables, which needs GPU fallback.
    env = PlacementOneShotEnv(model="resnet50", gpu_fallback=False)
    env.reset(seed=0)
    action = (np.arange(env.n_units) % 2).astype(np.int64) * env.space.mask[:, 1]
    _, r, terminated, _, info = env.step(action)
    assert terminated and r == -1.0 and not info["feasible"]
    assert "loadables" in info["reason"]


# ----------------------------------------------------------------- vector, store, render
def test_sync_vector_env() -> None:
    venv = gym.vector.SyncVectorEnv([lambda: gym.make(PLACEMENT_ENV_ID, model="seed-block")] * 4)
    obs, info = venv.reset(seed=3)
    assert obs["features"].shape[0] == 4 and info["action_mask"].shape == (4, 2)
    n = 5
    finished = 0
    for _ in range(2 * n + 1):
        masks = venv.call("action_masks")
        actions = np.array([np.flatnonzero(m)[-1] for m in masks])
        obs, rewards, terminated, truncated, info = venv.step(actions)
        if terminated.any():
            finished += int(terminated.sum())
            assert info["_latency_ms"][terminated].all()
            assert np.isfinite(info["latency_ms"][terminated]).all()
            assert np.allclose(rewards[terminated], rewards[terminated][0])
    assert finished == 8
    venv.close()


def test_sqlite_store_url_persists(tmp_path) -> None:
    from placetune.store.store import Store

    url = f"sqlite:///{tmp_path / 'env.db'}"
    env = PlacementOneShotEnv(model="seed-block", store=url)
    assert not (tmp_path / "env.db").exists()  # nothing touches the disk before the first reset
    env.reset(seed=0)
    env.step(np.array([1, 1, 0, 0, 0]))
    env.close()
    env.close()
    with Store(url) as store:
        statuses = sorted(r.status for r in store.measurements())
    assert statuses == ["ok", "ok"]  # the baseline and the placement


def test_sqlite_store_is_a_cache_across_envs(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'env.db'}"
    a = np.array([1, 1, 0, 0, 0])
    env = PlacementOneShotEnv(model="seed-block", store=url)
    env.reset(seed=0)
    _, r1, _, _, i1 = env.step(a)
    env.close()
    again = PlacementOneShotEnv(model="seed-block", store=url)
    again.reset(seed=0)
    _, r2, _, _, i2 = again.step(a)
    again.close()
    assert not i1["cache_hit"] and i2["cache_hit"] and r1 == r2


def test_shared_evaluator_survives_spec_copies() -> None:
    ev = Evaluator("seed-block", "orin-agx")
    for env_id in (PLACEMENT_ENV_ID, ONESHOT_ENV_ID):
        env = gym.make(env_id, evaluator=ev)
        _check_env_no_warnings(env.unwrapped)  # check_env re-makes the env from its (deep-copied) spec
        again = gym.make(env.spec)
        assert again.unwrapped.evaluator is ev
        again.close()
        env.close()
    assert ev.stats.requested >= 1 and ev.store is not None


def test_render_ansi() -> None:
    env = gym.make(PLACEMENT_ENV_ID, model="seed-block", render_mode="ansi")
    env.reset(seed=0)
    for _ in range(5):
        env.step(0)
    text = env.render()
    assert "PlacementEnv" in text and "reward +0.0000" in text
    assert "same vs all-GPU" in text and "gain x" not in text and "(1 layers)" not in text  # words, not "x1.000"
    assert PlacementEnv(model="seed-block").render() is None


@pytest.mark.parametrize("env_id", [PLACEMENT_ENV_ID, ONESHOT_ENV_ID])
def test_envs_accept_the_stage_granularity(env_id: str) -> None:
    env = gym.make(env_id, model="seed-block", mode="pipeline", granularity="stages")
    assert env.unwrapped.space.granularity == "stages"
    _check_env_no_warnings(env.unwrapped)
    env.close()


def test_final_info_is_lean_unless_the_measurement_is_asked_for() -> None:
    """The final info once held a whole Measurement (~38 KB with 50 identical samples)."""
    import pickle

    for kw, has in (({}, False), ({"info_measurement": True}, True)):
        env = PlacementOneShotEnv(model="resnet50", **kw)
        env.reset(seed=0)
        _, _, terminated, _, info = env.step(np.zeros(env.n_units, dtype=np.int64))
        assert terminated and ("measurement" in info) == has
        assert info["latency_ms"] > 0 and info["gain"] == pytest.approx(1.0) and info["measurement_id"] is not None
        if not has:
            assert len(pickle.dumps(info)) < 16_000, len(pickle.dumps(info))


@pytest.mark.parametrize("action", [float("inf"), 1.7, "1", True, float("nan")])
def test_step_refuses_actions_that_are_not_device_indexes(action):
    """env.step(float('inf')) once raised OverflowError; 1.7 and "1" were taken."""
    env = PlacementEnv(model="seed-block")
    env.reset(seed=0)
    with pytest.raises(PlacementError, match="is not a device index"):
        env.step(action)
    env.step(np.int64(0))  # the env is still usable


@pytest.mark.parametrize("penalty", ["x", True, float("inf")])
def test_bad_penalty_is_a_config_error(penalty):
    with pytest.raises(ConfigError, match="penalty must be a finite number"):
        PlacementEnv(model="seed-block", penalty=penalty)


def test_a_simulated_step_repeats_its_figures_but_not_its_info_hence_nondeterministic() -> None:
    # why the envs are registered nondeterministic on the simulated Jetson too: the same action after the
    # same reset(seed) measures the same, but the second time it is a cache hit, and Gymnasium compares infos
    import dataclasses

    from gymnasium.utils.env_checker import check_step_determinism

    env = gym.make(ONESHOT_ENV_ID, model="seed-block").unwrapped
    env.action_space.seed(0)
    action = env.action_space.sample()
    env.reset(seed=0)
    _, r0, _, _, i0 = env.step(action)
    env.reset(seed=0)
    _, r1, _, _, i1 = env.step(action)
    assert r0 == r1 and (i0["cache_hit"], i1["cache_hit"]) == (False, True)
    assert {k for k in i0 if str(i0[k]) != str(i1[k])} == {"cache_hit"}
    declared_deterministic = gym.make(ONESHOT_ENV_ID, model="seed-block").unwrapped
    declared_deterministic.spec = dataclasses.replace(declared_deterministic.spec, nondeterministic=False)
    with pytest.raises(AssertionError, match="info"):
        check_step_determinism(declared_deterministic)
    env.close()
    declared_deterministic.close()
