"""The backend contract: what every backend provides (:class:`Backend`), what it can do
(:class:`Capabilities`, declared, never probed) and a base class with the optional parts'
defaults (:class:`BackendBase`).

A backend turns a realised placement into a :class:`~placetune.measurement.Measurement`.
Backends are created by name with :func:`placetune.backends.registry.get_backend`; a new one is
added with :func:`placetune.backends.registry.register_backend` or the ``placetune.backends``
entry point group (docs/architecture.md, "Extension points").

Example (a backend needs a name, its capabilities, ``fingerprint`` and ``measure``)::

    class Constant(BackendBase):
        name = "constant"
        capabilities = Capabilities(simulated=True)

        def fingerprint(self, platform, settings):
            return {"backend": "constant", "version": 1, "platform": platform.name}

        def measure(self, realisation, platform, settings):
            return Measurement("ok", latency_samples_ms=[1.0], simulated=True, backend="constant-1")
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from placetune.caches import default_cache_dir  # noqa: F401 - re-exported (placetune.backends)
from placetune.errors import ConfigError


if TYPE_CHECKING:
    from placetune.inputdata import InputData
    from placetune.measurement import Measurement
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["Backend", "BackendBase", "Capabilities", "check_backend", "default_cache_dir", "BUILD_TIMEOUT_S"]

#: Every measuring mode (``Settings.mode``).
ALL_MODES = ("engine", "pipeline", "replicas")
#: The real backends' default limit of one build (the tensorrt backend: one build and its timing; a pipeline
#: job gets it once per engine it builds; trtexec: one build, and separately one timing run), in seconds. A real
#: build of the smallest YOLO11, FP16 on the GPU, took 471.7 s with TensorRT 10.3 on an AGX Orin 64GB at 50 W
#: (tests/data/trt_corpus/yolo11n-orin-10.3-grep-gpu-fp16-build-472s); an Orin NX has about half that GPU
#: throughput, INT8 times more tactics and larger models more layers, so 900 s stopped such a night at its first
#: build. Past the limit the job is killed as hung: an hour per engine it builds bounds what one hang costs a night
#: (tests/test_build_limit.py). ``[backend_options] timeout_s`` sets it.
BUILD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do, declared by the backend (a class attribute) and read by its callers.

    Attributes:
        simulated: its figures are not measured on hardware (studies, plans and reports say so).
        modes: the measuring modes it builds and times; another mode is measured ``infeasible``.
        objectives: the objectives its measurements carry (``energy`` needs power sampling,
            ``gpu_time`` the GPU's busy time per frame).
        probe: :meth:`Backend.probe` asks the device which TensorRT it measures with
            (``trt_version``, ``num_dla_cores``); a run that does not set ``trt_version`` then
            applies that version's DLA rules.
        build_counter: measurements depend on how often a placement was built before (the
            simulator draws a tactic factor per build); :meth:`Backend.advance_builds` continues
            a stored count when a placement is measured again.
        device_profile: takes a ``device_profile`` option (a calibrated simulated device).
        calibration_cache: takes an INT8 ``calibration_cache`` option (it builds engines).
        cost_tables: its figures come from placetune's own cost tables
            (:mod:`placetune.backends.simulate.costs`), which an exact search can read.
        input_data: takes an ``input_data`` option (a ``.npz`` of the network's inputs,
            :mod:`placetune.inputdata`) and holds what it read as ``input_data`` (None: random input).
    """

    simulated: bool = False
    modes: tuple[str, ...] = ALL_MODES
    objectives: tuple[str, ...] = ("latency", "throughput")
    probe: bool = False
    build_counter: bool = False
    device_profile: bool = False
    calibration_cache: bool = False
    cost_tables: bool = False
    input_data: bool = False

    def why_unmeasurable(self, backend: str, metric: str, mode: str) -> str | None:
        """Why backend ``backend`` with these capabilities never reports ``metric`` in ``mode``
        (None: it does): a mode or an objective it does not declare."""
        if mode not in self.modes:
            return f"the {backend} backend measures {', '.join(self.modes)} mode(s) only"
        if metric not in self.objectives:
            return f"the {backend} backend measures {', '.join(self.objectives)} only"
        return None


@runtime_checkable
class Backend(Protocol):
    """What every backend provides (:class:`BackendBase` gives the optional parts' defaults).

    Attributes:
        name: the name it is registered under (``simulate``, ``tensorrt``, ``trtexec``...).
        capabilities: what it can do.
        simulated: ``capabilities.simulated``: True when figures are not measured on hardware.
    """

    name: str
    capabilities: Capabilities

    @property
    def simulated(self) -> bool: ...

    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """What identifies the measuring environment (backend and version, TensorRT,
        JetPack, power mode). Measurements are cache entries only within one fingerprint."""
        ...

    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> "Measurement":
        """Build and time the realised placement. Failures are returned, not raised."""
        ...

    def probe(self, refresh: bool = False) -> dict[str, Any]:
        """The device's TensorRT (``trt_version``, ``num_dla_cores``, errors) where
        ``capabilities.probe``; ``{}`` otherwise."""
        ...

    def advance_builds(self, key: str, mode: str, next_build: int) -> None:
        """Make the next build of realised placement ``key`` in ``mode`` number ``next_build`` or
        later (where ``capabilities.build_counter``; nothing otherwise)."""
        ...

    def close(self) -> None:
        """Release what the backend holds (worker processes)."""
        ...


class BackendBase:
    """A backend's defaults: no probe, no build counter, nothing to close; ``simulated`` read from
    the declared :class:`Capabilities`. Subclasses set ``name`` and ``capabilities`` and write
    ``fingerprint`` and ``measure``."""

    name: ClassVar[str] = ""
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: the input data it times on (where ``capabilities.input_data``; None: random input)
    input_data: "InputData | None" = None

    @property
    def simulated(self) -> bool:
        """True when figures are not measured on hardware (``capabilities.simulated``)."""
        return self.capabilities.simulated

    @classmethod
    def why_unmeasurable(cls, metric: str, mode: str, options: Mapping[str, Any]) -> str | None:
        """Why this backend, created with ``options``, never reports ``metric`` in ``mode`` (None: it
        does). The default reads the declared :class:`Capabilities`; a backend whose figures depend on
        the mode or an option says so by overriding this. A study is refused at start on an answer."""
        return cls.capabilities.why_unmeasurable(cls.name, metric, mode)

    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """What identifies the measuring environment (every backend writes its own)."""
        raise NotImplementedError

    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> "Measurement":
        """Build and time the realised placement (every backend writes its own)."""
        raise NotImplementedError

    def probe(self, refresh: bool = False) -> dict[str, Any]:
        """Nothing to ask: ``{}``."""
        return {}

    def advance_builds(self, key: str, mode: str, next_build: int) -> None:
        """No build counter: nothing to continue."""

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> "BackendBase":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_backend(backend: object) -> Backend:
    """``backend`` when it keeps the contract, else a ConfigError naming what it lacks.

    Raises:
        ConfigError: a member of :class:`Backend` is missing (derive from :class:`BackendBase`).
    """
    if isinstance(backend, Backend) and isinstance(backend.capabilities, Capabilities):
        return backend
    members = ("name", "capabilities", "simulated", "fingerprint", "measure", "probe", "advance_builds", "close")
    missing = [m for m in members if not hasattr(backend, m)] or ["capabilities (a Capabilities)"]
    raise ConfigError(f"{type(backend).__name__} is not a backend: it lacks {', '.join(missing)}; derive it from "
                      "placetune.backends.BackendBase (docs/architecture.md, extension points)")
