"""Import + DLA check time of large models (the `placetune check` path without printing).

    python benchmarks/bench_import.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from placetune import Model
from placetune.model import zoo
from placetune.hardware.dla import check_model
from placetune.placement.placement import Placement


def timed(label: str, source, **kw) -> None:
    t0 = time.perf_counter()
    m = Model.load(source, **kw)
    t1 = time.perf_counter()
    support = check_model(m, "orin-agx", "fp16")
    dev = {n: ("DLA0" if support[n].supported else "GPU") for n in m.names}
    islands = Placement(m, dev).dla_islands()["DLA0"]
    t2 = time.perf_counter()
    print(f"{label:38s} {len(m):5d} layers  import {t1 - t0:6.3f} s  check {t2 - t1:6.3f} s  "
          f"total {t2 - t0:6.3f} s  ({islands} DLA islands)")


def main() -> None:
    timed("resnet50 (zoo)", "resnet50")
    timed("vit-tiny depth 12 (zoo)", "vit-tiny")
    timed("vit-tiny depth 32 (zoo, ~1,000 layers)", "vit-tiny:depth=32")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vit32.onnx"
        t0 = time.perf_counter()
        zoo.export("vit-tiny", path, depth=32)
        print(f"(exported {path.stat().st_size / 1e6:.0f} MB file with weights in {time.perf_counter() - t0:.1f} s)")
        timed("vit-tiny depth 32 from a file with weights", path)


if __name__ == "__main__":
    main()
