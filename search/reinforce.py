"""``reinforce``: a numpy policy-gradient agent on ``placetune/Placement-v0``.

The agent drives the sequential Gymnasium environment (``gymnasium.make(
"placetune/Placement-v0", evaluator=evaluator)``) exactly as any RL library would: one
step per decision unit, the action sampled from a masked softmax over the unit's devices
(``info["action_mask"]``), the reward ``log(gain over all-GPU)`` at the end of the
episode. The policy is

    logits[i, k] = theta[i, k] + mlp(features[i])[k]

per-unit logits plus a small MLP over the unit features the env observes (``hidden=0``,
the default, makes it linear), trained with REINFORCE and a moving-average baseline, with Adam. There
is no torch dependency.

``warm_start`` plays the baselines (all-GPU, all-DLA with fallback...) as the first
episodes and centres the per-unit logits on the best of them, so sampling starts as a
local exploration around it. A full assignment the run has already measured is not
replayed through the env: its reward is reused for the update and no budget is spent.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from placetune.placement.placement import Placement

from .base import Agent, Budget, SearchResult, SearchRun, baseline_assignments, canonical, in_range
import gymnasium as gym
from placetune.tuning.constraints import total_violation

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator

__all__ = ["ReinforceAgent", "Policy"]


def _masked_softmax(logits: np.ndarray, mask: np.ndarray) -> np.ndarray:
    z = np.where(mask, logits, -np.inf)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.where(mask, np.exp(z), 0.0)
    return e / e.sum(axis=-1, keepdims=True)


class Policy:
    """Per-unit logits plus an MLP over unit features; masked softmax per unit.

    Args:
        features: ``(n_units, n_features)`` unit features.
        mask: ``(n_units, n_devices)`` allowed devices.
        hidden: MLP hidden width (0: a linear map of the features).
        rng: initialisation randomness.
    """

    def __init__(self, features: np.ndarray, mask: np.ndarray, hidden: int, rng: np.random.Generator) -> None:
        self.f = np.asarray(features, dtype=np.float64)
        self.mask = np.asarray(mask, dtype=bool)
        n, k = self.mask.shape
        nf = self.f.shape[1]
        self.params: dict[str, np.ndarray] = {"theta": np.zeros((n, k))}
        if hidden > 0:
            self.params["w1"] = rng.normal(0.0, 1.0 / math.sqrt(max(nf, 1)), (nf, hidden))
            self.params["b1"] = np.zeros(hidden)
            self.params["w2"] = np.zeros((hidden, k))
        else:
            self.params["w"] = np.zeros((nf, k))
        self.hidden = hidden
        self._m = {p: np.zeros_like(v) for p, v in self.params.items()}
        self._v = {p: np.zeros_like(v) for p, v in self.params.items()}
        self._t = 0

    def logits(self) -> tuple[np.ndarray, np.ndarray | None]:
        """``(logits, hidden activations or None)``."""
        p = self.params
        if self.hidden > 0:
            h = np.tanh(self.f @ p["w1"] + p["b1"])
            return p["theta"] + h @ p["w2"], h
        return p["theta"] + self.f @ p["w"], None

    def probs(self) -> np.ndarray:
        """``(n_units, n_devices)`` action probabilities (zero where masked)."""
        return _masked_softmax(self.logits()[0], self.mask)

    def grad_log_prob(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        """Gradient of ``log pi(actions)`` for a full assignment."""
        z, h = self.logits()
        p = _masked_softmax(z, self.mask)
        g = -p
        g[np.arange(len(actions)), actions] += 1.0
        out = {"theta": g}
        if self.hidden > 0:
            assert h is not None
            out["w2"] = h.T @ g
            dh = (g @ self.params["w2"].T) * (1.0 - h * h)
            out["w1"] = self.f.T @ dh
            out["b1"] = dh.sum(axis=0)
        else:
            out["w"] = self.f.T @ g
        return out

    def ascend(self, grad: dict[str, np.ndarray], lr: float, b1: float = 0.9, b2: float = 0.999) -> None:
        """One Adam step up the gradient."""
        self._t += 1
        for k, gk in grad.items():
            self._m[k] = b1 * self._m[k] + (1 - b1) * gk
            self._v[k] = b2 * self._v[k] + (1 - b2) * gk * gk
            mh = self._m[k] / (1 - b1**self._t)
            vh = self._v[k] / (1 - b2**self._t)
            self.params[k] += lr * mh / (np.sqrt(vh) + 1e-8)


class ReinforceAgent(Agent):
    """REINFORCE with a moving-average baseline on the sequential placement env.

    Args:
        seed: seed of the policy initialisation and of the sampling.
        granularity: decision units.
        lr: Adam learning rate.
        hidden: MLP hidden width over unit features (0, the default: a linear map, which
            learned faster than 16 hidden units in benchmarks/bench_search.py).
        baseline_decay: decay of the moving-average reward baseline.
        warm_start: play the baselines first and centre the policy on the best.
        prior: logit bonus of the warm-start device of each unit.
        entropy: entropy bonus weight (keeps exploring).
        max_repeats: policy draws per episode before the sampling temperature is raised
            (a draw that was already measured is redrawn: budget goes to new placements).

    Example:
        >>> from placetune.evaluator import Evaluator
        >>> from search import Budget
        >>> ReinforceAgent(seed=0).run(Evaluator("seed-block", mode="pipeline"), Budget(20)).evaluations
        20
    """

    name = "reinforce"

    def __init__(
        self,
        *,
        seed: int | None = None,
        granularity: str = "fusion",
        lr: float = 0.1,
        hidden: int = 0,
        baseline_decay: float = 0.8,
        warm_start: bool = True,
        prior: float = 4.0,
        entropy: float = 0.0,
        max_repeats: int = 200,
    ) -> None:
        super().__init__(seed=seed, granularity=granularity)
        self.lr = float(lr)
        self.hidden = int(hidden)
        in_range("lr", float(lr), 0.0, above=True)
        in_range("hidden", int(hidden), 0)  # 0: a linear policy
        in_range("baseline_decay", float(baseline_decay), 0.0, 1.0, below=True)  # 1: the baseline never moves
        in_range("prior", float(prior), 0.0)
        in_range("entropy", float(entropy), 0.0)
        in_range("max_repeats", int(max_repeats), 1)
        self.baseline_decay = float(baseline_decay)
        self.warm_start = bool(warm_start)
        self.prior = float(prior)
        self.entropy = float(entropy)
        self.max_repeats = int(max_repeats)

    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Train the policy until the budget is spent; the best sampled placement is the answer."""
        env = gym.make("placetune/Placement-v0", evaluator=evaluator, granularity=self.granularity, info_measurement=True,
                       agent=self.name, disable_env_checker=True)
        base = env.unwrapped
        run = SearchRun(evaluator, budget, self.name, space=base.space)  # type: ignore[attr-defined]
        space = run.space
        rng = np.random.default_rng(self.seed)
        policy = Policy(space.features(), space.mask, self.hidden, rng)
        baseline: float | None = None
        episodes = 0
        centred = not self.warm_start
        rewards: dict[tuple[int, ...], float] = {}
        try:
            if run.exhausted:
                return run.result(episodes=0)
            before = run.evaluations
            env.reset(seed=self.seed)
            if run.evaluations > before:  # the env measured its all-GPU baseline
                gpu = [0] * space.n_units
                run.observe(gpu, Placement.all_gpu(space.model), base.baseline)  # type: ignore[attr-defined]
                rewards[tuple(gpu)] = 0.0
            queue: list[list[int]] = []
            if self.warm_start:  # one of each pair that swaps DLA0 and DLA1 (identical cores)
                twins = {canonical(space, a) for a in rewards}
                for a in baseline_assignments(space).values():
                    if canonical(space, a) not in twins:
                        twins.add(canonical(space, a))
                        queue.append(a)
            temperature = 1.0
            while not run.exhausted:
                if queue:
                    actions = np.array(queue.pop(0), dtype=np.int64)
                else:
                    actions = self._sample(policy, rng, rewards, temperature)
                    if actions is None:  # every draw already measured: flatten the policy
                        temperature *= 2.0
                        if temperature > 1e4:
                            run.notes.append("stopped early: no untried assignment found (space exhausted?)")
                            break
                        continue
                    temperature = max(1.0, temperature / 2.0)
                known = run.answer(actions)  # the study holds it (e.g. a baseline): no episode, no budget
                reward = self._episode(env, run, actions) if known is None else self._reward(base, run, known)
                rewards[tuple(int(a) for a in actions)] = reward
                episodes += 1
                if not centred and not queue:
                    self._centre(policy, run)
                    centred = True
                if baseline is None:
                    baseline = reward
                adv = reward - baseline
                grad = {k: v * adv for k, v in policy.grad_log_prob(actions).items()}
                if self.entropy > 0:
                    p = policy.probs()
                    logp = np.log(np.where(p > 0, p, 1.0))
                    grad["theta"] = grad["theta"] - self.entropy * p * (logp - (p * logp).sum(axis=1, keepdims=True))
                policy.ascend(grad, self.lr)
                baseline = self.baseline_decay * baseline + (1 - self.baseline_decay) * reward
        finally:
            env.close()
        return run.result(episodes=episodes)

    def _sample(
        self, policy: Policy, rng: np.random.Generator, tried: dict[tuple[int, ...], float], temperature: float
    ) -> np.ndarray | None:
        """A policy sample (at ``temperature``) not measured yet, or None after ``max_repeats`` draws."""
        z, _ = policy.logits()
        probs = _masked_softmax(z / temperature, policy.mask)
        cum = probs.cumsum(axis=1)
        for _ in range(self.max_repeats):
            u = rng.random((len(cum), 1))
            actions = np.minimum((cum < u).sum(axis=1), cum.shape[1] - 1)
            actions = np.where(policy.mask[np.arange(len(actions)), actions], actions, 0)
            if tuple(int(a) for a in actions) not in tried:
                return actions
        return None

    def _centre(self, policy: Policy, run: SearchRun) -> None:
        """Put the prior on the best assignment measured so far."""
        if run.best_assignment is None:
            return
        theta = np.zeros_like(policy.params["theta"])
        theta[np.arange(len(run.best_assignment)), run.best_assignment] = self.prior
        policy.params["theta"] = theta

    @staticmethod
    def _reward(env: Any, run: SearchRun, m: Any) -> float:
        """The reward the environment gives a measurement: log(gain over all-GPU), its penalty on a failure."""
        value = run.objective.value(m)
        if not m.ok or value is None or not value > 0:
            return float(env.penalty)
        return _constrained(run, m, math.log(run.objective.gain(float(value), env.baseline_value)))

    def _episode(self, env: Any, run: SearchRun, actions: np.ndarray) -> float:
        """Play one episode with fixed actions; record the measurement; return the reward."""
        obs, info = env.reset()
        reward = 0.0
        done = False
        i = 0
        while not done:
            mask = np.asarray(info["action_mask"], dtype=bool)
            a = int(actions[i])
            if not mask[a]:  # never happens with the space's mask; stay honest anyway
                a = 0
                actions[i] = 0
            obs, reward, done, _, info = env.step(a)
            i += 1
        m = info["measurement"]
        placement = run.space.to_placement([int(x) for x in actions])
        run.observe([int(x) for x in actions], placement, m)
        return _constrained(run, m, float(reward))


def _constrained(run: SearchRun, m: Any, reward: float) -> float:
    """A violated constraint's reward: below every feasible episode's."""
    if m.ok and not run.objective.feasible(m):
        return min(reward, 0.0) - 1.0 - min(total_violation(run.objective.constraints, m), 10.0)
    return reward
