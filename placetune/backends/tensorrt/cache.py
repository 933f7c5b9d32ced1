"""The tensorrt backend's on-disk engine cache (parent side; the worker reads and writes the files).

A pipeline placement runs one engine per segment; placements that share a segment (same
layers on the same device) share its engine. Engines are keyed by what makes them differ:
the content hash of the ONNX they are built from (the cut sub-model, weights included),
the device, the precision, the TensorRT version, the platform and L4T release, the input
shapes (a dynamic ONNX's optimisation profile), the power mode the measurement records and
the clock lock (TensorRT picks its tactics by timing them under the running clocks) and the
build options (GPU fallback, DLA layers, memory pools, calibration cache). The layout under the cache
directory::

    segments/<content hash>.onnx     cut sub-models (written by the parent)
    engines/<key>.plan               serialized engines (written by the worker)
    engines/<key>.plan.json          their build record: TensorRT version, build log,
                                     network layers, build seconds, size

A plan counts as cached only with its record and only for the TensorRT version that
built it; files are replaced atomically and locked (``<file>.lock``) while written.

Example:
    >>> key = engine_key("ab12", "DLA0", "fp16", "8.5.2", "orin-agx", gpu_fallback=True)
    >>> len(key)
    40
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import onnx

from placetune.files.cache import cached_file
from placetune.files.read import file_digest

__all__ = ["EngineCache", "engine_key", "file_digest", "CACHE_FORMAT"]

#: Bumped when the key or the files change meaning.
CACHE_FORMAT = 3  # 2: a node's further layers follow it on 8.5; Q/DQ networks get no placeholder ranges; 3: a DLA
#: build prefers precision constraints (as trtexec), INT8 placeholder ranges follow TensorRT's layers


def engine_key(content: str, device: str, precision: str, trt_version: str, platform: str, l4t: str | None = None,
               **options: Any) -> str:
    """The cache key of an engine (40 hex characters).

    Args:
        content: content hash of the ONNX the engine is built from.
        device: ``GPU``, ``DLA0`` or ``DLA1``.
        precision: ``fp16``, ``int8`` or ``fp32``.
        trt_version: the worker's TensorRT version.
        platform: the Jetson platform (engines are specific to the GPU they were built on).
        l4t: the L4T release (``R36.4.3``; :func:`placetune.backends.tensorrt.env.read_l4t`): the
            DLA compiler ships with L4T, not with TensorRT, so one TensorRT version on two L4T
            releases may compile different DLA loadables.
        **options: anything else that changes the engine (JSON-serialisable).
    """
    doc = {"format": CACHE_FORMAT, "content": content, "device": device, "precision": precision,
           "trt": trt_version, "platform": platform, "l4t": l4t, "options": options}
    return hashlib.sha1(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


class EngineCache:
    """Paths and bookkeeping of the engine cache under ``root``.

    Args:
        root: the cache directory (the backend's ``cache_dir``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self.engines_dir = self.root / "engines"
        self.segments_dir = self.root / "segments"

    def plan_path(self, key: str) -> Path:
        """Where the engine of ``key`` lives (its record is the same path plus ``.json``)."""
        return self.engines_dir / f"{key}.plan"

    def has(self, key: str, trt_version: str | None = None) -> bool:
        """True when a complete entry exists (for ``trt_version``, when given)."""
        plan = self.plan_path(key)
        meta = plan.with_name(plan.name + ".json")
        if not (plan.is_file() and meta.is_file()):
            return False
        if trt_version is None:
            return True
        try:
            record = json.loads(meta.read_text())
        except (OSError, ValueError, RecursionError):  # (RecursionError: nested too deeply)
            return False
        # a record that is no JSON object (damaged, edited) is no entry: the engine is built again
        return isinstance(record, dict) and record.get("trt_version") == trt_version

    def segment_file(self, content: str, proto: onnx.ModelProto | Callable[[], onnx.ModelProto]) -> Path:
        """The sub-model of content hash ``content`` as a file (written once; ``proto`` may be a
        function that makes it, called only then)."""
        # a segment cut short or edited is made again (cached_file checks it against its digest)
        return cached_file(self.segments_dir / f"{content}.onnx",
                           lambda: (proto() if callable(proto) else proto).SerializeToString(deterministic=True))

    def stats(self) -> dict[str, int]:
        """``{"engines": complete entries, "bytes": their plan bytes, "segments": sub-model files}``."""
        plans = [p for p in self.engines_dir.glob("*.plan") if p.with_name(p.name + ".json").is_file()] \
            if self.engines_dir.is_dir() else []
        segs = list(self.segments_dir.glob("*.onnx")) if self.segments_dir.is_dir() else []
        return {"engines": len(plans), "bytes": sum(p.stat().st_size for p in plans), "segments": len(segs)}

    def clear(self) -> int:
        """Delete every cached engine and sub-model; returns the number of files removed."""
        n = 0
        for d in (self.engines_dir, self.segments_dir):
            if d.is_dir():
                for p in d.iterdir():
                    if p.is_file():
                        p.unlink()
                        n += 1
        return n
