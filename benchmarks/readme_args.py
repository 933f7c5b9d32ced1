"""The command line of the scripts that write a part of README.md from runs: ``[--write | --check]``."""

from __future__ import annotations

import argparse


def write_or_check(description: str, what: str, argv: list[str] | None) -> argparse.Namespace:
    """``--write`` (write the runs' ``what`` into README.md) or ``--check`` (exit 1 when README.md's differ from
    them); neither: print the runs only."""
    ap = argparse.ArgumentParser(description=description)
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"write the runs' {what} into README.md")
    group.add_argument("--check", action="store_true", help=f"exit 1 when README.md's {what} are not the runs'")
    return ap.parse_args(argv)
