"""Search agents for placetune: guided (the default), random, local, optuna, reinforce and exact.

Every agent is built with its options and run against an
:class:`~placetune.tuning.evaluator.Evaluator`::

    agent = get_agent("optuna", seed=0)
    result = agent.run(evaluator, Budget(evaluations=100))
    result.best_placement, result.best_value, result.history

Agents use the public placetune API only (``Evaluator``, ``Space``, ``Placement``,
``Measurement``), so they are also the reference for writing your own (see
:class:`search.base.Agent` and :class:`search.base.SearchRun`). Agents are looked up by
name with :func:`get_agent`; modules are imported on first use, so ``import search`` does
not import Optuna or Gymnasium.

Example:
    >>> from placetune.evaluator import Evaluator
    >>> from search import Budget, get_agent
    >>> result = get_agent("random", seed=0).run(Evaluator("seed-block", "orin-agx"), Budget(evaluations=8))
    >>> result.evaluations <= 8
    True
"""

from __future__ import annotations

import importlib
from typing import Any

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
    "agent_names",
    "get_agent",
    "register_agent",
    "baseline_assignments",
    "project",
]

#: The agent ``placetune tune`` uses when none is named (see benchmarks/bench_search.py).
DEFAULT_AGENT = "guided"

#: name -> "module:Class" (imported lazily) or an Agent subclass.
_REGISTRY: dict[str, Any] = {
    "guided": "search.guided:GuidedAgent",
    "random": "search.random_search:RandomAgent",
    "local": "search.local:LocalAgent",
    "optuna": "search.optuna_search:OptunaAgent",
    "reinforce": "search.reinforce:ReinforceAgent",
    "exact": "search.exact:ExactAgent",
}


def agent_names() -> list[str]:
    """Names accepted by :func:`get_agent`, sorted.

    Example:
        >>> agent_names()
        ['exact', 'guided', 'local', 'optuna', 'random', 'reinforce']
    """
    return sorted(_REGISTRY)


def register_agent(name: str, factory: type[Agent] | str) -> None:
    """Make an agent class available to :func:`get_agent` (and so to the CLI).

    Args:
        name: the registry name.
        factory: an :class:`Agent` subclass or a ``"module:Class"`` import path.
    """
    _REGISTRY[str(name)] = factory


def _resolve(name: str) -> type[Agent]:
    try:
        entry = _REGISTRY[name]
    except KeyError:
        raise UnknownNameError(f"unknown agent {name!r}; agents are {', '.join(agent_names())}") from None
    if isinstance(entry, str):
        module, _, cls = entry.partition(":")
        entry = getattr(importlib.import_module(module), cls)
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
    try:
        return cls(**options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"agent {name!r}: {exc}") from None
