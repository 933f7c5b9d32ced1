"""Judge a search change on bench_unlike's raw rows: before and after files of the same part, each
row judged against the better of the two files' best known (a run of either may have found a
better plan than the reference searches).

Passes (exit 0) only if: the target rows' median gap at the long budget falls; no row loses a goal
it met (median, worst, blind: benchmarks/unlike_counts.py); the counts do not fall; the mean over
rows of the median gap is not higher at either budget. Otherwise exit 1.

``--later-worse`` adds the rule for a change to the final pick (docs/search.md): the target rows are
those whose median gap at the long budget is higher than at the short one BEFORE (the longer run
reports a worse plan), found from the before file, not named by hand; none of them may rise at the
long budget, nor their mean, and the runs (row and seed) whose long run reports a plan more than
:data:`LATER_WORSE` worse than the short run of the same seed may not be more (else FAIL); it prints
"later-worse: IMPROVED" when their mean falls and those runs are fewer.

``--noise-bound B`` adds a per-row bound: no row's median gap at either budget may rise by more than
``B`` (a fraction: 0.005 is half a point of gap); with ``--later-worse`` it also replaces the strict
"a later-worse row may not rise" by the same bound. The means and counts stay strict.

``--paired FILE`` judges one file of ``bench_unlike.py --before``: its before column against its
agent column (the same truths, best known and blind runs).

Usage:
    python benchmarks/unlike_judge.py BEFORE.jsonl AFTER.jsonl [--target "googlenet drift 5" ...]
    python benchmarks/unlike_judge.py BEFORE.jsonl AFTER.jsonl --later-worse
    python benchmarks/unlike_judge.py BEFORE.jsonl AFTER.jsonl --later-worse --noise-bound 0.005
    python benchmarks/unlike_judge.py --paired FRESH.jsonl
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_unlike import better  # noqa: E402
from unlike_counts import TOL, judge, rows  # noqa: E402

#: a long run "reports a worse plan" than the short run of its seed past this gap (the 0.5 % within
#: which docs/search.md counts a blind agent's plan as good as the agent's)
LATER_WORSE = 0.005


def later_worse_runs(r: dict, short: int = 15, long_: int = 50) -> int:
    """Seeds of a row whose long run reports a plan more than :data:`LATER_WORSE` worse (gap to the
    row's best known) than the short run of the same seed."""
    from bench_unlike import gap

    n = 0
    for vs, vl in zip(r["agent"][str(short)], r["agent"][str(long_)]):
        gs = math.inf if vs is None else gap(vs, r["best"], r["case"])
        gl = math.inf if vl is None else gap(vl, r["best"], r["case"])
        n += gl > gs + LATER_WORSE
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path, nargs="?")
    ap.add_argument("after", type=Path, nargs="?")
    ap.add_argument("--target", nargs="*", default=[], help="rows ('case family draw') whose long-budget median must fall")
    ap.add_argument("--later-worse", action="store_true",
                    help="target the rows whose long run is worse than the short one before (see the docstring)")
    ap.add_argument("--noise-bound", type=float, default=None,
                    help="no row's median gap may rise by more than this (a fraction, e.g. 0.005)")
    ap.add_argument("--paired", type=Path, default=None, help="one file of bench_unlike --before: before column against agent")
    args = ap.parse_args(argv)
    if args.noise_bound is not None and not (math.isfinite(args.noise_bound) and args.noise_bound >= 0):
        ap.error(f"--noise-bound must be a finite fraction >= 0, not {args.noise_bound}")
    bound = TOL if args.noise_bound is None else args.noise_bound + TOL
    if (args.paired is None) == (args.before is None or args.after is None):
        ap.error("give BEFORE and AFTER, or --paired FILE")
    key = lambda r: f"{r['case']} {r['family']} {r['draw']}"  # noqa: E731
    if args.paired is not None:
        both = rows(args.paired)
        if not all(r["before"][k] for r in both for k in r["before"]):
            ap.error(f"--paired: {args.paired} has no before column (bench_unlike.py --before)")
        b = {key(r): {**r, "agent": r["before"]} for r in both}
        a = {key(r): r for r in both}
    else:
        b = {key(r): r for r in rows(args.before)}
        a = {key(r): r for r in rows(args.after)}
    common = sorted(set(a) & set(b))
    ok, lines = True, []
    if len(common) != len(a) or len(common) != len(b):
        lines.append(f"FAIL rows differ: before {len(b)}, after {len(a)}, common {len(common)}")
        ok = False
    jb, ja = [], []
    worse_b = worse_a = 0
    for k in common:
        best = b[k]["best"] if not better(a[k]["best"], b[k]["best"], a[k]["case"]) else a[k]["best"]
        x, y = judge({**b[k], "best": best}), judge({**a[k], "best": best})
        worse_b += later_worse_runs({**b[k], "best": best})
        worse_a += later_worse_runs({**a[k], "best": best})
        jb.append(x)
        ja.append(y)
        for g in ("median_ok", "worst_ok", "blind_ok"):
            if x[g] and not y[g]:
                ok = False
                lines.append(f"FAIL {k} loses its {g[:-3]} goal")
        if args.noise_bound is not None:
            for bud in (15, 50):
                if y[bud][0] > x[bud][0] + bound:
                    ok = False
                    lines.append(f"FAIL {k}: median at {bud} rises beyond the noise bound of "
                                 f"{100 * args.noise_bound:.2f}% ({100 * x[bud][0]:.2f}% -> {100 * y[bud][0]:.2f}%)")
        mark = "" if (x[15][:2], x[50][:2]) == (y[15][:2], y[50][:2]) else "  CHANGED"
        lines.append(f"{k:26s} @15 {100 * x[15][0]:.2f}/{100 * x[15][1]:.2f}% -> {100 * y[15][0]:.2f}/"
                     f"{100 * y[15][1]:.2f}%  @50 {100 * x[50][0]:.2f}/{100 * x[50][1]:.2f}% -> "
                     f"{100 * y[50][0]:.2f}/{100 * y[50][1]:.2f}%{mark}")
    if args.later_worse:
        targets = [i for i, j in enumerate(jb) if j[50][0] > j[15][0] + TOL]
        lines.append(f"later-worse rows (median at 50 above median at 15 before): {len(targets)}: "
                     + ", ".join(common[i] for i in targets))
        fell = False
        if targets:
            mb = statistics.mean(jb[i][50][0] for i in targets)
            ma = statistics.mean(ja[i][50][0] for i in targets)
            lines.append(f"later-worse rows' mean median gap @50: {100 * mb:.3f}% -> {100 * ma:.3f}%")
            fell = ma < mb - TOL
            if ma > mb + TOL:
                ok = False
                lines.append("FAIL later-worse rows' mean median gap @50 higher")
            for i in targets:
                if ja[i][50][0] > jb[i][50][0] + bound:
                    ok = False
                    lines.append(f"FAIL later-worse row {common[i]}: median at 50 rises")
        lines.append(f"runs whose 50-build plan is over {100 * LATER_WORSE:.1f}% worse than the 15-build plan "
                     f"of the same seed: {worse_b} -> {worse_a}")
        if worse_a > worse_b:
            ok = False
            lines.append("FAIL those runs are more")
        lines.append("later-worse: IMPROVED (mean gap of its rows falls and its runs are fewer)" if fell and worse_a < worse_b
                     else "later-worse: not improved")
    for t in args.target:
        if t not in common:
            lines.append(f"FAIL target {t!r} not in both files")
            ok = False
            continue
        i = common.index(t)
        if not ja[i][50][0] < jb[i][50][0] - TOL:
            ok = False
            lines.append(f"FAIL target {t}: median at 50 {100 * jb[i][50][0]:.2f}% -> {100 * ja[i][50][0]:.2f}% (not lower)")
    for name, f in (("median", lambda j: j["median_ok"]), ("median and worst", lambda j: j["median_ok"] and j["worst_ok"]),
                    ("blind", lambda j: j["blind_ok"])):
        nb, na = sum(map(f, jb)), sum(map(f, ja))
        lines.append(f"count {name}: {nb} -> {na}")
        ok &= na >= nb
    for bud in (15, 50):
        mb = statistics.mean(j[bud][0] for j in jb)
        ma = statistics.mean(j[bud][0] for j in ja)
        lines.append(f"mean median gap @{bud}: {100 * mb:.3f}% -> {100 * ma:.3f}%")
        if ma > mb + TOL:
            ok = False
            lines.append(f"FAIL mean median gap @{bud} higher")
    print("\n".join(lines))
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
