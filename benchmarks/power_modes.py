"""Power modes: the simulated Jetson at non-MAXN nvpmodel modes against published figures.

Prints (1) the peak figures the transcribed nvpmodel caps give (GPU: active TPCs x clock; DLA:
its clock) against the DLA-SW README's per-mode sparse INT8 peaks for AGX Orin 64GB, and (2) the
simulated ResNet-50 INT8 batch-2 throughput on both DLAs (the DLA-SW README's "DLA Dense
performance" run, as placetune/calibration/published.py simulates it) and on the GPU alone at
each mode relative to MAXN, against the published ratios.

Nothing is fitted here: the figures are reported as the simulator gives them.

Usage::

    python benchmarks/power_modes.py

Every "simulated" figure is from placetune's simulated Jetson, never from hardware.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placetune.calibration.published import published_cases, simulate_case  # noqa: E402
from placetune.hardware.power_modes import modes_of  # noqa: E402

MODES = ("MAXN", "50W", "30W", "15W")
#: DLA-SW README, Jetson AGX Orin 64GB, sparse INT8 peak TOPS per power mode
README_GPU = {"MAXN": 171, "50W": 109, "30W": 41, "15W": 14}
README_2DLA = {"MAXN": 105, "50W": 92, "30W": 90, "15W": 40}
#: placetune/data/jetson-measurements.md §1: AGX Orin 2-DLA throughput relative to MAXN
REF_2DLA = {"50W": (0.91, 0.96), "30W": (0.89, 0.95), "15W": (0.42, 0.53)}


def main() -> int:
    agx = modes_of("orin-agx")
    assert agx is not None
    print("peaks from the nvpmodel caps (p3701_0000) vs DLA-SW README, AGX Orin 64GB, sparse INT8 TOPS")
    print(f"{'mode':6} {'GPU caps':>9} {'README':>7} {'2xDLA caps':>11} {'README':>7}")
    for mode in MODES:
        s = agx.scale(mode)
        print(f"{mode:6} {171 * s.gpu:9.1f} {README_GPU[mode]:7d} {105 * s.dla:11.1f} {README_2DLA[mode]:7d}")
    cases = {c.row.id: c for c in published_cases()}
    maxn = cases["dlasw-orin-resnet50-maxn"]
    published = {"MAXN": maxn.row.value, "50W": cases["dlasw-orin-resnet50-50w"].row.value,
                 "15W": cases["dlasw-orin-resnet50-15w"].row.value}
    gpu_case = dataclasses.replace(maxn, kind="gpu", batches=(("GPU", 2),), softmax=None)
    print("\nsimulated ResNet-50 INT8 bs 2, relative to MAXN (DLA-SW README 'DLA Dense performance' run)")
    print(f"{'mode':6} {'2xDLA sim fps':>13} {'sim/MAXN':>9} {'published fps':>14} {'pub/MAXN':>9} "
          f"{'ref §1 range':>13} {'GPU sim/MAXN':>13} {'GPU peak ratio':>15}")
    base = simulate_case(maxn)
    gbase = simulate_case(gpu_case)
    for mode in MODES:
        sim = simulate_case(dataclasses.replace(maxn, power_mode=mode))
        gpu = simulate_case(dataclasses.replace(gpu_case, power_mode=mode))
        pub = published.get(mode)
        lo, hi = REF_2DLA.get(mode, (1.0, 1.0))
        rel = f"{pub / published['MAXN']:.3f}" if pub else "-"
        rng = f"{lo:.2f}-{hi:.2f}"
        print(f"{mode:6} {sim:13.0f} {sim / base:9.3f} {pub if pub else '-':>14} {rel:>9} {rng:>13} "
              f"{gpu / gbase:13.3f} {README_GPU[mode] / 171:15.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
