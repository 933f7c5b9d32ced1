"""Hostile input at every edge is a one-line error with a documented exit code, never a traceback."""

from __future__ import annotations

import gzip
import json
import sqlite3

import pytest

from placetune.cli.main import main
from placetune.errors import ConfigError, StoreError

#: The exit codes README documents (0 ok, 1 infeasible measurement, 2 usage, 3..8 error classes, 130 Ctrl-C).
DOCUMENTED = {0, 1, 2, 3, 4, 5, 6, 7, 8, 130}


@pytest.fixture(scope="module")
def base_db(tmp_path_factory):
    """A database with one small finished study ``s`` (4 random placements of seed-block)."""
    d = tmp_path_factory.mktemp("hostile")
    db = d / "base.db"
    assert main(["tune", "--model", "seed-block", "--trials", "4", "--agent", "random", "--storage", str(db),
                 "--study", "s", "--export", str(d / "s.plan.json")]) == 0
    return db


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a tune's default export lands here, not in the repository


def copy_db(src, dst):
    """A copy of a SQLite database, its write-ahead log included."""
    with sqlite3.connect(src) as a, sqlite3.connect(dst) as b:
        a.backup(b)
    return dst


def run(argv, capsys):
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def refused(argv, capsys, code, pattern):
    rc, out, err = run(argv, capsys)
    assert rc == code, (rc, err[-400:])
    assert "Traceback" not in err and err.startswith("placetune: error: ") and pattern in err, err[-400:]
    assert len(err.strip().splitlines()) == 1, err


def test_corrupt_gzip_model(tmp_path, capsys):
    bad = tmp_path / "bad.onnx.gz"
    bad.write_bytes(gzip.compress(b"x" * 1000)[:12] + b"\xff" * 200)
    rc, _, err = run(["check", bad], capsys)
    assert rc == 3 and "Traceback" not in err


@pytest.mark.parametrize("text, pattern", [
    ('{"layers": [1, 2]}', "'layers' must be an object"),
    ('{"layers": {"/conv1/Conv": 5}}', "must be strings"),
    ('{"scopes": 3}', "'scopes' must be an object"),
    ('{"scopes": {"": "DLA0"}, "layer": {}}', "unknown key(s) 'layer'"),
])
def test_placement_wrong_types(text, pattern, capsys):
    refused(["measure", "seed-block", "--placement", text], capsys, 5, pattern)


def test_placement_deep_nesting(tmp_path, capsys):
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    refused(["measure", "seed-block", "--placement", f], capsys, 5, "nested too deeply")


def test_huge_device_name_is_cut(tmp_path, capsys):
    f = tmp_path / "big.json"
    f.write_text(json.dumps({"layers": {"/conv1/Conv": "X" * 5_000_000}}))
    rc, _, err = run(["measure", "seed-block", "--placement", f], capsys)
    assert rc == 5 and len(err) < 2500 and "unknown device" in err


def test_huge_values_in_a_study_file_are_cut(tmp_path, capsys):
    f = tmp_path / "big.toml"
    f.write_text('[study]\nmodel = "seed-block"\nplatform = "' + "X" * 500_000 + '"\n')  # under the 1 MiB cap
    rc, _, err = run(["tune", f, "--storage", tmp_path / "t.db"], capsys)
    assert rc in (4, 6) and len(err) < 2500 and "message cut" in err


def test_long_file_names_are_not_tracebacks(capsys):
    refused(["check", "Y" * 100_000], capsys, 3, "neither an ONNX file nor a zoo model")
    rc, _, err = run(["studies", "--storage", "Z" * 100_000], capsys)
    assert rc == 7 and "Traceback" not in err and len(err) < 2500


@pytest.mark.parametrize("dpi", [0, -5, 100_000])
def test_report_dpi(dpi, base_db, tmp_path, capsys):
    refused(["report", "--study", "s", "--storage", base_db, "-o", tmp_path / "r", "--dpi", dpi], capsys, 6,
            "--dpi must be an integer from 10 to 1200")


@pytest.mark.parametrize("argv, allowed", [
    (["tune", "--model", "seed-block", "--trials", 99999999999999999999], "--trials must be an integer from 1 to 1000000"),
    (["tune", "--model", "seed-block", "--trials", 0], "--trials must be an integer from 1 to 1000000"),
    (["tune", "--model", "seed-block", "--trials", 2, "--streams", 2**64], "--streams must be an integer from 1 to 1024"),
    (["measure", "seed-block", "--frames-in-flight", 2**70], "--frames-in-flight must be an integer from 1 to 64"),
    (["measure", "seed-block", "--dla-core", -(2**70)], "--dla-core must be an integer from 0 to 1"),
])
def test_integer_options_name_their_own_range(argv, allowed, tmp_path, capsys):
    """A number past 64 bits was refused with the generic "from -9223372036854775808 to ...", not the option's range."""
    refused([*argv, "--storage", tmp_path / "t.db"] if argv[0] == "tune" else argv, capsys, 6, allowed)
    assert not (tmp_path / "t.db").exists()


def test_the_command_line_ranges_are_those_of_the_fields():
    from placetune.cli.checks import INT_RANGES
    from placetune.settings import MAX_FRAMES_IN_FLIGHT
    from placetune.tuning.studyfile import MAX_STREAMS, MAX_TRIALS

    assert INT_RANGES["trials"] == (1, MAX_TRIALS) and INT_RANGES["streams"] == (1, MAX_STREAMS)
    assert INT_RANGES["frames_in_flight"] == (1, MAX_FRAMES_IN_FLIGHT)


@pytest.mark.parametrize("seed", [-1, 2**40])
def test_optuna_seed_out_of_range(seed, tmp_path, capsys):
    refused(["tune", "--model", "seed-block", "--agent", "optuna", "--seed", seed, "--trials", "2",
             "--storage", tmp_path / "t.db"], capsys, 6, "seed must be an integer from 0 to 4294967295")
    assert not (tmp_path / "t.db").exists()


@pytest.mark.parametrize("body, pattern", [
    ('[study]\nmodel = "seed-block"\nshapes = 5\n', "shapes must be a list"),
    ('[study]\nmodel = "seed-block"\ngranularity = 5\n', "granularity must be a non-empty text"),
    ('[study]\nmodel = "seed-block"\nexport = 5\n', "export must be a non-empty text"),
    ('[study]\nmodel = 5\n', "model must be a non-empty text"),
    ('study = 5\n', "study must be a table"),
    ('settings = "x"\n[study]\nmodel = "seed-block"\n', "settings must be a table"),
    ('[study]\nmodel = "seed-block"\nmode = "replicas"\n[settings]\nreplicas = [1]\n', "replicas must map devices"),
    ('[study]\nmodel = "seed-block"\nagent = "random"\n[agent_options]\nseed = "x"\n', "seed must be an integer"),
    ('[study]\nmodel = "seed-block"\n[backend_options]\nbogus = 1\n', "has no option(s) 'bogus'"),
    ('[study]\nmodel = "seed-block"\n[settings]\nseed = -3\n', "seed"),
])
def test_study_file_wrong_types(body, pattern, tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_text(body)
    refused(["tune", f, "--storage", tmp_path / "t.db"], capsys, 6, pattern)


def test_study_file_not_utf8(tmp_path, capsys):
    f = tmp_path / "s.toml"
    f.write_bytes(b'[study]\nmodel = "seed-\xff\xfe"\n')
    refused(["tune", f, "--storage", tmp_path / "t.db"], capsys, 6, "not UTF-8")


def test_export_to_a_directory(base_db, tmp_path, capsys):
    refused(["export", "--study", "s", "--storage", base_db, "--format", "json", "-o", "/"], capsys, 6, "directory")
    refused(["export", "--study", "s", "--storage", base_db, "--format", "json", "-o", tmp_path], capsys, 6,
            "directory")
    # --format trtexec -o DIR writes a plan folder, but never into a directory holding other files
    refused(["export", "--study", "s", "--storage", base_db, "--format", "trtexec", "-o", "/"], capsys, 6,
            "directory is not empty")
    (tmp_path / "notes.txt").write_text("mine")
    refused(["export", "--study", "s", "--storage", base_db, "--format", "trtexec", "-o", tmp_path], capsys, 6,
            "directory is not empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert run(["export", "--study", "s", "--storage", base_db, "--format", "trtexec", "-o", tmp_path / "new"],
               capsys)[0] == 0
    assert (tmp_path / "new" / "build.sh").is_file()


def test_plan_nested_too_deeply(tmp_path, capsys):
    f = tmp_path / "deep.json"
    f.write_text("[" * 100_000 + "]" * 100_000)
    refused(["trace", f, "-o", tmp_path / "t.json"], capsys, 6, "nested too deeply")


TAMPER = {
    "payload invalid JSON": ("update pt_measurements set payload='{bad'", "corrupt"),
    "payload a list": ("update pt_measurements set payload='[1,2]'", "payload is a list"),
    "payload wrong types": ("update pt_measurements set payload='{\"latency_ms\": \"x\"}'", "'latency_ms'"),
    "requested a list": ("update pt_measurements set requested='[1]', realized='5'", "corrupt"),
    "samples invalid JSON": ("update pt_measurements set latency_samples='x'", "corrupt"),
    "status unknown": ("update pt_measurements set status='5'", "'status'"),
    "schema version text": ("update pt_schema set version='abc'", "schema version"),
    # an edited requested column of a row whose payload says "requested is realized" reached .items() (long fuzz)
    "requested column a number": ("update pt_measurements set requested='1' where id = 1", "column requested"),
    "requested column a string": ("update pt_measurements set requested='\"0\"' where id = 1", "column requested"),
    # a migration loop over range(-2e14, 2) never ended (long fuzz run)
    "schema version negative": ("update pt_schema set version=-191493508075244.0", "schema version"),
    "settings invalid JSON": ("update pt_studies set settings='{bad'", "corrupt"),
    "settings a list": ("update pt_studies set settings='[1]'", "settings is [1]"),
    "batch text": ("update pt_studies set batch='x'", "batch is 'x'"),
    "created_at text": ("update pt_measurements set created_at='garbage'", "timestamp is corrupt"),
}


@pytest.mark.parametrize("case", sorted(TAMPER))
def test_tampered_database_rows(case, base_db, tmp_path, capsys):
    sql, pattern = TAMPER[case]
    db = copy_db(base_db, tmp_path / "t.db")
    con = sqlite3.connect(db)
    con.executescript(sql)
    con.commit()
    con.close()
    for argv in (["export", "--study", "s", "-o", tmp_path / "p.json"],
                 ["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "6"]):
        refused(argv + ["--storage", db], capsys, 7, pattern)


def test_store_api_raises_store_errors(base_db, tmp_path):
    from placetune.store.store import Store

    db = copy_db(base_db, tmp_path / "t.db")
    con = sqlite3.connect(db)
    con.executescript("update pt_measurements set payload='{\"timeline\": 5}'")
    con.commit()
    con.close()
    with Store(f"sqlite:///{db}") as store, pytest.raises(StoreError, match="'timeline' is 5"):
        store.measurements("s")


@pytest.mark.parametrize("cls_name", ["PlacementEnv", "PlacementOneShotEnv"])
def test_env_reset_options_are_refused(cls_name):
    import placetune.envs as envs

    env = getattr(envs, cls_name)("seed-block")
    env.reset(seed=0, options=None)
    env.reset(seed=0, options={})
    with pytest.raises(ConfigError, match="reset\\(\\) takes no options"):
        env.reset(seed=0, options={"placement": "all-dla"})


def test_documented_exit_codes_are_in_the_readme():
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    assert "3 model, 4 unknown name" in readme and "7 database, 8 backend" in readme


def test_unknown_power_mode_and_granularity_are_refused_before_anything_is_stored(tmp_path, capsys):
    """An unknown power_mode once made every trial infeasible with exit 0, and a bad
    granularity was found only after the baseline was measured; both now stop the run first."""
    study = tmp_path / "pm.toml"
    study.write_text('[study]\nmodel = "resnet18"\ntrials = 3\n[settings]\npower_mode = "TURBO"\n')
    db = tmp_path / "pt.db"
    refused(["tune", study, "--storage", f"sqlite:///{db}"], capsys, 6, "power modes MAXN")
    refused(["tune", "--model", "resnet18", "--granularity", "bogus", "--trials", "3", "--storage",
             f"sqlite:///{db}"], capsys, 6, "unknown granularity")
    refused(["tune", "--model", "resnet18", "--granularity", "scope:0", "--trials", "3", "--storage",
             f"sqlite:///{db}"], capsys, 6, "scope:N with N >= 1")
    assert not db.exists()
    from placetune import ConfigError, Evaluator

    with pytest.raises(ConfigError, match="power modes"):
        Evaluator("resnet18", "orin-agx", store=None, power_mode="TURBO")


# =============================================================================================
# One write path: a symlink, a device, a FIFO is written through (or refused), never replaced
# =============================================================================================
import contextlib  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import stat  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from tests.hostile import alarm, device, memory_cap  # noqa: E402


def null_device(path: Path) -> Path:
    return device(path, "null")


def zero_device(path: Path) -> Path:
    return device(path, "zero")


@pytest.fixture(scope="module")
def calib_db(tmp_path_factory):
    """A study with enough engine-mode measurements for ``placetune calibrate``."""
    d = tmp_path_factory.mktemp("calib")
    db = d / "c.db"
    assert main(["tune", "--model", "seed-block", "--mode", "engine", "--objective", "latency", "--trials", "14",
                 "--agent", "random", "--storage", str(db), "--study", "c", "--export", str(d / "c.plan.json")]) == 0
    return db


def _writers(base_db, calib_db, plan_file):
    """Every command that writes a file a user names, as ``(name, argv given the output path)``."""
    return {
        "export json": lambda o: ["export", "--study", "s", "--storage", base_db, "-o", o],
        "export script": lambda o: ["export", "--study", "s", "--storage", base_db, "--format", "trtexec", "-o", o],
        "trace": lambda o: ["trace", plan_file, "-o", o],
        "calibrate": lambda o: ["calibrate", "--study", "c", "--storage", calib_db, "--folds", "0", "-o", o],
        "zoo export": lambda o: ["zoo", "export", "seed-block", "-o", o],
        "tune --export": lambda o: ["tune", "--model", "seed-block", "--study", "s", "--agent", "random",
                                    "--trials", "4", "--storage", copy_db(base_db, Path(o).parent / "t.db"),
                                    "--export", o],
    }


WRITERS = ["export json", "export script", "trace", "calibrate", "zoo export", "tune --export"]


@pytest.mark.parametrize("writer", WRITERS)
def test_an_output_symlink_is_written_through_never_replaced(writer, base_db, calib_db, tmp_path, capsys):
    """``-o link`` wrote a temporary file and renamed it over the link: the link became a regular file
    (as root, ``-o /dev/stdout`` destroyed the system's /dev/stdout link)."""
    target = tmp_path / "target.out"
    old = b""  # a user-named output replaces a file placetune did not write only with --force
    target.write_bytes(old)
    link = tmp_path / ("out.sh" if writer == "export script" else "out.json")
    link.symlink_to(target)
    argv = _writers(base_db, calib_db, base_db.parent / "s.plan.json")[writer](str(link))
    rc, _, err = run(argv, capsys)
    assert rc == 0, err[-400:]
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() != old and target.stat().st_size > 100


@pytest.mark.parametrize("writer", WRITERS)
def test_an_output_device_stays_a_device(writer, base_db, calib_db, tmp_path, capsys):
    """``-o /dev/null`` as root turned /dev/null into a regular file: a device is written through."""
    dev = null_device(tmp_path / ("null.sh" if writer == "export script" else "null"))
    argv = _writers(base_db, calib_db, base_db.parent / "s.plan.json")[writer](str(dev))
    rc, _, err = run(argv, capsys)
    assert rc == 0, err[-400:]
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


@pytest.mark.parametrize("writer", ["export json", "trace", "calibrate"])
def test_an_output_fifo_is_written_through_or_refused_without_a_hang(writer, base_db, calib_db, tmp_path, capsys):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    argv = _writers(base_db, calib_db, base_db.parent / "s.plan.json")[writer](str(fifo))
    with alarm(20):  # no reader: refused at once
        refused(argv, capsys, 6, "no process reads")
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)  # noqa: SIM115
    reader.start()
    time.sleep(0.2)
    with alarm(60):
        rc, _, err = run(argv, capsys)
    reader.join(30)
    assert rc == 0, err[-400:]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and got and len(got[0]) > 100


def test_the_default_plan_file_never_replaces_a_file_placetune_did_not_write(tmp_path, capsys):
    (tmp_path / "mine.plan.json").write_text("my notes")
    refused(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--study", "mine",
             "--storage", tmp_path / "t.db"], capsys, 6, "not a file placetune wrote")
    assert (tmp_path / "mine.plan.json").read_text() == "my notes" and not (tmp_path / "t.db").exists()


# =============================================================================================
# Locks by file identity
# =============================================================================================
def test_a_planted_lock_symlink_is_neither_followed_nor_removed(base_db, tmp_path, capsys):
    """``<db>.tune-lock`` was opened with O_CREAT and no O_NOFOLLOW, truncated and written: a planted link made
    tune overwrite any file the user can write, and the release unlinked the link."""
    db = copy_db(base_db, tmp_path / "t.db")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    lock = Path(str(db) + ".tune-lock")
    lock.symlink_to(victim)
    refused(["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "6", "--storage", db],
            capsys, 7, "is a symbolic link")
    assert victim.read_text() == "precious" and lock.is_symlink()
    lock.unlink()
    os.link(victim, lock)  # a hard link to another file is not a lock file either
    refused(["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "6", "--storage", db],
            capsys, 7, "hard links")
    assert victim.read_text() == "precious"


def test_a_database_with_two_hard_links_is_refused(base_db, tmp_path, capsys):
    """The lock was keyed on the path: a hard link got its own lock and its own WAL, two runs wrote at once and
    one run's measurements were lost while both printed success."""
    db = copy_db(base_db, tmp_path / "t.db")
    other = tmp_path / "other-name.db"
    os.link(db, other)
    before = sqlite3.connect(db).execute("select count(*) from pt_measurements").fetchone()[0]
    for name in (db, other):
        refused(["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "8",
                 "--storage", name], capsys, 7, "hard links")
    assert sqlite3.connect(db).execute("select count(*) from pt_measurements").fetchone()[0] == before


# =============================================================================================
# Paths from data are confined; names are escaped before a terminal sees them
# =============================================================================================
@pytest.fixture(scope="module")
def pipeline_folder(tmp_path_factory):
    """A pipeline plan folder exported once; each test works on a copy (:func:`_pipeline_folder`)."""
    d = tmp_path_factory.mktemp("pipeline")
    db = d / "p.db"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["tune", "--model", "seed-block", "--mode", "pipeline", "--trials", "6", "--agent", "random",
                     "--storage", str(db), "--study", "p", "--export", str(d / "p.plan.json")]) == 0
        assert main(["export", "--study", "p", "--storage", str(db), "--format", "trtexec", "-o",
                     str(d / "deploy")]) == 0
    return d / "deploy"


def _pipeline_folder(tmp_path: Path, pipeline_folder: Path) -> Path:
    import shutil

    return Path(shutil.copytree(pipeline_folder, tmp_path / "deploy"))


def test_build_never_leaves_the_plan_folder(tmp_path, pipeline_folder):
    """``placetune build DIR`` trusted the engine index of plan.json: ``"0/../../../x"`` made it delete and
    write files outside the folder (here through a planted directory ``model.seg0``)."""
    import subprocess
    import sys

    import placetune
    from tests.fakes import fake_env

    out = _pipeline_folder(tmp_path, pipeline_folder)
    (out / "model.seg0").mkdir()
    victim = tmp_path / "victim.engine"
    victim.write_text("precious")
    (tmp_path / "victim.onnx").write_bytes((out / "model.seg0.onnx").read_bytes())  # what it would build from
    doc = json.loads((out / "plan.json").read_text())
    doc["engines"][0]["index"] = "0/../../victim"
    doc["engines"][0].pop("engine_file", None)
    (out / "plan.json").write_text(json.dumps(doc))
    p = subprocess.run([sys.executable, "-m", "placetune.cli", "build", str(out)], capture_output=True, text=True,
                       timeout=300, env={**os.environ, **fake_env("10.3.0"), "PYTHONPATH": os.pathsep.join(
                           [fake_env("10.3.0")["PYTHONPATH"], str(Path(placetune.__file__).parents[1])])},
                       cwd=tmp_path)
    assert p.returncode == 6 and "index" in p.stderr and "Traceback" not in p.stderr, p.stderr[-600:]
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("field, value", [("engine_file", "/etc/passwd"), ("engine_file", "../x.engine"),
                                          ("onnx_file", "a/../../b.onnx"), ("index", -1)])
def test_runtime_never_follows_a_plan_out_of_its_folder(field, value, tmp_path, pipeline_folder):
    """``placetune.runtime.load`` followed an absolute ``engine_file``."""
    import placetune.runtime
    from placetune.errors import ConfigError

    out = _pipeline_folder(tmp_path, pipeline_folder)
    doc = json.loads((out / "plan.json").read_text())
    doc["engines"][0][field] = value
    (out / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=field):
        placetune.runtime.load(out)


@pytest.mark.parametrize("study, why", [("../evil", "path separator"), ("a/b", "path separator"),
                                        ("/abs", "path separator")])
def test_a_study_name_never_writes_its_plan_elsewhere(study, why, tmp_path, capsys):
    """The study name became ``<study>.plan.json`` verbatim: ``../`` wrote elsewhere, a ``/`` failed the run
    after all its measurements. Refused before the database is touched."""
    refused(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--study", study,
             "--storage", tmp_path / "t.db"], capsys, 6, why)
    assert not (tmp_path / "t.db").exists() and not (tmp_path.parent / "evil.plan.json").exists()
    assert main(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--study", study,
                 "--storage", str(tmp_path / "t.db"), "--export", str(tmp_path / "ok.plan.json")]) == 0
    assert (tmp_path / "ok.plan.json").is_file()


EVIL = "\x1b]0;pwned\x07\x1b[2J\u202eevil\u2066\r"


def test_names_reach_the_terminal_escaped(tmp_path, capsys):
    """Terminal escape sequences and bidi characters in names went to the terminal raw."""
    db = tmp_path / "t.db"
    rc, out, err = run(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--study", EVIL,
                        "--storage", db, "--export", tmp_path / "p.json"], capsys)
    assert rc == 0, err
    for argv in (["studies", "--storage", db], ["export", "--study", EVIL, "--storage", db],
                 ["export", "--study", EVIL + "x", "--storage", db]):
        rc, o, e = run(argv, capsys)
        out += o
        err += e
    text = out + err
    assert "\\x1b]0;pwned" in text and "\\u202e" in text
    assert not any(c in text for c in "\x1b\x07\u202e\u2066\r"), repr(text[:300])


def test_a_user_file_in_a_plan_folder_is_never_overwritten(base_db, tmp_path, capsys):
    """The folder guard only checked that some plan.json existed: a user's build.sh next to any plan.json was
    overwritten. Every file the export would write is checked."""
    out = tmp_path / "deploy"
    args = ["export", "--study", "s", "--storage", base_db, "--format", "trtexec", "-o", out]
    assert run(args, capsys)[0] == 0
    assert run(args, capsys)[0] == 0  # its own files, unchanged: replaced
    (out / "build.sh").write_text("my own build script")
    refused(args, capsys, 6, "build.sh was changed since placetune wrote it")
    assert (out / "build.sh").read_text() == "my own build script"
    (out / "build.sh").unlink()
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    (out / "README.txt").unlink()
    (out / "README.txt").symlink_to(outside)  # a link planted in the folder
    refused(args, capsys, 6, "README.txt")
    assert outside.read_text() == "precious"
    other = tmp_path / "other"
    other.mkdir()
    (other / "plan.json").write_text("{}")
    (other / "build.sh").write_text("mine")
    refused(["export", "--study", "s", "--storage", base_db, "--format", "trtexec", "-o", other], capsys, 6,
            "not empty")
    assert (other / "build.sh").read_text() == "mine"


# =============================================================================================
# Secrets: every URL form masked, also where a URL is mistaken for a file name
# =============================================================================================
SECRET = "Sup3rS3cretPW"
SECRET_URLS = [
    f"postgresql+psycopg://tuner@127.0.0.1:1/db?sslpassword={SECRET}",
    f"postgresql+psycopg://tuner@127.0.0.1:1/db?sslmode=require&password={SECRET}",
    f"mssql+pyodbc:///?odbc_connect=DRIVER%3D%7BODBC%7D%3BSERVER%3Dh%3BUID%3Du%3BPWD%3D{SECRET}%3B",
    f"mssql+pyodbc:///?odbc_connect=DRIVER={{x}};PWD={SECRET};",
    f"postgresql+psycopg://tuner:{SECRET}@127.0.0.1:1/db",
    f"postgresql+psycopg://tuner@127.0.0.1:1/db?api_token={SECRET}",
    # no "?": SQLAlchemy takes the rest as the database name and echoes it percent-encoded (%3BPWD%3D...)
    f"postgresql+psycopg://tuner:{SECRET}@127.0.0.1:1/db&odbc_connect=DRIVER%3Dx%3BPWD%3D{SECRET}%3B",
]


@pytest.mark.parametrize("url", SECRET_URLS)
def test_no_url_form_leaks_its_secret(url, tmp_path, capsys):
    """``?sslpassword=`` and ``odbc_connect=...PWD=...`` appeared in clear in every command's errors."""
    for argv in (["studies", "--storage", url], ["export", "--study", "s", "--storage", url],
                 ["report", "--study", "s", "--storage", url, "-o", tmp_path / "r"],
                 ["calibrate", "--study", "s", "--storage", url],
                 ["tune", "--model", "seed-block", "--trials", "1", "--storage", url, "--study", "x"]):
        with alarm(60):
            rc, out, err = run(argv, capsys)
        assert rc != 0 and "Traceback" not in err
        assert SECRET not in out + err, (argv[0], err)


@pytest.mark.parametrize("url", [f"postgresql+psycopg://user:{SECRET}@host/db",
                                 f"postgresql+psycopg:/user:{SECRET}@host/db"])
def test_a_url_given_as_a_file_name_is_masked(url, tmp_path, capsys):
    """A URL given where a study file is expected was echoed whole (``cannot read study file
    postgresql+psycopg:/user:secret@...``)."""
    for argv in (["tune", url], ["check", url], ["measure", "seed-block", "--device-profile", url],
                 ["measure", "seed-block", "--placement", url], ["trace", url, "-o", tmp_path / "t.json"],
                 ["tune", "--model", url, "--storage", tmp_path / "t.db"]):
        rc, out, err = run(argv, capsys)
        assert rc != 0 and "Traceback" not in err, err
        assert SECRET not in out + err, (argv, err)


# =============================================================================================
# One read path: regular files only, caps per kind, bounded gunzip; FIFOs and devices refused at once
# =============================================================================================
def _readers(base_plan: Path):
    return {
        "study file": lambda f: ["tune", f, "--storage", "x.db"],
        "device profile": lambda f: ["measure", "seed-block", "--device-profile", f],
        "plan": lambda f: ["trace", f, "-o", "t.json"],
        "placement": lambda f: ["measure", "seed-block", "--placement", f],
        "model": lambda f: ["check", f],
    }


@pytest.mark.parametrize("kind", ["study file", "device profile", "plan", "placement", "model"])
def test_a_fifo_is_refused_at_once(kind, tmp_path, capsys):
    """A FIFO as study file or device profile blocked forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with alarm(20):
        rc, _, err = run(_readers(tmp_path)[kind](str(fifo)), capsys)
    assert rc in (3, 5, 6) and "named pipe" in err and "Traceback" not in err, err


@pytest.mark.parametrize("kind", ["study file", "device profile", "plan", "placement", "model"])
def test_a_device_is_refused_at_once(kind, tmp_path, capsys):
    """``/dev/zero`` as study file, plan or profile read until memory ran out (here: a zero device node in a
    temporary folder, under a memory cap)."""
    dev = zero_device(tmp_path / "zero")
    with alarm(30), memory_cap():
        rc, _, err = run(_readers(tmp_path)[kind](str(dev)), capsys)
    assert rc in (3, 5, 6) and "character device" in err and "Traceback" not in err, err


def test_a_gzip_bomb_is_refused_before_it_fills_the_memory(tmp_path, capsys, monkeypatch):
    """An 18 MB ``.onnx.gz`` expanded to 4 GB: decompression stops at the model cap (patched to 8 MiB here so
    the test stays cheap; the real cap is protobuf's 2 GiB)."""
    import tracemalloc

    try:
        import placetune.files.read as read
    except ImportError:  # a placetune without the one read path has no cap at all: the test shows it
        pass
    else:
        monkeypatch.setitem(read.LIMITS, "model", 8 << 20)
    bomb = tmp_path / "bomb.onnx.gz"
    bomb.write_bytes(gzip.compress(b"\0" * (64 << 20), compresslevel=1))
    tracemalloc.start()
    try:
        rc, _, err = run(["check", bomb], capsys)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rc == 3 and "decompresses to more than" in err, err
    assert peak < 40 << 20, peak


def test_a_huge_study_file_is_refused_unread(tmp_path, capsys):
    f = tmp_path / "big.toml"
    with open(f, "wb") as fh:
        fh.truncate(64 << 20)  # sparse: 64 MiB of NUL bytes, far over a study file's cap
    refused(["tune", f], capsys, 6, "more than a study file may be")


def test_corrupt_deflate_data_is_a_model_error(tmp_path, capsys):
    """A corrupt gzip stream in ``.onnx.gz`` (a bad deflate block: zlib.error) was a traceback."""
    good = gzip.compress((Path(__file__).parent / "data" / "seed_block.onnx.gz").read_bytes() * 3)
    bad = tmp_path / "bad.onnx.gz"
    bad.write_bytes(good[:40] + bytes(b ^ 0x5A for b in good[40:400]) + good[400:])
    for argv in (["check", bad], ["measure", bad]):
        rc, _, err = run(argv, capsys)
        assert rc == 3 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


# =============================================================================================
# One validator per boundary
# =============================================================================================
@pytest.mark.parametrize("argv", [
    ["check", "seed-block", "--batch", str(2**63)],
    ["measure", "seed-block", "--batch", str(2**63)],
    ["tune", "--model", "seed-block", "--batch", str(2**63), "--storage", "t.db"],
    ["zoo", "export", "seed-block", "-o", "z.onnx", "--batch", str(2**63)],
    ["zoo", "export", "seed-block", "-o", "z.onnx", "--batch", str(2**63 - 1)],
])
def test_a_batch_beyond_range_is_refused(argv, capsys):
    """``--batch >= 2**63`` was a traceback in check, measure, tune and zoo export."""
    refused(argv, capsys, 6, "--batch must be a positive integer of at most 65536")
    assert not Path("t.db").exists() and not Path("z.onnx").exists()


@pytest.mark.parametrize("spec", ["seed-block:batch=3", "seed-block:weights=1", "seed-block:name=x",
                                  "vit-tiny:depth=2,path=3"])
def test_zoo_options_that_collide_with_arguments(spec, tmp_path, capsys):
    """``zoo export seed-block:batch=3`` was a TypeError traceback (the option collided with --batch)."""
    refused(["zoo", "export", spec, "-o", tmp_path / "z.onnx"], capsys, 3, "is not a network option")


@pytest.mark.parametrize("batch", ["Infinity", "1e300", "-Infinity", "NaN", '"2"', "true"])
def test_a_plan_with_a_non_finite_batch(batch, base_db, tmp_path, capsys):
    """``batch: Infinity`` in a plan was an OverflowError traceback."""
    text = (base_db.parent / "s.plan.json").read_text()
    doc = json.loads(text)
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc).replace(f'"batch": {doc["batch"]}', f'"batch": {batch}', 1))
    rc, _, err = run(["trace", f, "-o", tmp_path / "t.json"], capsys)
    assert rc == 6 and "Traceback" not in err and ("batch" in err or batch in err), err


@pytest.mark.parametrize("body, pattern", [
    ("[noise]\nlayer_sigma = 1e300\n", "noise.layer_sigma must be from 0 to 3"),
    ("[scale]\ngpu = 1e308\n", "scale.gpu must be from 0.001 to 1000"),
    ("[add]\nengine_us = 1e308\n", "add.engine_us must be from"),
    ('[scale.op_class]\n"gpu.conv" = 1e-300\n', "must be from 0.001 to 1000"),
])
def test_device_profile_numbers_out_of_range(body, pattern, tmp_path, capsys):
    """``layer_sigma = 1e300`` made NaN times and a pipeline schedule that looped forever; infinite values from a
    profile reached the JSON output."""
    f = tmp_path / "p.toml"
    f.write_text('base = "orin-agx"\n' + body)
    with alarm(30):
        refused(["measure", "seed-block", "--mode", "pipeline", "--device-profile", f, "--json"], capsys, 6,
                pattern)


def test_a_constraint_on_a_misspelt_network(tmp_path, capsys):
    """A constraint on a misspelt network was accepted: the run ended with no plan and exit 0."""
    refused(["tune", "--model", "seed-block", "--model", "seed-model-gn", "--trials", "2", "--agent", "random",
             "--storage", tmp_path / "t.db", "--constraint", "latency[seed-blok]<=1"], capsys, 4,
            "no network 'seed-blok' (did you mean 'seed-block'?)")
    refused(["tune", "--model", "seed-block", "--trials", "2", "--agent", "random", "--storage", tmp_path / "t.db",
             "--constraint", "latency[seed-block]<=1"], capsys, 4, "runs one network")
    assert not (tmp_path / "t.db").exists()


def test_empty_means_empty(tmp_path, capsys):
    """``models = []`` silently ran the default network; ``--replicas ""`` meant the default replicas."""
    f = tmp_path / "s.toml"
    f.write_text('[study]\nmodels = []\ntrials = 1\nagent = "random"\n')
    refused(["tune", f, "--storage", tmp_path / "t.db"], capsys, 6, "models is empty")
    f.write_text('[study]\ntrials = 1\nagent = "random"\n')  # no model at all: not the embedded default either
    refused(["tune", f, "--storage", tmp_path / "t.db"], capsys, 6, "names no model")
    refused(["measure", "seed-block", "--mode", "replicas", "--replicas", ""], capsys, 6, "--replicas is empty")
    for argv in (["tune", "--model", "seed-block", "--study", "", "--storage", tmp_path / "t.db"],
                 ["tune", "--model", "seed-block", "--timeout", "", "--storage", tmp_path / "t.db"],
                 ["check", "seed-block", "--shape", ""], ["check", " "]):
        refused(argv, capsys, 6, "is empty")
    assert not (tmp_path / "t.db").exists()


def test_duplicate_keys_in_placement_json(capsys):
    """Duplicate keys in placement JSON: the last one won."""
    refused(["measure", "seed-block", "--placement",
             '{"layers": {"/conv1/Conv": "DLA0", "/conv1/Conv": "GPU"}}'], capsys, 5, "appears twice")


@pytest.mark.parametrize("folds", ["-1", "1", "1001"])
def test_calibrate_folds_out_of_range(folds, calib_db, tmp_path, capsys):
    """``calibrate --folds -1`` became 0."""
    refused(["calibrate", "--study", "c", "--storage", calib_db, "--folds", folds, "-o", tmp_path / "p.toml"],
            capsys, 6, "--folds must be 0 (no cross-validation) or an integer from 2 to 1000")
    assert not (tmp_path / "p.toml").exists()


@pytest.mark.parametrize("sql, pattern", [
    ("update pt_measurements set throughput_fps = 1e999 where id = (select max(id) from pt_measurements "
     "where status = 'ok')", "corrupt"),
    ("update pt_measurements set payload = json_set(payload, '$.latency_ms.median', 9e999) where status = 'ok'",
     "corrupt"),
])
def test_an_edited_infinity_is_never_chosen_as_best(sql, pattern, base_db, tmp_path, capsys):
    """``Infinity`` in an edited row was chosen as the best and printed as invalid JSON."""
    db = copy_db(base_db, tmp_path / "t.db")
    with sqlite3.connect(db) as con:
        con.execute(sql)
    for argv in (["export", "--study", "s", "-o", tmp_path / "p.json"], ["studies", "--json"]):
        refused(argv + ["--storage", db], capsys, 7, pattern)
    assert not (tmp_path / "p.json").exists()


def test_nan_measurements_are_never_stored_as_ok(tmp_path):
    """NaN measurements were stored as ``ok`` (and ranked): a backend's non-finite figures are a failure."""
    from placetune import Evaluator
    from placetune.backends.simulate.simulator import SimulatedJetson

    class NaNJetson(SimulatedJetson):
        def measure(self, *a, **kw):
            m = super().measure(*a, **kw)
            return type(m)(**{**m.to_dict(), "latency_samples_ms": [float("nan")] * 5, "latency_ms": {}})

    with Evaluator("seed-block", "orin-agx", NaNJetson(), store=f"sqlite:///{tmp_path}/t.db", study="n") as ev:
        m = ev.baseline()
        assert m.status == "runtime_failed" and "non-finite" in m.reason
        assert ev.store.best("n") is None
    with sqlite3.connect(tmp_path / "t.db") as con:
        assert con.execute("select count(*) from pt_measurements where status = 'ok'").fetchone()[0] == 0


def test_renamed_duplicate_nodes_are_never_addressed_by_a_guessed_name(tmp_path):
    """Two ONNX nodes named ``dup``: placetune named the second ``dup_1``, which is not what TensorRT's parser
    names it (``dup_<k>``, k a counter its helper layers also advance), so ``--layerDeviceTypes`` placed
    another layer or none. Such a layer is refused by name, with what to do."""
    from onnx import TensorProto, helper

    from placetune import Evaluator, Placement
    from placetune.errors import PlacementError
    from placetune.plan.export import export_plan
    from placetune.plan.trtexec import trtexec_commands

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 8, 3, 3], [0.01] * 576)
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], name="dup", pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["b"], name="dup"),
             helper.make_node("Conv", ["b", "w"], ["y"], name="last", pads=[1, 1, 1, 1])]
    path = tmp_path / "dup.onnx"
    import onnx

    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))
    # in memory: with a database, the Evaluator refuses such a model at the start, as placetune tune does
    with Evaluator(str(path), "orin-agx", mode="engine", study="d") as ev:
        names = list(ev.model.names)
        assert len(set(names)) == 3
        ev.baseline()
        m = ev.evaluate(Placement(ev.model, {names[1]: "DLA0", "last": "DLA0"}))
        plan = export_plan(ev.store, "d", model=ev.model, measurement_id=m.extra["_id"])
    with pytest.raises(PlacementError, match="give every ONNX node a unique name"):
        print("\n".join(trtexec_commands(plan)))  # shown when it does not raise: the guessed name
    assert getattr(ev.model, "renamed", None) == {names[1]: "dup"}


def test_a_resumed_study_with_an_edited_row_stops_before_measuring(base_db, tmp_path, capsys):
    """A resumed run found an edited row only at its end, after storing new measurements: rows are read back
    and checked first (found by the long fuzz run)."""
    db = copy_db(base_db, tmp_path / "t.db")
    with sqlite3.connect(db) as con:
        con.execute("update pt_measurements set median_ms = 0 where id = 1")
    before = sqlite3.connect(db).execute("select count(*) from pt_measurements").fetchone()[0]
    refused(["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "8", "--storage", db],
            capsys, 7, "column median_ms")
    assert sqlite3.connect(db).execute("select count(*) from pt_measurements").fetchone()[0] == before


def test_a_plan_timeline_of_the_wrong_type(base_db, tmp_path, capsys):
    """``"timeline": "x"`` in a plan was an AttributeError traceback in ``placetune trace`` (long fuzz run)."""
    doc = json.loads((base_db.parent / "s.plan.json").read_text())
    doc["measured"]["timeline"] = "0/../../../x"
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    refused(["trace", f, "-o", tmp_path / "t.json"], capsys, 6, "measured.timeline must be a list of objects")


@pytest.mark.parametrize("location, length", [("w.bin", "-1"), ("../../w.bin", "16"), ("/etc/passwd", "16"),
                                              ("fifo", "16")])
def test_external_data_stays_beside_the_model(location, length, tmp_path, capsys):
    """External data outside the model's folder, from a FIFO, or with a negative length: a ModelError, never a
    read outside the folder, a hang or a traceback (a negative length was a ValueError, long fuzz run)."""
    import onnx
    from onnx import TensorProto

    proto = onnx.load_from_string(gzip.decompress((Path(__file__).parent / "data" / "seed_block.onnx.gz").read_bytes()))
    t = proto.graph.initializer[0]
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    t.external_data.add(key="location", value=location)
    t.external_data.add(key="length", value=length)
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "m.onnx").write_bytes(proto.SerializeToString())
    from placetune.errors import ModelError
    from placetune.model.onnx_io import load_with_weights

    with alarm(20), pytest.raises(ModelError, match="external data|outside the model's folder|named pipe"):
        load_with_weights(tmp_path / "m.onnx")


def test_a_stored_model_of_the_wrong_type(base_db, tmp_path, capsys):
    """``pt_models.shapes`` edited to a number was an AttributeError traceback in export (long fuzz run)."""
    db = copy_db(base_db, tmp_path / "t.db")
    with sqlite3.connect(db) as con:
        con.execute("update pt_models set shapes = 5.1e284")
    refused(["export", "--study", "s", "-o", tmp_path / "p.json", "--storage", db], capsys, 7,
            "stored model")
    before = sqlite3.connect(db).execute("select count(*) from pt_measurements").fetchone()[0]
    refused(["tune", "--model", "seed-block", "--study", "s", "--agent", "random", "--trials", "8", "--storage", db],
            capsys, 7, "stored model")  # before it measures anything, not at its end
    assert sqlite3.connect(db).execute("select count(*) from pt_measurements").fetchone()[0] == before
