"""sb3-contrib MaskablePPO on ``placetune/Placement-v0``, with no adapter code.

The environment already speaks the conventions MaskablePPO needs: a ``Dict`` observation
of fixed-shape ``Box``es (``MultiInputPolicy``), a ``Discrete`` action per decision unit
and an ``action_masks()`` method (found through the wrappers ``gymnasium.make`` adds). So
this is the whole program. Not a placetune dependency:

    pip install sb3-contrib
    python search/examples/maskable_ppo.py --model resnet18 --timesteps 20000

It minimises energy per inference by default: for latency at batch 1 the GPU alone is
usually optimal (every DLA split adds boundary reformats), whereas the DLAs run INT8
convolutions at a fraction of the GPU's power, so placement pays. It prints the learned
placement's gain over the all-GPU and all-DLA (+GPU fallback) baselines.

Everything is measured by the simulated Jetson unless ``--backend`` says otherwise.
"""

from __future__ import annotations

import argparse

import gymnasium as gym

import placetune  # noqa: F401 - registers placetune/Placement-v0


def main(argv: list[str] | None = None) -> None:
    """Train MaskablePPO, then place the network greedily with the trained policy."""
    try:
        from sb3_contrib import MaskablePPO  # type: ignore[import-not-found]
    except ImportError:
        raise SystemExit("this example needs sb3-contrib: pip install sb3-contrib") from None

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--platform", default="orin-agx")
    ap.add_argument("--mode", default="engine")
    ap.add_argument("--precision", default="int8")
    ap.add_argument("--objective", default="energy", help="energy (default), throughput, latency...")
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
    base = env.unwrapped
    ev = base.evaluator
    dla = ev.objective.value(ev.evaluate(placetune.Placement.all_dla(ev.model, 0), agent="baseline"))
    value, gpu = info["objective_value"], info["baseline_value"]
    sim = " (SIMULATED)" if ev.backend.simulated else ""
    print(f"MaskablePPO{sim}: {info['status']}, {args.objective} {value:.4g} {ev.objective.units[0]}")
    print(f"  all-GPU {gpu:.4g}: gain x{ev.objective.gain(value, gpu):.3f}")
    if dla is not None:
        print(f"  all-DLA0 (+fallback) {dla:.4g}: gain x{ev.objective.gain(value, dla):.3f}")
    print(info["placement"])
    env.close()


if __name__ == "__main__":
    main()
