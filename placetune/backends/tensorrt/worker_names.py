"""How TensorRT names what it built: the ONNX nodes in a layer's metadata, and its placement log lines.

**Layer metadata.** onnx-tensorrt tags each layer it registers for an ONNX node with
``"[ONNX Layer: <node>" + properties + "]"``, each property after ``" | "``:

* 8.6-GA (``onnx2trt_utils.cpp`` ``processMetadata``/``filterDocString``): the node's doc-string
  lines, ``"[ONNX Layer: /c/Conv | <doc line> | <doc line>]"``;
* 10.0-GA / 10.1-GA (``importerUtils.cpp`` ``processMetadata``):
  ``"[ONNX Layer: /c/Conv | Local Function: B]"`` inside an ONNX local function;
* later main (``importerUtils.cpp``, commit 0137504e): the local-function stack,
  ``"[ONNX Layer: /c/Conv | b_node (B) | a_node (A)]"``;

cut to 4000 characters by keeping both ends around ``" ... "`` (``truncateString``). A fused
engine layer (engine inspector ``"Metadata"``) joins the metadata of its layers with the ASCII
unit separator ``\\x1f`` (``\\x1e`` is read as a separator too). :func:`onnx_nodes` reads every
form; the node name is everything before the first ``" | "`` or the closing ``]``, so a name
with ``]`` in it is kept whole.

**Placement lines.** With GPU fallback TensorRT reports the realised placement in the
``Layers Running on DLA/GPU`` sections (``[DlaLayer]``/``[GpuLayer]`` lines); 10.3 prints one
``{ForeignNode[...]} successfully offloaded to DLA.`` per loadable after ``Number of DLA node
candidates offloaded : N out of M`` instead of ``[DlaLayer]`` lines; some versions log all of them
at VERBOSE. A whole-network fallback (``All dla layers are falling back to GPU``) is kept too. :func:`is_placement_line` says which messages those are, so that the worker can
keep them whatever the logger's level.

Used by the worker (Python 3.8, no placetune imports: a sibling module of ``worker.py``), by
:mod:`placetune.backends.tensorrt.buildlog` and by :mod:`placetune.plan.apply`.

Example:
    >>> onnx_nodes("[ONNX Layer: /c/Conv | Local Function: B]")
    ['/c/Conv']
    >>> onnx_nodes("[ONNX Layer: /a/Conv]\\x1f[ONNX Layer: /a/Relu]")
    ['/a/Conv', '/a/Relu']
"""

import re

try:  # Python 3.8 needs typing's generics
    from typing import List, Optional
except ImportError:  # pragma: no cover
    pass

ONNX_LAYER = "[ONNX Layer: "
#: what joins the metadata of the layers fused into one engine layer
FUSED_SEPARATORS = ("\x1f", "\x1e")
_PROPERTY = " | "
_OFFLOADED = re.compile(r"^\{.*\}\s+successfully offloaded to DLA\b")
_PLACEMENT = re.compile(
    r"^(?:-+\s*Layers\s+Running\s+on\s+(?:DLA|GPU)\b|\[(?:Dla|Gpu)Layer\]|No layer is running on (?:GPU|DLA)\b"
    r"|Number of DLA node candidates offloaded\b|\{.*\}\s+successfully offloaded to DLA\b)"
    r"|All dla layers are falling back to GPU|no layer in the network can run on DLA", re.I)


def onnx_nodes(metadata):
    # type: (Optional[str]) -> List[str]
    """The ONNX nodes named in a layer's metadata, in order, no repeats (none for no metadata)."""
    if not metadata:
        return []
    text = str(metadata)
    for sep in FUSED_SEPARATORS[1:]:
        text = text.replace(sep, FUSED_SEPARATORS[0])
    out = []  # type: List[str]
    for record in text.split(FUSED_SEPARATORS[0]):
        record = record.strip()
        if not record.startswith(ONNX_LAYER):
            continue
        body = record[len(ONNX_LAYER):]
        if body.endswith("]"):
            body = body[:-1]
        name = body.split(_PROPERTY, 1)[0]
        if name and name not in out:
            out.append(name)
    return out


def onnx_node(metadata):
    # type: (Optional[str]) -> Optional[str]
    """The (first) ONNX node of a layer's metadata, or None."""
    nodes = onnx_nodes(metadata)
    return nodes[0] if nodes else None


def count_loadables(messages):
    # type: (List[str]) -> int
    """An engine's DLA loadables from its build-log messages: its ``[DlaLayer]`` lines, else (10.3's
    verbose form, no ``[DlaLayer]`` line) its ``successfully offloaded to DLA`` lines."""
    texts = [str(m).strip() for m in messages]
    dla = sum(1 for t in texts if t.startswith("[DlaLayer]"))
    return dla or sum(1 for t in texts if _OFFLOADED.match(t))


def is_placement_line(message):
    # type: (str) -> bool
    """Whether a TensorRT log message says where layers ran (the ``Layers Running on DLA/GPU``
    report, the 10.x offload lines, a whole-network fallback)."""
    return bool(_PLACEMENT.search(str(message).strip()))
