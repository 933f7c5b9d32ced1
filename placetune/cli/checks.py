"""The command line's one validator: every option checked once, after parsing, before any work.

* **Empty means empty**: an option given an empty value (``--replicas ""``, ``--study " "``,
  ``--shape ""``, ``placetune check ""``) is refused instead of silently meaning its default.
* **Numbers in range**: every integer option has a range (:data:`INT_RANGES`; an option not
  listed gets :data:`DEFAULT_INT_RANGE`), every float option must be finite and in range
  (:data:`FLOAT_RANGES`): ``--batch 9223372036854775808`` is refused here, not by numpy.
* **A database URL the store can open as written**: ``--storage`` goes through the store's URL
  check before any work, so that its refusal (``sqlite:///runs/a?b.db``: exit 7) names the option.

Each refusal is a :class:`~placetune.errors.ConfigError` (exit code 6) that names the option
and what it allows.
"""

from __future__ import annotations

import argparse
import math
import os
from typing import TYPE_CHECKING

from placetune.errors import ConfigError, StoreError
from placetune.validate import MAX_BATCH, integer, number
from placetune.validate import batch as check_batch
from placetune._lazy import lazy_import

if TYPE_CHECKING:
    from placetune.model.model import Model

if TYPE_CHECKING:
    import placetune.model.model as _model
    import placetune.store.url as _url
else:
    _model = lazy_import("placetune.model.model")
    _url = lazy_import("placetune.store.url")

__all__ = ["check_arguments", "INT_RANGES", "FLOAT_RANGES", "DEFAULT_INT_RANGE"]

#: dest -> (lowest, highest) of every integer option, so that a refusal names the option's own range
#: (``--trials 99999999999999999999`` once read "from -9223372036854775808 to ..."). The settings and
#: study validators check the same fields again by their names: these ranges are theirs
#: (``studyfile.MAX_TRIALS``, ``studyfile.MAX_STREAMS``, ``settings.MAX_FRAMES_IN_FLIGHT``, ``dla_core``
#: 0 or 1, the report's ``--dpi``), copied here to keep the command line's start light.
INT_RANGES: dict[str, tuple[int, int]] = {
    "batch": (1, MAX_BATCH),
    "seed": (0, 2**32 - 1),
    "measurement": (1, 2**63 - 1),
    "folds": (0, 1000),
    "verbose": (0, 100),
    "trials": (1, 1_000_000),
    "streams": (1, 1024),
    "frames_in_flight": (1, 64),
    "dla_core": (0, 1),
    "dpi": (10, 1200),
}
#: dest -> (lowest, highest) of every float option.
FLOAT_RANGES: dict[str, tuple[float, float]] = {
    "noise": (0.0, 1.0),
}
#: dests of the options (and arguments) that name a file or folder: a leading ``~`` is the home folder. The
#: shell expands it at a word's start only, so ``--export=~/p.json`` or a quoted ``"~/p.json"`` reached
#: placetune with its ``~`` and made a folder named ``~``. (``--storage`` paths: the store's URL rules.)
PATH_DESTS = frozenset({"model", "output", "placement", "device_profile", "calibration_cache", "input_data",
                        "worker_python", "onnx", "plan", "study_file", "export", "trtexec"})
#: The range of an integer option :data:`INT_RANGES` does not list.
DEFAULT_INT_RANGE = (-(2**63), 2**63 - 1)


def _chosen_actions(parser: argparse.ArgumentParser, args: argparse.Namespace) -> list[argparse.Action]:
    """The actions of the parser and of the subcommand (and sub-subcommand) the arguments chose."""
    out: list[argparse.Action] = []
    for action in parser._actions:  # noqa: SLF001 - argparse has no public walk of its actions
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            chosen = getattr(args, action.dest, None)
            sub = action.choices.get(chosen) if chosen is not None else None
            if sub is not None:
                out += _chosen_actions(sub, args)
        else:
            out.append(action)
    return out


def _name(action: argparse.Action) -> str:
    return action.option_strings[-1] if action.option_strings else (action.metavar or action.dest).__str__()


def check_arguments(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse empty values and out-of-range numbers of the options ``args`` holds.

    Raises:
        ConfigError: naming the option and what it allows.
    """
    for action in _chosen_actions(parser, args):
        if action.dest in (argparse.SUPPRESS, "help", "version") or not hasattr(args, action.dest):
            continue
        value = getattr(args, action.dest)
        if value is None or value is action.default and not isinstance(value, list):
            continue
        name = _name(action)
        if action.dest in PATH_DESTS:
            value = _expand_home(value)
            setattr(args, action.dest, value)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str):
                if not v.strip():
                    raise ConfigError(f"{action.dest} must be a non-empty value: {name} is empty; give a value, or "
                                      "leave the option out for its default")
                if "\x00" in v:
                    raise ConfigError(f"{name} holds a NUL byte")
                if action.dest == "storage":
                    try:
                        _url.normalise_url(v)
                    except StoreError as exc:
                        raise StoreError(f"{action.option_strings[0]}: {exc}") from None
            elif isinstance(v, bool):
                continue
            elif isinstance(v, int):
                if action.dest == "folds" and not (v == 0 or 2 <= v <= 1000):
                    raise ConfigError(f"--folds must be 0 (no cross-validation) or an integer from 2 to 1000, got {v}")
                if action.dest == "batch":  # one message for a batch everywhere (its range included)
                    check_batch(v, name)
                else:
                    lo, hi = INT_RANGES.get(action.dest, DEFAULT_INT_RANGE)
                    integer(v, name, lo, hi)
            elif isinstance(v, float):
                lo_f, hi_f = FLOAT_RANGES.get(action.dest, (-math.inf, math.inf))
                number(v, name, lo_f, hi_f)


def _expand_home(value: object) -> object:
    """``value`` (a path, or a list of them) with a leading ``~`` or ``~user`` made the home folder."""
    if isinstance(value, list):
        return [_expand_home(v) for v in value]
    if isinstance(value, str) and value.startswith("~"):
        return os.path.expanduser(value)
    return value


def load_model(args: argparse.Namespace) -> "Model":
    """The model a command's arguments name (``model``, ``--shape``, ``--batch``), loaded and checked."""
    return _model.Model.load(args.model, getattr(args, "shape", None) or None, batch=getattr(args, "batch", None))
