"""Concurrent networks on the simulated Jetson: all-GPU, the best naive plan, HaX-CoNN's space, the joint search.

A table of HaX-CoNN's pairs (PPoPP'24: concurrent networks placed on GPU and
DLA, latency = the time until every network has finished one inference) as the zoo can express
them. For each pair this prints, all SIMULATED:

* ``all-GPU``: both networks wholly on the GPU, running at once;
* ``best naive``: the best of every whole-network-per-device assignment (``googlenet:DLA0,resnet50:GPU``);
* ``HaX-CoNN space``: the best plan with at most one GPU<->DLA transition per network, over ten
  contiguous layer groups per network (HaX-CoNN's own limits), found by trying every such plan;
* ``joint``: ``placetune tune --model A --model B --mode concurrent --objective latency`` with the
  default (guided) agent and ``--trials`` evaluations.

    python benchmarks/concurrent_pairs.py [--trials 100] [--groups 10]

HaX-CoNN's published figures (measured on the boards, not comparable one to one with a
simulation): AGX Orin INT8 2.42 -> 1.93 ms (20% lower than GPU-only), AGX Xavier AlexNet +
ResNet-101 13.4 -> 8.4 ms (37%).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: (platform, precision, networks): HaX-CoNN's Xavier pair, and GoogLeNet + ResNet-50 on Orin INT8
PAIRS = [("orin-agx", "int8", ("googlenet", "resnet50")),
         ("orin-agx", "int8", ("alexnet", "resnet101")),
         ("xavier-agx", "fp16", ("alexnet", "resnet101"))]


def hax_conn_space(ev, networks: list[str], groups: int):
    """Every plan with at most one device change per network, at one of ``groups`` - 1 group
    boundaries, the prefix and suffix each on one device."""
    from placetune import Placement
    from placetune.model.merge import network_of

    devices = ["GPU"] + [f"DLA{k}" for k in range(ev.platform.dla_count)]
    per_net = {}
    for net in networks:
        layers = [n for n in ev.model.names if network_of(n, [net]) == net]
        cuts = sorted({round(len(layers) * g / groups) for g in range(1, groups)})
        options = [{n: d for n in layers} for d in devices]
        for c in cuts:
            for a, b in itertools.permutations(devices, 2):
                options.append({n: (a if i < c else b) for i, n in enumerate(layers)})
        per_net[net] = options
    best = None
    tried = 0
    for combo in itertools.product(*(per_net[n] for n in networks)):
        assignment = {}
        for part in combo:
            assignment.update(part)
        m = ev.evaluate(Placement(ev.model, assignment))
        tried += 1
        if m.ok and (best is None or m.latency_ms["median"] < best.latency_ms["median"]):
            best = m
    return best, tried


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--groups", type=int, default=10)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from placetune import Evaluator
    from placetune.model.merge import load_networks
    from placetune.tuning.concurrent import measure_naive_baselines

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PLACETUNE_CACHE_DIR": str(Path(tmp) / "cache")}
        os.environ["PLACETUNE_CACHE_DIR"] = env["PLACETUNE_CACHE_DIR"]
        for platform, precision, nets in PAIRS:
            t0 = time.perf_counter()
            model = load_networks(list(nets))
            ev = Evaluator(model, platform, mode="pipeline", precision=precision, store=None, objective="latency")
            naive = measure_naive_baselines(ev, ev.networks)
            gpu = naive["all-gpu"].latency_ms["median"]
            best_naive_label, best_naive = min(((k, v) for k, v in naive.items() if v.ok),
                                               key=lambda kv: kv[1].latency_ms["median"])
            space, tried = hax_conn_space(ev, ev.networks, args.groups)
            study = f"{'+'.join(nets)}-{platform}-{precision}"
            cmd = [sys.executable, "-m", "placetune.cli", "tune", *sum((["--model", n] for n in nets), []),
                   "--mode", "concurrent", "--platform", platform, "--precision", precision, "--objective",
                   "latency", "--trials", str(args.trials), "--storage", f"sqlite:///{tmp}/c.db", "--study", study,
                   "--export", f"{tmp}/{study}.json"]
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise SystemExit(proc.stderr[-2000:])
            joint = json.loads(Path(f"{tmp}/{study}.json").read_text())["measured"]["latency_ms"]["median"]
            rows.append((f"{'+'.join(nets)} ({platform}, {precision})", gpu, best_naive.latency_ms["median"],
                         best_naive_label, space.latency_ms["median"], tried, joint, time.perf_counter() - t0))
    print("SIMULATED latency of one frame of every network (ms), objective latency; joint = "
          f"placetune tune --mode concurrent, {args.trials} trials (guided agent)\n")
    print(f"{'pair':42s} {'all-GPU':>8s} {'best naive':>11s} {'HaX-CoNN space':>15s} {'joint':>7s} "
          f"{'joint vs GPU':>13s} {'joint vs space':>15s}")
    for name, gpu, naive_v, naive_label, space_v, tried, joint, secs in rows:
        print(f"{name:42s} {gpu:8.3f} {naive_v:11.3f} {space_v:15.3f} {joint:7.3f} "
              f"{100 * (1 - joint / gpu):12.1f}% {100 * (1 - joint / space_v):14.1f}%")
        print(f"{'':42s} best naive: {naive_label}; {tried} plans tried in HaX-CoNN's space; {secs:.0f} s")


if __name__ == "__main__":
    main()
