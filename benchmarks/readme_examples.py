"""The output the README shows under its Python API examples, written from runs of them.

Four examples in README.md are each followed by "It prints" and what they print: the custom agent
(``examples/custom_agent.py``), the agents comparison (an agent of one's own against the built-in ones,
``import optuna, placetune as pt``), the read-back example (``from collections import Counter``, a study
read back with ``pt.Store``) and the Gymnasium episode (``import gymnasium as gym, placetune``; its output
is quoted in the line). ``tests/test_examples.py`` runs the agents and read-back blocks as written and
compares. This runs each block the same way (a fresh folder each; the agents block without PYTHONPATH, this
checkout first on ``sys.path`` as ``pip install -e .`` puts it; the others with the checkout and
``examples/`` on PYTHONPATH) and writes what it prints in its place. ``--check`` exits 1 when the README
differs from the runs.

    python benchmarks/readme_examples.py [--write | --check]

Every figure is simulated. The four runs take about a minute on a quiet 2-core machine.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme_args import write_or_check  # noqa: E402 - beside this script

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: (name, the block's first line, a pattern its body holds, whether it runs with PYTHONPATH unset, whether its
#: output is quoted in the "It prints" line rather than in a fenced block under it)
EXAMPLES = (("custom agent", '"""A custom search agent', "", False, False),
            ("agents comparison", "import optuna, placetune as pt", "", True, False),
            ("read-back", "from collections import Counter", r"store = pt\.Store\(.*?", False, False),
            ("Gymnasium episode", "import gymnasium as gym, placetune", "", False, True))


def _pattern(first: str, body: str, inline: bool) -> re.Pattern:
    """The example's code block, the "It prints" prose and its output, as three groups."""
    code = rf"(```python\n{re.escape(first)}.*?{body})```\n\n"
    return re.compile(code + (r"(It prints `)([^`]*)`" if inline else r"(It prints.*?```\n)(.*?)```"), re.S)


def run(code: str, clean: bool, cwd: Path) -> str:
    """The standard output of ``code`` run as the test runs it, in the fresh folder ``cwd``."""
    if clean:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        code = f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + code
    else:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "examples")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=600,
                         cwd=cwd, env=env)
    if out.returncode != 0:
        raise SystemExit(f"the example exited {out.returncode}: {out.stderr.strip()[-800:]}")
    return out.stdout


def main(argv: list[str] | None = None) -> int:
    args = write_or_check(__doc__.splitlines()[0], "outputs", argv)
    text = README.read_text(encoding="utf-8")
    stale = False
    for name, first, body, clean, inline in EXAMPLES:
        pat = _pattern(first, body, inline)
        m = pat.search(text)
        if m is None:
            raise SystemExit(f"README.md has no {name} example (a ```python block from {first!r} and 'It prints')")
        if "```" in m.group(1)[3:]:
            raise SystemExit(f"README.md's {name} block is not followed by 'It prints'; has its wording changed?")
        with tempfile.TemporaryDirectory() as t:
            out = run(m.group(1)[len("```python\n"):], clean, Path(t))
        if inline:
            out = out.strip()
        print(f"{name}:\n{out}")
        if out != m.group(3):
            stale = True
            print(f"README.md's {name} output differs from the run")
            text = text[:m.start(3)] + out + text[m.end(3):]
    if stale and args.write:
        README.write_text(text, encoding="utf-8")
        print("rewrote README.md's example outputs")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
