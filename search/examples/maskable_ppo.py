"""sb3-contrib MaskablePPO on ``placetune/Placement-v0``, with no adapter code.

The environment already speaks the conventions MaskablePPO needs: a ``Dict`` observation
of fixed-shape ``Box``es (``MultiInputPolicy``), a ``Discrete`` action per decision unit
and an ``action_masks()`` method (found through the wrappers ``gymnasium.make`` adds). So
this is the whole program. Not a placetune dependency and not run in CI:

    pip install sb3-contrib
    python search/examples/maskable_ppo.py --model resnet18 --timesteps 20000

Everything is measured by the simulated Jetson unless ``--backend`` says otherwise.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import placetune  # noqa: F401 - registers placetune/Placement-v0


def main(argv: list[str] | None = None) -> None:
    """Train MaskablePPO, then place the network greedily with the trained policy."""
    from sb3_contrib import MaskablePPO  # type: ignore[import-not-found]

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--platform", default="orin-agx")
    ap.add_argument("--mode", default="engine")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--objective", default="latency")
    ap.add_argument("--backend", default="simulate")
    ap.add_argument("--store", default=None, help="measurement database (default: in memory)")
    ap.add_argument("--timesteps", type=int, default=20_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    env = gym.make(
        "placetune/Placement-v0", model=args.model, platform=args.platform, mode=args.mode,
        precision=args.precision, objective=args.objective, backend=args.backend, store=args.store,
        agent="maskable-ppo",
    )
    model = MaskablePPO("MultiInputPolicy", env, seed=args.seed, verbose=1)
    model.learn(total_timesteps=args.timesteps)

    obs, info = env.reset(seed=args.seed)
    done = False
    while not done:
        action, _ = model.predict(obs, action_masks=env.get_wrapper_attr("action_masks")(), deterministic=True)
        obs, reward, done, _, info = env.step(int(action))
    print(f"{info['status']}: {args.objective} {info['objective_value']:.4g} "
          f"(all-GPU {info['baseline_value']:.4g}, gain x{info['gain']:.3f})")
    print(info["placement"])
    env.close()


if __name__ == "__main__":
    main()
