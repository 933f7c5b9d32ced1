"""The prefixes other tools put before TensorRT's messages: each form read with its severity, the message bare.

Every form here is one met in published output (tests/data/trt_corpus holds the logs)."""

from __future__ import annotations

import pytest

from placetune.backends.tensorrt.buildlog import parse_build_log
from placetune.backends.tensorrt.logprefix import plain_error, split_prefix, unmarked_error
from placetune.backends.trtexec.parse import error_lines


@pytest.mark.parametrize("line, severity, message", [
    # Triton's glog prefix: the first letter is the severity
    ("E1201 07:37:35.929246 47 logging.cc:43] INVIDLID_STATE:std::exception", "E", "INVIDLID_STATE:std::exception"),
    ("I0511 01:22:37.728941 1 logging.cc:49] [MemUsageChange] TensorRT-managed allocation",
     "I", "[MemUsageChange] TensorRT-managed allocation"),
    ("W1021 00:03:42.198267 226 metrics.cc:282] failed to get power limit", "W", "failed to get power limit"),
    # TensorFlow's (TF-TRT) logging prefix
    ("2020-04-16 16:20:57.895732: W tensorflow/compiler/tf2tensorrt/utils/trt_logger.cc:37] DefaultLogger Current",
     "W", "DefaultLogger Current"),
    ("2020-04-16 16:20:58.340652: I tensorflow/compiler/tf2tensorrt/kernels/trt_engine_op.cc:733] Building a new",
     "I", "Building a new"),
    # Torch-TensorRT's TorchScript frontend
    ("ERROR: [Torch-TensorRT TorchScript Conversion Context] - 1: [nvdlaUtils.cpp::submit::198] Error Code 1: DLA",
     "E", "1: [nvdlaUtils.cpp::submit::198] Error Code 1: DLA"),
    ("WARNING: [Torch-TensorRT] - Truncating weight", "W", "Truncating weight"),
    ("DEBUG: [Torch-TensorRT TorchScript Conversion Context] - Tactic: 0 Time: 0.006272", "V", "Tactic: 0 Time: 0.006272"),
    # Python's logging (Torch-TensorRT's dynamo frontend): LEVEL:logger:message
    ("WARNING:torch_tensorrt [TensorRT Conversion Context]:Unused Input: out", "W", "Unused Input: out"),
    ("INFO:torch_tensorrt.dynamo.conversion._TRTInterpreter:TRT INetwork construction", "I", "TRT INetwork construction"),
    ("ERROR:torch_tensorrt [TensorRT Conversion Context]:1: Error Code 1", "E", "1: Error Code 1"),
    # forms read before, unchanged
    ("WARNING: [TRT]: Default DLA is enabled", "W", "Default DLA is enabled"),
    ("ERROR: ModelImporter.cpp:80 In function importInput:", "E", "ModelImporter.cpp:80 In function importInput:"),
    ("[TensorRT] WARNING: onnx2trt_utils.cpp:243: One or more", "W", "onnx2trt_utils.cpp:243: One or more"),
])
def test_each_printing_tools_prefix_gives_the_severity_and_the_bare_message(line, severity, message):
    assert split_prefix(line) == (severity, message)


def test_a_python_exception_after_an_error_line_is_an_error_of_its_own():
    log = parse_build_log([
        "ERROR: [Torch-TensorRT TorchScript Conversion Context] - 2: [builder.cpp::buildSerializedNetwork::620] "
        "Error Code 2: Internal Error (Assertion engine != nullptr failed. )",
        "RuntimeError: [Error thrown at core/conversion/conversionctx/ConversionCtx.cpp:147] Building serialized "
        "network failed in TensorRT",
    ])
    assert len(log.errors) == 2 and log.errors[1].startswith("RuntimeError: ")


def test_the_parsers_assertion_continues_its_error_and_explains_the_failure():
    lines = ["ERROR: ModelImporter.cpp:80 In function importInput:",
             "[8] Assertion failed: *tensor = importer_ctx->network()->addInput( input.name().c_str(), trt_dtype, trt_dims)"]
    assert len(parse_build_log(lines).errors) == 1  # one message over two lines
    assert error_lines(lines) == ["ModelImporter.cpp:80 In function importInput:", lines[1]]


def test_an_applications_error_line_after_tensorrts_error_is_an_error_of_its_own():
    log = parse_build_log([
        "[03/09/2026-15:30:00] [TRT] [E] [checkMacros.cpp::nvinfer1::catchCudaError::229] Error Code 1: Cuda Runtime",
        "ERROR TensorRT: export failure 1.1s: pybind11::init(): factory function returned nullptr",
    ])
    assert len(log.errors) == 2


def test_a_scripts_version_print_is_read():
    from placetune.backends.trtexec.parse import version_from_text

    assert version_from_text("  Converting Model pad_layer.onnx to TensorRT - Version: 10.0.1") == "10.0.1"


@pytest.mark.parametrize("line, severity, message", [
    # ROS 2 launch's process prefix (after a test runner's number) before Triton's glog prefix
    ("1: [component_container_mt-1] E0331 05:56:08.209208 11359 logging.cc:43] 1: [runtime.cpp::parsePlan::314] "
     "Error Code 1: Serialization", "E", "1: [runtime.cpp::parsePlan::314] Error Code 1: Serialization"),
    ("[component_container_mt-1] ERROR: infer_trtis_backend.cpp:54 failed to load model: detectnet",
     "E", "infer_trtis_backend.cpp:54 failed to load model: detectnet"),
    # Triton 2.4x+ quotes glog's message; NIM's Python logger: level, date, file:line]
    ('W0901 10:06:32.874233 379 logging.cc:43] "The engine contains 5 profiles."', "W", "The engine contains 5 profiles."),
    ("WARNING 2026-09-01 10:06:30.900 pytorch.py:25] torch not found", "W", "torch not found"),
    # TensorRT's own error code before its message is no prefix
    ("1: [runtime.cpp::parsePlan::314] Error Code 1: Serialization", None,
     "1: [runtime.cpp::parsePlan::314] Error Code 1: Serialization"),
])
def test_launcher_prefixes_and_quoted_glog_messages(line, severity, message):
    assert split_prefix(line) == (severity, message)


def test_tensorrt_llms_logger_tag_carries_the_severity_after_it():
    """TensorRT-LLM's builder writes '[date] [TRT-LLM] [W] ' like TensorRT's Python logger (corpus
    trtllm-0.20-build-trtllm-logger-warnings)."""
    assert split_prefix("[08/27/2025-09:13:59] [TRT-LLM] [W] Overriding paged_state to False") == \
        ("W", "Overriding paged_state to False")
    assert split_prefix("[TensorRT-LLM] TensorRT-LLM version: 0.20.0") == (None, "TensorRT-LLM version: 0.20.0")


@pytest.mark.parametrize("line", ["Killed", "Segmentation fault (core dumped)", "Aborted (core dumped)"])
def test_the_shells_report_of_a_signal_is_the_failures_line(line):
    """A Jetson building an engine out of memory ends with the kernel's 'Killed' (corpus
    jetson-voice-4-..., tensorrtx-1145-...): the line that explains the failure."""
    assert unmarked_error(line) and plain_error(line, True, False) and plain_error(line, True, True)
    assert not unmarked_error("Killed 3 processes to free memory")


@pytest.mark.parametrize("line", [
    "**[TensorRT] ERROR: Network validation failed.",  # Markdown bold opened before the log
    "`[TensorRT] ERROR: Network validation failed.`",  # inline code around it
    '"[TensorRT] ERROR: Network validation failed."',  # the reporter's double quotes
])
def test_markdown_a_reporter_opened_before_the_logger_is_no_part_of_the_message(line):
    assert split_prefix(line) == ("E", "Network validation failed.")
    assert error_lines([line]) == ["Network validation failed."]


def test_a_warnings_next_lines_are_no_error_of_their_own():
    """The builder's backend-strategy warning spans three lines; its 'Error message:' line names an Error Code
    but is the warning's text. A shell's 'Aborted' after a warning is still the failure."""
    log = ["[05/21/2026-07:05:05] [W] [TRT] Engine generation failed with backend strategy 3.",
           "Error message: [optimizer.cpp::computeCosts::3869] Error Code 10: Internal Error (Could not find any "
           "implementation for node {ForeignNode[a...b]}.).",
           "Skipping this backend strategy."]
    assert error_lines(log) == []
    blog = parse_build_log(log)
    assert (len(blog.errors), len(blog.warnings)) == (0, 1)
    assert error_lines([log[0], "Aborted (core dumped)"]) == ["Aborted (core dumped)"]
    # after a blank line or an unmarked line that is no continuation, words are judged again
    assert error_lines([log[0], "", log[1]]) == [log[1]]


def test_a_bare_tensorrt_error_message_after_another_is_an_error_of_its_own():
    """A logger that prints no severity writes TensorRT's messages bare: 'N: [file::function::line] Error Code N: ...'
    opens a new message, whereas the ONNX parser's multi-line message may end on a '[...] Error Code N' line of its
    own without the leading code (corpus trt-3728-parser-error)."""
    a = ("4: [network.cpp::validate::3062] Error Code 4: Internal Error (Network has dynamic or shape inputs, but no "
         "optimization profile has been defined.)")
    b = "2: [builder.cpp::buildSerializedNetwork::751] Error Code 2: Internal Error (Assertion engine != nullptr failed. )"
    assert len(parse_build_log([a, b, "Segmentation fault (core dumped)"]).errors) == 3
    parser = ["[03/21/2024-12:12:47] [TRT] [E] ModelImporter.cpp:777: ERROR: ModelImporter.cpp:195 In function parseGraph:",
              "[6] Invalid Node - /Where",
              "[graphShapeAnalyzer.cpp::checkCalculationStatusSanity::1503] Error Code 2: Internal Error (Assertion "
              "!isPartialWork(p.second.outputExtents) failed. )"]
    assert len(parse_build_log(parser).errors) == 1


def test_a_one_line_failure_ends_its_message():
    """After a Python exception or an application's '... failed' line, make's 'make: *** [x] Error 1' is an error of
    its own, not the failure's next line (corpus mlperf-v0.5-34-xavier-dla-core-assertion-make)."""
    log = ["RuntimeError: Building engines failed!", "Makefile:298: recipe for target 'generate_engines' failed",
           "make: *** [generate_engines] Error 1"]
    assert len(parse_build_log(log).errors) == 3
    assert error_lines(log) == log


@pytest.mark.parametrize("line, severity, message", [
    # a copy begun inside trtexec's severity tag
    ("E] Error[10]: [optimizer.cpp::computeCosts::3728] Error Code 10", "E", "Error[10]: [optimizer.cpp::computeCosts::3728] Error Code 10"),
    # the Python logger's prefix glued to an application's print that had no newline
    ("Completed creating Engine[06/14/2022-11:19:54] [TRT] [E] 4: [network.cpp::validate::2633] Error Code 4",
     "E", "4: [network.cpp::validate::2633] Error Code 4"),
    # protobuf's own warning
    ("[libprotobuf WARNING x\\coded_stream.cc:81] The total number of bytes read was 948423101", "W",
     "[libprotobuf WARNING x\\coded_stream.cc:81] The total number of bytes read was 948423101"),
    # bold opened lines above, closed at the end of the last
    ("ERROR: could not parse the model.** ", "E", "could not parse the model."),
])
def test_prefix_remnants_glued_prefixes_and_markdown_tails(line, severity, message):
    assert split_prefix(line) == (severity, message)


def test_multi_line_python_exceptions_quoted_parser_errors_and_parser_reports_are_one_error_each():
    # onnx_tensorrt's backend raises the parser's three-line error
    log = parse_build_log(["RuntimeError: While parsing node number 0:", "ModelImporter.cpp:296 In function importModel:",
                           "[5] Assertion failed: tensors.count(input_name)"])
    assert len(log.errors) == 1
    # a Markdown quote before every line: the assertion still continues its ERROR line
    assert len(parse_build_log(["> ERROR: ModelImporter.cpp:92 In function parserGraph:",
                                "> [8] Assertion failed: convertOnnxWeights(initializer. &weight, ctx)"]).errors) == 1
    # the parser's error object printed by a Python application is an error of its own
    assert len(parse_build_log(["ERROR: Failed to parse the ONNX file.",
                                "In node 143 (importResize): UNSUPPORTED_NODE: Assertion failed: scales"]).errors) == 2
    # a plain 'While parsing node number' after a warning opens the parser's report (an error line)
    lines = ["WARNING: ONNX model has a newer ir_version (0.0.6) than this parser was built against (0.0.3).",
             "While parsing node number 0 [Sub]:", "ERROR: ModelImporter.cpp:296 In function importModel:"]
    assert error_lines(lines) == ["While parsing node number 0 [Sub]:", "ModelImporter.cpp:296 In function importModel:"]
    assert unmarked_error("Failed building engine") and plain_error("Failed building engine", True, False)
