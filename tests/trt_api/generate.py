#!/usr/bin/env python3
"""Generate the TensorRT API tables the test doubles enforce (tests/trt_api/tensorrt-<ver>.json).

The tables hold names and call shapes only (no NVIDIA code), read from TensorRT's own sources:

* the pybind11 bindings ``python/src/**/*.cpp`` (classes, their bases and constructors, methods
  with argument names and which have defaults, properties and whether they can be set, enums and
  their members, module functions and attributes) plus the Python package ``__init__.py`` that
  wraps them (``nptype``, ``volume``, ``__version__`` ...);
* trtexec's ``samples/common/sampleOptions.cpp`` (every option the parse functions that
  ``AllOptions::parse`` runs accept, and those its help text lists) and the refusals found in
  ``samples/common/sampleEngines.cpp`` / ``samples/trtexec/trtexec.cpp``;
* optionally onnx-tensorrt (the ONNX parser): the base names it gives the helper layers it adds.

Usage (the mirrors are bare git directories, e.g. from the ``fetch`` tool)::

    python tests/trt_api/generate.py --trt /work/.mirror/NVIDIA+TensorRT/repo \
        --onnx-trt /work/.mirror/onnx+onnx-tensorrt/repo

Versions: 8.5, 8.6, 10.3, 10.16 (branches ``release/<ver>``) and the newest ``release/11.*`` branch
(or the newest release branch when the mirror has no 11.x; the table says which it used).
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRT_REPO = "https://github.com/NVIDIA/TensorRT"
ONNX_TRT_REPO = "https://github.com/onnx/onnx-tensorrt"
#: the macros the bindings are compiled with for the full ``tensorrt`` package on Linux
MACROS = {"EXPORT_ALL_BINDINGS": 1, "ENABLE_INETWORK_SERIALIZE": 0, "PYBIND11_VERSION_MAJOR": 2,
          "PYBIND11_VERSION_MINOR": 13, "_WIN32": None, "WIN32": None, "WIN32_LEAN_AND_MEAN": None}


# ------------------------------------------------------------------------------ git
class Git:
    def __init__(self, git_dir: str) -> None:
        self.git_dir = git_dir

    def __call__(self, *args: str) -> str:
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], check=True, capture_output=True,
                              text=True, errors="replace").stdout

    def show(self, ref: str, path: str) -> str | None:
        try:
            return self("show", f"{ref}:{path}")
        except subprocess.CalledProcessError:
            return None

    def files(self, ref: str, under: str) -> list[str]:
        return self("ls-tree", "-r", "--name-only", ref, *([under] if under else [])).split()

    def sha(self, ref: str) -> str:
        return self("rev-parse", ref).strip()

    def has(self, ref: str) -> bool:
        try:
            self("cat-file", "-e", ref + "^{commit}")
            return True
        except subprocess.CalledProcessError:
            return False

    def branches(self) -> list[str]:
        return self("for-each-ref", "--format=%(refname:short)", "refs/heads").split()


def _vkey(text: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", text))


# ------------------------------------------------------------------------------ C++ text
def preprocess(text: str) -> str:
    """Drop comments, keep only the lines active under :data:`MACROS`, drop directives."""
    text = strip_comments(text)
    out, stack = [], []  # stack of (active, taken)
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):  # continued directive or macro
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i]
        i += 1
        s = line.strip()
        m = re.match(r"#\s*(\w+)\s*(.*)", s)
        active = all(a for a, _ in stack)
        if not m:
            out.append(line if active else "")
            continue
        kw, rest = m.group(1), m.group(2)
        if kw in ("if", "ifdef", "ifndef"):
            val = {"if": lambda: _eval_cond(rest), "ifdef": lambda: MACROS.get(rest.strip()) is not None,
                   "ifndef": lambda: MACROS.get(rest.strip()) is None}[kw]()
            stack.append((val, val))
        elif kw == "elif":
            _, taken = stack.pop()
            val = (not taken) and _eval_cond(rest)
            stack.append((val, taken or val))
        elif kw == "else":
            _, taken = stack.pop()
            stack.append((not taken, True))
        elif kw == "endif":
            stack.pop()
        out.append("")
    return "\n".join(out)


def _eval_cond(expr: str) -> bool:
    expr = re.sub(r"//.*", "", expr)
    expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                  lambda m: "1" if MACROS.get(m.group(1) or m.group(2)) is not None else "0", expr)
    expr = re.sub(r"[A-Za-z_]\w*", lambda m: str(MACROS.get(m.group(0)) or 0), expr)
    expr = expr.replace("&&", " and ").replace("||", " or ").replace("!", " not ").replace(" not =", "!=")
    return bool(eval(expr, {"__builtins__": {}}))  # noqa: S307 - digits and operators only


def strip_comments(text: str) -> str:
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "/" and text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and text.startswith("/*", i):
            j = text.find("*/", i + 2)
            out.append(" " if j < 0 else "\n" * text.count("\n", i, j))
            i = n if j < 0 else j + 2
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            if end < 0:
                out.append(c)
                i += 1
                continue
            end += len(m.group(1)) + 2
            out.append(text[i:end])
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<raw>R"(?P<delim>[^(\s]*)\(.*?\)(?P=delim)")
  | (?P<str>"(?:\\.|[^"\\\n])*")(?P<suffix>_a\b)?
  | (?P<chr>'(?:\\.|[^'\\\n])*')
  | (?P<num>\.?\d[\w.']*)
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op>::|->|<<|&&|\|\||[-+*/%=!<>]=|\S)
""", re.S | re.X)


class Tok:
    __slots__ = ("kind", "text", "value")

    def __init__(self, kind: str, text: str, value: str | None = None) -> None:
        self.kind, self.text, self.value = kind, text, value

    def __repr__(self) -> str:
        return f"{self.kind}:{self.text}"


def tokenize(text: str) -> list[Tok]:
    toks = []
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        if m.group("ws"):
            continue
        if m.group("str") is not None:
            value = _unescape(m.group("str")[1:-1])
            toks.append(Tok("argname" if m.group("suffix") else "str", m.group(0), value))
        elif m.group("raw"):
            toks.append(Tok("str", m.group(0), ""))
        else:
            kind = next(k for k in ("chr", "num", "id", "op") if m.group(k) is not None)
            toks.append(Tok(kind, m.group(0)))
    return toks


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


OPEN, CLOSE = {"(": ")", "{": "}", "[": "]"}, {")", "}", "]"}


def match_close(toks: list[Tok], i: int) -> int:
    """Index of the bracket closing ``toks[i]``."""
    depth = 0
    for j in range(i, len(toks)):
        t = toks[j].text
        if toks[j].kind == "op" and t in OPEN:
            depth += 1
        elif toks[j].kind == "op" and t in CLOSE:
            depth -= 1
            if depth == 0:
                return j
    raise ValueError("unbalanced brackets")


def match_angle(toks: list[Tok], i: int) -> int:
    """Index of the ``>`` closing the template ``<`` at ``toks[i]``."""
    depth = 0
    j = i
    while j < len(toks):
        t = toks[j]
        if t.kind == "op":
            if t.text == "<":
                depth += 1
            elif t.text == ">":
                depth -= 1
                if depth == 0:
                    return j
            elif t.text in OPEN:
                j = match_close(toks, j)
        j += 1
    raise ValueError("unbalanced template")


def split_args(toks: list[Tok]) -> list[list[Tok]]:
    """Split the tokens between brackets at top-level commas (template arguments kept whole)."""
    args, cur, depth, angle = [], [], 0, 0
    for k, t in enumerate(toks):
        if t.kind == "op":
            if t.text in OPEN:
                depth += 1
            elif t.text in CLOSE:
                depth -= 1
            elif depth == 0 and t.text == "<" and k > 0 and toks[k - 1].kind == "id":
                angle += 1
            elif depth == 0 and t.text == ">" and angle > 0:
                angle -= 1
            elif depth == 0 and angle == 0 and t.text == ",":
                args.append(cur)
                cur = []
                continue
        cur.append(t)
    if cur:
        args.append(cur)
    return args


def text_of(toks: list[Tok]) -> str:
    out = ""
    for t in toks:
        if out and (t.kind in ("id", "num") and (out[-1].isalnum() or out[-1] == "_")):
            out += " "
        out += t.text
    return out


def norm_type(s: str) -> str:
    s = re.sub(r"\b(nvinfer1|nvonnxparser|tensorrt|nvinfer1::v_1_0|v_1_0|v_2_0)::", "", s.replace(" ", ""))
    return s


# ------------------------------------------------------------------------------ bindings
class Bindings:
    """What one version's pybind11 sources bind."""

    def __init__(self) -> None:
        self.classes: dict[str, dict] = {}
        self.enums: dict[str, dict] = {}
        self.functions: dict[str, list] = {}
        self.attributes: set[str] = set()
        self.aliases: dict[str, str] = {}  # module attribute -> the enum member / name it is
        self.cxx: dict[str, str] = {}  # C++ type -> Python name (qualified for nested)
        self.pending_bases: dict[str, list[str]] = {}

    # -- entries
    def cls(self, name: str) -> dict:
        return self.classes.setdefault(name, {"bases": [], "init": None, "methods": {}, "static": [],
                                              "properties": {}, "attributes": []})

    def enum(self, name: str) -> dict:
        return self.enums.setdefault(name, {"members": [], "export_values": False})


def lambda_arity(toks: list[Tok], lambdas: dict[str, int]) -> int | None:
    """Arguments (without ``self``) of a binding's callable, when it is a lambda we can see."""
    if toks and toks[0].text == "[":
        j = match_close(toks, 0)
        if j + 1 < len(toks) and toks[j + 1].text == "(":
            k = match_close(toks, j + 1)
            params = [p for p in split_args(toks[j + 2:k]) if p]
            return len(params) - 1
        return None
    t = text_of(toks)
    m = re.fullmatch(r"&?(?:lambdas::)?(\w+)", t)
    if m and m.group(1) in lambdas:
        return lambdas[m.group(1)] - 1
    return None


def find_lambdas(toks: list[Tok]) -> dict[str, int]:
    """``static const auto name = [](params) ...`` -> number of params."""
    out = {}
    for i in range(len(toks) - 4):
        if toks[i].text == "auto" and toks[i + 1].kind == "id" and toks[i + 2].text == "=" and toks[i + 3].text == "[":
            j = match_close(toks, i + 3)
            if j + 1 < len(toks) and toks[j + 1].text == "(":
                k = match_close(toks, j + 1)
                out[toks[i + 1].text] = len([p for p in split_args(toks[j + 2:k]) if p])
    return out


def signature(args: list[list[Tok]], arity: int | None) -> list[str] | None:
    """The call shape of a ``.def``: ``name``, ``name=`` (has a default), ``?`` (positional,
    unnamed); None when the sources do not show it."""
    params = []
    for a in args:
        if not a:
            continue
        if a[0].kind == "argname":
            params.append(a[0].value + ("=" if any(t.text == "=" for t in a[1:]) else ""))
        elif len(a) >= 5 and a[0].text == "py" and a[2].text == "arg" and a[3].text == "(" and a[4].kind == "str":
            close = match_close(a, 3)
            params.append(a[4].value + ("=" if any(t.text == "=" for t in a[close + 1:]) else ""))
    if params:
        return params
    if arity is not None:
        return ["?"] * arity
    return None


def parse_bindings(files: dict[str, str], b: Bindings) -> None:
    parsed = {path: tokenize(preprocess(text)) for path, text in files.items()}
    # pass 1: the C++ type of every bound class / enum (for bases)
    for toks in parsed.values():
        for i in range(len(toks) - 3):
            if toks[i].text == "py" and toks[i + 1].text == "::" and toks[i + 2].text in ("class_", "enum_") \
                    and toks[i + 3].text == "<":
                close = match_angle(toks, i + 3)
                targs = split_args(toks[i + 4:close])
                k = close + 1
                if toks[k].kind == "id":
                    k += 1
                if toks[k].text not in ("(", "{"):
                    continue
                args = split_args(toks[k + 1:match_close(toks, k)])
                if len(args) >= 2 and args[1] and args[1][0].kind == "str":
                    scope = text_of(args[0])
                    name = args[1][0].value
                    b.cxx[norm_type(text_of(targs[0]))] = name if scope == "m" else f"{scope}.{name}"
    # pass 2: everything else
    for path, toks in parsed.items():
        lambdas = find_lambdas(toks)
        variables: dict[str, tuple[str, str]] = {}  # C++ variable -> ("class"|"enum", python name)
        i = 0
        while i < len(toks):
            t = toks[i]
            target = None
            if t.text == "py" and i + 3 < len(toks) and toks[i + 1].text == "::" and toks[i + 3].text == "<" \
                    and toks[i + 2].text in ("class_", "enum_", "bind_vector", "bind_map"):
                kind = toks[i + 2].text
                close = match_angle(toks, i + 3)
                targs = split_args(toks[i + 4:close])
                k = close + 1
                var = None
                if toks[k].kind == "id":
                    var = toks[k].text
                    k += 1
                if toks[k].text not in ("(", "{"):
                    i = k
                    continue
                end = match_close(toks, k)
                args = split_args(toks[k + 1:end])
                if len(args) < 2 or not args[1] or args[1][0].kind != "str":
                    i = end + 1
                    continue
                scope_var = text_of(args[0])
                scope = "" if scope_var == "m" else variables.get(scope_var, ("class", scope_var))[1]
                name = args[1][0].value
                qual = f"{scope}.{name}" if scope else name
                if kind == "enum_":
                    b.enum(qual)
                    target = ("enum", qual)
                else:
                    c = b.cls(qual)
                    if kind != "class_":
                        c["container"] = kind
                    if any(text_of(a).startswith("py::dynamic_attr") for a in args[2:]):
                        c["dynamic_attr"] = True
                    for extra in targs[1:]:
                        base = b.cxx.get(norm_type(text_of(extra)))
                        if base and base not in c["bases"]:
                            c["bases"].append(base)
                    target = ("class", qual)
                if scope:
                    b.cls(scope)["attributes"].append(name)
                if var:
                    variables[var] = target
                i = end + 1
            elif t.kind == "id" and t.text in variables and i + 1 < len(toks) and toks[i + 1].text == ".":
                target = variables[t.text]
                i += 1
            elif t.text == "m" and i + 3 < len(toks) and toks[i + 1].text == "." and toks[i + 3].text == "(":
                what = toks[i + 2].text
                end = match_close(toks, i + 3)
                args = split_args(toks[i + 4:end])
                if args and args[0] and args[0][0].kind == "str":
                    name = args[0][0].value
                    if what == "def":
                        arity = lambda_arity(args[1], lambdas) if len(args) > 1 else None
                        b.functions.setdefault(name, []).append(signature(args[1:], arity))
                    elif what in ("attr", "add_object") and (what == "add_object" or toks[end + 1].text == "="):
                        b.attributes.add(name)
                        semi = next(k for k in range(end + 1, len(toks)) if toks[k].text == ";")
                        rhs = text_of(toks[end + 2:semi])
                        m1 = re.fullmatch(r"(?:\w+::)*(\w+)::k(\w+)", rhs)
                        m2 = re.fullmatch(r'm\.attr\("(\w+)"\)', rhs)
                        if m1 and m1.group(1) in {v.rpartition(".")[2] for v in b.cxx.values()} | set(b.cxx):
                            b.aliases[name] = f"{b.cxx.get(m1.group(1), m1.group(1))}.{m1.group(2)}"
                        elif m2:
                            b.aliases[name] = m2.group(1)
                i = end + 1
                continue
            else:
                i += 1
                continue
            # a chain of .def(...), .value(...) ... on target
            while i + 2 < len(toks) and toks[i].text == "." and toks[i + 1].kind == "id" and toks[i + 2].text == "(":
                meth = toks[i + 1].text
                end = match_close(toks, i + 2)
                args = split_args(toks[i + 3:end])
                apply_chain(b, target, meth, args, lambdas)
                i = end + 1


def apply_chain(b: Bindings, target: tuple[str, str], meth: str, args: list[list[Tok]], lambdas) -> None:
    kind, name = target
    if kind == "enum":
        e = b.enum(name)
        if meth == "value" and args and args[0] and args[0][0].kind == "str":
            if args[0][0].value not in e["members"]:
                e["members"].append(args[0][0].value)
        elif meth == "export_values":
            e["export_values"] = True
        return
    c = b.cls(name)
    first = args[0] if args else []
    if meth in ("def", "def_static"):
        if not first:
            return
        if first[0].kind == "str":
            mname = first[0].value
            arity = lambda_arity(args[1], lambdas) if len(args) > 1 else None
            if meth == "def_static" and arity is not None:
                arity += 1  # a static lambda has no self
            sig = signature(args[1:], arity)
            sigs = c["methods"].setdefault(mname, [])
            if sig not in sigs:
                sigs.append(sig)
            if meth == "def_static" and mname not in c["static"]:
                c["static"].append(mname)
        elif text_of(first[:3]) == "py::init" or text_of(first[:3]) == "py::init_alias":
            tmpl = None
            if len(first) > 3 and first[3].text == "<":
                close = match_angle(first, 3)
                tmpl = len([a for a in split_args(first[4:close]) if a])
            sig = signature(args[1:], tmpl)
            if c["init"] is None:
                c["init"] = []
            if sig not in c["init"]:
                c["init"].append(sig)
    elif meth in ("def_property", "def_property_readonly", "def_readwrite", "def_readonly",
                  "def_property_static", "def_property_readonly_static"):
        if not first or first[0].kind != "str":
            return
        pname = first[0].value
        if meth in ("def_property_readonly", "def_readonly", "def_property_readonly_static"):
            mode = "ro"
        elif meth == "def_readwrite":
            mode = "rw"
        else:
            getter = text_of(args[1]) if len(args) > 1 else ""
            setter = text_of(args[2]) if len(args) > 2 else "nullptr"
            mode = "wo" if getter == "nullptr" else ("ro" if setter == "nullptr" else "rw")
        old = c["properties"].get(pname)
        c["properties"][pname] = mode if old in (None, mode) else "rw"


def parse_python_package(text: str, b: Bindings) -> None:
    """Top-level functions, assignments and class attributes of the package ``__init__.py``."""
    text = re.sub(r"##TENSORRT_MODULE##", "tensorrt", text)
    text = re.sub(r"##[A-Z_]+##", "x", text)
    tree = ast.parse(text)

    def truth(e) -> bool | None:
        """Three-valued truth of an ``if`` test on Linux (None: depends on the install)."""
        src = ast.unparse(e)
        if re.fullmatch(r"sys\.platform\.startswith\((['\"])win\1\)|os\.name == (['\"])nt\2", src):
            return False
        if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not):
            v = truth(e.operand)
            return None if v is None else not v
        if isinstance(e, ast.BoolOp):
            vals = [truth(x) for x in e.values]
            if isinstance(e.op, ast.And):
                return False if False in vals else (None if None in vals else True)
            return True if True in vals else (None if None in vals else False)
        try:
            return bool(ast.literal_eval(e)) if not isinstance(e, ast.Compare) else bool(eval(  # noqa: S307
                compile(ast.Expression(e), "<if>", "eval"), {"__builtins__": {}}))
        except Exception:  # noqa: BLE001 - names: unknown
            return None

    def const_if(node) -> bool | None:
        return truth(node.test)

    def walk(body) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                a = node.args
                n_def = len(a.defaults)
                names = [x.arg for x in a.args]
                sig = [n + ("=" if k >= len(names) - n_def else "") for k, n in enumerate(names)]
                b.functions.setdefault(node.name, []).append(sig)
            elif isinstance(node, ast.Assign):
                for tgt in node.targets:
                    if isinstance(tgt, ast.Name) and (not tgt.id.startswith("_") or tgt.id == "__version__"):
                        b.attributes.add(tgt.id)
                    elif isinstance(tgt, ast.Attribute) and isinstance(tgt.value, ast.Name) \
                            and tgt.value.id in b.classes:
                        attrs = b.classes[tgt.value.id]["attributes"]
                        if tgt.attr not in attrs:
                            attrs.append(tgt.attr)
            elif isinstance(node, ast.For):
                # for attr, value in X.Y.__members__.items(): setattr(Cls, attr, value)
                src = ast.unparse(node.iter)
                m = re.fullmatch(r"([\w.]+)\.__members__\.items\(\)", src)
                for sub in ast.walk(node):
                    if m and isinstance(sub, ast.Call) and getattr(sub.func, "id", "") == "setattr" \
                            and isinstance(sub.args[0], ast.Name) and sub.args[0].id in b.classes \
                            and m.group(1) in b.enums:
                        attrs = b.classes[sub.args[0].id]["attributes"]
                        attrs.extend(x for x in b.enums[m.group(1)]["members"] if x not in attrs)
            elif isinstance(node, ast.If):
                v = const_if(node)
                walk(node.body if v is not False else [])
                walk(node.orelse if v is not True else [])
            elif isinstance(node, ast.Try):
                walk(node.body)

    walk(tree.body)


def bindings_table(git: Git, ref: str) -> tuple[dict, list[str]]:
    paths = [p for p in git.files(ref, "python/src") if p.endswith(".cpp")]
    files = {p: git.show(ref, p) or "" for p in paths}
    b = Bindings()
    parse_bindings(files, b)
    for cand in ("python/packaging/bindings_wheel/tensorrt/__init__.py", "python/packaging/tensorrt/__init__.py"):
        text = git.show(ref, cand)
        if text:
            parse_python_package(text, b)
            paths.append(cand)
            break
    # exported enum members land in the enclosing scope
    for qual, e in b.enums.items():
        if e["export_values"]:
            scope = qual.rpartition(".")[0]
            if scope:
                attrs = b.cls(scope)["attributes"]
                attrs.extend(x for x in e["members"] if x not in attrs)
            else:
                b.attributes.update(e["members"])
    classes = {}
    for name, c in sorted(b.classes.items()):
        out = {"bases": c["bases"], "init": c["init"],
               "methods": {k: v for k, v in sorted(c["methods"].items())},
               "properties": dict(sorted(c["properties"].items())),
               "attributes": sorted(set(c["attributes"]))}
        if c["static"]:
            out["static"] = sorted(c["static"])
        for k in ("container", "dynamic_attr"):
            if k in c:
                out[k] = c[k]
        classes[name] = out
    enums = {k: v["members"] if not v["export_values"] else {"members": v["members"], "export_values": True}
             for k, v in sorted(b.enums.items())}
    module = {"functions": dict(sorted(b.functions.items())), "attributes": sorted(b.attributes),
              "aliases": dict(sorted(b.aliases.items()))}
    return {"module": module, "classes": classes, "enums": enums}, sorted(paths)


# ------------------------------------------------------------------------------ trtexec
def function_body(text: str, header_regex: str) -> str | None:
    for m in re.finditer(header_regex, text, re.M):
        start = m.end() - 1 if text[m.end() - 1] == "{" else m.end()
        brace, semi = text.find("{", start), text.find(";", start)
        if brace >= 0 and (semi < 0 or brace < semi):
            return _braced(text, brace)
    return None


def _braced(text: str, i: int) -> str | None:
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j + 1]
    return None


def cxx_string_after(text: str, start: int) -> str:
    """The adjacent string literals from ``start`` on, concatenated (C++ literal joining)."""
    out = []
    lit = re.compile(r'\s*"((?:\\.|[^"\\])*)"')
    while True:
        m = lit.match(text, start)
        if not m:
            return "".join(out)
        out.append(_unescape(m.group(1)))
        start = m.end()


def stream_message(text: str, start: int) -> str:
    """The text a ``<<`` chain from ``start`` prints (up to ``std::endl`` or ``;``); an expression
    that is not a literal shows as ``{expr}``."""
    end = text.find(";", start)
    out = []
    for piece in text[start:end].split("<<"):
        piece = piece.strip()
        if not piece:
            continue
        if piece.startswith('"'):
            out.append(cxx_string_after(piece, 0))
        elif piece == "std::endl":
            break
        else:
            out.append("{" + piece + "}")
    return "".join(out)


def trtexec_table(git: Git, ref: str) -> dict:
    opts_cpp = strip_comments(git.show(ref, "samples/common/sampleOptions.cpp") or "")
    opts_h = strip_comments(git.show(ref, "samples/common/sampleOptions.h") or "")
    engines_cpp = strip_comments(git.show(ref, "samples/common/sampleEngines.cpp") or "")
    main_cpp = strip_comments(git.show(ref, "samples/trtexec/trtexec.cpp") or "")
    all_parse = function_body(opts_cpp, r"^void AllOptions::parse\(Arguments& arguments\)\s*\{?") or ""
    members = re.findall(r"\b(\w+)\.parse\(arguments\)", all_parse)
    struct = function_body(opts_h, r"^(?:struct|class) AllOptions\b[^{;]*\{?") or ""
    types = {}
    for mem in members:
        m = re.search(r"\b(\w+)\s+" + re.escape(mem) + r"\s*[;{]", struct)
        if m:
            types[mem] = m.group(1)
    bodies = []
    seen = set()
    todo = list(types.values())
    while todo:
        ty = todo.pop()
        if ty in seen:
            continue
        seen.add(ty)
        body = function_body(opts_cpp, r"^void " + ty + r"::parse\(Arguments& arguments\)\s*\{?") or ""
        bodies.append(body)
        for sub in re.findall(r"\b(\w+)\.parse\(arguments\)", body):  # e.g. baseModel.parse
            hm = re.search(r"\b(\w+)\s+" + re.escape(sub) + r"\s*[;{]", opts_h)
            if hm:
                todo.append(hm.group(1))
    bodies.append(function_body(opts_cpp, r"^bool parseHelp\(Arguments& arguments\)\s*\{?") or "")
    option_re = re.compile(r'"(--?[A-Za-z][A-Za-z0-9]*)"')
    options = sorted({o for body in bodies for o in option_re.findall(body)})
    # the help text
    helps = []
    for m in re.finditer(r"^void (\w+)::help\(std::ostream& os[^)]*\)", opts_cpp, re.M):
        helps.append(function_body(opts_cpp, re.escape(m.group(0)) + r"\s*\{?") or "")
    helps.append(function_body(opts_cpp, r"^void helpHelp\(std::ostream& os\)\s*\{?") or "")
    documented = set()
    for body in helps:
        for lit in re.findall(r'"((?:\\.|[^"\\])*)"', body):
            for m in re.finditer(r"(?:^|\\n|\n)\s{2,}(--?[A-Za-z][A-Za-z0-9]*)\b", lit):
                documented.add(m.group(1))
            m = re.match(r"\s{2,}(--?[A-Za-z][A-Za-z0-9]*)\b", lit)
            if m:
                documented.add(m.group(1))
    repeatable = set()
    for body in bodies + [opts_cpp]:
        repeatable.update(re.findall(r'while\s*\(\s*getAndDelOption\(arguments,\s*"(--?\w+)"', body))
        repeatable.update(re.findall(r'getAndDelRepeatedOption\(arguments,\s*"(--?\w+)"', body))
        repeatable.update(re.findall(r'getAndDelOptionBehind\(arguments,\s*"(--?\w+)"', body))
    if re.search(r'getOptimizationProfiles\(arguments,\s*\w+,\s*"--profile"\)', opts_cpp):
        repeatable.add("--profile")
    table = {"options": options,
             "repeatable": sorted(repeatable & set(options)),
             "options_not_in_help": sorted(set(options) - documented),
             "help_only": sorted(documented - set(options)),
             "refusals": {}}
    ref_ = table["refusals"]
    k = engines_cpp.find('"Static model does not take explicit shapes')
    if k >= 0:
        ref_["static_model_shapes"] = {
            "message": stream_message(engines_cpp, k),
            "condition": "no network input or output has a dynamic dimension (or is a shape tensor) and "
                         "shapes were given (--shapes, or --minShapes/--optShapes/--maxShapes)",
            "level": "E", "file": "samples/common/sampleEngines.cpp"}
    k = engines_cpp.find('"Cannot find input tensor with name')
    if k >= 0:
        ref_["unknown_shape_tensor"] = {
            "message": stream_message(engines_cpp, k),
            "level": "E", "file": "samples/common/sampleEngines.cpp"}
    k = engines_cpp.find('"Dynamic dimensions required for input: "')
    if k >= 0:
        table["warnings"] = {"dynamic_shapes_missing": {"message": stream_message(engines_cpp, k), "level": "W",
                                                        "file": "samples/common/sampleEngines.cpp"}}
    chain = []
    for pat in (r"setupNetworkAndConfig\([^;]*?\),\s*", r"serializedEngine != nullptr,\s*",
                r"networkToSerializedEngine\([^;]*?\),\s*", r"SMP_RETVAL_IF_FALSE\(createEngineSuccess,\s*"):
        m = re.search(pat + r'"', engines_cpp, re.S)
        if m:
            chain.append(cxx_string_after(engines_cpp, m.end() - 1))
    m = re.search(r"=\s*getEngineBuildEnv\(.*?if\s*\(\s*!\s*\w+\s*\)\s*\{\s*sample::gLogError\s*<<\s*\"", main_cpp, re.S)
    if m:
        chain.append(cxx_string_after(main_cpp, m.end() - 1))
    if chain:
        # after a failure in setupNetworkAndConfig, each caller adds its line, then &&&& FAILED
        ref_["build_failure_lines"] = [chain[0]] + chain[2:]
    k = main_cpp.find('"Unknown option: "')
    if k >= 0:
        after = main_cpp[k:]
        m = re.search(r"if\s*\(failed\)\s*\{([^}]*)\}", after)
        block = m.group(1) if m else ""
        ref_["unknown_option"] = {"message": "Unknown option: {key} {value}", "level": "E",
                                  "prints_help": "AllOptions::help" in main_cpp[max(0, k - 400):k] + block,
                                  "reports_failed": "reportFail" in block,
                                  "file": "samples/trtexec/trtexec.cpp"}
    m = re.search(r'invalid_argument\("(Model missing or format not recognized)"\)', opts_cpp)
    if m:
        ref_["model_missing"] = {"message": m.group(1), "level": "E", "prints_help": True,
                                 "file": "samples/common/sampleOptions.cpp"}
    return table


# ------------------------------------------------------------------------------ onnx-tensorrt
def onnx_parser_table(git: Git, ref: str) -> dict:
    names = set()
    metadata = False
    broadcast_name = None
    files = [p for p in git.files(ref, "") if p.endswith((".cpp", ".hpp")) and "/" not in p]
    for p in files:
        text = strip_comments(git.show(ref, p) or "")
        names.update(re.findall(r'registerLayer\([^;]*?"(ONNXTRT_\w+)"', text, re.S))
        metadata |= "setMetadata" in text
        body = function_body(text, r"^Status broadcastTensor\([^)]*\)\s*\{?")
        if body:
            m = re.search(r'registerLayer\(\s*reshape\s*,\s*"(\w+)"', body)
            broadcast_name = m.group(1) if m else None
    shuffle = None
    for p in files:
        body = function_body(strip_comments(git.show(ref, p) or ""), r"^nvinfer1::IShuffleLayer\* addShuffle\([^)]*\)\s*\{?")
        if body:
            m = re.search(r'registerLayer\(\s*shuffle\s*,\s*"(\w+)"', body)
            shuffle = m.group(1) if m else None
    return {"helper_layer_names": sorted(names), "layer_metadata": metadata,
            "broadcast_layer": broadcast_name, "add_shuffle_layer": shuffle,
            "unnamed_layer_format": "(Unnamed Layer* {index}) [{type}]"}


def onnx_ref_for(onnx: Git, trt: Git, trt_ref: str, version: str) -> tuple[str, str, str]:
    """(ref, how, sha): the parser commit TensorRT's submodule pins, else the newest branch of
    the same or an older version."""
    line = trt("ls-tree", trt_ref, "parsers/onnx").split()
    if len(line) >= 3 and onnx.has(line[2]):
        return line[2], "submodule parsers/onnx of " + trt_ref, line[2]
    want = _vkey(version)
    cands = [b for b in onnx.branches() if re.fullmatch(r"\d+\.\d+(-GA|-EA)?|main", b)]
    ordered = sorted((b for b in cands if b != "main" and _vkey(b) <= want), key=lambda b: (_vkey(b), b.endswith("GA")))
    pick = ordered[-1] if ordered else "main"
    note = (f"submodule commit {line[2][:12] if len(line) >= 3 else '?'} of {trt_ref} is not in the mirror; "
            f"newest available branch <= {version}")
    return pick, note, onnx.sha(pick)


def compact_json(doc) -> str:
    """JSON with one line per class member / option: lists of scalars stay on one line."""
    text = json.dumps(doc, indent=1)

    def join(m: re.Match) -> str:
        return "[" + ", ".join(x.strip() for x in m.group(1).split(",\n")) + "]"

    prev = None
    while prev != text:  # innermost lists first: [ "a", "b" ] and then [[...], null]
        prev = text
        elem = r"(?:[^\[\]{}\n]+|\[[^\[\]{}\n]*\])"
        text = re.sub(r"\[\n\s*((?:" + elem + r",\n\s*)*" + elem + r")\n\s*\]", join, text)
    return text


# ------------------------------------------------------------------------------ main
def pick_versions(git: Git) -> list[tuple[str, str, str]]:
    branches = [b for b in git.branches() if re.fullmatch(r"release/\d+\.\d+", b)]
    out = [(v, f"release/{v}", "") for v in ("8.5", "8.6", "10.3", "10.16") if f"release/{v}" in branches]
    elevens = sorted((b for b in branches if b.startswith("release/11.")), key=_vkey)
    if elevens:
        out.append((elevens[-1].split("/")[1], elevens[-1], "newest release/11.x branch in the mirror"))
    else:
        newest = sorted(branches, key=_vkey)[-1]
        out.append((newest.split("/")[1], newest, "no release/11.x branch in the mirror: newest release instead"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trt", required=True, help="bare git directory of github.com/NVIDIA/TensorRT")
    ap.add_argument("--onnx-trt", help="bare git directory of github.com/onnx/onnx-tensorrt")
    ap.add_argument("--out", default=str(HERE))
    args = ap.parse_args(argv)
    git = Git(args.trt)
    onnx = Git(args.onnx_trt) if args.onnx_trt else None
    for version, ref, note in pick_versions(git):
        api, files = bindings_table(git, ref)
        table = {"version": version,
                 "source": {"repository": TRT_REPO, "branch": ref, "commit": git.sha(ref), "files": files,
                            **({"note": note} if note else {})},
                 **api,
                 "trtexec": {"source": {"repository": TRT_REPO, "branch": ref, "commit": git.sha(ref),
                                        "files": ["samples/common/sampleEngines.cpp",
                                                  "samples/common/sampleOptions.cpp",
                                                  "samples/trtexec/trtexec.cpp"]},
                             **trtexec_table(git, ref)}}
        if onnx is not None:
            oref, how, sha = onnx_ref_for(onnx, git, ref, version)
            table["onnx_parser"] = {"source": {"repository": ONNX_TRT_REPO, "ref": oref, "commit": sha, "how": how},
                                    **onnx_parser_table(onnx, sha)}
        path = Path(args.out) / f"tensorrt-{version}.json"
        path.write_text(compact_json(table) + "\n")
        n_m = sum(len(c["methods"]) for c in table["classes"].values())
        n_e = sum(len(v if isinstance(v, list) else v["members"]) for v in table["enums"].values())
        print(f"{path.name}: {ref} {table['source']['commit'][:12]}: {len(table['classes'])} classes, {n_m} methods, "
              f"{len(table['enums'])} enums ({n_e} members), {len(table['trtexec']['options'])} trtexec options")
    return 0


if __name__ == "__main__":
    sys.exit(main())
