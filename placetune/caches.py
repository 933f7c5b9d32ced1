"""Where placetune keeps its caches: built engines, timing caches, merged concurrent models.

One rule for every kind of cache, so that ``PLACETUNE_CACHE_DIR`` moves them all: a backend's
engines and the models merged for concurrent networks alike. It depends on nothing of placetune,
so the model layer can use it without importing the measurement settings.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["default_cache_dir"]


def default_cache_dir(kind: str) -> Path:
    """Where placetune keeps caches (built engines, timing caches, merged concurrent models): ``$PLACETUNE_CACHE_DIR/<kind>``,
    else ``$XDG_CACHE_HOME/placetune/<kind>`` (``~/.cache/placetune/<kind>``). A leading ``~`` in either
    variable is the home folder (``PLACETUNE_CACHE_DIR="~/x"``, quoted, reaches placetune with its ``~``)."""
    env = os.environ.get("PLACETUNE_CACHE_DIR")
    if env:
        return Path(env).expanduser() / kind
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "placetune" / kind
