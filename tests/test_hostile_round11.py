"""Hostile and odd input, round 11: the round's new code (``--help-all`` and the short help, standard
error wrapped on a terminal, the study checks, the registered objectives, ``--timeout``/``--shape``, the
deploy writers, the runtime's plan checks, the clocks read from sysfs).

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _cli(args: list[str], stdout: str | None = None) -> subprocess.CompletedProcess:
    cmd = " ".join(f"'{a}'" for a in [sys.executable, "-m", "placetune.cli", *args])
    if stdout:
        cmd += f" > '{stdout}'"
    return subprocess.run(["sh", "-c", cmd], env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full")
@pytest.mark.parametrize("args", [["tune", "--help-all"], ["measure", "--help-all"], ["tune", "--help"],
                                  ["--version"]])
def test_help_written_to_a_full_disk_is_not_a_success(args):
    """argparse's help and version exit through SystemExit(0), past the check that standard output reached
    its reader: ``placetune tune --help-all > /dev/full`` said nothing and exited 0."""
    proc = _cli(args, stdout="/dev/full")
    assert proc.returncode == 6, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "placetune: error: the standard output is full (no space left on device): the command's output is incomplete"]


# ------------------------------------------------------------------------------------- objectives


@pytest.fixture
def _forget_objectives():
    from placetune.tuning.objectives import registered_objectives, unregister_objective

    before = set(registered_objectives())
    yield
    for name in set(registered_objectives()) - before:
        unregister_objective(name)


@pytest.mark.usefixtures("_forget_objectives")
@pytest.mark.parametrize("name", ["ünï", "a٣", "ß", "µs", "a\u0301"])
def test_register_objective_refuses_a_name_outside_ascii(name):
    """``str.islower``/``isdigit`` passed ``ünï`` and ``a٣`` (Arabic-Indic three) as lower-case letters and
    digits: the documented names are ASCII."""
    from placetune.errors import ConfigError
    from placetune.tuning.objectives import register_objective

    with pytest.raises(ConfigError, match="lower-case letters, digits and underscores"):
        register_objective(name, direction="minimize", unit="ms", value=lambda m: 1.0)


@pytest.mark.usefixtures("_forget_objectives")
@pytest.mark.parametrize("measured_from", [5, None, "latency", object()])
def test_register_objective_refuses_a_measured_from_that_is_no_tuple(measured_from):
    """An int or None raised TypeError (a traceback); a string was split into its letters."""
    from placetune.errors import ConfigError
    from placetune.tuning.objectives import register_objective

    with pytest.raises(ConfigError, match="measured_from must be a tuple of built-in objectives"):
        register_objective("odd", direction="minimize", unit="ms", value=lambda m: 1.0, measured_from=measured_from)


@pytest.mark.usefixtures("_forget_objectives")
@pytest.mark.parametrize("unit", ["ms\n", "\x1b[31mms", "m\ts"])
def test_register_objective_refuses_a_unit_of_more_than_one_line(unit):
    from placetune.errors import ConfigError
    from placetune.tuning.objectives import register_objective

    with pytest.raises(ConfigError, match="unit must be a non-empty text on one line"):
        register_objective("odd", direction="minimize", unit=unit, value=lambda m: 1.0)


@pytest.mark.parametrize("name", [[], {}, ["a"]])
def test_unregister_objective_of_an_unhashable_is_an_unknown_name(name):
    from placetune.errors import UnknownNameError
    from placetune.tuning.objectives import unregister_objective

    with pytest.raises(UnknownNameError, match="no registered objective"):
        unregister_objective(name)


@pytest.mark.usefixtures("_forget_objectives")
@pytest.mark.parametrize(("returned", "expected"), [
    (lambda: __import__("numpy").float32(2.5), 2.5), (lambda: __import__("numpy").int64(3), 3.0),
    (lambda: 10 ** 400, None), (lambda: __import__("numpy").bool_(True), None), (lambda: "3", None),
    (lambda: __import__("numpy").float32("nan"), None)])
def test_a_registered_objectives_value_is_any_finite_real_number(returned, expected):
    """A NumPy float32 or int64 (``np.mean`` of float32 samples) was read as no value; an integer too large
    for a float raised OverflowError."""
    from placetune.measurement import Measurement
    from placetune.tuning.objectives import register_objective

    register_objective("odd", direction="minimize", unit="ms", value=lambda m: returned())
    m = Measurement(status="ok", latency_ms={"mean": 1.0}, throughput_fps=1000.0)
    assert m.objective("odd") == expected


@pytest.mark.usefixtures("_forget_objectives")
def test_a_registered_objective_whose_function_raises_is_a_config_error_naming_it():
    from placetune.errors import ConfigError
    from placetune.measurement import Measurement
    from placetune.tuning.objectives import register_objective

    register_objective("odd", direction="minimize", unit="ms", value=lambda m: 1 / 0)
    m = Measurement(status="ok", latency_ms={"mean": 1.0}, throughput_fps=1000.0)
    with pytest.raises(ConfigError, match="objective odd: its value function raised ZeroDivisionError"):
        m.objective("odd")


# ------------------------------------------------------------------------------------------- --shape


@pytest.mark.parametrize("spec", ["x=1x3x2_24x224", "x=1x\u0663x3x3", "x=\uff11x3x3x3", "x=+1x3x3x3"])
def test_shape_refuses_digits_int_reads_but_are_no_size(spec):
    """``int()`` read ``2_24`` as 224, ``+1`` as 1 and Arabic-Indic or full-width digits as sizes."""
    from placetune.errors import ShapeError
    from placetune.model.shapes import parse_shape_spec

    with pytest.raises(ShapeError, match="bad --shape .*expected name=1x3x224x224"):
        parse_shape_spec(spec)


@pytest.mark.parametrize("spec", ["x=99999999999999999999999x3x4x4", "x=9223372036854775808x3x4x4",
                                  "x=1x3x2147483648x4"])
def test_shape_refuses_a_dimension_over_32_bits_naming_shape_not_the_model(spec, tmp_path):
    """A dimension over int64 came back as "d.onnx: malformed ONNX graph (ValueError: Value out of range)":
    the model blamed for the --shape."""
    from placetune.errors import ShapeError
    from placetune.model.shapes import parse_shape_spec

    with pytest.raises(ShapeError, match=r"bad --shape .*every dimension must be at most 2147483647"):
        parse_shape_spec(spec)


def test_shape_keeps_the_forms_it_documents():
    from placetune.model.shapes import parse_shape_spec

    assert parse_shape_spec("a= 1 x 3 ") == ("a", (1, 3))
    assert parse_shape_spec("a:[1, 3]") == ("a", (1, 3))
    assert parse_shape_spec("1,3,224,224") == (None, (1, 3, 224, 224))
    assert parse_shape_spec("x=2147483647x1") == ("x", (2147483647, 1))


# ----------------------------------------------------------------------------------------- --timeout


@pytest.mark.parametrize("text", ["1_000", "3\u0660", "\u0663\u0660s", "\uff11h", "1\u0660m"])
def test_timeout_refuses_digits_float_reads_but_the_format_has_not(text):
    """``float()`` and ``\\d`` read ``1_000`` and Arabic-Indic or full-width digits as seconds."""
    from placetune.errors import ConfigError
    from placetune.tuning.studyfile import parse_duration

    with pytest.raises(ConfigError, match="bad --timeout .*each of h, m, s at most once"):
        parse_duration(text)


def test_timeout_keeps_the_forms_it_documents():
    from placetune.tuning.studyfile import parse_duration

    assert [parse_duration(t) for t in ["8h", "30m", "90s", "1h30m", "2h 30m", "1.5h", "1e3", " 90 s"]] == [
        28800.0, 1800.0, 90.0, 5400.0, 9000.0, 5400.0, 1000.0, 90.0]


# ------------------------------------------------------------------------------------- clocks (sysfs)


def _clock_tree(root: Path, cpu: tuple[str, str, str], gpu: tuple[str, str, str]) -> Path:
    """A sysfs tree with one CPU's cpufreq and an Orin GPU's devfreq node: (min, max, current) each."""
    d = root / "devices/system/cpu/cpu0/cpufreq"
    d.mkdir(parents=True)
    for name, v in zip(("scaling_min_freq", "scaling_max_freq", "scaling_cur_freq"), cpu):
        (d / name).write_text(v)
    g = root / "class/devfreq/17000000.gpu"
    g.mkdir(parents=True)
    for name, v in zip(("min_freq", "max_freq", "cur_freq"), gpu):
        (g / name).write_text(v)
    return root


@pytest.mark.parametrize(("cpu", "gpu"), [(("-5", "-5", "-9"), ("-1", "-1", "-3")), (("0", "0", "0"), ("0", "0", "0")),
                                          (("1_000", "1_000", "1"), ("1", "1", "1"))])
def test_clocks_from_sysfs_are_unknown_when_the_limits_are_no_frequencies(tmp_path, cpu, gpu):
    """Negative, zero and ``1_000`` limits were read as clocks locked at -5 kHz or 0 Hz ("cpu0 at -9 kHz,
    below its locked -5 kHz"): garbage taken as a locked board, where the state is unknown."""
    from placetune.backends.tensorrt.env import read_clocks_sysfs, read_throttled_sysfs

    root = _clock_tree(tmp_path, cpu, gpu)
    assert read_clocks_sysfs(root) is None
    assert read_throttled_sysfs(root) == []


def test_a_garbage_current_frequency_is_no_throttling(tmp_path):
    from placetune.backends.tensorrt.env import read_clocks_sysfs, read_throttled_sysfs

    root = _clock_tree(tmp_path, ("100", "100", "-50"), ("1000", "1000", "+5"))
    assert read_clocks_sysfs(root) is True
    assert read_throttled_sysfs(root) == []


def test_jetson_clocks_show_with_a_number_of_thousands_of_digits_is_no_traceback():
    """int() refuses more than 4300 digits with ValueError: ``jetson_clocks --show`` output carrying one
    raised out of the clocks' reading."""
    from placetune.backends.tensorrt.env import parse_jetson_clocks, parse_jetson_clocks_throttled

    text = "GPU MinFreq=1 MaxFreq=1 CurrentFreq=" + "9" * 5000
    assert parse_jetson_clocks(text) is None
    assert parse_jetson_clocks_throttled(text) == []
    assert parse_jetson_clocks("GPU MinFreq=918000000 MaxFreq=918000000 CurrentFreq=918000000") is True


# ------------------------------------------------------------------------------ standalone runtime


_LOAD = r'''
import json, sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import placetune_runtime
try:
    placetune_runtime.load(sys.argv[3])
except placetune_runtime.ConfigError as exc:
    print(str(exc))
'''


@pytest.mark.parametrize(("field", "value"), [("frames_in_flight", "abc"), ("frames_in_flight", [1]),
                                              ("frames_in_flight", 2.7), ("frames_in_flight", -3),
                                              ("frames_in_flight", 1e308), ("frames_in_flight", True),
                                              ("dla_core", "x"), ("dla_core", 7), ("dla_core", [])])
def test_the_standalone_runtime_refuses_a_plan_json_with_odd_numbers(tmp_path, field, value):
    """Where placetune's Plan is not importable (JetPack 5's Python 3.8), ``settings.frames_in_flight`` went to
    int(): "abc" raised ValueError, a list TypeError, 2.7 was taken as 2 and -3 as 1; an engine's ``dla_core``
    reached int() only once its engine was built."""
    import json

    import placetune.runtime
    from tests.fakes import FAKES_DIR

    placetune.runtime.write_standalone(tmp_path / "rt")
    folder = tmp_path / "plan"
    folder.mkdir()
    engine = {"engine_file": "model.seg0.engine", "kind": "segment", "device": "DLA0", "index": 0}
    doc = {"format": "placetune-plan", "mode": "pipeline", "engines": [engine], "settings": {}}
    (engine if field == "dla_core" else doc["settings"])[field] = value
    (folder / "plan.json").write_text(json.dumps(doc))
    proc = subprocess.run([sys.executable, "-c", _LOAD, str(tmp_path / "rt"), str(FAKES_DIR), str(folder)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    where = "settings.frames_in_flight" if field == "frames_in_flight" else "engines[0].dla_core"
    hi = 64 if field == "frames_in_flight" else 1
    lo = 1 if field == "frames_in_flight" else 0
    assert f'"{where}" must be an integer from {lo} to {hi}, found' in proc.stdout, proc.stdout


# ------------------------------------------------------------------------------- Evaluator(shapes=)


@pytest.mark.parametrize("value", ["1x3x32x32", "abc", 3, None, [[1]], {"a": 1}, [1.5, 3, 32, 32], [True, 3, 32, 32],
                                   ["1", "3", "32", "32"]])
def test_a_shapes_mapping_whose_value_is_no_sequence_of_integers_is_a_shape_error(value):
    """``Evaluator(..., shapes={"input": "1x3x224x224"})`` raised ValueError out of int('x'), 3 or None a
    TypeError; 1.5 and True were taken as 1."""
    from placetune.errors import ShapeError
    from placetune.model.shapes import normalise_shapes

    with pytest.raises(ShapeError, match="bad shape for 'input': .*give a sequence of positive integers"):
        normalise_shapes({"input": value})


def test_a_shapes_mapping_keeps_integer_sequences_and_refuses_a_dimension_over_32_bits():
    import numpy as np

    from placetune.errors import ShapeError
    from placetune.model.shapes import normalise_shapes

    assert normalise_shapes({"input": (1, 3, 224, 224)}) == {"input": (1, 3, 224, 224)}
    assert normalise_shapes({"input": [np.int64(2), 3]}) == {"input": (2, 3)}
    with pytest.raises(ShapeError, match="at most 2147483647"):
        normalise_shapes({"input": (1, 3, 10 ** 30, 4)})


# -------------------------------------------------------------------------------------- environments


@pytest.mark.parametrize("value", ["no", "False", 0, 1, None])
def test_the_environment_refuses_an_allow_unsupported_that_is_no_bool(value):
    """``gym.make(..., allow_unsupported="no")`` offered every unit the DLA: a true text."""
    import gymnasium as gym

    import placetune.envs  # noqa: F401 - registers the environments
    from placetune.errors import ConfigError

    with pytest.raises(ConfigError, match="allow_unsupported must be True or False, got"):
        gym.make("placetune/Placement-v0", model="seed-block", allow_unsupported=value)


# ------------------------------------------------------------------------- output names echoed


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    from tests.test_hostile_round4 import make_small_db

    return make_small_db(tmp_path_factory.mktemp("db"))


FORGED = "placetune: FORGED LINE"


@pytest.mark.parametrize("command", ["export folder", "export file", "trace", "report"])
def test_an_output_name_with_a_line_break_prints_no_line_of_its_own(small_db, tmp_path, capsys, monkeypatch, command):
    """``export -o 'd<newline>placetune: ...'`` printed a line of its own in "wrote plan folder" and in each
    line of the new "next, on the Jetson: copy ... there" (shlex.quote keeps a line break); trace's and
    report's "wrote" lines too."""
    from placetune.cli.main import main

    monkeypatch.chdir(tmp_path)
    name = f"o\n{FORGED}"
    db = str(small_db)
    argv = {"export folder": ["export", "--storage", db, "--study", "s", "--format", "trtexec", "-o", name],
            "export file": ["export", "--storage", db, "--study", "s", "-o", name + ".json"],
            "trace": ["trace", str(small_db.parent / "s.plan.json"), "-o", name + ".json"],
            "report": ["report", "--storage", db, "--study", "s", "-o", name]}[command]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    lines = (out + err).splitlines()
    assert not [x for x in lines if x.startswith(FORGED)], lines
    assert any("o\\nplacetune: FORGED LINE" in x for x in lines), lines


@pytest.mark.parametrize("value", ["tuner:top secret@db.example/placetune", "tuner:p@ss word@10.0.0.5:5432/pt",
                                   "tuner:pw@host/db"])
def test_a_storage_url_without_its_scheme_is_refused_without_echoing_its_password(value, tmp_path):
    """``user:PASSWORD@host/db`` given to --storage with its ``postgresql://`` left out was read as a
    SQLite path and echoed whole in the error naming its directory; a password with a space in it got
    past the masking (which stops at spaces so as not to mask ordinary text). It is refused as a URL
    without its scheme, in one line naming --storage, with the password masked whatever it holds."""
    proc = subprocess.run([sys.executable, "-m", "placetune.cli", "studies", "--storage", value], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    secret = value.split(":", 1)[1].rsplit("@", 1)[0]
    assert proc.returncode == 7, proc.stderr
    assert secret not in proc.stderr and secret not in proc.stdout, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "--storage" in proc.stderr, proc.stderr
    assert "postgresql" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not list(tmp_path.iterdir())  # nothing made: not a directory, not a database
