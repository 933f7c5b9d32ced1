"""What the command line prints goes through here: secrets masked, names escaped for the terminal.

:func:`safe_output` wraps ``sys.stdout`` and ``sys.stderr`` for the duration of one command in
:class:`SafeStream`, so every message (tables, progress lines, summaries, errors, log lines)
passes :func:`~placetune.safetext.mask_secrets` and :func:`~placetune.safetext.terminal_safe`:
a study named ``"\\x1b]0;pwned\\x07"`` or a layer name with a bidi override is shown as escapes,
and a database password given in any URL form never reaches the screen or a log file.

Data a command writes on purpose (``placetune export`` without ``-o``: the plan JSON or the
trtexec script) goes through :func:`write_data`, byte for byte: JSON escapes its own control
characters, and a script must carry layer names exactly.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import IO, Any

from placetune.safetext import mask_secrets, terminal_safe

__all__ = ["SafeStream", "safe_output", "write_data"]


class SafeStream(io.TextIOBase):
    """A text stream that masks secrets and escapes terminal controls before writing to ``raw``.

    A carriage return that starts a write is kept (a progress bar redrawing its own line); any
    other control character is escaped.
    """

    def __init__(self, raw: IO[str]) -> None:
        super().__init__()
        self.raw = raw

    def write(self, s: str) -> int:  # type: ignore[override]
        text = str(s)
        lead = ""
        if text.startswith("\r"):
            lead, text = "\r", text[1:]
        out = lead + terminal_safe(mask_secrets(text))
        try:
            self.raw.write(out)
        except UnicodeEncodeError:  # a terminal that is not UTF-8
            enc = getattr(self.raw, "encoding", None) or "ascii"
            self.raw.write(out.encode(enc, "backslashreplace").decode(enc, "replace"))
        return len(s)

    def flush(self) -> None:
        self.raw.flush()

    def isatty(self) -> bool:
        return bool(getattr(self.raw, "isatty", lambda: False)())

    def fileno(self) -> int:
        return self.raw.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", None) or "utf-8"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


@contextlib.contextmanager
def safe_output() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` wrapped in :class:`SafeStream` (restored afterwards)."""
    old_out, old_err = sys.stdout, sys.stderr
    sys.stdout = SafeStream(old_out) if not isinstance(old_out, SafeStream) else old_out  # type: ignore[assignment]
    sys.stderr = SafeStream(old_err) if not isinstance(old_err, SafeStream) else old_err  # type: ignore[assignment]
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = old_out, old_err


def write_data(text: str) -> None:
    """Write a command's data output (a plan, a script) to standard output unchanged."""
    out = sys.stdout
    raw = out.raw if isinstance(out, SafeStream) else out
    raw.write(text)
    raw.flush()
