"""``cuda.bindings`` (double): ``driver`` and ``nvrtc``."""

__version__ = "12.6.0-fake"
