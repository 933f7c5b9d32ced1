"""Study files (TOML) and the tuning configuration they resolve to.

Precedence: command-line options override the study file, which overrides the defaults.

A study file::

    [study]
    name = "seed-block-pipeline"   # the study's name in the store
    model = "seed-block"           # zoo name or ONNX path (relative to the file)
    platform = "orin-agx"
    backend = "simulate"
    mode = "pipeline"
    objective = "latency"
    precision = "int8"
    power_mode = "30W"             # nvpmodel power mode (default MAXN: the platform's fastest)
    agent = "guided"
    trials = 200
    device_profile = "my-device.toml"  # simulated backend: measure this device (placetune calibrate)
    input_data = "frames.npz"      # real backends: time (and gate) on these inputs, not random ones
    timeout = "8h"
    constraints = ["latency<=33"]  # bounds the best plan must meet (metric<=bound / metric>=bound)
    stop_when_converged = false    # true: end the run once the best stopped improving (convergence.py)
    stop_when_settled = true       # false: guided builds to the end of the budget after it converged
    streams = 4                    # camera streams sharing the plan's frames: per-stream fps in summary and plan

    [settings]                     # placetune.Settings fields
    frames_in_flight = 1

    [agent_options]                # passed to the agent
    seed = 0

Trust: a study file is data, not a program. Without ``--trust-study-file``
(:func:`load_study_file` with ``trusted=True``):

* every path it names (``model``/``models`` ONNX files, ``device_profile``, ``export``, a SQLite
  ``storage`` file, the path options of ``[backend_options]``) must lie inside the study file's
  own folder or the working folder (symbolic links followed); an ``export`` path never names the
  study file itself, and replaces only a plan file placetune wrote;
* it names no program placetune runs, no argument of it and no environment variable
  (``[backend_options]`` ``trtexec``, ``worker_python``, ``env``, ``worker_env``, ``build_args``,
  ``run_args``): those come from the command line (``--trtexec``, ``--worker-python``) or the
  user's own environment (``PLACETUNE_TRTEXEC``).

Paths and programs given on the command line are the user's own and are not confined.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any
import difflib

from placetune.errors import ConfigError, ModelError, StoreError
from placetune.safetext import shown
from placetune.validate import batch as check_batch
from placetune.validate import loads_toml
from placetune.files.read import read_text
from placetune.files.write import user_output
from placetune.hardware.platforms import get_platform
from placetune.placement.space import Space
from placetune.plan.file import is_plan_file
from placetune.settings import DEFAULT_PRECISION, Settings, check_mode_options
from placetune.store.url import normalise_url
from placetune.tuning.constraints import parse_constraints


#: the most camera streams a study may share its frames between (``streams``)
MAX_STREAMS = 1024
#: the most trials one study runs
MAX_TRIALS = 1_000_000

__all__ = ["TuneConfig", "load_study_file", "parse_duration", "DEFAULT_MODEL"]

#: The longest timeout (seconds, about 31 years): a bigger integer overflowed a float.
MAX_TIMEOUT_S = 1e9
#: The shortest timeout (seconds): the format's unit (``90s``); a shorter one (``1e-300``) stops a run
#: before its first evaluation.
MIN_TIMEOUT_S = 1.0
_TIMEOUT_RANGE = f"positive and at most {MAX_TIMEOUT_S:g} s, at least {MIN_TIMEOUT_S:g} s (e.g. 8h, 30m, 90s)"

#: The embedded default of ``placetune tune`` with no argument.
DEFAULT_MODEL = "resnet50"


def parse_duration(text: str | int | float | None, what: str | None = None) -> float | None:
    """``"8h"``, ``"30m"``, ``"90s"``, ``"1h30m"`` or a number of seconds -> seconds. ``what``: the option
    or study-file key the value came from, as a refusal names it (None: ``--timeout`` / ``timeout``).

    Raises:
        ConfigError: not a duration.
    """
    if text is None or text == "":
        return None
    key = what or "timeout"
    if isinstance(text, bool):
        raise ConfigError(f"{key} must be a duration (e.g. 8h, 30m, 90s) or seconds, got {text!r}")
    if isinstance(text, (int, float)):
        if not MIN_TIMEOUT_S <= text <= MAX_TIMEOUT_S:
            raise ConfigError(f"{key} must be {_TIMEOUT_RANGE}, got {str(text)[:40]}")
        return float(text)
    s = str(text).strip().lower()
    try:
        if not s.isascii() or "_" in s:  # float() reads "1_000" and other scripts' digits
            raise ValueError(s)
        value = float(s)
    except ValueError:
        parts = re.findall(r"([0-9]+(?:\.[0-9]+)?)\s*([hms])", s)
        units = [b for _, b in parts]
        # each unit once: "1h1h" would otherwise add up to 2 h, a typo read as a longer run
        if not parts or "".join(f"{a}{b}" for a, b in parts) != s.replace(" ", "") or len(set(units)) != len(units):
            head = f"{what} {str(text)[:40]!r}" if what else f"bad --timeout {str(text)[:40]!r}"
            raise ConfigError(f"{head}: use a number of seconds or each of h, m, s at most once (e.g. 8h, 30m, 90s "
                              "or 1h30m)") from None
        value = sum(float(a) * {"h": 3600, "m": 60, "s": 1}[b] for a, b in parts)
    if not MIN_TIMEOUT_S <= value <= MAX_TIMEOUT_S:
        raise ConfigError(f"{key} must be {_TIMEOUT_RANGE}, got {str(text)[:40]!r}")
    return value


@dataclass
class TuneConfig:
    """Everything ``placetune tune`` needs (see the module docstring for the file format).

    Attributes mirror the command-line options; ``settings`` are
    :class:`~placetune.settings.Settings` fields and ``agent_options`` go to the agent.
    """

    model: str = DEFAULT_MODEL
    models: list[str] = field(default_factory=list)  # concurrent mode: the networks that run at once
    platform: str = "orin-agx"
    backend: str = "simulate"
    mode: str = "pipeline"
    objective: str = "throughput"
    precision: str = DEFAULT_PRECISION
    power_mode: str | None = None  # None: Settings' default (MAXN, the fastest mode)
    batch: int | None = None
    shapes: list[str] = field(default_factory=list)
    agent: str = "guided"
    trials: int = 300
    timeout: float | None = None
    storage: str = "sqlite:///placetune.db"
    study: str | None = None
    granularity: str | None = None  # None: the agent's own default (guided: stages; others: fusion)
    export: str | None = None
    device_profile: str | None = None
    input_data: str | None = None  # a .npz of the network's inputs to time on (placetune.inputdata)
    constraints: list[str] = field(default_factory=list)  # "latency<=2.0", see placetune.tuning.constraints
    stop_when_converged: bool = False  # end the run once it converged (placetune.tuning.convergence)
    stop_when_settled: bool = True  # end the run once the agent finds nothing that could change its answer
    streams: int | None = None  # camera streams sharing the plan's frames evenly: per-stream fps reported
    settings: dict[str, Any] = field(default_factory=dict)
    agent_options: dict[str, Any] = field(default_factory=dict)
    backend_options: dict[str, Any] = field(default_factory=dict)
    source: str = "command line"
    export_from_file: bool = False  # ``export`` named by an untrusted study file: replaces only a plan file
    export_force: bool = False  # ``--force``: the plan file may replace a file placetune did not write

    def __post_init__(self) -> None:
        """Refuse values of the wrong type or range up front (``trials = true``,
        ``timeout = true`` and ``--study ""`` were once accepted), naming the field and what is allowed."""
        if isinstance(self.trials, bool) or not isinstance(self.trials, int) or not 1 <= self.trials <= MAX_TRIALS:
            raise ConfigError(f"trials must be an integer from 1 to {MAX_TRIALS:,}, got {str(self.trials)[:40]!r}")
        if self.timeout is not None and (isinstance(self.timeout, bool) or not isinstance(self.timeout, (int, float))
                                         or not MIN_TIMEOUT_S <= self.timeout <= MAX_TIMEOUT_S):
            raise ConfigError(f"timeout must be {_TIMEOUT_RANGE}, got {str(self.timeout)[:40]!r}")
        if not isinstance(self.stop_when_converged, bool):
            raise ConfigError(f"stop_when_converged must be true or false, got {str(self.stop_when_converged)[:40]!r}")
        if not isinstance(self.stop_when_settled, bool):
            raise ConfigError(f"stop_when_settled must be true or false, got {str(self.stop_when_settled)[:40]!r}")
        if self.streams is not None and (isinstance(self.streams, bool) or not isinstance(self.streams, int)
                                         or not 1 <= self.streams <= MAX_STREAMS):
            raise ConfigError(f"streams must be an integer from 1 to {MAX_STREAMS:,} (camera streams sharing the "
                              f"plan's frames), got {str(self.streams)[:40]!r}")
        if self.batch is not None:
            check_batch(self.batch)
        for name in ("model", "platform", "backend", "mode", "objective", "precision", "agent", "storage"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or "\x00" in value:
                raise ConfigError(f"{name} must be a non-empty text value, got {_short(value)}")
        for name in ("granularity", "export", "device_profile", "power_mode", "input_data"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value or "\x00" in value):
                raise ConfigError(f"{name} must be a non-empty text value, got {_short(value)}")
        for name in ("shapes", "constraints", "models"):
            value = getattr(self, name)
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f"{name} must be a list of text values, got {_short(value)}")
        self.check_options()
        if self.granularity is not None:
            Space.check_granularity(self.granularity)
        if self.mode == "concurrent" and len(self.models) < 2:
            raise ConfigError("concurrent mode places several networks at once: give two or more, --model A "
                              "--model B (or models = [\"A\", \"B\"] in the study file)")
        if self.models and self.mode != "concurrent":
            raise ConfigError(f"several models run together only in concurrent mode (--mode concurrent), not "
                              f"{self.mode!r}")
        if len(set(self.models)) != len(self.models):
            raise ConfigError(f"models: a network is named twice: {self.models}")
        if self.study is not None and (not isinstance(self.study, str) or not self.study.strip()
                                       or "\x00" in self.study or len(self.study) > 200):
            raise ConfigError(f"the study name (--study, or name = \"...\" in [study]) must be a non-empty name of "
                              f"at most 200 characters without NUL bytes, got "
                              f"{str(self.study)[:40]!r}")

    def export_owner(self) -> Any:
        """How the run's plan file may be replaced (``owned`` of :func:`~placetune.files.write.write_file`):
        an untrusted study file's ``export`` only over a plan placetune wrote; else (``--export`` or
        ``<study>.plan.json``) over an earlier plan, an empty file, a device or a pipe, anything with ``--force``."""
        if self.export and self.export_from_file:
            return is_plan_file
        return user_output(self.export_force, is_plan_file)

    def check_options(self) -> None:
        """Refuse ``settings``/``agent_options``/``backend_options`` that are not tables, and an agent
        seed outside 0..2**32-1 (Optuna's range; ``--seed -1`` was once a traceback).

        Raises:
            ConfigError: naming the field and what is allowed.
        """
        for name in ("settings", "agent_options", "backend_options"):
            value = getattr(self, name)
            if not isinstance(value, dict):
                raise ConfigError(f"[{name}] must be a table of key = value, got {_short(value)}")
        self._check_settings_keys()
        check_mode_options(self.mode, self.settings, lambda k: f"[settings] {k}")
        seed = self.agent_options.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32):
            raise ConfigError(f"agent seed must be an integer from 0 to 4294967295, got {_short(seed)}")

    def _check_settings_keys(self) -> None:
        """A key of ``[settings]`` that is no Settings field is named with the closest one (a typo was
        a raw ``TypeError``); mode and precision belong to ``[study]``."""
        allowed = sorted({f.name for f in fields(Settings)} - {"mode", "precision"})
        for key in self.settings:
            if key in ("mode", "precision"):
                raise ConfigError(f"[settings] {key}: set it in [study] ({key} = ...) or with --{key}")
            if key not in allowed:
                close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise ConfigError(f"[settings] has no key {_short(key)}; {hint}the keys are: {', '.join(allowed)}")

    def settings_options(self) -> dict[str, Any]:
        """``[settings]`` with :attr:`power_mode` (``--power-mode``, ``[study] power_mode``) applied, the
        mode named as the platform names it (``30w``, nvpmodel's ``MODE_30W`` -> ``30W``).

        Raises:
            ConfigError: a power mode the platform does not have (naming the field and its modes).
        """
        options = dict(self.settings)
        if self.power_mode is not None:
            options["power_mode"] = self.power_mode
        if isinstance(options.get("power_mode"), str):
            options["power_mode"] = get_platform(self.platform).check_power_mode(options["power_mode"])
        return options

    @classmethod
    def embedded_default(cls) -> "TuneConfig":
        """What ``placetune tune`` runs with no study file and no model: the defaults of every
        ``--model`` run (pipeline mode with 4 frames in flight, int8, objective throughput,
        300 trials, the guided agent in stages) on ResNet-50 at batch 2.

        How much throughput do GPU + DLA0 + DLA1 give ResNet-50 INT8 as a pipeline on the
        simulated AGX Orin? Takes a few minutes on a laptop.
        """
        return cls(model=DEFAULT_MODEL, batch=2, source="embedded default")

    def with_overrides(self, **overrides: Any) -> "TuneConfig":
        """A copy with the non-None overrides applied."""
        names = {f.name for f in fields(self)}
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for key, value in overrides.items():
            if value is None:
                continue
            if key not in names:
                raise ConfigError(f"unknown tune option {key!r}")
            data[key] = value
            if key == "export":  # the user's own file name
                data["export_from_file"] = False
        return TuneConfig(**data)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


_STUDY_KEYS = {f.name for f in fields(TuneConfig)} - {"settings", "agent_options", "backend_options", "source",
                                                      "export_from_file", "export_force"}

def _study_key_hint(key: str) -> str:
    """What a mistyped or misplaced key of ``[study]`` was meant to be, then the keys ``[study]`` takes."""
    allowed = sorted(_STUDY_KEYS - {"study"} | {"name"})
    if key in {f.name for f in fields(Settings)}:
        hint = f"{key} belongs in [settings]; "
    else:
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}the keys of [study] are: {', '.join(allowed)}"


#: ``[backend_options]`` that name a program placetune runs, its arguments or its environment:
#: from the command line, the user's environment or a trusted study file only.
PROGRAM_OPTIONS = ("trtexec", "worker_python", "env", "worker_env", "build_args", "run_args")
#: ``[backend_options]`` that name a file or folder (confined like the study file's other paths).
PATH_OPTIONS = ("cache_dir", "calibration_cache", "power_root", "save_plans")


def check_model_files(cfg: "TuneConfig") -> None:
    """The ONNX files a study file names exist, else one line naming the study file (the model's own error
    named the zoo, and not that a study file's path is relative to its folder). Called when no ``--model``
    replaces them.

    Raises:
        ModelError: the first file missing (exit status 3).
    """
    for model in [cfg.model, *(cfg.models or [])]:
        if isinstance(model, str) and model.endswith((".onnx", ".onnx.gz")) and not os.path.lexists(model):
            raise ModelError(f"study file {shown(cfg.source)}: model {shown(model)}: no such file (a model path in "
                             "a study file is relative to the study file's folder)")


def _inside(path: Path, folders: list[Path]) -> bool:
    real = Path(os.path.realpath(path))
    return any(real == f or f in real.parents for f in folders)


def _confine(p: Path, key: str, value: str, base: Path) -> None:
    """Refuse a path a study file names outside its own folder and the working folder."""
    target = Path(value).expanduser()
    target = target if target.is_absolute() else base / target
    folders = [Path(os.path.realpath(p.parent)), Path(os.path.realpath(Path.cwd()))]
    if not _inside(target, folders):
        raise ConfigError(f"study file {shown(p)}: {key} = {shown(value, 120)} is outside the study file's folder "
                          f"and the working folder: a study file's paths stay inside them; give the path on the "
                          f"command line, or pass --trust-study-file if you trust this file")


def _check_trust(p: Path, study: dict[str, Any], backend_options: dict[str, Any]) -> None:
    """The checks of an untrusted study file (see the module docstring)."""
    programs = [k for k in PROGRAM_OPTIONS if k in backend_options]
    if programs:
        raise ConfigError(f"study file {shown(p)}: [backend_options] {', '.join(programs)} name(s) a program "
                          "placetune runs, its arguments or its environment, which a study file may not set: give "
                          "--trtexec / --worker-python on the command line (or PLACETUNE_TRTEXEC), or pass "
                          "--trust-study-file if you trust this file")
    cwd = Path.cwd()
    for key in ("model", "models"):
        value = study.get(key)
        for m in (value if isinstance(value, list) else [value]):
            if isinstance(m, str) and (m.endswith(".onnx") or m.endswith(".onnx.gz")):
                _confine(p, key, m, p.parent)
            elif isinstance(m, str):  # a zoo name, or any other file (read as it is named, from the working folder)
                _confine(p, key, m, cwd)
    for key in ("device_profile", "input_data"):
        if isinstance(study.get(key), str):
            _confine(p, key, study[key], p.parent)
    export = study.get("export")
    if isinstance(export, str) and export:
        _confine(p, "export", export, cwd)
        try:
            same = p.name != "-" and os.path.samefile(p, export)
        except OSError:
            same = False
        if same:
            raise ConfigError(f"study file {shown(p)}: export names the study file itself; give another file")
    storage = study.get("storage")
    if isinstance(storage, str) and storage.strip():
        try:
            url = normalise_url(storage)
        except StoreError:
            url = None  # refused with its own message where the store opens it
        db = (url.database or "") if url is not None and url.get_backend_name() == "sqlite" else ""
        if db.startswith("file:"):
            db = db[5:].split("?", 1)[0]
        if db and db != ":memory:":
            _confine(p, "storage", db, cwd)
    for key in PATH_OPTIONS:
        value = backend_options.get(key)
        if isinstance(value, str) and value:
            _confine(p, f"[backend_options] {key}", value, cwd)


def _refuse_nul(p: Path, doc: dict[str, Any]) -> None:
    """A NUL byte (``"\\u0000"``) in a text value of [study] or [backend_options]: no path, name or URL can
    hold one (``os.path.realpath`` raised ValueError, a traceback, for a model path).

    Raises:
        ConfigError: naming the table and key.
    """
    for table in ("study", "backend_options"):
        for key, value in doc.get(table, {}).items():
            items = value if isinstance(value, list) else [value]
            if any(isinstance(v, str) and "\0" in v for v in items):
                raise ConfigError(f"study file {shown(p)}: [{table}] {shown(str(key))} holds a NUL byte (\\u0000), "
                                  "which no path, name or URL may hold")


def load_study_file(path: str | Path, *, trusted: bool = False) -> TuneConfig:
    """Read a study TOML file into a :class:`TuneConfig`.

    Relative ONNX paths are resolved against the file's folder.

    Args:
        path: the file (``-``: standard input).
        trusted: the user trusts the file (``--trust-study-file``): its paths are not confined and
            it may name programs and environment variables (see the module docstring).

    Raises:
        ConfigError: unreadable file, TOML syntax error, unknown keys or bad values; for an
            untrusted file, a path outside its folder and the working folder, or a program option.
    """
    p = Path(path)
    text = read_text(path, "study file", stdin=True)  # regular files (or -) only, at most 1 MiB
    if os.fspath(path) == "-":
        p = Path.cwd() / "-"  # relative paths in a study read from standard input: the working folder
    doc = loads_toml(text, f"study file {shown(p)}")  # nesting and dotted keys bounded before tomllib
    unknown_tables = set(doc) - {"study", "settings", "agent_options", "backend_options"}
    if unknown_tables:
        raise ConfigError(f"study file {p}: unknown table(s) {', '.join(sorted(unknown_tables))}; "
                          "use [study], [settings], [agent_options], [backend_options]")
    for table in ("study", "settings", "agent_options", "backend_options"):
        if not isinstance(doc.get(table, {}), dict):
            raise ConfigError(f"study file {p}: {table} must be a table ([{table}]), got {_short(doc[table])}")
    _refuse_nul(p, doc)
    study = dict(doc.get("study", {}))
    if "name" in study:
        study["study"] = study.pop("name")
    unknown = set(study) - _STUDY_KEYS
    if unknown:
        raise ConfigError(f"study file {p}: unknown key(s) in [study]: {', '.join(sorted(map(str, unknown)))}; "
                          f"{_study_key_hint(sorted(map(str, unknown))[0])}")
    if "timeout" in study:
        study["timeout"] = parse_duration(study["timeout"], f"study file {p}: [study] timeout")
    if "shapes" in study and isinstance(study["shapes"], str):
        study["shapes"] = [study["shapes"]]
    def resolve(model: Any) -> Any:
        if isinstance(model, str) and (model.endswith(".onnx") or model.endswith(".onnx.gz")):
            mp = Path(model).expanduser()
            if not mp.is_absolute():
                return str((p.parent / mp).resolve())
        return model

    if "model" in study:
        study["model"] = resolve(study["model"])
    if isinstance(study.get("models"), list):
        if not study["models"]:  # empty means empty: not the default network
            raise ConfigError(f"study file {shown(p)}: models is empty; list the networks that run at once "
                              "(two or more), or use model = \"...\" for one network")
        study["models"] = [resolve(m) for m in study["models"]]
    for key, what in (("device_profile", "a device profile TOML file"), ("input_data", "a .npz of input arrays")):
        dp = study.get(key)
        if dp is not None:
            if not isinstance(dp, str) or not dp:
                raise ConfigError(f"study file {p}: {key} must be the path of {what}")
            dpp = Path(dp).expanduser()
            study[key] = str(dpp if dpp.is_absolute() else (p.parent / dpp).resolve())
    if isinstance(study.get("export"), str):  # a leading ~: the home folder, as in every path
        study["export"] = os.path.expanduser(study["export"])
    for key in ("trials", "batch"):
        if key in study and (not isinstance(study[key], int) or study[key] < 1):
            raise ConfigError(f"study file {p}: {key} must be a positive integer")
    if "model" not in study and "models" not in study:  # an empty file is not the embedded default
        raise ConfigError(f"study file {shown(p)} names no model: add model = \"resnet50\" (a zoo name or an "
                          "ONNX file) or models = [...] under [study]")
    if "constraints" in study:
        cons = study["constraints"]
        cons = [cons] if isinstance(cons, str) else cons
        if not isinstance(cons, list) or not all(isinstance(c, str) for c in cons):
            raise ConfigError(f"study file {p}: constraints must be a list of strings like \"latency<=2.0\"")
        try:
            study["constraints"] = [c.text for c in parse_constraints(cons)]
        except ConfigError as exc:
            raise ConfigError(f"study file {p}: {exc}") from None
    if not trusted:
        _check_trust(p, study, dict(doc.get("backend_options", {})))
    try:
        cfg = TuneConfig(**study, export_from_file=not trusted and bool(study.get("export")))
        cfg.settings = dict(doc.get("settings", {}))
        if cfg.power_mode is not None and cfg.settings.get("power_mode", cfg.power_mode) != cfg.power_mode:
            raise ConfigError(f"power_mode is {cfg.power_mode!r} in [study] but {cfg.settings['power_mode']!r} in "
                              "[settings]: give it once")
        cfg.agent_options = dict(doc.get("agent_options", {}))
        cfg.backend_options = dict(doc.get("backend_options", {}))
        cfg.check_options()
    except ConfigError as exc:
        raise ConfigError(f"study file {p}: {exc}") from None
    cfg.source = str(p)
    return cfg
