"""Train sb3-contrib's MaskablePPO to place ResNet-18 as a GPU/DLA pipeline; compare it with all-GPU and guided.

The task: ResNet-18, INT8, pipeline mode on the simulated AGX Orin (GPU, DLA0 and DLA1 each run
a stage), maximise throughput with 4 frames in flight. The environment is
``placetune/PlacementStages-v0``: one step per block of the network (13 for ResNet-18), the
action is the block's device, each DLA core takes one contiguous stretch, and the reward at
the end is ``log`` of the throughput gain over all-GPU.

It prints the environment steps and episodes the training took, how many distinct placements
it measured (each one an engine build on a Jetson), the learned placement against all-GPU,
against best-of-N random (the untrained, masked uniform policy played for as many episodes as
the training: equal evaluations), and how many evaluations the ``guided`` agent needs for the
same throughput. Said plainly: on ResNet-18 learning does not pay here. The median random
placement is slower than all-GPU, but the best of a few random episodes is already the optimum
of this env (1.125x); PPO reaches it on some seeds and not on others. On YOLOv8n (``--model
yolov8n``, 19 blocks) random's best stays below the env's optimum and the learned placement
beats it on most seeds, while ``guided`` finds a better plan outside the env's stage space
(benchmarks/bench_rl.py has the table over seeds 0-9). Everything is
measured by the simulated Jetson (SIMULATED); with ``--backend tensorrt`` on a Jetson every
distinct placement is a real build.

Needs the ``rl`` extra (sb3-contrib, torch; a CPU build of torch is enough):

    pip install -e ".[rl]"
    python examples/train_maskable_ppo.py                   # 16,384 steps, about a minute
    python examples/train_maskable_ppo.py --timesteps 4096 --seed 3
    python examples/train_maskable_ppo.py --model yolov8n
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import numpy as np

import placetune as pt
from placetune.envs import masked_random_action
from placetune.wording import plural, versus
from search import Budget, get_agent

TASK: dict[str, Any] = dict(model="resnet18", platform="orin-agx", mode="pipeline", precision="int8",
                            objective="throughput", frames_in_flight=4)


def _stages(env: Any, info: dict[str, Any]) -> str:
    """``DLA1 /conv1/Conv .. /layer1/layer1.0/conv2/Conv | GPU ...``: each stage's device and first and last unit."""
    units = env.space.units
    return " | ".join(f"{dev} {units[start].name} .. {units[end - 1].name}" for start, end, dev in info["stages"])


def untrained(env: Any, episodes: int, seed: int) -> list[float]:
    """Gains over all-GPU of the masked uniform policy (what the policy does before training)."""
    rng = np.random.default_rng(seed)
    gains = []
    for _ in range(episodes):
        env.reset()
        done = False
        while not done:
            _, _, done, _, info = env.step(masked_random_action(env, rng))
        gains.append(info["gain"])
    return gains


def train(env: Any, timesteps: int, seed: int) -> tuple[Any, list[tuple[int, float, bool]]]:
    """MaskablePPO on ``env``: the model, and (env steps so far, gain, measured) per training episode."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.callbacks import BaseCallback

    torch.set_num_threads(1)  # small networks: one thread is fastest, and reproducible

    class Episodes(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.log: list[tuple[int, float, bool]] = []

        def _on_step(self) -> bool:
            for info, done in zip(self.locals["infos"], self.locals["dones"]):
                if done:
                    self.log.append((self.num_timesteps, info["gain"], not info["cache_hit"]))
            return True

    # gamma 1: the only reward is the last one; short rollouts (20 episodes) and a small network.
    model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=64, gamma=1.0, ent_coef=0.01,
                        policy_kwargs=dict(net_arch=[64, 64]), seed=seed, device="cpu", verbose=0)
    episodes = Episodes()
    model.learn(total_timesteps=timesteps, callback=episodes)
    return model, episodes.log


def greedy(model: Any, env: Any) -> dict[str, Any]:
    """Place the network with the trained policy's most likely action at each block; the final info."""
    obs, _ = env.reset()
    done = False
    while not done:
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=True)
        obs, _, done, _, info = env.step(int(action))
    return info


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Train, place, compare; print the comparison and return its figures."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--timesteps", type=int, default=16_384, help="environment steps of training (default 16384)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--guided-budget", type=int, default=10, help="evaluations of the guided agent (default 10)")
    ap.add_argument("--backend", default="simulate")
    ap.add_argument("--model", default=TASK["model"], choices=("resnet18", "yolov8n"),
                    help="the network to place (default resnet18)")
    args = ap.parse_args(argv)
    task = {**TASK, "model": args.model}
    try:
        import sb3_contrib  # noqa: F401
    except ImportError:
        print('this example needs sb3-contrib and torch: pip install -e ".[rl]"', file=sys.stderr)
        raise SystemExit(1) from None

    env = pt.PlacementStagesEnv(**task, backend=args.backend, agent="maskable-ppo")
    env.reset(seed=args.seed)
    gpu = env.baseline_value
    sim = "SIMULATED" if env.evaluator.backend.simulated else "measured"
    print(f"{env.spec.id}: {env.model.name} on {env.space.platform.name}, {env.settings.mode} "
          f"{env.settings.precision}, throughput with {env.settings.frames_in_flight} frames in flight, "
          f"{env.n_blocks} blocks, {'/'.join(env.devices)} ({sim})")
    print(f"all-GPU: {gpu:,.0f} fps")

    t0 = time.perf_counter()
    model, log = train(env, args.timesteps, args.seed)
    seconds = time.perf_counter() - t0
    info = greedy(model, env)
    gain = float(info["gain"])
    builds = env.evaluator.stats.measured
    first = next(((i + 1, steps, sum(m for _, _, m in log[:i + 1])) for i, (steps, g, _) in enumerate(log)
                  if g >= gain * (1 - 1e-9)), None)
    print(f"MaskablePPO: {model.num_timesteps:,} environment steps = {len(log):,} episodes, each one evaluation; "
          f"{builds:,} distinct placements measured (builds), {seconds:.0f} s")
    print(f"  learned placement: {_stages(env, info)}: {info['objective_value']:,.0f} fps = {gain:.3f}x all-GPU's "
          f"throughput ({versus(gain, 'throughput')})")
    if first is not None:
        print(f"  training first played a placement this good at episode {first[0]:,} (step {first[1]:,}, "
              f"{plural(first[2], 'build')})")
    env.close()

    # Best-of-N random at equal evaluations: the untrained (masked uniform) policy, as many episodes as the
    # training played, on its own evaluator (the training's cache must not start warm).
    probe = pt.PlacementStagesEnv(**task, backend=args.backend, agent="untrained")
    random_gains = untrained(probe, len(log), args.seed)
    probe.close()
    random_best = max(random_gains)
    random_reach = next((i + 1 for i, g in enumerate(random_gains) if g >= gain * (1 - 1e-9)), None)
    print(f"best-of-{len(random_gains)} random (the untrained policy, masked uniform, as many episodes as the training): "
          f"best {random_best:.3f}x all-GPU's throughput, median {statistics.median(random_gains):.3f}x; "
          + (f"first played the learned {gain:.3f}x at episode {random_reach}" if random_reach is not None
             else f"never played the learned {gain:.3f}x"))
    verdict = ("beats" if gain > random_best * (1 + 1e-9) else "matches" if gain >= random_best * (1 - 1e-9)
               else "does not reach")
    print(f"  at equal evaluations the learned placement {verdict} random's best ({gain:.3f}x against {random_best:.3f}x)")

    ev = pt.Evaluator(**task, backend=args.backend)  # its own cache: nothing measured by the training
    result = get_agent("guided", seed=args.seed).run(ev, Budget(args.guided_budget))
    best = float(result.best_value) / gpu
    reach = result.evaluations_to_reach(gain * gpu, rel_tol=0.0)
    print(f"guided agent: {best:.3f}x all-GPU's throughput ({versus(best, 'throughput')}) after {plural(result.evaluations, 'evaluation')} ({plural(result.measured, 'build')}); "
          + (f"reached the learned {gain:.3f}x at evaluation {reach}" if reach is not None
             else f"did not reach the learned {gain:.3f}x"))
    ev.close()
    return {"gain": gain, "steps": model.num_timesteps, "episodes": len(log), "builds": builds,
            "first_episode": first[0] if first else None, "guided_gain": best, "guided_evaluations": reach,
            "untrained_median": statistics.median(random_gains), "random_best": random_best,
            "random_episodes": len(random_gains), "random_reach": random_reach}


if __name__ == "__main__":
    main()
