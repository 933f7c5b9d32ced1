"""The guided agent on devices its model does not describe: failed builds teach it where the
device's limits are, and the run says how many builds failed and why."""

from __future__ import annotations

import dataclasses

import numpy as np

from placetune import Evaluator
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.measurement import Measurement
from search import Budget, get_agent
from search.feasibility import Feasibility

LIMIT = 12  # DLA loadables of more layers fail to build on the double below


class RejectsLongLoadables(SimulatedJetson):
    """The simulated Jetson whose DLA compiler rejects a loadable of more than LIMIT layers."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.rejected = 0

    def measure(self, realisation, platform, settings):
        for s in realisation.realized.segments(pipeline=settings.mode == "pipeline"):
            if s.device != "GPU" and len(s.layers) > LIMIT:
                self.rejected += 1
                return Measurement.failure("build_failed", f"DLA compiler: {s.layers[0]}: loadable of {len(s.layers)} "
                                           "layers: too many layers for one loadable",
                                           requested=realisation.requested.as_dict(),
                                           realized=realisation.realized.as_dict(), simulated=True)
        return super().measure(realisation, platform, settings)


def _evaluator(backend) -> Evaluator:
    return Evaluator("resnet18", "orin-agx", backend, mode="pipeline", precision="int8", objective="throughput")


def test_feasibility_rules_never_block_what_built_and_block_what_resembles_a_failure():
    ev = _evaluator(SimulatedJetson())
    space = ev.space("stages")
    f = Feasibility(ev.model, space)
    n = space.n_units
    gpu, dla = space.devices.index("GPU"), space.devices.index("DLA0")
    allowed = space.mask[:, dla]
    def plan(k: int) -> list[int]:  # the first k DLA-capable units on DLA0, the rest on the GPU
        a = [gpu] * n
        for i in np.flatnonzero(allowed)[:k]:
            a[int(i)] = dla
        return a
    short, long_ = plan(3), plan(int(allowed.sum()))
    assert f.features(long_)["layers"] > f.features(short)["layers"]
    assert not f.fails(long_)  # nothing learned yet
    f.observe(short, Measurement(status="ok", throughput_fps=1.0))
    f.observe(long_, Measurement.failure("build_failed", "DLA compiler: x: too many layers for one loadable"))
    assert f.fails(long_) and not f.fails(short) and not f.fails([gpu] * n)
    assert [r.feature for r in f.rules] == ["layers"]
    assert "failed builds: 1 of 2" in f.note(2) and "too many layers" in f.note(2)
    f.observe(short, Measurement.failure("timeout", "took too long"))  # not a build failure: nothing learned
    assert len(f.failed) == 1


def test_failed_builds_teach_the_guided_agent_and_the_run_says_so():
    backend = RejectsLongLoadables()
    ev = _evaluator(backend)
    r = get_agent("guided", seed=0, inner_evals=200, ensemble=1).run(ev, Budget(15))
    assert r.evaluations == 15  # a failed build counts against the budget
    assert r.best_measurement is not None and r.best_measurement.ok
    said = [n for n in r.notes if n.startswith("failed builds")]
    assert said and f"failed builds: {backend.rejected} of 15" in said[0] and "too many layers" in said[0]
    # after its first failures the agent stops proposing long loadables (without the rules: 6 of 15)
    assert backend.rejected <= 4
