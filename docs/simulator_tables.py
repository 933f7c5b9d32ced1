"""Write the generated tables of docs/simulator.md (and the calibration summary in README.md, and the published
rows' rules in docs/published.md) from the code and the data.

The constants table comes from ``placetune.backends.simulate.costs`` (priors, values in use,
sources) and ``placetune.calibration.builtin.PARAMS`` (what the fit sets, bounds); the
calibration tables from the published rows, the simulator's current predictions and the stored
leave-one-source-out predictions (``placetune/data/simulator_fit.json``, written by
``python benchmarks/calibration.py --fit --write``). Each table sits between
``<!-- begin generated: NAME -->`` and ``<!-- end generated: NAME -->``; everything else in the
files is hand-written. ``tests/test_simulator_docs.py`` checks the committed files match.

Usage: ``python docs/simulator_tables.py`` (rewrites the blocks in place).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FILES = {"simulator.md": ROOT / "docs" / "simulator.md", "README.md": ROOT / "README.md",
         "published.md": ROOT / "docs" / "published.md"}


def _fmt(v) -> str:
    if isinstance(v, bool):
        return str(v)
    return f"{v:.4g}"


def constants_table() -> str:
    """Every simulator constant: prior and value in use per architecture, and what sets it."""
    from dataclasses import fields

    from placetune.backends.simulate import costs
    from placetune.calibration.builtin import PARAMS

    fitted = {}
    for p in PARAMS:
        for arch, key in p.targets:
            if arch != "harness":
                fitted[(arch, key)] = p
    lines = ["| constant | Volta prior | Volta value | Ampere prior | Ampere value | set by |",
             "|---|---:|---:|---:|---:|---|"]
    for f in fields(costs.ArchConstants):
        prior = {a: getattr(c, f.name) for a, c in costs.PRIOR_ARCH.items()}
        value = {a: getattr(c, f.name) for a, c in costs.ARCH.items()}
        keys = sorted(prior["volta"]) if isinstance(prior["volta"], dict) else [None]
        for sub in keys:
            name = f"{f.name}.{sub}" if sub else f.name

            def get(d, a):
                return d[a][sub] if sub else d[a]

            by = []
            for a in ("volta", "ampere"):
                p = fitted.get((a, name))
                if p is not None:
                    by.append(f"{'both' if p.arch == '*' else a}: fit in [{p.lower:g}, {p.upper:g}] on "
                              f"{p.identified_by}")
            text = "; ".join(dict.fromkeys(by))
            if not by or len(by) == 1 and not by[0].startswith("both"):
                src = costs.CONSTANT_SOURCES.get(name) or costs.CONSTANT_SOURCES.get(f.name, "")
                text = "; ".join(t for t in (text, src) if t)
            lines.append(f"| `{name}` | {_fmt(get(prior, 'volta'))} | {_fmt(get(value, 'volta'))} | "
                         f"{_fmt(get(prior, 'ampere'))} | {_fmt(get(value, 'ampere'))} | {text} |")
    from placetune.calibration.published import HARNESS_CALL_US, HARNESS_PRIOR_US

    for p in PARAMS:
        if p.arch == "harness":
            key = p.targets[0][1]
            lines.append(f"| harness `{key}` host time per call (us) | {_fmt(HARNESS_PRIOR_US[key])} | "
                         f"{_fmt(HARNESS_CALL_US[key])} | (same) | (same) | fit in [{p.lower:g}, {p.upper:g}] on "
                         f"{p.identified_by} (a property of the published rows' harness, not of the simulator) |")
    return "\n".join(lines)


def _results():
    from placetune.calibration.builtin import stored_fit
    from placetune.calibration.published import CaseResult, evaluate, published_cases

    cases = published_cases()
    results = evaluate(cases)
    by_id = {c.row.id: c for c in cases}
    stored = stored_fit()
    loso = [CaseResult(by_id[k], v) for k, v in sorted(stored.get("loso", {}).items()) if k in by_id]
    fit = [r for r in results if r.case.row.split == "fit"]
    val = [r for r in results if r.case.row.split == "validate"]
    return cases, fit, val, loso


def _unexcluded():
    """The stored predictions of the fits without the exclusion rule: (validate rows, leave-one-source-out)."""
    from placetune.calibration.builtin import stored_fit
    from placetune.calibration.published import CaseResult, published_cases

    by_id = {c.row.id: c for c in published_cases()}
    un = stored_fit().get("unexcluded")
    if not un:
        return None, None
    val = [CaseResult(by_id[k], v) for k, v in sorted(un["predictions"].items())
           if k in by_id and by_id[k].row.split == "validate"]
    return val, [CaseResult(by_id[k], v) for k, v in sorted(un["loso"].items()) if k in by_id]


def calibration_summary() -> str:
    """Fit, validation and leave-one-source-out errors (median, max, signed) and the batch buckets."""
    from placetune.calibration import accuracy
    from placetune.calibration.builtin import PARAMS

    _, fit, val, loso = _results()
    val_all, loso_all = _unexcluded()
    cols = [("fit", fit), ("validate (never used to set anything)", val),
            ("leave-one-source-out (fit rows, each source predicted by a fit without it)", loso)]
    n_fit = sum(1 for r in fit if not r.case.conflict)
    judged = accuracy.judged_table([("validate", val, True), ("validate", val_all, False), ("leave-one-source-out", loso, True),
                                    ("leave-one-source-out", loso_all, False)], 0.15, 0.35)
    return "\n".join(["Judged figures (exclusion rule: rows in conflict with their peers left out of the fit and "
                       "the figures; `none`: fitted and counted; placetune/data/published.md):", "", judged, "",
                       accuracy.summary_table(cols), "",
                      f"{len(PARAMS)} free constants, {n_fit} fit rows ({n_fit / len(PARAMS):.1f} per constant). "
                      "Errors in time: simulated / published time - 1, + = the simulator is slower.", "",
                      accuracy.group_table("batch bucket", cols)])


def calibration_tables() -> str:
    """The summary, errors per network family, device kind and source, and the dataset's row counts."""
    from placetune.calibration import accuracy

    cases, fit, val, loso = _results()
    cols = [("fit", fit), ("validate", val), ("leave-one-source-out", loso)]
    out = [calibration_summary(), ""]
    for by in ("network family", "device kind", "platform", "precision"):
        out += [accuracy.group_table(by, cols), ""]
    out += [accuracy.group_table("source", [("leave-one-source-out", loso)]), "",
            "Rows of `placetune/data/published.csv` (all, expressible by the simulator, fit, validate):", ""]
    for by in ("network", "platform", "precision", "batch bucket", "device kind"):
        out += [accuracy.counts_table(cases, by), ""]
    conflict = [r for r in fit + val if r.case.conflict]
    if conflict:
        out.append("Left out of the fit and the summaries (in conflict with the other rows of their conditions): "
                   + "; ".join(f"`{r.case.row.id}` ({r.case.conflict})" for r in conflict) + ".")
    return "\n".join(out).rstrip()


def published_rules() -> str:
    """The rules of placetune/data/published.md (split, exclusion, judging rules and their history),
    from its first rule section to its column descriptions, as they stand there."""
    text = (ROOT / "placetune" / "data" / "published.md").read_text()
    return text[text.index("## Split rule"):text.index("## Columns")].rstrip()


BLOCKS = {("simulator.md", "constants"): constants_table,
          ("simulator.md", "calibration"): calibration_tables,
          ("README.md", "calibration summary"): calibration_summary,
          ("published.md", "rules"): published_rules}


def render(text: str, file: str) -> str:
    """``text`` with every generated block of ``file`` replaced by what the code gives now."""
    for (f, name), fn in BLOCKS.items():
        if f != file:
            continue
        pat = re.compile(rf"(<!-- begin generated: {re.escape(name)} -->\n)(?:.*?\n)?(<!-- end generated: {re.escape(name)} -->)",
                         re.S)
        if not pat.search(text):
            raise SystemExit(f"{file}: no block '{name}'")
        body = fn()
        text = pat.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)
    return text


def main() -> int:
    for file, path in FILES.items():
        path.write_text(render(path.read_text(), file))
        print(f"wrote the generated blocks of {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
