"""An engineer who launches ``placetune tune --model my.onnx`` on the Jetson for the night got a study of the
simulated Jetson (the default backend); nothing said so until the summary's SIMULATED the next morning. On a
board whose device tree names a Jetson module, a simulated run says so after ``what will run:``, with the
backends that measure on the board; off a Jetson it says nothing more."""

from __future__ import annotations

import io

from placetune.backends.tensorrt import env as trt_env
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune import Tuner
from tests.test_board_module import _tree

AGX_ORIN = ("Jetson AGX Orin", ["nvidia,p3737-0000+p3701-0005", "nvidia,p3701-0005", "nvidia,tegra234"])


def _head(tmp_path, name: str) -> list[str]:
    cfg = TuneConfig.embedded_default().with_overrides(model="seed-block", agent="random", trials=3,
                                                       storage=f"sqlite:///{tmp_path / (name + '.db')}",
                                                       export=str(tmp_path / f"{name}.plan.json"))
    out = io.StringIO()
    Tuner(cfg, out=out, tty=False).run()
    return out.getvalue().splitlines()[:8]


def test_a_simulated_tune_on_a_jetson_says_which_backends_measure_the_board(tmp_path, monkeypatch):
    monkeypatch.setattr(trt_env, "DEVICE_TREE", _tree(tmp_path / "dt", *AGX_ORIN))
    head = _head(tmp_path, "board")
    notes = [x for x in head if x.startswith("note: this board is a Jetson AGX Orin")]
    assert len(notes) == 1, head
    assert "SIMULATED Jetson" in notes[0] and "--backend tensorrt or --backend trtexec" in notes[0]
    assert head.index(notes[0]) > next(i for i, x in enumerate(head) if x.startswith("study "))


def test_off_a_jetson_the_run_says_nothing_of_a_board(tmp_path, monkeypatch):
    monkeypatch.setattr(trt_env, "DEVICE_TREE", str(tmp_path / "no-device-tree"))
    assert not [x for x in _head(tmp_path, "laptop") if "this board" in x]
