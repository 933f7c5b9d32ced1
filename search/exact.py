"""``exact``: the true optimum where it can be computed, and a certificate when it is.

Two methods (``method="auto"`` tries the DP first: it usually needs one evaluation):

* **enumeration** of every masked assignment, for spaces of at most ``max_enumerate``
  assignments (and a budget that covers them): certified by construction.
* **dynamic programming** for ``engine`` mode on the simulated Jetson, minimising latency
  (or maximising throughput, its inverse). The simulator's engine latency is the sum of
  per-layer times (which depend on the layer's device and whether its fusion anchor is on
  the same device, or for a convolution whether an earlier sibling reading the same tensor is
  on the GPU with it), per-boundary reformat costs (once per producer and destination
  device), model input/output reformats on a DLA, and a fixed overhead per DLA loadable.
  The per-layer and per-boundary figures are public
  (:func:`placetune.backends.simulate.costs.cost_table`: ``t_alone``, ``t_fused``,
  ``edge_ms``, ``in_ms``, ``out_ms``, ``island_ms``, the fusion anchors and the sibling pairs
  ``sib_i`` / ``sib_j`` of :class:`~placetune.backends.simulate.graph.GraphInfo`). From them the
  DP builds a *lower bound* of the latency of every assignment: exact per-layer and I/O
  terms, the cheapest edge of each producer for its boundary, and one loadable per
  connected component of DLA layers (a loadable is a connected region, so there are at
  least that many). The DP runs over the units in topological order with a frontier of
  the units that later terms still need, their devices and which of them are connected on
  the DLA, so it is exact for any DAG whose frontier stays narrow (chains, residual and
  inception blocks). The minimiser is then *measured*: when its latency equals the
  bound, no assignment can be faster (every assignment's latency is at least its bound,
  which is at least the minimum bound), and the result is certified. Otherwise the run
  reports the bound (``extra["lower_bound"]``) and improves the answer with local search.

The DP placement's measurement is checked against its bound: a measurement below the bound
means the simulator no longer composes costs as described above, and nothing is certified.

The certificate assumes that a placement the realiser changes (more than 16 loadables on
a core) realises to a placement whose units stay whole; the DLA rules and masks are the
evaluator's own.
"""

from __future__ import annotations

import itertools
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .base import Agent, Budget, BudgetExhausted, SearchResult, SearchRun, in_range
from placetune.backends.simulate.costs import cost_table, power_factor
from .local import LocalAgent

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator
    from placetune.placement.space import Space

__all__ = ["ExactAgent", "EngineBound", "engine_bound", "dp_unavailable"]

log = logging.getLogger(__name__)

_REL_TOL = 1e-9


# =========================================================================================
# the lower-bound model of engine-mode latency
# =========================================================================================
@dataclass
class _Factor:
    scope: tuple[int, ...]  # unit indexes, ascending
    values: np.ndarray  # indexed by the bits of the scope's device kinds (0 GPU, 1 DLA)

    def value(self, x: dict[int, int]) -> float:
        idx = 0
        for j, u in enumerate(self.scope):
            idx |= x[u] << j
        return float(self.values[idx])


class EngineBound:
    """Lower bound of the simulated engine-mode latency of a space's assignments.

    Built by :func:`engine_bound`. :meth:`value` gives the bound of one assignment;
    :meth:`minimise` the assignment with the smallest bound, by dynamic programming.

    Attributes:
        space: the decision space (two devices: GPU and one DLA core).
        island_ms: overhead per DLA loadable (ms).
        constant_ms: cost every placement pays (the one engine's launch + sync, ms).
        factors: the additive terms over unit device kinds.
        links: ``(u, v, condition)``: units ``u < v`` joined by a layer edge; on the DLA
            they are in one loadable only if every unit of ``condition`` is on the DLA too.
    """

    def __init__(
        self, space: "Space", factors: list[_Factor], links: list[tuple[int, int, tuple[int, ...]]], island_ms: float,
        constant_ms: float = 0.0,
    ) -> None:
        self.space = space
        self.factors = factors
        self.links = links
        self.island_ms = float(island_ms)
        self.constant_ms = float(constant_ms)  # the engine's launch + sync, paid by every placement

    # ------------------------------------------------------------ one assignment
    def value(self, assignment: list[int]) -> float:
        """The bound (ms) of one assignment (device indexes of the space)."""
        x = {u: int(a > 0) for u, a in enumerate(assignment)}
        total = sum(f.value(x) for f in self.factors)
        parent = list(range(len(assignment)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        comps = sum(x.values())
        for u, v, cond in self.links:
            if x[u] and x[v] and all(x[w] for w in cond):
                ru, rv = find(u), find(v)
                if ru != rv:
                    parent[ru] = rv
                    comps -= 1
        return total + self.island_ms * comps + self.constant_ms

    # ------------------------------------------------------------ the DP
    def minimise(self, max_states: int = 200_000) -> tuple[float, list[int]]:
        """The assignment with the smallest bound and that bound.

        Raises:
            RuntimeError: the frontier grew beyond ``max_states`` states (graph too wide).
        """
        space = self.space
        n = space.n_units
        dla = [k for k, d in enumerate(space.devices) if d != "GPU"]
        if len(space.devices) != 2 or len(dla) != 1:
            raise ValueError("the engine-mode bound needs a space of two devices (GPU and one DLA core)")
        dla_index = dla[0]
        at: list[list[_Factor]] = [[] for _ in range(n)]
        last = list(range(n))
        for f in self.factors:
            t = f.scope[-1]
            at[t].append(f)
            for u in f.scope:
                last[u] = max(last[u], t)
        links_at: list[list[tuple[int, int, tuple[int, ...]]]] = [[] for _ in range(n)]
        for u, v, cond in self.links:
            t = max(v, *cond) if cond else v
            links_at[t].append((u, v, cond))
            for w in (u, v, *cond):
                last[w] = max(last[w], t)
        choices = [
            sorted({int(space.devices[k] != "GPU") for k in np.flatnonzero(space.mask[u])}) for u in range(n)
        ]
        # state: (kinds of open units, component labels of open units (-1 for GPU))
        open_units: list[int] = []
        states: dict[tuple, float] = {((), ()): 0.0}
        back: list[dict[tuple, tuple[tuple, int]]] = []
        for k in range(n):
            new_open = open_units + [k]
            keep = [u for u in new_open if last[u] > k]
            pos = {u: j for j, u in enumerate(new_open)}
            nxt: dict[tuple, float] = {}
            bp: dict[tuple, tuple[tuple, int]] = {}
            for state, cost in states.items():
                kinds, labels = state
                for v in choices[k]:
                    xs = dict(zip(open_units, kinds))
                    xs[k] = v
                    c = cost + sum(f.value(xs) for f in at[k])
                    lab = list(labels) + [-1]
                    if v:
                        c += self.island_ms
                        lab[-1] = max(lab) + 1
                    for a, b, cond in links_at[k]:
                        if xs[a] and xs[b] and all(xs[w] for w in cond):
                            la, lb = lab[pos[a]], lab[pos[b]]
                            if la != lb:
                                lab = [la if x == lb else x for x in lab]
                                c -= self.island_ms
                    # drop closed units, canonicalise labels
                    rename: dict[int, int] = {}
                    new_kinds, new_labels = [], []
                    for u in keep:
                        j = pos[u]
                        new_kinds.append(xs[u])
                        lbl = lab[j]
                        if lbl >= 0:
                            lbl = rename.setdefault(lbl, len(rename))
                        new_labels.append(lbl)
                    key = (tuple(new_kinds), tuple(new_labels))
                    if c < nxt.get(key, math.inf):
                        nxt[key] = c
                        bp[key] = (state, v)
            if len(nxt) > max_states:
                raise RuntimeError(f"DP frontier has {len(nxt)} states at unit {k} (limit {max_states})")
            states = nxt
            back.append(bp)
            open_units = keep
        key, best = min(states.items(), key=lambda kv: kv[1])
        on_dla: list[int] = [0] * n  # per unit: 1 on the DLA (read back through the frontiers)
        for k in range(n - 1, -1, -1):
            prev, v = back[k][key]
            on_dla[k] = v
            key = prev
        assignment = [dla_index if v else 0 for v in on_dla]
        return float(best) + self.constant_ms, assignment


def dp_unavailable(evaluator: "Evaluator") -> str | None:
    """Why the engine-mode DP cannot run for this evaluator (None when it can)."""
    s = evaluator.settings
    if s.mode != "engine":
        return f"the DP needs engine mode (additive costs); {s.mode} mode schedules segments concurrently"
    if not evaluator.backend.capabilities.cost_tables:
        return "the DP needs the simulated Jetson's public cost tables; hardware backends have none"
    obj = evaluator.objective
    if obj.constraints:
        return "the DP minimises engine latency without constraints; " + ", ".join(c.text for c in obj.constraints)
    if obj.multi or obj.names[0] not in ("latency", "throughput"):
        return f"the DP minimises engine latency (or maximises throughput), not {obj.name}"
    if s.precision not in ("fp16", "int8"):
        return f"no DLA layer can run at {s.precision}"
    if evaluator.platform.dla_count == 0:
        return f"{evaluator.platform.name} has no DLA"
    return None


def engine_bound(evaluator: "Evaluator", space: "Space", *, max_condition: int = 8) -> EngineBound:
    """Build the engine-mode latency bound from the simulator's public cost table.

    Args:
        evaluator: an engine-mode evaluator on the ``simulate`` backend.
        space: its decision space (two devices).
        max_condition: the most units a connectivity condition may name (wider ones are
            dropped, which weakens the bound but keeps it valid and the DP narrow).

    Raises:
        ValueError: :func:`dp_unavailable` says why.
    """
    why = dp_unavailable(evaluator)
    if why:
        raise ValueError(why)
    model = space.model
    power = power_factor(evaluator.platform, evaluator.settings.power_mode)
    if power is None:
        raise ValueError(f"{evaluator.platform.name} has no power mode {evaluator.settings.power_mode!r}")
    table = cost_table(model, evaluator.platform, evaluator.settings.precision, model.batch, power)
    g = table.g
    unit = np.array([space.unit_of(name).index for name in g.names], dtype=np.intp)
    io = np.zeros(g.n)
    if len(g.in_layers):
        np.add.at(io, g.in_layers, table.in_ms)
    if len(g.out_layers):
        np.add.at(io, g.out_layers, table.out_ms)
    groups: dict[tuple[int, ...], list[np.ndarray]] = {}

    def add(scope_units: set[int], fn: Any) -> None:
        scope = tuple(sorted(scope_units))
        vals = np.zeros(1 << len(scope))
        for idx in range(len(vals)):
            x = {u: (idx >> j) & 1 for j, u in enumerate(scope)}
            vals[idx] = fn(x)
        groups.setdefault(scope, []).append(vals)

    t_alone, t_fused = table.t_alone, table.t_fused
    # horizontal fusion: a GPU convolution joins an earlier sibling's kernel when that one is on the GPU
    siblings: dict[int, list[int]] = {}
    for a, b in zip(g.sib_i.tolist(), g.sib_j.tolist()):
        siblings.setdefault(a, []).append(b)
    for i in range(g.n):
        u = int(unit[i])
        ag, ad = int(g.anchor_gpu[i]), int(g.anchor_dla[i])
        sib = tuple(int(unit[j]) for j in siblings.get(i, ()))
        scope = {u, *sib}
        if ag >= 0:
            scope.add(int(unit[ag]))
        if ad >= 0:
            scope.add(int(unit[ad]))

        def layer_ms(x: dict[int, int], i: int = i, u: int = u, ag: int = ag, ad: int = ad,
                     sib: tuple[int, ...] = sib) -> float:
            k = x[u]
            a = ad if k else ag
            fused = a >= 0 and x[int(unit[a])] == k or (k == 0 and any(x[s] == 0 for s in sib))
            t = t_fused[k, i] if fused else t_alone[k, i]
            return float(t) + (float(io[i]) if k else 0.0)

        add(scope, layer_ms)
    # boundaries: once per producer (layer) and destination device; the cheapest of its edges
    by_producer: dict[int, list[int]] = {}
    for e, p in enumerate(g.edge_p.tolist()):
        if unit[p] != unit[int(g.edge_c[e])]:
            by_producer.setdefault(p, []).append(e)
    for p, edges in by_producer.items():
        up = int(unit[p])
        consumers = sorted({int(unit[int(g.edge_c[e])]) for e in edges})
        cost = float(min(table.edge_ms[e] for e in edges))

        def boundary_ms(x: dict[int, int], up: int = up, consumers: list[int] = consumers, cost: float = cost) -> float:
            return cost if any(x[c] != x[up] for c in consumers) else 0.0

        add({up, *consumers}, boundary_ms)
    factors = [_Factor(scope, np.sum(vals, axis=0)) for scope, vals in groups.items()]
    return EngineBound(space, factors, _links(g, unit, max_condition), table.island_ms,
                       getattr(table, "engine_ms", 0.0))


def _links(g: Any, unit: np.ndarray, max_condition: int) -> list[tuple[int, int, tuple[int, ...]]]:
    """Unit pairs joined by a layer edge, with the units every other path between them crosses.

    A loadable is convex (no path leaves it and comes back), so an edge ``p -> c`` can only
    join the loadables of ``p`` and ``c`` when every layer on a path from ``p`` to ``c`` is
    on the DLA too. Conditions with more than ``max_condition`` units are dropped (the
    link then always joins: a weaker, still valid bound).
    """
    n = g.n
    succ: list[list[int]] = [[] for _ in range(n)]
    for p, c in zip(g.edge_p.tolist(), g.edge_c.tolist()):
        succ[p].append(c)
    desc = [0] * n  # bitsets of strict descendants
    for i in range(n - 1, -1, -1):  # layers are in topological order
        d = 0
        for c in succ[i]:
            d |= (1 << c) | desc[c]
        desc[i] = d
    anc = [0] * n
    for i in range(n):
        for c in succ[i]:
            anc[c] |= (1 << i) | anc[i]
    links: set[tuple[int, int, tuple[int, ...]]] = set()
    for p, c in zip(g.edge_p.tolist(), g.edge_c.tolist()):
        up, uc = int(unit[p]), int(unit[c])
        if up == uc:
            continue
        between = desc[p] & anc[c]
        cond: set[int] = set()
        while between:
            low = between & -between
            cond.add(int(unit[low.bit_length() - 1]))
            between ^= low
        cond -= {up, uc}
        if len(cond) > max_condition:
            cond = set()
        links.add((min(up, uc), max(up, uc), tuple(sorted(cond))))
    return sorted(links)


# =========================================================================================
# the agent
# =========================================================================================
class ExactAgent(Agent):
    """Certified optimum by enumeration or engine-mode DP, else the best it can find.

    Args:
        seed: seed of the local search that improves an uncertified answer.
        granularity: decision units.
        method: ``auto`` (the DP where available, else enumeration of small spaces, else
            local search; an uncertified DP answer on a small space is followed by
            enumeration), ``enumerate`` or ``dp``.
        max_enumerate: the largest space ``auto`` enumerates.

    The result's ``certified`` is True only when the optimum was proved: every assignment
    measured, or the DP bound met by a measurement. ``notes`` say why not otherwise.

    Example:
        >>> from placetune.evaluator import Evaluator
        >>> from search import Budget
        >>> r = ExactAgent().run(Evaluator("seed-block", mode="pipeline"), Budget(300))
        >>> r.certified, r.evaluations
        (True, 243)
    """

    name = "exact"

    def __init__(
        self,
        *,
        seed: int | None = None,
        granularity: str = "fusion",
        method: str = "auto",
        max_enumerate: int = 4096,
    ) -> None:
        super().__init__(seed=seed, granularity=granularity)
        if method not in ("auto", "enumerate", "dp"):
            raise ValueError(f"method must be auto, enumerate or dp, not {method!r}")
        self.method = method
        in_range("max_enumerate", int(max_enumerate), 1)
        self.max_enumerate = int(max_enumerate)

    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Find (and if possible certify) the optimum within the budget."""
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        space = run.space
        size = math.prod(len(u.choices) for u in space.units)
        why_dp = dp_unavailable(evaluator)
        method = self.method
        if method == "auto":
            if why_dp is None:
                method = "dp"
            elif size <= self.max_enumerate:
                method = "enumerate"
            else:
                method = "none"
                run.notes.append(
                    f"cannot certify: {size:.3g} assignments are too many to enumerate "
                    f"(max_enumerate={self.max_enumerate}) and {why_dp}"
                )
        try:
            if method == "enumerate":
                return self._enumerate(run, size)
            if method == "dp":
                if why_dp is not None:
                    run.notes.append(f"cannot run the DP: {why_dp}")
                else:
                    return self._dp(run, size)
            self._improve(run, None)
        except BudgetExhausted:
            pass
        return run.result(certified=False, method=method)

    # --------------------------------------------------------------- methods
    def _enumerate(self, run: SearchRun, size: int) -> SearchResult:
        space = run.space
        allowed = [np.flatnonzero(space.mask[i]).tolist() for i in range(space.n_units)]
        done = 0
        try:
            for a in itertools.product(*allowed):
                run.evaluate(list(a))
                done += 1
        except BudgetExhausted:
            run.notes.append(f"cannot certify: the budget covered {done} of {size} assignments")
            return run.result(certified=False, method="enumerate", enumerated=done, size=size)
        if run.evaluator.settings.noise > 0:
            run.notes.append("measurements are noisy: the optimum is that of the measured values")
        return run.result(certified=run.best_value is not None, method="enumerate", enumerated=done, size=size)

    def _dp(self, run: SearchRun, size: int) -> SearchResult:
        evaluator = run.evaluator
        bound = engine_bound(evaluator, run.space)
        try:
            lb, a = bound.minimise()
        except RuntimeError as exc:
            run.notes.append(f"cannot certify: {exc}")
            try:
                self._improve(run, None)
            except BudgetExhausted:
                pass
            return run.result(certified=False, method="dp")
        extra: dict[str, Any] = {"method": "dp", "lower_bound": lb}
        try:
            m = run.evaluate(a)
        except BudgetExhausted:
            run.notes.append("cannot certify: no budget to measure the DP's placement")
            return run.result(certified=False, **extra)
        if m.ok and m.latency_ms.get("median") is not None:
            latency = float(m.latency_ms["median"])
            extra["dp_latency_ms"] = latency
            valid = latency >= lb * (1 - 1e-6) - 1e-9
            if not valid:
                run.notes.append(
                    f"cannot certify: measured {latency:.6g} ms is below the bound {lb:.6g} ms: the simulator "
                    "no longer composes engine latency from its public cost table as the DP assumes"
                )
            elif evaluator.settings.noise > 0:
                run.notes.append("cannot certify: measurements are noisy (settings.noise > 0)")
            elif latency <= lb * (1 + _REL_TOL) + 1e-12:
                return run.result(certified=True, **extra)
            else:
                run.notes.append(
                    f"cannot certify: the DP placement measures {latency:.6g} ms, above its bound {lb:.6g} ms "
                    "(a DLA region split into several loadables); improving it with local search"
                )
        else:
            run.notes.append(f"cannot certify: the DP placement did not measure ({m.status}: {m.reason})")
        if size <= self.max_enumerate and self.method == "auto":
            run.notes.append("enumerating the space instead")
            result = self._enumerate(run, size)
            result.extra.update(extra, method="dp+enumerate")
            return result
        try:
            self._improve(run, a)
        except BudgetExhausted:
            pass
        return run.result(certified=False, **extra)

    def _improve(self, run: SearchRun, start: list[int] | None) -> None:
        """Local search from ``start`` (None: the best baseline), the baselines measured first."""
        LocalAgent(seed=self.seed, granularity=self.granularity).improve(run, start)
