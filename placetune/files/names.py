"""Names from data made file names: one plain component inside its folder, or refused.

A study name becomes ``<study>.plan.json``; a plan's engine entry names its ONNX and engine
files; a plan folder's calibration cache has a name in ``plan.json``. None of these may leave
their folder (``../x``, ``/etc/x``, ``0/../../../x``), hide (a NUL byte), or carry characters a
terminal or a shell would act on. :func:`file_name` is the one rule; :func:`confined` joins a
checked name to its folder.

Example:
    >>> file_name("resnet50-orin.plan.json", "plan file name")
    'resnet50-orin.plan.json'
    >>> file_name("../x.plan.json", "plan file name")
    Traceback (most recent call last):
    ...
    placetune.errors.ConfigError: plan file name '../x.plan.json' is not a plain file name (it has a path separator); file names from data must stay inside their folder
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from placetune.errors import ConfigError, PlacetuneError
from placetune.safetext import line_safe, shown

__all__ = ["file_name", "confined", "MAX_NAME_BYTES"]

#: The longest file name (bytes of UTF-8) Linux file systems take.
MAX_NAME_BYTES = 255


def _problem(name: Any) -> str | None:
    if not isinstance(name, str):
        return f"it is {type(name).__name__}, not text"
    if not name:
        return "it is empty"
    if "/" in name or "\\" in name:
        return "it has a path separator"
    if name in (".", ".."):
        return "it names a folder"
    if "\x00" in name:
        return "it has a NUL byte"
    if line_safe(name) != name:  # a newline or tab too: a name listed one a line (ls, a script's loop) splits
        return "it has control or bidi characters"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    return None


def file_name(name: Any, what: str, *, error: type[PlacetuneError] = ConfigError, hint: str = "") -> str:
    """``name`` when it can be one file name inside a folder: text, not empty, no ``/`` or ``\\``,
    not ``.`` or ``..``, no NUL, control or bidi character, at most 255 bytes.

    Raises:
        error: naming ``what``, the name (escaped) and what is wrong, then ``hint``.
    """
    why = _problem(name)
    if why is not None:
        raise error(f"{what} {shown(repr(name), 80)} is not a plain file name ({why}); "
                    + (hint or "file names from data must stay inside their folder"))
    return name


def confined(folder: str | os.PathLike[str], name: Any, what: str, *, error: type[PlacetuneError] = ConfigError,
             hint: str = "") -> Path:
    """``folder / name`` for a ``name`` that :func:`file_name` accepts.

    Raises:
        error: the name would leave the folder (see :func:`file_name`).
    """
    return Path(folder) / file_name(name, what, error=error, hint=hint)
