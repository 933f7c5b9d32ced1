"""The verdict of a tuning run: one sentence that says what was found and what it rests on.

A search that ends on a baseline has not shown that the baseline is the best plan for the
device: it has shown that *this agent, in this many trials*, found nothing better. The verdict
says exactly that ("no plan better than all-GPU found by random in 40 trials"), and when the run
did find a better plan, by how much and against which baseline, with the trials it took and
whether the figures are simulated. It never claims something about the device ("all-GPU wins").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from placetune.wording import figure

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.tuning.objectives import Objective

__all__ = ["verdict"]


def verdict(objective: "Objective", best: "Measurement | None", baselines: dict[str, "Measurement | None"],
            agent: str, trials: int, *, simulated: bool = False) -> str:
    """One sentence: what the run found, against the best measured baseline, and on what it rests.

    Args:
        objective: the study's objective.
        best: the study's best measurement (None: nothing succeeded).
        baselines: label -> measurement of the study's baselines (None: not measured).
        agent: the agent that searched.
        trials: the study's trials so far.
        simulated: the figures come from the simulated Jetson (said in the sentence).

    Example:
        >>> from placetune.tuning.objectives import get_objective
        >>> from placetune.measurement import Measurement
        >>> m = Measurement(status="ok", latency_samples_ms=[2.0], throughput_fps=500.0)
        >>> verdict(get_objective("throughput"), m, {"all-GPU": m}, "random", 40)
        'verdict: no plan better than all-GPU found by random in 40 trials'
    """
    sim = " (simulated figures)" if simulated else ""
    rests = f"by {agent} in {trials} trial{'s' if trials != 1 else ''}"
    measured = {k: m for k, m in baselines.items() if m is not None and m.ok and objective.value(m) is not None}
    if best is None or objective.value(best) is None:
        return f"verdict: no successful measurement {rests}{sim}"
    if not measured:
        return (f"verdict: best {objective.names[0]} {figure(objective.value(best))} found {rests}, "
                f"with no baseline measured to compare it with{sim}")
    label, base = min(measured.items(), key=lambda kv: objective.loss(kv[1]))
    same = best.realized is not None and best.realized == base.realized
    if same or objective.loss(best) >= objective.loss(base):
        return f"verdict: no plan better than {label} found {rests}{sim}"
    gain = objective.gain_over(best, base)
    how = "" if gain is None else f" {gain:.2f}x better in {objective.names[0]} than"
    return f"verdict: a plan{how or ' better than'} {label} (the best baseline) found {rests}{sim}"
