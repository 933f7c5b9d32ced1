"""``placetune tune`` end to end on the simulated Jetson, and ``import placetune``: this tree beside another revision.

Each case runs the real command in a fresh directory (a new SQLite file, so both stores are
written: placetune's measurements and the study's Optuna trials), alternating this tree's
package with git revision ``--before``'s (``placetune`` and ``search`` extracted by
:func:`revision.extract`). It prints wall time and CPU time (user + system of the command)
per run, and trials per second by each; this 2-core machine is shared and noisy, so compare
figures taken in one run, and prefer the CPU-time figures when it is busy.

Cases (``--cases``):

``local``
    ``placetune tune --agent local --granularity fusion --trials 2000`` with the embedded
    default study: resnet50, pipeline mode with 4 frames in flight, batch 2, int8,
    throughput (``--local-trials`` changes the budget).
``guided``
    ``placetune tune``: the embedded default, the guided agent's 300 trials.
``import``
    ``python -c "import placetune"`` (``--import-runs`` times each, the median).

    python benchmarks/bench_tune.py --before ef96d73 [--cases local,guided,import] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from revision import ROOT, extract  # noqa: E402


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _run(code_dir: Path, argv: list[str], cwd: Path) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of ``python argv`` with ``code_dir`` first on the path."""
    env = dict(os.environ, PYTHONPATH=str(code_dir))
    cpu0, t0 = _children_cpu(), time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, _children_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return wall, cpu, proc.stdout


def _tune(code_dir: Path, extra: list[str], trials: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        argv = ["-m", "placetune.cli", "tune", *extra, "--storage", f"sqlite:///{tmp}/bench.db",
                "--export", f"{tmp}/bench.plan.json"]
        wall, cpu, out = _run(code_dir, argv, Path(tmp))
    done = re.search(r"^summary \(SIMULATED\): ([\d,]+) trials", out, re.M)
    if done is None or int(done.group(1).replace(",", "")) != trials:
        raise SystemExit(f"expected {trials} trials, the run said: {out[-1500:]}")
    best = re.search(r"^best found +\S+ +([\d,.]+)", out, re.M)
    return {"wall": wall, "cpu": cpu, "trials": trials, "best_fps": float(best.group(1).replace(",", "")) if best else 0}


def _import(code_dir: Path, runs: int) -> dict[str, float]:
    code = ("import time; t, c = time.perf_counter(), time.process_time(); import placetune, sys; "
            "print(time.perf_counter() - t, time.process_time() - c, placetune.__file__, "
            "*[m for m in ('sqlalchemy', 'onnx', 'optuna') if m in sys.modules])")
    times, cpus, heavy = [], [], ""
    for _ in range(runs):
        _, _, out = _run(code_dir, ["-c", code], Path(code_dir))
        fields = out.split()
        times.append(float(fields[0]))
        cpus.append(float(fields[1]))  # the import's own CPU time (not the interpreter's start)
        assert fields[2].startswith(str(code_dir)), (fields[2], code_dir)  # the package under test
        heavy = " ".join(fields[3:])
    return {"wall": statistics.median(times), "cpu": statistics.median(cpus), "heavy": heavy}  # type: ignore[dict-item]


CASES = {
    "local": lambda a: (["--agent", "local", "--granularity", "fusion", "--trials", str(a.local_trials)], a.local_trials),
    "guided": lambda a: ([], 300),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", metavar="REV", help="git revision to compare with (its placetune and search)")
    ap.add_argument("--cases", default="local,guided,import", help="comma-separated: local, guided, import")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each command, alternating before/after")
    ap.add_argument("--local-trials", type=int, default=2000)
    ap.add_argument("--import-runs", type=int, default=9)
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    with tempfile.TemporaryDirectory() as old:
        trees = [("after", ROOT)]
        if args.before:
            extract(args.before, old, ("placetune", "search"))
            trees = [(f"before ({args.before})", Path(old)), ("after", ROOT)]
        for _, code in trees:  # both trees' bytecode compiled before anything is timed
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(code / "placetune"), str(code / "search")],
                           check=True, capture_output=True)
        rows = []
        for case in cases:
            results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
            for r in range(args.repeat):
                for label, code in trees:
                    if case == "import":
                        res = _import(code, args.import_runs)
                    else:
                        extra, trials = CASES[case](args)
                        res = _tune(code, extra, trials)
                    results[label].append(res)
                    print(f"{case:7s} run {r + 1} {label:22s} wall {res['wall']:8.3f} s  cpu {res['cpu']:8.3f} s"
                          + (f"  {res['trials'] / res['wall']:7.1f} trials/s wall  {res['trials'] / res['cpu']:7.1f}"
                             f" trials/s cpu  best {res['best_fps']:,.1f} fps (simulated)" if case != "import"
                             else f"  (import placetune: median of {args.import_runs}; loaded: {res['heavy'] or 'none of sqlalchemy, onnx, optuna'})"),
                          flush=True)
            rows.append((case, {label: min(v, key=lambda x: x["wall"]) for label, v in results.items()}))
    print()
    labels = [label for label, _ in trees]
    print("| case | figure | " + " | ".join(labels) + (" | after/before |" if len(labels) == 2 else " |"))
    print("|---|---|" + "---:|" * (len(labels) + (1 if len(labels) == 2 else 0)))
    for case, res in rows:
        figs = [("wall s", "wall", False), ("CPU s", "cpu", False)]
        if case != "import":
            figs += [("trials/s (wall)", "rate_wall", True), ("trials/s (CPU)", "rate_cpu", True)]
        for name, key, rate in figs:
            vals = []
            for label in labels:
                r = res[label]
                vals.append(r["trials"] / r["wall" if key == "rate_wall" else "cpu"] if rate else r[key])
            ratio = f" | {vals[1] / vals[0]:.2f}x" if len(vals) == 2 and vals[0] else ""
            print(f"| {case} | {name} | " + " | ".join(f"{v:,.3f}" if not rate else f"{v:,.1f}" for v in vals)
                  + ratio + " |")
    print("\n(best of --repeat runs by wall time; SIMULATED Jetson; machine shared: see the CPU figures)")


if __name__ == "__main__":
    main()
