"""The one read path for files a user names: regular files only (or ``-``), a size cap per kind, bounded gunzip.

Every file a user points placetune at is read here (study files, device profiles, placement
and plan JSON, ONNX models and their external data, calibration caches, built engines):

* only a **regular file** is read (a symlink to one is fine); a FIFO, a device (``/dev/zero``),
  a socket or a directory is refused at once, with a message that says what it is. A FIFO is
  never opened in blocking mode (``open`` of a FIFO without a writer would wait forever), and
  the type is checked before ``open`` (a device may act on ``open``) and again on the open
  descriptor (the name may have changed in between);
* ``-`` reads standard input, where the caller allows it (``stdin=True``);
* each kind has a **size cap** (:data:`LIMITS`): a file larger than its kind can be is refused
  before it is read, and a file that grows while it is read is cut off at the cap;
* a gzip stream (``.onnx.gz``) is decompressed in chunks and refused as soon as its output
  passes the model cap: a small file cannot expand to fill the memory.

Errors are the caller's error class (``ConfigError`` for settings files, ``ModelError`` for
models...) with one line that names the file (secrets masked: a database URL given where a
file is expected is not echoed with its password).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import stat
import sys
import zlib
from pathlib import Path
from typing import IO, Any

from placetune.errors import ConfigError, PlacetuneError
from placetune.safetext import shown

__all__ = ["LIMITS", "DEFAULT_LIMIT", "open_regular", "read_bytes", "read_text", "read_gzip", "check_regular",
           "file_kind", "os_reason"]

_MiB = 1 << 20
#: The largest file of each kind placetune reads (bytes); :data:`DEFAULT_LIMIT` for other kinds.
#: ``model`` is protobuf's own limit: no ONNX model with its weights inline can be larger; it
#: also bounds what a ``.onnx.gz`` may decompress to.
LIMITS: dict[str, int] = {
    "study file": 1 * _MiB,
    "device profile": 16 * _MiB,
    "placement": 16 * _MiB,
    "placement file": 16 * _MiB,
    "plan file": 256 * _MiB,
    "model": 2**31 - 1,
    "calibration cache": 256 * _MiB,
    "engine": 4 << 30,
}
#: The cap of a kind :data:`LIMITS` does not list.
DEFAULT_LIMIT = 64 * _MiB
_CHUNK = 4 * _MiB


def _limit(what: str, limit: int | None) -> int:
    return int(limit if limit is not None else LIMITS.get(what, DEFAULT_LIMIT))


_KINDS = ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode: int) -> str:
    """What a file of ``st_mode`` is, in words (``a named pipe (FIFO)``, ``a directory``...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


def os_reason(exc: BaseException) -> str:
    """Why an operation on a file failed, for a one-line error: the OS error's own words
    (``strerror``, without the path it already names) or the exception's text, at most 200 characters."""
    return str(getattr(exc, "strerror", None) or exc)[:200]


def _refuse(error: type[PlacetuneError], what: str, path: Any, why: str) -> PlacetuneError:
    return error(f"cannot read {what} {shown(path)}: {why}")


def _not_regular(error: type[PlacetuneError], what: str, path: Any, mode: int, stdin: bool) -> PlacetuneError:
    alt = " (or - for standard input)" if stdin else ""
    return _refuse(error, what, path, f"it is {file_kind(mode)}, not a regular file; give a regular file{alt}")


def _regular(p: str, what: str, error: type[PlacetuneError], stdin: bool, limit: int | None,
             st: os.stat_result | None = None) -> os.stat_result:
    """``stat`` of ``p`` (or the given one), refused unless a regular file within the cap of ``what``."""
    if st is None:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            raise _refuse(error, what, p, "it does not exist (no such file)") from None
        except (OSError, ValueError) as exc:
            raise _refuse(error, what, p, os_reason(exc)) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(error, what, p, st.st_mode, stdin)
    cap = _limit(what, limit)
    if st.st_size > cap:
        raise _refuse(error, what, p, f"it is {st.st_size:,} bytes, more than a {what} may be ({cap:,})")
    return st


def check_regular(path: str | os.PathLike[str], what: str, *, error: type[PlacetuneError] = ConfigError,
                  limit: int | None = None) -> Path:
    """Check that ``path`` names a regular file within the cap of ``what`` (symlinks followed), without opening it.

    For a file another program reads (a calibration cache TensorRT reads, an engine). Returns the path.

    Raises:
        error: missing, not a regular file, or over the cap.
    """
    p = os.fspath(path)
    _regular(p, what, error, False, limit)
    return Path(p)


def open_regular(path: str | os.PathLike[str], what: str, *, error: type[PlacetuneError] = ConfigError,
                 limit: int | None = None, stdin: bool = False) -> IO[bytes]:
    """Open a regular file for reading (binary), refusing anything else without blocking.

    The type is checked with ``stat`` before ``open`` and with ``fstat`` after it; the open
    uses ``O_NONBLOCK`` (a FIFO swapped in between cannot block it) and ``O_NOCTTY``.

    Raises:
        error: missing, unreadable, not a regular file, or larger than the cap of ``what``.
    """
    p = os.fspath(path)
    _regular(p, what, error, stdin, limit)  # before open: a device may act on open, a FIFO would block it
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as exc:
        raise _refuse(error, what, p, os_reason(exc)) from None
    try:
        _regular(p, what, error, stdin, limit, os.fstat(fd))  # and after: the name may have changed meanwhile
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _read_capped(fh: IO[bytes], what: str, path: Any, cap: int, error: type[PlacetuneError],
                 over: str = "it is") -> bytes:
    """At most ``cap`` bytes of ``fh``, read in chunks; refused as soon as there are more."""
    chunks, total = [], 0
    while True:
        chunk = fh.read(min(_CHUNK, cap + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > cap:
            raise _refuse(error, what, path, f"{over} more than a {what} may be ({cap:,} bytes)")


def read_bytes(path: str | os.PathLike[str], what: str, *, error: type[PlacetuneError] = ConfigError,
               stdin: bool = False, limit: int | None = None) -> bytes:
    """The bytes of a regular file (or of standard input for ``-`` when ``stdin``), at most the cap of ``what``.

    Raises:
        error: see :func:`open_regular`; also a read error or a file that grew past the cap.
    """
    cap = _limit(what, limit)
    if stdin and os.fspath(path) == "-":
        try:
            return _read_capped(sys.stdin.buffer, what, "-", cap, error)
        except (OSError, ValueError, AttributeError) as exc:
            raise _refuse(error, what, "-", os_reason(exc)) from None
    with open_regular(path, what, error=error, limit=cap, stdin=stdin) as fh:
        try:
            return _read_capped(fh, what, path, cap, error)
        except OSError as exc:
            raise _refuse(error, what, path, os_reason(exc)) from None


def read_text(path: str | os.PathLike[str], what: str, *, error: type[PlacetuneError] = ConfigError,
              stdin: bool = False, limit: int | None = None) -> str:
    """:func:`read_bytes` decoded as UTF-8.

    Raises:
        error: see :func:`read_bytes`; also text that is not UTF-8 (the message gives the byte).
    """
    data = read_bytes(path, what, error=error, stdin=stdin, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {shown(path)} is not UTF-8 text (byte {exc.start})") from None


def read_gzip(path: str | os.PathLike[str], what: str = "model", *, error: type[PlacetuneError] = ConfigError,
              limit: int | None = None) -> bytes:
    """The decompressed content of a gzip file, refused as soon as it passes the cap of ``what``.

    Raises:
        error: see :func:`open_regular`; a corrupt or truncated gzip stream; output over the cap.
    """
    cap = _limit(what, limit)
    with open_regular(path, what, error=error, limit=cap) as raw:
        try:
            with gzip.GzipFile(fileobj=raw, mode="rb") as fh:
                return _read_capped(fh, what, path, cap, error, over="it decompresses to")
        except PlacetuneError:
            raise
        except (OSError, EOFError, zlib.error, gzip.BadGzipFile) as exc:
            raise _refuse(error, what, path, f"not a valid gzip stream ({os_reason(exc)})") from None


_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes; remembered in this process per path, inode, size and modification
    and change times (the change time no program sets: any write or rename moves it)."""
    p = Path(path)
    st = p.stat()
    memo = (str(p.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    found = _DIGESTS.get(memo)
    if found is None:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        found = _DIGESTS[memo] = h.hexdigest()
        if len(_DIGESTS) > 256:
            _DIGESTS.pop(next(iter(_DIGESTS)))
    return found
