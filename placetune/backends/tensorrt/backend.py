"""The ``tensorrt`` backend: build and time each placement with TensorRT on the Jetson itself.

Every build+time job runs in an isolated worker process (:mod:`placetune.backends.tensorrt.worker`,
driven by :class:`WorkerPool`): a segfault, a hang or a CUDA error becomes a measurement
with status ``crashed``, ``timeout``, ``build_failed`` or ``runtime_failed`` and the study
goes on with a fresh worker. TensorRT and PyCUDA are imported only inside the worker, so
this module imports anywhere.

Three modes (DESIGN.md): ``engine`` builds one engine; ``pipeline`` cuts the ONNX model into
one sub-model per segment (:mod:`placetune.placement.cut`), builds one engine per segment (GPU, or
DLA core k with GPU fallback; engines are cached on disk and shared between placements,
:mod:`placetune.backends.tensorrt.cache`) and runs them chained by CUDA streams and events after
checking their outputs against one all-GPU engine; ``replicas`` runs one whole-network
engine per device at once (:mod:`placetune.backends.tensorrt.pipeline`).

What runs where is read back from TensorRT's build log (:mod:`placetune.backends.tensorrt.buildlog`;
the engine mode's worker reply becomes a Measurement in :mod:`placetune.backends.tensorrt.engine_reply`):
``Measurement.realized`` is what TensorRT placed, ``Measurement.fallback`` says why layers
asked on a DLA ran on the GPU, and ``extra["realized_vs_predicted"]`` lists where TensorRT
disagreed with placetune's own DLA rules.

The engine that is built is the placement placetune *predicts* TensorRT will realise (the
evaluator's cache key), on the realisation's DLA core; TensorRT may move further layers.

Example:
    >>> from placetune import Evaluator, Placement
    >>> from placetune.backends.tensorrt import TensorRTBackend
    >>> be = TensorRTBackend(worker_python="/usr/bin/python3")        # doctest: +SKIP
    >>> ev = Evaluator("resnet18", "orin-agx", backend=be, precision="int8")  # doctest: +SKIP
    >>> m = ev.evaluate(Placement.all_dla(ev.model))                   # doctest: +SKIP
    >>> m.status, m.realized["/avgpool/GlobalAveragePool"], m.dla_loadables  # doctest: +SKIP
    ('ok', 'GPU', {'DLA0': 1})
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import BackendError, ConfigError
from placetune.files.read import check_regular
from placetune.hardware.power import PowerSampler, energy_per_inference_mj
from placetune.inputdata import RANDOM_INPUT, load_input_data
from placetune.measurement import Measurement
from placetune.memo import Memo
from placetune.validate import check_options
from placetune.backends.tensorrt import pipeline as trt_pipeline
from placetune.backends.onnx_prep import has_qdq
from placetune.backends.tensorrt.engine_reply import engine_measurement
from placetune.backends.tensorrt.cache import file_digest
from placetune.backends.tensorrt.jobs import JobContext, run_timed, timing_cache_path
from placetune.backends.tensorrt.pool import WORKER_FILE, RecycleLimits, WorkerClient, WorkerPool, WorkerReply

from placetune.backends.base import ALL_MODES, BUILD_TIMEOUT_S, Capabilities, default_cache_dir
from placetune.backends.jetson import (
    JetsonBackend,
    device_fingerprint,
    dla_cores_used,
    prepared_onnx,
    untyped_int8,
)

if TYPE_CHECKING:
    import onnx

    from placetune.hardware.platforms import Platform
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = [
    "TensorRTBackend", "WorkerPool", "WorkerClient", "WorkerReply", "WORKER_FILE",
    "MODES_NOT_IMPLEMENTED", "DLA_POOLS", "GATE_TOLERANCE",
]

log = logging.getLogger(__name__)

#: Kept for callers of earlier versions: every mode is implemented now.
MODES_NOT_IMPLEMENTED = "pipeline/replicas modes on TensorRT are not implemented yet"
#: Pipeline correctness gate: the largest relative L2 error ||pipeline - reference|| / ||reference||
#: of any network output, per precision. Both sides run at the same precision, so the error
#: is what re-rounding at the cuts and other fusions/tactics add. The reference is one all-GPU
#: engine; for INT8 without a calibration cache (trtexec-style placeholder ranges) it is the
#: unsplit engine of the same placement (its DLA layers in INT8 on the DLA, as in the pipeline).
GATE_TOLERANCE = {"fp32": 1e-3, "fp16": 2e-2, "int8": 0.15}
#: Accepted names of ``dla_memory_pools`` keys -> ``trt.MemoryPoolType`` members.
DLA_POOLS = {
    "dla_sram": "DLA_MANAGED_SRAM", "dla_managed_sram": "DLA_MANAGED_SRAM", "dlasram": "DLA_MANAGED_SRAM",
    "dla_local_dram": "DLA_LOCAL_DRAM", "dlalocaldram": "DLA_LOCAL_DRAM",
    "dla_global_dram": "DLA_GLOBAL_DRAM", "dlaglobaldram": "DLA_GLOBAL_DRAM",
    "workspace": "WORKSPACE",
}


def _version_tuple(text: str) -> tuple[int, int]:
    m = re.match(r"(\d+)(?:\.(\d+))?", text or "")
    return (int(m.group(1)), int(m.group(2) or 0)) if m else (0, 0)


def _rules_version(text: str, parts: int | None = None) -> str:
    """The version placetune's DLA rules need: ``major.minor`` before 11, ``major.minor.patch``
    from 11 on (11.4.0 has no DLA on Jetson, 11.4.1 has)."""
    nums = [int(x) for x in re.findall(r"\d+", text or "")[:3]] + [0, 0, 0]
    n = parts or (3 if nums[0] >= 11 else 2)
    return ".".join(str(x) for x in nums[:n])


def _default_cache_dir() -> Path:
    return default_cache_dir("tensorrt")


def _normalise_pools(pools: dict[str, int] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, size in (pools or {}).items():
        name = DLA_POOLS.get(str(key).lower(), str(key).upper())
        if name not in DLA_POOLS.values():
            raise ConfigError(f"unknown memory pool {key!r}; pools are {', '.join(sorted(set(DLA_POOLS.values())))}")
        size = int(size)
        if size <= 0:
            raise ConfigError(f"memory pool {key!r} must be > 0 bytes (got {size})")
        if name.startswith("DLA") and (size < 4096 or size & (size - 1)):
            raise ConfigError(f"DLA memory pool {key!r} must be a power of 2 of at least 4 KiB (got {size})")
        out[name] = size
    return out


# =========================================================================================
# the backend
# =========================================================================================
def worker_interpreter(worker_python: str | os.PathLike[str] | None) -> str:
    """The Python that runs the TensorRT worker: ``worker_python`` (a leading ``~``: the home folder; a bare
    name: looked up on PATH), else this interpreter.

    Raises:
        ConfigError: a path that does not exist, or a name not on PATH.
    """
    python = os.path.expanduser(os.fspath(worker_python) if worker_python else sys.executable)
    if os.sep in python and not os.path.exists(python):
        raise ConfigError(f"worker Python {python} does not exist; pass an existing interpreter, "
                          "e.g. --worker-python /usr/bin/python3")
    if os.sep not in python and shutil.which(python) is None:
        raise ConfigError(f"worker Python {python!r} is not on PATH")
    return python


class TensorRTBackend(JetsonBackend):
    """Build and time placements with TensorRT (Python API) in an isolated worker process.

    Modes: ``engine`` (one engine, one DLA core), ``pipeline`` (one engine per segment,
    chained; see :mod:`placetune.backends.tensorrt.pipeline`) and ``replicas`` (one whole-network
    engine per device, all at once).

    Args:
        worker_python: interpreter that runs the worker; JetPack's TensorRT bindings live in
            the system Python (``/usr/bin/python3``). Default: this interpreter.
        timeout_s: limit for building and timing one placement; the worker is killed past it.
        start_timeout_s: limit for a new worker to start.
        warmup_ms: warm-up before timing (trtexec's default is 200 ms).
        iterations: timed inferences (default: ``settings.iterations``).
        profile_iterations: inferences of the separate per-layer profiling run (0: none).
        cache_dir: where prepared ONNX files and timing caches go
            (default ``$PLACETUNE_CACHE_DIR/tensorrt`` or ``~/.cache/placetune/tensorrt``).
        timing_cache: reuse a timing cache file per platform and TensorRT version.
        calibration_cache: an INT8 calibration cache file (TensorRT 8.x/10.x); without one,
            INT8 builds use trtexec-style per-tensor dynamic ranges (fine for timing only).
        dla_memory_pools: pool limits in bytes, e.g. ``{"dla_sram": 1 << 20,
            "dla_local_dram": 1 << 30, "dla_global_dram": 1 << 29, "workspace": 1 << 30}``.
        worker_env: extra environment variables for the worker.
        inspector: store the engine inspector's JSON (DETAILED verbosity; its DLA fields are
            unverified) in ``extra["engine_inspector"]``, cut at 500,000 characters.
        verbose_log: keep TensorRT's VERBOSE messages too.
        engine_cache: pipeline / replicas: keep built engines on disk (``cache_dir/engines``)
            and reuse them for later placements that share a segment; engine mode with
            ``save_plans``: load a kept engine of the same key rather than build it again.
        gate: pipeline: check the pipeline's outputs against one all-GPU engine on random
            input before timing; a mismatch is ``runtime_failed`` with the numbers.
        gate_tolerance: per precision overrides of :data:`GATE_TOLERANCE`.
        timeline_frames: pipeline: frames stamped per engine for ``Measurement.timeline``
            (at least ``2 * frames_in_flight + 2``).
        replicas_duration_s: replicas: how long all instances run at once (trtexec's
            ``--duration`` default is 3 s).
        cut_formats: pipeline: build each cut tensor a DLA engine reads or writes in the DLA's
            native type and format on both sides (INT8 ``kCHW32`` / FP16 ``kCHW16``:
            :func:`placetune.placement.cut_formats.cut_formats`), so no GPU reformat runs at the
            cut; if that does not build, the pipeline is rebuilt with TensorRT's default FP32
            linear I/O and ``extra["cut_formats_failed"]`` says why. False: always the default.
        test_wrong_cut: testing only: swap two same-typed inputs of the first segment that
            has them (a deliberately wrong cut) so that the gate can be seen to catch it.
        save_plans: engine mode: also write each engine built to this folder
            (``extra["plan_file"]``), e.g. for ``trtexec --loadEngine`` to time the very engine
            the worker timed (``placetune selftest`` does), named by its engine cache key with its
            build record beside it; the same placement measured again (a re-measurement,
            selftest's second timing) loads it (``extra["engine_cache"]``, ``extra["engine_digest"]``).
        power: engine mode: sample the board's power rails (INA3221, :mod:`placetune.hardware.power`)
            from this process while the worker times, cut to the timed loop's window (the worker
            reports it in ``time.monotonic()`` terms), for ``power_w`` and ``energy_mj``; the timed
            loop then runs at least ``power_duration_s``.
        power_duration_s: the shortest timed loop when ``power`` is on (trtexec's ``--duration``).
        power_root: sysfs root of the rails (default ``$PLACETUNE_SYSFS_ROOT`` or ``/``).
        power_interval_s: time between power samples.
        power_rails: rail names summed as module power (default: the input rail, else the rails no other contains).
        input_data: a ``.npz`` of the network's inputs (:mod:`placetune.inputdata`) the engines are
            timed on and the pipeline's gate compares on, instead of random input.
        worker_recycle: when a healthy worker is replaced between jobs, e.g. ``{"max_jobs": 100,
            "max_rss_growth_mb": 1024, "max_held_mb": 64}`` (:class:`~placetune.backends.tensorrt.pool.RecycleLimits`).

    Raises:
        ConfigError: bad pool sizes, a missing calibration cache or a worker Python that
            does not exist.
    """

    name = "tensorrt"
    # gpu_time: the pipeline's GPU busy time per frame; energy: engine mode with the option power = true
    capabilities = Capabilities(simulated=False, modes=ALL_MODES,
                                objectives=("latency", "throughput", "energy", "gpu_time"),
                                probe=True, calibration_cache=True, input_data=True)

    @classmethod
    def why_unmeasurable(cls, metric: str, mode: str, options: Mapping[str, Any]) -> str | None:
        """GPU busy time comes from the pipeline's events only; energy from the power rails, sampled
        from the parent around the worker's timed loop in engine mode, with ``power = true``."""
        if metric == "gpu_time" and mode != "pipeline":
            return ("the tensorrt backend reports the GPU's busy time per frame in pipeline mode only (from its "
                    "streams' events): use --mode pipeline, --backend simulate or another objective")
        if metric == "energy" and mode != "engine":
            return ("the tensorrt backend samples the power rails in engine mode only; use --backend trtexec "
                    "(engine or replicas mode), which samples them while trtexec times, or engine mode, or "
                    "another objective")
        if metric == "energy" and not options.get("power", False):
            return ("the tensorrt backend samples the power rails only with its backend option power = true (off "
                    "by default: the timed loop then runs power_duration_s, 3 s): set it under [backend_options], "
                    "or use --backend trtexec")
        return super().why_unmeasurable(metric, mode, options)

    def __init__(
        self,
        worker_python: str | None = None,
        *,
        timeout_s: float = BUILD_TIMEOUT_S,
        start_timeout_s: float = 120.0,
        warmup_ms: float = 200.0,
        iterations: int | None = None,
        profile_iterations: int = 10,
        cache_dir: str | os.PathLike[str] | None = None,
        timing_cache: bool = True,
        calibration_cache: str | os.PathLike[str] | None = None,
        dla_memory_pools: dict[str, int] | None = None,
        worker_env: dict[str, str] | None = None,
        inspector: bool = True,
        verbose_log: bool = False,
        engine_cache: bool = True,
        gate: bool = True,
        gate_tolerance: dict[str, float] | None = None,
        timeline_frames: int = 4,
        replicas_duration_s: float = 3.0,
        cut_formats: bool = True,
        test_wrong_cut: bool = False,
        save_plans: str | os.PathLike[str] | None = None,
        power: bool = False,
        power_duration_s: float = 3.0,
        power_root: str | os.PathLike[str] | None = None,
        power_interval_s: float = 0.05,
        power_rails: list[str] | None = None,
        worker_recycle: dict[str, Any] | None = None,
        input_data: str | os.PathLike[str] | None = None,
    ) -> None:
        check_options("tensorrt backend", locals(), positive=(
            "timeout_s", "start_timeout_s", "replicas_duration_s", "power_duration_s", "power_interval_s"),
            nonnegative=("warmup_ms",), integers={"iterations": 1, "profile_iterations": 0, "timeline_frames": 1},
            flags=("timing_cache", "inspector", "verbose_log", "engine_cache", "gate", "cut_formats",
                   "test_wrong_cut", "power"),
            paths=("worker_python", "cache_dir", "calibration_cache", "save_plans", "power_root"),
            tables=("dla_memory_pools", "worker_recycle"), environments=("worker_env",), positive_tables=("gate_tolerance",),
            lists=("power_rails",))
        self.worker_python = worker_interpreter(worker_python)
        if timeout_s <= 0 or warmup_ms < 0 or profile_iterations < 0 or (iterations is not None and iterations < 1):
            raise ConfigError("timeout_s must be > 0, warmup_ms and profile_iterations >= 0, iterations >= 1")
        self.timeout_s = float(timeout_s)
        self.warmup_ms = float(warmup_ms)
        self.iterations = iterations
        self.profile_iterations = int(profile_iterations)
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir is not None else _default_cache_dir()
        self.timing_cache = bool(timing_cache)
        self.calibration_cache = os.path.expanduser(calibration_cache) if calibration_cache else None
        if self.calibration_cache:  # a regular file (never a FIFO or a device), as every file a user names
            check_regular(self.calibration_cache, "calibration cache")
        self.memory_pools = _normalise_pools(dla_memory_pools)
        self.input_data = load_input_data(input_data) if input_data else None
        self.inspector = bool(inspector)
        self.verbose_log = bool(verbose_log)
        unknown = set(gate_tolerance or {}) - set(GATE_TOLERANCE)
        if unknown:
            raise ConfigError(f"gate_tolerance names unknown precisions {sorted(unknown)}; "
                              f"precisions are {', '.join(GATE_TOLERANCE)}")
        if any(float(v) <= 0 for v in (gate_tolerance or {}).values()):
            raise ConfigError("gate_tolerance values must be > 0")
        if timeline_frames < 1 or replicas_duration_s <= 0:
            raise ConfigError("timeline_frames must be >= 1 and replicas_duration_s > 0")
        self.engine_cache = bool(engine_cache)
        self.gate = bool(gate)
        self.gate_tolerance = {**GATE_TOLERANCE, **{k: float(v) for k, v in (gate_tolerance or {}).items()}}
        self.timeline_frames = int(timeline_frames)
        self.replicas_duration_s = float(replicas_duration_s)
        self.cut_formats = bool(cut_formats)
        self.test_wrong_cut = bool(test_wrong_cut)
        self.save_plans = Path(save_plans).expanduser() if save_plans is not None else None
        if power_duration_s <= 0 or power_interval_s <= 0:
            raise ConfigError("power_duration_s and power_interval_s must be > 0")
        self.power = bool(power)
        self.power_duration_s = float(power_duration_s)
        self.power_root = os.path.expanduser(power_root) if power_root is not None else None
        self.power_interval_s = float(power_interval_s)
        self.power_rails = list(power_rails) if power_rails else None
        self._sources: Memo["onnx.ModelProto"] = Memo(1)  # the last model's ONNX with weights
        self.pool = WorkerPool(self.worker_python, worker_env, start_timeout_s,
                               RecycleLimits.from_options(worker_recycle))
        self._probe: dict[str, Any] | None = None

    def job_context(self) -> JobContext:
        """What a pipeline or replicas job is built and timed with: this backend's options now,
        its worker pool and its source ONNX memory (:mod:`placetune.backends.tensorrt.pipeline`)."""
        return JobContext(
            pool=self.pool, cache_dir=self.cache_dir, timeout_s=self.timeout_s, warmup_ms=self.warmup_ms,
            iterations=self.iterations, profile_iterations=self.profile_iterations, timing_cache=self.timing_cache,
            calibration_cache=self.calibration_cache, memory_pools=self.memory_pools, verbose_log=self.verbose_log,
            engine_cache=self.engine_cache, gate=self.gate, gate_tolerance=self.gate_tolerance,
            timeline_frames=self.timeline_frames, replicas_duration_s=self.replicas_duration_s,
            cut_formats=self.cut_formats, test_wrong_cut=self.test_wrong_cut, sources=self._sources,
            inspector=self.inspector, input_data=self._input_file(),
            clock_watch=self.clock_watch, locked_clocks=self.locked_clocks)

    def _input_file(self) -> str | None:
        """The input data as the worker reads it: a copy under the cache folder named by its hash."""
        return self.input_data.saved(self.cache_dir / "inputs") if self.input_data is not None else None

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Stop the worker process."""
        self.pool.close()

    def __enter__(self) -> "TensorRTBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"TensorRTBackend(worker_python={self.worker_python!r}, timeout_s={self.timeout_s})"

    # ------------------------------------------------------------------ probing
    def probe(self, refresh: bool = False) -> dict[str, Any]:
        """The worker's view of TensorRT: ``trt_version``, ``num_dla_cores``, ``pycuda_version``,
        errors (``trt_error``...). Cached; a failed probe is retried next time."""
        if self._probe is not None and not refresh:
            return self._probe
        reply = self.pool.run({"op": "probe"}, timeout_s=max(60.0, self.pool.start_timeout_s))
        if reply.kind != "result":
            why = reply.signal or (f"exit status {reply.returncode}" if reply.returncode is not None else reply.kind)
            return {"trt_version": None, "trt_error": f"the worker {reply.kind} ({why}) while probing: "
                    f"{reply.stderr_tail[-500:]}"}
        self._probe = reply.result
        return self._probe

    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """TensorRT version, L4T/JetPack, module, power mode and whether clocks are locked.

        Raises:
            BackendError: the worker cannot import TensorRT (``placetune doctor`` says why).
        """
        p = self.probe()
        version = p.get("trt_version")
        if not version:
            raise BackendError(
                f"TensorRT cannot be used by {self.worker_python}: {p.get('trt_error')}. Run `placetune doctor`; "
                "on JetPack create the venv with --system-site-packages, or pass --worker-python /usr/bin/python3"
            )
        fp = device_fingerprint(self, version, platform, settings, dla_cores=p.get("num_dla_cores"))
        rules = _rules_version(version)
        if _rules_version(settings.trt_version, len(rules.split("."))) != rules:
            self.warn_once("trtver", "DLA rules are for TensorRT %s but the worker has TensorRT %s; "
                            "pass trt_version=%r for matching predictions", settings.trt_version, version, rules)
        return fp

    # ------------------------------------------------------------------ measuring
    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        """Build and time the realised placement in a worker; failures are returned, never raised,
        except the clocks check's stop (:meth:`JetsonBackend.clocked`, BackendError)."""
        return self.clocked(lambda: self._measure_caught(realisation, platform, settings))

    def _measure_caught(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        model = realisation.realized.model
        base: dict[str, Any] = dict(
            simulated=False, backend="tensorrt", mode=settings.mode, precision=settings.precision,
            batch=int(model.batch), requested=realisation.requested.as_dict(),
        )
        try:
            m = self._measure(realisation, platform, settings, base)
            m.extra["timed_input"] = self.input_data.label if self.input_data is not None else RANDOM_INPUT
            if settings.precision == "int8" and m.extra is not None:  # where the INT8 ranges came from
                m.extra.setdefault("int8_ranges", "calibration-cache" if self.calibration_cache else
                                   "qdq" if model.proto is not None and has_qdq(model.proto) else "placeholder")
            return m
        except Exception as exc:  # noqa: BLE001 - the study must go on
            log.exception("TensorRT backend internal error")
            return Measurement.failure("crashed", f"placetune's TensorRT backend failed: {type(exc).__name__}: {exc}",
                                       **base)

    def _measure(self, r: "Realisation", platform: "Platform", settings: "Settings", base: dict[str, Any]) -> Measurement:
        p = self.probe()
        version = p.get("trt_version")
        if not version:
            return Measurement.failure("runtime_failed", f"TensorRT is not usable by the worker: {p.get('trt_error')}; "
                                       "run `placetune doctor`", **base)
        base["backend"] = f"tensorrt-{version}"
        model = r.realized.model
        predicted = r.realized.as_dict()
        dla_layers = [n for n, d in predicted.items() if d != "GPU"]
        core = r.dla_core if (r.dla_core is not None and dla_layers) else -1
        reported = p.get("num_dla_cores")
        cores = dla_cores_used(platform, reported)  # an emulated module's, not its developer kit's
        if core >= 0 and cores is not None and core >= cores:
            module = f" (a {platform.title} has {cores})" if reported is not None and cores < int(reported) else ""
            return Measurement.failure(
                "infeasible", f"the placement uses DLA{core} but TensorRT {version} reports {reported} DLA core(s) "
                f"here{module}", realized=predicted, **base)
        major = _version_tuple(version)[0]
        strongly_typed = major >= 11
        refused = untyped_int8(model, settings.precision, version, strongly_typed, base)
        if refused is not None:
            return refused
        if settings.mode in ("pipeline", "replicas"):
            run = trt_pipeline.measure_pipeline if settings.mode == "pipeline" else trt_pipeline.measure_replicas
            return run(self.job_context(), r, platform, settings, base, version, cores)
        onnx_path = prepared_onnx(model, self.cache_dir, settings.precision, strongly_typed, "TensorRT", base)
        if isinstance(onnx_path, Measurement):
            return onnx_path
        job = {
            "op": "measure",
            "onnx": str(onnx_path),
            "input_shapes": {k: list(v) for k, v in model.input_shapes.items()},
            "precision": settings.precision,
            "strongly_typed": strongly_typed,
            "dla_core": core,
            "gpu_fallback": settings.gpu_fallback,
            "dla_layers": dla_layers,
            "timing_cache": str(timing_cache_path(self.cache_dir, platform, version, settings.power_mode,
                                                  self.locked_clocks)) if self.timing_cache else None,
            "calibration_cache": self.calibration_cache if settings.precision == "int8" and not strongly_typed else None,
            "memory_pools": self.memory_pools,
            "iterations": self.iterations or settings.iterations,
            "warmup_ms": self.warmup_ms,
            "profile_iterations": self.profile_iterations,
            "inspector": self.inspector,
            "verbose_log": self.verbose_log,
        }
        if self.input_data is not None:  # timed on the data given, not on random input
            job["input_data"] = self._input_file()
        if self.save_plans is not None:
            self.save_plans.mkdir(parents=True, exist_ok=True)
            key = self._plan_key(r, platform, settings, version, onnx_path, core, dla_layers)
            job["save_plan"] = job["plan_cache"] = str(self.save_plans / f"{key}.plan")
            job["reuse_plan"] = self.engine_cache
        sampler = None
        if self.power:  # the rails are read here, around the worker's timed loop (its window cuts them)
            job["min_timed_s"] = self.power_duration_s
            sampler = PowerSampler(self.power_root, self.power_interval_s, total_rails=self.power_rails).start()
        try:  # the clocks too, on a Jetson: those around the worker's timed loop are judged, not the build's
            reply = run_timed(self.pool, job, self.timeout_s + (self.power_duration_s if self.power else 0.0),
                              self.clock_watch)
        finally:
            if sampler is not None:
                sampler.stop()
        m = engine_measurement(reply, r, core, version, base, self.timeout_s)
        if sampler is not None and m.ok:
            self._add_energy(m, sampler, reply.result.get("timed_window"))
        return m

    def _plan_key(self, r: "Realisation", platform: "Platform", settings: "Settings", version: str,
                  onnx_path: Path, core: int, dla_layers: list[str]) -> str:
        """The engine cache key of an engine mode job's engine (:meth:`JobContext.key`: what a pipeline
        segment's engine is keyed by). An engine file of the key kept before is loaded, not built again:
        the engine of the first build timed a second time (a re-measurement, selftest's second timing)."""
        ctx = self.job_context()
        # the worker's own INT8 ranges and this build's log level: not a pipeline engine of the same file
        content = file_digest(onnx_path) + "-measure" + ("-verbose" if self.verbose_log else "")
        return ctx.key(f"DLA{core}" if core >= 0 else "GPU", content, settings, platform, version,
                       ctx.common(platform, settings, version), dla_layers,
                       {k: list(v) for k, v in r.realized.model.input_shapes.items()})

    @staticmethod
    def _add_energy(m: Measurement, sampler: Any, window: Any) -> None:
        """Mean power over the worker's timed loop and energy per inference (mJ) from its throughput."""
        reading = sampler.reading(*window) if isinstance(window, list) and len(window) == 2 else sampler.reading()
        m.extra["power"] = reading.to_dict()
        m.power_w = reading.mean_w
        qps = m.throughput_fps / m.batch if m.throughput_fps else None
        m.energy_mj = energy_per_inference_mj(reading.mean_w, qps=qps)
        if m.energy_mj is not None:
            m.extra["energy_per_sample_mj"] = m.energy_mj / m.batch
