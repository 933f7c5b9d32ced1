"""The help texts of ``placetune tune``: its agents and granularities (``--help-all``, with the agents a
package or script registers) and the examples that end both ``--help`` and ``--help-all``."""

from __future__ import annotations

import textwrap

__all__ = ["TUNE_AGENTS", "TUNE_EXAMPLES", "tune_epilog"]

TUNE_AGENTS = """\
agents (--agent):
  guided     the default: fits corrections of the simulator to the run's own
             measurements, searches the corrected simulator and builds only
             its best few predictions
  local      hill climbing (or simulated annealing) from the best baseline,
             one unit at a time
  optuna     Optuna's TPE sampler over the placetune study's own Optuna study
  random     uniform random placements (the yardstick)
  reinforce  a policy-gradient agent on the placetune/Placement-v0 Gymnasium
             environment
  exact      the true optimum: enumerates small spaces, dynamic programming
             for engine mode

granularities (--granularity), what one decision unit is:
  stages     a few contiguous stages, one device each (guided's default)
  fusion     the groups of layers TensorRT fuses anyway (the other agents')
  layer      every layer on its own
  scope:N    the model's modules at depth N (torch scopes such as layer1.0)
"""

#: The examples that end both ``placetune tune --help`` and ``--help-all``.
TUNE_EXAMPLES = """\
examples:
  placetune tune                       the embedded default (ResNet-50 on a
                                       simulated AGX Orin)
  placetune tune studies/seed-block-pipeline.toml
                                       a study file; options override it
  placetune tune --model my.onnx --shape images=1x3x640x640 --timeout 8h
                                       your network (dynamic), overnight
"""


#: The end of ``placetune tune --help-all``: the agents and granularities (tests check it names
#: every agent of ``search.agent_names()``), then the examples.
def tune_epilog() -> str:
    """``tune --help-all``'s end: the built-in agents, those packages or scripts registered, the examples."""
    from search import agent_names, agent_summary
    more = [n for n in agent_names() if f"\n  {n} " not in TUNE_AGENTS]
    head, _, rest = TUNE_AGENTS.partition("\n\ngranularities")
    lines = [textwrap.fill(f"{n:10s} {agent_summary(n)}", 78, initial_indent="  ", subsequent_indent=" " * 13)
             for n in more]
    return "\n".join([head, *lines]) + "\n\ngranularities" + rest + "\n" + TUNE_EXAMPLES
