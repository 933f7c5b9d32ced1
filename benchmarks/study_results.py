"""What each study file in studies/ gives when it runs, written into its comments.

A study file's comment says what the study demonstrates; the figures of its result come from a
run, not from memory. For every study file that runs on the simulated Jetson this runs
``placetune tune FILE`` in a fresh database, prints the summary table of the run (the rows
``placetune tune`` prints: all-GPU, all-DLA, best found, their figures and ``vs all-GPU``, the
constraint, verdict and convergence lines) and, with ``--write``, replaces the study file's
``# Result of a run`` block with it. ``--check`` exits 1 when a file's block differs from the run
(after a simulator change, run ``--write`` and read the diff).

    python benchmarks/study_results.py [--write | --check] [studies/NAME.toml ...]

Every figure is simulated. Runs take from seconds to a few minutes each (about 20 minutes in all
on a 2-core machine).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDIES = ROOT / "studies"
#: study files that need hardware or files of your own: not run here
TEMPLATES = ("jetson-overnight.toml",)
HEAD = "# Result of a run (simulated; `python benchmarks/study_results.py --write` writes this block):"
PREFIX = "# | "


def run(path: Path, tmp: Path) -> list[str]:
    """The summary lines of ``placetune tune path`` in a fresh database (table header to the last line
    before the exported plan)."""
    db = tmp / f"{path.stem}.db"
    argv = [sys.executable, "-m", "placetune.cli", "tune", str(path), "--storage", f"sqlite:///{db}",
            "--export", str(tmp / f"{path.stem}.plan.json")]
    out = subprocess.run(argv, cwd=tmp, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{path.name}: placetune tune exited {out.returncode}: {out.stderr.strip()[-500:]}")
    lines = out.stdout.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("placement "))
    end = next(i for i, x in enumerate(lines) if x.startswith("plan exported"))
    return [x.rstrip() for x in lines[start:end] if not x.startswith("-----")]


def block(rows: list[str]) -> list[str]:
    """The comment block of a study file's result."""
    return [HEAD, *(PREFIX + r for r in rows)]


def current(text: str) -> list[str]:
    """The result block a study file holds now ([] when it has none)."""
    lines = text.splitlines()
    if HEAD not in lines:
        return []
    i = lines.index(HEAD)
    j = i + 1
    while j < len(lines) and lines[j].startswith(PREFIX.rstrip()):
        j += 1
    return lines[i:j]


def write(path: Path, new: list[str]) -> bool:
    """Put ``new`` in place of the file's block (before ``[study]`` when it has none); True if it changed."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    old = current(text)
    if old == new:
        return False
    if old:
        i = lines.index(HEAD)
        lines[i:i + len(old)] = new
    else:
        i = lines.index("[study]")
        lines[i:i] = new
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path, help="study files (default: every runnable one in studies/)")
    what = ap.add_mutually_exclusive_group()
    what.add_argument("--write", action="store_true", help="write each result into its study file")
    what.add_argument("--check", action="store_true", help="exit 1 when a study file's block differs from its run")
    args = ap.parse_args(argv)
    files = args.files or [p for p in sorted(STUDIES.glob("*.toml")) if p.name not in TEMPLATES]
    stale = []
    with tempfile.TemporaryDirectory() as t:
        for path in files:
            t0 = time.monotonic()
            new = block(run(path.resolve(), Path(t)))
            print(f"{path.name} ({time.monotonic() - t0:.0f} s):")
            print("\n".join(new[1:]).replace(PREFIX, "  "))
            if new != current(path.read_text(encoding="utf-8")):
                stale.append(path.name)
                if args.write:
                    write(path, new)
    if stale:
        print(("rewrote " if args.write else "differs from its run: ") + ", ".join(stale))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
