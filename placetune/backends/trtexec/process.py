"""Running one trtexec process: output to a log file with marker times, timeouts and kills, and how it ended."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placetune.measurement import Measurement
from placetune.backends.oom import out_of_memory
from placetune.backends.tensorrt.dla_errors import dla_failure, dla_refused, refused_reason
from placetune.backends.tensorrt.worker_names import is_parser_line, is_placement_line
from placetune.backends.trtexec.parse import PerfSummary, error_lines, strip_prefix

__all__ = ["Run", "Proc", "classify", "KILL_GRACE_S"]

_NO_CORE = re.compile(r"Cannot create DLA engine, (\d+) not available")
#: How long a killed trtexec is waited for before it is left behind as blocked in the kernel.
KILL_GRACE_S = 30.0
#: How long :meth:`Proc.wait` waits for the output reader after the process ended (a child of trtexec
#: may hold the pipe open); the log is then closed and a later line is dropped.
READER_JOIN_S = 10.0


@dataclass
class Run:
    """One finished trtexec process."""

    argv: list[str]
    log_path: Path
    returncode: int | None = None
    timed_out: bool = False
    signal: str | None = None
    started: float = 0.0
    ended: float = 0.0
    marks: dict[str, float] = field(default_factory=dict)
    #: still alive :data:`KILL_GRACE_S` after its SIGKILL (blocked in the kernel)
    unkillable: bool = False

    @property
    def seconds(self) -> float:
        return max(0.0, self.ended - self.started)

    def lines(self) -> list[str]:
        """The output without ``[V]`` (verbose) lines, which can run to many MB for big models,
        except the ``Layers Running on DLA/GPU`` report: some versions print it at ``[V]`` only."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return [x.rstrip("\n") for x in fh if "] [V] " not in x or is_placement_line(strip_prefix(x)[1])]
        except OSError:
            return []

    def parser_messages(self) -> list[str]:
        """The ONNX parser's ``Parsing node``/``Registering layer`` messages of a ``--verbose`` build
        (prefix removed): which node each network layer was made for (worker_names.parser_layers)."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                msgs = (strip_prefix(x.rstrip("\n"))[1] for x in fh if "] [V] " in x)
                return [m for m in msgs if is_parser_line(m)]
        except OSError:
            return []


class Proc:
    """A trtexec process whose output goes to a log file, line by line, with the arrival
    time (``time.monotonic()``) of the first line that starts each ``markers`` text."""

    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str], cwd: Path,
                 markers: tuple[str, ...] = ()) -> None:
        self.run = Run(argv, log_path)
        self._markers = markers
        self._fh = open(log_path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._fh_lock = threading.Lock()  # the reader writes the log, wait() closes it
        self.run.started = time.monotonic()
        try:
            self.p = subprocess.Popen(  # noqa: S603 - an argument list, no shell
                argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                cwd=str(cwd), start_new_session=True, text=True, errors="replace", bufsize=1,
            )
        except OSError:
            self._fh.close()
            raise
        self._reader = threading.Thread(target=self._read, name="trtexec-output", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            now = time.monotonic()
            with self._fh_lock:
                if self._fh.closed:  # the run ended without us (Run.unkillable, a child holding the pipe)
                    return
                self._fh.write(line)
            if self._markers and len(self.run.marks) < len(self._markers):
                text = line.split("] ", 2)[-1] if line.startswith("[") else line
                for m in self._markers:
                    if m not in self.run.marks and m in text:
                        self.run.marks[m] = now
        with self._fh_lock:
            if not self._fh.closed:
                self._fh.flush()

    def wait(self, deadline: float) -> Run:
        try:
            self.p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.run.timed_out = True
            self.kill()
            self._reap()
        except BaseException:  # Ctrl-C: trtexec runs in its own session and would not see it
            self.kill()
            self._reap()
            raise
        self.run.ended = time.monotonic()
        self._reader.join(timeout=READER_JOIN_S)
        with self._fh_lock:
            self._fh.close()
        rc = self.p.returncode
        self.run.returncode = rc
        if rc is not None and rc < 0 and not self.run.timed_out:
            try:
                self.run.signal = signal.Signals(-rc).name
            except ValueError:
                self.run.signal = f"signal {-rc}"
        return self.run

    def _reap(self) -> None:
        """Wait for the killed process, at most :data:`KILL_GRACE_S`: a process blocked in the kernel
        (a GPU or DLA driver call that does not return) does not die of SIGKILL until it leaves it, and
        the run must not wait for it for ever; it is then recorded as not dead (``Run.unkillable``,
        the measurement's ``extra["unkillable"]``)."""
        try:
            self.p.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            self.run.unkillable = True

    def kill(self) -> None:
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                self.p.kill()
            except ProcessLookupError:
                pass


def classify(run: Run, lines: list[str], summary: PerfSummary, phase: str, kw: dict[str, Any],
             timeout_s: float) -> Measurement | None:
    """Classify a finished process (``phase``: ``build`` or ``time``): None when it passed, else the failure."""
    what = "building the engine" if phase == "build" else "timing the engine"
    if run.timed_out:
        killed = "it was killed" if not run.unkillable else (
            f"it was sent SIGKILL and was still alive {KILL_GRACE_S:g} s later, blocked in the kernel (a GPU or "
            "DLA driver call that does not return: check `sudo dmesg`; the board may need a reboot)")
        kw = _with_tail(kw, lines)
        if run.unkillable:
            kw["extra"]["unkillable"] = True
        return Measurement.failure("timeout", f"trtexec did not finish {what} within its limit (timeout_s="
                                   f"{timeout_s:g} beyond the timed duration; ran {run.seconds:.1f} s); "
                                   f"{killed} ({' '.join(run.argv[:2])} ...); a build that is slow, not hung, needs "
                                   "a longer limit: [backend_options] timeout_s", **kw)
    sig = run.signal or _wrapped_signal(run.returncode, summary)
    if sig:
        last = [x for x in lines if x.strip()][-1:]
        how = sig if run.signal else f"{sig} (exit status {run.returncode} of the command that ran it)"
        why = f" {_NOT_OURS}" if sig == "SIGKILL" else ""
        kw = _with_tail(kw, lines)
        kw["extra"]["signal"] = sig
        return Measurement.failure("crashed", f"trtexec was killed by {how} while {what}{why}"
                                   + (f" (last output: {last[0].strip()})" if last else ""), **kw)
    if run.returncode == 0 and summary.status != "FAILED":
        return None
    if run.returncode not in (0, 1) and summary.status != "FAILED":
        last = [x for x in lines if x.strip()][-1:]
        return Measurement.failure("crashed", f"trtexec ended with exit status {run.returncode} while {what}, "
                                   "which trtexec itself never returns (it exits 0 or 1): the command that ran it "
                                   "failed"
                                   + (f" (last output: {last[0].strip()})" if last else ""), **_with_tail(kw, lines))
    errs = [e for e in error_lines(lines) if not e.startswith("&&&&")]
    kw = _with_tail(kw, lines)
    kw["extra"]["trtexec_errors"] = errs
    m = next((_NO_CORE.search(e) for e in errs if _NO_CORE.search(e)), None)
    if m:
        return Measurement.failure("infeasible", f"this Jetson has no DLA core {m.group(1)} (trtexec: "
                                   f"{m.group(0)})", **kw)
    status = "build_failed" if phase == "build" else "runtime_failed"
    detail = "; ".join(errs[:4]) or f"exit status {run.returncode}"
    refused = dla_refused(errs)
    if refused:  # the placement asked the DLA for a layer it cannot run: not the DLA's failure
        kw["extra"]["failure_class"] = "dla_unsupported"
        detail = refused_reason(refused, detail)
    elif dla_failure(errs):  # the DLA's own failure (NvMedia/cuDLA, DLA compiler), not the GPU build's
        kw["extra"]["failure_class"] = "dla"
        detail = f"the DLA failed ({detail})"
    elif out_of_memory(errs):  # what "Could not find any implementation" then means
        kw["extra"]["failure_class"] = "memory"
        detail = (f"out of memory ({detail}); on a Jetson the GPU shares the board's memory with everything "
                  "else running")
    return Measurement.failure(status, f"trtexec failed {what}: {detail}", **kw)


#: Said of a SIGKILL placetune did not send (its own kills are timeouts).
_NOT_OURS = ("(placetune did not send it: on a Jetson this is most often the kernel's out-of-memory killer, "
             "see `sudo dmesg | grep -i -e oom -e 'killed process'`; free memory or build a smaller engine)")


def _wrapped_signal(returncode: int | None, summary: PerfSummary) -> str | None:
    """The signal that killed trtexec when a shell or wrapper script ran it and exited ``128 + N``:
    trtexec's own exit status is only ``EXIT_SUCCESS`` or ``EXIT_FAILURE`` (``reportPass`` /
    ``reportFail``, samples/common/logging.h release/10.3:418-427, the returns of
    samples/trtexec/trtexec.cpp ``main``; ``exit(EXIT_FAILURE)`` of the samples' CUDA checks,
    common.h:86 and sampleDevice.cpp:30,67,94); None otherwise."""
    if returncode is None or not 128 < returncode < 128 + 65 or summary.status in ("PASSED", "FAILED"):
        return None
    try:
        return signal.Signals(returncode - 128).name
    except ValueError:
        return None


def _with_tail(kw: dict[str, Any], lines: list[str]) -> dict[str, Any]:
    """``kw`` with the last 40 non-verbose output lines in ``extra["trtexec_output_tail"]``."""
    kw = dict(kw)
    extra = dict(kw.get("extra") or {})
    extra["trtexec_output_tail"] = [x for x in lines if "] [V] " not in x][-40:]
    kw["extra"] = extra
    return kw
