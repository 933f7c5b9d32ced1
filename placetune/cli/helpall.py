"""``--help`` that fits a first read, ``--help-all`` that holds everything.

A command with many options (``tune``, ``measure``) shows the common ones under ``--help`` and names the
others in its epilog; ``--help-all`` prints every option with its text, and the command's full epilog.
Each option keeps its help text whichever is shown: :func:`rare` only hides it from the short help.
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["add_help_all", "hidden", "rare", "rare_options"]

#: An action's attribute holding its help text while the short help hides it.
_FULL = "placetune_full_help"


def rare(action: argparse.Action) -> argparse.Action:
    """Leave ``action`` out of the short ``--help`` (``--help-all`` shows it with its text)."""
    setattr(action, _FULL, action.help)
    action.help = argparse.SUPPRESS
    return action


def rare_options(parser: argparse.ArgumentParser, *options: str) -> None:
    """Leave the actions of ``options`` (``"--seed"``) out of the short ``--help`` of ``parser``."""
    marked = {o: a for a in parser._actions for o in a.option_strings}  # noqa: SLF001
    for option in options:
        rare(marked[option])


def hidden(parser: argparse.ArgumentParser) -> list[str]:
    """The options the short help of ``parser`` leaves out, as the help would name them."""
    names = []
    for action in parser._actions:  # noqa: SLF001 - argparse has no public list of its actions
        if hasattr(action, _FULL) and action.help == argparse.SUPPRESS:
            names.append(" / ".join(o for o in action.option_strings if o.startswith("--")))
    return names


class _HelpAll(argparse.Action):
    """``--help-all``: every option with its text, then the command's full epilog; exit 0."""

    def __init__(self, option_strings: Sequence[str], dest: str,
                 full_epilog: str | Callable[[], str] | None = None, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)
        self.full_epilog = full_epilog

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        for action in parser._actions:  # noqa: SLF001
            if hasattr(action, _FULL):
                action.help = getattr(action, _FULL)
        parser.epilog = self.full_epilog() if callable(self.full_epilog) else self.full_epilog
        parser.print_help()
        parser.exit()


def add_help_all(parser: argparse.ArgumentParser, full_epilog: str | Callable[[], str] | None = None,
                 short_epilog: str = "", what: str = "") -> None:
    """Give ``parser`` a ``--help-all`` and an epilog naming the options its short help leaves out.

    Call it once every option is added. ``full_epilog`` ends ``--help-all`` (a callable: called when
    asked for); ``short_epilog`` ends the short help, after the names of the hidden options; ``what`` says
    what else ``--help-all`` holds (``what each agent does``). The epilogs are printed as written (the parser's description too)."""
    names = hidden(parser)
    parser.formatter_class = argparse.RawDescriptionHelpFormatter  # the epilogs keep their lines
    parser.add_argument("--help-all", action=_HelpAll, full_epilog=full_epilog,
                        help=f"every option ({len(names)} more than --help shows)"
                        + (f" and {what}" if what else ""))
    head = f"more options, each explained by {parser.prog} --help-all:"
    listed = textwrap.fill(", ".join(names), 78, initial_indent="  ", subsequent_indent="  ",
                           break_on_hyphens=False, break_long_words=False)
    parser.epilog = f"{head}\n{listed}\n" + (f"\n{short_epilog}" if short_epilog else "")
