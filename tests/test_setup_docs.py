"""The README's set-up commands, CI and the constraints file agree: separate venvs, one test
command, every dependency pinned, both CUDA bindings named."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]


def _setup_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("**Set up**", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [x for x in block.splitlines() if x.strip() and not x.startswith("#")]


def _name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_the_two_setup_commands_use_venvs_of_their_own():
    """Both commands created .venv, so the second was not a fresh install."""
    commands = _setup_commands()
    assert len(commands) == 2
    venvs = [re.search(r"python3 -m venv (\S+) && \. (\S+)/bin/activate", c).groups() for c in commands]
    assert all(made == used for made, used in venvs) and venvs[0][0] != venvs[1][0], venvs


def test_ci_runs_the_readme_test_command_with_the_constraints():
    test_command = _setup_commands()[1].split("/bin/activate && ", 1)[1]
    assert "-c constraints.txt" in test_command and "pytest" in test_command
    ci = (ROOT / ".ci" / "run").read_text()
    ci_command = next(x for x in ci.splitlines() if "pytest" in x and not x.startswith("#"))
    assert ci_command.replace("pip install -q ", "pip install ") == test_command


def test_constraints_pin_every_dependency_of_the_tested_install():
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[A-Za-z0-9_.-]+==[\w.+-]+(; python_version >= \"3\.\d+\")?", line), line
            pins[_name(line)] = line
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = {_name(r) for r in project["dependencies"] + extras["test"] + extras["report"] + extras["rl"]
              if "python_version <" not in r}
    assert wanted <= set(pins), wanted - set(pins)


def test_the_jetson_extras_name_both_cuda_bindings():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {_name(r) for r in extras["jetson"]} == {"cuda-python"}  # module cuda.bindings (cuda.cuda before 12.6)
    assert [_name(r) for r in extras["jetson-pycuda"]] == ["pycuda"]


def test_the_jetson_extras_pin_cuda_python_per_jetpack():
    """cuda-python 13 needs a CUDA 13 driver (580+): an unpinned `jetson` extra broke JetPack 6 (CUDA 12.x).
    Each JetPack's own extra, and `jetson` by the system Python of each JetPack (6: 3.10, 7: 3.12)."""
    from packaging.requirements import Requirement

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert [str(Requirement(r).specifier) for r in extras["jetson-jp6"]] == ["<13,>=12"]
    assert [str(Requirement(r).specifier) for r in extras["jetson-jp7"]] == [">=13"]
    for python, wanted in (("3.10", "12.6.2"), ("3.12", "13.0.1")):
        picked = [Requirement(r) for r in extras["jetson"]
                  if Requirement(r).marker.evaluate({"python_version": python})]
        assert len(picked) == 1 and picked[0].specifier.contains(wanted), (python, picked)
    template = (ROOT / "studies" / "jetson-overnight.toml").read_text()
    assert ".[jetson-jp6]" in template and ".[jetson-jp7]" in template


def test_ci_installs_the_rl_extra_so_the_rl_example_is_tested():
    """Without the rl extra the RL example's test skips, and nothing checks that it beats all-GPU."""
    ci = [x for x in (ROOT / ".ci" / "run").read_text().splitlines() if not x.startswith("#")]
    assert any(re.search(r'pip install -q (--no-compile )?-c constraints\.txt -e "\.\[rl(,test)?\]"', x) for x in ci)


def test_the_jetpack_5_steps_build_pycuda_against_apt_numpy_with_headers():
    """pycuda builds from source on JetPack 5's Python 3.8: it needs Python.h (python3-dev), and
    numpy 1.17.4 has no aarch64 wheel for Python 3.8 on PyPI (`pip download --platform
    manylinux2014_aarch64 --python-version 3.8 --only-binary=:all: numpy==1.17.4` finds none; the
    first is 1.19.0), so it comes from apt (python3-numpy), never from pip."""
    readme = (ROOT / "README.md").read_text()
    jp5 = readme.split("### JetPack 5.1", 1)[1].split("### JetPack 6", 1)[0]
    apt = next(x for x in jp5.splitlines() if x.startswith("sudo apt-get install"))
    assert "python3-dev" in apt and "python3-numpy" in apt
    assert "numpy==" not in readme.split("## On a Jetson", 1)[1].split("## Python API", 1)[0]


def test_every_environment_variable_the_docs_name_is_read():
    """The README told to set PLACETUNE_FUZZ_RANDOM=1 for random seeds, a variable nothing reads
    (the fuzz suite draws a fresh seed every run and replays one with PLACETUNE_FUZZ_SEED)."""
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    named = {v for p in docs for v in re.findall(r"\bPLACETUNE_[A-Z0-9_]+\b", p.read_text())}
    code = "\n".join(p.read_text(errors="replace") for folder in ("placetune", "search", "tests")
                     for p in (ROOT / folder).rglob("*") if p.suffix in (".py", ".sh") and p.is_file()
                     and p.name != "test_setup_docs.py")
    unread = sorted(v for v in named if v not in code)
    assert not unread, f"the docs name environment variables nothing reads: {unread}"
