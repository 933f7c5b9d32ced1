"""Published Jetson measurements (``placetune/data/published.csv``) as simulated cases.

Each row of the dataset (measurements other people published, each with its source, its
conditions and a ``fit`` / ``validate`` split fixed by a rule before any simulated value of it
was seen, see ``placetune/data/published.md``) is turned into the case it describes: a
platform, a zoo network, a precision, the batch of each engine, what ran where (``gpu``, a DLA
with or without GPU fallback, named modules on a DLA and the rest on the GPU, both DLAs as
replicas, GPU + both DLAs as replicas, one engine measured while copies run on other devices),
a power mode and a metric. :func:`simulate_case` runs it on the simulated Jetson;
:func:`evaluate` gives the relative error of every case. Rows the simulator cannot express
(no zoo network, a DRIVE platform, a multi-model run, a power ratio) are kept as
:class:`PublishedCase` with ``skip`` saying why. Every simulated figure is simulated, never
measured.
"""

from __future__ import annotations

import csv
import re
import statistics
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence
import json
from placetune.backends.simulate.costs import FIT_FILE
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.hardware.platforms import get_platform, platform_names
from placetune.hardware.power_modes import modes_of
from placetune.model import zoo
from placetune.model.model import Model
from placetune.placement.placement import Placement
from placetune.placement.realise import Realisation, realise
from placetune.settings import Settings

if TYPE_CHECKING:
    from placetune.model.model import Model

__all__ = ["PUBLISHED_CSV", "PublishedRow", "PublishedCase", "CaseResult", "load_published", "published_cases",
           "simulate_case", "evaluate", "error_summary", "batch_bucket", "BATCH_BUCKETS", "conflicts",
           "CONFLICT_FACTOR", "HARNESS_CALL_US", "HARNESS_PRIOR_US"]

#: The dataset shipped with the package.
PUBLISHED_CSV = Path(__file__).resolve().parents[1] / "data" / "published.csv"
_PLACEMENTS = {"gpu": "gpu", "dla0": "dla-only", "dla1": "dla-only", "dla0+fallback": "dla",
               "dla1+fallback": "dla", "2dla-replicas": "2dla-replicas", "gpu+2dla-replicas": "gpu+2dla-replicas"}
_METRICS = ("latency_ms", "throughput_fps", "throughput_qps")
_ENGINE = {"gpu": "GPU", "dla0": "DLA0", "dla1": "DLA1"}
_MIXED = re.compile(r"gpu\+dla([01])\(([^()]+)\)")
#: Prior host time per inference call of a harness, microseconds: a ``python`` harness cannot call
#: an engine faster than this, whatever the engine's time (torch2trt: resnet18 and mobilenet_v2
#: run at the same 722-723 img/s on AGX Xavier, 1.38 ms per call).
HARNESS_PRIOR_US = {"python": 1300.0, "native": 0.0}


def _stored_harness() -> dict[str, float]:
    try:
        return dict(json.loads(FIT_FILE.read_text()).get("values", {}).get("harness", {}))
    except FileNotFoundError:
        return {}


#: Host time per call of each harness, microseconds: the prior with the stored fit's values
#: (calibration/builtin.py fits it with the simulator's constants).
HARNESS_CALL_US = {**HARNESS_PRIOR_US, **_stored_harness()}
#: Batch buckets of the reports: (label, smallest batch, largest batch).
BATCH_BUCKETS = (("1", 1, 1), ("2-7", 2, 7), ("8-31", 8, 31), (">=32", 32, 1 << 30))


@dataclass(frozen=True)
class PublishedRow:
    """One published measurement (the CSV columns that matter for simulation; ``raw`` has all)."""

    id: str
    platform: str
    network: str
    input_shape: str
    precision: str
    batch: str
    placement: str
    power_mode: str
    metric: str
    value: float
    unit: str
    source: str
    split: str
    notes: str
    release: int = 1
    why: str = ""
    harness: str = "native"
    raw: dict = field(default_factory=dict, hash=False, compare=False, repr=False)


@dataclass(frozen=True)
class PublishedCase:
    """A published row as a simulated case.

    Attributes:
        row: the published row.
        kind: ``gpu`` (all-GPU engine), ``dla`` (all-DLA realised with GPU fallback),
            ``dla-only`` (every layer on one DLA core, as published without fallback),
            ``mixed`` (the modules in ``scopes`` on a DLA core, the rest on the GPU, one engine),
            ``2dla-replicas`` (one DLA-only engine per core at once), ``gpu+2dla-replicas``
            (an all-GPU engine and one DLA (+fallback) engine per core at once) or ``concurrent``
            (one engine per device of ``engines`` at once, the figure of ``engines[0]``); empty
            when skipped.
        batches: batch per device (``GPU``, ``DLA``).
        scopes: ``mixed``: the module scopes placed on the DLA core.
        engines: ``concurrent``: the devices that run a copy of the network, measured one first.
        conflict: why the row contradicts other rows of the same conditions (:func:`conflicts`);
            the fit leaves it out.
        power_mode: the nvpmodel mode simulated (``unstated`` -> ``MAXN``).
        softmax: whether the zoo network keeps its softmax head (DLA-only runs leave it out,
            as the published engines did).
        skip: why the simulator cannot express the row (None: it can).
    """

    row: PublishedRow
    kind: str = ""
    batches: tuple = ()
    power_mode: str = "MAXN"
    softmax: bool | None = None
    skip: str | None = None
    scopes: tuple = ()
    engines: tuple = ()
    conflict: str | None = None

    @property
    def batch(self) -> dict[str, int]:
        """Batch per device kind."""
        return dict(self.batches)

    @property
    def device_kind(self) -> str:
        """What the published figure measures: ``gpu``, ``dla``, ``gpu+dla`` (one engine on both, or
        engines on both at once) or ``dla+dla`` (both DLA cores); from the placement when skipped."""
        if self.kind:
            kind, engines = self.kind, self.engines
        else:
            place = self.row.placement
            first, _, others = place.partition("|concurrent:")
            engines = tuple(e.upper() for e in [first, *others.split(",")] if e) if others else ()
            kind = ("concurrent" if others else _PLACEMENTS.get(place, "mixed" if _MIXED.fullmatch(place) else "ratio"))
        if kind == "gpu":
            return "gpu"
        if kind in ("dla", "dla-only"):
            return "dla"
        if kind == "2dla-replicas" or (kind == "concurrent" and not any(e.startswith("GPU") for e in engines)):
            return "dla+dla"
        return "gpu+dla"

    @property
    def family(self) -> str:
        """The network family: the zoo name without its depth (``resnet50`` -> ``resnet``)."""
        return re.sub(r"\d+$", "", self.row.network.replace("-", "")) or self.row.network

    @property
    def bucket(self) -> str:
        """The batch bucket of the engine whose figure dominates (the GPU engine when one runs)."""
        b = self.batch or _batches(self.row.batch) or {}
        dla_only = self.device_kind in ("dla", "dla+dla")
        return batch_bucket(b.get("DLA", b.get("GPU")) if dla_only else b.get("GPU"))


@dataclass(frozen=True)
class CaseResult:
    """A simulated case next to its published value (``error`` = simulated / published - 1)."""

    case: PublishedCase
    simulated: float

    @property
    def error(self) -> float:
        return self.simulated / self.case.row.value - 1.0


def batch_bucket(batch: int | None) -> str:
    """The label of the :data:`BATCH_BUCKETS` entry ``batch`` falls in (``"?"`` when unknown)."""
    for label, lo, hi in BATCH_BUCKETS:
        if batch is not None and lo <= batch <= hi:
            return label
    return "?"


def load_published(path: str | Path | None = None) -> list[PublishedRow]:
    """The rows of the published dataset (``path`` defaults to the packaged CSV)."""
    rows = []
    with open(path or PUBLISHED_CSV, newline="") as f:
        for r in csv.DictReader(f):
            rows.append(PublishedRow(
                id=r["id"], platform=r["platform"], network=r["network"], input_shape=r["input_shape"],
                precision=r["precision"], batch=r["batch"], placement=r["placement"], power_mode=r["power_mode"],
                metric=r["metric"], value=float(r["value"]), unit=r["unit"], source=r["source"], split=r["split"],
                notes=r["notes"], release=int(r.get("release") or 1), why=r.get("why", ""),
                harness=r.get("harness") or "native", raw=dict(r)))
    return rows


def _batches(text: str) -> dict[str, int] | None:
    text = text.strip()
    if not text:
        return None
    if ":" not in text:
        return {"GPU": int(text), "DLA": int(text)}
    out = {}
    for part in text.split(";"):
        k, _, v = part.partition(":")
        out[k.strip().upper()] = int(v)
    return out


def _case(row: PublishedRow) -> PublishedCase:
    def skip(why: str) -> PublishedCase:
        return PublishedCase(row, skip=why)

    if row.platform not in platform_names():
        return skip(f"platform {row.platform} has no simulated profile (not a Jetson)")
    if row.network not in zoo.names():
        return skip(f"network {row.network} is not in the zoo")
    if row.metric not in _METRICS:
        return skip(f"metric {row.metric} ({row.placement}): a power ratio, the power model is not calibrated here")
    placement, scopes, engines = row.placement, (), ()
    mixed = _MIXED.fullmatch(placement)
    if mixed:
        placement, scopes = f"dla{mixed.group(1)}+fallback", tuple(s.strip() for s in mixed.group(2).split(","))
    elif "|concurrent:" in placement:
        first, _, others = placement.partition("|concurrent:")
        names = [first, *others.split(",")]
        if any(n not in _ENGINE for n in names) or len(set(names)) != len(names):
            return skip(f"placement {row.placement}: two engines on one device (not expressed)")
        engines = tuple(_ENGINE[n] for n in names)
    elif placement not in _PLACEMENTS:
        return skip(f"placement {row.placement}: a run the loader does not express")
    if row.input_shape:
        shape = "x".join(str(d) for d in _model(row.network, 1, None).inputs[0].shape[1:])
        if shape != row.input_shape:
            return skip(f"input {row.input_shape} differs from the zoo network's {shape}")
    batches = _batches(row.batch)
    if batches is None:
        return skip("batch not stated")
    kind = "mixed" if scopes else "concurrent" if engines else _PLACEMENTS[placement]
    if engines and len({b for k, b in batches.items()}) > 1:
        return skip("concurrent engines with different batches")
    if row.power_mode.startswith("clocks:"):
        return skip("clocks given instead of an nvpmodel mode")
    mode = "MAXN" if row.power_mode == "unstated" else row.power_mode
    modes = modes_of(row.platform, mode)
    if mode != "MAXN" and (modes is None or modes.mode(mode) is None):
        known = ", ".join(modes.names) if modes is not None else "none transcribed"
        return skip(f"power mode {row.power_mode} is not one of {row.platform}'s nvpmodel modes ({known})")
    # published DLA-only engines have no softmax / TopK head (DLA-SW cut the network, seed 003 used *_noprob)
    softmax = False if kind in ("dla-only", "2dla-replicas") else None
    return PublishedCase(row, kind=kind, batches=tuple(sorted(batches.items())), power_mode=mode, softmax=softmax,
                         scopes=scopes, engines=engines)


#: Sources whose engines that run at the same time are separate processes (one CUDA context each,
#: so their GPU work is time-sliced: ``SimulatedJetson(separate_processes=True)``): torch2trt's DLA
#: benchmark runs one Python process per engine (the rows' notes), jetson_benchmarks one trtexec per
#: engine (its README's figures and the runs its issues report), the DLA-SW README one trtexec per
#: DLA core, the quantization guide's concurrent runs one trtexec per engine (its ``conc_*.json``).
#: Every other source's concurrent engines are
#: one process (MLPerf's LWIS harness runs the GPU and both DLA engines in one process).
SEPARATE_PROCESS_SOURCES = frozenset({"torch2trt-dla-xaviernx", "jetson_benchmarks", "jetson_benchmarks-issue10",
                                      "jetson_benchmarks-issue21", "dla-sw", "dla-sw-issue29", "quant-guide-orin"})


#: A row is in conflict when its value is more than this factor off the median of at least two
#: other rows measured under the same conditions (a property of the data, not of the simulator).
CONFLICT_FACTOR = 1.3
_CONDITIONS = ("platform", "network", "precision", "batch", "placement", "metric", "harness", "power_mode")


def conflicts(rows: Sequence[PublishedRow]) -> dict[str, str]:
    """Row id -> why, for rows that disagree with the other rows of the same conditions by more
    than :data:`CONFLICT_FACTOR` (their median; three or more rows). No model fits both, so the
    fit leaves such rows out and the reports list them apart."""
    groups: dict[tuple, list[PublishedRow]] = {}
    for r in rows:
        groups.setdefault(tuple(getattr(r, k) for k in _CONDITIONS), []).append(r)
    out = {}
    for group in groups.values():
        if len(group) < 3:
            continue
        mid = statistics.median(r.value for r in group)
        for r in group:
            ratio = r.value / mid
            if max(ratio, 1 / ratio) > CONFLICT_FACTOR:
                others = ", ".join(o.id for o in group if o is not r)
                out[r.id] = f"{ratio:.2f}x the median of the rows with its conditions ({others})"
    return out


def published_cases(rows: Sequence[PublishedRow] | None = None) -> list[PublishedCase]:
    """Every published row as a :class:`PublishedCase` (skipped ones carry ``skip``, rows that
    contradict the other rows of their conditions ``conflict``)."""
    rows = load_published() if rows is None else rows
    bad = conflicts(rows)
    return [replace(c, conflict=bad.get(c.row.id)) for c in (_case(r) for r in rows)]


@lru_cache(maxsize=64)
def _model(name: str, batch: int, softmax: bool | None) -> "Model":
    if softmax is None:
        return Model.load(name, batch=batch)
    return Model.load(zoo.build(name, batch=batch, softmax=softmax), name=f"{name}{'' if softmax else '_noprob'}")


@lru_cache(maxsize=256)
def _realised(m: "Model", platform, precision: str, where: str, mode: str = "engine", scopes: tuple = ()):
    """The realised placement of a case (cached: it does not depend on the simulator's constants)."""
    if scopes:
        return realise(Placement.from_scopes(m, dict.fromkeys(scopes, "DLA0")), platform, precision=precision, mode=mode)
    if where == "gpu":
        return realise(Placement.all_gpu(m), platform, precision=precision, mode=mode)
    if where == "dla":
        return realise(Placement.all_dla(m), platform, precision=precision, mode=mode)
    p = Placement.all_dla(m)  # every layer on DLA0 as the published (no-fallback) engine had it
    return Realisation(p, p, {}, 0, {"DLA0": 1, "DLA1": 0}, ["published: every layer on the DLA"])


def simulate_case(case: PublishedCase, backend: Any = None) -> float:
    """The simulated figure of ``case`` in the row's metric (ms, samples/s or batches/s).

    Args:
        case: an expressible case (``case.skip`` is None).
        backend: a :class:`~placetune.backends.simulate.simulator.SimulatedJetson` (default: a
            nominal one without timeline). Noise is off: the figure is the model's central value.

    Raises:
        ValueError: the case is skipped. RuntimeError: the simulator rejected it.
    """
    if case.skip:
        raise ValueError(f"{case.row.id}: {case.skip}")
    several = case.kind in ("concurrent", "2dla-replicas", "gpu+2dla-replicas")
    sim = backend or SimulatedJetson(
        timeline=False, separate_processes=several and case.row.source in SEPARATE_PROCESS_SOURCES)
    platform = get_platform(case.row.platform)
    prec, b = case.row.precision, case.batch
    base = dict(precision=prec, iterations=1, noise=0.0, power_mode=case.power_mode)
    if case.kind in ("gpu", "dla", "dla-only", "mixed"):
        m = _model(case.row.network, b["GPU"], case.softmax)
        where = "dla" if case.kind == "mixed" else case.kind
        meas = sim.measure(_realised(m, platform, prec, where, scopes=case.scopes), platform, Settings(**base))
    elif case.kind == "concurrent":
        m = _model(case.row.network, b["GPU"], case.softmax)
        reps = {d: b["GPU"] for d in case.engines}
        meas = sim.measure(_realised(m, platform, prec, "dla", "replicas"), platform,
                           Settings(mode="replicas", replicas=reps, **base))
        if not meas.ok:
            raise RuntimeError(f"{case.row.id}: {meas.reason}")
        mine = next(x for x in meas.extra["replicas"] if x["device"] == case.engines[0])
        return _figure(case, float(mine["latency_ms"]), b["GPU"])
    else:
        m = _model(case.row.network, b["DLA"], case.softmax)
        reps = {"DLA0": b["DLA"], "DLA1": b["DLA"]}
        if case.kind == "gpu+2dla-replicas":
            reps = {"GPU": b["GPU"], **reps}
        where = "dla-only" if case.kind == "2dla-replicas" else "dla"
        meas = sim.measure(_realised(m, platform, prec, where, "replicas"), platform,
                           Settings(mode="replicas", replicas=reps, **base))
    if not meas.ok:
        raise RuntimeError(f"{case.row.id}: {meas.reason}")
    if case.kind in ("gpu", "dla", "dla-only", "mixed"):
        return _figure(case, float(meas.latency_ms["median"]), b["GPU"])
    if case.row.metric == "latency_ms":
        return float(meas.latency_ms["median"])
    if case.row.metric == "throughput_qps":
        return 1000.0 / float(meas.latency_ms["median"])
    return float(meas.throughput_fps)


def _figure(case: PublishedCase, ms: float, batch: int) -> float:
    """The row's metric for one engine taking ``ms`` per call of ``batch`` samples, its harness's
    host time per call being the floor."""
    ms = max(ms, HARNESS_CALL_US.get(case.row.harness, 0.0) * 1e-3)
    if case.row.metric == "latency_ms":
        return ms
    return 1000.0 / ms * (1 if case.row.metric == "throughput_qps" else batch)


def evaluate(cases: Sequence[PublishedCase] | None = None, backend: Any = None,
             split: str | None = None) -> list[CaseResult]:
    """Simulate every expressible case (of ``split`` when given): ``[CaseResult]``."""
    cases = published_cases() if cases is None else cases
    return [CaseResult(c, simulate_case(c, backend)) for c in cases
            if not c.skip and (split is None or c.row.split == split)]


def error_summary(results: Sequence[CaseResult]) -> dict[str, float]:
    """``{"n", "median", "max", "mean"}`` of |error| (fractions; zeros when empty)."""
    errs = [abs(r.error) for r in results]
    if not errs:
        return {"n": 0, "median": 0.0, "max": 0.0, "mean": 0.0}
    return {"n": len(errs), "median": statistics.median(errs), "max": max(errs), "mean": sum(errs) / len(errs)}
