"""Issue 18: property-based fuzzing of every input kind, with a bounded number of examples.

Each property calls ``placetune.cli.main.main([...])`` in-process (or the library edge for
device profiles and stored rows) and asserts: the exit code is one README documents, no
traceback (only SystemExit and placetune's error classes escape), no hang (a per-call alarm),
the stored rows are unchanged, and a planted PostgreSQL password appears in no output.

Counts per input kind (tried, clean errors, accepted, tracebacks, hangs, rows lost, secrets
leaked) are written to ``$PLACETUNE_FUZZ_SUMMARY`` (default ``fuzz-summary.json`` in the
pytest temporary base directory) and printed at the end of the session (visible with ``-s``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import sqlite3
import string
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placetune.cli.main import main
from placetune.errors import PlacetuneError

DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 130}
SECRET = "s3cr/etPW@#x"
SECRET_URL = "postgresql+psycopg://tuner:s3cr%2FetPW%40%23x@127.0.0.1:1/db"
PER_CALL_S = 20
FUZZ = settings(max_examples=30, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                       HealthCheck.data_too_large])

COUNTS: dict[str, Counter] = defaultdict(Counter)


class Hang(Exception):
    """A call ran past PER_CALL_S."""


@contextlib.contextmanager
def _alarm(seconds: int):
    def boom(signum, frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def call(kind: str, argv: list[str]) -> tuple[int, str]:
    """Run the CLI in-process; record the outcome under ``kind``; return (exit code, all output)."""
    out, err = io.StringIO(), io.StringIO()
    code: object = None
    tb = hang = False
    try:
        with _alarm(PER_CALL_S), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
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
    if hang:
        c["hangs"] += 1
    elif tb or code not in DOCUMENTED:
        c["tracebacks"] += 1
    elif code == 0:
        c["accepted"] += 1
    else:
        c["clean errors"] += 1
    if SECRET in text or "s3cr%2FetPW" in text:
        c["secrets leaked"] += 1
    assert not hang, f"{kind}: {argv[:6]} ran past {PER_CALL_S} s"
    assert not tb and code in DOCUMENTED, f"{kind}: {argv[:6]} -> {code}: {text[-600:]}"
    assert SECRET not in text and "s3cr%2FetPW" not in text, f"{kind}: the password leaked: {text[-400:]}"
    if code not in (0, None) and err.getvalue():
        assert "Traceback" not in err.getvalue()
    return int(code or 0), text


def _library(kind: str, fn) -> None:
    """Run a library edge; only PlacetuneError may escape."""
    c = COUNTS[kind]
    c["tried"] += 1
    try:
        with _alarm(PER_CALL_S):
            fn()
    except Hang:
        c["hangs"] += 1
        raise AssertionError(f"{kind}: ran past {PER_CALL_S} s") from None
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
        assert main(["tune", "--model", "seed-block", "--trials", "4", "--agent", "random", "--storage", str(db),
                     "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db, json.loads((d / "s.plan.json").read_text())


@pytest.fixture(scope="module", autouse=True)
def work(tmp_path_factory):
    """The working directory of every call: default storage and exported plans land here."""
    d = tmp_path_factory.mktemp("fuzzwork")
    old = os.getcwd()
    os.chdir(d)
    yield d
    os.chdir(old)


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
@FUZZ
@given(argv=_cli_argv())
def test_cli_argument_grammar(argv, work):
    if argv[0] == "tune" and "--storage" not in argv:
        argv += ["--storage", str(work / "cli.db")]
    call("CLI arguments", argv)


_toml_value = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str), st.floats().map(repr),
    st.booleans().map(lambda b: "true" if b else "false"), _text.map(json.dumps),
    st.sampled_from(['"seed-block"', '"8h"', '"0s"', '[1, "a"]', '{a = 1}', '"GPU:2"', '[]', f'"{SECRET_URL}"']),
)
_study_keys = ["model", "platform", "backend", "mode", "objective", "precision", "batch", "shapes", "agent",
               "trials", "timeout", "study", "name", "granularity", "constraints", "device_profile", "bogus"]
_setting_keys = ["frames_in_flight", "iterations", "noise", "replicas", "trt_version", "power_mode", "seed",
                 "gpu_fallback", "dla_core", "bogus"]


@FUZZ
@given(study=st.dictionaries(st.sampled_from(_study_keys), _toml_value, max_size=4),
       table=st.sampled_from(["settings", "agent_options", "backend_options"]),
       extra=st.dictionaries(st.sampled_from(_setting_keys), _toml_value, max_size=3),
       raw=st.binary(max_size=20))
def test_study_files(study, table, extra, raw, work):
    body = '[study]\nmodel = "seed-block"\ntrials = 2\nagent = "random"\n'
    body += "".join(f"{k} = {v}\n" for k, v in study.items() if k not in ("model", "trials", "agent"))
    body += f"[{table}]\n" + "".join(f"{k} = {v}\n" for k, v in extra.items())
    f = work / "fuzz.toml"
    f.write_bytes(body.encode() + (raw if raw and raw[0] % 3 == 0 else b""))
    call("study files", ["tune", str(f), "--storage", str(work / "study.db"), "--export", str(work / "x.plan.json")])


_json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), _text,
                       st.sampled_from(["GPU", "DLA0", "DLA1", "dla", "/conv1/Conv", "/Concat", ""]))
_json = st.recursive(_json_leaf, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(
    st.sampled_from(["layers", "scopes", "default", "placement", "/conv1/Conv", "conv1", ""]) | _text, kids,
    max_size=4), max_leaves=12)


@FUZZ
@given(doc=_json, depth=st.sampled_from([0, 0, 0, 5_000, 100_000]))
def test_placements(doc, depth, work):
    text = "[" * depth + json.dumps(doc) + "]" * depth
    f = work / "placement.json"
    f.write_text(text)
    call("placements", ["measure", "seed-block", "--placement", str(f)])


_PLAN_PATHS = [["batch"], ["layers"], ["engines"], ["model"], ["model", "hash"], ["model", "input_shapes"],
               ["measured"], ["measured", "timeline"], ["measured", "segment_times_ms"], ["layers", 0, "name"],
               ["layers", 0, "realized"], ["engines", 0, "device"], ["engines", 0, "layers"], ["version"],
               ["simulated"], ["settings"], ["notes"], ["baselines"], ["mode"], ["platform"], ["format"]]


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(_PLAN_PATHS), _json), max_size=3), drop=st.booleans())
def test_plans(edits, drop, study_db, work):
    _, plan = study_db
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
    f = work / "plan.json"
    f.write_text(json.dumps(doc))
    call("plans", ["trace", str(f), "-o", str(work / "trace.json")])


@FUZZ
@given(body=st.dictionaries(st.sampled_from(["name", "values", "gpu", "dla", "arch", "platform", "version",
                                              "bogus"]), _toml_value, max_size=4),
       table=st.sampled_from(["", "values", "values.orin", "gpu"]))
def test_device_profiles(body, table, work):
    f = work / "profile.toml"
    head = f"[{table}]\n" if table else ""
    f.write_text(head + "".join(f"{k} = {v}\n" for k, v in body.items()))
    call("device profiles", ["measure", "seed-block", "--device-profile", str(f)])


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
                  _json.map(json.dumps), st.sampled_from(["{bad", "[1,2]", '{"timeline": 5}', "NaN", "abc"]))


@FUZZ
@given(table=st.sampled_from(sorted(_COLUMNS)), data=st.data(),
       cmd=st.sampled_from([["studies"], ["studies", "--json"], ["export", "--study", "s"],
                            ["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "6"],
                            ["calibrate", "--study", "s"]]))
def test_database_rows_read_back(table, data, cmd, study_db, work):
    base, _ = study_db
    column = data.draw(st.sampled_from(_COLUMNS[table]))
    value = data.draw(_cell)
    db = _copy_db(base, work / "rows.db")
    with sqlite3.connect(db) as con:
        try:
            con.execute(f"update {table} set {column} = ?", (value,))
        except sqlite3.Error:  # a NOT NULL column: that value cannot be stored at all
            return
    before = _rows(db)
    argv = list(cmd) + ["--storage", str(db)]
    if cmd[0] == "export":
        argv += ["-o", str(work / "rows.plan.json")]
    code, _ = call("database rows", argv)
    after = _rows(db)
    if cmd[0] != "tune" or code != 0:  # a successful tune adds rows; nothing else may change any
        lost = sum(len(set(before[t]) - set(after[t])) for t in before)
        COUNTS["database rows"]["rows lost"] += lost
        assert after == before, f"{cmd[0]} changed the stored rows after {table}.{column} = {value!r}"
    else:
        lost = sum(len(set(before[t]) - set(after[t])) for t in before if t != "pt_studies")
        COUNTS["database rows"]["rows lost"] += lost
        assert lost == 0


@FUZZ
@given(options=st.one_of(st.none(), _json), action=_json)
def test_envs(options, action):
    import placetune.envs as envs

    env = envs.PlacementOneShotEnv("seed-block")

    def go():
        env.reset(seed=0, options=options)
        env.step(action)

    _library("env reset/step", go)


def test_secret_storage_url_never_printed(work):
    """The planted password in a storage URL, through every command that takes --storage."""
    for argv in (["studies", "--storage", SECRET_URL], ["export", "--study", "s", "--storage", SECRET_URL],
                 ["tune", "--model", "seed-block", "--trials", "1", "--storage", SECRET_URL, "--mode", "replicas",
                  "--replicas", "GPU:1"]):
        call("secrets", argv)


@pytest.fixture(scope="module", autouse=True)
def _summary(tmp_path_factory):
    yield
    doc = {kind: {key: c.get(key, 0) for key in ("tried", "clean errors", "accepted", "tracebacks", "hangs",
                                                 "rows lost", "secrets leaked")}
           for kind, c in sorted(COUNTS.items())}
    path = Path(os.environ.get("PLACETUNE_FUZZ_SUMMARY") or tmp_path_factory.getbasetemp() / "fuzz-summary.json")
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print("\nfuzz summary (" + str(path) + "):")
    for kind, c in doc.items():
        print(f"  {kind:16} " + ", ".join(f"{k} {v}" for k, v in c.items()))
