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
    assert [_name(r) for r in extras["jetson"]] == ["cuda-python"]  # module cuda.bindings (cuda.cuda before 12.6)
    assert [_name(r) for r in extras["jetson-pycuda"]] == ["pycuda"]


def test_ci_installs_the_rl_extra_so_the_rl_example_is_tested():
    """Without the rl extra the RL example's test skips, and nothing checks that it beats all-GPU."""
    ci = [x for x in (ROOT / ".ci" / "run").read_text().splitlines() if not x.startswith("#")]
    assert any(re.search(r'pip install -q -c constraints\.txt -e "\.\[rl\]"', x) for x in ci)
