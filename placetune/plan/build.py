"""``placetune build``: build a plan's engines on the Jetson and say where TensorRT put each layer.

The plan folder (:func:`~placetune.plan.folder.write_plan_folder`: the ONNX file of each engine
and ``plan.json``) is built through the isolated TensorRT worker with the settings the plan was
measured with (precision, DLA core per engine, GPU fallback, per-layer devices, a pipeline's cut
tensors in the DLA's own format on both sides). Each engine is written into the folder under the
name ``plan.json`` gives it (``model.seg0.engine``...), its build record beside it
(``<engine>.json``: the TensorRT log). The realised placement is read as a tune reads it: from the
build log and each DLA engine's layer information (the worker deserialises it on its core),
cross-checked (:func:`~placetune.backends.tensorrt.jobs.read_realised`); where they disagree or
neither says, the engine's DLA layers are ``unknown``, never the plan's. A different TensorRT
or JetPack can realise a plan differently: every layer whose realised device differs from the
plan's is reported, with TensorRT's reason, and ``build.json`` keeps the whole report.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.errors import BackendError, ConfigError, ModelError
from placetune.files.folder import OutputFolder
from placetune.files.names import confined, file_name
from placetune.files.read import check_regular
from placetune.model.int8_placeholder import placeholder_ranges
from placetune.model.onnx_io import load_with_weights
from placetune.safetext import shown
from placetune.validate import dumps_json
from placetune.wording import plural
from placetune.backends.jetson import board_module
from placetune.backends.onnx_prep import convert_to_fp16, has_qdq
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.backends.tensorrt.jobs import read_realised
from placetune.measurement import UNKNOWN_DEVICE
from placetune.model.model import Model
from placetune.model.misreads import old_parser_misread
from placetune.plan.trtexec import BUILTIN_PLUGINS
from placetune.plan.file import Plan, load
from placetune.plan.folder import NVTX_SETUP, NVTX_VERBOSITY, check_calibration_cache, engine_files, write_plan_folder
from placetune.plan.trtexec import target_version, untyped_int8_plan
from placetune.plan.deploy_notes import JETPACKS

if TYPE_CHECKING:
    from placetune.backends.tensorrt.backend import TensorRTBackend
    from placetune.model.model import Model
    from placetune.plan.file import Plan

__all__ = ["BuildReport", "build_plan", "UNKNOWN"]

#: a layer's realised device in ``build.json`` when neither its engine's build log nor its layer
#: information says where it ran, or the two disagree (a measurement's ``realized_partial`` writes it so too)
UNKNOWN = UNKNOWN_DEVICE



def _custom_plugin_advice(plugins: Any, why: str) -> str:
    """What to do when an engine holding a plugin TensorRT does not ship (TensorRT-YOLO's EfficientIdxNMS_TRT,
    a custom layer) did not build: the worker registers the built-in plugins only (``init_libnvinfer_plugins``),
    so TensorRT's parser finds no creator for it ("Plugin not found")."""
    custom = sorted({str(op) for op in (plugins or {}).values() if str(op) not in BUILTIN_PLUGINS}) \
        if isinstance(plugins, dict) else []
    if not custom or "plugin" not in why.lower():
        return ""
    return (f"; the plan holds {plural(len(custom), 'plugin')} TensorRT does not ship ({shown(', '.join(custom), 120)}): "
            "placetune build registers TensorRT's built-in plugins only; build the plan with its build.sh, adding "
            "your plugin library to its trtexec lines (--staticPlugins=lib.so from TensorRT 10, --plugins=lib.so "
            "before; build.sh says so)")


@dataclass
class BuildReport:
    """What :func:`build_plan` built and how TensorRT realised it.

    Attributes:
        directory: the plan folder the engines were written into.
        trt_version: the TensorRT that built them.
        engines: per engine: ``name``, ``device``, ``engine_file``, ``build_seconds``, ``engine_bytes``,
            ``dla_loadables``, ``io_formats``.
        realized: layer -> the device TensorRT ran it on; ``unknown`` for a layer asked on the DLA
            in an engine whose placement is unknown (neither source says, or they disagree), but
            the GPU for one a fallback warning of the build log names.
        differences: ``{"layer", "plan", "built", "reason"}`` for every layer realised elsewhere
            than the plan says (known placements, and the layers a fallback warning names).
        unknown: ``engine (why)`` for every engine whose realised placement is unknown.
        notes: what else the build said.
    """

    directory: Path
    trt_version: str
    engines: list[dict[str, Any]] = field(default_factory=list)
    realized: dict[str, str] = field(default_factory=dict)
    differences: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def as_planned(self) -> bool:
        """True when every layer is known to run where the plan says (no difference, no unknown engine)."""
        return not self.differences and not self.unknown

    def summary(self) -> str:
        """A few lines for a terminal."""
        lines = [f"built {plural(len(self.engines), 'engine')} with TensorRT {self.trt_version} into {self.directory}: "
                 + ", ".join(f"{e['engine_file']} ({e['device']})" for e in self.engines)]
        if self.unknown:
            n = sum(1 for d in self.realized.values() if d == UNKNOWN)
            lines.append("where TensorRT put the layers is UNKNOWN" + (f" for {plural(n, 'layer')} asked on the DLA"
                         if n else "") + ": " + "; ".join(self.unknown[:3]) + " (build.json lists them as "
                         "'unknown'; they are not reported as built where the plan says)")
        if self.differences:
            lines.append(f"{plural(len(self.differences), 'layer')} run elsewhere than the plan says:")
            lines += [f"  {d['layer']}: plan {d['plan']}, built {d['built']}" + (f" ({d['reason']})" if d["reason"]
                                                                                   else "")
                      for d in self.differences[:20]]
            if len(self.differences) > 20:
                lines.append(f"  ... and {len(self.differences) - 20} more (build.json lists all)")
        elif self.unknown:
            lines.append("every layer whose placement is known runs where the plan says; some engines' "
                         "placement is UNKNOWN (the notes say which)")
        else:
            lines.append("every layer runs where the plan says")
        if any(e.get("profiling_verbosity") == "DETAILED" for e in self.engines):
            lines.append(f"the engines are built with DETAILED profiling verbosity (their layer information): run each "
                         f"execution context with {NVTX_VERBOSITY} NVTX markers, as they were timed: "
                         f"{NVTX_SETUP['python']} (placetune.runtime does; build.json and README.txt say more)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "trt_version": self.trt_version, "engines": self.engines,
                "realized": self.realized, "differences": self.differences, "notes": self.notes,
                "placement_known": not self.unknown, "placement_unknown": self.unknown,
                # how an application runs the engines as they were timed (each engine's profiling_verbosity: as built)
                "nvtx_verbosity": NVTX_VERBOSITY, "nvtx_setup": dict(NVTX_SETUP)}


def _segment_ranges(paths: list[Path]) -> dict[str, float]:
    """trtexec's placeholder INT8 ranges over the whole pipeline
    (:func:`placetune.model.int8_placeholder.placeholder_ranges`), so a cut tensor has one range in
    its producer and readers."""
    return placeholder_ranges(load_with_weights(path, external=False).graph for path in paths)


def _check_built(where: Path, plan: "Plan", infos: list[dict[str, Any]], folder: Path) -> None:
    """Every engine of ``plan`` is in ``where``, of the size the worker built, with its build record
    (messages name the file of the plan ``folder``).

    Raises:
        BackendError: naming the first engine file missing or short (and the worker's reason when it said one).
    """
    if len(infos) != len(plan.engines):
        raise BackendError(f"placetune build: the TensorRT worker reported {plural(len(infos), 'engine')} for a "
                           f"plan of {len(plan.engines)}: nothing of this build can be trusted")
    for eng, info in zip(plan.engines, infos):
        name = engine_files(plan, eng)[1]
        want = info.get("engine_bytes")
        why = info.get("cache_error")
        for base, size in ((name, want), (name + ".json", None)):
            file, named = where / base, folder / base
            try:
                got = os.stat(file).st_size
            except OSError as exc:
                raise BackendError(f"placetune build: the engine file {shown(named)} was not written"
                                   f" ({why or exc.strerror or exc}); the disk may be full") from None
            if got == 0 or (isinstance(size, int) and got != size):
                raise BackendError(f"placetune build: the engine file {shown(named)} is short ({got} bytes"
                                   + (f" of {size}" if isinstance(size, int) else "") + ")"
                                   + (f": {why}" if why else "") + "; the disk may be full")


def _open(plan: "Plan | str | os.PathLike[str]", model: "Model | None", out: str | os.PathLike[str] | None,
          calibration_cache: str | None) -> tuple["Plan", Path]:
    """The plan and its folder (written first when ``plan`` is a plan, or a plan file, or ``out`` is given)."""
    if isinstance(plan, (str, os.PathLike)):
        path = Path(plan)
        if os.path.isdir(path):  # os.path: a name too long for the system is no folder, not an OSError
            if not os.path.isfile(path / "plan.json"):
                raise ConfigError(f"{path}: not a plan folder (no plan.json); write one with "
                                  "`placetune export --study NAME --format trtexec -o DIR`")
            if out is None or Path(out).resolve() == path.resolve():
                # file names and indices checked: inside the folder; a --model given must be the plan's (its
                # mismatch said before TensorRT is asked for)
                p = load(path / "plan.json", model, check_hash=model is not None)
                if not all(isinstance(e.get("onnx_file"), str) for e in p.engines):  # a plan file put in a folder
                    raise ConfigError(f"{path}: its plan.json names no ONNX file per engine (a plan file, or one an "
                                      "older placetune wrote, not an exported folder's): build it into a plan folder "
                                      f"with `placetune build {shown(path / 'plan.json')} -o DIR`")
                if not all(confined(path, e.get("onnx_file"), "onnx_file of plan.json").is_file() for e in p.engines):
                    raise ConfigError(f"{path}: the plan's ONNX files are missing; export the folder again")
                return p, path
            plan = load(path / "plan.json", model, check_hash=model is not None)
        elif not os.path.lexists(path):
            raise ConfigError(f"plan {shown(path)}: no such file or folder")
        else:  # a device, a FIFO or a dangling link is named as what it is
            plan = load(check_regular(path, "plan"), model, check_hash=model is not None)
    assert isinstance(plan, Plan)
    if model is None:
        src = plan.model.get("path") or plan.model.get("zoo")
        if not src:
            raise ModelError("the plan does not say which model it is for: pass the ONNX model (--model)")
        try:
            model = Model.load(str(src), batch=plan.batch) if plan.model.get("zoo") else Model.load(str(src))
        except (OSError, ModelError) as exc:
            raise ModelError(f"the plan's model {src} cannot be loaded ({exc}): pass it with --model") from None
    folder = Path(out) if out is not None else Path(file_name(
        f"{plan.model.get('name') or 'plan'}.build", "the build folder named after the plan's model",
        hint="give the folder with -o DIR"))
    written = write_plan_folder(plan, model, folder, calibration_cache=calibration_cache)
    return written.plan, folder


def _dla_cores_used(p: "Plan") -> list[int]:
    """The DLA cores the plan's engines run layers on."""
    used = set()
    for eng in p.engines:
        if not eng.get("dla_layers"):
            continue
        core = eng.get("dla_core")
        device = str(eng.get("device", "GPU"))
        if isinstance(core, int) and not isinstance(core, bool) and core >= 0:
            used.add(core)
        elif device.startswith("DLA") and device[3:].isdigit():
            used.add(int(device[3:]))
    return sorted(used)


def _module_checks(p: "Plan", cores: int | None) -> list[str]:
    """Refuse a plan tuned for another module than the one this board's device tree names
    (:func:`~placetune.backends.jetson.board_module`): its placement was chosen for that module's DLA
    cores and clocks. A module the table does not know (or no device tree) is a note, never a refusal."""
    from placetune.errors import UnknownNameError
    from placetune.hardware.platforms import get_platform

    match = board_module(cores)
    if not match.known:
        return [f"this board's module is not known ({match.describe()}): the plan's platform {p.platform} "
                "was not checked against it"]
    if p.platform in match.profiles:
        return []
    try:
        title = get_platform(p.platform).title
    except UnknownNameError:
        title = p.platform
    way = (f"re-tune it here with --platform {' or '.join(match.profiles)} and export it again" if match.profiles
           else "this module has no placetune profile (`placetune selftest` checks its GPU stack)")
    raise ConfigError(f"placetune build: the plan was tuned for a {title} (platform {p.platform}), but this board is "
                      f"a {match.describe()}: the placement was chosen for the other module's DLA cores and clocks; "
                      f"{way}, or build the plan on a {title}")


def _not_here(p: Plan, error: object) -> str:
    """Why ``placetune build`` built nothing on a machine whose Python cannot import TensorRT (the one that
    tuned, most often): a step for the board the plan is for, said with that board and its TensorRT."""
    version = target_version(p)
    jetpack = JETPACKS.get(tuple(int(x) for x in version.split(".")[:2] if x.isdigit()), "")
    on = f"{p.platform}, with TensorRT {version}" + (f", {jetpack.split(',')[0]}" if jetpack else "")
    return (f"nothing built: a plan's engines are built on the Jetson it is for ({on}), and TensorRT cannot be "
            f"used here: {error}; copy the plan folder to that board and build there (on the board, `placetune "
            "doctor` says what is missing)")


def _board_checks(p: "Plan", probe: dict[str, Any], version: str) -> list[str]:
    """Refuse a plan tuned for another module (:func:`_module_checks`) or whose DLA cores this board does
    not have (TensorRT would put the engine elsewhere or fail); the notes of what else differs from the
    board the plan was made for (its TensorRT, an unknown module)."""
    used, cores = _dla_cores_used(p), probe.get("num_dla_cores")
    notes = _module_checks(p, cores if isinstance(cores, int) and not isinstance(cores, bool) else None)
    if used and isinstance(cores, int) and max(used) >= cores:
        have = "no DLA core" if cores == 0 else "1 DLA core (DLA0)" if cores == 1 else f"{cores} DLA cores"
        raise BackendError(f"placetune build: the plan runs engines on {', '.join(f'DLA{c}' for c in used)} (platform "
                           f"{p.platform}), but this board's TensorRT {version} has {have}: tune a plan for this module "
                           "(--platform; `placetune selftest` names it)")
    target = str((p.settings or {}).get("trt_version") or (p.versions or {}).get("dla_rules_tensorrt") or "")
    if target and str(version).split(".")[:2] != target.split(".")[:2]:
        return notes + [f"the plan was searched under TensorRT {target}'s DLA rules; this board builds with TensorRT {version}, "
                "whose rules may place layers otherwise (the differences say where): for a plan made for this board, "
                f"tune here or with --trt-version {'.'.join(str(version).split('.')[:2])}"]
    return notes


def build_plan(plan: "Plan | str | os.PathLike[str]", out: str | os.PathLike[str] | None = None, *,
               model: "Model | None" = None, backend: "TensorRTBackend | None" = None,
               calibration_cache: str | os.PathLike[str] | None = None) -> BuildReport:
    """Build every engine of a plan into its folder and compare the realised placement with the plan's.

    Args:
        plan: a plan folder (from ``placetune export --format trtexec -o DIR``), a ``plan.json``
            file or a :class:`~placetune.plan.file.Plan`.
        out: the folder to build in (default: the plan folder itself; for a plan file,
            ``<model>.build``, written first with :func:`~placetune.plan.folder.write_plan_folder`).
        model: the plan's model when the plan's own reference (zoo name or file) cannot be loaded.
        backend: the TensorRT backend whose worker builds (default: a new one, closed after).
        calibration_cache: an INT8 plan's TensorRT calibration cache (else the plan's own, if any).

    Returns:
        The :class:`BuildReport` (also written to ``<folder>/build.json``).

    Raises:
        BackendError: TensorRT cannot be used here, or an engine does not build (its errors said).
        ConfigError, ModelError: no plan folder, plan file or model where one is needed.
    """
    calib = str(check_regular(calibration_cache, "calibration cache")) if calibration_cache is not None else None
    p, folder = _open(plan, model, out, calib)
    if calib is not None and p.precision == "int8":  # a cache of another model calibrates nothing
        io = {str(t["name"]) for e in p.engines for key in ("inputs", "outputs") for t in e.get(key) or []
              if isinstance(t, dict) and "name" in t}
        check_calibration_cache(calib, set(p.model.get("input_shapes") or {}) | io, str(p.model.get("name") or "plan"))
    guard = OutputFolder(folder, "plan folder")
    if calib is None and p.calibration_cache:  # the folder's own cache: a file of the folder, never elsewhere
        cache = guard.path(p.calibration_cache)
        if cache.is_file():
            calib = str(check_regular(cache, "calibration cache"))
    names = [n for e in p.engines for f in (engine_files(p, e)[1],) for n in (f, f + ".json")]
    guard.check([*names, "build.json"])  # an engine of the user's own is never overwritten
    own = backend is None
    be = backend or TensorRTBackend()
    tmp = None
    specs: list[dict[str, Any]] = []
    try:
        probe = be.probe()
        version = probe.get("trt_version")
        if not version:
            raise BackendError(_not_here(p, probe.get("trt_error")))
        board_notes = _board_checks(p, probe, str(version))
        strongly = int(str(version).split(".")[0]) >= 11
        onnx_paths = [guard.path(engine_files(p, e)[0]) for e in p.engines]
        if strongly and p.precision == "int8":  # types from the model: INT8 only through its Q/DQ nodes
            untyped = untyped_int8_plan(p, str(version), any(has_qdq(load_with_weights(x)) for x in onnx_paths))
            if untyped:
                raise ConfigError(untyped)
        for path in onnx_paths:  # a form this TensorRT's ONNX parser ignores would build another network, silently
            # (read through the one read path: a file cut short or no ONNX at all is a ModelError naming it)
            why = old_parser_misread(load_with_weights(path, external=False), str(version))
            if why:
                raise ModelError(f"{path.name}: {why}")
        guard.remove_all(names)  # a fresh build, never an older engine of the same name (kept when refused)
        tmp = tempfile.TemporaryDirectory(prefix="placetune-build-")
        built = Path(tmp.name) / "engines"  # the worker writes here; the folder guard copies them in
        built.mkdir()
        if strongly and p.precision == "fp16":  # strongly typed: the FP16 model, as the backend builds it
            import onnx

            converted = []
            for path in onnx_paths:
                target = Path(tmp.name) / path.name
                onnx.save(convert_to_fp16(load_with_weights(path)), str(target))
                converted.append(target)
            onnx_paths = converted
        ranges = _segment_ranges(onnx_paths) if p.precision == "int8" and not calib and not strongly \
            and p.int8_ranges != "qdq" else None
        common = {"precision": p.precision, "strongly_typed": strongly, "gpu_fallback": p.gpu_fallback,
                  "timing_cache": None, "calibration_cache": calib if p.precision == "int8" and not strongly else None,
                  "memory_pools": be.memory_pools, "verbose_log": be.verbose_log,
                  "inspector": be.inspector}  # each DLA engine's layer information: the log's cross-check
        specs = []
        shapes = {k: list(v) for k, v in (p.model.get("input_shapes") or {}).items()}
        for eng, path in zip(p.engines, onnx_paths):
            target = built / engine_files(p, eng)[1]
            dla = list(eng.get("dla_layers") or [])
            core = eng.get("dla_core")
            if core is None and str(eng.get("device", "GPU")) != "GPU":
                core = int(str(eng["device"])[-1])  # a plan.json may leave it null: the device's core, as build.sh
            io = {str(t["name"]): [t["trt_dtype"], t["format"]] for key in ("inputs", "outputs")
                  for t in eng.get(key) or [] if isinstance(t, dict) and t.get("format") not in (None, "LINEAR")}
            own_shapes = {k: ([int(eng["batch"]), *v[1:]] if p.mode == "replicas" and eng.get("batch") else v)
                          for k, v in shapes.items()}
            spec = {"name": Path(engine_files(p, eng)[1]).stem, "device": str(eng.get("device", "GPU")),
                    "onnx": str(path), "dla_core": -1 if core is None or not dla else int(core), "dla_layers": dla,
                    "input_shapes": own_shapes, "plan_cache": str(target)}
            if io:
                spec["io_formats"] = io
            if ranges:
                tensors = [str(t["name"]) for key in ("inputs", "outputs") for t in eng.get(key) or []
                           if isinstance(t, dict)]
                spec["int8_ranges"] = {n: ranges[n] for n in tensors if n in ranges}
            specs.append(spec)
        reply = be.pool.run({"op": "build", "engines": specs, "common": common},
                            timeout_s=be.timeout_s * max(1, len(specs)))
        res = reply.result or {}
        if reply.kind != "result" or res.get("status") != "ok":
            why = res.get("error") or reply.stderr_tail[-500:] or reply.kind
            raise BackendError(f"placetune build: {why}{_custom_plugin_advice(p.model.get('plugins'), str(why))}")
        _check_built(built, p, res.get("engines") or [], folder)  # every engine the worker says it built, whole
        for name in names:  # into the plan folder through its guard (atomic, recorded)
            guard.copy_in(name, built / name)
        _check_built(folder, p, res.get("engines") or [], folder)  # and so is every copy in the plan folder
    finally:
        if tmp is not None:
            tmp.cleanup()
        if own:
            be.close()
    report = BuildReport(folder, str(version), notes=list(board_notes))
    planned = p.realized
    realized = dict(planned)
    fallback: dict[str, str] = {}
    for eng, spec, info in zip(p.engines, specs, res.get("engines") or []):
        layers = list(eng.get("layers") or planned)
        device = spec["device"] if spec["dla_core"] >= 0 else "GPU"
        predicted = {n: (device if n in set(spec["dla_layers"]) else "GPU") for n in layers}
        mine: dict[str, str] = dict(predicted)
        # an engine whose placement the log and layer information cannot say (or disagree on): read_realised
        # fills in the request, never reported as built (its DLA layers 'unknown', the engine placement_known False)
        unknown: list[str] = []
        n_load, _ = read_realised(layers, device, predicted, info, mine, fallback, report.notes, spec["name"], unknown)
        if unknown:
            report.unknown.extend(unknown)
            # a layer a fallback warning names is the GPU's (read_realised put it there, with its warning)
            mine = {n: (UNKNOWN if predicted[n] != "GPU" and d != "GPU" else d) for n, d in mine.items()}
        if p.mode != "replicas" or unknown:  # a replica runs the whole network: the plan's layers are per replica
            realized.update(mine)
        report.engines.append({"name": spec["name"], "device": spec["device"],
                               "engine_file": engine_files(p, eng)[1], "cached": bool(info.get("cached")),
                               "build_seconds": info.get("build_seconds"), "engine_bytes": info.get("engine_bytes"),
                               "dla_loadables": None if unknown else n_load, "io_formats": info.get("io_formats") or {},
                               "profiling_verbosity": info.get("profiling_verbosity"),
                               "placement_known": not unknown,
                               **({"inspector_error": str(info["inspector_error"])[:300]}
                                  if info.get("inspector_error") else {}),
                               "realized_on_dla": None if unknown else sum(1 for n in layers if mine.get(n) != "GPU")})
    report.realized = realized
    report.differences = [{"layer": n, "plan": planned[n], "built": realized[n], "reason": fallback.get(n, "")}
                          for n in planned if realized.get(n) not in (planned[n], UNKNOWN)]
    if p.simulated:
        report.notes.append("the plan's placement was found on the SIMULATED Jetson: time the engines here "
                            "(README.txt says how) before relying on its figures")
    guard.write("build.json", dumps_json(report.to_dict(), indent=1) + "\n")
    return report
