"""A fleet worker: its id, and the heartbeat and polling settings every worker of a study shares."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from placetune.errors import ConfigError

__all__ = ["worker_id", "FleetOptions", "whole_seconds"]

#: the range of each heartbeat setting of ``[agent_options]`` (whole numbers)
RANGES = {"heartbeat_interval": (1, 3600), "grace_period": (2, 86400), "max_retry": (0, 1000)}


def worker_id() -> str:
    """This process as a fleet worker: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class FleetOptions:
    """Heartbeat and polling settings of a fleet worker.

    Set them in a study file's ``[agent_options]`` (``heartbeat_interval``, ``grace_period``,
    ``max_retry``); every worker should use the same values.

    Attributes:
        heartbeat_interval: seconds between heartbeats of a running trial and of a claim.
        grace_period: seconds without a heartbeat after which a trial or claim is
            considered dead (Optuna's default is twice the interval; engine builds and
            a loaded database make a larger margin safer).
        max_retry: how often the trial of a dead worker is re-queued.
        poll_seconds: how often a waiting worker looks again (claims, the gate).
    """

    heartbeat_interval: int = 20
    grace_period: int = 120
    max_retry: int = 3
    poll_seconds: float = 0.25

    def __post_init__(self) -> None:
        self.heartbeat_interval = whole_seconds("heartbeat_interval", self.heartbeat_interval)
        self.grace_period = whole_seconds("grace_period", self.grace_period)
        self.max_retry = whole_seconds("max_retry", self.max_retry)
        try:
            self.poll_seconds = float(self.poll_seconds)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"fleet poll_seconds must be a number: {exc}") from None
        if self.grace_period <= self.heartbeat_interval:
            raise ConfigError(
                f"grace_period ({self.grace_period} s) must be longer than heartbeat_interval "
                f"({self.heartbeat_interval} s), or live workers would be declared dead"
            )
        if self.max_retry < 0:
            raise ConfigError(f"max_retry must be >= 0, not {self.max_retry}")


def whole_seconds(key: str, value: object) -> int:
    """A heartbeat setting of ``[agent_options]`` (``key`` of :data:`RANGES`) as a whole number in its range.
    ``int()`` cut ``2.5`` to 2, read ``true`` as 1 and raised on ``"x"``, ``inf`` and ``nan``.

    Raises:
        ConfigError: naming the key and its range.
    """
    lo, hi = RANGES[key]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        unit = "" if key == "max_retry" else " (seconds)"
        raise ConfigError(f"[agent_options] {key} must be a whole number from {lo} to {hi}{unit}, "
                          f"got {str(value)[:40]!r}")
    return value
