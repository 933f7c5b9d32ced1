"""The worker's on-disk caches shared between processes: timing cache and engine cache files under ``flock``.

A sibling module of ``worker.py``: Python 3.8, standard library only.
"""

import fcntl
import json
import os
import time

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, Optional, Tuple
except ImportError:  # pragma: no cover
    pass


class _Locked(object):
    """``fcntl.flock`` on ``<path>.lock`` (shared for reading, exclusive for writing)."""

    def __init__(self, path, exclusive):
        # type: (str, bool) -> None
        self.path = path + ".lock"
        self.mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        self.fh = None  # type: Any

    def __enter__(self):
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        self.fh = open(self.path, "a")
        fcntl.flock(self.fh.fileno(), self.mode)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fh.fileno(), fcntl.LOCK_UN)
        self.fh.close()


def load_timing_cache(config, path):
    # type: (Any, Optional[str]) -> Optional[str]
    """The timing cache file set on ``config`` (none: a new cache). A file TensorRT cannot read is set
    aside (renamed ``<name>.unreadable-<time>-<pid>``) and the build starts on a new cache: the binding
    returns None for it (``IBuilderConfig::createTimingCache`` returns null, python/src/infer/pyCore.cpp
    release/8.6:270), and ``set_timing_cache(None)`` would fail this build and every later one.
    Returns the one line that says so, or None."""
    if not path:
        return None
    data = b""
    with _Locked(path, exclusive=False):
        if os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
    try:
        cache = config.create_timing_cache(data)
    except Exception:  # a binding that raises instead
        cache = None
    note = None
    if cache is None:
        aside = _set_aside(path, data)
        note = "TensorRT could not read the timing cache %s (%d bytes)%s; built on a new one" % (
            path, len(data), ": set aside as %s" % os.path.basename(aside) if aside else "")
        cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, False)
    return note


def _set_aside(path, data):
    # type: (str, bytes) -> Optional[str]
    """``path`` renamed aside when it still holds ``data`` (another process may have replaced it)."""
    with _Locked(path, exclusive=True):
        try:
            with open(path, "rb") as fh:
                if fh.read() != data:
                    return None
            aside = "%s.unreadable-%s-%d" % (path, time.strftime("%Y%m%d-%H%M%S"), os.getpid())
            os.replace(path, aside)
        except OSError:
            return None
    return aside


def save_timing_cache(config, path):
    # type: (Any, Optional[str]) -> None
    """Merge this build's timing cache into the file (read-combine-write under an exclusive lock), written
    under a temporary name, flushed to disk and renamed: whole or not at all, also after a power cut."""
    if not path:
        return
    ours = config.get_timing_cache()
    if ours is None:
        return
    with _Locked(path, exclusive=True):
        merged = ours
        if os.path.exists(path):
            with open(path, "rb") as fh:
                disk_data = fh.read()
            try:
                disk = config.create_timing_cache(disk_data)
            except Exception:
                disk = None
            if disk is not None:
                disk.combine(ours, False)
                merged = disk
        tmp = "%s.%d.tmp" % (path, os.getpid())
        try:
            with open(tmp, "wb") as fh:
                fh.write(bytes(merged.serialize()))
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def read_cached_plan(path, version):
    # type: (Optional[str], str) -> Tuple[Optional[bytes], Dict[str, Any]]
    """A plan and its build record from the engine cache: (None, {}) when absent,
    incomplete or built by another TensorRT version."""
    if not path or not os.path.exists(path + ".json"):
        return None, {}
    try:
        with _Locked(path, exclusive=False):
            with open(path + ".json") as fh:
                meta = json.load(fh)
            with open(path, "rb") as fh:
                data = fh.read()
    except (OSError, ValueError, RecursionError):  # (RecursionError: a record nested too deeply)
        return None, {}
    if not isinstance(meta, dict) or meta.get("trt_version") != version or meta.get("engine_bytes") != len(data):
        return None, {}
    return data, meta


def write_cached_plan(path, data, meta):
    # type: (str, bytes, Dict[str, Any]) -> None
    """Plan first, then its record (a plan without a record is not a cache entry)."""
    with _Locked(path, exclusive=True):
        for target, payload in ((path, data), (path + ".json", json.dumps(meta).encode())):
            tmp = "%s.%d.tmp" % (target, os.getpid())
            with open(tmp, "wb") as fh:
                fh.write(payload)
            os.replace(tmp, target)
