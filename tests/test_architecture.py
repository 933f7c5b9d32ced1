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
        "placetune.files.write", "placetune.files.names", "placetune.files.folder", "placetune.files.kind", "placetune._lazy",
        "placetune.caches"}
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
    """module -> modules it imports explicitly (at any depth of the file: functions and ``if TYPE_CHECKING:``
    blocks included, since a type-only import is a dependency too), and the modules it names in
    ``lazy_import("...")`` calls (:mod:`placetune._lazy`: imported on first use, a dependency all the same)."""
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(tree):
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
            elif (isinstance(node, ast.Call) and isinstance(node.func, (ast.Name, ast.Attribute))
                  and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr) == "lazy_import"
                  and node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value in mods):
                edges.add(node.args[0].value)
        edges.discard(name)
        graph[name] = edges
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import cycles of a graph: each set of modules that import one another, directly or not
    (its strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(m: str) -> None:
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for n in sorted(graph.get(m, ())):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in on_stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            part = set()
            while True:
                n = stack.pop()
                on_stack.discard(n)
                part.add(n)
                if n == m:
                    break
            if len(part) > 1:
                out.append(frozenset(part))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return out


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
    cycles = sorted(sorted(c) for c in import_cycles(import_graph(modules())))
    assert not cycles, f"import cycles: {cycles}"


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
    (pkg / "c.py").write_text('"""c."""\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from placetune import d\n')
    (pkg / "d.py").write_text('"""d."""\nfrom placetune._lazy import lazy_import\nc = lazy_import("placetune.c")\n')
    mods = modules(tmp_path)
    assert find_cycle(import_graph(mods)) in (["placetune.a", "placetune.b", "placetune.a"],
                                             ["placetune.b", "placetune.a", "placetune.b"])
    assert set(import_cycles(import_graph(mods))) == {frozenset({"placetune.a", "placetune.b"}),
                                                      frozenset({"placetune.c", "placetune.d"})}
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


def test_lazy_import_imports_on_first_use():
    code = ("import sys\n"
            "from placetune._lazy import lazy_import\n"
            "m = lazy_import('placetune.tuning.evaluator')\n"
            "assert 'placetune.tuning.evaluator' not in sys.modules\n"
            "assert m.Evaluator is sys.modules['placetune.tuning.evaluator'].Evaluator\n"
            "missing = lazy_import('no_such_module_here')\n"
            "try:\n"
            "    missing.anything\n"
            "except ModuleNotFoundError:\n"
            "    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
