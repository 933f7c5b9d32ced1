"""The baselines every study measures first, and which of them it may leave out.

A study's answer is only as honest as what it is compared with: every run (``placetune tune``,
and every built-in agent through :meth:`search.base.SearchRun.measure_baselines`) measures the
baselines first, so no run reports a plan worse than the best baseline it measured.

* one network: all-GPU, all-DLA with GPU fallback (the engine's core; in pipeline mode each
  core) and, in pipeline mode with two cores, the layers split in half over DLA0 and DLA1;
* several networks (a concurrent study): the naive plans, each network wholly on one device
  (:func:`placetune.tuning.concurrent.naive_placements`).

Two kinds are left out: a **twin** (the same plan with DLA0 and DLA1 swapped: the cores are
identical, so it measures the same), and, for the naive plans of a concurrent study, one the
**model rules out**: the uncorrected simulator predicts it more than :data:`RULE_OUT` times
worse than the best naive plan (all-GPU is always measured: every gain is quoted against it).
A plan left out is listed with the reason in the run's summary.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from placetune.errors import PlacementError, StopRequested
from placetune.placement.placement import Placement
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.tuning.concurrent import naive_placements, network_latencies

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.tuning.evaluator_view import EvaluatorView

__all__ = ["Baseline", "BaselinesByName", "RULE_OUT", "baseline_placements", "study_baselines", "measure_study_baselines"]

#: a naive plan of a concurrent study predicted this many times worse than the best one (by the
#: objective's loss ratio: 1.5 = 50 % slower) is not measured; a model error of 50 % would be
#: needed for it to matter
RULE_OUT = 1.5


@dataclass(frozen=True)
class Baseline:
    """One baseline of a study.

    Attributes:
        name: ``all-gpu``, ``all-dla0``, ``split-dla0-dla1`` or a naive label
            (``googlenet:DLA0,resnet50:GPU``).
        label: how a person reads it (``all-DLA0 (+fallback)``).
        placement: the layer -> device map asked for.
        twin: the baseline it equals with DLA0 and DLA1 swapped (not measured), or None.
        predicted_ratio: concurrent studies: its predicted loss over the best naive plan's
            (None: not predicted).
    """

    name: str
    label: str
    placement: Placement
    twin: str | None = None
    predicted_ratio: float | None = None

    @property
    def measured_by_study(self) -> bool:
        """True when every study measures it (not a twin, not ruled out by the model)."""
        return self.twin is None and (self.predicted_ratio is None or self.predicted_ratio <= RULE_OUT)

    @property
    def why_not(self) -> str | None:
        """Why the study does not measure it (None: it does)."""
        if self.twin is not None:
            return f"{self.twin} with DLA0 and DLA1 swapped (identical cores)"
        if self.predicted_ratio is not None and self.predicted_ratio > RULE_OUT:
            how = f"it {self.predicted_ratio:.1f}x worse than" if math.isfinite(self.predicted_ratio) else \
                "that it cannot run or misses a constraint, unlike"
            return f"the uncorrected simulator predicts {how} the best naive plan (not measured above {RULE_OUT:g}x)"
        return None



class BaselinesByName(dict):
    """:meth:`Evaluator.baselines <placetune.tuning.evaluator.Evaluator.baselines>`' dict: keys as printed
    (``all-GPU``), also found by the lower-case names older placetune used (``all-gpu``, ``all-dla0``,
    ``split-dla0-dla1``)."""

    def _key(self, key: Any) -> Any:
        if isinstance(key, str) and not dict.__contains__(self, key):
            return next((k for k in self if k.lower() == key.lower()), key)
        return key

    def __getitem__(self, key: Any) -> Any:
        return dict.__getitem__(self, self._key(key))

    def __contains__(self, key: Any) -> bool:
        return dict.__contains__(self, self._key(key))

    def get(self, key: Any, default: Any = None) -> Any:
        return dict.get(self, self._key(key), default)


def _canonical(p: Placement) -> tuple[str, ...]:
    """The placement's devices with the DLA cores named in order of first use."""
    order: dict[str, str] = {}
    out = []
    for d in p.as_dict().values():
        if d != "GPU" and d not in order:
            order[d] = f"DLA{len(order)}"
        out.append(order.get(d, d))
    return tuple(out)


def baseline_placements(ev: "EvaluatorView") -> list[tuple[str, str, Placement]]:
    """A one-network study's baselines as ``(name, label, placement)``, all-GPU first: all-DLA on the
    engine's core (each core in pipeline mode) and, in pipeline mode with two cores, the split."""
    model, s = ev.model, ev.settings
    out = [("all-gpu", "all-GPU", Placement.all_gpu(model))]
    cores = list(range(ev.platform.dla_count))
    if s.mode != "pipeline":  # one engine runs on one core
        cores = cores[:1] if s.dla_core is None else [s.dla_core]
    if s.mode == "replicas":  # the placement is what every DLA replica runs on its own core
        out += [(f"all-dla{c}", "DLA replicas all-DLA (+fallback)", Placement.all_dla(model, c)) for c in cores]
    else:
        out += [(f"all-dla{c}", f"all-DLA{c} (+fallback)", Placement.all_dla(model, c)) for c in cores]
    if s.mode == "pipeline" and ev.platform.dla_count > 1:
        out.append(("split-dla0-dla1", "split DLA0|DLA1", Placement.split_dla(model)))
    return out


def _predicted(ev: "EvaluatorView", placements: list[Placement]) -> list[tuple[float, float | None]]:
    """The uncorrected simulator's (loss, value) of placements (``(inf, None)`` where infeasible)."""
    sim = SimulatedJetson(timeline=bool(ev.networks))  # each network's latency comes from the timeline
    settings = ev.settings.replace(noise=0.0)
    out: list[tuple[float, float | None]] = []
    for p in placements:
        try:
            m = sim.measure(ev.realise(p), ev.platform, settings)
        except PlacementError:
            out.append((math.inf, None))
            continue
        if ev.networks and m.ok:
            m.extra["network_latency_ms"] = network_latencies(ev.model, m, ev.networks)
        out.append((ev.objective.loss(m), ev.objective.value(m)))
    return out


def study_baselines(ev: "EvaluatorView") -> list[Baseline]:
    """The study's baselines in the order they are measured, all-GPU first (see the module docstring)."""
    if ev.networks:
        rows = [("all-gpu" if set(p.as_dict().values()) == {"GPU"} else label, label, p)
                for label, p in naive_placements(ev.model, ev.networks, ev.platform.dla_count).items()]
        rows.sort(key=lambda r: r[0] != "all-gpu")
    else:
        rows = baseline_placements(ev)
    seen: dict[tuple[str, ...], str] = {}
    twins: list[str | None] = []
    for name, label, p in rows:
        c = _canonical(p)
        twins.append(seen.get(c))
        seen.setdefault(c, label)
    ratios: list[float | None] = [None] * len(rows)
    if ev.networks:
        pred = _predicted(ev, [p for _, _, p in rows])
        best = min(pred, key=lambda t: t[0])[1]
        for i, ((loss, value), (name, _, _)) in enumerate(zip(pred, rows)):
            if name != "all-gpu" and best is not None:
                ratio = ev.objective.gain(best, value) if value is not None and math.isfinite(loss) else math.inf
                ratios[i] = ratio if ratio == ratio else math.inf  # nan (a zero value): ruled out
    return [Baseline(name, label, p, twin, ratio) for (name, label, p), twin, ratio in zip(rows, twins, ratios)]


def _measured_by_another_worker(ev: "EvaluatorView", placement: Placement) -> "Measurement | None":
    """A fleet worker's baseline that another worker of the study measured (or is measuring: its claim is
    waited for), read back without a request of its own: the fleet's study holds each baseline once, as a
    single run's does. None: this worker holds the claim and measures it (or it failed to realise, or another
    study's measurement answers it, a cache hit this study records as a single run would)."""
    key = ev.realised_key(placement)
    if key.startswith("infeasible:"):
        return None
    if ev.claims.acquire(ev, key) is None:  # ours: evaluate() finds the claim its own
        return None
    if key not in {k for k, _ in ev.store.request_keys(ev.study_name)}:
        return None
    return ev.peek(placement)


def measure_study_baselines(ev: "EvaluatorView", may_measure: Callable[[], bool]
                            ) -> list[tuple[Baseline, str | None, "Measurement | None"]]:
    """Measure the study's baselines that it lacks, in order, while ``may_measure()`` (the budget)
    allows; read back those it holds (no request is recorded for them).

    Returns:
        ``(baseline, why it is not measured or None, measurement or None)`` per baseline, all-GPU
        first.
    """
    held = {key for key, _ in ev.store.request_keys(ev.study_name)}
    out: list[tuple[Baseline, str | None, "Measurement | None"]] = []
    for b in study_baselines(ev):
        m = ev.peek(b.placement) if ev.realised_key(b.placement) in held else None
        if m is None and b.measured_by_study and ev.claims is not None:
            m = _measured_by_another_worker(ev, b.placement)
        # an earlier run's timeout is built again (its limit may have been raised since; the evaluator
        # measures it once per run and replaces the row): a night must not go on without its baseline
        if (m is None or m.status == "timeout") and b.measured_by_study and may_measure():
            try:
                m = ev.baseline() if b.name == "all-gpu" else ev.evaluate(b.placement, agent="baseline")
            except StopRequested:  # Ctrl-C or a lost output: what was measured is stored; the run ends
                return out
        why = b.why_not
        if m is None and why is None:
            why = "the budget ran out first"
        out.append((b, why, m))
    return out
