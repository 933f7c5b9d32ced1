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
does). That flag exists from TensorRT 8.6: on 8.5 only all-GPU and all-DLA placements (layers
the DLA cannot run fall back by themselves) can be built; a mixed placement is ``infeasible``
with a reason that points to the ``tensorrt`` backend.

Modes: ``engine`` (one engine), ``replicas`` (one whole-network engine per device, all timed
at once as separate trtexec processes for ``replica_duration_s``, like NVIDIA's
jetson_benchmarks; total and per-replica throughput over the window when all of them ran).
``pipeline`` needs segment engines chained in one process: that is the ``tensorrt``
backend's job, so it is ``infeasible`` here.

trtexec is found from ``trtexec=`` (the CLI's ``--trtexec PATH``), then the
``PLACETUNE_TRTEXEC`` environment variable, then ``PATH``, then ``/usr/src/tensorrt/bin/trtexec``.
Processes get an argument list (no shell); a build or run past ``timeout_s`` is killed
(``timeout``), one killed by a signal is ``crashed``, ``&&&& FAILED`` is ``build_failed`` or
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
import re
import shutil
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import BackendError, ConfigError, PlacementError
from placetune.measurement import Measurement, latency_stats
from placetune.backends.tensorrt import env as trt_env
from placetune.backends.tensorrt.buildlog import BuildLog, attribute_profile, locate, parse_build_log
from placetune.backends.trtexec.command import (
    LAYER_DEVICE_TYPES_SINCE,
    MAX_ARG_CHARS,
    layer_device_types,
    shapes_arg,
)
from placetune.backends.trtexec.parse import (
    PerfSummary,
    error_lines,
    parse_export_profile,
    parse_export_times,
    parse_layer_info,
    parse_summary,
    version_from_text,
)

from placetune.settings import resolve_replicas

from placetune.backends.base import default_cache_dir
from placetune.backends.onnx_prep import prepare_onnx, source_has_qdq
if TYPE_CHECKING:
    from placetune.model.model import Model
    from placetune.hardware.platforms import Platform
    from placetune.hardware.power import PowerReading
    from placetune.placement.realise import Realisation
    from placetune.settings import Settings

__all__ = ["TrtexecBackend", "find_trtexec", "which_trtexec", "trtexec_candidates", "ENV_VAR",
           "PIPELINE_REASON", "LAYER_DEVICE_TYPES_SINCE"]

log = logging.getLogger(__name__)

#: Environment variable naming the trtexec binary.
ENV_VAR = "PLACETUNE_TRTEXEC"
#: Why pipeline mode is not measured by this backend.
PIPELINE_REASON = (
    "pipeline mode runs one engine per segment, chained in one process with CUDA streams and events: "
    "trtexec runs whole networks only. Measure pipeline placements with the tensorrt backend "
    "(--backend tensorrt); the trtexec backend does engine and replicas modes"
)
_LOG_KEEP = 400
_INSPECTOR_MAX_CHARS = 500_000
_MAX_SAMPLES = 5000
_END_MARKERS = ("Timing trace has", "=== Trace details ===", "=== Performance summary ===")
_STATIC_SHAPES = "Static model does not take explicit shapes"
_NO_CORE = re.compile(r"Cannot create DLA engine, (\d+) not available")
_RUN_IDS = itertools.count()


# =========================================================================================
# finding trtexec
# =========================================================================================
def trtexec_candidates(explicit: str | os.PathLike[str] | None = None) -> list[tuple[str, str | None]]:
    """Where trtexec is looked for, in order: ``(place, path found or None)``."""
    if explicit:
        return [(f"--trtexec {explicit}", _executable(str(explicit)))]
    env = os.environ.get(ENV_VAR)
    if env:
        return [(f"${ENV_VAR}={env}", _executable(env))]
    out: list[tuple[str, str | None]] = [("PATH", shutil.which("trtexec"))]
    for d in trt_env.TRTEXEC_DIRS:
        p = str(Path(d) / "trtexec")
        out.append((p, p if _is_exe(p) else None))
    return out


def _is_exe(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _executable(value: str) -> str | None:
    if os.sep in value or (os.altsep and os.altsep in value):
        return os.path.abspath(value) if _is_exe(value) else None
    return shutil.which(value)


def which_trtexec(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """The trtexec binary by the backend's lookup order, None when there is none
    (``placetune doctor`` uses this, so it agrees with the backend)."""
    for _, path in trtexec_candidates(explicit):
        if path:
            return path
    return None


def find_trtexec(explicit: str | os.PathLike[str] | None = None) -> str:
    """The trtexec binary: ``explicit`` (``--trtexec PATH``), else ``$PLACETUNE_TRTEXEC``, else
    ``PATH``, else ``/usr/src/tensorrt/bin/trtexec``. An explicit path or the environment
    variable, when given, must be right: placetune does not silently use another trtexec.

    Raises:
        BackendError: no executable trtexec; the message names every place looked.
    """
    cands = trtexec_candidates(explicit)
    for _, path in cands:
        if path:
            return path
    places = "; ".join(p for p, _ in cands)
    if explicit or os.environ.get(ENV_VAR):
        raise BackendError(f"trtexec not found: {places} is not an executable file. Pass the path of TensorRT's "
                           "trtexec (JetPack: /usr/src/tensorrt/bin/trtexec)")
    raise BackendError(f"trtexec not found (looked in: {places}). JetPack installs it as "
                       f"/usr/src/tensorrt/bin/trtexec (package tensorrt / libnvinfer-bin); pass --trtexec PATH, "
                       f"set {ENV_VAR}=PATH, or add its directory to PATH")


def _vt(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version or "")[:3]) or (0,)


# =========================================================================================
# running trtexec
# =========================================================================================
@dataclass
class _Run:
    """One finished trtexec process."""

    argv: list[str]
    log_path: Path
    returncode: int | None = None
    timed_out: bool = False
    signal: str | None = None
    started: float = 0.0
    ended: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended - self.started)

    def lines(self) -> list[str]:
        """The output without ``[V]`` (verbose) lines, which can run to many MB for big models."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return [x.rstrip("\n") for x in fh if "] [V] " not in x]
        except OSError:
            return []


class _Proc:
    """A trtexec process whose output goes to a log file, line by line, with the arrival
    time (``time.monotonic()``) of the first line that starts each ``markers`` text."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str], cwd: Path,
                 markers: tuple[str, ...] = ()) -> None:
        self.run = _Run(argv, log_path)
        self._markers = markers
        self._fh = open(log_path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        self.run.started = time.monotonic()
        try:
            self.p = subprocess.Popen(  # noqa: S603 - an argument list, no shell
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=str(cwd), start_new_session=True, text=True, errors="replace", bufsize=1,
            )
        except OSError:
            self._fh.close()
            raise
        self._reader = threading.Thread(target=self._read, name="trtexec-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            now = time.monotonic()
            self._fh.write(line)
            if self._markers and len(self.run.marks) < len(self._markers):
                text = line.split("] ", 2)[-1] if line.startswith("[") else line
                for m in self._markers:
                    if m not in self.run.marks and m in text:
                        self.run.marks[m] = now
        self._fh.flush()

    def wait(self, deadline: float) -> _Run:
        try:
            self.p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.run.timed_out = True
            self.kill()
            self.p.wait()
        except BaseException:  # Ctrl-C: trtexec runs in its own session and would not see it
            self.kill()
            self.p.wait()
            raise
        self.run.ended = time.monotonic()
        self._reader.join(timeout=10)
        self._fh.close()
        rc = self.p.returncode
        self.run.returncode = rc
        if rc is not None and rc < 0 and not self.run.timed_out:
            try:
                self.run.signal = signal.Signals(-rc).name
            except ValueError:
                self.run.signal = f"signal {-rc}"
        return self.run

    def kill(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                self.p.kill()
            except ProcessLookupError:
                pass


@dataclass
class _Engine:
    """What one engine build asks for and what came of it."""

    device: str  # GPU, DLA0, DLA1
    core: int  # -1: GPU engine
    batch: int
    build_argv: list[str]
    engine_path: Path
    notes: list[str] = field(default_factory=list)
    run: _Run | None = None
    blog: BuildLog | None = None
    layer_info_path: Path | None = None


# =========================================================================================
# the backend
# =========================================================================================
class TrtexecBackend:
    """Build and time placements with ``trtexec`` (engine and replicas modes).

    Args:
        trtexec: the trtexec binary (path or name on PATH). Default: ``$PLACETUNE_TRTEXEC``,
            then ``PATH``, then ``/usr/src/tensorrt/bin/trtexec``.
        trt_version: TensorRT version of that trtexec (default: read from ``trtexec --help``).
        timeout_s: limit for one build and, separately, one timing run (beyond its duration).
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
        verbose: ``--verbose`` builds (the log also has ``Timing Runner: ... (DLA)`` lines).
        profile: ``--exportProfile`` (+ ``--separateProfileRun``) for per-layer times.
        layer_info: ``--exportLayerInfo`` with ``--profilingVerbosity=detailed``.
        spin_wait: ``--useSpinWait`` (TensorRT < 11; 11 spins by default).
        power: sample the INA3221 rails during timed runs (energy per inference).
        power_root: sysfs root for the rails (default ``$PLACETUNE_SYSFS_ROOT`` or ``/``).
        power_interval_s: time between power samples.
        power_rails: rail names summed as module power (default: the input rail, else all).
        build_args: extra build flags (e.g. ``["--memPoolSize=dlaSRAM:1"]``).
        run_args: extra timing flags.
        env: extra environment variables for trtexec (e.g. ``CUDA_DEVICE_MAX_CONNECTIONS``).
        keep_files: keep run directories (engines, logs, exports) instead of deleting them.

    Raises:
        BackendError: no trtexec (the message names every place looked).
        ConfigError: bad numbers, a missing calibration cache.
    """

    name = "trtexec"
    simulated = False

    def __init__(
        self,
        trtexec: str | os.PathLike[str] | None = None,
        *,
        trt_version: str | None = None,
        timeout_s: float = 900.0,
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
    ) -> None:
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
        self.cache_dir = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
        self.timing_cache = bool(timing_cache)
        self.calibration_cache = str(calibration_cache) if calibration_cache else None
        if self.calibration_cache and not Path(self.calibration_cache).is_file():
            raise ConfigError(f"calibration cache {self.calibration_cache} does not exist")
        self.verbose = bool(verbose)
        self.profile = bool(profile)
        self.layer_info = bool(layer_info)
        self.spin_wait = bool(spin_wait)
        self.power = bool(power)
        self.power_root = str(power_root) if power_root is not None else None
        self.power_interval_s = float(power_interval_s)
        self.power_rails = list(power_rails) if power_rails else None
        for args, what in ((build_args, "build_args"), (run_args, "run_args")):
            if args and any(not str(a).startswith("--") for a in args):
                raise ConfigError(f"{what} must be trtexec flags like --memPoolSize=dlaSRAM:1 (got {args})")
        self.build_args = [str(a) for a in build_args or []]
        self.run_args = [str(a) for a in run_args or []]
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.keep_files = bool(keep_files)
        self._warned: set[str] = set()

    def __repr__(self) -> str:
        return f"TrtexecBackend(trtexec={self.trtexec!r}, trt_version={self.trt_version!r})"

    def close(self) -> None:
        """Nothing to release (each measurement's processes have ended)."""

    def __enter__(self) -> "TrtexecBackend":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------ probing
    def _environ(self) -> dict[str, str]:
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
                               timeout=60, env=self._environ(), stdin=subprocess.DEVNULL, check=False)
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

    def _warn_once(self, key: str, msg: str, *args: Any) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg, *args)

    def fingerprint(self, platform: "Platform", settings: "Settings") -> dict[str, Any]:
        """``backend``, TensorRT version, L4T/JetPack, module, power mode, locked clocks.

        Raises:
            BackendError: the version of trtexec cannot be read.
        """
        version = self.version()
        fp: dict[str, Any] = {
            "backend": "trtexec",
            "trt_version": version,
            "platform": platform.name,
            "l4t": trt_env.read_l4t(),
            "jetpack": trt_env.read_jetpack(),
            "module": trt_env.read_module(),
            "power_mode": trt_env.read_power_mode(),
            "clocks_locked": trt_env.read_clocks(),
        }
        if fp["clocks_locked"] is not True:
            state = "are not locked" if fp["clocks_locked"] is False else "could not be checked (jetson_clocks --show)"
            self._warn_once("clocks", "Jetson clocks %s: timings will be noisy; run `sudo jetson_clocks`", state)
        if fp["power_mode"] is not None and fp["power_mode"] != settings.power_mode:
            self._warn_once("power", "the Jetson runs power mode %s but the study asks for %s; "
                            "set it with `sudo nvpmodel -m <id>`", fp["power_mode"], settings.power_mode)
        have = _vt(version)[:2]
        want = _vt(settings.trt_version)[:2]
        if have != want:
            self._warn_once("trtver", "DLA rules are for TensorRT %s but trtexec is TensorRT %s; pass "
                            "trt_version=%r for matching predictions", settings.trt_version, version,
                            ".".join(map(str, have)))
        return fp

    # ------------------------------------------------------------------ measuring
    def measure(self, realisation: "Realisation", platform: "Platform", settings: "Settings") -> Measurement:
        """Build and time the realised placement with trtexec; failures are returned, never raised."""
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
                return self._replicas(realisation, platform, settings, version, base, workdir)
            return self._engine(realisation, platform, settings, version, base, workdir)
        except BackendError as exc:
            return Measurement.failure("runtime_failed", str(exc), **base)
        except OSError as exc:
            return Measurement.failure("runtime_failed", f"trtexec could not be run ({self.trtexec}): {exc}", **base)
        except Exception as exc:  # noqa: BLE001 - the study must go on
            log.exception("trtexec backend internal error")
            return Measurement.failure("crashed", f"placetune's trtexec backend failed: {type(exc).__name__}: {exc}",
                                       **base)
        finally:
            if workdir is not None and not self.keep_files:
                shutil.rmtree(workdir, ignore_errors=True)

    # ------------------------------------------------------------------ engine mode
    def _engine(self, r: "Realisation", platform: "Platform", settings: "Settings", version: str,
                base: dict[str, Any], workdir: Path) -> Measurement:
        model = r.realized.model
        predicted = r.realized.as_dict()
        dla_layers = [n for n, d in predicted.items() if d != "GPU"]
        core = r.dla_core if (r.dla_core is not None and dla_layers) else -1
        onnx_or_failure = self._onnx(model, settings, version, base)
        if isinstance(onnx_or_failure, Measurement):
            return onnx_or_failure
        placement = self._placement_args(r, platform, settings, version, core)
        if isinstance(placement, str):
            return Measurement.failure("infeasible", placement, realized=predicted, **base)
        place_args, notes = placement
        device = f"DLA{core}" if core >= 0 else "GPU"
        eng = self._engine_spec(onnx_or_failure, model, settings, version, platform, device, core, int(model.batch),
                                place_args, workdir, "engine")
        eng.notes.extend(notes)
        failure = self._build(eng, version, base)
        if failure is not None:
            return failure
        realized, fallback, loc_extra = self._realised(eng, r)
        extra: dict[str, Any] = {"trt_version": version, "dla_core": core, "commands": {"build": eng.build_argv},
                                 **self._build_extra(eng), **loc_extra}
        if eng.notes:
            extra["notes"] = list(eng.notes)
        loadables = {device: len(eng.blog.dla_subgraphs)} if core >= 0 and eng.blog is not None else {}
        # ---- time it
        run_argv, files = self._run_argv(eng, version, settings, workdir, "engine", duration_s=self.duration_s,
                                         profile=self.profile)
        extra["commands"]["time"] = run_argv
        sampler = self._sampler()
        proc = _Proc(run_argv, workdir / "engine.time.log", self._environ(), workdir, _END_MARKERS)
        if sampler is not None:
            sampler.start()
        try:
            run = proc.wait(time.monotonic() + self.timeout_s + self.duration_s + self.warmup_ms / 1000.0)
        finally:
            if sampler is not None:
                sampler.stop()
        kw = dict(realized=realized, fallback=fallback, dla_loadables=loadables, build_seconds=eng.run.seconds,
                  extra=extra, **base)
        lines = run.lines()
        summary = parse_summary(lines)
        failure = self._failure(run, lines, summary, "time", kw)
        if failure is not None:
            return failure
        records = _read_times(files.get("times"))
        samples = [r_["latencyMs"] for r_ in records if "latencyMs" in r_]
        stats = latency_stats(samples) if samples else _summary_stats(summary)
        if not stats:
            extra["time_log"] = lines[-40:]
            return Measurement.failure("runtime_failed", "trtexec printed no performance summary and wrote no "
                                       "--exportTimes records", **kw)
        qps = summary.throughput_qps or (1000.0 / stats["median"] if stats.get("median") else None)
        fps = qps * base["batch"] if qps else None
        extra["summary"] = summary.to_dict()
        extra["timed_iterations"] = len(records) or None
        window = _window(run, records, summary)
        # ---- per-layer profile and inspector
        if files.get("profile") is not None:
            self._profile_into(files["profile"], eng, model, core, extra, kw)
        if eng.layer_info_path is not None and eng.layer_info_path.is_file():
            info = parse_layer_info(eng.layer_info_path.read_text(errors="replace"))
            extra["engine_inspector"] = info.text[:_INSPECTOR_MAX_CHARS]
            extra["engine_layers"] = len(info.layers)
            if not info.valid_json:
                extra.setdefault("notes", []).append("--exportLayerInfo was not valid JSON (unescaped names): "
                                                     "layer names read from the raw text")
        # ---- power
        power_w, energy = None, None
        if sampler is not None:
            reading = sampler.reading(*window) if window else sampler.reading()
            extra["power"] = reading.to_dict()
            power_w = reading.mean_w
            energy = _energy(reading, qps)
            if energy is not None:
                extra["energy_per_sample_mj"] = energy / base["batch"]
        else:
            extra["power"] = {"mean_w": None, "reason": "power sampling is off (power=False)"}
        kw.update(latency_samples_ms=_thin(samples), latency_ms=stats, throughput_fps=fps, power_w=power_w,
                  energy_mj=energy)
        return Measurement(status="ok", **kw)

    # ------------------------------------------------------------------ replicas mode
    def _replicas(self, r: "Realisation", platform: "Platform", settings: "Settings", version: str,
                  base: dict[str, Any], workdir: Path) -> Measurement:
        model = r.realized.model
        predicted = r.realized.as_dict()
        reps, why = resolve_replicas(settings, model.batch, platform.devices, platform.name)
        if why:
            return Measurement.failure("infeasible", why, **base)
        onnx_or_failure = self._onnx(model, settings, version, base)
        if isinstance(onnx_or_failure, Measurement):
            return onnx_or_failure
        dla_layers = [n for n, d in predicted.items() if d != "GPU"]
        notes: list[str] = []
        if not dla_layers and any(d != "GPU" for d in reps):
            notes.append("the realised placement has no DLA layer: the DLA replicas run all-GPU engines")
        engines: list[_Engine] = []
        for dev, batch in reps.items():
            core = int(dev[3:]) if dev != "GPU" and dla_layers else -1
            if core >= 0:
                placement = self._placement_args(r, platform, settings, version, core)
                if isinstance(placement, str):
                    return Measurement.failure("infeasible", f"replica {dev}: {placement}", realized=predicted, **base)
                place_args, more = placement
            else:
                place_args, more = [], []
            eng = self._engine_spec(onnx_or_failure, model, settings, version, platform, dev, core, int(batch),
                                    place_args, workdir, dev.lower())
            eng.notes.extend(more)
            engines.append(eng)
        commands: dict[str, Any] = {"build": {}, "time": {}}
        build_s = 0.0
        for eng in engines:
            commands["build"][eng.device] = eng.build_argv
            failure = self._build(eng, version, {**base, "extra": {"replica": eng.device, "commands": commands}})
            if failure is not None:
                failure.reason = f"replica {eng.device}: {failure.reason}"
                return failure
            build_s += eng.run.seconds
            if eng.batch != model.batch and any(_STATIC_SHAPES in x for x in eng.run.lines()):
                return Measurement.failure(
                    "infeasible", f"replica {eng.device} asks batch {eng.batch} but the ONNX file has a static batch "
                    f"of {model.batch} (trtexec ignored --shapes): export the model with a dynamic batch dimension "
                    "to give replicas their own batch", build_seconds=build_s, extra={"commands": commands}, **base)
        # the realised placement: the first DLA replica's (realise() reports replicas on DLA0)
        shown = next((e for e in engines if e.core >= 0), engines[0])
        realized, fallback, loc_extra = self._realised(shown, r)
        extra: dict[str, Any] = {"trt_version": version, "commands": commands, **self._build_extra(shown), **loc_extra}
        loadables = {e.device: len(e.blog.dla_subgraphs) for e in engines if e.core >= 0 and e.blog is not None}
        for e in engines:
            notes.extend(f"{e.device}: {n}" for n in e.notes)
        if notes:
            extra["notes"] = notes
        # ---- run every replica at once
        files_by: dict[str, dict[str, Path | None]] = {}
        procs: list[tuple[_Engine, _Proc]] = []
        sampler = self._sampler()
        if sampler is not None:
            sampler.start()
        try:
            for eng in engines:
                argv, files = self._run_argv(eng, version, settings, workdir, eng.device.lower(),
                                             duration_s=self.replica_duration_s, profile=False)
                commands["time"][eng.device] = argv
                files_by[eng.device] = files
                procs.append((eng, _Proc(argv, workdir / f"{eng.device.lower()}.time.log", self._environ(), workdir,
                                         _END_MARKERS)))
            deadline = time.monotonic() + self.timeout_s + self.replica_duration_s + self.warmup_ms / 1000.0
            runs = [(eng, p.wait(deadline)) for eng, p in procs]
        except BaseException:
            for _, p in procs:
                p.kill()
            raise
        finally:
            if sampler is not None:
                sampler.stop()
        kw = dict(realized=realized, fallback=fallback, dla_loadables=loadables, build_seconds=build_s, extra=extra,
                  **base)
        per: list[dict[str, Any]] = []
        for eng, run in runs:
            lines = run.lines()
            summary = parse_summary(lines)
            failure = self._failure(run, lines, summary, "time", kw)
            if failure is not None:
                failure.reason = f"replica {eng.device}: {failure.reason}"
                return failure
            records = _read_times(files_by[eng.device].get("times"))
            samples = [x["latencyMs"] for x in records if "latencyMs" in x]
            stats = latency_stats(samples) if samples else _summary_stats(summary)
            per.append({"device": eng.device, "batch": eng.batch, "dla_core": eng.core if eng.core >= 0 else None,
                        "qps": summary.throughput_qps,
                        "alone_fps": summary.throughput_qps * eng.batch if summary.throughput_qps else None,
                        "latency_ms": stats, "iterations": len(records), "_samples": samples,
                        "_abs": _absolute_times(run, records, summary)})
        # ---- throughput while all of them ran
        spans = [p["_abs"] for p in per]
        t_lo = max((s[0][0] for s in spans if s), default=None)
        t_hi = min((s[-1][1] for s in spans if s), default=None)
        overlap = (t_hi - t_lo) if (t_lo is not None and t_hi is not None and all(spans)) else 0.0
        total_fps = 0.0
        for p in per:
            if overlap > 0:
                done = sum(1 for (_, end) in p["_abs"] if t_lo <= end <= t_hi)
                p["throughput_fps"] = done * p["batch"] / overlap
            else:
                p["throughput_fps"] = p["alone_fps"] or 0.0
            total_fps += p["throughput_fps"]
        if overlap > 0:
            extra["overlap_s"] = overlap
            if overlap < 0.5 * self.replica_duration_s:
                extra.setdefault("notes", []).append(
                    f"the replicas ran together for only {overlap:.2f} s of {self.replica_duration_s:g} s "
                    "(engine loading took long): raise replica_duration_s")
        else:
            extra.setdefault("notes", []).append("the replicas' timed windows could not be aligned: per-replica "
                                                 "throughput is each trtexec's own figure")
        slowest = max(per, key=lambda p: p["latency_ms"].get("median", 0.0))
        samples = slowest["_samples"]
        for p in per:
            p.pop("_samples")
            p.pop("_abs")
        extra["replicas"] = per
        # ---- power over the common window
        power_w, energy = None, None
        if sampler is not None:
            reading = sampler.reading(t_lo, t_hi) if overlap > 0 else sampler.reading()
            extra["power"] = reading.to_dict()
            power_w = reading.mean_w
            if power_w is not None and total_fps > 0:
                extra["energy_per_sample_mj"] = power_w / (total_fps / 1000.0)
                energy = extra["energy_per_sample_mj"] * base["batch"]
        else:
            extra["power"] = {"mean_w": None, "reason": "power sampling is off (power=False)"}
        kw.update(latency_samples_ms=_thin(samples), latency_ms=slowest["latency_ms"],
                  throughput_fps=total_fps or None, power_w=power_w, energy_mj=energy)
        return Measurement(status="ok", **kw)

    # ------------------------------------------------------------------ helpers
    def _sampler(self) -> Any:
        if not self.power:
            return None
        from placetune.hardware.power import PowerSampler

        return PowerSampler(self.power_root, self.power_interval_s, total_rails=self.power_rails)

    def _onnx(self, model: "Model", settings: "Settings", version: str, base: dict[str, Any]) -> Path | Measurement:
        """The ONNX file trtexec builds from (the TensorRT backend's preparation), or a failure."""
        strongly_typed = _vt(version)[0] >= 11
        if strongly_typed and settings.precision == "int8" and not source_has_qdq(model):
            return Measurement.failure(
                "infeasible",
                f"TensorRT {version} builds strongly typed networks only (no --int8): int8 needs an ONNX model with "
                "Q/DQ (QuantizeLinear/DequantizeLinear) nodes and this model has none. Quantize it (e.g. with NVIDIA "
                "TensorRT Model Optimizer) or use precision fp16.", **base)
        try:
            return prepare_onnx(model, self.cache_dir, fp16=strongly_typed and settings.precision == "fp16")
        except Exception as exc:  # noqa: BLE001
            return Measurement.failure("build_failed", f"cannot prepare the ONNX file for trtexec: "
                                       f"{type(exc).__name__}: {exc}", **base)

    def _placement_args(self, r: "Realisation", platform: "Platform", settings: "Settings", version: str,
                        core: int) -> tuple[list[str], list[str]] | str:
        """``--useDLACore``/``--allowGPUFallback``/``--layerDeviceTypes`` for the realised placement,
        with notes; or why trtexec of this version cannot express it."""
        if core < 0:
            return [], []
        model = r.realized.model
        predicted = r.realized.as_dict()
        args = [f"--useDLACore={core}"]
        if settings.gpu_fallback:
            args.append("--allowGPUFallback")
        # layers on the GPU that were not asked on a DLA (those in r.fallback were, and trtexec
        # falls them back by itself): only these need --layerDeviceTypes
        asked_gpu = [n for n, d in predicted.items() if d == "GPU" and n not in r.fallback]
        if not asked_gpu:
            return args, []
        if _vt(version)[:2] < LAYER_DEVICE_TYPES_SINCE:
            from placetune.placement.realise import dla_support

            support = dla_support(model, platform, settings.precision, settings.trt_version)
            if settings.gpu_fallback and all(not support[n].supported for n in asked_gpu):
                return args, [f"{len(asked_gpu)} layer(s) asked on the GPU are not supported on the DLA, so "
                              f"TensorRT {version} keeps them there without --layerDeviceTypes"]
            shown = ", ".join(asked_gpu[:3]) + (f" (+{len(asked_gpu) - 3} more)" if len(asked_gpu) > 3 else "")
            return (f"trtexec of TensorRT {version} has no --layerDeviceTypes (added in 8.6), so it can only build "
                    f"all-GPU or all-DLA engines; this placement keeps {shown} on the GPU next to DLA layers. "
                    "Per-layer placement on TensorRT 8.5 needs the tensorrt backend (--backend tensorrt), "
                    "which sets each layer's device with the Python API")
        try:
            spec = layer_device_types({n: predicted[n] for n in model.names})
            notes: list[str] = []
            if len(spec) > MAX_ARG_CHARS:
                spec = layer_device_types({n: "GPU" for n in model.names if predicted[n] == "GPU"})
                notes.append("--layerDeviceTypes lists only the GPU layers (--useDLACore makes DLA the default)")
        except PlacementError as exc:
            return (f"trtexec cannot express this placement: {exc}. Measure it with the tensorrt backend "
                    "(--backend tensorrt), which places layers with the Python API")
        if len(spec) > MAX_ARG_CHARS:
            return (f"the --layerDeviceTypes list is {len(spec)} characters, over the argument limit; use the "
                    "tensorrt backend")
        notes.append("layers TensorRT's parser adds beyond the ONNX nodes (<node>_<k>, ONNXTRT_*) are not listed and "
                     "default to the DLA under --useDLACore")
        return args + [f"--layerDeviceTypes={spec}"], notes

    def _engine_spec(self, onnx: Path, model: "Model", settings: "Settings", version: str, platform: "Platform",
                     device: str, core: int, batch: int, place_args: list[str], workdir: Path, tag: str) -> _Engine:
        vt = _vt(version)
        engine_path = workdir / f"{tag}.engine"
        argv = [self.trtexec, f"--onnx={onnx}"]
        notes: list[str] = []
        if vt[0] < 11 and settings.precision in ("fp16", "int8"):
            argv.append(f"--{settings.precision}")
            if settings.precision == "int8":
                if self.calibration_cache:
                    argv.append(f"--calib={self.calibration_cache}")
                else:
                    notes.append("--int8 without --calib: placeholder dynamic ranges (right for timing, not accuracy)")
        argv.extend(place_args)
        shapes = shapes_arg(model.input_shapes, batch if batch != model.batch else None)
        if shapes:
            argv.append(f"--shapes={shapes}")
        argv.append(f"--saveEngine={engine_path}")
        if self.timing_cache:
            argv.append(f"--timingCacheFile={self._timing_cache_path(platform, version)}")
        layer_info_path = None
        if self.layer_info:
            argv.append("--profilingVerbosity=detailed")
            layer_info_path = workdir / f"{tag}.layers.json"
            argv.append(f"--exportLayerInfo={layer_info_path}")
        if self.verbose:
            argv.append("--verbose")
        argv.append("--skipInference" if vt[:2] >= (8, 6) else "--buildOnly")
        argv.extend(self.build_args)
        eng = _Engine(device, core, batch, argv, engine_path, notes, layer_info_path=layer_info_path)
        return eng

    def _run_argv(self, eng: _Engine, version: str, settings: "Settings", workdir: Path, tag: str, *,
                  duration_s: float, profile: bool) -> tuple[list[str], dict[str, Path | None]]:
        vt = _vt(version)
        files: dict[str, Path | None] = {"times": workdir / f"{tag}.times.json", "profile": None}
        argv = [self.trtexec, f"--loadEngine={eng.engine_path}"]
        if eng.core >= 0:
            argv.append(f"--useDLACore={eng.core}")  # the runtime's DLA core is chosen at load time
        shapes = shapes_arg(_engine_input_shapes(eng), None)
        if shapes:
            argv.append(f"--shapes={shapes}")
        iterations = self.iterations or settings.iterations
        argv += [f"--iterations={iterations}", f"--warmUp={self.warmup_ms:g}", f"--duration={duration_s:g}",
                 f"--exportTimes={files['times']}"]
        if profile:
            files["profile"] = workdir / f"{tag}.profile.json"
            argv.append(f"--exportProfile={files['profile']}")
            if vt[0] < 11:
                argv.append("--separateProfileRun")  # else trtexec prints no e2e timing at all
        if self.spin_wait and vt[0] < 11:
            argv.append("--useSpinWait")
        argv.extend(self.run_args)
        return argv, files

    def _timing_cache_path(self, platform: "Platform", version: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", f"{platform.name}-trt{version}")
        path = self.cache_dir / "timing" / f"{safe}.cache"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def _build(self, eng: _Engine, version: str, base: dict[str, Any]) -> Measurement | None:
        """Run the build; None when it produced an engine, else the failure."""
        log_path = eng.engine_path.with_suffix(".build.log")
        proc = _Proc(eng.build_argv, log_path, self._environ(), eng.engine_path.parent)
        run = eng.run = proc.wait(time.monotonic() + self.timeout_s)
        lines = run.lines()
        eng.blog = parse_build_log(lines)
        extra = dict(base.pop("extra", {}) or {})
        extra.setdefault("commands", {"build": eng.build_argv})
        kw = dict(build_seconds=run.seconds, extra=extra, **base)
        failure = self._failure(run, lines, parse_summary(lines), "build", kw)
        if failure is not None:
            failure.extra.update(self._build_extra(eng))
            return failure
        if not eng.engine_path.is_file():
            return Measurement.failure("build_failed", f"trtexec passed but wrote no engine file {eng.engine_path}",
                                       **kw)
        return None

    def _failure(self, run: _Run, lines: list[str], summary: PerfSummary, phase: str,
                 kw: dict[str, Any]) -> Measurement | None:
        """Classify a finished process: None when it passed."""
        what = "building the engine" if phase == "build" else "timing the engine"
        if run.timed_out:
            return Measurement.failure("timeout", f"trtexec did not finish {what} within its limit (timeout_s="
                                       f"{self.timeout_s:g} beyond the timed duration; ran {run.seconds:.1f} s); "
                                       f"it was killed ({' '.join(run.argv[:2])} ...)", **_with_tail(kw, lines))
        if run.signal:
            last = [x for x in lines if x.strip()][-1:]
            return Measurement.failure("crashed", f"trtexec was killed by {run.signal} while {what}"
                                       + (f" (last output: {last[0].strip()})" if last else ""),
                                       **_with_tail(kw, lines))
        if run.returncode == 0 and summary.status != "FAILED":
            return None
        errs = [e for e in error_lines(lines) if not e.startswith("&&&&")]
        kw = _with_tail(kw, lines)
        kw["extra"]["trtexec_errors"] = errs
        m = next((_NO_CORE.search(e) for e in errs if _NO_CORE.search(e)), None)
        if m:
            return Measurement.failure("infeasible", f"this Jetson has no DLA core {m.group(1)} (trtexec: "
                                       f"{m.group(0)})", **kw)
        status = "build_failed" if phase == "build" else "runtime_failed"
        detail = "; ".join(errs[:4]) or f"exit status {run.returncode}"
        return Measurement.failure(status, f"trtexec failed {what}: {detail}", **kw)

    def _build_extra(self, eng: _Engine) -> dict[str, Any]:
        blog = eng.blog
        if blog is None:
            return {}
        lines = eng.run.lines() if eng.run is not None else []
        kept = [x for x in lines if "] [V] " not in x][:_LOG_KEEP]
        return {"build_errors": blog.errors[:50], "build_warnings": blog.warnings[:100], "build_log": kept}

    def _realised(self, eng: _Engine, r: "Realisation") -> tuple[dict[str, str], dict[str, str], dict[str, Any]]:
        """Realised placement and fallback reasons from an engine's build log."""
        model = r.realized.model
        predicted = r.realized.as_dict()
        blog = eng.blog or BuildLog()
        loc = locate(blog, model.names)
        extra: dict[str, Any] = {}
        target = f"DLA{eng.core}" if eng.core >= 0 else "GPU"
        if eng.core < 0:
            realized = {n: "GPU" for n in predicted}
        elif not blog.has_sections:
            realized = dict(predicted)
            eng.notes.append("the build log has no DLA/GPU placement sections: realised placement is placetune's "
                             "prediction")
        else:
            realized = {n: (target if loc.devices[n] == "DLA" else "GPU") if n in loc.devices else predicted[n]
                        for n in predicted}
        fallback = {n: loc.fallback.get(n, why) for n, why in r.fallback.items()}
        for n, d in predicted.items():
            if d != "GPU" and realized[n] == "GPU":
                fallback[n] = loc.fallback.get(n) or "TensorRT ran it on the GPU (no reason in the build log)"
        for n in list(fallback):
            if realized.get(n) != "GPU":
                del fallback[n]  # TensorRT ran it on the DLA after all
        extra["realized_vs_predicted"] = {n: [predicted[n], realized[n]] for n in predicted
                                          if predicted[n] != realized[n]}
        extra["subgraph_limit"] = loc.subgraph_limit
        extra["dla_subgraphs"] = loc.subgraphs
        extra["unmapped_log_names"] = loc.unmapped[:50]
        return realized, fallback, extra

    def _profile_into(self, path: Path, eng: _Engine, model: "Model", core: int, extra: dict[str, Any],
                      kw: dict[str, Any]) -> None:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            extra.setdefault("notes", []).append("trtexec wrote no --exportProfile file")
            return
        count, entries = parse_export_profile(text)
        if not entries:
            extra.setdefault("notes", []).append("the --exportProfile file has no layer records")
            return
        rows = [(e.name, e.average_ms) for e in entries]
        prof = attribute_profile(rows, eng.blog or BuildLog(), model.names, None,
                                 dla_device=f"DLA{core}" if core >= 0 else "DLA0")
        extra.update(engine_layer_times_ms={name: ms for name, ms in rows}, profile_iterations=count,
                     dla_ms=prof.dla_ms, gpu_ms=prof.gpu_ms)
        kw.update(segment_times_ms=prof.segments, layer_times_ms=prof.layer_times_ms)


# =========================================================================================
# small helpers
# =========================================================================================
def _default_cache_dir() -> Path:
    return default_cache_dir("trtexec")


def _engine_input_shapes(eng: _Engine) -> dict[str, list[int]]:
    """The engine's input shapes as given to the build (``--shapes``), parsed back."""
    for a in eng.build_argv:
        if a.startswith("--shapes="):
            out = {}
            for part in a.split("=", 1)[1].split(","):
                name, _, dims = part.rpartition(":")
                out[name] = [int(x) for x in dims.split("x")]
            return out
    return {}


def _with_tail(kw: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    kw = dict(kw)
    extra = dict(kw.get("extra") or {})
    extra["trtexec_output_tail"] = [x for x in lines if "] [V] " not in x][-40:]
    kw["extra"] = extra
    return kw


def _read_times(path: Path | None) -> list[dict[str, float]]:
    if path is None:
        return []
    try:
        return parse_export_times(path.read_text(errors="replace"))
    except OSError:
        return []


def _summary_stats(summary: PerfSummary) -> dict[str, float]:
    """Latency statistics from the console summary when there are no per-iteration records."""
    s = {k: v for k, v in summary.latency_ms.items() if k in ("median", "mean", "min", "max", "p90", "p99")}
    if "median" not in s and summary.legacy_ms:
        s = latency_stats(summary.legacy_ms)
    return s


def _thin(samples: list[float]) -> list[float]:
    if len(samples) <= _MAX_SAMPLES:
        return [float(x) for x in samples]
    step = len(samples) / _MAX_SAMPLES
    return [float(samples[int(i * step)]) for i in range(_MAX_SAMPLES)]


def _span_ms(records: list[dict[str, float]]) -> tuple[float, float] | None:
    starts = [r.get("startEnqMs", r.get("startH2dMs")) for r in records]
    ends = [r.get("endD2hMs", r.get("endComputeMs")) for r in records]
    starts = [s for s in starts if s is not None]
    ends = [e for e in ends if e is not None]
    if not starts or not ends:
        return None
    return min(starts), max(ends)


def _absolute_times(run: _Run, records: list[dict[str, float]], summary: PerfSummary) -> list[tuple[float, float]]:
    """Per timed iteration ``(start, end)`` in ``time.monotonic()`` terms.

    trtexec's time origin is its own; the end of the timed phase is anchored at the arrival
    of the first line printed after it (``Timing trace has``/``=== Performance summary ===``),
    which trtexec prints before any separate profiling run."""
    span = _span_ms(records)
    end_mark = min(run.marks.values()) if run.marks else None
    if span is None or end_mark is None:
        return []
    last = span[1]
    out = []
    for r in records:
        s = r.get("startEnqMs", r.get("startH2dMs"))
        e = r.get("endD2hMs", r.get("endComputeMs"))
        if s is None or e is None:
            continue
        out.append((end_mark - (last - s) / 1000.0, end_mark - (last - e) / 1000.0))
    return out


def _window(run: _Run, records: list[dict[str, float]], summary: PerfSummary) -> tuple[float, float] | None:
    """The timed iterations' window in ``time.monotonic()`` terms (None: unknown)."""
    times = _absolute_times(run, records, summary)
    if times:
        return times[0][0], times[-1][1]
    end_mark = min(run.marks.values()) if run.marks else None
    if end_mark is not None and summary.host_walltime_s:
        return end_mark - summary.host_walltime_s, end_mark
    return None


def _energy(reading: "PowerReading", qps: float | None) -> float | None:
    from placetune.hardware.power import energy_per_inference_mj

    return energy_per_inference_mj(reading.mean_w, qps=qps)
