"""``Measurement.extra`` has a declared set of keys (:class:`placetune.measurement.Extra`): every key the
code reads or writes by name is one of them, and an unknown key is an error in the tests (a misspelt
key would otherwise read as a silent None)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from placetune import measurement
from placetune.measurement import EXTRA_KEYS, Extra, Measurement, check_extra

ROOT = Path(__file__).resolve().parents[1]
#: ``SearchResult.extra`` (search/base.py), a different dict that is also called ``extra``
SEARCH_RESULT_KEYS = {"lower_bound", "dp_latency_ms", "study_name", "method"}
_BY_NAME = re.compile(r"""extra(?:\.get\(|\.setdefault\(|\.pop\(|\[)\s*["']([A-Za-z0-9_]+)["']""")


def _literal_keys(node: ast.AST | None) -> list[str]:
    if isinstance(node, ast.Dict):
        return [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
        return [kw.arg for kw in node.keywords if kw.arg]
    return []


def _named_keys() -> dict[str, list[str]]:
    """key -> places, for every ``extra[...]``, ``extra.get/setdefault/pop(...)``,
    ``extra.update(key=...)`` and dict literal given as ``extra`` in placetune/ and search/."""
    found: dict[str, list[str]] = {}
    for pkg in ("placetune", "search"):
        for path in sorted((ROOT / pkg).rglob("*.py")):
            text = path.read_text()
            for k in _BY_NAME.findall(text):
                found.setdefault(k, []).append(path.relative_to(ROOT).as_posix())
            for node in ast.walk(ast.parse(text)):
                literal = None  # extra = {...}, extra: ... = dict(...), m.extra = {...}, extra={...}
                if isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    if any(isinstance(t, ast.Name) and t.id == "extra" or isinstance(t, ast.Attribute)
                           and t.attr == "extra" for t in targets):
                        literal = node.value
                elif isinstance(node, ast.keyword) and node.arg == "extra":
                    literal = node.value
                for k in _literal_keys(literal):
                    found.setdefault(k, []).append(path.relative_to(ROOT).as_posix())
                if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
                        and isinstance(node.func.value, ast.Name) and node.func.value.id == "extra"):
                    for kw in node.keywords:
                        if kw.arg:
                            found.setdefault(kw.arg, []).append(path.relative_to(ROOT).as_posix())
    return found


def test_every_key_the_code_names_is_declared():
    named = _named_keys()
    unknown = {k: v for k, v in named.items()
               if k not in EXTRA_KEYS and k not in SEARCH_RESULT_KEYS and not k.startswith("_")}
    assert not unknown, f"undeclared Measurement.extra keys (add them to placetune.measurement.Extra): {unknown}"
    assert {"busy_ms", "period_ms", "replicas", "notes", "cache_hit", "realized_vs_predicted", "boundaries",
            "segments"} <= set(named)


def test_an_unknown_key_is_refused_where_strict_and_allowed_otherwise(monkeypatch):
    assert measurement.STRICT_EXTRA  # tests/conftest.py turns it on for every test
    with pytest.raises(ValueError, match=r"unknown Measurement.extra key\(s\) 'busy_msec'"):
        Measurement("ok", latency_samples_ms=[1.0], extra={"busy_msec": {"GPU": 1.0}})
    ok: Extra = {"busy_ms": {"GPU": 1.0}, "notes": ["n"]}
    m = Measurement("ok", latency_samples_ms=[1.0], extra={**ok, "x_mine": 1, "_id": 3})
    assert m.objective("gpu_time") == 1.0
    monkeypatch.setattr(measurement, "STRICT_EXTRA", False)  # outside the tests: kept, never raised
    check_extra({"busy_msec": 1})
    assert Measurement.from_dict({"status": "ok", "latency_samples_ms": [1.0], "bogus": 2}).extra == {"bogus": 2}
