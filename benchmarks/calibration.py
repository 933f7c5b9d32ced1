"""Calibration of the simulated Jetson against published Jetson numbers: fit, validation and
leave-one-source-out errors.

Every row of ``placetune/data/published.csv`` that the simulator can express is simulated
(:mod:`placetune.calibration.published`). Rows with ``split = fit`` set the simulator's constants
(:mod:`placetune.calibration.builtin`, ``scipy.optimize.least_squares``, stored in
``placetune/data/simulator_fit.json``); rows with ``split = validate`` were never used to set
anything; leave-one-source-out refits without each source in turn and predicts its rows. Errors
are in time (``simulated / published time - 1``: + = the simulator is slower).

The calibration is judged on four tables, printed first: the validation rows and the
leave-one-source-out predictions, each with the exclusion rule (rows in conflict with the other
rows of their conditions left out of the fit and of the figures) and without it (fits that keep
those rows, every row counted). The targets (median |error| <= 15 %, max <= 35 %) apply to all
four; ``placetune/data/published.md`` keeps the history of the split and exclusion rules.

Usage::

    python benchmarks/calibration.py                 # the four judged tables, fit and group errors
    python benchmarks/calibration.py --stored        # ... with the stored refits' predictions (fast)
    python benchmarks/calibration.py --fit           # refit the constants to the fit rows first
    python benchmarks/calibration.py --fit --write   # ... and store them (simulator_fit.json)
    python benchmarks/calibration.py --write         # store the refits' predictions, constants unchanged
    python benchmarks/calibration.py --check         # exit 1 unless the targets below are met
    python benchmarks/calibration.py --fit --write --jobs 16   # the refits in 16 processes (same figures)

Every "simulated" figure is from placetune's simulated Jetson, never from hardware.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placetune.calibration import accuracy  # noqa: E402
from placetune.calibration.builtin import (  # noqa: E402
    PARAMS,
    fit_builtin,
    leave_one_source_out,
    stored_fit,
    without_exclusions,
    write_fit,
    write_predictions,
)
from placetune.calibration.published import (  # noqa: E402
    CaseResult,
    _model,
    _realised,
    evaluate,
    published_cases,
)

#: Median and max absolute time error on the validation rows and on leave-one-source-out, each with
#: and without the exclusion rule, and the bound on each batch bucket's median signed error (fit,
#: validation and leave-one-source-out rows).
TARGET_MEDIAN, TARGET_MAX, TARGET_BUCKET = 0.15, 0.35, 0.10

#: The four judged result sets: key, title, whether the exclusion rule applies.
JUDGED = (("validate", "Validation rows, with the exclusion rule (constants fitted without the excluded rows; "
                       "excluded rows not counted)", True),
          ("validate_all", "Validation rows, without exclusions (constants fitted on every fit row; every row "
                           "counted)", False),
          ("loso", "Leave-one-source-out, with the exclusion rule (each source's fit rows predicted by a fit "
                   "without that source and without the excluded rows; excluded rows not counted)", True),
          ("loso_all", "Leave-one-source-out, without exclusions (refits keep the excluded rows; every row "
                       "counted)", False))


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


def judged_tables(sets: dict[str, list[CaseResult]]) -> str:
    """The four judged tables (validation and leave-one-source-out, with and without the
    exclusion rule) and the targets' verdict on each."""
    out = ["## Judged figures", ""]
    for key, title, excl in JUDGED:
        res = sets.get(key)
        out += [f"**{title}**", ""]
        out += ([accuracy.summary_table([(key, res)], exclusions=excl), ""] if res else
                ["not computed (run without --stored, or store it with --write)", ""])
    verdict = accuracy.judged_table([(key.split("_")[0], sets.get(key), excl) for key, _, excl in JUDGED],
                                    TARGET_MEDIAN, TARGET_MAX)
    return "\n".join(out) + "\n" + verdict


def report(loso: list[CaseResult] | None = None,
           unexcluded: tuple[list[CaseResult], list[CaseResult]] | None = None
           ) -> tuple[str, dict[str, list[CaseResult]]]:
    """The whole report (Markdown) and the result sets ``fit``, ``validate``, ``loso`` and, when
    ``unexcluded`` (the :func:`~placetune.calibration.builtin.without_exclusions` predictions) is
    given, ``validate_all`` and ``loso_all``."""
    cases = published_cases()
    results = evaluate(cases)
    sets = {"fit": [r for r in results if r.case.row.split == "fit"],
            "validate": [r for r in results if r.case.row.split == "validate"],
            "loso": loso or []}
    if unexcluded:
        sets["validate_all"] = [r for r in unexcluded[0] if r.case.row.split == "validate"]
        sets["loso_all"] = list(unexcluded[1])
    cols = [("fit", sets["fit"]), ("validate (never used to set anything)", sets["validate"])]
    if loso:
        cols.append(("leave-one-source-out (fit rows, each source predicted without it)", loso))
    n_fit = sum(1 for r in sets["fit"] if not r.case.conflict)
    out = [judged_tables(sets), "", "## Fit, validation and leave-one-source-out (exclusion rule applied)", "",
           accuracy.summary_table(cols), "",
           f"{len(PARAMS)} free constants, {n_fit} fit rows: {n_fit / len(PARAMS):.1f} rows per constant.", ""]
    for by in ("batch bucket", "network family", "device kind", "platform", "precision"):
        out += [accuracy.group_table(by, cols), ""]
    if loso:
        out += ["Leave-one-source-out, per source left out:", "", accuracy.group_table("source", [("loso", loso)]), ""]
    out.append("Rows of the dataset (all, expressible by the simulator, fit, validate):")
    out.append("")
    for by in ("network", "platform", "precision", "batch bucket", "device kind"):
        out += [accuracy.counts_table(cases, by), ""]
    conflict = [r for r in results if r.case.conflict]
    if conflict:
        out.append("Rows in conflict with other rows of their conditions (left out of the fit and the summaries): "
                   + "; ".join(f"`{r.case.row.id}` ({r.case.conflict})" for r in conflict))
        out.append("")
    gpu, both, gain = data_parallel_gain()
    out += [f"Data-parallel gain, resnet50 INT8 orin-agx (MLPerf Offline batches GPU 256, DLA 2): GPU only "
            f"{gpu:.0f} img/s, GPU + 2 DLA {both:.0f} img/s, gain {gain:.2f}x.", ""]
    lmap = {r.case.row.id: r.simulated for r in loso} if loso else None
    fit_extra, val_extra = [], []
    if unexcluded:
        fit_extra = [("LOSO error, no exclusions", {r.case.row.id: r.simulated for r in sets["loso_all"]})]
        val_extra = [("error, no exclusions", {r.case.row.id: r.simulated for r in sets["validate_all"]})]
    out += ["**Fit rows**", "", accuracy.rows_table(sets["fit"], lmap, fit_extra), "",
            "**Validation rows**", "", accuracy.rows_table(sets["validate"], None, val_extra), ""]
    skipped = [c for c in cases if c.skip]
    out += [f"{len(skipped)} rows skipped (the simulator cannot express them): "
            + "; ".join(f"`{c.row.id}` ({c.skip})" for c in skipped), "",
            "All simulated figures come from placetune's simulated Jetson (backend `simulate`), not from hardware."]
    return "\n".join(out), sets


def targets_met(sets: dict[str, list[CaseResult]]) -> list[str]:
    """The targets that are missed (empty: all met): median and max on each of the four judged
    sets (a set not computed counts as missed), and every batch bucket's median signed error on
    the fit, validation and leave-one-source-out rows."""
    missed = []
    for key, _, excl in JUDGED:
        if not sets.get(key):
            missed.append(f"{key}: not computed")
            continue
        s = accuracy.summary(sets[key], excl)
        if s["median"] > TARGET_MEDIAN or s["max"] > TARGET_MAX:
            missed.append(f"{key} median {100 * s['median']:.1f} % / max {100 * s['max']:.1f} %")
    for name in ("fit", "validate", "loso"):
        res = sets[name]
        for bucket, g in accuracy.grouped(res, "batch bucket").items():
            if abs(g["signed"]) > TARGET_BUCKET:
                missed.append(f"{name} batch {bucket}: median signed {100 * g['signed']:+.1f} %")
    return missed


def stored_predictions() -> tuple[list[CaseResult], tuple[list[CaseResult], list[CaseResult]] | None]:
    """The stored leave-one-source-out predictions and the stored ``(predictions, loso)`` of the
    fits without exclusions (None when the fit file has none), as :func:`report` takes them."""
    cases = {c.row.id: c for c in published_cases()}
    stored = stored_fit()

    def results(d: dict[str, float]) -> list[CaseResult]:
        return [CaseResult(cases[k], v) for k, v in d.items() if k in cases]

    un = stored.get("unexcluded")
    return results(stored.get("loso", {})), ((results(un["predictions"]), results(un["loso"])) if un else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="refit the constants to the fit rows first")
    ap.add_argument("--write", action="store_true", help="with --fit: store them in placetune/data/simulator_fit.json")
    ap.add_argument("--stored", action="store_true", help="use the stored leave-one-source-out predictions")
    ap.add_argument("--check", action="store_true", help="exit 1 unless the targets are met")
    ap.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="run the leave-one-source-out refits in N processes (default 1; same figures)")
    args = ap.parse_args(argv)
    if args.fit:
        t0 = time.perf_counter()
        fit = fit_builtin()
        print(f"fitted {len(fit.params)} constants on {len(fit.rows)} fit rows in {fit.iterations} evaluations, "
              f"{time.perf_counter() - t0:.0f} s (validate rows not used): {fit.status}")
        for p in fit.params:
            for arch, key in p.targets[:1]:
                print(f"  {p.name:28s} prior {fit.priors[arch][key]:9.4g} -> {fit.values[arch][key]:9.4g}"
                      f"   [{p.lower:g}, {p.upper:g}]")
        print()
    unexcluded: tuple[list[CaseResult], list[CaseResult]] | None
    if args.stored and not args.write:
        loso, unexcluded = stored_predictions()
    else:
        t0 = time.perf_counter()
        loso = leave_one_source_out(jobs=args.jobs)
        unexcluded = without_exclusions(jobs=args.jobs)
        print(f"leave-one-source-out and the fits without exclusions: {time.perf_counter() - t0:.0f} s",
              file=sys.stderr)
    if args.write:
        if args.fit:
            write_fit(fit, loso=loso, unexcluded=unexcluded)
        else:
            write_predictions(loso, unexcluded)
        print("written to placetune/data/simulator_fit.json (run python docs/simulator_tables.py next)")
        print()
    text, sets = report(loso, unexcluded)
    print(text)
    missed = targets_met(sets)
    print()
    print("Targets (validation and leave-one-source-out, with and without exclusions: median <= 15 %, max <= 35 %; "
          "every batch bucket's median signed error within +/-10 %): "
          + ("met" if not missed else "missed: " + "; ".join(missed)))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
