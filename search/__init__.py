"""Search agents for placetune: guided (the default), random, local, optuna, reinforce and exact.

Every agent is built with its options and run against an
:class:`~placetune.tuning.evaluator.Evaluator`::

    agent = get_agent("optuna", seed=0)
    result = agent.run(evaluator, Budget(evaluations=100))
    result.best_placement, result.best_value, result.history

or driven one step at a time by ask/tell (:mod:`search.asktell`; ``agent.run`` is this loop)::

    steps = agent.ask_tell(evaluator, Budget(evaluations=100))
    while proposals := steps.ask():
        steps.tell([measure(evaluator, p) for p in proposals])
    result = steps.result()

Agents use the public placetune API only (``Evaluator``, ``Space``, ``Placement``,
``Measurement``), so they are also the reference for writing your own (see
:class:`search.base.Agent` and :class:`search.base.SearchRun`). Agents are looked up by
name with :func:`get_agent`; modules are imported on first use, so ``import search`` does
not import Optuna or Gymnasium.

Example:
    >>> from placetune import Evaluator
    >>> from search import Budget, get_agent
    >>> result = get_agent("random", seed=0).run(Evaluator("seed-block", "orin-agx"), Budget(evaluations=8))
    >>> result.evaluations <= 8
    True
"""

from __future__ import annotations

import importlib
import inspect
import math
import sys
import logging
from typing import Any
from importlib.metadata import entry_points

from placetune import ConfigError, UnknownNameError

from .asktell import AskTell, LoopAskTell, Proposal, drive, measure
from .base import (
    Agent,
    Budget,
    BudgetExhausted,
    HistoryEntry,
    SearchResult,
    SearchRun,
    baseline_assignments,
    project,
)
from .steps import StepAgent, Steps

__all__ = [
    "Agent",
    "AskTell",
    "LoopAskTell",
    "Proposal",
    "drive",
    "measure",
    "Budget",
    "BudgetExhausted",
    "HistoryEntry",
    "SearchResult",
    "SearchRun",
    "DEFAULT_AGENT",
    "agent_summary",
    "ENTRY_POINT_GROUP",
    "StepAgent",
    "Steps",
    "agent_names",
    "get_agent",
    "register_agent",
    "baseline_assignments",
    "project",
]

log = logging.getLogger(__name__)

#: The agent ``placetune tune`` uses when none is named (see benchmarks/bench_search.py).
DEFAULT_AGENT = "guided"

#: The entry-point group a package declares its agents in (``[project.entry-points."placetune.agents"]``,
#: ``name = "module:Class"``): ``placetune tune --agent name`` finds them without an import.
ENTRY_POINT_GROUP = "placetune.agents"

#: name -> "module:Class" (imported lazily) or an Agent subclass; filled by :func:`register_agent`.
_REGISTRY: dict[str, Any] = {}
_entry_points_read = False


def register_agent(name: str, factory: type[Agent] | str, *, replace: bool = False) -> None:
    """Make an agent available to :func:`get_agent` (and so to ``placetune tune --agent`` and the fleet).

    The built-in agents are registered here; a package registers its own in the
    :data:`ENTRY_POINT_GROUP` entry-point group (read on the first look-up), a script by calling this.

    Args:
        name: the registry name (letters, digits, ``-`` and ``_``).
        factory: an :class:`Agent` subclass, or a ``"module:Class"`` path imported on first use.
        replace: replace an agent of that name (else that is an error).

    Raises:
        ValueError: a bad name or factory, or a name taken (without ``replace``).

    Example:
        >>> from search.random_search import RandomAgent
        >>> class Mine(RandomAgent):
        ...     name = "mine"
        >>> register_agent("mine", Mine)
        >>> get_agent("mine", seed=0).name
        'mine'
    """
    name = str(name)
    if not name or not all(c.isalnum() or c in "-_" for c in name):
        raise ValueError(f"agent name must be letters, digits, - and _, not {name!r}")
    if isinstance(factory, str):
        if not all(factory.partition(":")):
            raise ValueError(f"agent {name!r}: factory must be 'module:Class', not {factory!r}")
    elif not (isinstance(factory, type) and issubclass(factory, Agent)):
        raise ValueError(f"agent {name!r}: factory must be an Agent subclass or 'module:Class', not {factory!r}")
    if name in _REGISTRY and not replace and _REGISTRY[name] != factory:
        raise ValueError(f"agent {name!r} is already registered ({_REGISTRY[name]!r}); pass replace=True")
    _REGISTRY[name] = factory


for _name, _path in (("guided", "search.guided:GuidedAgent"), ("random", "search.random_search:RandomAgent"),
                     ("local", "search.local:LocalAgent"), ("optuna", "search.optuna_search:OptunaAgent"),
                     ("reinforce", "search.reinforce:ReinforceAgent"), ("exact", "search.exact:ExactAgent")):
    register_agent(_name, _path)


def _read_entry_points() -> None:
    """Register the agents packages declare (once; a built-in name is not replaced)."""
    global _entry_points_read
    if _entry_points_read:
        return
    _entry_points_read = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name not in _REGISTRY:
            try:
                register_agent(ep.name, ep.value)
            except ValueError as exc:
                log.warning("entry point %s of %s ignored: %s", ep.name, ENTRY_POINT_GROUP, exc)


def agent_names() -> list[str]:
    """Names accepted by :func:`get_agent`, sorted (the built-in agents and those registered).

    Example:
        >>> [n for n in agent_names() if n in ("exact", "guided", "local", "optuna", "random", "reinforce")]
        ['exact', 'guided', 'local', 'optuna', 'random', 'reinforce']
    """
    _read_entry_points()
    return sorted(_REGISTRY)


def agent_summary(name: str) -> str:
    """What a registered agent does in one line: the first line of its class's docstring, else of its
    module's (or, for an agent that cannot be imported, why), for the help that lists the agents.

    Example:
        >>> agent_summary("random")
        "Sample every unit's device uniformly among its allowed devices, after the baselines."
    """
    try:
        cls = _resolve(name)
    except (ConfigError, UnknownNameError) as exc:
        return str(exc)
    doc = (cls.__doc__ or getattr(sys.modules.get(cls.__module__), "__doc__", None) or "").strip()
    return doc.splitlines()[0].strip() if doc else f"{cls.__module__}.{cls.__qualname__} (no docstring)"


def _resolve(name: str) -> type[Agent]:
    _read_entry_points()
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError(f"unknown agent {name!r}; agents are {', '.join(agent_names())}") from None
    if isinstance(entry, str):
        module, _, cls = entry.partition(":")
        try:
            entry = getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(f"agent {name!r}: cannot import {module}:{cls} ({exc})") from None
        if not (isinstance(entry, type) and issubclass(entry, Agent)):
            raise ConfigError(f"agent {name!r}: {module}:{cls} is not an Agent subclass")
    return entry


def get_agent(name: str = DEFAULT_AGENT, **options: Any) -> Agent:
    """Create an agent by name.

    Args:
        name: one of :func:`agent_names`.
        **options: the agent's options (every agent takes ``seed`` and ``granularity``).

    Raises:
        UnknownNameError: not an agent name.
        ConfigError: an option the agent does not have, or a bad option value.

    Example:
        >>> get_agent("random", seed=1).seed
        1
    """
    cls = _resolve(name)
    params = inspect.signature(cls.__init__).parameters.values()
    if not any(p.kind is p.VAR_KEYWORD for p in params):  # (a TypeError names the class, not what it takes)
        known = sorted(p.name for p in params if p.kind is p.KEYWORD_ONLY or (
            p.kind is p.POSITIONAL_OR_KEYWORD and p.name != "self"))
        unknown = sorted(str(k) for k in options if k not in known)
        if unknown:
            raise ConfigError(f"agent {name!r} has no option(s) {', '.join(map(repr, unknown))}; its options: "
                              f"{', '.join(known)}")
    for key, value in options.items():  # a NaN or infinite rate, temperature or weight is no setting of any agent
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"agent {name!r}: {key} must be a finite number, got {value}")
    _check_kinds(name, params, options)
    try:
        return cls(**options)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"agent {name!r}: {exc}") from None


#: what a study file's [agent_options] can hold (TOML); any other value (a sampler object) is the caller's own
_TOML_KINDS = (bool, int, float, str, list, dict)


def _check_kinds(name: str, params: Any, options: dict[str, Any]) -> None:
    """An option whose default is a bool, an integer, a number or text, given a TOML value of another kind, is
    refused naming it: ``int("x")`` and ``float({})`` named no option, ``float(10**400)`` was an OverflowError
    traceback, ``2.7`` was cut to 2 and ``"no"`` read as true. An option whose default is None is checked by its
    declared kind (``int | None``); one without a default is the agent's to check.

    Raises:
        ConfigError: naming the agent, the option and what it takes.
    """
    for p in params:
        if p.name not in options or p.default is p.empty:
            continue
        value, default = options[p.name], p.default
        if not isinstance(value, _TOML_KINDS):
            continue
        if default is None:  # "int | None", "str | None": the declared kind (annotations are text here)
            declared = str(p.annotation).replace(" ", "")
            default = {"int|None": 0, "str|None": "", "float|None": 0.0}.get(declared)
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if isinstance(default, bool):
            ok, want = isinstance(value, bool), "true or false"
        elif isinstance(default, int):
            ok, want = number and isinstance(value, int), "an integer"
        elif isinstance(default, float):
            # (NaN compares false; math.isfinite(10**400) raised OverflowError)
            ok, want = isinstance(value, (int, float)) and number and abs(value) <= 1e300, "a finite number"
        elif isinstance(default, str):
            ok, want = isinstance(value, str), "text"
        else:
            continue
        if not ok:
            raise ConfigError(f"agent {name!r}: {p.name} must be {want}, got {str(value)[:40]!r}")
