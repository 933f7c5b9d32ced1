"""The study's best plan: one definition for the run's summary, its plan file, ``placetune export``,
``placetune studies``, ``placetune report`` and the Optuna study.

Without anything more, a study's best is its best stored value (:func:`best_stored`: each plan's
median over its builds; under constraints the best feasible). An agent may end its run with a pick
of its own: the guided agent re-measures its top candidates at the end and ranks them on equal
numbers of builds, drift-corrected where it found a drift (:attr:`SearchResult.final_rule
<search.result.SearchResult.final_rule>`), and that pick can differ from the best stored median (a
cold early build counted in a plan's median, a drift the median does not correct).

So a run that ends with such a pick **records it** in the study's database, as the user attribute
``placetune_best`` of the study's Optuna study (:mod:`placetune.tuning.optuna_study`: same name,
same database; optuna-dashboard shows it): the chosen measurement's id and placement key, the rule
with its figures, the Optuna trial that first measured it, the store's own best when it differs,
and the study's number of evaluation requests when it was recorded. :func:`study_best` follows a
recorded pick while it still rests on all the study's evidence (no evaluation requested since, the
measurement still ok and the same plan) and says why it does not otherwise; everything that names
a study's best reads :func:`study_best`.

A plan is never exported from a measurement whose realised placement was not read (docs/trust.md:
the build log and the engine's layer information disagree or say nothing; a pipeline with unread
segments). When the study's best is such a measurement, :func:`exportable` names the plan exported
instead: the best measurement whose placement is known, by the same ranking (feasible first), with
lines saying loudly which better plan was passed over, why, by how much, and how to check it on the
board. The run's summary, its plan file and ``placetune export`` all read it.

Optuna's own ``study.best_trial`` cannot follow: it is the trial with the best single value, and
the first trial of a plan measured again keeps its first build's value (the re-measurement is a
new trial with the median). The recorded pick names its trial instead.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from placetune._lazy import lazy_import
from placetune.placement.placement import Placement
from placetune.tuning.constraints import best_record
from placetune.tuning.objectives import best_stored, get_objective
from placetune.wording import figure, versus
from placetune.tuning.optuna_study import storage_for

if TYPE_CHECKING:
    import sqlalchemy

    from placetune.measurement import Measurement

    from placetune.store.records import MeasurementRecord
    from placetune.store.store import Store
    from placetune.tuning.evaluator import Evaluator
    from placetune.tuning.objectives import Objective
else:
    sqlalchemy = lazy_import("sqlalchemy")

__all__ = ["KEY", "NOT_EXPORTABLE", "STORE_RULE", "BestPick", "Exportable", "can_export", "export_mark", "exportable",
           "measure_options", "optuna_trial_number", "record_pick", "recorded_pick", "run_pick", "study_best"]

log = logging.getLogger(__name__)

#: the Optuna study user attribute that holds a run's recorded pick
KEY = "placetune_best"
#: the rule of a study without a recorded pick
STORE_RULE = "the best stored value (each plan's median over its builds)"
#: what every place that names a study's best says of one whose plan cannot be exported (:func:`can_export`)
NOT_EXPORTABLE = "placement not read: not exportable"
_FIELDS = {"measurement_id": int, "placement_key": str, "requests": int, "rule": str}


@dataclass
class BestPick:
    """A study's best plan and why.

    Attributes:
        record: the chosen measurement.
        rule: why it was chosen (a run's recorded rule, or :data:`STORE_RULE`).
        recorded: True when it is a run's recorded pick (else the store's ranking).
        store_best: the best stored value's measurement where it differs from ``record``.
        ignored: a recorded pick that is not followed, and why (None: none, or followed).
    """

    record: "MeasurementRecord"
    rule: str
    recorded: bool = False
    store_best: "MeasurementRecord | None" = None
    ignored: str | None = None

    def lines(self, objective: "Objective", trial: int | None = None) -> list[str]:
        """What the user is told: which plan, by which rule; the store's best where it differs."""
        out = []
        name = f"measurement {self.record.id}" + (f" (Optuna trial {trial})" if trial is not None else "")
        unit = f" {objective.units[0]}" if objective.units and objective.units[0] else ""
        if self.recorded:
            out.append(f"best plan: {name}, {figure(objective.value(self.record.measurement))}{unit} as stored, "
                       f"chosen by {self.rule}")
        if self.store_best is not None:
            out.append(f"the best stored value (median over builds) is measurement {self.store_best.id}, "
                       f"{figure(objective.value(self.store_best.measurement))}{unit}: the run's final ranking "
                       "put the pick ahead of it")
        if self.ignored:
            out.append(self.ignored)
        return out


@dataclass
class Exportable:
    """The plan a study exports: its best measurement when its placement is known, else the best
    one whose placement is (:func:`exportable`).

    Attributes:
        record: the measurement exported.
        passed_over: the better measurement not exported because its realised placement was not
            read (None: the study's best is exported).
    """

    record: "MeasurementRecord"
    passed_over: "MeasurementRecord | None" = None

    def lines(self, objective: "Objective", study: Any) -> list[str]:
        """What the summary and the plan's notes say of a passed-over plan (empty when none is), with the
        ``placetune measure`` command that times it as ``study`` (its
        :class:`~placetune.store.records.StudyRecord`) did (:func:`measure_options`)."""
        if self.passed_over is None:
            return []
        options = measure_options(study)
        n, m = self.passed_over, self.record
        unit = f" {objective.units[0]}" if objective.units and objective.units[0] else ""
        vn, vm = objective.value(n.measurement), objective.value(m.measurement)
        extra = n.measurement.extra or {}
        why = (n.measurement.unread_line() if n.measurement.segments_read is not None
               else str(extra.get("placement_unknown") or "its build could not say"))
        than = "-" if vn is None or vm is None else versus(objective.gain(vm, vn), objective.names[0])
        than = f"the same {objective.names[0]} as" if than == "same" else f"{than} than"
        infeasible = "" if objective.feasible(m.measurement) else "; it violates a constraint"
        return [f"NOT EXPORTED: the better plan, measurement {n.id} ({figure(vn)}{unit}), could not be exported: "
                f"where TensorRT put its layers was not read ({why}); a plan never claims a placement that was "
                "not read",
                f"exported instead: measurement {m.id} ({figure(vm)}{unit}), {than} measurement {n.id}, the best "
                f"measurement whose placement is known{infeasible}",
                f"to check measurement {n.id} on the board: save its requested placement (the plan file's "
                "measured.not_exported.requested) as FILE.json and run `placetune measure MODEL --backend "
                f"{study.backend} --mode {study.mode} --placement FILE.json {options}`, which says where TensorRT "
                "put its layers; or "
                "build it and read the build log's `Layers Running on DLA` section"]

    def doc(self, objective: "Objective") -> dict[str, Any] | None:
        """The passed-over plan as the plan file records it (``measured.not_exported``); None when none is."""
        if self.passed_over is None:
            return None
        n = self.passed_over.measurement
        return {"measurement_id": self.passed_over.id, "placement_key": self.passed_over.placement_key,
                objective.names[0]: objective.value(n),
                "placement_unknown": n.unread_line() if n.segments_read is not None
                else (n.extra or {}).get("placement_unknown"),
                "unknown_layers": n.unknown_layers,
                "requested": dict(self.passed_over.requested or n.requested or {})}


def can_export(m: "Measurement") -> bool:
    """Whether a plan can be exported from ``m``: its realised placement was read. The rule of
    :func:`exportable`, and of the trial lines' mark of a best that cannot be exported."""
    return m.placement_known


def export_mark(store: "Store", study_name: str, pick: BestPick | None, objective: "Objective | None" = None
                ) -> str | None:
    """:data:`NOT_EXPORTABLE` when the study's best ``pick`` is not the plan its export writes
    (:func:`exportable`: its placement was not read), else None: what ``placetune studies`` and
    ``placetune report`` say next to the best they name."""
    if pick is None:
        return None
    chosen = exportable(store, study_name, pick, objective)
    return None if chosen is not None and chosen.passed_over is None else NOT_EXPORTABLE


def measure_options(study: Any) -> str:
    """The ``placetune measure`` options, beyond ``--backend`` and ``--mode``, that time a placement as
    ``study`` (a :class:`~placetune.store.records.StudyRecord`) timed its own: platform, precision, frames
    in flight, replicas, power mode, TensorRT version, DLA core, GPU fallback. Without them measure
    times it with its own defaults (another platform, precision or power mode) and says nothing.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> measure_options(NS(platform="orin-nx-16gb", precision="int8", mode="pipeline",
        ...                    settings={"frames_in_flight": 4, "power_mode": "MAXN_SUPER", "trt_version": "10.3"}))
        '--platform orin-nx-16gb --precision int8 --frames-in-flight 4 --power-mode MAXN_SUPER --trt-version 10.3'
    """
    s = dict(study.settings or {})
    out = [f"--platform {study.platform}", f"--precision {study.precision}"]
    if study.mode == "pipeline":
        out.append(f"--frames-in-flight {int(s.get('frames_in_flight') or 1)}")
    reps = s.get("replicas")
    if study.mode == "replicas" and reps:
        out.append("--replicas " + (",".join(f"{d}:{b}" for d, b in reps.items()) if isinstance(reps, dict)
                                    else str(reps)))
    if s.get("power_mode") and str(s["power_mode"]).upper() != "MAXN":
        out.append(f"--power-mode {s['power_mode']}")
    if s.get("trt_version"):
        out.append(f"--trt-version {s['trt_version']}")
    if study.mode == "engine" and s.get("dla_core") is not None:
        out.append(f"--dla-core {int(s['dla_core'])}")
    if s.get("gpu_fallback") is False:
        out.append("--no-gpu-fallback")
    return " ".join(out)


def exportable(store: "Store", study_name: str, pick: BestPick, objective: "Objective | None" = None
               ) -> Exportable | None:
    """The plan to export for the study's best ``pick`` (:func:`study_best`): the pick when its realised
    placement is known; else the best ok measurement whose placement is known, ranked as
    :func:`best_stored` ranks (``objective``, or the study's own with its constraints: feasible
    first), with the pick as the plan passed over. None when no measurement's placement is known."""
    if can_export(pick.record.measurement):
        return Exportable(pick.record)
    if objective is None:
        st = store.study(study_name)
        objective = get_objective(st.objective, st.constraints)
    known = best_record((r for r in store.measurements(study_name, status="ok") if can_export(r.measurement)),
                        objective.loss)
    return None if known is None else Exportable(known, pick.record)


def run_pick(ev: "Evaluator", final_rule: str | None, best: Any) -> dict[str, Any] | None:
    """The pick a run ended with, to record (:func:`record_pick`): its agent's final best
    measurement ``best`` chosen by ``final_rule``; None when the agent chose no plan by a rule of
    its own, or its plan is not an ok stored measurement of the study."""
    if not final_rule or best is None:
        return None
    ev.flush()  # (a simulated run writes in batches: the pick's row id comes with its batch)
    mid = (best.extra or {}).get("_id")
    if not isinstance(mid, int) and best.placement_known and best.realized:
        mid = ev.store.measurement_id(*ev.study.scope, Placement(ev.model, dict(best.realized)).key)
    if not isinstance(mid, int):
        return None
    rec = next(iter(ev.store.measurements(ev.study_name, ids=[mid])), None)
    if rec is None or not rec.measurement.ok:
        return None
    return {"measurement_id": rec.id, "placement_key": rec.placement_key, "rule": final_rule,
            "value": ev.objective.value(rec.measurement), "requests": ev.store.study(ev.study_name).n_requests}


def record_pick(store: "Store", study_name: str, doc: dict[str, Any]) -> bool:
    """Store a run's pick as the Optuna study's ``placetune_best`` user attribute (with the Optuna
    trial and the store's best where it differs, for the dashboard); False when the study has no
    Optuna study to hold it (the run's own export still follows the pick)."""
    doc = dict(doc)
    doc["trial"] = optuna_trial_number(store, study_name, doc["measurement_id"])
    best = best_stored(store, study_name)
    if best is not None and best.id != doc["measurement_id"]:
        doc["store_best_measurement_id"] = best.id
    try:
        storage = storage_for(store)
        storage.set_study_user_attr(storage.get_study_id_from_name(study_name), KEY, doc)
    except KeyError:  # no Optuna study of that name
        log.info("study %r has no Optuna study: its run's pick is not recorded", study_name)
        return False
    return True


def recorded_pick(store: "Store", study_name: str) -> dict[str, Any] | None:
    """The pick recorded for a study (:func:`record_pick`), read without creating anything; None
    when none is (or it cannot be read: a warning)."""
    try:
        url = store.engine.url
        if url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:"):
            storage = storage_for(store)
            doc = storage.get_study_user_attrs(storage.get_study_id_from_name(study_name)).get(KEY)
        else:
            if not sqlalchemy.inspect(store.engine).has_table("study_user_attributes"):
                return None  # no Optuna tables: nothing recorded (and nothing created here)
            query = sqlalchemy.text("SELECT a.value_json FROM study_user_attributes a JOIN studies s "
                                    "ON s.study_id = a.study_id WHERE s.study_name = :name AND a.key = :key")
            with store.engine.connect() as conn:
                text = conn.execute(query, {"name": study_name, "key": KEY}).scalar()
            doc = None if text is None else json.loads(text)
    except KeyError:
        return None
    except (ValueError, RecursionError, sqlalchemy.exc.SQLAlchemyError) as exc:
        log.warning("the recorded best plan of study %r cannot be read (%s): its best stored value is used",
                    study_name, str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__)
        return None
    if doc is None:
        return None
    if not isinstance(doc, dict) or any(not isinstance(doc.get(k), t) or isinstance(doc.get(k), bool)
                                        for k, t in _FIELDS.items()):
        log.warning("the recorded best plan of study %r is not one placetune wrote (%s): its best stored value "
                    "is used", study_name, str(doc)[:80])
        return None
    return doc


def study_best(store: "Store", study_name: str, objective: "Objective | None" = None) -> BestPick | None:
    """The study's best plan (module docstring): a run's recorded pick while it rests on all the
    study's evaluations, else the best stored value (:func:`best_stored`, ``objective`` as there).
    None when nothing ok is stored."""
    best = best_stored(store, study_name, objective)
    if best is None:
        return None
    doc = recorded_pick(store, study_name)
    if doc is None:
        return BestPick(best, STORE_RULE)
    mid, n = doc["measurement_id"], doc["requests"]
    rec = next(iter(store.measurements(study_name, ids=[mid])), None)
    requests = store.study(study_name).n_requests
    why = None
    if rec is None or not rec.measurement.ok or rec.placement_key != doc["placement_key"]:
        why = "its measurement is no longer an ok measurement of that plan"
    elif requests != n:
        why = f"{requests - n} evaluations were requested since" if requests > n else \
            f"the study holds {requests} evaluations, not the {n} it was chosen from"
    if why is not None:
        return BestPick(best, STORE_RULE, ignored=f"the pick a run recorded (measurement {mid}) is not followed: "
                                                  f"{why}; the best stored value is")
    assert rec is not None
    return BestPick(rec, str(doc["rule"]), recorded=True, store_best=None if best.id == rec.id else best)


def optuna_trial_number(store: "Store", study_name: str, measurement_id: int) -> int | None:
    """The number of the first trial of the study's Optuna study that measured ``measurement_id``:
    the trial ``optuna-dashboard`` and ``optuna trials`` show for it (every placetune study is an
    Optuna study, :mod:`placetune.tuning.optuna_study`). None without optuna, without the Optuna
    study, or when no trial holds that measurement."""
    try:
        url = store.engine.url
        in_memory = url.get_backend_name() == "sqlite" and url.database in (None, "", ":memory:")
        if not in_memory:
            if not sqlalchemy.inspect(store.engine).has_table("trials"):
                return None  # no Optuna tables: opening Optuna's storage would create them
            # one indexed query, not every trial of the study loaded with its parameters
            query = sqlalchemy.text("SELECT MIN(t.number) FROM trials t JOIN studies s ON s.study_id = t.study_id "
                         "JOIN trial_user_attributes a ON a.trial_id = t.trial_id "
                         "WHERE s.study_name = :name AND a.key = 'measurement_id' AND a.value_json = :value")
            with store.engine.connect() as conn:
                number = conn.execute(query, {"name": study_name, "value": json.dumps(measurement_id)}).scalar()
            return None if number is None else int(number)
        storage = storage_for(store)
        study_id = storage.get_study_id_from_name(study_name)
        trials = storage.get_all_trials(study_id, deepcopy=False)
    except Exception:  # noqa: BLE001 - optuna missing, no Optuna study, another Optuna schema: no number
        log.debug("no Optuna trial number for measurement %s of %r", measurement_id, study_name, exc_info=True)
        return None
    numbers = [t.number for t in trials if t.user_attrs.get("measurement_id") == measurement_id]
    return min(numbers) if numbers else None
