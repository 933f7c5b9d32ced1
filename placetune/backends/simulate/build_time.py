"""Simulated device time of one evaluation: engine builds, DLA loadable compiles, the engine cache, timing runs.

On a Jetson an evaluation costs far more than the inference it times: TensorRT builds an
engine per segment (tactic selection for the GPU part, the DLA compiler for each loadable),
then times it. This clock charges a **simulated** figure for that, so a tuning run can show
the device time it would have spent and an agent can prefer candidates whose segment engines
are already built. Public figures it is set from (docs/simulator.md, "Build time"):

* HaX-CoNN's artifact (PPoPP'24) reports "a couple of minutes" per engine on AGX Xavier/Orin
  and 11 GPU engines in about 20 minutes, i.e. ~110 s for an engine of a ResNet/GoogLeNet-class
  network: ``GPU_ENGINE_S + GPU_LAYER_S * 176`` (ResNet-50's layers) = 109 s.
* No public per-loadable DLA compile time was found; ``DLA_LOADABLE_S`` is an assumption
  (the DLA compiler runs once per loadable, without tactic timing), stated as such.
* A cached engine is deserialised, not rebuilt (``CACHED_ENGINE_S``): the TensorRT and trtexec
  backends keep an engine cache keyed by segment content, and so does this clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BuildClock", "EngineSpec", "engine_specs", "GPU_ENGINE_S", "GPU_LAYER_S", "DLA_LOADABLE_S", "DLA_LAYER_S",
           "CACHED_ENGINE_S", "TIMING_S"]

#: Fixed part of a GPU engine build (parse, builder set-up, serialisation), seconds.
GPU_ENGINE_S = 30.0
#: Tactic selection per GPU layer, seconds (HaX-CoNN: ~110 s for a ResNet-50-sized engine).
GPU_LAYER_S = 0.45
#: DLA compiler run per loadable, seconds (an assumption: no public figure found).
DLA_LOADABLE_S = 8.0
#: DLA compile time per DLA layer, seconds (an assumption).
DLA_LAYER_S = 0.05
#: Deserialising an engine found in the cache, seconds.
CACHED_ENGINE_S = 1.0
#: Fixed part of a timing run (context, buffers, warm-up), seconds.
TIMING_S = 3.0


@dataclass(frozen=True)
class EngineSpec:
    """One engine a measurement needs: its cache key and what it holds.

    Attributes:
        key: what identifies the built engine (model, precision, batch, device and layers).
        gpu_layers: layers the engine runs on the GPU.
        dla_layers: layers it runs on a DLA core.
        loadables: DLA loadables (islands) it holds.
    """

    key: tuple
    gpu_layers: int
    dla_layers: int
    loadables: int


@dataclass
class BuildClock:
    """A simulated engine cache and the device time each measurement costs.

    One clock belongs to one backend instance, like an engine cache directory belongs to one
    machine: engines built once are cheap the next time.

    Example:
        >>> clock = BuildClock()
        >>> first = clock.charge([EngineSpec(("m", 0), 176, 0, 0)], latency_ms=1.0, iterations=50)
        >>> again = clock.charge([EngineSpec(("m", 0), 176, 0, 0)], latency_ms=1.0, iterations=50)
        >>> round(first["build_s"]), again["cached_engines"]
        (109, 1)
    """

    built: set = field(default_factory=set)

    def charge(self, engines: Sequence[EngineSpec], *, latency_ms: float, iterations: int) -> dict[str, Any]:
        """Device time of building (or loading) ``engines`` and timing ``iterations`` inferences.

        Returns:
            ``build_s`` (engine builds and loads), ``timing_s``, ``total_s``, ``engines``,
            ``cached_engines`` and ``loadables_compiled``; all simulated.
        """
        build = 0.0
        cached = compiled = 0
        for e in engines:
            if e.key in self.built:
                build += CACHED_ENGINE_S
                cached += 1
                continue
            self.built.add(e.key)
            build += GPU_ENGINE_S + GPU_LAYER_S * e.gpu_layers + DLA_LOADABLE_S * e.loadables + DLA_LAYER_S * e.dla_layers
            compiled += e.loadables
        timing = TIMING_S + max(0, int(iterations)) * max(0.0, float(latency_ms)) / 1000.0
        return {"build_s": build, "timing_s": timing, "total_s": build + timing, "engines": len(engines),
                "cached_engines": cached, "loadables_compiled": compiled}


def engine_specs(model_key: tuple, mode: str, segments: Iterable[Any], instances: Sequence[str] = ()) -> list[EngineSpec]:
    """The engines a measurement builds, from the realised segments.

    ``engine`` mode: one engine holding every segment (its key is the whole segment list);
    ``pipeline``: one engine per segment (key: device + layers), so unchanged segments hit the
    cache; ``replicas``: one engine per instance device.
    """
    segs = [(s.device, tuple(s.layers)) for s in segments]

    def count(items: list[tuple[str, tuple]]) -> tuple[int, int, int]:
        gpu = sum(len(ls) for d, ls in items if d == "GPU")
        dla = sum(len(ls) for d, ls in items if d != "GPU")
        return gpu, dla, sum(1 for d, _ in items if d != "GPU")

    if mode == "pipeline":
        return [EngineSpec(model_key + (d, ls), *count([(d, ls)])) for d, ls in segs]
    whole = EngineSpec(model_key + (tuple(segs),), *count(segs))
    if mode == "replicas" and instances:
        total = whole.gpu_layers + whole.dla_layers
        return [EngineSpec(whole.key + (dev,), total, 0, 0) if dev == "GPU"
                else EngineSpec(whole.key + (dev,), whole.gpu_layers, whole.dla_layers, whole.loadables)
                for dev in instances]
    return [whole]
