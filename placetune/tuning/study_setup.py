"""What one study measures: an evaluator's arguments checked and resolved, its default name, its row in the store.

An :class:`~placetune.tuning.evaluator.Evaluator` is built from a model, a platform, a backend,
measurement settings and an objective, each given as a name, a path or an object. Before anything
is measured or stored they are resolved (:func:`resolve`: a :class:`StudySetup`) and checked
against each other: a type the target TensorRT's ONNX parser cannot import, a power mode the
platform lacks, an objective the backend never measures, a constraint naming a network the model
does not have, a broken external data file. Each refusal is one line
(:class:`~placetune.errors.ConfigError` and its kin). Then :func:`open_study` creates, or opens
again, the study's row in the store with everything that keys its cache.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.backends.base import check_backend
from placetune.backends.registry import get_backend
from placetune.errors import ConfigError
from placetune.hardware.platforms import get_platform
from placetune.inputdata import timed_settings
from placetune.model.merge import networks_in
from placetune.model.model import Model
from placetune.model.onnx_io import check_external_data
from placetune.model.parsable import refuse_for_version
from placetune.safetext import shown
from placetune.settings import Settings
from placetune.tuning.constraints import Constraint, check_networks
from placetune.tuning.objectives import Objective, get_objective
from placetune.validate import request as check_request

if TYPE_CHECKING:
    from placetune.backends.base import Backend
    from placetune.hardware.platforms import Platform
    from placetune.store.records import StudyRecord
    from placetune.store.store import Store

__all__ = ["StudySetup", "check_arguments", "resolve", "study_name_for", "open_study", "EVALUATOR_ARGUMENTS",
           "SETTINGS_OPTIONS"]

#: The :class:`~placetune.tuning.evaluator.Evaluator`'s own keyword arguments.
EVALUATOR_ARGUMENTS = ("model", "platform", "backend", "mode", "precision", "batch", "objective", "store", "study",
                       "settings", "shapes", "agent", "constraints")
#: The :class:`~placetune.settings.Settings` fields an evaluator also takes as keyword arguments (``**options``).
SETTINGS_OPTIONS = tuple(sorted(f.name for f in dataclasses.fields(Settings) if f.name not in ("mode", "precision")))


log = logging.getLogger(__name__)

@dataclass(frozen=True)
class StudySetup:
    """What a study measures, resolved and checked: see :func:`resolve`."""

    model: Model
    #: the networks of a concurrent study's merged model ([] for one network)
    networks: list[str]
    platform: "Platform"
    backend: "Backend"
    settings: Settings
    objective: Objective


def check_arguments(options: Mapping[str, Any], *, settings: Any, shapes: Any, agent: Any, constraints: Any) -> None:
    """Refuse a keyword argument an evaluator does not take, or one of the wrong type, before anything is loaded
    (``options``: the keyword arguments beyond the evaluator's own, each a :class:`Settings` field).

    Raises:
        ConfigError: one line naming the argument and what is allowed.
    """
    unknown = sorted(str(k) for k in options if k not in SETTINGS_OPTIONS)
    if unknown:
        raise ConfigError(f"unknown Evaluator option(s) {', '.join(shown(k, 40) for k in unknown[:5])}; its "
                          f"arguments are {', '.join(EVALUATOR_ARGUMENTS)} and the measurement options "
                          f"{', '.join(SETTINGS_OPTIONS)}")
    if settings is not None and not isinstance(settings, Settings):
        raise ConfigError(f"settings must be None or a placetune.settings.Settings, not {type(settings).__name__}")
    if shapes is not None and not isinstance(shapes, Mapping) and not (
            isinstance(shapes, (list, tuple)) and all(isinstance(s, str) for s in shapes)):
        raise ConfigError(f"shapes must be None, a mapping like {{'input': (1, 3, 224, 224)}} or a list of texts "
                          f"like ['input=1x3x224x224'], not {type(shapes).__name__}")
    if constraints is not None and not isinstance(constraints, (str, Constraint)) and (
            not isinstance(constraints, Iterable) or isinstance(constraints, (bytes, Mapping))):
        raise ConfigError("constraints must be None, a text like 'latency<=2.0' or a list of them, "
                          f"not {type(constraints).__name__}")
    check_request(agent, None)  # None or a name of 1 to 200 characters


def resolve(model: Model | str | Path, platform: "Platform | str", backend: "Backend | str", *, mode: str,
            precision: str, batch: int | None, objective: str | Objective, settings: Settings | None, shapes: Any,
            constraints: Any, options: dict[str, Any]) -> StudySetup:
    """Load and check what a study measures (the arguments of :class:`~placetune.tuning.evaluator.Evaluator`).

    ``settings`` overrides ``mode``, ``precision`` and ``options`` (other :class:`Settings` fields);
    without them the platform's default TensorRT version is the settings' ``trt_version``.
    """
    loaded = model if isinstance(model, Model) else Model.load(model, shapes, batch=batch)
    networks = networks_in(loaded)
    plat = get_platform(platform)  # a Platform as it is; anything but a name is refused, naming them
    back = get_backend(backend) if isinstance(backend, str) else check_backend(backend)
    if settings is None and "trt_version" not in options:
        options["trt_version"] = plat.trt_version_for(options.get("power_mode"))
    settings = settings or Settings(mode=mode, precision=precision, **options)
    refuse_for_version(loaded, settings.trt_version)  # types the target's ONNX parser cannot import
    settings = timed_settings(back, settings, loaded)  # the input timed (inputdata.py)
    if back.capabilities.simulated and not plat.ships_trt(settings.trt_version):
        # said, not refused: a what-if of another TensorRT's DLA rules is a use of the simulator (the real
        # backends check the board's own TensorRT against the platform: backends/jetson.installed_trt_fits)
        log.warning("trt_version %s: no JetPack for %s ships TensorRT %s (its JetPacks: %s); the simulated Jetson "
                    "applies that version's DLA rules anyway", settings.trt_version, plat.name,
                    settings.trt_version, ", ".join(plat.jetpack_trt))
    if not plat.has_power_mode(settings.power_mode):  # else every trial is infeasible
        raise ConfigError(f"power_mode {str(settings.power_mode)[:40]!r}: {plat.name} has the "
                          f"power modes {plat.mode_list()}")
    obj = get_objective(objective, constraints)
    measured = back.capabilities.objectives
    cannot = [n for n in obj.measured_from if n not in measured]
    if cannot:  # else every measurement's objective would be None: declared, so refused here
        raise ConfigError(f"objective {obj.name!r}: the {back.name} backend does not measure "
                          f"{' or '.join(cannot)}; it measures {', '.join(measured)}")
    check_networks(obj.constraints, networks)  # every name checked against what exists
    if loaded.path is not None:  # its weights are read at export: a broken external data file is refused now
        check_external_data(loaded.path)
    return StudySetup(loaded, networks, plat, back, settings, obj)


def study_name_for(model: str, platform: str, settings: Settings, objective: str, backend: str,
                   profile: Any = None) -> str:
    """The default study name of these settings: ``<model>-<platform>-<mode>-<precision>-<objective>-<backend>-
    <settings hash[:6]>``, plus ``-profile-<digest[:6]>`` when a simulated backend measures with a device profile."""
    s = settings
    return (f"{model}-{platform}-{s.mode}-{s.precision}-{objective}-{backend}-{s.hash[:6]}"
            + (f"-profile-{str(profile)[:6]}" if profile else ""))


def open_study(store: "Store", name: str, setup: StudySetup, fingerprint: Any) -> "StudyRecord":
    """Create the study ``name`` in ``store``, or open it again (its model, settings and fingerprint must match)."""
    return store.create_or_open_study(
        name,
        setup.model,
        platform=setup.platform.name,
        backend=setup.backend.name,
        mode=setup.settings.mode,
        objective=setup.objective.name,
        precision=setup.settings.precision,
        batch=setup.model.batch,
        settings=setup.settings.to_dict(),
        fingerprint=fingerprint,
        simulated=setup.backend.simulated,
        constraints=[c.text for c in setup.objective.constraints],
    )
