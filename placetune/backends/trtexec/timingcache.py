"""trtexec's ``--timingCacheFile`` kept whole across builds that are killed, and set aside when trtexec cannot read it.

trtexec rewrites its timing cache file in place at the end of a build: it reads the file, combines
the build's cache with it and writes it back with an ``std::ofstream`` that truncates the file first
(samples/common/common.h release/8.6:1168 ``updateTimingCacheFile``; samples/utils/timingCache.cpp
release/10.3 alike). A build killed while it writes (a timeout, the kernel's out-of-memory killer, a
power cut) leaves a half-written file, and from then on every build that loads it fails:
``createTimingCache`` returns null and trtexec stops with ``TimingCache creation failed``
(samples/common/sampleEngines.cpp release/8.6:1197, release/10.3 samples/utils/timingCache.cpp:71),
or, when the file goes bad between the load and the save, ``Failed to create timingCache from
<file>!`` (common.h release/8.6:1190; 8.6 lets it escape as ``Uncaught exception detected``, 10.x
logs it and saves nothing). A night of builds would then fail placement after placement.

So trtexec never writes the shared file: each build gets its own copy (:func:`copy_for_build`) in its
run directory, and only a build that passed, whose log says ``Saved N bytes of timing cache to
<its copy>`` of a copy that holds N bytes, replaces the shared file with it (a temporary name in the
same folder, flushed to disk, then renamed: :func:`keep`). When two placetune runs build at once, the
last whole cache is kept (the other's new entries are timed again by a later build): never a
half-written one. The command recorded with a measurement names the shared file (the copy is deleted
with the run directory; :meth:`~placetune.backends.trtexec.engine.Engine.recorded_argv`): the one a
user re-running it by hand needs. A shared file trtexec cannot read (written by an older placetune, or damaged on
disk) is found from the build's log (:func:`unreadable`), renamed aside (:func:`set_aside`, said in
one line) and the build is run once more without it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["copy_for_build", "keep", "unreadable", "set_aside", "UNREADABLE"]

log = logging.getLogger(__name__)

#: trtexec's own lines when it cannot read its --timingCacheFile (sampleEngines.cpp release/8.6:1197 and
#: release/10.3 timingCache.cpp:71; common.h release/8.6:1190 and timingCache.cpp release/10.3:114).
UNREADABLE = ("TimingCache creation failed", "Failed to create timingCache from")
_SAVED = re.compile(r"Saved (\d+) bytes of timing cache to (.+?)\s*$")


class _Locked:
    """``lockf`` on ``<cache>.lock``: the lock trtexec itself takes on that file (samples/common/common.h
    release/8.6 ``FileLock``: ``lockf(fd, F_LOCK, 0)`` on ``fileName + ".lock"``), so a trtexec run by
    hand on the shared cache waits for placetune and the other way round."""

    def __init__(self, cache: Path) -> None:
        self.path = Path(f"{cache}.lock")

    def __enter__(self) -> "_Locked":
        self.fh = open(self.path, "a+b")  # noqa: SIM115
        fcntl.lockf(self.fh.fileno(), fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            fcntl.lockf(self.fh.fileno(), fcntl.LOCK_UN)
        finally:
            self.fh.close()


def copy_for_build(shared: Path, private: Path) -> None:
    """The shared cache copied to the build's own ``private`` file (none: trtexec starts a new cache)."""
    private.unlink(missing_ok=True)
    with _Locked(shared):
        if shared.is_file():
            shutil.copyfile(shared, private)


def keep(lines: Iterable[str], private: Path, shared: Path) -> bool:
    """After a build that passed: its cache made the shared one when its log says trtexec saved it whole
    (``Saved N bytes of timing cache to <private>`` and the file holds N bytes); True when kept."""
    want = None
    for line in lines:
        m = _SAVED.search(line)
        if m and Path(m.group(2)) == private:
            want = int(m.group(1))
    try:
        if want is None or private.stat().st_size != want:
            return False
    except OSError:
        return False
    tmp = shared.with_name(f"{shared.name}.{os.getpid()}.tmp")
    with _Locked(shared):
        try:
            shutil.copyfile(private, tmp)
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            os.replace(tmp, shared)  # whole or not at all, also after a power cut (flushed first)
        finally:
            tmp.unlink(missing_ok=True)
        try:
            fd = os.open(shared.parent, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError:
            pass
    return True


def unreadable(lines: Iterable[str]) -> str | None:
    """trtexec's line saying it could not read its timing cache, None when there is none."""
    return next((line.strip() for line in lines if any(u in line for u in UNREADABLE)), None)


def set_aside(shared: Path, private: Path) -> Path | None:
    """The shared cache renamed ``<name>.unreadable-<time>`` when it still holds what the build was given
    (``private``; another run may have replaced it with a whole one meanwhile); the new name, or None."""
    with _Locked(shared):
        try:
            same = shared.read_bytes() == private.read_bytes()
        except OSError:
            return None
        if not same:
            return None
        aside = shared.with_name(f"{shared.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        os.replace(shared, aside)
    return aside
