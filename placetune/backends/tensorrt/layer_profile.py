"""Attribute a per-layer profile's times to devices and model layers (pure Python, no TensorRT).

An IProfiler or trtexec ``--exportProfile`` profile lists engine layers with their times, in
execution order. This module owns turning that list into time per model layer, DLA versus GPU
time and the same-device segments of the run: a ``{ForeignNode[...]}`` entry the build log lists
as a DLA loadable, and the copies TensorRT adds around it (``to nvm``, ``from nvm``, ``copy
finish``), count as DLA time; a fused engine layer's time is shared over its model layers.
The names are read with the build log's :class:`~placetune.backends.tensorrt.buildlog.NameResolver`;
which layer ran where is :func:`~placetune.backends.tensorrt.buildlog.locate`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from placetune.backends.tensorrt.buildlog import DLA_COPY_SUFFIXES, BuildLog, NameResolver

__all__ = ["ProfileSummary", "attribute_profile"]


@dataclass
class ProfileSummary:
    """Per-layer profiler times attributed to devices and model layers.

    Attributes:
        layer_times_ms: model layer -> ms (a fused engine layer's time is split evenly
            over its model layers; a DLA subgraph's time, copies included, over its layers).
        dla_ms: time of DLA subgraphs plus their ``to nvm``/``from nvm``/``copy finish`` entries.
        gpu_ms: everything else.
        segments: consecutive same-device runs of engine layers:
            ``{"index", "device", "layers", "time_ms", "start_ms", "end_ms", "engine_layers"}``.
    """

    layer_times_ms: dict[str, float] = field(default_factory=dict)
    dla_ms: float = 0.0
    gpu_ms: float = 0.0
    segments: list[dict[str, object]] = field(default_factory=list)


def attribute_profile(
    profile: Sequence[tuple[str, float]] | Sequence[Sequence[object]],
    log: BuildLog,
    model_names: Sequence[str],
    network: Sequence[tuple[str, str | None]] | None = None,
    dla_device: str = "DLA0",
) -> ProfileSummary:
    """Attribute an IProfiler / ``--exportProfile`` profile (engine layer, ms) in execution order.

    DLA time is a ``{ForeignNode[...]}`` entry that the log lists as a ``[DlaLayer]`` plus the
    copy entries around it (reference §2.5: the DLA work may land on the ``from nvm`` entry).
    """
    names = NameResolver(model_names, network)
    dla_nodes = set(log.dla_nodes)
    out = ProfileSummary()
    pending_ms = 0.0  # DLA copy time seen before the subgraph it belongs to
    last_dla: list[str] = []  # model layers of the latest DLA subgraph in the current DLA segment
    cur: dict[str, object] | None = None
    cur_layers: list[str] = []  # the current segment's engine layers and model layers (in ``cur``)
    cur_members: list[str] = []
    now = 0.0

    def credit(members: list[str], ms: float) -> None:
        share = ms / len(members)
        for m in members:
            out.layer_times_ms[m] = out.layer_times_ms.get(m, 0.0) + share

    for item in profile:
        name, ms = str(item[0]), float(item[1])  # type: ignore[arg-type]
        is_copy = name.endswith(DLA_COPY_SUFFIXES)
        device = dla_device if (name in dla_nodes or is_copy) else "GPU"
        if cur is None or cur["device"] != device:
            cur_layers, cur_members = [], []
            cur = {"index": len(out.segments), "device": device, "layers": 0, "time_ms": 0.0,
                   "start_ms": now, "end_ms": now, "engine_layers": cur_layers, "_members": cur_members}
            out.segments.append(cur)
            last_dla = []
        members = [] if is_copy else names.model_layers(name)
        if device == "GPU":
            out.gpu_ms += ms
            if members:
                credit(members, ms)
        else:
            out.dla_ms += ms
            if is_copy and name.endswith(" to nvm") or (is_copy and not last_dla):
                pending_ms += ms
            elif is_copy:
                credit(last_dla, ms)
            elif members:
                credit(members, ms + pending_ms)
                pending_ms = 0.0
                last_dla = members
        cur["time_ms"] = float(cur["time_ms"]) + ms  # type: ignore[arg-type]
        now += ms
        cur["end_ms"] = now
        cur_layers.append(name)
        cur_members.extend(m for m in members if m not in cur_members)
    for seg in out.segments:
        seg["layers"] = len(seg.pop("_members"))  # type: ignore[arg-type]
    return out
