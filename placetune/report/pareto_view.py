"""Where a Pareto plot looks: limits that show the front readably when far outliers (an all-DLA plan)
would squeeze it into a corner, and the points beyond those limits moved onto the plot's edge."""

from __future__ import annotations

from collections.abc import Sequence

_ZOOM = 0.5  # an axis is zoomed when the points to show span under this share of all points' range


def pareto_view(points: Sequence[tuple[float, float]], focus: Sequence[int]
                ) -> tuple[tuple[float, float] | None, tuple[float, float] | None]:
    """The x and y limits of a Pareto plot that shows the ``focus`` points (the front, the best plan,
    all-GPU) readably: an axis on which they span under half of all points' range (far outliers, such as
    an all-DLA plan, squeezed them into a corner) is limited to them, with a margin; None for an axis
    left to matplotlib (everything fits). Points beyond the limits are drawn at the edge."""
    limits: list[tuple[float, float] | None] = []
    for axis in (0, 1):
        every = [p[axis] for p in points]
        shown = [points[i][axis] for i in focus] or every
        span, full = max(shown) - min(shown), max(every) - min(every)
        if not span or span >= _ZOOM * full:  # one point alone is no view: zoomed, it would hide the rest
            limits.append(None)
            continue
        pad = max(0.08 * span, 0.02 * full, 1e-9)
        limits.append((min(shown) - pad, max(shown) + pad))
    return limits[0], limits[1]


def value_span(values: Sequence[float]) -> str:
    """``306\u2013499`` (or ``306`` for one value): where points beyond a plot's axes lie."""
    lo, hi = f"{min(values):.3g}", f"{max(values):.3g}"
    return lo if lo == hi else f"{lo}\u2013{hi}"


def within(v: float, lim: tuple[float, float] | None) -> bool:
    """True when ``v`` lies within ``lim`` (None: no limit)."""
    return lim is None or lim[0] <= v <= lim[1]


def at_the_edge(points: Sequence[tuple[float, float]], xlim: tuple[float, float] | None,
                 ylim: tuple[float, float] | None) -> dict[str, list[tuple[float, float]]]:
    """Points beyond the limits moved onto the nearest edge, by the marker that points their way
    (``<`` left, ``>`` right, ``v`` below, ``^`` above; x decides at a corner)."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for x, y in points:
        cx = x if xlim is None else min(max(x, xlim[0]), xlim[1])
        cy = y if ylim is None else min(max(y, ylim[0]), ylim[1])
        marker = "<" if cx > x else ">" if cx < x else "v" if cy > y else "^"
        groups.setdefault(marker, []).append((cx, cy))
    return groups
