"""Search agents: masks, budgets, reproducibility, Optuna resume/infeasibility, exact vs brute force."""

from __future__ import annotations

import ast
import itertools
import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from placetune import ConfigError, Model, UnknownNameError
from placetune.tuning.evaluator import Evaluator
from placetune.placement.placement import Placement
from tests.seeds import FRESH, case_seed
from search import Budget, SearchRun, agent_names, baseline_assignments, get_agent
from search.exact import engine_bound

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)

AGENTS = ["random", "local", "optuna", "reinforce", "exact", "guided"]
SEARCH_DIR = Path(__file__).resolve().parents[1] / "search"


class SpyEvaluator(Evaluator):
    """An evaluator that remembers every placement it was asked to evaluate."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.asked: list[Placement] = []

    def evaluate(self, placement, **kwargs):
        p = placement if isinstance(placement, Placement) else Placement(self.model, placement)
        self.asked.append(p)
        return super().evaluate(placement, **kwargs)


@pytest.fixture(scope="module")
def model_gn() -> Model:
    """seed 002 ModelGN: GroupNorm pieces cannot run on the DLA (masked units)."""
    return Model.load("model-gn")


@pytest.fixture(scope="module")
def seed_block_model() -> Model:
    return Model.load("seed-block")


# ----------------------------------------------------------------------------- graphs
def random_graph(seed: int, n_layers: int, *, chain: bool = False, channels: int = 8, size: int = 8) -> Model:
    """A random DAG of Conv / Relu / Add (same shape everywhere), dataless weights."""
    rng = np.random.default_rng(seed)
    c = channels
    nodes, inits = [], []
    tensors = ["x"]
    consumed: set[str] = set()
    for i in range(n_layers):
        kind = "Conv" if chain else rng.choice(["Conv", "Conv", "Relu", "Add"])
        if kind == "Add" and len(tensors) < 2:
            kind = "Conv"
        out = f"t{i}"
        if chain or rng.random() < 0.6:
            src = tensors[-1]
        else:
            src = tensors[int(rng.integers(0, len(tensors)))]
        if kind == "Conv":
            k = 1 if chain else int(rng.choice([1, 3]))
            w = onnx.TensorProto(name=f"w{i}", data_type=TensorProto.FLOAT, dims=[c, c, k, k])  # no data
            inits.append(w)
            nodes.append(helper.make_node("Conv", [src, f"w{i}"], [out], name=f"conv{i}", kernel_shape=[k, k],
                                          pads=[k // 2] * 4))
        elif kind == "Relu":
            nodes.append(helper.make_node("Relu", [src], [out], name=f"relu{i}"))
        else:
            other = tensors[int(rng.integers(0, len(tensors)))]
            if other == src:
                other = tensors[0] if src != tensors[0] else tensors[-1]
            nodes.append(helper.make_node("Add", [src, other], [out], name=f"add{i}"))
            consumed.add(other)
        consumed.add(src)
        tensors.append(out)
    outputs = [t for t in tensors[1:] if t not in consumed] or [tensors[-1]]
    shape = [1, c, size, size]
    graph = helper.make_graph(
        nodes, f"random{seed}",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(t, TensorProto.FLOAT, shape) for t in outputs],
        initializer=inits,
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return Model.load(proto, name=f"random{seed}")


# ----------------------------------------------------------------------------- registry
def test_guided_is_the_default_agent():
    from search import DEFAULT_AGENT
    from placetune.tuning.studyfile import TuneConfig

    assert DEFAULT_AGENT == "guided" == TuneConfig().agent == TuneConfig.embedded_default().agent
    assert get_agent().name == "guided" and get_agent().granularity == "stages"


def test_registry_names_and_errors():
    assert set(AGENTS) <= set(agent_names())
    with pytest.raises(UnknownNameError):
        get_agent("nope")
    with pytest.raises(ConfigError):
        get_agent("random", no_such_option=1)
    with pytest.raises(ConfigError):
        get_agent("local", method="sideways")
    with pytest.raises(ValueError):
        Budget(evaluations=-1)
    with pytest.raises(ValueError):
        Budget(seconds=0)


def test_search_imports_no_private_placetune_names():
    for path in SEARCH_DIR.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("placetune"):
                assert not any(part.startswith("_") for part in node.module.split(".")), (path, node.module)
                assert not any(a.name.startswith("_") for a in node.names), (path, [a.name for a in node.names])
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("placetune"):
                        assert not any(p.startswith("_") for p in a.name.split(".")), (path, a.name)


# ----------------------------------------------------------------------------- masks and budgets
@pytest.mark.parametrize("agent", AGENTS)
def test_agent_respects_masks_and_budget(agent, model_gn):
    ev = SpyEvaluator(model_gn, "orin-agx", mode="pipeline", precision="fp16")
    space = ev.space("fusion")
    assert (space.mask.sum(axis=1) == 1).any(), "the test needs masked units"
    r = get_agent(agent, seed=1).run(ev, Budget(evaluations=12))
    assert r.evaluations == len(ev.asked) == ev.stats.requested == 12
    assert r.measured + r.cache_hits == r.evaluations
    assert [h.index for h in r.history] == list(range(1, len(r.history) + 1))
    bests = [h.best for h in r.history if h.best is not None]
    assert bests == sorted(bests, reverse=True)  # latency: best-so-far never gets worse
    for p in ev.asked:
        for u in space.units:
            for layer in u.layers:
                assert p[layer] in u.choices, (agent, u.name, p[layer])
    assert r.best_placement is not None and r.best_value == min(v for _, v, _ in r.history if v is not None)


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("n", [0, 1, 3])
def test_agent_small_budgets(agent, n, seed_block_model):
    ev = SpyEvaluator(seed_block_model, "orin-agx", mode="pipeline", precision="int8")
    r = get_agent(agent, seed=0).run(ev, Budget(evaluations=n))
    assert len(ev.asked) == r.evaluations <= n
    if n == 0:
        assert r.best_placement is None and r.history == []


def test_time_budget_stops(seed_block_model):
    ev = Evaluator(seed_block_model, "orin-agx", mode="pipeline")
    r = get_agent("random", seed=0).run(ev, Budget(seconds=0.2))
    assert 0 < r.evaluations and r.seconds < 5


@pytest.mark.parametrize("agent", AGENTS)
def test_agent_reproducible_with_seed(agent, model_gn):
    runs = []
    for _ in range(2):
        ev = SpyEvaluator(model_gn, "orin-agx", mode="engine", precision="int8")
        r = get_agent(agent, seed=7).run(ev, Budget(evaluations=15))
        runs.append(([p.key for p in ev.asked], [h.value for h in r.history], r.best_value))
    assert runs[0] == runs[1]


def test_searchrun_reuses_known_assignments(seed_block_model):
    ev = Evaluator(seed_block_model, "orin-agx", mode="pipeline")
    run = SearchRun(ev, Budget(2), "test")
    run.evaluate([0] * 5)
    run.evaluate([0] * 5)  # answered from the run's memory: no call
    assert run.evaluations == 1 and len(run.history) == 1
    run.evaluate([1, 0, 0, 0, 0])
    assert run.exhausted
    assert baseline_assignments(run.space)["all-gpu"] == [0] * 5


# ----------------------------------------------------------------------------- local / reinforce
def test_local_improves_on_the_best_baseline():
    ev = Evaluator("mobilenetv2", "orin-agx", mode="engine", precision="int8", objective="energy")
    r = get_agent("local", seed=0).run(ev, Budget(evaluations=40))
    baselines = [ev.objective.value(m) for _, m in ev.baselines().values()]
    assert r.best_value < min(baselines)


def test_reinforce_runs_on_the_gymnasium_env(seed_block_model):
    ev = SpyEvaluator(seed_block_model, "orin-agx", mode="pipeline", precision="fp16")
    r = get_agent("reinforce", seed=0, hidden=0).run(ev, Budget(evaluations=25))
    assert r.evaluations == 25 and r.extra["episodes"] >= 20
    assert all(p.model.hash == seed_block_model.hash for p in ev.asked)


@pytest.mark.parametrize("hidden", [0, 4])
def test_reinforce_policy_gradient_is_correct(hidden):
    from search.reinforce import Policy

    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1], [1, 0, 1], [1, 0, 0], [1, 1, 0]], dtype=bool)
    policy = Policy(rng.normal(size=(4, 5)), mask, hidden, rng)
    for k in policy.params:
        policy.params[k] = rng.normal(size=policy.params[k].shape)
    actions = np.array([2, 2, 0, 1])

    def logp() -> float:
        p = policy.probs()
        return float(np.log(p[np.arange(4), actions]).sum())

    grad = policy.grad_log_prob(actions)
    for k, g in grad.items():
        flat = policy.params[k].reshape(-1)
        for j in range(0, flat.size, max(1, flat.size // 7)):
            old = flat[j]
            flat[j] = old + 1e-6
            up = logp()
            flat[j] = old - 1e-6
            down = logp()
            flat[j] = old
            assert g.reshape(-1)[j] == pytest.approx((up - down) / 2e-6, abs=1e-5), (k, j)
    assert np.all(policy.probs()[~mask] == 0)


# ----------------------------------------------------------------------------- optuna
def test_optuna_resumes_an_interrupted_study(tmp_path, model_gn):
    db = tmp_path / "tune.db"
    ev1 = SpyEvaluator(model_gn, "orin-agx", mode="pipeline", precision="int8", store=str(db))
    r1 = get_agent("optuna", seed=0).run(ev1, Budget(evaluations=10))
    assert r1.evaluations == 10 and ev1.stats.measured == 10
    first = {p.key for p in ev1.asked}
    ev1.close()

    ev2 = SpyEvaluator(model_gn, "orin-agx", mode="pipeline", precision="int8", store=str(db))
    agent = get_agent("optuna", seed=0)
    r2 = agent.run(ev2, Budget(evaluations=10))
    assert r2.evaluations == 10
    assert ev2.stats.measured == 10 and ev2.stats.cache_hits == 0  # nothing measured twice
    assert first.isdisjoint(p.key for p in ev2.asked)
    assert r2.extra["study_name"] == r1.extra["study_name"]
    study = agent.study(ev2)
    done = study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))
    assert len(done) >= 20
    assert not study.get_trials(states=(optuna.trial.TrialState.FAIL,))
    # the Optuna tables live in the measurement database
    assert str(db) in str(ev2.store.url) or ev2.store.sqlite_path == str(db)
    ev2.close()


def test_optuna_imports_stored_measurements(tmp_path, model_gn):
    db = tmp_path / "warm.db"
    ev1 = Evaluator(model_gn, "orin-agx", mode="engine", precision="fp16", store=str(db))
    get_agent("random", seed=0).run(ev1, Budget(evaluations=8))
    ev1.close()
    # another study of the same cache scope imports them (the same study has them as its own trials)
    ev2 = Evaluator(model_gn, "orin-agx", mode="engine", precision="fp16", store=str(db), study="other")
    r = get_agent("optuna", seed=0).run(ev2, Budget(evaluations=3))
    assert r.extra["imported"] >= 8
    assert ev2.stats.measured <= 3
    ev2.close()


def test_optuna_warm_start_writes_the_imported_trials_in_one_transaction(tmp_path, model_gn, monkeypatch):
    import optuna

    db = tmp_path / "warm.db"
    ev1 = Evaluator(model_gn, "orin-agx", mode="engine", precision="fp16", store=str(db))
    get_agent("random", seed=0).run(ev1, Budget(evaluations=8))
    ev1.close()

    def slow_path(self, trials):  # per trial and parameter: its cost grows with the study
        raise AssertionError("Study.add_trials used for the warm start")

    monkeypatch.setattr(optuna.Study, "add_trials", slow_path)
    ev2 = Evaluator(model_gn, "orin-agx", mode="engine", precision="fp16", store=str(db), study="other")
    r = get_agent("optuna", seed=0).run(ev2, Budget(evaluations=3))
    ev2.close()
    study = optuna.load_study(study_name="other", storage=f"sqlite:///{db}")
    imported = [t for t in study.get_trials(deepcopy=False) if t.user_attrs.get("imported")]
    assert len(imported) == r.extra["imported"] >= 8
    assert all(t.state == optuna.trial.TrialState.COMPLETE and t.values for t in imported)


def test_optuna_infeasible_trials_are_pruned_with_their_reason():
    model = random_graph(0, 40, chain=True)
    ev = Evaluator(model, "orin-agx", mode="engine", precision="fp16", gpu_fallback=False)
    agent = get_agent("optuna", seed=0, granularity="layer")
    space = ev.space("layer")
    alternating = [(i % 2) if space.mask[i, i % 2] else 0 for i in range(space.n_units)]
    study = agent.study(ev)
    study.enqueue_trial(agent.params_of(space, alternating))
    r = agent.run(ev, Budget(evaluations=4))
    trials = agent.study(ev).trials
    assert not [t for t in trials if t.state not in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    bad = [t for t in trials if t.user_attrs.get("status") == "infeasible"]
    assert bad, "the alternating placement has > 16 DLA loadables and no GPU fallback: infeasible"
    for t in bad:
        assert t.state == optuna.trial.TrialState.PRUNED and t.user_attrs["reason"]
        assert t.values is None  # no penalty value stretching the dashboard's axis
    assert r.best_measurement is not None and r.best_measurement.ok


@pytest.mark.parametrize("sampler", ["tpe", "nsga2"])
def test_optuna_multi_objective_pareto(seed_block_model, sampler):
    ev = Evaluator(seed_block_model, "orin-agx", mode="pipeline", precision="int8", objective="latency+energy")
    r = get_agent("optuna", seed=0, sampler=sampler, population_size=6).run(ev, Budget(evaluations=15))
    assert r.pareto and all(m.ok for _, m in r.pareto)
    assert r.evaluations == 15


# ----------------------------------------------------------------------------- exact
def brute_force(ev: Evaluator, granularity: str) -> float:
    space = ev.space(granularity)
    allowed = [np.flatnonzero(space.mask[i]).tolist() for i in range(space.n_units)]
    best = math.inf
    for a in itertools.product(*allowed):
        m = ev.evaluate(space.to_placement(list(a)))
        if m.ok:
            best = min(best, m.latency_ms["median"])
    return best


@pytest.mark.parametrize("seed", [*range(6), FRESH])
def test_exact_dp_matches_brute_force_on_random_graphs(seed):
    seed = case_seed(seed)
    model = random_graph(seed, 7 + seed % 3)
    platform = "orin-agx" if seed < 3 else "xavier-nx"
    ev = Evaluator(model, platform, mode="engine", precision="fp16" if seed % 2 else "int8")
    truth = brute_force(ev, "layer")
    # the bound is below every realised placement's latency
    space = ev.space("layer")
    bound = engine_bound(ev, space)
    for a in itertools.product(*[np.flatnonzero(space.mask[i]).tolist() for i in range(space.n_units)]):
        m = ev.evaluate(space.to_placement(list(a)))
        realised = space.from_placement(Placement(model, m.realized))
        assert bound.value(realised) <= m.latency_ms["median"] * (1 + 1e-9)
    fresh = Evaluator(model, platform, mode="engine", precision=ev.settings.precision)
    r = get_agent("exact", method="dp", granularity="layer").run(fresh, Budget(evaluations=50))
    assert r.best_value == pytest.approx(truth, rel=1e-9)
    assert r.certified
    assert r.evaluations <= 50
    r2 = get_agent("exact", method="enumerate", granularity="layer").run(
        Evaluator(model, platform, mode="engine", precision=ev.settings.precision), Budget(evaluations=5000))
    assert r2.certified and r2.best_value == pytest.approx(truth, rel=1e-9)


@pytest.mark.parametrize("seed", [*range(8), FRESH])
def test_dp_minimises_random_costs_exactly(seed):
    """The DP itself, on a landscape where the optimum is anything: random terms on random DAGs."""
    seed = case_seed(seed)
    rng = np.random.default_rng(seed)
    model = random_graph(100 + seed, 9, size=4)
    ev = Evaluator(model, "orin-agx", mode="engine", precision="fp16")
    space = ev.space("layer")
    bound = engine_bound(ev, space)
    for f in bound.factors:
        f.values = rng.normal(0.0, 1.0, f.values.shape)
    bound.island_ms = float(rng.uniform(-0.5, 1.5))
    allowed = [np.flatnonzero(space.mask[i]).tolist() for i in range(space.n_units)]
    values = {a: bound.value(list(a)) for a in itertools.product(*allowed)}
    best = min(values.values())
    lb, a = bound.minimise()
    assert lb == pytest.approx(best, abs=1e-9)
    assert values[tuple(a)] == pytest.approx(best, abs=1e-9)


def test_exact_certifies_resnet50_engine_with_one_evaluation():
    ev = Evaluator("resnet50", "orin-agx", mode="engine", precision="int8")
    r = get_agent("exact").run(ev, Budget(evaluations=10))
    assert r.certified and r.extra["method"] == "dp"
    assert r.evaluations == 1
    assert r.best_value == pytest.approx(r.extra["lower_bound"], rel=1e-9)


def test_exact_says_when_it_cannot_certify(model_gn):
    ev = Evaluator(model_gn, "orin-agx", mode="pipeline", precision="fp16")
    r = get_agent("exact", seed=0).run(ev, Budget(evaluations=10))
    assert not r.certified and r.notes and "cannot certify" in r.notes[0]
    ev = Evaluator("seed-block", "orin-agx", mode="pipeline", precision="fp16")
    r = get_agent("exact").run(ev, Budget(evaluations=5))
    assert not r.certified and r.evaluations == 5 and "5 of 243" in r.notes[0]
    ev = Evaluator("seed-block", "orin-agx", mode="engine", precision="fp16")
    r = get_agent("exact").run(ev, Budget(evaluations=5))
    assert r.certified and r.evaluations == 1  # engine mode: the DP, not enumeration


def test_exact_enumerates_seed_block_pipeline(seed_block_model):
    ev = Evaluator(seed_block_model, "orin-agx", mode="pipeline", precision="int8")
    r = get_agent("exact").run(ev, Budget(evaluations=300))
    assert r.certified and r.evaluations == 3**5
    best = min(rec.measurement.latency_ms["median"] for rec in ev.store.measurements(ev.study_name, status="ok"))
    assert r.best_value == pytest.approx(best)


def test_onnx_random_graph_is_valid():
    m = random_graph(3, 8)
    assert isinstance(m.proto, onnx.ModelProto) and len(m.layers) == 8


# ----------------------------------------------------------------------------- guided
def _truth(model, mode="pipeline", objective="throughput"):
    """'The real Jetson': the simulator with a device profile the agents do not know."""
    from placetune.backends.registry import get_backend
    from placetune.calibration import DeviceProfile

    prof = DeviceProfile(base="orin-agx", dla=1.3, boundary=2.0, engine_us=100.0, layer_sigma=0.1, seed=1)
    opts = {"frames_in_flight": 4} if mode == "pipeline" else {}
    return SpyEvaluator(model, "orin-agx", get_backend("simulate", device_profile=prof), mode=mode,
                        precision="int8", objective=objective, **opts)


@pytest.fixture(scope="module")
def resnet50_b2() -> Model:
    return Model.load("resnet50", batch=2)


def test_guided_beats_random_and_local_on_a_profiled_device(resnet50_b2):
    budget = 20
    best = {}
    for agent in ("guided", "local", "random"):
        r = get_agent(agent, seed=0).run(_truth(resnet50_b2), Budget(budget))
        assert r.evaluations == budget
        best[agent] = r.best_value
    # throughput: guided's best after 20 builds is clearly better than either blind agent's
    assert best["guided"] > 1.10 * best["local"], best
    assert best["guided"] > 1.10 * best["random"], best


def test_guided_fits_the_run_and_shows_predictions(resnet50_b2):
    ev = _truth(resnet50_b2)
    notes = []
    ev.add_callback(lambda p, m: notes.append(m.extra.get("annotation") or {}))
    r = get_agent("guided", seed=0).run(ev, Budget(16))
    assert r.evaluations == len(ev.asked) == 16
    fits = r.extra["fits"]
    assert fits and fits[-1][0] >= 8 and fits[-1][1] is not None and fits[-1][1] < 0.05
    assert all("predicted" in n for n in notes)
    assert any("cv_error" in n for n in notes)
    assert r.extra["inner_rate"] > 0
    # never the same realised placement twice (nor a DLA0 <-> DLA1 twin)
    keys = [ev.realise(p).realized.key for p in ev.asked]
    assert len(set(keys)) == len(keys)


@pytest.mark.parametrize("mode,objective", [("engine", "energy"), ("engine", "latency+energy"),
                                            ("replicas", "throughput")])
def test_guided_every_mode_and_objective_with_a_budget_of_10(mode, objective):
    ev = SpyEvaluator("model-gn", "orin-agx", mode=mode, precision="int8", objective=objective,
                      **({"replicas": {"GPU": 1, "DLA0": 1}} if mode == "replicas" else {}))
    r = get_agent("guided", seed=0, inner_evals=100).run(ev, Budget(10))
    assert r.evaluations == len(ev.asked) == 10 and r.best_value is not None
    if "+" in objective:
        assert r.pareto


@pytest.mark.parametrize("mode,k,objective", [("engine", 1, "latency"), ("pipeline", 4, "throughput"),
                                              ("pipeline", 2, "energy")])
def test_guided_surrogate_predicts_what_the_full_simulator_measures(mode, k, objective):
    """The guided agent's inner loop uses the incremental simulator; its predictions
    must equal realise() + SimulatedJetson.measure() under the same (fitted) device profile."""
    from placetune import DeviceProfile
    from placetune.tuning.objectives import get_objective
    from search.surrogate import Surrogate

    ev = Evaluator("resnet50", "orin-agx", mode=mode, precision="int8", frames_in_flight=k)
    space = ev.space(granularity="fusion")
    obj = get_objective(objective)
    profile = DeviceProfile.from_dict({"base": "orin-agx", "scale": {"gpu": 0.9, "dla": 1.2, "boundary": 1.5}})
    sur = Surrogate(ev, space, obj, profile)
    rng = np.random.default_rng(0)
    for _ in range(15):
        a = [int(x) for x in space.sample(rng)]
        r = ev.realise(space.to_placement(a))
        m = sur.sim.measure(r, ev.platform, sur.settings)
        want = obj.value(m)
        got = sur.value(sur.loss(a))
        assert got == pytest.approx(want, rel=1e-12), (a, got, want)
    with pytest.raises(Exception, match="does not fit the space"):
        sur.loss([0] * (space.n_units + 1))


def test_guided_polish_flips_single_units_next_to_a_cut():
    """The best sim2real plans put one branch of a block on the other DLA core next to
    a cut (e.g. DLA0 x14 | DLA1 | DLA0 | DLA1 x11 | GPU); no contiguous-stage move makes that.
    The polish step finds it, and only looks near device changes."""
    from types import SimpleNamespace

    from search.surrogate import _polish

    target = [1] * 14 + [2, 1] + [2] * 11 + [0] * 31

    class Sur:
        space = SimpleNamespace(n_devices=3, mask=np.ones((58, 3), dtype=bool))
        calls = 0

        def loss(self, a):
            self.calls += 1
            return float(sum(x != y for x, y in zip(a, target)))

    start = [1] * 16 + [2] * 11 + [0] * 31  # the contiguous 3-stage plan: 2 units off the target
    sur = Sur()
    best, loss = _polish(sur, start, budget=500)
    assert best == target and loss == 0.0
    # a local optimum: every unit within reach of a device change was tried once per pass, no more
    sur2 = Sur()
    # device changes at 14, 15, 16 and 27: units 11-18 and 24-29 (14), 2 other devices each, + the start
    assert _polish(sur2, target, budget=500) == (target, 0.0) and sur2.calls == 1 + 14 * 2
