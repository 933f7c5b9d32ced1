"""The ``placetune`` console script's entry point.

Importing placetune takes most of a second (numpy, Gymnasium, SQLAlchemy, ONNX). A Ctrl-C in that
time would stop Python inside an import and print its traceback, so this module, which imports
nothing of placetune's at its top, holds SIGINT and SIGTERM while placetune is imported: a Ctrl-C then
ends the command as one at any other time before a study opens does ("placetune: interrupted", exit code
130), once the import is over, and a SIGTERM likewise ("placetune: terminated", exit code 143). The command itself is :func:`placetune.cli.main.main`.
"""

import signal
import sys

__all__ = ["main"]

INTERRUPTED = 130  # the exit code of a run stopped by Ctrl-C (placetune.cli.main says the same)
TERMINATED = 143  # ... and by SIGTERM (128 + 15)


def main() -> int:
    """Import the command line with SIGINT and SIGTERM held, then run it."""
    held: list[int] = []

    def hold(signum: int, frame: object) -> None:
        held.append(signum)

    previous: dict[int, object] = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            previous[s] = signal.signal(s, hold)
    except ValueError:  # not the main thread (signal handlers are the main thread's): nothing to hold
        pass
    imported = False
    try:
        from placetune.cli.main import main as command
        from placetune.cli.signals import terminate

        imported = True
    finally:
        for s, handler in previous.items():
            # SIGTERM from here on raises as Ctrl-C does (the command keeps this handler while it runs)
            keep = imported and s == signal.SIGTERM and handler == signal.SIG_DFL
            signal.signal(s, terminate if keep else handler)  # type: ignore[arg-type]
    if held:
        print("placetune: terminated" if signal.SIGTERM in held else "placetune: interrupted", file=sys.stderr)
        return TERMINATED if signal.SIGTERM in held else INTERRUPTED
    try:
        return command()
    except KeyboardInterrupt as exc:  # a signal outside the command's own handling (as it returns)
        code = getattr(exc, "exit_code", INTERRUPTED)
        print("placetune: terminated" if code == TERMINATED else "placetune: interrupted", file=sys.stderr)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
