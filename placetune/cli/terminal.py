"""What the command line prints goes through here: secrets masked, names escaped for the terminal.

:func:`safe_output` wraps ``sys.stdout`` and ``sys.stderr`` for the duration of one command in
:class:`SafeStream`, so every message (tables, progress lines, summaries, errors, log lines)
passes :func:`~placetune.safetext.mask_secrets` and :func:`~placetune.safetext.terminal_safe`:
a study named ``"\\x1b]0;pwned\\x07"`` or a layer name with a bidi override is shown as escapes,
and a database password given in any URL form never reaches the screen or a log file.

An output that cannot be written (``placetune tune | head`` once ``head`` has gone, ``>
/dev/full``, a closed standard output) is never a traceback: the stream is marked lost, what is
still printed to it is dropped, the hooks registered with :func:`when_output_lost` run (a tune
stops after the evaluation in flight and stores it), and the command exits 6 with one line on
standard error (:func:`output_lost` says why).

Data a command writes on purpose (``placetune export`` without ``-o``: the plan JSON or the
trtexec script) goes through :func:`write_data`, byte for byte: JSON escapes its own control
characters, and a script must carry layer names exactly.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from typing import IO, Any

from placetune.safetext import line_safe, mask_secrets, terminal_safe
from placetune.validate import dumps_json
from placetune.wording import wrap

__all__ = ["SafeStream", "error_line", "output_lost", "safe_output", "say", "when_output_lost", "write_data"]

#: Called (again at every later write) once an output is lost: e.g. a tune's stop request.
_HOOKS: list[Callable[[], None]] = []


def _why(exc: BaseException, name: str) -> str:
    if isinstance(exc, BrokenPipeError) or getattr(exc, "errno", None) == errno.EPIPE:
        return f"the {name} was closed (the program reading it, e.g. `head`, went away)"
    if getattr(exc, "errno", None) == errno.ENOSPC:
        return f"the {name} is full (no space left on device)"
    if isinstance(exc, (ValueError, AttributeError)) or getattr(exc, "errno", None) == errno.EBADF:
        return f"the {name} is closed"
    return f"the {name} cannot be written ({getattr(exc, 'strerror', None) or exc})"


class SafeStream(io.TextIOBase):
    """A text stream that masks secrets and escapes terminal controls before writing to ``raw``.

    A carriage return that starts a write is kept (a progress bar redrawing its own line); any
    other control character is escaped.
    """

    def __init__(self, raw: IO[str] | None, name: str = "standard output") -> None:
        super().__init__()
        self.raw = raw
        self.name = name
        #: why this output cannot be written (None while it can)
        self.lost: str | None = None if raw is not None else f"the {name} is closed"

    def _lose(self, exc: BaseException) -> None:
        """Mark the output lost: its descriptor now writes to /dev/null (nothing buffered fails again at exit).

        Only the command's own streams are marked: a stream kept from an earlier command (a log
        handler's) raises as any closed stream does.
        """
        if self is not sys.stdout and self is not sys.stderr:
            raise exc
        if self.lost is None:
            self.lost = _why(exc, self.name)
            try:
                fd = self.raw.fileno()  # type: ignore[union-attr]
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)
            except (OSError, ValueError, AttributeError):
                pass
        for hook in list(_HOOKS):
            hook()

    def write(self, s: str) -> int:  # type: ignore[override]
        if self.lost is not None or self.raw is None:
            self._lose(ValueError())
            return len(s)
        text = str(s)
        lead = ""
        if text.startswith("\r"):
            lead, text = "\r", text[1:]
        out = lead + terminal_safe(mask_secrets(text))
        try:
            try:
                self.raw.write(out)
            except UnicodeEncodeError:  # a terminal that is not UTF-8
                enc = getattr(self.raw, "encoding", None) or "ascii"
                self.raw.write(out.encode(enc, "backslashreplace").decode(enc, "replace"))
        except (OSError, ValueError) as exc:
            self._lose(exc)
        return len(s)

    def write_unchanged(self, text: str) -> None:
        """Write ``text`` to ``raw`` as it is (a command's data: a plan, a script), then flush; a lost
        output is marked as :meth:`write` marks it."""
        if self.lost is not None or self.raw is None:
            self._lose(ValueError())
            return
        try:
            self.raw.write(text)
            self.raw.flush()
        except (OSError, ValueError) as exc:
            self._lose(exc)

    def flush(self) -> None:
        if self.lost is not None or self.raw is None:
            return
        try:
            self.raw.flush()
        except (OSError, ValueError) as exc:
            self._lose(exc)

    def isatty(self) -> bool:
        return self.lost is None and bool(getattr(self.raw, "isatty", lambda: False)())

    def fileno(self) -> int:
        if self.raw is None:
            raise io.UnsupportedOperation("the stream is closed")
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
    sys.stderr = SafeStream(old_err, "standard error") \
        if not isinstance(old_err, SafeStream) else old_err  # type: ignore[assignment]
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        sys.stdout, sys.stderr = old_out, old_err


def output_lost() -> str | None:
    """Why this command's standard output or error could not be written (None: both could)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, SafeStream) and stream.lost is not None:
            return stream.lost
    return None


@contextlib.contextmanager
def when_output_lost(hook: Callable[[], None]) -> Iterator[None]:
    """Call ``hook`` (at once, and at every later write) once an output is lost, while the body runs."""
    _HOOKS.append(hook)
    try:
        if output_lost() is not None:
            hook()
        yield
    finally:
        _HOOKS.remove(hook)


def write_data(text: str) -> None:
    """Write a command's data output (a plan, a script) to standard output unchanged."""
    out = sys.stdout
    if not isinstance(out, SafeStream):
        out.write(text)
        out.flush()
        return
    out.write_unchanged(text)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str], width: int | None = None) -> str:
    """Rows as aligned columns under ``header`` and a rule, each cell escaped for the terminal and kept on
    its row (a line break or a tab in a layer or study name is shown as ``\\n`` / ``\\t``: a name of the
    model's or the database's choosing cannot print a line of its own).

    With ``width`` (a terminal's), a last column that would run past it is wrapped at word boundaries onto
    lines of its own under that column, so that no line is longer than ``width - 1``."""
    cols = [list(map(str, header))] + [[("" if c is None else line_safe(str(c))) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cols) for i in range(len(header))]
    indent = sum(widths[:-1]) + 2 * (len(widths) - 1)
    room = (width - 1 - indent) if width else 0
    if width and room >= 20 and widths[-1] > room:
        widths[-1] = room
        lines = []
        for r in cols:
            parts = textwrap.wrap(r[-1], room, break_on_hyphens=False) or [""]
            lines.append("  ".join(c.ljust(w) for c, w in zip(r[:-1] + [parts[0]], widths)).rstrip())
            lines += [" " * indent + p for p in parts[1:]]
    else:
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cols]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def terminal_width(stream: Any = None) -> int | None:
    """The width of the terminal ``stream`` (standard output by default) is, None when it is not one (a
    pipe, a file): ``$COLUMNS``, else the terminal's own, else 80."""
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    if stream is sys.stdout:
        return shutil.get_terminal_size((80, 24)).columns
    try:  # standard error a terminal while standard output is a file (placetune export > plan.json)
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        return 80


def error_line(text: str) -> None:
    """An error or a note on standard error: one line in a log, wrapped at word boundaries on a terminal
    (:func:`~placetune.wording.wrap`, as :func:`say` wraps standard output)."""
    print(wrap(text, terminal_width(sys.stderr)), file=sys.stderr)


def say(text: str = "") -> None:
    """Print ``text`` to standard output, its lines longer than the terminal wrapped at word boundaries
    (:func:`~placetune.wording.wrap`); unchanged when standard output is no terminal (a log, a pipe)."""
    print(wrap(text, terminal_width()))


def shape_text(shape: Sequence[int]) -> str:
    """``1x3x224x224``."""
    return "x".join(str(d) for d in shape)


def show(args: Any, doc: dict[str, Any], human: str) -> None:
    """A command's result: ``doc`` as JSON with ``--json``, else the ``human`` text."""
    if getattr(args, "json", False):
        print(dumps_json(doc, indent=2))
    else:
        print(human)
