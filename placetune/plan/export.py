"""Exporting a plan from a study: its best (or a chosen) measurement, engines, versions and baselines."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError, ModelError, PlacetuneError, StoreError
from placetune.placement.placement import DEVICES, Placement, dla_core, stored_placement
from placetune.plan.file import SIMULATED_LABEL, Plan
from placetune._lazy import lazy_import
from placetune.hardware.platforms import get_platform
from placetune.model.merge import networks_in, source_networks
from placetune.model.model import Model
from placetune.model.onnx_io import load_with_weights
from placetune.model.qdq import is_qdq_model
from placetune.placement.cut import cut, tensor_infos
from placetune.placement.cut_formats import plan_cut_formats
from placetune.plan.deploy_notes import build_stop_note
from placetune.plan.trtexec import engine_files, target_version
from placetune.tuning.concurrent import naive_label, network_summary
from placetune.tuning.final_pick import exportable, optuna_trial_number, study_best
from placetune.tuning.objectives import get_objective, registered_objectives
from placetune.tuning.study_model import load_study_model, stored_shapes
from placetune.version import __version__
from placetune.wording import plural

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.store.records import MeasurementRecord, StudyRecord
    from placetune.store.store import Store
    from placetune.tuning.final_pick import BestPick
    from placetune.tuning.objectives import Objective

if TYPE_CHECKING:
    import sqlalchemy
    import sqlalchemy.exc as sqlalchemy_exc
else:
    sqlalchemy = lazy_import("sqlalchemy")
    sqlalchemy_exc = lazy_import("sqlalchemy.exc")

__all__ = ["export_plan", "refuse_relabelled"]

log = logging.getLogger(__name__)


def _finite(x: Any) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _figures(m: "Measurement") -> dict[str, Any]:
    """The measured figures of a measurement (JSON-ready, no samples)."""
    lat = {k: _finite(v) for k, v in (m.latency_ms or {}).items() if _finite(v) is not None}
    return {
        "status": m.status,
        "latency_ms": lat,
        "throughput_fps": _finite(m.throughput_fps),
        "energy_mj": _finite(m.energy_mj),
        "power_w": _finite(m.power_w),
        "dla_loadables": dict(m.dla_loadables or {}),
    }


def _all_on(assignment: Mapping[str, str] | None, device: str) -> bool:
    return bool(assignment) and all(d == device for d in assignment.values())  # type: ignore[union-attr]


def _engines(mode: str, realized: Placement | None, realized_map: dict[str, str], m: "Measurement",
             settings: Mapping[str, Any], platform_devices: tuple[str, ...], batch: int,
             notes: list[str]) -> list[dict[str, Any]]:
    names = list(realized_map)
    dla_names = [n for n, d in realized_map.items() if d != "GPU"]
    dla_devices = sorted({d for d in realized_map.values() if d != "GPU"})
    if mode == "engine":
        device = dla_devices[0] if dla_devices else "GPU"
        eng = {"index": 0, "kind": "engine", "device": device, "dla_core": dla_core(device),
               "batch": batch, "layers": names, "dla_layers": dla_names}
        if (m.extra or {}).get("parser_layers"):  # the parser's own layers, as measured (plan.trtexec)
            eng["parser_layers"] = dict(m.extra["parser_layers"])
        return [eng]
    if mode == "pipeline":
        times = {int(s.get("index", i)): s for i, s in enumerate(m.segment_times_ms or [])}
        out = []
        if realized is not None:
            for s in realized.segments(pipeline=True):
                t = times.get(s.index, {})
                out.append({"index": s.index, "kind": "segment", "device": s.device, "dla_core": dla_core(s.device),
                            "layers": list(s.layers), "dla_layers": list(s.layers) if s.device != "GPU" else [],
                            "predecessors": list(s.predecessors), "time_ms": _finite(t.get("time_ms")),
                            "start_ms": _finite(t.get("start_ms")), "end_ms": _finite(t.get("end_ms"))})
            return out
        notes.append("the model could not be loaded: the pipeline segments list no layer names; "
                     "export again where the model file is readable")
        for i, t in sorted(times.items()):
            dev = str(t.get("device", "GPU"))
            out.append({"index": i, "kind": "segment", "device": dev, "dla_core": dla_core(dev), "layers": [],
                        "dla_layers": [], "n_layers": t.get("layers"),
                        "predecessors": list(t.get("predecessors") or []), "time_ms": _finite(t.get("time_ms")),
                        "start_ms": _finite(t.get("start_ms")), "end_ms": _finite(t.get("end_ms"))})
        return out or [{"index": 0, "kind": "segment", "device": "GPU", "dla_core": None, "layers": [],
                        "dla_layers": []}]
    # replicas
    per = {str(r.get("device")): r for r in (m.extra or {}).get("replicas") or [] if isinstance(r, dict)}
    reps = settings.get("replicas") or {d: batch for d in platform_devices}
    order = [d for d in DEVICES if d in reps] + [d for d in reps if d not in DEVICES]
    out = []
    for i, dev in enumerate(order):
        info = per.get(dev, {})
        on_dla = dev != "GPU" and bool(dla_names)
        out.append({"index": i, "kind": "replica", "device": dev, "dla_core": dla_core(dev) if on_dla else None,
                    "batch": int(info.get("batch") or reps[dev]), "layers": names,
                    "dla_layers": dla_names if on_dla else [], "latency_ms": _finite(info.get("latency_ms")),
                    "throughput_fps": _finite(info.get("throughput_fps"))})
    return out


def _versions(st: "StudyRecord") -> dict[str, Any]:
    fp = st.fingerprint or {}
    def pick(*keys: str) -> Any:
        for k in keys:
            if fp.get(k) not in (None, ""):
                return fp[k]
        return None

    out = {
        "tensorrt": None if st.simulated else pick("tensorrt", "tensorrt_version", "trt_version", "trt"),
        "jetpack": None if st.simulated else pick("jetpack", "jetpack_version"),
        "l4t": None if st.simulated else pick("l4t", "l4t_version"),
        "cuda": None if st.simulated else pick("cuda", "cuda_version"),
        "module": None if st.simulated else pick("module"),
        "power_mode": pick("power_mode"),
        "clocks_locked": None if st.simulated else pick("clocks_locked"),
        "dla_rules_tensorrt": (st.settings or {}).get("trt_version"),
        "placetune": __version__,
    }
    if st.simulated:
        out["simulator"] = fp.get("version")
    return {k: v for k, v in out.items() if v is not None}


def _unread_board(st: "StudyRecord") -> list[str]:
    """What a night on a board could not read of it (the fingerprint holds None: in a container without
    nvpmodel's files or jetson_clocks), said in the plan rather than once on the night's terminal."""
    fp = st.fingerprint or {}
    if st.simulated:
        return []
    out = []
    if "power_mode" in fp and fp["power_mode"] is None:
        out.append(f"the board's power mode was never read from the board during the night (`nvpmodel -q`, "
                   "/var/lib/nvpmodel/status and /etc/nvpmodel.conf not readable: a container without them "
                   f"mounted?): the figures are recorded under the study's power_mode "
                   f"{(st.settings or {}).get('power_mode', 'MAXN')}, UNCHECKED")
    if "clocks_locked" in fp and fp["clocks_locked"] is None:
        out.append("whether jetson_clocks had locked the clocks was never read during the night (`jetson_clocks "
                   "--show` not available): the figures may have been taken with the clocks moving, UNCHECKED")
    return out


def _baselines(records: list["MeasurementRecord"], best: "MeasurementRecord", n_layers: int,
               objective: "Objective", networks: list[str] | None = None) -> dict[str, Any]:
    """The all-GPU (and all-DLA) measurements and the plan's gain over each: ``gain`` on the
    study's objective (the figure ``placetune tune`` prints, :meth:`Objective.gain_over`),
    ``gains`` on latency, throughput and energy, and ``speedup`` (the latency gain)."""
    out: dict[str, Any] = {}
    ok = [r for r in records if r.measurement.ok]
    others = {name: get_objective(name) for name in ("latency", "throughput", "energy")}
    for key, device in (("all-gpu", "GPU"), ("all-dla0", "DLA0"), ("all-dla1", "DLA1")):
        rec = next((r for r in ok if _all_on(r.requested, device) and len(r.requested or {}) == n_layers), None)
        if rec is None and device == "GPU":  # the same cache entry, whoever asked for it first
            rec = next((r for r in ok if _all_on(r.realized, "GPU")), None)
        if rec is None:
            continue
        fig = _figures(rec.measurement)
        fig["measurement_id"] = rec.id
        fig["objective"] = objective.names[0]
        fig["gain"] = objective.gain_over(best.measurement, rec.measurement)
        fig["gains"] = {name: o.gain_over(best.measurement, rec.measurement) for name, o in others.items()}
        fig["speedup"] = fig["gains"]["latency"]
        out[key] = fig
    if networks:  # concurrent: each network wholly on one device (googlenet:DLA0,resnet50:GPU)
        for rec in ok:
            label = naive_label(rec.requested, networks)
            if label is None or label in out or set((rec.requested or {}).values()) == {"GPU"}:
                continue
            fig = _figures(rec.measurement)
            fig.update(measurement_id=rec.id, objective=objective.names[0],
                       gain=objective.gain_over(best.measurement, rec.measurement))
            fig["gains"] = {name: o.gain_over(best.measurement, rec.measurement) for name, o in others.items()}
            fig["speedup"] = fig["gains"]["latency"]
            out[label] = fig
    return out


def _int8_ranges(precision: str, model: "Model | None") -> str | None:
    """Where an INT8 plan's dynamic ranges come from: ``qdq`` (the model's Q/DQ nodes) or
    ``placeholder`` (neither a calibration cache nor Q/DQ nodes: accuracy is not preserved);
    None for other precisions. ``placetune export --calibration-cache`` makes it ``calibration-cache``."""
    if precision != "int8":
        return None
    if model is not None and model.proto is not None and is_qdq_model(model.proto):
        return "qdq"
    return "placeholder"


def _add_files_and_io(mode: str, engines: list[dict[str, Any]], model: "Model | None",
                      realized: Placement | None, notes: list[str]) -> None:
    """Each engine's ONNX and engine file names (as ``placetune export --format trtexec -o DIR``
    writes them) and its boundary tensors (``inputs`` / ``outputs``: name, shape, dtype)."""
    static = None if model is None or model.dynamic_input_shapes else model.batch
    for eng in engines:
        eng["onnx_file"], eng["engine_file"] = engine_files(mode, eng, static_batch=static)
    if model is None or model.proto is None:
        return
    if mode != "pipeline":
        g = model.proto.graph
        inits = {t.name for t in g.initializer}
        io = {"inputs": tensor_infos([vi for vi in g.input if vi.name not in inits]),
              "outputs": tensor_infos(list(g.output))}
        for eng in engines:
            eng.update(json.loads(json.dumps(io)))
            batch = eng.get("batch")
            if mode == "replicas" and batch is not None and int(batch) != model.batch:  # its own batch
                for t in eng["inputs"] + eng["outputs"]:
                    if t["shape"]:
                        t["shape"][0] = int(batch)
        return
    if realized is None:
        return
    try:  # the weight-stripped graph: the same cut tensors as the file's, without reading weights
        segments = cut(model, realized, source=model.proto)
    except ModelError as exc:
        notes.append(f"the segments' boundary tensors are not listed: {exc}")
        return
    by_index = {s.index: s for s in segments}
    for eng in engines:
        seg = by_index.get(eng.get("index"))  # type: ignore[arg-type]
        if seg is not None:
            eng.update(seg.boundary())


def _add_cut_formats(engines: list[dict[str, Any]], st: "StudyRecord", model: "Model | None",
                     measured: Any = None) -> None:
    """The TensorRT I/O type and format of each boundary tensor (``trt_dtype``, ``format``): a cut
    at a DLA engine in the DLA's own format on both sides, as the tensorrt backend builds it and
    the exported trtexec commands ask for (placement.cut_formats); the others FP32 linear.
    ``measured``: the cut tensors the measurement was timed with formats for (None: not recorded)."""
    version = str((st.settings or {}).get("trt_version") or "")
    strongly = version.split(".")[0].isdigit() and int(version.split(".")[0]) >= 11
    outputs = [] if model is None or model.proto is None else [o.name for o in model.proto.graph.output]
    formats = plan_cut_formats(engines, st.precision, strongly_typed=strongly, network_outputs=outputs,
                               qdq=_int8_ranges(st.precision, model) == "qdq", measured=measured)
    for eng in engines:
        for t in list(eng.get("inputs") or []) + list(eng.get("outputs") or []):
            if isinstance(t, dict):
                f = formats.get(str(t.get("name")))
                t["trt_dtype"], t["format"] = (f.dtype, f.format) if f else ("FLOAT", "LINEAR")


def _network_sources(model: "Model | None") -> dict[str, dict[str, Any]]:
    """A concurrent study's networks as its merged file records them: name -> {"source", "batch"}."""
    if model is None or model.path is None:
        return {}
    try:
        nets = source_networks(load_with_weights(model.path, external=False)) or []
    except Exception:  # noqa: BLE001 - an unreadable file only loses the identities in the plan
        return {}
    return {str(n.get("name")): {"source": n.get("source"), "batch": n.get("batch")} for n in nets
            if isinstance(n, dict)}


def _nothing_to_export(store: "Store", study_name: str, metric: str) -> ConfigError:
    """The error of a study with no ok measurement to export; a row edited or damaged (a status no
    placetune writes, so that no row is ``ok``) is a StoreError naming it instead."""
    store.measurements(study_name)  # decodes and checks every row of the study
    return ConfigError(f"study {study_name!r} has no successful measurement with a {metric} value yet: "
                       "run the search (placetune tune) before exporting a plan")



def refuse_relabelled(st: Any, m: "Measurement", measurement_id: Any) -> None:
    """Refuse a study marked as measured on hardware whose measurement ``m`` the simulated Jetson made
    (its own record or the study's machine fingerprint says so): a simulated figure never leaves as a
    measured one, in a plan or a report.

    Raises:
        StoreError: the database was edited or damaged, naming the study and the measurement.
    """
    simulator = str(m.backend or "").split("-", 1)[0] == "simulate" or st.fingerprint.get("backend") == "simulate"
    if not st.simulated and (m.simulated or simulator):
        raise StoreError(f"study {st.name!r} is marked as measured on hardware (backend {st.backend!r}), but its "
                         f"measurement {measurement_id} came from the simulated Jetson (backend {m.backend!r}, machine "
                         f"{st.fingerprint.get('backend')!r}): the database was edited or damaged; restore it from a "
                         "backup")


def export_plan(
    store: "Store",
    study_name: str,
    *,
    model: "Model | None" = None,
    measurement_id: int | None = None,
    objective: Any = None,
    pick: "BestPick | None" = None,
) -> Plan:
    """The plan of a study's best measurement (or of one chosen measurement).

    Args:
        store: the :class:`~placetune.store.store.Store`.
        study_name: the study.
        model: the study's :class:`~placetune.model.model.Model`; None: loaded again with
            :func:`load_study_model` (without it, pipeline segments carry no layer names).
        measurement_id: export this stored measurement instead of the best one.
        objective: the study's :class:`~placetune.tuning.objectives.Objective` when it has
            constraints (or a metric the store cannot rank by, ``gpu_time``): the best feasible
            measurement is exported and the plan says whether each bound holds. None: the
            study's own objective and the constraints it was created with.
        pick: the study's best plan as a run picked it (:func:`~placetune.tuning.final_pick.study_best`
            at the end of ``placetune tune``); None: the study's best read now.

    A study's best whose realised placement was not read is never exported: the best measurement
    whose placement is known is, with notes (and ``measured["not_exported"]``) naming the better
    plan passed over (:func:`~placetune.tuning.final_pick.exportable`). A chosen ``measurement_id``
    is exported as asked or refused.

    Returns:
        The :class:`Plan`; :meth:`Plan.save` writes it.

    Raises:
        UnknownNameError: no such study.
        ConfigError: nothing ok is stored for the study, or ``measurement_id`` is not one of its measurements.
        ModelError: ``model`` is not the study's model.
    """
    st = store.study(study_name)
    chosen = None
    if objective is None and (st.constraints or st.objective in registered_objectives()):
        objective = get_objective(st.objective, st.constraints)  # ranked as tune ranked it (feasible first)
    if measurement_id is not None:
        pick = None
        rec = next(iter(store.measurements(study_name, ids=[int(measurement_id)])), None)
        if rec is None:
            raise ConfigError(f"measurement {measurement_id} is not a measurement of study {study_name!r}")
        if not rec.measurement.ok:
            raise ConfigError(f"measurement {measurement_id} of study {study_name!r} has status "
                              f"{rec.measurement.status!r}: only an ok measurement makes a plan")
    else:  # the study's best: a run's recorded pick, else its best stored value (placetune.tuning.final_pick)
        if objective is not None and not (objective.constraints or objective.registered
                                          or objective.names[0] == "gpu_time"):
            objective = None  # the store ranks the study's own objective
        pick = pick or study_best(store, study_name, objective)  # as tune ranks: feasible first
        if pick is None:
            raise _nothing_to_export(store, study_name, objective.names[0] if objective is not None
                                     else st.objective.split("+")[0].strip())
        chosen = exportable(store, study_name, pick, objective)  # None: no known placement, refused below
        rec = pick.record if chosen is None else chosen.record
    m = rec.measurement
    refuse_relabelled(st, m, rec.id)
    ranked_by = objective or get_objective(st.objective, st.constraints)
    notes: list[str] = [] if pick is None else pick.lines(ranked_by)
    passed_over = None if chosen is None else chosen.doc(ranked_by)
    if chosen is not None:
        notes.extend(chosen.lines(ranked_by, st))
    if model is None:
        try:
            model = load_study_model(store, st)
        except ModelError as exc:
            log.warning("%s", exc)
            notes.append(f"model not loaded ({exc})")
    elif st.model_hash not in (model.hash, model.legacy_hash):
        raise ModelError(f"model {model.name!r} (hash {model.hash[:12]}) is not the model of study {study_name!r} "
                         f"({st.model_name}, hash {st.model_hash[:12]})")
    if m.segments_read is not None:  # a pipeline read segment by segment: never a plan with an unread layer
        raise ConfigError(f"measurement {rec.id} of study {study_name!r} has {m.unread_line()}: a plan never claims "
                          "a placement that was not read; export one whose placement is known (--measurement ID)")
    if not m.placement_known:  # never export placetune's request as what TensorRT did
        raise ConfigError(f"measurement {rec.id} of study {study_name!r} has no known realised placement "
                          f"({(m.extra or {}).get('placement_unknown') or 'unknown'}): nothing true to export")
    realized_map = dict(rec.realized or m.realized or {})
    requested_map = dict(rec.requested or m.requested or realized_map)
    if model is not None:
        where = f"measurement {rec.id} of study {study_name!r}, field"
        realized_map = stored_placement(model, realized_map, f"{where} realized").as_dict()
        requested_map = stored_placement(model, requested_map, f"{where} requested").as_dict()
        ops = {layer.name: layer.op_type for layer in model.layers}
    else:
        ops = {}
    if not realized_map:
        raise ConfigError(f"measurement {rec.id} of study {study_name!r} has no realised placement to export")
    layers = []
    for name, dev in realized_map.items():
        entry: dict[str, Any] = {"name": name}
        if name in ops:
            entry["op_type"] = ops[name]
        entry["requested"] = requested_map.get(name, dev)
        entry["realized"] = dev
        if name in (m.fallback or {}):
            entry["fallback"] = m.fallback[name]
        layers.append(entry)
    try:
        devices = get_platform(st.platform).devices
    except PlacetuneError:
        devices = tuple(DEVICES)
    settings = dict(st.settings or {})
    realized_p = Placement(model, realized_map) if model is not None else None
    engines = _engines(st.mode, realized_p, realized_map, m, settings, devices, int(st.batch), notes)
    measured = _figures(m)
    measured["segment_times_ms"] = list(m.segment_times_ms or [])
    measured["timeline"] = list(m.timeline or [])
    measured["backend"] = m.backend
    if passed_over is not None:
        measured["not_exported"] = passed_over
    batch = int(st.batch)
    measured["units"] = {"latency_ms": f"ms per inference (one batch of {batch})",
                         "throughput_fps": "samples per second (batches per second x batch)",
                         "energy_mj": f"mJ per inference (one batch of {batch})",
                         "energy_mj_per_sample": "mJ per sample (energy_mj / batch)"}
    if measured["energy_mj"] is not None:
        measured["energy_mj_per_sample"] = measured["energy_mj"] / max(batch, 1)
    if m.fallback:
        measured["fallback"] = dict(m.fallback)
    if st.mode == "replicas" and (m.extra or {}).get("replicas"):
        measured["replicas"] = list(m.extra["replicas"])
    if st.mode == "pipeline":
        measured["frames_in_flight"] = settings.get("frames_in_flight", 1)
        if (m.extra or {}).get("period_ms") is not None:
            measured["period_ms"] = _finite(m.extra["period_ms"])
    if objective is not None and objective.constraints:
        measured["constraints"] = [c.as_dict(m) for c in objective.constraints]
        for c in objective.constraints:
            v = c.value(m)
            notes.append(f"constraint {c.text} {c.unit}: " + (
                f"holds (measured {v:.4g})" if c.holds(m) else
                f"VIOLATED (measured {'-' if v is None else f'{v:.4g}'})"
                + ("" if measurement_id is not None else ": no stored measurement satisfies every constraint")))
    if objective is not None:
        measured["objective"] = {"names": list(objective.names), "directions": list(objective.directions),
                                 "units": list(objective.units)}
    gpu = m.objective("gpu_time")
    if gpu is not None:
        measured["gpu_time_ms"] = gpu
    for note in (m.extra or {}).get("notes") or []:
        notes.append(str(note))
    unnamed = [str(n) for n in (m.extra or {}).get("placement_from_request") or []]
    if unnamed:  # kept at their requested device by the placement reading: said where the plan is read
        notes.append(f"{plural(len(unnamed), 'layer')} no placement source named (optimised away or folded into "
                     f"another layer: {', '.join(unnamed[:5])}{' ...' if len(unnamed) > 5 else ''}): the plan "
                     "gives the device they were asked on, not one that was read")
    networks = networks_in(model) if model is not None and model.proto is not None else []
    if model is not None and not networks:  # the baselines' rows by their placement keys, not every row decoded
        keys = [Placement.all_gpu(model).key] + [Placement.all_dla(model, core).key for core in (0, 1)]
        records = store.measurements(study_name, keys=keys)
    else:
        records = store.measurements(study_name)
    baselines = _baselines(records, rec, len(realized_map), objective or get_objective(st.objective), networks)
    _add_files_and_io(st.mode, engines, model, realized_p, notes)
    if st.mode == "pipeline":
        timed_formats = (m.extra or {}).get("cut_formats")
        if isinstance(timed_formats, dict):  # as timed: the exported commands ask for these formats only
            measured["cut_formats"] = {str(t): [str(f.get("dtype")), str(f.get("format"))] if isinstance(f, dict)
                                       else f for t, f in timed_formats.items()}
        _add_cut_formats(engines, st, model, measured.get("cut_formats"))
    int8_ranges = _int8_ranges(st.precision, model)
    if int8_ranges == "placeholder":
        notes.append("INT8 ranges are PLACEHOLDERS (no calibration cache, no Q/DQ nodes in the model): the engines "
                     "time right but accuracy is NOT preserved; export with --calibration-cache FILE or tune a "
                     "Q/DQ model")
    if "all-gpu" not in baselines:
        notes.append("no all-GPU measurement is stored for this study: the plan has no baseline "
                     "(Evaluator.baseline() measures it)")
    notes.extend(_unread_board(st))
    keep = ("gpu_fallback", "dla_core", "frames_in_flight", "replicas", "power_mode", "trt_version", "iterations",
            "timed_input")
    plan = Plan(
        model={
            "hash": st.model_hash,
            "name": st.model_name,
            "input_shapes": {k: list(v) for k, v in (model.input_shapes.items() if model is not None else
                                                     (stored_shapes(store, st) or {}).items())},
            **({} if model is None else {"dynamic_inputs": sorted(model.dynamic_input_shapes)}),
            **({} if model is None or model.proto is None else {"outputs": [o.name for o in model.proto.graph.output]}),
            "path": None if model is None or model.path is None else str(model.path),
            "zoo": None if model is None else model.zoo,
            "layers": len(realized_map),
            # layers TensorRT names by a counter of its own (a node sharing its name): never addressed by name
            **({"renamed_layers": dict(model.renamed)} if model is not None and model.renamed
               else {}),
            # TensorRT plugins (ops ONNX has no schema for): GPU only; a build loads their library
            **({"plugins": {x.name: x.op_type for x in model.layers if x.plugin}}
               if model is not None and any(x.plugin for x in model.layers) else {}),
            **({"networks": network_summary(realized_map, m, networks, _network_sources(model))} if networks else {}),
        },
        platform=st.platform,
        mode=st.mode,
        precision=st.precision,
        batch=int(st.batch),
        layers=layers,
        engines=engines,
        simulated=bool(st.simulated),
        objective=st.objective,
        backend=st.backend,
        versions=_versions(st),
        settings={k: settings.get(k) for k in keep if k in settings},
        measured=measured,
        baselines=baselines,
        source={
            "study": st.name,
            "measurement_id": rec.id,
            "trial_number": optuna_trial_number(store, st.name, rec.id),
            "agent": rec.agent,
            "placement_key": rec.placement_key,
            "measured_at": rec.created_at.isoformat() if rec.created_at else None,
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        },
        notes=notes,
        label=SIMULATED_LABEL if st.simulated else "",
        int8_ranges=int8_ranges,
    )
    stop = build_stop_note(model.proto, target_version(plan)) if model is not None else None
    if stop:  # a simulated study of a model that TensorRT's parser misreads: said in the plan, not on the board
        plan.notes.append(stop)
    _readable(plan, store, st.name)
    return plan


def _readable(plan: Plan, store: "Store", study_name: str) -> None:
    """The plan as it will be written passes the reader's own validator (:meth:`Plan.from_dict`):
    a plan placetune's loader refuses is never written.

    Raises:
        StoreError: the stored study gives such a plan (its rows were edited or damaged).
    """
    try:
        Plan.from_dict(json.loads(plan.to_json()), where="plan")
    except PlacetuneError as exc:
        raise StoreError(f"study {study_name!r} of {store.url} gives a plan placetune cannot read back "
                         f"({exc}): its stored rows were edited or damaged") from None


