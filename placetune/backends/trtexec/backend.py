"""The ``trtexec`` backend: build and time each placement with NVIDIA's ``trtexec`` on the Jetson.

For users who trust the JetPack tool: every measurement is two ``trtexec`` runs whose
command lines are kept with the measurement (``extra["commands"]``), so any figure can be
reproduced by hand:

1. **build**: ``trtexec --onnx=M --fp16 [--useDLACore=k --allowGPUFallback
   [--layerDeviceTypes=...]] --shapes=... --saveEngine=E --timingCacheFile=C
   --profilingVerbosity=detailed --exportLayerInfo=L --verbose --skipInference``
   (``--buildOnly`` on 8.5); the realised placement is read from its
   ``[DlaLayer]``/``[GpuLayer]`` log sections (:mod:`placetune.backends.tensorrt.buildlog`);
2. **time**: ``trtexec --loadEngine=E [--useDLACore=k] --iterations=N --duration=S
   --warmUp=W --exportTimes=T --exportProfile=P --separateProfileRun --useSpinWait``; latency
   samples from ``--exportTimes``, throughput from the performance summary, per-layer times
   from ``--exportProfile`` (parsed from raw text: trtexec does not escape layer names), the
   power rails sampled during the timed iterations (:mod:`placetune.hardware.power`).

Placement on the trtexec command line (reference tensorrt-dla.md §2.1-2.2): ``--useDLACore``
makes the DLA the default device of *every* layer, so a placement with GPU layers lists them
with ``--layerDeviceTypes`` (every layer is listed, as :func:`placetune.plan.trtexec.trtexec_commands`
does; both write their flags with :mod:`placetune.backends.trtexec.command`). That flag exists
from TensorRT 8.6: on 8.5 only all-GPU and all-DLA placements (layers the DLA cannot run fall
back by themselves) can be built; a mixed placement is ``infeasible`` with a reason that
points to the ``tensorrt`` backend.

Modes: ``engine`` (one engine, :mod:`placetune.backends.trtexec.engine`), ``replicas`` (one
whole-network engine per device, :mod:`placetune.backends.trtexec.replicas`, all timed
at once as separate trtexec processes for ``replica_duration_s``, like NVIDIA's
jetson_benchmarks; total and per-replica throughput over the window when all of them ran).
``pipeline`` needs segment engines chained in one process: that is the ``tensorrt``
backend's job, so it is ``infeasible`` here.

trtexec is found from ``trtexec=`` (the CLI's ``--trtexec PATH``), then the
``PLACETUNE_TRTEXEC`` environment variable, then ``PATH``, then ``/usr/src/tensorrt/bin/trtexec``
(:mod:`placetune.backends.trtexec.find`). Processes (:mod:`placetune.backends.trtexec.process`)
get an argument list (no shell); a build or run past ``timeout_s`` is killed (``timeout``),
one killed by a signal is ``crashed``, ``&&&& FAILED`` is ``build_failed`` or
``runtime_failed`` with trtexec's error lines.

Example:
    >>> from placetune import Evaluator, Placement
    >>> ev = Evaluator("resnet18", "orin-agx", backend="trtexec", precision="int8")  # doctest: +SKIP
    >>> m = ev.evaluate(Placement.all_dla(ev.model))                                  # doctest: +SKIP
    >>> m.status, m.realized["/avgpool/GlobalAveragePool"], m.energy_mj                 # doctest: +SKIP
    ('ok', 'GPU', 41.7)
    >>> m.extra["commands"]["build"][:3]                                              # doctest: +SKIP
    ['/usr/src/tensorrt/bin/trtexec', '--onnx=/home/me/.cache/placetune/trtexec/onnx/resnet18-....onnx', '--int8']
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import BackendError, ConfigError, ModelError
from placetune.files.read import check_regular
from placetune.inputdata import RANDOM_INPUT, load_input_data
from placetune.measurement import Measurement
from placetune.validate import check_options
from placetune.backends.base import BUILD_TIMEOUT_S, Capabilities, default_cache_dir
from placetune.backends.jetson import JetsonBackend, device_fingerprint
from placetune.backends.trtexec.command import version_tuple
from placetune.backends.trtexec.engine import Engine, measure_engine, time_built
from placetune.backends.trtexec.find import find_trtexec
from placetune.backends.trtexec.parse import version_from_text
from placetune.backends.trtexec.replicas import measure_replicas

if TYPE_CHECKING:
    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["TrtexecBackend", "PIPELINE_REASON"]

log = logging.getLogger(__name__)

#: Why pipeline mode is not measured by this backend.
PIPELINE_REASON = (
    "pipeline mode runs one engine per segment, chained in one process with CUDA streams and events: "
    "trtexec runs whole networks only. Measure pipeline placements with the tensorrt backend "
    "(--backend tensorrt); the trtexec backend does engine and replicas modes"
)
_RUN_IDS = itertools.count()


# =========================================================================================
# the backend
# =========================================================================================
class TrtexecBackend(JetsonBackend):
    """Build and time placements with ``trtexec`` (engine and replicas modes).

    Args:
        trtexec: the trtexec binary (path or name on PATH). Default: ``$PLACETUNE_TRTEXEC``,
            then ``PATH``, then ``/usr/src/tensorrt/bin/trtexec``.
        trt_version: TensorRT version of that trtexec (default: read from ``trtexec --help``).
        timeout_s: limit for one build and, separately, one timing run (beyond its warm-up and duration,
            counted twice when ``profile`` adds trtexec's separate profiling run).
        warmup_ms: ``--warmUp``.
        iterations: ``--iterations`` (default ``settings.iterations``).
        duration_s: ``--duration`` of an engine-mode timing run (trtexec runs at least
            ``iterations`` and at least this long; 0: iterations only). Power needs seconds.
        replica_duration_s: ``--duration`` of each replica in replicas mode.
        cache_dir: prepared ONNX files, the timing caches and run directories
            (default ``$PLACETUNE_CACHE_DIR/trtexec`` or ``~/.cache/placetune/trtexec``).
        timing_cache: ``--timingCacheFile`` per platform and TensorRT version.
        calibration_cache: INT8 ``--calib`` cache (without one, trtexec uses placeholder
            ranges: right for timing, not accuracy).
        verbose: ``--verbose`` builds (the log also has ``Timing Runner: ... (DLA)`` lines). A build
            with a DLA core is always verbose: some TensorRT versions print the realised placement
            (``Layers Running on DLA/GPU``) at ``[V]`` only; of the verbose lines only those are read.
        profile: ``--exportProfile`` (+ ``--separateProfileRun``) for per-layer times.
        layer_info: ``--exportLayerInfo`` with ``--profilingVerbosity=detailed``.
        spin_wait: ``--useSpinWait`` (TensorRT < 11; 11 spins by default).
        power: sample the INA3221 rails during timed runs (energy per inference).
        power_root: sysfs root for the rails (default ``$PLACETUNE_SYSFS_ROOT`` or ``/``).
        power_interval_s: time between power samples.
        power_rails: rail names summed as module power (default: the input rail, else the rails no other contains).
        build_args: extra build flags (e.g. ``["--memPoolSize=dlaSRAM:1"]``).
        run_args: extra timing flags.
        env: extra environment variables for trtexec (e.g. ``CUDA_DEVICE_MAX_CONNECTIONS``).
        keep_files: keep run directories (engines, logs, exports) instead of deleting them.
        input_data: a ``.npz`` of the network's inputs (:mod:`placetune.inputdata`), given to trtexec as
            ``--loadInputs`` (one raw file per input, at each engine's batch) instead of its random input.

    Raises:
        BackendError: no trtexec (the message names every place looked).
        ConfigError: bad numbers, a missing calibration cache.
    """

    name = "trtexec"
    capabilities = Capabilities(simulated=False, modes=("engine", "replicas"),
                                objectives=("latency", "throughput", "energy"), calibration_cache=True,
                                input_data=True)

    @classmethod
    def why_unmeasurable(cls, metric: str, mode: str, options: Mapping[str, Any]) -> str | None:
        """trtexec runs whole networks (no pipelines), reports no GPU busy time, and samples the power
        rails unless its option ``power`` is false."""
        if mode == "pipeline":
            return ("trtexec runs whole networks only, not engines chained by CUDA streams: use --backend "
                    "tensorrt for pipeline and concurrent modes")
        if metric == "gpu_time":
            return ("GPU busy time per frame comes from engines chained by CUDA streams (--backend tensorrt, "
                    "pipeline mode) or the simulator's schedule: use one of them or another objective")
        if metric == "energy" and not options.get("power", True):
            return "the trtexec backend's power sampling is off (backend option power = false): turn it on"
        return super().why_unmeasurable(metric, mode, options)

    def __init__(
        self,
        trtexec: str | os.PathLike[str] | None = None,
        *,
        trt_version: str | None = None,
        timeout_s: float = BUILD_TIMEOUT_S,
        warmup_ms: float = 200.0,
        iterations: int | None = None,
        duration_s: float = 3.0,
        replica_duration_s: float = 10.0,
        cache_dir: str | os.PathLike[str] | None = None,
        timing_cache: bool = True,
        calibration_cache: str | os.PathLike[str] | None = None,
        verbose: bool = True,
        profile: bool = True,
        layer_info: bool = True,
        spin_wait: bool = True,
        power: bool = True,
        power_root: str | os.PathLike[str] | None = None,
        power_interval_s: float = 0.05,
        power_rails: list[str] | None = None,
        build_args: list[str] | None = None,
        run_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        keep_files: bool = False,
        input_data: str | os.PathLike[str] | None = None,
    ) -> None:
        check_options("trtexec backend", locals(), positive=(
            "timeout_s", "replica_duration_s", "power_interval_s"), nonnegative=("warmup_ms", "duration_s"),
            integers={"iterations": 1}, flags=("timing_cache", "verbose", "profile", "layer_info", "spin_wait",
                                               "power", "keep_files"),
            paths=("trtexec", "cache_dir", "calibration_cache", "power_root"), texts=("trt_version",), environments=("env",),
            lists=("build_args", "run_args", "power_rails"))
        self.trtexec = find_trtexec(trtexec)
        if timeout_s <= 0 or warmup_ms < 0 or duration_s < 0 or replica_duration_s <= 0 or power_interval_s <= 0 \
                or (iterations is not None and iterations < 1):
            raise ConfigError("timeout_s, replica_duration_s and power_interval_s must be > 0, warmup_ms and "
                              "duration_s >= 0, iterations >= 1")
        self.trt_version = str(trt_version) if trt_version else None
        self.timeout_s = float(timeout_s)
        self.warmup_ms = float(warmup_ms)
        self.iterations = iterations
        self.duration_s = float(duration_s)
        self.replica_duration_s = float(replica_duration_s)
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else _default_cache_dir()
        self.timing_cache = bool(timing_cache)
        self.calibration_cache = os.path.expanduser(calibration_cache) if calibration_cache else None
        if self.calibration_cache:  # trtexec would block on a FIFO or read a device: a regular file only
            check_regular(self.calibration_cache, "calibration cache")
        self.verbose = bool(verbose)
        self.profile = bool(profile)
        self.layer_info = bool(layer_info)
        self.spin_wait = bool(spin_wait)
        self.power = bool(power)
        self.power_root = os.path.expanduser(power_root) if power_root is not None else None
        self.power_interval_s = float(power_interval_s)
        self.power_rails = list(power_rails) if power_rails else None
        for args, what in ((build_args, "build_args"), (run_args, "run_args")):
            if args and any(not str(a).startswith("--") for a in args):
                raise ConfigError(f"{what} must be trtexec flags like --memPoolSize=dlaSRAM:1 (got {args})")
        self.build_args = [str(a) for a in build_args or []]
        self.run_args = [str(a) for a in run_args or []]
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.keep_files = bool(keep_files)
        self.input_data = load_input_data(input_data) if input_data else None  # --loadInputs, raw files

    def __repr__(self) -> str:
        return f"TrtexecBackend(trtexec={self.trtexec!r}, trt_version={self.trt_version!r})"

    # ------------------------------------------------------------------ probing
    def environ(self) -> dict[str, str]:
        """The environment trtexec runs in: this process's, with ``env`` on top."""
        env = dict(os.environ)
        env.update(self.env)
        return env

    def version(self) -> str:
        """TensorRT version of the trtexec binary, from ``trtexec --help`` (cached).

        Raises:
            BackendError: trtexec does not start, hangs or prints no version.
        """
        if self.trt_version:
            return self.trt_version
        try:
            p = subprocess.run([self.trtexec, "--help"], capture_output=True, text=True, errors="replace",  # noqa: S603
                               timeout=60, env=self.environ(), stdin=subprocess.DEVNULL, check=False)
        except subprocess.TimeoutExpired:
            raise BackendError(f"`{self.trtexec} --help` did not answer in 60 s; pass trt_version=... "
                               "or check the TensorRT installation") from None
        except OSError as exc:
            raise BackendError(f"cannot run {self.trtexec}: {exc}") from None
        version = version_from_text(p.stdout + "\n" + p.stderr)
        if not version:
            tail = (p.stdout + p.stderr).strip().splitlines()[-3:]
            raise BackendError(f"cannot tell the TensorRT version of {self.trtexec} from `trtexec --help` "
                               f"(exit status {p.returncode}; {' | '.join(tail) or 'no output'}); pass "
                               "trt_version='8.6.2' (the backend option) to say it")
        self.trt_version = version
        return version

    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """``backend``, TensorRT version, L4T/JetPack, module, power mode, locked clocks.

        Raises:
            BackendError: the version of trtexec cannot be read.
        """
        version = self.version()
        fp = device_fingerprint(self, version, platform, settings)
        have = version_tuple(version)[:2]
        want = version_tuple(settings.trt_version)[:2]
        if have != want:
            self.warn_once("trtver", "DLA rules are for TensorRT %s but trtexec is TensorRT %s; pass "
                            "trt_version=%r for matching predictions", settings.trt_version, version,
                            ".".join(map(str, have)))
        return fp

    # ------------------------------------------------------------------ measuring
    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        """Build and time the realised placement with trtexec; failures are returned, never raised,
        except the clocks check's stop (:meth:`JetsonBackend.clocked`, BackendError)."""
        m = self.clocked(lambda: self._measure_caught(realisation, platform, settings))
        m.extra["timed_input"] = self.input_data.label if self.input_data is not None else RANDOM_INPUT
        return m

    def _measure_caught(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        model = realisation.realized.model
        base: dict[str, Any] = dict(
            simulated=False, backend="trtexec", mode=settings.mode, precision=settings.precision,
            batch=int(model.batch), requested=realisation.requested.as_dict(),
        )
        workdir = None
        try:
            if settings.mode == "pipeline":
                return Measurement.failure("infeasible", PIPELINE_REASON, **base)
            version = self.version()
            base["backend"] = f"trtexec-{version}"
            workdir = self.cache_dir / "runs" / f"{os.getpid()}-{next(_RUN_IDS)}-{int(time.time() * 1000)}"
            workdir.mkdir(parents=True, exist_ok=True)
            if settings.mode == "replicas":
                return measure_replicas(self, realisation, platform, settings, version, base, workdir)
            return measure_engine(self, realisation, platform, settings, version, base, workdir)
        except BackendError as exc:
            return Measurement.failure("runtime_failed", str(exc), **base)
        except (ModelError, ConfigError) as exc:  # a model trtexec's command line cannot express (an input name
            # --shapes or --loadInputs can't)
            return Measurement.failure("infeasible", str(exc), **base)
        except OSError as exc:
            return Measurement.failure("runtime_failed", f"trtexec could not be run ({self.trtexec}): {exc}", **base)
        except Exception as exc:  # noqa: BLE001 - the study must go on
            log.exception("trtexec backend internal error")
            return Measurement.failure("crashed", f"placetune's trtexec backend failed: {type(exc).__name__}: {exc}",
                                       **base)
        finally:
            if workdir is not None and not self.keep_files:
                shutil.rmtree(workdir, ignore_errors=True)

    def time_plan(self, plan_file: str | os.PathLike[str], settings: "Settings", *, dla_core: int = -1,
                  batch: int = 1) -> Measurement:
        """Time an engine file built elsewhere with ``trtexec --loadEngine`` (e.g. the engine the
        tensorrt backend's worker built and timed, ``TensorRTBackend(save_plans=...)``): the same
        engine timed by both tools, so any difference is how each one times.

        Args:
            plan_file: a serialized engine of this trtexec's TensorRT version.
            settings: iterations, precision and mode recorded in the measurement.
            dla_core: the DLA core its DLA layers run on (``--useDLACore``), -1 for a GPU engine.
            batch: the engine's batch (throughput in samples per second).

        Returns:
            The measurement (``extra["commands"]["time"]`` is the command), or the failure; with the
            clocks read around it as around :meth:`measure` (the same run's reference): marked
            untrusted when they moved.

        Raises:
            BackendError: the clocks check's stop (:meth:`JetsonBackend.clocked`).
        """
        return self.clocked(lambda: self._time_plan_caught(plan_file, settings, dla_core, batch))

    def _time_plan_caught(self, plan_file: str | os.PathLike[str], settings: "Settings", dla_core: int,
                          batch: int) -> Measurement:
        base: dict[str, Any] = dict(simulated=False, backend="trtexec", mode="engine", precision=settings.precision,
                                    batch=int(batch))
        workdir = None
        try:
            version = self.version()
            base["backend"] = f"trtexec-{version}"
            workdir = self.cache_dir / "runs" / f"{os.getpid()}-{next(_RUN_IDS)}-{int(time.time() * 1000)}"
            workdir.mkdir(parents=True, exist_ok=True)
            device = f"DLA{dla_core}" if dla_core >= 0 else "GPU"
            eng = Engine(device, int(dla_core), int(batch), [], Path(plan_file))
            return time_built(self, eng, version, settings, workdir, dict(extra={"trt_version": version}, **base),
                              tag="plan")
        except BackendError as exc:
            return Measurement.failure("runtime_failed", str(exc), **base)
        except OSError as exc:
            return Measurement.failure("runtime_failed", f"trtexec could not be run ({self.trtexec}): {exc}", **base)
        finally:
            if workdir is not None and not self.keep_files:
                shutil.rmtree(workdir, ignore_errors=True)


def _default_cache_dir() -> Path:
    return default_cache_dir("trtexec")
