"""The seeds of the randomised suites: fresh on every run, printed, and replayable.

``tests/conftest.py`` draws every seed of :data:`SEEDS` at the start of a run (unless the
environment already gives one, which replays it) and prints them in the header and at the end;
the randomised tests read theirs with :func:`seed`, so no randomised test falls back to a fixed
seed when it is run alone."""

from __future__ import annotations

import os

#: environment variable -> what it seeds
SEEDS = {
    "PLACETUNE_FUZZ_SEED": "the command-line and ONNX fuzz suites",
    "PLACETUNE_FAULT_SEED": "the SIGKILL points of the reliability suite",
}


def seed(name: str) -> int:
    """This run's seed ``name``: the environment's (a replay) or a fresh draw, kept in the
    environment so that every test and subprocess of the run sees the same one."""
    if name not in SEEDS:
        raise KeyError(f"{name}: not one of {sorted(SEEDS)}")
    value = os.environ.get(name) or str(int.from_bytes(os.urandom(4), "big"))
    os.environ[name] = value
    return int(value)


#: a seeded property test's parameter for this run's fresh seed, beside its fixed cases (the seeds earlier
#: fresh runs failed on, kept as fixed cases): ``@pytest.mark.parametrize("seed", [0, 1, FRESH])``
FRESH = "fresh"


def case_seed(value: int | str) -> int:
    """The seed of a property test's case: a fixed one as given, :data:`FRESH` as this run's
    ``PLACETUNE_FUZZ_SEED`` (drawn per run, printed in the header, replayed from the environment).
    The fresh case is resolved inside the test, not at collection, so that every pytest-xdist
    worker collects the same tests."""
    return seed("PLACETUNE_FUZZ_SEED") if value == FRESH else int(value)


def replay_line() -> str:
    """One line naming every seed of this run and how to replay it."""
    return "placetune seeds: " + ", ".join(f"{name}={seed(name)}" for name in SEEDS) + " (set them to replay)"
