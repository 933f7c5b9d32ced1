"""Issue 18 item 6: hostile input at every edge is a one-line error with a documented exit code, never a traceback."""

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
    f.write_text('[study]\nmodel = "seed-block"\nplatform = "' + "X" * 5_000_000 + '"\n')
    rc, _, err = run(["tune", f, "--storage", tmp_path / "t.db"], capsys)
    assert rc in (4, 6) and len(err) < 2500 and "message cut" in err


def test_long_file_names_are_not_tracebacks(capsys):
    refused(["check", "Y" * 100_000], capsys, 3, "neither an ONNX file nor a zoo model")
    rc, _, err = run(["studies", "--storage", "Z" * 100_000], capsys)
    assert rc == 7 and "Traceback" not in err and len(err) < 2500


@pytest.mark.parametrize("dpi", [0, -5, 100_000])
def test_report_dpi(dpi, base_db, tmp_path, capsys):
    refused(["report", "--study", "s", "--storage", base_db, "-o", tmp_path / "r", "--dpi", dpi], capsys, 6,
            "--dpi must be from 10 to 1200")


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
    # --format trtexec -o DIR writes a plan folder (issue 16), but never into a directory holding other files
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
    """Issue 18 item 7: an unknown power_mode made every trial infeasible with exit 0, and a bad
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
