"""``placetune selftest``: the first command on a new Jetson; checks the real stack in order, writes a shareable report.

Checks, in order: the CUDA binding in the worker Python; which Jetson module this is (the
device tree's ``compatible`` and ``model`` strings, :mod:`placetune.hardware.modules`: an unknown
module is said so and the checks go on with a stand-in profile of as many DLA cores as TensorRT
reports); TensorRT's version and DLA cores (against the module's); a tiny CNN all-GPU and
all-DLA0 in FP16, each engine timed again by ``trtexec --loadEngine --exposeDMA`` (the same engine,
timed the same way: the two must agree within 10% + 50 us, :data:`LATENCY_TOLERANCE`; a disagreement is
timed again once on both sides, :func:`compare_timing`, and on clocks not known to be locked one that
repeats is ``setup``, NOT VERIFIED, never a pass or a failure) and the DLA0 engine's loadables compared with ``trtexec --useDLACore=0
--allowGPUFallback``'s own build where trtexec's log tells them (:func:`compare_loadables`); INT8 on DLA without a calibration cache; pipelines
GPU->DLA0->GPU at K=1..3 (the gate passes, a deliberately wrong cut fails, loadables per core
<= 16); DLA0 || DLA1 replicas of the all-DLA engine; a second run hits the engine cache; the
worker exits with status 0; the clocks (nvpmodel mode, jetson_clocks on: a tune stops at its
first build when they are off, :mod:`placetune.tuning.first_build`; off is a setup step of the board,
``setup``, not a fault of the stack); power rails found and an energy figure read from them during
trtexec's timing of the all-GPU engine (none is ``unavailable``: a study that needs energy is refused).

Every DLA check runs DLA engines and reads where TensorRT placed their layers as a tune does
(the build log and each engine's layer information, cross-checked by
:func:`placetune.backends.tensorrt.placement_known.decide`): it fails loudly when that placement is
unknown (neither source says, or they disagree) or when no layer ran on the DLA (the check ran on
the GPU), and passes, saying so, when the layer information alone placed every layer. Each check is ``ok``, ``failed``, ``skipped`` (with
why), ``n/a`` (not applicable here: DLA checks on a module without DLA, INT8 without Q/DQ on
a strongly typed TensorRT), ``setup`` (the board needs a setup step before a tune) or
``unavailable`` (a figure this board cannot give; a study that needs it is refused).

The report (``selftest.txt`` and ``selftest.json``) holds versions, statuses and figures,
never environment variables; paths under the home directory are written as ``~``.
Exit status: 0 when every check is ok, n/a, setup or unavailable (the stack works; the report's
``[SETUP]`` lines say what to do before a tune); 8 (backend) when any check failed or could not
run (off a Jetson, most are skipped, so the exit status is 8 there).
"""

from __future__ import annotations

import os
import platform as _platform
import subprocess
import time
from typing import TYPE_CHECKING, Any, Callable

from placetune.validate import dumps_json
import placetune
from placetune._lazy import lazy_import
from placetune.files.folder import OutputFolder
from placetune.cli.selftest_evidence import engine_digest, evidence_line, save_evidence
from placetune.cli.selftest_checks import (LATENCY_ALLOWANCE_MS, LATENCY_TOLERANCE, NA as _NA, PASSING as _PASSING,
                                           SETUP as _SETUP, UNAVAILABLE as _UNAVAILABLE, clocks_check as _clocks_check,
                                           compare_loadables, compare_timing, dla_count_hint, energy_check as _energy_check,
                                           gate_kind, pip_wheel_hint, probe_died, within_tolerance, WRONG_DATA_REL_L2)

if TYPE_CHECKING:
    import placetune.backends.tensorrt.backend as _backend
    import placetune.tuning.evaluator as _evaluator
    import placetune.backends.trtexec.backend as _trtexec_backend
    import placetune.backends.trtexec.find as _find
    import placetune.model.model as _model
    import placetune.hardware.modules as _modules
    import placetune.hardware.platforms as _platforms
    import placetune.backends.tensorrt.pool as _pool
    import placetune.hardware.power as _power
    import placetune.settings as _settings
    import placetune.backends.tensorrt.env as _trt_env
    import placetune.backends.doctor as _doctor
    import placetune.inputdata as _inputdata
else:
    _backend = lazy_import("placetune.backends.tensorrt.backend")
    _evaluator = lazy_import("placetune.tuning.evaluator")
    _trtexec_backend = lazy_import("placetune.backends.trtexec.backend")
    _find = lazy_import("placetune.backends.trtexec.find")
    _model = lazy_import("placetune.model.model")
    _modules = lazy_import("placetune.hardware.modules")
    _platforms = lazy_import("placetune.hardware.platforms")
    _pool = lazy_import("placetune.backends.tensorrt.pool")
    _power = lazy_import("placetune.hardware.power")
    _settings = lazy_import("placetune.settings")
    _trt_env = lazy_import("placetune.backends.tensorrt.env")
    _doctor = lazy_import("placetune.backends.doctor")
    _inputdata = lazy_import("placetune.inputdata")

__all__ = ["run_selftest", "format_report", "within_tolerance", "dla_count_hint", "EXIT_NOT_ALL_OK", "STAND_IN_PLATFORMS",
           "LATENCY_TOLERANCE", "LATENCY_ALLOWANCE_MS", "pip_wheel_hint", "compare_timing",
           "compare_loadables", "gate_kind", "WRONG_DATA_REL_L2"]

#: exit status when a check failed or was skipped (the README's backend code)
EXIT_NOT_ALL_OK = 8
#: how long the ``worker exit`` check waits for a fresh worker to answer its probe and exit
WORKER_EXIT_TIMEOUT_S = 120.0
MODEL = "model-gn"  # a tiny CNN with non-trivial weights (zoo)
#: The precision of the pipeline, DLA0 || DLA1 and engine-cache checks, which check the runtime (cuts,
#: streams, both cores at once, the cache), not INT8: a DLA FP16 build needs no calibration, and TensorRT 11
#: (strongly typed) builds INT8 only from a model with Q/DQ nodes. Named here, not left to Settings' default.
RUNTIME_PRECISION = "fp16"
#: the profile the checks use on a module placetune has no profile for, by TensorRT's DLA core count
STAND_IN_PLATFORMS = {0: "orin-nano", 1: "orin-nx-8gb", 2: "orin-agx"}


def _scrub(text: str) -> str:
    home = os.path.expanduser("~")
    return text.replace(home, "~") if home and home != "/" else text


class _Report:
    def __init__(self) -> None:
        self.checks: list[dict[str, Any]] = []

    def add(self, name: str, status: str, detail: str, **figures: Any) -> None:
        self.checks.append({"name": name, "status": status, "detail": _scrub(detail), **figures})

    def guarded(self, name: str, fn: Callable[[], tuple[str, str, dict]], needs: str | None,
                status_if_not: str = "skipped") -> None:
        if needs:
            self.add(name, status_if_not, needs)
            return
        try:
            status, detail, figures = fn()
        except Exception as exc:  # noqa: BLE001 - a check that breaks is a failed check, and the rest still run
            status, detail, figures = "failed", f"{type(exc).__name__}: {exc}", {}
        self.add(name, status, detail, **figures)


def _check_own_input(data, model) -> None:
    """Refuse input data that is not for the selftest's own network (a user's frames of their model): one line
    naming --input-data, the array the selftest takes and what the file holds (exit 6)."""
    from placetune.errors import ConfigError
    from placetune.safetext import shown

    try:
        data.check(model)
    except ConfigError:
        takes = ", ".join(f"{t.name!r} {'x'.join(map(str, t.shape))} {t.dtype}" for t in model.inputs)
        holds = ", ".join(f"{k[:60]!r} {'x'.join(map(str, a.shape)) or 'scalar'} {a.dtype}"
                          for k, a in list(data.arrays.items())[:5])
        raise ConfigError(f"--input-data {shown(data.path)}: the selftest times its own network ({MODEL}), not your "
                          f"model, so its input data is {takes} (numpy.savez(path, input=x)), and the file holds "
                          f"{holds}; leave --input-data out, or time your model on your data with measure or tune "
                          "--input-data") from None


def _measure(model, plat: str, backend, placement, **settings):
    """One measurement of ``placement`` by ``backend``; ``settings`` name a ``trt_version`` (the DLA rules
    of the board's own TensorRT, as tune and measure apply them: :func:`placetune.settings.rules_version`)."""
    ev = _evaluator.Evaluator(model, plat, backend, settings=_settings.Settings(**settings), store=None)
    return ev.evaluate(placetune.Placement(ev.model, placement))


def _no_placement_lines(m) -> str | None:
    """Why the realised placement of a DLA build is unknown (None when it is known): the backend
    notes a build log without the ``Layers Running on DLA/GPU`` sections (or offload lines). When the
    engine's own layer information placed every layer instead (``placement_known`` True: the second
    source the backends read, :func:`placetune.backends.tensorrt.placement_known.decide`), the
    placement is known and a tune reads it the same way: not a failure."""
    if (m.extra or {}).get("placement_known") is True:
        return None
    for note in (m.extra or {}).get("notes") or []:
        if "placement sections" in str(note):
            why = (m.extra or {}).get("placement_unknown")
            return ("the DLA build printed no placement lines ('Layers Running on DLA' / [DlaLayer]), so where "
                    f"TensorRT put each layer is unknown ({why or note}); TensorRT 10 prints them at VERBOSE")
    return None


def _layer_information_only(m) -> str | None:
    """The line a DLA check adds when its placement rests on one source, None otherwise: known from
    the engines' layer information alone (the build log printed no placement lines), or from the build
    log alone because the layer information was read but not understood (``placement_unchecked``: a
    DLA form placetune has not seen). The check passes, as a tune reads it, and the report says so."""
    extra = m.extra or {}
    if extra.get("placement_known") is True and any("placement sections" in str(n) for n in extra.get("notes") or []):
        return ("placement read from the engine's layer information only: the build log printed no placement "
                "lines (a tune reads it the same way; send this report with its evidence/ folder)")
    if extra.get("placement_known") is True and extra.get("placement_unchecked"):
        return (f"placement read from the build log only: {extra['placement_unchecked']} (a tune reads it the same "
                "way; send this report with its evidence/ folder: it holds a real DLA engine's layer information)")
    return None


def _ran_on_dla(m, devices: list[str]) -> str | None:
    """Why a DLA check did not exercise the DLA (None when it did): no placement lines, no layer
    realised on a DLA, or no loadable on one of ``devices``."""
    missing = _no_placement_lines(m)
    if missing:
        return missing
    if (m.extra or {}).get("placement_known") is False:  # realized is None: not "no layer ran on a DLA"
        return (f"where TensorRT put the layers is unknown: {(m.extra or {}).get('placement_unknown') or 'no reason given'}"
                "; send this report with its evidence/ folder (the layer information and build log read)")
    on_dla = [n for n, d in (m.realized or {}).items() if d != "GPU"]
    idle = [dev for dev in devices if not (m.dla_loadables or {}).get(dev)]
    if on_dla and not idle:
        return None
    why = "; ".join(f"{n}: {r}" for n, r in list((m.fallback or {}).items())[:3])
    where = f"no layer ran on {', '.join(idle) or 'a DLA'}"
    return (f"the DLA check ran on the GPU: {where} (loadables {m.dla_loadables or {}})"
            + (f"; TensorRT's reasons: {why}" if why else ""))


#: the per-build limit of the self-test's own engines (tiny CNNs), in seconds
_SELFTEST_LIMIT_S = 900.0


def run_selftest(out_dir: str | os.PathLike[str], worker_python: str | None = None,
                 worker_env: dict[str, str] | None = None, trtexec: str | None = None, *,
                 device_tree: str | os.PathLike[str] = "/proc/device-tree", power_root: str | os.PathLike[str] = "/",
                 quick: bool = False, platform: str | None = None,
                 input_data: str | os.PathLike[str] | None = None) -> tuple[int, dict[str, Any]]:
    """Run every check, write ``selftest.txt`` / ``selftest.json`` into ``out_dir``.

    Args:
        out_dir: the report folder (also the engine cache of the checks).
        worker_python: the Python that runs the TensorRT worker (JetPack 5: ``/usr/bin/python3``).
        worker_env: extra environment variables of the worker and of trtexec (e.g. ``LD_LIBRARY_PATH``).
        trtexec: the trtexec binary (default: found as the trtexec backend finds it).
        device_tree: where the device tree is (``model`` and ``compatible`` files).
        power_root: the sysfs root of the power rails.
        quick: short warm-ups and timing runs (a smoke test; latencies are less precise).
        platform: the placetune profile of a module the device tree does not identify (the one a
            tune of this board will name); on a module it identifies, the board's own profile must
            be this one or the module check fails.
        input_data: a ``.npz`` of the self-test network's input (``input``, 4x3x32x32 float32) that
            both real backends time on instead of random input; the report says which input was timed.

    Returns:
        (exit status: 0 all ok, :data:`EXIT_NOT_ALL_OK` otherwise; the report as a dict).

    Raises:
        UnknownNameError: ``platform`` is not a placetune profile (one line naming the valid ones;
            exit 4, before anything runs).
        ConfigError: ``worker_python`` does not exist or is not on PATH (exit 6, before anything runs).
    """
    named = _platforms.get_platform(platform) if platform else None
    python = _backend.worker_interpreter(worker_python)  # a typo is refused before anything runs
    model = _model.Model.load(MODEL, batch=4)
    data = _inputdata.load_input_data(input_data) if input_data else None
    if data is not None:  # refused before the report folder is made
        _check_own_input(data, model)
    report = OutputFolder(out_dir, "selftest report folder")  # overwrites only an earlier report of its own
    report.check(["selftest.json", "selftest.txt"])
    report.mkdir()
    out = report.directory
    rep = _Report()
    t_start = time.time()
    # 1. the CUDA binding in the worker Python
    pool = _pool.WorkerPool(python, worker_env, start_timeout_s=120)
    try:
        reply = pool.run({"op": "probe"}, timeout_s=120)
    finally:
        pool.close()
    probe = reply.result if reply.kind == "result" else {}
    died = None if reply.kind == "result" else probe_died(reply, python)
    if probe.get("cuda_binding"):
        rep.add("cuda", "ok", f"{probe['cuda_binding']} {probe.get('cuda_version')} on {probe.get('cuda_device')}")
    elif died:  # no answer: nothing says a binding is missing, so no install advice
        rep.add("cuda", "failed", died)
    else:
        why = probe.get("cuda_error") or "the worker's probe gave no CUDA binding and no error"
        rep.add("cuda", "failed", why if "fix:" in why else f"{why}; fix: {probe.get('cuda_fix') or ''}")
    version, cores = probe.get("trt_version"), probe.get("num_dla_cores")
    # 2. the module, and the profile the checks use
    match = _modules.identify_module(*_modules.read_device_tree(device_tree)).resolve(cores)
    module = match.module
    plat = (named.name if named and named.name in match.profiles else None) or match.platform or (
        named.name if named else None) or (
        STAND_IN_PLATFORMS.get(int(cores), "orin-agx") if cores is not None else "orin-agx")
    if not match.model and not match.compatible:
        rep.add("module", "skipped", f"not a Jetson: no device tree at {device_tree}; the checks use the {plat} "
                "profile", platform=plat)
    elif named and match.platform and named.name not in match.profiles:
        rep.add("module", "failed", f"{match.describe()}, not --platform {named.name}: run the selftest (and a "
                f"tune) with --platform {match.platform}, or without --platform", platform=plat)
    elif named and not match.platform:
        rep.add("module", "ok", f"{match.describe()}; the checks use the profile named by --platform, {plat} "
                f"({named.dla_count} DLA core(s))", platform=plat)
    elif not match.known:
        rep.add("module", "skipped", f"{match.describe()}; the checks go on with the stand-in profile {plat} "
                f"({int(cores or 0)} DLA core(s), as TensorRT reports): send this report, or name the profile a tune "
                f"of this board will use with --platform ({', '.join(_platforms.PLATFORMS)})", platform=plat)
    elif not match.platform:
        rep.add("module", "ok", f"{match.describe()}; the checks use the stand-in profile {plat} (as many DLA "
                "cores)", platform=plat, part=module.part if module else None)
    else:
        rep.add("module", "ok", match.describe(), platform=plat, part=module.part if module else None)
    # 3. TensorRT and its DLA cores, against the module's
    expected = module.dla_cores if module is not None else (named.dla_count if named else None)
    title = module.title if module is not None else (f"{named.name} (--platform)" if named else "")
    where = f" from {probe['trt_path']}" if probe.get("trt_path") else ""
    if not version and died:
        rep.add("tensorrt", "failed", f"not known: {died}")
    elif not version:
        rep.add("tensorrt", "failed", f"cannot import tensorrt in {python}: {probe.get('trt_error')}; fix: "
                f"{_doctor.FIX_TRT}")
    elif cores is None:  # tensorrt imports, but no builder could be made: no DLA count to compare with the module's
        rep.add("tensorrt", "failed", f"TensorRT {version}{where} imports, but no TensorRT builder can be made in the "
                f"worker ({probe.get('builder_error') or 'no reason given'}), so its DLA cores are unknown: the GPU is "
                "not usable by this process (see the cuda line; a user outside the video group, a container "
                "without --runtime nvidia)", trt_version=version, dla_cores=None)
    elif match.emulated_on and expected is not None and int(cores or 0) > expected:
        from placetune.backends.jetson import emulated_dla_cores  # the kit's cores beyond the module's: not used
        rep.add("tensorrt", "ok", f"TensorRT {version}{where}; " + emulated_dla_cores(
            title, expected, match.emulated_on, cores), trt_version=version, dla_cores=expected)
        cores = expected
    elif expected is not None and int(cores or 0) != expected:
        hint = dla_count_hint(version, title) + pip_wheel_hint(probe.get("trt_path"), version)
        rep.add("tensorrt", "failed", f"TensorRT {version}{where} reports {cores} DLA core(s), but a {title} "
                f"has {expected}{hint}", trt_version=version, dla_cores=cores)
    else:
        rep.add("tensorrt", "ok", f"TensorRT {version}{where}, {cores} DLA core(s)", trt_version=version,
                dla_cores=cores)
    no_trt = None if version and probe.get("cuda_binding") else "needs TensorRT and a CUDA binding in the worker"
    has_dla = bool(cores)
    dla_status = _NA if not has_dla and expected == 0 else "skipped"
    no_dla = no_trt or (None if has_dla else ("this module has no DLA" if expected == 0 else "needs a DLA core"))
    strongly_typed = bool(version) and int(str(version).split(".")[0]) >= 11
    # the DLA rules of the TensorRT the worker has (the default's 8.6 on JetPack 5.1's 8.5 or 7.2's 11.4.1
    # asked the DLA for other layers than a tune there does, and said "pass trt_version", which selftest has not)
    rules = {"trt_version": _settings.rules_version(version)} if version else {}
    trtexec = trtexec or _find.which_trtexec()
    cache = out / "cache"
    timing = dict(warmup_ms=5.0, iterations=5, replicas_duration_s=0.2, profile_iterations=0) if quick else {}
    # the self-test's engines are tiny CNNs that build in seconds: a check past 900 s is hung, not slow (a night's
    # builds of a whole detector get placetune.backends.base.BUILD_TIMEOUT_S)
    be = _backend.TensorRTBackend(worker_python=worker_python, worker_env=worker_env, cache_dir=cache,
                         save_plans=out / "plans", input_data=input_data, timeout_s=_SELFTEST_LIMIT_S,
                         **timing) if not no_trt else None
    if be is not None:
        be.refuse_other_board = False  # the module and tensorrt checks above report them
    tx = None
    if trtexec:
        tx = _trtexec_backend.TrtexecBackend(  # its time_plan, beyond the contract
                            trtexec=trtexec, cache_dir=cache / "trtexec", env=dict(worker_env or {}),
                            power_root=power_root, input_data=input_data, timeout_s=_SELFTEST_LIMIT_S,
                            **(dict(warmup_ms=5.0, iterations=10, duration_s=0.3) if quick else {}))
    gpu = {l.name: "GPU" for l in model.layers}
    dla0 = {l.name: "DLA0" for l in model.layers}
    energy_seen: dict[str, Any] = {}
    clocks_locked, throttled = _trt_env.read_clocks_state()
    rep.add(*_clocks_check(_trt_env.read_power_mode(), clocks_locked, throttled),
            **({"throttled": throttled} if clocks_locked is True and throttled else {}))

    def throttled_now() -> list[str]:
        """The GPU clock below its lock when the selftest began, or now (read again): what moves an engine's
        timing. A CPU read below its lock is said on the clocks line only (a CPU's current frequency may be
        read off the one set), so it never turns a timing failure into NOT VERIFIED."""
        return [t for t in dict.fromkeys([*throttled, *_trt_env.read_throttled()]) if t.startswith("GPU")]

    def same_engine(m, devs, core: int, precision: str) -> tuple[str | None, dict[str, Any]]:
        """The worker's engine timed again by trtexec --loadEngine: None when within tolerance."""
        plan = (m.extra or {}).get("plan_file")
        if tx is None or not plan:
            return (None if tx is None else "the worker kept no engine file for trtexec to time"), {}

        def time_it():
            t = tx.time_plan(plan, _settings.Settings(precision=precision, **rules), dla_core=core, batch=model.batch)
            if core < 0 and (not energy_seen or energy_seen.get("energy_mj") is None):  # the energy check's figure
                energy_seen.update(energy_mj=t.energy_mj, power=(t.extra or {}).get("power") or {},
                                   status=t.status, reason=t.reason)
            return t

        t = time_it()
        if not t.ok:
            return f"trtexec --loadEngine of the worker's engine: {t.status}: {t.reason}", {}
        figs = {"trtexec_command": " ".join((t.extra or {}).get("commands", {}).get("time", [])[1:])}

        def again() -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
            m2 = _measure(model, plat, be, devs, precision=precision, **rules)  # the kept engine file, loaded
            mine = {**m2.latency_ms, "engine": engine_digest(plan)} if m2.ok else None  # which engine each timed
            t2 = time_it()
            return mine, ({**t2.latency_ms, "engine": engine_digest(plan)} if t2.ok else None)

        first = engine_digest(plan)
        why, more = compare_timing({**m.latency_ms, "engine": first}, {**t.latency_ms, "engine": first}, again,
                                   clocks_locked, throttled_now)
        figs.update(more)
        return why, figs

    def engine(devs, precision, versus_trtexec=False, name=""):
        def check():
            notes: list[str] = []
            m = _measure(model, plat, be, devs, precision=precision, **rules)
            core = 0 if devs is dla0 else -1
            kept = save_evidence(out, name, "placetune", m.extra, _scrub) if core >= 0 else []
            if not m.ok:
                return "failed", f"{m.status}: {m.reason}", {"evidence": kept} if kept else {}
            figs = {"latency_ms": m.latency_ms["median"], "dla_loadables": m.dla_loadables, "realized": m.realized,
                    "helper_layers": dict(m.extra.get("helper_layers") or {})}
            if kept:
                figs["evidence"] = kept
            if versus_trtexec and tx is None:  # the check's name promises a comparison: never ok without one
                looked = "; ".join(place for place, _ in _find.trtexec_candidates())
                return "skipped", (f"{m.status}, median {m.latency_ms['median']:.3f} ms by placetune's worker, not "
                                   f"compared with trtexec: no trtexec found (looked in: {looked}); JetPack installs "
                                   "it as /usr/src/tensorrt/bin/trtexec (package libnvinfer-bin), or name it with "
                                   f"{_find.ENV_VAR}=PATH"), figs
            if core >= 0:
                why = _ran_on_dla(m, ["DLA0"])
                if why:
                    return "failed", why, figs
                only = _layer_information_only(m)
                if only:
                    notes.append(only)
            why, more = same_engine(m, devs, core, precision)
            figs.update(more)
            unverified = why if figs.get("unverified") else None
            if why and not unverified:
                return "failed", why, figs
            if figs.get("drift"):  # agreed on a second run, but one side's two runs moved apart: said, not hidden
                notes.append(str(figs["drift"]))
            if core >= 0 and tx is not None:
                t = _measure(model, plat, tx, devs, precision=precision, **rules)
                figs["evidence"] = figs.get("evidence", []) + save_evidence(out, name, "trtexec", t.extra, _scrub)
                if not t.ok:
                    return "failed", f"trtexec: {t.status}: {t.reason}", figs
                figs["trtexec_loadables"] = t.dla_loadables
                why, note = compare_loadables(m.dla_loadables or {}, t.dla_loadables or {}, t.extra or {})
                if why:
                    return "failed", why, figs
                if note:
                    figs["loadables_compared"] = False
                    notes.append(note)
            compared = " (trtexec agrees)" if "trtexec_latency_ms" in figs else ""
            if figs.get("retimed"):
                compared = " (trtexec agrees on a second run)"
            if unverified:  # clocks not locked: the timing was not compared, a setup step of the board
                return _SETUP, (f"{m.status}; timing vs trtexec {unverified}; loadables {m.dla_loadables}"
                                + "".join(f"; {n}" for n in notes)), figs
            return "ok", (f"{m.status}, median {m.latency_ms['median']:.3f} ms{compared}, loadables "
                          f"{m.dla_loadables}" + "".join(f"; {n}" for n in notes)), figs
        return check

    rep.guarded("engine all-GPU fp16 (vs trtexec)", engine(gpu, "fp16", versus_trtexec=True), no_trt)  # no DLA: no evidence
    no_trtexec = None if trtexec else (
        f"needs trtexec: none found (looked in: {'; '.join(p for p, _ in _find.trtexec_candidates())}); JetPack "
        f"installs it as /usr/src/tensorrt/bin/trtexec (package libnvinfer-bin), or name it with {_find.ENV_VAR}=PATH")
    rep.guarded("engine all-DLA0 fp16 (vs trtexec)", engine(dla0, "fp16", name="all-DLA0 fp16"), no_dla or no_trtexec,
                dla_status)
    int8_na = "TensorRT 11 is strongly typed: INT8 needs a model with Q/DQ nodes" if strongly_typed else None
    rep.guarded("engine all-DLA0 int8, no calibration cache", engine(dla0, "int8", name="all-DLA0 int8"), no_dla or int8_na,
                _NA if int8_na and not no_dla else dla_status)
    half = {l.name: ("DLA0" if len(model.layers) // 3 <= i < 2 * len(model.layers) // 3 else "GPU")
            for i, l in enumerate(model.layers)}

    def pipelines():
        figs: dict[str, Any] = {}
        only: str | None = None
        for k in (1, 2, 3):
            m = _measure(model, plat, be, half, mode="pipeline", frames_in_flight=k, precision=RUNTIME_PRECISION,
                         **rules)
            if k == 1:  # each DLA segment's layer information and the build log lines read (the same engines at K=2, 3)
                figs["evidence"] = save_evidence(out, "pipeline GPU-DLA0-GPU", "placetune", m.extra, _scrub)
            gate = m.extra.get("gate") or {}
            if not m.ok or not gate.get("passed"):
                return "failed", f"K={k}: {m.status}: {m.reason}{gate_kind(gate)}", figs
            if gate.get("vacuous"):
                return "failed", f"K={k}: the gate compared all-zero outputs, so it checked nothing", figs
            if gate.get("same_for_every_input"):
                return "failed", (f"K={k}: the gate's reference gave the same outputs for every random input, so "
                                  "it checked nothing"), figs
            why = _ran_on_dla(m, ["DLA0"])
            if why:
                return "failed", f"K={k}: {why}", figs
            if any(n > 16 for n in (m.dla_loadables or {}).values()):
                return "failed", f"K={k}: more than 16 loadables on a core: {m.dla_loadables}", figs
            only = only or _layer_information_only(m)
            figs[f"K{k}"] = {"period_ms": m.extra.get("period_ms"), "latency_ms": m.latency_ms["median"],
                             "loadables": m.dla_loadables}
        be.test_wrong_cut = True  # the same worker, its test hook on for one measurement
        given, be.input_data = be.input_data, None  # the input data is model-gn's, not seed-block's: random input
        try:  # seed-block: its concat reads two same-typed cut tensors, which the wrong cut swaps
            block = _model.Model.load("seed-block")
            w = _measure(block, plat, be, {"/conv3/Conv": "DLA0"}, mode="pipeline", precision=RUNTIME_PRECISION,
                         **rules)
        finally:
            be.test_wrong_cut = False
            be.input_data = given
        if w.status != "runtime_failed" or ((w.extra or {}).get("gate") or {}).get("passed") is not False:
            # caught means the gate compared the outputs and they differed: a run that failed otherwise (a DLA
            # error, a build failure) says nothing of whether the gate catches a wrong cut
            figs["wrong_cut"] = w.status
            return "failed", f"a deliberately wrong cut was not caught by the gate ({w.status}: {w.reason})", figs
        return "ok", "gate passes at K=1..3; a wrong cut fails it" + (f"; {only}" if only else ""), figs

    rep.guarded("pipeline GPU->DLA0->GPU K=1..3, wrong cut", pipelines, no_dla, dla_status)

    def replicas():
        # the all-DLA placement: each DLA instance runs the network's DLA layers on its own core
        m = _measure(model, plat, be, dla0, mode="replicas", replicas={"DLA0": 1, "DLA1": 1},
                     precision=RUNTIME_PRECISION, **rules)
        kept = {"evidence": save_evidence(out, "DLA0 || DLA1", "placetune", m.extra, _scrub)}  # each DLA replica's
        if not m.ok:
            return "failed", f"{m.status} {m.reason or ''}".strip(), kept
        why = _ran_on_dla(m, ["DLA0", "DLA1"])
        if why:
            return "failed", why, {"dla_loadables": m.dla_loadables, **kept}
        per = {r["device"]: round(r["throughput_fps"], 1) for r in m.extra.get("replicas") or []}
        only = _layer_information_only(m)
        return "ok", (f"both DLA engines ran at once: {per} samples/s, loadables {m.dla_loadables}"
                      + (f"; {only}" if only else "")), {"dla_loadables": m.dla_loadables, "throughput_fps": per, **kept}

    two = None if (cores or 0) >= 2 else ("this module has one DLA core" if expected == 1 else "needs 2 DLA cores")
    rep.guarded("DLA0 || DLA1", replicas, no_dla or two, _NA if (not no_dla and expected == 1) else dla_status)

    def second_run():
        m = _measure(model, plat, be, half, mode="pipeline", frames_in_flight=2, precision=RUNTIME_PRECISION, **rules)
        hits = (m.extra.get("engine_cache") or {}).get("hits", 0)
        return ("ok" if m.ok and hits > 0 else "failed"), f"engine cache {m.extra.get('engine_cache')}", {}

    rep.guarded("second run hits the engine cache", second_run, no_dla, dla_status)
    if be is not None:
        be.close()
    rep.add(*_worker_exit(python, worker_env))
    rails = _power.discover_rails(power_root)
    rep.add(*_energy_check([r.name for r in rails], energy_seen, tx is not None))
    ok = all(c["status"] in _PASSING for c in rep.checks)
    doc = {"placetune_selftest": 1, "python": _platform.python_version(), "machine": _platform.machine(),
           "l4t": _trt_env.read_l4t(), "jetpack": _trt_env.read_jetpack(), "module": match.model,
           "compatible": list(match.compatible), "platform": plat,
           "timed_input": data.describe() if data is not None else f"{_inputdata.RANDOM_INPUT} (no --input-data)",
           "seconds": round(time.time() - t_start, 1), "all_ok": ok,
           "setup": [c["name"] for c in rep.checks if c["status"] == _SETUP],
           "unavailable": [c["name"] for c in rep.checks if c["status"] == _UNAVAILABLE],
           "drift": [c["name"] for c in rep.checks if c.get("drift")],
           "throttled": [c["name"] for c in rep.checks if c.get("throttled")],
           "unverified": [c["name"] for c in rep.checks if c.get("unverified") and c["status"] == _SETUP],
           "checks": rep.checks}
    report.write("selftest.json", dumps_json(doc, indent=1))
    report.write("selftest.txt", format_report(doc))
    return (0 if ok else EXIT_NOT_ALL_OK), doc


def _worker_exit(python: str, worker_env: dict[str, str] | None) -> tuple[str, str, str]:
    """The ``worker exit`` check: a fresh worker answers a probe and exits with status 0, its CUDA
    binding closed (pycuda aborts with "context stack was not empty" otherwise). A worker that cannot
    be started, or that does not exit within :data:`WORKER_EXIT_TIMEOUT_S` (hung at exit), is a failed
    check naming why, never a traceback that leaves no report."""
    try:
        p = subprocess.run([python, str(_pool.WORKER_FILE)], input='{"op": "probe"}\n', capture_output=True,
                           text=True, timeout=WORKER_EXIT_TIMEOUT_S, env={**os.environ, **(worker_env or {})})
    except subprocess.TimeoutExpired:
        return ("worker exit", "failed", f"the worker did not exit within {WORKER_EXIT_TIMEOUT_S:g} s of its probe "
                "(it hangs at exit, or its probe never ended): a tune's workers would hang the same way")
    except OSError as exc:
        return ("worker exit", "failed", f"the worker Python {python} cannot be started: "
                f"{exc.strerror or type(exc).__name__}")
    aborted = "context stack" in p.stderr
    return ("worker exit", "ok" if p.returncode == 0 and not aborted else "failed",
            f"exit status {p.returncode}" + ("; pycuda aborted: context stack was not empty" if aborted else ""))


def format_report(doc: dict[str, Any]) -> str:
    """The text report: one line per check (``[ok]``, ``[FAILED]``, ``[skipped]``, ``[n/a]``) and why."""
    lines = [f"placetune selftest: python {doc['python']} ({doc['machine']}), L4T {doc['l4t'] or 'unknown'}, "
             f"JetPack {doc['jetpack'] or 'unknown'}, {doc['module'] or 'unknown module'}",
             f"timed on input: {doc.get('timed_input') or 'random-uniform'}"]
    for c in doc["checks"]:
        tag = {"ok": "[ok]     ", "failed": "[FAILED] ", "skipped": "[skipped]", _NA: "[n/a]    ",
               _SETUP: "[SETUP]  ", _UNAVAILABLE: "[unavailable]"}[c["status"]]
        lines.append(f"{tag} {c['name']}: {c['detail']}")
    setup = doc.get("setup") or []
    kept = evidence_line(doc["checks"])
    if kept:
        lines.append(kept)
    if doc.get("drift"):  # passed on a second run, but the same engine moved between two runs: never only in a line
        lines.append(f"RUN-TO-RUN DRIFT in {', '.join(doc['drift'])}: one engine timed twice moved by more than "
                     "the tolerance (see the line); a tune on this board records figures that move as much")
    unverified = doc.get("unverified") or []
    if unverified:  # a timing check not made (clocks not locked): never reported as a pass
        slowed = any(c.get("throttled") for c in doc["checks"] if c["name"] in unverified)
        cause = ("the clocks are locked but throttled (a thermal or power cap)" if slowed else
                 "the clocks are not locked")
        lines.append(f"TIMING NOT VERIFIED in {', '.join(unverified)}: {cause} and the worker's "
                     f"and trtexec's timings of the same engine disagree, which {'throttled' if slowed else 'unlocked'} "
                     "clocks alone can cause: " + ("let the board cool (`sudo jetson_clocks --fan`)" if slowed else
                                  "run `sudo jetson_clocks`") + ", then the selftest again to check the timing method")
    if "clocks" in (doc.get("throttled") or []):  # locked, but slowed when read: said, never only in a line
        lines.append("CLOCKS THROTTLED when the selftest read them (see the clocks line): the clocks are locked, but a "
                     "thermal or power cap ran some below their lock; a tune marks measurements taken so untrusted")
    if doc["all_ok"] and unverified:
        lines.append(f"the stack builds and runs, but its timing is not verified; the board needs setup before a "
                     f"tune: see the [SETUP] lines ({', '.join(setup)})")
    elif doc["all_ok"] and setup:
        lines.append(f"the stack works (every check of it ok); the board still needs setup before a tune: "
                     f"see the [SETUP] line{'s' if len(setup) > 1 else ''} ({', '.join(setup)})")
    elif doc["all_ok"] and doc.get("unavailable"):
        lines.append(f"all checks of the stack ok ({', '.join(doc['unavailable'])}: unavailable on this board, see "
                     "its line)")
    elif doc["all_ok"]:
        lines.append("all checks ok")
    elif not doc.get("module") and not doc.get("compatible"):  # no device tree: not a Jetson
        lines.append("not every check passed: this machine is not a Jetson, so the checks of the Jetson's "
                     "TensorRT, CUDA and DLA cannot pass here; run `placetune selftest` on the Jetson "
                     "(here: `placetune doctor` says what works, the simulated Jetson always does)")
    else:
        lines.append("not every check passed: the [FAILED] lines say what to fix; when asking for help, attach "
                     "selftest.txt, selftest.json and the evidence/ folder to the report (nothing secret in them)")
    return "\n".join(lines) + "\n"
