"""Several networks as one model: the graph a concurrent study places (``--mode concurrent``).

Networks that run at once on a Jetson (detection + segmentation + depth...) are placed jointly:
their graphs are joined side by side into one ONNX model whose every name carries its network's
prefix (``googlenet/conv1/Conv``, ``resnet50/input``). Nothing connects the networks, so a
pipeline of that model is exactly "all networks at once": each network's segments are engines on
their devices, two engines on one device serialise, independent engines overlap, and one frame
is one inference of every network (latency = the makespan of one frame of each; throughput =
frames per second with every network in each frame). Everything pipeline mode has (simulator,
TensorRT backend, export, build, runtime) therefore works for concurrent networks unchanged.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence
import hashlib
import json

import onnx

from placetune.errors import ModelError
from placetune.files.names import confined
from placetune.files.write import write_file
from placetune.model.model import Model
from placetune.caches import default_cache_dir


__all__ = ["load_networks", "merge_models", "network_of", "network_names", "networks_in", "source_networks"]

SEP = "/"


def network_names(sources: Sequence[str]) -> list[str]:
    """Short unique names of networks given as zoo names or files: ``resnet50``, ``model``,
    ``model-2`` for a second file of the same stem."""
    out: list[str] = []
    for src in sources:
        base = re.sub(r"\.onnx(\.gz)?$", "", str(src).replace("\\", "/").rsplit("/", 1)[-1]).split(":")[0]
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", base) or "net"
        name, k = base, 2
        while name in out:
            name, k = f"{base}-{k}", k + 1
        out.append(name)
    return out


def _prefixed(prefix: str, name: str) -> str:
    if not name:
        return name
    return f"{prefix}{name}" if name.startswith(SEP) else f"{prefix}{SEP}{name}"


def networks_in(model: "Model") -> list[str]:
    """The networks of a merged model (its graph is named ``concurrent:a+b``); [] for one network."""
    name = model.proto.graph.name if model.proto is not None else ""
    return name.split(":", 1)[1].split("+") if name.startswith("concurrent:") else []


def network_of(name: str, networks: Sequence[str]) -> str | None:
    """The network a merged layer or tensor name belongs to (None: none of ``networks``)."""
    for net in networks:
        if name.startswith(net + SEP):
            return net
    return None


def merge_models(models: Sequence["Model"], names: Sequence[str] | None = None, *,
                 protos: Sequence["onnx.ModelProto"] | None = None) -> "onnx.ModelProto":
    """One ONNX model holding every network side by side, each name prefixed with its network's.

    Args:
        models: the networks (each loaded with its own shapes and batch).
        names: their names (default: :func:`network_names` of the models' names).
        protos: the graphs to merge, one per model (default: each model's own, weight-stripped
            graph); :func:`load_networks` passes them with their weights.

    Returns:
        The merged model (weights as the sources have them: data where the sources have it).

    Raises:
        ModelError: fewer than two networks, repeated names, or opsets that differ.

    Example:
        >>> from placetune import Model
        >>> proto = merge_models([Model.load("seed-block"), Model.load("alexnet")], ["a", "b"])
        >>> [i.name for i in proto.graph.input]
        ['a/input', 'b/input']
    """
    if len(models) < 2:
        raise ModelError("concurrent mode needs at least two networks (--model A --model B)")
    names = list(names) if names is not None else network_names([m.name for m in models])
    if len(set(names)) != len(names):
        raise ModelError(f"network names must differ: {names}")
    opsets = {}
    graph = onnx.GraphProto(name="concurrent:" + "+".join(names))
    sources = list(protos) if protos is not None else [m.proto for m in models]
    for net, m, proto in zip(names, models, sources):
        if proto is None:
            raise ModelError(f"network {net}: its ONNX graph is not available")
        for op in proto.opset_import:
            if op.domain in opsets and opsets[op.domain] != op.version:
                raise ModelError(f"network {net} uses opset {op.domain or 'ai.onnx'} {op.version}, another network "
                                 f"{opsets[op.domain]}: export the networks with one opset")
            opsets[op.domain] = op.version
        g = proto.graph
        prefix = net
        rename = lambda s, p=prefix: _prefixed(p, s)  # noqa: E731
        for vi in list(g.input) + list(g.output) + list(g.value_info):
            v = onnx.ValueInfoProto()
            v.CopyFrom(vi)
            v.name = rename(vi.name)
            (graph.input if vi in g.input else graph.output if vi in g.output else graph.value_info).append(v)
        for t in g.initializer:
            c = onnx.TensorProto()
            c.CopyFrom(t)
            c.name = rename(t.name)
            graph.initializer.append(c)
        for i, node in enumerate(g.node):
            n = onnx.NodeProto()
            n.CopyFrom(node)
            n.name = rename(node.name or f"{node.op_type}_{i}")  # (subgraph bodies are not renamed)
            n.input[:] = [rename(x) for x in node.input]
            n.output[:] = [rename(x) for x in node.output]
            graph.node.append(n)
    merged = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in sorted(opsets.items())],
                               producer_name="placetune-concurrent")
    merged.ir_version = max(p.ir_version for p in sources)
    return merged


META_KEY = "placetune.networks"


def source_networks(proto: "onnx.ModelProto") -> list[dict] | None:
    """The networks a merged file was made from (``[{"name", "source", "batch"}]``, its metadata), or None."""
    for prop in proto.metadata_props:
        if prop.key == META_KEY:
            try:
                nets = json.loads(prop.value)
            except (ValueError, RecursionError):  # (RecursionError: nested too deeply)
                return None
            return nets if isinstance(nets, list) else None
    return None


def load_networks(sources: Sequence[str], *, batch: int | None = None, shapes: Sequence[str] | None = None,
                  directory: str | Path | None = None) -> "Model":
    """The networks ``sources`` (zoo names or ONNX files) as one model for a concurrent study.

    The merged graph (no weights: it is small) is written to ``directory`` (default: placetune's
    cache, ``~/.cache/placetune/concurrent``) under its content hash, with the networks it was
    made from in its metadata, and loaded from there: an ordinary model file. Where weights are
    needed (cutting segments for a build or an export),
    :func:`placetune.model.source.load_source` merges the networks again from their sources
    with their weights (a file's own, a zoo network's deterministic ones).

    Args:
        sources: two or more zoo names or ONNX files.
        batch: every network's batch (default: each network's own).
        shapes: input shapes ``name=1x3x224x224`` with merged names (``resnet50/input=...``).
        directory: where the merged file goes.

    Raises:
        ModelError: fewer than two networks, a network that cannot be loaded, or opsets that differ.
    """
    names = network_names(sources)
    models = [Model.load(src, batch=batch) for src in sources]
    merged = merge_models(models, names)
    origin = [{"name": n, "source": str(Path(src).resolve()) if Path(src).is_file() else str(src), "batch": m.batch}
              for n, src, m in zip(names, sources, models)]
    onnx.helper.set_model_props(merged, {META_KEY: json.dumps(origin)})
    data = merged.SerializeToString(deterministic=True)
    folder = Path(directory) if directory is not None else default_cache_dir("concurrent")
    digest = hashlib.sha256(data).hexdigest()[:16]
    stem = re.sub(r"[^A-Za-z0-9._+-]", "_", "+".join(names))[:80]  # network names never leave the cache folder
    path = confined(folder, f"{stem}-{digest}.onnx", "merged model file")
    try:  # a cache folder this user may not read ($PLACETUNE_CACHE_DIR elsewhere) is written, or refused, below
        same = path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest()[:16] == digest
    except OSError:
        same = False
    if not same:
        write_file(path, data, "merged model", parents=True)  # (a file of that name with other bytes is replaced)
    return Model.load(str(path), shapes or None, name="+".join(names))
