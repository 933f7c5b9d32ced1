"""How well the simulated Jetson predicts the published rows: error summaries, groups and counts.

Errors are in time: ``simulated time / published time - 1`` (a throughput row counts its time
per sample), so ``+10 %`` always means the simulator is 10 % too slow and ``-10 %`` too fast,
whatever the row's metric. Summaries (median and max of the absolute error) leave out rows in
conflict with other rows of their conditions (:func:`~placetune.calibration.published.conflicts`);
the reports list those apart. Everything here describes simulated figures against published
ones; nothing is measured.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Callable, Iterable, Sequence

from placetune.calibration.published import BATCH_BUCKETS, CaseResult, PublishedCase

__all__ = ["time_error", "summary", "grouped", "counts", "GROUPS", "summary_table", "group_table", "counts_table",
           "rows_table", "judged_table"]

#: Attributes the reports group rows by (label -> the case's value).
GROUPS: dict[str, Callable[[PublishedCase], str]] = {
    "batch bucket": lambda c: c.bucket,
    "network family": lambda c: c.family,
    "network": lambda c: c.row.network,
    "platform": lambda c: c.row.platform,
    "precision": lambda c: c.row.precision,
    "device kind": lambda c: c.device_kind,
    "source": lambda c: c.row.source,
}


def time_error(r: CaseResult) -> float:
    """``simulated time / published time - 1`` of one row (+ = the simulator is slower)."""
    return r.error if r.case.row.metric == "latency_ms" else 1.0 / (1.0 + r.error) - 1.0


def summary(results: Iterable[CaseResult], exclusions: bool = True) -> dict[str, float]:
    """``{"n", "median", "max", "signed", "median_metric", "max_metric"}``: the time error's
    absolute median and max and its signed median, and the absolute median and max of
    ``simulated / published - 1`` on each row's own metric (a throughput row the simulator
    overestimates by 1.5x is -33 % in time, +50 % on its metric); rows in conflict left out
    unless ``exclusions`` is False; zeros when empty."""
    kept = [r for r in results if not (exclusions and r.case.conflict)]
    if not kept:
        return {"n": 0, "median": 0.0, "max": 0.0, "signed": 0.0, "median_metric": 0.0, "max_metric": 0.0}
    errs = [time_error(r) for r in kept]
    ab = [abs(e) for e in errs]
    metric = [abs(r.error) for r in kept]
    return {"n": len(errs), "median": statistics.median(ab), "max": max(ab), "signed": statistics.median(errs),
            "median_metric": statistics.median(metric), "max_metric": max(metric)}


def grouped(results: Iterable[CaseResult], by: str) -> dict[str, dict[str, float]]:
    """:func:`summary` per value of the :data:`GROUPS` attribute ``by`` (sorted; batch buckets in order)."""
    key = GROUPS[by]
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        groups.setdefault(key(r.case), []).append(r)
    order = [b[0] for b in BATCH_BUCKETS] if by == "batch bucket" else sorted(groups)
    return {g: summary(groups[g]) for g in order if g in groups}


def counts(cases: Iterable[PublishedCase], by: str) -> Counter:
    """Rows per value of the :data:`GROUPS` attribute ``by`` (skipped rows: their bucket may be ``?``)."""
    return Counter(GROUPS[by](c) for c in cases)


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def summary_table(columns: Sequence[tuple[str, Sequence[CaseResult]]], exclusions: bool = True) -> str:
    """A Markdown table: one line per ``(name, results)`` with rows, median, max and signed median
    of the time error, and median / max of the error on each row's own metric (``exclusions``:
    as :func:`summary`)."""
    lines = ["| rows | n | median abs error | max abs error | median signed error | median / max on the row's metric |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, res in columns:
        s = summary(res, exclusions)
        lines.append(f"| {name} | {s['n']} | {_pct(s['median'])} | {_pct(s['max'])} | {100 * s['signed']:+.1f} % | "
                     f"{_pct(s['median_metric'])} / {_pct(s['max_metric'])} |")
    return "\n".join(lines)


def judged_table(sets: Sequence[tuple[str, Sequence[CaseResult] | None, bool]], median: float, worst: float) -> str:
    """A Markdown table of the judged result sets: one line per ``(name, results, exclusions)``
    with n, median and max of the absolute time error (:func:`summary` with ``exclusions``) and
    whether both are within ``median`` and ``worst``; ``results`` None: not computed."""
    lines = [f"| set | exclusions | n | median abs error | max abs error | target (median <= {100 * median:.0f} %, "
             f"max <= {100 * worst:.0f} %) |", "|---|---|---:|---:|---:|---|"]
    for name, res, excl in sets:
        rule = "rule applied" if excl else "none"
        if not res:
            lines.append(f"| {name} | {rule} | - | - | - | not computed |")
            continue
        s = summary(res, excl)
        ok = s["median"] <= median and s["max"] <= worst
        lines.append(f"| {name} | {rule} | {s['n']} | {_pct(s['median'])} | {_pct(s['max'])} | "
                     f"{'met' if ok else 'MISSED'} |")
    return "\n".join(lines)


def group_table(by: str, columns: Sequence[tuple[str, Sequence[CaseResult]]]) -> str:
    """A Markdown table of the median signed error (and n) per group of ``by``, one column per result set."""
    per = [(name, grouped(res, by)) for name, res in columns]
    keys: list[str] = []
    for _, g in per:
        keys += [k for k in g if k not in keys]
    if by == "batch bucket":
        keys = [b[0] for b in BATCH_BUCKETS if b[0] in keys]
    head = f"| {by} | " + " | ".join(f"{name}: median signed (n), max abs" for name, _ in per) + " |"
    lines = [head, "|---|" + "---:|" * len(per)]
    for k in keys:
        cells = []
        for _, g in per:
            s = g.get(k)
            cells.append(f"{100 * s['signed']:+.1f} % ({s['n']}), {100 * s['max']:.0f} %" if s else "")
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def counts_table(cases: Sequence[PublishedCase], by: str) -> str:
    """Rows per group of ``by``: all rows, the simulator can express, fit, validate."""
    expr = [c for c in cases if not c.skip]
    cols = [("rows", counts(cases, by)), ("expressible", counts(expr, by)),
            ("fit", counts([c for c in expr if c.row.split == "fit"], by)),
            ("validate", counts([c for c in expr if c.row.split == "validate"], by))]
    keys = sorted(cols[0][1], key=lambda k: ([b[0] for b in BATCH_BUCKETS] + ["?"]).index(k)
                  if by == "batch bucket" else k)
    lines = [f"| {by} | " + " | ".join(n for n, _ in cols) + " |", "|---|" + "---:|" * len(cols)]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(str(c.get(k, 0)) for _, c in cols) + " |")
    lines.append("| all | " + " | ".join(str(sum(c.values())) for _, c in cols) + " |")
    return "\n".join(lines)


def rows_table(results: Sequence[CaseResult], loso: dict[str, float] | None = None,
               extra: Sequence[tuple[str, dict[str, float]]] = ()) -> str:
    """One line per row: what ran, published and simulated figure, time error (and the
    leave-one-source-out prediction's when ``loso`` maps row ids to simulated figures, and one
    more error column per ``(title, row id -> simulated figure)`` of ``extra``)."""
    head = ("| case | what ran | published | simulated | error |" + (" LOSO error |" if loso else "")
            + "".join(f" {t} |" for t, _ in extra) + " source |")
    lines = [head, "|---|---|---:|---:|---:|" + ("---:|" if loso else "") + "---:|" * len(extra) + "---|"]
    for r in results:
        row, c = r.case.row, r.case
        b = c.batch
        batch = (f"bs {b['GPU']}" if c.kind in ("gpu", "dla", "dla-only", "mixed", "concurrent")
                 else f"DLA bs {b['DLA']}" if c.kind == "2dla-replicas" else f"GPU bs {b['GPU']}, DLA bs {b['DLA']}")
        what = f"{row.platform} {row.network} {row.precision} {row.placement}, {batch}"
        cell = f"{100 * time_error(r):+.1f} %" + (" (conflict)" if c.conflict else "")
        more = ""
        for m in ([loso] if loso is not None else []) + [e for _, e in extra]:
            v = m.get(row.id)
            more += f" {100 * time_error(CaseResult(c, v)):+.1f} % |" if v else " |"
        lines.append(f"| `{row.id}` | {what} | {row.value:.4g} {row.unit} | {r.simulated:.4g} {row.unit} | "
                     f"{cell} |{more} {row.source} |")
    return "\n".join(lines)
