"""A backend in one file: a toy cost model that placetune tunes like any other backend.

Each layer costs a fixed time on the device it runs on and every GPU<->DLA hand-over costs a
transfer. Its figures are made up, so it says it is simulated (studies, plans and reports are
marked so). Make it known to placetune in one of two ways:

* from Python: ``placetune.register_backend("toy", ToyBackend)``, then
  ``Evaluator(model, platform, backend="toy")``;
* installed as a package: an entry point in the group ``placetune.backends``
  (pyproject.toml: ``[project.entry-points."placetune.backends"] toy = "toy_backend:ToyBackend"``),
  then ``placetune tune --backend toy``.
"""

from __future__ import annotations

from typing import Any

import placetune as pt
from placetune.measurement import Measurement

#: ms per layer on each kind of device, and per hand-over between the GPU and a DLA
LAYER_MS = {"GPU": 0.05, "DLA": 0.12}
TRANSFER_MS = 0.2


class ToyBackend(pt.BackendBase):
    """Layer costs by device plus a cost per hand-over; engine mode, latency and throughput."""

    name = "toy"
    capabilities = pt.Capabilities(simulated=True, modes=("engine",), objectives=("latency", "throughput"))

    def __init__(self, transfer_ms: float = TRANSFER_MS) -> None:
        self.transfer_ms = float(transfer_ms)

    def fingerprint(self, platform: Any, settings: Any) -> dict[str, Any]:
        return {"backend": self.name, "version": 1, "platform": platform.name, "transfer_ms": self.transfer_ms}

    def measure(self, realisation: Any, platform: Any, settings: Any) -> Measurement:
        if settings.mode not in self.capabilities.modes:
            return Measurement.failure("infeasible", f"the toy backend measures engine mode only, not {settings.mode}",
                                       simulated=True, backend="toy-1", mode=settings.mode)
        realized = realisation.realized.as_dict()
        devices = [realized[n] for n in realisation.realized.model.names]
        kinds = ["GPU" if d == "GPU" else "DLA" for d in devices]
        ms = sum(LAYER_MS[k] for k in kinds) + self.transfer_ms * sum(a != b for a, b in zip(kinds, kinds[1:]))
        batch = realisation.realized.model.batch
        return Measurement("ok", latency_samples_ms=[ms] * 5, throughput_fps=1000.0 * batch / ms,
                           requested=realisation.requested.as_dict(), realized=realized,
                           fallback=dict(realisation.fallback), simulated=True, backend="toy-1",
                           mode=settings.mode, precision=settings.precision, batch=batch)


if __name__ == "__main__":  # python examples/toy_backend.py: register it, then measure through it
    pt.register_backend("toy", ToyBackend)
    ev = pt.Evaluator("seed-block", "orin-agx", backend="toy")
    gpu, dla = ev.baseline(), ev.evaluate(pt.Placement.all_dla(ev.model))
    print(f"toy backend: all-GPU {gpu.median_ms:.3f} ms, all-DLA0 {dla.median_ms:.3f} ms "
          f"(made-up costs, marked simulated: {dla.simulated})")
