"""The worker's ``pipeline`` op: engines chained by CUDA streams and events, checked by the correctness gate, timed.

A sibling module of ``worker.py``: Python 3.8, no placetune imports.
"""

import time
import traceback

try:  # Python 3.8 needs typing's generics
    from typing import Any, Dict, List, Optional, Tuple
except ImportError:  # pragma: no cover
    pass

from worker_build import make_logger, obtain_all
from worker_cuda import driver
from worker_resources import Resources, alloc, download, input_values, load_inputs, release
from worker_time import Engine, engines_nvtx, layer_information, median, profile_layers, timed_window
from worker_names import count_loadables
from worker_nms import nms_rows


def compare_outputs(np, got, want, tolerance, nms=None):
    # type: (Any, Dict[str, Any], Dict[str, Any], float, Optional[List[Dict[str, Any]]]) -> Dict[str, Any]
    """The correctness gate: relative L2 error ||got - want|| / ||want|| of every output
    against ``tolerance``; non-finite values fail; an all-zero reference cannot tell. The outputs
    of an NMS plugin (``nms``: its output names per node) are compared as a set of detections
    (:func:`worker_nms.compare_nms`), not element by element."""
    report = {"metric": "relative_l2", "tolerance": tolerance, "outputs": {}, "passed": True,
              "vacuous": True}  # type: Dict[str, Any]
    rows, covered = nms_rows(np, got, want, nms, tolerance)
    for key, found in rows.items():
        report["outputs"][key] = found
        report["passed"] = report["passed"] and found["passed"]
        report["vacuous"] = report["vacuous"] and not found.get("any_detection")
    for name in want:
        if name in covered:
            continue
        a = np.asarray(got[name], dtype=np.float64)
        b = np.asarray(want[name], dtype=np.float64)
        row = {"shape": list(b.shape)}  # type: Dict[str, Any]
        if a.shape != b.shape:
            row.update(error="shape %s, reference %s" % (list(a.shape), list(b.shape)), passed=False)
        elif not (np.isfinite(a).all() and np.isfinite(b).all()):
            row.update(error="non-finite values (pipeline %d, reference %d)"
                       % (int((~np.isfinite(a)).sum()), int((~np.isfinite(b)).sum())), passed=False)
        else:
            diff = np.abs(a - b)
            norm = float(np.sqrt((b * b).sum()))
            worst = tuple(int(i) for i in np.unravel_index(int(diff.argmax()), diff.shape)) if diff.size else ()
            row.update(max_abs_diff=float(diff.max()) if diff.size else 0.0, at=list(worst),
                       ref_max_abs=float(np.abs(b).max()) if b.size else 0.0,
                       got_max_abs=float(np.abs(a).max()) if a.size else 0.0)
            if norm > 0:
                rel = float(np.sqrt((diff * diff).sum())) / norm
                row.update(rel_l2=rel, passed=rel <= tolerance)
                report["vacuous"] = False
            elif diff.any():
                row.update(rel_l2=None, passed=False, error="the reference output is all zeros but the pipeline's "
                           "is not (max |x| %.4g)" % row["got_max_abs"])
            else:
                row.update(rel_l2=0.0, passed=True)
        report["outputs"][name] = row
        report["passed"] = report["passed"] and row["passed"]
    return report


def _gate_error(report):
    # type: (Dict[str, Any]) -> str
    """What the gate found, in one line (``report["reference"]`` names what was compared with)."""
    parts = []
    for name, row in report["outputs"].items():
        if row.get("passed"):
            continue
        if "error" in row:
            parts.append("output %r: %s" % (name, row["error"]))
        else:
            parts.append("output %r: relative L2 error %.4g > tolerance %.4g (max |diff| %.4g at %s; reference "
                         "max |x| %.4g, pipeline max |x| %.4g)" % (name, row["rel_l2"], report["tolerance"],
                                                                   row["max_abs_diff"], tuple(row["at"]),
                                                                   row["ref_max_abs"], row["got_max_abs"]))
    if report.get("nms_elementwise"):  # why an NMS plugin's reordered detections may have failed it
        parts.append("compared element by element: " + "; ".join(report["nms_elementwise"]))
    return "pipeline outputs differ from %s on %s: %s" % (report.get("reference", "the all-GPU engine"),
                                                         report.get("on", "random input"), "; ".join(parts))


def compare_frames(np, got, want, tolerance, nms=None):
    # type: (Any, List[Dict[str, Any]], List[Dict[str, Any]], float, Optional[List[Dict[str, Any]]]) -> Dict[str, Any]
    """:func:`compare_outputs` of several frames (each against its own input's reference):
    the report of the worst frame, with ``frames`` (each frame's verdict) and ``frame``.
    ``same_for_every_input`` is True when the reference gave the very same outputs for every
    (different, random) input: they do not depend on the input there (a detector's NMS that keeps
    no box of random input, all-zero outputs), so the gate could not tell a wrong cut."""
    reports = [compare_outputs(np, g, w, tolerance, nms) for g, w in zip(got, want)]

    def badness(r):
        rels = [row.get("rel_l2") for row in r["outputs"].values()]
        return (not r["passed"], max([x for x in rels if x is not None] or [0.0]))

    worst = max(range(len(reports)), key=lambda i: badness(reports[i]))
    report = reports[worst]
    report["frame"] = worst
    report["frames"] = [r["passed"] for r in reports]
    report["vacuous"] = all(r["vacuous"] for r in reports)
    report["same_for_every_input"] = len(want) > 1 and all(
        set(w) == set(want[0]) and all(np.array_equal(np.asarray(w[t]), np.asarray(want[0][t])) for t in w)
        for w in want[1:])
    report["passed"] = all(r["passed"] for r in reports)
    return report


class Pipeline(object):
    """Engines chained by their tensors: one stream each, an event per (engine, buffer slot),
    ``slots`` device buffers per cut tensor, ``in_flight`` frames at once.

    Frame ``f`` uses slot ``f % slots`` and network input ``f % n_inputs`` (``slots + 1``
    different random inputs, host copies in ``input_data[t]``): no two frames that share a slot
    less than ``slots * n_inputs`` frames apart share an input, so a frame that reads a buffer
    too early or too late (another frame's data) gives a wrong output. (With one input per slot,
    a read of the same slot's previous frame saw identical numbers: the GPU test showed it.)
    Before an engine runs frame ``f`` its stream waits
    for: the engines that produce its inputs (frame ``f``); the engines that read its outputs
    in the same slot (frame ``f - slots``: write after read); for a source engine, the sinks
    of frame ``f - in_flight``. Independent branches therefore run at once.
    """

    def __init__(self, cuda, np, engines, net_inputs, net_outputs, in_flight, rng, data=None):
        # type: (Any, Any, List[Engine], Dict[str, Any], List[str], int, Any, Optional[Dict[str, Any]]) -> None
        self.cuda = cuda
        self.data = data  # the network inputs given (--input-data): every slot holds them; None: random inputs
        self.engines = engines
        self.k = max(1, int(in_flight))
        self.slots = max(2, self.k)
        self.n_inputs = self.slots + 1
        n = len(engines)
        producer = {}  # type: Dict[str, int]
        for i, e in enumerate(engines):
            for t in e.outputs:
                if t in producer:
                    raise RuntimeError("tensor %r is an output of engines %s and %s"
                                       % (t, engines[producer[t]].name, e.name))
                producer[t] = i
        self.preds = [set() for _ in engines]  # type: List[set]
        self.succs = [set() for _ in engines]  # type: List[set]
        for i, e in enumerate(engines):
            for t in e.inputs:
                if t in producer:
                    j = producer[t]
                    if j >= i:
                        raise RuntimeError("engine %s reads %r from engine %s, which comes later: engines must be "
                                           "in topological order" % (e.name, t, engines[j].name))
                    if engines[j].tensors[t] != e.tensors[t] or engines[j].formats[t][0] != e.formats[t][0]:
                        (ps, pd), (cs, cd) = engines[j].tensors[t], e.tensors[t]
                        raise RuntimeError("cut tensor %r: engine %s writes %s %s %s but engine %s reads %s %s %s"
                                           % (t, engines[j].name, pd.name, engines[j].formats[t][0], list(ps),
                                              e.name, cd.name, e.formats[t][0], list(cs)))
                    self.preds[i].add(j)
                    self.succs[j].add(i)
                elif t not in net_inputs:
                    raise RuntimeError("engine %s reads %r, which no engine and no network input provides"
                                       % (e.name, t))
        missing = [o for o in net_outputs if o not in producer]
        if missing:
            raise RuntimeError("no engine outputs the network output(s) %s" % ", ".join(repr(o) for o in missing))
        self.sinks = [i for i in range(n) if not self.succs[i]]
        self.producer = producer
        self.net_outputs = list(net_outputs)
        # network inputs: one read-only buffer per slot, each a different random input (pinned
        # host copy, async upload); every engine output: one buffer per slot
        self.inputs = {}  # type: Dict[str, Tuple[List[Any], Tuple[int, ...], Any]]
        self.input_data = {}  # type: Dict[str, List[Any]]
        for t in net_inputs:
            readers = [e for e in engines if t in e.inputs]
            if not readers:
                continue
            shape, dtype = readers[0].tensors[t]
            self.add_input(np, rng, t, shape, dtype, readers[0].nbytes(t), readers[0].stream)
        self.buffers = {}  # type: Dict[str, List[Any]]
        for t, i in producer.items():
            self.buffers[t] = [alloc(cuda, engines[i].nbytes(t)) for _ in range(self.slots)]
        self.addresses = []  # type: List[List[List[Tuple[str, Any]]]]
        for e in engines:
            per_slot = []
            for s in range(self.slots):
                addr = [(t, self.buffers[t][s] if t in self.buffers else None) for t in e.inputs]
                addr += [(t, self.buffers[t][s]) for t in e.outputs]
                per_slot.append(addr)
            self.addresses.append(per_slot)
        self.done = [[cuda.Event() for _ in range(self.slots)] for _ in engines]
        self.timer = cuda.Stream()
        self.frame_no = 0
        self.read_other_slot = False
        for e in engines:
            e.stream.synchronize()  # the inputs are uploaded

    def add_input(self, np, rng, t, shape, dtype, nbytes, stream):
        # type: (Any, Any, str, Tuple[int, ...], Any, int, Any) -> None
        """``n_inputs`` buffers of network input ``t``, each a new random input (or, with input data,
        each another mirror image of it: ``worker_resources.mirrored``), uploaded from pinned memory
        on ``stream``."""
        mems, data = [], []
        for x in range(self.n_inputs):
            host = self.cuda.pagelocked_empty(tuple(int(d) for d in shape), dtype)
            host.reshape(-1)[:] = input_values(np, rng, self.data, t, shape, dtype, x)
            mem = alloc(self.cuda, nbytes)
            self.cuda.memcpy_htod_async(mem, host, stream)
            mems.append(mem)
            data.append(host)
        self.inputs[t] = (mems, shape, dtype)
        self.input_data[t] = data

    def addresses_of(self, i, f):
        # type: (int, int) -> List[Tuple[str, Any]]
        """Engine ``i``'s tensor addresses in frame ``f`` (its slot, its input)."""
        x = f % self.n_inputs
        return [(t, self.inputs[t][0][x] if m is None else m) for t, m in self.addresses[i][f % self.slots]]

    def mark(self, f, event):
        # type: (int, Any) -> None
        """Record ``event`` on the timing stream once frame ``f``'s sinks are done (no host wait)."""
        for j in self.sinks:
            self.timer.wait_for_event(self.done[j][f % self.slots])
        event.record(self.timer)

    def feed(self, np, arrays):
        # type: (Any, Dict[str, Any]) -> Any
        """Upload an application's network inputs for the next frame (placetune.runtime): into the
        input buffers that frame reads, from their pinned host copies, on a stream of their own;
        returns the event :meth:`frame` makes the inputs' readers wait for (``fed``). The frame
        that last used these buffers (``n_inputs`` frames earlier) must be done: keep at most
        ``slots`` frames in flight."""
        if not hasattr(self, "feeder"):
            self.feeder = self.cuda.Stream()
            self.fed = [self.cuda.Event() for _ in range(self.n_inputs)]
        x = self.frame_no % self.n_inputs
        for t, (mems, shape, dtype) in self.inputs.items():
            host = self.input_data[t][x]
            host.reshape(-1)[:] = np.asarray(arrays[t], dtype=dtype).reshape(-1)
            self.cuda.memcpy_htod_async(mems[x], host, self.feeder)
        self.fed[x].record(self.feeder)
        return self.fed[x]

    def fetch(self, np, f):
        # type: (Any, int) -> Dict[str, Any]
        """The network outputs of frame ``f`` (placetune.runtime): copied on a stream of their own
        once the engines that write them are done, waiting for that stream only (a synchronous copy would
        wait for every frame in flight). Fetch ``f`` before frame ``f + slots`` is enqueued."""
        if not hasattr(self, "fetcher"):
            self.fetcher = self.cuda.Stream()
            self.host_out = {}
            for t in self.net_outputs:
                shape, dtype = self.engines[self.producer[t]].tensors[t]
                self.host_out[t] = self.cuda.pagelocked_empty(tuple(int(d) for d in shape), dtype)
        s = f % self.slots
        for j in sorted(set(self.producer[t] for t in self.net_outputs)):
            self.fetcher.wait_for_event(self.done[j][s])
        for t in self.net_outputs:
            self.cuda.memcpy_dtoh_async(self.host_out[t], self.buffers[t][s], self.fetcher)
        self.fetcher.synchronize()
        return dict((t, np.array(self.host_out[t], copy=True)) for t in self.net_outputs)

    def frame(self, after=None, marks=None, fed=None):
        # type: (Any, Optional[List[Tuple[Any, Any]]], Any) -> int
        """Enqueue the next frame (returns its number); ``after``: an event its source engines
        wait for; ``marks``: (start, end) events per engine to record around each run; ``fed``:
        the event of :meth:`feed` that the readers of network inputs wait for."""
        f = self.frame_no
        self.frame_no += 1
        s = f % self.slots
        for i, e in enumerate(self.engines):
            st = e.stream
            if fed is not None and any(t in self.inputs for t in e.inputs):
                st.wait_for_event(fed)
            if not self.preds[i]:
                if after is not None:
                    st.wait_for_event(after)
                if f >= self.k:
                    for j in self.sinks:
                        st.wait_for_event(self.done[j][(f - self.k) % self.slots])
            for j in self.preds[i]:
                st.wait_for_event(self.done[j][s])
            if f >= self.slots:
                for j in self.succs[i]:
                    st.wait_for_event(self.done[j][s])
            if marks is not None:
                marks[i][0].record(st)
            addr = self.addresses_of(i, f)
            if self.read_other_slot and f >= self.slots:  # test hook: a slot race
                addr = [(t, self.buffers[t][(s + 1) % self.slots] if t in self.buffers and t in e.inputs else m)
                        for t, m in addr]
            e.run(addr)
            if marks is not None:
                marks[i][1].record(st)
            self.done[i][s].record(st)
        return f

    def finish(self, f, end):
        # type: (int, Any) -> None
        """Record ``end`` on the timing stream once frame ``f`` (and so every earlier one) is done; wait."""
        self.mark(f, end)
        end.synchronize()

    def outputs(self, np, f):
        # type: (Any, int) -> Dict[str, Any]
        s = f % self.slots
        out = {}
        for t in self.net_outputs:
            shape, dtype = self.engines[self.producer[t]].tensors[t]
            out[t] = download(self.cuda, np, self.buffers[t][s], shape, dtype)
        return out


def stream_frames(np, pipe, batches, k):
    # type: (Any, Pipeline, Any, int) -> Any
    """An application's frames through ``pipe`` (placetune.runtime): each batch of network inputs
    fed, run and fetched, the outputs yielded in order with at most ``k`` frames in flight
    (``k`` <= ``pipe.slots``; the pipeline was made with at least ``k`` in flight)."""
    if not 1 <= k <= min(pipe.slots, pipe.k):
        raise ValueError("frames in flight must be 1 to %d, not %r" % (min(pipe.slots, pipe.k), k))
    pending = []  # type: List[int]
    for arrays in batches:
        if len(pending) >= k:
            yield pipe.fetch(np, pending.pop(0))
        fed = pipe.feed(np, arrays)
        pending.append(pipe.frame(fed=fed))
    while pending:
        yield pipe.fetch(np, pending.pop(0))


def _run_pipeline(trt, cuda, np, job, plans, ref_plan, logger, out, ref_core=-1):
    # type: (Any, Any, Any, Dict[str, Any], List[bytes], Optional[bytes], Any, Dict[str, Any], int) -> None
    specs = job["engines"]
    engines = [Engine(trt, cuda, str(s.get("name")), p, int(s.get("dla_core", -1)), logger, s.get("input_shapes"))
               for s, p in zip(specs, plans)]
    out["nvtx_verbosity"] = engines_nvtx(engines)  # the NVTX markers every timed context runs with
    inspect = (job.get("common") or {}).get("inspector", True)
    for i, (e, s) in enumerate(zip(engines, specs)):
        if inspect and int(s.get("dla_core", -1)) >= 0:  # where its layers ran: the second source, beside the log
            layer_information(trt, e.engine, e.context, out["engines"][i])
    rng = np.random.default_rng(int(job.get("seed", 0)))
    pipe = Pipeline(cuda, np, engines, job.get("network_inputs") or {}, list(job.get("network_outputs") or []),
                     int(job.get("frames_in_flight", 1)), rng, load_inputs(np, job))
    out["slots"] = pipe.slots
    # device memory (cuMemAlloc), as an application chaining the engines allocates them (placetune.runtime),
    # not trtexec's managed memory of engine mode and replicas: said with the figures
    out["io_memory"] = "device"
    pipe.read_other_slot = bool(job.get("test_read_other_slot"))
    end = cuda.Event()
    t0 = cuda.Event()
    # ---- correctness gate: the pipeline against the reference engine (all-GPU, or for INT8 without
    # a calibration cache the unsplit engine: ``gate["reference"]``), one frame per slot, each slot
    # a different random input with its own reference output
    gate = job.get("gate") or {}
    want = None  # type: Optional[List[Dict[str, Any]]]
    if ref_plan is not None:
        got = []
        for _ in range(pipe.n_inputs):
            f = pipe.frame()
            pipe.finish(f, end)
            got.append(pipe.outputs(np, f))
        ref = Engine(trt, cuda, "reference", ref_plan, ref_core, logger, job.get("network_inputs"))
        for t in ref.inputs:
            if t not in pipe.inputs:  # a network input no segment reads
                pipe.add_input(np, rng, t, ref.tensors[t][0], ref.tensors[t][1], ref.nbytes(t), ref.stream)
        ref_out = dict((t, alloc(cuda, ref.nbytes(t))) for t in ref.outputs)
        missing = [t for t in pipe.net_outputs if t not in ref_out]
        if missing:
            raise RuntimeError("the reference engine has no output %s" % ", ".join(repr(t) for t in missing))
        want = []
        for x in range(pipe.n_inputs):
            ref.run([(t, pipe.inputs[t][0][x]) for t in ref.inputs] + [(t, ref_out[t]) for t in ref.outputs])
            ref.stream.synchronize()
            want.append(dict((t, download(cuda, np, ref_out[t], ref.tensors[t][0], ref.tensors[t][1]))
                             for t in pipe.net_outputs))
        report = compare_frames(np, got, want, float(gate.get("tolerance", 1e-2)), gate.get("nms"))
        report["enforced"] = bool(gate.get("enforce", True))
        report["checked"] = True
        report["inputs"] = pipe.n_inputs
        report["reference"] = str(gate.get("reference") or "the all-GPU engine")
        report["on"] = "random input" if pipe.data is None else "the input data (each slot a mirror image of it)"
        if gate.get("nms_elementwise"):
            report["nms_elementwise"] = list(gate["nms_elementwise"])
        out["gate"] = report
        if report["enforced"] and not report["passed"]:
            out["status"] = "runtime_failed"
            out["error"] = _gate_error(report)
            return
    # ---- warm-up
    warm_s = float(job.get("warmup_ms", 200.0)) / 1000.0
    t_start = time.perf_counter()
    warm = 0
    while warm < pipe.slots + pipe.k or time.perf_counter() - t_start < warm_s:
        f = pipe.frame()
        warm += 1
        if warm % max(1, 4 * pipe.k) == 0:
            pipe.finish(f, end)
    pipe.finish(f, end)
    out["warmup_frames"] = warm
    n_eng = len(engines)
    timed_from = time.monotonic()  # the timed part: from the latency loop to each engine alone (not the profile)
    # ---- single-frame latency; the last one also gives each engine's interval
    marks = [(cuda.Event(), cuda.Event()) for _ in range(n_eng)]
    samples = []  # type: List[float]
    iterations = max(1, int(job.get("iterations", 50)))
    for it in range(iterations):
        t0.record(pipe.timer)
        f = pipe.frame(after=t0, marks=marks if it == iterations - 1 else None)
        pipe.finish(f, end)
        samples.append(float(end.time_since(t0)))
    out["latency_samples_ms"] = samples
    out["schedule"] = [[float(a.time_since(t0)), float(b.time_since(t0))] for a, b in marks]
    # ---- throughput with K frames in flight: the time between frame completions in steady
    # state, after `fill` frames (the pipeline filling) and before the last `drain`
    steady = max(iterations, 4 * pipe.slots)
    fill = drain = pipe.slots + n_eng
    frames = fill + steady + drain
    done_at = [cuda.Event() for _ in range(frames)]
    t0.record(pipe.timer)
    for k in range(frames):
        f = pipe.frame(after=t0 if k < pipe.k else None)
        pipe.mark(f, done_at[k])
    pipe.finish(f, end)
    out["throughput_frames"] = steady
    out["throughput_window"] = [fill, fill + steady]
    out["period_ms"] = float(done_at[fill + steady - 1].time_since(done_at[fill - 1])) / steady
    if want is not None:  # the last frames of K in flight must still be right (buffer reuse)
        last = list(range(f - pipe.slots + 1, f + 1))
        report = compare_frames(np, [pipe.outputs(np, g) for g in last], [want[g % pipe.n_inputs] for g in last],
                                float(gate.get("tolerance", 1e-2)), gate.get("nms"))
        report["reference"] = out["gate"]["reference"]
        report["nms_elementwise"] = out["gate"].get("nms_elementwise")
        bad = last[report["frame"]]
        out["gate"]["after_timing"] = {"frame": bad, "frames": last, "passed": report["passed"],
                                       "outputs": report["outputs"]}
        if out["gate"]["enforced"] and not report["passed"]:
            out["status"] = "runtime_failed"
            out["error"] = _gate_error(report) + " (frame %d, %d frames in flight)" % (bad, pipe.k)
            return
    # ---- timeline: a few frames with K in flight, every engine run stamped
    n_frames = max(1, min(int(job.get("timeline_frames", 4)), 2000 // max(1, n_eng)))
    stamps = [[(cuda.Event(), cuda.Event()) for _ in range(n_eng)] for _ in range(n_frames)]
    t0.record(pipe.timer)
    for k in range(n_frames):
        f = pipe.frame(after=t0 if k < pipe.k else None, marks=stamps[k])
    pipe.finish(f, end)
    out["timeline"] = [[i, k, float(a.time_since(t0)), float(b.time_since(t0))]
                       for k in range(n_frames) for i, (a, b) in enumerate(stamps[k])]
    # ---- each engine alone, then its layer profile
    reps = max(1, min(iterations, 20))
    alone = []
    for i, e in enumerate(engines):
        times = []
        for _ in range(reps):
            marks[i][0].record(e.stream)
            e.run(pipe.addresses_of(i, 0))
            marks[i][1].record(e.stream)
            marks[i][1].synchronize()
            times.append(float(marks[i][1].time_since(marks[i][0])))
        alone.append(median(times))
    out["alone_ms"] = alone
    out["timed_window"] = timed_window(timed_from)
    prof_reps = int(job.get("profile_iterations", 0))
    if prof_reps > 0:
        profiles = []
        for i, e in enumerate(engines):
            addr = pipe.addresses_of(i, 0)
            profiles.append(profile_layers(trt, e.context, lambda e=e, addr=addr: e.run(addr), e.stream, prof_reps))
        out["layer_profiles"] = profiles
    out["status"] = "ok"


MAX_LOADABLES_PER_CORE = 16  # "only 16 DLA loadables can be loaded concurrently per core" (DLA guide)


def _loadables(info):
    # type: (Dict[str, Any]) -> int
    """An engine's DLA loadables: its ``[DlaLayer]`` (or 10.3's ``successfully offloaded``) build-log lines."""
    return count_loadables([msg for _, msg in info.get("log") or []])


def _per_core(specs, infos):
    # type: (List[Dict[str, Any]], List[Dict[str, Any]]) -> Dict[int, int]
    per_core = {}  # type: Dict[int, int]
    for spec, info in zip(specs, infos):
        core = int(spec.get("dla_core", -1))
        if core >= 0:
            per_core[core] = per_core.get(core, 0) + _loadables(info)
    return per_core


def reference_core(specs, infos, ref_spec, ref_info, cores):
    # type: (List[Dict[str, Any]], List[Dict[str, Any]], Dict[str, Any], Dict[str, Any], int) -> Optional[int]
    """The DLA core to load a DLA reference engine on beside the pipeline's engines (the runtime's
    ``DLA_core`` decides the core, whatever core it was built for): its own if its loadables fit
    there, else the least loaded core where they fit; None when none has room. -1: a GPU reference."""
    own = int(ref_spec.get("dla_core", -1))
    if own < 0:
        return -1
    need = _loadables(ref_info)
    load = _per_core(specs, infos)
    for core in [own] + sorted(range(max(cores, own + 1)), key=lambda c: load.get(c, 0)):
        if load.get(core, 0) + need <= MAX_LOADABLES_PER_CORE:
            return core
    return None


def too_many_loadables(specs, infos):
    # type: (List[Dict[str, Any]], List[Dict[str, Any]]) -> Optional[str]
    """Why the built engines cannot run together (None when they can): their ``[DlaLayer]``
    lines, one per DLA loadable, summed per DLA core over every engine that is loaded at once."""
    per_core = _per_core(specs, infos)
    over = {c: n for c, n in per_core.items() if n > MAX_LOADABLES_PER_CORE}
    if not over:
        return None
    return "; ".join("the pipeline's engines hold %d DLA loadables on DLA%d, more than the %d a core can load at "
                     "once" % (n, c, MAX_LOADABLES_PER_CORE) for c, n in sorted(over.items()))


def pipeline(job):
    # type: (Dict[str, Any]) -> Dict[str, Any]
    """Build (or load from the engine cache) one engine per segment and an all-GPU reference,
    check the pipeline against it, then time it: latency, throughput with K frames in flight,
    a timeline of a few frames, each engine alone and its layer profile."""
    import numpy as np
    import tensorrt as trt

    result = {"trt_version": str(trt.__version__), "engines": []}  # type: Dict[str, Any]
    specs = list(job.get("engines") or [])
    ref_spec = job.get("reference")
    plans = obtain_all(trt, specs + ([ref_spec] if ref_spec else []), job.get("common") or {}, result)
    if plans is None:
        return result
    ref_plan = plans.pop() if ref_spec else None
    if ref_spec:
        result["reference"] = result["engines"].pop()
    over = too_many_loadables(specs, result["engines"])
    if over:  # the engines would be loaded at once: refuse before deserialising any
        result.update(status="infeasible", error=over)
        return result
    ref_core = -1  # type: Optional[int]
    if ref_spec:
        ref_core = reference_core(specs, result["engines"], ref_spec, result["reference"],
                                  int(job.get("dla_cores") or 0))
        if ref_core is None:  # the unsplit engine cannot be loaded beside the pipeline: no gate
            ref_plan = None
            result["gate"] = {"checked": False, "reason": "the reference engine's DLA loadables do not fit beside "
                              "the pipeline's on any DLA core (16 per core): the pipeline is not checked"}
    logger = make_logger(trt, False)
    result["runtime_log"] = logger.lines
    cuda = None  # the job's streams, events, buffers and engines: all freed when it ends
    try:
        cuda = Resources(driver())
        _run_pipeline(trt, cuda, np, job, plans, ref_plan, logger, result,
                      ref_core if ref_core is not None else -1)
    except Exception as exc:
        result.update(status="runtime_failed", error="%s: %s" % (type(exc).__name__, exc),
                      traceback=traceback.format_exc(limit=6))
    finally:
        release(cuda, result)
    return result
