"""Calibration of the simulated Jetson against published Jetson numbers.

Prints a Markdown table (case, published, simulated, error %, tolerance) for the README.
Every "simulated" figure comes from placetune's simulator; every "published" figure is from
``placetune/data/jetson-measurements.md`` (section named in the source column). Ratios are
compared where the published setup (model file, TensorRT version) differs from placetune's
zoo models; absolute values only where the brief asks for them.

Usage::

    python benchmarks/calibration.py            # the table
    python benchmarks/calibration.py --check    # exit 1 when a case is outside its tolerance

``tests/test_calibration.py`` imports :data:`CASES` from this file and checks every tolerance.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placetune import Model
from placetune.model import zoo  # noqa: E402
from placetune.backends.simulate.simulator import SimulatedJetson, simulate_concurrent  # noqa: E402
from placetune.placement.placement import Placement  # noqa: E402
from placetune.hardware.platforms import get_platform  # noqa: E402
from placetune.placement.realise import Realisation, realise  # noqa: E402
from placetune.settings import Settings  # noqa: E402

XAVIER = get_platform("xavier-agx")
ORIN = get_platform("orin-agx")
_SIM = SimulatedJetson(timeline=False)


@dataclass(frozen=True)
class Case:
    """One calibration target.

    Attributes:
        name: short id (used as the pytest id).
        what: the case in words (table column).
        source: where the published figure comes from.
        published: the published figure.
        unit: unit of both figures.
        compute: returns the simulated figure.
        tolerance: allowed relative error (0.2 = +-20 %); None = informative only.
        check: "rel" (|sim/pub - 1| <= tol), "max" (sim <= published, for "below" bounds) or
            "range" (bounds[0] <= sim <= bounds[1]).
        bounds: the range for ``check="range"``.
    """

    name: str
    what: str
    source: str
    published: float
    unit: str
    compute: Callable[[], float]
    tolerance: float | None = 0.2
    check: str = "rel"
    bounds: tuple[float, float] | None = None

    def passes(self, simulated: float) -> bool:
        if self.check == "range":
            return self.bounds[0] <= simulated <= self.bounds[1]
        if self.tolerance is None:
            return True
        if self.check == "max":
            return simulated <= self.published
        return abs(simulated / self.published - 1.0) <= self.tolerance


# ------------------------------------------------------------------------------- helpers
@lru_cache(maxsize=None)
def model(name: str, batch: int, softmax: bool | None = None) -> Model:
    """A zoo model (``softmax`` overrides the zoo default for the classifiers)."""
    if softmax is None:
        return Model.load(name, batch=batch)
    return Model.load(zoo.build(name, batch=batch, softmax=softmax), name=f"{name}{'' if softmax else '_noprob'}")


def realised(m: Model, platform, precision: str, where: str, mode: str = "engine") -> Realisation:
    """``gpu``: all-GPU; ``dla``: all-DLA realised by placetune (with GPU fallback); ``dla-only``:
    every layer on DLA0 as the published run had it (see the case notes)."""
    if where == "gpu":
        return realise(Placement.all_gpu(m), platform, precision=precision, mode=mode)
    if where == "dla":
        return realise(Placement.all_dla(m), platform, precision=precision, mode=mode)
    p = Placement.all_dla(m)
    return Realisation(p, p, {}, 0, {"DLA0": 1, "DLA1": 0}, ["calibration: every layer on DLA0 as published"])


def latency(m: Model, platform, precision: str, where: str, **settings) -> float:
    """Simulated median latency (ms) of one realised placement."""
    mode = settings.get("mode", "engine")
    meas = _SIM.measure(realised(m, platform, precision, where, mode), platform,
                        Settings(precision=precision, iterations=1, **settings))
    if not meas.ok:
        raise RuntimeError(meas.reason)
    return meas.latency_ms["median"]


def measurement(m: Model, platform, precision: str, where: str, **settings):
    mode = settings.get("mode", "engine")
    return _SIM.measure(realised(m, platform, precision, where, mode), platform,
                        Settings(precision=precision, iterations=1, **settings))


def ratio(a: Callable[[], float], b: Callable[[], float]) -> Callable[[], float]:
    return lambda: a() / b()


def _contention(gpu_model: Model, dla_model: Model) -> list[dict]:
    jobs = [(realised(gpu_model, ORIN, "int8", "gpu"), "GPU"),
            (realised(dla_model, ORIN, "int8", "dla"), "DLA0"),
            (realised(dla_model, ORIN, "int8", "dla"), "DLA1")]
    return simulate_concurrent(jobs, ORIN, precision="int8")


@lru_cache(maxsize=None)
def conv_model_contention() -> tuple[float, float]:
    """ResNet-50 INT8 bs 8 on GPU, DLA0 and DLA1 at once: throughput together / alone."""
    r = _contention(model("resnet50", 8), model("resnet50", 8))
    return 1 / r[0]["slowdown"], 1 / r[1]["slowdown"]


@lru_cache(maxsize=None)
def three_model_contention() -> tuple[float, float]:
    """A memory-heavy GPU job (vit-tiny bs 8) with two conv DLA jobs (googlenet bs 8): latency alone / together."""
    r = _contention(model("vit-tiny", 8), model("googlenet", 8))
    return 1 / r[0]["slowdown"], 1 / r[1]["slowdown"]


def same_core_serialise() -> float:
    """Two ResNet-50 INT8 engines on DLA0 at once: latency together / alone."""
    r = realised(model("resnet50", 8), ORIN, "int8", "dla")
    out = simulate_concurrent([(r, "DLA0"), (r, "DLA0")], ORIN, precision="int8")
    return out[0]["slowdown"]


def orin_per_dla_fps() -> float:
    """ResNet-50 INT8 bs 2 on both DLAs at once (DLA only, no fallback): img/s per DLA."""
    meas = measurement(model("resnet50", 2, softmax=False), ORIN, "int8", "dla-only", mode="replicas",
                       replicas={"DLA0": 2, "DLA1": 2})
    return meas.throughput_fps / 2


def loadables(name: str) -> float:
    r = realised(model(name, 32), ORIN, "int8", "dla")
    return float(r.loadables["DLA0"])


def dla_efficiency_ratio() -> float:
    """Images per joule of DLA0 vs GPU (active power only), ResNet-50 INT8 bs 8 on AGX Orin."""
    m = model("resnet50", 8)
    g = measurement(m, ORIN, "int8", "gpu")
    d = measurement(m, ORIN, "int8", "dla")
    per_j = {}
    for key, meas in (("gpu", g), ("dla", d)):
        active_mj = sum(meas.extra["power_w_by_device"].values()) * meas.extra["period_ms"]
        per_j[key] = m.batch / active_mj
    return per_j["dla"] / per_j["gpu"]


def power_mode_ratio() -> float:
    """Both-DLA throughput at 15W / MAXN (ResNet-50 INT8 bs 2)."""
    m = model("resnet50", 2, softmax=False)
    fps = [measurement(m, ORIN, "int8", "dla-only", mode="replicas", replicas={"DLA0": 2, "DLA1": 2},
                       power_mode=pm).throughput_fps for pm in ("15W", "MAXN")]
    return fps[0] / fps[1]


# ------------------------------------------------------------------------------- the cases
_X, _O = XAVIER, ORIN
_a8, _a1 = (lambda: model("alexnet", 8, softmax=False)), (lambda: model("alexnet", 1, softmax=False))
_r8, _r1 = (lambda: model("resnet50", 8)), (lambda: model("resnet50", 1))
_g1 = lambda: model("googlenet", 1)  # noqa: E731
_rn8, _rn1 = (lambda: model("resnet50", 8, softmax=False)), (lambda: model("resnet50", 1, softmax=False))

CASES: list[Case] = [
    # ---- ratios (tolerance +-20 %)
    Case("xavier-alexnet-bs8-dla/gpu", "AGX Xavier AlexNet FP16 bs 8: DLA / GPU latency (alexnet_noprob, all on DLA as published)",
         "§2 seed 003: 43.8 / 5.10 ms", 43.8 / 5.10, "x",
         ratio(lambda: latency(_a8(), _X, "fp16", "dla-only"), lambda: latency(_a8(), _X, "fp16", "gpu"))),
    Case("xavier-resnet50-bs8-dla/gpu", "AGX Xavier ResNet-50 FP16 bs 8: DLA (+GPU fallback) / GPU latency",
         "§2 seed 003: 48.97 / 12.30 ms", 48.97 / 12.30, "x",
         ratio(lambda: latency(_r8(), _X, "fp16", "dla"), lambda: latency(_r8(), _X, "fp16", "gpu"))),
    Case("xavier-googlenet-bs1-dla/gpu", "AGX Xavier GoogLeNet FP16 bs 1: DLA (+GPU softmax) / GPU",
         "§3 HaX-CoNN: 3.656 / 1.959 ms", 3.656 / 1.959, "x",
         ratio(lambda: latency(_g1(), _X, "fp16", "dla"), lambda: latency(_g1(), _X, "fp16", "gpu"))),
    Case("xavier-alexnet-bs1-dla/gpu", "AGX Xavier AlexNet FP16 bs 1: DLA / GPU (sum of the 8 groups)",
         "§3 HaX-CoNN: 4.41 / 1.79 ms", 4.41 / 1.79, "x",
         ratio(lambda: latency(_a1(), _X, "fp16", "dla-only"), lambda: latency(_a1(), _X, "fp16", "gpu"))),
    Case("orin-dla-bs8/bs1", "AGX Orin INT8 DLA latency bs 8 / bs 1 (ResNet-50 for YOLOv5s; DLA only)",
         "§4 cuDLA-samples YOLOv5s: 30.92 / 3.82 ms", 30.92 / 3.82, "x",
         ratio(lambda: latency(_rn8(), _O, "int8", "dla-only"), lambda: latency(_rn1(), _O, "int8", "dla-only"))),
    Case("orin-gpu-bs8/bs1", "AGX Orin INT8 GPU latency bs 8 / bs 1 (ResNet-50 for YOLOv5s)",
         "§4 cuDLA-samples YOLOv5s: 9.19 / 1.82 ms", 9.19 / 1.82, "x",
         ratio(lambda: latency(_r8(), _O, "int8", "gpu"), lambda: latency(_r1(), _O, "int8", "gpu"))),
    Case("orin-modelbn/modelgn", "AGX Orin INT8 bs 32 DLA0 + fallback: ModelBN / ModelGN throughput",
         "§4 jetson_dla_tutorial: 649.7 / 305.9 qps", 649.7 / 305.9, "x",
         ratio(lambda: latency(model("model-gn", 32), _O, "int8", "dla"),
               lambda: latency(model("model-bn", 32), _O, "int8", "dla"))),
    Case("orin-contention-gpu", "AGX Orin INT8 conv model on GPU+DLA0+DLA1: GPU throughput together / alone (ResNet-50 bs 8)",
         "§5 forum 219770: 229.2 / 405.3 qps", 229.2 / 405.3, "x", lambda: conv_model_contention()[0]),
    Case("orin-contention-dla", "same: DLA throughput together / alone",
         "§5 forum 219770: 113.1 / 132.7 qps", 113.1 / 132.7, "x", lambda: conv_model_contention()[1]),
    Case("orin-3models-gpu", "AGX Orin INT8, 3 models at once: GPU latency alone / together (vit-tiny bs 8 on GPU, GoogLeNet bs 8 on the DLAs)",
         "§5 TensorRT #2745: 45 / 59 ms", 45 / 59, "x", lambda: three_model_contention()[0]),
    Case("orin-3models-dla", "same: DLA latency alone / together",
         "§5 TensorRT #2745: 17.7-18.1 / 21.8 ms", 17.9 / 21.8, "x", lambda: three_model_contention()[1]),
    Case("orin-same-dla-core", "AGX Orin: two engines on one DLA core, latency together / alone (ResNet-50 INT8 bs 8)",
         "§5 TensorRT #2745: 33 / 17.7 ms", 33 / 17.7, "x", same_core_serialise),
    # ---- absolute values
    Case("orin-resnet50-bs2-per-dla", "AGX Orin ResNet-50 INT8 bs 2, both DLAs at once (DLA only): img/s per DLA",
         "§4 DLA-SW README: 2037 img/s for 2 DLAs", 2037 / 2, "img/s", orin_per_dla_fps, tolerance=0.25),
    Case("orin-googlenet-bs1-dla", "AGX Orin GoogLeNet INT8 bs 1 on DLA + GPU softmax: latency",
         "§4 HaX-CoNN README: 1.109 ms", 1.109, "ms", lambda: latency(_g1(), _O, "int8", "dla"), tolerance=0.25),
    Case("orin-modelgn-qps", "AGX Orin ModelGN INT8 bs 32 DLA0 + fallback: batches/s",
         "§4 jetson_dla_tutorial", 305.9, "qps", lambda: 1000 / latency(model("model-gn", 32), _O, "int8", "dla"),
         tolerance=0.25),
    Case("orin-modelbn-qps", "AGX Orin ModelBN INT8 bs 32 DLA0 + fallback: batches/s",
         "§4 jetson_dla_tutorial", 649.7, "qps", lambda: 1000 / latency(model("model-bn", 32), _O, "int8", "dla"),
         tolerance=0.25),
    Case("orin-modelgn-loadables", "ModelGN DLA loadables from realise() (GlobalAveragePool also falls back here)",
         "§4 jetson_dla_tutorial", 5, "loadables", lambda: loadables("model-gn"), check="range", bounds=(4, 7)),
    Case("orin-modelbn-loadables", "ModelBN DLA loadables from realise()", "§4 jetson_dla_tutorial", 2, "loadables",
         lambda: loadables("model-bn"), check="range", bounds=(1, 2)),
    Case("orin-resnet50-bs1-gpu", "AGX Orin ResNet-50 INT8 bs 1 all-GPU: latency (bound: low single ms)",
         "brief: low single ms or below", 3.0, "ms", lambda: latency(_r1(), _O, "int8", "gpu"), check="max"),
    Case("xavier-alexnet-bs8-gpu", "AGX Xavier AlexNet FP16 bs 8 GPU latency", "§2 seed 003", 5.10, "ms",
         lambda: latency(_a8(), _X, "fp16", "gpu"), tolerance=0.3),
    Case("xavier-resnet50-bs8-gpu", "AGX Xavier ResNet-50 FP16 bs 8 GPU latency", "§2 seed 003", 12.30, "ms",
         lambda: latency(_r8(), _X, "fp16", "gpu"), tolerance=0.3),
    Case("xavier-resnet50-bs8-gpu-int8", "AGX Xavier ResNet-50 INT8 bs 8 GPU latency", "§2 seed 003", 7.35, "ms",
         lambda: latency(_r8(), _X, "int8", "gpu"), tolerance=0.3),
    # ---- informative (no tolerance)
    Case("xavier-alexnet-bs8-dla", "AGX Xavier AlexNet FP16 bs 8 DLA latency (all on DLA)", "§2 seed 003", 43.8, "ms",
         lambda: latency(_a8(), _X, "fp16", "dla-only"), tolerance=None),
    Case("xavier-resnet50-bs8-dla", "AGX Xavier ResNet-50 FP16 bs 8 DLA (+fallback) latency", "§2 seed 003", 48.97, "ms",
         lambda: latency(_r8(), _X, "fp16", "dla"), tolerance=None),
    Case("xavier-googlenet-bs1-gpu", "AGX Xavier GoogLeNet FP16 bs 1 GPU latency", "§3 HaX-CoNN", 1.959, "ms",
         lambda: latency(_g1(), _X, "fp16", "gpu"), tolerance=None),
    Case("xavier-googlenet-bs1-dla", "AGX Xavier GoogLeNet FP16 bs 1 DLA (+GPU softmax) latency", "§3 HaX-CoNN", 3.656, "ms",
         lambda: latency(_g1(), _X, "fp16", "dla"), tolerance=None),
    Case("xavier-alexnet-realise-dla/gpu", "AGX Xavier AlexNet FP16 bs 8 DLA/GPU with placetune's realise() "
         "(fc6 and its Flatten/ReLUs fall back: 9216-wide 2-D tensor; the Caffe run kept them on DLA)",
         "§2 seed 003 (different realisation)", 43.8 / 5.10, "x",
         ratio(lambda: latency(_a8(), _X, "fp16", "dla"), lambda: latency(_a8(), _X, "fp16", "gpu")), tolerance=None),
    Case("orin-dla-energy-efficiency", "AGX Orin ResNet-50 INT8 bs 8: images per joule DLA / GPU (active power)",
         "§1 DLA-SW README: DLA 3-5x more power efficient", 4.0, "x", dla_efficiency_ratio, tolerance=None),
    Case("orin-15w/maxn", "AGX Orin 2-DLA throughput 15W / MAXN (set, not fitted)", "§1 DLA-SW", 0.475, "x",
         power_mode_ratio, tolerance=None),
]


def evaluate(cases: list[Case] | None = None) -> list[tuple[Case, float]]:
    """Simulate every case: ``[(case, simulated)]``."""
    return [(c, float(c.compute())) for c in (cases or CASES)]


def markdown(results: list[tuple[Case, float]]) -> str:
    """The calibration table in Markdown."""
    lines = [
        "| case | source (jetson-measurements.md) | published | simulated | error | tolerance |",
        "|---|---|---:|---:|---:|---|",
    ]
    for c, sim in results:
        err = 100.0 * (sim / c.published - 1.0)
        if c.check == "range":
            tol = f"{c.bounds[0]:g}..{c.bounds[1]:g}"
        elif c.tolerance is None:
            tol = "info"
        elif c.check == "max":
            tol = f"<= {c.published:g} {c.unit}"
        else:
            tol = f"+-{100 * c.tolerance:.0f} %"
        mark = "" if c.passes(sim) else " **FAIL**"
        lines.append(f"| {c.what} | {c.source} | {c.published:.3g} {c.unit} | {sim:.3g} {c.unit} | "
                     f"{err:+.1f} % | {tol}{mark} |")
    lines.append("")
    lines.append("All simulated figures come from placetune's simulated Jetson (backend `simulate`), "
                 "not from hardware.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a case misses its tolerance")
    args = ap.parse_args(argv)
    results = evaluate()
    print(markdown(results))
    if args.check and not all(c.passes(s) for c, s in results):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
