"""What README.md says of the command line, checked against what the command line does now: each claim here
is one sentence of the README (quoted in the test's docstring) that a cheap run can confirm or refute."""

from __future__ import annotations

from pathlib import Path

import pytest

from placetune.cli.main import main


def _help(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 0
    return capsys.readouterr().out


def test_tune_help_does_not_offer_the_fp32_it_refuses(capsys, monkeypatch):
    """README: "`tune --precision fp32` is refused the same way: the DLA runs fp16 and int8 only" (exit 6).
    ``tune --help`` listed fp32 among the precisions to pick, as if it were a tune one could run."""
    monkeypatch.setenv("COLUMNS", "200")
    text = _help(["tune", "--help"], capsys)
    line = " ".join(text[text.index("--precision NAME"):].split())[:120]
    assert "int8 (default), fp16;" in line and "fp32 is refused" in line, line
    assert main(["tune", "--model", "seed-block", "--precision", "fp32", "--storage", "sqlite://"]) == 6
    assert "precision fp32 runs on the GPU only" in capsys.readouterr().err


def _readme() -> str:
    from pathlib import Path

    return (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def test_the_readme_evaluator_signature_is_the_evaluators():
    """README's ``pt.Evaluator(...)`` line names every parameter the constructor takes, in its order (it had
    ``**settings`` where ``settings`` is a keyword of its own and the rest are measurement ``**options``)."""
    import inspect
    import re

    import placetune as pt

    text = " ".join(_readme().split())
    shown = text[text.index("`pt.Evaluator(model,"):]
    shown = shown[:shown.index(")`")]
    names = [part.split("=")[0].strip(" *") for part in shown.split("(", 1)[1].split(",")]
    names = [n for n in names if re.fullmatch(r"[a-z_]+", n)]
    actual = [n for n in inspect.signature(pt.Evaluator.__init__).parameters if n != "self"]
    assert names == actual, (names, actual)


def test_the_readme_baselines_are_the_evaluators():
    """README: ``ev.baselines()`` is all-GPU and all-DLA0 in engine mode, all-DLA1 and the split too in pipeline
    mode (it listed all four for every mode, and the custom agent's comment named an all-DLA1 it never got)."""
    import placetune as pt

    assert '`{"all-GPU": (placement, measurement), "all-DLA0": ...}` in engine mode' in " ".join(_readme().split())
    assert list(pt.Evaluator("seed-block", "orin-agx").baselines()) == ["all-GPU", "all-DLA0"]
    assert list(pt.Evaluator("seed-block", "orin-agx", mode="pipeline").baselines()) == [
        "all-GPU", "all-DLA0", "all-DLA1", "split-DLA0-DLA1"]


def test_an_int8_plan_folder_names_its_dla_cuts_as_the_readme_says(tmp_path, capsys):
    """docs/deployment.md (once the README): the plan folder's README.txt gives each boundary tensor "as `build.sh`
    builds it (`int8:chw32` or `fp16:chw16` at a DLA cut)"; it named only ``fp16:chw16``, which an INT8 plan's cuts
    are not."""
    db = f"sqlite:///{tmp_path}/p.db"
    assert main(["tune", "--model", "resnet18", "--trials", "6", "--storage", db,
                 "--export", str(tmp_path / "p.plan.json")]) == 0
    assert main(["export", "--storage", db, "--format", "trtexec", "-o", str(tmp_path / "dir")]) == 0
    capsys.readouterr()
    notes = (tmp_path / "dir" / "README.txt").read_text(encoding="utf-8")
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "deployment.md").read_text(encoding="utf-8").split())
    assert "int8:chw32" in notes
    assert "(`int8:chw32` or `fp16:chw16` at a DLA cut)" in text


def test_a_measurement_refuses_an_objective_name_as_the_readme_says():
    """README: ``objective("latency")`` is None when failed, and a name that is no objective raises
    ``UnknownNameError`` (it returned None, read as a failed measurement)."""
    import placetune as pt
    from placetune.errors import UnknownNameError

    assert "raises `UnknownNameError`" in " ".join(_readme().split())
    m = pt.Evaluator("seed-block").baseline()
    assert m.objective("latency") == m.median_ms
    with pytest.raises(UnknownNameError, match="objectives are latency, throughput"):
        m.objective("latncy")


def test_the_readme_layout_names_every_docs_page():
    """README's Layout block names each page of docs/ (it named three of thirteen)."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs"
    layout = _readme().split("## Layout", 1)[1]
    for page in docs.glob("*.md"):
        assert page.name in layout, page.name


def test_the_readme_exit_codes_are_the_error_classes():
    """README, Commands: "3 model, 4 unknown name, 5 placement, 6 configuration, 7 database, 8 backend" and
    "2 is a usage error": the exit codes the error classes carry."""
    import re

    from placetune import errors

    text = " ".join(_readme().split())
    said = re.search(r"\(3 model, 4 unknown name, 5 placement, 6 configuration, 7 database, 8 backend,", text)
    assert said and "2 is a usage error" in text
    assert [cls.exit_code for cls in (errors.ModelError, errors.UnknownNameError, errors.PlacementError,
                                      errors.ConfigError, errors.StoreError, errors.BackendError)] == [3, 4, 5, 6, 7, 8]


def test_a_usage_error_exits_2(capsys):
    """README: "2 is a usage error" (an option the command does not take)."""
    with pytest.raises(SystemExit) as stop:
        main(["tune", "--no-such-option"])
    assert stop.value.code == 2


def test_the_readme_says_layer_metadata_was_read_from_real_output():
    """README's corpus table: the layer metadata row named only onnx-tensorrt's sources ("not from real output"),
    while the corpus holds a real trtexec 10.4 export whose Metadata names 19 ONNX nodes, read by the parser."""
    import json
    from pathlib import Path

    artefact = "evpe-rtx3060-trtexec-10.4-alexnet-layerinfo"
    prov = json.loads((Path(__file__).resolve().parent / "data" / "trt_corpus" / artefact / "provenance.json")
                      .read_text(encoding="utf-8"))
    assert prov["facts"]["layer_info"]["metadata_nodes"] > 0
    row = next(line for line in _readme().splitlines() if line.startswith("| layer metadata"))
    assert artefact in row and "not from real output" not in row


def test_the_readme_counts_the_published_measurements_as_they_are():
    """README: "`placetune/data/published.csv`: N measurements other people published" (it said 115, the count
    before release 4's rows, while the file holds 130)."""
    import csv
    import re
    from pathlib import Path

    said = re.search(r"`placetune/data/published.csv`: (\d+) measurements", " ".join(_readme().split()))
    path = Path(__file__).resolve().parents[1] / "placetune" / "data" / "published.csv"
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert said and int(said.group(1)) == len(rows)


def test_the_readme_says_which_batch_bucket_misses_its_bound():
    """README's calibration paragraph says which judged figures miss their targets; the generated table below it
    has the validation rows' batch-1 bucket past the +/-10 % bound, which the paragraph no longer said."""
    import re

    text = _readme()
    block = text[text.index("<!-- begin generated: calibration summary -->"):]
    row = next(line for line in block.splitlines() if line.startswith("| 1 |"))
    validate = float(re.match(r"\s*([+-][\d.]+) %", row.split("|")[3]).group(1))
    said = "the validation rows' batch-1 bucket misses its +/-10 % bound" in " ".join(text.split())
    assert said == (abs(validate) > 10), (validate, said)


@pytest.mark.parametrize("content", [b"x\n", b"\x08\x07"])  # bytes protobuf reads as a ModelProto without a graph
def test_an_engine_file_is_refused_as_an_engine_whatever_its_bytes(tmp_path, capsys, content):
    """README: "A `.engine`/`.plan` file given instead of the ONNX is refused in one line naming the ONNX export
    to give (exit 3)". An engine file whose bytes protobuf happened to parse (as a model with no graph) was
    refused as 'not an ONNX model (no graph nodes found)', naming nothing to give."""
    path = tmp_path / "yolo11n.engine"
    path.write_bytes(content)
    assert main(["check", str(path)]) == 3
    err = capsys.readouterr().err
    assert "a serialized TensorRT engine, not an ONNX model: give the ONNX file it was built from" in err
    assert len(err.strip().splitlines()) == 1
