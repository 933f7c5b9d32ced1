"""``placetune doctor``: which backends work on this machine, and what to do about those that don't.

The TensorRT checks run in the same isolated worker the ``tensorrt`` backend uses (so they
see exactly what a study would see, and a broken install cannot crash the doctor).

Example:
    >>> from placetune import doctor
    >>> checks = doctor.run()                                   # doctest: +SKIP
    >>> print(doctor.format(checks))                            # doctest: +SKIP
    [ok]   python: 3.11.7 (/usr/bin/python3)
    [FAIL] tensorrt: cannot import tensorrt (ModuleNotFoundError: No module named 'tensorrt')
           fix: on JetPack: sudo apt install nvidia-jetpack (python3-libnvinfer); ...
"""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from placetune.backends import clocks as clock_watch
from placetune.backends.tensorrt import env as trt_env
from placetune.backends.tensorrt.pool import WorkerPool
from placetune.backends.trtexec.find import which_trtexec

__all__ = ["Check", "FIX_TRT", "run", "format", "verdict", "cuda_python_check", "CUDA_PYTHON_FOR_L4T", "EXIT_OK",
           "EXIT_SIMULATED_ONLY"]

#: What to do when the worker Python cannot import tensorrt (the doctor and the selftest print it).
FIX_TRT = (
    "TensorRT's Python bindings come with JetPack (apt package python3-libnvinfer, part of nvidia-jetpack) "
    "and live in the system Python: create the venv with --system-site-packages so JetPack's TensorRT "
    "bindings are visible (python3 -m venv --system-site-packages .venv), or run the worker with "
    "--worker-python /usr/bin/python3"
)
_FIX_CUDA = (  # the worker's own text (worker_cuda.FIX) wins when the probe answered
    "pip install cuda-python (no build step), or pycuda: export PATH=/usr/local/cuda/bin:$PATH; "
    "pip install --no-build-isolation pycuda (JetPack 7 / CUDA 13: pycuda>=2025.1.2)")
_FIX_CLOCKS = "sudo nvpmodel -m 0; sudo jetson_clocks"


@dataclass
class Check:
    """One line of the doctor's report.

    Attributes:
        name: what was checked (``tensorrt``, ``dla``, ``backend tensorrt``...).
        ok: True when it is fine.
        detail: what was found.
        fix: what to do when it is not fine ("" when ok).
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _trt_support(version: str) -> tuple[bool, str]:
    """Whether a TensorRT version places layers on DLA (reference tensorrt-dla.md §0.3)."""
    try:
        major, minor, patch = (int(x) for x in (version.split(".") + ["0", "0"])[:3])
    except ValueError:
        return False, f"unrecognised version {version!r}"
    if major < 8 or (major == 8 and minor < 5):
        return False, "older than 8.5 (no execute_async_v3); placetune targets 8.5, 8.6, 10.3 and 11.4.1+"
    if major == 8 or (major == 10 and minor <= 7):
        return True, "DLA supported"
    if major == 10:
        return False, "TensorRT 10.7 was the last 10.x release with DLA; use JetPack 6.1/6.2 (TensorRT 10.3)"
    if major == 11 and (minor, patch) < (4, 1):
        # TensorRT 11.4.1 "Working with DLA": "DLA was unavailable in TensorRT 11.0 through 11.3 ...
        # TensorRT 11.4.0 supported DLA only on Windows on ARM"
        return False, ("TensorRT 11.0-11.4.0 have no DLA on Jetson (11.4.0 only on Windows on ARM); 11.4.1 restores "
                       "it on AGX Orin (JetPack 7.2.2+)")
    return True, "DLA supported (strongly typed: fp16 models are converted, int8 needs Q/DQ nodes)"


def run(worker_python: str | None = None, env: dict[str, str] | None = None, timeout_s: float = 120.0) -> list[Check]:
    """Check this machine for every backend.

    Args:
        worker_python: interpreter the TensorRT worker would use (default: this one).
        env: extra environment variables for the probe worker.
        timeout_s: limit for the TensorRT probe.

    Returns:
        The checks, environment first, one ``backend <name>`` summary per backend last.
    """
    python = worker_python or sys.executable
    checks: list[Check] = []
    pool = WorkerPool(python, env, start_timeout_s=timeout_s)
    try:
        reply = pool.run({"op": "probe"}, timeout_s=timeout_s)
    finally:
        pool.close()
    probe = reply.result if reply.kind == "result" else {}
    if reply.kind != "result":
        why = reply.signal or reply.kind
        checks.append(Check("python", False, f"cannot run the worker with {python} ({why}): {reply.stderr_tail[-300:]}",
                            "pass an existing Python 3.8+ interpreter, e.g. --worker-python /usr/bin/python3"))
    else:
        pv = tuple(int(x) for x in str(probe.get("python", "0.0")).split(".")[:2])
        checks.append(Check("python", pv >= (3, 8), f"{probe.get('python')} ({python})",
                            "" if pv >= (3, 8) else "the worker needs Python 3.8 or newer"))
    version = probe.get("trt_version")
    if version:
        checks.append(Check("tensorrt", True, f"{version} ({probe.get('trt_path')})"))
        supported, why = _trt_support(version)
        checks.append(Check("tensorrt version", supported, f"{version}: {why}",
                            "" if supported else "use a JetPack whose TensorRT supports DLA (5.1.x, 6.0, 6.1, 6.2 or 7.2.2+)"))
    else:
        checks.append(Check("tensorrt", False, f"cannot import tensorrt ({probe.get('trt_error') or 'no answer'})", FIX_TRT))
    cores = probe.get("num_dla_cores")
    if cores is not None:
        checks.append(Check("dla", cores > 0, f"builder.num_DLA_cores = {cores}",
                            "" if cores else "this module has no DLA (Orin Nano, Thor): only GPU placements can be built"))
    elif version:
        checks.append(Check("dla", False, f"cannot create a TensorRT builder: {probe.get('builder_error')}",
                            "check that the GPU is visible (run on the Jetson itself, not in a container without --runtime nvidia)"))
    cuda_ok = bool(probe.get("cuda_binding"))
    if cuda_ok:  # the worker initialised the driver and opened device 0 through this binding
        checks.append(Check("cuda", True, f"{probe['cuda_binding']} {probe.get('cuda_version')} on "
                            f"{probe.get('cuda_device')}"))
    else:
        error = str(probe.get("cuda_error") or probe.get("pycuda_error") or "no answer").split("; fix: ")[0]
        checks.append(Check("cuda", False, f"no CUDA binding initialises device 0 in the worker Python ({error})",
                            probe.get("cuda_fix") or _FIX_CUDA))  # the fix once, on its own line
    trtexec = which_trtexec()
    checks.append(Check("trtexec", trtexec is not None, trtexec or "not in $PLACETUNE_TRTEXEC, on PATH nor in "
                        "/usr/src/tensorrt/bin",
                        "" if trtexec else "install TensorRT's samples (JetPack) and export PATH=$PATH:/usr/src/tensorrt/bin"))
    l4t = trt_env.read_l4t()
    jetpack = trt_env.read_jetpack()
    module = trt_env.read_module()
    checks.append(Check("jetpack", l4t is not None,
                        f"L4T {l4t}, JetPack {jetpack or 'unknown'}, {module or 'unknown module'}" if l4t
                        else "not a Jetson (/etc/nv_tegra_release missing): power mode and clocks not checked",
                        "" if l4t else "measure on a Jetson with JetPack; elsewhere only the simulate backend works"))
    if l4t is not None:  # a power mode and clocks exist on a Jetson only
        fit = cuda_python_check(l4t, probe.get("cuda_binding"), probe.get("cuda_version"))
        if fit is not None:
            checks.append(fit)
        _jetson_checks(checks)
    _backend_checks(checks, version=version, cuda_ok=cuda_ok, cores=cores, trtexec=trtexec)
    return checks


#: The cuda-python a JetPack's CUDA driver runs, by L4T major release: cuda-python 13 needs a CUDA 13
#: driver (580.65+ on Linux: cuda-python's cuda.core install page), which JetPack 7 (L4T R38/R39,
#: CUDA 13) has and JetPack 6 (L4T R36, CUDA 12.2/12.6) has not. JetPack 5 (L4T R35, CUDA 11.4):
#: pycuda, built against the system Python 3.8 (README).
CUDA_PYTHON_FOR_L4T = {"R36": ("JetPack 6", "CUDA 12.x", "cuda-python>=12,<13"),
                       "R38": ("JetPack 7", "CUDA 13", "cuda-python>=13"),
                       "R39": ("JetPack 7", "CUDA 13", "cuda-python>=13")}


def cuda_python_check(l4t: str | None, binding: str | None, version: str | None) -> Check | None:
    """Whether the worker's cuda-python fits this JetPack's CUDA driver (None: nothing to say: not a
    Jetson, JetPack 5, or the worker uses pycuda).

    Example:
        >>> cuda_python_check("R36.4.0", "cuda-python", "13.0.1").fix
        "pip install 'cuda-python>=12,<13' (JetPack 6 has CUDA 12.x; cuda-python 13 needs a CUDA 13 driver, 580+)"
        >>> cuda_python_check("R38.2.0", "cuda-python", "13.0.1").ok
        True
    """
    release = (l4t or "").split(".")[0]
    if release not in CUDA_PYTHON_FOR_L4T or binding == "pycuda":
        return None
    jetpack, cuda, pin = CUDA_PYTHON_FOR_L4T[release]
    fix = f"pip install '{pin}' ({jetpack} has {cuda}; cuda-python 13 needs a CUDA 13 driver, 580+)"
    if binding is None:  # no binding initialised: say which cuda-python this JetPack needs
        return Check("cuda-python for this JetPack", False, f"{jetpack} (L4T {l4t}, {cuda}) needs {pin}", fix)
    major = (version or "").split(".")[0]
    fits = major.isdigit() and (int(major) == 12 if pin.endswith("<13") else int(major) >= 13)
    return Check("cuda-python for this JetPack", fits, f"cuda-python {version} on {jetpack} (L4T {l4t}, {cuda})",
                 "" if fits else fix)


def _jetson_checks(checks: list[Check]) -> None:
    """The power mode and clock checks of a Jetson."""
    mode = trt_env.read_power_mode()
    checks.append(Check("power mode", mode is not None, mode or "unknown (neither nvpmodel -q nor /var/lib/nvpmodel/status with /etc/nvpmodel.conf answered)",
                        "" if mode else "on a Jetson: sudo nvpmodel -q (and sudo nvpmodel -m 0 for MAXN); in a "
                        "container, mount /var/lib/nvpmodel/status and /etc/nvpmodel.conf read-only"))
    mode_id, why = clock_watch.read_power_mode_id()  # what the clocks watch reads before and after every timing
    checks.append(Check("power mode per measurement", mode_id is not None,
                        f"nvpmodel mode {mode_id} ({clock_watch.NVPMODEL_STATUS}, read around every timing)" if mode_id is not None
                        else f"{why}: a power mode change during the night is seen only where it moves a CPU or GPU "
                        "frequency limit",
                        "" if mode_id is not None else "sudo nvpmodel -m <id> once (nvpmodel writes the file), and let "
                        "the user of the night read it"))
    clocks = trt_env.read_clocks()
    checks.append(Check("clocks", clocks is True,
                        {True: "locked", False: "not locked", None: "unknown (jetson_clocks --show unavailable and the CPU/GPU "
                                                               "frequency limits in /sys unreadable)"}[clocks],
                        "" if clocks else _FIX_CLOCKS))


def _backend_checks(checks: list[Check], *, version: str | None, cuda_ok: bool, cores: int | None,
                    trtexec: str | None) -> None:
    """One ``backend <name>`` summary per backend; a failing one names the checks above whose
    fixes it needs (not their text again)."""
    checks.append(Check("backend simulate", True, "always available (every figure is labelled simulated)"))
    trt_ok = bool(version) and cuda_ok and cores is not None
    missing = [c.name for c in checks if c.name in ("python", "tensorrt", "cuda", "dla") and not c.ok]
    checks.append(Check("backend tensorrt", trt_ok and (cores or 0) > 0,
                        "usable" if trt_ok and cores else
                        ("usable for GPU-only placements" if trt_ok else "unusable: " + ", ".join(missing)),
                        "" if trt_ok and cores else f"see {' and '.join(missing)} above"))
    checks.append(Check("backend trtexec", trtexec is not None, "usable" if trtexec else "unusable: no trtexec",
                        "" if trtexec else "see trtexec above"))


#: Exit status of ``placetune doctor``: a backend that measures real hardware works here.
EXIT_OK = 0
#: Exit status of ``placetune doctor``: only the simulated Jetson works here (the backend error code).
EXIT_SIMULATED_ONLY = 8


def verdict(checks: list[Check]) -> tuple[int, str]:
    """The doctor's conclusion: an exit status and one line saying what works here and what to do next.

    Returns:
        ``(0, line)`` when the tensorrt backend (GPU-only included) or the trtexec backend can
        measure on this machine, ``(8, line)`` when only the simulated Jetson works.
    """
    by = {c.name: c for c in checks}
    trt = by.get("backend tensorrt")
    usable = [name for name, c in (("tensorrt", trt), ("trtexec", by.get("backend trtexec")))
              if c is not None and (c.ok or c.detail.startswith("usable"))]
    if usable:
        first = usable[0]
        gpu_only = " (GPU-only placements: no DLA here)" if first == "tensorrt" and trt is not None and not trt.ok else ""
        check = "placetune selftest -o selftest, then " if first == "tensorrt" else ""
        return EXIT_OK, (f"works here: the {' and '.join(usable)} backend{'s' if len(usable) > 1 else ''}{gpu_only} "
                         f"and the simulated Jetson; next: {check}placetune tune --backend {first} "
                         "(see studies/jetson-overnight.toml)")
    if by.get("jetpack") is not None and not by["jetpack"].ok:
        return EXIT_SIMULATED_ONLY, ("works here: the simulated Jetson only (placetune tune, every figure labelled "
                                     "simulated); next: to measure for real, install placetune on a Jetson with "
                                     "JetPack and run placetune doctor there")
    failing = [c.name for c in checks if not c.ok and not c.name.startswith("backend ")]
    return EXIT_SIMULATED_ONLY, (f"works here: the simulated Jetson only; next: apply the fix of "
                                 f"{', '.join(failing) or 'the FAIL lines'} above and run placetune doctor again")


def format(checks: list[Check], width: int | None = None) -> str:  # noqa: A001 - the name the CLI expects
    """The report as text: one ``[ok]``/``[FAIL]`` line per check, with its fix indented below,
    then a blank line and the :func:`verdict` line. With ``width`` (a terminal's) each is wrapped at word
    boundaries within ``width - 1`` columns, under its own text; without, one line each (a log)."""
    def put(text: str, indent: str) -> list[str]:
        if not width:
            return [text]
        return textwrap.wrap(text, max(width - 1, 20), subsequent_indent=indent, break_long_words=False,
                             break_on_hyphens=False) or [text]

    lines = []
    for c in checks:
        lines += put(f"{'[ok]  ' if c.ok else '[FAIL]'} {c.name}: {c.detail}", " " * 7)
        if not c.ok and c.fix:
            lines += put(f"       fix: {c.fix}", " " * 12)
    return "\n".join([*lines, "", *put(verdict(checks)[1], "  ")])
