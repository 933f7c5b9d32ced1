"""Device profiles and calibration: learn how a Jetson differs from the simulated one.

:class:`DeviceProfile` describes a device as a built-in platform plus multiplicative corrections
of the simulator; :func:`fit_profile` / :func:`calibrate` fit one to stored measurements.
"""

from placetune.calibration.profile import DeviceProfile, load_device_profile

__all__ = ["DeviceProfile", "load_device_profile"]
