"""Golden test: the embedded default tune (``placetune tune``) prints the same trial lines.

The file ``tests/data/golden/default_tune_trials.txt`` holds the ``trial=`` lines of the default tune
(everything but ``elapsed_s``, which is wall time): 37 of its budget's 300, the guided agent stopping once nothing
it could build can change its answer (``stop_when_settled``, the default; the 37 are the first 37 of the 300 that
``--no-stop-when-settled`` prints). A refactor keeps them to the character. A change that means
to alter what the search does (a new agent rule, a simulator change) regenerates the file in its own commit,
saying why the lines moved:

    cd "$(mktemp -d)" && placetune tune | grep '^trial=' | sed -E 's/ elapsed_s=[0-9.]+//' \
        > /path/to/tests/data/golden/default_tune_trials.txt

The same run checks README.md's table of the default tune's figures (trials run, best plan, simulated device
time), which ``python benchmarks/readme_figures.py --write`` writes from a run: a change that regenerates the
golden file runs it too (it also writes the ``--no-stop-when-settled`` row, which only its ``--check`` checks).
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = Path(__file__).parent / "data" / "golden" / "default_tune_trials.txt"
_spec = importlib.util.spec_from_file_location("readme_figures", ROOT / "benchmarks" / "readme_figures.py")
figures = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = figures
_spec.loader.exec_module(figures)


@pytest.fixture(scope="module")
def default_tune(tmp_path_factory) -> str:
    """The standard output of ``placetune tune`` with no argument, run once for the tests of this file."""
    run = subprocess.run([sys.executable, "-m", "placetune.cli", "tune"], cwd=tmp_path_factory.mktemp("default"),
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    return run.stdout


@pytest.mark.slow
def test_the_default_tune_prints_the_golden_trial_lines(default_tune):
    got = [re.sub(r" elapsed_s=[0-9.]+", "", x) for x in default_tune.splitlines() if x.startswith("trial=")]
    want = GOLDEN.read_text().splitlines()
    assert len(want) == 37
    # the first 50 first, so a failure names the earliest line that moved
    for i, (g, w) in enumerate(zip(got[:50], want[:50]), 1):
        assert g == w, f"trial line {i} moved:\n got  {g}\n want {w}"
    assert got == want


@pytest.mark.slow
def test_the_readme_states_the_default_tunes_figures(default_tune):
    label, extra = figures.RUNS[0]
    assert extra == ()
    table = figures.current(figures.README.read_text(encoding="utf-8")).splitlines()
    want = figures.row(label, default_tune)
    assert want in table, (f"README.md's default tune row differs from the run: run "
                           f"python benchmarks/readme_figures.py --write\n got  {want}\n README {table[2]}")
    base = figures.figures(default_tune)["all_gpu_fps"]
    assert f"all-GPU runs at {base} fps" in "\n".join(table)


SUMMARY = """what will run: model resnet50, ..., budget 300 trials, backend simulate
summary (SIMULATED): 36 trials, 36 measured in this run, 0 cache hits, 0 failures
simulated device time (builds and timing on a Jetson): 59 min for this run's 36 measurements; 49 min of it after \
the study converged at trial 5
placement                   latency ms throughput fps  energy mJ  vs all-GPU
all-GPU                          0.852        2,347.5     31.523  baseline
best found                       1.570        3,412.9     23.905  1.45x faster
"""


def test_the_readme_table_is_parsed_from_the_summary_and_replaced_in_place():
    f = figures.figures(SUMMARY)
    assert (f["trials"], f["budget"], f["converged"], f["best_fps"], f["gain"], f["all_gpu_fps"], f["device"],
            f["device_after"]) == ("36", "300", "5", "3,412.9", "1.45x faster", "2,347.5", "59 min", "49 min")
    body = figures.block([SUMMARY, SUMMARY])
    text = "x\n<!-- begin generated: default tune -->\nold\n<!-- end generated: default tune -->\ny\n"
    new = figures.render(text, body)
    assert figures.current(new) == body and new.startswith("x\n") and new.endswith("-->\ny\n")
    with pytest.raises(SystemExit, match="wording"):
        figures.figures(SUMMARY.replace("summary (SIMULATED)", "totals"))


@pytest.mark.slow
def test_the_readmes_excerpt_of_the_first_command_is_what_it_prints(default_tune):
    """The README's first screen shows an excerpt of what ``placetune tune`` prints: each of its lines is one
    the default tune prints ("..." stands for the lines left out)."""
    readme = figures.README.read_text(encoding="utf-8")
    excerpt = readme.split("The first command prints", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    printed = set(default_tune.splitlines())
    lines = [x for x in excerpt.splitlines() if x != "..."]
    assert len(lines) >= 8 and all(x in printed for x in lines), [x for x in lines if x not in printed]
