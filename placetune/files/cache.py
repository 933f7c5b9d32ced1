"""Files of a cache folder that TensorRT reads (a prepared model, a pipeline segment): reused only when
intact, else made again and put in place atomically."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from placetune.files.read import file_digest

__all__ = ["cached_file"]


def cached_file(target: Path, make: Callable[[], bytes]) -> Path:
    """``target``, a file of a cache folder that TensorRT reads (a prepared model, a segment): reused when it is
    the file written there (its digest is kept beside it, ``<name>.sha256``), else made again with ``make()``
    and put in place atomically. A copy cut short (a full disk, a power cut) or edited failed every build of
    every later run; a link placed there is replaced, never written through."""
    stamp = target.with_name(target.name + ".sha256")
    if _intact(target, stamp):
        return target
    data = make()
    target.parent.mkdir(parents=True, exist_ok=True)
    for path, payload in ((target, data), (stamp, (hashlib.sha256(data).hexdigest() + "\n").encode())):
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(payload)
        os.replace(tmp, path)  # (the directory entry: a link there is replaced, its target untouched)
    return target


def _intact(target: Path, stamp: Path) -> bool:
    """Whether the prepared file in the cache is the one written there (its digest, kept beside it): a copy cut
    short (a full disk, a power cut), edited or replaced by a link is not, and is made again."""
    try:
        return (target.is_file() and not target.is_symlink() and not stamp.is_symlink()
                and stamp.read_text(encoding="ascii").strip() == file_digest(target))
    except (OSError, ValueError):
        return False
