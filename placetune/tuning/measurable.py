"""Which objectives each backend can measure in each mode: a study that cannot be measured is refused at start.

An objective (or a constraint) a backend never reports would run the whole budget and export
nothing: every measurement would lack the figure. So ``placetune tune`` checks the combination
before the database is touched and before the first build, and refuses it with one line naming
the objective, the backend and the mode (:class:`~placetune.errors.ConfigError`, exit 6).

Each backend declares what it reports (:meth:`placetune.backends.base.BackendBase.why_unmeasurable`,
asked through the registry without creating the backend):

* ``simulate``: every metric in every mode (the simulator's schedule has GPU busy time and a
  power model).
* ``trtexec``: engine and replicas modes; energy from the board's power rails sampled during
  trtexec's timed iterations (backend option ``power``, on by default); no pipeline mode (trtexec
  runs whole networks); no GPU busy time per frame.
* ``tensorrt``: every mode; energy in engine mode with its backend option ``power = true`` (the
  rails sampled from the parent during the worker's timed loop, which then lasts seconds); GPU
  busy time in pipeline mode (its streams' events).

A concurrent study is measured as a pipeline of its networks, so it is asked as ``pipeline``.
Whether the rails of *this* board can be read is known only on the board: the first build of
a real run checks that the objective's figures exist (:mod:`placetune.tuning.first_build`).

Example:
    >>> why_unmeasurable("energy", "tensorrt", "engine") is not None
    True
    >>> why_unmeasurable("latency", "trtexec", "replicas") is None
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from placetune.backends.registry import why_unmeasurable as declared
from placetune.errors import ConfigError
from placetune.safetext import shown
from placetune.tuning.constraints import parse_constraints
from placetune.tuning.objectives import get_objective

__all__ = ["MODES", "METRICS", "why_unmeasurable", "check_measurable"]

#: The modes a study runs in (``concurrent`` is a pipeline of several networks).
MODES = ("engine", "pipeline", "replicas", "concurrent")
#: The metrics an objective or a constraint names.
METRICS = ("latency", "throughput", "energy", "gpu_time")


def why_unmeasurable(metric: str, backend: str, mode: str, options: Mapping[str, Any] | None = None) -> str | None:
    """Why ``backend`` in ``mode`` never reports ``metric`` (None: it does), as the backend declares it.
    ``options``: the backend's options (``power = false`` turns the trtexec backend's power sampling off)."""
    return declared(backend, metric, "pipeline" if mode == "concurrent" else mode, options or {})


def check_measurable(objective: str, constraints: Iterable[Any], backend: str, mode: str,
                     options: Mapping[str, Any] | None = None) -> None:
    """Refuse a study whose objective or constraints ``backend`` cannot measure in ``mode``.

    Args:
        objective: ``latency``, ``energy``, ``latency+energy``...
        constraints: :class:`~placetune.tuning.constraints.Constraint` objects or their texts.
        backend: the backend's name.
        mode: ``engine``, ``pipeline``, ``replicas`` or ``concurrent``.
        options: the backend's options.

    Raises:
        ConfigError: one line naming the objective (or constraint), the backend and the mode.
        UnknownNameError: ``objective`` is none of the objectives (the message names them).

    Example:
        >>> check_measurable("latency+energy", [], "tensorrt", "engine")
        Traceback (most recent call last):
        ...
        placetune.errors.ConfigError: objective latency+energy cannot be measured by the tensorrt backend in engine mode: the tensorrt backend samples the power rails only with its backend option power = true (off by default: the timed loop then runs power_duration_s, 3 s): set it under [backend_options], or use --backend trtexec
    """
    if mode not in MODES:  # before asking the backend what it measures in a mode that does not exist
        raise ConfigError(f"unknown mode '{shown(mode, 60)}'; modes are {', '.join(MODES)}")
    # an unknown objective is an unknown name (exit 4, naming the objectives), not one this backend cannot measure
    metrics = get_objective(objective).measured_from
    for metric in metrics:
        why = why_unmeasurable(metric, backend, mode, options)
        if why:
            raise ConfigError(f"objective {objective} cannot be measured by the {backend} backend in {mode} mode: "
                              f"{why}")
    for c in parse_constraints(list(constraints or [])):
        why = why_unmeasurable(c.metric, backend, mode, options)
        if why:
            raise ConfigError(f"constraint {c.text} (objective {objective}) cannot be measured by the {backend} "
                              f"backend in {mode} mode: {why}")
