"""The simulated Jetson against published numbers (benchmarks/calibration.py).

The simulator's constants are fitted (scipy.optimize.least_squares) to the ``fit`` rows of
``placetune/data/published.csv``; the ``validate`` rows are never used to set them. These tests
check that split is respected (changing a validate row changes nothing in the fit), that the
stored fit is current (its predictions are the simulator's), that leave-one-source-out refits
without the source it predicts, that rows contradicting their peers stay out of the fit, the
validation targets, and that the report shows every table the calibration is judged by. Fits
here run on a few constants and rows so they take seconds.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

from placetune.backends.simulate import costs
from placetune.calibration import accuracy, builtin, published
from placetune.calibration.builtin import Param, fit_builtin, leave_one_source_out, stored_fit, use_values
from placetune.calibration.published import conflicts, evaluate, load_published, published_cases

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "calibration.py"
_spec = importlib.util.spec_from_file_location("placetune_calibration", _PATH)
calibration = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = calibration
_spec.loader.exec_module(calibration)

#: A small fit: two Xavier GPU constants on the Xavier GPU-only rows.
_SMALL = (Param("volta.gpu_conv_eff.int8", 0.05, 0.95, "test"), Param("volta.gpu_launch_us", 0.5, 50.0, "test"))


@pytest.fixture
def restore_constants():
    saved = dict(costs.ARCH)
    harness = dict(published.HARNESS_CALL_US)
    yield
    costs.ARCH.update(saved)
    published.HARNESS_CALL_US.update(harness)
    costs.forget_cost_tables()


def _xavier_gpu(cases):
    return [c for c in cases if not c.skip and c.kind == "gpu" and c.row.platform == "xavier-agx"]


def test_unexpressible_rows_are_skipped_with_a_reason():
    cases = published_cases()
    skipped = {c.row.id: c.skip for c in cases if c.skip}
    assert "drive-orin-x" in skipped["cudla-orinx-yolov5s-gpu-bs1"]
    assert "not in the zoo" in skipped["mlperf30-orin-retinanet-offline"]
    assert all(skipped.values())
    kept = [c for c in cases if not c.skip]
    assert {c.row.split for c in kept} == {"fit", "validate"} and len(kept) >= 60
    assert {"gpu", "dla", "dla+dla", "gpu+dla"} <= {c.device_kind for c in kept}


def test_fit_never_sees_validate_rows(restore_constants):
    cases = _xavier_gpu(published_cases())
    base = fit_builtin(cases, params=_SMALL, max_nfev=3)
    moved = [dataclasses.replace(c, row=dataclasses.replace(c.row, value=c.row.value * 3))
             if c.row.split == "validate" else c for c in cases]
    other = fit_builtin(moved, params=_SMALL, max_nfev=3)
    assert other.values == base.values
    assert set(base.rows) == {c.row.id for c in cases if c.row.split == "fit" and not c.conflict}


def test_leave_one_source_out_predicts_each_source_without_it(restore_constants, monkeypatch):
    cases = [c for c in _xavier_gpu(published_cases()) if c.row.source in ("seed-003", "torch2trt-xavier")]
    seen = []
    real = builtin.fit_builtin

    def spy(cs, **kw):
        seen.append(tuple(kw["exclude_sources"]))
        return real(cs, **kw)

    monkeypatch.setattr(builtin, "fit_builtin", spy)
    before = dict(costs.ARCH)
    out = leave_one_source_out(cases, params=_SMALL, max_nfev=2)
    assert sorted(seen) == [("seed-003",), ("torch2trt-xavier",)]
    assert sorted(r.case.row.id for r in out) == sorted(c.row.id for c in cases if c.row.split == "fit")
    assert costs.ARCH == before  # the full fit's constants are back


def test_leave_one_source_out_in_processes_gives_the_serial_predictions(restore_constants):
    """``jobs > 1`` (``benchmarks/calibration.py --jobs``) runs the refits in forked processes: same rows,
    same order, same figures, and the constants in use are back afterwards."""
    cases = [c for c in _xavier_gpu(published_cases()) if c.row.source in ("seed-003", "torch2trt-xavier")]
    serial = leave_one_source_out(cases, params=_SMALL, max_nfev=2)
    before = dict(costs.ARCH)
    forked = leave_one_source_out(cases, params=_SMALL, max_nfev=2, jobs=2)
    assert [(r.case.row.id, r.simulated) for r in forked] == [(r.case.row.id, r.simulated) for r in serial]
    assert costs.ARCH == before and builtin._REFIT is None


def test_rows_in_conflict_with_their_peers_stay_out_of_the_fit(restore_constants):
    rows = load_published()
    bad = conflicts(rows)
    assert "mlperf20-orin-resnet50-multistream" in bad  # 3.61 ms where three other releases give 2.15-2.17
    assert not any(i.startswith("mlperf30-orin-resnet50") or i.startswith("mlperf31") for i in bad)
    cases = [c for c in published_cases() if c.row.platform == "orin-agx" and c.kind == "gpu"]
    fit = fit_builtin(cases, params=(Param("ampere.gpu_launch_us", 0.5, 50.0, "test"),), max_nfev=2)
    assert "mlperf20-orin-resnet50-multistream" not in fit.rows and fit.rows


def test_without_exclusions_the_excluded_rows_are_fitted_and_counted(restore_constants):
    cases = [c for c in published_cases() if c.row.platform == "orin-agx" and c.kind == "gpu"]
    one = (Param("ampere.gpu_launch_us", 0.5, 50.0, "test"),)
    kept = fit_builtin(cases, params=one, max_nfev=2, exclusions=False)
    assert "mlperf20-orin-resnet50-multistream" in kept.rows
    before = dict(costs.ARCH)
    full, loso = builtin.without_exclusions(cases, params=one, max_nfev=2)
    assert costs.ARCH == before  # the constants in use are back
    assert {r.case.row.id for r in full} == {c.row.id for c in cases if not c.skip}
    assert "mlperf20-orin-resnet50-multistream" in {r.case.row.id for r in loso}
    conflict = [r for r in loso if r.case.conflict]
    assert conflict and accuracy.summary(loso, exclusions=False)["n"] == accuracy.summary(loso)["n"] + len(conflict)


def test_stored_fit_is_current():
    """The stored predictions are what the simulator gives now: a change of the model or of the
    rows without ``benchmarks/calibration.py --fit --write`` fails here."""
    stored = stored_fit()
    assert stored["sim_version"] == costs.SIM_VERSION
    now = {r.case.row.id: r.simulated for r in evaluate()}
    assert set(now) == set(stored["predictions"])
    for k, v in now.items():
        assert v == pytest.approx(stored["predictions"][k], rel=1e-4), k
    assert set(stored["loso"]) == {c.row.id for c in published_cases() if not c.skip and c.row.split == "fit"}
    # the fits without the exclusion rule: every expressible row, and every fit row by leave-one-source-out;
    # rows added after the stored fit (release 3 on: validation rows, predicted with the stored constants)
    # join these refitted tables at the next ``--fit --write``
    after_fit = {c.row.id for c in published_cases() if c.row.release >= 3}
    unexcluded = set(stored["unexcluded"]["predictions"])
    assert set(stored["predictions"]) - after_fit <= unexcluded <= set(stored["predictions"])
    assert set(stored["unexcluded"]["loso"]) == set(stored["loso"])


def test_the_orin_gpu_is_fitted_on_orin_rows():
    stored = stored_fit()
    orin_gpu = {c.row.id for c in published_cases()
                if not c.skip and c.row.platform.startswith("orin") and c.kind == "gpu" and c.row.split == "fit"}
    assert len(orin_gpu & set(stored["fitted_on"])) >= 5
    assert "gpu_conv_eff.int8" in stored["values"]["ampere"] and "gpu_launch_us" in stored["values"]["ampere"]
    assert stored["values"]["ampere"]["gpu_conv_eff.int8"] != stored["values"]["volta"]["gpu_conv_eff.int8"]


def test_fit_improves_on_the_priors(restore_constants):
    fit_cases = [c for c in published_cases() if not c.skip and c.row.split == "fit"]
    fitted = accuracy.summary(evaluate(fit_cases))
    use_values({})
    prior = accuracy.summary(evaluate(fit_cases))
    assert fitted["median"] < prior["median"] and fitted["median"] <= 0.10


#: The judged sets whose max misses the 35 % target (figures stored by the last run, reported by
#: benchmarks/calibration.py): the release-3 validation rows of Ultralytics YOLO11 on Orin NX 16GB (worst
#: ultralytics-orinnx16-yolo11n-int8, -44 %: the simulator is too fast), the release-4 validation rows on
#: AGX Orin (worst yolo11dla-orin-yolo11n-dla-int8, -61.7 %: YOLO11n with DLA fallback at 50W; the Orin DLA
#: FP16 rows -48 % and -58 %; a DLA engine beside a GPU process -39 %), which also take the validation
#: batch-1 bucket's median signed error to -14.2 %, and, without
#: exclusions, the excluded row mlperf20-orin-resnet50-multistream itself (-38.7 % by leave-one-source-out).
KNOWN_MISSES = {"validate", "validate_all", "loso_all"}
#: The batch buckets whose median signed error misses the +/-10 % bound (same report).
KNOWN_BUCKET_MISSES = {"validate batch 1"}
#: The judged sets whose median misses the 15 % bound: the validation rows without exclusions since a
#: DLA engine's reformats are GPU work waiting for time slices (history step 15 of
#: placetune/data/published.md: adopted because it is what TensorRT does, its refit reported as it came), and
#: the validation rows with the rule too since release 5 added ten small-detector GPU rows the simulator is too
#: fast on (history step 19: 14.2 -> 18.7 %; rows added by the split rule, nothing refitted or changed on them;
#: release 6's six classifier rows on the Orin Nano Super, step 21: 18.7 -> 17.1 %).
KNOWN_MEDIAN_MISSES = {"validate", "validate_all"}


def _stored_sets():
    loso, unexcluded = calibration.stored_predictions()
    assert unexcluded is not None
    return calibration.report(loso, unexcluded)[1]


def test_the_calibration_meets_its_targets_except_the_known_misses():
    """Every judged set (validation and leave-one-source-out, with and without exclusions) has its
    median <= 15 % except the sets of KNOWN_MEDIAN_MISSES; its max <= 35 % except the sets of
    KNOWN_MISSES (a new miss fails here); every batch bucket's median signed error within +/-10 %
    except those of KNOWN_BUCKET_MISSES."""
    sets = _stored_sets()
    missed = calibration.targets_met(sets)
    assert {m.split(":")[0] if " batch " in m else m.split()[0] for m in missed} == \
        KNOWN_MISSES | KNOWN_BUCKET_MISSES, missed
    for key, _, excl in calibration.JUDGED:
        s = accuracy.summary(sets[key], excl)
        assert s["n"] >= 10 and (key in KNOWN_MEDIAN_MISSES) == (s["median"] > calibration.TARGET_MEDIAN), (key, s)
        assert key in KNOWN_MISSES or s["max"] <= calibration.TARGET_MAX, (key, s)


@pytest.mark.xfail(strict=True, reason="validation median 17.1 % and max 61.7 % (18.8 % and 63.7 % without exclusions), "
                                       "validation batch-1 median signed -18.7 % and leave-one-source-out max "
                                       "without exclusions 38.7 %: "
                                       "targets missed (KNOWN_MISSES), reported, "
                                       "not tuned away")
def test_the_calibration_meets_all_its_targets():
    assert calibration.targets_met(_stored_sets()) == []


def test_a_python_harness_bounds_the_rate_of_small_networks():
    case = next(c for c in published_cases() if c.row.id == "t2t-xavier-resnet18-fp16")
    floor = 1e6 / published.HARNESS_CALL_US["python"]
    assert published.simulate_case(case) <= floor * (1 + 1e-9)
    native = dataclasses.replace(case, row=dataclasses.replace(case.row, harness="native"))
    assert published.simulate_case(native) > published.simulate_case(case)


def test_report_shows_every_table_and_labels_simulated():
    loso, unexcluded = calibration.stored_predictions()
    text, sets = calibration.report(loso, unexcluded)
    assert "leave-one-source-out" in text and "validate (never used" in text
    # the four judged tables come first, each with and without the exclusion rule
    assert text.startswith("## Judged figures")
    for _, title, _ in calibration.JUDGED:
        assert f"**{title}**" in text
    assert text.count("| validate | rule applied |") == 1 and text.count("| loso | none |") == 1
    assert "not computed" not in text.split("## Fit,")[0]
    for by in ("batch bucket", "network family", "device kind", "network", "platform", "precision", "source"):
        assert f"| {by} |" in text, by
    assert "rows per constant" in text and "simulated" in text.lower()
    assert sets["fit"] and sets["validate"] and sets["loso"] and sets["validate_all"] and sets["loso_all"]
    assert isinstance(calibration.targets_met(sets), list)


def test_a_row_in_a_power_mode_the_module_lacks_is_skipped_not_simulated_at_maxn():
    case = next(c for c in published_cases() if c.row.id == "qguide-orin-resnet50-dla-int8-50w")
    assert case.skip is None and case.power_mode == "50W"
    orin_10w = published._case(dataclasses.replace(case.row, power_mode="10W"))
    assert orin_10w.skip is not None and "10W" in orin_10w.skip and "15W" in orin_10w.skip
    xavier = next(c for c in published_cases() if c.row.platform == "xavier-agx" and c.skip is None)
    in_30w_all = published._case(dataclasses.replace(xavier.row, power_mode="30W_ALL"))
    assert in_30w_all.skip is None and in_30w_all.power_mode == "30W_ALL"
    assert published.simulate_case(in_30w_all) != published.simulate_case(xavier)


def test_separate_process_rows_wait_for_gpu_time_slices_and_mlperf_offline_does_not():
    """torch2trt's two-process rows are simulated as separate processes (the DLA engine's fallback
    segment waits for the GPU process's time slice), MLPerf Offline as one process (its LWIS harness)."""
    from placetune.backends.simulate.simulator import SimulatedJetson

    cases = {c.row.id: c for c in published_cases()}
    one = SimulatedJetson(timeline=False)  # a backend given explicitly is used as it is: one process
    t2t = cases["t2tdla-xaviernx-resnet18-dla-with-gpu-int8"]
    assert t2t.row.source in published.SEPARATE_PROCESS_SOURCES
    assert published.simulate_case(t2t) < 0.9 * published.simulate_case(t2t, one)  # samples/s
    mlperf = cases["mlperf30-orin-resnet50-offline"]
    assert mlperf.row.source not in published.SEPARATE_PROCESS_SOURCES
    assert published.simulate_case(mlperf) == pytest.approx(published.simulate_case(mlperf, one), rel=1e-9)
