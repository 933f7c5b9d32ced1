"""Speed of the simulated Jetson: evaluations per second per model and mode.

An evaluation = ``realise()`` of a random placement + ``SimulatedJetson.measure()``; the
measure-only rate is printed too (what a search pays when the realisation is cached or cheap).
Random placements put every layer on GPU, DLA0 or DLA1 independently, the most fragmented
(worst) case; "blocks" placements cut the network into 6 contiguous device blocks, closer to
what search agents produce. Cost tables are built once per model (first call, not timed).

Incremental rows: ``IncrementalSimulator.evaluate_move`` on single-move neighbours (one layer to
another device) of a hill-climbing walk from a "blocks" placement, with the memo cleared before
every evaluation (each neighbour costed afresh: a placement never evaluated before, the simulator
keeps no other memo) and with it (a local optimum's neighbours repeat), and ``evaluate`` on random
placements. ``--before REV`` also runs this script's rows (full path and incremental) with the
code of git revision REV (extracted to a temp dir, run in a subprocess) and prints the ratios side
by side; ``--repeat N`` alternates the two N times and keeps each row's best figure (this
machine's other load slows runs unevenly). ``--memory`` prints the peak traced
memory after 10,000 and 100,000 neighbour evaluations.

Usage::

    python benchmarks/bench_simulate.py [--seconds 1.5] [--platform orin-agx] [--before HEAD~3 [--repeat 3]] [--memory]
"""

from __future__ import annotations

import argparse
import random
import tracemalloc
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


def bench_incremental(model: Model, platform, kind: str, seconds: float, frames: int = 4) -> float:
    """Evaluations/s through IncrementalSimulator: single-move neighbours or random placements."""
    from placetune.backends.simulate.incremental import IncrementalSimulator

    s = Settings(mode="pipeline", precision="int8", iterations=10, frames_in_flight=frames)
    sim = IncrementalSimulator(model, platform, s)
    rng = random.Random(0)
    n_layers = len(model.names)
    cur = sim.evaluate(placements(model, "blocks", 1, rng)[0])
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(20):
            if kind == "cold":  # every neighbour distinct: nothing from the memo
                sim._memo.clear()
                nxt = sim.evaluate_move(cur, {rng.randrange(n_layers): rng.randrange(3)})
                if nxt.latency_ms <= cur.latency_ms:
                    cur = nxt
            elif kind == "neighbours":
                nxt = sim.evaluate_move(cur, {rng.randrange(n_layers): rng.randrange(3)})
                if nxt.latency_ms <= cur.latency_ms:  # a local search's walk (hill climbing)
                    cur = nxt
            else:
                sim.evaluate(placements(model, "random", 1, rng)[0])
        n += 20
    return n / (time.perf_counter() - t0)


def peak_memory(model: Model, platform, counts=(10_000, 100_000)) -> list[tuple[int, float, int]]:
    """Peak traced memory (MiB) after each count of neighbour evaluations (one random walk)."""
    from placetune.backends.simulate.incremental import IncrementalSimulator

    sim = IncrementalSimulator(model, platform, Settings(mode="pipeline", precision="int8", frames_in_flight=4))
    rng = random.Random(1)
    cur = sim.evaluate(placements(model, "blocks", 1, rng)[0])
    tracemalloc.start()
    out, done = [], 0
    for c in counts:
        for _ in range(c - done):
            cur = sim.evaluate_move(cur, {rng.randrange(len(model.names)): rng.randrange(3)})  # a random walk
        done = c
        out.append((c, tracemalloc.get_traced_memory()[1] / 2**20, len(sim._memo)))
    tracemalloc.stop()
    return out


ROWS = [("resnet50", "engine", 1), ("resnet50", "pipeline", 4), ("vit-tiny depth 32", "pipeline", 4)]


def load_models() -> dict[str, Model]:
    return {"resnet50": Model.load("resnet50", batch=1),
            "vit-tiny depth 32": Model.load(zoo.build("vit-tiny", batch=1, depth=32), name="vit-tiny-32")}


def full_rows(platform, seconds: float) -> dict[str, list[float]]:
    models = load_models()
    out = {}
    for label, mode, frames in ROWS:
        for kind in ("random", "blocks"):
            full, meas, _ = bench(models[label], platform, mode, kind, seconds, frames)
            out[f"{label}|{mode}|{frames}|{kind}"] = [full, meas]
    return out


INCREMENTAL_KINDS = ("cold", "neighbours", "random")


def incremental_rows(platform, seconds: float) -> dict[str, list[float]]:
    """Per model: IncrementalSimulator evaluations/s for each of INCREMENTAL_KINDS."""
    models = load_models()
    return {label: [bench_incremental(models[label], platform, kind, seconds) for kind in INCREMENTAL_KINDS]
            for label in ("resnet50", "vit-tiny depth 32")}


def both_rows(platform, seconds: float) -> dict[str, dict[str, list[float]]]:
    """full_rows() and incremental_rows()."""
    return {"full": full_rows(platform, seconds), "incremental": incremental_rows(platform, seconds)}


def best_of(a: dict, b: dict) -> dict:
    """Element-wise maximum of two results of both_rows() (``a`` may be empty)."""
    if not a:
        return b
    return {part: {k: [max(x, y) for x, y in zip(a[part][k], b[part][k])] for k in b[part]} for part in b}


def run_before(rev: str, platform: str, seconds: float) -> dict[str, dict[str, list[float]]]:
    """both_rows() with the code of git revision ``rev`` (this script's functions, that revision's package)."""
    from revision import run_at_revision

    return run_at_revision(rev, __file__, f"b.both_rows(b.get_platform({platform!r}), {seconds!r})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="time per configuration")
    ap.add_argument("--platform", default="orin-agx")
    ap.add_argument("--before", metavar="REV", help="git revision to compare the full path with (e.g. HEAD~4)")
    ap.add_argument("--memory", action="store_true", help="peak memory over 10,000 and 100,000 evaluations")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --before: run before and after alternately this many times, best figure of each")
    ap.add_argument("--all", action="store_true", help="every model and mode (the original table)")
    args = ap.parse_args(argv)
    platform = get_platform(args.platform)
    if args.all:
        return main_all(platform, args.seconds)
    print(f"simulated Jetson speed on {platform.name}, INT8, one Python process ({args.seconds:g} s per row)\n")
    both, now = {}, {}
    for _ in range(max(1, args.repeat) if args.before else 1):  # alternate: a noisy machine slows both alike
        if args.before:
            both = best_of(both, run_before(args.before, args.platform, args.seconds))
        now = best_of(now, both_rows(platform, args.seconds))
    before = both.get("full", {})
    after = now["full"]
    head = "| model | mode | placements | eval/s incl. realise() | measure() only |"
    if before:
        head = (f"| model | mode | placements | before ({args.before}) incl. realise() | after incl. realise() | ratio "
                f"| before measure() only | after measure() only | ratio |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for key, (full, meas) in after.items():
        label, mode, frames, kind = key.split("|")
        shown = mode if frames == "1" else f"{mode} K={frames}"
        if before:
            bf, bm = before[key]
            print(f"| {label} | {shown} | {kind} | {bf:,.0f} | {full:,.0f} | {full / bf:.1f}x | {bm:,.0f} | {meas:,.0f} "
                  f"| {meas / bm:.1f}x |")
        else:
            print(f"| {label} | {shown} | {kind} | {full:,.0f} | {meas:,.0f} |")
    print("\nIncrementalSimulator, pipeline K=4 (evaluations/s, figures equal the full measurement). \"memo off\": the "
          "memo of realisations and figures is cleared before every neighbour, so each is a placement never evaluated "
          "before (no other memo exists):\n")
    inc = now["incremental"]
    cols = ("single-move neighbours, memo off", "hill-climbing walk, memo on", "random placements")
    if both:
        head = "| model | " + " | ".join(f"{c}: before ({args.before}) | after | ratio" for c in cols) + " |"
        print(head)
        print("|---|" + "---:|" * (head.count("|") - 2))
        for label, vals in inc.items():
            old = both["incremental"][label]
            print(f"| {label} | " + " | ".join(f"{b:,.0f} | {a:,.0f} | {a / b:.2f}x" for b, a in zip(old, vals)) + " |")
    else:
        print("| model | " + " | ".join(cols) + " |")
        print("|---|---:|---:|---:|")
        for label, (cold, nb, rnd) in inc.items():
            print(f"| {label} | {cold:,.0f} | {nb:,.0f} | {rnd:,.0f} |")
    if args.memory:
        mem = peak_memory(load_models()["resnet50"], platform)
        (c1, m1, k1), (c2, m2, k2) = mem
        print(f"\npeak traced memory, resnet50 pipeline K=4 random walk of single moves: {c1:,} evals {m1:.1f} MiB "
              f"({k1} memo entries), {c2:,} evals {m2:.1f} MiB ({k2} memo entries): {(m2 / m1 - 1) * 100:+.1f}%")
    return 0


def main_all(platform, seconds: float) -> int:
    models = [
        ("resnet50", Model.load("resnet50", batch=1)),
        ("vit-tiny depth 12", Model.load("vit-tiny", batch=1)),
        ("vit-tiny depth 32", Model.load(zoo.build("vit-tiny", batch=1, depth=32), name="vit-tiny-32")),
    ]
    print(f"simulated Jetson speed on {platform.name}, INT8, one Python process "
          f"({seconds:g} s per row)\n")
    print("| model | layers | mode | placements | eval/s incl. realise() | eval/s measure() only |")
    print("|---|---:|---|---|---:|---:|")
    for label, model in models:
        for mode, frames in (("engine", 1), ("pipeline", 1), ("pipeline", 4), ("replicas", 1)):
            for kind in ("random", "blocks"):
                full, meas, _ = bench(model, platform, mode, kind, seconds, frames)
                shown = mode if frames == 1 else f"{mode} K={frames}"
                print(f"| {label} | {len(model.layers)} | {shown} | {kind} | {full:,.0f} | {meas:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
