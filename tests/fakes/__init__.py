"""Test doubles of ``tensorrt`` and ``pycuda`` (see ``tensorrt/__init__.py`` for what they do).

Put this directory on the worker's PYTHONPATH (``fake_env()``) so that the worker
subprocess imports the doubles as ``tensorrt`` and ``pycuda``. Never put it on the test
process's own ``sys.path``: placetune must not import TensorRT in the parent.
"""

from __future__ import annotations

from pathlib import Path

FAKES_DIR = Path(__file__).resolve().parent
#: The TensorRT versions the doubles emulate (JetPack 5.1, 6.0, 6.1/6.2, 7.2.2+); each is held to
#: the API table of its release (tests/trt_api: 8.5, 8.6, 10.3, newest 11.x).
VERSIONS = ("8.5.2", "8.6.2", "10.3.0", "11.4.1")


def fake_env(version: str = "8.5.2", **extra: str) -> dict[str, str]:
    """Environment for a worker that imports the doubles of TensorRT ``version``.

    ``extra`` keys are fake variables without their prefix, e.g. ``SEGFAULT_ON="/conv1/Conv"``
    becomes ``PLACETUNE_FAKE_TRT_SEGFAULT_ON``.
    """
    env = {"PYTHONPATH": str(FAKES_DIR), "PLACETUNE_FAKE_TRT_VERSION": version}
    env.update({f"PLACETUNE_FAKE_TRT_{k}": str(v) for k, v in extra.items()})
    return env
