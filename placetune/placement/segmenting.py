"""Segmentation on integer arrays: the engine of :meth:`Placement.segments`, also used directly by
the simulator's incremental evaluation (no layer-name dicts on the hot path).

A model's layers are numbered in topological order; ``producers[i]`` lists the layer numbers
layer ``i`` reads from and ``codes[i]`` is its device code (0 GPU, 1 DLA0, 2 DLA1). The result
is, per segment in topological order, its device code, its predecessors and its layers, plus the
segment of every layer. Semantics: see :meth:`placetune.placement.placement.Placement.segments`.

Speed: a layer whose only producer is on its device always joins that producer's segment, so
only the other layers ("heads": inputs, device changes and joins of several producers) go
through the Python loop; the rest follow their head by pointer doubling on numpy arrays.
:meth:`ProducerArrays.segments` memoises segmentations: a search evaluates the same assignments
again under every new model of the device, and a segmentation depends on the codes alone.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

__all__ = ["ProducerArrays", "SegmentArrays", "segment_arrays", "MEMO"]

#: segmentations :meth:`ProducerArrays.segments` keeps (least recently used first out)
MEMO = 8192


class ProducerArrays:
    """A model's producer lists with the arrays the segmentation needs (build once per model).

    Attributes:
        producers: per layer, the layer numbers it reads from.
        single: per layer, its producer when it has exactly one, else itself.
        has_single: per layer, whether it has exactly one producer.
        arange: the layer numbers (``np.arange(n)``).
        doublings: pointer-doubling steps that reach the head of the longest single-producer chain.
    """

    __slots__ = ("producers", "single", "has_single", "arange", "doublings", "_memo")

    def __init__(self, producers: Sequence[Sequence[int]]) -> None:
        n = len(producers)
        self.producers = [tuple(p) for p in producers]
        self.arange = np.arange(n, dtype=np.intp)
        self.has_single = np.fromiter((len(p) == 1 for p in self.producers), dtype=bool, count=n)
        self.single = np.fromiter((p[0] if len(p) == 1 else i for i, p in enumerate(self.producers)),
                                  dtype=np.intp, count=n)
        depth = [0] * n  # single-producer links from each layer back to its chain's start
        for i, p in enumerate(self.producers):
            if len(p) == 1:
                depth[i] = depth[p[0]] + 1
        longest = max(depth, default=0)
        # after k doublings a pointer has followed min(2**k, remaining) links: 2**k >= longest
        self.doublings = (longest - 1).bit_length() if longest > 0 else 0
        self._memo: OrderedDict[bytes, SegmentArrays] = OrderedDict()

    def segments(self, codes: "np.ndarray", pipeline: bool = False) -> "SegmentArrays":
        """:func:`segment_arrays` of a device-code vector, memoised (the last :data:`MEMO`): the
        result is shared between callers and must not be modified."""
        key = np.asarray(codes, dtype=np.int8).tobytes() + (b"p" if pipeline else b"e")
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = segment_arrays(self, codes, pipeline)
            while len(self._memo) > MEMO:
                self._memo.popitem(last=False)
        else:
            self._memo.move_to_end(key)
        return hit


class SegmentArrays:
    """Segments of one assignment.

    Attributes:
        device: device code per segment.
        preds: sorted predecessor segment numbers per segment.
        seg_of: segment number per layer (numpy array).
        layers: sorted layer numbers per segment (computed on first use).
        derived: what a user of the segmentation computed from it and the codes it was made of
            (e.g. a model's per-segment features), kept with it by that user's own key.
    """

    __slots__ = ("device", "preds", "seg_of", "_layers", "derived")

    def __init__(self, device: list[int], preds: list[tuple[int, ...]], seg_of: np.ndarray) -> None:
        self.device, self.preds, self.seg_of, self._layers = device, preds, seg_of, None
        self.derived: dict[str, object] = {}

    @property
    def layers(self) -> list[list[int]]:
        """Sorted layer numbers per segment."""
        if self._layers is None:
            out: list[list[int]] = [[] for _ in self.device]
            for i, s in enumerate(self.seg_of.tolist()):
                out[s].append(i)
            self._layers = out
        return self._layers

    def __len__(self) -> int:
        return len(self.device)


def segment_arrays(producers: "Sequence[Sequence[int]] | ProducerArrays", codes: "Sequence[int] | np.ndarray",
                   pipeline: bool = False) -> SegmentArrays:
    """Greedy convex clustering in topological order (see the module doc).

    A layer joins the segment(s) of its same-device producers unless that would close a cycle
    through another segment; several joinable producer segments are merged. With ``pipeline``
    a layer does not join a segment that would then wait for a branch it did not wait for.
    ``producers``: per layer its producers, or their :class:`ProducerArrays` (faster, reusable).
    """
    pa = producers if isinstance(producers, ProducerArrays) else ProducerArrays(producers)
    prods_of = pa.producers
    c = np.asarray(codes)
    n = c.shape[0]
    # a layer whose one producer is on its device joins that producer's segment: follow such
    # links to the head of the chain (pointer doubling), only heads go through the loop below
    joins = pa.has_single & (c[pa.single] == c)
    ptr = np.where(joins, pa.single, pa.arange)
    for _ in range(pa.doublings):  # enough for the model's longest chain: no convergence test
        ptr = ptr[ptr]
    heads_arr = np.flatnonzero(~joins)
    heads = heads_arr.tolist()
    head_codes = c[heads_arr].tolist()
    head_of = ptr.tolist()
    parent: list[int] = []  # union-find over segment ids
    preds: list[set[int]] = []
    device: list[int] = []
    first: list[int] = []  # first layer of each segment (heads come in layer order; -1: merged away)
    seg_of: list[int] = [0] * n  # head layer -> segment id (set for heads only)
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
        first.append(i)
        bit.append(1 << sid)
        m = 0
        for q in prod_segs:
            m |= bit[q] | anc[q]
            succ[q].add(sid)
        anc.append(m)
        succ.append(set())
        seg_of[i] = sid

    reorder = False
    for i, d in zip(heads, head_codes):
        prods = prods_of[i]
        if len(prods) == 1:  # a head with one producer: on another device, a new segment
            q = seg_of[head_of[prods[0]]]
            if parent[q] != q:  # (find() only when a merge made it stale: most are roots)
                q = find(q)
            sid = len(parent)  # new(i, d, (q,)) inline: the commonest head
            parent.append(sid)
            preds.append({q})
            device.append(d)
            first.append(i)
            bit.append(1 << sid)
            anc.append(bit[q] | anc[q])
            succ[q].add(sid)
            succ.append(set())
            seg_of[i] = sid
            continue
        if len(prods) == 2:  # the commonest join (a residual add, a matmul of two tensors)
            q = seg_of[head_of[prods[0]]]
            if parent[q] != q:
                q = find(q)
            r = seg_of[head_of[prods[1]]]
            if parent[r] != r:
                r = find(r)
            if q == r:
                if device[q] == d:  # both from one segment on its device: join it
                    seg_of[i] = q
                    continue
                prod_segs = {q}
            else:
                prod_segs = {q, r}
        else:
            prod_segs = {q if parent[q] == q else find(q) for q in (seg_of[head_of[p]] for p in prods)}
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
                    reorder = True  # a merge: ids no longer follow the segments' first layers
                    parent[q] = target
                    preds[target] |= preds[q]
                    if first[q] < first[target]:
                        first[target] = first[q]
                    first[q] = -1
                    bit[target] |= bit[q]
                    anc[target] |= anc[q]
                    succ[target] |= succ[q]
                for e in prod_segs.difference(joinable):
                    if e > target:  # a predecessor created after it: ids are not a topological order
                        reorder = True
                    preds[target].add(e)
                    anc[target] |= bit[e] | anc[e]
                    succ[e].add(target)
                preds[target] = {find(q) for q in preds[target]} - {target}
                propagate(target)
            seg_of[i] = target
        else:
            new(i, d, prod_segs)
    if not reorder:
        # no merge and every predecessor created before its successor: the segment ids are the
        # topological order with ties broken by the first layer (what the general case computes)
        return SegmentArrays(device, [tuple(p) if len(p) == 1 else tuple(sorted(p)) for p in preds],
                             np.asarray(seg_of, dtype=np.intp)[ptr])
    root_of = [find(q) for q in range(len(parent))]
    roots = [r for r in range(len(parent)) if root_of[r] == r and first[r] >= 0]
    # Topological order of the segment DAG, ties broken by the first layer's position (a
    # segment's first layer is a head: a chain's layers come after its head).
    rpreds = {r: {root_of[p] for p in preds[r]} - {r} for r in roots}
    users: dict[int, list[int]] = {r: [] for r in roots}
    for r in roots:
        for q in rpreds[r]:
            users[q].append(r)
    waiting = {r: len(rpreds[r]) for r in roots}
    ready = [(first[r], r) for r in roots if waiting[r] == 0]
    heapq.heapify(ready)
    ordered: list[int] = []
    while ready:
        _, r = heapq.heappop(ready)
        ordered.append(r)
        for u in users[r]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (first[u], u))
    new_id = [0] * len(parent)  # root segment id -> its position in the order
    for k, r in enumerate(ordered):
        new_id[r] = k
    renumber = np.asarray(new_id, dtype=np.intp)[np.asarray(root_of, dtype=np.intp)]
    return SegmentArrays([device[r] for r in ordered],
                         [tuple(sorted([new_id[q] for q in rpreds[r]])) for r in ordered],
                         renumber[np.asarray(seg_of, dtype=np.intp)[ptr]])
