"""Database URLs of the store: a path or URL made a SQLAlchemy URL, and printed without its password."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from placetune.errors import StoreError

__all__ = ["mask_url", "normalise_url"]

#: ``scheme://user:`` then everything up to the *last* ``@``: SQLAlchemy accepts passwords with
#: ``/``, ``@``, ``#``, ``?``, ``:`` and spaces, raw or percent-encoded, so the password's end is
#: the last ``@`` (masking a little too much is safe; a leaked password is not: issue 18 item 1).
_PASSWORD_IN_URL = re.compile(r"(?P<head>://[^/@:?#\s]*:)(?P<pw>.*)(?P<at>@)", re.DOTALL)
_PASSWORD_IN_QUERY = re.compile(r"(?P<head>[?&](?:password|passwd|pwd|pass)=)(?P<pw>[^&#\s]*)", re.IGNORECASE)


def mask_url(url: str | URL | os.PathLike[str] | None) -> str:
    """A database URL safe to print: the password (in the netloc or the query) becomes ``***``.

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
    text = _PASSWORD_IN_URL.sub(lambda m: m["head"] + "***" + m["at"], text)
    return _PASSWORD_IN_QUERY.sub(lambda m: m["head"] + "***", text)


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
    if "://" not in text:
        return make_url("sqlite:///" + str(Path(text).expanduser().absolute()))
    try:
        return make_url(text)
    except (ArgumentError, ValueError) as exc:
        raise StoreError(
            f"malformed database URL {mask_url(text)!r} ({exc.__class__.__name__}): expected e.g. "
            "sqlite:///path/to/placetune.db or postgresql+psycopg://user:password@host:5432/dbname"
        ) from None
