"""The frequencies ``jetson_clocks`` locked the Jetson's clocks at, as a study records them, and when two
records are the same lock.

``jetson_clocks`` locks a clock by writing its maximum to its minimum (its ``--show`` prints
``MinFreq == MaxFreq``); the maximum is the power mode's cap. The name of the mode and "clocks locked"
do not say at what: ``jetson_clocks --store`` / ``--restore`` of a file saved under other caps, or a
board whose mode was not applied, locks the same named mode at other frequencies. So a real backend's
fingerprint records ``locked_clocks``: ``{clock: frequency}`` for every clock it reads locked
(:func:`locked_frequencies`, from a :func:`placetune.backends.clocks.snapshot`: ``gpu:<devfreq
node>`` in Hz, ``cpu:policy<N>`` in kHz, ``emc`` in Hz where debugfs is readable, i.e. as root), and a
study resumed, or joined by a fleet worker, under locks more than :data:`LOCK_TOLERANCE` apart is
refused with the clocks named (:func:`lock_differences`), as one under another power mode is.

Example:
    >>> study = {"gpu:17000000.gpu": 1300500000, "cpu:policy0": 2201600}
    >>> lock_differences(study, {"gpu:17000000.gpu": 816000000, "cpu:policy0": 2201600})
    [('gpu:17000000.gpu', '1300500000', '816000000')]
    >>> lock_differences(study, dict(study))
    []
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["LOCK_TOLERANCE", "FINGERPRINT_KEY", "locked_frequencies", "lock_differences", "clocks_tag"]

#: The fingerprint key the locked frequencies are recorded under.
FINGERPRINT_KEY = "locked_clocks"

#: How far apart (relative to the study's) two locked frequencies of one clock may be and still count
#: as the same lock. Chosen, not measured: the bound within which a locked clock's reading is taken as
#: running at its locked frequency during a night (``THROTTLE_TOLERANCE`` in
#: :mod:`placetune.backends.clocks`, the same 2 %), so that resuming is held to what a night already
#: accepts. A lock at another frequency of the clock's table is always further apart: the caps in
#: NVIDIA's nvpmodel files (:mod:`placetune.hardware.power_modes`) differ by multiples of 76.8 MHz on
#: the CPU and 102 MHz on the GPU, over 3 % even at the highest locked frequencies a published
#: ``jetson_clocks --show`` gives (AGX Orin MAXN: CPU 2201.6 MHz, GPU 1300.5 MHz; tests/data/jetson_clocks).
LOCK_TOLERANCE = 0.02


def locked_frequencies(snap: Mapping[str, Mapping[str, int]] | None) -> dict[str, int] | None:
    """``{clock: frequency}`` of every clock of a clocks snapshot whose ``min`` equals its ``max`` (the
    nvpmodel mode entry is not a clock); None when none is locked or there is no snapshot.

    Example:
        >>> locked_frequencies({"gpu:17000000.gpu": {"cur": 1300500000, "min": 1300500000, "max": 1300500000},
        ...                     "cpu:policy0": {"cur": 729600, "min": 729600, "max": 2201600},
        ...                     "nvpmodel": {"mode": 0}})
        {'gpu:17000000.gpu': 1300500000}
    """
    if not snap:
        return None
    out = {name: int(c["min"]) for name, c in sorted(snap.items())
           if name != "nvpmodel" and isinstance(c, Mapping) and c.get("min") is not None
           and c.get("min") == c.get("max")}
    return out or None


def _apart(was: int, now: int) -> bool:
    return abs(int(now) - int(was)) > LOCK_TOLERANCE * abs(int(was))


def lock_differences(study: Any, board: Any) -> list[tuple[str, str, str]]:
    """``(clock, study's, this run's)`` for each way this run's locks (``board``, a
    :func:`locked_frequencies` record or None) are not the study's (``study``): a clock locked in both
    more than :data:`LOCK_TOLERANCE` apart, a GPU clock locked in one only (``not locked``), or a
    record on one side only (``clocks``). Clocks read on one side only otherwise (a CPU policy of
    cores offline, the EMC read as root) are not compared. Empty: the same lock."""
    if not isinstance(study, Mapping) or not isinstance(board, Mapping):
        if study == board:
            return []
        return [("clocks", "not locked" if not study else "locked", "not locked" if not board else "locked")]
    out: list[tuple[str, str, str]] = []
    for clock in sorted(set(study) | set(board)):
        was, now = study.get(clock), board.get(clock)
        if was is not None and now is not None:
            if _apart(was, now):
                out.append((clock, str(was), str(now)))
        elif clock.startswith("gpu:"):
            out.append((clock, "not locked" if was is None else str(was), "not locked" if now is None else str(now)))
    return out


def clocks_tag(power_mode: str, locked: Mapping[str, int] | None = None) -> str:
    """The power mode a measurement records and, where the clocks are locked, a digest of the
    frequencies: tactics timed and engines built under MAXN are not those of a 30 W mode (nor of
    another lock of the same mode), so the timing and engine caches are kept apart by it."""
    if not locked:
        return power_mode
    return f"{power_mode}-lock" + hashlib.sha1(json.dumps(sorted(locked.items())).encode()).hexdigest()[:8]
