"""What a file given to placetune is when it is not what the command takes, so that the refusal can say
what to give instead: a serialized TensorRT engine (``.engine``/``.plan``/``.trt``, what a deployment
most often has at hand) or an ONNX model.

A serialized TensorRT engine starts with TensorRT's ``ftrt`` magic; Ultralytics'
``export(format="engine")`` writes a 4-byte little-endian length, that many bytes of JSON metadata,
then the engine. Both layouts are as published readers of such files describe them (no engine file
is stored in the project's corpus), and so are only ever used to word an error, never to accept a file.
Standard library only: the standalone runtime carries a copy of :func:`serialized_engine`.
"""

from __future__ import annotations

import os
from typing import Optional, Union

__all__ = ["ENGINE_MAGIC", "serialized_engine", "what_it_is"]

#: the first bytes of a serialized TensorRT engine
ENGINE_MAGIC = b"ftrt"
_HEAD = 1 << 20  # Ultralytics' metadata is a few hundred bytes; read at most this much


def serialized_engine(path: Union[str, "os.PathLike[str]"]) -> bool:
    """True when ``path`` is a regular file holding a serialized TensorRT engine (raw, or with
    Ultralytics' metadata header); False for anything else, unreadable files included."""
    try:
        if not os.path.isfile(path):  # never open a FIFO or a device: it could block
            return False
        with open(path, "rb") as fh:
            head = fh.read(_HEAD)
    except (OSError, ValueError):
        return False
    if head.startswith(ENGINE_MAGIC):
        return True
    if len(head) >= 8:
        size = int.from_bytes(head[:4], "little")
        start = 4 + size
        return 0 < size and head[4:5] == b"{" and head[start:start + 4] == ENGINE_MAGIC
    return False


def what_it_is(path: Union[str, "os.PathLike[str]"]) -> Optional[str]:
    """``"engine"`` for a serialized TensorRT engine, ``"onnx"`` for a file named ``*.onnx`` /
    ``*.onnx.gz``, else None."""
    if serialized_engine(path):
        return "engine"
    name = os.fspath(path).lower()
    return "onnx" if name.endswith((".onnx", ".onnx.gz")) else None
