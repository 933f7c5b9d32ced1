"""Calibration of the simulated Jetson against published Jetson numbers: fit error and validation error.

Every row of ``placetune/data/published.csv`` that the simulator can express is simulated
(:mod:`placetune.calibration.published`). Rows with ``split = fit`` set the simulator's
per-architecture constants (:mod:`placetune.calibration.builtin`, stored in
``placetune/data/simulator_fit.json``); rows with ``split = validate`` were never used to set
anything. The script prints both tables, per case, and the two error summaries side by side.

Usage::

    python benchmarks/calibration.py                 # fit and validation tables + summaries
    python benchmarks/calibration.py --fit           # refit the constants to the fit rows, print them
    python benchmarks/calibration.py --fit --write   # ... and store them (simulator_fit.json)
    python benchmarks/calibration.py --check         # exit 1 unless validation median <= 15 %, max <= 35 %

Every "simulated" figure is from placetune's simulated Jetson, never from hardware.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placetune.calibration.published import (  # noqa: E402
    CaseResult,
    _model,
    _realised,
    error_summary,
    evaluate,
    published_cases,
)

#: The issue-15 targets on the validate rows.
TARGET_MEDIAN, TARGET_MAX = 0.15, 0.35
#: NVIDIA MLPerf Offline range of the GPU + 2 DLA data-parallel gain over GPU only (issue 15).
GAIN_RANGE = (1.25, 1.57)


def data_parallel_gain(network: str = "resnet50", platform: str = "orin-agx", gpu_batch: int = 256,
                       dla_batch: int = 2) -> tuple[float, float, float]:
    """Simulated ``(GPU-only fps, GPU + 2 DLA replicas fps, gain)``, INT8, MLPerf Offline batches."""
    from placetune.backends.simulate.simulator import SimulatedJetson
    from placetune.hardware.platforms import get_platform
    from placetune.settings import Settings

    p = get_platform(platform)
    r = _realised(_model(network, dla_batch, None), p, "int8", "dla", "replicas")
    sim = SimulatedJetson(timeline=False)
    fps = [sim.measure(r, p, Settings(precision="int8", mode="replicas", replicas=reps, iterations=1)).throughput_fps
           for reps in ({"GPU": gpu_batch}, {"GPU": gpu_batch, "DLA0": dla_batch, "DLA1": dla_batch})]
    return fps[0], fps[1], fps[1] / fps[0]


def markdown(results: list[CaseResult], title: str) -> str:
    """One split's table in Markdown."""
    lines = [f"**{title}**", "",
             "| case | what ran | published | simulated | error | source |", "|---|---|---:|---:|---:|---|"]
    for r in results:
        row = r.case.row
        b = r.case.batch
        batch = {"gpu": f"bs {b['GPU']}", "dla": f"bs {b['DLA']}", "dla-only": f"bs {b['DLA']}",
                 "2dla-replicas": f"DLA bs {b['DLA']}"}.get(r.case.kind, f"GPU bs {b['GPU']}, DLA bs {b['DLA']}")
        what = f"{row.platform} {row.network} {row.precision} {r.case.kind}, {batch}, {r.case.power_mode}"
        lines.append(f"| `{row.id}` | {what} | {row.value:.4g} {row.unit} | {r.simulated:.4g} {row.unit} | "
                     f"{100 * r.error:+.1f} % | {row.source} |")
    return "\n".join(lines)


def summary_line(name: str, results: list[CaseResult]) -> str:
    s = error_summary(results)
    return f"| {name} | {s['n']} | {100 * s['median']:.1f} % | {100 * s['max']:.1f} % | {100 * s['mean']:.1f} % |"


def report() -> tuple[str, list[CaseResult], list[CaseResult]]:
    cases = published_cases()
    results = evaluate(cases)
    fit = [r for r in results if r.case.row.split == "fit"]
    val = [r for r in results if r.case.row.split == "validate"]
    skipped = [c for c in cases if c.skip]
    gpu, both, gain = data_parallel_gain()
    out = ["| split | cases | median abs error | max abs error | mean abs error |", "|---|---:|---:|---:|---:|",
           summary_line("fit (set the constants)", fit), summary_line("validate (never used to set anything)", val),
           "", markdown(fit, "Fit rows"), "", markdown(val, "Validation rows"), "",
           f"Data-parallel gain, resnet50 INT8 orin-agx (MLPerf Offline batches GPU 256, DLA 2): GPU only "
           f"{gpu:.0f} img/s, GPU + 2 DLA {both:.0f} img/s, gain {gain:.2f}x (NVIDIA MLPerf range "
           f"{GAIN_RANGE[0]}-{GAIN_RANGE[1]}x).", "",
           f"{len(skipped)} rows skipped (the simulator cannot express them): "
           + "; ".join(f"`{c.row.id}` ({c.skip})" for c in skipped), "",
           "All simulated figures come from placetune's simulated Jetson (backend `simulate`), not from hardware."]
    return "\n".join(out), fit, val


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="refit the per-architecture constants to the fit rows")
    ap.add_argument("--write", action="store_true", help="with --fit: store them in placetune/data/simulator_fit.json")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the validation error meets the targets")
    args = ap.parse_args(argv)
    if args.fit:
        from placetune.calibration.builtin import fit_builtin, write_fit

        fit = fit_builtin()
        print(f"fitted on {len(fit.rows)} fit rows in {fit.iterations} iterations (validate rows not used):")
        for arch, values in fit.values.items():
            for k, v in values.items():
                print(f"  {arch:7s} {k:20s} prior {fit.priors[arch][k]:9.4g} -> {v:9.4g}")
        if args.write:
            write_fit(fit)
            print("written to placetune/data/simulator_fit.json")
        print()
    text, _, val = report()
    print(text)
    s = error_summary(val)
    if args.check and not (s["median"] <= TARGET_MEDIAN and s["max"] <= TARGET_MAX):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
