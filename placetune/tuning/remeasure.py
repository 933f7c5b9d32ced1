"""Re-measuring a placement: more builds of the same network, combined into one measurement.

On a Jetson each engine build picks TensorRT tactics anew, so two builds of the same
placement differ by ~1-3 %; the simulated Jetson draws a factor per build
(:mod:`placetune.backends.simulate.noise`). A search that keeps the best of many single
builds favours a lucky one; re-measuring the top candidates
(:meth:`placetune.tuning.evaluator.Evaluator.remeasure`) and ranking them by the median over
their builds takes that luck out.

How :func:`combine_builds` combines the stored measurement (one build, or builds combined
before) with new builds of the same realised placement:

* ``extra["builds"]``: one entry per build, oldest first: ``build`` (the backend's build
  number where it reports one, else None), ``status``, ``median_ms``, ``throughput_fps``,
  ``energy_mj``, ``power_w`` (a failed rebuild: ``status`` and ``reason``), ``engine`` (the
  digest of the engine timed, where the backend reports one: ``extra["engine_digest"]``) and, on
  a new entry whose engine and the first build's are both known, ``same_engine`` (True: the first
  build's engine timed again, not a rebuild);
* ``latency_ms["median"]``, ``throughput_fps``, ``energy_mj`` and ``power_w``: the median over
  the ok builds of each build's own figure (with two builds, the mean of the two);
* ``latency_samples_ms``: the samples of every ok build, concatenated; the other latency
  statistics (``mean``, ``min``, ``max``, ``p90``, ``p99``) are those of all these samples;
* ``build_seconds``: the sum over the builds;
* everything else (per-layer and per-segment times, timeline, loadables, fallback and the
  rest of ``extra``): the first build's.

A failed rebuild is listed in ``extra["builds"]`` and left out of the medians: the stored
measurement stays ``ok``. So is a rebuild that realised another placement than the stored
build's (status ``other_placement``, its ``reason`` naming the layers that moved, or saying its
placement is unknown): on a real board a rebuild may see a DLA subgraph fall back that did not
before, or a build log that cannot say where the layers ran, and its figures are then not this
placement's; the measurement keeps the first build's realised placement and fallback, so its
figures must be that placement's only. Its figures are kept under the entry's ``figures``, not
where a build's figures are read (the guided agent's noise estimate and final ranking read
``median_ms``, ``throughput_fps`` and ``energy_mj`` of every entry that has them).

What a rebuild samples depends on the backend's caches. The TensorRT backend keeps a timing
cache (TensorRT then picks the same tactics again) and, in pipeline and replicas mode, an
engine cache (the same engines are loaded again); in engine mode it keeps each engine only with
``save_plans``, and then loads the engine of the same key (same ONNX content, TensorRT, L4T,
clocks and build options) rather than building it again (``same_engine`` in its entry). With the
caches on, the defaults, a re-measurement re-times the same tactics and averages run-to-run noise
(clocks, temperature) only; the backend options ``timing_cache=False`` and ``engine_cache=False``
make it a fresh build that samples TensorRT's tactic choice as well. The simulated Jetson draws a
new per-build factor either way.
"""

from __future__ import annotations

import copy
import math
import statistics
from typing import Any

from placetune.measurement import Measurement, latency_stats

__all__ = ["combine_builds", "build_entries", "other_placement", "measured_again", "next_build_number", "device_time", "TRANSIENT_KEYS"]

#: ``extra`` keys an evaluator adds to the measurements it answers; never stored
TRANSIENT_KEYS = ("_id", "cache_hit", "requested_key", "annotation", "remeasured")


def measured_again(m: Measurement) -> bool:
    """True for a stored measurement that is no cache answer: one taken under other clocks than its
    run's first (``failure_class`` ``clocks``, :func:`placetune.backends.clocks.untrusted`), which says
    nothing of its placement, or timed beside another process's GPU work (``gpu_contended``,
    :func:`placetune.backends.busy.contended`). The evaluator measures its placement again when it is asked
    for, and the new measurement replaces it (:meth:`placetune.tuning.trial_log.TrialLog.replaced`)."""
    return not m.ok and m.extra.get("failure_class") in ("clocks", "gpu_contended")


def _entry(m: Measurement) -> dict[str, Any]:
    build = m.extra.get("build")
    digest = m.extra.get("engine_digest")
    engine = {"engine": digest} if isinstance(digest, str) else {}
    if not m.ok:
        return {"build": build if isinstance(build, int) else None, "status": m.status, "reason": m.reason, **engine}
    return {"build": build if isinstance(build, int) else None, "status": "ok",
            "median_ms": m.latency_ms.get("median"), "throughput_fps": m.throughput_fps,
            "energy_mj": m.energy_mj, "power_w": m.power_w, **engine}


def other_placement(stored: Measurement, m: Measurement) -> str | None:
    """Why the ok build ``m`` did not realise the placement of ``stored`` (None: it did): a layer on
    another device, or a placement one of them knows and the other does not."""
    if m.placement_known != stored.placement_known:
        return ("its realised placement is unknown (placement_known=False), the stored build's is known"
                if stored.placement_known else "its realised placement is known, the stored build's is unknown")
    if stored.realized is None or m.realized is None:  # one recorded no placement: nothing to compare
        return None
    was, now = stored.realized, m.realized
    moved = sorted(n for n in set(was) | set(now) if was.get(n) != now.get(n))
    if not moved:
        return None
    shown = ", ".join(f"{n} {was.get(n)} -> {now.get(n)}" for n in moved[:5])
    more = f" and {len(moved) - 5} more" if len(moved) > 5 else ""
    return f"it realised another placement than the stored build ({shown}{more}): left out of the medians"


def build_entries(m: Measurement) -> list[dict[str, Any]]:
    """The per-build figures of a stored measurement: its ``extra["builds"]``, or its own
    figures as a single build when it was never re-measured."""
    builds = m.extra.get("builds")
    if isinstance(builds, list) and builds and all(isinstance(b, dict) for b in builds):
        return [dict(b) for b in builds]
    return [_entry(m)]


def next_build_number(m: Measurement) -> int | None:
    """The first backend build number after every build of a stored measurement (None when the
    backend reports none), so that a rebuild in another process is a new build too."""
    nums = [b.get("build") for b in build_entries(m)]
    nums = [n for n in nums if isinstance(n, int) and not isinstance(n, bool)]
    return max(nums) + 1 if nums else None


def _median(values: list[Any]) -> float | None:
    vals = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(float(v))]
    return float(statistics.median(vals)) if vals else None


def combine_builds(stored: Measurement, new: list[Measurement]) -> Measurement:
    """The stored ``ok`` measurement combined with ``new`` builds of the same realised placement
    (the rules are in this module's docstring). Neither argument is changed.

    Raises:
        ValueError: ``stored`` is not ok.
    """
    if not stored.ok:
        raise ValueError(f"only an ok measurement is combined with more builds, not a {stored.status!r} one")
    out = copy.deepcopy(stored)
    for k in TRANSIENT_KEYS:
        out.extra.pop(k, None)
    moved = {id(m): why for m in new if m.ok and (why := other_placement(stored, m)) is not None}
    entries = []
    for m in new:
        entry = _entry(m)
        if id(m) in moved:  # its figures kept aside, where no reader of a build's figures takes them
            figures = {k: entry.pop(k) for k in ("median_ms", "throughput_fps", "energy_mj", "power_w")}
            entry.update(status="other_placement", reason=moved[id(m)], figures=figures)
        entries.append(entry)
    first = build_entries(stored)[0].get("engine")
    for entry in entries:  # the stored build's engine file timed again (TensorRT, save_plans): said, not hidden
        if first is not None and entry.get("engine") is not None:
            entry["same_engine"] = entry["engine"] == first
    builds = build_entries(stored) + entries
    ok_new = [m for m in new if m.ok and id(m) not in moved]
    samples = list(stored.latency_samples_ms or [])
    for m in ok_new:
        samples.extend(m.latency_samples_ms or [])
    ok = [b for b in builds if b.get("status") == "ok"]
    median_ms = _median([b.get("median_ms") for b in ok])
    stats = latency_stats(samples) if samples else dict(stored.latency_ms)
    if median_ms is not None:
        stats["median"] = median_ms
    out.latency_samples_ms = samples
    out.latency_ms = stats
    out.throughput_fps = _median([b.get("throughput_fps") for b in ok])
    out.energy_mj = _median([b.get("energy_mj") for b in ok])
    out.power_w = _median([b.get("power_w") for b in ok])
    out.build_seconds = float(stored.build_seconds or 0.0) + sum(float(m.build_seconds or 0.0) for m in new)
    out.extra["builds"] = builds
    return out


def device_time(builds: list[Measurement]) -> dict[str, float] | None:
    """The device time these builds spent together (``extra["device_time_s"]`` summed key by key, as progress
    displays show it); None when one build lacks it."""
    spent = [m.extra.get("device_time_s") for m in builds]
    if not all(isinstance(d, dict) for d in spent):
        return None
    return {k: sum(float(d.get(k) or 0.0) for d in spent) for k in spent[0] if isinstance(spent[0][k], (int, float))}
