"""What a run of the Python API (``agent.run(evaluator, budget)``) leaves with its study when it ends,
as ``placetune tune``'s end does: the run's final pick and its verdict.

Where an Optuna study is attached to the evaluator (:meth:`OptunaStudy.attach
<placetune.tuning.optuna_study.OptunaStudy.attach>`, the Python API's way to keep the study in Optuna):

* ``placetune_best``: the agent's own final pick (the guided agent's re-ranked top candidates:
  :attr:`SearchResult.final_rule <search.result.SearchResult.final_rule>`), recorded by
  :func:`~placetune.tuning.final_pick.record_pick` as ``tune`` records it; nothing when the agent chose
  no plan by a rule of its own (the study's best is then its best stored value, as after ``tune``);
* ``verdict``: the sentence of :func:`placetune.tuning.verdict.verdict` on the study's best
  (:func:`~placetune.tuning.final_pick.study_best`) against the study's baselines it holds, with the
  study's trials, the same sentence ``tune`` prints for that study and agent.

Without an attached Optuna study nothing is written (no Optuna tables appear in the store's database).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from placetune.tuning.baselines import study_baselines
from placetune.tuning.convergence import store_convergence
from placetune.tuning.final_pick import record_pick, run_pick, study_best
from placetune.tuning.optuna_study import attached
from placetune.tuning.verdict import verdict

if TYPE_CHECKING:
    from search.result import SearchResult

    from placetune.tuning.evaluator import Evaluator

__all__ = ["conclude"]


def conclude(ev: "Evaluator", result: "SearchResult", agent: str) -> str | None:
    """Record the run's final pick and verdict with the study's attached Optuna study.

    Returns:
        The verdict line written (None: no Optuna study is attached; nothing written).
    """
    if attached(ev) is None:
        return None
    doc = run_pick(ev, result.final_rule, result.best_measurement)  # (flushes a batch first)
    if doc is not None:
        record_pick(ev.store, ev.study_name, doc)
    pick = study_best(ev.store, ev.study_name, ev.objective)
    best = pick.record.measurement if pick is not None else None
    bases = {b.label: ev.peek(b.placement) for b in study_baselines(ev) if b.measured_by_study}
    text = verdict(ev.objective, best, bases, agent, ev.store.study(ev.study_name).n_requests,
                   simulated=ev.backend.simulated)
    store_convergence(ev, None, verdict=text)
    return text
