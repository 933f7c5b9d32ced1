"""What the command line prints to a person: counts in the right number, ratios in words, a summary
with the simulated device time, a resumed run's best, the only study taken by default, the Optuna
trial in build.sh, the agents in ``tune --help``."""

from __future__ import annotations

import io
import re
import sqlite3
from pathlib import Path

import pytest

from placetune.cli.main import main
from placetune.tuning.studyfile import TuneConfig
from placetune.tuning.tune import Tuner
from placetune.wording import plural, versus

#: count nouns placetune prints; "1 <noun>s" after a count of one is a grammar slip
NOUNS = ("trial", "frame", "evaluation", "cache hit", "failure", "layer", "engine", "file", "event", "measurement",
         "build", "segment", "DLA island", "loadable", "network", "study", "studie", "boundar")
ONE_PLURAL = re.compile(r"(?<![\d.,])\b1 (?:%s)(?:s|ies)\b" % "|".join(re.escape(n) for n in NOUNS))
#: a bare factor such as "0.59x" or "1.52x" with no word saying which way it goes
BARE_RATIO = re.compile(r"(?<![\w.])\d+(?:\.\d+)?x(?![\w.])(?! (?:faster|slower|less|more))")


def _run(capsys, *argv: str) -> str:
    code = main(list(argv))
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out + out.err


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    """One small study run, resumed, exported, reported and traced: every output a person reads."""
    tmp = tmp_path_factory.mktemp("cli")
    url = f"sqlite:///{tmp / 'pt.db'}"
    capsys = _Capture()
    outs = {}
    with capsys:
        base = ["tune", "--model", "seed-block", "--mode", "pipeline", "--objective", "latency", "--precision", "int8",
                "--storage", url, "--export", str(tmp / "plan.json")]
        outs["tune"] = _run(capsys, *base, "--trials", "1")
        outs["resume"] = _run(capsys, *base, "--trials", "6")
        outs["studies"] = _run(capsys, "studies", "--storage", url)
        study = re.search(r"^study '([^']+)'", outs["tune"], re.M).group(1)
        outs["export"] = _run(capsys, "export", "--study", study, "--storage", url, "-o", str(tmp / "p.json"))
        outs["folder"] = _run(capsys, "export", "--study", study, "--storage", url, "--format", "trtexec",
                              "-o", str(tmp / "dep"))
        outs["trace"] = _run(capsys, "trace", str(tmp / "p.json"), "-o", str(tmp / "trace.json"))
        outs["check"] = _run(capsys, "check", "seed-block", "--precision", "int8")
        outs["measure"] = _run(capsys, "measure", "seed-block", "--precision", "int8", "--placement", "all-dla")
    outs["build.sh"] = (tmp / "dep" / "build.sh").read_text()
    outs["README.txt"] = (tmp / "dep" / "README.txt").read_text()
    return tmp, url, outs


class _Capture:
    """capsys for a module-scoped fixture: stdout and stderr of main() calls."""

    def __enter__(self):
        import sys

        self._saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self._out, self._err = io.StringIO(), io.StringIO()
        return self

    def __exit__(self, *exc):
        import sys

        sys.stdout, sys.stderr = self._saved

    def readouterr(self):
        out, err = self._out.getvalue(), self._err.getvalue()
        self._out.seek(0), self._out.truncate(), self._err.seek(0), self._err.truncate()
        return type("R", (), {"out": out, "err": err})


def test_wording_helpers():
    assert [plural(n, "frame") for n in (0, 1, 2)] == ["0 frames", "1 frame", "2 frames"]
    assert plural(1, "boundary", "boundaries") == "1 boundary" and plural(3, "boundary", "boundaries") == "3 boundaries"
    assert versus(0.59, "latency") == "1.69x slower" and versus(1.518, "throughput") == "1.52x faster"
    assert versus(0.75, "energy") == "1.33x more energy" and versus(1.0, "latency") == "same"
    assert versus(None) == versus(float("nan")) == versus(0.0) == "-" and versus(25.0) == "25.0x faster"


def test_no_output_says_1_frames_or_a_count_with_s_in_parentheses(session):
    """"1 frames in flight", "1 evaluations", "1 trials", "3 engine(s)": every count agrees with its noun."""
    _, _, outs = session
    assert "(1 frame in flight)" in outs["tune"] and re.search(r"budget 1 trial( /|$)", outs["tune"], re.M)
    assert "summary (SIMULATED): 1 trial," in outs["tune"]
    for name, text in outs.items():
        assert not ONE_PLURAL.search(text), (name, ONE_PLURAL.search(text).group(0))
        assert not re.search(r"\d+ [\w-]+\(s\)", text), (name, re.search(r"\d+ [\w-]+\(s\)", text).group(0))


def test_ratios_read_as_faster_or_slower_never_as_a_bare_factor(session):
    """"latency 0.59x" meant 1.7x slower but read as 59 % of the latency."""
    _, _, outs = session
    for name, text in outs.items():
        assert not BARE_RATIO.search(text), (name, BARE_RATIO.search(text).group(0))
    rows = {x.split("  ")[0]: x for x in outs["resume"].splitlines() if x.startswith(("all-", "best found"))}
    assert rows["all-GPU"].endswith("baseline")
    assert re.search(r"\d\.\d\dx slower$", rows["all-DLA0 (+fallback)"]), rows
    head = next(x for x in outs["export"].splitlines() if x.startswith("vs all-GPU:"))
    assert re.match(r"vs all-GPU: (same|\d+\.\d+x (faster|slower)) \(latency, the study's objective\); "
                    r"throughput (same|\d+\.\d+x (faster|slower)), (energy same|\d+\.\d+x (less|more) energy)$", head), head


def test_the_live_bar_says_faster_than_all_gpu(tmp_path):
    cfg = TuneConfig.embedded_default().with_overrides(model="seed-block", mode="pipeline", objective="throughput",
                                                       trials=6, storage=f"sqlite:///{tmp_path / 'pt.db'}",
                                                       export=str(tmp_path / "plan.json"))
    out = io.StringIO()
    Tuner(cfg, out=out, tty=True).run()
    bar = out.getvalue().split("\r")[-1].splitlines()[0]
    assert re.search(r"best [\d.,]+ fps \((same as all-GPU|\d+\.\d+x (faster|slower) than all-GPU)\)", bar), bar
    # the device time left is the budget's: an upper bound for a run that stops once settled (the default),
    # never "h left" as if the run would go on to its budget (the default tune stops at trial 36 of 300)
    assert re.search(r"device [\d.]+ h, at most ~[\d.]+ h more \(to the budget's end; it stops once settled\)", bar), bar


def test_the_live_bar_says_the_device_time_to_the_budgets_end():
    """A run that builds to its budget says the device time to its end as an estimate; one that may
    stop before says it is at most that; the key=value lines keep ``device_eta_s`` (to the budget's end)."""
    from placetune.tuning.objectives import get_objective
    from placetune.tuning.progress import Progress
    from placetune.tuning.tune_report import stops_early

    cfg = TuneConfig.embedded_default()
    assert stops_early(cfg) == "it stops once settled"
    assert stops_early(cfg.with_overrides(stop_when_settled=False)) == ""
    assert stops_early(cfg.with_overrides(agent="random", stop_when_converged=True, timeout=3600)) == \
        "it stops once converged or after 3600 s"
    bars = []
    for why in ("", "it stops once settled"):
        out = io.StringIO()
        p = Progress(out, tty=True, total=300, done=36, objective=get_objective("latency"), baseline=None,
                     stops_early=why)
        p.device_s, p.device_n = 3566.0, 36  # the default tune's device time at its trial 36
        p._draw()
        bars.append(out.getvalue())
    assert bars[0].endswith("device 1.0 h, ~7.3 h more to the budget's end"), bars[0]
    assert bars[1].endswith("device 1.0 h, at most ~7.3 h more (to the budget's end; it stops once settled)"), bars[1]


def test_the_summary_says_the_simulated_device_time(session):
    """The README promised the simulated device time of a run; the summary never printed it."""
    _, _, outs = session
    line = next(x for x in outs["tune"].splitlines() if x.startswith("simulated device time"))
    assert re.fullmatch(r"simulated device time \(builds and timing on a Jetson\): [\d.]+ (h|min|s) for this "
                        r"run's 1 measurement", line), line
    line = next(x for x in outs["resume"].splitlines() if x.startswith("simulated device time"))
    assert re.search(r"(for this run's \d+ measurements?|none in this run), [\d.]+ (h|min|s) for the study's "
                     r"\d+ measurements$", line), line


def test_the_summary_writes_every_count_alike(tmp_path, capsys):
    """A run of a thousand trials or more: "1,200 trials, 1,200 measured", never "1,200 trials, 1200 measured"."""
    out = _run(capsys, "tune", "--model", "resnet18", "--mode", "engine", "--agent", "random", "--granularity", "layer",
               "--trials", "1200", "--storage", f"sqlite:///{tmp_path / 'pt.db'}", "--export", str(tmp_path / "p.json"))
    line = next(x for x in out.splitlines() if x.startswith("summary"))
    assert re.match(r"summary \(SIMULATED\): 1,200 trials, 1,\d{3} measured in this run, ", line), line


def test_a_resumed_run_starts_best_from_the_stored_best(tmp_path, capsys):
    """After a resume the progress lines restarted "best" from scratch (best = the first new trial)."""
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    base = ["tune", "--model", "seed-block", "--mode", "pipeline", "--objective", "throughput", "--precision", "int8",
            "--agent", "random", "--storage", url, "--export", str(tmp_path / "plan.json")]
    _run(capsys, *base, "--trials", "12")
    with sqlite3.connect(tmp_path / "pt.db") as con:
        stored = max(v for (v,) in con.execute("SELECT throughput_fps FROM pt_measurements WHERE status = 'ok'"))
    out = _run(capsys, *base, "--trials", "14")
    lines = [x for x in out.splitlines() if x.startswith("trial=")]
    assert lines and lines[0].startswith("trial=13/14")
    best = float(re.search(r"best_throughput_fps=([\d.]+)", lines[0]).group(1))
    assert best == pytest.approx(stored, rel=1e-3)


def test_export_and_report_take_the_only_study(session, capsys, tmp_path):
    """Both demanded --study (58 characters here) when the database held exactly one."""
    tmp, url, outs = session
    export = _run(capsys, "export", "--storage", url, "-o", str(tmp_path / "only.json"))
    assert export.splitlines()[0] == outs["export"].splitlines()[0] and (tmp_path / "only.json").is_file()
    report = _run(capsys, "report", "--storage", url, "-o", str(tmp_path / "rep"))
    assert re.search(r"wrote \d+ files to ", report) and (tmp_path / "rep" / "trace.json").is_file()
    other = f"sqlite:///{tmp_path / 'two.db'}"
    for study in ("a", "b"):
        _run(capsys, "tune", "--model", "seed-block", "--trials", "1", "--study", study, "--storage", other,
             "--export", str(tmp_path / f"{study}.json"))
    assert main(["export", "--storage", other]) == 6
    err = capsys.readouterr().err
    assert err.startswith("placetune: error: --study NAME is needed:") and "holds 2 studies (a, b)" in err
    assert len(err.strip().splitlines()) == 1


def test_build_sh_names_the_optuna_trial_optuna_shows(session):
    """build.sh said "trial 1" for the measurement Optuna calls trial 2."""
    import optuna

    tmp, url, outs = session
    plan = __import__("json").loads((tmp / "dep" / "plan.json").read_text())
    study = optuna.load_study(study_name=plan["source"]["study"], storage=url)
    first = min(t.number for t in study.trials if t.user_attrs.get("measurement_id") == plan["source"]["measurement_id"])
    assert plan["source"]["trial_number"] == first
    assert f", Optuna trial {first}\n" in outs["build.sh"]
    # export's own line and the folder's README.txt named only the store's measurement id, which no Optuna
    # client shows
    assert f"measurement {plan['source']['measurement_id']}, Optuna trial {first})" in outs["export"]
    assert f"(Optuna trial {first})" in outs["README.txt"]
    assert f"measurement {plan['source']['measurement_id']}, Optuna trial {first}):" in outs["folder"]
    # the Chrome trace's metadata names it too
    trace = __import__("json").loads((tmp / "trace.json").read_text())
    assert trace["otherData"]["trial_number"] == first


def test_the_optuna_trial_number_is_found_without_loading_every_trial(tmp_path, monkeypatch):
    """Export looked the number up by loading every Optuna trial with its parameters: half of a
    2,000-trial local tune's time."""
    import optuna

    from placetune.plan.export import optuna_trial_number
    from placetune.store import Store

    url = f"sqlite:///{tmp_path / 'pt.db'}"
    assert main(["tune", "--model", "seed-block", "--agent", "random", "--trials", "5", "--storage", url,
                 "--export", str(tmp_path / "p.json")]) == 0
    study = optuna.load_study(study_name=optuna.get_all_study_names(url)[0], storage=url)
    trial = study.trials[3]

    def every_trial(*args, **kw):
        raise AssertionError("every trial loaded")

    monkeypatch.setattr(optuna.storages.RDBStorage, "get_all_trials", every_trial)
    with Store(url) as store:
        assert optuna_trial_number(store, study.study_name, trial.user_attrs["measurement_id"]) == trial.number
        assert optuna_trial_number(store, study.study_name, 10 ** 9) is None


def test_tune_help_lists_every_agent_and_granularity(capsys):
    from search import agent_names

    with pytest.raises(SystemExit):
        main(["tune", "--help-all"])
    text = capsys.readouterr().out
    listed = re.findall(r"^  (\w+) {2,}", text.split("agents (--agent):")[1].split("granularities")[0], re.M)
    assert listed == ["guided", "local", "optuna", "random", "reinforce", "exact"]
    assert sorted(listed) == agent_names()
    for g in ("stages", "fusion", "layer", "scope:N"):
        assert re.search(rf"^  {re.escape(g)} ", text, re.M), g


def test_the_deploy_readme_says_how_to_install_placetune(session):
    """It said `pip install placetune`, a package no index has."""
    _, _, outs = session
    text = outs["README.txt"]
    assert "pip install placetune" not in text and "not on a package index" in text
    assert 'pip install -e "/path/to/placetune[jetson-jp6]"' in text  # the extra of the plan's JetPack (6: TensorRT 8.6)


def test_the_deploy_example_ends_in_one_line_without_tensorrt(session):
    """examples/deploy_pipeline.py ended in a traceback where `placetune build` says one line."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("tensorrt") is not None:
        pytest.skip("TensorRT is installed here")
    tmp, url, _ = session
    example = Path(__file__).resolve().parents[1] / "examples" / "deploy_pipeline.py"
    study = re.search(r"\(study (\S+),", session[2]["export"]).group(1)
    proc = subprocess.run([sys.executable, str(example), study, "--storage", url, "-o", str(tmp / "ex")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 8 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("deploy_pipeline: error: nothing built: a plan's engines are built on the Jetson")
    assert "TensorRT cannot be used here" in proc.stderr
    assert (tmp / "ex" / "plan.json").is_file()  # step 1 works anywhere


def test_the_live_bar_leaves_no_characters_of_a_longer_line_behind():
    """The bar redraws with a carriage return: a shorter line left the end of the longer one
    on screen ("model cv error 0.0%%")."""
    from placetune.tuning.objectives import get_objective
    from placetune.tuning.progress import Progress

    out = io.StringIO()
    p = Progress(out, tty=True, total=300, done=0, objective=get_objective("latency"), baseline=None)
    p.device_s, p.device_n, p.cv_error = 36000.0, 10, 0.5  # a long line: device time and model error
    p._draw()
    p.device_n, p.cv_error = 0, None  # a shorter one
    p._draw()
    screen = ""
    for chunk in out.getvalue().split("\r")[1:]:  # what a terminal shows: each chunk overwrites from column 0
        screen = chunk + screen[len(chunk):]
    assert screen.rstrip() == out.getvalue().split("\r")[-1].rstrip() and "error" not in screen


def test_report_says_where_its_trace_is(session, capsys, tmp_path, monkeypatch):
    """report wrote report/trace.json and told to "open trace.json": a file that is not there (or is
    another trace) from the folder the command ran in."""
    tmp, url, outs = session
    monkeypatch.chdir(tmp_path)
    report = _run(capsys, "report", "--storage", url, "-o", "rep")
    line = next(x for x in report.splitlines() if x.startswith("open "))
    path = line.split()[1]
    assert path == str(Path("rep") / "trace.json") and Path(path).is_file(), line


def test_export_says_each_thing_once(session, capsys, tmp_path):
    """export printed the INT8 placeholder warning twice: in the plan's summary and again as a note."""
    tmp, url, outs = session
    folder = _run(capsys, "export", "--storage", url, "--format", "trtexec", "-o", str(tmp_path / "dep"))
    for out in (outs["export"], outs["folder"], folder):
        assert out.count("PLACEHOLDERS") == 1, out


def test_check_ends_with_the_next_step(session):
    """check's table ended without a word on what to do with it, where tune, export and doctor end
    with "next: ..."."""
    _, _, outs = session
    tune, measure = outs["check"].strip().splitlines()[-2:]  # one command a line
    assert tune.startswith("next: placetune tune --model seed-block"), tune
    assert measure.startswith("      placetune measure seed-block"), measure
    assert "--precision" not in tune + measure  # the precision asked is the default one: nothing to repeat


def test_the_headline_names_each_metric_even_when_it_is_the_same(session):
    """"vs all-GPU: same (latency, ...); throughput same, same": an energy equal to all-GPU's was a
    bare "same" (its metric is named only in "1.20x less energy")."""
    _, _, outs = session
    line = next(x for x in outs["export"].splitlines() if x.startswith("vs all-GPU:"))
    others = line.split("; ", 1)[1].split(", ")
    assert len(others) >= 2 and all(re.search(r"latency|throughput|energy|gpu_time", x) for x in others), line


def test_every_option_of_every_command_says_what_it_does():
    """`placetune tune --help` listed --platform and --mode with no word (which platforms? which
    default?), and so did a few options of measure, zoo and doctor."""
    import argparse

    from placetune.cli.main import build_parser

    bare = []

    def walk(parser, path):
        for action in parser._actions:  # noqa: SLF001 - argparse has no public walk of its actions
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
            elif action.option_strings and not getattr(action, "placetune_full_help", action.help):
                bare.append(" ".join([*path, action.option_strings[-1]]))

    walk(build_parser(), [])
    assert not bare, bare


def test_a_baseline_that_failed_shows_its_whole_reason_in_the_summary(tmp_path, capsys, monkeypatch):
    """The summary cut a failed baseline's row at 120 characters: "all-DLA0 (+fallback) infeasible: 1
    layer(s) asked on DLA cannot run there and GPU fallback is off: /prob/Softmax: " ended there, without the
    reason itself (Softmax is no DLA layer on Xavier)."""
    monkeypatch.chdir(tmp_path)  # tune exports the plan into the current folder
    study = tmp_path / "nofb.toml"
    study.write_text('[study]\nname = "nofb"\nmodel = "googlenet"\nplatform = "xavier-agx"\nmode = "engine"\n'
                     'objective = "latency"\nprecision = "fp16"\nagent = "random"\ntrials = 3\n'
                     '[settings]\ngpu_fallback = false\n')
    out = _run(capsys, "tune", str(study), "--storage", f"sqlite:///{tmp_path / 'pt.db'}")
    row = next(x for x in out.splitlines() if x.startswith("all-DLA0"))
    assert row.rstrip().endswith("Softmax not supported on Xavier DLA"), row


def test_an_fp32_tune_is_refused_as_it_has_nothing_to_place(tmp_path, monkeypatch, capsys):
    """The DLA runs fp16 and int8 only: an fp32 tune realised every placement as all-GPU and stopped after
    its 3 baselines ("3 trials" of a budget of 12) without a word on why. It is refused before a study is
    stored, as a module without a DLA is (exit 6), and says what to run instead."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--precision", "fp32", "--trials", "12"]) == 6
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert "fp32 runs on the GPU only" in err and "--precision fp16" in err and "placetune measure" in err, err
    assert not (tmp_path / "placetune.db").exists()
