"""DLA support rules: can TensorRT run this layer on a DLA core, and if not, why.

The rules encode NVIDIA's published DLA restrictions (reference ``tensorrt-dla.md`` §3:
general rules G1-G8, the per-layer table of §3.2, the Orin/Xavier differences of §3.4 and
the DLA-SW operator matrix of §3.5) for one ONNX layer as placetune's importer describes it
(:class:`~placetune.model.layer.Layer`). A layer is judged on its own; rules that depend on the
neighbours (a reshape next to Slice/Concat, a comparison's consumer) apply only when the
``model`` is passed. What is not known to run on the DLA is reported as unsupported with a
reason: no op is ever silently supported.

These rules predict ``IBuilderConfig.can_run_on_DLA``; they do not replace it. On a device,
the realised placement (build log ``[DlaLayer]`` lines) is the truth.

Example:
    >>> from placetune.hardware.dla import check_layer
    >>> s = check_layer(layer, "xavier-agx", "fp16")          # doctest: +SKIP
    >>> s.supported, s.reason                                   # doctest: +SKIP
    (False, 'Softmax not supported on Xavier DLA')
"""

from placetune.hardware.dla.check import SUPPORTED_PRECISIONS, check_layer, check_model
from placetune.hardware.dla.context import Support, parse_trt_version
from placetune.hardware.dla.conv import cbuf_banks
from placetune.hardware.dla.trt_types import trt_layer_type

__all__ = [
    "SUPPORTED_PRECISIONS",
    "Support",
    "check_layer",
    "check_model",
    "trt_layer_type",
    "parse_trt_version",
    "cbuf_banks",
]
