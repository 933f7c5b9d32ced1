"""A Jetson board for an in-process ``placetune tune --backend tensorrt``: the TensorRT doubles for its
worker, ``nvpmodel`` answering a power mode, and a fake sysfs tree for the clock and load watches.

Used by the tests of what a real run watches around its measurements (tests/test_clock_watch.py,
tests/test_gpu_contention.py); never imported by the worker.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.fakes import fake_env

__all__ = ["on_a_board", "tune_on_the_board"]

GN = Path(__file__).resolve().parents[1] / "data" / "seed_model_gn.onnx.gz"


def on_a_board(monkeypatch, tmp_path: Path, sysfs: Path, version: str = "10.3.0", power_mode: str = "MAXN") -> None:
    """This process as a Jetson in ``power_mode`` whose sysfs is ``sysfs`` and whose TensorRT is the doubles
    of ``version``: the doubles (and the repository) on the worker's PYTHONPATH, ``nvpmodel`` first on PATH,
    the clock and load watches reading ``sysfs``, ``tmp_path`` the working folder."""
    from placetune.backends import clocks
    from tests.test_tune_tensorrt import _board

    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(sysfs))
    env = fake_env(version)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).resolve().parents[2]),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PLACETUNE_FAKE_TRT_VERSION", version)
    monkeypatch.setenv("PATH", str(_board(tmp_path, power_mode)) + os.pathsep + os.environ["PATH"])
    monkeypatch.chdir(tmp_path)


def tune_on_the_board(tmp_path: Path, *extra: str) -> int:
    """``placetune tune --backend tensorrt`` of the GroupNorm seed model, FP16 engine mode, 12 random trials,
    study ``night`` in ``tmp_path/pt.db``, plus ``extra``: the exit status."""
    from placetune.cli.main import main

    return main(["tune", "--backend", "tensorrt", "--model", str(GN), "--mode", "engine", "--precision", "fp16",
                 "--agent", "random", "--trials", "12", "--storage", f"sqlite:///{tmp_path / 'pt.db'}",
                 "--study", "night", *extra])
