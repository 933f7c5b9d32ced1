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

**Parser lines.** At VERBOSE the ONNX parser says which node it parses and every layer it registers
(onnx-tensorrt ``ModelImporter.cpp``: ``LOG_VERBOSE("Parsing node: " << nodeName << " [" << op << "]")``;
``ImporterContext.cpp`` ``registerLayer``: ``"Registering layer: " << uniqueName << " for ONNX node: "
<< basename``, and from 10.0-GA ``" required by ONNX-TRT"`` for a layer registered without a node;
the same on 8.5-GA, 8.6-GA, 10.0-GA, 10.1-GA and main; older parsers put ``ModelImporter.cpp:107: ``
before the text). A layer registered for the node being parsed is that node's (TensorRT 8.5, which
sets no layer metadata, names a node's second layer ``<node>_<k>``: ``generateUniqueName``, one global
counter ``k``); any other layer registered meanwhile (a Constant named after its weights, an
``ONNXTRT_*`` layer) is a helper serving that node. :func:`parser_layers` reads them; layers the
parser never registers keep TensorRT's ``(Unnamed Layer* N) [Type]`` and are not in these lines.

**Layers the 8.x parser never registers.** onnx-tensorrt 8.5-GA and 8.6-GA make some layers with
``ctx->network()->add*`` and never call ``registerLayer`` on them, so they keep TensorRT's default
name and appear in no parser line: the broadcast Shuffle of ``broadcastTensor``
(8.5-GA ``onnx2trt_utils.cpp:163``), the Shuffles of ``squeezeTensor``/``unsqueezeTensor``
(``:1858``, ``:2113``; around a 1-D Conv or pooling), a Gemm's bias ElementWise
(``builtin_op_importers.cpp:1656``). (``registerLayer`` with an empty basename keeps the default
name too, but logs it: ``ImporterContext.cpp:97-101``, 8.6-GA ``:117-121``; such a layer is in
the lines.) ``N`` in the default name numbers the network's layers (an assumption consistent with
the corpus: TensorRT's naming is not in the open sources), but the lines give no index of the
registered layers, so an unregistered layer cannot be placed between them: a
``{ForeignNode[A...B]}`` with such an end cannot be read (:func:`unregistered_end`). A fused name
(``Gemm_15 + linear.bias + (Unnamed Layer* 19) [Shuffle] + ...``) still names its registered layers.

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
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

ONNX_LAYER = "[ONNX Layer: "
#: what joins the metadata of the layers fused into one engine layer
FUSED_SEPARATORS = ("\x1f", "\x1e")
_PROPERTY = " | "
_OFFLOADED = re.compile(r"^\{.*\}\s+successfully offloaded to DLA\b")
_SOURCE_LOCATION = r"^(?:[\w.]+\.(?:cpp|hpp|h):\d+:\s*)?"
_PARSING = re.compile(_SOURCE_LOCATION + r"Parsing node:\s?(?P<node>.*)\s\[(?P<op>[^\[\]]*)\]\s*$")
_REGISTERING = re.compile(_SOURCE_LOCATION + r"Registering layer:\s(?P<layer>.*?)\s"
                          r"(?:for ONNX node:(?:\s(?P<base>.*))?|required by ONNX-TRT)\s*$")
_UNNAMED = re.compile(r"^\(Unnamed Layer\* \d+\) \[[^\[\]]*\]$")
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


def is_parser_line(message):
    # type: (str) -> bool
    """Whether a TensorRT log message is the ONNX parser's ``Parsing node:`` or ``Registering layer:``."""
    text = str(message).strip()
    return bool(_REGISTERING.match(text) or _PARSING.match(text))


def parser_layers(messages):
    # type: (List[str]) -> List[Tuple[str, Optional[str], bool]]
    """``(layer, node, helper)`` per layer the parser registered, in order: ``node`` is the ONNX node
    being parsed (None before the first or for an unnamed one); ``helper`` is False for a layer
    registered for that node itself, True for one it added to serve it.

    Example:
        >>> parser_layers(["Parsing node: s [Sum]", "Registering layer: s for ONNX node: s",
        ...                "Registering layer: s_3 for ONNX node: s",
        ...                "Registering layer: ONNXTRT_Broadcast_4 required by ONNX-TRT"])
        [('s', 's', False), ('s_3', 's', False), ('ONNXTRT_Broadcast_4', 's', True)]
    """
    out = []  # type: List[Tuple[str, Optional[str], bool]]
    node = None  # type: Optional[str]
    for message in messages:
        text = str(message).strip()
        m = _PARSING.match(text)
        if m:
            node = m.group("node").strip() or None
            continue
        m = _REGISTERING.match(text)
        if not m:
            continue
        base = (m.group("base") or "").strip() or None
        if node is None:
            out.append((m.group("layer"), base, base is None))
        else:
            out.append((m.group("layer"), node, base != node))
    return out


def parser_owners(messages):
    # type: (List[str]) -> Dict[str, str]
    """Layer -> ONNX node for the layers the parser registered for the node it was parsing
    (:func:`parser_layers` without its helpers): TensorRT 8.5's ``<node>_<k>`` layers included."""
    return dict((layer, node) for layer, node, helper in parser_layers(messages) if node and not helper)


def unregistered_end(body, known):
    # type: (str, Any) -> Optional[str]
    """The end of a ``{ForeignNode[A...B]}`` range body that is a TensorRT default name
    ``(Unnamed Layer* N) [Type]`` missing from ``known`` (the network's layers as read: those the
    parser registered), while the other end is known or unnamed too; None when none is (the body
    is a known range, a fused list, or names no unnamed layer). Such a range's members cannot be
    read: the layers between its ends are unknown.

    Example:
        >>> unregistered_end("Conv_0...(Unnamed Layer* 20) [ElementWise]", {"Conv_0": 0})
        '(Unnamed Layer* 20) [ElementWise]'
        >>> unregistered_end("Conv_0...Relu_7", {"Conv_0": 0, "Relu_7": 1}) is None
        True
    """
    pos = body.find("...")
    while pos >= 0:
        ends = [x for x in (body[:pos], body[pos + 3:]) if x not in known]
        if ends and all(_UNNAMED.match(x) for x in ends):
            return ends[0]
        pos = body.find("...", pos + 1)
    return None
