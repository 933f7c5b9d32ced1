"""The Python API refuses a setting its mode would ignore, as the command line does (exit 6).

``placetune measure --mode pipeline --dla-core 1`` is refused (``check_mode_options``); the same setting
given to ``Settings``, ``Evaluator`` or an environment was taken and silently ignored, so a researcher's
study measured something else than it said. Each is now a ``ValueError`` naming the field and the mode it
applies in.
"""

from __future__ import annotations

import pytest

from placetune import ConfigError, Evaluator
from placetune.envs import PlacementEnv
from placetune.settings import MODE_ONLY, Settings

IGNORED = [("pipeline", {"dla_core": 1}, "dla_core=1 applies in engine mode only"),
           ("replicas", {"dla_core": 0}, "dla_core=0 applies in engine mode only"),
           ("engine", {"frames_in_flight": 4}, "frames_in_flight=4 applies in pipeline mode only"),
           ("replicas", {"frames_in_flight": 2}, "frames_in_flight=2 applies in pipeline mode only")]


@pytest.mark.parametrize(("mode", "given", "said"), IGNORED)
def test_settings_refuse_what_their_mode_ignores(mode, given, said):
    with pytest.raises(ValueError, match=said) as err:
        Settings(mode=mode, **given)
    assert f"this is {mode} mode" in str(err.value) and isinstance(err.value, ConfigError)  # exit 6 on the CLI
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("mode", "given", "said"), IGNORED[:3])
def test_the_evaluator_and_the_environments_refuse_them_too(mode, given, said):
    with pytest.raises(ValueError, match=said):
        Evaluator("seed-block", "orin-agx", mode=mode, store=None, **given)
    with pytest.raises(ValueError, match=said):
        PlacementEnv(model="seed-block", mode=mode, **given)


def test_the_setting_in_its_own_mode_and_the_defaults_everywhere_are_taken():
    assert Settings(mode="engine", dla_core=1).dla_core == 1
    assert Settings(mode="pipeline", frames_in_flight=4).frames_in_flight == 4
    for mode in ("engine", "pipeline", "replicas"):
        s = Settings(mode=mode)
        assert s.dla_core is None and s.frames_in_flight == 1
    assert set(MODE_ONLY) == {"dla_core", "frames_in_flight"}  # each is checked above


def test_stored_settings_of_an_older_study_leave_out_what_their_mode_ignored():
    """A study or plan stored before the refusal may hold such a setting: it changed nothing measured, and
    reading it back must not fail (calibration, simulating a plan)."""
    from placetune.settings import stored_settings

    old = {**Settings(mode="pipeline", frames_in_flight=4).to_dict(), "dla_core": 1, "unknown_later_field": 2}
    s = stored_settings(old)
    assert s.mode == "pipeline" and s.frames_in_flight == 4 and s.dla_core is None
    assert stored_settings({**Settings(mode="engine", dla_core=1).to_dict(), "frames_in_flight": 3}) == \
        Settings(mode="engine", dla_core=1)
