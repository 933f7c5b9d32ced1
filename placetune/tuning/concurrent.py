"""Concurrent studies (``--mode concurrent``): several networks placed jointly and run at once.

The networks are one merged model (:func:`placetune.model.merge.load_networks`) measured in
pipeline mode: one frame is one inference of every network. This module adds what only
several networks have: each network's own latency in a measurement (the end of its last engine
in the first frame: ``extra["network_latency_ms"]``, what ``latency[resnet50]<=5`` bounds), and the
naive baselines every run reports, each network wholly on one device (``googlenet:DLA0,resnet50:GPU``).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from placetune.model.merge import network_of
from placetune.placement.placement import Placement

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.placement.placement import Placement
    from placetune.tuning.evaluator_view import EvaluatorView

__all__ = ["naive_label", "naive_placements", "network_latencies", "network_summary", "measure_naive_baselines"]

#: at most this many networks get every whole-network-per-device combination (3**n grows fast)
_ALL_COMBINATIONS = 3


def network_latencies(model: "Model", m: "Measurement", networks: list[str]) -> dict[str, float]:
    """Each network's latency in ``m``: when its last engine of the first frame ends (ms from the
    frame's start). Engines are matched to networks by the layers of the realised placement's
    pipeline segments (``seg<i>`` in the timeline); {} when the measurement has no timeline."""
    if not m.ok or not m.timeline or not m.realized:
        return {}
    segs = Placement(model, dict(m.realized)).segments(pipeline=True)
    owner = {f"seg{s.index}": network_of(s.layers[0], networks) for s in segs if s.layers}
    first = min(int(e.get("frame", 0)) for e in m.timeline)
    start = min(float(e["start_ms"]) for e in m.timeline if int(e.get("frame", 0)) == first)
    out: dict[str, float] = {}
    for e in m.timeline:
        net = owner.get(str(e.get("name")))
        if net is not None and int(e.get("frame", 0)) == first:
            out[net] = max(out.get(net, 0.0), float(e["end_ms"]) - start)
    return out


def naive_placements(model: "Model", networks: list[str], dla_count: int = 2) -> dict[str, "Placement"]:
    """Every network wholly on one device, named ``googlenet:DLA0,resnet50:GPU``: all combinations
    for up to three networks, else all-GPU plus each network alone on each DLA core."""
    devices = ["GPU"] + [f"DLA{k}" for k in range(dla_count)]
    if len(networks) <= _ALL_COMBINATIONS:
        combos = list(itertools.product(devices, repeat=len(networks)))
    else:
        combos = [tuple("GPU" for _ in networks)]
        combos += [tuple(d if j == i else "GPU" for j in range(len(networks))) for i in range(len(networks))
                   for d in devices[1:]]
    out = {}
    for combo in combos:
        where = dict(zip(networks, combo))
        label = ",".join(f"{n}:{d}" for n, d in where.items())
        out[label] = Placement(model, {layer: where[network_of(layer, networks) or networks[0]]
                                       for layer in model.names})
    return out


def measure_naive_baselines(ev: "EvaluatorView", networks: list[str]) -> dict[str, "Measurement"]:
    """Measure (or read back) every naive placement; the label ``all-gpu`` for every network on the GPU."""
    out = {}
    for label, p in naive_placements(ev.model, networks, ev.platform.dla_count).items():
        name = "all-gpu" if set(p.as_dict().values()) == {"GPU"} else label
        out[name] = ev.evaluate(p, agent="baseline")
    return out


def naive_label(assignment: dict[str, str] | None, networks: list[str]) -> str | None:
    """``googlenet:DLA0,resnet50:GPU`` when every network of ``assignment`` (layer -> device) is wholly
    on one device, else None."""
    where: dict[str, set[str]] = {n: set() for n in networks}
    for layer, device in (assignment or {}).items():
        net = network_of(layer, networks)
        if net is None:
            return None
        where[net].add(device)
    if any(len(d) != 1 for d in where.values()):
        return None
    return ",".join(f"{n}:{next(iter(d))}" for n, d in where.items())


def network_summary(realized: dict[str, str], m: "Measurement", networks: list[str],
                    sources: dict[str, dict[str, object]] | None = None) -> list[dict[str, object]]:
    """Per network: its name, its source (zoo name or file) and batch when known, layer count,
    layers per device and latency in the frame (a plan's ``networks``)."""
    lat = (m.extra or {}).get("network_latency_ms") or {}
    out: list[dict[str, object]] = []
    for net in networks:
        devices: dict[str, int] = {}
        for layer, device in realized.items():
            if network_of(layer, [net]):
                devices[device] = devices.get(device, 0) + 1
        out.append({"name": net, **(sources or {}).get(net, {}), "layers": sum(devices.values()), "devices": devices,
                    "latency_ms": lat.get(net)})
    return out
