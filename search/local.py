"""``local``: first-improvement hill climbing (or simulated annealing) over unit moves.

The run starts from the best baseline (all-GPU, all-DLA with fallback, the per-core split
of pipeline mode: :func:`search.base.baseline_assignments`, the placements of
``Evaluator.baselines()``), then tries moves of the current assignment, units taken in
topological order:

1. *boundary shifts*: move one unit next to a device change onto its neighbour's device
   (a segment grows or shrinks by one unit; no new DLA loadable);
2. *run flips*: move a whole maximal run of same-device units to another device (a
   loadable disappears or two merge);
3. *single flips* of any unit.

GPU<->DLA boundaries and DLA loadables are what make a lone unit flip rarely pay off, so
moves of classes 1 and 2 come first. ``method="hill"`` accepts the first improving move
and, at a local optimum (no move of classes 1-3 improves), kicks the best assignment with
random *block moves* (a contiguous block of units to one device; iterated local search).
``method="anneal"`` draws neighbourhood and block moves at random and accepts worse ones
with the Metropolis rule under a geometric temperature schedule.

Every assignment is tried at most once per run (an assignment already measured is
answered from memory), so the budget goes to new placements.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from .base import Agent, Budget, BudgetExhausted, SearchResult, SearchRun, baseline_assignments, in_range

if TYPE_CHECKING:
    from placetune.tuning.evaluator import Evaluator
    from placetune.placement.space import Space

__all__ = ["LocalAgent", "moves"]

Move = tuple[tuple[int, ...], int]  # (units, device index)


def _runs(a: list[int]) -> list[tuple[int, int]]:
    """Maximal [start, end) runs of equal devices in unit order."""
    out = []
    start = 0
    for i in range(1, len(a) + 1):
        if i == len(a) or a[i] != a[start]:
            out.append((start, i))
            start = i
    return out


def _apply(space: "Space", a: list[int], move: Move) -> list[int]:
    units, k = move
    b = list(a)
    for i in units:
        if space.mask[i, k]:
            b[i] = k
    return b


def moves(space: "Space", a: list[int], rng: np.random.Generator, *, blocks: int = 0) -> Iterator[Move]:
    """Candidate moves of assignment ``a``, best-first by class, shuffled within a class.

    Args:
        space: the decision space (masked devices are never proposed).
        a: the current assignment.
        rng: source of the shuffles.
        blocks: random block moves to add after the single flips.
    """
    n = len(a)
    allowed = [np.flatnonzero(space.mask[i]).tolist() for i in range(n)]
    runs = _runs(a)
    seen: set[tuple[tuple[int, ...], int]] = set()

    def fresh(units: tuple[int, ...], k: int) -> bool:
        units = tuple(i for i in units if a[i] != k and k in allowed[i])
        if not units or (units, k) in seen:
            return False
        seen.add((units, k))
        return True

    # 1. boundary shifts: a unit at the edge of a run takes its neighbour's device;
    #    the first and last units may also take any device (model input / output).
    shifts: list[Move] = []
    for s, e in runs:
        if s > 0:
            shifts.append(((s,), a[s - 1]))
        if e < n:
            shifts.append(((e - 1,), a[e]))
    for i in (0, n - 1):
        for k in allowed[i]:
            shifts.append(((i,), k))
    # 2. run flips: a whole run to another device (its neighbours' first)
    flips: list[Move] = []
    for s, e in runs:
        neigh = [a[s - 1]] if s > 0 else []
        if e < n:
            neigh.append(a[e])
        ks = list(dict.fromkeys(neigh + list(range(space.n_devices))))
        for k in ks:
            if k != a[s]:
                flips.append((tuple(range(s, e)), k))
    # 3. single flips, then random blocks
    singles: list[Move] = [((i,), k) for i in range(n) for k in allowed[i] if k != a[i]]
    for group in (shifts, flips, singles):
        for j in rng.permutation(len(group)):
            units, k = group[j]
            if fresh(units, k):
                yield group[j]
    for _ in range(blocks):
        yield random_block(space, a, rng)


def random_block(space: "Space", a: list[int], rng: np.random.Generator, max_len: int | None = None) -> Move:
    """A random contiguous block of units moved to one random device."""
    n = len(a)
    max_len = max_len or max(1, n // 4)
    length = int(rng.integers(1, max_len + 1))
    s = int(rng.integers(0, max(1, n - length + 1)))
    k = int(rng.integers(0, space.n_devices))
    return (tuple(range(s, min(n, s + length))), k)


def _kick(run: SearchRun, best: list[int], rng: np.random.Generator, max_len: int) -> list[int] | None:
    """An untried assignment near ``best``: random blocks of growing length, then uniform samples."""
    space = run.space
    n = space.n_units
    length = max_len
    for attempt in range(200):
        if attempt and attempt % 20 == 0:
            length = min(n, 2 * length)
        k = int(rng.integers(1, 3))
        cand = list(best)
        for _ in range(k):
            cand = _apply(space, cand, random_block(space, cand, rng, length))
        if run.known(cand) is None:
            return cand
    for _ in range(1000):
        cand = space.sample(rng)
        if run.known(cand) is None:
            return cand
    return None


class LocalAgent(Agent):
    """Hill climbing / simulated annealing from the best baseline.

    Args:
        seed: random seed (None: fresh entropy).
        granularity: decision units.
        method: ``hill`` (first improvement + random kicks at local optima) or ``anneal``.
        start: ``baselines`` (the best of :func:`~search.base.baseline_assignments`) or
            ``gpu`` (all-GPU only).
        t0: annealing start temperature as a fraction of the start value.
        t1: annealing end temperature as a fraction of the start value.
        kick: ``hill``: the longest random block of a kick, as a fraction of the units.

    Example:
        >>> from placetune.evaluator import Evaluator
        >>> from search import Budget
        >>> r = LocalAgent(seed=0).run(Evaluator("seed-block", mode="pipeline"), Budget(30))
        >>> r.best_value <= r.history[0].value, r.evaluations
        (True, 30)
    """

    name = "local"

    def __init__(
        self,
        *,
        seed: int | None = None,
        granularity: str = "fusion",
        method: str = "hill",
        start: str = "baselines",
        t0: float = 0.02,
        t1: float = 0.001,
        kick: float = 0.25,
    ) -> None:
        super().__init__(seed=seed, granularity=granularity)
        if method not in ("hill", "anneal"):
            raise ValueError(f"method must be 'hill' or 'anneal', not {method!r}")
        if start not in ("baselines", "gpu"):
            raise ValueError(f"start must be 'baselines' or 'gpu', not {start!r}")
        self.method = method
        self.start = start
        in_range("t0", float(t0), 0.0, above=True)  # (t1 / t0) ** frac: a zero start temperature divided by 0
        in_range("t1", float(t1), 0.0, above=True)
        in_range("kick", float(kick), 0.0, 1.0, above=True)  # a fraction of the units
        self.t0 = float(t0)
        self.t1 = float(t1)
        self.kick = float(kick)

    def search(self, evaluator: "Evaluator", budget: Budget) -> SearchResult:
        """Search until the budget is spent."""
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        try:
            self.improve(run)
        except BudgetExhausted:
            pass
        return run.result(method=self.method)

    def improve(self, run: SearchRun, start: list[int] | None = None) -> None:
        """Climb (or anneal) inside an existing run until its budget is spent.

        Args:
            run: the run (its space, budget and bookkeeping are used).
            start: the start assignment (None: the best baseline).

        Raises:
            BudgetExhausted: the budget ran out (the run keeps everything found).
        """
        rng = run.rng(self.seed)
        best = self._start(run)  # the baselines first, whatever the start: the run never ends below them
        current = best if start is None else list(start)
        if current is None:
            return
        if run.known(current) is None:
            run.evaluate(current)
        if self.method == "hill":
            self._hill(run, rng, current)
        else:
            self._anneal(run, rng, current)

    # ----------------------------------------------------------------- start
    def _start(self, run: SearchRun) -> list[int] | None:
        """The best baseline (:meth:`SearchRun.measure_baselines`), or all-GPU with ``start="gpu"``."""
        run.measure_baselines()
        if self.start == "gpu":
            gpu = baseline_assignments(run.space)["all-gpu"]
            return gpu if run.known(gpu) is not None else None
        return None if run.best_assignment is None else list(run.best_assignment)

    # ----------------------------------------------------------------- hill
    def _hill(self, run: SearchRun, rng: np.random.Generator, current: list[int]) -> None:
        space = run.space
        cur_loss = run.loss(run.known(current))
        best, best_loss = list(current), cur_loss
        max_len = max(1, int(self.kick * space.n_units))
        while not run.exhausted:
            improved = False
            for move in moves(space, current, rng):
                cand = _apply(space, current, move)
                loss = run.loss(run.evaluate(cand))
                if loss < cur_loss - 1e-12 * abs(cur_loss):
                    current, cur_loss = cand, loss
                    improved = True
                    break
            if cur_loss < best_loss:
                best, best_loss = list(current), cur_loss
            if improved:
                continue
            # local optimum: kick the best with a random block move (iterated local search)
            cand = _kick(run, best, rng, max_len)
            if cand is None:
                run.notes.append("stopped early: no untried assignment found (space exhausted?)")
                return
            current, cur_loss = cand, run.loss(run.evaluate(cand))

    # ----------------------------------------------------------------- anneal
    def _anneal(self, run: SearchRun, rng: np.random.Generator, current: list[int]) -> None:
        space = run.space
        cur_loss = run.loss(run.known(current))
        scale = abs(cur_loss) if math.isfinite(cur_loss) and cur_loss != 0 else 1.0
        total = run.remaining if run.remaining is not None else 1000
        total = max(total, 1)
        step = 0
        max_len = max(1, int(self.kick * space.n_units))
        stale = 0
        while not run.exhausted:
            frac = min(1.0, step / total)
            temp = scale * self.t0 * (self.t1 / self.t0) ** frac
            if rng.random() < 0.5:
                pool = list(moves(space, current, rng))
                move = pool[int(rng.integers(0, len(pool)))] if pool else random_block(space, current, rng, max_len)
            else:
                move = random_block(space, current, rng, max_len)
            cand = _apply(space, current, move)
            known = run.known(cand) is not None
            loss = run.loss(run.evaluate(cand))
            if not known:
                step += 1
                stale = 0
            else:
                stale += 1
                if stale > 1000:
                    run.notes.append("stopped early: annealing proposes only assignments already tried")
                    return
            delta = loss - cur_loss
            if delta <= 0 or (math.isfinite(delta) and rng.random() < math.exp(-delta / max(temp, 1e-300))):
                current, cur_loss = cand, loss
