"""The realised placement from two sources (build log, engine layer information), cross-checked,
and recorded as unknown where they disagree or neither says: never "realised = requested"."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from placetune.backends.tensorrt.buildlog import dla_failure, locate, parse_build_log
from placetune.backends.tensorrt.placement_known import decide, inspector_dla_layers, mark_known, metadata_nodes
from placetune.backends.trtexec.parse import PerfSummary, parse_layer_info
from placetune.backends.trtexec.process import Run, classify
from placetune.measurement import Measurement

CORPUS = Path(__file__).parent / "data" / "trt_corpus"
NAMES = ["c1", "r1", "c2", "pool", "fc"]
PRED = {"c1": "DLA0", "r1": "DLA0", "c2": "DLA0", "pool": "DLA0", "fc": "GPU"}
LOG = ["Number of DLA node candidates offloaded : 1 out of 1",
       "{ForeignNode[c1...c2]} successfully offloaded to DLA.",
       "[GpuLayer] POOLING: pool", "[GpuLayer] CONVOLUTION: fc"]
# engine layers around a DLA loadable as the real profile of NVIDIA/TensorRT#3143 names them
INSPECTOR = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[c1...c2]}", "LayerType": "Unknown"},
             {"Name": "c2 from nvm", "LayerType": "Reformat"}, {"Name": "in copy finish", "LayerType": "Reformat"},
             {"Name": "pool", "LayerType": "Pooling"}, {"Name": "fc", "LayerType": "CaskConvolution"}]


def _fell(*names):
    """TensorRT's fallback warning of each layer (the 10.x form the build-log reader knows)."""
    return ["[W] [TRT] Layer '%s' (CONVOLUTION): Unsupported on DLA. Switching this layer's device type to GPU." % n
            for n in names]


def _decide(lines, inspector=None, core=0):
    blog = parse_build_log(lines)
    return decide(PRED, core, blog, locate(blog, NAMES), NAMES, None, inspector)


def test_the_10_3_offload_lines_alone_give_the_placement_and_loadables():
    k = _decide(LOG)
    assert k.known and k.source == "build log" and k.loadables == 1
    assert k.realized == {"c1": "DLA0", "r1": "DLA0", "c2": "DLA0", "pool": "GPU", "fc": "GPU"}


def test_the_two_sources_agree_or_the_placement_is_unknown():
    k = _decide(LOG, INSPECTOR)
    assert k.known and k.source == "build log and engine inspector" and k.loadables == 1
    wrong = [dict(x) for x in INSPECTOR]
    wrong[1]["Name"] = "{ForeignNode[c1...r1]}"
    wrong.insert(4, {"Name": "c2", "LayerType": "CaskConvolution"})  # the inspector says c2 ran on the GPU
    k = _decide(LOG, wrong)
    assert not k.known and k.realized is None and "disagree on 1 layer(s) (c2)" in k.reason
    # an inspector that names c2 nowhere says nothing against the log (it is not read as the GPU's)
    k = _decide(LOG, [x for x in wrong if x["Name"] != "c2"])
    assert k.known and k.realized["c2"] == "DLA0"


def test_neither_source_is_unknown_never_the_request():
    k = _decide(["[I] [TRT] Detected 1 inputs and 1 output network tensors."])
    assert not k.known and k.realized is None and k.loadables is None and "neither" in k.reason


def test_the_inspector_alone_and_a_loadable_count_that_disagrees():
    k = _decide([], INSPECTOR)
    assert k.known and k.source == "engine inspector" and k.realized["c2"] == "DLA0" and k.realized["pool"] == "GPU"
    two = LOG[:2] + ["{ForeignNode[pool]} successfully offloaded to DLA."]  # the log counts 2, the inspector 1
    k = _decide(two, [x for x in INSPECTOR if x["Name"] != "pool"] + [{"Name": "pool", "LayerType": "Pooling"}])
    assert not k.known and k.loadables is None


def test_a_myelin_foreign_node_without_dla_copies_is_not_a_dla_loadable():
    assert inspector_dla_layers([{"Name": "{ForeignNode[a...b]}", "LayerType": "Myelin"}]) == []
    assert inspector_dla_layers([{"Name": "x", "LayerType": "DLA"}]) == ["x"]
    assert inspector_dla_layers([]) is None


def test_a_gpu_foreign_node_next_to_another_loadables_copy_is_not_a_dla_loadable():
    """A Myelin subgraph is a ForeignNode too (LayerType Myelin in 8.x); one scheduled just before a
    loadable's input copy, or just after its copies, ran on the GPU. A DLA loadable follows its
    ``to nvm`` copy and precedes its ``from nvm`` copy (the real profile of NVIDIA/TensorRT#3143)."""
    typed = [{"Name": "{ForeignNode[g1...g2]}", "LayerType": "Myelin"}, {"Name": "x to nvm", "LayerType": "Reformat"},
             {"Name": "{ForeignNode[c1...c2]}", "LayerType": "Unknown"}, {"Name": "c2 from nvm", "LayerType": "Reformat"},
             {"Name": "{ForeignNode[g3...g4]}", "LayerType": "Myelin"}]
    assert inspector_dla_layers(typed) == ["{ForeignNode[c1...c2]}"]
    names = ["{ForeignNode[g1...g2]}", "x to nvm", "{ForeignNode[c1...c2]}", "c2 from nvm", "x copy finish",
             "{ForeignNode[g3...g4]}"]
    assert inspector_dla_layers(names) == ["{ForeignNode[c1...c2]}"]


def test_a_layer_file_that_is_not_valid_json_keeps_each_layers_type():
    """trtexec's file read from its raw text (a name with an unescaped quote): the LayerType after
    each name is kept, so a Myelin ForeignNode after a loadable's copy is still no loadable."""
    text = ('{"Layers": [{\n  "Name": "x to nvm",\n  "LayerType": "Reformat",\n  "Inputs": [],\n  "Outputs": []\n},{\n'
            '  "Name": "{ForeignNode[say "hi"...b]}",\n  "LayerType": "Myelin",\n  "Inputs": [\n  {\n'
            '    "Name": "x",\n    "Location": "Device",\n    "Dimensions": [1],\n    "Format/Datatype": "Half"\n  }],\n'
            '  "Outputs": []\n}],\n"Bindings": ["x"\n]}\n')
    info = parse_layer_info(text)
    assert not info.valid_json and info.layers == [{"Name": "x to nvm", "LayerType": "Reformat"},
                                                   {"Name": '{ForeignNode[say "hi"...b]}', "LayerType": "Myelin"}]
    assert inspector_dla_layers(info.layers) == []


def test_a_layer_the_inspector_does_not_name_is_never_read_as_the_gpus():
    """The inspector alone: a DLA loadable in a form placetune does not read (no ForeignNode, no
    copies) leaves the layers asked for the DLA in no engine layer; they are unknown, not GPU."""
    blob = [{"Name": "in to dla", "LayerType": "Unknown"}, {"Name": "dla_subgraph_0", "LayerType": "Unknown"},
            {"Name": "pool", "LayerType": "CaskPooling"}, {"Name": "fc", "LayerType": "CaskConvolution"}]
    k = _decide([], blob)
    assert not k.known and k.realized is None and "names only 2 of the 5 layers (c1, r1, c2, ..." in k.reason
    pred = {"c1": "DLA0", "r1": "GPU", "c2": "GPU", "pool": "GPU", "fc": "GPU"}  # one layer asked for the DLA
    named = blob + [{"Name": "r1 + c2", "LayerType": "CaskConvolution"}]
    blog = parse_build_log([])
    k = decide(pred, 0, blog, locate(blog, NAMES), NAMES, None, named)
    assert not k.known and "names none of the 1 layer(s) asked for the DLA (c1)" in k.reason
    # a single layer no engine layer names (folded) keeps its request, listed; the others are read
    names = NAMES + ["drop"]
    pred = {**PRED, "drop": "DLA0"}
    blog = parse_build_log([])
    k = decide(pred, 0, blog, locate(blog, names), names, None, INSPECTOR)
    assert k.known and k.from_request == ["drop"] and k.realized["c2"] == "DLA0" and k.realized["pool"] == "GPU"


def test_tensorrt_10_myelin_kernels_are_placed_by_their_metadata():
    """A real TensorRT 10.4 export (corpus): the classifier's Myelin kernels are named
    ``/classifier/classifier_1/Gemm_myl9_2`` and ``__myl_Res_myl9_1``; their ``Metadata`` names
    the ONNX nodes. Every layer is read as the GPU's, none from the request."""
    doc = json.loads((CORPUS / "evpe-rtx3060-trtexec-10.4-alexnet-layerinfo" / "layer_info.json").read_text())
    names = list(dict.fromkeys(n for x in doc["Layers"] for n in metadata_nodes(x)))
    assert len(names) == 19 and "/Flatten" in names and "/classifier/classifier.2/Relu" in names
    pred = {n: "DLA0" for n in names}
    blog = parse_build_log(_fell(*names))  # asked on the DLA, every layer warned off it (a GPU engine)
    k = decide(pred, 0, blog, locate(blog, names), names, None, doc["Layers"])
    assert k.known and set(k.realized.values()) == {"GPU"} and k.from_request == [] and k.loadables == 0
    # the same export without Metadata (names only): a kernel named after its Gemm still places it;
    # what only Metadata names (the Flatten and the Relus fused into the kernels) is placed by TensorRT's
    # warning that moved it to the GPU, never guessed from the request (before: DLA0, listed as a guess)
    k = decide(pred, 0, blog, locate(blog, names), names, None, [x["Name"] for x in doc["Layers"]])
    assert k.known and k.realized["/classifier/classifier.1/Gemm"] == "GPU"
    assert k.from_request == [] and {k.realized[n] for n in ("/Flatten", "/classifier/classifier.2/Relu",
                                                              "/classifier/classifier.5/Relu")} == {"GPU"}


def test_a_reformat_stands_for_no_layer_whatever_its_metadata():
    """A GPU reformat feeding a DLA loadable may carry the metadata of the layer it feeds: that layer
    is not read as the GPU's (which would contradict the log and leave the placement unknown)."""
    layers = [dict(x) for x in INSPECTOR]
    layers.insert(0, {"Name": "Reformatting CopyNode for Input Tensor 0 to {ForeignNode[c1...c2]}",
                      "LayerType": "Reformat", "Metadata": "[ONNX Layer: c1]"})
    layers.insert(1, {"Name": "in copy", "LayerType": "Reformat", "Metadata": "[ONNX Layer: c1]"})
    k = _decide(LOG, layers)
    assert k.known and k.source == "build log and engine inspector" and k.realized["c1"] == "DLA0"


def test_the_inspector_alone_never_reads_an_unplaceable_foreign_node_as_all_gpu():
    """No placement report in the log, and a ForeignNode the inspector reading cannot place (no DLA
    layer type, no nvm copy beside it: the form a DLA loadable may take in a real export, which
    placetune has never read): unknown, not "every layer ran on the GPU"."""
    bare = [{"Name": "{ForeignNode[c1...c2]}", "LayerType": "Unknown"}, {"Name": "pool", "LayerType": "Pooling"},
            {"Name": "fc", "LayerType": "CaskConvolution"}]
    k = _decide([], bare)
    assert not k.known and k.realized is None and k.loadables is None
    assert "{ForeignNode[c1...c2]} without saying whether it ran on the DLA" in k.reason
    # no ForeignNode at all and TensorRT's fallback warnings in the log: the inspector alone may say all-GPU
    k = _decide(_fell("c1", "r1", "c2", "pool"), bare[1:] + [{"Name": "c1 + r1", "LayerType": "CaskConvolution"},
                                {"Name": "c2", "LayerType": "CaskConvolution"}])
    assert k.known and set(k.realized.values()) == {"GPU"}


def test_a_layer_no_source_names_is_recorded_as_taken_from_the_request():
    """A layer neither the log nor the inspector names (optimised away, folded) keeps the requested
    device in the realised placement: that guess is listed, not silent."""
    names = NAMES + ["drop"]
    pred = {**PRED, "drop": "DLA0"}
    blog = parse_build_log(LOG)
    k = decide(pred, 0, blog, locate(blog, names), names)
    assert k.known and k.realized["drop"] == "DLA0" and k.from_request == ["drop"]
    extra = {}
    mark_known(extra, k, blog)
    assert extra["placement_from_request"] == ["drop"]
    assert _decide(LOG).from_request == []


def test_a_pipeline_engine_lists_the_layers_taken_from_the_request_too():
    """The same guess in a pipeline's DLA engine (jobs.read_realised, as engine mode's mark_known) is
    listed for the measurement, not only in a note: the pipeline's extra["placement_from_request"]."""
    from placetune.backends.tensorrt.jobs import read_realised

    names = ["c1", "r1", "c2", "drop"]
    pred = {n: "DLA0" for n in names}
    info = {"log": [["VERBOSE", line] for line in LOG[:2]]}
    realized, fallback, notes, unknown, guessed = dict(pred), {}, [], [], []
    read_realised(names, "DLA0", pred, info, realized, fallback, notes, "seg1", unknown, guessed=guessed)
    assert not unknown and realized["drop"] == "DLA0" and guessed == ["drop"]


def test_a_log_whose_names_match_no_layer_is_unknown_not_the_request():
    """The log reports loadables (or layers) under names that map onto none of the model's layers
    (another naming than the model's): every layer would be filled in from the request."""
    k = _decide(["{ForeignNode[x1...x9]} successfully offloaded to DLA.", "[GpuLayer] POOLING: y"])
    assert not k.known and k.realized is None and "none maps onto a layer of the model" in k.reason
    dla = ["---------- Layers Running on DLA ----------", "No layer is running on DLA"]
    k = _decide(dla + ["---------- Layers Running on GPU ----------", "[GpuLayer] CONVOLUTION: fc"])
    assert not k.known and "names only 1 of the 5 layers" in k.reason
    gpu = ["---------- Layers Running on GPU ----------", "[GpuLayer] CONVOLUTION: fc", "[GpuLayer] POOLING: pool",
           "[GpuLayer] CONVOLUTION: c2", "[GpuLayer] CONVOLUTION: c1"]
    assert _decide(dla + gpu).known
    # without any word of the DLA side, r1 (asked on the DLA, in no line) is not taken as on the DLA
    k = _decide(gpu)
    assert not k.known and "says nothing of the DLA" in k.reason


def test_an_inspector_showing_no_dla_layer_in_a_known_form_does_not_overrule_the_logs_loadables():
    """The log reports a loadable; the inspector's layers show none in the form placetune reads
    (no DLA layer type, no nvm copy beside the ForeignNode): the night would stop at its first DLA
    build on a healthy board. The log decides; an inspector that places some DLA layer still
    cross-checks it (test_the_two_sources_agree_or_the_placement_is_unknown)."""
    # a loadable under a name the log does not give it (a ForeignNode the log names is read by that
    # name: test_a_loadable_the_build_log_names_is_the_dlas_in_the_layer_information_without_nvm_copies_beside_it)
    bare = [{"Name": "dla_subgraph_0", "LayerType": "Unknown"}, {"Name": "pool", "LayerType": "Pooling"},
            {"Name": "fc", "LayerType": "CaskConvolution"}]
    k = _decide(LOG, bare)
    assert k.known and k.source == "build log" and k.loadables == 1 and k.realized["c2"] == "DLA0"
    # recorded, never silent: the inspector was read and not understood (a real DLA form to learn)
    assert k.unchecked.startswith("engine's layer information not compared: it shows no DLA layer")


def test_a_whole_network_fallback_is_all_gpu_with_its_reason():
    text = (CORPUS / "sensor-analytics-all-dla-fallback" / "build.log").read_text()
    blog = parse_build_log(text.splitlines())
    loc = locate(blog, NAMES)
    k = decide(PRED, 0, blog, loc, NAMES)
    assert k.known and set(k.realized.values()) == {"GPU"} and k.loadables == 0
    assert "All dla layers are falling back to GPU" in loc.fallback["c1"]


def test_a_measurement_says_whether_its_placement_is_known():
    assert Measurement(status="ok", latency_samples_ms=[1.0]).placement_known
    m = Measurement(status="ok", latency_samples_ms=[1.0], extra={"placement_known": False})
    assert not m.placement_known and not Measurement.from_dict(m.to_dict()).placement_known


def test_dla_failures_are_a_class_of_their_own(tmp_path):
    errs = parse_build_log((CORPUS / "trt-899-nvmedia-dla-submit" / "console.log").read_text().splitlines()).errors
    assert dla_failure(errs).startswith("NVMEDIA_DLA")
    assert dla_failure(["Error Code 4: Internal Error (Network has dynamic or shape inputs)"]) is None
    log = tmp_path / "t.log"
    log.write_text((CORPUS / "trt-899-nvmedia-dla-submit" / "console.log").read_text()
                   + "&&&& FAILED TensorRT.trtexec [TensorRT v7100] # trtexec\n")
    run = Run(["trtexec"], log, returncode=1)
    m = classify(run, run.lines(), PerfSummary(status="FAILED"), "time", {"extra": {}}, 60.0)
    assert m.status == "runtime_failed" and m.extra["failure_class"] == "dla" and "the DLA failed" in m.reason


@pytest.mark.parametrize("inspector", [False, True])
def test_the_tensorrt_backend_without_placement_lines(inspector, tmp_path, caplog, monkeypatch):
    from placetune import Evaluator, Model, Placement, Store
    from placetune.backends.tensorrt import placement_known
    from tests.test_tensorrt_backend import GN, _backend

    monkeypatch.setattr(placement_known, "_WARNED", [])  # as at a run's first build

    be = _backend(tmp_path, "10.3.0", faults={"NO_PLACEMENT_LOG": "1"}, inspector=inspector)
    try:
        ev = Evaluator(Model.load(GN), "orin-agx", backend=be, store=tmp_path / "pt.db", iterations=5,
                       precision="fp16", trt_version="10.3")
        with caplog.at_level(logging.WARNING):
            m = ev.evaluate(Placement.all_dla(ev.model))
        ev.close()
    finally:
        be.close()
    with Store(str(tmp_path / "pt.db")) as store:  # stored as measured: no realised placement when unknown
        (rec,) = store.measurements()
    assert rec.realized == m.realized and rec.measurement.placement_known == m.placement_known
    assert m.ok
    assert "placement sections" in " ".join(m.extra["notes"])
    if inspector:  # a ForeignNode between its nvm copies, as the real profile orders them: known from it alone
        assert m.placement_known and m.extra["placement_source"] == "engine inspector" and m.realized
    else:
        assert not m.placement_known and m.realized is None and m.dla_loadables == {}
        assert "neither the build log nor" in m.extra["placement_unknown"]
        warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert any("realised placement is UNKNOWN" in w for w in warned), warned


def test_the_16_loadable_check_counts_the_10_3_offload_lines():
    from placetune.backends.tensorrt.buildlog import split_prefix
    from placetune.backends.tensorrt.worker_names import count_loadables

    text = (CORPUS / "orin-agx-trt10.3-dla-offloaded" / "console.log").read_text()
    assert count_loadables([split_prefix(x)[1] for x in text.splitlines()]) == 2  # no [DlaLayer] line in it
    assert count_loadables(["[DlaLayer] {ForeignNode[a...b]}", "{ForeignNode[a...b]} successfully offloaded to DLA."]) == 1


def test_a_foreign_node_range_leaves_out_the_layers_the_gpu_names():
    layers = INSPECTOR[:4] + [{"Name": "r1", "LayerType": "PointWise"}] + INSPECTOR[4:]
    k = _decide([], layers)
    assert k.known and k.realized["r1"] == "GPU" and k.realized["c1"] == k.realized["c2"] == "DLA0"


def test_measure_says_an_unknown_placement_in_words():
    from types import SimpleNamespace as NS

    from placetune.cli.measure import _measure_human

    m = Measurement(status="ok", latency_samples_ms=[1.0, 2.0], realized=None,
                    extra={"placement_known": False, "placement_unknown": "neither source says"})
    text = _measure_human(m, NS(name="net"), NS(name="orin-agx"))
    assert "realised: UNKNOWN (neither source says)" in text
    m = Measurement(status="ok", latency_samples_ms=[1.0], realized={"a": "GPU"})
    assert "UNKNOWN" not in _measure_human(m, NS(name="net"), NS(name="orin-agx"))


@pytest.mark.parametrize("artefact, dla", [
    ("trt-899-nvmedia-dla-submit", True),  # NvMedia DLA runtime errors (7.1, Xavier NX)
    ("trt-2307-orin-dla-build-error", True),  # the DLA build's NvMedia tensor cache (Orin)
    ("trt-4106-dla-standalone-load", True),  # a DLA standalone loadable given to TensorRT's runtime
    ("trt-1108-xavier-nx-7.1.3-dla-build-failure", True),  # RegionType::kNVM assertion (7.1.3)
    ("cudla-samples-34-8.4.1-standalone-build-failure", True),  # nvmRegionOptimizer's isDLA assertion (8.4.1)
    ("trt-2752-8.4-dla-standalone-one-graph", True),  # a safety DLA build that splits into several graphs
    ("trt-828-xavier-nx-7.1.3-quoted-knvm-failure", True),  # kNVM assertion quoted in Markdown
    ("deepstream-yolo-27-trt7-dla-error-fallbacks", False),  # 7.x DLA validator ERROR lines, then fallbacks
    ("trt-3728-parser-error", False), ("trt-4488-parser-error", False), ("trt-2514-unknown-option", False),
    ("cudapointpillars-1-libprotobuf", False),
])
def test_dla_failures_of_the_corpus_are_told_from_the_others(artefact, dla):
    import json

    from placetune.backends.trtexec.parse import error_lines

    prov = json.loads((CORPUS / artefact / "provenance.json").read_text())
    lines = (CORPUS / artefact / prov["file"]).read_text().splitlines()
    assert (dla_failure(parse_build_log(lines).errors + error_lines(lines)) is not None) is dla


def test_a_log_whose_loadable_counts_disagree_is_not_trusted():
    k = _decide(["Number of DLA node candidates offloaded : 2 out of 2"] + LOG[1:])  # 2 said, 1 offloaded line
    assert not k.known and k.loadables is None and "loadable counts disagree" in k.reason
    k = _decide(["Number of DLA node candidates offloaded : 1 out of 3"] + LOG[1:])  # 2 candidates fell back
    assert not k.known and "r1" in k.reason  # inside the range {ForeignNode[c1...c2]}: maybe a candidate not offloaded
    k = _decide(["Number of DLA node candidates offloaded : 1 out of 3"] + LOG[1:], INSPECTOR)  # the second source
    assert k.known and k.loadables == 1 and k.realized["r1"] == "DLA0"


@pytest.mark.parametrize("inspector", [False, True])
def test_a_pipeline_engine_without_placement_lines_is_placed_by_its_layer_information_or_unknown(tmp_path, inspector):
    """A pipeline's DLA segments whose build logs print no placement lines: read from each engine's
    layer information, as an engine-mode measurement is; with the inspector off, unknown."""
    from placetune import Evaluator, Model, Placement
    from tests.test_tensorrt_backend import GN, _backend

    be = _backend(tmp_path, "8.5.2", faults={"NO_PLACEMENT_LOG": "1"}, inspector=inspector)
    try:
        ev = Evaluator(Model.load(GN), "orin-agx", backend=be, store=None, iterations=5, mode="pipeline",
                       trt_version="8.5")
        m = ev.evaluate(Placement(ev.model, {"/cnn/cnn.0/Conv": "DLA0", "/cnn/cnn.3/Conv": "DLA1"}))
    finally:
        be.close()
    assert m.status == "ok", m.reason
    if inspector:
        assert m.placement_known and m.realized["/cnn/cnn.0/Conv"] == "DLA0", m.extra.get("placement_unknown")
        assert m.realized["/cnn/cnn.3/Conv"] == "DLA1" and m.dla_loadables == {"DLA0": 1, "DLA1": 1}
        assert any("engine's layer information only" in n for n in m.extra["notes"])
        return
    assert not m.placement_known and m.realized is None and m.dla_loadables == {}
    assert "16-per-core check" in m.extra["placement_unknown"]


def test_candidates_not_offloaded_leave_the_layers_no_line_places_unknown():
    """TensorRT 10.3's ``Number of DLA node candidates offloaded : N out of M`` with N < M: a DLA
    candidate subgraph did not go to the DLA. A layer asked on the DLA that neither an offloaded
    ForeignNode nor a [GpuLayer] line names may have been in it: unknown, never the request."""
    names = ["c1", "r1", "c2", "r2", "c3", "r3", "pool", "fc"]
    pred = {n: ("GPU" if n in ("pool", "fc") else "DLA0") for n in names}
    lines = ["Number of DLA node candidates offloaded : 1 out of 2",
             "{ForeignNode[c1...r2]} successfully offloaded to DLA.",
             "[GpuLayer] REDUCE: pool", "[GpuLayer] FULLY_CONNECTED: fc"]
    blog = parse_build_log(lines)
    k = decide(pred, 0, blog, locate(blog, names), names)
    assert not k.known and k.realized is None
    assert "only 1 of 2 DLA candidate" in k.reason and "c3" in k.reason
    # the same layers named on the GPU: those are the GPU's, but r1 and c2, inside the offloaded range, may be
    # the candidate that was not offloaded (the GPU report is printed before the DLA compiles): unknown
    blog = parse_build_log(lines + ["[GpuLayer] CONVOLUTION: c3 + r3"])
    k = decide(pred, 0, blog, locate(blog, names), names)
    assert not k.known and "r1, c2" in k.reason and "ForeignNode[A...B]" in k.reason
    # the loadable named by its members (10.3's {ForeignNode[/fc/Gemm + ...]} form): known
    named = [lines[0], "{ForeignNode[c1 + r1 + c2 + r2]} successfully offloaded to DLA.", *lines[2:],
             "[GpuLayer] CONVOLUTION: c3 + r3"]
    blog = parse_build_log(named)
    k = decide(pred, 0, blog, locate(blog, names), names)
    assert k.known and k.realized["c3"] == "GPU" and k.realized["c1"] == k.realized["c2"] == "DLA0"
    # every candidate offloaded: a layer no line names keeps the request, listed (optimised away)
    blog = parse_build_log(["Number of DLA node candidates offloaded : 1 out of 1"] + lines[1:])
    k = decide(pred, 0, blog, locate(blog, names), names)
    assert k.known and k.from_request == ["c3", "r3"]


def test_a_pipeline_segment_is_read_as_an_engine_is_never_as_requested(caplog, monkeypatch):
    """The pipeline and replicas modes read each DLA engine's build log with the engine mode's rules:
    a log whose loadables name no layer of the segment, or whose counts disagree, leaves the
    segment's placement unknown (and the measurement's), said once on the terminal as in engine
    mode; a log that places it gives it."""
    from placetune.backends.tensorrt import placement_known
    from placetune.backends.tensorrt.jobs import mark_unknown, read_realised

    monkeypatch.setattr(placement_known, "_WARNED", [])  # as at a run's first build

    layers = ["c1", "r1", "c2"]
    pred = {n: "DLA0" for n in layers}

    def read(lines):
        realized, fallback, notes, unknown = dict(pred), {}, [], []
        n = read_realised(layers, "DLA0", pred, {"log": [["VERBOSE", x] for x in lines]}, realized, fallback,
                          notes, "seg1", unknown=unknown)[0]
        kw = {"realized": realized, "dla_loadables": {"DLA0": n}, "extra": {}}
        mark_unknown(kw, unknown)
        return kw, fallback, notes

    with caplog.at_level(logging.WARNING):
        kw, _, notes = read(["Number of DLA node candidates offloaded : 1 out of 1",
                             "{ForeignNode[x1...x9]} successfully offloaded to DLA."])  # names no layer of the segment
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "UNKNOWN" in warned[0] and "seg1" in warned[0]
    assert kw["extra"]["placement_known"] is False and kw["realized"] is None and kw["dla_loadables"] == {}
    assert "seg1" in kw["extra"]["placement_unknown"] and "none maps onto a layer" in kw["extra"]["placement_unknown"]
    kw, _, _ = read(["[DlaLayer] {ForeignNode[c1...r1]}", "[DlaLayer] {ForeignNode[c2]}",
                     "{ForeignNode[c1...c2]} successfully offloaded to DLA."])  # 2 [DlaLayer] lines, 1 offloaded
    assert kw["extra"]["placement_known"] is False and "disagree" in kw["extra"]["placement_unknown"]
    kw, fallback, _ = read(["Number of DLA node candidates offloaded : 1 out of 1",
                            "{ForeignNode[c1...r1]} successfully offloaded to DLA.", "[GpuLayer] CONVOLUTION: c2"])
    assert kw["extra"]["placement_known"] is True and kw["dla_loadables"] == {"DLA0": 1}
    assert kw["realized"] == {"c1": "DLA0", "r1": "DLA0", "c2": "GPU"} and "c2" in fallback
    kw, _, _ = read(["[I] [TRT] Detected 1 inputs and 1 output network tensors."])
    assert kw["extra"]["placement_known"] is False and "no placement report" in kw["extra"]["placement_unknown"]


def test_gpu_lines_alone_never_put_the_layers_they_do_not_name_on_the_dla():
    """A log whose [GpuLayer] lines are read but whose DLA side is in no form read here (no DLA
    loadable, no DLA section, no offload count): the layers asked on the DLA that no line names
    are unknown, not on the DLA as asked. An explicit empty DLA section is a DLA report."""
    names = NAMES + ["c3", "c4", "c5", "c6"]
    pred = {**PRED, "c3": "GPU", "c4": "GPU", "c5": "GPU", "c6": "GPU"}  # 4 of 9 asked on the DLA
    gpu_only = ["[GpuLayer] POOLING: pool", "[GpuLayer] CONVOLUTION: fc", "[GpuLayer] CONVOLUTION: c3 + c4",
                "[GpuLayer] CONVOLUTION: c5 + c6"]
    blog = parse_build_log(gpu_only)
    k = decide(pred, 0, blog, locate(blog, names), names)
    assert not k.known and k.realized is None and "says nothing of the DLA" in k.reason and "c1" in k.reason
    blog = parse_build_log(["---------- Layers Running on DLA ----------", "No layer is running on DLA",
                            "---------- Layers Running on GPU ----------"] + gpu_only)
    assert blog.reports_dla
    blog = parse_build_log(LOG)
    assert blog.reports_dla and _decide(LOG).known


def test_an_inspector_range_that_cannot_be_opened_leaves_the_complete_log_in_charge():
    # the inspector names the loadable by an end the parser never registered: it can neither confirm
    # nor contradict the log, which placed every layer; the log decides and the measurement says so
    layers = [dict(x) for x in INSPECTOR]
    layers[1]["Name"] = "{ForeignNode[c1...(Unnamed Layer* 7) [Shuffle]]}"
    k = _decide(LOG, layers)
    assert k.known and k.source == "build log" and k.loadables == 1
    assert k.realized == {"c1": "DLA0", "r1": "DLA0", "c2": "DLA0", "pool": "GPU", "fc": "GPU"}
    assert "not compared" in k.unchecked and "Unnamed Layer* 7" in k.unchecked
    extra: dict = {}
    mark_known(extra, k, parse_build_log(LOG))
    assert extra["placement_known"] is True and "Unnamed Layer* 7" in extra["placement_unchecked"]
    # with no log to decide, the same range leaves the placement unknown
    k = _decide([], layers)
    assert not k.known and "Unnamed Layer* 7" in k.reason


def test_an_inspector_alone_showing_no_dla_layer_without_any_fallback_in_the_log_is_unknown_not_all_gpu():
    """The inspector alone (trtexec at its default verbosity prints no placement lines on TensorRT
    10.3), a DLA engine whose loadable is in a form placetune does not read (no ForeignNode, no DLA
    layer type, but its Metadata names the ONNX nodes, as TensorRT 10's engine layers carry): every
    layer would read as the GPU's. A real fallback is warned in the build log at WARNING ('Unsupported
    on DLA. Switching this layer's device type to GPU.'); with no such line, all-GPU is not evidence
    but an unread form: the placement is unknown, and said so."""
    dla_in_unknown_form = [{"Name": "dla_subgraph_0", "LayerType": "Unknown", "Metadata": "[ONNX Layer: c1]\x1e"
                            "[ONNX Layer: r1]\x1e[ONNX Layer: c2]\x1e[ONNX Layer: pool]"},
                           {"Name": "fc", "LayerType": "CaskConvolution"}]
    k = _decide(["[I] [TRT] Detected 1 inputs and 1 output network tensors."], dla_in_unknown_form)
    assert not k.known and k.realized is None
    assert "no DLA layer in a form placetune reads" in k.reason and "c1, r1, c2" in k.reason
    # the same layer information with TensorRT's fallback warnings in the log: a real fallback, read as the GPU's
    k = _decide(_fell("c1", "r1", "c2", "pool"), dla_in_unknown_form)
    assert k.known and set(k.realized.values()) == {"GPU"}
    # TensorRT's own count of DLA candidates not offloaded is a fallback it told of, too
    k = _decide(["Number of DLA node candidates offloaded : 0 out of 1"], dla_in_unknown_form)
    assert k.known and set(k.realized.values()) == {"GPU"}


# a DLA loadable in a form placetune does not read: no ForeignNode, no DLA layer type, no nvm copy
# beside it; TensorRT 10's Metadata names its ONNX nodes. The inspector reading takes it for a GPU layer.
DLA_IN_UNKNOWN_FORM = [{"Name": "dla_subgraph_0", "LayerType": "Unknown", "Metadata": "[ONNX Layer: c1]\x1e"
                        "[ONNX Layer: r1]\x1e[ONNX Layer: c2]\x1e[ONNX Layer: pool]"},
                       {"Name": "fc", "LayerType": "CaskConvolution"}]


def test_fallback_warnings_naming_some_layers_never_put_the_others_on_the_gpu():
    """The build log warns that SOME layers asked on the DLA fell back ('Unsupported on DLA.
    Switching this layer's device type to GPU'), prints no placement report, and the layer
    information shows no DLA layer in a form placetune reads. A layer asked on the DLA is the GPU's
    only where a source says so: the warned layers are on the GPU (with their warning); of the
    others neither source says where they ran, so the placement is unknown, never all-GPU."""
    k = _decide(_fell("c1"), DLA_IN_UNKNOWN_FORM)
    assert not k.known and k.realized is None and k.loadables is None
    assert "r1, c2, pool" in k.reason and "c1" in k.reason.split("r1, c2, pool")[0]
    assert k.fallback_warned == ["c1"]
    # every layer asked on the DLA warned of: known, all on the GPU, each with its warning
    k = _decide(_fell("c1", "r1", "c2", "pool"), DLA_IN_UNKNOWN_FORM)
    assert k.known and set(k.realized.values()) == {"GPU"}
    # a DLA loadable the inspector does read, beside the warned layer: its GPU layers are read as such
    layers = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[r1...c2]}", "LayerType": "Unknown"},
              {"Name": "c2 from nvm", "LayerType": "Reformat"}, {"Name": "c1", "LayerType": "CaskConvolution"},
              {"Name": "pool", "LayerType": "CaskPooling"}, {"Name": "fc", "LayerType": "CaskConvolution"}]
    k = _decide(_fell("c1"), layers)
    assert k.known and k.realized == {"c1": "GPU", "r1": "DLA0", "c2": "DLA0", "pool": "GPU", "fc": "GPU"}
    # TensorRT's count of DLA candidates with some offloaded says loadables exist: not all-GPU either
    k = _decide(["Number of DLA node candidates offloaded : 1 out of 2"] + _fell("c1"), DLA_IN_UNKNOWN_FORM)
    assert not k.known and "r1, c2, pool" in k.reason


def test_a_placement_report_silent_on_a_layer_leaves_it_unknown_not_the_unread_inspectors_gpu():
    """The log's [GpuLayer] lines place some layers and say nothing of the DLA; the layer information
    shows no DLA layer in a form read here and lists r1 in an engine layer it takes for the GPU's:
    r1 is in no source that positively says GPU, so the placement is unknown."""
    gpu = ["[GpuLayer] CONVOLUTION: c1", "[GpuLayer] CONVOLUTION: c2", "[GpuLayer] POOLING: pool",
           "[GpuLayer] CONVOLUTION: fc"]
    k = _decide(gpu, DLA_IN_UNKNOWN_FORM)
    assert not k.known and k.realized is None and "r1" in k.reason
    # the log's whole-network fallback says it positively: every layer on the GPU
    k = _decide(["All dla layers are falling back to GPU"] + gpu, DLA_IN_UNKNOWN_FORM)
    assert k.known and set(k.realized.values()) == {"GPU"}


def test_a_pipeline_segment_and_a_build_read_the_partly_warned_fallback_alike(caplog, monkeypatch):
    """The pipeline and replicas modes and ``placetune build`` read each engine with decide():
    the same log and layer information leave the segment unknown, the warned layer on the GPU
    with its warning, said once on the terminal."""
    from placetune.backends.tensorrt import placement_known
    from placetune.backends.tensorrt.jobs import mark_unknown, read_realised

    monkeypatch.setattr(placement_known, "_WARNED", [])  # as at a run's first build
    layers = ["c1", "r1", "c2", "pool", "fc"]
    pred = dict(PRED)
    info = {"log": [["WARNING", x] for x in _fell("c1")], "inspector": json.dumps({"Layers": DLA_IN_UNKNOWN_FORM})}
    realized, fallback, notes, unknown = dict(pred), {}, [], []
    with caplog.at_level(logging.WARNING):
        read_realised(layers, "DLA0", pred, info, realized, fallback, notes, "seg1", unknown=unknown)
        kw = {"realized": realized, "dla_loadables": {}, "extra": {}}
        mark_unknown(kw, unknown)
    assert kw["extra"]["placement_known"] is False and kw["realized"] is None
    assert "r1, c2, pool" in kw["extra"]["placement_unknown"]
    assert "Unsupported on DLA" in fallback["c1"] and set(fallback) == {"c1"}
    assert realized["c1"] == "GPU"  # what placetune build reports of it; the others 'unknown'
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "UNKNOWN" in warned[0]


def test_an_unchecked_placement_is_said_once_on_the_terminal(caplog, monkeypatch):
    """A placement resting on the build log alone because the layer information was read but not
    understood (placement_unchecked) is recorded and said on the terminal once, at the first build,
    as an unknown placement is; in every mode."""
    from placetune.backends.tensorrt import placement_known
    from placetune.backends.tensorrt.jobs import mark_unknown, read_realised

    monkeypatch.setattr(placement_known, "_UNCHECKED_SAID", [])  # as at a run's first build
    bare = [{"Name": "dla_subgraph_0", "LayerType": "Unknown"}, {"Name": "pool", "LayerType": "Pooling"},
            {"Name": "fc", "LayerType": "CaskConvolution"}]
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            extra: dict = {}
            mark_known(extra, _decide(LOG, bare), parse_build_log(LOG))
            assert extra["placement_known"] is True and "not compared" in extra["placement_unchecked"]
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "UNCHECKED" in warned[0] and "not compared" in warned[0]
    # a pipeline segment (and a replica, a build) records it too, and says it once in the same process
    monkeypatch.setattr(placement_known, "_UNCHECKED_SAID", [])
    caplog.clear()
    layers = ["c1", "r1", "c2", "pool", "fc"]
    info = {"log": [["VERBOSE", x] for x in LOG], "inspector": json.dumps({"Layers": bare})}
    realized, fallback, notes, unknown, unchecked = dict(PRED), {}, [], [], []
    with caplog.at_level(logging.WARNING):
        read_realised(layers, "DLA0", PRED, info, realized, fallback, notes, "seg1", unknown=unknown,
                      unchecked=unchecked)
        kw = {"realized": realized, "dla_loadables": {}, "extra": {}}
        mark_unknown(kw, unknown, unchecked)
    assert kw["extra"]["placement_known"] is True and kw["realized"]["c1"] == "DLA0"
    assert kw["extra"]["placement_unchecked"].startswith("seg1: engine's layer information not compared")
    assert any("seg1" in n and "not compared" in n for n in notes)
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "UNCHECKED" in warned[0]


def test_the_trtexec_backend_reads_the_partly_warned_fallback_as_the_others_do(tmp_path, monkeypatch):
    """trtexec's build log with a fallback warning for c1 and no placement report, and an
    --exportLayerInfo file showing no DLA layer in the form read here: unknown, c1's warning kept."""
    from types import SimpleNamespace as NS

    from placetune.backends.tensorrt import placement_known
    from placetune.backends.trtexec.engine import Engine, realised

    monkeypatch.setattr(placement_known, "_WARNED", [])
    info = tmp_path / "layers.json"
    info.write_text(json.dumps({"Layers": DLA_IN_UNKNOWN_FORM}))
    eng = Engine("DLA0", 0, 1, [], tmp_path / "e.plan", blog=parse_build_log(_fell("c1")), layer_info_path=info)
    r = NS(realized=NS(model=NS(names=NAMES), as_dict=lambda: dict(PRED)), fallback={})
    got = realised(eng, r)
    assert got.extra["placement_known"] is False and got.realized == {} and got.loadables is None
    assert "r1, c2, pool" in got.extra["placement_unknown"]
    assert set(got.fallback) == {"c1"} and "Unsupported on DLA" in got.fallback["c1"]


def test_a_candidate_not_offloaded_inside_a_foreignnode_range_leaves_its_layers_unknown():
    """TensorRT 10.3 names a DLA loadable by its ends, {ForeignNode[A...B]}, and a candidate subgraph
    that the DLA did not take goes to the GPU without a warning (TensorRT's DLA docs: with GPU fallback
    such layers "silently fall back"; the log counts it, "N out of M"). Its layers may lie between A
    and B in network order (a parallel branch): with no GPU report in the log and no layer information
    compared, the layers only the range's interior places are unknown, never read as the DLA's."""
    names = ["a", "b", "c", "d", "e"]
    pred = {"a": "DLA0", "b": "DLA0", "c": "DLA0", "d": "DLA0", "e": "GPU"}
    lines = ["Number of DLA node candidates offloaded : 1 out of 2", "{ForeignNode[a...d]} successfully offloaded to DLA."]
    blog = parse_build_log(lines)
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names)
    assert not k.known and k.realized is None
    assert "only 1 of 2 DLA candidate" in k.reason and "b, c" in k.reason and "ForeignNode[A...B]" in k.reason
    # every candidate offloaded: the range is the loadable
    blog = parse_build_log(["Number of DLA node candidates offloaded : 1 out of 1"] + lines[1:])
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names)
    assert k.known and k.realized == {"a": "DLA0", "b": "DLA0", "c": "DLA0", "d": "DLA0", "e": "GPU"}
    # a GPU report does not settle it: TensorRT prints it before the DLA compiles the candidates (the
    # DRIVE Orin log of corpus nvforum-337313-drive-orin-offloaded: the report 8 s before the offload line)
    blog = parse_build_log(lines + ["[GpuLayer] CONVOLUTION: e"])
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names)
    assert not k.known and "b, c" in k.reason
    # TensorRT's own fallback warning names a layer: the GPU's, and the rest still unknown
    blog = parse_build_log(lines + _fell("b"))
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names)
    assert not k.known and k.fallback_warned == ["b"] and "(c)" in k.reason
    # the engine's layer information read in its DLA form lists the branch on the GPU: they disagree
    layers = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[a...d]}", "LayerType": "Unknown"},
              {"Name": "d from nvm", "LayerType": "Reformat"}, {"Name": "b + c", "LayerType": "CaskConvolution"},
              {"Name": "e", "LayerType": "CaskConvolution"}]
    blog = parse_build_log(lines)
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers)
    assert not k.known and "disagree on 2 layer(s) (b, c)" in k.reason
    # ... or on the DLA: the two sources agree
    layers[3] = {"Name": "b", "LayerType": "Unknown"}
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers[:3] + layers[4:])
    assert k.known and k.realized["b"] == "DLA0" and k.source == "build log and engine inspector"


def test_a_candidate_not_offloaded_may_hide_in_a_gpu_layer_that_names_no_model_layer():
    """The engine's layer information reads a {ForeignNode[A...B]} range's interior from the same range
    as the build log, so it confirms the interior only where every GPU engine layer names the model
    layers it computes. A TensorRT 10 Myelin kernel without Metadata (``__myl_...``) names none: the
    candidate TensorRT did not offload ('1 out of 2') may be in it, so the interior is unknown, never
    the DLA's. Before, the two sources 'agreed' and the branch that ran on the GPU was recorded on DLA0."""
    names = ["a", "b", "c", "d", "e"]
    pred = {"a": "DLA0", "b": "DLA0", "c": "DLA0", "d": "DLA0", "e": "GPU"}
    lines = ["Number of DLA node candidates offloaded : 1 out of 2", "{ForeignNode[a...d]} successfully offloaded to DLA."]
    blog = parse_build_log(lines)
    layers = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[a...d]}", "LayerType": "Unknown"},
              {"Name": "d from nvm", "LayerType": "Reformat"}, {"Name": "__myl_ConvAdd_myl3_0", "LayerType": "kgen"},
              {"Name": "e", "LayerType": "CaskConvolution"}]
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers)
    assert not k.known and k.realized is None
    assert "only 1 of 2 DLA candidate" in k.reason and "b, c" in k.reason and "__myl_ConvAdd_myl3_0" in k.reason
    assert k.source == "build log and engine inspector"
    # the kernel's Metadata names the nodes it computes: they are the GPU's, and the sources disagree
    layers[3] = {**layers[3], "Metadata": "[ONNX Layer: b]\x1e[ONNX Layer: c]"}
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers)
    assert not k.known and "disagree on 2 layer(s) (b, c)" in k.reason
    # every candidate offloaded: the range is the loadable, whatever the unnamed kernel is
    blog = parse_build_log(["Number of DLA node candidates offloaded : 1 out of 1"] + lines[1:])
    layers[3] = {"Name": "__myl_ConvAdd_myl3_0", "LayerType": "kgen"}
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers)
    assert k.known and k.realized == {"a": "DLA0", "b": "DLA0", "c": "DLA0", "d": "DLA0", "e": "GPU"}


def test_a_loadable_the_build_log_names_is_the_dlas_in_the_layer_information_without_nvm_copies_beside_it():
    """A DLA loadable is not always between nvm copies: in the real profile of a GoogleNet whose GPU layers
    feed a DLA group (corpus hax-conn-googlenet-gpu-to-dla-transition-profile) the group follows a GPU
    reformatter and precedes the GPU's reformatter, with no 'to nvm'/'from nvm' row. The build log names
    each loadable ('{ForeignNode[...]} successfully offloaded to DLA.', corpus orin-agx-trt10.3-dla-offloaded,
    or '[DlaLayer]'): an engine layer of that very name, not typed Myelin, is that loadable. Before, the
    second loadable of such an engine was read as GPU layers, the two sources 'disagreed' and a healthy
    board's all-DLA0 check failed."""
    names = ["c1", "r1", "c2", "pool", "fc"]
    pred = {"c1": "DLA0", "r1": "DLA0", "c2": "DLA0", "pool": "GPU", "fc": "DLA0"}
    lines = ["Number of DLA node candidates offloaded : 2 out of 2", "{ForeignNode[c1...c2]} successfully offloaded to DLA.",
             "{ForeignNode[fc]} successfully offloaded to DLA."]
    layers = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[c1...c2]}", "LayerType": "Unknown"},
              {"Name": "c2 from nvm", "LayerType": "Reformat"}, {"Name": "in copy finish", "LayerType": "Reformat"},
              {"Name": "pool", "LayerType": "CaskPooling"},
              {"Name": "Reformatting CopyNode for Input Tensor 0 to {ForeignNode[fc]}", "LayerType": "Reformat"},
              {"Name": "{ForeignNode[fc]}", "LayerType": "Unknown"},
              {"Name": "Reformatting CopyNode for Output Tensor 0 to out", "LayerType": "Reformat"}]
    blog = parse_build_log(lines)
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known and k.source == "build log and engine inspector" and k.loadables == 2
    assert k.realized == {"c1": "DLA0", "r1": "DLA0", "c2": "DLA0", "pool": "GPU", "fc": "DLA0"}
    assert inspector_dla_layers(layers, blog.dla_nodes) == ["{ForeignNode[c1...c2]}", "{ForeignNode[fc]}"]
    # still a cross-check: the layer information listing fc as a GPU layer disagrees with the log
    gpu_fc = layers[:5] + [{"Name": "fc", "LayerType": "CaskConvolution"}]
    k = decide(pred, 0, blog, locate(blog, names), names, None, gpu_fc)
    assert not k.known and "fc" in k.reason
    # a Myelin region of that name is the GPU's, whatever the log says
    assert inspector_dla_layers([{"Name": "{ForeignNode[fc]}", "LayerType": "Myelin"}], blog.dla_nodes) == []


@pytest.mark.parametrize("row", ["c2 finish", "{ForeignNode[c1...c2]} output reformatter 0",
                                 "{ForeignNode[c1...c2]} reformatted input 0 finish",
                                 "{ForeignNode[c1...c2]} output to be reformatted 0 finish"])
def test_the_synchronisation_rows_around_a_dla_loadable_stand_for_no_layer(row):
    """Real DLA profiles name the rows around a DLA group after it or after its last layer:
    'loss3/classifier finish', '{...} output reformatter 0', '{...} reformatted input 0 finish',
    '{...} output to be reformatted 0 finish' (corpus hax-conn-googlenet-gpu-to-dla-transition-profile and
    hax-conn-googlenet-dla-whole-network-profile), besides 8.x's '<tensor> copy finish'. Such a row in the
    engine's layer information, of a type that is not 'Reformat' (no DLA engine's export is published), is
    the builder's, not a GPU layer of the model: before, 'c2 finish' put c2 on the GPU against the build
    log and the DLA check failed on a healthy board. A model layer of that very name is still read."""
    layers = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[c1...c2]}", "LayerType": "Unknown"},
              {"Name": row, "LayerType": "Unknown"}, {"Name": "pool", "LayerType": "Pooling"},
              {"Name": "fc", "LayerType": "CaskConvolution"}]
    k = _decide(LOG, layers)
    assert k.known and k.source == "build log and engine inspector" and k.realized["c2"] == "DLA0"
    if row.startswith("{"):
        return
    names = [*NAMES, row]
    pred = {**PRED, row: "GPU"}
    blog = parse_build_log(LOG + [f"[GpuLayer] CONVOLUTION: {row}"])
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known and k.realized[row] == "GPU" and k.realized["c2"] == "DLA0"


def test_a_reformat_into_a_dla_loadable_is_never_counted_as_a_loadable():
    """The builder's reformat into or out of a loadable ('Reformatting CopyNode for Input Tensor 0 to
    {ForeignNode[...]}', TensorRT 8+'s name of a reformat) is no loadable whatever its LayerType says (no
    published DLA engine's export shows it): counted as one, the loadable count would differ from the build
    log's and a healthy board's DLA check would fail as 'unknown'."""
    layers = [{"Name": "Reformatting CopyNode for Input Tensor 0 to {ForeignNode[c1...c2]}", "LayerType": "DlaReformat"},
              {"Name": "{ForeignNode[c1...c2]}", "LayerType": "DLA"}, {"Name": "pool", "LayerType": "Pooling"},
              {"Name": "fc", "LayerType": "CaskConvolution"}]
    assert inspector_dla_layers(layers) == ["{ForeignNode[c1...c2]}"]
    k = _decide(LOG, layers)
    assert k.known and k.loadables == 1 and k.source == "build log and engine inspector"


def test_the_builders_reshape_after_a_gemm_on_the_dla_is_not_the_gemms_gpu_layer():
    """A Gemm TensorRT runs on the DLA comes with a GPU shuffle the builder names after it,
    ``reshape_after_<Gemm>``: TensorRT 10.3 on AGX Orin prints ``{ForeignNode[/fc/Gemm + ...]} successfully
    offloaded to DLA.`` and ``[GpuLayer] SHUFFLE: reshape_after_/fc/Gemm`` (corpus
    orin-agx-trt10.3-dla-offloaded; 8.5.2 on an AGX Orin: ``reshape_after_/linear/Gemm`` of model-bn, whose
    Gemm is the selftest network's last layer too, corpus dlatutorial-repro-orin64-8.5.2-model-bn). In the
    engine's layer information that shuffle may carry the Gemm's Metadata (TensorRT 10 names in Metadata the
    ONNX nodes an engine layer comes from; no DLA engine's export is published): it stands for no layer
    of the model, as the build log reader reads its name. Before, its Metadata put the Gemm on the GPU
    against the log and a healthy board's all-DLA0 check failed ('disagree on 1 layer(s) (/fc/Gemm)')."""
    names = ["/conv1/Conv", "/relu/Relu", "/avgpool/GlobalAveragePool", "/fc/Gemm"]
    pred = {n: "DLA0" for n in names}
    text = (CORPUS / "orin-agx-trt10.3-dla-offloaded" / "console.log").read_text().splitlines()
    lines = [x.replace("/layer4/layer4.2/relu_2/Relu", "/relu/Relu") for x in text]
    blog = parse_build_log(lines + ["[V] [TRT] [GpuLayer] REDUCE: /avgpool/GlobalAveragePool",
                                    "[V] [TRT] [GpuLayer] SHUFFLE: reshape_after_/fc/Gemm"])
    fc = "{ForeignNode[/fc/Gemm + (Unnamed Layer* 125) [ElementWise]]}"
    layers = [{"Name": "input to nvm", "LayerType": "Reformat"},
              {"Name": "{ForeignNode[/conv1/Conv.../relu/Relu]}", "LayerType": "Unknown"},
              {"Name": "/relu/Relu_output_0 from nvm", "LayerType": "Reformat"},
              {"Name": "/avgpool/GlobalAveragePool", "LayerType": "CaskPooling",
               "Metadata": "[ONNX Layer: /avgpool/GlobalAveragePool]"},
              {"Name": "/avgpool/GlobalAveragePool_output_0 to nvm", "LayerType": "Reformat"},
              {"Name": fc, "LayerType": "Unknown"}, {"Name": "/fc/Gemm_output_0 from nvm", "LayerType": "Reformat"},
              {"Name": "reshape_after_/fc/Gemm", "LayerType": "NoOp", "Metadata": "[ONNX Layer: /fc/Gemm]"}]
    k = decide(pred, 0, blog, locate(blog, names), names, None, layers)
    assert k.known and k.loadables == 2, k.reason
    assert k.realized == {"/conv1/Conv": "DLA0", "/relu/Relu": "DLA0", "/avgpool/GlobalAveragePool": "GPU",
                          "/fc/Gemm": "DLA0"}
    # the Gemm itself listed among the GPU's engine layers still disagrees with the log
    gpu = layers[:5] + [{"Name": "/fc/Gemm", "LayerType": "CaskGemm", "Metadata": "[ONNX Layer: /fc/Gemm]"}]
    k = decide(pred, 0, blog, locate(blog, names), names, None, gpu)
    assert not k.known and "/fc/Gemm" in k.reason


@pytest.mark.parametrize("lines", [["Number of DLA node candidates offloaded : 1 out of 2"], []])
def test_a_gpu_kernel_naming_part_of_a_fallen_back_branch_leaves_the_rest_of_the_branch_unknown(lines):
    """A GPU kernel whose Metadata names b, a layer asked on the DLA inside the loadable's {ForeignNode[a...d]}
    range: the branch b, c fell back, and c, fused into that kernel without a record of its own, was read as the
    DLA's because only the range placed it. The layers it does not name are unknown, never the range's."""
    names = ["a", "b", "c", "d", "e"]
    pred = {"a": "DLA0", "b": "DLA0", "c": "DLA0", "d": "DLA0", "e": "GPU"}
    layers = [{"Name": "in to nvm", "LayerType": "Reformat"}, {"Name": "{ForeignNode[a...d]}", "LayerType": "Unknown"},
              {"Name": "d from nvm", "LayerType": "Reformat"},
              {"Name": "__myl_ConvAdd_myl3_0", "LayerType": "kgen", "Metadata": "[ONNX Layer: b]"},
              {"Name": "e", "LayerType": "CaskConvolution"}]
    blog = parse_build_log(lines)
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers)
    assert not k.known and k.realized is None
    assert "(b) on the GPU" in k.reason and "(c) are named by no engine layer" in k.reason
    # the kernel's Metadata names the whole branch: every layer is read, the branch on the GPU
    layers[3] = {**layers[3], "Metadata": "[ONNX Layer: b]\x1e[ONNX Layer: c]"}
    k = decide(pred, 0, blog, locate(blog, names, None, ["e"]), names, None, layers)
    assert k.known and k.realized == {"a": "DLA0", "b": "GPU", "c": "GPU", "d": "DLA0", "e": "GPU"}
