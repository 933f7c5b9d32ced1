"""Property-based fuzzing of the input surfaces ``tests/test_fuzz.py`` leaves out, with the same fresh seed.

``tests/test_fuzz.py`` fuzzes a fixed list of options, study files, plans, storage URLs and files; this
module widens it to:

* **every option of every command**, walked from the parser itself (``placetune --help-all`` lists the
  same): an option added later is fuzzed without a change here;
* **the environment variables placetune reads** (``PLACETUNE_CACHE_DIR``, ``XDG_CACHE_HOME``,
  ``PLACETUNE_TRTEXEC``, ``PLACETUNE_SYSFS_ROOT``, ``PLACETUNE_CUDA``, ``PLACETUNE_SHARED_GPU``, ``COLUMNS``);
* **exported plan folders fed to** ``placetune build`` (plan.json, its ONNX files and engine names edited; one
  example in four built with the TensorRT double), and **plan.json as the standalone runtime reads it**;
* **trtexec's output and export files**: the readers of console logs, ``--exportLayerInfo``,
  ``--exportProfile`` and ``--exportTimes`` on mutations of every artefact of the corpus of real TensorRT
  output (``tests/data/trt_corpus``) and on JSON of every shape, and the whole trtexec backend against a
  damaged trtexec (``tests/fakes/trtexec_mangled``: its log cut, its numbers and JSON values of other
  kinds, its saved engine and export files damaged, its exit code changed) with its cache folder damaged (a
  cache damaged alone must still give an ``ok`` measurement: it is made again).

The rules are tests/test_fuzz.py's (its ``call`` checks them): no traceback, no hang, no leaked secret or raw
escape sequence, nothing outside the command's own files changed, every JSON printed strict; and here in
addition: no ``ok`` measurement with a figure that is not finite, and every reader returns what it says
(names as text, times finite or NaN). The seed is ``PLACETUNE_FUZZ_SEED`` (fresh every run, printed by
conftest); ``PLACETUNE_FUZZ_EXAMPLES`` / ``PLACETUNE_FUZZ_CALLS`` lengthen a run as in tests/test_fuzz.py::

    PLACETUNE_FUZZ_SEED=1234567 python -m pytest -q -p no:cacheprovider tests/test_fuzz_surfaces.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from placetune.cli.main import build_parser, main
from placetune.errors import PlacetuneError
from tests.hostile import alarm, environment, in_folder
from tests.test_fuzz import _copy_db, COUNTS, EXAMPLES, PER_CALL_S, REPLAY, SECRET_URL, SEED, SENTINEL, Hang, call, wrong

HERE = Path(__file__).parent
CORPUS = HERE / "data" / "trt_corpus"
MANGLED = HERE / "fakes" / "trtexec_mangled"

def fuzz(ci_examples: int):
    """Hypothesis settings of one property (as tests/test_fuzz.py's): ``ci_examples`` examples of this run's seed."""
    config = settings(max_examples=EXAMPLES or ci_examples, deadline=None, derandomize=False, database=None, print_blob=True,
                      suppress_health_check=list(HealthCheck))
    return lambda test: hypothesis_seed(SEED)(config(test))


_KINDS = ("every option", "environment", "plan folders", "damaged trtexec")


@pytest.fixture(scope="module", autouse=True)
def work(tmp_path_factory):
    """The working folder of every call; at the end, each kind's outcomes (visible with ``-s``)."""
    with in_folder(tmp_path_factory.mktemp("fuzzsurfaces")) as d:
        yield d
    print(f"\nfuzz surfaces, seed {SEED} ({REPLAY}):")
    for kind in _KINDS:
        c = COUNTS[kind]
        print(f"  {kind:16} " + ", ".join(f"{k} {c.get(k, 0)}" for k in ("tried", "accepted", "clean errors")))


@pytest.fixture(scope="module")
def good(work):
    """A study (10 trials), its plan file, a plan folder exported from it, a study file and a device profile."""
    import io

    d = work / "good"
    d.mkdir()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["tune", "--model", "seed-block", "--trials", "10", "--agent", "random", "--storage",
                     str(d / "s.db"), "--study", "s", "--export", str(d / "s.plan.json")]) == 0
        assert main(["export", "--study", "s", "--storage", str(d / "s.db"), "--format", "trtexec",
                     "-o", str(d / "folder")]) == 0
    (d / "study.toml").write_text('[study]\nmodel = "seed-block"\ntrials = 2\nagent = "random"\n')
    (d / "profile.toml").write_text('base = "orin-agx"\n[scale]\ngpu = 1.5\n')
    return d


def _finite_ok(kind: str, text: str) -> None:
    """An ``ok`` measurement printed as JSON holds finite figures only."""
    try:
        doc = json.loads(text[text.index("{"):text.rindex("}") + 1])
    except ValueError:
        return
    m = doc.get("measurement", doc) if isinstance(doc, dict) else {}
    if isinstance(m, dict) and m.get("status") == "ok":
        figures = [m.get("throughput_fps"), *(m.get("latency_ms") or {}).values()]
        if any(not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 for v in figures if v is not None):
            wrong(kind, f"an ok measurement with a figure that is no finite number: {figures}")


# ----------------------------------------------------------------------------- every option of every command
_HOSTILE = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=20),
    st.sampled_from(["", " ", "-1", "0", "1", "2**70", str(2**70), "nan", "inf", "-inf", "1e308", "1e-308", "0x10",
                     "\u0661", "..", "/", "/dev/zero", "/proc/self/mem", "~", "~nobody/x", "-", "--", "-o", "=",
                     "a" * 300, "x\x1b[31m", "\u202ey", "GPU:0", "DLA9", "all-dla", "{}", "[]", SECRET_URL,
                     "sqlite:////nonexistent/x.db", "seed-block:depth=-1", "1x2x3", "x=0x1", "latency<=nan"]),
)


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command words, its actions) of every command of ``parser``."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser._actions
    for a in subs:
        for name, sub in sorted(a.choices.items()):
            yield from _leaves(sub, path + (name,))


_COMMANDS = [(p, acts) for p, acts in _leaves(build_parser()) if p]


def _good_value(action: argparse.Action, good: Path, folder: Path) -> list[str]:
    """Values of ``action`` its grammar allows (its choices, else by the option's name; none: no good value here,
    as for a calibration cache, which needs TensorRT)."""
    if action.choices:
        return [str(c) for c in action.choices]
    name = (action.option_strings[-1] if action.option_strings else action.dest).lstrip("-").replace("_", "-")
    db = folder / "s.db"
    return {"model": ["seed-block", str(HERE / "data" / "seed_block.onnx.gz")],
            "plan": [str(good / "s.plan.json"), str(folder / "folder")], "study-file": [str(good / "study.toml")],
            "storage": [str(db), f"sqlite:///{db}"], "db": [str(db)], "study": ["s"], "name": ["seed-block"],
            "output": [str(folder / "out"), str(folder / "out.json")], "export": [str(folder / "x.plan.json")],
            "platform": ["orin-agx", "xavier-nx"], "trt-version": ["8.5", "10.3"], "power-mode": ["MAXN"],
            "backend": ["simulate"], "agent": ["random"], "objective": ["latency", "throughput"],
            "constraint": ["latency<=5"], "trials": ["1", "2"], "timeout": ["30m"], "granularity": ["stages"],
            "replicas": ["GPU:1", "GPU:1,DLA0:1"], "placement": ["all-gpu", "all-dla"],
            "device-profile": [str(good / "profile.toml")], "batch": ["1", "2"], "dla-core": ["0", "1"],
            "frames-in-flight": ["1", "2"], "noise": ["0", "0.02"], "seed": ["0", "7"], "streams": ["1", "2"],
            "dpi": ["40"], "folds": ["0", "2"], "measurement": ["1"], "worker-python": [sys.executable],
            "shapes": ["input=1x384x56x56"], "shape": ["input=1x384x56x56"]}.get(name, [])


@st.composite
def _command_line(draw, good: Path, folder: Path):
    """A command with some of its options: most examples of its grammar (values it allows, the options it needs),
    the rest with hostile values and whatever options were drawn."""
    path, actions = draw(st.sampled_from(_COMMANDS))
    argv = list(path)
    hostile = draw(st.integers(0, 9)) < 3

    def value(a: argparse.Action) -> str:
        values = _good_value(a, good, folder)
        return draw(_HOSTILE) if hostile and draw(st.booleans()) or not values else draw(st.sampled_from(values))

    for a in (a for a in actions if not a.option_strings):
        if a.nargs != "?" or draw(st.booleans()):
            argv.append(value(a))
    options = [a for a in actions if a.option_strings and not isinstance(a, (argparse._HelpAction,
                                                                             argparse._VersionAction))
               and "--help-all" not in a.option_strings
               and (hostile or a.nargs == 0 or _good_value(a, good, folder))]
    drawn = draw(st.lists(st.sampled_from(options), max_size=4, unique_by=id)) if options else []
    needed = [a for a in options if a.required or not hostile and a.dest == "storage"]
    for a in needed + [a for a in drawn if a not in needed]:
        argv.append(draw(st.sampled_from(a.option_strings)))
        if a.nargs != 0:
            argv.append(value(a))
    if path == ("tune",):  # a short run whatever was drawn (a drawn --trials comes later and wins)
        named = len(argv) > 1 and not argv[1].startswith("-") or "--model" in argv
        argv[1:1] = ["--trials", "2", "--agent", "random"] + ([] if named else ["--model", "seed-block"])
    return argv


@fuzz(12)
@given(data=st.data())
def test_every_option_of_every_command(data, good, work):
    """Every command with options drawn from its own parser (values of its grammar, or hostile ones)."""
    folder = Path(tempfile.mkdtemp(dir=work))
    _copy_db(good / "s.db", folder / "s.db")
    shutil.copytree(good / "folder", folder / "folder")
    argv = data.draw(_command_line(good, folder))
    with environment({"PLACETUNE_CACHE_DIR": str(folder / "cache")}):
        code, text = call("every option", argv)
    if code == 0 and "--json" in argv:
        _finite_ok("every option", text)


# ----------------------------------------------------------------------------- environment variables
def _path_kinds(folder: Path) -> dict[str, str]:
    """Paths of every kind an environment variable may name."""
    (folder / "file").write_text("not a folder")
    (folder / "exec.sh").write_text("#!/bin/sh\necho '\x1b[31mnot trtexec'\nexit 3\n")
    (folder / "exec.sh").chmod(0o755)
    if not (folder / "fifo").exists():
        os.mkfifo(folder / "fifo")
    (folder / "dangling").symlink_to(folder / "nothing")
    (folder / "to-sentinel").symlink_to(SENTINEL)
    return {"file": str(folder / "file"), "script": str(folder / "exec.sh"), "fifo": str(folder / "fifo"),
            "dangling": str(folder / "dangling"), "sentinel": str(folder / "to-sentinel"), "missing": "/nonexistent/x",
            "relative": "rel/cache", "tilde": "~/x", "empty": "", "secret": SECRET_URL, "control": "x\x1b[2Jy\u202e",
            "long": "a" * 5000, "folder": str(folder / "cache"), "root": "/"}


_ENV_VARS = {"PLACETUNE_CACHE_DIR": ["folder", "file", "fifo", "dangling", "sentinel", "missing", "relative", "tilde",
                                     "empty", "secret", "control", "long"],
             "XDG_CACHE_HOME": ["folder", "file", "missing", "relative", "empty", "control"],
             "PLACETUNE_TRTEXEC": ["script", "file", "fifo", "dangling", "missing", "folder", "empty", "secret",
                                   "control", "relative"],
             "PLACETUNE_SYSFS_ROOT": ["folder", "file", "fifo", "missing", "root", "empty", "control", "long"],
             "PLACETUNE_CUDA": ["empty", "control", "secret"],
             "PLACETUNE_SHARED_GPU": ["empty", "control"],
             "COLUMNS": ["empty", "control", "long"]}
_ENV_LITERALS = {"PLACETUNE_CUDA": ["cuda-python", "pycuda", "bogus", " pycuda "],
                 "PLACETUNE_SHARED_GPU": ["1", "0", "yes", "-1"],
                 "COLUMNS": ["0", "-5", "1", "20", "80", "99999999999999999999", "nan", "1e3", "\u0661\u0662"]}
_ENV_COMMANDS = [["measure", "seed-block", "--json"], ["measure", "seed-block", "--backend", "trtexec", "--json"],
                 ["doctor", "--json"], ["check", "seed-block"], ["tune", "--model", "seed-block", "--trials", "2",
                                                                  "--agent", "random"],
                 ["measure", "seed-block", "--backend", "tensorrt", "--json"], ["zoo", "list"]]


@fuzz(8)
@given(names=st.lists(st.sampled_from(sorted(_ENV_VARS)), min_size=1, max_size=3, unique=True), data=st.data(),
       cmd=st.sampled_from(_ENV_COMMANDS))
def test_environment_variables(names, data, cmd, work):
    """The environment variables placetune reads, set to paths of every kind and to hostile text."""
    folder = Path(tempfile.mkdtemp(dir=work))
    kinds = _path_kinds(folder)
    env: dict[str, str | None] = {}
    for name in names:
        choice = data.draw(st.sampled_from(_ENV_VARS[name] + _ENV_LITERALS.get(name, [])))
        env[name] = kinds.get(choice, choice)
    env.setdefault("PLACETUNE_CACHE_DIR", str(folder / "cache"))
    argv = list(cmd) + (["--storage", str(folder / "e.db")] if cmd[0] == "tune" else [])
    with environment(env):
        code, text = call("environment", argv)
    if code == 0 and "--json" in argv:
        _finite_ok("environment", text)


# ----------------------------------------------------------------------------- plan folders fed to build
_FOLDER_EDITS = ["plan.json value", "plan.json key", "plan.json truncated", "onnx truncated", "onnx removed",
                 "onnx to sentinel", "engine name", "calibration cache", "extra file", "none"]
_PLAN_KEYS = [["engines", 0, "onnx_file"], ["engines", 0, "engine_file"], ["engines", 0, "device"],
              ["engines", 0, "dla_core"], ["engines"], ["batch"], ["precision"], ["model", "path"],
              ["model", "zoo"], ["calibration_cache"], ["layers", 0, "realized"], ["version"], ["mode"]]


@fuzz(4)
@given(edit=st.sampled_from(_FOLDER_EDITS), key=st.sampled_from(_PLAN_KEYS), value=_HOSTILE | st.integers() |
       st.sampled_from([None, [], {}, "../../x.onnx", "/etc/passwd", "0.onnx", "DLA1", "int8"]),
       where=st.integers(0, 10**6), out=st.booleans(), board=st.integers(0, 3).map(lambda i: i == 0))
def test_plan_folders_fed_to_build(edit, key, value, where, out, board, good, work):
    """An exported plan folder edited behind placetune's back, given to ``build``: built with the TensorRT
    double (one example in four: seconds each) or refused with one line; never a write outside the folder or
    its -o, never a traceback."""
    folder = Path(tempfile.mkdtemp(dir=work)) / "plan"
    shutil.copytree(good / "folder", folder)
    plan = folder / "plan.json"
    doc = json.loads(plan.read_text())
    onnx = sorted(folder.glob("*.onnx"))
    if edit in ("plan.json value", "plan.json key", "engine name", "calibration cache"):
        key = {"engine name": ["engines", 0, "engine_file"], "calibration cache": ["calibration_cache"]}.get(edit, key)
        cur = doc
        try:
            for k in key[:-1]:
                cur = cur[k]
            if edit == "plan.json key" and isinstance(cur, dict):
                cur.pop(key[-1], None)
            else:
                cur[key[-1]] = value
        except (KeyError, IndexError, TypeError):
            pass
        plan.write_text(json.dumps(doc))
    elif edit == "plan.json truncated":
        text = plan.read_text()
        plan.write_text(text[: where % max(1, len(text))])
    elif edit.startswith("onnx") and onnx:
        target = onnx[where % len(onnx)]
        if edit == "onnx truncated":
            raw = target.read_bytes()
            target.write_bytes(raw[: where % max(1, len(raw))])
        elif edit == "onnx removed":
            target.unlink()
        else:
            target.unlink()
            target.symlink_to(SENTINEL / "precious.txt")
    elif edit == "extra file":
        (folder / "engine_0.plan").symlink_to(SENTINEL / "precious.txt")
    argv = ["build", str(folder)] + (["-o", str(folder.parent / "built")] if out else [])
    env = {"PLACETUNE_CACHE_DIR": str(folder.parent / "cache")}
    if board:  # the worker imports the TensorRT double (tests/fakes/tensorrt)
        env.update({"PYTHONPATH": os.pathsep.join([str(HERE / "fakes"), str(HERE.parent)]),
                    "PLACETUNE_FAKE_TRT_VERSION": "10.3.0"})
    with environment(env):
        call("plan folders", argv)


# ----------------------------------------------------------------------------- plan.json read by the runtime
@pytest.fixture(scope="module")
def standalone(good, tmp_path_factory):
    """The standalone runtime (``write_standalone``: no placetune's Plan to check plan.json), imported by path."""
    import importlib.util

    import placetune.runtime

    d = tmp_path_factory.mktemp("standalone")
    placetune.runtime.write_standalone(d)
    spec = importlib.util.spec_from_file_location("placetune_runtime_fuzzed", d / "placetune_runtime.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@fuzz(30)
@given(key=st.sampled_from(_PLAN_KEYS + [["model", "input_shapes"], ["model", "input_shapes", "input"],
                                         ["engines", 0, "batch"], ["settings", "frames_in_flight"], ["format"],
                                         ["engines", 0, "kind"], ["engines", 0, "dla_layers"], ["model"]]),
       value=_HOSTILE | st.deferred(lambda: _reader_json), drop=st.booleans(), valid=st.integers(0, 9).map(lambda i: i < 3))
def test_plan_json_read_by_the_standalone_runtime(key, value, drop, valid, standalone, good, work):
    """plan.json edited behind placetune's back, read by the standalone runtime as it reads it before TensorRT is
    asked (the plan, the input shapes, each engine's file and DLA core): its own ConfigError or a plan it can use
    (three examples in ten: the plan as exported)."""
    folder = Path(tempfile.mkdtemp(dir=work))
    doc = json.loads((good / "folder" / "plan.json").read_text())
    cur = doc
    try:
        for k in key[:-1]:
            cur = cur[k]
        if not valid and drop and isinstance(cur, dict):
            cur.pop(key[-1], None)
        elif not valid:
            cur[key[-1]] = value
    except (KeyError, IndexError, TypeError):
        pass
    (folder / "plan.json").write_text(json.dumps(doc))
    try:
        with alarm(PER_CALL_S, Hang):
            plan = standalone._read_plan(folder)
            shapes = standalone._input_shapes(plan.model, "plan.json")
            assert all(isinstance(d, int) and 0 <= d < 2**31 for dims in shapes.values() for d in dims), shapes
            for i, e in enumerate(plan.engines):
                standalone.confined(folder, e.get("engine_file"), f"engine {i}")
                assert standalone._dla_core(e) in (-1, 0, 1)
    except standalone.ConfigError as exc:
        assert valid is False and len(str(exc).splitlines()) == 1, exc
    except Hang:
        raise AssertionError(f"the runtime ran past {PER_CALL_S} s ({REPLAY})") from None
    except Exception as exc:
        raise AssertionError(f"{type(exc).__name__}: {exc} after {key} = {value!r} ({REPLAY})") from exc


# ----------------------------------------------------------------------------- trtexec's output: the readers
def _corpus() -> list[str]:
    out = []
    for d in sorted(CORPUS.iterdir()):
        prov = d / "provenance.json"
        if prov.is_file():
            out.append((d / json.loads(prov.read_text())["file"]).read_text(encoding="utf-8", errors="replace"))
    return out


_CORPUS: list[str] = []
_READER_KEYS = ["count", "name", "timeMs", "averageMs", "medianMs", "percentage", "Name", "LayerType", "Layers",
                "Bindings", "Inputs", "Outputs", "Metadata", "TacticName", "startComputeMs", "endComputeMs",
                "latencyMs", "startEnqMs", "endD2hMs"]
_leaf = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=8),
                  st.sampled_from(["{ForeignNode[/conv1/Conv.../Concat]}", "DLA", "Myelin", "1.5", "nan"]))
_reader_json = st.recursive(_leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
    st.sampled_from(_READER_KEYS), kids, max_size=5), max_leaves=16)
_TOKENS = ["nan", "inf", "-inf", "1e999", "-1", "0", "99999999999999999999", "", "\x00", "\x1b[31m", "\u202e", "]",
           "[", "{", "}", '"', ",", ":", "null", "\n", "\u0661\u0662"]


@st.composite
def _reader_text(draw):
    if not _CORPUS:
        _CORPUS.extend(_corpus())
    if draw(st.integers(0, 9)) < 4:
        doc = draw(_reader_json)
        try:
            text = json.dumps(doc, allow_nan=draw(st.booleans()))
        except ValueError:  # a NaN or an infinity in a strict document: written as Python writes them
            text = json.dumps(doc)
    else:
        text = draw(st.sampled_from(_CORPUS))
    for _ in range(draw(st.integers(0, 4))):
        op = draw(st.sampled_from(["truncate", "number", "insert", "splice", "deep"]))
        i = draw(st.integers(0, len(text)))
        if op == "truncate":
            text = text[:i]
        elif op == "number":
            nums = list(re.finditer(r"-?\d+(?:\.\d+)?", text))
            if nums:
                m = nums[draw(st.integers(0, len(nums) - 1))]
                text = text[:m.start()] + draw(st.sampled_from(_TOKENS)) + text[m.end():]
        elif op == "insert":
            text = text[:i] + draw(st.sampled_from(_TOKENS)) + text[i:]
        elif op == "deep":  # nested past Python's recursion limit (json raises RecursionError, not ValueError)
            n = draw(st.sampled_from([3, 5_000]))
            text = draw(st.sampled_from(["[", '{"Layers": ', '[{"count": '])) * n + text + draw(
                st.sampled_from(["]", "}"])) * n
        else:
            other = draw(st.sampled_from(_CORPUS))
            text = text[:i] + other[: draw(st.integers(0, 3000))] + text[i:]
    return text


def _finite_or_nan(v: object) -> bool:
    return isinstance(v, float) and (math.isnan(v) or math.isfinite(v))


def _read_everything(text: str) -> None:
    """Every reader of TensorRT output on ``text``; each returns what it says it does."""
    from placetune.backends.tensorrt.buildlog import parse_build_log, parser_network
    from placetune.backends.tensorrt.placement_known import inspector_dla_layers, metadata_nodes
    from placetune.backends.tensorrt.worker_names import parser_layers
    from placetune.backends.trtexec.parse import (error_lines, parse_export_profile, parse_export_times,
                                                  parse_layer_info, parse_summary, version_from_text)

    lines = text.splitlines()
    parse_build_log(lines)
    parse_summary(lines)
    version = version_from_text(text)
    assert version is None or isinstance(version, str)
    assert all(isinstance(x, str) for x in error_lines(lines))
    parser_layers(lines)
    parser_network(lines)
    count, entries = parse_export_profile(text)
    assert count is None or isinstance(count, int) and count >= 0, count
    for e in entries:
        assert isinstance(e.name, str) and all(_finite_or_nan(v) for v in (e.time_ms, e.average_ms, e.percentage))
        assert e.median_ms is None or _finite_or_nan(e.median_ms)
    for rec in parse_export_times(text):
        assert all(isinstance(k, str) and _finite_or_nan(v) for k, v in rec.items()), rec
    info = parse_layer_info(text)
    assert all(isinstance(x, dict) for x in info.layers) and all(isinstance(n, str) for n in info.names)
    assert all(isinstance(b, str) for b in info.bindings)
    inspector_dla_layers(info.layers)
    for layer in info.layers:
        metadata_nodes(layer)


@fuzz(60)
@given(text=_reader_text())
def test_trtexec_readers(text):
    """Every reader of trtexec's console output and export files, on damaged real artefacts and JSON of every
    shape: a result of the kinds it documents, never an exception (the backend calls them unguarded)."""
    with alarm(PER_CALL_S, Hang):  # (a hang or any other exception fails the example, with this run's seed)
        with contextlib.suppress(PlacetuneError):
            _read_everything(text)


# ----------------------------------------------------------------------------- the trtexec backend, damaged
_MANGLE_OPS = ["truncate", "numbers", "types", "insert", "flip", "empty", "delete"]
_CACHE_EDITS = ["none", "onnx truncated", "onnx flipped", "onnx to sentinel", "timing garbage", "timing folder",
                "timing to sentinel", "onnx folder"]


@pytest.fixture(scope="module")
def trtexec_cache(work):
    """A trtexec cache folder after one measurement (its prepared ONNX file and timing cache)."""
    import io

    cache = work / "trtexec-cache"
    spec = work / "no-damage.json"  # the damaged trtexec damaging nothing: the double with its timing cut short
    spec.write_text(json.dumps({"seed": 0, "calls": [], "counter": str(work / "no-damage.calls")}))
    env = {"PLACETUNE_TRTEXEC": str(MANGLED), "PLACETUNE_CACHE_DIR": str(cache), "PLACETUNE_MANGLE": str(spec),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    with environment(env), contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        main(["measure", "seed-block", "--backend", "trtexec", "--placement", "all-dla"])
    return cache


def _damage_cache(cache: Path, edit: str, where: int) -> None:
    files = sorted(p for p in cache.rglob("*") if p.is_file() and not p.name.endswith(".lock"))
    onnx = [p for p in files if p.suffix == ".onnx"]
    timing = [p for p in files if p.suffix == ".cache"]
    target = (onnx if edit.startswith("onnx") else timing) or files
    if edit == "none" or not target:
        return
    p = target[where % len(target)]
    raw = p.read_bytes()
    if edit == "onnx truncated":
        p.write_bytes(raw[: where % max(1, len(raw))])
    elif edit == "onnx flipped":
        b = bytearray(raw)
        for k in range(1 + where % 16):
            b[(where * (k + 7)) % len(b)] ^= 0x5A
        p.write_bytes(bytes(b))
    elif edit == "timing garbage":
        p.write_bytes(os.urandom(where % 512))
    elif edit.endswith("folder"):
        p.unlink()
        p.mkdir()
    else:
        p.unlink()
        p.symlink_to(SENTINEL / "precious.txt")


@fuzz(2)  # each example runs the trtexec double three times: about a second
@given(stdout=st.lists(st.sampled_from(_MANGLE_OPS[:5]), max_size=2),
       files=st.lists(st.sampled_from(_MANGLE_OPS), max_size=2),
       calls=st.sets(st.integers(0, 2), max_size=3), exit=st.sampled_from([None, None, None, 0, 1, 139, -9]),
       placement=st.sampled_from(["all-gpu", "all-dla"]), cache_edit=st.sampled_from(_CACHE_EDITS),
       where=st.integers(0, 10**6), seed=st.integers(0, 2**31 - 1))
def test_a_damaged_trtexec_and_cache(stdout, files, calls, exit, placement, cache_edit, where, seed, trtexec_cache,
                                     work):
    """The trtexec backend with its trtexec's log, exit code, saved engine and export files damaged and its
    cache folder damaged: a measurement marked failed or a clean refusal, and an ``ok`` one only with finite
    figures; never a traceback, never a write through a link in the cache."""
    folder = Path(tempfile.mkdtemp(dir=work))
    cache = folder / "cache"
    shutil.copytree(trtexec_cache, cache, symlinks=True)
    _damage_cache(cache, cache_edit, where)
    spec = folder / "mangle.json"
    spec.write_text(json.dumps({"seed": seed, "stdout": stdout, "files": files, "exit": exit, "calls": sorted(calls),
                                "counter": str(folder / "calls")}))
    env = {"PLACETUNE_TRTEXEC": str(MANGLED), "PLACETUNE_CACHE_DIR": str(cache), "PLACETUNE_MANGLE": str(spec),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    with environment(env):
        code, text = call("damaged trtexec", ["measure", "seed-block", "--backend", "trtexec", "--placement",
                                              placement, "--json"])
    if code == 0:
        _finite_ok("damaged trtexec", text)
    if not calls and not cache_edit.endswith("folder") and '"status": "ok"' not in text:
        # only a cache file damaged (cut short, edited, a link): made again, never a failed measurement
        wrong("damaged trtexec", f"a cache damaged by {cache_edit!r} failed the measurement: {text[-300:]!r}")

