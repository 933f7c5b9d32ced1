"""Parent side of the isolated TensorRT worker: start, talk to, time out and restart it.

A :class:`WorkerClient` owns one ``worker.py`` subprocess and exchanges JSON lines with it;
a :class:`WorkerPool` hands jobs to a healthy client and replaces it after a timeout or a
crash. Neither ever raises for a failed job: the outcome is a :class:`WorkerReply` whose
``kind`` says how the job ended (``result``, ``timeout``, ``crashed``).

Recycling (the backstop against a worker that grows over a night): the pool also replaces a
healthy worker, between jobs, once it has run ``max_jobs`` jobs, once its RSS has grown by more
than ``max_rss_growth_mb`` over what it was after its first job (TensorRT and CUDA loaded), or
once it still holds more than ``max_held_mb`` of pinned host plus device memory after a job
(each job frees its CUDA resources; what stays is a leak), and after a job whose resources
could not be freed (``release_errors``: a CUDA context in a sticky error state fails every later
job). The figures come from the ``worker_memory`` of each reply. :class:`RecycleLimits` holds the bounds (defaults:
200 jobs, 1024 MB, 64 MB; 0 turns one off); ``[backend_options] worker_recycle = {max_jobs = 100}``
sets them. Pinned memory cannot be swapped: on an 8-16 GB Jetson a leak ends the night.

Example:
    >>> pool = WorkerPool(python=sys.executable)                       # doctest: +SKIP
    >>> reply = pool.run({"op": "probe"}, timeout_s=60)                # doctest: +SKIP
    >>> reply.kind, reply.result["trt_version"]                        # doctest: +SKIP
    ('result', '8.5.2.2')
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

from placetune.errors import ConfigError

__all__ = ["RecycleLimits", "WorkerClient", "WorkerPool", "WorkerReply", "WORKER_FILE", "signal_name"]

log = logging.getLogger(__name__)

#: The worker script; started as a file so that it runs under any Python >= 3.8.
WORKER_FILE = Path(__file__).with_name("worker.py")
_STDERR_TAIL = 4000


def signal_name(returncode: int | None) -> str | None:
    """``-11`` -> ``"SIGSEGV"``; None for a normal exit code."""
    if returncode is None or returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


@dataclass
class WorkerReply:
    """How one job ended.

    Attributes:
        kind: ``result`` (the worker answered), ``timeout`` (killed after the limit),
            ``crashed`` (the worker died or answered garbage).
        result: the worker's JSON answer (``kind == "result"``), else ``{}``.
        returncode: the worker's exit status when it died (negative: killed by a signal).
        signal: the signal name when killed by one (``SIGSEGV``...).
        stderr_tail: the last lines the worker wrote to stderr during the job.
        seconds: wall time of the job.
        recycled: why the pool replaced the (healthy) worker after this job, else None.
    """

    kind: str
    result: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    seconds: float = 0.0
    recycled: str | None = None


_MB = 1 << 20


@dataclass(frozen=True)
class RecycleLimits:
    """When the pool replaces a healthy worker (between jobs; 0 turns a bound off).

    Attributes:
        max_jobs: jobs one worker runs at most.
        max_rss_growth_mb: growth of the worker's resident memory over its size after its first
            job (TensorRT, CUDA and their libraries loaded by then).
        max_held_mb: pinned host plus device memory the worker's CUDA layer still holds after a
            job (every job frees its own: anything held is a leak).
    """

    max_jobs: int = 200
    max_rss_growth_mb: float = 1024.0
    max_held_mb: float = 64.0

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None) -> "RecycleLimits":
        """From ``[backend_options] worker_recycle`` (a table); a bad key or value is a ConfigError."""
        if options is None:
            return cls()
        if not isinstance(options, Mapping):
            raise ConfigError(f"worker_recycle: a table of {', '.join(f.name for f in fields(cls))} is needed, "
                              f"got {type(options).__name__}")
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in options.items():
            if key not in known:
                raise ConfigError(f"worker_recycle.{key}: unknown; allowed are {', '.join(known)}")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
                raise ConfigError(f"worker_recycle.{key} = {value!r}: a number >= 0 is needed (0 turns it off)")
            if key == "max_jobs" and int(value) != value:
                raise ConfigError(f"worker_recycle.max_jobs = {value!r}: a whole number of jobs is needed")
            values[key] = int(value) if key == "max_jobs" else float(value)
        return cls(**values)

    def exceeded(self, jobs: int, rss_growth: int | None, held: int) -> str | None:
        """Why a worker that has run ``jobs`` jobs, grown ``rss_growth`` bytes and holds ``held``
        bytes must be replaced, or None."""
        if self.max_jobs and jobs >= self.max_jobs:
            return f"it ran {jobs} jobs (max_jobs {self.max_jobs})"
        if self.max_rss_growth_mb and rss_growth is not None and rss_growth > self.max_rss_growth_mb * _MB:
            return (f"its memory grew by {rss_growth / _MB:.0f} MB since its first job "
                    f"(max_rss_growth_mb {self.max_rss_growth_mb:g})")
        if self.max_held_mb and held > self.max_held_mb * _MB:
            return (f"it still holds {held / _MB:.1f} MB of pinned and device memory after a job "
                    f"(max_held_mb {self.max_held_mb:g})")
        return None


class WorkerClient:
    """One worker subprocess speaking JSON lines.

    Args:
        python: the interpreter that runs ``worker.py`` (e.g. ``/usr/bin/python3`` on JetPack).
        env: extra environment variables for the worker (merged over ``os.environ``).
        start_timeout_s: how long the worker may take to say hello.
    """

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.python = python or sys.executable
        self.env = dict(env or {})
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen[bytes] | None = None
        self.hello: dict[str, Any] = {}
        self._buf = b""
        self._stderr = None
        self._finalizer: weakref.finalize | None = None
        self.jobs = 0
        #: the worker's RSS after its first job (bytes; None until then): what growth is measured from
        self.rss_baseline: int | None = None

    # --------------------------------------------------------------- lifecycle
    @property
    def alive(self) -> bool:
        """True while the subprocess runs."""
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> WorkerReply | None:
        """Start the worker and wait for its hello line; a reply when that fails, else None."""
        self.close()
        env = {**os.environ, **self.env}
        env.setdefault("PYTHONUNBUFFERED", "1")
        self._stderr = tempfile.TemporaryFile()
        self._buf = b""
        self.jobs = 0
        self.rss_baseline = None
        t0 = time.monotonic()
        try:
            self.proc = subprocess.Popen(
                [self.python, str(WORKER_FILE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=self._stderr, env=env, start_new_session=True, close_fds=True,
            )
        except OSError as exc:
            self.proc = None
            return WorkerReply("crashed", stderr_tail=f"cannot start {self.python}: {exc}")
        self._finalizer = weakref.finalize(self, _kill, self.proc)
        line, why = self._read_line(t0 + self.start_timeout_s)
        if line is None:
            return self._failed(why, 0, t0)
        try:
            self.hello = json.loads(line)
        except ValueError:
            return self._failed("crashed", 0, t0, note=f"bad hello line {line[:200]!r}")
        log.debug("TensorRT worker %s started (Python %s)", self.proc.pid, self.hello.get("python"))
        return None

    def close(self) -> None:
        """Stop the worker (closing stdin lets it exit; kill it if it does not)."""
        proc, self.proc = self.proc, None
        if proc is not None:
            try:
                if proc.stdin:
                    proc.stdin.close()
                proc.wait(timeout=2)
            except (OSError, subprocess.TimeoutExpired):
                _kill(proc)
            for f in (proc.stdout,):
                try:
                    f and f.close()
                except OSError:
                    pass
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # --------------------------------------------------------------- jobs
    def request(self, job: dict[str, Any], timeout_s: float) -> WorkerReply:
        """Send one job and wait for its result (at most ``timeout_s`` seconds)."""
        t0 = time.monotonic()
        if not self.alive:
            failed = self.start()
            if failed is not None:
                return failed
            t0 = time.monotonic()
        assert self.proc is not None and self.proc.stdin is not None
        err_pos = self._stderr.seek(0, os.SEEK_END) if self._stderr else 0
        self.jobs += 1
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._failed("crashed", err_pos, t0)
        line, why = self._read_line(t0 + timeout_s)
        if line is None:
            return self._failed(why, err_pos, t0)
        try:
            result = json.loads(line)
        except ValueError:
            return self._failed("crashed", err_pos, t0, note=f"unreadable result line {line[:200]!r}")
        return WorkerReply("result", result, stderr_tail=self._tail(err_pos), seconds=time.monotonic() - t0)

    def _read_line(self, deadline: float) -> tuple[str | None, str]:
        """The next stdout line, or (None, "timeout"|"crashed")."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        # poll, not select: select refuses a descriptor numbered 1024 or more, which a long-lived process
        # (a night's, an application's that opened many files) can be handed ("filedescriptor out of range")
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "timeout"
            ready = poller.poll(min(left, 1.0) * 1000)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None, "crashed"
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line.decode("utf-8", "replace"), ""

    def _failed(self, kind: str, err_pos: int, t0: float, note: str = "") -> WorkerReply:
        """Kill (timeout) or reap (crash) the worker and describe what happened."""
        proc = self.proc
        rc = None
        if proc is not None:
            if kind == "timeout" or proc.poll() is None:
                _kill(proc)
            try:
                rc = proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                rc = None
        tail = self._tail(err_pos)
        if note:
            tail = (tail + "\n" + note).strip()
        reply = WorkerReply(kind, returncode=rc, signal=signal_name(rc) if kind == "crashed" else None,
                            stderr_tail=tail, seconds=time.monotonic() - t0)
        self.close()
        return reply

    def _tail(self, pos: int) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(pos)
            data = self._stderr.read()
            self._stderr.seek(0, os.SEEK_END)
        except (OSError, ValueError):
            return ""
        return data[-_STDERR_TAIL:].decode("utf-8", "replace").strip()


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the worker's process group (it runs in its own session)."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except OSError:
            pass


class WorkerPool:
    """Hands jobs to a healthy worker; replaces it after a timeout or a crash.

    One worker at a time: builds and timings must not overlap on the device.

    Args:
        python: interpreter for the worker.
        env: extra environment variables for the worker.
        start_timeout_s: how long a new worker may take to start.
        limits: when a healthy worker is replaced (:class:`RecycleLimits`; default its defaults).
    """

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None,
                 start_timeout_s: float = 60.0, limits: RecycleLimits | None = None) -> None:
        self.python = python or sys.executable
        self.env = dict(env or {})
        self.start_timeout_s = start_timeout_s
        self.limits = limits or RecycleLimits()
        self._client: WorkerClient | None = None
        self.restarts = 0
        #: healthy workers replaced by :attr:`limits`
        self.recycles = 0

    def run(self, job: dict[str, Any], timeout_s: float) -> WorkerReply:
        """Run a job; never raises for a failed job (see :class:`WorkerReply`)."""
        if self._client is None:
            self._client = WorkerClient(self.python, self.env, self.start_timeout_s)
        elif not self._client.alive:
            self.restarts += 1
        reply = self._client.request(job, timeout_s)
        if reply.kind != "result":
            log.warning("TensorRT worker %s (%s); a new worker starts for the next job",
                        "timed out and was killed" if reply.kind == "timeout" else "crashed",
                        reply.signal or f"exit status {reply.returncode}")
        else:
            self._maybe_recycle(job, reply)
        return reply

    def _maybe_recycle(self, job: dict[str, Any], reply: WorkerReply) -> None:
        """Replace the worker when it crossed a bound of :attr:`limits` (the reply stands)."""
        client = self._client
        assert client is not None
        mem = reply.result.get("worker_memory") if isinstance(reply.result, dict) else None
        mem = mem if isinstance(mem, dict) else {}
        rss = mem.get("rss_bytes")
        rss = int(rss) if isinstance(rss, (int, float)) and not isinstance(rss, bool) else None
        if rss is not None and client.rss_baseline is None and job.get("op") != "probe":
            client.rss_baseline = rss  # a probe loads neither TensorRT's builder nor an engine
        growth = rss - client.rss_baseline if rss is not None and client.rss_baseline is not None else None
        held = sum(int(mem.get(k) or 0) for k in ("pinned_bytes", "device_bytes"))
        why = self.limits.exceeded(client.jobs, growth, held)
        failed = reply.result.get("release_errors") if isinstance(reply.result, dict) else None
        if failed and why is None:  # e.g. a sticky CUDA error: every later job in this process would fail
            why = f"it could not free a job's CUDA resources ({str(failed[0])[:200]})"
        if why is None:
            return
        log.info("TensorRT worker %s is replaced: %s", self.pid, why)
        reply.recycled = why
        client.close()
        self._client = None  # the next job starts a fresh worker (not counted as a restart)
        self.recycles += 1

    @property
    def pid(self) -> int | None:
        """The current worker's process id (None when none runs)."""
        c = self._client
        return c.proc.pid if c is not None and c.proc is not None and c.alive else None

    def close(self) -> None:
        """Stop the worker."""
        if self._client is not None:
            self._client.close()
            self._client = None
