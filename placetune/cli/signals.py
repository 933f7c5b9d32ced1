"""SIGTERM before a run's own handler holds: the one line Ctrl-C gives ("placetune: terminated", exit code
143), not a silent death. ``placetune tune`` installs its own handler once it runs (the first signal lets
the evaluation in flight finish); this one covers the time before, and every other command."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from placetune.errors import Interrupted

__all__ = ["terminate", "sigterm_as_interrupt", "stop_line", "interrupt_behind"]


def terminate(signum: int, frame: Any) -> None:
    """The SIGTERM handler: unwind as Ctrl-C does (an :class:`~placetune.errors.Interrupted`, exit code 143)."""
    raise Interrupted(signum)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`~placetune.errors.Interrupted` inside; the handler before is put back after. A
    handler of the caller's own (a test harness, an application embedding the command) is left in place, and
    so is everything outside the main thread (signal handlers are the main thread's)."""
    try:
        previous = signal.getsignal(signal.SIGTERM)
        install = previous in (signal.SIG_DFL, terminate)
        if install:
            signal.signal(signal.SIGTERM, terminate)
    except ValueError:  # not the main thread
        install = False
    try:
        yield
    finally:
        if install:
            signal.signal(signal.SIGTERM, previous)


def stop_line(exc: BaseException) -> str:
    """The one line a run stopped at once by a signal prints: ``placetune: terminated`` for SIGTERM,
    ``placetune: hung up`` for a second SIGHUP, else ``placetune: interrupted`` (Ctrl-C)."""
    if isinstance(exc, Interrupted) and exc.exit_code == 128 + signal.SIGTERM:
        return "placetune: terminated"
    if isinstance(exc, Interrupted) and hasattr(signal, "SIGHUP") and exc.exit_code == 128 + signal.SIGHUP:
        return "placetune: hung up"
    return "placetune: interrupted"


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or signal that ``exc`` was raised while unwinding, else None.

    A signal lands at any point of a run, inside a library's bookkeeping too: SQLAlchemy's commit, stopped
    between the database's COMMIT and marking its transaction done, fails its own ``assert not
    self.is_active`` as the interrupt unwinds, and that AssertionError replaced the interrupt. An error
    whose context holds an interrupt is the interrupt's, not a bug of placetune's."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
