"""What a usage error says besides argparse's words: the command or option a mistyped or misnamed one
was meant to be (``placetune show``: ``studies``; ``--modle``: ``--model`` or ``--mode``)."""

from __future__ import annotations

import difflib
import re

__all__ = ["closest_options", "command_hint"]


#: Words a newcomer types for what a command of another name does.
_COMMAND_WORDS = {"show": "studies", "list": "studies", "ls": "studies", "results": "studies", "status": "studies",
                  "best": "export", "plan": "export", "deploy": "export", "plot": "report", "plots": "report",
                  "run": "tune", "search": "tune", "optimize": "tune", "optimise": "tune", "info": "check"}


def command_hint(message: str) -> str:
    """After argparse's "argument COMMAND: invalid choice: 'show' (choose from ...)": the command meant
    (``show``: ``studies``, which lists the studies and their best; a misspelt one: the closest)."""
    found = re.match(r"argument COMMAND: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if not found:
        return ""
    word, choices = found.group(1), [c.strip(" '") for c in found.group(2).split(",")]  # quoted before 3.12.8
    meant = _COMMAND_WORDS.get(word.lower())
    if meant is None or meant not in choices:
        close = difflib.get_close_matches(word.lower(), choices, n=1, cutoff=0.6)
        meant = close[0] if close else None
    return f"; did you mean placetune {meant}?" if meant else ""


def closest_options(word: str, options: dict[str, int]) -> list[str]:
    """The options closest to a mistyped ``word``: the closest, a second one nearly as close, and an
    option with the same letters in another order first (``--modle``: ``--model`` or ``--mode``; difflib
    alone names only ``--mode``)."""
    def ratio(o: str) -> float:
        return difflib.SequenceMatcher(None, word, o).ratio()

    close = difflib.get_close_matches(word, options, n=3, cutoff=0.7)
    close = [o for o in close if ratio(o) >= ratio(close[0]) - 0.1]
    close = [o for i, o in enumerate(close) if options[o] not in {options[c] for c in close[:i]}]  # one per option
    return sorted(close[:2], key=lambda o: sorted(o) != sorted(word))
