"""The plan file a ``placetune tune`` run writes: its path, refused before anything is measured when
it cannot be written, and the export of the study's best plan at the end of the run."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from placetune.errors import ConfigError
from placetune.files.names import file_name
from placetune.files.write import check_output, force_hint, refuse_inputs
from placetune.plan.deploy_notes import BUILD_STOP
from placetune.plan.export import export_plan
from placetune.plan.file import Plan
from placetune.safetext import shown
from placetune.store.url import sqlite_file
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.final_pick import BestPick
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.verdict import next_steps

__all__ = ["check_export", "export_best"]

_DEFAULT_HINT = "pass --force to replace it, or give the plan file with --export PATH"


def check_export(cfg: TuneConfig, study: str) -> str:
    """The plan file of the run (``--export`` or ``<study>.plan.json``), refused now if it cannot be
    written: a study name that is not a plain file name, a directory, a file that is not a plan."""
    study_file = cfg.source if cfg.source not in ("command line", "embedded default", "-") else None
    inputs = [("the database (--storage)", sqlite_file(cfg.storage)),
              *(("the model", m) for m in (cfg.models or [cfg.model])), ("the study file", study_file),
              ("the device profile", cfg.device_profile)]
    if cfg.export:  # (named by an untrusted study file: only over a plan file placetune wrote)
        refuse_inputs(cfg.export, "--export", inputs)
        hint = ("the study file names it (export = ...): give --export PATH" if cfg.export_from_file
                else force_hint("--export"))
        return str(check_output(cfg.export, "plan file (--export)", owned=cfg.export_owner(), hint=hint))
    name = file_name(f"{study}.plan.json", "the plan file name of study", hint="give the plan file with "
                     "--export PATH (or export = \"...\" in the study file)")
    if name.startswith("."):  # --study . or --study .x: a hidden file nobody would find
        raise ConfigError(f"the plan file name of study {shown(repr(study), 80)} would be {shown(repr(name), 80)}, a "
                          "hidden file; give the plan file with --export PATH (or export = \"...\" in the study "
                          "file), or a study name that does not start with a dot")
    refuse_inputs(name, "the plan file", inputs)
    check_output(name, "plan file", owned=cfg.export_owner(), hint=_DEFAULT_HINT)
    return name


def _kept(cfg: TuneConfig, ev: Evaluator, study: str, plan: Plan) -> str:
    """Where the result of a run whose plan file could not be written is, and how to write its plan: the
    database keeps it; an in-memory one does not, so the plan goes to a new file beside the refused one."""
    target = cfg.export or f"{study}.plan.json"
    if ev.store.in_memory:
        p = Path(target)
        for i in range(1, 100):
            spare = p.with_name(f"{p.stem}.{i}{p.suffix}")
            if os.path.lexists(spare):
                continue
            try:
                plan.save(spare, owned=lambda _: False)  # a new file, never over one that appeared meanwhile
            except ConfigError:
                break
            return f"the study was in an in-memory database: its plan was written to {spare} instead"
        return "the study was in an in-memory database and no new file beside it could be written: its plan is lost"
    target = shlex.quote(target)
    return (f"the run's result is kept in {cfg.storage}: write its plan with placetune export --storage "
            f"{shlex.quote(cfg.storage)} --study {shlex.quote(study)} -o {target} --force (or another -o name)")


def export_best(cfg: TuneConfig, ev: Evaluator, study: str, notes: list[str],
                say: Callable[[str], None], pick: BestPick | None = None) -> str:
    """Write the study's best plan (with ``notes``: what it rests on) to the run's plan file; its path.
    ``pick``: the run's best plan and why (:mod:`placetune.tuning.final_pick`); None: the study's."""
    # (the pick's placement unread: the best known one is exported, its notes say which plan was passed over)
    plan = export_plan(ev.store, study, objective=ev.objective, model=ev.model, pick=pick)  # model not loaded again
    plan.notes.extend(notes)
    fps = plan.measured.get("throughput_fps")
    if cfg.streams and isinstance(fps, (int, float)):  # N streams of one network share its frames
        plan.measured["streams"] = {"streams": cfg.streams, "per_stream_fps": fps / cfg.streams}
    try:  # checked at the start; the file may have appeared during the run
        path = check_export(cfg, study)
        plan.save(path, owned=cfg.export_owner(), hint=force_hint("--export") if cfg.export else _DEFAULT_HINT)
    except ConfigError as exc:
        raise ConfigError(f"{exc}; {_kept(cfg, ev, study, plan)}") from None
    say(f"plan exported to {path}" + (" (simulated figures)" if ev.backend.simulated else ""))
    for note in plan.notes:  # the run's first line warned of it; the morning reads the end of the log
        if note.startswith(BUILD_STOP):
            say(f"warning: {note}")
    say(next_steps(cfg.storage, study, in_memory=ev.store.in_memory))
    return path
