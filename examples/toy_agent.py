"""A toy agent written step by step (ask/tell): batched steepest descent from all-GPU.

Each step proposes up to ``batch`` unmeasured one-unit moves of the best placement so far (a
batch the study measures), and is told their measurements; the best becomes the new centre.

One registration makes it an agent of ``placetune tune --agent toy`` and of a fleet:

* in a package, an entry point (pyproject.toml)::

      [project.entry-points."placetune.agents"]
      toy = "toy_agent:ToyAgent"

* in a script, before tuning: ``search.register_agent("toy", ToyAgent)``.
"""

import numpy as np

from search import StepAgent


class ToyAgent(StepAgent):
    name = "toy"

    def __init__(self, *, seed=None, granularity="fusion", batch=4):
        super().__init__(seed=seed, granularity=granularity)
        self.batch = int(batch)

    def start(self, run):
        self.rng = np.random.default_rng(self.seed)
        self.centre = [0] * run.space.n_units          # all-GPU first

    def propose(self, run):
        if run.known(self.centre) is None:
            return [self.centre]
        moves = [m for m in run.space.neighbours(self.centre)
                 if run.known(self._moved(m)) is None]
        picks = self.rng.permutation(len(moves))[: self.batch]
        return [self._moved(moves[i]) for i in picks]  # [] once every neighbour is measured: done

    def told(self, run, told):
        if run.best_assignment is not None:
            self.centre = list(run.best_assignment)

    def _moved(self, move):
        unit, device = move
        a = list(self.centre)
        a[unit] = device
        return a


if __name__ == "__main__":  # python examples/toy_agent.py: a run of it on a small network (simulated Jetson)
    import placetune as pt
    from search import Budget

    ev = pt.Evaluator("resnet18", "orin-agx", mode="pipeline", objective="throughput", frames_in_flight=4)
    result = ToyAgent(seed=0).run(ev, Budget(evaluations=30))
    print(f"toy agent: best {result.best_value:,.1f} fps against all-GPU's {ev.value(ev.baseline()):,.1f} fps in "
          f"{result.evaluations} evaluations (simulated); {result.best_placement.counts()}")
