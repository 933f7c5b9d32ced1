"""``placetune check`` on a detector printed its whole per-layer table by default (366 lines for yolo11n), the
summary, the problems and what to run next at its very end: a newcomer scrolled back to find them. Now the
default is the short answer (summary, problems, the layers that cannot run on a DLA counted by reason, how
to see the table, what next), ``--layers`` the table as it was, ``--json`` unchanged.

Warnings (``placetune: warning: ...``) ran past the terminal's edge while errors were wrapped; now they are
wrapped at word boundaries on a terminal and stay one line in a log, as errors do."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from placetune.cli.check import MAX_GROUPS, refusal_groups
from placetune.cli.main import main
from tests.test_first_hour_cli import _in_a_terminal, _widest
from tests.test_start_checks import _model

ROOT = Path(__file__).resolve().parents[1]


def _joined(text: str) -> str:
    return " ".join(text.split())


def test_check_of_a_detector_leads_with_its_summary_and_keeps_the_table_behind_layers(capsys):
    assert main(["check", "yolo11n"]) == 0
    short = capsys.readouterr().out
    lines = short.splitlines()
    assert len(lines) < 40, short  # (366 before: one row a layer)
    assert lines[0].startswith("yolo11n on orin-agx (int8, TensorRT 8.6 rules, power mode MAXN): 320 layers")
    assert "294 DLA-eligible" in _joined(short) and "3 DLA islands" in short
    assert "/model.0/conv/Conv" not in short  # no per-layer rows
    assert "26 layers cannot run on a DLA (they fall back to the GPU), by reason:" in short
    # an INT8 build sets FP16 too: its channel Splits and the attention Softmax stay on the DLA in FP16; the
    # head's DFL Softmax is refused for its 8400 anchors (> 8192), not for its precision
    assert "  3  Transpose, Softmax, Conv: dimension 8400 > 8192" in lines and "FP16 only" not in short
    head = lines.index("26 layers cannot run on a DLA (they fall back to the GPU), by reason:")
    counts = [int(line.split()[0]) for line in lines[head + 1:] if line[:5].strip().isdigit()]
    assert sum(counts) == 320 - 294, short  # every GPU-only layer counted once
    assert "  placetune check yolo11n --layers   (--wide: in full; --json: every field)" in lines
    assert lines[-2].startswith("next: placetune tune --model yolo11n")

    assert main(["check", "yolo11n", "--layers"]) == 0
    table = capsys.readouterr().out
    assert len(table.splitlines()) > 320 and table.startswith("layer ")
    assert "/model.0/conv/Conv" in table and "    dimension 8400 > 8192" in table.splitlines()
    assert _joined(short.split("\n26 layers")[0]) in _joined(table)  # the same summary under the table
    assert _widest(table) < 80 and _widest(short) < 80

    assert main(["check", "yolo11n", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert main(["check", "yolo11n", "--json", "--layers"]) == 0
    assert json.loads(capsys.readouterr().out) == doc  # --json: every field, whatever --layers says
    assert len(doc["layers"]) == 320 and doc["summary"]["dla_eligible"] == 294


def test_the_problems_come_before_the_reasons_and_the_table_hint(tmp_path, capsys):
    model = _model(tmp_path / "m.onnx", input_name="a,b", dynamic=True, same_node_names=True)
    assert main(["check", model, "--shape", "a,b=1x3x32x32"]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith("problem in engine and replicas mode"))
    hint = next(i for i, x in enumerate(lines) if x.startswith("the table of every layer"))
    follow = next(i for i, x in enumerate(lines) if x.startswith("next: "))
    assert first < hint < follow, lines


def test_a_model_every_layer_of_which_runs_on_a_dla_says_so(capsys):
    assert main(["check", "seed-block"]) == 0
    out = capsys.readouterr().out
    assert "every layer can run on a DLA" in out and "cannot run" not in out


def test_a_platform_without_a_dla_lists_no_reasons(capsys):
    assert main(["check", "yolo11n", "--platform", "orin-nano"]) == 0
    out = capsys.readouterr().out
    assert "orin-nano has no DLA core" in _joined(out) and "by reason" not in out and "--layers" in out


def test_many_reasons_are_cut_and_the_rest_counted():
    layers = [{"name": f"n{i}", "op_type": "Op", "dla": False, "reason": f"reason {i}"}
              for i in range(MAX_GROUPS + 3) for _ in range(i + 1)]
    layers.append({"name": "ok", "op_type": "Conv", "dla": True, "reason": None})
    text = refusal_groups(layers)
    lines = text.splitlines()
    assert len(lines) == 1 + MAX_GROUPS + 1, text
    assert lines[1] == f"  {MAX_GROUPS + 3}  Op: reason {MAX_GROUPS + 2}"  # the most common first
    assert lines[-1] == "  and 6 layers for 3 other reasons (--layers)"  # reasons 0, 1, 2: 1 + 2 + 3 layers
    assert refusal_groups([layers[-1]]) == ""


def test_a_warning_fits_an_80_column_terminal_and_stays_one_line_in_a_log(tmp_path):
    argv = ["measure", "seed-block", "--platform", "xavier-agx", "--trt-version", "10.3"]
    log = subprocess.run([sys.executable, "-m", "placetune.cli", *argv], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "80"})
    assert log.returncode == 0, log.stderr
    said = [x for x in log.stderr.splitlines() if x.startswith("placetune: warning: trt_version 10.3")]
    assert len(said) == 1 and len(said[0]) > 120 and said[0].endswith("applies that version's DLA rules anyway")
    shown = _in_a_terminal(argv, tmp_path)
    start = shown.index("placetune: warning: trt_version 10.3")
    warning = shown[start:shown.index("rules anyway", start) + len("rules anyway")]
    assert len(warning.splitlines()) > 1 and _widest(warning) < 80, shown
    assert _joined(warning) == said[0]  # the same words
