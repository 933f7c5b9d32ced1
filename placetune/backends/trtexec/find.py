"""Finding the trtexec binary: ``--trtexec PATH``, then ``$PLACETUNE_TRTEXEC``, ``PATH`` and JetPack's directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from placetune.errors import BackendError
from placetune.backends.tensorrt import env as trt_env

__all__ = ["ENV_VAR", "trtexec_candidates", "which_trtexec", "find_trtexec"]

#: Environment variable naming the trtexec binary.
ENV_VAR = "PLACETUNE_TRTEXEC"


def trtexec_candidates(explicit: str | os.PathLike[str] | None = None) -> list[tuple[str, str | None]]:
    """Where trtexec is looked for, in order: ``(place, path found or None)``."""
    if explicit:
        return [(f"--trtexec {explicit}", _executable(os.path.expanduser(str(explicit))))]
    env = os.environ.get(ENV_VAR)
    if env:  # a leading ~ is the home folder (a quoted "~/bin/trtexec" reaches placetune with its ~)
        return [(f"${ENV_VAR}={env}", _executable(os.path.expanduser(env)))]
    out: list[tuple[str, str | None]] = [("PATH", shutil.which("trtexec"))]
    for d in trt_env.TRTEXEC_DIRS:
        p = str(Path(d) / "trtexec")
        out.append((p, p if _is_exe(p) else None))
    return out


def _is_exe(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _executable(value: str) -> str | None:
    if os.sep in value or (os.altsep and os.altsep in value):
        return os.path.abspath(value) if _is_exe(value) else None
    return shutil.which(value)


def which_trtexec(explicit: str | os.PathLike[str] | None = None) -> str | None:
    """The trtexec binary by the backend's lookup order, None when there is none
    (``placetune doctor`` uses this, so it agrees with the backend)."""
    for _, path in trtexec_candidates(explicit):
        if path:
            return path
    return None


def find_trtexec(explicit: str | os.PathLike[str] | None = None) -> str:
    """The trtexec binary: ``explicit`` (``--trtexec PATH``), else ``$PLACETUNE_TRTEXEC``, else
    ``PATH``, else ``/usr/src/tensorrt/bin/trtexec``. An explicit path or the environment
    variable, when given, must be right: placetune does not silently use another trtexec.

    Raises:
        BackendError: no executable trtexec; the message names every place looked.
    """
    cands = trtexec_candidates(explicit)
    for _, path in cands:
        if path:
            return path
    places = "; ".join(p for p, _ in cands)
    if explicit or os.environ.get(ENV_VAR):
        raise BackendError(f"trtexec not found: {places} is not an executable file. Pass the path of TensorRT's "
                           "trtexec (JetPack: /usr/src/tensorrt/bin/trtexec)")
    raise BackendError(f"trtexec not found (looked in: {places}). JetPack installs it as "
                       f"/usr/src/tensorrt/bin/trtexec (package tensorrt / libnvinfer-bin); pass --trtexec PATH, "
                       f"set {ENV_VAR}=PATH, or add its directory to PATH")
