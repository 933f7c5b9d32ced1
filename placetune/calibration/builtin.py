"""Fit the simulated Jetson's built-in per-architecture constants to the published ``fit`` rows.

The built-in device of each architecture (``volta``: Xavier modules, ``ampere``: Orin modules)
is the simulator with the constants of :mod:`placetune.backends.simulate.costs` set by this fit.
The free constants (:data:`PARAMS`, each with bounds) are chosen by
:func:`scipy.optimize.least_squares` to minimise

    sum over fit rows of rho(log(simulated / published))  +  ridge * sum of log(value / prior)^2

where ``rho`` is a robust loss (soft-L1 with scale ``f_scale``: a row far from every setting of
the model pulls like an absolute, not a squared, error) and the ridge keeps what the rows do not
identify near its prior. The search runs in log space within the bounds, with a finite-difference
Jacobian whose sparsity follows the architectures (a Volta constant cannot move an Orin row).
Only rows with ``split == "fit"`` are used (less those in conflict with other rows of their
conditions, the one exclusion rule; ``exclusions=False`` keeps them); ``validate`` rows are never
seen. :func:`leave_one_source_out` refits without each source in turn and predicts that source's
rows; :func:`without_exclusions` gives every prediction again from fits that keep the excluded rows.

``benchmarks/calibration.py --fit [--write]`` runs it; ``--write`` stores the values in
:data:`~placetune.backends.simulate.costs.FIT_FILE`, which the simulator loads.
"""

from __future__ import annotations

import json
import math
import multiprocessing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from placetune.backends.simulate import costs
from placetune.calibration import published
from placetune.calibration.published import CaseResult, PublishedCase, evaluate, published_cases, simulate_case
from placetune._lazy import lazy_import
from placetune.files.write import write_file

if TYPE_CHECKING:
    import scipy.optimize as scipy_optimize
    import scipy.sparse as scipy_sparse
else:
    scipy_optimize = lazy_import("scipy.optimize")
    scipy_sparse = lazy_import("scipy.sparse")

__all__ = ["Param", "PARAMS", "BuiltinFit", "fit_builtin", "leave_one_source_out", "without_exclusions",
           "use_values", "write_fit", "write_predictions", "stored_fit", "arch_of_case"]


@dataclass(frozen=True)
class Param:
    """One free constant of the fit.

    Attributes:
        name: ``arch.field`` or ``arch.field.precision`` (``*`` for a constant shared by both
            architectures; ``harness.<name>`` for a harness's host time per call,
            :data:`~placetune.calibration.published.HARNESS_CALL_US`).
        lower, upper: bounds of the search.
        identified_by: the published rows that set it (for the docs).
    """

    name: str
    lower: float
    upper: float
    identified_by: str

    @property
    def targets(self) -> tuple[tuple[str, str], ...]:
        """The ``(arch, key)`` constants the value is written to."""
        arch, _, key = self.name.partition(".")
        return tuple((a, key) for a in (costs.PRIOR_ARCH if arch == "*" else (arch,)))

    def prior(self) -> float:
        """The value the fit starts from and the ridge pulls towards."""
        arch, key = self.targets[0]
        return _PRIOR_HARNESS[key] if arch == "harness" else _get(costs.PRIOR_ARCH[arch], key)

    @property
    def arch(self) -> str:
        return self.name.partition(".")[0]


#: The fitted constants.
PARAMS: tuple[Param, ...] = (
    Param("*.gpu_conv_eff.fp16", 0.05, 0.95, "Xavier FP16 GPU rows (seed 003 bs 8, torch2trt bs 1, HaX-CoNN); "
          "no Orin FP16 GPU row is published, so Orin shares it"),
    Param("volta.gpu_conv_eff.int8", 0.05, 0.95, "Xavier INT8 GPU rows (MLPerf SingleStream, MultiStream, Offline)"),
    Param("*.gpu_sm_half_mops", 0.5, 500.0, "batch 1 against batch 8+ on both GPUs"),
    Param("*.gpu_split_k", 16.0, 16384.0, "shallow (MobileNet) against deep (ResNet) convolutions at batch 1"),
    Param("volta.gpu_launch_us", 0.5, 50.0, "many-kernel networks at batch 1 (GoogLeNet, ResNet-152)"),
    Param("volta.dla_conv_eff.fp16", 0.05, 0.95, "Xavier DLA FP16 rows (seed 003, HaX-CoNN, torch2trt)"),
    Param("volta.dla_conv_eff.int8", 0.05, 0.95, "Xavier DLA INT8 rows (MLPerf Offline, torch2trt resnet18)"),
    Param("volta.dla_op_us", 0.5, 50.0, "GoogLeNet on the Xavier DLA (many small layers)"),
    Param("volta.dla_bw_eff", 0.05, 0.95, "AlexNet's FC layers on the Xavier DLA"),
    Param("ampere.gpu_conv_eff.int8", 0.05, 0.95, "Orin INT8 GPU rows (MLPerf SingleStream, MultiStream, Offline)"),
    Param("ampere.gpu_launch_us", 0.5, 50.0, "batch-1 ResNet-50 on the Orin GPU"),
    Param("ampere.dla_conv_eff.int8", 0.05, 0.95, "DLA-SW ResNet-50 on both Orin DLAs"),
    Param("ampere.dla_op_us", 0.5, 50.0, "GoogLeNet and ModelBN on the Orin DLA"),
    Param("ampere.dla_bw_eff", 0.05, 0.95, "DLA-SW ResNet-50 power modes"),
    Param("ampere.dla_island_us", 5.0, 400.0, "ModelGN (5 loadables) against ModelBN (2)"),
    Param("*.gpu_sensitivity", 0.01, 5.0, "the GPU engine with DLA engines at once (MLPerf Offline, torch2trt)"),
    # A DLA's slow-down by the other devices' DRAM traffic (the other DLA's and the GPU's): above 0
    # (another device's traffic cannot speed a DLA up), the upper bound left wide (under fair DRAM
    # arbitration a memory-bound task beside devices that saturate DRAM keeps 1 / (1 + n) of it, i.e. a
    # value near 1), so that the rows, not the bound, set it. Per architecture: Xavier's two DLAs share
    # one SRAM, Orin's do not (ref section 1).
    Param("volta.dla_sensitivity", 0.01, 5.0, "both Xavier NX DLAs at once (torch2trt, two processes) and the "
                                              "DLA engines beside the GPU (MLPerf Offline, jetson_benchmarks)"),
    Param("ampere.dla_sensitivity", 0.01, 5.0, "both AGX Orin DLAs at once (DLA-SW ResNet-50, three power modes) "
                                               "and the DLA engines beside the GPU (MLPerf Offline)"),
    Param("harness.python", 50.0, 5000.0, "torch2trt's small networks (resnet18, mobilenet_v2 at the same rate)"),
)


_PRIOR_HARNESS = published.HARNESS_PRIOR_US


def arch_of_case(case: PublishedCase) -> str:
    """``volta`` or ``ampere``: the architecture whose constants a case depends on."""
    return "volta" if case.row.platform.startswith("xavier") else "ampere"


def _get(c: costs.ArchConstants, key: str) -> float:
    name, _, sub = key.partition(".")
    v = getattr(c, name)
    return float(v[sub] if sub else v)


def use_values(values: dict[str, dict[str, float]], base: dict[str, costs.ArchConstants] | None = None) -> None:
    """Make the simulator use ``base`` (default: the priors) with ``values`` set, per architecture
    (and the published cases the ``harness`` host times of ``values["harness"]``)."""
    base = costs.PRIOR_ARCH if base is None else base
    for arch, c in base.items():
        costs.ARCH[arch] = costs.with_values(c, values.get(arch, {}))
    published.HARNESS_CALL_US.update({**_PRIOR_HARNESS, **values.get("harness", {})})
    costs.forget_cost_tables()


def _values_of(params: Sequence[Param], x: np.ndarray) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for p, v in zip(params, np.exp(x)):
        for arch, key in p.targets:
            out.setdefault(arch, {})[key] = float(v)
    return out


@dataclass
class BuiltinFit:
    """Result of :func:`fit_builtin`: the fitted ``values`` per architecture and the fit residuals."""

    values: dict[str, dict[str, float]]
    priors: dict[str, dict[str, float]]
    rows: list[str]
    results: list[CaseResult]
    iterations: int
    params: tuple[Param, ...] = PARAMS
    status: str = ""

    @property
    def ratio(self) -> float:
        """Fit rows per free constant."""
        return len(self.rows) / max(1, len(self.params))

    def as_json(self, loso: Sequence[CaseResult] = (), unexcluded: dict[str, dict[str, float]] | None = None) -> str:
        """The stored form: values, priors, bounds, the rows fitted and, per row id, the simulated
        figure of every expressible row with these values (``predictions``), of every fit row
        by the fit without its source (``loso``) and both again from fits without the exclusion
        rule (``unexcluded``: ``{"predictions": ..., "loso": ...}``, :func:`without_exclusions`)."""
        preds = {r.case.row.id: r.simulated for r in evaluate()}
        return json.dumps({"sim_version": costs.SIM_VERSION, "values": self.values, "priors": self.priors,
                           "fitted_on": self.rows, "bounds": {p.name: [p.lower, p.upper] for p in self.params},
                           "objective": "scipy.optimize.least_squares, soft_l1 (f_scale 0.1) of log(sim/pub) over "
                                        "split=fit rows + ridge * log(value/prior)^2, log space, bounds",
                           "evaluations": self.iterations,
                           "predictions": {k: round(v, 6) for k, v in sorted(preds.items())},
                           "loso": {r.case.row.id: round(r.simulated, 6) for r in loso},
                           **({"unexcluded": unexcluded} if unexcluded else {})},
                          indent=1, sort_keys=True) + "\n"


def fit_builtin(cases: Sequence[PublishedCase] | None = None, *, params: Sequence[Param] = PARAMS,
                ridge: float = 0.01, f_scale: float = 0.1, max_nfev: int | None = None,
                exclude_sources: Sequence[str] = (), start: dict[str, dict[str, float]] | None = None,
                exclusions: bool = True) -> BuiltinFit:
    """Fit ``params`` to the expressible ``fit`` rows (``validate`` rows are dropped here).

    Args:
        cases: the cases (default: every published row).
        params: the free constants.
        ridge: weight of the pull of each constant towards its prior (log space).
        f_scale: soft-L1 scale: residuals (log errors) beyond it count linearly.
        max_nfev: cap on residual evaluations (None: scipy's default).
        exclude_sources: sources left out (leave-one-source-out).
        start: values to start the search from (default: the priors); the ridge still pulls
            towards the priors.
        exclusions: leave out the rows in conflict with the other rows of their conditions (the
            exclusion rule, :func:`~placetune.calibration.published.conflicts`); False keeps them.

    Leaves the simulator using the fitted values (call :func:`use_values` to change that).
    """
    base = costs.PRIOR_ARCH
    params = tuple(params)
    cases = [c for c in (published_cases() if cases is None else cases)
             if not c.skip and not (exclusions and c.conflict) and c.row.split == "fit"
             and c.row.source not in exclude_sources]
    prior = np.log([p.prior() for p in params])
    lo = np.log([p.lower for p in params])
    hi = np.log([p.upper for p in params])
    x0 = prior if start is None else np.log([start.get(p.targets[0][0], {}).get(p.targets[0][1], math.exp(v))
                                              for p, v in zip(params, prior)])
    x0 = np.clip(x0, lo + 1e-9, hi - 1e-9)
    weight = math.sqrt(ridge)
    arch = [arch_of_case(c) for c in cases]
    memo: dict[tuple, float] = {}  # a case depends on its architecture's constants only

    def residuals(x):
        values = _values_of(params, x)
        use_values(values, base)
        keys = {a: tuple(sorted(v.items())) for a, v in values.items()}
        r = []
        for c, a in zip(cases, arch):
            key = (c.row.id, keys.get(a), keys.get("harness"))
            if key not in memo:
                memo[key] = math.log(simulate_case(c) / c.row.value)
            r.append(memo[key])
        return np.concatenate([r, weight * (x - prior)])

    # a constant of one architecture moves only that architecture's rows (and its own ridge term)
    sparsity = scipy_sparse.lil_matrix((len(cases) + len(params), len(params)), dtype=int)
    for j, p in enumerate(params):
        for i, c in enumerate(cases):
            if p.arch in ("*", arch_of_case(c)) or (p.arch == "harness" and c.row.harness == p.targets[0][1]):
                sparsity[i, j] = 1
        sparsity[len(cases) + j, j] = 1
    # the ridge rows go through the same loss: a constant far from its prior is pulled back linearly
    sol = scipy_optimize.least_squares(residuals, x0, bounds=(lo, hi), loss="soft_l1", f_scale=f_scale, x_scale=1.0,
                        diff_step=1e-3, jac_sparsity=sparsity, max_nfev=max_nfev, method="trf",
                        ftol=1e-4, xtol=1e-4, gtol=1e-6)
    values = _values_of(params, sol.x)
    use_values(values, base)
    results = [CaseResult(c, simulate_case(c)) for c in cases]
    priors = {a: {k: (_PRIOR_HARNESS[k] if a == "harness" else _get(base[a], k)) for k in v}
              for a, v in values.items()}
    return BuiltinFit(values, priors, [c.row.id for c in cases], results, int(sol.nfev), params, sol.message)


def leave_one_source_out(cases: Sequence[PublishedCase] | None = None, *, params: Sequence[Param] = PARAMS,
                         jobs: int = 1, **kw) -> list[CaseResult]:
    """Every ``fit`` row predicted by a fit without its source (one refit per source).

    ``jobs > 1`` runs the refits in that many forked processes (each refit is independent and
    starts from the same constants, so the predictions are those of ``jobs=1``). Restores the
    simulator to the full fit's values afterwards.
    """
    global _REFIT
    cases = [c for c in (published_cases() if cases is None else cases) if not c.skip]
    fit_cases = [c for c in cases if c.row.split == "fit"]
    saved = dict(costs.ARCH)
    # each refit starts from the constants in use (normally the full fit): a few iterations each
    start = kw.pop("start", None) or {
        a: {k: (published.HARNESS_CALL_US[k] if a == "harness" else _get(saved[a], k))
            for p in params for aa, k in p.targets if aa == a} for a in (*saved, "harness")}
    saved_harness = dict(published.HARNESS_CALL_US)
    sources = sorted({c.row.source for c in fit_cases})
    out: list[CaseResult] = []
    try:
        if jobs > 1:
            _REFIT = (cases, tuple(params), start, kw)
            with multiprocessing.get_context("fork").Pool(min(jobs, len(sources))) as pool:
                for preds in pool.map(_refit_without, sources, chunksize=1):
                    out += [CaseResult(cases[i], v) for i, v in preds]
        else:
            for source in sources:
                out += [CaseResult(cases[i], v) for i, v in _refit_without(source, (cases, params, start, kw))]
    finally:
        _REFIT = None
        costs.ARCH.update(saved)
        published.HARNESS_CALL_US.update(saved_harness)
        costs.forget_cost_tables()
    return out


#: What the forked refit processes of :func:`leave_one_source_out` share: (cases, params, start, options).
_REFIT: tuple | None = None


def _refit_without(source: str, state: tuple | None = None) -> list[tuple[int, float]]:
    """Refit without ``source`` and predict its ``fit`` rows: ``(index in cases, simulated)`` pairs."""
    shared = state or _REFIT
    if shared is None:
        raise RuntimeError("leave-one-source-out refit run outside leave_one_source_out")
    cases, params, start, kw = shared
    fit_builtin(cases, params=params, exclude_sources=(source,), start=start, **kw)
    return [(i, simulate_case(c)) for i, c in enumerate(cases) if c.row.split == "fit" and c.row.source == source]


def without_exclusions(cases: Sequence[PublishedCase] | None = None, *, params: Sequence[Param] = PARAMS,
                       jobs: int = 1, **kw) -> tuple[list[CaseResult], list[CaseResult]]:
    """The predictions again with the exclusion rule off: every expressible row by a full fit
    that keeps the rows in conflict with their peers, and every fit row by such a fit without
    its source (leave-one-source-out, in ``jobs`` processes). Restores the simulator's constants
    afterwards."""
    cases = [c for c in (published_cases() if cases is None else cases) if not c.skip]
    saved, saved_harness = dict(costs.ARCH), dict(published.HARNESS_CALL_US)
    try:
        fit_builtin(cases, params=params, exclusions=False, **kw)
        full = [CaseResult(c, simulate_case(c)) for c in cases]
        loso = leave_one_source_out(cases, params=params, exclusions=False, jobs=jobs, **kw)
    finally:
        costs.ARCH.update(saved)
        published.HARNESS_CALL_US.update(saved_harness)
        costs.forget_cost_tables()
    return full, loso


def _stored_form(full: Sequence[CaseResult], loso: Sequence[CaseResult]) -> dict[str, dict[str, float]]:
    return {"predictions": {r.case.row.id: round(r.simulated, 6) for r in full},
            "loso": {r.case.row.id: round(r.simulated, 6) for r in loso}}


def write_fit(fit: BuiltinFit, path=None, loso: Sequence[CaseResult] = (),
              unexcluded: tuple[Sequence[CaseResult], Sequence[CaseResult]] | None = None) -> None:
    """Store the fitted values where the simulator loads them (:data:`costs.FIT_FILE`), with the
    predictions they give, the leave-one-source-out predictions ``loso`` and the ``(predictions,
    loso)`` of :func:`without_exclusions`."""
    use_values(fit.values)
    text = fit.as_json(loso, _stored_form(*unexcluded) if unexcluded else None)
    write_file(path or costs.FIT_FILE, text, "fit file")  # atomic: the simulator never reads half a fit


def write_predictions(loso: Sequence[CaseResult], unexcluded: tuple[Sequence[CaseResult], Sequence[CaseResult]],
                      path=None) -> None:
    """Store new leave-one-source-out and :func:`without_exclusions` predictions in the fit file,
    leaving its fitted values as they are (no refit)."""
    stored = stored_fit(path)
    if not stored:
        raise ValueError("no stored fit to add predictions to: run --fit --write first")
    stored["loso"] = {r.case.row.id: round(r.simulated, 6) for r in loso}
    stored["unexcluded"] = _stored_form(*unexcluded)
    write_file(path or costs.FIT_FILE, json.dumps(stored, indent=1, sort_keys=True) + "\n", "fit file")


def stored_fit(path=None) -> dict:
    """The stored fit (:data:`costs.FIT_FILE`) as written by :func:`write_fit` (empty when absent)."""
    try:
        return json.loads((path or costs.FIT_FILE).read_text())
    except FileNotFoundError:
        return {}
