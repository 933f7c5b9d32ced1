"""The Jetson: platform profiles, the DLA support rules of each TensorRT version, power rails."""

from placetune.hardware.platforms import Platform, get_platform, platform_names

__all__ = ["Platform", "get_platform", "platform_names"]
