"""Read what TensorRT actually placed where from its build log (pure Python, no TensorRT).

With an INFO-level logger the TensorRT builder prints, for an engine that uses a DLA
(reference tensorrt-dla.md §1.9; real excerpt in ``shared/seeds/002_*.txt``)::

    [I] [TRT] ---------- Layers Running on DLA ----------
    [I] [TRT] [DlaLayer] {ForeignNode[Relu_10...Conv_11]}
    [I] [TRT] ---------- Layers Running on GPU ----------
    [I] [TRT] [GpuLayer] SHUFFLE: Reshape_2 + (Unnamed Layer* 7) [Shuffle]

TensorRT 10.3 with ``--verbose`` (JetPack 6.2.1, AGX Orin; ``tests/data/trt_corpus``) prints no
``[DlaLayer]`` lines but ``Number of DLA node candidates offloaded : N out of M`` and one
``{ForeignNode[...]} successfully offloaded to DLA.`` per loadable before its ``[GpuLayer]`` lines;
TensorRT 7 prints each section as one line (``{a,b}, {c,d},`` on the DLA, ``a + b, c,`` on the GPU);
``All dla layers are falling back to GPU`` (and 8.4's ``no layer in the network can run on DLA``)
names no layer: the whole network ran on the GPU.

One ``[DlaLayer]`` line per DLA loadable; ``{ForeignNode[A...B]}`` names the first and last
original layer of the subgraph (every layer between them in topological order runs in it,
except those listed as GPU layers). ``[GpuLayer]`` lines name engine layers, which may be
fusions (``Conv_0 + Relu_1``, ``PWN(PWN(Sigmoid_4), Mul_5)``) or Myelin subgraphs (also
``{ForeignNode[...]}``, §0.6). Fallback warnings say why a layer left the DLA.

:func:`parse_build_log` reads the lines; :func:`locate` maps them onto a model's layers
(:mod:`placetune.backends.tensorrt.layer_profile` attributes profiled times with the same names).

Example:
    >>> log = parse_build_log([
    ...     "---------- Layers Running on DLA ----------",
    ...     "[DlaLayer] {ForeignNode[conv1...relu2]}",
    ...     "---------- Layers Running on GPU ----------",
    ...     "[GpuLayer] SHUFFLE: flatten",
    ... ])
    >>> loc = locate(log, ["conv1", "relu1", "conv2", "relu2", "flatten"])
    >>> loc.devices["conv2"], loc.devices["flatten"], loc.loadables
    ('DLA', 'GPU', 1)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from placetune.backends.tensorrt.dla_errors import dla_failure, dla_refused
from placetune.backends.tensorrt.logprefix import is_bare, one_line_failure, plain_error, split_prefix, unmarked_error
from placetune.backends.tensorrt.worker_names import onnx_node, parser_layers, unregistered_end

__all__ = [
    "TIMED",
    "BuildLog", "LogPlacement", "NameResolver", "parse_build_log", "locate",
    "split_engine_name", "onnx_name_of", "split_prefix", "unmarked_error", "dla_failure", "dla_refused", "DLA_COPY_SUFFIXES",
    "parser_network",
]

#: What the worker times (``Measurement.extra["timed"]``): the inputs are
#: uploaded once before timing; trtexec is run with ``--noDataTransfers`` to time the same.
TIMED = "compute: engine execution between CUDA events on the engines' streams, no host<->device copies"

_SECTION = re.compile(r"^-+\s*Layers\s+Running\s+on\s+(?P<dev>DLA|GPU)\s*[-:]*\s*$", re.I)
_DLA_LINE = re.compile(r"^\[DlaLayer\]\s*(?P<name>.*?)\s*,?\s*$")
_GPU_LINE = re.compile(r"^\[GpuLayer\]\s*(?:(?P<type>[A-Z][A-Z0-9_]*):\s+)?(?P<name>.*?)\s*,?\s*$")
_FOREIGN = re.compile(r"\{ForeignNode\[(?P<body>.*)\]\}")
_OFFLOADED = re.compile(r"^(?P<name>\{.*\})\s+successfully offloaded to DLA\.?\s*$")
_CANDIDATES = re.compile(r"Number of DLA node candidates offloaded\s*:\s*(?P<n>\d+)\s+out of\s+(?P<m>\d+)")
_NO_GPU_LAYER = re.compile(r"^No layer is running on (?P<dev>GPU|DLA)\b", re.I)
#: whole-network fallback: no layer is named, every layer ran on the GPU
_ALL_GPU = re.compile(r"All dla layers are falling back to GPU|no layer in the network can run on DLA", re.I)

#: Fallback warnings, newest wording first (reference §5 and §3.1 G5/G7).
_FALLBACKS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("unsupported", re.compile(r"Layer '(?P<n>.+)' \((?P<t>[^)]*)\): Unsupported on DLA\. Switching (?:this layer's device type|\.\.\.) to GPU")),
    ("unsupported", re.compile(r"Default DLA is enabled but layer (?P<n>.+?) is not supported on DLA, falling back to GPU")),
    # TensorRT <= 7 wording (seed 003's Xavier log)
    ("unsupported", re.compile(r"Default DLA is enabled but layer (?P<n>.+?) is not running on DLA, falling back to GPU")),
    ("subgraph_limit", re.compile(r"DLA supports only (?P<k>\d+) subgraphs per DLA core\. Switching to GPU for layer (?P<n>.+?)\.?\s*$")),
    ("validation", re.compile(r"Validation failed for DLA layer: (?P<n>.+?)\. Switching to GPU fallback")),
    ("precision", re.compile(r"DLA only supports FP16 and Int8 precision type\. Switching (?P<n>.+?) device type to GPU")),
    ("split", re.compile(r"Splitting DLA subgraph at: (?P<n>.+?) because DLA validation failed for this layer")),
    # an INT8 node the DLA cannot take for want of a quantisation scale (8.5/8.6 with QDQ or a calibration gap)
    ("precision", re.compile(r"Node: (?P<n>.+?) cannot run in INT8 mode due to missing scale and zero point\. "
                             r"This node will not run on DLA")),
)
_SKIP_PREFIXES = ("Reformatting CopyNode", "Reformat ")
_BOUNDARY = set(" ()[]{},+")


@dataclass
class BuildLog:
    """What a TensorRT build log says about placement.

    Attributes:
        dla_subgraphs: the ``[DlaLayer]`` entries as printed (one per DLA loadable).
        gpu_layers: ``(TYPE, engine layer name)`` of every ``[GpuLayer]`` line.
        fallbacks: layer name (as TensorRT names it) -> the warning that moved it to the GPU.
        subgraph_limit: layers switched to the GPU by the 16-subgraphs-per-core rule.
        errors: ERROR lines (severity from the logger, or ``[E]``/``Error`` text).
        warnings: WARNING lines.
        has_sections: True when a ``Layers Running on DLA/GPU`` header or a layer line was seen.
        dla_offloaded: the ``{ForeignNode[...]} successfully offloaded to DLA.`` entries (10.x verbose).
        dla_candidates: ``(offloaded, candidates)`` of ``Number of DLA node candidates offloaded``.
        all_gpu: the message saying the whole network fell back to the GPU (None when none).
        dla_section: a ``Layers Running on DLA`` header or ``No layer is running on DLA`` was seen.
    """

    dla_subgraphs: list[str] = field(default_factory=list)
    gpu_layers: list[tuple[str, str]] = field(default_factory=list)
    fallbacks: dict[str, str] = field(default_factory=dict)
    subgraph_limit: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    has_sections: bool = False
    dla_offloaded: list[str] = field(default_factory=list)
    dla_candidates: tuple[int, int] | None = None
    all_gpu: str | None = None
    dla_section: bool = False

    @property
    def reports_dla(self) -> bool:
        """Whether the log says anything of the DLA side in a form read here: a DLA loadable, the DLA
        section (even empty), the offload count or a whole-network fallback. A log with ``[GpuLayer]``
        lines only does not: where the layers asked on the DLA went is then unread, not "nowhere"."""
        return bool(self.dla_nodes) or self.dla_section or self.dla_candidates is not None or self.all_gpu is not None

    @property
    def dla_nodes(self) -> list[str]:
        """The DLA loadables as named: the ``[DlaLayer]`` entries, else the ``successfully offloaded``
        ones (TensorRT 10.3 verbose prints only the latter)."""
        return self.dla_subgraphs or self.dla_offloaded

    @property
    def loadables(self) -> int:
        """Number of DLA loadables (``[DlaLayer]`` lines, else ``successfully offloaded`` lines)."""
        return len(self.dla_nodes)

    @property
    def reports_placement(self) -> bool:
        """Whether the log says where the layers ran (sections, offload lines or a whole-network fallback)."""
        return self.has_sections or bool(self.dla_offloaded) or self.all_gpu is not None


@dataclass
class LogPlacement:
    """A build log mapped onto a model's layers.

    Attributes:
        devices: model layer -> ``"DLA"`` or ``"GPU"`` for every layer the log locates.
        loadables: DLA loadables in the engine.
        subgraphs: model layers of each DLA loadable, in log order.
        fallback: model layer -> warning text, for layers a fallback warning names.
        subgraph_limit: model layers switched to the GPU by the 16-subgraph rule.
        unmapped: names from the log that match no model or network layer.
        unresolved: ``(name, end)`` of each ``{ForeignNode[A...B]}`` whose end the parser never registered.
        range_interior: model layers placed on the DLA only by lying inside a ``{ForeignNode[A...B]}`` range.
    """

    devices: dict[str, str] = field(default_factory=dict)
    loadables: int = 0
    subgraphs: list[list[str]] = field(default_factory=list)
    fallback: dict[str, str] = field(default_factory=dict)
    subgraph_limit: list[str] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    unresolved: list[tuple[str, str]] = field(default_factory=list)
    range_interior: list[str] = field(default_factory=list)


def _severity(sev: object, prefix: str | None) -> str:
    """Normalise a severity to ``E``, ``W``, ``I`` or ``V``."""
    if prefix:
        return "E" if prefix == "F" else prefix
    text = str(sev).upper() if sev is not None else ""
    if "ERROR" in text or text in ("0", "1"):
        return "E"
    if "WARN" in text or text == "2":
        return "W"
    if "VERBOSE" in text or text == "4":
        return "V"
    return "I"


def parse_build_log(lines: Iterable[str | tuple[object, str] | Sequence[object]]) -> BuildLog:
    """Parse a build log.

    Args:
        lines: log lines, either plain strings (trtexec output, with or without its
            ``[date] [I] [TRT]`` prefixes) or ``(severity, message)`` pairs as a
            ``trt.ILogger`` receives them (severity as a name like ``"WARNING"`` or an int).

    Returns:
        The parsed :class:`BuildLog`.
    """
    out = BuildLog()
    pending: str | None = None  # the device of a TensorRT 7 section header whose list is the next line
    partial: tuple[str, str] | None = None  # (device, text) of a TensorRT 7 list line not yet ended by its comma
    # within an error or warning message: a bare line (no prefix of its own) right after it continues it (the
    # builder's "Engine generation failed with backend strategy 3." warning goes on "Error message: ..." and
    # "Skipping this backend strategy." on lines of their own)
    cont, last = False, ""  # last: the latest error or warning message, which a bare line may go on
    for item in lines:
        if isinstance(item, str):
            sev_in, text = None, item
        else:
            sev_in, text = item[0], str(item[1])
        for raw in text.splitlines() or [""]:
            prefix, msg = split_prefix(raw)
            if partial is not None:
                if msg and prefix is None and msg == raw.strip() and not _SECTION.match(msg):
                    # a console wrapped the list line: it goes on on a bare line, the break inside a name
                    partial = (partial[0], partial[1] + msg)
                    if _SECTION_LIST.match(partial[1]):
                        _read_list(out, partial[0], _split_top(partial[1]))
                        partial = None
                    continue
                _read_partial(out, partial)
                partial = None
            if not msg:
                pending = None  # TensorRT 7: a blank line after the header is an empty section
                cont = False
                continue
            bare = is_bare(raw, msg)
            sev = _severity(sev_in, prefix)
            own_line = prefix is None and sev == "I" and plain_error(msg, sev_in is None, bare and cont)
            sev = "E" if own_line else sev
            # a one-line failure (a shell's signal report, an application's "... failed", a Python exception) ends
            # its message: make's "make: *** [target] Error 1" after it is an error of its own
            cont = (sev in ("E", "W") and not (own_line and one_line_failure(msg))) or (cont and bare)
            sm = _SECTION.match(msg)
            if sm:
                out.has_sections = True
                out.dla_section = out.dla_section or sm.group("dev").upper() == "DLA"
                # "--------------- Layers running on DLA:" (up to 8.x): the list may follow on one line
                pending = sm.group("dev").upper() if msg.rstrip().endswith(":") else None
                continue
            if pending is not None and not msg.startswith(("[DlaLayer]", "[GpuLayer]")) \
                    and not _NO_GPU_LAYER.match(msg) and _SECTION_LIST.match(msg):
                _read_list(out, pending, _split_top(msg))
                pending = None
                continue
            if pending is not None and _LIST_START.match(msg):
                partial = (pending, msg)  # its end is on the next bare lines, or cut (read at the next line)
                pending = None
                continue
            pending = None
            om = _OFFLOADED.match(msg)
            if om:
                out.dla_offloaded.append(om.group("name"))
                continue
            cm = _CANDIDATES.search(msg)
            if cm:
                out.dla_candidates = (int(cm.group("n")), int(cm.group("m")))
                continue
            nm = _NO_GPU_LAYER.match(msg)
            if nm:
                out.has_sections = True
                out.dla_section = out.dla_section or nm.group("dev").upper() == "DLA"
                continue
            if out.all_gpu is None and _ALL_GPU.search(msg):  # wrapped onto a bare line: the message whole
                out.all_gpu = f"{last} {msg}" if prefix is None and bare and cont and last else msg
            dm = _DLA_LINE.match(msg)
            if dm:
                out.has_sections = True
                out.dla_subgraphs.append(dm.group("name"))
                continue
            gm = _GPU_LINE.match(msg)
            if gm:
                out.has_sections = True
                out.gpu_layers.append((gm.group("type") or "", gm.group("name")))
                continue
            for kind, pat in _FALLBACKS:
                fm = pat.search(msg)
                if fm:
                    name = fm.group("n").strip().strip("'")
                    out.fallbacks.setdefault(name, msg)
                    if kind == "subgraph_limit":
                        out.subgraph_limit.append(name)
                    break
            if sev in ("E", "W"):
                (out.errors if sev == "E" else out.warnings).append(msg)
                last = msg
    if partial is not None:
        _read_partial(out, partial)
    return out


#: a TensorRT 7 section list: DLA groups ``{a,b}, {c},`` or GPU layers ``a + b, c,``
_SECTION_LIST = re.compile(r"^(?:\{.*\},?|[^\[].*,)\s*$")


def _split_top(text: str) -> list[str]:
    """``"a + b, PWN(c, d), e,"`` -> ``["a + b", "PWN(c, d)", "e"]`` (commas inside brackets kept)."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    out.append("".join(cur).strip())
    return [x for x in out if x]


#: the start of a TensorRT 7 list line whose closing comma is not on it: DLA groups (``{a,b}, {c``) or GPU
#: layers (``a + b, c, d``); a log message (a sentence, ``... performance, please check verbose output.``) is none
_LIST_START = re.compile(r"^(?:\{.*|[^\[].*,.*,.*)(?<![.:])\s*$")


def _read_partial(out: BuildLog, partial: tuple[str, str]) -> None:
    """A TensorRT 7 list line that never reached its closing comma: the published text is cut inside its
    last item (``..., Times212_reshape0, (Unnamed Layer* 0) [Cons``). TensorRT writes every item followed by
    a comma, so the items before the last comma are whole and read; the fragment after it is no name. A
    GPU list needs two whole items to be taken for one (a DLA list, one ``{...}`` group)."""
    device, text = partial
    items = _split_top(text)[:-1]
    if items and (text.startswith("{") or len(items) >= 2):
        _read_list(out, device, items)


def _read_list(out: BuildLog, device: str, items: list[str]) -> None:
    """A TensorRT 7 section printed as one line: each ``{...}`` group is a DLA loadable; GPU layers
    are comma-separated engine layer names."""
    out.has_sections = True
    for item in items:
        if device == "DLA":
            out.dla_subgraphs.append(item)
        else:
            out.gpu_layers.append(("", item))


def onnx_name_of(metadata: str | None) -> str | None:
    """The ONNX node name in a layer's metadata (``"[ONNX Layer: /conv1/Conv | Local Function: B]"``
    -> ``"/conv1/Conv"``; the first node of a fused layer's), or None
    (:func:`placetune.backends.tensorrt.worker_names.onnx_nodes` reads every form)."""
    return onnx_node(metadata)


def _find_known(text: str, known: Mapping[str, object], longest_first: Sequence[str]) -> list[str]:
    """Known names occurring in ``text`` at name boundaries, longest match first, no overlaps."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str]] = []
    for name in longest_first:
        if len(name) > len(text):
            continue
        start = text.find(name)
        while start >= 0:
            end = start + len(name)
            ok_left = start == 0 or text[start - 1] in _BOUNDARY
            ok_right = end == len(text) or text[end] in _BOUNDARY
            if ok_left and ok_right and not any(s < end and start < e for s, e in taken):
                taken.append((start, end))
                found.append((start, name))
            start = text.find(name, start + 1)
    return [n for _, n in sorted(found)]


def split_engine_name(name: str, known: Mapping[str, object], longest_first: Sequence[str] | None = None) -> list[str]:
    """Original layer names inside an engine layer name.

    ``Conv_0 + Relu_1`` -> ``[Conv_0, Relu_1]``; ``PWN(PWN(Sigmoid_4), Mul_5)`` ->
    ``[Sigmoid_4, Mul_5]``; ``A + B || C + D`` (parallel branches in one layer) -> ``[A, B, C, D]``.
    Tokens are first split structurally; a token that is not a known
    name is searched for known names (so names containing ``+`` or ``,`` still match).

    Args:
        name: an engine layer name from the log or the profiler.
        known: the layer names that may occur (a set or dict).
        longest_first: ``known`` sorted by decreasing length (computed when None).
    """
    out: list[str] = []
    unresolved = False
    for token in re.split(r" \+ | \|\| |, ", name):  # fused (+), parallel branches (||), PWN arguments
        t = token.strip()
        while t.startswith("PWN("):
            t = t[4:]
        while t.endswith(")") and t.count(")") > t.count("("):
            t = t[:-1]
        t = t.strip()
        if t in known:
            out.append(t)
        elif t:
            unresolved = True
    if unresolved:
        order = longest_first if longest_first is not None else sorted(known, key=len, reverse=True)
        for n in _find_known(name, known, order):
            if n not in out:
                out.append(n)
    return out


def _foreign_range(body: str, index: Mapping[str, int]) -> tuple[str, str] | None:
    """Split ``A...B`` (or a single ``A``) into known names; tries every ``...`` position."""
    if body in index:
        return body, body
    pos = body.find("...")
    while pos >= 0:
        a, b = body[:pos], body[pos + 3:]
        if a in index and b in index:
            return a, b
        pos = body.find("...", pos + 1)
    return None


class NameResolver:
    """Maps names TensorRT prints (engine layers, ForeignNode ranges, warnings) to model layers.

    Args:
        model_names: the model's layer names in topological order (ONNX node names).
        network: the TensorRT network's layers in order as ``(layer name, ONNX node name
            from its metadata or None)``. Parser helper layers (``X_3``, ``ONNXTRT_...``,
            ``(Unnamed Layer* 7) [Shuffle]``) then count for their ONNX node. Without it the
            model's own order is used and helper layers cannot be attributed.
    """

    def __init__(self, model_names: Sequence[str], network: Sequence[tuple[str, str | None]] | None = None) -> None:
        self.model_names = list(model_names)
        self.model_set = set(self.model_names)
        if network is None:
            network = [(n, None) for n in self.model_names]
        self.order = [n for n, _ in network]
        self.index = {n: i for i, n in enumerate(self.order)}
        self.owner: dict[str, str | None] = {}
        for n, onnx_name in network:
            if n in self.model_set:
                self.owner[n] = n
            elif onnx_name in self.model_set:
                self.owner[n] = onnx_name
            else:
                self.owner[n] = None
        self.known: dict[str, int] = dict(self.index)
        for n in self.model_names:
            self.known.setdefault(n, -1)
        self.longest = sorted(self.known, key=len, reverse=True)
        self.unresolved: list[tuple[str, str]] = []  # ranges whose members cannot be read (unregistered_end)

    def model_layer(self, name: str) -> str | None:
        """The model layer a network layer belongs to (None for none)."""
        if name in self.owner:
            return self.owner[name]
        return name if name in self.model_set else None

    def network_layers(self, engine_name: str) -> list[str] | None:
        """Network layers inside an engine layer name; None when the name is a builder-made
        layer (reformat, copy) that stands for no layer of its own; [] when nothing matched."""
        if engine_name.startswith(_SKIP_PREFIXES) or engine_name.endswith(_DLA_COPY_SUFFIXES):
            return None
        if engine_name.startswith("{") and engine_name.endswith("}") and not engine_name.startswith("{ForeignNode["):
            found = []  # a TensorRT 7 DLA group: its layers, comma-separated
            for token in engine_name[1:-1].split(","):
                for n in ([token.strip()] if token.strip() in self.known else split_engine_name(token, self.known, self.longest)):
                    if n not in found:
                        found.append(n)
            return found
        fm = _FOREIGN.search(engine_name)
        if fm:
            rng = _foreign_range(fm.group("body"), self.index)
            if rng is None and (end := unregistered_end(fm.group("body"), self.index)) is not None:
                self.unresolved.append((engine_name, end))
            if rng is None:  # a fused list, {ForeignNode[A + B + C]}, or nothing known
                return split_engine_name(fm.group("body"), self.known, self.longest)
            i, j = self.index[rng[0]], self.index[rng[1]]
            return self.order[min(i, j): max(i, j) + 1]
        return split_engine_name(engine_name, self.known, self.longest)

    def range_ends(self, engine_name: str) -> tuple[str, str] | None:
        """The network layers that end a ``{ForeignNode[A...B]}`` range (None: not a range)."""
        fm = _FOREIGN.search(engine_name)
        return _foreign_range(fm.group("body"), self.index) if fm else None

    def is_range(self, engine_name: str) -> bool:
        """Whether ``engine_name`` is a DLA loadable named by its first and last layers
        (``{ForeignNode[A...B]}``), read as every network layer between them in network order."""
        fm = _FOREIGN.search(engine_name)
        return bool(fm) and _foreign_range(fm.group("body"), self.index) is not None

    def model_layers(self, engine_name: str) -> list[str]:
        """Model layers inside an engine layer name (in model order, no repeats)."""
        members = self.network_layers(engine_name) or []
        found = {m for m in (self.model_layer(n) for n in members) if m is not None}
        return [n for n in self.model_names if n in found]


def parser_network(messages: Iterable[str]) -> list[tuple[str, str | None]]:
    """The network of a ``--verbose`` build as :class:`NameResolver` takes it, from the ONNX parser's
    ``Parsing node``/``Registering layer`` messages (worker_names.parser_layers): every layer the
    parser registered, in order, with the node it was made for or serves (a helper counts for the
    node being parsed). Layers it never registers (``(Unnamed Layer* N) [Type]``) are not in it."""
    return [(layer, node) for layer, node, _helper in parser_layers(list(messages))]


#: engine layers TensorRT adds around a DLA loadable (its input/output copies)
DLA_COPY_SUFFIXES = (" to nvm", " from nvm", " copy finish")
_DLA_COPY_SUFFIXES = (*DLA_COPY_SUFFIXES, " copy")


def locate(
    log: BuildLog,
    model_names: Sequence[str],
    network: Sequence[tuple[str, str | None]] | None = None,
    gpu_asked: Collection[str] = (),
) -> LogPlacement:
    """Map a parsed build log onto a model's layers.

    Args:
        log: from :func:`parse_build_log`.
        model_names: the model's layer names in topological order (ONNX node names).
        network: ``(layer name, ONNX node name or None)`` of the TensorRT network, in order
            (see :class:`NameResolver`).
        gpu_asked: model layers the placement asked on the GPU. A DLA loadable named by its ends
            (``{ForeignNode[A...B]}``) is read as the network layers between them in network order;
            a layer asked on the GPU that lies between (a parallel branch) is not in it: TensorRT
            puts into a DLA loadable only layers whose device type is the DLA
            (``IBuilderConfig.set_device_type``), so it is left out of the range.

    Returns:
        A :class:`LogPlacement`. A model layer takes the device of the network layer named
        like it; failing that, the device most of its helper layers have (GPU on a tie).
        Layers the log does not mention (optimised away, folded) are left out of ``devices``.
    """
    names = NameResolver(model_names, network)
    net_dev: dict[str, str] = {}
    res = LogPlacement(loadables=log.loadables)
    if log.all_gpu is not None and not log.dla_nodes:  # the whole network fell back: every layer on the GPU
        for m in names.model_names:
            res.devices[m] = "GPU"
            res.fallback[m] = log.all_gpu
    asked_gpu = set(gpu_asked)
    named: set[str] = set()  # model layers a DLA entry names other than as a range's interior
    interior: set[str] = set()
    for entry in log.dla_nodes:
        members = names.network_layers(entry) or []
        if asked_gpu and names.is_range(entry):  # a layer asked on the GPU is never in a DLA loadable
            members = [n for n in members if not (n in asked_gpu and names.model_layer(n) == n)]
        if not members:
            res.unmapped.append(entry)
        for n in members:
            net_dev[n] = "DLA"
        res.subgraphs.append(members)
        ends = names.range_ends(entry)
        end_layers = {names.model_layer(n) for n in ends} if ends else None
        for m in (names.model_layer(n) for n in members):
            if m is not None:
                (interior if end_layers is not None and m not in end_layers else named).add(m)
    res.range_interior = [m for m in names.model_names if m in interior - named]
    for ltype, name in log.gpu_layers:
        if ltype == "REFORMAT":  # (a COPY may be a model layer: a QuantizeLinear done as a copy, 8.6)
            continue
        members = names.network_layers(name)
        if members is None:
            continue  # inserted by the builder; names the layer it feeds, not a layer of its own
        if not members:
            res.unmapped.append(name)
        for n in members:
            net_dev[n] = "GPU"
    primary: dict[str, str] = {}
    helpers: dict[str, list[str]] = {}
    for n, d in net_dev.items():
        m = names.model_layer(n)
        if m is None:
            continue
        if n == m:
            primary[m] = d
        else:
            helpers.setdefault(m, []).append(d)
    for m in names.model_names:
        if m in primary:
            res.devices[m] = primary[m]
        elif m in helpers:
            votes = helpers[m]
            res.devices[m] = "DLA" if votes.count("DLA") > votes.count("GPU") else "GPU"
    res.unresolved = list(names.unresolved)
    res.subgraphs = [
        list(dict.fromkeys(m for m in (names.model_layer(n) for n in sg) if m is not None)) for sg in res.subgraphs
    ]
    for n, text in log.fallbacks.items():  # TensorRT's own "Switching ... to GPU": it beats a ForeignNode
        if (m := names.model_layer(n)) is not None:  # range and fills a layer no line names (10.3's /Flatten)
            res.fallback.setdefault(m, text)
            if n == m or m not in res.devices:
                res.devices[m] = "GPU"
    for n in log.subgraph_limit:
        if (m := names.model_layer(n)) is not None and m not in res.subgraph_limit:
            res.subgraph_limit.append(m)
    return res
