"""Device profiles and calibration: learn how a Jetson differs from the simulated one.

:class:`DeviceProfile` describes a device as a built-in platform plus multiplicative corrections
of the simulator; :func:`fit_profile` / :func:`calibrate` fit one to stored measurements. :mod:`~placetune.calibration.published` turns
the published Jetson measurements into simulated cases; :mod:`~placetune.calibration.builtin`
fits the simulator's built-in constants to their ``fit`` rows.
"""

from placetune.calibration.calibrate import calibrate
from placetune.calibration.fit import FitResult, Observation, fit_profile, observations
from placetune.calibration.profile import DeviceProfile, load_device_profile
from placetune.calibration.published import (
    CaseResult,
    PublishedCase,
    PublishedRow,
    error_summary,
    load_published,
    published_cases,
    simulate_case,
)

__all__ = ["DeviceProfile", "load_device_profile", "Observation", "observations", "FitResult", "fit_profile",
           "calibrate", "PublishedRow", "PublishedCase", "CaseResult", "load_published", "published_cases",
           "simulate_case", "error_summary"]
