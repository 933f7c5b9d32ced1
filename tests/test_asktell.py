"""Ask/tell: the study drives every agent one step at a time (search/asktell.py, search/steps.py).

Real evaluators on the simulated Jetson, real Optuna and Gymnasium; nothing is mocked."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from placetune import Evaluator
from placetune.errors import StopRequested
from placetune.placement.placement import Placement
from search import (
    Agent,
    Budget,
    Proposal,
    SearchRun,
    StepAgent,
    agent_names,
    drive,
    get_agent,
    measure,
    register_agent,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
from toy_agent import ToyAgent

BUILT_IN = ["exact", "guided", "local", "optuna", "random", "reinforce"]
OPTIONS = {"guided": {"inner_evals": 100}, "reinforce": {"hidden": 0}}


def _ev(model: str = "seed-block") -> Evaluator:
    return Evaluator(model, "orin-agx")


def _threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith("agent ")}


def _fingerprint(result):
    return ([(h.index, h.value, h.best) for h in result.history], result.evaluations,
            result.best_placement.key if result.best_placement else None, result.certified)


@pytest.mark.parametrize("agent", BUILT_IN)
def test_every_built_in_agent_runs_study_driven_and_finds_what_its_own_loop_finds(agent):
    # the study-driven run (ask, measure, tell) and the agent's loop calling the evaluator itself
    # give the same history, evaluation count and best placement
    ev = _ev()
    calls = []
    ev.add_callback(lambda p, m: calls.append(threading.current_thread()))
    steps = get_agent(agent, seed=3, **OPTIONS.get(agent, {})).ask_tell(ev, Budget(evaluations=10))
    asked = 0
    while proposals := steps.ask():
        asked += len(proposals)
        steps.tell([measure(ev, p) for p in proposals])
    driven = steps.result()
    direct = get_agent(agent, seed=3, **OPTIONS.get(agent, {})).search(_ev(), Budget(evaluations=10))
    assert _fingerprint(driven) == _fingerprint(direct)
    # budget exactness: every evaluate() call was a proposal the study measured, never more than the budget
    assert asked == ev.stats.requested == driven.evaluations <= 10
    if agent != "exact":  # exact certifies the optimum early
        assert driven.evaluations == 10
    assert set(calls) == {threading.main_thread()}  # the study measured every one
    assert not _threads()


def test_an_agent_asked_and_told_by_hand_reacts_to_what_it_is_told():
    ev = _ev("resnet50")
    steps = ToyAgent(seed=0, batch=3).ask_tell(ev, Budget(evaluations=30))
    first = steps.ask()
    assert [p.kind for p in first] == ["evaluate"] and first[0].placement.key == Placement.all_gpu(ev.model).key
    steps.tell([measure(ev, p) for p in first])
    space = steps.run.space
    for _ in range(3):
        batch = steps.ask()
        assert 1 <= len(batch) <= 3
        told = [measure(ev, p) for p in batch]
        steps.tell(told)
        best = steps.run.best_assignment
        # the next proposals are one-unit moves of the best measurement told so far
        nxt = steps.ask()
        for p in nxt:
            a = space.from_placement(p.placement)
            assert sum(x != y for x, y in zip(a, best)) == 1
        steps.tell([measure(ev, p) for p in nxt])
    assert steps.run.evaluations == ev.stats.requested <= 30


def test_a_loop_agent_by_hand_proposes_one_placement_at_a_time_and_waits():
    ev = _ev()
    steps = get_agent("local", seed=0).ask_tell(ev, Budget(evaluations=6))
    asked = steps.ask()
    assert len(asked) == 1 and asked[0].trial_number == 0 and ev.stats.requested == 0
    with pytest.raises(RuntimeError, match="tell"):
        steps.ask()  # the previous proposal is not told yet
    steps.tell([measure(ev, asked[0])])
    nxt = steps.ask()
    assert nxt[0].trial_number == 1 and nxt[0].placement.key != asked[0].placement.key
    steps.close()  # the study ends the run early: the loop unwinds, its thread ends
    assert steps.ask() == [] and not _threads()


def test_budget_exactness_with_batches_larger_than_what_is_left():
    ev = _ev("resnet50")
    r = ToyAgent(seed=1, batch=8).run(ev, Budget(evaluations=5))
    assert r.evaluations == ev.stats.requested == 5 and len(r.history) == 5


class _Twice(StepAgent):
    """Proposes the same placement twice in a batch, and the one before it again."""

    name = "twice"

    def propose(self, run):
        n = run.space.n_units
        return [] if run.evaluations >= 2 else [[0] * n, [0] * n, [1] + [0] * (n - 1)]


def test_no_duplicate_build_within_a_batch_or_across_runs_of_a_study():
    ev = _ev()
    r = _Twice().run(ev, Budget(evaluations=10))
    assert ev.stats.requested == r.evaluations == 2  # the repeat in the batch was not asked for
    again = _Twice().run(ev, Budget(evaluations=10))  # the study holds both: answered, no build
    assert again.evaluations == 0 and ev.stats.requested == 2 and again.best_value == r.best_value


def test_a_stop_raised_by_the_study_unwinds_the_agent_loop():
    ev = _ev()
    ev.add_callback(lambda p, m: ev.request_stop() if ev.stats.requested >= 3 else None)
    with pytest.raises(StopRequested):
        get_agent("reinforce", seed=0, hidden=0).run(ev, Budget(evaluations=20))
    assert ev.stats.requested == 3 and not _threads()


class AllGpuThenRandom(Agent):
    """An agent written before ask/tell: its run() is its loop (search/base.py's example)."""

    name = "mine"

    def run(self, evaluator, budget):
        run = SearchRun(evaluator, budget, self.name, self.granularity)
        rng = run.rng(self.seed)
        run.evaluate([0] * run.space.n_units)
        while not run.exhausted:
            run.evaluate(run.space.sample(rng))
        return run.result()


def test_an_agent_written_as_a_run_loop_still_runs_and_is_study_driven():
    assert AllGpuThenRandom(seed=0).run(_ev(), Budget(evaluations=5)).evaluations == 5
    ev = _ev()
    threads = []
    ev.add_callback(lambda p, m: threads.append(threading.current_thread()))
    assert drive(AllGpuThenRandom(seed=0).ask_tell(ev, Budget(evaluations=5)), ev).evaluations == 5
    assert set(threads) == {threading.main_thread()}


def test_register_agent_is_checked_and_a_registered_agent_is_found_by_name(monkeypatch):
    import search

    monkeypatch.setattr(search, "_REGISTRY", dict(search._REGISTRY))  # the other tests see the built-ins only
    register_agent("toy", ToyAgent)
    assert "toy" in agent_names() and get_agent("toy", seed=0, batch=2).batch == 2
    with pytest.raises(ValueError, match="already registered"):
        register_agent("toy", "elsewhere:Toy")
    with pytest.raises(ValueError, match="Agent subclass"):
        register_agent("notanagent", dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="letters"):
        register_agent("bad name", ToyAgent)
    with pytest.raises(ValueError):
        Proposal(None, "build")  # type: ignore[arg-type]


def test_the_docs_ask_tell_example_runs():
    text = (ROOT / "docs" / "search.md").read_text()
    section = text[text.index("## Ask/tell"):]
    block = section[section.index("```python\n") + 10:section.index("```\n", section.index("```python\n") + 10)]
    assert "steps.ask()" in block and "measure(ev, p)" in block
    namespace: dict = {}
    exec(compile(block, "docs/search.md", "exec"), namespace)
    assert namespace["result"].best_placement is not None


def test_placetune_tune_runs_an_agent_a_package_declares(tmp_path):
    # one registration: the entry point a package's pyproject.toml declares
    import os
    import subprocess

    dist = tmp_path / "site" / "placetune_toy-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: placetune-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[placetune.agents]\ntoy = toy_agent:ToyAgent\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "examples"), str(tmp_path / "site")]))
    p = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", "--model", "seed-block", "--agent", "toy",
                        "--trials", "9", "--storage", f"sqlite:///{tmp_path / 'pt.db'}"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=240, env=env, check=False)
    assert p.returncode == 0, p.stderr
    assert "agent toy" in p.stdout and "Traceback" not in p.stderr
    from placetune.store.store import Store

    store = Store(f"sqlite:///{tmp_path / 'pt.db'}")
    (study,) = store.studies()
    assert store.study(study.name).n_requests == 9


def test_tune_help_all_lists_the_agents_packages_declare_with_what_they_do(tmp_path):
    # an agent a package declares is one --agent takes: the help that lists the agents names it too
    import os
    import subprocess

    dist = tmp_path / "site" / "placetune_toy-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: placetune-toy\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[placetune.agents]\ntoy = toy_agent:ToyAgent\n"
                                           "broken = no_such_module:Agent\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "examples"), str(tmp_path / "site")]))
    p = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", "--help-all"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False)
    assert p.returncode == 0, p.stderr
    agents = p.stdout[p.stdout.index("agents (--agent):"):p.stdout.index("granularities")]
    assert "\n  toy " in agents and "batched steepest descent from all-GPU" in " ".join(agents.split())
    assert "\n  broken " in agents and "cannot import" in agents   # listed, and why --agent broken fails
    assert "Traceback" not in p.stderr
    short = subprocess.run([sys.executable, "-m", "placetune.cli", "tune", "--help"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env, check=False).stdout
    assert "one a package registers" in " ".join(short[short.index("--agent NAME"):].split())


def test_closing_a_loop_agent_whose_thread_is_still_ending_returns():
    """The loop's last message is read (ask() returned []) while its thread has not yet ended:
    close() waited on the queue for a message that would never come (a full CI run hung here)."""
    import queue
    import time

    from search.asktell import LoopAskTell

    class LingeringQueue(queue.SimpleQueue):
        def put(self, item, block=True, timeout=None):  # the agent's thread is preempted after its last message
            super().put(item, block, timeout)
            if item[0] in ("done", "error", "closed"):
                time.sleep(1.0)

    ev = _ev()
    steps = get_agent("random", seed=0).ask_tell(ev, Budget(evaluations=2))
    assert isinstance(steps, LoopAskTell)
    steps._to_study = LingeringQueue()
    while asked := steps.ask():
        steps.tell([measure(ev, p) for p in asked])
    closer = threading.Thread(target=steps.close, daemon=True)
    closer.start()
    closer.join(timeout=10)
    assert not closer.is_alive(), "close() hangs"
    assert steps.result().evaluations == 2 and not _threads()


class _Population(StepAgent):
    """A population agent: each round proposes a population (twins and members of earlier rounds among
    them) and waits for a measurement of every member before the next round."""

    name = "population"

    def start(self, run):
        self.rounds, self.told_rounds = 0, []

    def propose(self, run):
        n = run.space.n_units
        self.rounds += 1
        if self.rounds > 3:
            return []
        gpu, first_dla = [0] * n, [1] + [0] * (n - 1)
        return [gpu, gpu, first_dla] if self.rounds == 1 else [gpu, first_dla, [0] * (n - 1) + [1]]

    def told(self, run, told):
        self.told_rounds.append([tuple(a) for a, _ in told])


def test_every_proposal_is_told_twins_and_placements_the_run_measured_before_included():
    """An ask/tell agent is told every proposal: a simulated-annealing walk that comes back to a placement
    learns its measurement again, a population with twins gets one per member (both were left out, so a
    walk stalled and a population never completed), and only new realisations spend budget."""
    ev = _ev()
    agent = _Population()
    r = agent.run(ev, Budget(evaluations=10))
    n = ev.space().n_units
    gpu, front, end = (0,) * n, (1,) + (0,) * (n - 1), (0,) * (n - 1) + (1,)
    told = sorted(a for t in agent.told_rounds for a in t)
    assert told == sorted([gpu, gpu, front, gpu, front, end, gpu, front, end]), agent.told_rounds
    assert r.evaluations == ev.stats.requested == 3  # all-GPU, DLA at the front, DLA at the end: once each


def test_a_step_agent_resuming_a_study_is_told_its_stored_measurements_before_it_proposes(tmp_path):
    # Budget(recall=True), what placetune tune passes on a resume: a step-by-step agent (a walk, an
    # annealer) continues from what the study measured, as the guided agent does, instead of from nothing
    db = f"sqlite:///{tmp_path / 'r.db'}"

    class Recorder(StepAgent):
        name = "recorder"

        def start(self, run):
            self.events: list[tuple[str, int]] = []
            self.rng = run.rng(self.seed)

        def propose(self, run):
            self.events.append(("propose", 0))
            return [run.space.sample(self.rng) for _ in range(2)]

        def told(self, run, told):
            self.events.append(("told", len(told)))

    ev = Evaluator("seed-block", "orin-agx", store=db, study="s")
    first = Recorder(seed=0).run(ev, Budget(evaluations=6))
    stored = len(ev.store.measurements("s", status="ok"))
    ev.close()
    assert stored >= 4

    ev = Evaluator("seed-block", "orin-agx", store=db, study="s")
    again = Recorder(seed=1)
    steps = again.ask_tell(ev, Budget(evaluations=4, recall=True))
    assert again.events and again.events[0][0] == "told" and again.events[0][1] >= 4   # before any proposal
    assert steps.run.best_value == first.best_value                                   # the study's best
    drive(steps, ev)
    assert steps.result().evaluations == 4                                            # recalled: no budget
    ev.close()

    ev = Evaluator("seed-block", "orin-agx", store=db, study="s")
    fresh = Recorder(seed=1)
    fresh.ask_tell(ev, Budget(evaluations=4))                                          # recall=False: its own run
    assert not fresh.events
    ev.close()


def test_a_step_agent_of_a_fresh_tune_study_is_told_the_baselines_tune_measured_before_it_proposes(
        tmp_path, monkeypatch, capsys):
    # placetune tune measures the baselines (all-GPU, all-DLA0, ...) before the agent starts: an annealer
    # or a walk must hear them, as it hears a resumed study's stored measurements, or it never learns
    # that a baseline was the best plan so far
    import search
    from placetune.cli.main import main

    heard: list[tuple[str, list]] = []

    class Listener(StepAgent):
        name = "listener"

        def propose(self, run):
            heard.append(("propose", []))
            return [] if run.evaluations else [run.space.sample(run.rng(self.seed))]

        def told(self, run, told):
            heard.append(("told", [run.space.to_placement(a).counts() for a, _ in told]))

    monkeypatch.setattr(search, "_REGISTRY", dict(search._REGISTRY))
    register_agent("listener", Listener)
    monkeypatch.chdir(tmp_path)  # tune exports its plan into the working directory
    assert main(["tune", "--model", "resnet18", "--mode", "pipeline", "--agent", "listener", "--trials", "8",
                 "--storage", f"sqlite:///{tmp_path / 'f.db'}"]) == 0
    capsys.readouterr()
    kind, first = heard[0]
    assert kind == "told"                                    # before its first proposal
    n = sum(first[0].values())
    assert first[0] == {"GPU": n, "DLA0": 0, "DLA1": 0}      # all-GPU, then all-DLA0 (its GPU fallback aside)
    assert first[1]["DLA0"] > first[1]["GPU"] and first[1]["DLA1"] == 0

    # the API's own run on a fresh evaluator measured nothing before: nothing to tell
    heard.clear()
    Listener(seed=0).ask_tell(Evaluator("seed-block", "orin-agx"), Budget(evaluations=2, baselines=True))
    assert heard == []
