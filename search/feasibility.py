"""Which plans fail to build: a conservative rule set the guided agent learns from its failed builds.

A DLA compiler rejects some loadables (too many layers in one, a tensor too large for its
buffers, an op it cannot take in some context). Such a build costs its time and tells nothing
about speed, but it does tell where the device's limits are. Every measured plan is described by
features of its DLA segments (the plan's segments on a DLA core, cut as the builder cuts them:
the loadables it asks for):

* ``layers``: the longest DLA segment (a loadable: the plan's segments as the builder cuts them), in layers;
* ``tensor``: the largest output tensor of a layer on a DLA (bytes);
* ``op:<type>``: 1 when a layer of that ONNX op type runs on a DLA.

A plan that built gives every feature a value known to be safe (``ok``: the largest value among
plans that built); a failed plan whose feature exceeds that is *explained* by it. Each failure
is put down to one cause: the continuous features first (a length or size limit is the usual
reason a DLA compiler rejects a loadable, while an op it cannot run at all falls back to the GPU
before any build), and of a length and a size that both explain it, the one it exceeds by the
larger factor (:func:`learn_rules`), unless the compiler's reason names the cause
(:func:`named_cause`: its last clause speaks of too many layers, or of a tensor, buffer or memory),
which it then is; failures that neither explains are covered by the fewest op
types (greedy). Each cause gets a rule with the threshold half-way between the safe value and the
smallest failing value put down to it (geometric mean: the features are sizes,
so no scale is assumed). A plan is predicted to fail when any rule holds for it. A failure that
no feature explains is kept and counted; only its own realisation is avoided (the agent never
builds a realisation twice unless it re-measures).

The rules are conservative in the sense that they never block a plan like one that built: a
threshold always lies above every value seen in a plan that built.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any
import re

import numpy as np

from placetune.measurement import Measurement
from placetune.backends.simulate.costs import DEVICE_CODE
from placetune.placement.placement import producer_arrays

__all__ = ["Feasibility", "Rule", "learn_rules", "named_cause"]

#: statuses that say the build was rejected (a timing failure says nothing about the loadables)
_BUILD_FAILURES = ("build_failed",)
#: the continuous features, tried first (see the module docstring)
_CONTINUOUS = ("layers", "tensor")


class Rule:
    """``feature >= threshold`` predicts a failed build."""

    def __init__(self, feature: str, threshold: float, explains: int, low: float | None = None) -> None:
        self.feature, self.threshold, self.explains = feature, threshold, explains
        self.low = low  # the smallest failing value put down to the feature (None: not given)

    def __repr__(self) -> str:
        t = f"{self.threshold / 1e6:.2f} MB" if self.feature == "tensor" else f"{self.threshold:.3g}"
        what = {"layers": "a DLA loadable of", "tensor": "a DLA tensor of"}.get(self.feature, self.feature + " on a DLA,")
        return f"{what} >= {t}" if self.feature in _CONTINUOUS else what


class Feasibility:
    """The run's failed builds and the rules learned from them.

    Args:
        model: the network (its layers in topological order).
        space: the run's unit space (an assignment's unit -> device index).
        pipeline: whether the plans run as a pipeline (their segments are cut as such).
    """

    def __init__(self, model: Any, space: Any, pipeline: bool = False) -> None:
        layers = model.layers
        self.producers, self.pipeline = producer_arrays(model), pipeline
        index = {n: i for i, n in enumerate(model.names)}
        self.unit_of = np.full(len(layers), space.n_units, dtype=np.intp)
        for u in space.units:
            for n in u.layers:
                self.unit_of[index[n]] = u.index
        self.codes = np.array([DEVICE_CODE[d] for d in space.devices] + [0], dtype=np.int8)  # + "no unit": GPU
        self.bytes_out = np.array([float(layer.bytes_out or 0) for layer in layers])
        ops = [str(layer.op_type) for layer in layers]
        self.op_names = sorted(set(ops))
        self.op_index = np.array([self.op_names.index(o) for o in ops], dtype=np.intp)
        self.ok_max: dict[str, float] = {}
        self.failed: list[dict[str, float]] = []
        self.causes: list[str | None] = []  # the cause each failure's reason names (None: it names none)
        self.reasons: Counter[str] = Counter()
        self.rules: list[Rule] = []
        self.unexplained = 0
        self._memo: dict[tuple[int, ...], bool] = {}

    # ------------------------------------------------------------------ features
    def features(self, assignment: Sequence[int]) -> dict[str, float]:
        """The plan's DLA-run features (see the module docstring); empty when nothing runs on a DLA."""
        codes = self.codes[np.append(np.asarray(assignment, dtype=np.intp), len(self.codes) - 1)[self.unit_of]]
        on = codes > 0
        if not on.any():
            return {}
        # the plan's segments as the builder cuts them (what a DLA loadable holds): parallel
        # branches on one DLA join one segment, so runs in the layers' order would undercount
        seg = self.producers.segments(codes, pipeline=self.pipeline)
        lengths = np.bincount(seg.seg_of, minlength=len(seg.device))
        dla = np.asarray(seg.device) > 0
        out = {"layers": float(lengths[dla].max()), "tensor": float(self.bytes_out[on].max())}
        for k in np.unique(self.op_index[on]).tolist():
            out["op:" + self.op_names[k]] = 1.0
        return out

    # ------------------------------------------------------------------ learning
    def observe(self, assignment: Sequence[int], m: Measurement) -> None:
        """Learn from one measurement: a build that succeeded widens what is known to be safe, a
        rejected build is a failure to explain."""
        if m.ok:
            for f, v in self.features(assignment).items():
                if v > self.ok_max.get(f, 0.0):
                    self.ok_max[f] = v
        elif m.status in _BUILD_FAILURES:
            self.failed.append(self.features(assignment))
            self.reasons[_reason(m.reason)] += 1
            self.causes.append(named_cause(m.reason))
        else:
            return
        self._learn()

    def _learn(self) -> None:
        self.rules, self.unexplained = learn_rules(self.ok_max, self.failed, self.causes)
        self._memo.clear()

    # ------------------------------------------------------------------ prediction
    def fails(self, assignment: Sequence[int]) -> bool:
        """True when a learned rule predicts the plan's build to fail."""
        if not self.rules:
            return False
        key = tuple(int(a) for a in assignment)
        hit = self._memo.get(key)
        if hit is None:
            x = self.features(key)
            hit = any(x.get(r.feature, 0.0) >= r.threshold for r in self.rules)
            if len(self._memo) > 200_000:
                self._memo.clear()
            self._memo[key] = hit
        return hit

    def gap(self) -> int | None:
        """The one loadable length the learned length rule leaves untested, or None.

        Lengths are integers: where the longest loadable that built has ``s`` layers and the
        shortest failure put down to length has ``s + 2``, the rule's threshold (the geometric mean,
        ``sqrt(s (s + 2)) < s + 1``) blocks ``s + 1``, a length nobody has built, for the rest of
        the run. It is the one gap of the length rule that a single build closes for good: built,
        the safe length becomes ``s + 1``; failed, the shortest failure does; either way no
        untested length is left between them (the safe value only rises, the failure only
        falls). A wider gap is not answered by one build and is left to the rule as it is.
        """
        safe = self.ok_max.get("layers", 0.0)
        for r in self.rules:
            if r.feature == "layers" and r.low is not None and safe > 0 and r.low - safe == 2:
                return int(safe) + 1
        return None

    def fails_at(self, assignment: Sequence[int], length: int) -> bool:
        """True when a learned rule other than the length rule predicts the plan to fail, or its
        longest loadable is longer than ``length`` (the rules with the length rule moved to just
        above ``length``)."""
        x = self.features(assignment)
        return x.get("layers", 0.0) > length or any(x.get(r.feature, 0.0) >= r.threshold
                                                    for r in self.rules if r.feature != "layers")

    def tests_gap(self, assignment: Sequence[int], length: int) -> bool:
        """True when a build of the plan tests the length ``length`` and nothing else: its longest
        loadable has exactly that many layers, no other rule predicts it to fail, and no other
        length or size in it goes beyond what built (so a failure is put down to its length)."""
        x = self.features(assignment)
        if x.get("layers", 0.0) != length:
            return False
        if any(x.get(f, 0.0) > self.ok_max.get(f, 0.0) for f in _CONTINUOUS if f != "layers"):
            return False
        return not any(x.get(r.feature, 0.0) >= r.threshold for r in self.rules if r.feature != "layers")

    def note(self, builds: int) -> str | None:
        """One line for the run's notes: how many builds failed, why, and what was learned."""
        n = len(self.failed)
        if not n:
            return None
        why = "; ".join(f"{k} x{c}" if c > 1 else k for k, c in self.reasons.most_common(3))
        learned = ", ".join(repr(r) for r in self.rules) or "no rule"
        more = f"; {self.unexplained} unexplained by any rule" if self.unexplained else ""
        return (f"failed builds: {n} of {builds} ({why}); learned to avoid: {learned}{more}")


def learn_rules(ok_max: dict[str, float], failed: Sequence[dict[str, float]],
                causes: Sequence[str | None] | None = None) -> tuple[list[Rule], int]:
    """The rules that explain the failed builds (``failed``: their features) without blocking what
    built (``ok_max``: each feature's largest value among plans that built), and how many failures
    no feature explains.

    A failure is *explained* by a feature whose value exceeds the largest that built. A failure
    that a length and a size both explain is put down to the one it exceeds by the larger factor
    (log of value over safe value: the features are sizes, so no scale is assumed): a loadable of
    29 layers where 10 built, holding a tensor of 0.4 MB where 0.2 MB built, is taken to be too
    long, not too large. Covering it with the feature that happens to explain the most failures
    instead would lower that feature's threshold to the nearest failure of another cause (a size
    rule at 0.28 MB learned from long loadables, blocking short ones that build with 1 MB).
    A failure whose reason names its cause (``causes``: :func:`named_cause`, a length or a size) is
    put down to that feature when its value exceeds the safe one: the compiler knows, and before
    anything built on a DLA (nothing safe: every feature infinitely beyond) the factors cannot tell.
    Each continuous feature with a failure put down to it gets one rule, its threshold half-way
    (geometric mean) between the safe value and the smallest failing value put down to it. A
    failure that neither a length nor a size explains is covered by op types (the fewest that
    explain them all, greedily).
    """
    rules: list[Rule] = []
    cause: dict[str, list[float]] = {}
    left: list[dict[str, float]] = []
    for i, x in enumerate(failed):
        beyond = [f for f in _CONTINUOUS if x.get(f, 0.0) > ok_max.get(f, 0.0)]
        if not beyond:
            left.append(x)
            continue
        named = causes[i] if causes is not None and i < len(causes) else None
        if named in beyond:
            cause.setdefault(named, []).append(x[named])
            continue
        # the largest factor beyond what built; a feature nothing built with is infinitely beyond;
        # ties go to the first of _CONTINUOUS (length: the usual reason)
        f = max(beyond, key=lambda g: (_beyond(x[g], ok_max.get(g, 0.0)), -_CONTINUOUS.index(g)))
        cause.setdefault(f, []).append(x[f])
    for f in _CONTINUOUS:
        if f in cause:
            rules.append(_rule(f, ok_max.get(f, 0.0), min(cause[f]), len(cause[f])))
    while left:  # op types: greedy cover of the failures no length or size explains
        best: tuple[int, str] | None = None
        for f in sorted({f for x in left for f in x if f not in _CONTINUOUS}):
            n = sum(1 for x in left if x.get(f, 0.0) > ok_max.get(f, 0.0))
            if n and (best is None or n > best[0]):
                best = (n, f)
        if best is None:
            break
        n, f = best
        hit = [x for x in left if x.get(f, 0.0) > ok_max.get(f, 0.0)]
        rules.append(_rule(f, ok_max.get(f, 0.0), min(x[f] for x in hit), n))
        left = [x for x in left if not x.get(f, 0.0) > ok_max.get(f, 0.0)]
    return rules, len(left)


#: words of a compiler's reason (its last clause) that name the cause: a loadable too long, a tensor too large
_NAMES = {"layers": re.compile(r"\b(too many (layers|nodes|operations)|too long|layer count)\b", re.I),
          "tensor": re.compile(r"\b(tensor|buffers?|memory|bytes|[kmg]i?b)\b", re.I)}


def named_cause(text: str | None) -> str | None:
    """The feature a failed build's reason names as its cause (``layers`` or ``tensor``), read from its
    last clause (:func:`_reason`: a compiler names the layers first, the cause last), or None when
    it names neither or both."""
    if not text:
        return None
    tail = _reason(text)
    hits = [f for f, pattern in _NAMES.items() if pattern.search(tail)]
    return hits[0] if len(hits) == 1 else None


def _beyond(value: float, safe: float) -> float:
    return math.inf if safe <= 0 else math.log(value / safe)


def _rule(feature: str, safe: float, low: float, explains: int) -> Rule:
    """``feature >= threshold``, half-way (geometric mean) between the safe value and the lowest
    failing one; never at or below the safe value."""
    threshold = math.sqrt(safe * low) if safe > 0 else (0.5 * low if feature in _CONTINUOUS else 0.5)
    return Rule(feature, max(threshold, safe * (1 + 1e-9)), explains, low)


def _reason(text: str | None) -> str:
    """A failure's reason, short: its last clause (a compiler names the layers first, the cause
    last), numbers as N, so that failures of one cause count together."""
    t = (text or "no reason given").strip().splitlines()[0]
    tail = t.rsplit(": ", 1)[-1].strip()
    return re.sub(r"\d+(\.\d+)?", "N", tail if len(tail) >= 12 else t)[:80]
