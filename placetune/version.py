"""The package version (one place, read by the CLI and written into plans)."""

__version__ = "0.1.0"
