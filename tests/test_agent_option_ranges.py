"""An agent option of the right type but outside what the agent can use (a negative count, a zero
temperature, a decay above 1) is refused by ``get_agent`` in one line naming the agent and the option,
before a study is opened: it was accepted and the run spent its budget on a setting that meant nothing
(``hidden = -5``, ``max_redraws = -5``) or stopped on a ZeroDivisionError (``t0 = 0``)."""

from __future__ import annotations

import pytest

import search
from placetune.errors import ConfigError

REFUSED = [
    ("exact", "max_enumerate", 0), ("exact", "max_enumerate", -1),
    ("local", "t0", 0.0), ("local", "t0", -1.0), ("local", "t1", -1.0), ("local", "t1", 0.0),
    ("local", "kick", 0.0), ("local", "kick", -0.5), ("local", "kick", 1.5),
    ("optuna", "n_startup_trials", -1), ("optuna", "population_size", 1), ("optuna", "population_size", -1),
    ("optuna", "max_retry", -1),
    ("random", "max_redraws", -5),
    ("reinforce", "lr", 0.0), ("reinforce", "lr", -0.1), ("reinforce", "hidden", -5),
    ("reinforce", "baseline_decay", -0.1), ("reinforce", "baseline_decay", 1.0), ("reinforce", "baseline_decay", 1.5),
    ("reinforce", "prior", -1.0), ("reinforce", "entropy", -1.0), ("reinforce", "max_repeats", 0),
]

ACCEPTED = [
    ("exact", "max_enumerate", 1), ("guided", "ensemble", 0), ("local", "t0", 0.5), ("local", "t1", 1e-6),
    ("local", "kick", 1.0), ("optuna", "n_startup_trials", 0), ("optuna", "population_size", 2),
    ("optuna", "max_retry", 0), ("random", "max_redraws", 0), ("reinforce", "lr", 1.0), ("reinforce", "hidden", 0),
    ("reinforce", "baseline_decay", 0.0), ("reinforce", "prior", 0.0), ("reinforce", "entropy", 0.0),
    ("reinforce", "max_repeats", 1),
]


@pytest.mark.parametrize("agent,option,value", REFUSED)
def test_an_option_out_of_range_is_refused_naming_it(agent, option, value):
    with pytest.raises(ConfigError) as err:
        search.get_agent(agent, **{option: value})
    text = str(err.value)
    assert f"agent {agent!r}" in text and option in text and "\n" not in text, text


@pytest.mark.parametrize("agent,option,value", ACCEPTED)
def test_the_edge_of_each_range_is_accepted(agent, option, value):
    search.get_agent(agent, **{option: value})
