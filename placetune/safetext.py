"""Text safe to show: secrets masked, and control and bidi characters escaped before a terminal sees them.

Two rules that every message placetune prints goes through (the CLI wraps its output streams
in :class:`placetune.cli.terminal.SafeStream`, which applies both):

* :func:`mask_secrets`: a database password never appears. It masks the password of every
  SQLAlchemy URL form (``scheme://user:password@host``, also when a path join collapsed the
  ``//``: ``scheme:/user:password@host``), the value of every query key that names a password,
  passphrase, secret, token, key or credential (``?password=``, ``?sslpassword=``,
  ``?api_key=``...), ODBC connection strings (``odbc_connect=...``, whose ``PWD=`` holds the
  password) and a bare ``PWD=...``.
* :func:`terminal_safe`: a name from a model, a study or a file cannot drive the terminal.
  Control characters (ESC sequences, carriage returns, backspaces), Unicode format characters
  (bidi overrides and isolates, zero-width characters), line and paragraph separators and
  lone surrogates become visible escapes (``\\x1b``, ``\\u202e``); newlines and tabs stay.

Neither function ever raises: it is used on any text, however malformed.

Example:
    >>> mask_secrets("postgresql+psycopg://tuner:s3cret@db/placetune?sslpassword=k3y&sslmode=require")
    'postgresql+psycopg://tuner:***@db/placetune?sslpassword=***&sslmode=require'
    >>> terminal_safe("study \\x1b[31mred\\u202e")
    'study \\\\x1b[31mred\\\\u202e'
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["mask_secrets", "terminal_safe", "line_safe", "shown"]

#: ``scheme:`` then ``//`` (or ``/`` when ``Path`` collapsed it, or nothing), ``user:`` (which may hold
#: an ``@`` of its own), then the password: SQLAlchemy accepts passwords with ``/``, ``@``, ``#``,
#: ``?``, ``:`` and spaces, raw or percent-encoded. The password runs to the *last* ``@`` of the URL's
#: own run of non-blank characters (so an ``@`` later in the message, ``mail admin@example.com``,
#: is not taken for the URL's); only when that run has no ``@`` (a password with a blank) does it run
#: on, to the first ``@`` of the line whose run of non-blank characters holds no other ``@`` (the host's:
#: ``u:a b@c@host/db`` hides ``a b@c``), and then never from a port (``host:5432/db ... a@b``).
_PASSWORD = r"(?:\S*(?=@)|(?!\d*(?:[/?#\s]|$))[^\n]*?(?=@[^@\s]*(?:\s|$)))"
_USERINFO = re.compile(rf"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*:/{{0,2}}[^/:?#\s'\"]*:)(?P<pw>{_PASSWORD})(?P<at>@)")
#: a URL cut short before its host (a message shows at most so many characters of a value): ``scheme://user:``
#: then the start of the password, running to the end of the text, a quote or a blank with no ``@`` after it;
#: masked whole (never a port: ``db:5432/x``), since what is left of a password is still part of it
_CUT_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*:/{1,2}[^/:?#\s'\"@]*:)"
                           r"(?P<pw>(?!\d*(?:[/?#\s'\"]|\.\.\.|$))[^\s'\"@]+)(?=['\"\s]|$)")
#: ``user:password@host`` without its scheme (a URL whose ``postgresql://`` was left out is read as a SQLite path
#: and echoed as one): at the start of a word or of a path component, the password ends at the ``@`` of the host
_BARE_USERINFO = re.compile(r"(?P<head>(?:^|(?<=[\s/'\"(=]))[A-Za-z0-9._%+\-]+:)(?P<pw>[^\s/@:]+)(?P<at>@)"
                            r"(?=[A-Za-z0-9\[])")
#: A query key that names a secret (``password``, ``sslpassword``, ``passphrase``, ``pwd``,
#: ``secret``, ``token``, ``api_key``, ``credentials``...) and its value.
#: Separators, raw or percent-encoded (SQLAlchemy encodes ``&``, ``=``, ``;`` of a database name it echoes).
_SEP = r"(?:[?&;]|%26|%3[bBfF])"
_EQ = r"(?:=|%3[dD])"
_END = r"(?:(?!%26|%3[bB])[^&#\s])*"
_SECRET_KEY = re.compile(
    rf"(?P<head>{_SEP}(?:[^=&#\s;%]*?(?:pass|pwd|secret|token|key|credential|auth)[^=&#\s;%]*){_EQ})(?P<pw>{_END})",
    re.IGNORECASE)
#: ``odbc_connect=<a whole ODBC connection string>``: masked whole (it holds ``PWD=``).
_ODBC = re.compile(rf"(?P<head>odbc_connect{_EQ})(?P<pw>(?:(?!%26)[^&#\s])*)", re.IGNORECASE)
#: ``PWD=secret;`` / ``Password={se;cret}`` / ``PWD%3Dsecret%3B`` anywhere (an ODBC string echoed alone, or
#: encoded inside a database name: ``...%3BPWD%3Dsecret``, where no word boundary precedes ``PWD``).
_ODBC_PWD = re.compile(rf"(?P<head>(?:pwd|password)\s*{_EQ})(?P<pw>\{{[^}}]*\}}?|(?:(?!%3[bB])[^;&#\s])*)",
                       re.IGNORECASE)

#: Characters a terminal may act on: every character outside printable ASCII is a candidate,
#: decided by :func:`_escape_char` (printable non-ASCII text such as ``é`` stays as it is).
_CANDIDATE = re.compile(r"[^\n\t\x20-\x7e]")
_KEEP_CATEGORIES = ("Zs",)  # a no-break space is harmless


def mask_secrets(text: str) -> str:
    """``text`` with every database password and secret query value replaced by ``***``.

    Example:
        >>> mask_secrets("cannot read study file postgresql+psycopg:/tuner:pw@db/x")
        'cannot read study file postgresql+psycopg:/tuner:***@db/x'
        >>> mask_secrets("mssql+pyodbc://?odbc_connect=DRIVER%3Dx%3BPWD%3Dpw")
        'mssql+pyodbc://?odbc_connect=***'
    """
    try:
        text = str(text)
        if not any(c in text for c in "@=%:"):
            return text
        text = _USERINFO.sub(lambda m: m["head"] + "***" + m["at"], text)
        text = _BARE_USERINFO.sub(lambda m: m["head"] + "***" + m["at"], text)
        text = _CUT_USERINFO.sub(lambda m: m["head"] + "***", text)
        text = _ODBC.sub(lambda m: m["head"] + "***", text)
        text = _SECRET_KEY.sub(lambda m: m["head"] + "***", text)
        return _ODBC_PWD.sub(lambda m: m["head"] + "***", text)
    except Exception:  # noqa: BLE001 - never let masking itself fail: show nothing rather than a secret
        return "<text hidden: it could not be checked for secrets>"


def _escape_char(ch: str) -> str:
    if ch.isprintable() or unicodedata.category(ch) in _KEEP_CATEGORIES:
        return ch
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def terminal_safe(text: str) -> str:
    """``text`` with every character a terminal would act on written as a visible escape.

    Newlines and tabs stay; ESC, carriage return, backspace, DEL, C1 controls, bidi overrides
    and isolates, zero-width and other format characters, line/paragraph separators and lone
    surrogates become ``\\xNN`` / ``\\uNNNN`` / ``\\UNNNNNNNN``.
    """
    text = str(text)
    if text.isascii() and text.isprintable():
        return text
    return _CANDIDATE.sub(lambda m: _escape_char(m.group()), text)


def line_safe(text: str) -> str:
    """:func:`terminal_safe`, with line breaks and tabs escaped too (``\\n``, ``\\t``): a name shown inside a
    line of output (a table cell, a model's name) cannot print a line of its own.

    Example:
        >>> line_safe("m\\nplacetune: ok")
        'm\\\\nplacetune: ok'
    """
    return terminal_safe(text).replace("\n", "\\n").replace("\t", "\\t")


def shown(value: object, limit: int = 200) -> str:
    """A value as a message shows it: secrets masked, escaped for a terminal, at most ``limit`` characters.

    Example:
        >>> shown("x" * 300, limit=10)
        'xxxxxxxxxx... (300 characters)'
    """
    text = mask_secrets(terminal_safe(str(value)))
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"
