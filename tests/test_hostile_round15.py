"""Hostile and odd input, round 15: a fleet study's heartbeat settings of the wrong type or out of range
(a traceback, or a message that named no field), a NUL byte in a study file's model path (a traceback),
``measure`` of a plan of another batch told to leave out a --batch it was not given, [agent_options]
values that are NaN, infinite, a 400-digit integer (a traceback) or of another kind than the option takes
(refused without the option's name, or silently cut or read as true), and a plan.json nested past Python's
recursion limit or naming an engine file too long for the system (tracebacks of the standalone runtime).

Each input is checked against the rule of every round (``tests.hostile.one_line``).
"""

from __future__ import annotations

import pytest

from placetune.cli.main import main
from placetune.errors import ConfigError
from tests.hostile import one_line as _one_line
from tests.seeds import FRESH, case_seed


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- a fleet's heartbeat settings
@pytest.mark.parametrize("options, field", [
    ({"heartbeat_interval": "x"}, "heartbeat_interval"),       # was a ValueError traceback
    ({"heartbeat_interval": float("inf")}, "heartbeat_interval"),  # was an OverflowError traceback
    ({"heartbeat_interval": float("nan")}, "heartbeat_interval"),
    ({"heartbeat_interval": True}, "heartbeat_interval"),
    ({"heartbeat_interval": 2.5}, "heartbeat_interval"),        # was cut to 2 s without a word
    ({"grace_period": [1]}, "grace_period"),                    # named no field
    ({"grace_period": "soon"}, "grace_period"),
    ({"max_retry": "lots"}, "max_retry"),
    ({"max_retry": 10**30}, "max_retry"),
    ({"heartbeat_interval": 10**30}, "heartbeat_interval"),
])
def test_a_fleet_setting_that_is_no_whole_number_in_range_is_named(options, field, tmp_path):
    from placetune.store import Store
    from placetune.tuning.fleet import Fleet

    with Store(tmp_path / "f.db") as store, pytest.raises(ConfigError) as err:
        Fleet.from_agent_options(store, options)
    text = str(err.value)
    assert f"[agent_options] {field} must be" in text, text
    assert len(text.splitlines()) == 1


@pytest.mark.parametrize("options, kept", [({"heartbeat_interval": 30, "max_retry": 0}, (30, 120, 0)),
                                           ({"heartbeat_interval": 100}, (100, 200, 3)),
                                           ({"heartbeat_interval": 5, "grace_period": 60}, (5, 60, 3)),
                                           ({}, (20, 120, 3))])
def test_fleet_settings_in_range_are_kept(options, kept, tmp_path):
    from placetune.store import Store
    from placetune.tuning.fleet import Fleet

    with Store(tmp_path / "f.db") as store:
        fleet = Fleet.from_agent_options(store, options)
        try:
            assert (fleet.options.heartbeat_interval, fleet.options.grace_period, fleet.options.max_retry) == kept
        finally:
            fleet.close()


# --------------------------------------------------------------------------- a NUL byte in a model path
@pytest.mark.parametrize("key, value", [("model", "a\\u0000b.onnx"), ("models", ["a.onnx", "b\\u0000.onnx"]),
                                        ("device_profile", "p\\u0000.toml"), ("input_data", "f\\u0000.npz"),
                                        ("export", "x\\u0000.json")])
def test_a_nul_byte_in_a_study_files_path_is_named(key, value, tmp_path, capsys):
    body = ", ".join(f'"{v}"' for v in value) if isinstance(value, list) else f'"{value}"'
    body = f"[{body}]" if isinstance(value, list) else body
    model = "" if key in ("model", "models") else 'model = "seed-block"\n'
    (tmp_path / "s.toml").write_text(f'[study]\n{model}{key} = {body}\ntrials = 3\nstorage = "sqlite:///s.db"\n'
                                     + ('mode = "concurrent"\n' if key == "models" else ""))
    assert main(["tune", "s.toml"]) in (3, 6)
    err = capsys.readouterr().err
    assert _one_line(err), err
    assert key in err and "NUL" in err, err
    assert not (tmp_path / "s.db").exists()


# --------------------------------------------------------------------------- measure of a plan of another batch
def test_measure_of_a_plan_of_another_batch_without_batch_given_says_to_give_it(tmp_path, capsys):
    """``measure resnet50 --placement plan.json`` of a plan tuned at batch 2, no ``--batch`` given: the refusal
    said "measure it as it was tuned with --batch 2 (or leave the option out)", and the option was already
    left out. It now says the model loads at its own batch without --batch, and to give the plan's."""
    assert main(["tune", "--model", "resnet50", "--batch", "2", "--mode", "engine", "--agent", "random",
                 "--trials", "3", "--storage", "sqlite:///t.db", "--export", "plan.json"]) == 0
    capsys.readouterr()
    assert main(["measure", "resnet50", "--placement", "plan.json"]) == 6
    err = capsys.readouterr().err
    assert _one_line(err), err
    assert "leave the option out" not in err, err
    assert "--batch 2" in err and "batch 1" in err, err
    assert main(["measure", "resnet50", "--batch", "2", "--placement", "plan.json"]) == 0
    capsys.readouterr()
    assert main(["measure", "resnet50", "--batch", "4", "--placement", "plan.json"]) == 6
    err = capsys.readouterr().err
    assert _one_line(err) and "--batch 2 (or leave the option out)" not in err, err


# --------------------------------------------------------------------------- an agent option that is no finite number
def _refused(agent: str, key: str, value: str, said: str, tmp_path, capsys) -> None:
    """``tune`` of a study file whose [agent_options] sets ``key = value`` (TOML) exits 6 with one line saying
    ``agent '<agent>': <said>``, and stores nothing."""
    (tmp_path / "s.toml").write_text(f'[study]\nmodel = "seed-block"\nagent = "{agent}"\ntrials = 3\n'
                                     f'storage = "sqlite:///s.db"\n[agent_options]\n{key} = {value}\n')
    assert main(["tune", "s.toml"]) == 6
    err = capsys.readouterr().err
    assert _one_line(err), err
    assert f"agent {agent!r}: {said}" in err, err
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize("agent, key, value", [("reinforce", "lr", "nan"), ("reinforce", "entropy", "inf"),
                                               ("local", "t0", "nan"), ("local", "kick", "-inf"),
                                               ("guided", "kappa", "inf")])
def test_an_agent_option_that_is_not_finite_is_refused_naming_it(agent, key, value, tmp_path, capsys):
    """``[agent_options] lr = nan`` built the agent and ran the whole budget on a policy of NaN weights
    (exit 0): a TOML float that is NaN or infinite is no setting of any agent."""
    _refused(agent, key, value, f"{key} must be a finite number", tmp_path, capsys)


def test_get_agent_refuses_a_non_finite_option_and_keeps_finite_ones():
    from search import get_agent

    with pytest.raises(ConfigError, match="lr must be a finite number"):
        get_agent("reinforce", seed=0, lr=float("nan"))
    assert get_agent("reinforce", seed=0, lr=0.05).lr == 0.05
    assert get_agent("local", seed=0, method="anneal", t0=0.5).t0 == 0.5


@pytest.mark.parametrize("key, value", [("max_retry", '"lots"'), ("heartbeat_interval", "2.5"),
                                        ("grace_period", "[1]")])
def test_a_heartbeat_setting_of_the_optuna_agent_is_named_before_the_agent_is_built(key, value, tmp_path, capsys):
    """The optuna agent takes the fleet's heartbeat settings too, and was built first: ``max_retry = "lots"``
    was refused as "agent 'optuna': invalid literal for int() with base 10: 'lots'", naming no key."""
    (tmp_path / "s.toml").write_text('[study]\nmodel = "seed-block"\nagent = "optuna"\ntrials = 3\n'
                                     f'storage = "sqlite:///s.db"\n[agent_options]\n{key} = {value}\n')
    assert main(["tune", "s.toml"]) == 6
    err = capsys.readouterr().err
    assert _one_line(err), err
    assert f"[agent_options] {key} must be a whole number" in err, err


# --------------------------------------------------------------------------- an agent option of the wrong kind
@pytest.mark.parametrize("agent, key, value, said", [
    ("reinforce", "lr", "9" * 400, "lr must be a finite number"),  # was an OverflowError traceback
    ("reinforce", "max_repeats", '"x"', "max_repeats must be an integer"),  # "invalid literal for int()"
    ("local", "t0", "{}", "t0 must be a finite number"),  # "float() argument must be a string or a real number"
    ("guided", "batch", "2.7", "batch must be an integer"),  # cut to 2 without a word
    ("optuna", "warm_start", '"no"', "warm_start must be true or false"),  # "no" was taken as true
])
def test_an_agent_option_of_the_wrong_kind_is_refused_naming_it(agent, key, value, said, tmp_path, capsys):
    _refused(agent, key, value, said, tmp_path, capsys)


#: values a study file's [agent_options] can hold that no built-in agent's option takes as they are
_HOSTILE = [float("nan"), float("inf"), -float("inf"), 10**400, -(10**400), "x", "", [], [1], {}, {"a": 1},
            True, False, 2.5, -1, 0, 10**12]


@pytest.mark.parametrize("seed", [1, 2, FRESH])
def test_property_an_agent_option_builds_the_agent_or_is_refused_naming_it(seed):
    """Seeded: every built-in agent's option, given a value drawn from what TOML can hold, either builds the
    agent or is refused with a ConfigError of one line that names the agent and the option."""
    import inspect
    import random

    from search import _resolve, get_agent

    rng = random.Random(case_seed(seed))
    for _ in range(300):
        agent = rng.choice(["exact", "guided", "local", "optuna", "random", "reinforce"])
        params = [p for p in inspect.signature(_resolve(agent).__init__).parameters.values()
                  if p.kind is p.KEYWORD_ONLY and p.name not in ("seed", "granularity")]
        key = rng.choice(params).name
        value = rng.choice(_HOSTILE)
        try:
            get_agent(agent, seed=0, **{key: value})
        except ConfigError as exc:
            text = str(exc)
            assert len(text.splitlines()) == 1 and text.startswith(f"agent {agent!r}") and key in text, \
                (seed, agent, key, value, text)


# --------------------------------------------------------------------------- the standalone runtime's plan.json
_LOAD = r'''
import sys
sys.path[:0] = [sys.argv[1], sys.argv[2]]
import placetune_runtime
try:
    placetune_runtime.load(sys.argv[3])
except (placetune_runtime.ConfigError, placetune_runtime.BackendError) as exc:
    print(str(exc))
'''


@pytest.mark.parametrize("text, said", [
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),  # was a RecursionError traceback
    ('{"format": "placetune-plan", "a": ' * 5_000 + "1" + "}" * 5_000, "nested too deeply"),
])
def test_the_standalone_runtime_refuses_a_plan_json_nested_too_deeply(text, said, tmp_path):
    """Where placetune's Plan is not importable (JetPack 5's Python 3.8) the runtime reads plan.json with the
    json module alone, whose decoder recursed until Python's limit: a RecursionError traceback, where the
    packaged runtime refuses more than 64 levels in one line."""
    import subprocess
    import sys

    import placetune.runtime
    from tests.fakes import FAKES_DIR

    placetune.runtime.write_standalone(tmp_path / "rt")
    folder = tmp_path / "plan"
    folder.mkdir()
    (folder / "plan.json").write_text(text)
    proc = subprocess.run([sys.executable, "-c", _LOAD, str(tmp_path / "rt"), str(FAKES_DIR), str(folder)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert said in proc.stdout and len(proc.stdout.strip().splitlines()) == 1, proc.stdout


def test_the_runtime_says_an_engine_file_name_too_long_for_the_system_is_not_built(tmp_path):
    """An engine_file of 5,000 characters (a plain name, so inside the folder) reached Path.is_file(), which
    raises OSError (ENAMETOOLONG) instead of answering False: a traceback in the standalone runtime (placetune's
    Plan, which refuses names over 255 bytes, is not importable there)."""
    import json
    import subprocess
    import sys

    import placetune.runtime
    from tests.fakes import FAKES_DIR

    placetune.runtime.write_standalone(tmp_path / "rt")
    folder = tmp_path / "plan"
    folder.mkdir()
    engine = {"engine_file": "x" * 5000, "kind": "segment", "device": "GPU", "index": 0}
    (folder / "plan.json").write_text(json.dumps({"format": "placetune-plan", "mode": "pipeline",
                                                  "engines": [engine], "settings": {}}))
    proc = subprocess.run([sys.executable, "-c", _LOAD, str(tmp_path / "rt"), str(FAKES_DIR), str(folder)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "engine 0 of the plan is not built" in proc.stdout and len(proc.stdout.strip().splitlines()) == 1, \
        proc.stdout
