"""The correctness gate on a network that ends in NMS (a TensorRT plugin, an ONNX NonMaxSuppression): its detections compared as a set.

A sibling module of ``worker.py``: Python 3.8, no placetune imports.

EfficientNMS_TRT and BatchedNMS_TRT / BatchedNMSDynamic_TRT write four outputs: the number of
detections per image and, padded to ``max_output_boxes`` / ``keepTopK`` rows, their boxes, scores and
classes, "sorted in descending order" of score; "Only the top ``num_detections[i]`` entries ... are
valid" (NVIDIA/TensorRT release/10.3 plugin/efficientNMSPlugin/README.md:83,128 and
plugin/batchedNMSPlugin/README.md:40). Kept boxes are those above ``score_threshold`` that no
higher-scoring box overlaps with an IoU above ``iou_threshold`` (README.md:118). So a tiny FP16 /
DLA difference in what NMS is fed can swap two boxes of near-equal score, or keep or drop one whose
score is near the threshold or whose overlap is near the IoU threshold: element-wise, that is a
large error although the detections agree. The gate therefore matches detections one to one (same
class, IoU >= :data:`IOU_MATCH`, scores within the tolerance) and fails on any detection left
unmatched unless it is such a borderline one, or one of a near tie (:func:`_near_ties`): two boxes
of one class overlapping above NMS's own IoU threshold with scores within the tolerance, the
reference keeping one and the pipeline the other; at most :data:`TIE_FRACTION` of an image's
detections. With ``score_activation`` EfficientNMS_TRT thresholds the raw scores at
logit(``score_threshold``) (efficientNMSInference.cu:535-545) and writes sigmoid(score) (:124-126):
its output scores and ``score_threshold`` are on one scale, compared as they are.
EfficientNMS_ONNX_TRT's selected indices are compared as a set of (batch, class, box) rows
(:func:`compare_nms_indices`). The rows an ONNX NonMaxSuppression selects, gathered into network
outputs (an Ultralytics ``nms=True`` export's ``[1, 300, 6]``; nms_onnx.py finds them and their
columns), are matched the same way (:func:`compare_nms_rows`).
"""

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

IOU_MATCH = 0.9  # a detection and its counterpart overlap at least this much
IOU_SLACK = 0.05  # an unmatched detection whose IoU with one of the other side is this near the IoU threshold
#                   is borderline (suppressed on one side only)
TIE_FRACTION = 0.1  # near ties forgiven in one image: at most this fraction of the reference's detections (at least 1)


def _iou(np, a, b):
    # type: (Any, Any, Any) -> Any
    """IoU of every box of ``a`` [n, 4] with every box of ``b`` [m, 4] (corners x1, y1, x2, y2: the
    plugins' output coding, README.md:86)."""
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
    area_a = np.abs((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))
    area_b = np.abs((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))
    union = area_a[:, None] + area_b[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _detections(np, out, group, b):
    # type: (Any, Dict[str, Any], Dict[str, Any], int) -> Tuple[Any, Any, Any]
    """Image ``b``'s valid detections: the first ``num_detections[b]`` rows of boxes, scores, classes."""
    batch, k = _batch_k(np, out, group)
    boxes = np.asarray(out[group["boxes"]], dtype=np.float64).reshape(batch, k, 4)
    n = int(np.asarray(out[group["num_detections"]]).reshape(batch, -1)[b, 0])
    n = max(0, min(n, k))
    scores = np.asarray(out[group["scores"]], dtype=np.float64).reshape(batch, k)[b, :n]
    classes = np.asarray(out[group["classes"]], dtype=np.float64).reshape(batch, k)[b, :n]
    return boxes[b, :n].reshape(n, 4), scores, classes


def _batch_k(np, out, group):
    # type: (Any, Dict[str, Any], Dict[str, Any]) -> Tuple[int, int]
    """The batch (one num_detections per image) and ``max_output_boxes``: from the sizes, so that
    outputs reshaped on their way to the network outputs (num_detections [B], boxes [B, K * 4])
    are read row by row as the plugin wrote them."""
    batch = max(1, int(np.asarray(out[group["num_detections"]]).size))
    return batch, int(np.asarray(out[group["scores"]]).size) // batch


def _assign(ok, prefer):
    # type: (Any, Any) -> List[Tuple[int, int]]
    """One-to-one pairs (i, j) where ``ok[i, j]``: the reference's rows in order (highest score
    first), each its free counterpart of highest ``prefer[i, j]``."""
    pairs, used_g = [], set()  # type: List[Tuple[int, int]], set
    for i in range(ok.shape[0]):
        cands = [j for j in range(ok.shape[1]) if ok[i, j] and j not in used_g]
        if cands:
            j = max(cands, key=lambda j: prefer[i, j])
            used_g.add(j)
            pairs.append((i, j))
    return pairs


def match_detections(np, ref, mine, k, thr, iou_thr, agnostic, tolerance, across=False):
    # type: (Any, Tuple[Any, Any, Any], Tuple[Any, Any, Any], int, Any, Any, bool, float, bool) -> Tuple[int, float, float, List[str], int]
    """One image's detections (boxes [n, 4] corners, scores [n], classes [n]) of the reference and of
    the pipeline matched one to one (same class unless ``agnostic``, IoU >= :data:`IOU_MATCH`, scores
    within the tolerance): (matched, worst score difference, worst IoU, what is unmatched and
    neither borderline nor a near tie, how many near ties were forgiven: :func:`_near_ties`, at most
    :data:`TIE_FRACTION` of the reference's detections, at least one). An unmatched detection whose
    box the other side has (IoU >= :data:`IOU_MATCH`), also unmatched (another class, a score off by
    more than the tolerance), is never borderline. Borderline: a score within the tolerance of
    ``thr``, or of the lowest score the other side kept when it kept all ``k``; an overlap with a
    detection of the other side within :data:`IOU_SLACK` of ``iou_thr`` (of its class; of any class
    when ``across``: an NMS that suppressed across classes)."""
    rb, rs, rc = ref
    gb, gs, gc = mine
    tol = tolerance * max(1.0, float(np.abs(rs).max()) if len(rs) else 1.0)
    iou = _iou(np, rb, gb) if len(rs) and len(gs) else np.zeros((len(rs), len(gs)))
    same = (rc[:, None] == gc[None, :]) if not agnostic else np.ones(iou.shape, dtype=bool)
    ok = same & (iou >= IOU_MATCH) & (np.abs(rs[:, None] - gs[None, :]) <= tol)
    pairs = _assign(ok, iou)
    near = np.ones(iou.shape, dtype=bool) if across else same
    used_r, used_g = set(i for i, _ in pairs), set(j for _, j in pairs)
    worst_score = max([abs(float(rs[i] - gs[j])) for i, j in pairs] or [0.0])
    worst_iou = min([float(iou[i, j]) for i, j in pairs] or [1.0])

    def borderline(score, overlaps, other_scores):
        # type: (float, Any, Any) -> bool
        if thr is not None and abs(score - float(thr)) <= tol:
            return True
        if k and len(other_scores) >= k and score <= float(other_scores.min()) + tol:  # the other side is full
            return True
        return iou_thr is not None and bool((np.abs(overlaps - float(iou_thr)) <= IOU_SLACK).any())

    free_r = [i for i in range(len(rs)) if i not in used_r]
    free_g = [j for j in range(len(gs)) if j not in used_g]
    lost = {}  # type: Dict[int, List[int]]
    extra = {}  # type: Dict[int, List[int]]
    for i in free_r:
        # a box the other side also has, unmatched (another class, another score), is no borderline one
        other = [j for j in free_g if iou[i, j] >= IOU_MATCH]
        if other or not borderline(float(rs[i]), iou[i][near[i]], gs):
            lost[i] = other
    for j in free_g:
        other = [i for i in free_r if iou[i, j] >= IOU_MATCH]
        if other or not borderline(float(gs[j]), iou[:, j][near[:, j]], rs):
            extra[j] = other
    ties = _near_ties(np, ref, mine, iou, sorted(lost), sorted(extra), iou_thr, agnostic, tol)
    ties = ties[:max(1, int(TIE_FRACTION * len(rs)))]  # more than a few: no longer a few near ties
    for i, j in ties:
        del lost[i], extra[j]
    bad = ["the reference's detection %d (class %g, score %.4g) has no counterpart%s"
           % (i, rc[i], rs[i], _as_other(other, gc, gs)) for i, other in sorted(lost.items())]
    bad += ["the pipeline's detection %d (class %g, score %.4g) is not in the reference%s"
            % (j, gc[j], gs[j], _as_other(other, rc, rs)) for j, other in sorted(extra.items())]
    return len(pairs), worst_score, worst_iou, bad, len(ties)


def _near_ties(np, ref, mine, iou, lost, extra, iou_thr, agnostic, tol):
    # type: (Any, Tuple[Any, Any, Any], Tuple[Any, Any, Any], Any, List[int], List[int], Any, bool, float) -> List[Tuple[int, int]]
    """Pairs (i, j) of an unmatched reference detection and an unmatched pipeline one that are one
    near tie, closest scores first, each detection in one pair at most. Two boxes NMS kept one of:
    same class, IoU above NMS's own ``iou_thr`` (each suppresses the other), scores within ``tol``.
    One box whose argmax flipped between two classes: IoU >= :data:`IOU_MATCH`, scores within
    ``tol``, and one side has the box as both classes with scores within ``tol`` of each other (the
    outputs hold one score per detection: without both classes on one side, never forgiven)."""
    rb, rs, rc = ref
    gb, gs, gc = mine
    if iou_thr is None or not lost or not extra:
        return []

    def both(boxes, scores, classes, k, cls):
        # type: (Any, Any, Any, int, float) -> bool
        """Side's detection ``k`` has its box also as class ``cls``, scored within ``tol`` of it."""
        at = _iou(np, boxes[k:k + 1], boxes)[0]
        return bool(((at >= IOU_MATCH) & (classes == cls) & (np.abs(scores - scores[k]) <= tol)).any())

    cands = []  # type: List[Tuple[float, int, int]]
    for i in lost:
        for j in extra:
            gap = abs(float(rs[i] - gs[j]))
            if gap > tol:
                continue
            if agnostic or rc[i] == gc[j]:
                if float(iou[i, j]) > float(iou_thr):
                    cands.append((gap, i, j))
            elif iou[i, j] >= IOU_MATCH and (both(rb, rs, rc, i, gc[j]) or both(gb, gs, gc, j, rc[i])):
                cands.append((gap, i, j))
    pairs, seen_r, seen_g = [], set(), set()  # type: List[Tuple[int, int]], set, set
    for _, i, j in sorted(cands):
        if i not in seen_r and j not in seen_g:
            seen_r.add(i)
            seen_g.add(j)
            pairs.append((i, j))
    return pairs


def _as_other(other, classes, scores):
    # type: (List[int], Any, Any) -> str
    """`` (the other side has its box as class c, score s)`` for an unmatched detection whose box the
    other side has, unmatched."""
    if not other:
        return ""
    return " (the other side has its box as class %g, score %.4g)" % (classes[other[0]], scores[other[0]])


def compare_nms(np, got, want, group, tolerance):
    # type: (Any, Dict[str, Any], Dict[str, Any], Dict[str, Any], float) -> Dict[str, Any]
    """The gate's row for one NMS plugin's four outputs (``group``: their names, the node's
    ``score_threshold``, ``iou_threshold``, ``class_agnostic``): ``passed`` when every detection of
    the reference has a counterpart in the pipeline's and back, except borderline ones (a score
    within the tolerance of the score threshold, or of the lowest score the other side kept when it
    kept all ``max_output_boxes``; an
    overlap with a detection of the other side within :data:`IOU_SLACK` of the IoU threshold)."""
    names = [group[k] for k in ("num_detections", "boxes", "scores", "classes")]
    row = {"metric": "nms_detections", "node": group.get("node"), "op": group.get("op"), "outputs": names,
           "iou_match": IOU_MATCH, "iou_slack": IOU_SLACK}  # type: Dict[str, Any]
    for name in names:
        a, w = np.asarray(got[name]), np.asarray(want[name])
        if a.shape != w.shape:
            row.update(error="output %r: shape %s, reference %s" % (name, list(a.shape), list(w.shape)), passed=False)
            return row
        if a.dtype.kind == "f" and not (np.isfinite(a).all() and np.isfinite(w).all()):
            row.update(error="output %r: non-finite values" % name, passed=False)
            return row
    thr = group.get("score_threshold")
    iou_thr = group.get("iou_threshold")
    agnostic = bool(group.get("class_agnostic"))
    batch, k = _batch_k(np, want, group)
    if np.asarray(want[group["boxes"]]).size != batch * k * 4:
        row.update(error="output %r: %d values, not 4 per detection" % (group["boxes"],
                                                                        np.asarray(want[group["boxes"]]).size),
                   passed=False)
        return row
    matched = ref_n = got_n = ties = 0
    worst_score, worst_iou = 0.0, 1.0
    bad = []  # type: List[str]
    for b in range(batch):
        rb, rs, rc = _detections(np, want, group, b)
        gb, gs, gc = _detections(np, got, group, b)
        ref_n += len(rs)
        got_n += len(gs)
        m, ws, wi, msgs, t = match_detections(np, (rb, rs, rc), (gb, gs, gc), k, thr, iou_thr, agnostic, tolerance)
        matched += m
        ties += t
        worst_score, worst_iou = max(worst_score, ws), min(worst_iou, wi)
        bad += ["image %d: %s" % (b, msg) for msg in msgs]
    row.update(reference_detections=ref_n, pipeline_detections=got_n, matched=matched,
               max_score_diff=worst_score, min_matched_iou=worst_iou if matched else None, near_ties=ties,
               passed=not bad, any_detection=ref_n > 0)
    if bad:
        row["error"] = "detections differ (%d of %d matched; %s%s)" % (
            matched, ref_n, "; ".join(bad[:3]), "; ..." if len(bad) > 3 else "")
    return row


def _selected(np, out, name):
    # type: (Any, Dict[str, Any], str) -> set
    """EfficientNMS_ONNX_TRT's selected (batch, class, box) rows as a set: its threads write them in
    the order they finish (an atomicAdd slot, efficientNMSInference.cu:148-156) and the rows after
    the last one written repeat it (PadONNXResult, :158-175), all -1 when none was kept (:637-640)."""
    rows = np.asarray(out[name]).reshape(-1, 3)
    return set(tuple(int(v) for v in r) for r in rows if (r >= 0).all())


def compare_nms_indices(np, got, want, group):
    # type: (Any, Dict[str, Any], Dict[str, Any], Dict[str, Any]) -> Dict[str, Any]
    """The gate's row for EfficientNMS_ONNX_TRT's selected indices: ``passed`` when the pipeline
    selected the very same (batch, class, box) rows as the reference, in any order. The plugin
    writes no scores, so a box kept on one side only because its score or overlap is near a
    threshold cannot be told from a wrong one: it fails."""
    name = group["indices"]
    row = {"metric": "nms_indices", "node": group.get("node"), "op": group.get("op"),
           "outputs": [name]}  # type: Dict[str, Any]
    a, w = np.asarray(got[name]), np.asarray(want[name])
    if a.shape != w.shape or w.size % 3:
        row.update(error="output %r: shape %s, reference %s" % (name, list(a.shape), list(w.shape)), passed=False)
        return row
    mine, ref = _selected(np, got, name), _selected(np, want, name)
    lost, extra = sorted(ref - mine), sorted(mine - ref)
    row.update(reference_detections=len(ref), pipeline_detections=len(mine), matched=len(ref & mine),
               passed=not lost and not extra, any_detection=bool(ref))
    if lost or extra:
        row["error"] = "selected indices differ (%d of %d matched; not in the pipeline's: %s; not in the " \
                       "reference's: %s)" % (len(ref & mine), len(ref), lost[:3] or "none", extra[:3] or "none")
    return row


def _images(np, out, group):
    # type: (Any, Dict[str, Any], Dict[str, Any]) -> int
    """How many images the rows hold: B when every output is [B, K, its width] with one B > 1 (an
    Ultralytics export at batch B writes [B, 300, 6], each image's detections in its own K rows), else
    1 (rows of one image, or of a whole batch no axis separates: compared as one set)."""
    shapes = [tuple(np.asarray(out[r["output"]]).shape) for r in group["rows"]]
    if all(len(s) == 3 and s[2] == len(r["columns"]) for s, r in zip(shapes, group["rows"])) \
            and len(set(s[0] for s in shapes)) == 1 and shapes[0][0] > 1:
        return int(shapes[0][0])
    return 1


def _row_table(np, out, group, image=None):
    # type: (Any, Dict[str, Any], Dict[str, Any], Optional[int]) -> Any
    """The detection rows of a NonMaxSuppression group's outputs side by side [R, columns] (each
    output read as rows of its width; of image ``image`` alone when given: :func:`_images`), the
    all-zero rows (the padding) left out."""
    parts = [np.asarray(out[r["output"]], dtype=np.float64) for r in group["rows"]]
    if image is not None:
        parts = [p[image] for p in parts]
    parts = [p.reshape(-1, len(r["columns"])) for p, r in zip(parts, group["rows"])]
    if len(set(p.shape[0] for p in parts)) > 1:
        raise ValueError("the outputs %s hold %s rows" % ([r["output"] for r in group["rows"]],
                                                           [p.shape[0] for p in parts]))
    table = np.concatenate(parts, axis=1)
    return table[np.abs(table).sum(axis=1) > 0]


def _as_detections(np, table, columns, center):
    # type: (Any, Any, List[str], bool) -> Tuple[Any, Any, Any]
    """Boxes (corners), scores, classes of the rows, highest score first."""
    boxes = table[:, [i for i, c in enumerate(columns) if c == "box"]]
    if center:  # NonMaxSuppression's center_point_box 1: [x_center, y_center, width, height]
        half = np.abs(boxes[:, 2:4]) / 2.0
        boxes = np.concatenate([boxes[:, 0:2] - half, boxes[:, 0:2] + half], axis=1)
    scores = table[:, columns.index("score")]
    classes = table[:, columns.index("class")] if "class" in columns else np.zeros(len(table))
    order = np.argsort(-scores, kind="stable")
    return boxes[order], scores[order], classes[order]


def compare_nms_rows(np, got, want, group, tolerance):
    # type: (Any, Dict[str, Any], Dict[str, Any], Dict[str, Any], float) -> Dict[str, Any]
    """The gate's row for the outputs an ONNX NonMaxSuppression's selected rows reach (``group``:
    per output its columns, nms_onnx.py): the valid rows (not all zero) of the reference and of the
    pipeline matched one to one. With 4 box, 1 score (and at most 1 class) columns as
    :func:`match_detections` (borderline: near ``score_threshold``, ``iou_threshold``, or the other
    side full at ``max_rows``); else as plain vectors, every value within the tolerance, none forgiven.
    Outputs [B, K, width] with B > 1 are compared image by image (:func:`_images`)."""
    names = [r["output"] for r in group["rows"]]
    columns = [c for r in group["rows"] for c in r["columns"]]
    row = {"metric": "nms_rows", "node": group.get("node"), "op": group.get("op"), "outputs": names,
           "columns": columns, "iou_match": IOU_MATCH, "iou_slack": IOU_SLACK}  # type: Dict[str, Any]
    for name in names:
        a, w = np.asarray(got[name]), np.asarray(want[name])
        if a.shape != w.shape:
            row.update(error="output %r: shape %s, reference %s" % (name, list(a.shape), list(w.shape)), passed=False)
            return row
        if not (np.isfinite(a.astype(np.float64)).all() and np.isfinite(w.astype(np.float64)).all()):
            row.update(error="output %r: non-finite values" % name, passed=False)
            return row
    images = _images(np, want, group)
    capacity = np.asarray(want[names[0]]).size // len(group["rows"][0]["columns"]) // images
    k = min(int(group.get("max_rows") or capacity), capacity)
    detections = columns.count("box") == 4 and columns.count("score") == 1 and columns.count("class") <= 1 \
        and "value" not in columns
    row["compared_as"] = "detections" if detections else "vectors"
    if images > 1:
        row["images"] = images
    written = group.get("images_written")
    if written and images > int(written):  # a dynamic export run past the batch it was exported at
        row["images_without_rows"] = images - int(written)
    matched = ref_n = got_n = ties = 0
    worst_score, worst_iou, worst_diff = 0.0, 1.0, 0.0
    bad = []  # type: List[str]
    for b in range(images):  # each image's rows with its own (a detection of another image is no counterpart)
        try:
            ref, mine = _row_table(np, want, group, b if images > 1 else None), \
                _row_table(np, got, group, b if images > 1 else None)
        except ValueError as exc:
            row.update(error=str(exc), passed=False)
            return row
        ref_n += len(ref)
        got_n += len(mine)
        if detections:
            center = bool(group.get("center_point_box"))
            m, ws, wi, msgs, t = match_detections(
                np, _as_detections(np, ref, columns, center), _as_detections(np, mine, columns, center), k,
                group.get("score_threshold"), group.get("iou_threshold"), "class" not in columns, tolerance,
                bool(group.get("single_class")))
            worst_score, worst_iou = max(worst_score, ws), min(worst_iou, wi)
            ties += t
        else:
            m, wd, msgs = _match_vectors(np, ref, mine, tolerance)
            worst_diff = max(worst_diff, wd)
        matched += m
        bad += [("image %d: %s" % (b, msg)) if images > 1 else msg for msg in msgs]
    if detections:
        row.update(max_score_diff=worst_score, min_matched_iou=worst_iou if matched else None, near_ties=ties)
    else:
        row["max_abs_diff"] = worst_diff
    row.update(reference_detections=ref_n, pipeline_detections=got_n, matched=matched, max_rows=k,
               passed=not bad, any_detection=ref_n > 0)
    if bad:
        row["error"] = "detection rows differ (%d of %d matched; %s%s)" % (
            matched, ref_n, "; ".join(bad[:3]), "; ..." if len(bad) > 3 else "")
    return row


def _match_vectors(np, ref, mine, tolerance):
    # type: (Any, Any, Any, float) -> Tuple[int, float, List[str]]
    """Rows that are no detections matched one to one as plain vectors, every value within the
    tolerance, none forgiven: (matched, worst |diff| of a pair, what is unmatched)."""
    tol = tolerance * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)
    diff = np.abs(ref[:, None, :] - mine[None, :, :]).max(axis=2) if len(ref) and len(mine) else \
        np.zeros((len(ref), len(mine)))
    pairs = _assign(diff <= tol, -diff)
    bad = ["the reference's row %d %s has no counterpart" % (i, [round(float(v), 4) for v in ref[i]])
           for i in sorted(set(range(len(ref))) - set(i for i, _ in pairs))]
    bad += ["the pipeline's row %d %s is not in the reference" % (j, [round(float(v), 4) for v in mine[j]])
            for j in sorted(set(range(len(mine))) - set(j for _, j in pairs))]
    return len(pairs), max([float(diff[i, j]) for i, j in pairs] or [0.0]), bad


def nms_rows(np, got, want, groups, tolerance):
    # type: (Any, Dict[str, Any], Dict[str, Any], Optional[List[Dict[str, Any]]], float) -> Tuple[Dict[str, Any], set]
    """The gate's rows for the NMS outputs (keyed ``nms:<node>``) and the outputs they cover: a TensorRT
    NMS plugin's (:func:`compare_nms`, :func:`compare_nms_indices`) or an ONNX NonMaxSuppression's
    selected rows (:func:`compare_nms_rows`)."""
    rows, covered = {}, set()  # type: Dict[str, Any], set
    for group in groups or []:
        if "rows" in group:
            names = [r["output"] for r in group["rows"]]
            compare = compare_nms_rows
        elif "indices" in group:
            names = [group["indices"]]
            compare = lambda np, got, want, group, tolerance: compare_nms_indices(np, got, want, group)  # noqa: E731
        else:
            names = [group[k] for k in ("num_detections", "boxes", "scores", "classes")]
            compare = compare_nms
        if not all(n in want and n in got for n in names):
            continue
        rows["nms:%s" % group.get("node")] = compare(np, got, want, group, tolerance)
        covered.update(names)
    return rows, covered
