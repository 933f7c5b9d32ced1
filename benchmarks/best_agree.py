"""Does every place that names a tune's best plan name the same one?

Runs ``placetune tune`` (the guided agent, its end re-measurement on) on a simulated Jetson whose
builds are noisy and, with ``--family drift``, whose GPU slows as the night goes on
(:class:`device_truths.TruthJetson`), then compares, for each seed:

* **agent**: the guided agent's final pick (its result's best, after its own re-ranking);
* **printed**: the best plan the run's summary prints (``TuneOutcome.best``);
* **plan**: the plan file the run exported;
* **export**: ``placetune export`` run afterwards from the database alone;
* **optuna**: the Optuna study's ``best_trial`` (what optuna-dashboard shows);
* **optuna_attr**: the plan its ``placetune_best`` user attribute names (a run's recorded pick).

Each is named by its realised placement's key (12 characters). Everything is SIMULATED.

Usage:
    python benchmarks/best_agree.py --family drift --seeds 0 1 2 3 4 5 --trials 50
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))


def one(family: str, draw: int, seed: int, trials: int, model: str) -> dict[str, str]:
    import optuna

    from device_truths import TruthJetson, truth
    from placetune.backends.registry import register_backend
    from placetune.model.model import Model
    from placetune.placement.placement import Placement
    from placetune.plan.export import export_plan
    from placetune.store.store import Store
    from placetune.tuning.studyfile import TuneConfig
    from placetune.tuning.tune import run_tune
    import search.guided as guided

    class Truth(TruthJetson):  # a registered class declares its capabilities (TruthJetson's own)
        def __init__(self, **_: object) -> None:
            super().__init__(truth(family, draw))

    register_backend("truth", Truth, replace=True)
    picks: list = []
    original = guided.GuidedAgent.search

    def search(self, evaluator, budget):
        r = original(self, evaluator, budget)
        picks.append(r)
        return r

    guided.GuidedAgent.search = search
    try:
        with tempfile.TemporaryDirectory() as tmp:
            db = f"sqlite:///{tmp}/s.db"
            plan_path = f"{tmp}/best.plan.json"
            cfg = TuneConfig(model=model, backend="truth", trials=trials, storage=db, export=plan_path,
                             study="s", agent_options={"seed": seed},
                             batch=2, stop_when_settled=False)
            out = io.StringIO()
            outcome = run_tune(cfg, out=out)
            store = Store(db)
            m = Model.load(model, batch=2)

            def key(realized) -> str:
                return Placement(m, dict(realized)).key[:12]

            plan = json.loads(Path(plan_path).read_text())
            later = export_plan(store, "s", model=m)
            study = optuna.load_study(study_name="s", storage=db)
            trial = study.best_trial
            mid = trial.user_attrs.get("measurement_id")
            rec = next(iter(store.measurements("s", ids=[int(mid)]))) if mid is not None else None
            agent = picks[-1].best_measurement if picks else None
            row = {
                "agent": key(agent.realized) if agent is not None else "-",
                "printed": key(outcome.best[1].realized),
                "plan": key({x["name"]: x["realized"] for x in plan["layers"]}),
                "export": key({x["name"]: x["realized"] for x in later.to_dict()["layers"]}),
                "optuna": key(rec.measurement.realized) if rec is not None else "-",
                "optuna_attr": attr_key(store, study, key),
                "drift": next((n for n in outcome_notes(out.getvalue()) if n.startswith("drift")), "")[:60],
            }
            store.close()
            return row
    finally:
        guided.GuidedAgent.search = original


def attr_key(store, study, key) -> str:
    """The plan the Optuna study's ``placetune_best`` user attribute names ("-": none recorded)."""
    doc = study.user_attrs.get("placetune_best")
    if not isinstance(doc, dict):
        return "-"
    rec = next(iter(store.measurements("s", ids=[int(doc["measurement_id"])])), None)
    return key(rec.measurement.realized) if rec is not None else "?"


def outcome_notes(text: str) -> list[str]:
    return [x.strip() for x in text.splitlines()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="drift")
    ap.add_argument("--draw", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--trials", type=int, default=50)
    ap.add_argument("--model", default="resnet50")
    a = ap.parse_args(argv)
    differ = {k: 0 for k in ("printed", "plan", "export", "optuna", "optuna_attr")}
    for seed in a.seeds:
        r = one(a.family, a.draw, seed, a.trials, a.model)
        for k in differ:
            differ[k] += r[k] != r["agent"]
        print(f"seed {seed}: " + " ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    n = len(a.seeds)
    print(f"{a.family} draw {a.draw}, {a.trials} trials, {n} seeds: differs from the agent's final pick: "
          + ", ".join(f"{k} {v}/{n}" for k, v in differ.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
