"""How placetune words counts and ratios in what it prints.

One place for two things every output needs: a count with its noun in the right number
(``1 frame``, ``2 frames``) and a ratio against a baseline that reads the way it is meant
(``1.7x slower``, ``1.52x faster``), never a bare factor such as ``latency 0.59x`` that reads
as "59 % of the latency".

Example:
    >>> plural(1, "frame"), plural(4, "frame"), plural(2, "boundary", "boundaries")
    ('1 frame', '4 frames', '2 boundaries')
    >>> versus(1.518, "throughput"), versus(0.59, "latency"), versus(1.33, "energy")
    ('1.52x faster', '1.69x slower', '1.33x less energy')
"""

from __future__ import annotations

import math
import re
import textwrap

__all__ = ["figure", "hours", "plural", "versus", "wrap"]

#: objective -> (word when better, word when worse); a gain > 1 is better.
_WORDS = {
    "latency": ("faster", "slower"),
    "throughput": ("faster", "slower"),
    "energy": ("less energy", "more energy"),
    "gpu_time": ("less GPU time", "more GPU time"),
}


def figure(value: float | None) -> str:
    """A measured figure as a person reads it: ``2,345`` from a thousand up, else four significant
    digits (``37.12``, ``0.9127``); ``-`` for None.

    >>> figure(2345.4), figure(37.123), figure(None)
    ('2,345', '37.12', '-')
    """
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def hours(seconds: float) -> str:
    """A device time as read by a person: ``5.3 h``, ``42 min``, ``12 s``.

    Example:
        >>> hours(19080), hours(2520), hours(12)
        ('5.3 h', '42 min', '12 s')
    """
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def plural(count: int, noun: str, plural_form: str | None = None) -> str:
    """``count`` and ``noun`` in the right number: ``1 frame``, ``0 frames``, ``3 frames``.

    Args:
        count: how many.
        noun: the singular noun.
        plural_form: the plural when it is not ``noun + "s"`` (``boundaries``).

    Returns:
        The count, a space and the noun.
    """
    word = noun if count == 1 else (plural_form or f"{noun}s")
    return f"{count:,} {word}" if isinstance(count, int) else f"{count} {word}"


def versus(gain: float | None, metric: str = "latency") -> str:
    """A gain over a baseline (> 1 is better) as words: ``1.52x faster``, ``1.69x slower``.

    A loss is worded as its inverse (a gain of 0.59 in latency is ``1.69x slower``), so the
    factor always reads as "how many times". Equal figures (within 0.5 %) read ``same``.

    Args:
        gain: the improvement factor (baseline/value for a figure to minimise, value/baseline
            for one to maximise), as :meth:`placetune.tuning.objectives.Objective.gain` returns.
        metric: ``latency``, ``throughput``, ``energy`` or ``gpu_time`` (the words to use).

    Returns:
        The ratio in words, or ``-`` when ``gain`` is None, not finite or not positive.
    """
    if gain is None or not math.isfinite(gain) or gain <= 0:
        return "-"
    better, worse = _WORDS.get(metric, ("better", "worse"))
    if abs(gain - 1.0) < 0.005:
        return "same"
    factor, word = (gain, better) if gain > 1 else (1.0 / gain, worse)
    return f"{factor:.2f}x {word}" if factor < 10 else f"{factor:.1f}x {word}"


#: ``next: placetune export --study s -o deploy   (what it does)``: a command to copy, and its note (not
#: ``placetune tune: error: ...``, a message).
_COMMAND = re.compile(r"^(\s*(?:next: )?)(placetune (?!\S*: )\S.*?)(?:   (\(.*\)))?$")


def wrap(text: str, width: int | None) -> str:
    """``text`` with every line longer than ``width - 1`` broken at word boundaries (a line as wide as the
    terminal makes some terminals skip a row), its continuation lines indented two spaces more than it.

    A line holding a command (``next: placetune export ...   (its note)``) is broken so that it can still be
    copied whole: the command's lines end in `` \\`` (the shell's continuation) and its note goes on a line
    of its own. A word longer than the room (a study name) is never cut. ``width`` None: ``text`` unchanged
    (a log keeps one message a line).

    Example:
        >>> print(wrap("converged at trial 5 of 15: the best stopped improving there", 40))
        converged at trial 5 of 15: the best
          stopped improving there
    """
    if not width:
        return text
    room = max(width - 1, 20)
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= room:
            out.append(line)
            continue
        command = _COMMAND.match(line)
        if command:
            lead, cmd, note = command.groups()
            indent = " " * (len(lead) + 2)
            words: list[str] = []
            for word in cmd.split(" "):  # an option stays with its value: --study NAME
                if words and words[-1].startswith("-") and " " not in words[-1] and not word.startswith("-"):
                    words[-1] += " " + word
                else:
                    words.append(word)
            rows = [lead + words[0]]
            for word in words[1:]:  # each row leaves room for " \\"
                if len(rows[-1]) + 1 + len(word) + 2 <= room or rows[-1].strip() == "":
                    rows[-1] += " " + word
                else:
                    rows.append(indent + word)
            out += [r + " \\" for r in rows[:-1]] + rows[-1:]
            if note:
                out += textwrap.wrap(note, room, initial_indent=indent, subsequent_indent=indent + " ",
                                     break_long_words=False, break_on_hyphens=False)
            continue
        lead = line[:len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, room, subsequent_indent=lead + "  ", break_long_words=False,
                             break_on_hyphens=False)
    return "\n".join(out)
