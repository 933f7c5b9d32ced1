"""The result subcommands of ``placetune``: ``studies``, ``export``, ``report`` and ``trace``.

:func:`add_parsers` adds them to the main parser's subparsers; each sets ``func`` to a
``cmd_*`` function that returns the exit code and raises
:class:`~placetune.errors.PlacetuneError` subclasses on bad input (the main entry point
turns those into one-line messages). Only these ``cmd_*`` functions print.

Example:
    ``placetune studies --storage sqlite:///runs.db``;
    ``placetune export --study s -o plan.json``;
    ``placetune export --study s --format trtexec --onnx model.onnx -o build.sh``;
    ``placetune export --study s --format trtexec -o deploy/`` (build.sh, ONNX files, plan.json, README.txt, runtime/);
    ``placetune report --study s -o report/``;
    ``placetune trace plan.json -o trace.json``
"""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

from placetune.cli.terminal import error_line, say, table, terminal_width, write_data
from placetune.safetext import line_safe
from placetune.errors import ConfigError, ModelError, StoreError, UnknownNameError
from placetune.validate import dumps_json
from placetune.wording import plural
from placetune._lazy import lazy_import
from placetune.files.read import check_regular
from placetune.files.write import check_output, force_hint, refuse_inputs, user_output, write_file

if TYPE_CHECKING:
    from placetune.store.store import Store

if TYPE_CHECKING:
    import placetune.plan.deploy_notes as _deploy_notes
    import placetune.plan.export as _export
    import placetune.plan.file as _file
    import placetune.plan.folder as _folder
    import placetune.model.model as _model
    import placetune.tuning.objectives as _objectives
    import placetune.tuning.study_model as _study_model
    import placetune.tuning.final_pick as _final_pick
    import placetune.report.plots as _plots
    import placetune.plan.simulate as _simulate
    import placetune.store as _store
    import placetune.store.url as _url
    import placetune.report.trace as _trace
    import placetune.plan.trtexec as _trtexec
    import sqlalchemy.engine as sqlalchemy_engine
    import sqlalchemy.exc as sqlalchemy_exc
else:
    _deploy_notes = lazy_import("placetune.plan.deploy_notes")
    _export = lazy_import("placetune.plan.export")
    _file = lazy_import("placetune.plan.file")
    _folder = lazy_import("placetune.plan.folder")
    _model = lazy_import("placetune.model.model")
    _objectives = lazy_import("placetune.tuning.objectives")
    _study_model = lazy_import("placetune.tuning.study_model")
    _final_pick = lazy_import("placetune.tuning.final_pick")
    _plots = lazy_import("placetune.report.plots")
    _simulate = lazy_import("placetune.plan.simulate")
    _store = lazy_import("placetune.store")
    _url = lazy_import("placetune.store.url")
    _trace = lazy_import("placetune.report.trace")
    _trtexec = lazy_import("placetune.plan.trtexec")
    sqlalchemy_engine = lazy_import("sqlalchemy.engine")
    sqlalchemy_exc = lazy_import("sqlalchemy.exc")

__all__ = ["add_parsers", "cmd_studies", "cmd_export", "cmd_report", "cmd_trace", "DEFAULT_STORAGE", "open_store"]

#: Where the result commands look for the database by default.
DEFAULT_STORAGE = "sqlite:///placetune.db"
_UNITS = {"latency": "ms", "throughput": "fps", "energy": "mJ"}


# --------------------------------------------------------------------------- helpers
def open_store(url: str | None) -> "Store":
    """Open an *existing* database: a missing SQLite file is an error, not a new empty database.

    Raises:
        StoreError: the SQLite file does not exist, or the database cannot be opened.
    """
    text = (url or DEFAULT_STORAGE).strip()
    if "://" not in text and text != ":memory:":
        path: str | None = text
    else:
        try:
            u = sqlalchemy_engine.make_url(text)
        except (sqlalchemy_exc.ArgumentError, ValueError):
            u = None
        path = u.database if u is not None and u.get_backend_name() == "sqlite" else None
        if path and path.startswith("file:"):
            path = path[5:].split("?", 1)[0]
    try:
        exists = bool(path) and Path(path).expanduser().exists()  # type: ignore[arg-type]
    except (OSError, ValueError):  # a name too long for the file system
        exists = False
    if path and path != ":memory:" and not exists:
        raise StoreError(
            f"no database at {_store.mask_url(text)} ({Path(path).expanduser()} does not exist): pass --storage URL of the "
            "database the search wrote (placetune tune --storage ...)"
        )
    return _store.Store(text, readonly=True)


def _fmt(value: float | None, objective: str) -> str:
    if value is None:
        return "-"
    return f"{value:.4g} {_UNITS.get(objective, '')}".strip()


def _best_value(store: "Store", st: Any) -> tuple[float | None, int | None, str | None]:
    """The study's best value, its measurement id and its mark when its plan cannot be exported
    (:func:`~placetune.tuning.final_pick.export_mark`)."""
    objective = st.objective.split("+")[0].strip()
    pick = _final_pick.study_best(store, st.name)  # as tune and export name it: a run's recorded pick, else feasible first
    if pick is None:
        return None, None, None
    return pick.record.measurement.objective(objective), pick.record.id, _final_pick.export_mark(store, st.name, pick)


def _the_study(store: "Store", name: str | None) -> str:
    """``--study``, or the database's only study when it is left out.

    Raises:
        ConfigError: no ``--study`` and the database holds no study or several.
    """
    if name is not None:
        return name
    names = [st.name for st in store.studies()]
    if len(names) == 1:
        return names[0]
    if not names:
        raise ConfigError(f"no study in {store.url}: run placetune tune first, or pass --storage URL of the database "
                          "it wrote")
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    raise ConfigError(f"--study NAME is needed: {store.url} holds {len(names)} studies ({shown}); "
                      "placetune studies lists them")


# --------------------------------------------------------------------------- studies
def cmd_studies(args: argparse.Namespace) -> int:
    """``placetune studies``: list the studies of a database."""
    with open_store(args.storage) as store:
        studies = store.studies()
        docs = []
        for st in studies:
            try:
                value, mid, mark = _best_value(store, st)
            except UnknownNameError:  # a study whose objective this placetune does not know (a newer one's):
                value, mid, mark = None, None, f"objective {st.objective!r} unknown to this placetune"  # listed
            objective = st.objective.split("+")[0].strip()
            docs.append({
                "study": st.name, "model": st.model_name, "platform": st.platform, "mode": st.mode,
                "precision": st.precision, "objective": st.objective, "constraints": st.constraints or [],
                "backend": st.backend,
                "simulated": st.simulated, "trials": st.n_requests, "measured": st.n_measured, "ok": st.n_ok,
                "cache_hits": st.n_cache_hits, "best": value, "best_unit": _UNITS.get(objective),
                "best_measurement_id": mid, "best_exportable": None if mid is None else mark is None,
                "best_note": mark,
            })
    if args.json:
        print(dumps_json({"storage": store.url, "studies": docs}, indent=2))
        return 0
    if not docs:
        say(f"no study in {store.url}")
        return 0
    rows = [[d["study"], d["model"], d["platform"], d["mode"],
             " ".join([d["objective"], *(f"({c})" for c in d["constraints"])]), d["trials"], d["measured"],
             _fmt(d["best"], d["objective"].split("+")[0]) + (f" ({d['best_note']})" if d["best_note"] else ""),
             "yes" if d["simulated"] else "no"] for d in docs]
    say(studies_table(rows, terminal_width()))
    return 0


_STUDIES_HEADER = ("study", "model", "platform", "mode", "objective", "trials", "measured", "best", "simulated")


def studies_table(rows: list[list[Any]], width: int | None) -> str:
    """The table of ``placetune studies``; at a terminal's ``width`` that the table would run past, each
    study's name (never cut: it is what --study takes) on a line of its own above the row of its figures."""
    text = table(rows, _STUDIES_HEADER)
    if width is None or max(map(len, text.splitlines())) <= width - 1:
        return text
    lines = table([r[1:] for r in rows], _STUDIES_HEADER[1:]).splitlines()
    out = lines[:2]
    for r, line in zip(rows, lines[2:]):
        out += [f"study {line_safe(str(r[0]))}:", line]
    return "\n".join(out)


# --------------------------------------------------------------------------- export
def _folder_output(args: argparse.Namespace) -> bool:
    """``--format trtexec -o DIR``: a folder when -o is a directory or a path without a ``.sh``
    / ``.json`` suffix (``-o build.sh`` keeps writing a single script)."""
    if args.format != "trtexec" or args.output in (None, "-"):
        return False
    out = Path(args.output)
    return os.path.isdir(out) or str(args.output).endswith(("/", os.sep)) or out.suffix.lower() not in (".sh", ".json")


def cmd_export(args: argparse.Namespace) -> int:
    """``placetune export``: write the best plan of a study as JSON, as trtexec commands, or as a
    deployment folder (``--format trtexec -o DIR``)."""
    folder = _folder_output(args)
    unused = [flag for flag, value in (("--onnx", args.onnx), ("--trt-version", args.trt_version)) if value]
    if args.format == "json" and unused:  # (they were ignored: a plan "for 10.3" kept its study's 8.6 rules)
        raise ConfigError(f"{' and '.join(unused)} {'are' if len(unused) > 1 else 'is'} for --format trtexec (the "
                          "build script or plan folder); a JSON plan keeps its study's model and TensorRT rules")
    calib = args.calibration_cache
    if calib is not None:
        check_regular(calib, "calibration cache")
    with open_store(args.storage) as store:
        args.study = _the_study(store, args.study)
        model = None
        if folder:
            model = _study_model.load_study_model(store, args.study, args.onnx)
            if args.onnx and model.path is not None and Path(model.path) != Path(args.onnx):
                raise ModelError(f"--onnx {args.onnx} is not the model of study {args.study!r} (its graph or input "
                                 "shapes differ)")
        plan = _export.export_plan(store, args.study, measurement_id=args.measurement, model=model)
    if calib is not None and plan.precision != "int8":
        raise ConfigError(f"--calibration-cache is for INT8 plans; the plan of study {args.study!r} is "
                          f"{plan.precision}")
    if folder:
        assert model is not None
        done = _folder.write_plan_folder(plan, model, args.output, source=args.onnx, calibration_cache=calib,
                                 trt_version=args.trt_version)
        summary = done.plan.summary()
        say(summary)
        trial = plan.source.get("trial_number")
        say(f"wrote plan folder {line_safe(str(done.directory))} (study {args.study}, measurement {plan.source.get('measurement_id')}"
            + (f", Optuna trial {trial}" if trial is not None else "")
            + f"): {_folder_files(done.directory, done.files)}")
        if done.replaced:
            say(f"replaced the plan it held before: {line_safe(done.replaced)}")
        where = line_safe(shlex.quote(str(done.directory)))  # a name's line break cannot print a line
        say(f"next, on the Jetson (an engine runs only on the board and TensorRT that built it): copy {where} there, "
            f"then sh {where}/build.sh (trtexec) or placetune build {where} (also checks where TensorRT put each "
            f"layer); {where}/README.txt says how to run the engines")
        _print_notes(done.plan.notes, summary)
        return 0
    if calib is not None:  # (as the folder does: a plan that says its INT8 ranges are calibrated names a cache)
        tensors = set(plan.model.get("input_shapes") or {}) | {
            t["name"] for e in plan.engines for key in ("inputs", "outputs") for t in e.get(key) or []}
        _folder.check_calibration_cache(calib, tensors, str(plan.model.get("name")))
        plan.int8_ranges, plan.calibration_cache = "calibration-cache", str(calib)
        plan.notes = [n for n in plan.notes if not n.startswith("INT8 ranges are PLACEHOLDERS")]
    if args.format == "trtexec":
        onnx = args.onnx
        if onnx is None:
            path = plan.model.get("path") or ""
            onnx = path if path.endswith(".onnx") else "model.onnx"
        text = _trtexec.trtexec_script(plan, onnx, args.trt_version, calib=calib)
    else:
        text = plan.to_json() + "\n"
    if args.output in (None, "-"):
        write_data(text)
        return 0
    out = Path(args.output)
    if not out.name or os.path.isdir(out):  # os.path: a name too long is written (and refused) as a file
        raise ConfigError(f"-o {args.output[:200]}: is a directory; give a file name, e.g. -o plan.json")
    refuse_inputs(out, "-o", [("the database (--storage)", _url.sqlite_file(args.storage)),
                              ("the study's model", plan.model.get("path")), ("the ONNX file (--onnx)", args.onnx)])
    owned = user_output(args.force, _file.is_plan_file, _trtexec.is_build_script)  # export's two outputs
    if args.format == "trtexec":
        write_file(out, text, "trtexec build script", executable=True, owned=owned, hint=force_hint("-o"))
    else:
        write_file(out, text, "plan file", owned=owned, hint=force_hint("-o"))
    summary = plan.summary()
    say(summary)
    what = "trtexec build script" if args.format == "trtexec" else "plan"
    trial = plan.source.get("trial_number")
    say(f"wrote {what} {line_safe(str(out))} (study {args.study}, measurement {plan.source.get('measurement_id')}"
        + (f", Optuna trial {trial}" if trial is not None else "") + ")")
    _print_notes(plan.notes, summary)
    return 0


def _folder_files(directory: Any, files: list[Any]) -> str:
    """The files of a plan folder as the user finds them: ``build.sh, ..., README.txt, runtime/ (14 files)``
    (the standalone runtime's modules lie in ``runtime/``, not beside ``build.sh``)."""
    top: list[str] = []
    sub: dict[str, int] = {}
    for f in files:
        try:
            parts = Path(f).resolve().relative_to(Path(directory).resolve()).parts
        except ValueError:
            parts = (Path(f).name,)
        if len(parts) > 1:
            sub[parts[0]] = sub.get(parts[0], 0) + 1
        else:
            top.append(parts[0])
    return ", ".join(top + [f"{d}/ ({plural(n, 'file')})" for d, n in sub.items()])


def _print_notes(notes: list[str], summary: str) -> None:
    """The plan's notes, less those its printed summary already says (the INT8 placeholder warning:
    the plan file keeps it as a note)."""
    for note in notes:
        if note.split(" (", 1)[0] not in summary:  # a plan whose build stops on its TensorRT: a warning
            say(f"{'warning' if note.startswith(_deploy_notes.BUILD_STOP) else 'note'}: {note}")


# --------------------------------------------------------------------------- report
def cmd_report(args: argparse.Namespace) -> int:
    """``placetune report``: write a study's plots and Chrome trace into a directory."""
    if not 10 <= args.dpi <= 1200:
        raise ConfigError(f"--dpi must be from 10 to 1200, got {args.dpi}")
    with open_store(args.storage) as store:
        args.study = _the_study(store, args.study)
        st = store.study(args.study)
        files = _plots.write_report(store, args.study, args.output, dpi=args.dpi)
        pick = _final_pick.study_best(store, st.name)
        mark = _final_pick.export_mark(store, st.name, pick)
    label = "SIMULATED study" if st.simulated else "study"
    say(f"{label} {line_safe(st.name)}: wrote {plural(len(files), 'file')} to {line_safe(str(args.output))}")
    if mark and pick is not None:  # the plan plots show the exported plan: the study's best is another
        shown = ("the plan plots show the best plan whose placement is known, the one placetune export writes"
                 if any(Path(f).name == "placement.png" for f in files) else "no plan plots: no placement was read")
        say(f"the study's best, measurement {pick.record.id}: {mark}; {shown}")
    for f in files:
        say(f"  {line_safe(str(f))}")
    trace = next((f for f in files if f.name == "trace.json"), None)
    if trace is not None:
        say(f"open {line_safe(str(trace))} in https://ui.perfetto.dev or chrome://tracing")
    return 0


# --------------------------------------------------------------------------- trace
def cmd_trace(args: argparse.Namespace) -> int:
    """``placetune trace``: write the timeline of a plan as a Chrome trace."""
    if args.shape and not args.model:  # it would be ignored: the plan's own model has its shapes
        raise ConfigError("--shape is the input shape of --model: give --model MODEL with it, or leave --shape out")
    refuse_inputs(args.output, "-o", [("the plan file", None if args.plan == "-" else args.plan),
                                      ("the model (--model)", args.model)])
    owned = user_output(args.force, _trace.is_trace_file)
    if args.output != "-":  # refused before the plan is read and re-measured
        check_output(args.output, "trace file", owned=owned, hint=force_hint("-o"))
    model = None
    if args.model:
        model = _model.Model.load(args.model, args.shape or None)
    plan = _file.load(args.plan, model)
    source: Any = plan.measured
    simulated = plan.simulated
    remeasured = False
    if not _trace.timeline_events(plan.measured):
        source = _simulate.simulate_plan(plan, model)
        simulated = True
        remeasured = True
    meta = {"study": plan.source.get("study"), "model": plan.model.get("name"), "platform": plan.platform,
            "mode": plan.mode, "measurement_id": plan.source.get("measurement_id"),
            "trial_number": plan.source.get("trial_number"), "remeasured": remeasured}
    title = f"placetune plan: {plan.model.get('name')} on {plan.platform}"
    tell = say  # one message, wrapped on a terminal
    if args.output == "-":  # (as export -o -: the trace on standard output, what placetune says on standard error)
        doc = _trace.chrome_trace(source, simulated=simulated, metadata=meta, title=title)
        write_data(dumps_json(doc, indent=None, separators=(",", ":")) + "\n")
        path: Any = "to standard output"

        tell = error_line
    else:
        path = _trace.write_chrome_trace(source, args.output, owned=owned, hint=force_hint("-o"), simulated=simulated,
                                         metadata=meta, title=title)
    if remeasured:
        tell("the plan has no timeline: re-measured it on the SIMULATED backend (simulated figures, not hardware)")
    n = len(_trace.timeline_events(source))
    tell(f"wrote {'SIMULATED ' if simulated else ''}trace {line_safe(str(path))} ({plural(n, 'event')}); open it in https://ui.perfetto.dev "
        "or chrome://tracing")
    return 0


# --------------------------------------------------------------------------- parsers
def _storage(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", "--db", dest="storage", default=DEFAULT_STORAGE, metavar="URL",
                   help=f"database URL or SQLite file (default {DEFAULT_STORAGE})")


def add_parsers(subparsers: Any) -> None:
    """Add ``studies``, ``export``, ``report`` and ``trace`` to the ``placetune`` subparsers.

    Args:
        subparsers: what ``ArgumentParser.add_subparsers()`` returned.
    """
    p = subparsers.add_parser("studies", help="list the studies of a database")
    _storage(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_studies)

    p = subparsers.add_parser("export", help="the best plan: JSON, or trtexec commands for the Jetson")
    p.add_argument("--study", default=None, help="study name (see `placetune studies`; default: the database's "
                   "only study)")
    _storage(p)
    p.add_argument("-o", "--output", default=None,
                   help="output file (default: standard output); with --format trtexec, a directory (or a path "
                        "without .sh/.json) gets a deployment folder: build.sh, the ONNX file(s), plan.json, "
                        "README.txt and runtime/ (the standalone runtime)")
    p.add_argument("--force", action="store_true",
                   help="replace an existing -o file that is not a placetune export (a plan or a build script)")
    p.add_argument("--format", choices=("json", "trtexec"), default="json",
                   help="json: the plan file; trtexec: a shell script of trtexec commands, or with -o DIR the "
                        "deployment folder (default json)")
    p.add_argument("--onnx", default=None, metavar="PATH",
                   help="trtexec format: the ONNX file to build from (default: the study's file, else model.onnx); "
                        "folder: the model file with its weights to cut (default: the study's file or zoo network)")
    p.add_argument("--calibration-cache", default=None, metavar="FILE",
                   help="INT8 plans: TensorRT calibration cache passed to trtexec as --calib (copied into the "
                        "folder); without it and without Q/DQ nodes the INT8 ranges are placeholders")
    p.add_argument("--trt-version", default=None,
                   help="trtexec format: target TensorRT version (default: the plan's)")
    p.add_argument("--measurement", type=int, default=None, metavar="ID",
                   help="export this measurement id instead of the best one")
    p.set_defaults(func=cmd_export)

    p = subparsers.add_parser("report", help="plots of a study and its best plan (PNG) plus a Chrome trace")
    p.add_argument("--study", default=None, help="study name (see `placetune studies`; default: the database's "
                   "only study)")
    _storage(p)
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="output directory")
    p.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    p.set_defaults(func=cmd_report)

    p = subparsers.add_parser("trace", help="Chrome-trace timeline of a plan (Perfetto, chrome://tracing)")
    p.add_argument("plan", help="plan file written by `placetune export`")
    p.add_argument("-o", "--output", required=True, help="output trace JSON file (-: standard output); replaces an "
                   "earlier trace or an empty file, another file only with --force")
    p.add_argument("--force", action="store_true", help="replace an existing -o file that is not a placetune trace")
    p.add_argument("--model", default=None,
                   help="the plan's ONNX file or zoo name (checked against the plan; needed to re-measure a plan "
                        "without timeline whose model file moved)")
    p.add_argument("--shape", action="append", metavar="NAME=1x3x224x224", help="input shape for --model")
    p.set_defaults(func=cmd_trace)
