"""What a search keeps between its rounds (observations, segmentations, cost selections, fit
parts, the model choice) and that keeping it changes no figure."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from placetune.backends.simulate.costs import cost_table
from placetune.backends.simulate.incremental import IncrementalSimulator
from placetune.backends.simulate.simulator import SimulatedJetson
from placetune.calibration import DeviceProfile, fit_profile, observations
from placetune.placement.placement import Placement, producer_indexes
from placetune.placement.segmenting import ProducerArrays, segment_arrays
from placetune.tuning.evaluator import Evaluator

TRUTH = DeviceProfile("orin-agx", gpu=1.2, dla=0.8, boundary=1.5)


def _stages(names, rng):
    k = int(rng.integers(1, 5))
    cuts = [0] + sorted(rng.choice(np.arange(1, len(names)), size=k - 1, replace=False).tolist()) + [len(names)]
    devs = rng.choice(["GPU", "DLA0", "DLA1"], size=k)
    return {n: str(devs[j]) for j in range(k) for n in names[cuts[j]:cuts[j + 1]]}


@pytest.fixture(scope="module")
def study():
    ev = Evaluator("resnet18", "orin-agx", SimulatedJetson(profile=TRUTH), mode="pipeline", precision="int8",
                   batch=2, objective="throughput", frames_in_flight=4)
    rng = np.random.default_rng(5)
    ms = []
    while len(ms) < 14:
        m = ev.evaluate(Placement(ev.model, _stages(ev.model.names, rng)))
        if m.ok:
            ms.append(m)
    return ev, ms


def test_a_fit_without_diagnostics_gives_the_same_profile_and_simulates_only_contention(study, monkeypatch):
    ev, ms = study
    full = fit_profile(ev.model, ev.platform, ev.settings, ms)
    calls, fast = [], []
    real, inc = SimulatedJetson.measure, IncrementalSimulator.evaluate
    monkeypatch.setattr(SimulatedJetson, "measure", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    monkeypatch.setattr(IncrementalSimulator, "evaluate", lambda self, *a, **k: fast.append(1) or inc(self, *a, **k))
    bare = fit_profile(ev.model, ev.platform, ev.settings, ms, diagnostics=False)
    assert bare.profile == full.profile
    assert full.in_sample and full.cross_validated  # what the bare fit leaves out
    assert bare.in_sample == {} and bare.cross_validated == {} and bare.unidentified == []
    from placetune.calibration.fit import _CONTENTION_SAMPLE

    # the contention fit's periods only (two profiles), by the incremental simulator; none by the full one
    assert 0 < len(fast) <= 2 * _CONTENTION_SAMPLE and calls == []


def test_the_contention_fit_simulates_periods_as_the_full_simulator_does(study):
    from placetune.calibration.design import Params
    from placetune.calibration.fit import _periods, _predict

    ev, ms = study
    obs = [o for o in observations(ev.model, ev.platform, ev.settings, ms) if o.kind == "period"]
    params = Params(obs)
    theta = np.zeros(params.P)
    got = _periods(obs, params, theta, TRUTH, ev.platform)
    want = [_predict(o, params, theta, TRUTH, ev.platform) for o in obs]
    assert got.tolist() == want  # the same figures, to the bit


def test_run_observations_read_each_measurement_once_and_equal_a_fresh_read(study, monkeypatch):
    import placetune.calibration as calibration
    from search.surrogate import RunObservations

    ev, ms = study
    cache = RunObservations(ev)
    first = cache.of(ms[:10])
    read = []
    real = calibration.observations
    monkeypatch.setattr(calibration, "observations", lambda *a, **k: read.append(len(a[3])) or real(*a, **k))
    again = cache.of(ms)
    assert read == [1] * 4  # only the four new measurements were read
    fresh = real(ev.model, ev.platform, ev.settings, ms)
    assert [(o.group, o.kind, o.measured_ms, o.layer_idx.tolist()) for o in again] == \
        [(o.group, o.kind, o.measured_ms, o.layer_idx.tolist()) for o in fresh]
    assert again[:len(first)] == first  # the same objects: a period row keeps its realisation
    p1 = fit_profile(ev.model, ev.platform, ev.settings, ms, observations_=again, fast=True).profile
    p2 = fit_profile(ev.model, ev.platform, ev.settings, ms, observations_=fresh, fast=True).profile
    assert p1 == p2


def test_memoised_segmentations_equal_fresh_ones_and_are_bounded(monkeypatch):
    import placetune.placement.segmenting as segmenting
    from placetune import Model

    model = Model.load("resnet18")
    pa = ProducerArrays(producer_indexes(model))
    rng = np.random.default_rng(0)
    codes = [rng.integers(0, 3, len(model.names)).astype(np.int8) for _ in range(6)]
    for c, pipeline in itertools.product(codes, (False, True)):
        a, b = pa.segments(c, pipeline), segment_arrays(pa, c, pipeline)
        assert (a.device, a.preds, a.seg_of.tolist()) == (b.device, b.preds, b.seg_of.tolist())
        assert pa.segments(c.astype(np.intp), pipeline) is a  # the same codes in another dtype: a hit
    assert pa.segments(codes[0], True) is not pa.segments(codes[0], False)
    monkeypatch.setattr(segmenting, "MEMO", 3)
    new = [rng.integers(0, 3, len(model.names)).astype(np.int8) for _ in range(2)]
    for c in new:
        pa.segments(c)
    assert len(pa._memo) == 3 and pa.segments(new[-1]) is pa.segments(new[-1])  # the oldest went first


def test_a_cost_selection_costs_alike_on_every_table_of_the_model():
    from placetune import Model, get_platform

    model = Model.load("resnet18")
    orin = get_platform("orin-agx")
    rng = np.random.default_rng(1)
    a = cost_table(model, orin, "int8", 2)
    others = [cost_table(model, orin, "fp16", 1), cost_table(model, orin, "int8", 2, 0.5)]
    for _ in range(20):
        codes = rng.integers(0, 3, len(model.names)).astype(np.intp)
        pick = a.selection(codes)
        for t in [a, *others]:
            lt, lb, fused = t.layer_costs(codes)
            bms, bby, count = t.boundary_costs(codes)
            got = t.costs_of(pick)
            for x, y in zip(got, (lt, lb, bms, bby)):
                np.testing.assert_array_equal(x, y)
            assert pick.boundaries == count and (pick.fused == fused).all()
    # the selection depends on the codes: other codes cost otherwise
    c0, c1 = np.zeros(len(model.names), np.intp), np.ones(len(model.names), np.intp)
    assert not np.array_equal(a.costs_of(a.selection(c0))[0], a.costs_of(a.selection(c1))[0])


def test_the_incremental_simulator_gives_the_same_figures_from_shared_segmentations(study):
    """Two simulators of one model share segmentations and cost selections: the second one's
    figures are those of a simulator that computed everything itself."""
    ev, _ = study
    s = ev.settings
    rng = np.random.default_rng(3)
    plans = [rng.integers(0, 3, len(ev.model.names)).astype(np.int8) for _ in range(12)]
    one = IncrementalSimulator(ev.model, ev.platform, s)
    for c in plans:
        one.evaluate(c)
    two = IncrementalSimulator(ev.model, ev.platform, s, SimulatedJetson(profile=TRUTH))
    assert two.producers is one.producers
    for c in plans:
        e = two.evaluate(c)
        full = two.measure_full(e.placement())
        assert e.throughput_fps == pytest.approx(full.throughput_fps, rel=1e-9)
        assert e.latency_ms == pytest.approx(full.latency_ms["median"], rel=1e-9)


def _brute_balanced(costs: np.ndarray, pattern: list[int]) -> float:
    n, k = costs.shape[1], len(pattern)
    best = np.inf
    for cuts in itertools.combinations(range(1, n), k - 1):
        b = [0, *cuts, n]
        best = min(best, max(costs[d, b[j]:b[j + 1]].sum() for j, d in enumerate(pattern)))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_balanced_cuts_minimise_the_slowest_stage(seed):
    from placetune import Model, Space
    from search.surrogate import balanced_start

    space = Space(Model.load("seed-block"), "orin-agx", mode="pipeline", granularity="layer")
    rng = np.random.default_rng(seed)
    costs = rng.uniform(0.1, 2.0, (space.n_devices, space.n_units))
    pattern = [int(x) for x in rng.integers(0, space.n_devices, int(rng.integers(1, 4)))]
    stages = balanced_start(space, pattern, costs)
    got = max(costs[s.device, s.start:s.end].sum() for s in stages)
    assert got == pytest.approx(_brute_balanced(costs, pattern), rel=1e-12)
    assert [s.device for s in stages] == pattern[:len(stages)] and stages[-1].end == space.n_units


def test_a_model_choice_that_holds_is_checked_less_often(monkeypatch):
    """Past CHOOSE_EVERY_FROM measurements, choices come 4, 8, then 16 rounds apart while the
    model stays; a change of model brings the next one 4 rounds later."""
    import search.model_choice as mc
    from search import guided
    from search.model_choice import Candidate

    names = iter(["profile"] * 4 + ["scales"] + ["scales"] * 10)
    chosen_at: list[int] = []

    def choose(*a, **k):
        c = Candidate(next(names), None, cv_error=0.01)
        return c, [c]

    monkeypatch.setattr(mc, "choose", choose)
    monkeypatch.setattr(mc, "refit", lambda *a, **k: Candidate(k.get("name") or a[4], None, cv_error=k.get("cv_error")))
    state = guided._State.__new__(guided._State)
    state.agent = guided.GuidedAgent(seed=0)
    state.ev = state.run = None
    state.measurements = [object()] * (guided.CHOOSE_EVERY_FROM + 1)
    state.fit = guided.Fit()
    state.model = Candidate("profile", None)
    state.chosen_at, state.choose_every, state.observations = 0, guided.CHOOSE_EVERY, None

    class _Run:
        objective = None

    state.run = _Run()
    for r in range(1, 100):
        state.rounds = r
        before = state.chosen_at
        state.choose()
        if state.chosen_at != before:
            chosen_at.append(r)
    gaps = [b - a for a, b in zip(chosen_at, chosen_at[1:])]
    # the first choice 4 rounds in; "profile" holds three times (8, 16, 16 rounds on), "scales" replaces it
    # at round 60 (the next choice 4 rounds later), then holds (8, 16)
    assert chosen_at == [4, 12, 28, 44, 60, 64, 72, 88]
    assert gaps == [8, 16, 16, 16, 4, 8, 16]


def test_a_round_whose_model_held_searches_a_quarter_as_much(monkeypatch):
    """On the device the model describes exactly (the nominal simulator), the model stops moving
    after its first fits: later rounds search with a quarter of the effort. A model that moved
    (its predictions of the last round's best are off by more than HELD) gets the full effort."""
    from search import Budget, guided
    from search.guided import GuidedAgent

    efforts: list[int] = []
    real = guided._State.search_surrogate

    def spy(self, sur, starts, *, evaluations, sweep):
        efforts.append(evaluations)
        return real(self, sur, starts, evaluations=evaluations, sweep=sweep)

    monkeypatch.setattr(guided._State, "search_surrogate", spy)
    ev = Evaluator("resnet18", "orin-agx", SimulatedJetson(), mode="pipeline", precision="int8", batch=2,
                   objective="throughput", frames_in_flight=4)
    GuidedAgent(seed=0, inner_evals=400, ensemble=1).run(ev, Budget(30))
    assert efforts[0] == 8 * 400 and efforts[1] == 400  # the first round, then a model that has not held yet
    assert 100 in efforts[2:]  # a model that held: a quarter

    from search.base import SearchRun
    from search.model_choice import Candidate
    from search.surrogate import Surrogate

    run = SearchRun(ev, Budget(5), "guided", "stages")
    state = guided._State.__new__(guided._State)
    state.ev, state.run, state.space, state.model = ev, run, run.space, Candidate("nominal", None)
    sur = Surrogate(ev, run.space, run.objective, None, None)
    plans = [run.space.sample(np.random.default_rng(i)) for i in range(8)]
    state.watched = {tuple(a): sur.loss(a) for a in plans}
    assert state.model_held(sur)
    state.watched = {a: v * (1 + 2 * guided.HELD) for a, v in state.watched.items()}
    assert not state.model_held(sur)
    state.watched = {}
    assert not state.model_held(sur)  # nothing to compare with: the full effort


def test_memos_keep_the_most_recently_used_and_hold_what_they_key_by_identity():
    from placetune.memo import IdentityMemo, Memo

    m: Memo[int] = Memo(2)
    m.put("a", 1), m.put("b", 2)
    assert m.get("a") == 1  # "a" is now the most recent
    m.put("c", 3)
    assert m.get("b") is None and m.get("a") == 1 and m.get("c") == 3 and len(m) == 2
    ids: IdentityMemo[str] = IdentityMemo(2)
    x, y = [1], [1]  # equal, not the same object
    ids.put(x, "x"), ids.put(x, "x at layout 2", tag=2)
    assert ids.get(x) == "x" and ids.get(x, 2) == "x at layout 2" and ids.get(y) is None
    import gc
    import weakref

    class Obj:
        pass

    o = Obj()
    ref = weakref.ref(o)
    ids.put(o, "o")
    del o
    gc.collect()
    assert ref() is not None  # held while its value is kept: its id cannot pass to another object
