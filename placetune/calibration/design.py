"""The linear part of a device-profile fit: the parameter layout and the design matrix.

Every segment or end-to-end latency observation is a row: its layers' nominal times in the
columns of their (device kind, layer) factors, plus its boundary, loadable and per-engine terms
(:mod:`placetune.calibration.fit` solves the weighted ridge problem on these rows).

A row depends on its observation and the layout alone, so :func:`design_matrix` keeps the rows it
built (the last :data:`ROWS_KEPT`, by observation and layout): a search refits on the same
observations many times a round (bootstrap resamples, cross-validation folds) and every round.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from placetune.backends.simulate.costs import graph_info
from placetune.memo import IdentityMemo
from placetune.calibration.profile import OP_CLASSES

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["Observation", "Params", "design_matrix"]

#: design rows :func:`design_matrix` keeps (least recently used first out)
ROWS_KEPT = 8192
_ROWS: IdentityMemo[np.ndarray] = IdentityMemo(ROWS_KEPT)


@dataclass
class Observation:
    """One measured time and what the simulator needs to predict it.

    Attributes:
        group: the measurement it comes from (cross-validation keeps a group together).
        kind: ``segment``, ``latency`` (engine-mode end to end), ``period`` (pipeline period)
            or ``layers`` (per-layer times of one measurement, ``measured_layers_ms``).
        measured_ms: the measured time (segment, latency or period; 0 for ``layers``).
        model: the model measured.
        layer_idx, layer_kind, layer_ms: the model layers in it, their device kind (0 GPU,
            1 DLA) and nominal time (ms, fused or not as placed).
        boundary_ms, loadable_ms, engine_ms: nominal boundary, DLA loadable and per-engine time.
        engines: engines whose launch + sync the time includes.
        redundant: a latency already covered by the measurement's segment rows (used for
            errors, not fitted).
        realisation, settings: for ``period`` rows: what the simulator is run on (the realised
            placement, realised again on first use).
        measured_layers_ms: ``layers`` rows: the measured time of each layer.
    """

    group: str
    kind: str
    measured_ms: float
    model: "Model"
    layer_idx: np.ndarray
    layer_kind: np.ndarray
    layer_ms: np.ndarray
    boundary_ms: float = 0.0
    loadable_ms: float = 0.0
    engine_ms: float = 0.0
    engines: float = 0.0
    redundant: bool = False
    realisation: Any = None
    settings: Any = None
    measured_layers_ms: np.ndarray | None = None


class Params:
    """Parameter layout: phi per (kind, layer name), psi per (kind, class), delta per kind, b, l, e."""

    def __init__(self, obs: Sequence[Observation]) -> None:
        self.names: list[str] = []
        self.cls: list[int] = []
        self._gid: dict[str, np.ndarray] = {}
        index: dict[str, int] = {}
        for o in obs:
            h = o.model.hash
            if h in self._gid:
                continue
            g = graph_info(o.model)
            ids = []
            for n, c in zip(g.names, g.cls):
                if n not in index:
                    index[n] = len(self.names)
                    self.names.append(n)
                    self.cls.append(OP_CLASSES.index(c))
                ids.append(index[n])
            self._gid[h] = np.array(ids, dtype=np.intp)
        self.L = len(self.names)
        self.psi0 = 2 * self.L
        self.delta0 = self.psi0 + 2 * len(OP_CLASSES)
        self.b = self.delta0 + 2
        self.l = self.b + 1
        self.e = self.l + 1
        self.P = self.e + 1
        self.layout = tuple(self._gid)  # the models in column order: the same layout for the same models

    def layer_ids(self, o: Observation, idx: np.ndarray | None = None) -> np.ndarray:
        """The parameter layout's layer numbers of ``o``'s layers (``idx``: of these layers of its model)."""
        return self._gid[o.model.hash][o.layer_idx if idx is None else idx]

    def phi(self, o: Observation, idx: np.ndarray | None = None, kind: np.ndarray | None = None) -> np.ndarray:
        kind = o.layer_kind if kind is None else kind
        return kind * self.L + self.layer_ids(o, idx)

    def columns(self, obs: Sequence[Observation]) -> np.ndarray:
        """:meth:`phi` of every observation, concatenated (one gather when they are of one model)."""
        first = obs[0].model.hash if obs else None
        if obs and all(o.model.hash == first for o in obs):
            kind = np.concatenate([o.layer_kind for o in obs])
            return kind * self.L + self._gid[first][np.concatenate([o.layer_idx for o in obs])]
        return np.concatenate([self.phi(o) for o in obs]) if obs else np.zeros(0, dtype=np.intp)

    def row(self, o: Observation) -> np.ndarray:
        x = np.zeros(self.P)
        np.add.at(x, self.phi(o), o.layer_ms)
        x[self.b] += o.boundary_ms
        x[self.l] += o.loadable_ms
        x[self.e] += o.engines
        return x


def _build(params: Params, lin: Sequence[Observation]) -> np.ndarray:
    """The rows of ``lin`` as one dense matrix (one scatter-add for all layer terms)."""
    X = np.zeros((len(lin), params.P))
    rows = np.repeat(np.arange(len(lin)), [o.layer_idx.size for o in lin])
    cols = params.columns(lin)
    np.add.at(X, (rows, cols), np.concatenate([o.layer_ms for o in lin]))
    X[:, params.b] = [o.boundary_ms for o in lin]
    X[:, params.l] = [o.loadable_ms for o in lin]
    X[:, params.e] = [o.engines for o in lin]
    return X


def design_matrix(params: Params, lin: Sequence[Observation]) -> np.ndarray:
    """The rows of ``lin`` as one dense matrix; rows built for these observations and this
    layout before are reused (the same values: a row depends on nothing else)."""
    layout = params.layout
    X = np.empty((len(lin), params.P))
    missing = []
    for i, o in enumerate(lin):
        hit = _ROWS.get(o, layout)
        if hit is not None:
            X[i] = hit
        else:
            missing.append(i)
    if missing:
        new = _build(params, [lin[i] for i in missing])
        X[missing] = new
        for i, row in zip(missing, new):
            _ROWS.put(lin[i], row, layout)
    return X
