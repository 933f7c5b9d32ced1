"""The README's custom-agent example runs, uses only public names and improves on all-GPU."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import placetune

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_agent.py"


def test_custom_agent_uses_only_the_public_api():
    tree = ast.parse(EXAMPLE.read_text())
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name) and n.value.id == "pt"}
    assert used and used <= set(placetune.__all__), used - set(placetune.__all__)
    assert len(EXAMPLE.read_text().splitlines()) <= 30


def test_custom_agent_runs_and_improves():
    out = subprocess.run([sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=True).stdout
    base, best = map(float, re.search(r"all-GPU ([\d.]+) mJ -> best ([\d.]+) mJ", out).groups())
    assert best < base and "simulated" in out


def test_every_example_run_as_a_script_prints_what_it_did():
    """`python examples/toy_agent.py` and `python examples/toy_backend.py` printed nothing: a researcher could
    not tell whether they worked. Each example a user runs as it is prints its result in a line."""
    forms = {
        "custom_agent.py": r"all-GPU [\d.]+ mJ -> best [\d.]+ mJ per inference \(simulated\).*",
        "toy_agent.py": r"toy agent: best ([\d,.]+) fps against all-GPU's ([\d,.]+) fps in 30 evaluations "
                        r"\(simulated\); \{'GPU': \d+, 'DLA0': \d+, 'DLA1': \d+\}",
        "toy_backend.py": r"toy backend: all-GPU [\d.]+ ms, all-DLA0 [\d.]+ ms \(made-up costs, marked simulated: True\)",
        "toy_objective.py": r"all-GPU p99 latency [\d.]+ ms \(simulated\)",
        "toy_platform.py": r"Toy Orin \(example: made-up figures\): devices GPU, DLA0; all-DLA0 [\d.]+ ms \(simulated\)",
    }
    # deploy_pipeline.py takes a study (tests/test_deploy.py runs it), train_maskable_ppo.py trains for minutes
    scripts = {p.name for p in EXAMPLE.parent.glob("*.py")} - {"deploy_pipeline.py", "train_maskable_ppo.py"}
    assert scripts == set(forms), scripts ^ set(forms)
    for name, form in forms.items():
        out = subprocess.run([sys.executable, str(EXAMPLE.parent / name)], capture_output=True, text=True,
                             check=True, timeout=300).stdout.strip()
        got = re.fullmatch(form, out)
        assert got, (name, out)
        if name == "toy_agent.py":  # steepest descent from all-GPU finds a better plan
            best, base = (float(x.replace(",", "")) for x in got.groups())
            assert best > base


def test_the_readme_agents_comparison_block_prints_what_the_readme_says(tmp_path):
    """README, Python API: an agent of one's own against the built-in ones at equal evaluations, each study
    in the store and in Optuna (a sampler object given to the ``optuna`` agent); the block runs as written
    and prints the lines the README shows. Copied into a fresh folder it failed with ``ModuleNotFoundError:
    toy_agent`` unless examples/ was on PYTHONPATH: it runs here from an empty folder with no PYTHONPATH,
    placetune imported from this checkout as ``pip install -e .`` makes it importable."""
    readme = (EXAMPLE.parents[1] / "README.md").read_text(encoding="utf-8")
    block, shown = re.search(r"```python\n(import optuna, placetune as pt\n.*?)```\n\nIt prints.*?```\n(.*?)```",
                             readme, re.S).groups()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    installed = f"import sys; sys.path.insert(0, {str(EXAMPLE.parents[1])!r})\n"  # the editable install's path
    out = subprocess.run([sys.executable, "-c", installed + block], capture_output=True, text=True, check=True,
                         timeout=300, cwd=tmp_path, env=env).stdout
    assert out == shown


def test_the_readme_block_that_reads_a_study_back_prints_what_the_readme_says(tmp_path):
    """README, Python API: a study read back from its database in another process, failed builds with their
    status and reason, the others with where their layers ran; the block runs as written."""
    readme = (EXAMPLE.parents[1] / "README.md").read_text(encoding="utf-8")
    block, shown = re.search(r"```python\n(from collections import Counter\n.*?store = pt\.Store\(.*?)```\n\n"
                             r"It prints.*?```\n(.*?)```", readme, re.S).groups()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(EXAMPLE.parents[1]), str(EXAMPLE.parent)])}
    out = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, check=True, timeout=300,
                         cwd=tmp_path, env=env).stdout
    assert out == shown
    assert "infeasible" in out and "GPU fallback is off" in out
