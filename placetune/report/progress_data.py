"""What ``progress.png`` draws: each agent's best-so-far objective value against the study's trial.

The x value is the trial of the study as ``placetune tune`` counts it in its lines (``trial=5/30``,
"converged at trial 5", "resuming: 14 of 60 trials already done"): the position, from 1, of the
evaluation request among all of the study's requests, baselines and every agent's included, cache hits
included, earlier runs of a resumed study included. A re-measurement is one request, so one trial here, as a
resumed run counts it (the run that made it counts each of its builds as a trial in its live lines).

Example:
    ``lines = progress_lines(Store("sqlite:///placetune.db"), "my-study", "throughput")``;
    ``lines[0].trials`` -> ``(1, 2, 3)`` (the baselines), ``lines[1].trials`` -> ``(4, 5, ...)``
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from placetune.store.store import Store

__all__ = ["ProgressLine", "progress_lines"]


@dataclass(frozen=True)
class ProgressLine:
    """One agent's evaluations of a study, in the order asked.

    Attributes:
        agent: the agent that asked (``(no agent)`` where none was given).
        trials: the study's trial (from 1, as the terminal counts) of each of its evaluations.
        values: the objective value of each (None: failed, or no finite value).
        best: the agent's best value so far at each of them (None until its first value).
    """

    agent: str
    trials: tuple[int, ...]
    values: tuple[float | None, ...]
    best: tuple[float | None, ...]

    @property
    def failed(self) -> int:
        """Evaluations without a value."""
        return sum(1 for v in self.values if v is None)

    def span(self) -> str:
        """``trial 4`` or ``trials 4-14``: where the agent's evaluations lie in the study."""
        first, last = self.trials[0], self.trials[-1]
        return f"trial {first}" if first == last else f"trials {first}-{last}"


def progress_lines(store: "Store", study_name: str, objective: str, direction: str = "minimize") -> list[ProgressLine]:
    """Each agent's evaluations of ``study_name`` against the study's trials, agents in the order they first asked.

    Args:
        objective: the objective whose value is read (``throughput``, ``latency``...).
        direction: ``minimize`` or ``maximize`` (which value is the better for ``best``).

    Raises:
        UnknownNameError: no such study.
    """
    requests = store.requests(study_name)
    by_id = {r.id: r for r in store.measurements(study_name)}
    better = min if direction == "minimize" else max
    trials: dict[str, list[int]] = {}
    values: dict[str, list[float | None]] = {}
    for trial, req in enumerate(requests, start=1):
        rec = by_id.get(req.measurement_id)
        v = rec.measurement.objective(objective) if rec is not None else None
        agent = req.agent or "(no agent)"
        trials.setdefault(agent, []).append(trial)
        values.setdefault(agent, []).append(v if v is not None and math.isfinite(v) else None)
    lines = []
    for agent, vs in values.items():
        best: list[float | None] = []
        current: float | None = None
        for v in vs:
            if v is not None:
                current = v if current is None else better(current, v)
            best.append(current)
        lines.append(ProgressLine(agent, tuple(trials[agent]), tuple(vs), tuple(best)))
    return lines
