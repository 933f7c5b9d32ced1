"""Parent side of the isolated TensorRT worker: start, talk to, time out and restart it.

A :class:`WorkerClient` owns one ``worker.py`` subprocess and exchanges JSON lines with it;
a :class:`WorkerPool` hands jobs to a healthy client and replaces it after a timeout or a
crash. Neither ever raises for a failed job: the outcome is a :class:`WorkerReply` whose
``kind`` says how the job ended (``result``, ``timeout``, ``crashed``).

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WorkerClient", "WorkerPool", "WorkerReply", "WORKER_FILE", "signal_name"]

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
    """

    kind: str
    result: dict[str, Any] = field(default_factory=dict)
    returncode: int | None = None
    signal: str | None = None
    stderr_tail: str = ""
    seconds: float = 0.0


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
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, "timeout"
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
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
    """

    def __init__(self, python: str | None = None, env: dict[str, str] | None = None,
                 start_timeout_s: float = 60.0) -> None:
        self.python = python or sys.executable
        self.env = dict(env or {})
        self.start_timeout_s = start_timeout_s
        self._client: WorkerClient | None = None
        self.restarts = 0

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
        return reply

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
