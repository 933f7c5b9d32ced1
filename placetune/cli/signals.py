"""SIGTERM before a run's own handler holds: the one line Ctrl-C gives ("placetune: terminated", exit code
143), not a silent death. ``placetune tune`` installs its own handler once it runs (the first signal lets
the evaluation in flight finish); this one covers the time before, and every other command.

While it holds, native extension modules initialise with the stop signals held back (delivered the moment
the module is made): a signal's exception raised inside an extension's initialisation, in Python code the
extension calls back (ONNX's nanobind module makes its enums), crossed C++ that does not catch it and
aborted the process (SIGABRT, exit 134) instead of giving the one line."""

from __future__ import annotations

import importlib.machinery
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from placetune.errors import Interrupted

__all__ = ["terminate", "sigterm_as_interrupt", "stop_line", "interrupt_behind", "stop_signals_held",
           "NativeImportsHeld"]

#: the signals that stop a command: held back while a native extension initialises
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def terminate(signum: int, frame: Any) -> None:
    """The SIGTERM handler: unwind as Ctrl-C does (an :class:`~placetune.errors.Interrupted`, exit code 143)."""
    raise Interrupted(signum)


@contextmanager
def stop_signals_held(signals: Sequence[int] = STOP_SIGNALS) -> Iterator[None]:
    """``signals`` are held back in this thread inside (pending, not lost) and delivered on leaving. Where
    the platform cannot hold signals (Windows), nothing is held."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _HeldExtensionLoader(importlib.machinery.ExtensionFileLoader):
    """An extension module's loader whose initialisation runs with the stop signals held."""

    def create_module(self, spec: Any) -> Any:
        with stop_signals_held():
            return super().create_module(spec)

    def exec_module(self, module: Any) -> None:
        with stop_signals_held():
            super().exec_module(module)


class NativeImportsHeld:
    """A meta path finder, placed just before the standard path finder: it finds what that finder finds, and
    gives native extension modules a loader that initialises them with the stop signals held."""

    @classmethod
    def find_spec(cls, name: str, path: Sequence[str] | None = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        loader = None if spec is None else spec.loader
        if spec is not None and isinstance(loader, importlib.machinery.ExtensionFileLoader) and \
                not isinstance(loader, _HeldExtensionLoader):
            spec.loader = _HeldExtensionLoader(loader.name, loader.path)
        return spec

    @classmethod
    def invalidate_caches(cls) -> None:
        """The standard path finder keeps the caches; nothing of its own."""


@contextmanager
def _native_imports_held() -> Iterator[None]:
    """Native extensions imported inside initialise with the stop signals held (see the module's text)."""
    if NativeImportsHeld in sys.meta_path:
        yield
        return
    at = next((i for i, finder in enumerate(sys.meta_path) if finder is importlib.machinery.PathFinder),
              len(sys.meta_path))
    sys.meta_path.insert(at, NativeImportsHeld)
    try:
        yield
    finally:
        if NativeImportsHeld in sys.meta_path:
            sys.meta_path.remove(NativeImportsHeld)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`~placetune.errors.Interrupted` inside; the handler before is put back after. A
    handler of the caller's own (a test harness, an application embedding the command) is left in place, and
    so is everything outside the main thread (signal handlers are the main thread's). Native extensions
    imported inside initialise with the stop signals held."""
    with _native_imports_held(), _sigterm_handler():
        yield


@contextmanager
def _sigterm_handler() -> Iterator[None]:
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
