"""Fit the simulated Jetson's built-in per-architecture constants to the published ``fit`` rows.

The built-in device of each architecture (``volta``: Xavier modules, ``ampere``: Orin modules)
is the simulator with the constants of :mod:`placetune.backends.simulate.costs` set by this fit:
the parameters below are chosen to minimise

    sum over fit rows of log(simulated / published)^2  +  ridge * sum of log(value / prior)^2

(relative errors, as :func:`~placetune.calibration.fit.fit_profile`; the ridge keeps what the
rows do not identify at its prior), each row's term made robust (soft-L1 with scale ``robust``:
a row far from every setting of the model, e.g. seed 003's uncalibrated AlexNet INT8 run that is
barely faster than FP16, pulls like an absolute rather than a squared error) with a damped Gauss-Newton (Levenberg-Marquardt) solver in
log space and finite differences. Only rows with ``split == "fit"`` are used; ``validate`` rows
are never seen. The Orin GPU has no expressible ``fit`` row (the only ones are DRIVE Orin-X),
so its conv efficiency is *tied* to the Volta fit (same TensorRT tensor-core kernels, as a
fraction of each module's dense peak); its per-kernel overheads stay at their priors.

``benchmarks/calibration.py --fit [--write]`` runs it; ``--write`` stores the values in
:data:`~placetune.backends.simulate.costs.FIT_FILE`, which the simulator loads.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from placetune.backends.simulate import costs
from placetune.calibration.published import CaseResult, PublishedCase, published_cases, simulate_case

__all__ = ["FIT_PARAMS", "TIED", "BuiltinFit", "fit_builtin", "use_values", "write_fit"]

#: Fitted constants per architecture (``field`` or ``field.precision``).
FIT_PARAMS: dict[str, tuple[str, ...]] = {
    "volta": ("gpu_conv_eff.fp16", "gpu_conv_eff.int8", "gpu_t_half_us", "gpu_launch_us",
              "dla_conv_eff.fp16", "dla_op_us", "dla_bw_eff"),
    "ampere": ("dla_conv_eff.int8", "dla_op_us", "dla_bw_eff", "dla_island_us"),
}
#: (arch, constant) <- (arch, constant): copied after the fit (not identified by a fit row).
TIED: dict[tuple[str, str], tuple[str, str]] = {
    ("ampere", "gpu_conv_eff.int8"): ("volta", "gpu_conv_eff.int8"),
    ("ampere", "gpu_conv_eff.fp16"): ("volta", "gpu_conv_eff.fp16"),
    ("ampere", "gpu_conv_eff.fp32"): ("volta", "gpu_conv_eff.fp16"),
    ("volta", "gpu_conv_eff.fp32"): ("volta", "gpu_conv_eff.fp16"),
}
_UPPER = {"gpu_conv_eff": 0.95, "dla_conv_eff": 0.95, "gpu_bw_eff": 0.95, "dla_bw_eff": 0.95}


def _get(c: costs.ArchConstants, key: str) -> float:
    name, _, sub = key.partition(".")
    v = getattr(c, name)
    return float(v[sub] if sub else v)


def use_values(values: dict[str, dict[str, float]], base: dict[str, costs.ArchConstants] | None = None) -> None:
    """Make the simulator use ``base`` (default: the priors) with ``values`` set, per architecture."""
    base = costs.PRIOR_ARCH if base is None else base
    for arch, c in base.items():
        costs.ARCH[arch] = costs.with_values(c, values.get(arch, {}))
    costs._TABLE_CACHE.clear()


def _tie(values: dict[str, dict[str, float]], base) -> dict[str, dict[str, float]]:
    out = {a: dict(v) for a, v in values.items()}
    for (a, k), (sa, sk) in TIED.items():
        src = out.get(sa, {}).get(sk, _get(base[sa], sk))
        out.setdefault(a, {})[k] = src
    return out


@dataclass
class BuiltinFit:
    """Result of :func:`fit_builtin`: the fitted ``values`` per architecture and the fit residuals."""

    values: dict[str, dict[str, float]]
    priors: dict[str, dict[str, float]]
    rows: list[str]
    results: list[CaseResult]
    iterations: int

    def as_json(self) -> str:
        return json.dumps({"values": self.values, "priors": self.priors, "fitted_on": self.rows,
                           "tied": {f"{a}.{k}": f"{sa}.{sk}" for (a, k), (sa, sk) in TIED.items()},
                           "objective": "sum log(sim/pub)^2 + ridge * sum log(value/prior)^2 over split=fit rows"},
                          indent=1, sort_keys=True) + "\n"


def fit_builtin(cases: Sequence[PublishedCase] | None = None, *, ridge: float = 0.02, robust: float = 0.1,
                iterations: int = 12, step: float = 0.02) -> BuiltinFit:
    """Fit :data:`FIT_PARAMS` to the expressible ``fit`` rows (``validate`` rows are dropped here).

    Leaves the simulator using the fitted values (call :func:`use_values` to change that).
    """
    base = costs.PRIOR_ARCH
    cases = [c for c in (published_cases() if cases is None else cases) if not c.skip and c.row.split == "fit"]
    keys = [(a, k) for a, ks in FIT_PARAMS.items() for k in ks]
    prior = np.log([_get(base[a], k) for a, k in keys])
    upper = np.array([math.log(_UPPER.get(k.partition(".")[0], 1e9)) for _, k in keys])

    def values_of(x):
        out: dict[str, dict[str, float]] = {}
        for (a, k), v in zip(keys, np.exp(x)):
            out.setdefault(a, {})[k] = float(v)
        return _tie(out, base)

    def residuals(x):
        use_values(values_of(x), base)
        r = np.array([math.log(simulate_case(c) / c.row.value) for c in cases])
        # soft-L1: rho(r) = 2 s^2 (sqrt(1 + (r/s)^2) - 1), written as a residual whose square is rho
        rr = np.sign(r) * np.sqrt(2 * robust ** 2 * (np.sqrt(1 + (r / robust) ** 2) - 1))
        return np.concatenate([rr, math.sqrt(ridge) * (x - prior)])

    x = prior.copy()
    r = residuals(x)
    lam, it = 1e-2, 0
    for it in range(1, iterations + 1):
        jac = np.empty((r.size, x.size))
        for j in range(x.size):
            xj = x.copy()
            xj[j] += step
            jac[:, j] = (residuals(xj) - r) / step
        improved = False
        for _ in range(6):
            a = jac.T @ jac
            dx = np.linalg.solve(a + lam * np.diag(np.diag(a) + 1e-9), -jac.T @ r)
            xn = np.minimum(x + dx, upper)
            rn = residuals(xn)
            if rn @ rn < r @ r:
                x, r, lam, improved = xn, rn, lam / 3, True
                break
            lam *= 4
        if not improved or np.abs(dx).max() < 1e-3:
            break
    values = values_of(x)
    use_values(values, base)
    results = [CaseResult(c, simulate_case(c)) for c in cases]
    priors = {a: {k: _get(base[a], k) for k in values[a]} for a in values}
    return BuiltinFit(values, priors, [c.row.id for c in cases], results, it)


def write_fit(fit: BuiltinFit, path=None) -> None:
    """Store the fitted values where the simulator loads them (:data:`costs.FIT_FILE`)."""
    from placetune.files.write import write_file

    write_file(path or costs.FIT_FILE, fit.as_json(), "fit file")  # atomic: the simulator never reads half a fit
