"""Counts of bench_unlike's goals from its raw rows (``--json`` output): per row the median and worst
gap of the guided agent at both budgets, the best blind agent's median gap, and which goals it meets.

Goals (docs/search.md): median within 5 % at the short budget and 2 % at the long one; worst within
8 % and 4 %; the median never behind the best blind agent (the lowest median gap of random, local
search and TPE at the same evaluations).

Usage:
    python benchmarks/unlike_counts.py docs/results/unlike_heldout_step15.jsonl [--families F ...]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_unlike import CASES, _at, gap  # noqa: E402

TOL = 1e-9


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def judge(r: dict, short: int = 15, long_: int = 50) -> dict:
    """Median / worst gap per budget, the best blind median per budget, and the goals met."""
    case, best = r["case"], float(r["best"])
    out: dict = {"row": f"{case} {r['family']} {r['draw']}"}
    for b in (short, long_):
        gs = [math.inf if v is None else gap(v, best, case) for v in r["agent"][str(b)]]
        blind = []
        for lab, curves in r["blind"].items():
            vals = [_at(c, b) for c in curves]
            if vals and all(v is not None for v in vals):
                blind.append((statistics.median(gap(v, best, case) for v in vals), lab))
        out[b] = (statistics.median(gs), max(gs), min(blind) if blind else (math.nan, "-"))
    m15, w15, b15 = out[short]
    m50, w50, b50 = out[long_]
    out["median_ok"] = m15 <= 0.05 + TOL and m50 <= 0.02 + TOL
    out["worst_ok"] = w15 <= 0.08 + TOL and w50 <= 0.04 + TOL
    out["blind_ok"] = m15 <= b15[0] + TOL and m50 <= b50[0] + TOL
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("jsonl", type=Path)
    ap.add_argument("--families", nargs="+", default=None)
    args = ap.parse_args(argv)
    js = [judge(r) for r in rows(args.jsonl) if args.families is None or r["family"] in args.families]
    js.sort(key=lambda j: j["row"])
    pct = lambda x: f"{100 * x:.2f}%"  # noqa: E731
    for j in js:
        flags = ("" if j["median_ok"] else " MEDIAN") + ("" if j["worst_ok"] else " WORST") + \
                ("" if j["blind_ok"] else " BLIND")
        print(f"{j['row']:26s} @15 {pct(j[15][0])}/{pct(j[15][1])} (blind {j[15][2][1]} {pct(j[15][2][0])})  "
              f"@50 {pct(j[50][0])}/{pct(j[50][1])} (blind {j[50][2][1]} {pct(j[50][2][0])}){flags}")
    n = len(js)
    print(f"rows {n}: median goal {sum(j['median_ok'] for j in js)}, median and worst "
          f"{sum(j['median_ok'] and j['worst_ok'] for j in js)}, at least as good as the best blind "
          f"{sum(j['blind_ok'] for j in js)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
