"""SIGTERM before a run's own handler holds: the one line Ctrl-C gives ("placetune: terminated", exit code
143), not a silent death. ``placetune tune`` installs its own handler once it runs (the first signal lets
the evaluation in flight finish); this one covers the time before, and every other command."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from placetune.errors import Interrupted

__all__ = ["terminate", "sigterm_as_interrupt", "stop_line"]


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
