"""What a deployment reads in a plan folder: the TensorRT and board the engines are bound to, each
engine's DLA core and I/O tensors in the type and format build.sh builds them, how to check the
placement on the board, a DeepStream nvinfer configuration where one nvinfer can run the plan (and
why not where it cannot), and a build.sh that refuses a TensorRT whose trtexec cannot express the
placement before building anything. Checked against TensorRT's trtexec sources and DeepStream's
nvinfer sources only (no TensorRT or DeepStream here): the builds run against the fake trtexec."""

from __future__ import annotations

import configparser
from types import SimpleNamespace

import onnx
import pytest

import placetune
from placetune import Placement
from placetune.cli.main import main

from placetune.model.onnx_io import read_model_proto

from .conftest import DATA
from .test_detector_e2e import with_random_weights
from .test_plan_folder import _argvs, _run_build


@pytest.fixture(scope="module")
def studies(tmp_path_factory):
    """seed-block studies on AGX Orin: an FP16 engine with two layers on DLA0 and three on the GPU, and
    an FP16 pipeline GPU / DLA0 / DLA1 / GPU."""
    tmp = tmp_path_factory.mktemp("notes")
    url = f"sqlite:///{tmp}/pt.db"
    ids = {}
    for mode in ("engine", "pipeline"):
        with placetune.Evaluator("seed-block", "orin-agx", mode=mode, precision="fp16", store=url, study=mode) as ev:
            ev.baselines()
            dla1 = "DLA0" if mode == "engine" else "DLA1"
            m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": dla1}), agent="t",
                            trial_number=0)
            ids[mode] = m.extra["_id"]
    return SimpleNamespace(url=url, ids=ids)


def _folder(studies, tmp_path, capsys, mode, *extra):
    out = tmp_path / f"{mode}{'-'.join(extra)}"
    code = main(["export", "--study", mode, "--storage", studies.url, "--format", "trtexec", "-o", str(out),
                 "--measurement", str(studies.ids[mode]), *extra])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    return out


def test_readme_gives_each_tensor_the_type_and_format_build_sh_builds(studies, tmp_path, capsys):
    out = _folder(studies, tmp_path, capsys, "pipeline")
    readme = (out / "README.txt").read_text()
    script = (out / "build.sh").read_text()
    # build.sh builds the DLA segments' outputs in FP16 CHW16: the README says so, not float32
    assert "--outputIOFormats=fp16:chw16 --useDLACore=0" in script
    line = next(x for x in readme.splitlines() if x.strip().startswith("model.seg1.onnx"))
    assert "DLA core 0" in line and "/conv3/Conv_output_0 [1x384x56x56 fp16:chw16]" in line
    assert "input [1x384x56x56 fp32:chw]" in line
    seg2 = next(x for x in readme.splitlines() if x.strip().startswith("model.seg2.onnx"))
    assert "DLA core 1" in seg2


def test_readme_names_the_tensorrt_jetpack_and_board_the_engines_are_bound_to(studies, tmp_path, capsys):
    for version, jetpack in (("8.5", "JetPack 5.1"), ("8.6", "JetPack 6.0"), ("10.3", "JetPack 6.1 / 6.2"),
                             ("11.4", "JetPack 7.2.2")):
        readme = (_folder(studies, tmp_path, capsys, "pipeline", "--trt-version", version) / "README.txt").read_text()
        target = next(x for x in readme.splitlines() if x.startswith("Target:"))
        assert f"TensorRT {version}" in target and jetpack in target and "Jetson AGX Orin" in target
        assert "runs only with the TensorRT version that built it" in readme
        # how to check the placement on the board, at the log level that version prints it
        assert "Layers Running on DLA" in readme and "placetune build ." in readme
        assert ("at VERBOSE" in readme) == version.startswith(("10", "11"))


def test_readme_installs_placetune_with_the_extra_of_the_plans_jetpack(studies, tmp_path, capsys):
    """Before, the folder's README said ``pip install -e "/path/to/placetune[jetson]"`` whatever the plan's
    TensorRT, while placetune's README and pyproject.toml name the extra per JetPack: jetson-jp6
    (cuda-python 12) on JetPack 6, jetson-jp7 (cuda-python 13, CUDA 13's driver) on JetPack 7."""
    import tomllib
    from pathlib import Path

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for version, extra in (("8.6", "jetson-jp6"), ("10.3", "jetson-jp6"), ("11.4", "jetson-jp7")):
        readme = (_folder(studies, tmp_path, capsys, "pipeline", "--trt-version", version) / "README.txt").read_text()
        line = next(x for x in readme.splitlines() if "pip install -e" in x)
        assert f'"/path/to/placetune[{extra}]"' in line and f"TensorRT {version}" in line, line
        assert extra in extras and "[jetson]" not in readme


def test_a_strongly_typed_fp16_pipeline_keeps_its_fp16_inputs(studies, tmp_path, capsys):
    """TensorRT 11 builds the folder's FP16 ONNX files as typed: a GPU segment input that is not a DLA cut
    is FP16 in the file, so --inputIOFormats must not turn it into FP32."""
    out = _folder(studies, tmp_path, capsys, "pipeline", "--trt-version", "11.4")
    script = (out / "build.sh").read_text()
    assert "--inputIOFormats=fp16:chw,fp16:chw16,fp16:chw16" in script
    assert "fp32:chw" not in script
    readme = (out / "README.txt").read_text()
    assert "output [1x1152x56x56 fp16:chw]" in readme


def test_build_sh_refuses_tensorrt_8_5_before_building_anything(studies, tmp_path, capsys):
    """trtexec 8.5 has no --layerDeviceTypes (sampleOptions.cpp release/8.5; added in 8.6): a plan with
    single DLA layers stops at once, naming what to do, instead of failing part way."""
    out = _folder(studies, tmp_path, capsys, "engine", "--trt-version", "8.5")
    record = tmp_path / "record.jsonl"
    proc = _run_build(out / "build.sh", tmp_path, record)
    assert proc.returncode == 6
    assert "placetune build ." in proc.stderr and "--layerDeviceTypes" in proc.stderr
    assert not record.exists() or _argvs(record) == []
    assert "stops before building anything" in (out / "README.txt").read_text()
    # and the script's comment names the build that works there, not only an import JetPack 5.1's Python 3.8 lacks
    assert "placetune build DIR --worker-python /usr/bin/python3" in (out / "build.sh").read_text()
    # 8.6 has the flag: the same plan builds
    out86 = _folder(studies, tmp_path, capsys, "engine", "--trt-version", "8.6")
    record86 = tmp_path / "record86.jsonl"
    proc = _run_build(out86 / "build.sh", tmp_path, record86)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    assert any(a.startswith("--layerDeviceTypes=") for a in _argvs(record86)[0])


def test_an_engine_plan_gets_a_deepstream_nvinfer_config_for_its_engine(studies, tmp_path, capsys):
    out = _folder(studies, tmp_path, capsys, "engine", "--trt-version", "10.3")
    text = (out / "deepstream_nvinfer.txt").read_text()
    cfg = configparser.ConfigParser(comment_prefixes=("#",), inline_comment_prefixes=None)
    cfg.read_string(text)
    prop = dict(cfg["property"])
    assert prop == {"model-engine-file": "model.engine", "batch-size": "1", "network-mode": "2",
                    "enable-dla": "1", "use-dla-core": "0"}
    # no onnx-file on purpose: nvinfer would rebuild from it and lose the placement, and the file says so
    assert "onnx-file" not in prop and "Trying to create engine from model files" in text
    assert "TensorRT 10.3" in text
    assert "# the engine's tensors: inputs input [1x384x56x56 fp32:chw]; outputs output [1x1152x56x56 fp32:chw]" in text
    assert (out / "model.engine").name in text
    assert "deepstream_nvinfer.txt" in (out / "README.txt").read_text()
    # the engine's DLA core is the one build.sh builds it for
    assert "--useDLACore=0" in (out / "build.sh").read_text()


def test_a_pipeline_plan_says_why_it_has_no_deepstream_config(studies, tmp_path, capsys):
    out = _folder(studies, tmp_path, capsys, "pipeline")
    assert not (out / "deepstream_nvinfer.txt").exists()
    readme = (out / "README.txt").read_text()
    assert "DeepStream: one nvinfer element runs one engine" in readme


# --------------------------------------------------------------------------- what a deployment passes by mistake
def _engines(tmp_path):
    """A raw serialized engine (TensorRT's ``ftrt`` magic first) and one as Ultralytics writes ``.engine``
    files (4-byte little-endian length, JSON metadata, then the engine)."""
    raw = b"ftrt" + bytes(64)
    meta = b'{"imgsz": [640, 640], "task": "detect", "batch": 1}'
    (tmp_path / "yolo11n.plan").write_bytes(raw)
    (tmp_path / "yolov8n.engine").write_bytes(len(meta).to_bytes(4, "little") + meta + raw)
    return [tmp_path / "yolo11n.plan", tmp_path / "yolov8n.engine"]


@pytest.mark.parametrize("command", ["check", "tune"])
def test_an_engine_given_as_the_model_is_told_to_give_the_onnx(tmp_path, capsys, command):
    for engine in _engines(tmp_path):
        argv = ["check", str(engine)] if command == "check" else ["tune", "--model", str(engine), "--trials", "1",
                                                                   "--storage", f"sqlite:///{tmp_path}/t.db"]
        assert main(argv) == 3
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "a serialized TensorRT engine, not an ONNX model" in err
        assert 'export(format="onnx")' in err


def test_the_runtime_and_plan_load_say_what_to_give_instead(studies, tmp_path, capsys):
    import placetune.runtime as runtime
    from placetune.errors import BackendError, ConfigError
    from placetune.plan.file import load

    for engine in _engines(tmp_path):
        with pytest.raises(ConfigError, match="a TensorRT engine file, not a plan folder.*deserialize_cuda_engine"):
            runtime.load(engine)
        with pytest.raises(ConfigError, match="a serialized TensorRT engine, not a placetune plan"):
            load(engine)
    out = _folder(studies, tmp_path, capsys, "engine")
    with pytest.raises(ConfigError, match="an ONNX model, not a plan folder: tune it"):
        runtime.load(out / "model.onnx")
    with pytest.raises(ConfigError, match="an ONNX model, not a placetune plan"):
        load(out / "model.onnx")
    # the folder's plan.json is the folder: past the folder check (here no TensorRT: its own one line)
    with pytest.raises(BackendError, match="needs TensorRT"):
        runtime.load(out / "plan.json")
    # and the plan API reads a plan folder as its plan.json
    assert load(out).engines[0]["engine_file"] == "model.engine"


# --------------------------------------------------------------------------- GPU fallback off: trtexec's DIRECT_IO
@pytest.fixture(scope="module")
def no_fallback(tmp_path_factory):
    """seed-block FP16 studies with GPU fallback off: a pipeline whose DLA0 segment (/conv3/Conv) reads the
    network input, and an engine whose DLA layers (/conv3/Conv, /conv4/Conv) read the network input."""
    tmp = tmp_path_factory.mktemp("nofallback")
    url = f"sqlite:///{tmp}/pt.db"
    ids = {}
    for mode in ("engine", "pipeline"):
        with placetune.Evaluator("seed-block", "orin-agx", mode=mode, precision="fp16", store=url,
                                 study=f"nf-{mode}", gpu_fallback=False) as ev:
            m = ev.evaluate(Placement(ev.model, {"/conv3/Conv": "DLA0", "/conv4/Conv": "DLA0"}), agent="t",
                            trial_number=0)
            assert m.status == "ok"
            ids[f"nf-{mode}"] = m.extra["_id"]
    return SimpleNamespace(url=url, ids=ids)


@pytest.mark.parametrize("mode", ["pipeline", "engine"])
def test_build_sh_stops_where_trtexec_without_gpu_fallback_cannot_reformat_the_io(no_fallback, tmp_path, capsys,
                                                                                mode):
    """Without --allowGPUFallback trtexec sets DIRECT_IO (sampleEngines.cpp release/8.5-11.1) on inputs it gave
    kLINEAR: a DLA layer reading the FP32 network input needs a GPU reformat, and the build fails
    (NVIDIA/TensorRT#3438); the plan was measured through the API with that reformat. build.sh stops before building
    anything and names placetune build; the plan's fallback stays off (no --allowGPUFallback is added)."""
    out = _folder(no_fallback, tmp_path, capsys, f"nf-{mode}", "--trt-version", "10.3")
    builds = [x for x in (out / "build.sh").read_text().splitlines() if x.startswith('"$TRTEXEC"')]
    assert builds and not any("--allowGPUFallback" in x for x in builds) and any("--useDLACore=0" in x for x in builds)
    record = tmp_path / "record.jsonl"
    proc = _run_build(out / "build.sh", tmp_path, record)
    assert proc.returncode == 6, proc.stdout[-2000:] + proc.stderr
    assert "DIRECT_IO" in proc.stderr and "placetune build ." in proc.stderr and "input (fp32:chw)" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not record.exists() or _argvs(record) == []
    readme = (out / "README.txt").read_text()
    assert "GPU fallback is off in this plan" in readme and "build.sh stops before building anything" in readme


def test_direct_io_is_only_a_warning_where_tensorrt_deprecated_it(no_fallback, tmp_path, capsys):
    """TensorRT 10.7 deprecated kDIRECT_IO ("Unneeded API", NvInfer.h release/10.13): build.sh of a 10.13 target
    builds and warns, it does not claim a failure nobody checked."""
    out = _folder(no_fallback, tmp_path, capsys, "nf-pipeline", "--trt-version", "10.13")
    script = (out / "build.sh").read_text()
    assert "# WARNING: this plan has GPU fallback off" in script and "\nexit 6" not in script


def test_a_plan_with_gpu_fallback_builds_without_the_direct_io_stop(studies, tmp_path, capsys):
    out = _folder(studies, tmp_path, capsys, "pipeline", "--trt-version", "10.3")
    script = (out / "build.sh").read_text()
    assert "--allowGPUFallback" in script and "DIRECT_IO" not in script


# --------------------------------------------------------------------------- DeepStream and a YOLO detector's head
def _yolo_folder(tmp_path, capsys, proto):
    """An engine plan of a YOLO export (its weights filled in), measured on the simulated Jetson, exported."""
    path = tmp_path / "det.onnx"
    onnx.save(proto, str(path))
    url = f"sqlite:///{tmp_path}/pt.db"
    with placetune.Evaluator(str(path), "orin-agx", mode="engine", precision="fp16", store=url, study="det") as ev:
        ev.baseline()
    out = tmp_path / "deploy"
    assert main(["export", "--study", "det", "--storage", url, "--format", "trtexec", "-o", str(out)]) == 0, \
        capsys.readouterr().err
    capsys.readouterr()
    text = (out / "deepstream_nvinfer.txt").read_text()
    cfg = configparser.ConfigParser(comment_prefixes=("#",), inline_comment_prefixes=None)
    cfg.read_string(text)
    return text, dict(cfg["property"])


def test_a_raw_ultralytics_yolo_head_is_attached_as_a_tensor_not_mis_parsed(tmp_path, capsys):
    """A real Ultralytics YOLO11n export (output0 [1, 84, 8400]: cx, cy, w, h and 80 class scores per anchor,
    channels first, no NMS). DeepStream-Yolo's NvDsInferParseYolo reads rows of 6 (x1, y1, x2, y2, score, class;
    nvdsparsebbox_Yolo.cpp decodeTensorYolo) and would read this tensor without an error; nvinfer's own parser
    wants DetectNet layers. The configuration keeps nvinfer from parsing it and says what a parser must read."""
    proto = with_random_weights(read_model_proto(DATA / "yolo11n_ultralytics.onnx.gz")[0])
    text, prop = _yolo_folder(tmp_path, capsys, proto)
    assert prop["network-type"] == "100" and prop["output-tensor-meta"] == "1"
    # its input as Ultralytics trains it: RGB in 0..1 (nvinfer's default scale 1.0 gives 0..255), letterboxed
    assert prop["net-scale-factor"] == "0.0039215697906911373" and prop["model-color-format"] == "0"
    assert prop["maintain-aspect-ratio"] == "1" and prop["symmetric-padding"] == "1"
    assert "parse-bbox-func-name" not in prop and "cluster-mode" not in prop
    assert "output0 [1x84x8400] is an Ultralytics YOLO detect head" in text
    assert "NvDsInferParseYolo reads rows of 6" in text and "wrong boxes and classes, and no error" in text
    assert "#   num-detected-classes=80" in text and "#   cluster-mode=2" in text


def test_a_model_that_is_no_yolo_gets_no_detector_keys(studies, tmp_path, capsys):
    text = (_folder(studies, tmp_path, capsys, "engine") / "deepstream_nvinfer.txt").read_text()
    assert "DETECTOR OUTPUT" not in text and "network-type" not in text and "net-scale-factor=" not in text


def test_an_ultralytics_export_with_nms_is_read_by_the_yolo_row_parser():
    """nms=True: rows of x1, y1, x2, y2, score, class (ultralytics exporter NMSModel, Detect.xyxy = nms), the
    layout NvDsInferParseYolo reads; NMS done, so no clustering. Checked on the plan's output shape and the
    export's metadata (no Ultralytics export with nms=True is stored here)."""
    from placetune.plan.deploy_notes import deepstream_config

    plan = SimpleNamespace(mode="engine", precision="fp16", batch=1, int8_ranges=None, simulated=False,
                           versions={"tensorrt": "10.3"}, settings={}, model={"outputs": ["output0"]},
                           engines=[{"kind": "engine", "device": "GPU", "dla_core": None, "layers": ["a"],
                                     "dla_layers": [], "inputs": [{"name": "images", "shape": [1, 3, 640, 640],
                                                                   "dtype": "float32"}],
                                     "outputs": [{"name": "output0", "shape": [1, 300, 6], "dtype": "float32"}]}])
    proto = onnx.ModelProto()
    for k, v in (("author", "Ultralytics"), ("task", "detect")):
        entry = proto.metadata_props.add()
        entry.key, entry.value = k, v
    text = deepstream_config(plan, "10.3", "model.engine", proto)
    assert "NMS in the graph (nms=True)" in text and "#   parse-bbox-func-name=NvDsInferParseYolo" in text
    assert "#   cluster-mode=4" in text and "\nnetwork-type" not in text
    # the same shape without the export's metadata is not taken for a YOLO head
    assert "DETECTOR OUTPUT" not in deepstream_config(plan, "10.3", "model.engine", None)


@pytest.mark.parametrize("version, adjusted", [("10.3", False), ("10.16", True), ("11.4", True)])
def test_build_sh_parses_a_dla_engine_as_the_backends_measured_it(studies, tmp_path, capsys, version, adjusted):
    """From TensorRT 10.16 the backends set the ONNX parser's ADJUST_FOR_DLA on a DLA engine (trtexec
    --adjustForDLA, sampleOptions.cpp release/10.16:1271 and 11.1:1208; absent in 10.15), which may rewrite
    layers to suit the DLA: build.sh passes it too on those engines only, so it builds the network that was
    measured; before 10.16 trtexec has no such flag."""
    out = _folder(studies, tmp_path, capsys, "pipeline", "--trt-version", version)
    lines = [x for x in (out / "build.sh").read_text().splitlines() if x.startswith('"$TRTEXEC"')]
    for line in lines:
        assert ("--adjustForDLA" in line) == (adjusted and "--useDLACore=" in line), line
    assert any("--useDLACore=" in x for x in lines) and any("--useDLACore=" not in x for x in lines)


@pytest.mark.parametrize("dtype, version, spelled", [("int64", "10.3", "int64:chw"), ("int64", "8.6", "int32:chw"),
                                                     ("int32", "8.5", "int32:chw"), ("float16", "8.6", "fp16:chw"),
                                                     ("bool", "10.3", "bool:chw"), ("bool", "8.6", None)])
def test_an_io_format_list_keeps_each_tensor_s_own_type(studies, tmp_path, capsys, dtype, version, spelled):
    """A list given to --inputIOFormats sets the type of every input it names (sampleEngines.cpp setType), so the
    tensors beside a DLA cut are listed in their ONNX type, not as fp32; TensorRT 8 parses INT64 as INT32 and its
    trtexec spells no bool (sampleOptions.cpp stringToValue<DataType>, release/8.5 and 8.6): refused there."""
    from placetune.errors import ConfigError
    from placetune.plan.file import load
    from placetune.plan.trtexec import trtexec_commands

    plan = load(_folder(studies, tmp_path, capsys, "pipeline") / "plan.json", check_hash=False)
    seg3 = plan.engines[3]
    assert [t["name"] for t in seg3["inputs"]][0] == "/conv2/Conv_output_0"
    for eng in plan.engines:  # a GPU-to-GPU cut, beside the two DLA cuts in segment 3
        for t in eng["inputs"] + eng["outputs"]:
            if t["name"] == "/conv2/Conv_output_0":
                t["dtype"] = dtype
    if spelled is None:
        with pytest.raises(ConfigError, match="cannot give in --inputIOFormats"):
            trtexec_commands(plan, "model.onnx", version, folder=True)
        return
    line = next(x for x in trtexec_commands(plan, "model.onnx", version, folder=True) if "model.seg3.onnx" in x
                and x.startswith("trtexec"))
    assert f"--inputIOFormats={spelled},fp16:chw16,fp16:chw16" in line
    # and the README's tensor list says the type build.sh builds
    from placetune.plan.deploy_notes import tensor_formats

    assert tensor_formats(plan, version)["/conv2/Conv_output_0"] == spelled
