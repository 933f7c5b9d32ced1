"""A pipeline's realised placement, known segment by segment.

A pipeline measurement builds one engine per segment, and each engine's placement is read on its
own (:func:`~placetune.backends.tensorrt.jobs.read_realised`: the build log and the engine's layer
information, cross-checked). A GPU segment's placement is known by construction: a GPU engine has
no DLA layer, every layer ran on the GPU. So one DLA segment whose placement cannot be read leaves
the others known; it does not make the whole measurement's placement unknown.

What is recorded (:func:`mark_segments`):

* ``extra["segment_placements"]``: one row per segment: ``index``, ``device`` (asked), ``layers``,
  ``known``, ``source`` (``GPU engine``: by construction; ``build log``, ``engine inspector``,
  ``build log and engine inspector``; ``none``), and for an unread one its ``reason`` and its
  ``unknown_layers`` (its layers asked on the DLA that no source places; a layer a fallback warning
  names is the GPU's, ``fallback_warned``), for one read from the log alone its ``unchecked``.
* When some segment is unread: ``realized`` is None and ``placement_known`` False, as before (every
  reader that needs a whole placement, the store's realised key, calibration, export, never gets a
  guess), and ``extra["realized_partial"]`` holds the placement as read: layer -> device, and
  :data:`~placetune.measurement.UNKNOWN_DEVICE` for the unread layers
  (:attr:`~placetune.measurement.Measurement.realized_partial`). The DLA loadable count of a core
  with an unread segment is left out (its 16-per-core check is unknown); the other cores keep theirs.

Example:
    >>> kw = {"extra": {}, "dla_loadables": {"DLA0": 0, "DLA1": 1}, "realized": {}}
    >>> segs = [{"index": 0, "device": "GPU", "layers": 1, "known": True, "source": "GPU engine"},
    ...         {"index": 1, "device": "DLA0", "layers": 1, "known": False, "source": "none",
    ...          "reason": "no report", "unknown_layers": ["b"]},
    ...         {"index": 2, "device": "DLA1", "layers": 1, "known": True, "source": "build log"}]
    >>> mark_segments(kw, ["seg1 (no report)"], [], segs, {"a": "GPU", "b": "DLA0", "c": "DLA1"})
    >>> kw["realized"], kw["extra"]["realized_partial"], kw["dla_loadables"]
    (None, {'a': 'GPU', 'b': 'unknown', 'c': 'DLA1'}, {'DLA1': 1})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from placetune.backends.tensorrt.jobs import mark_unknown
from placetune.backends.tensorrt.placement_known import say_unknown
from placetune.measurement import UNKNOWN_DEVICE

__all__ = ["mark_segments"]


def mark_segments(kw: dict[str, Any], unknown: Sequence[str], unchecked: Sequence[str],
                  segments: list[dict[str, Any]], realized: Mapping[str, str]) -> None:
    """Record a pipeline's realised placement segment by segment into the measurement's keywords
    ``kw`` (``realized``, ``dla_loadables``, ``extra``): see the module. ``unknown`` names the
    unread engines (``seg1 (why)``), ``segments`` holds :func:`read_realised`'s record of each,
    ``realized`` the placement as read, an unread segment's layers at their asked device."""
    kw["extra"]["segment_placements"] = segments
    loadables = dict(kw.get("dla_loadables") or {})
    mark_unknown(kw, [], unchecked)
    if not unknown:
        return
    unread = [s for s in segments if not s.get("known")]
    layers = {n for s in unread for n in s.get("unknown_layers") or ()}
    partial = {n: (UNKNOWN_DEVICE if n in layers else d) for n, d in realized.items()}
    cores = sorted({str(s["device"]) for s in unread})
    kw["realized"] = None
    kw["extra"]["placement_known"] = False
    kw["dla_loadables"] = {c: n for c, n in loadables.items() if c not in cores}
    read = [f"seg{s['index']} ({s['device']}, {s.get('source')})" for s in segments if s.get("known")]
    some = ", ".join(sorted(layers)[:5]) + (", ..." if len(layers) > 5 else "")
    diff = kw["extra"].get("realized_vs_predicted")
    if isinstance(diff, dict):  # an unread layer is not "as predicted": [asked, unknown]
        diff.update({n: [realized[n], UNKNOWN_DEVICE] for n in sorted(layers) if n in realized})
    if any(d != UNKNOWN_DEVICE for d in partial.values()):
        kw["extra"]["realized_partial"] = partial
        why = (f"the realised placement of {'; '.join(unknown)} is unknown: {len(layers)} layer(s) ({some}) are "
               f"marked unknown in realized_partial, never guessed; {len(read)} of {len(segments)} segments were read "
               f"({', '.join(read[:6])}{', ...' if len(read) > 6 else ''}); the DLA loadables of {', '.join(cores)}, "
               "and their 16-per-core check, are unknown too")
    else:
        why = (f"the realised placement of {'; '.join(unknown)} is unknown: their DLA loadables, and the 16-per-core "
               "check, are unknown too")
    kw["extra"]["placement_unknown"] = why
    say_unknown(why, f"unknown for {', '.join(cores)}")

