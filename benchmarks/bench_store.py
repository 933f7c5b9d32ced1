"""Store throughput on a file-backed SQLite database.

Prints records/s for :meth:`Store.record` on the cache-miss path (a new measurement
and its request row, one transaction each) and lookups/s on the cache-hit path, with
and without the in-process LRU, plus :meth:`Store.cached` (lookup + request log).

Usage:
    python benchmarks/bench_store.py [--n 2000] [--model tests/data/resnet18.onnx.gz] [--samples 50]
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from placetune import Model
from placetune.measurement import Measurement
from placetune.store.store import Store

ROOT = Path(__file__).resolve().parents[1]


def make_measurement(model: Model, rng: random.Random, samples: int) -> Measurement:
    names = model.names
    realized = {n: rng.choice(("GPU", "DLA0")) for n in names}
    lat = [1.0 + rng.random() for _ in range(samples)]
    return Measurement(
        status="ok",
        latency_samples_ms=lat,
        throughput_fps=1000.0 / min(lat),
        requested=dict(realized),
        realized=realized,
        dla_loadables={"DLA0": 3},
        segment_times_ms=[{"index": i, "device": "GPU", "layers": 1, "time_ms": 0.1} for i in range(4)],
        layer_times_ms={n: 0.01 for n in names},
        energy_mj=5.0,
        timeline=[{"device": "GPU", "name": n, "start_ms": 0.0, "end_ms": 0.1, "frame": 0} for n in names],
        simulated=True,
        backend="simulate-1",
    )


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:10.0f} /s  ({seconds * 1e6 / n:7.1f} us each)"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="measurements to record")
    ap.add_argument("--model", default=str(ROOT / "tests/data/resnet18.onnx.gz"))
    ap.add_argument("--samples", type=int, default=50, help="latency samples per measurement")
    args = ap.parse_args()

    model = Model.load(args.model)
    rng = random.Random(0)
    ms = [make_measurement(model, rng, args.samples) for _ in range(args.n)]
    keys = [f"{i:040x}" for i in range(args.n)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        print(f"model {model.name} ({len(model)} layers), {args.samples} samples and a {len(model)}-event "
              f"timeline per measurement, SQLite file {path}")
        with Store(path) as store:
            st = store.create_or_open_study("bench", model, "orin-agx", "simulate", "engine", "latency", "fp16",
                                            model.batch, {"mode": "engine"}, {"sim": 1}, True)
            t0 = time.perf_counter()
            for i in range(args.n):
                store.record(st, keys[i], keys[i], ms[i], agent="bench", trial_number=i)
            t_record = time.perf_counter() - t0
        print(f"record() cache miss (insert + request, 1 txn): {rate(args.n, t_record)}")
        print(f"  database size {path.stat().st_size / 1e6:.1f} MB (+ WAL)")

        order = keys * 3
        rng.shuffle(order)
        for label, cache_size in (("lookup() hit, in-process LRU    ", 4 * args.n),
                                  ("lookup() hit, SQLite (no LRU)   ", 0)):
            with Store(path, cache_size=cache_size) as store:
                st = store.study("bench")
                for k in keys:  # warm the LRU (when there is one)
                    store.lookup(*st.scope, k)
                t0 = time.perf_counter()
                for k in order:
                    m = store.lookup(*st.scope, k)
                    assert m is not None
                print(f"{label}: {rate(len(order), time.perf_counter() - t0)}")
        with Store(path) as store:
            st = store.study("bench")
            t0 = time.perf_counter()
            for i, k in enumerate(keys):
                assert store.cached(st, k, k, agent="bench", trial_number=i) is not None
            print(f"cached() hit + request row (LRU)  : {rate(args.n, time.perf_counter() - t0)}")
            t0 = time.perf_counter()
            misses = [f"{i + args.n:040x}" for i in range(args.n)]
            for k in misses:
                assert store.lookup(*st.scope, k) is None
            print(f"lookup() miss (SQLite)            : {rate(args.n, time.perf_counter() - t0)}")


if __name__ == "__main__":
    main()
