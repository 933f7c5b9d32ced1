"""The folder guard: a folder placetune fills overwrites only the files placetune wrote there, unchanged since.

A plan folder (``placetune export --format trtexec -o DIR``, ``placetune build``), a report
folder (``placetune report -o DIR``) and a selftest report are written through an
:class:`OutputFolder`. It keeps a record, ``.placetune-files.json`` in the folder, of every file
it wrote and its SHA-256. Before anything is written, :meth:`OutputFolder.check` looks at
**every** file the command would write: each must be absent, or a regular file (not a link,
not a device) that the record lists with the same content. A user's ``build.sh`` next to a
``plan.json``, a file edited since the export, or a link planted in the folder is never
overwritten: the command stops with one line that names the file.

Names are checked by :func:`placetune.files.names.file_name` (one plain component: nothing
leaves the folder) and written by :func:`placetune.files.write.write_file` (atomic replace).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from placetune.errors import ConfigError, PlacetuneError
from placetune.files.names import file_name
from placetune.files.read import file_kind, open_regular
from placetune.files.write import Data, write_file
from placetune.safetext import shown

__all__ = ["MANIFEST", "OutputFolder"]

#: The folder's record of the files placetune wrote into it (name -> SHA-256).
MANIFEST = ".placetune-files.json"
_FORMAT = "placetune-files"


def _digest_fd(fd: int) -> str:
    h = hashlib.sha256()
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return h.hexdigest()
        h.update(chunk)


class OutputFolder:
    """A folder placetune writes files into, refusing to overwrite any file it does not own.

    Args:
        directory: the folder (created with its parents when missing).
        what: what the folder is, for messages (``plan folder``).
        error: the error class raised.
        must_be_ours: refuse a folder that is not empty unless placetune wrote into it before
            (its record exists): a plan folder never scatters files into ``/``, a home or a
            source tree.

    Raises:
        error: the path is not a folder, the record is damaged, or (``must_be_ours``) the folder
            holds other files and no record.
    """

    def __init__(self, directory: str | os.PathLike[str], what: str = "folder", *,
                 error: type[PlacetuneError] = ConfigError, must_be_ours: bool = False) -> None:
        self.directory = Path(os.fspath(directory))
        self.what = what
        self.error = error
        self._records: dict[str, str] = {}
        self._digests: dict[tuple[str, int, int, int], str] = {}
        d = self.directory
        try:
            st = os.stat(d)
        except FileNotFoundError:
            st = None
        except (OSError, ValueError) as exc:
            raise error(f"cannot use {what} {shown(d)}: {getattr(exc, 'strerror', None) or exc}") from None
        if st is not None and not stat.S_ISDIR(st.st_mode):
            kind = "a file" if stat.S_ISREG(st.st_mode) else file_kind(st.st_mode)
            raise error(f"-o {shown(d)}: the {what} needs a directory, and {shown(d)} is {kind}")
        if st is not None:
            self._records = self._read_record()
            if must_be_ours and not self._has_record() and any(True for _ in os.scandir(d)):
                raise error(f"-o {shown(d)}: that directory is not empty and is not a {what} placetune wrote "
                            "(no record of its files); give a new or empty directory")

    # ------------------------------------------------------------------ the record
    def _has_record(self) -> bool:
        return os.path.lexists(self.directory / MANIFEST)

    def _read_record(self) -> dict[str, str]:
        path = self.directory / MANIFEST
        if not os.path.lexists(path):
            return {}
        bad = self.error(f"{shown(path)}: placetune's record of the files of {shown(self.directory)} is damaged or "
                         "not placetune's; give a new or empty directory")
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            raise bad from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > 16 << 20:
                raise bad
            doc = json.loads(os.read(fd, st.st_size + 1) or b"null")
        except (OSError, ValueError, RecursionError):
            raise bad from None
        finally:
            os.close(fd)
        files = doc.get("files") if isinstance(doc, dict) and doc.get("format") == _FORMAT else None
        if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
            raise bad
        return dict(files)

    def _save_record(self) -> None:
        doc = {"format": _FORMAT, "version": 1,
               "note": "files placetune wrote into this folder and their SHA-256: only these are overwritten",
               "files": dict(sorted(self._records.items()))}
        write_file(self.directory / MANIFEST, json.dumps(doc, indent=1) + "\n", f"record of the {self.what}",
                   error=self.error)

    # ------------------------------------------------------------------ checks
    def owns(self, name: str) -> bool:
        """True when ``name`` is a regular file in the folder that placetune wrote, unchanged since."""
        want = self._records.get(name)
        if want is None:
            return False
        try:
            fd = os.open(self.directory / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return False
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return False
            key = (name, st.st_ino, st.st_size, st.st_mtime_ns)  # hashed once per version of the file
            if key not in self._digests:
                self._digests[key] = _digest_fd(fd)
            return self._digests[key] == want
        except OSError:
            return False
        finally:
            os.close(fd)

    def path(self, name: Any) -> Path:
        """``directory / name`` for a name that stays inside the folder (see :func:`~placetune.files.names.file_name`)."""
        return self.directory / file_name(name, f"file name in the {self.what}", error=self.error)

    def check(self, names: Iterable[Any]) -> None:
        """Refuse now if any of ``names`` exists and is not placetune's own, unchanged file.

        Raises:
            error: naming the first such file and what it is.
        """
        for name in names:
            p = self.path(name)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                raise self.error(f"cannot write {shown(p)}: {getattr(exc, 'strerror', None) or exc}") from None
            if self.owns(name):
                continue
            if not stat.S_ISREG(st.st_mode):
                why = f"is {file_kind(st.st_mode)}"
            elif name in self._records:
                why = "was changed since placetune wrote it"
            else:
                why = "was not written by placetune"
            raise self.error(f"{shown(p)} {why}: refusing to overwrite it; move it away or give a new or empty "
                             f"directory")

    # ------------------------------------------------------------------ writing
    def mkdir(self) -> None:
        """Create the folder (with its parents) when missing."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except (OSError, ValueError) as exc:
            raise self.error(f"cannot create the {self.what} {shown(self.directory)}: "
                             f"{getattr(exc, 'strerror', None) or exc}") from None

    def record(self, name: str) -> Path:
        """Record ``name`` as placetune's: a file another function wrote (through
        :func:`~placetune.files.write.write_file`) after :meth:`check` allowed it. Returns its path."""
        p = self.path(name)
        try:
            fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError as exc:
            raise self.error(f"cannot record {shown(p)}: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise self.error(f"cannot record {shown(p)}: it is not a regular file")
            self._records[name] = _digest_fd(fd)
        finally:
            os.close(fd)
        self._save_record()
        return p

    def write(self, name: str, data: Data, *, executable: bool = False) -> Path:
        """Write one file into the folder (atomically), after :meth:`check`; returns its path."""
        self.check([name])
        self.mkdir()
        write_file(self.path(name), data, f"file of the {self.what}", error=self.error, executable=executable,
                   owned=lambda _p: self.owns(name))
        return self.record(name)

    def copy_in(self, name: str, source: str | os.PathLike[str], *, executable: bool = False) -> Path:
        """Copy a file (read through the one read path) into the folder under ``name``."""
        def copy(out: IO[bytes]) -> None:
            with open_regular(source, "file to copy", error=self.error, limit=1 << 42) as fh:
                shutil.copyfileobj(fh, out, 1 << 20)

        return self.write(name, copy, executable=executable)

    def remove(self, name: str) -> None:
        """Remove a file placetune wrote (refused for any other file; nothing to do when absent)."""
        self.remove_all([name])

    def remove_all(self, names: Iterable[str]) -> None:
        """Remove files placetune wrote: every one checked first (refused for any other file; an
        absent one is nothing to do), then removed, then the record written once."""
        names = list(dict.fromkeys(names))
        present = [n for n in names if os.path.lexists(self.path(n))]
        self.check(present)
        for name in names:
            if name in present:
                p = self.path(name)
                try:
                    os.unlink(p)
                except OSError as exc:
                    raise self.error(f"cannot remove {shown(p)}: {exc.strerror or exc}") from None
            self._records.pop(name, None)
        if present:
            self._save_record()
