"""The package's shape, checked by a plain AST walk: no module over 600 lines, no import
cycle (imports inside functions count too), lower layers never import higher ones, and
``import placetune`` loads none of the heavy optional packages (nor SQLAlchemy, ONNX or the modules
that use them: its names are imported on first use)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("placetune", "search")
MAX_LINES = 600

#: layer -> the top-level parts of placetune it may import (besides itself and the core modules)
CORE = {"placetune.errors", "placetune.measurement", "placetune.settings", "placetune.version",
        "placetune.validate", "placetune.safetext", "placetune.files", "placetune.files.read",
        "placetune.files.write", "placetune.files.names", "placetune.files.folder"}
LAYERS = {
    "placetune.model": set(),
    "placetune.hardware": {"placetune.model"},
    "placetune.placement": {"placetune.model", "placetune.hardware"},
}


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the checked packages: dotted name -> file."""
    out = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> modules it imports explicitly (at any depth of the file, functions included;
    ``if TYPE_CHECKING:`` blocks excluded: they never run)."""
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skip.update(id(n) for b in node.body for n in ast.walk(b))
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = pkg.split(".")[: len(pkg.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                found = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                if len(found) < len(node.names) and target in mods:
                    found.append(target)
                edges.update(found)
            elif isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in mods)
        edges.discard(name)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state:
                cyc = visit(n)
                if cyc:
                    return cyc
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state:
            cyc = visit(m)
            if cyc:
                return cyc
    return None


def test_no_module_over_600_lines():
    big = {str(p.relative_to(ROOT)): n for p in modules().values()
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def test_no_import_cycle():
    cycle = find_cycle(import_graph(modules()))
    assert cycle is None, " -> ".join(cycle)


def test_lower_layers_never_import_higher_ones():
    graph = import_graph(modules())
    bad = []
    for mod, targets in graph.items():
        for layer, allowed in LAYERS.items():
            if mod == layer or mod.startswith(layer + "."):
                for t in targets:
                    if not t.startswith("placetune.") or t in CORE or t == layer or t.startswith(layer + "."):
                        continue
                    if not any(t == a or t.startswith(a + ".") for a in allowed):
                        bad.append(f"{mod} -> {t}")
    assert not bad, bad


def test_every_module_says_what_it_is_for():
    missing = [name for name, path in modules().items()
               if not ast.get_docstring(ast.parse(path.read_text()))]
    assert not missing, missing


def test_the_checks_catch_a_cycle_and_a_long_module(tmp_path):
    pkg = tmp_path / "placetune"
    pkg.mkdir()
    (tmp_path / "search").mkdir()
    (pkg / "__init__.py").write_text('"""p."""\n')
    (pkg / "a.py").write_text('"""a."""\ndef f():\n    from placetune import b\n')
    (pkg / "b.py").write_text('"""b."""\nfrom .a import f\n' + "x = 1\n" * 700)
    mods = modules(tmp_path)
    assert find_cycle(import_graph(mods)) in (["placetune.a", "placetune.b", "placetune.a"],
                                             ["placetune.b", "placetune.a", "placetune.b"])
    assert len(mods["placetune.b"].read_text().splitlines()) > MAX_LINES


@pytest.mark.parametrize("heavy", ["tensorrt", "pycuda", "matplotlib", "optuna", "sqlalchemy", "onnx",
                                   "placetune.model.model", "placetune.tuning.evaluator"])
def test_import_placetune_stays_light(heavy):
    code = f"import sys, placetune; print({heavy!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_every_public_name_is_there_on_first_use():
    """``import placetune`` imports its names on first use: each one is its module's object."""
    code = ("import importlib, placetune as pt\n"
            "for name in pt.__all__:\n"
            "    value = getattr(pt, name)\n"
            "    where = pt._LAZY.get(name)\n"
            "    if where:\n"
            "        module, colon, attr = where.partition(':')\n"
            "        m = importlib.import_module(module)\n"
            "        assert value is (m if colon and not attr else getattr(m, attr or name)), name\n"
            "assert set(pt.__all__) <= set(dir(pt)) and 'Evaluator' in vars(pt)\n"
            "from placetune import Store, runtime, load_plan\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
