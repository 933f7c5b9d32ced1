"""What the two backends that measure on the Jetson itself (``tensorrt`` and ``trtexec``) share:
the device part of their fingerprint with its warnings, the ONNX file TensorRT builds from
(refusing INT8 without Q/DQ on strongly typed TensorRT), and the comparison of a realised placement
(read by :mod:`placetune.backends.tensorrt.placement_known`) with placetune's prediction, and the
clocks read around every measurement (:mod:`placetune.backends.clocks`)."""

from __future__ import annotations

import logging
import os
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from placetune.backends.base import BackendBase, Capabilities
from placetune.backends import clocks, oom
from placetune.backends.clocks import ClockWatch, Snapshot, mode_not_applied, snapshot
from placetune.backends.busy import SHARED_ENV, ContentionWatch, gpu_busy
from placetune.backends.mode_applied import (NOT_CHECKED, cpu_not_applied, gpu_uncapped_not_applied,
                                             parse_nvpmodel_caps)
from placetune.backends.onnx_prep import prepare_onnx, source_has_qdq, source_qdq_fp32
from placetune.backends.tensorrt import env as trt_env
from placetune.backends.trtexec.command import strongly_typed, untyped_int8 as untyped_int8_rule, version_tuple
from placetune.errors import BackendError, ConfigError, ModelError
from placetune.hardware.locked_clocks import FINGERPRINT_KEY as LOCKED
from placetune.hardware.locked_clocks import locked_frequencies
from placetune.hardware.modules import ModuleMatch, identify_module, read_device_tree
from placetune.hardware.platforms import PLATFORMS
from placetune.hardware.power_modes import same_power_mode
from placetune.measurement import Measurement
from placetune.model.misreads import later_rules_hint, old_parser_misread

if TYPE_CHECKING:
    from placetune.backends.base import Backend
    from placetune.hardware.platforms import Platform
    from placetune.model.model import Model
    from placetune.settings import Settings

__all__ = ["JetsonBackend", "UNEXPLAINED_FALLBACK", "board_fits", "board_module", "device_fingerprint", "dla_cores_fit",
           "dla_cores_used", "emulated_dla_cores",
           "mode_differences", "installed_trt_fits", "prepared_onnx", "refuse_for_board", "refuse_untyped_int8",
           "untyped_int8", "untyped_int8_reason", "realized_vs_predicted"]

log = logging.getLogger(__name__)

#: Why a layer asked on a DLA is on the GPU when the build log gives no reason.
UNEXPLAINED_FALLBACK = "TensorRT ran it on the GPU (no reason in the build log)"


class JetsonBackend(BackendBase):
    """Base of the backends that build and time engines on the Jetson: real figures, INT8
    calibration caches, warnings given once per backend."""

    capabilities = Capabilities(simulated=False, calibration_cache=True)
    #: Whether the fingerprint refuses a board whose device tree names another module than the platform,
    #: or whose TensorRT has no DLA core on a module that has some (:func:`board_fits`,
    #: :func:`dla_cores_fit`). ``placetune selftest`` turns it off: it reports both as checks of its own
    #: and still times the GPU there.
    refuse_other_board: bool = True
    #: The frequencies the clocks were read locked at by the last fingerprint (None: not locked, or no
    #: fingerprint yet): the timing and engine caches are kept apart by them (:func:`clocks_tag`).
    locked_clocks: dict[str, int] | None = None

    def warn_once(self, key: str, msg: str, *args: Any) -> None:
        """Log the warning ``msg % args`` the first time this backend is asked to with ``key`` (a board
        fact said once per run, not at every fingerprint)."""
        warned: set[str] = self.__dict__.setdefault("_warned", set())
        if key not in warned:
            warned.add(key)
            log.warning(msg, *args)

    @cached_property
    def gpu_shared(self) -> bool:
        """Whether this backend times beside another process's GPU work: read once, at its first fingerprint,
        before it built anything (later the GPU's load is its own worker's; :mod:`placetune.backends.busy`).
        A busy GPU raises :class:`BackendError` (exit 8) unless ``PLACETUNE_SHARED_GPU=1`` asks for it, then
        True, said once."""
        busy = gpu_busy()  # another process's work on the GPU is never timed as the board's unasked
        if not busy:
            return False
        if os.environ.get(SHARED_ENV) != "1":
            raise BackendError(busy)
        self.warn_once("gpu-shared", "GPU SHARED: another process keeps the GPU busy and %s=1: every timing "
                       "includes its work; the study records gpu_shared and keeps these timings apart from any "
                       "made alone", SHARED_ENV)
        return True

    @cached_property
    def clock_watch(self) -> ClockWatch:
        """The clocks of this backend's run (the first snapshot is the run's reference)."""
        return ClockWatch()

    @cached_property
    def contention(self) -> ContentionWatch:
        """Another process's GPU work between this backend's jobs (:mod:`placetune.backends.busy`)."""
        return ContentionWatch()

    def clocked(self, measure: Callable[[], Measurement]) -> Measurement:
        """``measure()`` with the clocks read just before and just after it, recorded in its
        ``extra["clocks"]`` and judged (:meth:`ClockWatch.judge`: marked untrusted when they moved,
        BackendError when they stay moved); unchanged off a Jetson. Where ``measure`` says which
        part of it is timed (:meth:`ClockWatch.timing`, :meth:`ClockWatch.timed`), the snapshots
        around that part are judged instead: a clock that moved during the build only is harmless.

        Unless the run shares the GPU on purpose (:attr:`gpu_shared`), ``measure`` runs only when the GPU
        is idle of other processes' work, and again when it was busy right after
        (:meth:`ContentionWatch.run <placetune.backends.busy.ContentionWatch.run>`: GpuContended, exit 8,
        when it stays busy)."""
        if self.gpu_shared:
            return self._clocked_once(measure)
        return self.contention.run(lambda: self._clocked_once(measure))

    def _clocked_once(self, measure: Callable[[], Measurement]) -> Measurement:
        watch = self.clock_watch
        before = watch.read()
        kills = oom.oom_kills()  # a SIGKILL while the kernel's count rises is out of memory (oom.judge_kill)
        watch.window = None
        m = oom.judge_kill(measure(), kills)
        return watch.judge(m, before, watch.read())


def device_fingerprint(backend: JetsonBackend, version: str, platform: "Platform", settings: "Settings",
                       **more: Any) -> dict[str, Any]:
    """``backend``, ``trt_version``, ``platform`` (then ``more``), L4T/JetPack, module (and
    ``module_emulated``, ``p3767-0000 on p3701-0000``, on an AGX Orin developer kit flashed to emulate
    another module: its device-tree model string names the kit), power mode,
    whether clocks are locked and, where any clock is read locked, at what (``locked_clocks``:
    :mod:`placetune.hardware.locked_clocks`; a study resumes only under the same lock); warns (once)
    about unlocked clocks, a power mode the board does not run, and one the study did not ask for; refuses
    (:class:`BackendError`) a GPU another process keeps busy (:mod:`placetune.backends.busy`)."""
    fp: dict[str, Any] = {
        "backend": backend.name,
        "trt_version": version,
        "platform": platform.name,
        **more,
        "l4t": trt_env.read_l4t(),
        "jetpack": trt_env.read_jetpack(),
        "module": trt_env.read_module(),
        "power_mode": trt_env.read_power_mode(),
        "clocks_locked": trt_env.read_clocks(),
    }
    if backend.refuse_other_board:
        board_fits(platform, more.get("dla_cores"))
        dla_cores_fit(version, platform, more.get("dla_cores"))
    if backend.gpu_shared:  # timed beside another process's GPU work, on purpose: kept apart from timings made alone
        fp["gpu_shared"] = True
    match = board_module(more.get("dla_cores"))
    if match.emulated_on and match.module is not None:  # a developer kit flashed as another module: said in the study
        fp["module_emulated"] = f"{match.module.part} on {match.emulated_on}"
        extra = emulated_dla_cores(match.module.title, match.module.dla_cores, match.emulated_on, more.get("dla_cores"))
        if extra:  # the kit's DLA cores beyond the emulated module's: not used, and said once
            fp["dla_cores_used"] = match.module.dla_cores
            backend.warn_once("emulated-dla", "%s", extra)
    snap = snapshot()
    locked = locked_frequencies(snap)
    backend.locked_clocks = dict(locked) if locked else None
    if locked:  # at what the clocks are locked: a study resumes only under the same lock
        fp[LOCKED] = locked
    installed_trt_fits(backend, version, platform)
    for line in mode_differences(platform.name, fp["power_mode"], snap):
        backend.warn_once(f"mode-applied:{line}", "POWER MODE NOT APPLIED: %s: the board does not seem to run the "
                           "mode it reports, and the study records it under that mode; check `sudo jetson_clocks "
                           "--show`, set the mode again (`sudo nvpmodel -m <id>`) and check `systemctl status "
                           "nvpmodel`", line)
    if fp["clocks_locked"] is not True:
        state = "are not locked" if fp["clocks_locked"] is False else "could not be checked (jetson_clocks --show)"
        backend.warn_once("clocks", "Jetson clocks %s: timings will be noisy; run `sudo jetson_clocks` "
                           "(and check with `sudo jetson_clocks --show`)", state)
    if fp["power_mode"] is None and fp["l4t"] is not None:
        backend.warn_once("power-unread", "the Jetson's nvpmodel power mode could not be read (`nvpmodel -q` not found or "
                           "failed, and /var/lib/nvpmodel/status with /etc/nvpmodel.conf not readable): every "
                           "measurement is recorded under the study's power_mode %s UNCHECKED; run where nvpmodel is "
                           "available (in a container, mount those two files read-only) or check `nvpmodel -q` "
                           "by hand", settings.power_mode)
    if fp["power_mode"] is not None and not same_power_mode(platform.name, fp["power_mode"], settings.power_mode):
        backend.warn_once("power", "the Jetson runs power mode %s but the study asks for %s; "
                           "set it with `sudo nvpmodel -m <id>`", fp["power_mode"], settings.power_mode)
    return fp


def mode_differences(platform: str, mode_name: str | None, snap: Snapshot | None = None) -> list[str]:
    """What the board runs that its reported nvpmodel mode ``mode_name`` does not set, one line each:
    the GPU cap (:func:`~placetune.backends.clocks.mode_not_applied`; an uncapped GPU:
    :func:`~placetune.backends.mode_applied.gpu_uncapped_not_applied`), then the CPU cores online and
    each CPU cluster's max frequency against the board's own nvpmodel configuration
    (:data:`~placetune.backends.tensorrt.env.NVPMODEL_CONF`, :mod:`placetune.backends.mode_applied`).
    Off a Jetson, or with no mode read, nothing. The EMC and DLA caps are not checked: said once
    (logged) where the rest is judged. ``snap``: the clocks now (default: read here)."""
    snap = snap if snap is not None else snapshot()
    if not mode_name or snap is None:
        return []
    lines = [why for why in (mode_not_applied(platform, mode_name, snap),) if why]
    try:
        text = Path(trt_env.NVPMODEL_CONF).read_text(errors="replace")
    except OSError:
        text = ""
    if text:
        conf = parse_nvpmodel_caps(text)
        lines += gpu_uncapped_not_applied(conf, mode_name, clocks.SYSFS_ROOT)
        lines += cpu_not_applied(conf, mode_name, clocks.SYSFS_ROOT)
    log.info("power mode %s: %s", mode_name, NOT_CHECKED)
    return lines


def board_module(dla_cores: int | None = None) -> ModuleMatch:
    """The module this board's device tree names (:func:`placetune.hardware.modules.identify_module`),
    narrowed by ``dla_cores`` as TensorRT reports them; ``known`` False off a Jetson or on a module the
    table does not know."""
    return identify_module(*read_device_tree(trt_env.DEVICE_TREE)).resolve(dla_cores)


def board_fits(platform: "Platform", dla_cores: int | None = None) -> None:
    """Refuse a run whose ``platform`` is not the module the board's device tree names
    (:func:`placetune.hardware.modules.identify_module`; ``dla_cores``, as TensorRT reports them, tells
    apart SKUs the model string cannot). The board's TensorRT cannot: JetPack 5.1's 8.5.2 runs on Xavier
    and Orin alike, so a Xavier tuned with the default ``--platform orin-agx`` would record Xavier's figures
    as an AGX Orin's, predicted by Orin's DLA rules. A module placetune has no profile for (Jetson Thor:
    no DLA, nothing to place) is refused too. Off a Jetson, or on a module the table does not know,
    nothing is said here (``placetune selftest`` reports an unknown module).

    Raises:
        ConfigError: the board is another module (exit status 6).
    """
    match = board_module(dla_cores)
    if not match.known or platform.name in match.profiles:
        return
    module = match.module
    if not match.profiles and module is not None:
        why = "no DLA, so no placement to tune" if module.dla_cores == 0 else "no profile to tune it with"
        raise ConfigError(f"platform {platform.name}: this board is a {match.describe()}: {why}, and its figures "
                          f"would be recorded as a {platform.title}'s; `placetune selftest` checks its GPU stack")
    raise ConfigError(f"platform {platform.name}: this board is a {match.describe()}; its figures would be recorded "
                      f"as a {platform.title}'s: pass --platform {' or '.join(match.profiles)}")


def emulated_dla_cores(title: str, module_cores: int, kit: str, dla_cores: int | None) -> str:
    """One line when TensorRT on an AGX Orin developer kit flashed to emulate ``title`` (``module_cores``
    DLA cores) reports more DLA cores than that module has, else "": a run uses only the emulated
    module's (:func:`dla_cores_used`), as the module itself would."""
    if dla_cores is None or int(dla_cores) <= module_cores:
        return ""
    return (f"TensorRT reports {int(dla_cores)} DLA cores on this AGX Orin developer kit ({kit}) flashed to emulate "
            f"a {title}, which has {module_cores}: the run uses {module_cores} (placements and the gate's reference "
            "engine alike), as on the module itself")


def dla_cores_used(platform: "Platform", dla_cores: int | None) -> int | None:
    """The DLA cores a run may use: those TensorRT reports (None: not known), at most the platform's
    (an AGX Orin kit emulating an Orin NX 8GB or an Orin Nano still reports the kit's 2)."""
    return None if dla_cores is None else min(int(dla_cores), platform.dla_count)


def dla_cores_fit(version: str, platform: "Platform", dla_cores: int | None) -> None:
    """Refuse a night on a module with DLA cores whose TensorRT reports none (``IBuilder.num_DLA_cores``,
    the worker's probe; None: not known, as with trtexec): 10.8 and later 10.x, 11.0-11.4.0, and 11.4.1
    off AGX Orin have no DLA (TensorRT 11.4.1 release notes). Every placement that asks for a DLA would
    be built and marked infeasible one by one, the all-GPU engine the night's only figure.

    Raises:
        BackendError: the board's TensorRT has no DLA core (exit status 8).
    """
    if dla_cores is None or platform.dla_count == 0 or int(dla_cores) > 0:
        return
    raise BackendError(
        f"TensorRT {version} reports 0 DLA cores here, but a {platform.title} has {platform.dla_count}: no placement "
        f"can use a DLA, and a night would measure the all-GPU engine only; tune with a TensorRT that has the DLA, "
        f"one of {platform.name}'s JetPacks: {', '.join(platform.jetpack_trt)} (10.8 and later 10.x and 11.0-11.4.0 "
        "have no DLA; 11.4.1 has it on AGX Orin with JetPack 7.2.2+); `placetune selftest` says more")


def installed_trt_fits(backend: JetsonBackend, version: str, platform: "Platform") -> None:
    """Whether the TensorRT on the board is one that a JetPack for ``platform`` ships
    (:meth:`Platform.ships_trt`): the figures are recorded under the installed version either way,
    but the DLA rules and priors of ``platform`` were written for the versions its JetPacks ship.

    Another minor release of a major the module's JetPacks ship (10.7 on Orin, whose JetPack 6
    has 10.3) is warned once. A major release no JetPack for the module ever had (TensorRT 10 on
    Xavier, whose last JetPack is 5) means the board is another module than ``--platform`` says:
    refused. TensorRT 11 on a module whose JetPacks reach TensorRT 10 is warned, not refused: the
    reference names JetPack 7.2.2 (TensorRT 11.4.1) for AGX Orin and says nothing of the others.

    Raises:
        ConfigError: a TensorRT major release the platform's JetPacks never shipped (exit status 6).
    """
    if platform.ships_trt(version):
        return
    shipped = ", ".join(platform.jetpack_trt)
    major = str(version).split(".")[0]
    jetpack6 = any(v.startswith("10.") for v in platform.jetpack_trt)
    if not platform.ships_trt_major(version) and not (major.isdigit() and int(major) >= 11 and jetpack6):
        fits = [p.name for p in PLATFORMS.values() if p.ships_trt_major(version)]
        raise ConfigError(
            f"platform {platform.name}: its JetPacks ship TensorRT {shipped} and none has TensorRT {major}, but this "
            f"board's TensorRT is {version}: the board is another module; pass it as --platform "
            f"({', '.join(fits) or 'no known module has this TensorRT'})")
    backend.warn_once("trt-platform", "TRT VERSION: this board's TensorRT %s is not one a JetPack for %s ships (%s): "
                       "its measurements are recorded as TensorRT %s, but placetune's DLA rules and priors for %s "
                       "were written for %s", version, platform.name, shipped, version, platform.name, shipped)


def refuse_untyped_int8(backend: "Backend", model: "Model", precision: str, fingerprint: dict[str, Any]) -> None:
    """Refuse, before a study is stored, an INT8 run of a model without Q/DQ nodes on a board whose TensorRT
    (``fingerprint["trt_version"]``) is strongly typed: every build of the night would fail. The simulated
    Jetson builds nothing: not refused here.

    Raises:
        ConfigError: the one-line reason of :func:`~placetune.backends.trtexec.command.untyped_int8`
            (exit status 6).
    """
    if backend.simulated:
        return
    version = str(fingerprint.get("trt_version") or "")
    why = untyped_int8_reason(model, precision, version)
    if why:
        raise ConfigError(why)
    if precision == "int8" and strongly_typed(version_tuple(version)) and source_qdq_fp32(model):
        # said, not refused: its Q/DQ regions still build in INT8 (on the DLA where they can)
        log.warning("INT8 on TensorRT %s: the model has Q/DQ nodes but no FP16 tensor, and TensorRT 11 builds "
                    "strongly typed, so every layer outside its Q/DQ regions runs in FP32, which the DLA does not "
                    "run: those layers fall back to the GPU in every build (TensorRT 10.x with --int8 --fp16 ran "
                    "them in FP16); convert the model's unquantized part to FP16 (NVIDIA's 'Strongly Typed Networks "
                    "for DLA': a model never converted to FP16 keeps its original types) and tune it again", version)


def refuse_for_board(backend: "Backend", model: "Model", settings: "Settings", fingerprint: dict[str, Any]) -> None:
    """Refuse, before a study is stored, what the board's TensorRT (``fingerprint["trt_version"]``) would
    build wrong or not at all: :func:`refuse_untyped_int8`, and a model with a form the board's ONNX
    parser ignores (:data:`placetune.model.misreads.MISREADS`, e.g. opset-18 Reduce axes inputs on
    TensorRT 8.5 of JetPack 5.1: it builds and times another network without a word). The simulated
    Jetson builds nothing: not refused here; a misread form of ``settings.trt_version`` is said in one
    warning (the study's plans are for that TensorRT: ``placetune build`` and the folder's build.sh
    refuse them there; refusing the tune would refuse every default Orin tune, TensorRT 8.6, of an
    opset-18 export).

    Raises:
        ConfigError: an INT8 run TensorRT 11 cannot build (exit status 6).
        ModelError: a form the installed parser ignores (exit status 3).
    """
    refuse_untyped_int8(backend, model, settings.precision, fingerprint)
    if backend.simulated:
        why = old_parser_misread(model.proto, str(settings.trt_version))
        if why:
            log.warning("trt_version %s: the plans of this study would be built wrong there: %s%s", settings.trt_version,
                        why, later_rules_hint(model.proto, str(settings.trt_version)))
        return
    why = old_parser_misread(model.proto, str(fingerprint.get("trt_version") or ""))
    if why:
        raise ModelError(why)


def untyped_int8_reason(model: "Model", precision: str, version: str) -> str | None:
    """:func:`~placetune.backends.trtexec.command.untyped_int8` of ``model``: its Q/DQ nodes read from its ONNX file."""
    return untyped_int8_rule(precision, version, lambda: source_has_qdq(model))


def untyped_int8(model: "Model", precision: str, version: str, strongly_typed: bool,
                 base: dict[str, Any]) -> Measurement | None:
    """``infeasible`` for INT8 on a strongly typed TensorRT (11 on) when the model has no Q/DQ nodes, else None
    (:func:`untyped_int8_reason`)."""
    why = untyped_int8_reason(model, precision, version) if strongly_typed else None
    return Measurement.failure("infeasible", why, **base) if why else None


def prepared_onnx(model: "Model", cache_dir: Path, precision: str, strongly_typed: bool, tool: str,
                  base: dict[str, Any]) -> Path | Measurement:
    """The ONNX file TensorRT builds ``model`` from (FP16 weights for a strongly typed FP16 build),
    or ``build_failed`` when it cannot be prepared."""
    try:
        return prepare_onnx(model, cache_dir, fp16=strongly_typed and precision == "fp16")
    except Exception as exc:  # noqa: BLE001
        return Measurement.failure("build_failed", f"cannot prepare the ONNX file for {tool}: "
                                   f"{type(exc).__name__}: {exc}", **base)


def realized_vs_predicted(predicted: dict[str, str], realized: dict[str, str] | None) -> dict[str, list[str]]:
    """Layer -> ``[predicted, realised]`` where TensorRT disagreed with placetune's DLA rules (nothing where
    the realised placement is unknown, ``None``, or does not name the layer)."""
    if not realized:
        return {}
    return {n: [predicted[n], realized[n]] for n in predicted if n in realized and predicted[n] != realized[n]}
