"""Study reports (PNG plots), Chrome traces, and the studies / report / trace commands."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

import placetune
from placetune import Placement
from placetune.errors import ConfigError, StoreError
from placetune.measurement import Measurement
from placetune.plan.export import export_plan
from placetune.plan.file import load
from placetune.report.plots import pareto_front, plot_timeline, write_report
from placetune.store.store import Store
from placetune.report.trace import chrome_trace, timeline_events

pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A small pipeline study of seed-block evaluated by two agents."""
    tmp = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{tmp}/pt.db"
    ev = placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", store=url, study="s")
    ev.baselines()
    space = ev.space()
    for agent in ("random", "local"):
        for i in range(4):
            ev.evaluate(space.to_placement(space.sample()), agent=agent, trial_number=i)
    ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}), agent="local", trial_number=9)
    yield SimpleNamespace(url=url, tmp=tmp, ev=ev, model=ev.model)
    ev.close()


@pytest.fixture(scope="module")
def report_files(study):
    with Store(study.url) as store:
        files = write_report(store, "s", study.tmp / "report")
    return {f.name: f for f in files}


def _check_trace(doc: dict) -> None:
    events = doc["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert len(set(threads.values())) == len(threads)  # one tid per device
    runs = [e for e in events if e["ph"] in ("X", "i")]
    assert runs
    assert [e["ts"] for e in runs] == sorted(e["ts"] for e in runs)
    for e in runs:
        assert e["pid"] == 1 and e["tid"] in threads and threads[e["tid"]] == e["args"]["device"]
        if e["ph"] == "X":
            assert e["dur"] > 0
    assert any(e["ph"] == "X" for e in runs)
    assert doc["displayTimeUnit"] == "ms"


# --------------------------------------------------------------------------- PNGs and trace
def test_report_writes_pngs(report_files):
    from matplotlib.image import imread

    assert set(report_files) == {"progress.png", "pareto.png", "placement.png", "timeline.png", "trace.json"}
    for name, path in report_files.items():
        assert path.stat().st_size > 5_000 if name.endswith(".png") else path.stat().st_size > 100
        if name.endswith(".png"):
            img = imread(path)
            assert img.ndim == 3 and img.shape[2] in (3, 4)
            assert img.shape[0] >= 250 and img.shape[1] >= 700, (name, img.shape)
            assert img.std() > 0.05  # not a blank image


def test_report_trace_is_valid(report_files, study):
    doc = json.loads(report_files["trace.json"].read_text())
    _check_trace(doc)
    assert doc["otherData"]["simulated"] is True and doc["otherData"]["study"] == "s"
    process = next(e for e in doc["traceEvents"] if e["name"] == "process_name")
    assert "SIMULATED" in process["args"]["name"]


def test_chrome_trace_units_and_devices():
    m = Measurement("ok", latency_samples_ms=[1.0], simulated=True, timeline=[
        {"device": "DLA1", "name": "seg2", "start_ms": 0.5, "end_ms": 1.25, "frame": 0},
        {"device": "GPU", "name": "seg0", "start_ms": 0.0, "end_ms": 0.5, "frame": 0},
        {"device": "GPU", "name": "seg3", "start_ms": 1.25, "end_ms": 1.25, "frame": 0},  # zero length
        {"device": "DLA0", "name": "seg1", "start_ms": 0.5, "end_ms": 1.0, "frame": 1},
    ])
    doc = chrome_trace(m)
    _check_trace(doc)
    x = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert [(e["name"], e["ts"], e["dur"]) for e in x] == [("seg0", 0.0, 500.0), ("seg1", 500.0, 500.0),
                                                          ("seg2", 500.0, 750.0)]
    names = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert names == {1: "GPU", 2: "DLA0", 3: "DLA1"}
    assert [e["name"] for e in doc["traceEvents"] if e["ph"] == "i"] == ["seg3"]


def test_chrome_trace_from_segment_times_and_empty():
    seg = [{"index": 0, "device": "GPU", "layers": 2, "time_ms": 0.2, "start_ms": 0.0, "end_ms": 0.2},
           {"index": 1, "device": "DLA0", "layers": 1, "time_ms": 0.3, "start_ms": 0.2, "end_ms": 0.5}]
    events = timeline_events({"segment_times_ms": seg})
    assert [(e["device"], e["name"]) for e in events] == [("GPU", "seg0"), ("DLA0", "seg1")]
    doc = chrome_trace({"segment_times_ms": seg}, simulated=False)
    _check_trace(doc)
    assert doc["otherData"]["simulated"] is False
    with pytest.raises(ConfigError, match="no timeline"):
        chrome_trace(Measurement("ok", latency_samples_ms=[1.0]))


def test_timeline_plot_of_frames_in_flight(tmp_path):
    from matplotlib.image import imread

    with placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", frames_in_flight=3, study="f") as ev:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}))
    assert len({e["frame"] for e in m.timeline}) > 1
    path = plot_timeline(m, tmp_path / "t.png", devices=("GPU", "DLA0", "DLA1"))
    assert imread(path).shape[1] >= 700


def test_pareto_front():
    assert pareto_front([(1, 5), (2, 2), (3, 3), (4, 1)]) == [0, 1, 3]
    assert pareto_front([(1, 5), (2, 2), (3, 3)], ("maximize", "minimize")) == [1, 2]
    assert pareto_front([(1, 1), (1, 1)]) == [0]


def test_report_needs_evaluations(tmp_path):
    with Store(f"sqlite:///{tmp_path}/e.db") as store:
        store.create_or_open_study("empty", placetune.Model.load("seed-block"), "orin-agx", "simulate", "engine",
                                   "latency", "fp16", 1, {}, {}, True)
        with pytest.raises(ConfigError, match="no evaluation yet"):
            write_report(store, "empty", tmp_path / "r")


# --------------------------------------------------------------------------- CLI
def _cli(*argv: str) -> int:
    from placetune.cli.results import add_parsers

    parser = argparse.ArgumentParser(prog="placetune")
    add_parsers(parser.add_subparsers())
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_studies(study, capsys):
    assert _cli("studies", "--storage", study.url) == 0
    out = capsys.readouterr().out
    assert "seed-block" in out and "pipeline" in out and " ms" in out and "trials" in out
    assert _cli("studies", "--storage", study.url, "--json") == 0
    doc = json.loads(capsys.readouterr().out)
    (row,) = doc["studies"]
    assert row["study"] == "s" and row["trials"] >= row["measured"] > 0 and row["best"] > 0
    assert row["simulated"] is True and row["best_unit"] == "ms"


def test_cli_report(study, capsys):
    out_dir = study.tmp / "cli_report"
    assert _cli("report", "--study", "s", "--storage", study.url, "-o", str(out_dir)) == 0
    text = capsys.readouterr().out
    assert "SIMULATED" in text and "perfetto" in text
    assert (out_dir / "timeline.png").is_file() and (out_dir / "trace.json").is_file()


def test_cli_trace(study, capsys):
    with Store(study.url) as store:
        plan = export_plan(store, "s")
    path = plan.save(study.tmp / "trace_plan.json")
    out = study.tmp / "trace.json"
    assert _cli("trace", str(path), "-o", str(out)) == 0
    assert "re-measured" not in capsys.readouterr().out
    _check_trace(json.loads(out.read_text()))
    # a plan without timeline and segment times is re-measured on the simulated backend
    plan.measured.pop("timeline")
    plan.measured.pop("segment_times_ms")
    bare = plan.save(study.tmp / "bare_plan.json")
    assert _cli("trace", str(bare), "-o", str(out)) == 0
    text = capsys.readouterr().out
    assert "re-measured" in text and "SIMULATED" in text
    doc = json.loads(out.read_text())
    _check_trace(doc)
    assert doc["otherData"]["remeasured"] is True and doc["otherData"]["simulated"] is True
    assert load(bare).timeline == []


def test_cli_errors(study, tmp_path):
    with pytest.raises(StoreError, match="does not exist"):
        _cli("studies", "--storage", str(tmp_path / "none.db"))
    with pytest.raises(ConfigError, match="not valid JSON"):
        bad = tmp_path / "bad.json"
        bad.write_text("{")
        _cli("trace", str(bad), "-o", str(tmp_path / "t.json"))


def test_timeline_colours_do_not_repeat_within_16_frames(tmp_path, monkeypatch):
    """The frame palette once had 10 colours, so frames 0 and 10 looked the same."""
    from matplotlib.colors import to_hex

    from placetune.report import plots

    figs = []
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path, dpi: (figs.append(fig), real_save(fig, path, dpi))[1])
    with placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", frames_in_flight=16, study="f16") as ev:
        m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}))
    frames = sorted({e["frame"] for e in m.timeline})
    assert len(frames) >= 16
    plot_timeline(m, tmp_path / "t.png", devices=("GPU", "DLA0", "DLA1"))
    colours = {to_hex(c) for coll in figs[0].axes[0].collections for c in coll.get_facecolor()}
    assert len(colours) >= 16


def test_report_titles_use_the_studys_objective(tmp_path, monkeypatch):
    """placement.png and the timeline once showed latency even for a throughput study."""
    from placetune.report import plots

    titles = {}
    real_title = plots._title
    monkeypatch.setattr(plots, "_title", lambda fig, text, sim, sub="": (titles.setdefault(text.split(":")[0], text),
                                                                        real_title(fig, text, sim, sub))[1])
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=url,
                             study="tp", frames_in_flight=2) as ev:
        ev.baselines()
        ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}))
    with Store(url) as store:
        write_report(store, "tp", tmp_path / "r")
    placement = titles["best plan"]
    timeline = next(t for k, t in titles.items() if k.startswith("schedule of the best plan"))
    for text in (placement, timeline):
        assert "throughput" in text and "fps" in text and "latency" not in text, text
    # the simulated timeline is the pipeline filling, not the steady state the throughput is of: said
    assert "its first 2 frames from an empty pipeline, 2 in flight" in timeline, timeline


def test_progress_axes_say_what_is_plotted_with_its_unit(tmp_path, monkeypatch):
    """A gpu_time study's progress.png read 'best-so-far gpu_time' with no unit; the x axis spoke of
    'requests'."""
    from placetune.report import plots

    url = f"sqlite:///{tmp_path}/g.db"
    ev = placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", objective="gpu_time", store=url, study="g")
    ev.baselines()
    ev.close()
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path, dpi: figures.append(fig) or path)
    with Store(url) as store:
        plots.plot_progress(store, "g", tmp_path / "progress.png")
    ax = figures[0].axes[0]
    assert ax.get_ylabel() == "best so far: GPU busy time per frame (ms)"
    assert ax.get_xlabel().startswith("trial of the study, as placetune tune counts it")
    assert "requests" not in ax.get_xlabel()


def test_progress_draws_each_agent_at_the_trials_the_terminal_counts(tmp_path, monkeypatch):
    """progress.png counted each agent's evaluations from 1 while ``placetune tune`` counts the study's
    trials, baselines included: the terminal's "converged at trial 4" was the agent's first evaluation,
    drawn at x = 1. Each agent's evaluations now lie at the study's trials, the axis saying so."""
    from search import Budget, get_agent

    from placetune.report import plots
    from placetune.report.progress_data import progress_lines

    url = f"sqlite:///{tmp_path}/p.db"
    ev = placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=url,
                             study="p", agent="random")
    ev.baselines()
    get_agent("random", seed=0).run(ev, Budget(evaluations=5))
    ev.close()
    with Store(url) as store:
        n = store.study("p").n_requests  # what "resuming: N of M trials already done" prints
        asked = [r.agent for r in store.requests("p")]
        lines = {line.agent: line for line in progress_lines(store, "p", "throughput", "maximize")}
        figures = []
        monkeypatch.setattr(plots, "_save", lambda fig, path, dpi: figures.append(fig) or path)
        plots.plot_progress(store, "p", tmp_path / "progress.png")
    base, agent = lines["baseline"], lines["random"]
    assert base.trials == tuple(range(1, asked.count("baseline") + 1)), base
    assert agent.trials == tuple(range(len(base.trials) + 1, n + 1)) and len(agent.trials) == 5, agent
    assert agent.best == tuple(max(v for v in agent.values[:i + 1] if v is not None) for i in range(5))
    ax = figures[0].axes[0]
    drawn = {line.get_label(): list(line.get_xdata()) for line in ax.get_lines()}
    assert drawn[f"random: its own best so far (5 evaluations, {agent.span()})"] == list(agent.trials), drawn
    assert agent.span() == f"trials {len(base.trials) + 1}-{n}"


def test_report_names_the_best_plan_by_the_trial_optuna_dashboard_shows(tmp_path, monkeypatch):
    """The plots named the best plan by the store's measurement id ("measurement 37"), a number that counts
    over every study of the database and that optuna-dashboard, ``optuna trials`` and the run's lines never
    show: they name the Optuna trial. A second study in the database makes the two numbers differ."""
    from placetune.plan.export import optuna_trial_number
    from placetune.report import plots
    from placetune.tuning.optuna_study import OptunaStudy

    texts: list[str] = []
    real_save = plots._save
    monkeypatch.setattr(plots, "_save", lambda fig, path, dpi: (
        texts.extend(t.get_text() for t in fig.findobj(plots.matplotlib_text.Text)), real_save(fig, path, dpi))[1])
    url = f"sqlite:///{tmp_path}/pt.db"
    for name in ("first", "second"):
        with placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=url,
                                 study=name) as ev:
            OptunaStudy(ev, "layer").attach()
            ev.baselines()
            ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}))
    with Store(url) as store:
        plan = export_plan(store, "second")
        mid = plan.source["measurement_id"]
        number = optuna_trial_number(store, "second", mid)
        assert number is not None and number != mid  # the case where the two numbers part
        write_report(store, "second", tmp_path / "r")
    shown = " ".join(" ".join(t.split()) for t in texts)
    assert f"measurement {mid}" not in shown
    assert shown.count(f"Optuna trial {number}") >= 3, shown  # placement, timeline, Pareto legend


def test_the_pareto_legend_covers_no_point_or_line(tmp_path, monkeypatch):
    """With two points on the front the legend sat on the front's line across the top of the axes ("best"
    found no free corner): it now stands beside the axes, as the placement and timeline plots' legends do."""
    from placetune.report import plots

    boxes = []
    real_save = plots._save

    def save(fig, path, dpi):
        out = real_save(fig, path, dpi)
        ax = fig.axes[0]
        renderer = fig._get_renderer()
        boxes.append((ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)))
        return out

    monkeypatch.setattr(plots, "_save", save)
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="engine", objective="latency", store=url,
                             study="p") as ev:
        ev.baselines()
    with Store(url) as store:
        assert plots.plot_pareto(store, "p", tmp_path / "pareto.png") is not None
    legend, axes = boxes[-1]
    assert legend.x0 >= axes.x1 - 1, (legend, axes)  # right of the plotting area, not on it


# a YOLOv8n throughput study of 14 trials on the simulated AGX Orin (fps, mJ): all-GPU, all-DLA0, the
# DLA0|DLA1 split, then the search's plans near 1,000 fps
_YOLO_POINTS = [(819.3, 45.16), (305.8, 56.26), (498.8, 48.17), (917.5, 41.95), (998.9, 40.96), (999.1, 40.6),
                (997.6, 40.45), (1005.2, 40.53), (1006.6, 40.69), (1007.5, 40.62), (1009.2, 40.34),
                (1012.2, 40.49)]


def test_the_pareto_plot_zooms_on_the_front_past_far_outliers():
    """The all-DLA plans (306 and 499 fps) squeezed the front, all-GPU and the best plan into the
    bottom-right corner: the view now spans those, and the outliers lie beyond its axes."""
    from placetune.report.pareto_view import pareto_view

    front = pareto_front(_YOLO_POINTS, ("maximize", "minimize"))
    focus = sorted(set(front) | {0, len(_YOLO_POINTS) - 1})  # the front, all-GPU, the best plan
    xlim, ylim = pareto_view(_YOLO_POINTS, focus)
    assert xlim is not None and ylim is not None
    assert 498.8 < xlim[0] < 819.3 and xlim[1] > 1012.2  # all-GPU to the best, not the all-DLA plans
    assert 40.34 > ylim[0] and 45.16 < ylim[1] < 48.17
    assert pareto_view(_YOLO_POINTS, [11]) == (None, None)  # one point to show: no zoom, every point shown
    assert pareto_view([(1, 1), (2, 2), (3, 3)], [0, 2]) == (None, None)  # nothing squeezed: matplotlib's own


def test_the_pareto_plot_draws_every_measurement_and_says_which_lie_beyond_its_axes(tmp_path, monkeypatch):
    from placetune.report import plots

    drawn = []
    real_save = plots._save

    def save(fig, path, dpi):
        ax = fig.axes[0]
        drawn.append((ax, [t.get_text() for t in ax.get_legend().get_texts()]))
        return real_save(fig, path, dpi)

    monkeypatch.setattr(plots, "_save", save)
    monkeypatch.setattr(plots, "pareto_view", lambda pts, focus: ((800.0, 1100.0), None))  # a zoomed view
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=url,
                             study="p") as ev:
        ev.baselines()
    with Store(url) as store:
        n = sum(1 for r in store.measurements("p") if r.measurement.ok)
        assert plots.plot_pareto(store, "p", tmp_path / "pareto.png") is not None
    ax, legend = drawn[-1]
    beyond = [t for t in legend if "beyond the axes" in t]
    assert beyond and "throughput" in beyond[0] and "energy" in beyond[0], legend
    k = int(beyond[0].split()[0])
    inside = sum(len(c.get_offsets()) for c in ax.collections if c.get_label().startswith("ok measurements"))
    edge = sum(len(c.get_offsets()) for c in ax.collections if c.get_label() == "_beyond the axes")
    assert k == edge >= 1 and ax.get_xlim() == (800.0, 1100.0)
    assert inside + edge == n  # every measurement is drawn: inside the axes, or at their edge


def test_progress_legend_says_each_line_is_its_agents_own_best(tmp_path, monkeypatch):
    """The default tune's progress.png drew guided's line from its first pick (1,757 fps) under the baselines'
    (2,346 fps) on a plot titled best-so-far: read as the best falling. Each line is its agent's own best, and
    the legend now says so."""
    from search import Budget, get_agent

    from placetune.report import plots

    url = f"sqlite:///{tmp_path}/o.db"
    ev = placetune.Evaluator("seed-block", "orin-agx", mode="pipeline", objective="throughput", store=url,
                             study="o", agent="random")
    ev.baselines()
    get_agent("random", seed=0).run(ev, Budget(evaluations=3))
    ev.close()
    figures = []
    monkeypatch.setattr(plots, "_save", lambda fig, path, dpi: figures.append(fig) or path)
    with Store(url) as store:
        plots.plot_progress(store, "o", tmp_path / "progress.png")
    texts = [t.get_text() for t in figures[0].axes[0].get_legend().get_texts()]
    assert any(t.startswith("random: its own best so far (3 evaluations") for t in texts), texts
    assert any(t.startswith("baseline: its own best so far (") for t in texts), texts
