"""What a new user trips on in the first hour: an option the README names that the command lacked
(``tune --trt-version``), outputs named ``-`` that became files called ``-`` (``calibrate -o -``,
``zoo export -o -``), a study name that hid its plan file (``--study .``), a report that drew a
relabelled study's plots without their SIMULATED mark, and a live bar longer than the terminal (each
redraw then left a wrapped copy on the screen). Each case failed before its fix."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from placetune.cli.main import main
from placetune.errors import ConfigError, StoreError
from placetune.tuning.objectives import get_objective
from placetune.tuning.progress import Progress
from tests.test_hostile_round4 import _copy, make_small_db


@pytest.fixture(scope="module")
def small_db(tmp_path_factory):
    return make_small_db(tmp_path_factory.mktemp("db"))


def test_tune_takes_trt_version_as_the_readme_says(tmp_path, monkeypatch, capsys):
    """The README and ``placetune build``'s note say "tune with --trt-version"; tune refused the option (exit 2)."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--trt-version", "10.3",
                 "--study", "t"]) == 0
    out = capsys.readouterr().out
    assert "TensorRT 10.3 DLA rules" in _what_will_run(out)
    from placetune.store.store import Store

    with Store("sqlite:///placetune.db") as store:
        assert store.study("t").settings["trt_version"] == "10.3"


def test_tune_refuses_a_trt_version_without_dla_rules(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "--model", "seed-block", "--trials", "3", "--trt-version", "99"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert "trt_version must be a TensorRT version with DLA rules" in err
    assert not (tmp_path / "placetune.db").exists()


def test_calibrate_to_standard_output(small_db, tmp_path, monkeypatch, capsys):
    """``calibrate -o -`` wrote a file named ``-``; as ``export -o -`` it now writes the profile to standard
    output and the fit's table to standard error."""
    monkeypatch.chdir(tmp_path)
    db = _copy(small_db, tmp_path / "c.db")
    assert main(["calibrate", "--storage", str(db), "--study", "s", "--folds", "0", "-o", "-"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("# device profile fitted by placetune calibrate from s\n") and 'base = "orin-agx"' in out
    assert "unidentified" in err and "device profile written" not in out + err
    assert not (tmp_path / "-").exists()


def test_zoo_export_to_standard_output_is_refused(tmp_path, monkeypatch, capsys):
    """``zoo export resnet18 -o -`` wrote a 45 MB file named ``-``."""
    monkeypatch.chdir(tmp_path)
    code = main(["zoo", "export", "resnet18", "-o", "-"])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert "give its name (e.g. -o resnet18.onnx), not - (standard output)" in err
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("study", [".", ".hidden"])
def test_a_study_name_that_would_hide_its_plan_is_refused(study, tmp_path, monkeypatch, capsys):
    """``--study .`` wrote its plan to ``..plan.json``, a hidden file the user would never find."""
    monkeypatch.chdir(tmp_path)
    code = main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--study", study])
    err = capsys.readouterr().err
    assert code == ConfigError.exit_code and err.count("\n") == 1, err
    assert f"would be '{study}.plan.json', a hidden file; give the plan file with --export PATH" in err
    assert not list(tmp_path.glob(".*plan.json"))
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--study", study,
                 "--export", "p.json"]) == 0
    assert (tmp_path / "p.json").is_file()


def test_report_of_a_relabelled_study_writes_nothing(small_db, tmp_path, capsys):
    """A study whose rows were edited to claim hardware got its progress plot drawn without the SIMULATED
    mark before the report stopped; export refuses such a study, and the report now does so first."""
    db = _copy(small_db, tmp_path / "t.db", "update pt_studies set backend = 'tensorrt', simulated = 0; "
                                            "update pt_measurements set simulated = 0;")
    code = main(["report", "--storage", str(db), "--study", "s", "-o", str(tmp_path / "rep")])
    err = capsys.readouterr().err
    assert code == StoreError.exit_code and err.count("\n") == 1, err
    assert "study 's' is marked as measured on hardware (backend 'tensorrt'), but its measurement " in err
    assert not (tmp_path / "rep").exists()


@pytest.mark.parametrize("columns", [40, 80, 120])
def test_the_live_bar_fits_the_terminal(columns):
    """The bar's line was about 220 characters: on an 80-column terminal it wrapped, and ``\\r`` returns to
    the start of the last row only, so every redraw left a wrapped copy behind."""
    out = io.StringIO()
    p = Progress(out, tty=True, total=300, done=0, objective=get_objective("throughput"), baseline=None,
                 stops_early="it stops once settled", columns=columns)
    p.best, p.base, p.done, p.device_s, p.device_n, p.cv_error = 3399.3, 2346.1, 10, 1277.0, 10, 0.0
    p.failures = 2
    p._draw()
    line = out.getvalue()
    assert line.startswith("\r[") and len(line) - 1 <= columns - 1, (len(line), line)
    assert "10/300" in line
    if columns >= 80:
        assert "best 3399 fps (1.45x faster than all-GPU)" in line
    if columns >= 120:
        assert "failures 2" in line
    wide = io.StringIO()
    p.out, p.columns = wide, 400
    p._draw()
    assert "cache hits 0" in wide.getvalue() and "device 0.4 h" in wide.getvalue()


def test_the_plan_folder_line_names_runtime_as_a_folder(small_db, tmp_path, capsys):
    """``export --format trtexec`` listed the runtime's 13 modules as if they lay beside build.sh; they are
    in ``runtime/``."""
    db = _copy(small_db, tmp_path / "f.db")
    assert main(["export", "--storage", str(db), "--study", "s", "--format", "trtexec", "-o",
                 str(tmp_path / "deploy")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("wrote plan folder"))
    n = len([p for p in (tmp_path / "deploy" / "runtime").iterdir() if not p.name.startswith(".")])
    assert line.endswith(f"plan.json, README.txt, runtime/ ({n} files)"), line
    assert "worker_" not in line and "placetune_runtime.py" not in line


def test_the_next_commands_after_a_tune_are_one_a_line():
    from placetune.tuning.verdict import next_steps

    lines = next_steps("sqlite:///placetune.db", "s").splitlines()
    assert lines == ["next: placetune export --study s --format trtexec -o deploy   (build.sh and the engines' ONNX, "
                     "for the Jetson)", "      placetune report --study s -o report   (plots)"]


ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_study_file_the_docs_name_exists_and_the_readme_lists_every_one():
    """docs/fleet.md ran ``placetune tune studies/resnet50-orin.toml``, a file that does not exist, and the
    README's list of study files left out four of the ten."""
    named = {(doc.name, m) for doc in DOCS for m in re.findall(r"studies/([\w.-]+\.toml)", doc.read_text())}
    missing = sorted((doc, name) for doc, name in named if not (ROOT / "studies" / name).is_file())
    assert not missing, missing
    readme = (ROOT / "README.md").read_text()
    unlisted = [p.name for p in sorted((ROOT / "studies").glob("*.toml")) if f"`{p.name}`" not in readme]
    assert not unlisted, unlisted


def _help(command: list[str], capsys) -> str:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    return capsys.readouterr().out


def test_every_option_the_docs_give_a_command_is_one_it_takes(capsys):
    """The README told to change tune's DLA rules with ``--trt-version``, which tune did not take. Every
    ``placetune CMD ... --option`` the README and docs/ show must be an option of CMD."""
    commands = ["tune", "export", "build", "report", "trace", "check", "measure", "studies", "doctor", "selftest",
                "calibrate"]
    helps = {c: _help([c], capsys) for c in commands}
    helps["zoo export"] = _help(["zoo", "export"], capsys)
    wrong = []
    for doc in DOCS:
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            for m in re.finditer(r"placetune (zoo export|[a-z]+)\b([^`#;&|\n]*)", line):
                if m.group(1) not in helps:
                    continue
                for opt in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]+", m.group(2)):
                    if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", helps[m.group(1)]):
                        wrong.append(f"{doc.name}:{n}: placetune {m.group(1)} {opt}")
    assert not wrong, wrong
    assert "--trt-version" in helps["tune"]


def test_the_top_level_help_says_where_to_start(capsys):
    """``placetune --help`` listed twelve commands with ``tune``, the main job, last, and no first step."""
    text = _help([], capsys)
    start = text[text.index("start here:"):]
    assert "placetune tune " in start and "placetune export -o plan.json" in start
    assert max(len(line) for line in start.splitlines()) < 80


def test_the_selftest_header_says_unknown_not_none():
    """Off a Jetson the self-test's first line read ``L4T None, JetPack None``."""
    from placetune.cli.selftest import format_report

    head = format_report({"python": "3.11.7", "machine": "x86_64", "l4t": None, "jetpack": None, "module": None,
                          "checks": [], "all_ok": False}).splitlines()[0]
    assert head == "placetune selftest: python 3.11.7 (x86_64), L4T unknown, JetPack unknown, unknown module"


def test_zoo_list_wraps_its_descriptions_on_a_terminal():
    """``zoo list`` printed lines of up to 260 characters; on a terminal each row ran over several lines
    into the next name's column. Piped, each network stays on one line (grep-able)."""
    from placetune.cli.terminal import table

    rows = [("alexnet", 1, "BVLC Caffe AlexNet on 3x227x227 (LRN, grouped conv2/4/5), ~0.72 GMACs; softmax=False "
                           "gives seed 003's alexnet_noprob"), ("vgg11", 1, "torchvision VGG-11")]
    text = table(rows, ("name", "batch", "description"), width=80)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 79 and len(lines) == 5, text
    assert lines[2].startswith("alexnet  1      BVLC Caffe") and lines[3] == " " * 16 + "GMACs; softmax=False gives seed 003's alexnet_noprob"
    assert lines[4] == "vgg11    1      torchvision VGG-11"
    assert table(rows, ("name", "batch", "description")).count("\n") == 3


def test_what_will_run_names_the_granularity(tmp_path, monkeypatch, capsys):
    """The first line said ``agent guided (its default granularity)``: which one was left to the docs."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--trials", "3"]) == 0
    assert "agent guided (granularity stages), budget 3 trials" in _what_will_run(capsys.readouterr().out)
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--study", "r"]) == 0
    assert "agent random (granularity fusion), budget 3 trials" in _what_will_run(capsys.readouterr().out)


def _what_will_run(out: str) -> str:
    """The ``what will run:`` line and the indented lines under it, as one string."""
    lines = out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("what will run:"))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("  ")), len(lines))
    return "\n".join(lines[start:end])


def test_what_will_run_fits_a_terminal_of_80_columns_and_keeps_every_fact(tmp_path, monkeypatch, capsys):
    """The first thing ``placetune tune`` printed was one line of about 250 characters."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--trials", "2", "--agent", "random", "--timeout", "1h"]) == 0
    block = _what_will_run(capsys.readouterr().out)
    assert 2 <= block.count("\n") <= 3 and max(map(len, block.splitlines())) <= 79, block
    for fact in ("model resnet50", "batch 2", "int8", "objective throughput", "platform orin-agx (SIMULATED Jetson)",
                 "power mode MAXN", "backend simulate", "pipeline (4 frames in flight) mode", "TensorRT 8.6 DLA rules",
                 "agent random (granularity fusion)", "budget 2 trials / 1h"):
        assert fact in block, (fact, block)


def test_the_embedded_default_note_follows_the_checks_of_the_options(tmp_path, monkeypatch, capsys):
    """"running the embedded default" was printed before ``--agent foo``'s error, and told to read --help to
    a user who had given options."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--agent", "foo"]) == 4
    out, err = capsys.readouterr()
    assert out == "" and "unknown agent 'foo'" in err
    assert main(["tune", "--trials", "2", "--agent", "random"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "no study file or model given: running the embedded default with the options given"
    assert lines[1].startswith("what will run: model resnet50")
    assert main(["tune", "--model", "resnet50", "--trials", "2", "--agent", "random"]) == 0
    assert "embedded default" not in capsys.readouterr().out


def test_an_unknown_layer_name_gets_the_models_closest_one(tmp_path, capsys):
    """A placement file naming ``conv1`` (the torch module) got only "does not have: 'conv1'"; the
    layer is ``/conv1/Conv``."""
    placement = tmp_path / "p.json"
    placement.write_text('{"default": "GPU", "layers": {"conv1": "DLA0"}}')
    code = main(["measure", "seed-block", "--placement", str(placement)])
    err = capsys.readouterr().err
    assert code == 5 and err.count("\n") == 1, err
    assert "does not have: 'conv1'; did you mean '/conv1/Conv'? (placetune check MODEL lists its layers" in err


# ----------------------------------------------------------------- an 80-column terminal
def _widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_the_check_table_fits_80_columns_and_wide_keeps_everything(capsys, monkeypatch):
    """``check resnet50``'s table was 282 columns wide (a 168-character reason in its last column, 154 for
    every other row): at 80 columns each row wrapped over two to four lines. In a log (not a terminal) it is
    80 columns, a refusal's reason a short phrase under its layer; ``--wide`` keeps the whole table. (The
    table is on request, ``--layers``: the default output is the summary, see tests/test_check_summary.py.)"""
    monkeypatch.setenv("COLUMNS", "200")  # not a terminal: the log's stable width, whatever COLUMNS says
    assert main(["check", "resnet50", "--layers"]) == 0
    out = capsys.readouterr().out
    assert _widest(out) < 80, out
    lines = out.splitlines()
    row = next(i for i, x in enumerate(lines) if x.startswith("/avgpool/GlobalAveragePool"))
    assert lines[row].split()[-1] == "no"
    assert lines[row + 1] == "    GlobalAveragePool becomes a TensorRT Reduce layer, which has no DLA support"
    assert "jetson_dla_tutorial" not in out  # where the rule comes from: in --wide and --json
    assert main(["check", "resnet50", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "(ran on GPU in the jetson_dla_tutorial log); an AveragePool with window <= 8 is DLA-eligible" in wide
    assert _widest(wide) > 150


def test_the_check_table_cuts_long_layer_names_in_the_middle():
    from placetune.cli.check import check_table, short_reason

    name = "/model.22/dfl/conv/Conv_with_a_very_long_scope/model.22/cv3.2/cv3.2.0/conv/Conv"
    layer = {"name": name, "op_type": "Conv", "input_shape": [1, 64, 80, 80],
             "output_shape": [1, 64, 80, 80],
             "dla": False, "reason": "Div on DLA needs TensorRT >= 8.6.12 (DRIVE OS); not in TensorRT 8.6.0"}
    text = check_table([layer], 60)
    assert _widest(text) < 60, text
    first = text.splitlines()[2]
    shown = first.split()[0]
    assert "..." in shown and name.startswith(shown.split("...")[0]) and name.endswith(shown.split("...")[1])
    assert text.splitlines()[3] == "    Div on DLA needs TensorRT >= 8.6.12 (DRIVE OS)"
    assert short_reason("Slice runs FP16 only on DLA (TensorRT 8.x DLA guide; got int8)") == \
        "Slice runs FP16 only on DLA"
    assert check_table([layer], None).splitlines()[2].endswith(layer["reason"])  # --wide: every word


def test_wrap_keeps_commands_copyable_and_messages_whole_in_a_log():
    from placetune.tuning.verdict import next_steps
    from placetune.wording import wrap

    study = "resnet50-orin-agx-pipeline-int8-throughput-simulate-d08948"
    text = next_steps("sqlite:///placetune.db", study)
    assert wrap(text, None) == text  # not a terminal: one message a line, for grep and scripts
    lines = wrap(text, 80).splitlines()
    assert _widest("\n".join(lines)) < 80
    assert lines[:4] == ["next: placetune export \\", f"        --study {study} \\",
                         "        --format trtexec -o deploy", "        (build.sh and the engines' ONNX, for the Jetson)"]
    # the command, its continuation backslashes joined, is the command the line gave
    assert " ".join(x.rstrip(" \\").strip() for x in lines[:3]) == text.splitlines()[0].split("   (")[0]
    prose = wrap("stopped after convergence: " + "word " * 40, 80).splitlines()
    assert _widest("\n".join(prose)) < 80 and all(x.startswith("  ") for x in prose[1:])


def _in_a_terminal(argv: list[str], cwd: Path, columns: int = 80) -> str:
    """What ``placetune ARGV`` shows in a terminal of ``columns`` columns (a pseudo-terminal)."""
    import fcntl
    import os
    import pty
    import struct
    import subprocess
    import sys
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    proc = subprocess.Popen([sys.executable, "-m", "placetune.cli", *argv], cwd=cwd, stdin=slave, stdout=slave,
                            stderr=slave, env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=300)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")


def test_a_tune_in_an_80_column_terminal_ends_in_lines_that_fit(tmp_path):
    """In an 80-column terminal the tune's stop line (278 columns), its convergence line (128) and its
    ``next:`` lines (169) wrapped at any character; they are wrapped at word boundaries, the commands
    with the shell's ``\\`` continuation so that they can still be copied."""
    out = _in_a_terminal(["tune", "--trials", "20"], tmp_path)
    final = [x for x in out.split("\n") if "\r" not in x]  # the live bar redraws its line with \r
    assert final and _widest("\n".join(final)) < 80, out
    text = "\n".join(final)
    assert "stopped after convergence:" in text and "next: placetune export \\" in text
    assert re.search(r"^converged at trial \d+ of \d+: the best stopped improving there", text, re.M), text


def test_a_tune_in_a_terminal_says_when_and_why_it_converged_as_it_happens(tmp_path):
    """The log's ``converged at trial N: no gain over 1% in the 10 trials after it; ...`` line was printed
    only when the output was no terminal: in a terminal the live bar's few words said it, and the next
    redraw of the bar wiped them. The line is now printed above the bar, where it stays, and the bar
    goes on below it."""
    out = _in_a_terminal(["tune", "--trials", "20", "--no-stop-when-settled"], tmp_path)
    shown = [x.rsplit("\r", 1)[-1].rstrip() for x in out.split("\n")]  # what each row holds once redrawn
    said = [i for i, x in enumerate(shown) if re.match(r"converged at trial \d+: no gain over 1% in the", x)]
    assert len(said) == 1, out
    assert "the run goes on" in " ".join(" ".join(shown[said[0]:said[0] + 2]).split()), out
    assert _widest("\n".join(shown)) < 80, out
    summary = next(i for i, x in enumerate(shown) if x.startswith("summary"))
    assert any(re.match(r"\[[#-]+\] 20/20 ", x) for x in shown[said[0] + 1:summary]), out  # the bar went on below


def test_measure_studies_export_and_report_fit_an_80_column_terminal_and_logs_are_unchanged(tmp_path, capsys,
                                                                                            monkeypatch):
    """After a short tune, `measure` (a GPU-fallback reason of 198 columns), `studies` (a table 139 wide),
    `export` (its summary and `wrote plan folder` line, 211) and `report` (96) ran past an 80-column terminal;
    they are wrapped at word boundaries there, a study's name never cut, and unchanged in a log (not a terminal)."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--trials", "10", "--agent", "random", "--storage", "x.db", "--study", "s80"]) == 0
    commands = [["measure", "resnet50", "--placement", "all-dla"], ["studies", "--storage", "x.db"],
                ["export", "--storage", "x.db", "--study", "s80", "--format", "trtexec", "-o", "deploy"],
                ["report", "--storage", "x.db", "--study", "s80", "-o", "rep"]]
    capsys.readouterr()
    logged = []
    for argv in commands:
        assert main(argv) == 0
        logged.append(capsys.readouterr().out)
    assert all(_widest(text) >= 80 for text in logged[:3]), logged  # a log keeps one message a line
    for argv, log in zip(commands, logged):
        shown = _in_a_terminal(argv, tmp_path)
        assert _widest(shown) < 80, shown
        if argv[0] == "studies":  # the study's name, whole, on a line above its figures
            assert shown.splitlines()[2:] == ["study s80:", log.splitlines()[2].split(None, 1)[1]], (shown, log)
        else:
            assert " ".join(shown.split()) == " ".join(log.split()), (shown, log)  # the same words


def test_the_convergence_line_speaks_plainly():
    """It read "converged at trial 5 of 15 (no gain over 1% in the 10 trials after it); the 10 trials after
    it bought nothing": two "trials after it" of different meanings, and a gain "bought"."""
    from placetune.tuning.convergence import Convergence

    c = Convergence(trials=300, patience=30, min_gain=0.01, trial=37, best_then=2345.0, best_now=2355.0)
    assert c.sentence("fps") == ("converged at trial 37 of 300: the best stopped improving there (30 trials in a row "
                                 "gained under 1%); the 263 trials after it improved the best by 0.4% "
                                 "(2,345 -> 2,355 fps)")


def test_the_help_lists_commands_in_the_order_a_user_needs_them_one_line_each(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    text = _help([], capsys)
    listed = re.findall(r"^    (\w+) {2,}\S", text, re.M)
    assert listed[:5] == ["tune", "check", "export", "report", "build"], listed
    assert len(listed) == 12
    block = text[text.index("COMMAND\n"):text.index("\noptions:")]
    assert len(block.splitlines()) == 13, block  # one line a command
    assert _widest(text) < 80


def test_tune_help_groups_its_options_essentials_first(capsys, monkeypatch):
    """``tune --help`` opened with --trust-study-file and ran to 130 lines of one list, some 128 columns wide.
    ``--help-all`` holds every option, grouped, the essentials first (``--help`` the common ones)."""
    from placetune.cli.main import build_parser

    monkeypatch.setenv("COLUMNS", "80")
    with pytest.raises(SystemExit):
        main(["tune", "--help-all"])
    text = capsys.readouterr().out
    assert _widest(text) < 80
    heads = re.findall(r"^(\S[^\n]*):$", text, re.M)
    assert heads[:6] == ["options", "what to tune, and where the results go", "the model and how it runs",
                         "the search", "on a Jetson (--backend tensorrt or trtexec)", "advanced"], heads
    order = [text.index(f"  {o} ") for o in ("--model", "--platform", "--objective", "--trials", "--backend",
                                              "--storage", "--agent", "--worker-python", "--trust-study-file")]
    assert order == sorted(order)
    tune = build_parser()._subparsers._group_actions[0].choices["tune"]  # noqa: SLF001
    options = {o for a in tune._actions for o in a.option_strings}  # noqa: SLF001
    assert all(o in text for o in options), sorted(o for o in options if o not in text)
    assert len(options) == 36  # every option kept (and the STUDY.toml argument), --help-all among them
