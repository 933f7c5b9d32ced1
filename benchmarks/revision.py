"""A benchmark's own functions run against the placetune package of another git revision (``--before REV``)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def extract(rev: str, dest: str | Path, paths: tuple[str, ...] = ("placetune",)) -> Path:
    """Git revision ``rev``'s ``paths`` (packages of this repository) extracted under ``dest``;
    put ``dest`` first on ``sys.path`` (or ``PYTHONPATH``) to run that revision's code."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *paths], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return Path(dest)


def run_at_revision(rev: str, script: str | Path, call: str) -> Any:
    """The JSON value of ``call``, evaluated in a subprocess whose ``placetune`` is git revision ``rev``'s.

    ``call`` is an expression on ``b``, the benchmark module ``script`` as it is in this tree
    (so old and new code are timed by the same benchmark code). The revision's package is
    extracted to a temporary directory that comes first on ``sys.path``; the script is copied
    to its ``benchmarks/`` so that a script putting its parent's parent on ``sys.path`` finds it too.
    """
    with tempfile.TemporaryDirectory() as tmp:
        extract(rev, tmp)
        copy = Path(tmp) / "benchmarks" / Path(script).name
        copy.parent.mkdir()
        copy.write_text(Path(script).read_text())
        code = (f"import sys, json; sys.path.insert(0, {tmp!r}); sys.argv = ['x'];"
                f"import importlib.util as u; s = u.spec_from_file_location('b', {str(copy)!r});"
                f"b = u.module_from_spec(s); s.loader.exec_module(b);"
                f"print(json.dumps({call}))")
        res = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=tmp)
    return json.loads(res.stdout.strip().splitlines()[-1])
