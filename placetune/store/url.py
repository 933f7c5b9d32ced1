"""Database URLs of the store: a path or URL made a SQLAlchemy URL, and printed without its password.

:func:`mask_url` masks every form a secret takes in a SQLAlchemy URL: the password of the
userinfo (raw, percent-encoded, with ``@``/``/``/``#`` in it), any query key that names a
password, passphrase, secret, token or key (``?password=``, ``?sslpassword=``), and the
contents of ``odbc_connect`` (whose ``PWD=`` holds one); see :func:`placetune.safetext.mask_secrets`,
which the command line also applies to everything it prints (a URL given where a file name is
expected is masked too).
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from placetune.errors import StoreError
from placetune.safetext import mask_secrets, shown
from placetune.files.read import file_kind

__all__ = ["URL_PARTS", "mask_url", "normalise_url", "sqlite_file", "sqlite_uri_path", "url_secrets"]

#: How a message names a PostgreSQL URL's parts (in words: an example URL with a made-up password
#: would read as a secret).
URL_PARTS = "its user, password, host, port and database name written as in docs/fleet.md"

def mask_url(url: str | URL | os.PathLike[str] | None) -> str:
    """A database URL safe to print: every password and secret (netloc, query, ODBC string) becomes ``***``.

    Works on malformed URLs too (it never raises).

    Example:
        >>> mask_url("postgresql+psycopg://tuner:s3cret@jetson-db:5432/placetune")
        'postgresql+psycopg://tuner:***@jetson-db:5432/placetune'
        >>> mask_url("sqlite:///runs/placetune.db")
        'sqlite:///runs/placetune.db'
    """
    if url is None:
        return ""
    if isinstance(url, URL):
        text = url.render_as_string(hide_password=True)
    else:
        text = os.fspath(url) if isinstance(url, os.PathLike) else str(url)
    return mask_secrets(text)


_SECRET_QUERY_KEY = re.compile(r"pass|pwd|secret|token|key|credential|auth|odbc_connect", re.IGNORECASE)
_ODBC_PWD = re.compile(r"(?:pwd|password)\s*=\s*(\{[^}]*\}?|[^;]*)", re.IGNORECASE)


def url_secrets(url: URL) -> list[str]:
    """The secrets a URL carries (its password, every secret query value, an ODBC string's ``PWD``),
    longest first: text a driver's error message may echo, to be replaced by ``***``."""
    out: list[str] = []
    if isinstance(url.password, str) and url.password:
        out.append(url.password)
    for key, value in url.query.items():
        if _SECRET_QUERY_KEY.search(key):
            values = value if isinstance(value, tuple) else (value,)
            for v in values:
                out.append(str(v))
                out += [m.group(1).strip("{}") for m in _ODBC_PWD.finditer(str(v))]
    return sorted({s for s in out if len(s) >= 3}, key=len, reverse=True)


#: ``user:PASSWORD@host[:port][/database]`` with its ``postgresql://`` left out. Read as a path it would be a
#: SQLite file named after the password and echoed in the error naming its directory; the password may hold
#: spaces and '@' (the host starts after the last '@'), which the masking of free text cannot know.
_SCHEMELESS_URL = re.compile(r"(?P<user>[A-Za-z0-9._%+\-]+):(?P<pw>.*)@(?P<host>[A-Za-z0-9\[][^/@\s]*)(?P<rest>/[^@]*)?",
                             re.DOTALL)


def normalise_url(url: str | URL | os.PathLike[str] | None) -> URL:
    """The SQLAlchemy URL of a :class:`~placetune.store.store.Store` argument (see its ``url``)."""
    if url is None:
        return make_url("sqlite:///" + str(Path.cwd() / "placetune.db"))
    if isinstance(url, URL):
        return url
    text = os.fspath(url) if isinstance(url, os.PathLike) else url
    if not isinstance(text, str) or not text.strip():
        raise StoreError(f"database URL {mask_url(str(text))!r} is empty or not text: give a file path or a URL")
    text = text.strip()
    if text == ":memory:":
        return make_url("sqlite://")
    if "://" not in text and (m := _SCHEMELESS_URL.fullmatch(text)):
        raise StoreError(
            f"database URL {shown(m['user'], 60)}:***@{shown(m['host'] + (m['rest'] or ''), 120)} has no scheme: "
            f"give postgresql+psycopg://{shown(m['user'], 60)}:PASSWORD@... ({URL_PARTS}); a SQLite file whose "
            f"name holds ':' and '@' is given as ./NAME")
    if "://" not in text:  # a path: every character of it is the file's name (``?`` and ``#`` too)
        _refuse_directory_name(text)  # (Path() drops a trailing '/')
        return _regular_sqlite(URL.create("sqlite", database=str(Path(text).expanduser().absolute())))
    try:
        url = make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(
            f"malformed database URL {mask_url(text)!r} ({exc.__class__.__name__}): expected e.g. "
            f"sqlite:///path/to/placetune.db or a postgresql+psycopg URL ({URL_PARTS})"
        ) from None
    _check_sqlite_query(text, url)
    _refuse_nul(text, url)
    return _regular_sqlite(url)


def _refuse_nul(text: str, url: URL) -> None:
    """Refuse a URL whose parts hold a NUL (``%00``): libpq reads its connection string up to the first NUL,
    so ``postgresql+psycopg://u:pw@host:1/d%00b`` connected with the parts before it only (port 5432, no
    password): another server or account than the one named."""
    parts: list[tuple[str, object]] = [("user name", url.username), ("password", url.password),
                                       ("host", url.host), ("database name", url.database)]
    for values in url.query.values():
        parts += [("query value", v) for v in (values if isinstance(values, tuple) else (values,))]
    parts += [("query key", k) for k in url.query]
    for part, item in parts:
        if item is not None and "\x00" in str(item):
            raise StoreError(f"database URL {mask_url(text)!r}: its {part} holds a NUL character (%00), where the "
                             f"database driver would cut the connection string short; give the URL without it "
                             f"({URL_PARTS})")


def sqlite_file(url: str | URL | os.PathLike[str] | None) -> str | None:
    """The file of a SQLite database (a path or a ``sqlite:///`` URL); None for another database, an
    in-memory one or a URL the store would refuse (it says why itself)."""
    try:
        u = normalise_url(url)
    except StoreError:
        return None
    if u.get_backend_name() != "sqlite":
        return None
    db = u.database or ""
    if db.startswith("file:"):
        try:
            db = sqlite_uri_path(db, u.query) or ""
        except StoreError:
            return None
    return db if db and db != ":memory:" else None


def sqlite_uri_path(database: str, query: Mapping[str, Any] | None = None) -> str | None:
    """The file named by a SQLite URI (``file:...``, ``sqlite:///file:...?...&uri=true``): its path without the
    query and fragment, percent-decoded, from ``file:path``, ``file:/path`` or ``file:///path`` (an empty or
    ``localhost`` authority); None for an in-memory database (``file::memory:``, ``mode=memory``) or SQLite's
    temporary one (no path). A URI whose file cannot be told (another host's authority, a NUL) is refused
    in one line: the store cannot check what SQLite would open."""
    rest = database[5:] if database.startswith("file:") else database
    rest = rest.split("#", 1)[0]
    rest, _, params = rest.partition("?")
    options = dict(query or {})
    for part in params.split("&"):
        key, _, value = part.partition("=")
        options.setdefault(key, value)
    if str(options.get("mode", "")).lower() == "memory":
        return None
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        if authority not in ("", "localhost"):
            raise StoreError(f"SQLite URI {shown(database)} names the host {shown(authority)}, whose file cannot be "
                             "checked or opened here: give file:/path/to/placetune.db or the plain path")
        rest = slash + path
    path = unquote(rest)
    if "\x00" in path:
        raise StoreError(f"SQLite URI {shown(database)} holds a NUL character (%00), where SQLite would cut the file "
                         "name short: give the path without it")
    return path if path and path != ":memory:" else None


#: The options SQLAlchemy's SQLite driver (pysqlite) takes after a URL's ``?``; with ``uri=true``
#: any key=value goes to SQLite as a URI parameter.
SQLITE_URL_OPTIONS = ("timeout", "isolation_level", "detect_types", "check_same_thread", "cached_statements", "uri")


def _check_sqlite_query(text: str, url: URL) -> None:
    """Refuse a SQLite URL whose ``?`` part is not the driver's key=value options: SQLAlchemy
    drops a part without ``=`` and ignores an unknown key, so ``sqlite:///runs/a?b.db`` would
    open (and create) ``runs/a``, a file of another name than the one meant."""
    if url.get_backend_name() != "sqlite" or url.get_driver_name() != "pysqlite" or "?" not in text:
        return
    uri = str(url.query.get("uri", "")).lower() in ("true", "1", "yes", "on")
    for part in text.partition("?")[2].split("&"):
        key, eq, _ = part.partition("=")
        if part and (not eq or (key not in SQLITE_URL_OPTIONS and not uri)):
            raise StoreError(
                f"SQLite URL {mask_url(text)!r} would open {url.database!r}: after '?' a URL takes the driver's "
                f"key=value options ({', '.join(SQLITE_URL_OPTIONS)}), and {mask_secrets('?' + part)[1:41]!r} is not "
                f"one; write a '?' "
                f"of a file name as %3F ({mask_url(text).replace('?', '%3F')}) or give the plain path")
        if eq and key in _SQLITE_NUMBERS:  # (with uri=true too: the driver still takes these)
            _check_sqlite_number(text, key, url.query.get(key))
    db = url.database or ""
    params = [k for k in url.query if k not in SQLITE_URL_OPTIONS]
    if uri and params and not db.startswith("file:"):
        # SQLAlchemy appends them to the name (``a.db?mode=rw``), and SQLite reads a URI's parameters only
        # from a name that starts with file: : it opened (and created) a file of that whole name
        names = ", ".join(shown(k, 40) for k in params[:4])
        raise StoreError(
            f"SQLite URL {mask_url(text)!r}: with uri=true SQLite takes URI parameters ({names}) only in a file: URI, "
            f"and would open a file named '{shown(db, 120)}?{shown(params[0], 40)}=...': write "
            f"sqlite:///file:{shown(db, 120)}?{shown(params[0], 40)}=...&uri=true, or leave out uri=true")


#: the SQLite driver's numeric options and their ranges: sqlite3 casts them to a C int (timeout in ms), so a
#: larger one raised OverflowError (a traceback) and a NaN or infinite timeout became an undefined busy timeout
_SQLITE_NUMBERS = {"timeout": (0.0, 2_147_483.0, "a number of seconds from 0 to 2147483"),
                   "cached_statements": (0, 2**31 - 1, "a whole number from 0 to 2147483647"),
                   "detect_types": (0, 3, "0, 1 (PARSE_DECLTYPES), 2 (PARSE_COLNAMES) or 3 (both)")}


def _check_sqlite_number(text: str, key: str, value: object) -> None:
    lo, hi, allowed = _SQLITE_NUMBERS[key]
    if isinstance(value, tuple):  # the key given twice: the driver takes the last
        value = value[-1]
    try:
        number = float(str(value)) if isinstance(lo, float) else int(str(value))
    except (ValueError, OverflowError):
        number = None
    if number is None or not math.isfinite(number) or not lo <= number <= hi:
        raise StoreError(f"SQLite URL {mask_url(text)!r}: {key} must be {allowed}, got {shown(value, 40)}")


def _refuse_directory_name(db: str) -> None:
    """Refuse a SQLite database name that ends with '/': SQLite drops the '/' and creates a file of the
    directory's name (``sqlite:///runs/`` made a database file called ``runs``)."""
    if db.endswith(("/", os.sep)):
        example = db.rstrip("/" + os.sep) or "."
        raise StoreError(f"SQLite database {shown(db)} ends with '/', which names a directory: give a database file "
                         f"(e.g. {shown(example + '/placetune.db')}) or a server URL")


def _missing_directory(db: str) -> str | None:
    """Why a new SQLite database ``db`` cannot be made in its directory (it does not exist, or is not a
    directory), or None."""
    parent = os.path.dirname(db)
    if not parent:
        return None
    try:
        st = os.stat(parent)
    except (FileNotFoundError, NotADirectoryError):
        return (f"SQLite database {shown(db)}: its directory {shown(parent)} does not exist: create it "
                f"(mkdir -p {shown(parent)}) or give a path in an existing directory")
    except (OSError, ValueError):
        return None  # (the store says what it is when it opens it)
    if not stat.S_ISDIR(st.st_mode):
        return (f"SQLite database {shown(db)}: {shown(parent)} is {file_kind(st.st_mode)}, not a directory: give "
                "a path in an existing directory")
    return None


def _regular_sqlite(url: URL) -> URL:
    """``url``, refused when it names a SQLite file that exists and is not a regular file: SQLite on
    a FIFO, a device or a directory fails late with "disk I/O error" and creates its journal
    beside it (``/dev/null-journal``); refused too when it names a directory ('/' at its end) or a new
    file in a directory that does not exist."""
    if url.get_backend_name() != "sqlite":
        return url
    db = url.database or ""
    if db.startswith("file:"):  # a SQLite URI: the same checks on the file it names (percent-decoded)
        db = sqlite_uri_path(db, url.query) or ""
    if not db or db == ":memory:":
        return url
    _refuse_directory_name(db)
    try:
        st = os.stat(db)
    except (FileNotFoundError, NotADirectoryError):
        why = _missing_directory(db)
        if why:
            raise StoreError(why) from None
        return url  # a new database
    except (OSError, ValueError):
        return url  # a name the store reports itself
    if not stat.S_ISREG(st.st_mode):
        raise StoreError(f"SQLite database {shown(db)} is {file_kind(st.st_mode)}, not a regular file: give a "
                         "database file, or a new path for a new database")
    return url
