"""Speed of the simulated Jetson: evaluations per second per model and mode.

An evaluation = ``realise()`` of a random placement + ``SimulatedJetson.measure()``; the
measure-only rate is printed too (what a search pays when the realisation is cached or cheap).
Random placements put every layer on GPU, DLA0 or DLA1 independently, the most fragmented
(worst) case; "blocks" placements cut the network into 6 contiguous device blocks, closer to
what search agents produce. Cost tables are built once per model (first call, not timed).

Usage::

    python benchmarks/bench_simulate.py [--seconds 1.5] [--platform orin-agx]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placetune import Model
from placetune.model import zoo  # noqa: E402
from placetune.backends.simulate.simulator import SimulatedJetson  # noqa: E402
from placetune.placement.placement import Placement  # noqa: E402
from placetune.hardware.platforms import get_platform  # noqa: E402
from placetune.placement.realise import realise  # noqa: E402
from placetune.settings import Settings  # noqa: E402

DEVICES = ("GPU", "DLA0", "DLA1")


def placements(model: Model, kind: str, n: int, rng: random.Random) -> list[Placement]:
    out = []
    names = model.names
    for _ in range(n):
        if kind == "random":
            out.append(Placement(model, {x: rng.choice(DEVICES) for x in names}))
        else:
            cuts = sorted(rng.sample(range(1, len(names)), 5))
            devs, start = {}, 0
            for k, end in enumerate(cuts + [len(names)]):
                d = rng.choice(DEVICES)
                devs.update(dict.fromkeys(names[start:end], d))
                start = end
            out.append(Placement(model, devs))
    return out


def bench(model: Model, platform, mode: str, kind: str, seconds: float, frames: int = 1) -> tuple[float, float, int]:
    """(evaluations/s with realise, measure-only evaluations/s, evaluations run)."""
    sim = SimulatedJetson(timeline=False)
    settings = Settings(mode=mode, precision="int8", iterations=10, frames_in_flight=frames)
    rng = random.Random(0)
    warm = realise(placements(model, kind, 1, rng)[0], platform, mode=mode, precision="int8")
    sim.measure(warm, platform, settings)  # builds the cost tables
    t_real = t_meas = 0.0
    n = 0
    while t_real + t_meas < seconds:
        batch = placements(model, kind, 10, rng)
        t0 = time.perf_counter()
        rs = [realise(p, platform, mode=mode, precision="int8") for p in batch]
        t1 = time.perf_counter()
        for r in rs:
            sim.measure(r, platform, settings)
        t2 = time.perf_counter()
        t_real += t1 - t0
        t_meas += t2 - t1
        n += len(batch)
    return n / (t_real + t_meas), n / t_meas, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="time per configuration")
    ap.add_argument("--platform", default="orin-agx")
    args = ap.parse_args(argv)
    platform = get_platform(args.platform)
    models = [
        ("resnet50", Model.load("resnet50", batch=1)),
        ("vit-tiny depth 12", Model.load("vit-tiny", batch=1)),
        ("vit-tiny depth 32", Model.load(zoo.build("vit-tiny", batch=1, depth=32), name="vit-tiny-32")),
    ]
    print(f"simulated Jetson speed on {platform.name}, INT8, one Python process "
          f"({args.seconds:g} s per row)\n")
    print("| model | layers | mode | placements | eval/s incl. realise() | eval/s measure() only |")
    print("|---|---:|---|---|---:|---:|")
    for label, model in models:
        for mode, frames in (("engine", 1), ("pipeline", 1), ("pipeline", 4), ("replicas", 1)):
            for kind in ("random", "blocks"):
                full, meas, _ = bench(model, platform, mode, kind, args.seconds, frames)
                shown = mode if frames == 1 else f"{mode} K={frames}"
                print(f"| {label} | {len(model.layers)} | {shown} | {kind} | {full:,.0f} | {meas:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
