"""The default tune's figures in README.md, written from a run of it rather than by hand.

README.md states what ``placetune tune`` with no argument gives: how many of its 300 trials it
runs before it stops, the best plan's throughput against all-GPU and the simulated device time a
Jetson would spend on those builds (the simulated engine cache included), and the same for
``--no-stop-when-settled``, which builds the whole budget. This runs both in fresh folders,
parses their summaries and writes the table between ``<!-- begin generated: default tune -->`` and
``<!-- end generated: default tune -->`` in README.md. ``--check`` exits 1 when the committed
table differs from the runs. ``tests/test_golden.py`` checks the default row against the run it
already makes; the ``--no-stop-when-settled`` row is checked only here.

    python benchmarks/readme_figures.py [--write | --check]

Every figure is simulated. The two runs take about half a minute on a quiet 2-core machine.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_args import write_or_check  # noqa: E402 - beside this script

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
NAME = "default tune"
#: (row label, extra arguments of ``placetune tune``)
RUNS = (("`placetune tune` (the default: stops once nothing left can change its answer)", ()),
        ("`placetune tune --no-stop-when-settled` (the whole budget)", ("--no-stop-when-settled",)))
HEADER = ("| run | trials run | converged at trial | best found | vs all-GPU | simulated device time | "
          "of it after convergence |\n|---|---:|---:|---:|---:|---:|---:|")
_BLOCK = re.compile(rf"(<!-- begin generated: {re.escape(NAME)} -->\n)(.*?)(<!-- end generated: {re.escape(NAME)} -->)",
                    re.S)


def tune(args: tuple[str, ...] | list[str], cwd: Path) -> str:
    """The standard output of ``placetune tune *args`` run in ``cwd`` (a fresh folder: a fresh study)."""
    out = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", *args], cwd=cwd, capture_output=True,
                         text=True, check=False, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"placetune tune {' '.join(args)} exited {out.returncode}: {out.stderr.strip()[-500:]}")
    return out.stdout


def _find(pattern: str, text: str, what: str) -> re.Match:
    m = re.search(pattern, text, re.M)
    if m is None:
        raise SystemExit(f"the run's summary has no {what} (pattern {pattern!r}); has its wording changed?")
    return m


def figures(stdout: str) -> dict[str, str]:
    """The figures of a tune's summary, as the summary prints them."""
    row = _find(r"^best found\s+\S+\s+(\S+)\s+\S+\s+(.+?)\s*$", stdout, "'best found' row")
    base = _find(r"^all-GPU\s+\S+\s+(\S+)\s", stdout, "'all-GPU' row")
    dev = _find(r"^simulated device time \(builds and timing on a Jetson\): (.+?) for this run's", stdout,
                "simulated device time")
    after = re.search(r"^simulated device time .*?; (.+?) of it after the study converged at trial (\d+)", stdout,
                      re.M)
    return {"trials": _find(r"^summary \(SIMULATED\): (\d+) trials", stdout, "summary line").group(1),
            "budget": _find(r"budget (\d+) trials", stdout, "budget").group(1),
            "converged": after.group(2) if after else "not converged",
            "best_fps": row.group(1), "gain": row.group(2), "all_gpu_fps": base.group(1),
            "device": dev.group(1), "device_after": after.group(1) if after else "-"}


def row(label: str, stdout: str) -> str:
    """One table row: ``label`` and the figures of the run that printed ``stdout``."""
    f = figures(stdout)
    return (f"| {label} | {f['trials']} of {f['budget']} | {f['converged']} | {f['best_fps']} fps | {f['gain']} | "
            f"{f['device']} | {f['device_after']} |")


def block(outputs: list[str]) -> str:
    """The generated block's body from the standard outputs of the runs of ``RUNS``, in order."""
    rows = [row(label, out) for (label, _), out in zip(RUNS, outputs)]
    base = figures(outputs[0])["all_gpu_fps"]
    return "\n".join([HEADER, *rows, "",
                      f"Simulated AGX Orin, ResNet-50 INT8 batch 2 as a pipeline; all-GPU runs at {base} fps. The "
                      "device time is the simulated Jetson's: engine builds (a segment already built comes from "
                      "the engine cache), DLA compiles and timing runs. Written by "
                      "`python benchmarks/readme_figures.py --write` from the two runs."])


def current(text: str) -> str:
    """The body of the generated block ``text`` holds now."""
    m = _BLOCK.search(text)
    if m is None:
        raise SystemExit(f"README.md has no '<!-- begin generated: {NAME} -->' block")
    return m.group(2).rstrip("\n")


def render(text: str, body: str) -> str:
    """``text`` with the generated block's body replaced by ``body``."""
    current(text)
    return _BLOCK.sub(lambda m: m.group(1) + body + "\n" + m.group(3), text)


def main(argv: list[str] | None = None) -> int:
    args = write_or_check(__doc__.splitlines()[0], "figures", argv)
    outputs = []
    for _, extra in RUNS:
        with tempfile.TemporaryDirectory() as t:
            outputs.append(tune(extra, Path(t)))
    body = block(outputs)
    print(body)
    text = README.read_text(encoding="utf-8")
    stale = current(text) != body
    if stale and args.write:
        README.write_text(render(text, body), encoding="utf-8")
        print("rewrote README.md's generated block")
    elif stale:
        print("README.md's generated block differs from the runs")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
