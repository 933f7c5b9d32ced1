"""The ``placetune`` console script's entry point.

Importing placetune takes most of a second (numpy, Gymnasium, SQLAlchemy, ONNX). A Ctrl-C in that
time would stop Python inside an import and print its traceback, so this module, which imports
nothing of placetune's at its top, holds SIGINT while placetune is imported: a Ctrl-C then ends the
command as one at any other time before a study opens does ("placetune: interrupted", exit code 130),
once the import is over. The command itself is :func:`placetune.cli.main.main`.
"""

import signal
import sys

__all__ = ["main"]

INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C (placetune.cli.main says the same)


def main() -> int:
    """Import the command line with SIGINT held, then run it."""
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    try:
        previous = signal.signal(signal.SIGINT, hold)
    except ValueError:  # not the main thread (signal handlers are the main thread's): nothing to hold
        previous = None
    try:
        from placetune.cli.main import main as command
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if held:
        print("placetune: interrupted", file=sys.stderr)
        return INTERRUPTED
    try:
        return command()
    except KeyboardInterrupt:  # a Ctrl-C outside the command's own handling (as it returns)
        print("placetune: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
