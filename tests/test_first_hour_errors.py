"""The mistakes a new user makes in the first hour each get one line saying what to do: a mistyped
option (argparse said only "unrecognized arguments" under the top-level usage), a mistyped choice (tune's
usage filled a screen above the one line that mattered), a PyTorch checkpoint or a TensorRT engine given
as the model ("malformed protobuf: field number 0"), and a module without a DLA (``check`` told to tune
it, ``tune`` built one trial and printed an unjudged verdict). Each case failed before its fix."""

from __future__ import annotations

import zipfile

import pytest

from placetune.cli.main import main


def _usage_error(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err  # one line, not the command's usage
    return err


def test_a_mistyped_option_names_the_option_meant(capsys):
    err = _usage_error(["tune", "--model", "seed-block", "--trails", "5"], capsys)
    assert err.startswith("placetune tune: error: unrecognized argument: --trails (did you mean --trials?)"), err
    assert "placetune tune --help lists the options" in err
    err = _usage_error(["check", "seed-block", "--precison=fp16", "--frobnicate"], capsys)
    assert "--precison=fp16 (did you mean --precision?), --frobnicate (placetune check --help" in err, err


def test_a_mistyped_choice_is_one_line(capsys):
    err = _usage_error(["tune", "--model", "seed-block", "--mode", "pipline"], capsys)
    assert "argument --mode: invalid choice: 'pipline'" in err and "usage:" not in err, err


def test_a_pytorch_checkpoint_says_to_export_it_to_onnx(tmp_path, capsys):
    pt = tmp_path / "yolov8n.pt"
    with zipfile.ZipFile(pt, "w") as z:  # torch.save's format: a zip archive
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    for argv in (["check", str(pt)], ["tune", "--model", str(pt), "--study", "s", "--storage",
                                      f"sqlite:///{tmp_path / 'p.db'}"]):
        assert main(argv) == 3
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "it is a PyTorch checkpoint" in err and "export(format='onnx')" in err, err
    assert not (tmp_path / "p.db").exists() or "s" not in (tmp_path / "p.db").read_bytes().decode("latin-1")


@pytest.mark.parametrize("name, head", [("model.engine", b"junk"), ("model.bin", b"ftrt\x00\x00\x00\x00")])
def test_a_tensorrt_engine_says_to_give_the_onnx_it_was_built_from(tmp_path, capsys, name, head):
    """By its name or by a serialized engine's first bytes (``ftrt``, as torch-tensorrt checks them)."""
    engine = tmp_path / name
    engine.write_bytes(head + b"\x07" * 64)
    assert main(["check", str(engine)]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a serialized TensorRT engine, not an ONNX model: give the ONNX file it was built from" in err, err


def test_a_real_onnx_file_named_like_a_checkpoint_still_loads(tmp_path, capsys):
    """The hint is only for a file that fails to parse: an ONNX file called .pt is read as ONNX."""
    assert main(["zoo", "export", "seed-block", "-o", str(tmp_path / "m.onnx")]) == 0
    (tmp_path / "m.onnx").rename(tmp_path / "m.pt")
    assert main(["check", str(tmp_path / "m.pt"), "--json"]) == 0


def test_a_missing_model_file_says_where_the_built_in_names_are(tmp_path, capsys):
    assert main(["tune", "--model", str(tmp_path / "yolov8.onnx")]) == 3
    err = capsys.readouterr().err
    assert "no such file" in err and "placetune zoo list" in err, err


def test_a_module_without_a_dla_is_not_tuned(tmp_path, monkeypatch, capsys):
    """Orin Nano: all-GPU is the only placement. ``check`` said "next: placetune tune"; ``tune`` built
    one trial and printed "not judged"; now ``check`` says why and ``tune`` refuses before any study."""
    monkeypatch.chdir(tmp_path)
    assert main(["check", "seed-block", "--platform", "orin-nano"]) == 0
    out = capsys.readouterr().out
    assert "orin-nano has no DLA core: every layer runs on the GPU, so there is no placement to tune" in \
        " ".join(out.split())  # (wrapped at 80 columns)
    assert "next: placetune tune" not in out and "next: placetune measure seed-block --platform orin-nano" in out
    assert main(["tune", "--model", "seed-block", "--platform", "orin-nano-super"]) == 6
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert "platform orin-nano-super has no DLA core" in err and "platforms with a DLA: orin-agx" in err, err
    assert not (tmp_path / "placetune.db").exists()


def test_the_live_bar_keeps_the_failures_on_80_columns_as_the_readme_says():
    """The README promises the bar keeps "the trials, the best and the failures" on a narrow terminal;
    on 80 columns the 24-character bar pushed the failures out as soon as the best beat all-GPU. The bar
    now narrows with the terminal (and only with it: its width does not jump between redraws)."""
    import io

    from placetune.tuning.objectives import get_objective
    from placetune.tuning.progress import Progress

    out = io.StringIO()
    p = Progress(out, tty=True, total=300, done=1, objective=get_objective("throughput"), baseline=None,
                 stops_early="it stops once settled", columns=80)
    p.best, p.base = 2346.1, 2346.1
    p._draw()
    first = out.getvalue()
    p.best, p.done, p.failures = 3399.3, 10, 2
    p._draw()
    line = out.getvalue()[len(first):]
    assert "best 3399 fps (1.45x faster than all-GPU)  failures 2" in line and len(line.rstrip()) <= 80, line
    assert first.index("]") == line.index("]"), (first, line)


def test_the_stop_and_resume_lines_speak_plainly(tmp_path, monkeypatch, capsys):
    """The stop line spoke of "the unmeasured plan's optimistic prediction (prediction - 2 sd ...)" and named
    the study-file key ``stop_when_settled`` where the command line takes ``--no-stop-when-settled``; a resume
    with a smaller budget said "resuming: 13 of 5 trials already done"."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--trials", "60"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("stopped after convergence"))
    assert "no placement left unmeasured is predicted to beat the best by over 1%" in line, line
    assert line.endswith("47 of the budget's evaluations not spent (--no-stop-when-settled, or stop_when_settled = "
                         "false, spends them)"), line
    assert main(["tune", "--model", "seed-block", "--trials", "5"]) == 0
    out = capsys.readouterr().out
    assert "resuming: 13 trials already done, the whole budget of 5 (--trials 113 searches 100 more)" in out, out


def _readme_blocks(lang: str) -> list[str]:
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    return re.findall(rf"```{lang}\n(.*?)```", readme, re.S)


def test_the_readme_python_examples_run_as_written_and_print_what_it_shows(tmp_path):
    """The Gymnasium snippet ran but printed nothing, and the README did not say what the custom agent
    prints: a researcher copying them could not tell whether they worked. Both are run verbatim here and
    print lines of the form the README shows under them (the figures are the simulator's)."""
    import re
    import subprocess
    import sys
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = _readme_blocks("python")
    agent = next(b for b in blocks if "custom search agent" in b)
    assert agent == (Path(__file__).resolve().parents[1] / "examples" / "custom_agent.py").read_text()
    gym_block = next(b for b in blocks if "gym.make(" in b)
    forms = {
        "agent": r"all-GPU [\d.]+ mJ -> best [\d.]+ mJ per inference \(simulated\); \d+ measured, \d+ cache hits; "
                 r"\{'GPU': \d+, 'DLA0': \d+, 'DLA1': \d+\}",
        "gym": r"[\d.]+ ms against all-GPU's [\d.]+ ms: reward -?[\d.]+ \(simulated\)",
    }
    for name, code in (("agent", agent), ("gym", gym_block)):
        (tmp_path / f"{name}.py").write_text(code)
        out = subprocess.run([sys.executable, f"{name}.py"], cwd=tmp_path, capture_output=True, text=True,
                             check=True, timeout=120).stdout.strip()
        assert re.fullmatch(forms[name], out), (name, out)
        shown = re.search(forms[name], readme)
        assert shown, f"the README does not show what the {name} example prints"


def test_a_simulated_plan_without_noise_does_not_claim_a_p99(tmp_path, monkeypatch, capsys):
    """The export headline said "latency median 2.849 ms (p99 2.849 ms)": the simulated Jetson runs without
    timing noise by default, so that p99 measured nothing; it now says there is no spread, and why."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--study", "s"]) == 0
    capsys.readouterr()
    assert main(["export", "-o", "plan.json"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("latency median"))
    assert "(no spread: simulated without timing noise)" in line and "p99" not in line, line


def test_a_measurement_without_noise_does_not_claim_a_p90_or_p99(capsys):
    """`placetune measure resnet50` printed "median 0.638 ms  p90 0.638 ms  p99 0.638 ms": the simulated Jetson
    without --noise times every sample alike, so p90 and p99 measured nothing (as the export's headline says)."""
    assert main(["measure", "resnet50"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("latency:"))
    assert "(no spread: simulated without timing noise; --noise 0.02 adds it)" in line and "p9" not in line, line
    assert main(["measure", "resnet50", "--noise", "0.02"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("latency:"))
    assert "p90" in line and "p99" in line and "no spread" not in line, line


def test_an_unknown_objective_is_named_unknown_not_unmeasurable(tmp_path, monkeypatch, capsys):
    """`placetune tune --objective speed` said "objective speed cannot be measured by the simulate backend in
    pipeline mode: the simulate backend measures latency, throughput, energy, gpu_time only" (exit 6), as if
    another backend could; it is no objective at all: exit 4 (unknown name), naming the objectives."""
    monkeypatch.chdir(tmp_path)
    for backend in ("simulate", "tensorrt"):
        assert main(["tune", "--model", "seed-block", "--objective", "speed", "--backend", backend]) == 4
        err = capsys.readouterr().err
        assert "unknown objective 'speed'; objectives are latency" in err and "cannot be measured" not in err, err


def test_a_plan_folder_export_says_the_engines_are_built_on_the_jetson(tmp_path, monkeypatch, capsys):
    """`placetune export --format trtexec -o deploy` ended "build the engines with: sh deploy/build.sh"; run on the
    machine that tuned (no Jetson) build.sh stops at "trtexec not found". It says the next step is on the
    Jetson, and where the folder's README says how to run the engines."""
    monkeypatch.chdir(tmp_path)
    assert main(["tune", "--model", "seed-block", "--trials", "3", "--agent", "random", "--study", "s"]) == 0
    capsys.readouterr()
    assert main(["export", "--format", "trtexec", "-o", "deploy"]) == 0
    last = capsys.readouterr().out.splitlines()
    line = next(x for x in last if x.startswith("next, on the Jetson"))
    assert "copy deploy there, then sh deploy/build.sh (trtexec) or placetune build deploy" in line, line
    assert "deploy/README.txt says how to run the engines" in line


def test_a_study_files_shapes_are_named_as_the_files_not_as_an_option(tmp_path, monkeypatch, capsys):
    """studies/jetson-overnight.toml with a YOLO export as its model and the template's shapes left in said
    "--shape names 'input', but the model's inputs are: images": no --shape was given; the file set it."""
    import shutil
    from pathlib import Path

    monkeypatch.chdir(tmp_path)
    shutil.copy(Path(__file__).parent / "data" / "seed_block.onnx.gz", tmp_path / "m.onnx.gz")
    (tmp_path / "night.toml").write_text('[study]\nmodel = "m.onnx.gz"\nshapes = ["images=1x3x32x32"]\n'
                                         'trials = 3\nagent = "random"\n')
    assert main(["tune", "night.toml"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("placetune: error: night.toml sets shapes = ['images=1x3x32x32']: --shape names 'images'"), err
    assert main(["tune", "--model", "m.onnx.gz", "--shape", "images=1x3x32x32"]) == 3  # the option: said as it is
    assert capsys.readouterr().err.startswith("placetune: error: --shape names 'images'")
