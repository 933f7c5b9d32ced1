"""The guided agent on devices its model does not describe: failed builds teach it where the
device's limits are, and the run says how many builds failed and why."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from placetune import Evaluator
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.measurement import Measurement
from search import Budget, get_agent
from search.feasibility import Feasibility, learn_rules

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


def test_a_plans_loadable_length_is_its_longest_dla_segment_as_the_builder_cuts_it():
    # googlenet's inception branches interleave in the layers' order: a DLA's share of one
    # module is several runs in that order but one segment (one loadable) when built
    ev = Evaluator("googlenet", "orin-agx", SimulatedJetson(), mode="pipeline", precision="int8",
                   objective="throughput")
    space = ev.space("stages")
    f = Feasibility(ev.model, space, pipeline=True)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a = space.sample(rng)
        segs = space.to_placement(a).segments(pipeline=True)
        dla = [len(s.layers) for s in segs if s.device != "GPU"]
        assert f.features(a).get("layers", 0.0) == (max(dla) if dla else 0.0)


def test_a_failure_that_a_length_and_a_size_both_explain_is_put_down_to_the_one_it_exceeds_most():
    # built: loadables of up to 10 layers, tensors of up to 0.2 MB; failed: loadables holding a
    # 6.4 MB tensor (one of them 2 layers long: only its size explains it) and one of 29 layers
    # holding 0.4 MB (2.9x the safe length, 2x the safe size: too long, not too large)
    ok = {"layers": 10.0, "tensor": 0.2e6}
    failed = [{"layers": 141.0, "tensor": 6.4e6}, {"layers": 2.0, "tensor": 6.4e6}, {"layers": 29.0, "tensor": 0.4e6}]
    rules, unexplained = learn_rules(ok, failed)
    assert unexplained == 0
    got = {r.feature: r.threshold for r in rules}
    assert set(got) == {"layers", "tensor"}
    assert got["layers"] == pytest.approx(math.sqrt(10 * 29))
    assert got["tensor"] == pytest.approx(math.sqrt(0.2e6 * 6.4e6))
    blocked = lambda x: any(x.get(r.feature, 0.0) >= r.threshold for r in rules)  # noqa: E731
    assert all(blocked(x) for x in failed)
    assert not blocked({"layers": 8.0, "tensor": 0.8e6})  # short, 0.8 MB: never shown to fail
    assert not blocked(ok)
    # an op type explains only what no length or size explains
    rules, unexplained = learn_rules({**ok, "op:LRN": 0.0}, [{"layers": 3.0, "tensor": 0.1e6, "op:LRN": 1.0}])
    assert [r.feature for r in rules] == ["op:LRN"] and unexplained == 0


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


def test_a_failure_is_put_down_to_the_cause_its_reason_names():
    from search.feasibility import named_cause

    assert named_cause("DLA compiler rejected the loadable of 141 layers (layer1.0/conv .. layer3.2/relu) on DLA0: "
                       "too many layers for one loadable") == "layers"
    assert named_cause("DLA compiler rejected the loadable conv1 .. pool1 on DLA1: a tensor of 1.61 MB does not fit "
                       "its buffers") == "tensor"
    assert named_cause("Internal DLA error") is None and named_cause(None) is None
    # nothing has built on a DLA yet: every feature of a failure is infinitely beyond what built, so
    # the factors cannot tell a short loadable holding a large tensor from a long one; without its
    # reason it would be called too long (a length rule at 1 layer: no DLA plan left to try)
    failed = [{"layers": 141.0, "tensor": 6.4e6}, {"layers": 2.0, "tensor": 6.4e6}]
    by_factor = {r.feature: r.threshold for r in learn_rules({}, failed)[0]}
    assert by_factor == {"layers": 1.0}
    named = {r.feature: r.threshold for r in learn_rules({}, failed, ["layers", "tensor"])[0]}
    assert named == {"layers": pytest.approx(70.5), "tensor": pytest.approx(3.2e6)}
    # a named cause that the plan's feature does not exceed (a proxy of what the compiler saw) is
    # not taken: the failure goes to the feature beyond what built, as before
    rules, _ = learn_rules({"layers": 10.0, "tensor": 1e6}, [{"layers": 29.0, "tensor": 0.5e6}], ["tensor"])
    assert [r.feature for r in rules] == ["layers"]


class _Objective:
    def __init__(self, direction: str) -> None:
        self.direction = direction


class _Run:
    def __init__(self, direction: str = "maximize") -> None:
        self.objective = _Objective(direction)
        self.evaluations = 0


class _DriftState:
    """The parts of the guided agent's run state that search.drift reads."""

    def __init__(self, noise: float = 0.01) -> None:
        from search.drift import Drift

        self.__class__ = type("S", (_DriftState, Drift), {})
        self.run = _Run()
        self.measured: dict = {}
        self.build_log: dict = {}
        self.beta, self.beta_se = 0.0, None
        self._noise = noise

    def realised(self, key):
        return str(tuple(key))

    def noise(self) -> float:
        return self._noise


def test_a_drifting_device_is_detected_and_ranked_on_the_same_footing():
    """A GPU that slows 0.3 % a build: plan A (truly 2 % better) measured once cold at build 3
    looks 10 % better than plan B's hot builds, until both are brought to build 0."""
    s = _DriftState()
    rate = -0.003  # log fps per build
    ref, a, b = (0,), (1,), (2,)
    for t in (0, 10, 20, 30, 40, 50):  # the reference, built again every 10 builds
        s.log_build(ref, -1000 * math.exp(rate * t), t)
    s.log_build(a, -1020 * math.exp(rate * 3), 3)
    s.log_build(b, -1000 * math.exp(rate * 38), 38)
    s.log_build(b, -1000 * math.exp(rate * 44), 44)
    s.measured = {a: -1020 * math.exp(rate * 3), b: -1000 * math.exp(rate * 41)}
    s.correct_measured()
    assert s.beta == pytest.approx(rate, rel=1e-6)
    assert s.corrected(a) == pytest.approx(-1020) and s.corrected(b) == pytest.approx(-1000)
    assert "drift: measurements moved -3.0% per 10 builds" in s.drift_note()
    # equal numbers of builds: the latest one of each (a has one), drift-corrected: a wins
    assert s.rank_equal([b, a]) == a


def test_no_drift_is_claimed_within_the_noise():
    s = _DriftState(noise=0.02)
    rng = np.random.default_rng(0)
    for t in (0, 10, 20, 30, 40, 50):
        s.log_build((0,), -1000 * math.exp(rng.normal(0, 0.02)), t)
    s.estimate_drift()
    assert s.beta == 0.0 and "none detected" in s.drift_note()


# a short noisy run on a device without drift (the simulated resnet50 at 2 % noise, seed 0, stopped
# after convergence at 44 builds): each plan's first build is the lucky one that made it a candidate,
# its later builds fall back; (build time, fps) per plan
_SHORT_NO_DRIFT = {
    (0,): [(3, 3528.4), (8, 3434.8), (23, 3406.0), (33, 3504.2), (37, 3309.4), (40, 3488.4), (41, 3312.7)],
    (1,): [(5, 3448.5), (13, 3332.1), (36, 3241.9)],
    (2,): [(7, 3419.7), (18, 3406.7), (28, 3333.6), (35, 3311.4), (38, 3346.1), (42, 3314.3)],
    (3,): [(9, 3357.5), (39, 3311.9), (43, 3396.1)],
}


def test_a_short_run_without_drift_is_not_corrected_and_ranks_on_all_builds():
    """The lucky first builds read as a slowing device (-0.8 % per 10 builds, 2.3 standard errors
    with them in); left out, the slope is within the noise: no correction, and the final ranking is
    the median over every build of each candidate, with the bound in the note."""
    s = _DriftState(noise=0.0218)
    for key, builds in _SHORT_NO_DRIFT.items():
        for t, fps in builds:
            s.log_build(key, -fps, t)
    s.correct_measured()
    assert s.beta == 0.0
    assert s.rank_equal([(2,), (3,), (0,)]) == (0,)  # medians 3340, 3358, 3435 fps
    note = s.drift_note()
    assert "none detected" in note and "5% two-sided" in note
    assert "median over each one's builds (7 and 3)" in note and "within the noise's reach" in note


def test_a_noisy_drifting_run_is_still_corrected():
    """A GPU slowing 0.3 % a build under 2 % build noise over a 50-build run: the reference built
    every 10 builds and three candidates built again at the end show it past the test's level."""
    s = _DriftState(noise=0.02)
    rng = np.random.default_rng(1)
    rate = -0.003
    for t in range(0, 51, 10):
        s.log_build((0,), -1000 * math.exp(rate * t + rng.normal(0, 0.02)), t)
    for key, first in (((1,), 4), ((2,), 17), ((3,), 33)):
        for t in (first, 47 + key[0], 50 + key[0]):
            s.log_build(key, -990 * math.exp(rate * t + rng.normal(0, 0.02)), t)
    s.correct_measured()
    assert s.beta < 0 and "ranked on drift-corrected values" in s.drift_note()
    assert s.beta == pytest.approx(rate, abs=0.0015)


# a drifting GPU (googlenet, the benchmark's drift truth 5, seed 300, 50 builds): plan A runs on the
# GPU and slows with it; B and C (4.4 % worse on a cold device) have their bottleneck elsewhere and do
# not slow; (build time, fps) per plan
_PLAN_DRIFT = {
    (0,): [(5, 4452.3), (11, 4340.5), (38, 4113.6), (47, 4120.2)],  # A, 4397 fps cold
    (1,): [(8, 4282.2), (17, 4185.5), (43, 4051.4)],
    (2,): [(9, 4247.4), (23, 4101.1)],
    (3,): [(18, 4224.4), (49, 4232.7)],  # C, 4203 fps cold
    (4,): [(22, 4237.3), (28, 4229.9), (48, 4158.4)],  # B, 4203 fps cold
}


def test_a_plan_that_drifts_less_than_the_others_is_not_lifted_by_their_drift():
    """The common slope (-1.4 % per 10 builds) would lift C's build at 49 by 7 % though C did not
    slow between its builds, and crown it over A; each candidate's own slope, shrunk towards the
    common one, brings A back to build 0 as the better plan."""
    s = _DriftState(noise=0.02)
    for key, builds in _PLAN_DRIFT.items():
        for t, fps in builds:
            s.log_build(key, -fps, t)
    s.correct_measured()
    assert s.beta == pytest.approx(math.log(1 - 0.014) / 10, rel=0.05)
    assert s.rank_equal([(0,), (4,), (3,)]) == (0,)
    c = s.build_log[s.realised((3,))]
    assert abs(s.own_slope(c, 0.02)) < abs(s.beta) / 2  # C's own builds pull its slope towards none
    assert s.own_slope(c[:1], 0.02) == s.beta  # one build: the common slope


def test_an_exploration_build_goes_where_the_model_cannot_tell_plans_apart_and_farthest_from_what_was_measured():
    from search.blindspots import BlindSpots, LocalResidual

    ev = _evaluator(SimulatedJetson())
    space = ev.space("stages")
    n, gpu = space.n_units, space.devices.index("GPU")
    dla = space.devices.index("DLA0")

    class S(BlindSpots):
        band_floor = 0.03
        cv_error = None

        def __init__(self):
            self.space, self.run = space, _Run()
            self.measured = {tuple([gpu] * n): -100.0}
            self.predicted = {}
            self.feasibility = Feasibility(ev.model, space)
            self.grown = False

        def noise(self):
            return 0.02

        def seen(self, a):
            return tuple(a) in self.measured

        def distance(self, a, b):
            return int((np.asarray(a) != np.asarray(b)).sum())

    s = S()
    near = [gpu] * n
    near[0] = dla if space.mask[0, dla] else gpu
    far = [dla if space.mask[i, dla] else gpu for i in range(n)]
    worse = list(far)
    worse[-1] = gpu
    ranked = [(-110.0, near), (-108.0, far), (-90.0, worse)]  # "worse" is outside the model's error band
    a, pred = s.blind_pick(None, ranked, [])
    assert a == far and pred == -108.0
    # a build that misses its prediction by more than twice the band grows the hypothesis space
    s.predicted[tuple(far)], s.measured[tuple(far)] = -108.0, -130.0
    s.surprised(tuple(far))
    assert s.grown
    # the local correction: a measured plan's residual, shrunk half-way at the plan itself, less far away
    loc = LocalResidual(space, [far], [0.2], length=4)
    assert loc(far) == pytest.approx(0.1) and 0 < loc(near) < loc(far)


def test_a_length_rule_that_leaves_one_untested_length_gets_one_test_build_of_it_and_no_gap_changes_nothing():
    from search.gaps import Gaps
    from search.surrogate import Surrogate
    from placetune.tuning.objectives import get_objective

    ev = Evaluator("resnet18", "orin-agx", SimulatedJetson(), mode="pipeline", precision="int8",
                   objective="throughput")
    space = ev.space("stages")
    n, gpu, dla = space.n_units, space.devices.index("GPU"), space.devices.index("DLA0")
    capable = np.flatnonzero(space.mask[:, dla])

    def window(i: int, j: int) -> list[int]:  # DLA-capable units i..j-1 on DLA0, the rest on the GPU
        a = [gpu] * n
        for u in capable[i:j]:
            a[int(u)] = dla
        return a

    built, test, failed, far = window(1, 7), window(2, 8), window(1, 8), window(4, 12)
    too_long = "DLA compiler: x: too many layers for one loadable"

    class S(Gaps):
        def __init__(self, fail: list[int]) -> None:
            self.feasibility = Feasibility(ev.model, space, pipeline=True)
            self.feasibility.observe(built, Measurement(status="ok", throughput_fps=1.0))
            self.feasibility.observe(fail, Measurement.failure("build_failed", too_long))
            self.max_stages, self.inner_calls, self.inner_seconds = 6, 0, 0.0
            self.gap_rng, self.gap_tested = np.random.default_rng(0), None

        def seen(self, a):
            return tuple(a) in (tuple(built), tuple(failed), tuple(far))

    features = Feasibility(ev.model, space, pipeline=True).features
    s = features(built)["layers"]
    assert (features(test)["layers"], features(failed)["layers"]) == (s + 1, s + 2)
    assert features(test)["tensor"] <= features(built)["tensor"]
    sur = Surrogate(ev, space, get_objective("throughput"), None, None)
    worst = [(math.inf, [gpu] * n), (1e9, [gpu] * n)]  # the allowed plans' best prediction: beaten by anything

    # built s, failed s + 2: the rule blocks s + 1, which nobody built; one test build of it
    one = S(failed)
    assert one.feasibility.fails(test) and one.feasibility.gap() == s + 1
    got = one.gap_pick(sur, worst, [test], 100)
    assert got is not None
    a, pred = got
    assert features(a)["layers"] == s + 1 and not one.seen(a) and pred == sur.loss(a)
    assert one.feasibility.tests_gap(a, int(s + 1))
    assert one.gap_pick(sur, worst, [test], 100) is None  # once per run: its build closes the gap either way
    assert "one build tested" in one.gap_note()
    # not built when the model predicts no plan of that length better than the best allowed one
    assert S(failed).gap_pick(sur, [(-1e12, [gpu] * n)], [test], 100) is None
    # built s, failed s + 8: no single untested length, nothing changes (no search, no pick, no note)
    wide = S(far)
    assert wide.feasibility.rules and wide.feasibility.gap() is None
    assert wide.gap_pick(sur, worst, [test], 100) is None and wide.inner_calls == 0 and wide.gap_note() is None
