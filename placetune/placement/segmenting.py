"""Segmentation on integer arrays: the engine of :meth:`Placement.segments`, also used directly by
the simulator's incremental evaluation (no layer-name dicts on the hot path).

A model's layers are numbered in topological order; ``producers[i]`` lists the layer numbers
layer ``i`` reads from and ``codes[i]`` is its device code (0 GPU, 1 DLA0, 2 DLA1). The result
is, per segment in topological order, its device code, its predecessors and its layers, plus the
segment of every layer. Semantics: see :meth:`placetune.placement.placement.Placement.segments`.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

__all__ = ["SegmentArrays", "segment_arrays"]


class SegmentArrays:
    """Segments of one assignment as plain lists.

    Attributes:
        device: device code per segment.
        preds: sorted predecessor segment numbers per segment.
        layers: sorted layer numbers per segment.
        seg_of: segment number per layer.
    """

    __slots__ = ("device", "preds", "layers", "seg_of")

    def __init__(self, device: list[int], preds: list[tuple[int, ...]], layers: list[list[int]],
                 seg_of: list[int]) -> None:
        self.device, self.preds, self.layers, self.seg_of = device, preds, layers, seg_of

    def __len__(self) -> int:
        return len(self.device)


def segment_arrays(producers: Sequence[Sequence[int]], codes: Sequence[int], pipeline: bool = False) -> SegmentArrays:
    """Greedy convex clustering in topological order (see the module doc).

    A layer joins the segment(s) of its same-device producers unless that would close a cycle
    through another segment; several joinable producer segments are merged. With ``pipeline``
    a layer does not join a segment that would then wait for a branch it did not wait for.
    """
    parent: list[int] = []  # union-find over segment ids
    preds: list[set[int]] = []
    device: list[int] = []
    members: list[list[int]] = []
    seg_of: list[int] = [0] * len(codes)
    bit: list[int] = []  # mask of the original segment ids merged into a root
    anc: list[int] = []  # root -> mask of every ancestor segment id, kept up to date eagerly
    succ: list[set[int]] = []  # segment -> successor segment ids (map through find)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def propagate(root: int) -> None:
        extra = bit[root] | anc[root]
        stack = [find(x) for x in succ[root]]
        while stack:
            x = stack.pop()
            if anc[x] & extra != extra:
                anc[x] |= extra
                stack.extend(find(y) for y in succ[x])

    def new(i: int, d: int, prod_segs) -> None:
        sid = len(parent)
        parent.append(sid)
        preds.append(set(prod_segs))
        device.append(d)
        members.append([i])
        bit.append(1 << sid)
        m = 0
        for q in prod_segs:
            m |= bit[q] | anc[q]
            succ[q].add(sid)
        anc.append(m)
        succ.append(set())
        seg_of[i] = sid

    for i, d in enumerate(codes):
        prods = producers[i]
        if len(prods) == 1:  # the common case: one producer
            q = seg_of[prods[0]]
            if parent[q] != q:  # (find() only when a merge made it stale: most are roots)
                q = find(q)
            if device[q] == d:
                members[q].append(i)
                seg_of[i] = q
            else:
                new(i, d, (q,))
            continue
        prod_segs = {q if parent[q] == q else find(q) for q in (seg_of[p] for p in prods)}
        same = [q for q in prod_segs if device[q] == d]
        joinable: list[int] = []
        if len(prod_segs) == 1 and same:
            joinable = same
        elif same:
            anc_other = 0
            for o in prod_segs.difference(same):
                anc_other |= bit[o] | anc[o]
            same_mask = 0
            for q in same:
                same_mask |= bit[q]
            for q in same:
                anc_rest = 0
                for r in same:
                    if r != q:
                        anc_rest |= anc[r]
                # q may not be an ancestor of another producer segment
                if (anc_other | anc_rest) & bit[q]:
                    continue
                if pipeline and (anc_other | anc_rest | same_mask) & ~anc[q] & ~bit[q]:
                    continue  # joining would make q wait for a branch it did not wait for
                joinable.append(q)
                if pipeline:
                    break
        if joinable:
            target = joinable[0]
            if len(prod_segs) > 1:
                for q in joinable[1:]:
                    parent[q] = target
                    preds[target] |= preds[q]
                    members[target].extend(members[q])
                    members[q] = []
                    bit[target] |= bit[q]
                    anc[target] |= anc[q]
                    succ[target] |= succ[q]
                for e in prod_segs.difference(joinable):
                    preds[target].add(e)
                    anc[target] |= bit[e] | anc[e]
                    succ[e].add(target)
                preds[target] = {find(q) for q in preds[target]} - {target}
                propagate(target)
            members[target].append(i)
            seg_of[i] = target
        else:
            new(i, d, prod_segs)
    roots = [r for r in range(len(parent)) if parent[r] == r and members[r]]
    for r in roots:
        members[r].sort()
    # Topological order of the segment DAG, ties broken by the first layer's position.
    rpreds = {r: {find(p) for p in preds[r]} - {r} for r in roots}
    users: dict[int, list[int]] = {r: [] for r in roots}
    for r in roots:
        for q in rpreds[r]:
            users[q].append(r)
    waiting = {r: len(rpreds[r]) for r in roots}
    ready = [(members[r][0], r) for r in roots if waiting[r] == 0]
    heapq.heapify(ready)
    ordered: list[int] = []
    while ready:
        _, r = heapq.heappop(ready)
        ordered.append(r)
        for u in users[r]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (members[u][0], u))
    new_id = {r: k for k, r in enumerate(ordered)}
    out_seg = [new_id[s if parent[s] == s else find(s)] for s in seg_of]
    return SegmentArrays([device[r] for r in ordered],
                         [tuple(sorted(new_id[q] for q in rpreds[r])) for r in ordered],
                         [members[r] for r in ordered], out_seg)
