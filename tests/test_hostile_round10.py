"""Hostile and odd input, round 10: file names longer than the system takes given to the commands that
first ask whether a name is a folder (``export -o``, ``build``, ``placetune.runtime.load``).

Each input is checked against the rule of every round: a one-line error naming the field and what is
allowed, a documented exit code, never a traceback, a hang, a leaked secret or a change to what is stored.
The fuzz suites' seeds are printed in the header and at the end of every run (tests/seeds.py); replay one
with ``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/test_fuzz.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from placetune.cli.main import main
from placetune.errors import ConfigError
from tests.test_hostile_round4 import make_small_db

#: one name component over the system's 255 bytes, and a path whose middle component is
TOO_LONG = ["9" * 400, "a/" + "b" * 300 + "/c.json", "9" * 400 + ".json"]


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    return make_small_db(tmp_path_factory.mktemp("db"))


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _one_error_line(err: str) -> str:
    assert "Traceback" not in err and "internal error" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("placetune: error: "), err
    return lines[0]


@pytest.mark.parametrize("name", TOO_LONG)
@pytest.mark.parametrize("fmt", ["json", "trtexec"])
def test_export_to_a_name_too_long_is_one_line(name, fmt, small_db, capsys):
    """``Path.is_dir()`` raises on ENAMETOOLONG (it ignores only a missing file): ``export -o <400 characters>``
    was an internal error with a traceback; it is the write's one line, exit 6."""
    code = main(["export", "--storage", str(small_db), "--format", fmt, "-o", name])
    assert code == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(("placetune: error: cannot write ", "placetune: error: cannot use ")), line
    assert "characters" in line, line  # the name is cut


@pytest.mark.parametrize("name", TOO_LONG)
def test_build_of_a_name_too_long_is_one_line(name, capsys):
    """``placetune build <400 characters>`` was an internal error with a traceback."""
    assert main(["build", name]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "no such file or folder" in line and "characters" in line, line


@pytest.mark.parametrize("name", TOO_LONG + ["9" * 400 + "/plan.json"])
def test_runtime_load_of_a_name_too_long_is_a_configuration_error(name):
    """``placetune.runtime.load`` raised a bare OSError for a name too long; it says it is no plan folder."""
    import placetune.runtime

    with pytest.raises(ConfigError, match="not a plan folder"):
        placetune.runtime.load(name)


# --------------------------------------------------------------------------- ONNX: shape-only ops folded at load
def _fold_model(node, inits):
    from onnx import TensorProto as T
    from onnx import helper as h

    graph = h.make_graph([h.make_node("Relu", ["x"], ["r"], name="relu"), node], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("r", T.FLOAT, None), h.make_tensor_value_info("y", T.FLOAT, None)],
                         list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def _i64(name, values):
    import numpy as np
    from onnx import numpy_helper as nh

    return nh.from_array(np.array(values, np.int64), name)


def _f32(name, values):
    import numpy as np
    from onnx import numpy_helper as nh

    return nh.from_array(np.asarray(values, np.float32), name)


def _huge_folds():
    import numpy as np
    from onnx import helper as h

    return {
        "ConstantOfShape [2**31]": _fold_model(h.make_node("ConstantOfShape", ["s"], ["y"], name="n"),
                                               [_i64("s", [2**31])]),
        "ConstantOfShape [32768, 32768]": _fold_model(h.make_node("ConstantOfShape", ["s"], ["y"], name="n"),
                                                      [_i64("s", [1 << 15, 1 << 15])]),
        "Expand to [8192, 8192]": _fold_model(h.make_node("Expand", ["c", "s"], ["y"], name="n"),
                                              [_f32("c", [1.0]), _i64("s", [1 << 13, 1 << 13])]),
        "Range of 2**26": _fold_model(h.make_node("Range", ["a", "b", "d"], ["y"], name="n"),
                                      [_i64("a", 0), _i64("b", 1 << 26), _i64("d", 1)]),
        "Mul (4096, 1) by (1, 4096)": _fold_model(h.make_node("Mul", ["a", "b"], ["y"], name="n"),
                                                  [_f32("a", np.ones((4096, 1))), _f32("b", np.ones((1, 4096)))]),
        "Gather 65536 rows of 256": _fold_model(h.make_node("Gather", ["a", "i"], ["y"], name="n", axis=0),
                                                [_f32("a", np.ones((256, 256))), _i64("i", np.zeros(1 << 16))]),
    }


@pytest.mark.parametrize("case", list(_huge_folds()))
def test_a_shape_only_op_whose_output_is_huge_is_never_computed_at_load(case):
    """The import folds shape-only ops whose inputs it knows, keeping outputs of at most 65,536 elements, but it
    checked the size after computing them: a ConstantOfShape of a drawn ``[2**31]`` filled 8 GB (the ONNX
    property of the fuzz suite hung there, using more memory each second, on 3 seeds of 46). The size is
    worked out from the shapes first; such an op is left unfolded and the model loads as before."""
    import tracemalloc

    from placetune import Model
    from placetune.errors import PlacetuneError
    from tests.hostile import alarm

    proto = _huge_folds()[case]
    tracemalloc.start()
    try:
        with alarm(30):
            try:
                Model.load(proto)
            except PlacetuneError as exc:
                assert "\n" not in str(exc), exc
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, f"{case}: the import allocated {peak >> 20} MB"


def test_small_shape_only_ops_are_still_folded():
    import numpy as np

    from placetune.model.folding import fold_value

    out = fold_value("ConstantOfShape", {}, [np.array([2, 3], np.int64)])
    assert out is not None and out.shape == (2, 3)
    assert fold_value("Range", {}, [np.array(0), np.array(10), np.array(2)]).tolist() == [0, 2, 4, 6, 8]
    assert fold_value("Expand", {}, [np.ones(1, np.float32), np.array([4, 4])]).shape == (4, 4)
    assert fold_value("Mul", {}, [np.ones((256, 1)), np.ones((1, 256))]).shape == (256, 256)
    assert fold_value("ConstantOfShape", {}, [np.array([257, 256], np.int64)]) is None  # 65,792: over the limit


# --------------------------------------------------------------------------- the Python API (README)
@pytest.fixture(scope="module")
def evaluator():
    from placetune import Evaluator

    return Evaluator("seed-block", "orin-agx")


def test_an_evaluator_for_no_platform_names_the_platforms():
    """``Evaluator(model, platform=None)`` was an AttributeError ('NoneType' object has no attribute
    'default_trt_version'); every value that is not a Platform goes through the name lookup."""
    from placetune import Evaluator
    from placetune.errors import UnknownNameError

    for platform in (None, 5):
        with pytest.raises(UnknownNameError, match=r"unknown platform .*valid platforms: orin-agx"):
            Evaluator("seed-block", platform)


def test_an_evaluator_store_of_another_type_is_refused_and_writes_no_file(tmp_path):
    """``Evaluator(..., store=5)`` made a SQLite database named ``5`` in the working folder."""
    from placetune import Evaluator

    with pytest.raises(ConfigError, match=r"store must be a Store, a SQLAlchemy URL, a SQLite path or None .*got int"):
        Evaluator("seed-block", store=5)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("entry", [0.5, float("nan"), float("inf"), None, "", [0], b"GPU", True, False, np.True_])
def test_an_assignment_entry_that_is_no_device_index_is_refused(entry, evaluator):
    """``Space.to_placement`` read 0.5 as device 0 (a placement nobody asked for) and raised ValueError for NaN,
    TypeError for None; each is a PlacementError naming the unit and what an entry may be. A bool (a mask
    passed for an action) was read as device 1 or 0, which the environments refuse."""
    from placetune.errors import PlacementError, UnknownNameError

    space = evaluator.space(granularity="layer")
    with pytest.raises((PlacementError, UnknownNameError)):
        space.to_placement([0] * (space.n_units - 1) + [entry])


@pytest.mark.parametrize("assignment", [None, 5, "GPU"])
def test_an_assignment_that_is_no_sequence_is_refused(assignment, evaluator):
    from placetune.errors import PlacementError

    with pytest.raises(PlacementError, match="assignment must be a sequence of device indexes or names"):
        evaluator.space(granularity="layer").to_placement(assignment)


def test_whole_numbers_and_names_still_make_placements(evaluator):
    import numpy as np

    space = evaluator.space(granularity="layer")
    n = space.n_units
    assert space.to_placement([1.0] * n) == space.to_placement(np.ones(n, np.int64)) == space.to_placement(["DLA0"] * n)



# --------------------------------------------------------------------------- study files
@pytest.mark.parametrize("value", ["{outside}/secret", "../outside/secret", "{outside}/secret:opt=1"])
def test_a_study_file_model_without_an_onnx_suffix_stays_in_its_folders(value, tmp_path, capsys, monkeypatch):
    """A study file's paths stay in its folder and the working folder, but only a model named ``*.onnx`` was
    checked: ``model = "/etc/passwd"`` (any file without the suffix) was read as an ONNX model. It is refused
    before anything is read, as every other path of an untrusted study file; a zoo name still loads."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("not a model")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "s.toml").write_text(f'[study]\nmodel = "{value.format(outside=outside)}"\ntrials = 1\n')
    assert main(["tune", "s.toml"]) == ConfigError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "model = " in line and "is outside the study file's folder and the working folder" in line, line
    assert "not a valid ONNX" not in line and not (work / "placetune.db").exists()


def test_a_study_file_model_named_from_the_zoo_or_beside_it_still_runs(tmp_path, capsys):
    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\ntrials = 1\nagent = "random"\n'
                                     'storage = "z.db"\nexport = "z.plan.json"\n')
    assert main(["tune", "s.toml"]) == 0


@pytest.mark.parametrize("objective", ["speed", "latency+latency", "fps"])
def test_an_unknown_objective_is_an_unknown_name(objective, capsys):
    """``--objective speed`` was 'objective speed cannot be measured by the simulate backend in pipeline mode'
    (exit 6), as if another backend could; it is an unknown name (exit 4) naming the objectives."""
    from placetune.errors import UnknownNameError

    assert main(["tune", "--model", "seed-block", "--objective", objective, "--storage", "u.db"]) == \
        UnknownNameError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert f"unknown objective {objective!r}; objectives are latency, throughput, energy" in line, line


@pytest.mark.parametrize("env_id", ["placetune/Placement-v0", "placetune/PlacementOneShot-v0",
                                    "placetune/PlacementStages-v0"])
def test_an_environment_for_no_platform_names_the_platforms(env_id):
    """``gym.make(env_id, model=..., platform=None)`` was an AttributeError, as the Evaluator's."""
    import gymnasium as gym

    import placetune  # noqa: F401 - registers the environments
    from placetune.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"unknown platform None; valid platforms: orin-agx"):
        gym.make(env_id, model="seed-block", platform=None)


# --------------------------------------------------------------------------- plan folders
@pytest.fixture(scope="module")
def plan_folder(small_db, tmp_path_factory):
    folder = tmp_path_factory.mktemp("plan") / "deploy"
    assert main(["export", "--storage", str(small_db), "--format", "trtexec", "-o", str(folder)]) == 0
    return folder


@pytest.mark.parametrize("key, value", [("layers", -1), ("layers", [None]), ("dla_layers", True),
                                        ("dla_layers", 1e308), ("predecessors", -1), ("predecessors", 2**63)])
def test_a_plan_whose_engine_lists_are_no_lists_is_refused_by_the_runtime(key, value, plan_folder, tmp_path):
    """``placetune.runtime.load`` (which reads a built folder without the plan's hash: its engines are what
    counts) raised TypeError ('int' object is not iterable) for an engine's ``layers`` of -1: the names were
    read before the types were checked. The types come first; each is a ConfigError naming the field."""
    import json
    import shutil

    import placetune.runtime
    from placetune.plan.file import Plan

    folder = tmp_path / "edited"
    shutil.copytree(plan_folder, folder)
    doc = json.loads((folder / "plan.json").read_text())
    doc["engines"][0][key] = value
    (folder / "plan.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError, match=rf"engines\[0\]\.{key} must be a list of"):
        Plan.from_dict(doc, where="plan.json")
    with pytest.raises(ConfigError, match=rf"engines\[0\]\.{key} must be a list of"):
        placetune.runtime.load(folder)


# --------------------------------------------------------------------------- zoo options
@pytest.mark.parametrize("command", ["check", "measure"])
def test_a_zoo_option_given_twice_is_refused(command, capsys):
    """``vit-tiny:depth=2,depth=3`` ran depth 3 without a word (the last value won)."""
    from placetune.errors import ModelError

    assert main([command, "vit-tiny:depth=2,depth=3"]) == ModelError.exit_code
    line = _one_error_line(capsys.readouterr().err)
    assert "zoo option 'depth' is given twice in 'depth=2,depth=3': give each option once" in line, line


# --------------------------------------------------------------------------- secrets
SECRET = "s3cr3tPW"


@pytest.mark.parametrize("argv", [["studies"], ["export", "-o", "x.json"], ["calibrate", "--study", "s"],
                                  ["report", "-o", "r"]])
def test_a_database_url_without_its_scheme_hides_its_password(argv, capsys):
    """``--storage tuner:PASSWORD@db-host/placetune`` (``postgresql://`` left out) is a SQLite path, and its error
    line echoed it whole three times (the path, its folder, the mkdir to run). A ``user:password@host`` is masked
    wherever a message shows it."""
    code = main([argv[0], "--storage", f"tuner:{SECRET}@db-host/placetune", *argv[1:]])
    err = capsys.readouterr().err
    assert code == 7 and SECRET not in err, err
    assert "tuner:***@db-host" in _one_error_line(err)


def test_the_python_api_hides_it_too():
    from placetune import Evaluator
    from placetune.errors import StoreError

    with pytest.raises(StoreError) as info:
        Evaluator("seed-block", store=f"tuner:{SECRET}@db-host/placetune")
    assert SECRET not in str(info.value) and "tuner:***@db-host" in str(info.value)


def test_text_without_a_password_keeps_its_colons_and_at_signs():
    from placetune.safetext import mask_secrets

    for text in ("layer conv:0 at 12:30", "mail a@b.c", "sqlite:///runs/placetune.db", "name:[1,3,224,224]"):
        assert mask_secrets(text) == text
