"""Run a built plan in an application: ``rt = placetune.runtime.load(DIR)``, then ``rt(inputs)``.

``DIR`` is a plan folder whose engines are built (``placetune build DIR`` or ``sh DIR/build.sh``
on the Jetson). The runtime is the timing worker's own: the engines and the pipeline of
``placetune/backends/tensorrt/worker_pipeline.py`` (one CUDA stream per engine, events between
them, a buffer per cut tensor per frame in flight), imported into the application's process:

* engine plans: one engine;
* pipeline plans: the segment engines in order, a segment starting when its predecessors are
  done; :meth:`PlanRuntime.stream` keeps K frames in flight (later segments still work on frame
  n while the first starts frame n + 1);
* replicas plans: one engine per device instance; each batch goes to the next free instance
  of its batch size, and the outputs come back in the order the batches went in.

Example (on a Jetson, after ``placetune build plan_dir``)::

    import numpy as np, placetune.runtime
    with placetune.runtime.load("plan_dir") as rt:
        out = rt({"input": np.zeros(rt.inputs["input"][0], np.float32)})
        for out in rt.stream(batches, frames_in_flight=4):
            ...

Every execution context it makes runs with the NVTX markers the engines were timed with, trtexec's
``LAYER_NAMES_ONLY`` (:attr:`PlanRuntime.nvtx_verbosity`): ``placetune build`` writes DETAILED engines
(their layer information checks the placement), and a context's markers default to the build's
verbosity, which TensorRT says "will generally increase latency in enqueueV3()".

TensorRT and the CUDA binding (cuda-python or pycuda, whichever works: the worker's CUDA layer)
are imported when a plan is loaded, not before.

Standalone: this one file, with the worker modules it runs beside it (:func:`write_standalone`
copies them), is the runtime of a deployment that has no placetune: JetPack 5.1's Python 3.8
(which placetune itself does not install on) with only numpy, TensorRT and one CUDA binding::

    python3.11 -c "import placetune.runtime as r; r.write_standalone('app/placetune_rt')"   # once
    # the application, on JetPack 5's /usr/bin/python3:
    import sys; sys.path.insert(0, "app/placetune_rt")
    import placetune_runtime
    rt = placetune_runtime.load("plan_dir")

So it imports nothing of placetune at module level and keeps to Python 3.8 (tests check both:
tests/test_runtime_standalone.py); inside the package (``__package__ == "placetune"``) its errors are
placetune's, standalone (a module of its own, or inside the application's package) its own of the
same names.
"""

from __future__ import annotations

import collections
import importlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Deque, Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple, Union

if __package__ == "placetune":  # placetune.runtime: placetune's error types and its one read path
    from placetune.errors import BackendError, ConfigError
    from placetune.files.names import confined
    from placetune.files.kind import serialized_engine
    from placetune.files.read import read_bytes
else:  # the standalone copy (write_standalone): no placetune to import

    def serialized_engine(path: Union[str, "os.PathLike[str]"]) -> bool:
        """True for a serialized TensorRT engine (placetune.files.kind's, standalone)."""
        try:
            if not os.path.isfile(path):
                return False
            with open(path, "rb") as fh:
                head = fh.read(1 << 20)
        except (OSError, ValueError):
            return False
        size = int.from_bytes(head[:4], "little") if len(head) >= 8 else 0
        return head.startswith(b"ftrt") or (0 < size and head[4:5] == b"{" and head[4 + size:8 + size] == b"ftrt")

    class ConfigError(ValueError):
        """A plan folder or an argument that cannot be used (placetune's ConfigError, standalone)."""

        exit_code = 2

    class BackendError(RuntimeError):
        """TensorRT or CUDA cannot run the plan here (placetune's BackendError, standalone)."""

        exit_code = 8


__all__ = ["PlanRuntime", "load", "write_standalone", "standalone_sources", "STANDALONE_NAME"]

#: the module name of the standalone copy (:func:`write_standalone`)
STANDALONE_NAME = "placetune_runtime"


def _worker_dir() -> Path:
    """Where the worker's modules are: the package's TensorRT backend, or (standalone) beside this file."""
    here = Path(__file__).resolve().parent
    inside = here / "backends" / "tensorrt"
    return inside if __package__ == "placetune" and inside.is_dir() else here


def _worker_modules() -> Dict[str, Any]:
    """The worker's runtime modules, imported as the worker imports them (siblings on sys.path)."""
    here = str(_worker_dir())
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        return {name: importlib.import_module(name)
                for name in ("worker_build", "worker_cuda", "worker_resources", "worker_time", "worker_pipeline")}
    finally:
        if added:
            sys.path.remove(here)


class PlanRuntime:
    """A built plan, loaded: call it with one input, or :meth:`stream` many.

    Attributes:
        directory: the plan folder.
        mode: ``engine``, ``pipeline`` or ``replicas``.
        inputs: network input -> ``(shape, numpy dtype)`` (replicas: of the first instance).
        outputs: network output names.
        frames_in_flight: the most frames :meth:`stream` keeps in flight.
        planned_frames_in_flight: the frames :meth:`stream` keeps in flight by default: the plan's, as it
            was timed (at most ``frames_in_flight``).
        nvtx_verbosity: the NVTX markers every execution context runs with (``LAYER_NAMES_ONLY``, as
            the engines were timed; per engine when one could not be lowered to it).
    """

    def __init__(self, directory: Path, plan: Any, frames_in_flight: Optional[int] = None) -> None:
        import numpy as np

        try:
            import tensorrt as trt
        except ImportError as exc:
            raise BackendError(_no_tensorrt(exc)) from None
        w = _worker_modules()
        self._np = np
        self.directory = directory
        self.mode = plan.mode
        # default: the plan's frames in flight, at least 2 (the pipeline keeps 2 buffer slots anyway)
        planned = max(1, int(plan.settings.get("frames_in_flight") or 1))
        k = int(frames_in_flight if frames_in_flight is not None else max(2, planned))
        if k < 1 or k > 64:
            raise ConfigError(f"frames_in_flight = {k}: allowed 1 to 64")
        self.frames_in_flight = k if plan.mode == "pipeline" else 1
        # what stream() keeps in flight unless told: the frames the plan was timed with (the pipeline's
        # figures hold for that many), at most the number loaded
        self.planned_frames_in_flight = min(planned, self.frames_in_flight)
        self._closed = True  # until loaded: close() frees what a failed load made
        # every stream, event, pinned and device buffer and engine the runtime makes: freed by close()
        self._cuda = w["worker_resources"].Resources(w["worker_cuda"].driver())
        try:
            self._load(directory, plan, trt, np, w)
        except BaseException:
            self._cuda.close()  # never raises; the load's own error is the one to report
            raise
        self._closed = False

    def _load(self, directory: Path, plan: Any, trt: Any, np: Any, w: Dict[str, Any]) -> None:
        _same_tensorrt(directory, str(getattr(trt, "__version__", "") or ""))
        self._logger = w["worker_build"].make_logger(trt, False)
        shapes = _input_shapes(plan.model, str(directory / "plan.json"))
        engines = []
        for i, eng in enumerate(plan.engines):
            # a file of the plan folder: an absolute or ../ engine_file in plan.json is refused, never followed
            path = confined(directory, eng.get("engine_file"), f"plan.json: engine {i}'s engine_file")
            if not os.path.isfile(path):  # (Path.is_file raised OSError for a name too long for the system)
                raise ConfigError(f"{path}: engine {i} of the plan is not built; run `placetune build {directory}` "
                                  f"(or sh {directory / 'build.sh'}) on the Jetson")
            core = _dla_core(eng)
            own = {n: ((int(eng["batch"]),) + s[1:] if plan.mode == "replicas" and eng.get("batch") else s)
                   for n, s in shapes.items()}
            try:
                engines.append(w["worker_time"].Engine(trt, self._cuda, path.stem, read_bytes(path, "engine"), core,
                                                        self._logger, own))
            except RuntimeError as exc:
                raise BackendError(f"{path}: {exc}") from None
        self.nvtx_verbosity = w["worker_time"].engines_nvtx(engines)  # each Engine's context: as timed
        rng = np.random.default_rng(0)
        outputs = list(plan.model.get("outputs") or [])
        if not outputs:  # the tensors no engine reads
            read = {t for e in engines for t in e.inputs}
            outputs = [t for e in engines for t in e.outputs if t not in read]
        pipe_cls = w["worker_pipeline"].Pipeline
        self._stream_frames = w["worker_pipeline"].stream_frames
        groups = [engines] if plan.mode != "replicas" else [[e] for e in engines]
        for group in groups:
            _check_complete(directory, group, set(shapes), outputs)
            _check_network_io(directory, group, outputs)
        self._pipes = []
        for group in groups:
            net_in = {t: shapes.get(t) for e in group for t in e.inputs if t not in {o for g in group for o in g.outputs}}
            try:  # the buffers go to self._cuda
                self._pipes.append(pipe_cls(self._cuda, np, group, net_in, outputs, self.frames_in_flight, rng))
            except RuntimeError as exc:  # engines that do not chain, or a CUDA allocation that failed
                raise BackendError(f"{directory}: {exc}") from None
        first = self._pipes[0]
        self.inputs = {t: (tuple(int(d) for d in v[1]), np.dtype(v[2])) for t, v in first.inputs.items()}
        self.outputs = list(outputs)
        self._batches = [next(iter(p.inputs.values()))[1][0] if p.inputs else None for p in self._pipes]

    # ------------------------------------------------------------------ running
    def _check(self, arrays: Mapping[str, Any], pipe: Any) -> Dict[str, Any]:
        self._still_open()  # its buffers and streams may be freed: nothing may be enqueued on them
        if not isinstance(arrays, Mapping):
            raise ConfigError(f"inputs: a mapping of input name -> array is needed, got {type(arrays).__name__}")
        missing = [t for t in pipe.inputs if t not in arrays]
        extra = [t for t in arrays if t not in pipe.inputs]
        if missing or extra:
            raise ConfigError(f"inputs: the plan's network inputs are {sorted(pipe.inputs)}"
                              + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
        out = {}
        for t, (_, shape, dtype) in pipe.inputs.items():
            try:
                a = self._np.asarray(arrays[t])
            except (TypeError, ValueError) as exc:  # a ragged list, an object numpy cannot make an array of
                raise ConfigError(f"inputs[{t!r}]: not an array ({str(exc)[:120]})") from None
            if tuple(a.shape) != tuple(shape):
                raise ConfigError(f"inputs[{t!r}]: shape {list(a.shape)}, the engine takes {list(shape)}")
            if a.dtype.kind not in "biuf":
                raise ConfigError(f"inputs[{t!r}]: dtype {a.dtype}, the engine takes numbers ({self._np.dtype(dtype)})")
            out[t] = a
        return out

    def _pipe_for(self, arrays: Mapping[str, Any], busy: Set[int]) -> int:
        """The instance for a batch: in replicas mode the first free one of the batch's size."""
        if len(self._pipes) == 1:
            return 0
        a = next(iter(arrays.values()), None) if isinstance(arrays, Mapping) else None
        batch = int(self._np.asarray(a).shape[0]) if a is not None and self._np.ndim(a) else None
        fits = [i for i, b in enumerate(self._batches) if b == batch]
        if not fits:
            raise ConfigError(f"inputs: batch {batch}; this replicas plan's instances take batches "
                              f"{sorted(set(self._batches))}")
        free = [i for i in fits if i not in busy]
        return (free or fits)[0]

    def __call__(self, inputs: Mapping[str, Any]) -> Dict[str, Any]:
        """The outputs (name -> numpy array) of one inference on ``inputs`` (name -> array)."""
        return next(self.stream([inputs], frames_in_flight=1))

    def stream(self, batches: Iterable[Mapping[str, Any]], frames_in_flight: Optional[int] = None
               ) -> Iterator[Dict[str, Any]]:
        """The outputs of each input in ``batches``, in order, with up to ``frames_in_flight``
        frames on the device at once (default: the plan's; at most the number it was loaded
        with). Replicas plans keep every instance busy."""
        if self._closed:
            raise ConfigError("this plan runtime is closed")
        if frames_in_flight is not None and (isinstance(frames_in_flight, bool)
                                             or not isinstance(frames_in_flight, int)):
            raise ConfigError(f"frames_in_flight must be an integer from 1 to {self.frames_in_flight}, got "
                              f"{frames_in_flight!r}"[:200])
        k = self.planned_frames_in_flight if frames_in_flight is None else int(frames_in_flight)
        if not 1 <= k <= self.frames_in_flight and len(self._pipes) == 1:
            raise ConfigError(f"frames_in_flight = {frames_in_flight}: allowed 1 to {self.frames_in_flight} "
                              "(load the plan with more)")
        if len(self._pipes) == 1:  # engine and pipeline plans: the worker's own loop
            pipe = self._pipes[0]
            for out in self._stream_frames(self._np, pipe, (self._check(a, pipe) for a in batches), k):
                yield out
                self._still_open()
            return
        limit = len(self._pipes)
        pending = collections.deque()  # type: Deque[Tuple[int, int]]
        for arrays in batches:
            busy = {i for i, _ in pending}
            i = self._pipe_for(arrays, busy)
            while pending and (len(pending) >= limit or (len(self._pipes) > 1 and i in busy)):
                j, f = pending.popleft()
                yield self._pipes[j].fetch(self._np, f)
                self._still_open()
                busy = {x for x, _ in pending}
            pipe = self._pipes[i]
            fed = pipe.feed(self._np, self._check(arrays, pipe))
            pending.append((i, pipe.frame(fed=fed)))
        while pending:
            j, f = pending.popleft()
            yield self._pipes[j].fetch(self._np, f)
            self._still_open()

    def _still_open(self) -> None:
        """Between two frames of :meth:`stream`: a runtime closed meanwhile stops it (the frames
        still in flight would read freed buffers on destroyed streams)."""
        if self._closed:
            raise ConfigError("this plan runtime was closed while stream() ran")

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Free every CUDA resource of the plan, once the device is idle: the streams, events,
        pinned host and device buffers, and the engines with their execution contexts (newest
        first). A second ``close()`` does nothing.

        Raises:
            BackendError: something could not be freed (a sticky CUDA error: the process's CUDA
                context is unusable; restart it). Everything else was freed all the same.
        """
        self._closed = True
        errors = self._cuda.close()  # the owner empties itself: a second close frees nothing
        if errors:
            raise BackendError(f"{self.directory}: the plan runtime could not free {len(errors)} CUDA resource(s): "
                               + "; ".join(errors[:3]) + "; the process's CUDA context is likely unusable: "
                               "restart the process")

    def __enter__(self) -> "PlanRuntime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PlanRuntime({str(self.directory)!r}, mode={self.mode!r}, engines={sum(len(p.engines) for p in self._pipes)}, "
                f"frames_in_flight={self.frames_in_flight})")


def _dla_core(eng: Mapping[str, Any]) -> int:
    """The DLA core an engine of the plan runs on, -1 for a GPU engine: its ``dla_core``, else its device's
    (``DLA1``: 1; a plan.json may leave ``dla_core`` null, and build.sh builds on the device's core), for an
    engine with DLA layers or a pipeline segment on a DLA. It is set on the runtime before the engine is
    deserialized (``IRuntime.DLA_core``): left unset, a DLA1 engine would run on core 0."""
    device = str(eng.get("device") or "GPU")
    core = eng.get("dla_core")
    if core is None and device.startswith("DLA") and device[3:].isdigit():
        core = int(device[3:])
    on_dla = eng.get("dla_layers") or (eng.get("kind") == "segment" and device != "GPU")
    return int(core) if core is not None and on_dla else -1


def _same_tensorrt(directory: Path, here: str) -> None:
    """Refuse engines ``placetune build`` made with another TensorRT than this Python's (its build.json says
    which): TensorRT deserializes an engine only in the version that built it, and its own error names
    neither version. A folder built by build.sh alone has no build.json and is not checked."""
    path = directory / "build.json"
    if not here or not path.is_file():
        return
    try:
        built = str(json.loads(read_bytes(path, "build.json").decode("utf-8")).get("trt_version") or "")
    except (ValueError, AttributeError, UnicodeDecodeError, ConfigError, RecursionError):  # (nested too deeply)
        return
    if built and built.split(".")[:3] != here.split(".")[:3]:
        raise BackendError(f"{directory}: its engines were built with TensorRT {built[:40]} (build.json), this Python "
                           f"has TensorRT {here[:40]}; an engine loads only in the TensorRT that built it: run "
                           f"`placetune build {directory}` here")


def _check_complete(directory: Path, engines: List[Any], network_inputs: Set[str], outputs: List[str]) -> None:
    """Every tensor an engine reads is a network input or written by an engine of the plan, and every
    network output is written: a plan with a segment missing (an edited plan.json) is refused, never run
    with a cut tensor taken for an input."""
    written = {t for e in engines for t in e.outputs}
    for e in engines:
        for t in e.inputs:
            if t not in written and network_inputs and t not in network_inputs:
                raise ConfigError(f"{directory / 'plan.json'}: engine {e.name} reads {t!r}, which no engine of the "
                                  "plan writes and which is not a network input: a segment of the plan is missing; "
                                  "export the plan folder again")
    lost = [t for t in outputs if t not in written]
    if lost:
        raise ConfigError(f"{directory / 'plan.json'}: no engine of the plan writes the network output(s) "
                          f"{', '.join(map(repr, lost[:5]))}: a segment of the plan is missing; export the plan "
                          "folder again")


def _check_network_io(directory: Path, engines: List[Any], outputs: List[str]) -> None:
    """Every network input and output of the engines is linear and not INT8, as build.sh and ``placetune
    build`` make them: the runtime copies an application's arrays in and out byte for byte (``feed`` /
    ``fetch``), so a vectorised or DLA format (``--inputIOFormats=fp16:chw16``, ``int8:dla_hwc4``) would
    scramble them, and an INT8 tensor needs a scale the runtime does not have; a cut tensor between two
    engines may be in any format both agree on."""
    written = {t for e in engines for t in e.outputs}
    for e in engines:
        for t in list(e.inputs) + list(e.outputs):
            if (t in e.inputs and t in written) or (t in e.outputs and t not in outputs):
                continue  # a cut tensor: engine to engine, never seen by the application
            fmt = e.formats[t][0]
            dtype = e.tensors[t][1]
            if fmt != "LINEAR" or str(dtype) == "int8":
                raise BackendError(f"{directory}: engine {e.name}'s network {'input' if t in e.inputs else 'output'} "
                                   f"{t!r} is {str(dtype).upper()} in format {fmt}; the runtime passes network "
                                   "tensors as linear arrays (an INT8 one would need its scale): build the engine "
                                   "with build.sh or `placetune build`, which leave them linear (no "
                                   "--inputIOFormats/--outputIOFormats on a network input or output)")


def load(directory: Union[str, "os.PathLike[str]"], *, frames_in_flight: Optional[int] = None) -> PlanRuntime:
    """Load a built plan folder (``plan.json`` and the engines ``placetune build`` wrote).

    Args:
        directory: the plan folder.
        frames_in_flight: the most frames :meth:`PlanRuntime.stream` may keep in flight
            (pipeline plans; default: the plan's setting, at least 2).

    Raises:
        ConfigError: no plan folder, or an engine not built yet.
        BackendError: TensorRT or CUDA cannot be used here, or an engine does not load.
    """
    try:
        d = Path(directory)
    except TypeError:
        raise ConfigError(f"placetune.runtime.load: the plan folder must be a path, got {type(directory).__name__}"
                          ) from None
    if frames_in_flight is not None and (isinstance(frames_in_flight, bool)
                                         or not isinstance(frames_in_flight, int)):
        raise ConfigError(f"frames_in_flight must be an integer from 1 to 64, got {frames_in_flight!r}"[:200])
    # os.path (not Path.is_file): a name too long for the system is no plan folder, not an OSError
    if d.name == "plan.json" and os.path.isfile(d):  # the folder's plan file: the folder
        d = d.parent
    if not os.path.isfile(d / "plan.json"):
        raise ConfigError(_not_a_plan_folder(d))
    return PlanRuntime(d, _read_plan(d), frames_in_flight)


def _no_tensorrt(exc: BaseException) -> str:
    """What to do when TensorRT's Python bindings cannot be imported, for a board without placetune (JetPack 5's
    Python 3.8, where the standalone runtime runs) first; placetune's doctor only where placetune is installed."""
    py = f"{sys.executable} (Python {sys.version_info[0]}.{sys.version_info[1]})"
    return (f"the plan runtime needs TensorRT's Python bindings, and {py} cannot import them ({exc}): on the "
            "Jetson they come with JetPack for its system Python /usr/bin/python3 (JetPack 5: Python 3.8): "
            "sudo apt install python3-libnvinfer (the TensorRT of the board's JetPack); in a venv, create it with "
            "--system-site-packages; check with python3 -c \"import tensorrt; print(tensorrt.__version__)\" "
            "(the engines run only with the TensorRT that built them); where placetune is installed, "
            "`placetune doctor` checks the rest")


def _not_a_plan_folder(d: Path) -> str:
    """Why ``d`` cannot be loaded, saying what to give instead."""
    folder = ("the folder `placetune export --study NAME --format trtexec -o DIR` writes and `placetune build DIR` "
              "builds")
    if serialized_engine(d) or d.name.lower().endswith((".engine", ".trt")):
        return (f"{d}: a TensorRT engine file, not a plan folder: placetune.runtime.load takes {folder} (plan.json "
                "and its engines); a single engine loads with TensorRT's own runtime "
                "(tensorrt.Runtime.deserialize_cuda_engine)")
    if d.name.lower().endswith((".onnx", ".onnx.gz")):
        return f"{d}: an ONNX model, not a plan folder: tune it (`placetune tune --model FILE`), then load {folder}"
    if os.path.isfile(d):
        return (f"{d}: a file, not a plan folder: give {folder} (a plan file exported alone with "
                "`placetune export -o plan.json` has no engines)")
    return (f"{d}: not a plan folder (no plan.json); write one with "
            "`placetune export --study NAME --format trtexec -o DIR`, then `placetune build DIR`")


#: the largest plan.json the standalone runtime reads (placetune's own cap for plan files)
_PLAN_CAP = 64 << 20


def _standalone_confined(directory: Path, name: Any, what: str) -> Path:
    """``directory / name`` for a plain file name (standalone; placetune's files.names.confined inside
    the package): text, no path separator, not ``.``/``..``, no NUL or control character."""
    if (not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", "..")
            or any(ord(c) < 32 or ord(c) == 127 for c in name)):
        raise ConfigError("%s %r is not a plain file name; file names from data must stay inside their folder"
                          % (what, name if not isinstance(name, str) else name[:80]))
    return directory / name


def _standalone_read(path: Path, what: str, cap: Optional[int] = None) -> bytes:
    """The bytes of a regular file (standalone; placetune's files.read.read_bytes inside the package):
    a FIFO or device is refused at once, without blocking, as is a file over ``cap`` bytes."""
    import stat

    try:
        fd = os.open(str(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        raise ConfigError("cannot read %s %s: %s" % (what, path, exc.strerror or exc)) from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError("%s %s is not a regular file" % (what, path))
        if cap is not None and st.st_size > cap:
            raise ConfigError("%s %s is larger than %d bytes" % (what, path, cap))
        return fh.read()


if __package__ != "placetune":
    confined = _standalone_confined

    def read_bytes(path: Any, what: str) -> bytes:  # noqa: F811 - the standalone stand-in of files.read
        return _standalone_read(Path(path), what)


class _PlanDoc(object):
    """What the runtime reads of ``plan.json`` where placetune's Plan is not importable (standalone)."""

    def __init__(self, doc: Any, where: str) -> None:
        if not isinstance(doc, dict) or doc.get("format") != "placetune-plan":
            raise ConfigError(f"{where} is not a placetune plan")
        self.mode = doc.get("mode")
        if self.mode not in ("engine", "pipeline", "replicas"):
            raise ConfigError(f"{where}: \"mode\" must be engine, pipeline or replicas, found {self.mode!r}")
        self.engines = doc.get("engines")
        if not isinstance(self.engines, list) or not self.engines or not all(
                isinstance(e, dict) and isinstance(e.get("engine_file"), str) for e in self.engines):
            raise ConfigError(f"{where}: \"engines\" must be a non-empty list of objects with an \"engine_file\"")
        self.model = doc.get("model") if isinstance(doc.get("model"), dict) else {}
        self.settings = doc.get("settings") if isinstance(doc.get("settings"), dict) else {}
        # checked as placetune's Plan checks them: int() of "abc" or a list raised, 2.7 and -3 were taken
        _whole(where, "settings.frames_in_flight", self.settings.get("frames_in_flight"), 1, 64)
        for i, e in enumerate(self.engines):
            _whole(where, "engines[%d].dla_core" % i, e.get("dla_core"), 0, 1)
            _whole(where, "engines[%d].batch" % i, e.get("batch"), 1, 65536)
            if e.get("device") not in (None, "GPU", "DLA0", "DLA1"):  # "DLA2" set DLA core 2 on TensorRT's runtime
                raise ConfigError("%s: \"engines[%d].device\" must be GPU, DLA0 or DLA1, found %s"
                                  % (where, i, repr(e.get("device"))[:40]))
        _input_shapes(self.model, where)


def _input_shapes(model: Mapping[str, Any], where: str) -> Dict[str, Tuple[int, ...]]:
    """plan.json's model.input_shapes, each dim a whole number (not checked by placetune's Plan standalone; an
    open dim, null, is no shape an engine was built for): int() of "abc" or null raised, 1.5 was read as 1."""
    shapes = model.get("input_shapes") or {}
    if not isinstance(shapes, dict) or not all(isinstance(v, list) for v in shapes.values()):
        raise ConfigError("%s: \"model.input_shapes\" must be an object of input name -> list of dims" % where)
    for name, dims in shapes.items():
        for d in dims:
            if d is None:
                raise ConfigError("%s: \"model.input_shapes[%r]\" has an open dim (null), which no engine is built "
                                  "for: export the plan folder again" % (where, str(name)[:40]))
            _whole(where, "model.input_shapes[%r]" % str(name)[:40], d, 0, 2**31 - 1)
    return {n: tuple(dims) for n, dims in shapes.items()}


def _whole(where: str, field: str, value: Any, lo: int, hi: int) -> None:
    """Refuse a plan.json field that is neither absent (null) nor an integer from ``lo`` to ``hi``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi):
        raise ConfigError("%s: \"%s\" must be an integer from %d to %d, found %s"
                          % (where, field, lo, hi, repr(value)[:40]))


def _unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out = {}  # type: Dict[str, Any]
    for k, v in pairs:
        if k in out:
            raise ValueError("duplicate key %r" % k)
        out[k] = v
    return out


def _no_constant(name: str) -> Any:
    raise ValueError("%s is not a number JSON allows" % name)


def _read_plan(d: Path) -> Any:
    """The plan of folder ``d``, read as every plan file is (a regular file, capped, strict JSON:
    no duplicate key, no NaN): placetune's Plan inside the package (every field checked), the
    fields the runtime uses when standalone."""
    where = str(d / "plan.json")
    if __package__ == "placetune":
        from placetune.files.read import read_text
        from placetune.plan.file import Plan
        from placetune.validate import loads_json

        return Plan.from_dict(loads_json(read_text(d / "plan.json", "plan file"), where), where=where)
    raw = _standalone_read(d / "plan.json", "plan file", _PLAN_CAP)
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except RecursionError:  # the json module recurses once per level: "[[[[..." reached Python's limit
        raise ConfigError(f"{where} is nested too deeply (arrays and objects deeper than Python's recursion limit): "
                          "the file is corrupt or edited; export the plan folder again") from None
    return _PlanDoc(doc, where)


def standalone_sources() -> List[Tuple[str, Path]]:
    """The files of the standalone runtime: (name in the runtime folder, the file it copies)."""
    return [(f"{STANDALONE_NAME}.py", Path(__file__))] + [
        (src.name, src) for src in sorted(_worker_dir().glob("worker_*.py"))]


def write_standalone(dest: Union[str, "os.PathLike[str]"]) -> List[Path]:
    """Write the standalone runtime into folder ``dest``: this module as ``placetune_runtime.py``
    and the worker modules it runs (``worker_*.py``), for an application whose Python has no
    placetune (JetPack 5.1's Python 3.8: numpy, TensorRT and pycuda or cuda-python are all it
    needs). Put ``dest`` on that Python's ``sys.path`` and ``import placetune_runtime``.
    ``placetune export --format trtexec -o DIR`` writes it into ``DIR/runtime``.

    Inside the package the folder is guarded as every folder placetune fills: it replaces only
    files it wrote there, unchanged since (:class:`placetune.files.folder.OutputFolder`).

    Returns:
        The files written.
    """
    sources = standalone_sources()
    if __package__ == "placetune":
        from placetune.files.folder import OutputFolder

        folder = OutputFolder(dest, "standalone runtime folder")
        folder.check([name for name, _ in sources])
        return [folder.copy_in(name, src) for name, src in sources]
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    for name, src in sources:
        shutil.copyfile(src, out / name)
    return [out / name for name, _ in sources]
