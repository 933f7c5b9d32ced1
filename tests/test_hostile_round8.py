"""What a hostile review of the inputs found after round seven: an output path naming one of the command's
own inputs (the database, the plan, the model) overwrote it, ``check`` took TensorRT versions without
DLA rules, a name with a line break forged lines of the output, a NUL in a PostgreSQL URL silently
dropped the parts of the connection after it, and a plan's model name, platform and calibration cache
were read unchecked. Each case failed before its fix."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

from placetune.cli.main import main
from placetune.errors import ConfigError, StoreError
from tests.test_hostile_round4 import _copy, make_small_db


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    return make_small_db(tmp_path_factory.mktemp("db"))


def _db_copy(small_db: Path, tmp_path: Path) -> Path:
    return _copy(small_db, tmp_path / "p.db")


# ---------------------------------------------------------------------------------------------- outputs over inputs


def test_export_over_its_own_database_is_refused(small_db, tmp_path, capsys):
    """``placetune export --storage p.db -o p.db`` (a slip of the shell's history) replaced the database by the
    plan's JSON: every measurement gone, exit 0."""
    db = _db_copy(small_db, tmp_path)
    before = db.read_bytes()
    code = main(["export", "--storage", str(db), "--study", "s", "-o", str(db)])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code, err
    assert err == (f"placetune: error: -o {db}: it is the database (--storage) this command reads; "
                   "give another file name\n"), err
    assert db.read_bytes() == before


def test_tune_export_over_its_own_database_or_model_is_refused(tmp_path, capsys):
    """``tune --storage t.db --export t.db`` measured the whole study, then wrote the plan over the database
    (exit 0); ``--export`` naming the ONNX model replaced the model by the plan. Refused before anything runs."""
    db = tmp_path / "t.db"
    code = main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "2", "--storage", str(db),
                 "--study", "t", "--export", str(db)])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert "it is the database (--storage) this command reads" in err
    assert not db.exists()  # nothing measured, nothing stored

    assert main(["zoo", "export", "seed-block", "-o", str(tmp_path / "m.onnx")]) == 0
    model = tmp_path / "m.onnx"
    before = model.read_bytes()
    capsys.readouterr()
    code = main(["tune", "--model", str(model), "--agent", "random", "--trials", "2", "--storage",
                 str(tmp_path / "m.db"), "--study", "m", "--export", str(model)])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code, err
    assert f"--export {model}: it is the model this command reads; give another file name" in err, err
    assert model.read_bytes() == before and not (tmp_path / "m.db").exists()


def test_tune_export_over_its_own_study_file_is_refused(tmp_path, capsys, monkeypatch):
    """``placetune tune s.toml --export s.toml`` ran the study and replaced the study file by the plan."""
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "s.toml"
    study.write_text('[study]\nname = "s"\nmodel = "seed-block"\nstorage = "sqlite:///s.db"\n')
    before = study.read_bytes()
    assert main(["tune", "s.toml", "--export", "s.toml"]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err == "placetune: error: --export s.toml: it is the study file this command reads; give another file name\n"
    assert study.read_bytes() == before and not (tmp_path / "s.db").exists()


def test_calibrate_over_its_own_database_is_refused(small_db, tmp_path, capsys):
    """``placetune calibrate --storage p.db -o p.db`` wrote the device profile over the database (exit 0)."""
    db = _db_copy(small_db, tmp_path)
    before = db.read_bytes()
    code = main(["calibrate", "--study", "s", "--storage", str(db), "-o", str(db)])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert "it is the database (--storage) this command reads" in err
    assert db.read_bytes() == before


def test_trace_over_its_own_plan_is_refused(small_db, tmp_path, capsys):
    """``placetune trace plan.json -o plan.json`` replaced the plan by its trace (exit 0); a hard link to
    the plan is the same file."""
    plan = tmp_path / "plan.json"
    assert main(["export", "--storage", str(small_db), "--study", "s", "-o", str(plan)]) == 0
    before = plan.read_bytes()
    (tmp_path / "link.json").hardlink_to(plan)
    for out in (plan, tmp_path / "link.json"):
        capsys.readouterr()
        code = main(["trace", str(plan), "-o", str(out)])
        err = capsys.readouterr().err
        assert code == ConfigError.exit_code, err
        assert err == f"placetune: error: -o {out}: it is the plan file this command reads; give another file name\n"
        assert plan.read_bytes() == before


def test_a_new_output_file_and_other_files_still_write(small_db, tmp_path):
    plan = tmp_path / "plan.json"
    assert main(["export", "--storage", str(small_db), "--study", "s", "-o", str(plan)]) == 0
    assert main(["trace", str(plan), "-o", str(tmp_path / "t.json")]) == 0
    assert main(["export", "--storage", str(small_db), "--study", "s", "-o", str(plan)]) == 0  # over a plan: fine


# ---------------------------------------------------------------------------------------------- TensorRT version


@pytest.mark.parametrize("version", ["99.9", "-1", "0", "9.0", "8.4", "8.-6"])
def test_check_refuses_a_tensorrt_version_without_dla_rules(version, capsys):
    """``placetune check --trt-version 99.9`` (or ``-1``) printed a verdict under rules placetune does not know
    (exit 0), where ``measure`` and ``tune`` refuse the same version."""
    code = main(["check", "seed-block", "--trt-version", version])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code, err
    assert err == ("placetune: error: trt_version must be a TensorRT version with DLA rules: 8.5, 8.6, 10.x or 11.x "
                   f"(e.g. 10.3), got {version!r}\n")


@pytest.mark.parametrize("version", ["8.5", "8.6", "10.3", "11.4.1"])
def test_check_takes_the_versions_with_dla_rules(version):
    assert main(["check", "seed-block", "--trt-version", version]) == 0


@pytest.mark.parametrize("version", ["-1", "7.0", "abc"])
@pytest.mark.parametrize("output", ["build.sh", "deploy"])
def test_export_refuses_a_target_tensorrt_version_without_dla_rules(version, output, small_db, tmp_path, capsys):
    """``export --format trtexec --trt-version -1`` wrote a build script (or a plan folder) "for TensorRT -1"
    with the flags of a version it guessed (exit 0)."""
    code = main(["export", "--storage", str(small_db), "--study", "s", "--format", "trtexec", "--trt-version", version,
                 "-o", str(tmp_path / output)])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code, err
    assert err == ("placetune: error: trt_version must be a TensorRT version with DLA rules: 8.5, 8.6, 10.x or 11.x "
                   f"(e.g. 10.3), got {version!r}\n")
    assert not (tmp_path / output).exists()


# ---------------------------------------------------------------------------------------------- forged lines


_FORGED = "/conv1\nplacetune: all 5 layers verified on the device"


def test_a_layer_name_with_a_line_break_stays_in_its_table_row(tmp_path, capsys):
    """An ONNX node named ``"/conv1\\nplacetune: all 5 layers verified..."`` printed a line of its own in
    ``placetune check``'s table, one that reads as placetune's."""
    assert main(["zoo", "export", "seed-block", "-o", str(tmp_path / "m.onnx")]) == 0
    m = onnx.load(str(tmp_path / "m.onnx"))
    m.graph.node[0].name = _FORGED
    onnx.save(m, str(tmp_path / "m.onnx"))
    capsys.readouterr()
    assert main(["check", str(tmp_path / "m.onnx")]) == 0  # the summary: no layer names
    out = capsys.readouterr().out
    assert not any(line.startswith("placetune:") for line in out.splitlines()), out
    assert main(["check", "--layers", str(tmp_path / "m.onnx")]) == 0  # the table
    out = capsys.readouterr().out
    assert not any(line.startswith("placetune:") for line in out.splitlines()), out
    assert "/conv1\\nplacetune:" in out  # escaped, in its row (a long name is cut in the middle to fit)
    rows = out.split("\n\n")[0].splitlines()
    assert len(rows) == 2 + 5, out  # header, rule, five layers
    assert main(["check", "--wide", str(tmp_path / "m.onnx")]) == 0  # the whole name, still one row
    out = capsys.readouterr().out
    assert "/conv1\\nplacetune: all 5 layers verified on the device" in out
    assert not any(line.startswith("placetune:") for line in out.splitlines()), out


def test_a_model_file_name_with_a_line_break_is_shown_on_one_line(tmp_path, capsys):
    """A model file named ``m\\nplacetune: ...onnx`` made "what will run:" and the plan's summary print a
    line of the file's choosing."""
    src = tmp_path / "base.onnx"
    assert main(["zoo", "export", "seed-block", "-o", str(src)]) == 0
    model = tmp_path / "m\nplacetune: plan verified on the device.onnx"
    src.rename(model)
    capsys.readouterr()
    assert main(["tune", "--model", str(model), "--agent", "random", "--trials", "2", "--storage",
                 str(tmp_path / "n.db"), "--study", "n", "--export", str(tmp_path / "n.json")]) == 0
    out = capsys.readouterr().out
    assert not any(line.startswith("placetune:") for line in out.splitlines()), out
    assert "what will run: model m\\nplacetune: plan verified on the device," in out


def test_a_study_name_with_a_line_break_stays_in_its_table_row(small_db, tmp_path, capsys):
    """A database whose study is named ``"s\\nforged  row"`` (another placetune's, or an edited one)
    printed a table row of its choosing in ``placetune studies``."""
    import sqlite3

    db = _db_copy(small_db, tmp_path)
    con = sqlite3.connect(db)
    con.execute("update pt_studies set name = ?", ("s\nforged  row",))
    con.commit()
    con.close()
    capsys.readouterr()
    assert main(["studies", "--storage", str(db)]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 3 and "s\\nforged  row" in out, out


# ---------------------------------------------------------------------------------------------- database URLs


@pytest.mark.parametrize("url, part", [
    ("postgresql+psycopg://u:s3cretPW@127.0.0.1:1/d%00b", "database name"),
    ("postgresql+psycopg://u%00x:s3cretPW@127.0.0.1:1/db", "user name"),
    ("postgresql+psycopg://u:s3c%00retPW@127.0.0.1:1/db", "password"),
    ("postgresql+psycopg://u:s3cretPW@127.0.0.1:1/db?sslmode=re%00quire", "query value"),
])
def test_a_url_with_a_nul_character_is_refused(url, part, capsys):
    """libpq reads its connection string up to the first NUL: ``.../d%00b`` connected with the host only,
    to port 5432 instead of the URL's port 1, without the password (a server other than the one named)."""
    from placetune.store.url import normalise_url

    with pytest.raises(StoreError) as exc:
        normalise_url(url)
    assert "s3cret" not in str(exc.value)
    assert f"its {part} holds a NUL character (%00)" in str(exc.value)
    assert main(["studies", "--storage", url]) == StoreError.exit_code
    err = capsys.readouterr().err
    assert "NUL" in err and "s3cret" not in err and "127.0.0.1" in err and err.count("\n") == 1, err


# ---------------------------------------------------------------------------------------------- plan texts


@pytest.mark.parametrize("edit, pattern", [
    (lambda d: d["model"].update(name="seed\nplacetune: plan verified on the device"),
     "model.name holds the control character U+000A"),
    (lambda d: d["model"].update(name="seed\x1b]0;title\x07"), "model.name holds the control character U+001B"),
    (lambda d: d["model"].update(name=["seed"]), "model.name must be a string, found list"),
    (lambda d: d.update(platform="orin-agx\r\x1b[2K"), "\"platform\" holds the control character U+000D"),
    (lambda d: d.update(int8_ranges="calibration-cache", calibration_cache="c.cache\nplacetune: calibrated"),
     "\"calibration_cache\" holds the control character U+000A"),
    (lambda d: d["measured"].update(status="failed"),
     "measured.status must be \"ok\" (a plan is made from an ok measurement only), found 'failed'"),
    (lambda d: d["settings"].update(trt_version="99"),
     "settings.trt_version must be a TensorRT version with DLA rules: 8.5, 8.6, 10.x or 11.x (e.g. 10.3), got '99'"),
])
def test_a_plan_whose_printed_names_were_edited_is_refused(edit, pattern, small_db, tmp_path, capsys):
    """A plan's model name, platform and calibration cache are printed in its summary (``placetune build``,
    ``export``, the folder's README): a line break or an escape sequence in them reached the terminal as it
    was (a forged line of the output, a rewritten window title). A plan whose measurement "failed" was
    traced as the plan's timeline, and ``settings.trt_version = "99"`` chose build.sh's flags."""
    plan = tmp_path / "plan.json"
    assert main(["export", "--storage", str(small_db), "--study", "s", "-o", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    edit(doc)
    plan.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["trace", str(plan), "-o", str(tmp_path / "t.json")]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert pattern in err and err.count("\n") == 1, err
    assert not (tmp_path / "t.json").exists()


# ---------------------------------------------------------------------------------------------- agent options


def test_an_unknown_agent_option_names_the_options_the_agent_takes(tmp_path, capsys, monkeypatch):
    """``[agent_options] n_startup = 5`` (a misspelt option) was refused with Python's own words,
    "GuidedAgent.__init__() got an unexpected keyword argument 'n_startup'": the class, not what it takes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[study]\nname = "s"\nmodel = "seed-block"\nstorage = "sqlite:///s.db"\n'
                                     '[agent_options]\nn_startup = 5\n')
    assert main(["tune", "s.toml"]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err == ("placetune: error: agent 'guided' has no option(s) 'n_startup'; its options: batch, ensemble, "
                   "granularity, inner_evals, kappa, max_stages, remeasure, seed\n"), err
    assert not (tmp_path / "s.db").exists()


# ---------------------------------------------------------------------------------------------- calibration cache


@pytest.mark.parametrize("fmt, output", [("json", "plan.json"), ("trtexec", "build.sh")])
def test_a_calibration_cache_that_is_not_one_is_refused_for_a_plan_file(fmt, output, small_db, tmp_path, capsys):
    """``export --calibration-cache plan.json -o out.json`` (any file) wrote a plan whose INT8 ranges read
    "from the calibration cache", its PLACEHOLDERS warning dropped (exit 0): the plan folder checked the
    cache, the plan file and the build script did not."""
    wrong = tmp_path / "other.json"
    wrong.write_text("{}\n")
    code = main(["export", "--storage", str(small_db), "--study", "s", "--format", fmt,
                 "--calibration-cache", str(wrong), "-o", str(tmp_path / output)])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert f"calibration cache {wrong}: not a TensorRT calibration cache" in err
    assert not (tmp_path / output).exists()

    other_model = tmp_path / "other.cache"
    other_model.write_text("TRT-8601-EntropyCalibration2\nimages: 3c010a14\n")
    assert main(["export", "--storage", str(small_db), "--study", "s", "--format", fmt,
                 "--calibration-cache", str(other_model), "-o", str(tmp_path / output)]) == ConfigError.exit_code
    assert "its 1 range name none of seed-block's tensors (first: images)" in capsys.readouterr().err

    cache = tmp_path / "c.cache"
    cache.write_text("TRT-8601-EntropyCalibration2\ninput: 3c010a14\n")
    assert main(["export", "--storage", str(small_db), "--study", "s", "--format", fmt,
                 "--calibration-cache", str(cache), "-o", str(tmp_path / output)]) == 0


# ---------------------------------------------------------------------------------------------- settings


@pytest.mark.parametrize("value", ['"false"', '"no"', "0", "1"])
def test_a_gpu_fallback_that_is_not_a_boolean_is_refused(value, tmp_path, capsys, monkeypatch):
    """``[settings] gpu_fallback = "false"`` was stored as the string "false" and, a non-empty string being
    true, every engine was built WITH GPU fallback: the opposite of what the file says, silently."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[study]\nname = "s"\nmodel = "seed-block"\nmode = "engine"\n'
                                     f'storage = "sqlite:///s.db"\n[settings]\ngpu_fallback = {value}\n')
    assert main(["tune", "s.toml"]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err == f"placetune: error: gpu_fallback must be true or false, got {value.strip(chr(34))!r}\n", err
    assert not (tmp_path / "s.db").exists()


def test_settings_refuse_a_gpu_fallback_that_is_not_a_boolean():
    from placetune.settings import Settings

    with pytest.raises(ConfigError, match=r"^gpu_fallback must be true or false, got 'no'$"):
        Settings(gpu_fallback="no")
    assert Settings(gpu_fallback=False).gpu_fallback is False


# ---------------------------------------------------------------------------------------------- backend options


@pytest.mark.parametrize("line, message", [
    ("profile = 5", "device_profile must be the path of a device profile (TOML) or a DeviceProfile, got int '5'"),
    ("device_profile = [\"a.toml\"]", "device_profile must be the path of a device profile (TOML) or a DeviceProfile, "
                                      "got list \"['a.toml']\""),
    ("timeline = \"no\"", "timeline must be true or false, got 'no'"),
])
def test_a_simulator_option_of_the_wrong_type_is_refused(line, message, tmp_path, capsys, monkeypatch):
    """``[backend_options] profile = 5`` ended in "internal error (a bug in placetune...)" and a traceback
    (exit 1); ``timeline = "no"``, a true string, was taken as yes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('[study]\nname = "s"\nmodel = "seed-block"\nstorage = "sqlite:///s.db"\n'
                                     f'[backend_options]\n{line}\n')
    assert main(["tune", "s.toml"]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err == f"placetune: error: {message}\n", err
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("backend, line, message", [
    ("tensorrt", "timeout_s = \"x\"", "tensorrt backend: timeout_s must be a finite number > 0, got 'x'"),
    ("tensorrt", "timeout_s = nan", "tensorrt backend: timeout_s must be a finite number > 0, got nan"),
    ("tensorrt", "warmup_ms = inf", "tensorrt backend: warmup_ms must be a finite number >= 0, got inf"),
    ("tensorrt", "iterations = 2.5", "tensorrt backend: iterations must be an integer >= 1, got 2.5"),
    ("tensorrt", "dla_memory_pools = 5", "tensorrt backend: dla_memory_pools must be a table (an object of names and "
                                         "values), got 5"),
    ("tensorrt", "gate_tolerance = {fp16 = \"x\"}", "tensorrt backend: gate_tolerance must be a table of finite "
                                                    "numbers > 0, got {'fp16': 'x'}"),
    ("tensorrt", "test_wrong_cut = \"false\"", "tensorrt backend: test_wrong_cut must be true or false, got 'false'"),
    ("trtexec", "duration_s = inf", "trtexec backend: duration_s must be a finite number >= 0, got inf"),
    ("trtexec", "spin_wait = \"false\"", "trtexec backend: spin_wait must be true or false, got 'false'"),
    ("trtexec", "trt_version = 8.6", "trtexec backend: trt_version must be text, got 8.6"),
])
def test_a_measuring_backend_option_of_the_wrong_type_is_refused(backend, line, message, tmp_path, capsys,
                                                                 monkeypatch):
    """The TensorRT and trtexec backends took their options' types on trust: ``timeout_s = "x"`` or
    ``dla_memory_pools = 5`` ended in a traceback (exit 1), ``timeout_s = nan`` (a timeout that never
    expires) and ``warmup_ms = inf`` (a warm-up that never ends) were accepted, ``test_wrong_cut = "false"``
    (a true string) turned on the deliberately wrong cut that fails every gate, ``iterations = 2.5`` was
    taken as a count."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(f'[study]\nname = "s"\nmodel = "seed-block"\nbackend = "{backend}"\n'
                                     f'mode = "engine"\nstorage = "sqlite:///s.db"\n[backend_options]\n{line}\n')
    assert main(["tune", "s.toml"]) == ConfigError.exit_code
    err = capsys.readouterr().err
    assert err == f"placetune: error: {message}\n", err
    assert not (tmp_path / "s.db").exists()


# ---------------------------------------------------------------------------------------------- constraints


@pytest.mark.parametrize("pair", [("latency<=1", "latency>=2"), ("throughput>=5000", "throughput<=10")])
def test_constraints_no_measurement_can_hold_together_are_refused(pair, tmp_path, capsys):
    """``--constraint 'latency<=1' --constraint 'latency>=2'`` ran the whole study, printed both as broken
    and exported a plan that breaks one of them (exit 0)."""
    args = ["tune", "--model", "seed-block", "--agent", "random", "--trials", "2", "--storage", str(tmp_path / "c.db"),
            "--study", "c", "--export", str(tmp_path / "c.json")]
    for c in pair:
        args += ["--constraint", c]
    assert main(args) == ConfigError.exit_code
    err = capsys.readouterr().err
    low, high = sorted(pair, key=lambda t: "<=" in t)
    assert f"constraints {low!r} and {high!r} contradict each other" in err and err.count("\n") == 1, err
    assert not (tmp_path / "c.db").exists() and not (tmp_path / "c.json").exists()


def test_a_bound_range_that_can_hold_still_reads():
    from placetune.tuning.constraints import parse_constraints

    assert len(parse_constraints(["latency>=1", "latency<=1", "latency[a]>=3", "latency<=2"])) == 4


# ---------------------------------------------------------------------------------------------- simulated stays simulated


def test_a_database_relabelling_simulated_figures_as_measured_exports_nothing(small_db, tmp_path, capsys):
    """A database whose study row was edited to ``backend = 'tensorrt', simulated = 0`` (and its measurements'
    flag with it) exported a plan without the SIMULATED mark (exit 0), though every measurement's own
    record and the study's machine fingerprint say the simulated Jetson measured it."""
    from placetune.errors import StoreError

    db = _copy(small_db, tmp_path / "t.db", "update pt_studies set backend = 'tensorrt', simulated = 0; "
                                            "update pt_measurements set simulated = 0;")
    code = main(["export", "--storage", str(db), "--study", "s", "-o", str(tmp_path / "p.json")])
    err = capsys.readouterr().err
    assert code == StoreError.exit_code and err.count("\n") == 1, err
    assert "study 's' is marked as measured on hardware (backend 'tensorrt'), but its measurement " in err
    assert "came from the simulated Jetson (backend 'simulate-" in err
    assert not (tmp_path / "p.json").exists()


# ---------------------------------------------------------------------------------------------- secret masking


@pytest.mark.parametrize("password", ["a b@c", "my pass@word", "x y@z@w", "a'b c@d"])
def test_a_password_with_a_blank_and_an_at_sign_is_masked_whole(password):
    """A password with a blank (``my pass@word``) was masked only up to its own ``@``: ``tune``'s "next:"
    line showed ``--storage 'postgresql+psycopg://tuner:***@word@db...'``, the rest of the password in clear."""
    import shlex

    from placetune.safetext import mask_secrets
    from placetune.tuning.verdict import next_steps

    url = f"postgresql+psycopg://tuner:{password}@db.example:5432/pt"
    for text in (f"cannot reach {url} (mail admin@example.com)", next_steps(url, "s")):
        masked = mask_secrets(text)
        assert "tuner:***@db.example:5432/pt" in masked, masked
        assert password.rpartition("@")[2] + "@db" not in masked
    assert mask_secrets(f"--storage {shlex.quote(url)} x@y") == "--storage 'postgresql+psycopg://tuner:***@db.example:5432/pt' x@y"


# ---------------------------------------------------------------------------------------------- standard output


def test_trace_to_standard_output_writes_no_file_named_dash(small_db, tmp_path, capsys, monkeypatch):
    """``placetune trace plan.json -o - | jq`` (as ``export -o -`` writes the plan to standard output) created
    a file named ``-`` and sent nothing down the pipe but placetune's "wrote ..." line."""
    plan = tmp_path / "plan.json"
    assert main(["export", "--storage", str(small_db), "--study", "s", "-o", str(plan)]) == 0
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["trace", str(plan), "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["otherData"]["simulated"] is True
    assert err.startswith("wrote SIMULATED trace to standard output (") and not (tmp_path / "-").exists()
