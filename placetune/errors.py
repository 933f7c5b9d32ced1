"""One error tree for placetune.

Every message says what was wrong and what to do. The CLI turns any
:class:`PlacetuneError` into a one-line message and a non-zero exit code.
"""

from __future__ import annotations

from typing import Any

from placetune.safetext import mask_secrets

__all__ = [
    "PlacetuneError",
    "GpuContended",
    "ModelError",
    "ShapeError",
    "UnknownNameError",
    "PlacementError",
    "ConfigError",
    "StoreError",
    "BackendError",
    "StoppedAfterMeasurement",
    "StopRequested",
    "Interrupted",
]


class PlacetuneError(Exception):
    """Base class of every error placetune raises on purpose.

    Its message never holds a database password: every text argument passes
    :func:`~placetune.safetext.mask_secrets` (a value echoed in a message may be a URL, even cut short), so a
    Python caller's traceback shows no more than the command line does.

    Attributes:
        exit_code: the process exit code the CLI uses for this error class.
    """

    exit_code: int = 2

    def __init__(self, *args: object) -> None:
        super().__init__(*(mask_secrets(a) if isinstance(a, str) else a for a in args))


class ModelError(PlacetuneError):
    """The ONNX model cannot be read or understood (corrupt, truncated, unknown op shapes)."""

    exit_code = 3


class ShapeError(ModelError):
    """A shape is dynamic or inconsistent; pass ``--shape name=1x3x224x224``."""


class UnknownNameError(PlacetuneError):
    """A zoo model, platform, layer, agent or objective name does not exist."""

    exit_code = 4


class PlacementError(PlacetuneError):
    """A placement names unknown layers or devices, or cannot be realised."""

    exit_code = 5


class ConfigError(PlacetuneError):
    """Invalid options or study settings (including a settings mismatch on resume)."""

    exit_code = 6


class StoreError(PlacetuneError):
    """The database is unreachable, locked, read-only or of a newer schema."""

    exit_code = 7


class BackendError(PlacetuneError):
    """A measurement backend is unavailable or failed in a way that is not a measurement."""

    exit_code = 8


class StoppedAfterMeasurement(BackendError):
    """A check of a measurement just stored stops the run (exit status 8): raised by an evaluator
    callback (memory failures in a row, :class:`~placetune.tuning.oom_stop.OutOfMemoryStop`; a first build
    that shows the stack cannot be trusted, :class:`~placetune.tuning.first_build.FirstBuildCheck`).

    The measurement is stored and counted as one trial; it is carried here so that whoever asked
    for it (an Optuna trial, a fleet's trial of the study's Optuna study) is told it before the run
    ends: a finished trial that every other worker counts and reads, not a trial left failed.

    Attributes:
        placement: the placement asked for.
        measurement: its measurement, as the evaluator returned it (stored).
    """

    def __init__(self, message: str, placement: Any, measurement: Any) -> None:
        super().__init__(message)
        self.placement = placement
        self.measurement = measurement


class StopRequested(Exception):
    """Raised by :meth:`Evaluator.evaluate` after :meth:`Evaluator.request_stop` (e.g. Ctrl-C).

    Not a :class:`PlacetuneError`: it is a controlled stop, not a failure. The evaluation
    in flight when the stop was requested has finished and is stored.

    Attributes:
        notes: what the stopped agent had to say of its run so far (the guided agent's ``drift:``
            line), for the interrupted run's summary and exported plan.
    """

    def __init__(self, *args: object) -> None:
        super().__init__(*args)
        self.notes: list[str] = []


class GpuContended(StopRequested):
    """Another process kept the GPU busy between a real backend's jobs longer than the run waits for it
    (:mod:`placetune.backends.busy`): the run stops as on a signal (what was measured is stored, the plan
    exported, the resume command printed), with exit status 8 rather than a signal's.

    Attributes:
        exit_code: 8, the backend's exit status.
    """

    exit_code = 8


class Interrupted(KeyboardInterrupt):
    """A signal that stops a run at once (Ctrl-C or SIGTERM before a study is open, or a second one).

    A :class:`KeyboardInterrupt`, so that code between it and the command unwinds as on Ctrl-C.

    Attributes:
        exit_code: the process exit code: 128 plus the signal's number (130 Ctrl-C, 143 SIGTERM).
    """

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.exit_code = 128 + int(signum)
