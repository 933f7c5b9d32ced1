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

TensorRT and the CUDA binding (cuda-python or pycuda, whichever works: the worker's CUDA layer)
are imported when a plan is loaded, not before.
"""

from __future__ import annotations

import collections
import importlib
import os
import sys
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from placetune.errors import BackendError, ConfigError
from placetune.files.names import confined
from placetune.files.read import read_bytes

__all__ = ["PlanRuntime", "load"]


def _worker_modules() -> dict[str, Any]:
    """The worker's runtime modules, imported as the worker imports them (siblings on sys.path)."""
    from placetune.backends.tensorrt.pool import WORKER_FILE

    here = str(WORKER_FILE.parent)
    added = here not in sys.path
    if added:
        sys.path.insert(0, here)
    try:
        return {name: importlib.import_module(name)
                for name in ("worker_build", "worker_cuda", "worker_time", "worker_pipeline")}
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
    """

    def __init__(self, directory: Path, plan: Any, frames_in_flight: int | None = None) -> None:
        import numpy as np

        try:
            import tensorrt as trt
        except ImportError as exc:
            raise BackendError(f"placetune.runtime needs TensorRT here: {exc}; run `placetune doctor`") from None
        w = _worker_modules()
        self._np = np
        self.directory = directory
        self.mode = plan.mode
        # default: the plan's frames in flight, at least 2 (the pipeline keeps 2 buffer slots anyway)
        k = int(frames_in_flight if frames_in_flight is not None else max(2, int(plan.settings.get("frames_in_flight")
                                                                                 or 1)))
        if k < 1 or k > 64:
            raise ConfigError(f"frames_in_flight = {k}: allowed 1 to 64")
        self.frames_in_flight = k if plan.mode == "pipeline" else 1
        self._cuda = w["worker_cuda"].driver()
        self._logger = w["worker_build"].make_logger(trt, False)
        self._allocs: list[Any] = []
        shapes = {n: tuple(int(d) for d in v) for n, v in (plan.model.get("input_shapes") or {}).items()}
        engines = []
        for i, eng in enumerate(plan.engines):
            # a file of the plan folder: an absolute or ../ engine_file in plan.json is refused, never followed
            path = confined(directory, eng.get("engine_file"), f"plan.json: engine {i}'s engine_file")
            if not path.is_file():
                raise ConfigError(f"{path}: engine {i} of the plan is not built; run `placetune build {directory}` "
                                  f"(or sh {directory / 'build.sh'}) on the Jetson")
            core = eng.get("dla_core")
            core = int(core) if core is not None and (eng.get("dla_layers") or eng.get("kind") == "segment") else -1
            own = {n: ((int(eng["batch"]),) + s[1:] if plan.mode == "replicas" and eng.get("batch") else s)
                   for n, s in shapes.items()}
            try:
                engines.append(w["worker_time"].Engine(trt, self._cuda, path.stem, read_bytes(path, "engine"), core,
                                                        self._logger, own))
            except RuntimeError as exc:
                raise BackendError(f"{path}: {exc}") from None
        rng = np.random.default_rng(0)
        outputs = list(plan.model.get("outputs") or [])
        if not outputs:  # the tensors no engine reads
            read = {t for e in engines for t in e.inputs}
            outputs = [t for e in engines for t in e.outputs if t not in read]
        pipe_cls = w["worker_pipeline"]._Pipeline
        self._stream_frames = w["worker_pipeline"].stream_frames
        groups = [engines] if plan.mode != "replicas" else [[e] for e in engines]
        self._pipes = []
        for group in groups:
            net_in = {t: shapes.get(t) for e in group for t in e.inputs if t not in {o for g in group for o in g.outputs}}
            self._pipes.append(pipe_cls(self._cuda, np, group, net_in, outputs, self.frames_in_flight, self._allocs,
                                        rng))
        first = self._pipes[0]
        self.inputs = {t: (tuple(int(d) for d in v[1]), np.dtype(v[2])) for t, v in first.inputs.items()}
        self.outputs = list(outputs)
        self._batches = [next(iter(p.inputs.values()))[1][0] if p.inputs else None for p in self._pipes]
        self._end = self._cuda.Event()
        self._closed = False

    # ------------------------------------------------------------------ running
    def _check(self, arrays: Mapping[str, Any], pipe: Any) -> dict[str, Any]:
        if not isinstance(arrays, Mapping):
            raise ConfigError(f"inputs: a mapping of input name -> array is needed, got {type(arrays).__name__}")
        missing = [t for t in pipe.inputs if t not in arrays]
        extra = [t for t in arrays if t not in pipe.inputs]
        if missing or extra:
            raise ConfigError(f"inputs: the plan's network inputs are {sorted(pipe.inputs)}"
                              + (f"; missing {missing}" if missing else "") + (f"; unknown {extra}" if extra else ""))
        out = {}
        for t, (_, shape, dtype) in pipe.inputs.items():
            a = self._np.asarray(arrays[t])
            if tuple(a.shape) != tuple(shape):
                raise ConfigError(f"inputs[{t!r}]: shape {list(a.shape)}, the engine takes {list(shape)}")
            out[t] = a
        return out

    def _pipe_for(self, arrays: Mapping[str, Any], busy: set[int]) -> int:
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

    def __call__(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The outputs (name -> numpy array) of one inference on ``inputs`` (name -> array)."""
        return next(self.stream([inputs], frames_in_flight=1))

    def stream(self, batches: Iterable[Mapping[str, Any]], frames_in_flight: int | None = None
               ) -> Iterator[dict[str, Any]]:
        """The outputs of each input in ``batches``, in order, with up to ``frames_in_flight``
        frames on the device at once (default: the plan's; at most the number it was loaded
        with). Replicas plans keep every instance busy."""
        if self._closed:
            raise ConfigError("this plan runtime is closed")
        k = self.frames_in_flight if frames_in_flight is None else int(frames_in_flight)
        if not 1 <= k <= self.frames_in_flight and len(self._pipes) == 1:
            raise ConfigError(f"frames_in_flight = {frames_in_flight}: allowed 1 to {self.frames_in_flight} "
                              "(load the plan with more)")
        if len(self._pipes) == 1:  # engine and pipeline plans: the worker's own loop
            pipe = self._pipes[0]
            yield from self._stream_frames(self._np, pipe, (self._check(a, pipe) for a in batches), k)
            return
        limit = len(self._pipes)
        pending: collections.deque[tuple[int, int]] = collections.deque()
        for arrays in batches:
            busy = {i for i, _ in pending}
            i = self._pipe_for(arrays, busy)
            while pending and (len(pending) >= limit or (len(self._pipes) > 1 and i in busy)):
                j, f = pending.popleft()
                yield self._pipes[j].fetch(self._np, f)
                busy = {x for x, _ in pending}
            pipe = self._pipes[i]
            fed = pipe.feed(self._np, self._check(arrays, pipe))
            pending.append((i, pipe.frame(fed=fed)))
        while pending:
            j, f = pending.popleft()
            yield self._pipes[j].fetch(self._np, f)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Free the device buffers (the engines go with the object)."""
        if not self._closed:
            self._closed = True
            for mem in self._allocs:
                mem.free()
            self._allocs = []

    def __enter__(self) -> "PlanRuntime":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"PlanRuntime({str(self.directory)!r}, mode={self.mode!r}, engines={sum(len(p.engines) for p in self._pipes)}, "
                f"frames_in_flight={self.frames_in_flight})")


def load(directory: str | os.PathLike[str], *, frames_in_flight: int | None = None) -> PlanRuntime:
    """Load a built plan folder (``plan.json`` and the engines ``placetune build`` wrote).

    Args:
        directory: the plan folder.
        frames_in_flight: the most frames :meth:`PlanRuntime.stream` may keep in flight
            (pipeline plans; default: the plan's setting, at least 2).

    Raises:
        ConfigError: no plan folder, or an engine not built yet.
        BackendError: TensorRT or CUDA cannot be used here, or an engine does not load.
    """
    from placetune.plan.file import Plan

    d = Path(directory)
    if not (d / "plan.json").is_file():
        raise ConfigError(f"{d}: not a plan folder (no plan.json); write one with "
                          "`placetune export --study NAME --format trtexec -o DIR`, then `placetune build DIR`")
    from placetune.files.read import read_text
    from placetune.validate import loads_json

    where = str(d / "plan.json")  # the one read path and strict JSON, as every plan file is read
    plan = Plan.from_dict(loads_json(read_text(d / "plan.json", "plan file"), where), where=where)
    return PlanRuntime(d, plan, frames_in_flight)
