"""Helpers of the hostile-input tests: an alarm instead of a hang, a memory cap, device nodes in a temporary folder,
the one-line rule every refusal keeps.

Device nodes are made with ``mknod`` inside the test's own temporary folder (the tests run as
root, as Jetson containers do): the machine's ``/dev/null``, ``/dev/zero`` and ``/dev/stdout``
are never written, replaced or read into memory.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import stat
from collections.abc import Iterator
from pathlib import Path

#: (major, minor) of the character devices the tests make: like /dev/null and /dev/zero
DEVICES = {"null": (1, 3), "zero": (1, 5)}


@contextlib.contextmanager
def alarm(seconds: int, exc: type[BaseException] = TimeoutError) -> Iterator[None]:
    """Raise ``exc`` after ``seconds`` (a blocking open of a FIFO is interrupted): a hang fails the test."""
    def boom(signum, frame):  # noqa: ARG001 - signal handler
        raise exc(f"no answer after {seconds} s: placetune hung")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@contextlib.contextmanager
def in_folder(path: Path) -> Iterator[Path]:
    """``path`` as the working folder while the body runs (the default storage and outputs land there)."""
    old = os.getcwd()
    os.chdir(path)
    try:
        yield path
    finally:
        os.chdir(old)


@contextlib.contextmanager
def environment(values: dict[str, str | None]) -> Iterator[None]:
    """Environment variables set (or removed, for None) while the body runs; put back after."""
    old = {k: os.environ.get(k) for k in values}
    try:
        _put(values)
        yield
    finally:
        _put(old)


def _put(values: dict[str, str | None]) -> None:
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@contextlib.contextmanager
def memory_cap(extra_bytes: int = 1 << 30) -> Iterator[None]:
    """At most ``extra_bytes`` more address space while the body runs: reading a device into memory is a
    MemoryError, not the machine's memory."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/statm") as f:
        used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    resource.setrlimit(resource.RLIMIT_AS, (used + extra_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def device(path: Path, kind: str = "null") -> Path:
    """A character device node like ``/dev/<kind>`` at ``path`` (a temporary folder)."""
    os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(*DEVICES[kind]))
    return path


def one_line(err: str) -> bool:
    """The rule of every hostile-input round: a refusal is one line and never a traceback."""
    return len(err.strip().splitlines()) == 1 and "Traceback" not in err
