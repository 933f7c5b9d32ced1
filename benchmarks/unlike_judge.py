"""Judge a search change on bench_unlike's raw rows: before and after files of the same part, each
row judged against the better of the two files' best known (a run of either may have found a
better plan than the reference searches).

Passes (exit 0) only if: the target rows' median gap at the long budget falls; no row loses a goal
it met (median, worst, blind: benchmarks/unlike_counts.py); the counts do not fall; the mean over
rows of the median gap is not higher at either budget. Otherwise exit 1.

Usage:
    python benchmarks/unlike_judge.py BEFORE.jsonl AFTER.jsonl [--target "googlenet drift 5" ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_unlike import better  # noqa: E402
from unlike_counts import TOL, judge, rows  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--target", nargs="*", default=[], help="rows ('case family draw') whose long-budget median must fall")
    args = ap.parse_args(argv)
    key = lambda r: f"{r['case']} {r['family']} {r['draw']}"  # noqa: E731
    b = {key(r): r for r in rows(args.before)}
    a = {key(r): r for r in rows(args.after)}
    common = sorted(set(a) & set(b))
    ok, lines = True, []
    if len(common) != len(a) or len(common) != len(b):
        lines.append(f"FAIL rows differ: before {len(b)}, after {len(a)}, common {len(common)}")
        ok = False
    jb, ja = [], []
    for k in common:
        best = b[k]["best"] if not better(a[k]["best"], b[k]["best"], a[k]["case"]) else a[k]["best"]
        x, y = judge({**b[k], "best": best}), judge({**a[k], "best": best})
        jb.append(x)
        ja.append(y)
        for g in ("median_ok", "worst_ok", "blind_ok"):
            if x[g] and not y[g]:
                ok = False
                lines.append(f"FAIL {k} loses its {g[:-3]} goal")
        mark = "" if (x[15][:2], x[50][:2]) == (y[15][:2], y[50][:2]) else "  CHANGED"
        lines.append(f"{k:26s} @15 {100 * x[15][0]:.2f}/{100 * x[15][1]:.2f}% -> {100 * y[15][0]:.2f}/"
                     f"{100 * y[15][1]:.2f}%  @50 {100 * x[50][0]:.2f}/{100 * x[50][1]:.2f}% -> "
                     f"{100 * y[50][0]:.2f}/{100 * y[50][1]:.2f}%{mark}")
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
