"""Best simulated pipeline and data-parallel gains over all-GPU, per network, now and at an earlier revision.

This finds where the simulated Jetson predicts more than anything published: layer pipelines
above ~1.6x over all-GPU, or pipelining beating data-parallel replicas on a network NVIDIA ships
data-parallel (resnet50 in MLPerf Offline: GPU + 2 DLA instances, 1.25-1.57x). For each network
this runs ``placetune tune`` twice on the simulated Jetson (orin-agx, INT8, throughput):
``--mode pipeline`` with the default agent for ``--trials`` trials, and ``--mode replicas``
(tune's default replicas: GPU + DLA0 + DLA1 instances of the whole network), and prints the gains over all-GPU.

    python benchmarks/pipeline_gains.py [--trials 200] [--before REV]

``--before REV`` also runs the same commands with the code of git revision REV (extracted to a
temporary directory) and prints both side by side. Every figure is simulated.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NETWORKS = ("resnet50", "googlenet", "vgg16", "mobilenetv2", "resnet18")
#: the summary's "best found" row ends in the gain: "1.52x faster" / "1.70x slower" / "same" (older: "1.52x")
GAIN = re.compile(r"^best found\s.*?(?:([\d.]+)x( faster| slower| less energy| more energy)?|(same))\s*$", re.M)


def gain_of(match: re.Match) -> float:
    """The gain over all-GPU (> 1 is better) of a :data:`GAIN` match."""
    if match.group(3):
        return 1.0
    value = float(match.group(1))
    return 1.0 / value if match.group(2) in (" slower", " more energy") else value


def tune(code: Path, network: str, mode: str, trials: int, tmp: Path) -> float | None:
    """The 'best found' gain over all-GPU printed by `placetune tune` (None when it failed)."""
    db = tmp / f"{network}-{mode}-{code.name}.db"
    argv = [sys.executable, "-c", "import sys; from placetune.cli.main import main; sys.exit(main(sys.argv[1:]))",
            "tune", "--model", network, "--platform", "orin-agx", "--precision", "int8", "--mode", mode,
            "--objective", "throughput", "--trials", str(trials), "--storage", f"sqlite:///{db}",
            "--export", str(tmp / f"{network}-{mode}-{code.name}.plan.json")]
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run(argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=1800)
    m = GAIN.search(out.stdout)
    if out.returncode != 0 or not m:
        print(f"  {network} {mode} at {code}: exit {out.returncode}: {out.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return gain_of(m)


def extract(rev: str, dest: Path) -> Path:
    """The package tree of git revision ``rev`` under ``dest``."""
    data = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "placetune", "search"], check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200, help="trials of the pipeline search per network")
    ap.add_argument("--before", help="git revision to compare with (e.g. 4a09200)")
    ap.add_argument("--networks", nargs="+", default=list(NETWORKS))
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        codes = [("now", ROOT)]
        if args.before:
            codes.insert(0, (f"at {args.before}", extract(args.before, tmp / "before")))
        rows = []
        for net in args.networks:
            row = [net]
            for _, code in codes:
                row += [tune(code, net, "pipeline", args.trials, tmp), tune(code, net, "replicas", 3, tmp)]
            rows.append(row)
            print(f"  done {net}", file=sys.stderr, flush=True)
    head = ["network"]
    for label, _ in codes:
        head += [f"best pipeline {label}", f"GPU+2DLA replicas {label}"]
    print(f"Simulated orin-agx INT8 throughput gain over all-GPU (pipeline: {args.trials} trials, default agent)\n")
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * (len(head) - 1) + "|")
    for row in rows:
        print("| " + " | ".join([row[0]] + ["-" if v is None else f"{v:.2f}x" for v in row[1:]]) + " |")
    print("\nPublished for comparison: NVIDIA MLPerf Offline ships resnet50 data-parallel (GPU + 2 DLA), 1.25-1.57x; "
          "JEDI's GPU+DLA pipelines on Xavier 0.96-1.58x. All figures above are simulated.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
