"""A pipeline's realised placement is known segment by segment: one DLA segment whose placement
cannot be read (no placement report in its build log, no layer information) leaves the GPU
segments (known by construction) and the other DLA segment known; the unread layers are marked
unknown, never guessed; the store keeps the record, the export refuses exactly the unread layers,
the first-build check and the trial line say it. Against the TensorRT doubles (tests/fakes)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from placetune import ConfigError, Evaluator, Model, Placement
from placetune.backends.tensorrt.backend import TensorRTBackend
from placetune.measurement import UNKNOWN_DEVICE, Measurement
from placetune.plan.export import export_plan
from placetune.report.trace import chrome_trace
from placetune.store import Store
from placetune.tuning.first_build import FirstBuildCheck
from placetune.tuning.progress import placement_field
from placetune.tuning.verdict import best_caveats
from tests.fakes import fake_env

DATA = Path(__file__).parent / "data"
THREE = {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA1"}  # conv1+conv2 GPU, conv3 DLA0, conv4 DLA1, concat GPU


def _measure(seed_block_random: Path, tmp_path: Path, version: str = "10.3.0", **faults: str) -> tuple[Measurement, Path]:
    be = TensorRTBackend(worker_env=fake_env(version, **faults), cache_dir=tmp_path / "cache", warmup_ms=1,
                         profile_iterations=2)
    db = tmp_path / "pt.db"
    ev = Evaluator(str(seed_block_random), "orin-agx", backend=be, store=db, trt_version=version[:4].rstrip("."),
                   iterations=5, mode="pipeline", precision="fp16", study="partly")
    try:
        m = ev.evaluate(Placement(ev.model, THREE))
    finally:
        ev.close()
        be.close()
    return m, db


@pytest.mark.parametrize("version", ["10.3.0", "8.5.2"])
def test_one_unreadable_dla_segment_leaves_the_other_segments_known(seed_block_random, tmp_path, version):
    m, db = _measure(seed_block_random, tmp_path, version, UNREADABLE_ON="/conv3/Conv")
    assert m.status == "ok", m.reason
    # the whole placement is not known: no realised map, as before (nothing guesses the unread layer)
    assert not m.placement_known and m.realized is None
    segs = m.extra["segment_placements"]
    assert [(s["index"], s["device"], s["known"], s["source"]) for s in segs] == [
        (0, "GPU", True, "GPU engine"), (1, "DLA0", False, "none"),
        (2, "DLA1", True, "build log and engine inspector"), (3, "GPU", True, "GPU engine")]
    assert segs[1]["unknown_layers"] == ["/conv3/Conv"] and "no placement report" in segs[1]["reason"]
    # the placement as read: the unread layer marked unknown, the rest as TensorRT placed it
    assert m.realized_partial == {"/conv1/Conv": "GPU", "/conv2/Conv": "GPU", "/conv3/Conv": UNKNOWN_DEVICE,
                                  "/conv4/Conv": "DLA1", "/Concat": "GPU"}
    assert m.unknown_layers == ["/conv3/Conv"] and m.segments_read == (3, 4)
    assert m.extra["realized_vs_predicted"] == {"/conv3/Conv": ["DLA0", UNKNOWN_DEVICE]}
    # DLA1's loadables are read; DLA0's (and its 16-per-core check) are unknown
    assert m.dla_loadables == {"DLA1": 1}
    assert "seg1" in m.extra["placement_unknown"] and "3 of 4 segments were read" in m.extra["placement_unknown"]
    # the store keeps it: read back, the same partial placement
    with Store(db) as store:
        (rec,) = [r for r in store.measurements("partly") if r.measurement.mode == "pipeline"]
        back = rec.measurement
        assert back.realized is None and back.realized_partial == m.realized_partial and back.segments_read == (3, 4)
        # the export claims no placement that was not read: it refuses, naming exactly the unread layer
        with pytest.raises(ConfigError, match=r"1 layer\(s\) whose realised device was not read \(/conv3/Conv;"):
            export_plan(store, "partly", measurement_id=rec.id)
        # so does the export of the study's best (this is its only measurement)
        with pytest.raises(ConfigError, match=r"not read \(/conv3/Conv; 3 of 4 segments read\)"):
            export_plan(store, "partly")
    # the Chrome trace draws the unread segment where it was asked, and says its placement is unknown
    names = {e["name"] for e in chrome_trace(m)["traceEvents"] if e.get("ph") == "X"}
    assert names == {"seg0", "seg1 (placement unknown)", "seg2", "seg3"}
    # placetune measure's lines: the layers read by device, the unread one named
    from placetune.cli.measure import _measure_human
    from placetune.hardware.platforms import get_platform

    text = _measure_human(m, Model.load(seed_block_random), get_platform("orin-agx"))
    assert "realised, PARTLY UNKNOWN: DLA1 1 layers, GPU 3 layers, unknown 1 layers; 1 layer(s) whose realised " \
           "device was not read (/conv3/Conv; 3 of 4 segments read)" in text
    # the best plan's caveat names the unread segment and layer
    (line,) = [x for x in best_caveats(m) if "UNKNOWN" in x]
    assert "PARTLY" in line and "/conv3/Conv" in line and "3 of 4 segments" in line


def test_every_segment_read_is_known_and_records_its_sources(seed_block_random, tmp_path):
    m, _ = _measure(seed_block_random, tmp_path)
    assert m.placement_known and m.realized_partial == m.realized and m.unknown_layers == []
    assert [s["known"] for s in m.extra["segment_placements"]] == [True] * 4
    assert "realized_partial" not in m.extra and m.segments_read is None


def test_every_dla_segment_unreadable_keeps_the_gpu_segments_known_only(seed_block_random, tmp_path):
    m, _ = _measure(seed_block_random, tmp_path, NO_PLACEMENT_LOG="1", INSPECTOR_FAIL="1")
    assert m.status == "ok" and m.realized is None and m.dla_loadables == {}
    assert sorted(m.unknown_layers) == ["/conv3/Conv", "/conv4/Conv"] and m.segments_read == (2, 4)


def test_old_measurements_without_segment_records_read_as_before():
    old = Measurement(status="ok", latency_samples_ms=[1.0], requested={"a": "DLA0"},
                      extra={"placement_known": False, "placement_unknown": "no lines"})
    assert old.realized_partial is None and old.unknown_layers == ["a"] and old.segments_read is None
    known = Measurement(status="ok", latency_samples_ms=[1.0], realized={"a": "GPU"})
    assert known.realized_partial == {"a": "GPU"} and known.unknown_layers == []


def _partly(realized_partial: dict[str, str]) -> Measurement:
    return Measurement(status="ok", latency_samples_ms=[1.0], mode="pipeline", requested={"a": "GPU", "b": "DLA0"},
                       extra={"placement_known": False, "placement_unknown": "seg1 unread",
                              "realized_partial": realized_partial,
                              "segment_placements": [{"index": 0, "device": "DLA0", "layers": 1, "known": True},
                                                     {"index": 1, "device": "DLA1", "layers": 1, "known": False}]})


def _check() -> FirstBuildCheck:
    check = FirstBuildCheck(NS(objective=NS(names=("latency",), constraints=())))
    check.gpu_checked = True  # the all-GPU baseline passed
    return check


def test_first_build_check_counts_a_read_dla_segment_as_read_and_says_the_rest_loudly(caplog):
    check = _check()
    with caplog.at_level(logging.WARNING):
        check(NS(as_dict=lambda: {"a": "DLA0", "b": "DLA1"}), _partly({"a": "DLA0", "b": UNKNOWN_DEVICE}))
    assert check.dla_checked and check.unknown_in_a_row == 0
    (said,) = [r.getMessage() for r in caplog.records if "PLACEMENT PARTLY UNKNOWN" in r.getMessage()]
    assert "1 layer(s) whose realised device was not read (b; 1 of 2 segments read)" in said
    # a pipeline whose only read segments are GPU ones proves nothing of the DLA reading: counted unknown
    check = _check()
    gpu_only = _partly({"a": "GPU", "b": UNKNOWN_DEVICE})
    gpu_only.extra["segment_placements"][0]["device"] = "GPU"
    check(NS(as_dict=lambda: {"a": "GPU", "b": "DLA1"}), gpu_only)
    assert not check.dla_checked and check.unknown_in_a_row == 1


def test_trial_line_says_a_partly_known_placement():
    assert placement_field(_partly({"a": "DLA0", "b": UNKNOWN_DEVICE})) == "placement_known=partly:1/2_segments"
    assert placement_field(Measurement(status="ok", latency_samples_ms=[1.0],
                                       extra={"placement_known": False})) == "placement_known=false"
    assert placement_field(Measurement(status="ok", latency_samples_ms=[1.0])) is None


def _gpu_free_study(seed_block_random, tmp_path, *placements) -> list[Measurement]:
    """The placements (a map, or "all-gpu") measured in the pipeline study ``gpu-free`` of ``tmp_path/pt.db``
    (least GPU time) on the doubles, whose engine holding /conv3/Conv prints no placement."""
    be = TensorRTBackend(worker_env=fake_env("10.3.0", UNREADABLE_ON="/conv3/Conv"), cache_dir=tmp_path / "cache",
                         warmup_ms=1, profile_iterations=2)
    ev = Evaluator(str(seed_block_random), "orin-agx", backend=be, store=tmp_path / "pt.db", trt_version="10.3",
                   iterations=5, mode="pipeline", precision="fp16", study="gpu-free", objective="gpu_time")
    try:
        return [ev.evaluate(Placement.all_gpu(ev.model) if p == "all-gpu" else Placement(ev.model, p))
                for p in placements]
    finally:
        ev.close()
        be.close()


@pytest.fixture(scope="module")
def gpu_free_three(seed_block_random, tmp_path_factory):
    """The study ``gpu-free`` of the three placements (the partly unread one, DLA1, all-GPU) measured once
    for the tests of this file; :func:`_copy_of` puts a copy of its database in a test's ``tmp_path``."""
    root = tmp_path_factory.mktemp("gpu-free")
    return root, _gpu_free_study(seed_block_random, root, THREE, {"/conv4/Conv": "DLA1"}, "all-gpu")


def _copy_of(study, tmp_path) -> list[Measurement]:
    import shutil

    root, measured = study
    for path in root.glob("pt.db*"):
        shutil.copy2(path, tmp_path / path.name)
    return measured


def test_a_partly_unread_best_plan_exports_the_best_known_one_and_names_the_faster(seed_block_random, gpu_free_three,
                                                                                  tmp_path):
    """The study's best (least GPU time) is a pipeline with an unread DLA segment: ``placetune
    export`` used to refuse it and export nothing; it now exports the best plan whose placement is
    known and says, in the plan's notes and ``measured["not_exported"]``, which better plan was
    passed over, its unread layer, by how much the exported one is worse and how to check it."""
    partly, dla1, gpu = _copy_of(gpu_free_three, tmp_path)
    assert partly.segments_read == (3, 4) and dla1.placement_known and gpu.placement_known
    g = [m.objective("gpu_time") for m in (partly, dla1, gpu)]
    assert g[0] < g[1] < g[2], g  # the unread plan is the best; the DLA1 one the best known
    with Store(tmp_path / "pt.db") as store:
        by_key = {r.measurement.objective("gpu_time"): r.id for r in store.measurements("gpu-free")}
        plan = export_plan(store, "gpu-free")
    assert plan.source["measurement_id"] == by_key[g[1]]
    assert plan.realized["/conv4/Conv"] == "DLA1" and UNKNOWN_DEVICE not in plan.realized.values()
    notes = "\n".join(plan.notes)
    assert f"NOT EXPORTED: the better plan, measurement {by_key[g[0]]}" in notes
    assert "1 layer(s) whose realised device was not read (/conv3/Conv; 3 of 4 segments read)" in notes
    assert f"exported instead: measurement {by_key[g[1]]}" in notes and "the best measurement whose placement " \
           "is known" in notes
    assert "placetune measure MODEL --backend tensorrt --mode pipeline --placement FILE.json" in notes
    passed = plan.measured["not_exported"]
    assert passed["measurement_id"] == by_key[g[0]] and passed["unknown_layers"] == ["/conv3/Conv"]
    assert Placement.from_json(Model.load(seed_block_random), passed["requested"]).as_dict()["/conv3/Conv"] == "DLA0"


def test_a_best_whose_placement_was_not_read_is_marked_not_exportable_wherever_it_is_named(seed_block_random, tmp_path,
                                                                                              capsys):
    """Before, ``placetune studies``, ``placetune report`` and the trial lines named a best plan whose
    placement was not read as the study's best without a word, while tune and export passed over it."""
    import json

    from placetune.cli.main import main
    from placetune.tuning.final_pick import NOT_EXPORTABLE

    partly, _ = _gpu_free_study(seed_block_random, tmp_path, THREE, {"/conv4/Conv": "DLA1"})
    url = f"sqlite:///{tmp_path / 'pt.db'}"
    capsys.readouterr()
    assert main(["studies", "--storage", url, "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["studies"][0]
    assert row["best_measurement_id"] == partly.extra["_id"]
    assert row["best_exportable"] is False and row["best_note"] == NOT_EXPORTABLE
    assert main(["studies", "--storage", url]) == 0
    assert f"({NOT_EXPORTABLE})" in capsys.readouterr().out
    assert main(["report", "--storage", url, "-o", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert f"the study's best, measurement {partly.extra['_id']}: {NOT_EXPORTABLE}; the plan plots show" in out


def test_the_trial_lines_mark_a_best_whose_placement_was_not_read():
    import io

    from placetune.tuning.objectives import get_objective
    from placetune.tuning.progress import Progress

    out = io.StringIO()
    progress = Progress(out, tty=False, total=3, done=0, objective=get_objective("latency"), baseline=None)
    where = NS(as_dict=lambda: {"a": "DLA0"})
    progress.update(where, Measurement(status="ok", latency_samples_ms=[2.0], realized={"a": "DLA0"}))
    progress.update(where, Measurement(status="ok", latency_samples_ms=[1.0], extra={"placement_known": False}))
    progress.update(where, Measurement(status="ok", latency_samples_ms=[3.0], realized={"a": "DLA0"}))
    lines = out.getvalue().splitlines()
    assert ["best_exportable=false" in x for x in lines] == [False, True, True], lines


@pytest.mark.slow
@pytest.mark.parametrize("board_reads_it", [True, False])
def test_the_command_the_plan_gives_for_a_passed_over_plan_re_measures_it(seed_block_random, gpu_free_three, tmp_path,
                                                                         monkeypatch, capsys, board_reads_it):
    """The plan's notes say how to check a passed-over plan on the board: the ``placetune measure`` command they
    give, run as written on the requested placement they record, builds it anew and reads where TensorRT put its
    layers; a board whose build again does not say names exactly which segment was not read and why."""
    import json
    import os
    import re
    import shlex

    from placetune.backends import clocks
    from placetune.cli.main import main
    from tests.fakes import fake_env

    _copy_of(gpu_free_three, tmp_path)
    with Store(tmp_path / "pt.db") as store:
        plan = export_plan(store, "gpu-free")
    (tmp_path / "FILE.json").write_text(json.dumps(plan.measured["not_exported"]["requested"]))
    command = re.search(r"run `(placetune measure [^`]+)`", "\n".join(plan.notes)).group(1)
    argv = [str(seed_block_random) if a == "MODEL" else a for a in shlex.split(command)][1:] + ["--json"]
    monkeypatch.setattr(clocks, "SYSFS_ROOT", str(tmp_path / "nothing"))
    env = fake_env("10.3.0", **({} if board_reads_it else {"UNREADABLE_ON": "/conv3/Conv"}))
    for k, v in env.items():
        monkeypatch.setenv(k, v if k != "PYTHONPATH" else os.pathsep.join(
            [v, str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PLACETUNE_CACHE_DIR", str(tmp_path / "board-cache"))  # this board's engines, not another test's
    monkeypatch.chdir(tmp_path)
    code = main(argv)
    doc = json.loads(capsys.readouterr().out)
    assert code == 0 and doc["status"] == "ok", doc
    if board_reads_it:
        assert doc["extra"]["placement_known"] is True and doc["realized"]["/conv3/Conv"] == "DLA0"
    else:
        assert doc["extra"]["placement_known"] is False and doc["realized"] is None
        assert "seg1" in doc["extra"]["placement_unknown"] and "no placement report" in doc["extra"]["placement_unknown"]
