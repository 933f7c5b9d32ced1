"""Which errors of a TensorRT build or run are the DLA's own, and which say a layer was refused on the DLA.

Two different things end a DLA build in an error that names the DLA:

* the DLA itself failed: its compiler, a loadable, the NvMedia/cuDLA runtime (:func:`dla_failure`,
  ``failure_class`` ``dla``);
* the placement asked a layer onto the DLA that the DLA cannot run, with GPU fallback off
  (``gpu_fallback = false``; trtexec without ``--allowGPUFallback``): nothing failed but the request
  (:func:`dla_refused`, ``failure_class`` ``dla_unsupported``). TensorRT then also says ``DLA validation
  failed``, which alone reads as the DLA's failure. The real forms (tests/data/trt_corpus):

  - TensorRT 10.3 on an AGX Orin (YOLO11n's attention MatMul, corpus
    yolo11-orin-10.3-grep-strict-dla-rejected-attention-matmul): ``Error Code 2: Internal Error (Assertion
    allowGPUFallback failed. Layer '/model.10/m/m.0/attn/MatMul' is not supported on DLA but GPU fallback is
    not enabled.)`` then ``Error Code 4: API Usage Error (DLA validation failed)``;
  - TensorRT 8.0 on a Xavier NX (corpus trt-1529-xavier-nx-dla-no-fallback-errors): ``Default DLA is enabled
    but layer 283 copy is not supported on DLA and falling back to GPU is not enabled.``, one per layer.

Example:
    >>> dla_refused(["Default DLA is enabled but layer conv1 is not supported on DLA and falling back to GPU "
    ...              "is not enabled.", "DLA validation failed"])
    ['conv1']
    >>> dla_failure(["NVMEDIA_DLA : 308, ERROR: runtime submit failed"]) is not None
    True
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["dla_failure", "dla_refused", "refused_reason"]

#: a failure that is the DLA's (compiler, loadable, NvMedia/cuDLA runtime), not the GPU build's
_DLA_FAILURE = re.compile(r"NVMEDIA_DLA|nvmedia|\bDLA (?:Error|LAYER)|nvdla|dlaUtils|DLA \(Failure|kNVM\b|"
                          r"DLA_STANDALONE|cuDLA|"
                          # 8.4's DLA compiler: the NVM (DLA) region optimiser's assertion, a standalone
                          # (safety) DLA build refused because the network splits into several DLA graphs
                          r"nvmRegionOptimizer|isDLA\(|certified DLA|"
                          r"Cannot create DLA engine|\bDLA\b.*\b(?:failed|error)\b", re.I)
#: a layer refused on the DLA because GPU fallback is off (the two real forms above)
_REFUSED = (
    re.compile(r"Layer '(?P<n>.+?)' is not supported on DLA but GPU fallback is not enabled"),
    re.compile(r"Default DLA is enabled but layer (?P<n>.+?) is not supported on DLA and falling back to GPU "
               r"is not enabled"),
)


def dla_failure(errors: Sequence[str]) -> str | None:
    """The first error that is the DLA's (NvMedia/cuDLA runtime, DLA compiler or loadable), or None."""
    return next((e for e in errors if _DLA_FAILURE.search(e)), None)


def dla_refused(errors: Sequence[str]) -> list[str]:
    """The layers TensorRT refused to build on the DLA because they cannot run there and GPU fallback is
    off, in order, once each (empty when no error says so)."""
    out: list[str] = []
    for e in errors:
        for pattern in _REFUSED:
            for m in pattern.finditer(e):
                if m.group("n") not in out:
                    out.append(m.group("n"))
    return out


def refused_reason(layers: Sequence[str], detail: str) -> str:
    """The failure's reason for layers :func:`dla_refused` found: the placement's, not the DLA's."""
    shown = ", ".join(layers[:5]) + (f" and {len(layers) - 5} more" if len(layers) > 5 else "")
    return (f"{len(layers)} layer(s) asked on the DLA cannot run there and GPU fallback is off "
            f"(gpu_fallback = false): {shown} ({detail})")
