"""Study reports: PNG plots of a search and of its best plan, plus a Chrome-trace timeline.

:func:`write_report` writes, for one study of a :class:`~placetune.store.store.Store`:

* ``progress.png``: best-so-far objective value against the study's trial (the number ``placetune tune``
  prints: trial=N, "converged at trial N"), one line per agent (its own best so far), the all-GPU baseline as a dashed line;
* ``pareto.png``: latency (or throughput) against energy of every successful measurement,
  the Pareto front highlighted, the best plan and the all-GPU baseline marked; far outliers (an
  all-DLA plan) that would squeeze those into a corner are drawn at the axes' edge, the legend says where;
* ``placement.png``: the best plan's device per layer (layers in topological order),
  requested and realised as two rows, layers that fell back to the GPU marked;
* ``timeline.png``: a Gantt chart of the best plan's schedule, one row per device;
* ``trace.json``: the same schedule as a Chrome trace (Perfetto, chrome://tracing).

Plots of a simulated study say ``SIMULATED`` in their title. matplotlib is imported only
here, lazily (``pip install 'placetune[report]'``); figures are drawn with the object API
and the Agg renderer, so no display is needed.

Example:
    ``placetune.report.plots.write_report(Store("sqlite:///placetune.db"), "my-study", "report/")``
"""

from __future__ import annotations

import logging
import math
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
import io
import textwrap

from placetune.errors import ConfigError, PlacetuneError
from placetune.placement.placement import DEVICES
from placetune.report.progress_data import progress_lines
from placetune.report.pareto_view import at_the_edge, pareto_view, value_span, within
from placetune.report.trace import device_order, timeline_events, write_chrome_trace
from placetune.wording import plural
from placetune._lazy import lazy_import
from placetune.files.folder import OutputFolder
from placetune.files.write import write_file
from placetune.hardware.platforms import get_platform
from placetune.plan.export import export_plan, refuse_relabelled
from placetune.plan.file import Plan

if TYPE_CHECKING:
    from placetune.measurement import Measurement
    from placetune.model.model import Model
    from placetune.plan.file import Plan
    from placetune.store.records import StudyRecord
    from placetune.store.store import Store

if TYPE_CHECKING:
    import matplotlib
    import matplotlib.colors as matplotlib_colors
    import matplotlib.figure as matplotlib_figure
    import matplotlib.lines as matplotlib_lines
    import matplotlib.patches as matplotlib_patches
    import matplotlib.text as matplotlib_text
else:
    matplotlib = lazy_import("matplotlib")
    matplotlib_colors = lazy_import("matplotlib.colors")
    matplotlib_figure = lazy_import("matplotlib.figure")
    matplotlib_lines = lazy_import("matplotlib.lines")
    matplotlib_patches = lazy_import("matplotlib.patches")
    matplotlib_text = lazy_import("matplotlib.text")

__all__ = [
    "write_report",
    "plot_progress",
    "plot_pareto",
    "plot_placement",
    "plot_timeline",
    "pareto_front",
    "DEVICE_COLORS",
    "OBJECTIVE_LABELS",
]

log = logging.getLogger(__name__)

#: Colour of each device in every plot.
DEVICE_COLORS: dict[str, str] = {"GPU": "#76b900", "DLA0": "#1f77b4", "DLA1": "#ff7f0e"}
#: Axis label (with unit) of each objective.
OBJECTIVE_LABELS: dict[str, str] = {
    "latency": "median latency per batch (ms)",
    "throughput": "throughput (fps)",
    "energy": "energy per batch (mJ)",
    "gpu_time": "GPU busy time per frame (ms)",
}
_DIRECTIONS = {"latency": "minimize", "throughput": "maximize", "energy": "minimize", "gpu_time": "minimize"}
_SIM_COLOR = "#c0392b"


# --------------------------------------------------------------------------- matplotlib
def _figure(width: float, height: float) -> Any:
    """A matplotlib Figure drawn by Agg (no pyplot state, no display)."""
    try:
        import matplotlib
    except ImportError:
        raise ConfigError("reports need matplotlib: pip install 'placetune[report]'") from None
    if "matplotlib.pyplot" not in sys.modules:  # headless default; never switch a backend already in use
        matplotlib.use("Agg")
    return matplotlib_figure.Figure(figsize=(width, height), layout="constrained")


def _save(fig: Any, path: Path, dpi: int) -> Path:
    """The figure as PNG through the one write path (atomic; a link or a device written through)."""
    buf = io.BytesIO()
    # names are text, never math: a study or layer named "$\\frac{x}$" made matplotlib's math parser raise
    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        for text in fig.findobj(matplotlib_text.Text):
            text.set_parse_math(False)
        fig.savefig(buf, dpi=dpi, format="png")  # tick labels made while drawing take the context's default
    return write_file(path, buf.getvalue(), "PNG plot")


def _title(fig: Any, text: str, simulated: bool, subtitle: str = "") -> None:
    """Bold figure title (red and prefixed ``SIMULATED`` for simulated data), wrapped to the figure width;
    ``subtitle`` goes in small grey type above the (first) axes."""
    if simulated:
        text = f"SIMULATED \u2014 {text}"
    width = max(30, int(fig.get_figwidth() * 9.5))
    fig.suptitle(textwrap.fill(text, width), fontsize=11, fontweight="bold",
                 color=_SIM_COLOR if simulated else "black")
    if subtitle and fig.axes:
        fig.axes[0].set_title(textwrap.fill(subtitle, int(width * 1.5)), fontsize=8, color="#555555")


def plan_ref(source: Mapping[str, Any] | None) -> str:
    """How a plot names the plan's measurement: ``Optuna trial 4``, the number optuna-dashboard,
    ``optuna trials`` and the exported plan's ``source.trial_number`` give it; ``measurement 37`` (the
    store's id, which counts over every study of the database) only where no Optuna trial holds it."""
    src = source or {}
    number = src.get("trial_number")
    return f"Optuna trial {number}" if number is not None else f"measurement {src.get('measurement_id')}"


def _subtitle(st: "StudyRecord") -> str:
    sim = "simulated Jetson" if st.simulated else f"backend {st.backend}"
    return (f"study {st.name}: {st.model_name} on {st.platform}, {st.mode} mode, {st.precision}, batch {st.batch}, "
            f"objective {st.objective}, {sim}")


def _objective_value(m: "Measurement", name: str) -> float | None:
    v = m.objective(name)
    return v if v is not None and math.isfinite(v) else None


# --------------------------------------------------------------------------- progress
def plot_progress(store: "Store", study_name: str, path: str | os.PathLike[str], *, dpi: int = 110) -> Path:
    """Best-so-far objective value against the study's trial, one line per agent.

    The trial is the one ``placetune tune`` prints (``trial=5/30``, "converged at trial 5"): the evaluation
    request's position in the study, from 1, baselines and every agent included, cache hits included
    (:mod:`placetune.report.progress_data`). The all-GPU baseline is a dashed horizontal line.

    Raises:
        ConfigError: the study has no evaluation yet.
        UnknownNameError: no such study.
    """
    st = store.study(study_name)
    objective = st.objective.split("+")[0].strip()
    direction = _DIRECTIONS.get(objective, "minimize")
    lines = progress_lines(store, study_name, objective, direction)
    if not lines:
        raise ConfigError(f"study {study_name!r} has no evaluation yet: nothing to plot")
    baseline = _all_gpu_value(store.measurements(study_name), objective)
    fig = _figure(8.0, 4.8)
    ax = fig.add_subplot()
    colors = _cycle()
    for line in lines:
        drawn = [(t, b) for t, b in zip(line.trials, line.best) if b is not None]
        color = next(colors)
        label = (f"{line.agent}: its own best so far ({plural(len(line.values), 'evaluation')}"
                 + (f", {line.failed} failed" if line.failed else "") + f", {line.span()})")
        if drawn:
            ax.step([t for t, _ in drawn], [b for _, b in drawn], where="post", color=color, linewidth=2, label=label)
            ok = [(t, v) for t, v in zip(line.trials, line.values) if v is not None]
            ax.scatter([t for t, _ in ok], [v for _, v in ok], s=10, color=color, alpha=0.35, linewidths=0)
        else:
            ax.plot([], [], color=color, label=label + ": nothing ok")
    if baseline is not None:
        ax.axhline(baseline, color="#555555", linestyle="--", linewidth=1,
                   label=f"all-GPU baseline ({baseline:.4g} {_unit(objective)})")
    ax.set_xlabel("trial of the study, as placetune tune counts it (trial=N, \"converged at trial N\")"
                  "\nbaselines, every agent and cache hits included, in the order asked")
    ax.set_ylabel(f"best so far: {OBJECTIVE_LABELS.get(objective, objective)}")
    ax.grid(True, alpha=0.3)
    ax.margins(x=0.02)
    if max(line.trials[-1] for line in lines) <= 20:
        ax.xaxis.get_major_locator().set_params(integer=True)
    ax.legend(loc="best", fontsize=8)
    _title(fig, f"search progress: best-so-far {objective} "
                f"({'lower' if direction == 'minimize' else 'higher'} is better)", st.simulated, _subtitle(st))
    return _save(fig, Path(path), dpi)


def _unit(objective: str) -> str:
    return {"latency": "ms", "throughput": "fps", "energy": "mJ", "gpu_time": "ms"}.get(objective, "")


def _cycle() -> Any:
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
               "#7f7f7f"]
    i = 0
    while True:
        yield palette[i % len(palette)]
        i += 1


def _all_gpu_value(records: Any, objective: str) -> float | None:
    for rec in records:
        if rec.measurement.ok and rec.realized and all(d == "GPU" for d in rec.realized.values()):
            return _objective_value(rec.measurement, objective)
    return None


# --------------------------------------------------------------------------- pareto
def pareto_front(points: Sequence[tuple[float, float]], directions: tuple[str, str] = ("minimize", "minimize")
                 ) -> list[int]:
    """Indexes of the non-dominated points, sorted by the first coordinate.

    Example:
        >>> pareto_front([(1, 5), (2, 2), (3, 3), (4, 1)])
        [0, 1, 3]
    """
    sign = tuple(1.0 if d == "minimize" else -1.0 for d in directions)
    pts = [(p[0] * sign[0], p[1] * sign[1]) for p in points]
    front = []
    for i, (a, b) in enumerate(pts):
        dominated = any(
            (c <= a and d <= b) and (c < a or d < b) for j, (c, d) in enumerate(pts) if j != i
        )
        if not dominated:
            front.append(i)
    front.sort(key=lambda i: (points[i][0], points[i][1]))
    # keep one of identical points
    out: list[int] = []
    for i in front:
        if not out or pts[out[-1]] != pts[i]:
            out.append(i)
    return out


def plot_pareto(store: "Store", study_name: str, path: str | os.PathLike[str], *, dpi: int = 110,
                best_id: int | None = None, best_name: str | None = None) -> Path | None:
    """Latency (or throughput) against energy of every ok measurement, the Pareto front highlighted;
    the best plan's measurement ``best_id`` starred and named ``best_name`` in the legend (see
    :func:`plan_ref`; default ``measurement <best_id>``).

    The x axis is throughput when the study's objective involves throughput, else median
    latency. Returns None (and writes nothing) when no measurement has an energy figure.
    """
    st = store.study(study_name)
    xname = "throughput" if "throughput" in st.objective else "latency"
    records = [r for r in store.measurements(study_name) if r.measurement.ok]
    pts: list[tuple[float, float]] = []
    ids: list[int] = []
    for r in records:
        x, y = _objective_value(r.measurement, xname), _objective_value(r.measurement, "energy")
        if x is not None and y is not None:
            pts.append((x, y))
            ids.append(r.id)
    if not pts:
        log.info("study %s: no measurement has an energy figure: no Pareto plot", study_name)
        return None
    front = pareto_front(pts, (_DIRECTIONS[xname], "minimize"))
    base = next((k for k, r in enumerate(records) if r.realized and all(d == "GPU" for d in r.realized.values())
                 and r.id in ids), None)
    focus = set(front) | {ids.index(i) for i in (best_id,) if i in ids}
    if base is not None:
        focus.add(ids.index(records[base].id))
    xlim, ylim = pareto_view(pts, sorted(focus))
    fig = _figure(8.5, 5.0)
    ax = fig.add_subplot()
    inside = [p for p in pts if within(p[0], xlim) and within(p[1], ylim)]
    ax.scatter([p[0] for p in inside], [p[1] for p in inside], s=18, color="#9e9e9e", alpha=0.7,
               label=f"ok measurements ({len(pts)})")
    outside = [p for p in pts if not (within(p[0], xlim) and within(p[1], ylim))]
    for marker, group in at_the_edge(outside, xlim, ylim).items():
        ax.scatter([p[0] for p in group], [p[1] for p in group], s=40, marker=marker, facecolors="none",
                   edgecolors="#616161", linewidths=1.2, clip_on=False, zorder=4,
                   label="_beyond the axes")  # "_": the legend's one entry for them follows
    if outside:  # one legend entry for every side: the arrow points to where they lie
        xs, ys = [p[0] for p in outside], [p[1] for p in outside]
        ax.scatter([], [], s=40, marker=">", facecolors="none", edgecolors="#616161", linewidths=1.2,
                   label=f"{len(outside)} beyond the axes, drawn at\ntheir edge, pointing their way:"
                         f"\n{xname} {value_span(xs)}\nenergy {value_span(ys)}")
    fx = [pts[i][0] for i in front]
    fy = [pts[i][1] for i in front]
    ax.plot(fx, fy, color="#d62728", linewidth=1.5, marker="o", markersize=6,
            label=f"Pareto front ({len(front)})",
            drawstyle=("steps-post" if xname == "latency" else "steps-pre") if len(front) > 1 else "default")
    if base is not None:
        b = pts[ids.index(records[base].id)]
        ax.scatter([b[0]], [b[1]], marker="s", s=70, facecolors="none", edgecolors="black", linewidths=1.5,
                   label="all-GPU baseline", zorder=5)
    if best_id is not None and best_id in ids:
        b = pts[ids.index(best_id)]
        ax.scatter([b[0]], [b[1]], marker="*", s=220, color="gold", edgecolors="black", linewidths=0.8,
                   label=f"best plan ({best_name or f'measurement {best_id}'})", zorder=6)
    if xlim is not None:
        ax.set_xlim(*xlim)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(OBJECTIVE_LABELS[xname] + (" \u2192 higher is better" if xname == "throughput" else ""))
    ax.set_ylabel(OBJECTIVE_LABELS["energy"])
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8)  # beside: "best" sat on the front
    kind = "Pareto front" if "+" in st.objective else "trade-off (Pareto front highlighted)"
    _title(fig, f"{xname} vs energy: {kind}", st.simulated, _subtitle(st))
    return _save(fig, Path(path), dpi)


# --------------------------------------------------------------------------- placement map
def plot_placement(plan: "Plan", path: str | os.PathLike[str], *, title: str = "plan", dpi: int = 110) -> Path:
    """The plan's device per layer: layers on x in topological order, requested and realised rows.

    Layers that ran elsewhere than asked (GPU fallback, loadable limit, one core per engine)
    are marked with a black dot on the realised row.
    """
    names = plan.layer_names
    n = len(names)
    code = {d: i for i, d in enumerate(DEVICES)}
    grid = [[code[layer["requested"]] for layer in plan.layers], [code[layer["realized"]] for layer in plan.layers]]
    label_names = n <= 48
    longest = max((len(x) for x in names), default=0) if label_names else 0
    height = 2.6 + (min(longest, 40) * 0.075 if label_names else 0.0)
    fig = _figure(max(7.0, min(16.0, 4.0 + 0.22 * n)) if label_names else 11.0, height)
    ax = fig.add_subplot()
    cmap = matplotlib_colors.ListedColormap([DEVICE_COLORS[d] for d in DEVICES])
    ax.imshow(grid, aspect="auto", cmap=cmap, vmin=-0.5, vmax=len(DEVICES) - 0.5, interpolation="nearest",
              extent=(-0.5, n - 0.5, 1.5, -0.5))
    if n <= 100:  # cell borders
        for x in range(1, n):
            ax.axvline(x - 0.5, color="white", linewidth=0.6)
    ax.axhline(0.5, color="white", linewidth=2)
    moved = [i for i, layer in enumerate(plan.layers) if layer["requested"] != layer["realized"]]
    if moved:
        ax.scatter(moved, [1] * len(moved), s=16 if n <= 100 else 4, color="black", zorder=3)
    ax.set_yticks([0, 1], ["requested", "realised"])
    if label_names:
        ax.set_xticks(range(n), [_short(x) for x in names], rotation=90, fontsize=7)
        ax.set_xlabel("layer (topological order)")
    else:
        ax.set_xlabel(f"layer index (topological order, {n} layers)")
    try:  # every device of the platform is in the legend, used or not
        offered = set(get_platform(plan.platform).devices)
    except PlacetuneError:
        offered = set()
    used = [d for d in DEVICES if d in offered
            or any(layer["requested"] == d or layer["realized"] == d for layer in plan.layers)]
    handles = [matplotlib_patches.Patch(facecolor=DEVICE_COLORS[d], label=d) for d in used]
    if moved:
        handles.append(matplotlib_lines.Line2D([], [], marker="o", color="black", linestyle="", markersize=4,
                              label=f"ran elsewhere than asked ({len(moved)})"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8, title="device",
              title_fontsize=8)
    shown = _plan_value_text(plan)
    extra = f", {shown}" if shown else ""
    src = plan.source or {}
    _title(fig, f"{title}: device per layer ({plan.model.get('name')}, {plan_ref(src)}"
                f"{extra})", plan.simulated,
           f"study {src.get('study')}: {plan.platform}, {plan.mode} mode, {plan.precision}, batch {plan.batch}"
           + ("; each DLA replica runs the DLA layers on its own core" if plan.mode == "replicas" else ""))
    return _save(fig, Path(path), dpi)


def _plan_value_text(plan: "Plan") -> str:
    """The plan's figure on its study's objective(s), e.g. ``throughput 1,585 fps``."""
    parts = []
    for name in str(plan.objective or "latency").split("+"):
        name = name.strip()
        if name == "latency":
            v = (plan.measured.get("latency_ms") or {}).get("median")
            label = "median latency"
        else:
            v = plan.measured.get({"throughput": "throughput_fps", "energy": "energy_mj"}.get(name, name))
            label = name
        if isinstance(v, (int, float)):
            parts.append(f"{label} {v:,.4g} {_unit(name)}".rstrip())
    return ", ".join(parts)


#: Timeline colours of successive frames: 20 distinct colours (tab20 order, pairs split), so
#: no colour repeats within 16 frames in flight.
FRAME_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
                "#f7b6d2", "#c7c7c7", "#dbdb8d", "#9edae5"]


def _short(name: str, limit: int = 40) -> str:
    return name if len(name) <= limit else "\u2026" + name[-(limit - 1):]


# --------------------------------------------------------------------------- timeline
def plot_timeline(
    source: "Plan | Measurement | Mapping[str, Any]",
    path: str | os.PathLike[str],
    *,
    devices: Sequence[str] | None = None,
    title: str | None = None,
    simulated: bool | None = None,
    subtitle: str = "",
    frame_label: str | None = None,
    dpi: int = 110,
) -> Path:
    """A Gantt chart of a schedule: one row per device, engine/segment runs as bars, x in ms.

    Args:
        source: a :class:`~placetune.plan.file.Plan` (its measured timeline), a Measurement, or a
            mapping with ``timeline`` / ``segment_times_ms``.
        path: the PNG to write.
        devices: rows to show (default: the plan platform's devices, else those in the schedule).
        title: the title (default ``"schedule"``).
        simulated: label it SIMULATED (default: the source's flag).
        subtitle: a small line under the title.
        frame_label: what a ``frame`` of the timeline is called in the legend (default
            ``iteration`` for replicas plans, else ``frame``).
        dpi: resolution.

    Raises:
        ConfigError: the source has no timeline and no segment times.
    """
    if isinstance(source, Plan):
        if frame_label is None:
            frame_label = "iteration" if source.mode == "replicas" else "frame"
        if simulated is None:
            simulated = source.simulated
        if devices is None:
            try:
                devices = get_platform(source.platform).devices
            except PlacetuneError:
                devices = None
        data: Any = source.measured
    else:
        data = source
    if simulated is None:
        simulated = bool(data.get("simulated") if isinstance(data, Mapping) else getattr(data, "simulated", False))
    events = timeline_events(data)
    if not events:
        raise ConfigError("no timeline and no segment times to draw")
    rows = device_order(list(devices or []) + [e["device"] for e in events])
    frames = sorted({e["frame"] for e in events})
    multi = len(frames) > 1
    t0 = min(e["start_ms"] for e in events)
    t1 = max(e["end_ms"] for e in events)
    span = max(t1 - t0, 1e-9)
    fig = _figure(10.0, 1.6 + 0.65 * len(rows))
    ax = fig.add_subplot()
    frame_colors = FRAME_COLORS
    ypos = {d: i for i, d in enumerate(rows)}
    for e in events:
        y = ypos[e["device"]]
        w = e["end_ms"] - e["start_ms"]
        color = frame_colors[e["frame"] % len(frame_colors)] if multi else DEVICE_COLORS.get(e["device"], "#7f7f7f")
        if w <= 0:
            ax.vlines(e["start_ms"], y - 0.35, y + 0.35, color=color, linewidth=1.5)
            continue
        ax.broken_barh([(e["start_ms"], w)], (y - 0.35, 0.7), facecolors=color, edgecolors="black", linewidth=0.4)
        if len(events) <= 80 and w / span > 0.0075 * len(e["name"]) + 0.01:  # only where the name fits
            ax.text(e["start_ms"] + w / 2, y, e["name"], ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(t0 - 0.01 * span, t1 + 0.01 * span)
    ax.set_xlabel("time (ms)")
    ax.set_ylabel("device")
    ax.grid(True, axis="x", alpha=0.3)
    if multi:
        shown = frames[:10]
        word = frame_label or "frame"
        handles = [matplotlib_patches.Patch(facecolor=frame_colors[f % len(frame_colors)], label=f"{word} {f}") for f in shown]
        if len(frames) > 10:
            handles.append(matplotlib_patches.Patch(facecolor="white", label=f"... {len(frames)} {word}s"))
    else:
        handles = [matplotlib_patches.Patch(facecolor=DEVICE_COLORS.get(d, "#7f7f7f"), label=d) for d in rows
                   if any(e["device"] == d for e in events)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize=8)
    _title(fig, title or "schedule", bool(simulated), subtitle)
    return _save(fig, Path(path), dpi)


# --------------------------------------------------------------------------- all of it
#: Every file :func:`write_report` may write (the folder guard checks them all before the first).
_REPORT_FILES = ("progress.png", "pareto.png", "placement.png", "timeline.png", "trace.json")


def write_report(
    store: "Store",
    study_name: str,
    out_dir: str | os.PathLike[str],
    *,
    model: "Model | None" = None,
    dpi: int = 110,
) -> list[Path]:
    """Write the study's plots and the best plan's Chrome trace into ``out_dir``.

    Args:
        store: the :class:`~placetune.store.store.Store`.
        study_name: the study.
        out_dir: the directory (created if missing).
        model: the study's model (default: loaded again from its file or the zoo; without
            it the plots still work).
        dpi: PNG resolution.

    Returns:
        The files written: ``progress.png``, ``pareto.png`` (when energy figures exist),
        ``placement.png``, ``timeline.png`` and ``trace.json`` (the last three when the study
        has a successful measurement).

    Raises:
        UnknownNameError: no such study.
        ConfigError: the study has no evaluation yet, matplotlib is missing, or a file cannot be written.
    """
    st = store.study(study_name)
    for rec in store.measurements(study_name):  # a study relabelled as measured: no plot without its SIMULATED mark
        refuse_relabelled(st, rec.measurement, rec.id)
    # the folder guard: every file the report may write is absent or placetune's own, unchanged
    guard = OutputFolder(out_dir, "report folder")
    guard.check(_REPORT_FILES)
    guard.mkdir()
    out = guard.directory
    written = [guard.record(plot_progress(store, study_name, out / "progress.png", dpi=dpi).name)]
    try:
        plan = export_plan(store, study_name, model=model)
    except ConfigError as exc:
        log.warning("no plan plots for study %s: %s", study_name, exc)
        plan = None
    pareto = plot_pareto(store, study_name, out / "pareto.png", dpi=dpi,
                         best_id=None if plan is None else plan.source.get("measurement_id"),
                         best_name=None if plan is None else plan_ref(plan.source))
    if pareto is not None:
        written.append(guard.record(pareto.name))
    if plan is None:
        return written
    # the study's best whose placement was not read is passed over: the plots are of the plan the export writes
    named = "best exportable plan" if plan.measured.get("not_exported") else "best plan"
    written.append(guard.record(plot_placement(plan, out / "placement.png", title=named, dpi=dpi).name))
    shown = _plan_value_text(plan)
    what = plan_ref(plan.source) + (f", {shown}" if shown else "")
    frames = plan.measured.get("frames_in_flight")
    if plan.mode == "pipeline" and frames and frames > 1:
        what += (f", its first {int(frames)} frames from an empty pipeline, {int(frames)} in flight" if plan.simulated
                 else f", {plural(int(frames), 'frame')} in flight")  # the simulator draws the pipeline filling
    try:
        written.append(guard.record(plot_timeline(plan, out / "timeline.png",
                                                  title=f"schedule of the {named} ({what})",
                                                  subtitle=_subtitle(st)).name))
        written.append(guard.record(write_chrome_trace(
            plan.measured, out / "trace.json", title=f"placetune {st.name}: {st.model_name} on {st.platform}",
            simulated=plan.simulated,
            metadata={"study": st.name, "model": st.model_name, "platform": st.platform, "mode": st.mode,
                      "measurement_id": plan.source.get("measurement_id"),
                      "trial_number": plan.source.get("trial_number")}).name))
    except ConfigError as exc:
        log.warning("no timeline for study %s: %s", study_name, exc)
    return written
