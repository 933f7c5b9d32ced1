"""Property-based fuzzing of every input kind, a standing suite (small, with a fresh seed every run).

Each property calls ``placetune.cli.main.main([...])`` in-process (or the library edge for
device profiles, environments and stored rows) and asserts, per call:

* no traceback: the exit code is one README documents (only SystemExit and placetune's error
  classes escape);
* no hang: a per-call alarm;
* no leak: a planted password (in every SQLAlchemy URL form) appears in no output, and no raw
  control or bidi character reaches the output (names are escaped);
* no data loss: the stored rows are unchanged by a refused command, and a sentinel folder
  (a file and a symlink the commands are never told to write) is unchanged after every call;
  an output symlink, device node or FIFO is still one after the call;
* no silent wrong result: every JSON a command prints or writes on success is strict JSON (no
  NaN/Infinity), every plan it writes loads, no ``ok`` row holds a non-finite figure.

Input kinds: CLI argument vectors, study files (TOML), placements, plan files (JSON), device
profiles, database rows, Gymnasium reset/step options, storage URLs, output targets (links,
devices, FIFOs, folders), input files (FIFOs, devices, directories, huge and binary files),
names (study names with control and bidi characters), input data (.npz: NaN, other dtypes and keys,
forged headers, planted pickles) and ONNX mutations.

Most inputs of every kind (about seven in ten) are drawn from the kind's grammar, well-formed, at
times with one mutation, so that the paths past validation run; the rest are hostile. The summary
gives each kind's share of calls that got past validation (exit 0); every kind keeps it at half or
more.

Every run draws a FRESH random seed (few examples per kind, about a minute in all), so each run
tries inputs no run tried before; the seed is printed at the start and end of the session and in
every failure message. Replay a failure with its seed, and run longer with more examples per
property or about N calls in all (spread over the properties as CI spreads them)::

    PLACETUNE_FUZZ_SEED=1234567 python -m pytest -q -p no:cacheprovider tests/test_fuzz.py
    PLACETUNE_FUZZ_EXAMPLES=300 nice python -m pytest -q -p no:cacheprovider tests/test_fuzz.py -s
    PLACETUNE_FUZZ_CALLS=10000 PLACETUNE_FUZZ_SUMMARY=fuzz.json nice python -m pytest -q -p no:cacheprovider \
        tests/test_fuzz.py -s

A failure found this way becomes a fixed case in tests/test_hostile_input.py or
tests/test_hostile_round3.py.

Counts per input kind (tried, clean errors, accepted, tracebacks, hangs, secrets leaked,
escapes leaked, data loss, wrong results, the valid share), their totals, the seed and the wall
time are written to
``$PLACETUNE_FUZZ_SUMMARY`` (default ``fuzz-summary.json`` in the pytest temporary base
directory) and printed at the end of the session (visible with ``-s``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sqlite3
import stat
import string
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from placetune.cli.main import main
from placetune.errors import PlacetuneError
from tests.hostile import alarm, device, environment, in_folder, memory_cap
from tests.seeds import seed as run_seed

DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 130}
SECRET = "s3cr/etPW@#x"
SECRET_URL = "postgresql+psycopg://tuner:s3cr%2FetPW%40%23x@127.0.0.1:1/db"
#: text that must never appear in any output: the password above (raw and encoded) and the one of URLS
LEAKS = (SECRET, "s3cr%2FetPW", "Pl4nt3dSecret")
#: characters that must never reach the output raw (escape sequences, bells, bidi, carriage return)
RAW_CONTROLS = ("\x1b", "\x07", "\x9b", "\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u200f", "\r", "\x08")
PER_CALL_S = 60  # generous: a loaded CI machine is slow, a hang never ends
EXAMPLES = int(os.environ.get("PLACETUNE_FUZZ_EXAMPLES", "0") or 0)
#: a long run of about this many calls in all (``$PLACETUNE_FUZZ_CALLS``), spread over the properties as CI spreads
#: its examples; the summary says how many calls it made
CALLS = int(os.environ.get("PLACETUNE_FUZZ_CALLS", "0") or 0)
#: the examples of one CI run, all properties together (the sum of every ``fuzz(n)`` below; a test checks it)
CI_EXAMPLES = 339
#: calls per example in CI (some examples make two or three calls, some none): ``$PLACETUNE_FUZZ_CALLS`` / this
#: many examples reach the asked number of calls
CALLS_PER_EXAMPLE = 1.0
#: this run's seed: fresh every run unless ``$PLACETUNE_FUZZ_SEED`` replays one
SEED = run_seed("PLACETUNE_FUZZ_SEED")
REPLAY = f"replay with PLACETUNE_FUZZ_SEED={SEED}"  # conftest prints it in the header and at the end


REGISTERED: list[int] = []


def _examples(ci_examples: int) -> int:
    if EXAMPLES:
        return EXAMPLES
    if CALLS:  # this property's share of the asked calls, as in CI
        return max(ci_examples, round(CALLS * ci_examples / CI_EXAMPLES / CALLS_PER_EXAMPLE))
    return ci_examples


def fuzz(ci_examples: int):
    """Hypothesis settings of one property: ``ci_examples`` examples drawn from this run's
    :data:`SEED` (``$PLACETUNE_FUZZ_EXAMPLES`` each, or a share of ``$PLACETUNE_FUZZ_CALLS``, in a long run)."""
    REGISTERED.append(ci_examples)
    config = settings(max_examples=_examples(ci_examples), deadline=None, derandomize=False,
                      database=None, print_blob=True,
                      suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                             HealthCheck.data_too_large, HealthCheck.filter_too_much])

    def apply(test):
        return hypothesis_seed(SEED)(config(test))
    return apply


COUNTS: dict[str, Counter] = defaultdict(Counter)

#: about seven examples in ten start from a well-formed input of the kind (drawn from its grammar, so that the
#: paths past validation run), the rest are hostile; a well-formed input may still carry a mutation
_well_formed = st.integers(0, 9).map(lambda i: i < 7)


class Hang(BaseException):
    """A call ran past PER_CALL_S (a BaseException, like KeyboardInterrupt: no ``except Exception`` in the code
    under test swallows it and carries on)."""


#: what every kind counts, in the summary's order
OUTCOMES = ("tried", "clean errors", "accepted", "tracebacks", "hangs", "secrets leaked", "escapes leaked",
            "data loss", "wrong results")
#: the bugs: every run must end with none of these
BUGS = ("tracebacks", "hangs", "secrets leaked", "escapes leaked", "data loss", "wrong results")
#: the folder no command is ever told to write (a file and a symlink to it): unchanged after every call
SENTINEL = Path(tempfile.mkdtemp(prefix="placetune-fuzz-sentinel-"))
(SENTINEL / "precious.txt").write_text("precious")
(SENTINEL / "link").symlink_to(SENTINEL / "precious.txt")


def _snapshot(folder: Path) -> dict[str, tuple]:
    out = {}
    for p in sorted(folder.iterdir()):
        st_ = os.lstat(p)
        out[p.name] = (stat.S_IFMT(st_.st_mode), os.readlink(p) if p.is_symlink() else p.read_bytes())
    return out


_SENTINEL_STATE = _snapshot(SENTINEL)


def _strict_json(text: str) -> bool:
    from placetune.validate import loads_json

    try:
        loads_json(text, "output")
    except PlacetuneError:
        return False
    return True


def _check_output(kind: str, argv: list[str], code: object, out: str, text: str) -> list[str]:
    """The properties every call must keep; returns the outcome keys it broke."""
    broken = []
    if any(leak in text for leak in LEAKS):
        broken.append("secrets leaked")
    if any(c in text for c in RAW_CONTROLS):
        broken.append("escapes leaked")
    if _snapshot(SENTINEL) != _SENTINEL_STATE:
        broken.append("data loss")
    if code == 0 and "--json" in argv and not _strict_json(out):
        broken.append("wrong results")
    return broken


def call(kind: str, argv: list[str]) -> tuple[int, str]:
    """Run the CLI in-process; record the outcome under ``kind``; return (exit code, all output)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    tb = hang = False
    try:
        with alarm(PER_CALL_S, Hang), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse: usage errors exit 2
                code = exc.code
    except Hang:
        hang = True
    except Exception as exc:  # noqa: BLE001 - the property under test: nothing else escapes
        tb = True
        err.write(f"Traceback: {type(exc).__name__}: {exc}")
    text = out.getvalue() + err.getvalue()
    c = COUNTS[kind]
    c["tried"] += 1
    _progress()
    if hang:
        c["hangs"] += 1
    elif tb or code not in DOCUMENTED:
        c["tracebacks"] += 1
    elif code == 0:
        c["accepted"] += 1
    else:
        c["clean errors"] += 1
    broken = _check_output(kind, argv, code, out.getvalue(), text)
    for key in broken:
        c[key] += 1
    assert not hang, f"{kind}: {argv[:6]} ran past {PER_CALL_S} s ({REPLAY})"
    assert not tb and code in DOCUMENTED, f"{kind}: {argv[:6]} -> {code}: {text[-600:]} ({REPLAY})"
    assert not broken, f"{kind}: {argv[:8]}: {', '.join(broken)}: {text[-600:]!r} ({REPLAY})"
    if code not in (0, None) and err.getvalue():
        assert "Traceback" not in err.getvalue()
    return int(code or 0), text


def wrong(kind: str, what: str) -> None:
    """Count and fail a silent wrong result found after a call."""
    COUNTS[kind]["wrong results"] += 1
    raise AssertionError(f"{kind}: {what} ({REPLAY})")


def lost(kind: str, what: str) -> None:
    """Count and fail a data loss found after a call."""
    COUNTS[kind]["data loss"] += 1
    raise AssertionError(f"{kind}: {what} ({REPLAY})")


def _library(kind: str, fn) -> None:
    """Run a library edge; only PlacetuneError may escape."""
    c = COUNTS[kind]
    c["tried"] += 1
    _progress()
    try:
        with alarm(PER_CALL_S, Hang):
            fn()
    except Hang:
        c["hangs"] += 1
        raise AssertionError(f"{kind}: ran past {PER_CALL_S} s ({REPLAY})") from None
    except PlacetuneError:
        c["clean errors"] += 1
        return
    except Exception:
        c["tracebacks"] += 1
        raise
    c["accepted"] += 1


# ----------------------------------------------------------------------------- fixtures
def _copy_db(src: Path, dst: Path) -> Path:
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return dst


def _rows(db: Path) -> dict[str, list]:
    with sqlite3.connect(db) as con:
        return {t: sorted(map(repr, con.execute(f"select * from {t}")))
                for t in ("pt_models", "pt_studies", "pt_measurements", "pt_requests")}


@pytest.fixture(scope="module")
def study_db(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzzdb")
    db = d / "base.db"
    with contextlib.redirect_stdout(io.StringIO()):
        # 10 trials: enough successful measurements for calibrate to run on the stored rows
        assert main(["tune", "--model", "seed-block", "--trials", "10", "--agent", "random", "--storage", str(db),
                     "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db, json.loads((d / "s.plan.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def work(tmp_path_factory):
    """The working directory of every call: default storage and exported plans land here."""
    with in_folder(tmp_path_factory.mktemp("fuzzwork")) as d:
        yield d


# ----------------------------------------------------------------------------- strategies
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=30)
_token = st.one_of(
    _text,
    st.sampled_from(["seed-block", "resnet18", "all-gpu", "all-dla", "dla1", "orin-agx", "xavier-nx", "orin-nano",
                     "fp16", "int8", "fp32", "engine", "pipeline", "replicas", "GPU:8,DLA0:2", "DLA0:0", "nan",
                     "inf", "-inf", "1e308", "-1", "0", "1", "2", "99", "8.6", "10.3", "{}", "[]", '{"layers": 5}',
                     SECRET_URL, "latency<=2", "throughput>=-1", "", " ", "input=1x384x56x56", "x=0x1"]),
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)
_OPTIONS = ["--platform", "--precision", "--trt-version", "--mode", "--placement", "--dla-core", "--replicas",
            "--frames-in-flight", "--noise", "--seed", "--backend", "--shape", "--batch", "--storage", "--study",
            "--trials", "--timeout", "--agent", "--objective", "--constraint", "--granularity", "--json",
            "--no-gpu-fallback", "--device-profile", "--format", "--measurement", "--dpi", "-o"]


@st.composite
def _cli_argv(draw):
    cmd = draw(st.sampled_from(["check", "measure", "tune", "studies", "export", "zoo list", "zoo export",
                                "report", "trace", "calibrate", "doctor", "bogus"]))
    argv = cmd.split()
    if cmd in ("check", "measure", "zoo export"):
        argv.append(draw(st.sampled_from(["seed-block", "resnet18", "seed-block:depth=2"]) | _text))
    if cmd == "tune":
        argv += ["--model", "seed-block", "--trials", "2", "--agent", "random"]
    for _ in range(draw(st.integers(0, 4))):
        opt = draw(st.sampled_from(_OPTIONS))
        argv.append(opt)
        if opt not in ("--json", "--no-gpu-fallback"):
            argv.append(draw(_token))
    return argv


# ----------------------------------------------------------------------------- properties
_VALID_ARGV = [["check", "seed-block"], ["measure", "seed-block", "--json"], ["zoo", "list"],
               ["measure", "seed-block", "--placement", "all-dla", "--mode", "engine"],
               ["check", "resnet18", "--precision", "fp16"], ["measure", "seed-block", "--mode", "replicas"],
               ["tune", "--model", "seed-block", "--trials", "2", "--agent", "random"]]
#: options a well-formed command line adds, with values its grammar allows (per command)
_GOOD_OPTIONS = {
    "check": {"--platform": ["orin-agx", "xavier-nx", "orin-nx-16gb"], "--precision": ["fp16", "int8"], "--json": None,
              "--trt-version": ["8.5", "8.6", "10.3"]},
    "measure": {"--platform": ["orin-agx", "xavier-nx", "orin-nx-16gb"], "--precision": ["fp16", "int8"],
                "--json": None, "--noise": ["0", "0.01", "0.05"], "--seed": ["0", "1", "7", "123456"],
                "--trt-version": ["8.5", "8.6", "10.3"], "--dla-core": ["0", "1"], "--no-gpu-fallback": None},
    "tune": {"--platform": ["orin-agx", "xavier-nx"], "--precision": ["fp16", "int8"], "--seed": ["0", "3", "99"],
             "--objective": ["latency", "throughput"], "--granularity": ["stages", "layer", "fusion"],
             "--mode": ["engine", "pipeline"]},
}


@st.composite
def _good_argv(draw):
    """A well-formed command line: a command that runs, with 0-3 options of its grammar, and in one example of
    four a single value replaced by a hostile token (a mutation of a good input)."""
    argv = list(draw(st.sampled_from(_VALID_ARGV)))
    options = _GOOD_OPTIONS.get(argv[0], {})
    for opt in draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True)) if options else []:
        if opt in argv:
            continue
        argv.append(opt)
        if options[opt] is not None:
            argv.append(draw(st.sampled_from(options[opt])))
    if len(argv) > 2 and draw(st.integers(0, 3)) == 0:
        argv[draw(st.integers(2, len(argv) - 1))] = draw(_token)
    return argv


@fuzz(30)
@given(argv=_cli_argv(), good=_good_argv(), valid=_well_formed)
def test_cli_argument_grammar(argv, good, valid, work):
    if valid:  # most examples: a command that runs (the paths past the checks), at times with one bad value
        argv = list(good)
    if argv[0] == "tune" and "--storage" not in argv:
        argv += ["--storage", str(work / "cli.db")]
    call("CLI arguments", argv)


_toml_value = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str), st.floats().map(repr),
    st.booleans().map(lambda b: "true" if b else "false"), _text.map(json.dumps),
    st.sampled_from(['"seed-block"', '"8h"', '"0s"', '[1, "a"]', '{a = 1}', '"GPU:2"', '[]', f'"{SECRET_URL}"',
                     "inf", "nan", "-inf", "1e300", "1e-300", "0", '"../x"', '""', '["seed-block"]', "[[]]"]),
)
_study_keys = ["model", "models", "platform", "backend", "mode", "objective", "precision", "batch", "shapes",
               "agent", "trials", "timeout", "study", "name", "granularity", "constraints", "device_profile",
               "export", "bogus"]
_setting_keys = ["frames_in_flight", "iterations", "noise", "replicas", "trt_version", "power_mode", "seed",
                 "gpu_fallback", "dla_core", "bogus",
                 # what a study file may not set without --trust-study-file: programs, environment, paths
                 "trtexec", "worker_python", "env", "worker_env", "build_args", "cache_dir", "save_plans"]
#: shapes the parsers must refuse before parsing: deep nesting, a dotted key of many parts
_TOML_SHAPES = {"": "", "deep": "x = " + "[" * 3000 + "]" * 3000 + "\n", "dotted": "a" + ".a" * 20_000 + " = 1\n",
                "inline": "y = " + "{a=" * 500 + "1" + "}" * 500 + "\n", "big int": "z = " + "9" * 500 + "\n"}


def _plan_written(kind: str, path: Path, code: int) -> None:
    """A plan a successful call wrote loads back (strict JSON, every field checked)."""
    from placetune.plan.file import load

    if code == 0 and path.is_file():
        try:
            load(path)
        except PlacetuneError as exc:
            wrong(kind, f"the plan it wrote does not load: {exc}")


#: keys of a well-formed study file, with values their grammar allows
_GOOD_STUDY = {"platform": ['"orin-agx"', '"xavier-nx"', '"xavier-agx"'], "precision": ['"fp16"', '"int8"'],
               "mode": ['"engine"', '"pipeline"'], "objective": ['"latency"', '"throughput"'],
               "granularity": ['"stages"', '"layer"'], "backend": ['"simulate"'], "timeout": ['"8h"', '"30m"']}
_GOOD_SETTINGS = {"settings": {"frames_in_flight": ["1", "2"], "noise": ["0.0", "0.02"], "seed": ["0", "5"],
                               "gpu_fallback": ["true", "false"], "dla_core": ["0", "1"],
                               "trt_version": ['"8.5"', '"8.6"', '"10.3"'], "power_mode": ['"MAXN"']},
                  "agent_options": {}, "backend_options": {}}


@st.composite
def _good_study(draw, table: str):
    """A well-formed study file's [study] and [table] keys (0-3 each), one value in four of the examples that
    have any replaced by a hostile one (a mutation)."""
    study = {k: draw(st.sampled_from(_GOOD_STUDY[k]))
             for k in draw(st.lists(st.sampled_from(sorted(_GOOD_STUDY)), max_size=3, unique=True))}
    options = _GOOD_SETTINGS[table]
    keys = draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True)) if options else []
    extra = {k: draw(st.sampled_from(options[k])) for k in keys}
    target = study if study and draw(st.booleans()) else extra
    if target and draw(st.integers(0, 3)) == 0:
        target[draw(st.sampled_from(sorted(target)))] = draw(_toml_value)
    return study, extra


@fuzz(20)
@given(study=st.dictionaries(st.sampled_from(_study_keys), _toml_value, max_size=4),
       table=st.sampled_from(["settings", "agent_options", "backend_options"]),
       extra=st.dictionaries(st.sampled_from(_setting_keys), _toml_value, max_size=3),
       raw=st.binary(max_size=20), shape=st.sampled_from(sorted(_TOML_SHAPES)), data=st.data(), valid=_well_formed)
def test_study_files(study, table, extra, raw, shape, data, valid, work):
    body = '[study]\nmodel = "seed-block"\ntrials = 2\nagent = "random"\n'
    if valid:  # most examples: a study file of the grammar that runs (the paths after the checks)
        (study, extra), raw, shape = data.draw(_good_study(table)), b"", ""
    body += "".join(f"{k} = {v}\n" for k, v in study.items() if k not in ("model", "trials", "agent", "export"))
    body += f"[{table}]\n" + "".join(f"{k} = {v}\n" for k, v in extra.items()) + _TOML_SHAPES[shape]
    f = work / "fuzz.toml"
    f.write_bytes(body.encode() + (raw if raw and raw[0] % 3 == 0 else b""))
    folder = Path(tempfile.mkdtemp(dir=work))
    out = folder / "x.plan.json"
    code, _ = call("study files", ["tune", str(f), "--storage", str(folder / "study.db"), "--export", str(out)])
    _plan_written("study files", out, code)


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text,
                       st.sampled_from(["GPU", "DLA0", "DLA1", "dla", "/conv1/Conv", "/Concat", ""]))
_json = st.recursive(_json_leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
    st.sampled_from(["layers", "scopes", "default", "placement", "/conv1/Conv", "conv1", ""]) | _text, kids,
    max_size=4), max_leaves=12)


_valid_placement = st.one_of(
    st.fixed_dictionaries({"layers": st.dictionaries(st.sampled_from(["/conv1/Conv", "/conv2/Conv", "/conv3/Conv"]),
                                                     st.sampled_from(["GPU", "DLA0", "DLA1"]), max_size=3)}),
    st.fixed_dictionaries({"default": st.sampled_from(["GPU", "DLA0", "DLA1"])}))


@fuzz(30)
@given(doc=_json, depth=st.sampled_from([0, 0, 0, 5_000, 100_000]), dup=st.booleans(),
       good=_valid_placement, valid=_well_formed)
def test_placements(doc, depth, dup, good, valid, work):
    if valid:  # about half: a placement that measures
        doc, depth, dup = good, 0, False
    text = json.dumps(doc)
    if dup and text.startswith("{") and len(text) > 2:  # a key given twice: refused, never "last one wins"
        text = '{"layers": {}, ' + text[1:]
    text = "[" * depth + text + "]" * depth
    f = work / "placement.json"
    f.write_text(text)
    call("placements", ["measure", "seed-block", "--placement", str(f), "--json"])


_PLAN_PATHS = [["batch"], ["layers"], ["engines"], ["model"], ["model", "hash"], ["model", "input_shapes"],
               ["measured"], ["measured", "timeline"], ["measured", "segment_times_ms"], ["layers", 0, "name"],
               ["layers", 0, "realized"], ["engines", 0, "device"], ["engines", 0, "layers"], ["version"],
               ["simulated"], ["settings"], ["notes"], ["baselines"], ["mode"], ["platform"], ["format"],
               ["engines", 0, "index"], ["engines", 0, "engine_file"], ["engines", 0, "onnx_file"],
               ["engines", 0, "dla_core"], ["settings", "frames_in_flight"], ["calibration_cache"],
               ["model", "renamed_layers"]]
_plan_value = st.one_of(_json, st.sampled_from(["0/../../../x", "/etc/passwd", "../x.engine", 2**63, -1, 1e300,
                                                "model.engine", 0, 1]))


@fuzz(30)
@given(edits=st.lists(st.tuples(st.sampled_from(_PLAN_PATHS), _plan_value), max_size=3), drop=st.booleans(),
       token=st.sampled_from(["", "NaN", "Infinity", "-Infinity", "1e999", "dup"]), valid=_well_formed)
def test_plans(edits, drop, token, valid, study_db, work):
    _, plan = study_db
    if valid:  # about half: the exported plan, or harmless edits of it
        edits, token = [e for e in edits if e[0] in (["notes"],) and isinstance(e[1], list)], ""
    doc = json.loads(json.dumps(plan))
    for path, value in edits:
        cur = doc
        try:
            for k in path[:-1]:
                cur = cur[k]
            if drop and isinstance(cur, dict):
                cur.pop(path[-1], None)
            else:
                cur[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    text = json.dumps(doc)
    if token == "dup":
        text = '{"batch": 1, ' + text[1:]
    elif token:
        text = text.replace('"batch": ', f'"batch": {token}, "x": ', 1)
    f = work / "plan.json"
    f.write_text(text)
    trace = work / "trace.json"
    trace.unlink(missing_ok=True)
    code, _ = call("plans", ["trace", str(f), "-o", str(trace)])
    if code == 0 and not _strict_json(trace.read_text()):
        wrong("plans", "the trace it wrote is not strict JSON")


_profile_value = st.one_of(_toml_value, st.floats(min_value=1e-6, max_value=1e6).map(repr),
                           st.sampled_from(["1e300", "1e-300", "inf", "nan", "-1", "3", "3.0001", "1000", "0.001"]))


@fuzz(30)
@given(top=st.dictionaries(st.sampled_from(["base", "bogus"]), st.sampled_from(['"orin-agx"', '"xavier-nx"',
                                                                              '"nope"', "1"]), max_size=2),
       tables=st.dictionaries(st.sampled_from(["scale", "add", "noise", "scale.op_class", "scale.layer", "values"]),
                              st.dictionaries(st.sampled_from(["gpu", "dla", "boundary", "loadable", "contention",
                                                               "engine_us", "layer_sigma", "seed", '"gpu.conv"',
                                                               '"dla./conv1/Conv"', "bogus"]),
                                              _profile_value, max_size=3), max_size=3),
       mode=st.sampled_from(["engine", "pipeline"]), shape=st.sampled_from(sorted(_TOML_SHAPES)),
       good=st.fixed_dictionaries({"gpu": st.floats(0.01, 100), "dla": st.floats(0.01, 100)}), valid=_well_formed)
def test_device_profiles(top, tables, mode, shape, good, valid, work):
    f = work / "profile.toml"
    if valid:  # about half: a profile that measures
        top, tables, shape = {"base": '"orin-agx"'}, {"scale": {k: repr(v) for k, v in good.items()}}, ""
    body = "".join(f"{k} = {v}\n" for k, v in top.items()) + _TOML_SHAPES[shape]
    for table, values in tables.items():
        body += f"[{table}]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())
    f.write_text(body)
    call("device profiles", ["measure", "seed-block", "--mode", mode, "--device-profile", str(f), "--json"])


_COLUMNS = {
    "pt_measurements": ["payload", "requested", "realized", "latency_samples", "status", "median_ms",
                        "throughput_fps", "trial_number", "created_at", "simulated", "reason", "energy_mj"],
    "pt_studies": ["settings", "fingerprint", "batch", "mode", "platform", "objective", "precision", "created_at",
                   "constraints"],
    "pt_models": ["shapes", "name", "path"],
    "pt_requests": ["measurement_id", "cache_hit", "trial_number", "agent"],
    "pt_schema": ["version"],
}
_cell = st.one_of(st.none(), st.integers(-5, 10**6), st.floats(), _text,
                  _json.map(json.dumps), st.sampled_from(["{bad", "[1,2]", '{"timeline": 5}', "NaN", "abc",
                                                          '{"latency_ms": {"median": 1e999}}', "[NaN, 1.0]"]))


def _ok_rows_finite(db: Path) -> bool:
    """No ``ok`` row holds a NaN or infinite figure in its ranking columns."""
    with sqlite3.connect(db) as con:
        rows = con.execute("select median_ms, throughput_fps, energy_mj from pt_measurements where status = 'ok'")
        return all(v is None or (isinstance(v, (int, float)) and abs(v) != float("inf") and v == v)
                   for r in rows for v in r)


@fuzz(20)
@given(table=st.sampled_from(sorted(_COLUMNS)), data=st.data(), every=st.booleans(),
       cmd=st.sampled_from([["studies"], ["studies", "--json"], ["export", "--study", "s"],
                            ["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "6"],
                            ["calibrate", "--study", "s"]]), valid=_well_formed)
def test_database_rows_read_back(table, data, every, cmd, valid, study_db, work):
    """Rows edited behind placetune's back, read back by every command (most examples: the rows as a tune wrote
    them, or a harmless edit of one: a request's agent, a study's creation time)."""
    base, _ = study_db
    column = data.draw(st.sampled_from(_COLUMNS[table]))
    value = data.draw(_cell)
    if valid:
        table, column, value = data.draw(st.sampled_from([("pt_requests", "agent", "random"),
                                                          ("pt_requests", "agent", "guided"),
                                                          ("pt_studies", "created_at", "2026-01-02 03:04:05.000000"),
                                                          (None, None, None)]))
    db = _copy_db(base, Path(tempfile.mkdtemp(dir=work)) / "rows.db")  # its own file: no lock shared between examples
    with sqlite3.connect(db) as con:
        if table is None:  # the rows as written
            table, column = "pt_schema", "version"
            value = con.execute("select version from pt_schema").fetchone()[0]
        try:  # every row, or one (an edited row among good ones)
            con.execute(f"update {table} set {column} = ?" + ("" if every else " where rowid = 1"), (value,))
        except sqlite3.Error:  # a NOT NULL column: that value cannot be stored at all
            return
    before = _rows(db)
    argv = list(cmd) + ["--storage", str(db)]
    plan = db.parent / "rows.plan.json"
    if cmd[0] == "export":
        argv += ["-o", str(plan)]
    code, _ = call("database rows", argv)
    after = _rows(db)
    if cmd[0] != "tune" or code != 0:  # a successful tune adds rows; nothing else may change any
        if after != before:
            lost("database rows", f"{cmd[0]} changed the stored rows after {table}.{column} = {value!r}")
    elif any(set(before[t]) - set(after[t]) for t in before if t != "pt_studies"):
        lost("database rows", f"tune lost rows after {table}.{column} = {value!r}")
    if code == 0 and cmd[0] == "tune" and not _ok_rows_finite(db):
        wrong("database rows", "an ok row holds a non-finite figure")
    _plan_written("database rows", plan, code)


# ----------------------------------------------------------------------------- Optuna tables
#: Optuna's own tables in the study's database (an optuna-agent study keeps its trials there): column -> table
_OPTUNA_COLUMNS = {
    "trial_params": ["param_name", "param_value", "distribution_json"],
    "trials": ["state", "number", "datetime_start", "datetime_complete"],
    "trial_values": ["value", "value_type", "objective"],
    "trial_user_attributes": ["key", "value_json"],
    "study_directions": ["direction", "objective"],
    "study_user_attributes": ["key", "value_json"],
    "study_system_attributes": ["value_json"],
    "studies": ["study_name"],
    "version_info": ["schema_version", "library_version"],
}
_optuna_cell = st.one_of(_cell, st.sampled_from(["RUNNING", "FAIL", "WAITING", "PRUNED", "MINIMIZE", "NOT_SET",
                                                 "INF_POS", "INF_NEG", '{"name": "CategoricalDistribution", '
                                                 '"attributes": {"choices": ["GPU"]}}', "s", "3.0.0", 99, -1, 2.0]))


@pytest.fixture(scope="module")
def optuna_db(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzzoptuna")
    db = d / "optuna.db"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(["tune", "--model", "seed-block", "--trials", "4", "--agent", "optuna", "--storage", str(db),
                     "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db


@fuzz(6)
@given(table=st.sampled_from(sorted(_OPTUNA_COLUMNS)), data=st.data(), every=st.booleans(),
       cmd=st.sampled_from([["tune", "--model", "seed-block", "--study", "s", "--agent", "optuna", "--trials", "6"]] * 2
                           + [["studies"], ["export", "--study", "s"]]), valid=_well_formed)
def test_optuna_tables(table, data, every, cmd, valid, optuna_db, work):
    """Optuna's tables edited behind its back, then the study resumed, listed and exported: a clean refusal or a
    run, never a traceback; placetune's own rows never lost (most examples: the tables as Optuna wrote them)."""
    db = _copy_db(optuna_db, Path(tempfile.mkdtemp(dir=work)) / "optuna.db")
    if not valid:
        column = data.draw(st.sampled_from(_OPTUNA_COLUMNS[table]))
        value = data.draw(_optuna_cell)
        with sqlite3.connect(db) as con:
            try:
                con.execute(f"update {table} set {column} = ?" + ("" if every else " where rowid = 1"), (value,))
            except sqlite3.Error:  # a NOT NULL or UNIQUE column: that value cannot be stored at all
                return
    before = _rows(db)
    code, _ = call("Optuna tables", list(cmd) + ["--storage", str(db)])
    after = _rows(db)
    if any(set(before[t]) - set(after[t]) for t in before if t != "pt_studies"):
        lost("Optuna tables", f"{cmd[0]} lost placetune's rows after editing {table}")


# ----------------------------------------------------------------------------- build/runtime edges
_FAKE_TRTEXEC = Path(__file__).parent / "fakes" / "trtexec"


@fuzz(1)  # each example runs trtexec's double three times (help, build, time, 3 s of timing): seconds
@given(fault=st.sampled_from(["FAIL=build", "FAIL=infer", "CRASH=build", "CRASH=infer", "DLA_CORES=0",
                              "DLA_CORES=1", "VERSION=8.5.2", "VERSION=10.3.0", "VERSION=11.4.1", "VERSION=7.1.3"]),
       placement=st.sampled_from(["all-gpu", "all-dla", '{"default": "DLA1"}']), valid=_well_formed)
def test_build_runtime_edges(fault, placement, valid, work):
    """A real backend (trtexec, its double) whose build or run fails, crashes, lacks DLA cores or is of another
    TensorRT version: a measurement marked failed (or a clean refusal), never a traceback or a guessed figure
    (most examples: a build and run that work)."""
    import sys

    folder = Path(tempfile.mkdtemp(dir=work))
    if placement.startswith("{"):
        (folder / "p.json").write_text(placement)
        placement = str(folder / "p.json")
    env = {"PLACETUNE_TRTEXEC": str(_FAKE_TRTEXEC), "PLACETUNE_CACHE_DIR": str(folder / "cache"),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    if not valid:
        key, _, value = fault.partition("=")
        env[f"PLACETUNE_FAKE_TRTEXEC_{key}"] = value
    # engine mode (a replicas measurement times each replica for 10 s: too slow for every CI run)
    argv = ["measure", "seed-block", "--backend", "trtexec", "--placement", placement, "--json"]
    with environment(env):
        code, text = call("build/runtime edges", argv)
    if code == 0:
        doc = json.loads(text[:text.rindex("}") + 1][text.index("{"):])
        status = doc.get("status") or doc.get("measurement", {}).get("status")
        if not valid and fault.split("=")[0] in ("FAIL", "CRASH") and status == "ok":
            wrong("build/runtime edges", f"{fault}: the measurement says ok")


@fuzz(30)
@given(options=st.one_of(st.none(), _json), action=_json, sample=st.integers(0, 2**31 - 1), valid=_well_formed)
def test_envs(options, action, sample, valid):
    import placetune.envs as envs

    env = envs.PlacementOneShotEnv("seed-block")
    if valid:  # about half: an action of the action space
        env.action_space.seed(sample)
        options, action = None, env.action_space.sample()

    def go():
        env.reset(seed=0, options=options)
        env.step(action)

    _library("env reset/step", go)


# ----------------------------------------------------------------------------- storage URLs
_PW = "Pl4nt3dSecret"
_url = st.builds(
    lambda scheme, slashes, user, pw, key, odbc, extra: (
        f"{scheme}:{slashes}{user}{(':' + pw) if pw else ''}@127.0.0.1:1/db"
        + (f"?{key}={_PW}" if key else "") + (f"&odbc_connect=DRIVER%3Dx%3BPWD%3D{_PW}%3B" if odbc else "")
        + extra),
    st.sampled_from(["postgresql+psycopg", "postgresql", "mysql+pymysql", "mssql+pyodbc", "sqlite", "bogus+x"]),
    st.sampled_from(["//", "/", ""]),
    st.sampled_from(["tuner", "", "a@b", "u%40x"]),
    st.sampled_from([_PW, _PW.replace("S", "%53"), f"x{_PW}/@#?", ""]),
    st.sampled_from(["", "password", "sslpassword", "passphrase", "api_token", "secret_key", "PWD", "auth"]),
    st.booleans(),
    st.sampled_from(["", "&sslmode=require", "#frag", " trailing", "\n"]),
)


@fuzz(30)
@given(url=_url, where=st.sampled_from(["studies", "export", "calibrate", "report", "tune", "tune file",
                                        "check", "trace", "profile"]), valid=_well_formed)
def test_storage_urls(url, where, valid, study_db, work):
    """Every SQLAlchemy URL form with a planted secret, as --storage and where a file name is expected;
    about half the examples the SQLite URL of a database that works."""
    if valid:
        where = where if where in ("studies", "export", "report") else "studies"
        url = f"sqlite:///{_copy_db(study_db[0], Path(tempfile.mkdtemp(dir=work)) / 'urls.db')}"
    argv = {"studies": ["studies", "--storage", url], "export": ["export", "--study", "s", "--storage", url],
            "calibrate": ["calibrate", "--study", "s", "--storage", url],
            "report": ["report", "--study", "s", "--storage", url, "-o", str(work / "r")],
            "tune": ["tune", "--model", "seed-block", "--trials", "1", "--study", "u", "--storage", url],
            "tune file": ["tune", url], "check": ["check", url], "trace": ["trace", url, "-o", str(work / "t.json")],
            "profile": ["measure", "seed-block", "--device-profile", url]}[where]
    call("storage URLs", argv)


# ----------------------------------------------------------------------------- output targets
_TARGETS = ["new", "regular", "symlink to a file", "symlink to a FIFO", "FIFO", "dangling symlink", "directory",
            "device", "missing folder", "symlink loop"]


def _plan_file(folder: Path, study_db) -> Path:
    p = folder / "s.plan.json"
    p.write_text(json.dumps(study_db[1]))
    return p


def _make_target(folder: Path, kind: str, name: str) -> tuple[Path, Path | None]:
    """An output path of ``kind`` in ``folder`` (and the file a link points to)."""
    p = folder / name
    other = folder / ("target-" + name)
    if kind == "regular":
        p.write_text("old")
    elif kind == "symlink to a file":
        other.write_text("old")
        p.symlink_to(other)
    elif kind == "symlink to a FIFO":
        os.mkfifo(other)
        p.symlink_to(other)
    elif kind == "FIFO":
        os.mkfifo(p)
    elif kind == "dangling symlink":
        p.symlink_to(folder / "nothing")
    elif kind == "directory":
        p.mkdir()
    elif kind == "device":  # like /dev/null, in a temporary folder (the machine's own is never touched)
        device(p, "null")
    elif kind == "missing folder":
        p = folder / "missing" / name
    elif kind == "symlink loop":
        p.symlink_to(p)
    return p, other


@fuzz(30)
@given(kind=st.sampled_from(_TARGETS), cmd=st.sampled_from(["export", "script", "trace", "zoo", "tune"]),
       name=st.sampled_from(["out.json", "out.sh", "o u\tt", "-o", ".hidden", "é.json"]),
       good=st.sampled_from(["new", "regular"]), valid=_well_formed)
def test_output_targets(kind, cmd, name, good, valid, study_db, work):
    """Every way an -o / --export can name a file: written, written through or refused; never replaced when
    it is a link, a device or a FIFO; nothing else touched (most examples: a new or a regular file)."""
    if valid:
        kind = good
    base, _ = study_db
    folder = Path(tempfile.mkdtemp(dir=work))
    path, other = _make_target(folder, kind, name)
    before = os.lstat(path) if os.path.lexists(path) else None
    argv = {"export": ["export", "--study", "s", "--storage", str(base), "-o", str(path)],
            "script": ["export", "--study", "s", "--storage", str(base), "--format", "trtexec", "-o", str(path)],
            "trace": ["trace", str(_plan_file(folder, study_db)), "-o", str(path)],
            "zoo": ["zoo", "export", "seed-block", "-o", str(path)],
            "tune": ["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "4",
                     "--storage", str(_copy_db(base, folder / "t.db")), "--export", str(path)]}[cmd]
    code, _ = call("output targets", argv)
    if before is not None:
        now = os.lstat(path)
        if stat.S_IFMT(now.st_mode) != stat.S_IFMT(before.st_mode) or now.st_ino != before.st_ino \
                and not stat.S_ISREG(before.st_mode):
            lost("output targets", f"{kind} {path} was replaced by {cmd}")
    if code == 0 and kind in ("new", "regular") and cmd in ("export", "tune"):
        _plan_written("output targets", path, code)


# ----------------------------------------------------------------------------- input files
_INPUTS = ["FIFO", "device", "directory", "empty", "huge", "binary", "symlink loop", "dangling symlink",
           "gzip bomb", "corrupt gzip"]


@fuzz(30)
@given(kind=st.sampled_from(_INPUTS), reader=st.sampled_from(["study file", "device profile", "plan", "placement",
                                                              "model", "model.gz", "calibration cache"]),
       blob=st.binary(min_size=0, max_size=64), valid=_well_formed)
def test_input_files(kind, reader, blob, valid, study_db, work):
    """Every reader against files that are not what it reads: refused at once, never blocking, never reading
    a device or a bomb into memory (about half the examples: a good file of the reader's kind)."""
    import gzip

    folder = Path(tempfile.mkdtemp(dir=work))
    p = folder / ("in.onnx.gz" if reader == "model.gz" or kind in ("gzip bomb", "corrupt gzip") else "in")
    if valid and reader != "calibration cache":  # (a calibration cache needs TensorRT: refused here)
        kind = "good"
        good = {"study file": '[study]\nmodel = "seed-block"\ntrials = 2\nagent = "random"\n',
                "device profile": 'base = "orin-agx"\n[scale]\ngpu = 1.5\n',
                "plan": json.dumps(study_db[1]), "placement": '{"default": "DLA0"}'}
        if reader in good:
            p.write_text(good[reader])
        else:
            p = folder / "in.onnx.gz"
            p.write_bytes((Path(__file__).parent / "data" / "seed_block.onnx.gz").read_bytes())
    if kind == "FIFO":
        os.mkfifo(p)
    elif kind == "device":  # like /dev/zero, in a temporary folder
        device(p, "zero")
    elif kind == "directory":
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "huge":
        with open(p, "wb") as fh:
            fh.truncate(3 << 30)  # sparse: 3 GiB over every cap but the engine's
    elif kind == "binary":
        p.write_bytes(blob)
    elif kind == "symlink loop":
        p.symlink_to(p)
    elif kind == "dangling symlink":
        p.symlink_to(folder / "nothing")
    elif kind == "gzip bomb":  # gzip members that expand past the model cap (lowered to 32 MiB here)
        member = gzip.compress(b"\0" * (16 << 20), compresslevel=9)
        p.write_bytes(member * 4)
    elif kind == "corrupt gzip":
        good = gzip.compress(blob * 50 + b"x" * 500)
        p.write_bytes(good[:20] + bytes(b ^ 0x55 for b in good[20:60]) + good[60:])
    argv = {"study file": ["tune", str(p), "--storage", str(folder / "t.db")],
            "device profile": ["measure", "seed-block", "--device-profile", str(p)],
            "plan": ["trace", str(p), "-o", str(folder / "t.json")],
            "placement": ["measure", "seed-block", "--placement", str(p)],
            "model": ["check", str(p)], "model.gz": ["check", str(p)],
            "calibration cache": ["measure", "seed-block", "--backend", "tensorrt", "--calibration-cache", str(p)],
            }[reader]
    if kind == "gzip bomb" and reader not in ("model", "model.gz"):
        return
    import placetune.files.read as read

    cap = read.LIMITS["model"]
    read.LIMITS["model"] = 32 << 20  # the real cap (protobuf's 2 GiB) costs seconds to reach
    try:
        with memory_cap(3 << 30):
            call("input files", argv)
    finally:
        read.LIMITS["model"] = cap


# ----------------------------------------------------------------------------- names
_name = st.text(alphabet=st.sampled_from(list(string.ascii_letters[:6]) + ["\x1b", "[", "]", "0", ";", "\x07",
                                                                            "\u202e", "\u2066", "\r", "\x08", "\n",
                                                                            "\x9b", "/", ".", " ", "é", "\u200f"]),
                min_size=1, max_size=12)


#: a well-formed study name: letters, digits, '-', '_' and '.', a letter first
_good_name = st.builds(lambda a, b: a + b, st.sampled_from(string.ascii_letters),
                       st.text(alphabet=string.ascii_letters + string.digits + "-_.", max_size=11))


@fuzz(12)
@given(name=_name, good=_good_name, valid=_well_formed)
def test_names(name, good, valid, work):
    """Study names with escape sequences, bidi characters and path parts: never raw on the terminal, never a
    file outside the working folder (most examples: a well-formed name)."""
    if valid:
        name = good
    db = Path(tempfile.mkdtemp(dir=work)) / "n.db"
    code, _ = call("names", ["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--study", name,
                             "--storage", str(db)])
    if code == 0:
        call("names", ["studies", "--storage", str(db)])
        call("names", ["export", "--study", name, "--storage", str(db)])
    stray = [p for p in work.parent.iterdir() if p.name.endswith(".plan.json")]
    if stray:
        lost("names", f"a plan file landed outside the working folder: {stray}")


# ----------------------------------------------------------------------------- input data (.npz)
#: flaws of an input data file, each refused; the valid examples are the right array, compressed or not,
#: in C or Fortran order
_NPZ_FLAWS = ["nan", "inf", "dtype", "shape", "scalar", "key", "extra key", "claimed shape", "pickle", "truncate",
              "flip", "no array", "not zip"]


class _Planted:
    """An object whose unpickling writes a file: a pickle in an input data file must never be loaded."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (self.marker, "w")


@fuzz(20)
@given(data=st.data(), valid=_well_formed)
def test_input_data(data, valid, work):
    """Input data files (``--input-data FILE.npz``) with NaN, other dtypes, shapes and keys, a header claiming
    more than the file holds, a planted pickle, damaged bytes: refused with one line, never unpickled, never
    allocated past what the file holds (most examples: the network's input, compressed or not)."""
    import numpy as np

    folder = Path(tempfile.mkdtemp(dir=work))
    p, marker = folder / "in.npz", folder / "unpickled"
    flaw = "none" if valid else data.draw(st.sampled_from(_NPZ_FLAWS))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    x = rng.standard_normal((1, 384, 56, 56)).astype(np.float32)
    arrays: dict[str, object] = {"input": x}
    if flaw == "none" and data.draw(st.booleans()):
        arrays["input"] = np.asfortranarray(x)
    elif flaw in ("nan", "inf"):
        x.flat[data.draw(st.integers(0, x.size - 1))] = np.nan if flaw == "nan" else data.draw(
            st.sampled_from([np.inf, -np.inf]))
    elif flaw == "dtype":
        arrays["input"] = x.astype(data.draw(st.sampled_from(["float16", "float64", "int32", "int64", "uint8", "bool",
                                                              "complex64", "<U1", "V4"])))
    elif flaw == "shape":
        arrays["input"] = np.zeros(data.draw(st.sampled_from([(384, 56, 56), (2, 384, 56, 56), (1, 384, 56, 55),
                                                              (1,), (0, 384, 56, 56)])), np.float32)
    elif flaw == "scalar":
        arrays["input"] = np.float32(data.draw(st.floats(-1, 1)))
    elif flaw == "key":
        arrays = {data.draw(st.sampled_from(["images", "", "input.npy", "../input", "\x1b[31minput"])): x}
    elif flaw == "extra key":
        arrays["other"] = x[:, :1]
    elif flaw == "pickle":
        arrays["input"] = np.array([_Planted(str(marker))], dtype=object)
    elif flaw == "no array":
        arrays = {}
    if flaw == "claimed shape":
        import zipfile

        header = io.BytesIO()
        shape = tuple(data.draw(st.lists(st.integers(0, 2**40), min_size=0, max_size=4)))
        np.lib.format.write_array_header_1_0(header, {"descr": data.draw(st.sampled_from(["<f4", "<f8", "|u1"])),
                                                      "fortran_order": False, "shape": shape})
        with zipfile.ZipFile(p, "w") as z:
            z.writestr("input.npy", header.getvalue() + data.draw(st.binary(max_size=64)))
    elif flaw == "not zip":
        p.write_bytes(data.draw(st.binary(max_size=256)))
    else:
        save = np.savez_compressed if data.draw(st.booleans()) else np.savez
        try:
            save(p, **arrays)
        except ValueError:  # numpy refuses a key it cannot name a member with
            return
    raw = p.read_bytes()
    if flaw == "truncate":
        p.write_bytes(raw[: data.draw(st.integers(0, len(raw) - 1))])
    elif flaw == "flip":
        b = bytearray(raw)
        for _ in range(data.draw(st.integers(1, 20))):
            b[data.draw(st.integers(0, len(b) - 1))] ^= data.draw(st.integers(1, 255))
        p.write_bytes(bytes(b))
    with memory_cap(2 << 30):
        code, text = call("input data", ["measure", "seed-block", "--input-data", str(p)])
    if marker.exists():
        wrong("input data", f"a pickle in the input data file was loaded ({flaw})")
    if code == 0 and flaw not in ("none", "flip", "truncate"):
        wrong("input data", f"input data with flaw {flaw!r} was taken: {text[-300:]!r}")
    if flaw == "none" and code != 0:
        wrong("input data", f"the network's own input was refused: {text[-300:]!r}")


# ----------------------------------------------------------------------------- ONNX mutations
_SEED_BLOCK: list[bytes] = []


#: mutations that keep a model TensorRT's parser imports (most examples: one of these or none)
_HARMLESS = ["none", "empty names", "unique names", "opset", "io type"]


@st.composite
def _mutation(draw, valid: bool = False):
    import gzip

    import onnx

    if not _SEED_BLOCK:
        _SEED_BLOCK.append(gzip.decompress((Path(__file__).parent / "data" / "seed_block.onnx.gz").read_bytes()))
    proto = onnx.load_from_string(_SEED_BLOCK[0])
    g = proto.graph
    op = draw(st.sampled_from(_HARMLESS if valid else [
        "duplicate names", "empty names", "dims", "op type", "drop node", "initializer", "external data", "truncate",
        "flip", "opset", "io type", "rank", "tensor twice", "unproduced output"]))
    i = draw(st.integers(0, len(g.node) - 1))
    if valid and op == "opset":
        proto.opset_import[0].version = draw(st.integers(13, 17))
        op = "none"
    elif valid and op == "io type":  # the parser casts DOUBLE to FLOAT: still imported
        g.input[0].type.tensor_type.elem_type = draw(st.sampled_from([1, 11]))
        op = "none"
    elif op == "unique names":
        for k, n in enumerate(g.node):
            n.name = f"{n.name or n.op_type}__{k}"
    if op == "duplicate names":
        for n in g.node[: draw(st.integers(2, len(g.node)))]:
            n.name = draw(st.sampled_from(["dup", "dup_0", "dup_1", ""]))
    elif op == "empty names":
        g.node[i].name = ""
    elif op == "dims":
        dims = g.input[0].type.tensor_type.shape.dim
        dims[draw(st.integers(0, len(dims) - 1))].dim_value = draw(st.sampled_from([0, -1, 2**40, 2**62, 1]))
    elif op == "op type":
        g.node[i].op_type = draw(st.sampled_from(["", "Fuzz", "Conv2D", "If"]))
    elif op == "drop node":
        del g.node[i]
    elif op == "initializer" and len(g.initializer):
        t = g.initializer[draw(st.integers(0, len(g.initializer) - 1))]
        t.dims[:] = [draw(st.integers(-3, 2**33)) for _ in t.dims] or [7]
    elif op == "external data" and len(g.initializer):
        from onnx import TensorProto

        t = g.initializer[0]
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        t.external_data.add(key="location", value=draw(st.sampled_from(["../../etc/passwd", "/etc/passwd",
                                                                         "fifo", "missing.bin", "w.bin"])))
        t.external_data.add(key="length", value=draw(st.sampled_from(["16", str(2**40), "-1"])))
    elif op == "opset":
        proto.opset_import[0].version = draw(st.sampled_from([1, 6, 7, 999]))
    elif op == "io type":  # what TensorRT's parser imports (FLOAT, DOUBLE, FLOAT16) and what it cannot
        vi = draw(st.sampled_from([g.input[0], g.output[0]]))
        vi.type.tensor_type.elem_type = draw(st.sampled_from([0, 1, 8, 10, 11, 14, 15, 4, 5, 19]))
    elif op == "rank":
        for _ in range(draw(st.integers(1, 6))):
            g.input[0].type.tensor_type.shape.dim.add(dim_value=1)
    elif op == "tensor twice":
        g.node[i].output[0] = draw(st.sampled_from([g.input[0].name, g.node[0].output[0], g.output[0].name]))
    elif op == "unproduced output":
        g.output.add().CopyFrom(g.output[0])
        g.output[-1].name = draw(st.sampled_from(["nowhere", "", g.input[0].name]))
    raw = proto.SerializeToString()
    if op == "truncate":
        raw = raw[: draw(st.integers(0, len(raw) - 1))]
    elif op == "flip":
        b = bytearray(raw)
        for _ in range(draw(st.integers(1, 20))):
            b[draw(st.integers(0, len(b) - 1))] ^= draw(st.integers(1, 255))
        raw = bytes(b)
    return op, raw


@fuzz(20)
@given(data=st.data(), cmd=st.sampled_from(["check", "measure", "folder"]), valid=_well_formed)
def test_onnx_mutations(data, cmd, valid, work):
    """Mutations of a real export: imported (valid JSON out) or refused with one line; external data never
    read from outside the model's folder or from a FIFO; duplicate names never addressed by a guessed name (most
    examples: a model TensorRT's parser imports, unchanged or mildly edited)."""
    op, raw = data.draw(_mutation(valid))
    folder = Path(tempfile.mkdtemp(dir=work))
    path = folder / "m.onnx"
    path.write_bytes(raw)
    os.mkfifo(folder / "fifo")
    (folder / "w.bin").write_bytes(b"\0" * 16)
    if cmd == "folder":
        db = folder / "t.db"
        code, _ = call("ONNX mutations", ["tune", "--model", str(path), "--mode", "pipeline", "--trials", "3",
                                          "--agent", "random", "--storage", str(db), "--study", "m",
                                          "--export", str(folder / "m.plan.json")])
        if code == 0:
            call("ONNX mutations", ["export", "--study", "m", "--storage", str(db), "--format", "trtexec",
                                    "-o", str(folder / "deploy")])
        return
    argv = ["check", str(path), "--json"] if cmd == "check" else ["measure", str(path), "--json"]
    call("ONNX mutations", argv)


def test_secret_storage_url_never_printed(work):
    """The planted password in a storage URL, through every command that takes --storage."""
    for argv in (["studies", "--storage", SECRET_URL], ["export", "--study", "s", "--storage", SECRET_URL],
                 ["tune", "--model", "seed-block", "--trials", "1", "--storage", SECRET_URL, "--mode", "replicas",
                  "--replicas", "GPU:1"]):
        call("storage URLs", argv)


def test_long_run_spreads_calls_as_ci():
    """$PLACETUNE_FUZZ_CALLS spreads a long run's calls over the properties as CI spreads its examples."""
    assert sum(REGISTERED) == CI_EXAMPLES, "update CI_EXAMPLES to the sum of the fuzz(n) counts"


def _valid_share(c: dict) -> float:
    """The share of the calls of a kind that got past validation (exit 0)."""
    return round(c["accepted"] / c["tried"], 3) if c.get("tried") else 0.0


_START = [0.0]
_SUMMARY_PATH: list[Path] = []


def _summary_doc() -> dict:
    import time

    doc = {kind: {key: c.get(key, 0) for key in OUTCOMES} for kind, c in sorted(COUNTS.items())}
    doc["TOTAL"] = {key: sum(c[key] for c in doc.values()) for key in OUTCOMES}
    for c in doc.values():
        c["valid share"] = _valid_share(c)
    doc["SEED"] = SEED
    doc["WALL_S"] = round(time.monotonic() - _START[0], 1)
    doc["UNDER_HALF_VALID"] = [k for k, c in doc.items() if isinstance(c, dict) and c["valid share"] < 0.5]
    return doc


def _progress() -> None:
    """A long run writes its summary every 100 calls: a run stopped early still says what it did."""
    total = sum(c["tried"] for c in COUNTS.values())
    if (CALLS or EXAMPLES) and _SUMMARY_PATH and total % 100 == 0:
        _SUMMARY_PATH[0].write_text(json.dumps(_summary_doc(), indent=1) + "\n")


@pytest.fixture(scope="module", autouse=True)
def _summary(tmp_path_factory):
    import time

    _START[0] = time.monotonic()
    path = Path(os.environ.get("PLACETUNE_FUZZ_SUMMARY") or tmp_path_factory.getbasetemp() / "fuzz-summary.json")
    _SUMMARY_PATH[:] = [path]
    yield
    doc = _summary_doc()
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"\nfuzz summary, seed {SEED}, {doc['TOTAL']['tried']} calls in {doc['WALL_S']} s ({REPLAY}; {path}):")
    for kind, c in doc.items():
        if isinstance(c, dict):
            print(f"  {kind:16} valid {c['valid share']:.0%}: " + ", ".join(f"{k} {v}" for k, v in c.items()
                                                                        if k != "valid share"))
    if CALLS and doc["TOTAL"]["tried"] < CALLS:
        print(f"  ({doc['TOTAL']['tried']} calls, fewer than the {CALLS} asked: Hypothesis ran out of distinct "
              "examples of some properties)")
