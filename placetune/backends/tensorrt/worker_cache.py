"""The worker's on-disk caches shared between processes: timing cache and engine cache files under ``flock``.

A sibling module of ``worker.py``: Python 3.8, standard library only.
"""

import fcntl
import json
import os

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
    # type: (Any, Optional[str]) -> Any
    if not path:
        return None
    data = b""
    with _Locked(path, exclusive=False):
        if os.path.exists(path):
            with open(path, "rb") as fh:
                data = fh.read()
    try:
        cache = config.create_timing_cache(data)
    except Exception:  # a corrupt or foreign cache: start empty
        cache = config.create_timing_cache(b"")
    config.set_timing_cache(cache, False)
    return cache


def save_timing_cache(config, path):
    # type: (Any, Optional[str]) -> None
    """Merge this build's timing cache into the file (read-combine-write under an exclusive lock)."""
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
                merged = config.create_timing_cache(disk_data)
                merged.combine(ours, False)
            except Exception:
                merged = ours
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as fh:
            fh.write(bytes(merged.serialize()))
        os.replace(tmp, path)


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
    except (OSError, ValueError):
        return None, {}
    if meta.get("trt_version") != version or meta.get("engine_bytes") != len(data):
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
