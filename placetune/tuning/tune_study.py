"""Opening the study a ``placetune tune`` run works on: the backend, the settings (new defaults for new
studies, those an older placetune used for a study created with them), the model, the study's name,
the plan file (refused before anything is measured), the fleet or the single-writer lock, and the
evaluator. Bad input is refused before the database is touched wherever it can be."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placetune.backends.base import Backend
from placetune.backends import registry
from placetune.errors import ConfigError
from placetune.hardware.platforms import get_platform
from placetune.inputdata import timed_settings
from placetune.model.merge import load_networks, network_names
from placetune.model.model import Model
from placetune.plan.trtexec import refuse_unexportable
from placetune.settings import Settings, check_replica_devices, rules_version
from placetune.store.store import Store
from placetune.tuning.constraints import check_networks, parse_constraints
from placetune.tuning.evaluator import Evaluator
from placetune.tuning.study_setup import study_name_for
from placetune.tuning.fleet import Fleet, prepare
from placetune.tuning.fleet_locks import SingleWriterLock
from placetune.tuning.measurable import check_measurable
from placetune.tuning.objectives import get_objective
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune_export import check_export

__all__ = ["OpenStudy", "StudyOpener", "PIPELINE_FRAMES_IN_FLIGHT"]

#: Frames in flight of a pipeline-mode throughput study that does not set ``frames_in_flight``.
PIPELINE_FRAMES_IN_FLIGHT = 4


@dataclass
class OpenStudy:
    """A study opened for a run.

    Attributes:
        evaluator: measures and stores the study's placements.
        fleet: the fleet the run joined on a shared database (None: the run is alone).
        writer_lock: the lock that keeps a second writer off a SQLite file (None on a shared database).
    """

    evaluator: Evaluator
    fleet: Fleet | None
    writer_lock: SingleWriterLock | None

    def close(self) -> None:
        """Leave the fleet, release the lock."""
        _leave(self.fleet, self.writer_lock)


def _leave(fleet: Fleet | None, writer_lock: SingleWriterLock | None) -> None:
    if fleet is not None:
        fleet.close()
    if writer_lock is not None:
        writer_lock.release()


class StudyOpener:
    """Opens the study of one run's configuration.

    Args:
        cfg: the resolved configuration.
        say: prints one line (a note when a study is resumed with older defaults).
    """

    def __init__(self, cfg: TuneConfig, say: Callable[[str], None]) -> None:
        self.cfg = cfg
        self.say = say

    def open(self) -> OpenStudy:
        """The study's evaluator, fleet and lock. Raises PlacetuneError on bad input."""
        cfg = self.cfg  # an objective the backend never reports would run the whole budget and export nothing:
        check_measurable(cfg.objective, cfg.constraints, cfg.backend, cfg.mode, cfg.backend_options)
        options = dict(cfg.backend_options)
        if cfg.device_profile:
            options["device_profile"] = cfg.device_profile
        if cfg.input_data:
            options["input_data"] = cfg.input_data
        backend = registry.get_backend(cfg.backend, **options)
        options = cfg.settings_options()  # (a power mode the platform lacks: refused before the database is touched)
        if backend.capabilities.probe and "trt_version" not in options:
            # apply the DLA rules of the TensorRT the worker really has (11.x needs the full version)
            version = backend.probe().get("trt_version")
            if version:
                options["trt_version"] = rules_version(version)
        # defaults of settings the run did not set, and the values older placetune used for them
        legacy: dict[str, Any] = {}
        if "trt_version" not in options:
            plat = get_platform(cfg.platform)
            options["trt_version"] = plat.trt_version_for(options.get("power_mode"))
            legacy["trt_version"] = "8.6"
        if cfg.mode in ("pipeline", "concurrent") and "throughput" in cfg.objective and "frames_in_flight" not in options:
            options["frames_in_flight"] = PIPELINE_FRAMES_IN_FLIGHT
            legacy["frames_in_flight"] = 1
        try:
            # concurrent networks are one merged model measured as a pipeline (placetune.model.merge)
            settings = Settings(mode="pipeline" if cfg.mode == "concurrent" else cfg.mode, precision=cfg.precision,
                                **options)
        except TypeError as exc:
            raise ConfigError(f"bad [settings] in {cfg.source}: {exc}") from None
        plat = get_platform(cfg.platform)
        plat.check_power_mode(settings.power_mode)  # before the database is touched
        check_replica_devices(settings, plat.devices, plat.name)  # so are replicas on a device it lacks
        if cfg.study:  # a bad export path is refused before the database is touched
            check_export(cfg, cfg.study)
        if cfg.constraints:  # so is a constraint on a network the study does not run
            check_networks(parse_constraints(cfg.constraints),
                           network_names(cfg.models) if cfg.mode == "concurrent" else [])
        if cfg.mode == "concurrent":
            model = load_networks(cfg.models, batch=cfg.batch, shapes=cfg.shapes or None)
        else:
            model = Model.load(cfg.model, cfg.shapes or None, batch=cfg.batch)
        # input data that does not fit the model is refused before the database is touched; the input the
        # study is timed on is one of its settings (a study refuses to be resumed on another)
        settings = timed_settings(backend, settings, model)
        # what the morning's export (and build) would refuse for every plan of this study: refused now
        refuse_unexportable(model, settings.mode, settings.precision, str(settings.trt_version))
        store = Store(cfg.storage)
        settings = self._resume_settings(store, model, backend, settings, settings.replace(**legacy))
        study = cfg.study or self._default_study(store, model, backend, settings)
        if not cfg.study:  # (a study named in the config was checked above)
            check_export(cfg, study)  # before anything is measured, not after
        # SQLite: refuse a second writer; shared database: join the fleet (same environment)
        fleet, writer_lock = prepare(store, cfg, backend, settings)
        try:
            ev = Evaluator(
                model, cfg.platform, backend, batch=cfg.batch, objective=cfg.objective, store=store,
                study=study, settings=settings, shapes=cfg.shapes or None, agent=cfg.agent,
                constraints=cfg.constraints or None,
            )
        except BaseException:  # the fleet is left and the lock released, as after a run
            _leave(fleet, writer_lock)
            raise
        if fleet is not None:
            fleet.attach(ev)
        return OpenStudy(ev, fleet, writer_lock)

    def _resume_settings(self, store: Store, model: Model, backend: Backend, settings: Settings,
                         legacy: Settings) -> Settings:
        """``settings``, or ``legacy`` (the defaults of an older placetune) when the study this
        run resumes was created with those: new defaults apply to new studies only."""
        if legacy == settings:
            return settings
        cfg = self.cfg
        names = {st.name: st for st in store.studies()}
        if cfg.study:
            st = names.get(cfg.study)
            return legacy if st is not None and st.settings == legacy.to_dict() else settings

        def name(s: Settings) -> str:
            return self._default_study(store, model, backend, s, names)

        if name(settings) not in names and name(legacy) in names:
            self.say(f"note: resuming study {name(legacy)!r} with the settings it was created with ("
                     + ", ".join(f"{k}={getattr(legacy, k)}" for k in legacy.to_dict()
                                 if getattr(legacy, k) != getattr(settings, k)) + ")")
            return legacy
        return settings

    def _default_study(self, store: Store, model: Model, backend: Backend, settings: Settings,
                       names: dict[str, Any] | None = None) -> str:
        """The study name of a run without ``--study``: the evaluator's default, with the model
        hash appended when that name is taken by another version of the model (another batch,
        another file of the same name)."""
        plat = get_platform(self.cfg.platform)
        fp = backend.fingerprint(plat, settings)
        objective = get_objective(self.cfg.objective, self.cfg.constraints or None)  # constrained: its own study
        base = study_name_for(model.name, plat.name, settings, objective.slug, backend.name,
                              fp.get("profile") if isinstance(fp, dict) else None)
        names = names if names is not None else {st.name: st for st in store.studies()}
        st = names.get(base)
        same = st is not None and st.model_hash in (model.hash, model.legacy_hash)  # legacy: migrated on open
        return base if st is None or same else f"{base}-{model.hash[:6]}"
