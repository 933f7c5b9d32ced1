"""What the store returns: studies, measurements and requests as frozen records."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from placetune.measurement import Measurement

__all__ = ["StudyRecord", "MeasurementRecord", "RequestRecord"]


@dataclass(frozen=True)
class StudyRecord:
    """A study as stored: its fixed settings, cache scope and counts.

    Attributes:
        id: database id.
        name: unique study name.
        model_id: ``pt_models`` id.
        model_hash: :attr:`placetune.model.model.Model.hash`.
        model_name: display name of the model.
        platform: Jetson platform name (``orin-agx``...).
        backend: measurement backend (``simulate``, ``tensorrt``, ``trtexec``).
        mode: ``engine``, ``pipeline`` or ``replicas``.
        objective: ``latency``, ``throughput`` or ``energy``.
        precision: ``fp16``, ``int8``...
        batch: batch size.
        settings: the measurement settings (``Settings.to_dict()``).
        settings_hash: their hash (``Settings.hash``).
        fingerprint: what identifies the measuring machine (JetPack, TensorRT, clocks...).
        fingerprint_hash: :func:`~placetune.store.studies.fingerprint_hash` of fingerprint, platform,
            backend, simulated.
        simulated: True when the study measures the simulated Jetson.
        created_at: creation time (UTC).
        n_requests: evaluation requests logged for the study (cache hits included).
        n_cache_hits: requests answered from the store without measuring.
        n_measured: measurements this study made (first in its cache scope).
        n_ok: those of them with status ``ok``.
        constraints: the study's bounds as written (``["latency<=0.8"]``; ``[]``: none); None for a
            study an older placetune created without recording them.
    """

    id: int
    name: str
    model_id: int
    model_hash: str
    model_name: str
    platform: str
    backend: str
    mode: str
    objective: str
    precision: str
    batch: int
    settings: dict[str, Any]
    settings_hash: str
    fingerprint: dict[str, Any]
    fingerprint_hash: str
    simulated: bool
    created_at: datetime
    n_requests: int = 0
    n_cache_hits: int = 0
    n_measured: int = 0
    n_ok: int = 0
    constraints: list[str] | None = None

    @property
    def scope(self) -> tuple[str, str, str]:
        """``(model_hash, fingerprint_hash, settings_hash)``: the cache scope, for :meth:`Store.lookup`."""
        return (self.model_hash, self.fingerprint_hash, self.settings_hash)


@dataclass(frozen=True)
class MeasurementRecord:
    """A stored measurement with where it came from.

    Attributes:
        id: database id (``pt_measurements.id``).
        study: name of the study that measured it (other studies may reuse it).
        placement_key: key of the realised placement (the cache key).
        requested_key: key of the placement that was asked for when it was measured.
        requested: layer -> device asked for (None when unknown).
        realized: layer -> device that ran (None when unknown).
        measurement: the :class:`~placetune.measurement.Measurement`, exactly as recorded.
        agent: the agent that asked for it, if given.
        trial_number: the agent's trial number, if given.
        created_at: when it was stored (UTC).
    """

    id: int
    study: str
    placement_key: str
    requested_key: str
    requested: dict[str, str] | None
    realized: dict[str, str] | None
    measurement: Measurement
    agent: str | None
    trial_number: int | None
    created_at: datetime

    def __repr__(self) -> str:
        """One short line (the layer maps it holds made it tens of kB): the ids and the measurement's own line."""
        return (f"MeasurementRecord(id={self.id}, study={self.study!r}, agent={self.agent!r}, "
                f"trial_number={self.trial_number}, measurement={self.measurement!r})")

    @property
    def status(self) -> str:
        """The measurement's status."""
        return self.measurement.status

    @property
    def simulated(self) -> bool:
        """True when the figures come from the simulated Jetson."""
        return self.measurement.simulated


@dataclass(frozen=True)
class RequestRecord:
    """One evaluation request of a study (``pt_requests``).

    Attributes:
        id: database id.
        study: study name.
        requested_key: key of the placement asked for.
        placement_key: key of the realised placement that answered it.
        measurement_id: the ``pt_measurements`` row that answered it.
        agent: the agent that asked, if given.
        trial_number: the agent's trial number, if given.
        cache_hit: True when answered from the store without measuring.
        created_at: when (UTC).
    """

    id: int
    study: str
    requested_key: str
    placement_key: str
    measurement_id: int
    agent: str | None
    trial_number: int | None
    cache_hit: bool
    created_at: datetime
