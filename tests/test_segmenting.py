"""Integer segmentation (placement/segmenting.py) equals the name-based greedy it replaced."""

from __future__ import annotations

import heapq

from hypothesis import given, settings, strategies as st

from placetune import Model
from placetune.model import zoo
from placetune.placement.placement import DEVICES, Placement, Segment

MODELS = {"resnet50": Model.load("resnet50", batch=1), "seed-block": Model.load("seed-block"),
          "vit-tiny-2": Model.load(zoo.build("vit-tiny", batch=1, depth=2), name="vit-tiny-2"),
          "mobilenetv2": Model.load("mobilenetv2", batch=1)}


def reference_segments(model, dev, pipeline=False):
    """The name-based greedy of placement.py before the integer rewrite (the oracle)."""
    parent, preds, device, members, seg_of, bit, anc, succ = [], [], [], [], {}, [], [], []

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def propagate(root):
        extra = bit[root] | anc[root]
        stack = [find(x) for x in succ[root]]
        while stack:
            x = stack.pop()
            if anc[x] & extra != extra:
                anc[x] |= extra
                stack.extend(find(y) for y in succ[x])

    for layer in model.layers:
        d = dev[layer.name]
        prod_segs = {find(seg_of[p]) for p in layer.producers}
        same = [q for q in prod_segs if device[q] == d]
        joinable = []
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
                if (anc_other | anc_rest) & bit[q]:
                    continue
                if pipeline and (anc_other | anc_rest | same_mask) & ~anc[q] & ~bit[q]:
                    continue
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
            members[target].append(layer.name)
            seg_of[layer.name] = target
        else:
            sid = len(parent)
            parent.append(sid)
            preds.append(set(prod_segs))
            device.append(d)
            members.append([layer.name])
            bit.append(1 << sid)
            m = 0
            for q in prod_segs:
                m |= bit[q] | anc[q]
                succ[q].add(sid)
            anc.append(m)
            succ.append(set())
            seg_of[layer.name] = sid
    roots = [i for i in range(len(parent)) if find(i) == i and members[i]]
    pos = {n: i for i, n in enumerate(model.names)}
    first = {r: min(pos[n] for n in members[r]) for r in roots}
    rpreds = {r: {find(p) for p in preds[r]} - {r} for r in roots}
    users = {r: [] for r in roots}
    for r in roots:
        for q in rpreds[r]:
            users[q].append(r)
    waiting = {r: len(rpreds[r]) for r in roots}
    ready = [(first[r], r) for r in roots if waiting[r] == 0]
    heapq.heapify(ready)
    ordered = []
    while ready:
        _, r = heapq.heappop(ready)
        ordered.append(r)
        for u in users[r]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (first[u], u))
    new_id = {r: k for k, r in enumerate(ordered)}
    return [Segment(new_id[r], device[r], tuple(sorted(members[r], key=pos.__getitem__)),
                    tuple(sorted({new_id[find(p)] for p in preds[r] if find(p) != r}))) for r in ordered]


@st.composite
def assignments(draw):
    name = draw(st.sampled_from(sorted(MODELS)))
    model = MODELS[name]
    n = len(model.names)
    style = draw(st.sampled_from(["random", "blocks"]))
    if style == "random":
        codes = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    else:
        cuts = sorted(draw(st.lists(st.integers(1, n - 1), min_size=0, max_size=6)))
        codes, start = [], 0
        for end in cuts + [n]:
            codes += [draw(st.integers(0, 2))] * (end - start)
            start = end
    return model, {layer: DEVICES[c] for layer, c in zip(model.names, codes)}


@settings(max_examples=120, deadline=None)
@given(assignments(), st.booleans())
def test_integer_segmentation_equals_the_name_based_greedy(case, pipeline):
    model, dev = case
    assert Placement(model, dev).segments(pipeline=pipeline) == reference_segments(model, dev, pipeline)


@given(st.integers(1, 70), st.integers(0, 69), st.booleans())
def test_a_chain_follows_its_head_however_long(length, cut, pipeline):
    # a fixed number of pointer doublings per model (no convergence test) must still reach the
    # head of its longest single-producer chain
    from placetune.placement.segmenting import ProducerArrays, segment_arrays

    producers = [()] + [(i,) for i in range(length - 1)]
    pa = ProducerArrays(producers)
    assert 2 ** pa.doublings >= length - 1 and (length <= 2 or 2 ** (pa.doublings - 1) < length - 1)
    cut = min(cut, length)  # layers from `cut` on run on DLA0
    sa = segment_arrays(pa, [0] * cut + [1] * (length - cut), pipeline)
    assert sa.device == [d for d in (0, 1) if (cut if d == 0 else length - cut)]
    assert sa.seg_of.tolist() == [0] * cut + [1 if cut else 0] * (length - cut)
