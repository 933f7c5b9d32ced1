"""The one write path for user-visible files: atomic replace of regular files, write-through of everything else.

Every file placetune writes for a user (``-o``, ``--export``, plan folders, reports, device
profiles, merged models) goes through :func:`write_file`. What it does depends on what the
path names *now* (``lstat``, links not followed):

* nothing: a new file, written to a temporary file in the same folder, flushed to disk and
  then linked into place, so that a file that appeared meanwhile is never replaced;
* a **regular file**: replaced **atomically** (temporary file, ``fsync``, ``rename``): a crash
  leaves the old file or the new one, never a mix; its permissions (and, as root, its owner)
  are kept;
* a **symbolic link** to a regular file: the link stays a link and the file it leads to is
  replaced atomically in its own folder (temporary file there, then ``rename``): a failed or
  interrupted write (a full disk) leaves that file as it was, never truncated;
* a **character device** or a **FIFO** (``/dev/null``, ``/dev/stdout``, ``/dev/tty``, or a link
  to one): **written through**, never replaced: the device node or the pipe stays what it was. A path that is this process's standard output or error
  (``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/2``...) is written to that stream. A FIFO
  that no process reads is refused at once instead of blocking;
* a directory, a block device (a disk), a socket or a link that points nowhere: refused.

A caller that chose the file name itself (not the user) passes ``owned``: an existing file
is then overwritten only when ``owned(path)`` says placetune wrote it (a default
``<study>.plan.json`` never replaces a user's file of that name). A file the user names (``-o``,
``--export``) follows the same rule, with :func:`user_output` as ``owned``: a command replaces its own
earlier output, an empty file, a device or a pipe, and any other file only with ``--force``
(:func:`force_hint` says so in the refusal). :func:`check_output` makes
the same decisions without writing: call it before a long run so that a bad ``--export`` is
refused before the measurements, not after.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Iterable, Union

from placetune.errors import ConfigError, PlacetuneError
from placetune.files.read import file_kind, os_reason
from placetune.safetext import shown

__all__ = ["check_output", "force_hint", "read_head", "refuse_inputs", "user_output", "write_file", "Data"]

#: What :func:`write_file` writes: bytes, text (UTF-8) or a function that writes into a binary file.
Data = Union[bytes, bytearray, memoryview, str, Callable[[IO[bytes]], None]]


@dataclass(frozen=True)
class _Target:
    """How a path is written: ``new``, ``replace`` (a regular file), ``through`` (link, device, FIFO) or ``stream``."""

    how: str
    path: Path
    st: os.stat_result | None = None
    fd: int | None = None  # ``stream``: the standard stream's descriptor


def _std_fd(st: os.stat_result) -> int | None:
    """1 or 2 when ``st`` is the file this process's stdout / stderr writes to."""
    for fd in (1, 2):
        try:
            own = os.fstat(fd)
        except OSError:
            continue
        if (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino):
            return fd
    return None


def _classify(path: Path, what: str, error: type[PlacetuneError], owned: Callable[[Path], bool] | None,
              hint: str) -> _Target:
    where = shown(path)
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        parent = path.parent
        try:
            pst = os.stat(parent)
        except FileNotFoundError:
            raise error(f"cannot write {what} {where}: the folder {shown(parent)} does not exist") from None
        except (OSError, ValueError) as exc:
            raise error(f"cannot write {what} {where}: {os_reason(exc)}") from None
        if not stat.S_ISDIR(pst.st_mode):
            raise error(f"cannot write {what} {where}: {shown(parent)} is {file_kind(pst.st_mode)}, not a folder")
        return _Target("new", path)
    except (OSError, ValueError) as exc:
        raise error(f"cannot write {what} {where}: {os_reason(exc)}") from None
    mode = lst.st_mode
    if stat.S_ISDIR(mode):
        raise error(f"cannot write {what} {where}: it is a directory; give a file name")
    _check_owned(path, what, error, owned, hint)  # a name placetune chose: only over its own file
    if stat.S_ISREG(mode):
        fd = _std_fd(lst)
        if fd is not None:
            return _Target("stream", path, lst, fd)
        return _Target("replace", path, lst)
    st = lst
    if stat.S_ISLNK(mode):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise error(f"cannot write {what} {where}: it is a symbolic link to nothing "
                        f"({shown(os.readlink(path))}); refusing to create a file through a link") from None
        except (OSError, ValueError) as exc:
            raise error(f"cannot write {what} {where}: {os_reason(exc)}") from None
    kind = st.st_mode
    fd = _std_fd(st)
    if fd is not None:
        return _Target("stream", path, st, fd)
    if stat.S_ISLNK(mode) and stat.S_ISREG(kind):  # the link's regular file: replaced in its own folder
        try:
            real = Path(os.path.realpath(path, strict=True))
            again = os.lstat(real)
        except (OSError, ValueError) as exc:
            raise error(f"cannot write {what} {where}: {os_reason(exc)}") from None
        if stat.S_ISREG(again.st_mode) and (again.st_dev, again.st_ino) == (st.st_dev, st.st_ino):
            return _Target("replace", real, again)
    if stat.S_ISDIR(kind):
        raise error(f"cannot write {what} {where}: it leads to a directory; give a file name")
    if stat.S_ISBLK(kind) or stat.S_ISSOCK(kind) or not (stat.S_ISREG(kind) or stat.S_ISCHR(kind)
                                                         or stat.S_ISFIFO(kind)):
        raise error(f"cannot write {what} {where}: it is {file_kind(kind)}; placetune writes regular files, "
                    "character devices and named pipes only")
    return _Target("through", path, st)


def _check_owned(path: Path, what: str, error: type[PlacetuneError], owned: Callable[[Path], bool] | None,
                 hint: str) -> None:
    if owned is None:
        return
    try:
        mine = bool(owned(path))
    except Exception:  # noqa: BLE001 - an unreadable or odd file is not one placetune wrote
        mine = False
    if not mine:
        raise error(f"{what} {shown(path)} exists and is not a file placetune wrote: refusing to overwrite it"
                    + (f"; {hint}" if hint else "; move it away or choose another name"))


def read_head(path: str | os.PathLike[str], size: int = 4096) -> bytes:
    """The first ``size`` bytes of the file ``path`` (raises OSError as ``open`` does)."""
    with open(path, "rb") as f:
        return f.read(size)


def user_output(force: bool, *written_by: Callable[[Path], bool]) -> Callable[[Path], bool] | None:
    """The ``owned`` test of a file the user named: None with ``--force`` (anything is replaced), else
    a test that lets through the command's own earlier output (any of ``written_by``, each a test of
    an existing regular file), an empty file (whitespace only) and what is not a regular file (a device
    or a pipe is written through; a directory or a dangling link is refused by the write itself)."""
    if force:
        return None

    def owned(path: Path) -> bool:
        try:
            st = os.stat(path)
            if not stat.S_ISREG(st.st_mode):
                return True
            head = read_head(path)
        except FileNotFoundError:  # a dangling link: refused as such by the write
            return True
        except (OSError, ValueError):  # unreadable: not known to be placetune's
            return False
        if not head.strip() and st.st_size <= len(head):
            return True
        return any(test(path) for test in written_by)

    return owned


def force_hint(option: str) -> str:
    """What a refusal of a user-named file that is not placetune's tells the user to do."""
    return f"pass --force to replace it, or choose another {option} name"


def check_output(path: str | os.PathLike[str], what: str, *, error: type[PlacetuneError] = ConfigError,
                 owned: Callable[[Path], bool] | None = None, hint: str = "") -> Path:
    """Refuse now what :func:`write_file` would refuse later (nothing is written).

    A FIFO is not probed here (whether it has a reader is known only when it is written).

    Raises:
        error: see :func:`write_file`.
    """
    p = Path(os.fspath(path))
    _classify(p, what, error, owned, hint)
    return p


def refuse_inputs(path: str | os.PathLike[str], option: str,
                  inputs: Iterable[tuple[str, str | os.PathLike[str] | None]], *,
                  error: type[PlacetuneError] = ConfigError) -> None:
    """Refuse an output ``path`` that is one of the command's own inputs (the same file, also through a
    link): ``export --storage p.db -o p.db`` would replace the database by the plan, ``trace plan.json -o
    plan.json`` the plan by its trace. ``inputs`` are (what the input is, its path or None) pairs.

    Raises:
        error: ``path`` is the file of one of ``inputs``; the message names ``option`` and the input.
    """
    for what, source in inputs:
        if source is None or not os.fspath(source):
            continue
        try:
            same = os.path.samefile(path, source)
        except (OSError, ValueError):  # one does not exist yet (a new database): the same name is the same file
            try:
                same = os.path.realpath(path) == os.path.realpath(source)
            except (OSError, ValueError):
                same = False
        if same:
            raise error(f"{option} {shown(path)}: it is {what} this command reads; give another file name")


def _emit(fh: IO[bytes], data: Data) -> None:
    if callable(data):
        data(fh)
    else:
        fh.write(data.encode("utf-8") if isinstance(data, str) else bytes(data))
    fh.flush()


def _atomic(target: _Target, data: Data, executable: bool) -> None:
    path = target.path
    folder = path.parent
    tmp = folder / f".{path.name[:200]}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                 0o777 if executable else 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            _emit(fh, data)
            if target.st is not None:  # keep the replaced file's permissions (and, as root, its owner)
                mode = stat.S_IMODE(target.st.st_mode)
                os.fchmod(fh.fileno(), mode | ((mode & 0o444) >> 2 if executable else 0))
                if os.geteuid() == 0:
                    try:
                        os.fchown(fh.fileno(), target.st.st_uid, target.st.st_gid)
                    except OSError:
                        pass
            os.fsync(fh.fileno())
        if target.how == "new":
            try:
                os.link(tmp, path)  # never over a file that appeared meanwhile
            except OSError as exc:
                if exc.errno == errno.EEXIST:
                    raise
                os.replace(tmp, path)  # a file system without hard links
        else:
            os.replace(tmp, path)
        try:
            dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        except OSError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _through(target: _Target, data: Data, what: str, error: type[PlacetuneError]) -> None:
    kind = target.st.st_mode if target.st is not None else 0
    flags = os.O_WRONLY | os.O_NOCTTY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if stat.S_ISREG(kind):
        flags |= os.O_TRUNC
    try:
        fd = os.open(target.path, flags)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(kind):
            raise error(f"cannot write {what} {shown(target.path)}: it is a named pipe (FIFO) that no process "
                        "reads; start the reader first") from None
        raise error(f"cannot write {what} {shown(target.path)}: {os_reason(exc)}") from None
    try:
        st = os.fstat(fd)
        if (st.st_mode & 0o170000) != (kind & 0o170000):
            raise error(f"cannot write {what} {shown(target.path)}: it changed while being opened")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb", closefd=False) as fh:
            _emit(fh, data)
    finally:
        os.close(fd)


def _stream(target: _Target, data: Data) -> None:
    py = sys.stdout if target.fd == 1 else sys.stderr
    try:
        py.flush()
    except (OSError, ValueError):
        pass
    with os.fdopen(os.dup(target.fd or 1), "wb") as fh:
        _emit(fh, data)


def write_file(path: str | os.PathLike[str], data: Data, what: str, *, error: type[PlacetuneError] = ConfigError,
               owned: Callable[[Path], bool] | None = None, hint: str = "", executable: bool = False,
               parents: bool = False) -> Path:
    """Write ``data`` to ``path`` as the module docstring says (atomic replace, or write-through).

    Args:
        path: the file.
        data: bytes, text (written as UTF-8) or a function that writes into a binary file.
        what: what the file is, for messages (``plan file``, ``trtexec build script``).
        error: the error class raised.
        owned: for a name placetune chose itself: whether an existing file is one placetune
            wrote (only then is it overwritten). None: the user named the file; it is replaced.
        hint: what to do, appended to a refusal of a file that is not placetune's.
        executable: a new file gets execute permission (``build.sh``).
        parents: create missing parent folders.

    Returns:
        The path.

    Raises:
        error: the path is a directory, a block device, a socket, a dangling link, a FIFO
            nobody reads, a file placetune does not own (with ``owned``), or cannot be written.
    """
    p = Path(os.fspath(path))
    if parents:
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise error(f"cannot write {what} {shown(p)}: {os_reason(exc)}") from None
    for attempt in range(3):
        target = _classify(p, what, error, owned, hint)
        try:
            if target.how == "stream":
                _stream(target, data)
            elif target.how == "through":
                _through(target, data, what, error)
            else:
                _atomic(target, data, executable)
            return p
        except PlacetuneError:
            raise
        except FileExistsError:
            if attempt == 2:
                raise error(f"cannot write {what} {shown(p)}: another process keeps creating it") from None
        except BrokenPipeError:
            raise error(f"cannot write {what} {shown(p)}: the reader of the pipe went away") from None
        except (OSError, ValueError) as exc:
            raise error(f"cannot write {what} {shown(p)}: {os_reason(exc)}") from None
    raise AssertionError("unreachable")  # pragma: no cover
