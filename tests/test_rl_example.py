"""examples/train_maskable_ppo.py: MaskablePPO learns a pipeline placement that beats all-GPU, says what it cost,
and compares it with best-of-N random at equal evaluations.

The training test needs the ``rl`` extra (sb3-contrib, torch), which CI installs; without it the
test is skipped and the example says what to install.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_maskable_ppo.py"


def _load_example():
    spec = importlib.util.spec_from_file_location("train_maskable_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_says_what_it_needs_without_sb3_contrib() -> None:
    if importlib.util.find_spec("sb3_contrib") is not None:
        pytest.skip("sb3-contrib is installed: the example runs (see the training test)")
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--timesteps", "64"], capture_output=True, text=True)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == 'this example needs sb3-contrib and torch: pip install -e ".[rl]"'


@pytest.mark.slow
def test_maskable_ppo_beats_all_gpu_and_prints_the_comparison_with_guided(capsys) -> None:
    pytest.importorskip("sb3_contrib", reason="the rl extra is not installed (pip install -e '.[rl]')")
    figures = _load_example().main(["--timesteps", "4096", "--seed", "0", "--guided-budget", "4"])
    out = capsys.readouterr().out
    assert "SIMULATED" in out
    # What it printed is what it learned: the learned placement against all-GPU...
    learned = float(re.search(r"learned placement: .+ = ([\d.]+)x all-GPU's throughput \(\d[\d.]*x faster\)", out).group(1))
    assert learned == pytest.approx(figures["gain"], abs=5e-4)
    # ...beats all-GPU by at least the worst seed's margin. This bound was 1.08, seed 0's own figure on the
    # simulated device before its power-mode refit (seeds 0-9 then: 1.03x to 1.15x); on the refit device
    # seed 0 is the worst of ten (python benchmarks/bench_rl.py --seeds 10 --episodes 315 --designs
    # stages,yolov8n,free --jobs 16: 1.040x to 1.125x, median 1.089x), so the bound is the worst seed
    # documented before the refit
    assert figures["gain"] >= 1.03
    # The median random placement is slower than all-GPU...
    best, n, median = re.search(r"best-of-(\d+) random \(the untrained policy.+\): best ([\d.]+)x all-GPU's throughput, "
                                r"median ([\d.]+)x", out).group(2, 1, 3)
    assert float(median) < 1.0 < figures["gain"]
    # ...but the comparison that counts is with random's best at equal evaluations (as many episodes as the
    # training played), and the verdict printed is the one its figures give.
    assert int(n) == figures["episodes"] == figures["random_episodes"]
    assert float(best) == pytest.approx(figures["random_best"], abs=5e-4)
    verdict = re.search(r"at equal evaluations the learned placement (beats|matches|does not reach) random's best",
                        out).group(1)
    gain, rbest = figures["gain"], figures["random_best"]
    assert verdict == ("beats" if gain > rbest * (1 + 1e-9) else "matches" if gain >= rbest * (1 - 1e-9)
                       else "does not reach")
    # The cost is stated: environment steps, episodes (one evaluation each) and distinct builds.
    steps, episodes, builds = (int(x.replace(",", "")) for x in re.search(
        r"MaskablePPO: ([\d,]+) environment steps = ([\d,]+) episodes, each one evaluation; ([\d,]+) distinct",
        out).groups())
    assert steps == 4096 and episodes == 4096 // 13 and 1 < builds <= episodes + 1
    # And the guided agent's evaluations for the same throughput, next to it.
    guided = re.search(r"guided agent: ([\d.]+)x all-GPU's throughput \(.+?\) after (\d+) evaluations .*reached the learned [\d.]+x at "
                       r"evaluation (\d+)", out)
    assert guided is not None, out
    assert float(guided.group(1)) >= figures["gain"] and int(guided.group(3)) <= 4 < episodes


@pytest.mark.slow
def test_a_short_training_says_one_build_not_one_builds(capsys) -> None:
    """A 2,048-step training printed "training first played a placement this good at episode 1 (step 13,
    1 builds)"."""
    pytest.importorskip("sb3_contrib", reason="the rl extra is not installed (pip install -e '.[rl]')")
    _load_example().main(["--timesteps", "2048", "--seed", "0", "--guided-budget", "2"])
    out = capsys.readouterr().out
    assert "(step 13, 1 build)" in out, out
    assert not re.search(r"\b1 (builds|evaluations)\b", out), out
