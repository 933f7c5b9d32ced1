"""The prefixes that the tools printing TensorRT's messages put before them, and the severity they carry.

TensorRT hands its logger a severity and a message; what reaches a log file or a forum post is
the message behind whatever the printing tool put before it. :func:`split_prefix` strips every
form met in published output and returns the severity it names (None when it names none):

* trtexec's ``[03/31/2022-14:34:54] [I] [TRT] `` (the time may repeat when output interleaves),
  the Python ``trt.Logger``'s ``[12/04/2024-11:57:45] [TRT] [W] `` (TensorRT-LLM's builder writes its own
  messages in the same form, ``[08/27/2025-09:13:59] [TRT-LLM] [W] ``), TensorRT 7's
  ``[TensorRT] WARNING: ``, DeepStream's ``WARNING: [TRT]: ``, jetson-inference's ``[TRT]    ``;
* GStreamer's debug lines (DeepStream's nvinfer): ``0:00:06.471895338 18672   0x55c26e8f30 ERROR
  nvinfer gstnvinfer.cpp:614:gst_nvinfer_logger:<primary_gie> `` (the level is a column);
* ONNX Runtime's TensorRT execution provider: its own prefix (``2020-03-18 20:08:48.705396756
  [W:onnxruntime:Default, tensorrt_execution_provider.h:28 log] `` or ``E onnxruntime: ``), then
  TensorRT's own time and severity (``[2020-03-18 20:08:50   ERROR] ``, the one that counts), and
  after the message its source location (``[tensorrt_execution_provider.h:88 ...]``), no part of it;
* Triton's glog prefix (``E1201 07:37:35.929246 47 logging.cc:43] ``: its first letter, I/W/E/F, is the severity)
  and TensorFlow's (TF-TRT: ``2020-04-16 16:20:57.895732: W tensorflow/.../trt_logger.cc:37] ``);
* a launcher's prefix before any of them: ROS 2 launch's ``[component_container_mt-1] `` (Isaac ROS), and Triton
  from 2.4x quotes glog's message (``... logging.cc:43] "The engine contains 5 profiles. ..."``); NVIDIA NIM's
  Python logger writes ``WARNING 2026-09-01 10:06:30.900 pytorch.py:25] ``;
* Torch-TensorRT's: ``ERROR: [Torch-TensorRT TorchScript Conversion Context] - `` (TorchScript) and Python's
  logging format ``WARNING:torch_tensorrt [TensorRT Conversion Context]:`` (dynamo; ``LEVEL:logger:``); an
  application's Python logging with the level right-aligned in brackets: ``2021-12-23 10:38:38 [CRITICAL] ``;
  OpenMMLab's mmengine logger (mmdeploy): ``08/03 15:37:29 - mmengine - WARNING - ``, spdlog's default
  ``[2024-11-08 08:46:50.861] [error] ``; Ultralytics' ``WARNING ⚠️ ``; Python's warnings
  (``script.py:148: DeprecationWarning: ``);
* Polygraphy's letters: TensorRT's ``[I]``/``[W]``/``[E]``/``[V]``, ``[!]`` for CRITICAL (the message it raises
  on), ``[U]``/``[S]``/``[X]`` for its verbose levels;
* a shell script's ``#`` before a pasted log line, Markdown's ``> `` before any quoted line.

A line no logger marked (plain text) is judged by its words: :func:`unmarked_error`; a Python exception's line
(``RuntimeError: ...``) is an error message of its own.

Example:
    >>> split_prefix("[07/14/2023-11:52:13] [W] [TRT] onnx2trt_utils.cpp:366: Your ONNX model ...")
    ('W', 'onnx2trt_utils.cpp:366: Your ONNX model ...')
    >>> split_prefix("E onnxruntime: [2024-09-20 12:15:43   ERROR] Error Code: 9: Skipping tactic 0x2b "
    ...              "[tensorrt_execution_provider.h:88 onnxruntime::TensorrtLogger::log]")
    ('E', 'Error Code: 9: Skipping tactic 0x2b')
"""

from __future__ import annotations

import re

__all__ = ["split_prefix", "unmarked_error", "plain_error", "own_error_after_warning", "one_line_failure", "is_bare",
           "FOREIGN_ERRORS"]

#: what a printing tool puts before TensorRT's own logger prefix: GStreamer's debug columns, ONNX Runtime's
#: logger; then the time and severity ONNX Runtime's TensorRT logger writes before each TensorRT message
_WRAPPER = re.compile(
    # a launcher's prefix before them all: ROS 2 launch's ``[component_container_mt-1] `` (after a test runner's ``1: ``)
    r"^\s*(?:(?:\d+: )?\[[A-Za-z_][\w.]*-\d+\] )?\s*(?:"
    r"\d+:\d{2}:\d{2}\.\d+\s+\d+\s+0x[0-9a-fA-F]+\s+(?P<gst>ERROR|WARN|FIXME|INFO|DEBUG|LOG|TRACE|MEMDUMP)\s+"
    r"\S+\s+[^\s:]+:\d+:[^\s:]+:(?:<[^>]*>)?\s*"
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? \[(?P<ort>[VIWEF]):onnxruntime:[^\]]*\]\s*"
    r"|(?P<ort2>[VIWEF]) onnxruntime: "
    r"|(?P<glog>[IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+\d+\s+[\w./-]+:\d+\]\s*"
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d+: (?P<tf>[IWEF]) [\w./-]+:\d+\]\s*"
    r"|(?P<py>CRITICAL|ERROR|WARNING|INFO|DEBUG):[A-Za-z_][\w.]*(?: \[[^\]]*\])?:"
    r"|(?P<pydate>CRITICAL|ERROR|WARNING|INFO|DEBUG) \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)? [\w./-]+:\d+\]\s*"
    # an application's Python logging with the level right-aligned in brackets after the date (FastMOT's
    # ``%(asctime)s [%(levelname)8s] %(message)s``): ``2021-12-23 10:38:38 [CRITICAL] ``, ``... [    INFO] ``
    r"|\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:[.,]\d+)? \[\s*(?P<pybr>CRITICAL|ERROR|WARNING|INFO|DEBUG)\]\s+"
    # OpenMMLab's mmengine logger (mmdeploy): ``08/03 15:37:29 - mmengine - WARNING - ``
    r"|\d{2}/\d{2} \d{2}:\d{2}:\d{2} - [\w.]+ - (?P<mme>CRITICAL|ERROR|WARNING|INFO|DEBUG) - "
    # spdlog's default pattern (an application's C++ logger around TensorRT's): ``[2024-11-08 08:46:50.861] [error] ``
    r"|\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\] \[(?P<spd>critical|error|warning|info|debug|trace)\]\s+"
    # Ultralytics' LOGGER.warning: ``WARNING ⚠️ TensorRT requires GPU export, ...``
    r"|(?P<ul>WARNING) \u26a0\ufe0f?\s+"
    # TensorRT-LLM's C++ logger, no date: ``[TensorRT-LLM][ERROR] `` (a reporter's bold may open inside its bracket)
    r"|\[(?:\*\*)?TensorRT-LLM\]\[(?P<tllm>ERROR|WARNING|INFO|DEBUG|TRACE)\]\s*"
    # Python's warnings module: ``onnx_to_tensorrt.py:148: DeprecationWarning: Use set_memory_pool_limit instead.``
    r"|[\w./\\-]+\.py:\d+: (?P<pywarn>[A-Z]\w*Warning): "
    r")?(?:\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\s+(?P<trtlog>INTERNAL_ERROR|ERROR|WARNING|INFO|VERBOSE)\]\s*)?")
#: ONNX Runtime's source location after the message
_ORT_WHERE = re.compile(r"\s*\[tensorrt_execution_provider\.h:\d+ [^\]]*\]\s*$")
#: TensorRT's own logger prefixes (trtexec, Python, TensorRT 7, DeepStream, jetson-inference), all optional, after a
#: shell comment's ``#``, a Markdown quote's ``> `` or the Markdown a reporter opened right before a logger's bracket
#: (inline code ````` ``, a double quote): ``**[TensorRT] ERROR: ...``; bold (two or more ``*``) also before plain
#: text: ``****python3: yolo_layer.cu:116: ...: Assertion `...' failed.``
_PREFIX = re.compile(
    r"^\s*(?:#\s*(?=[\[&])|>(?:\s+|$)|(?P<mark>\*{2,}(?=\S)|(?:`|\")(?=\[)))?(?:\[\d{1,2}/\d{1,2}/\d{4}-[\d:]+\]\s*)*"
    r"(?:\[(?P<sev>[IWEVF!USX])\]\s*)?(?:\[(?:TRT|TensorRT)(?:-LLM)?\]\s*)?(?:\[(?P<sev2>[IWEVF])\]\s*)?"
    r"(?:(?P<word>INTERNAL_ERROR|ERROR|WARNING|Warning|INFO|VERBOSE|DEBUG):\s*(?:\[(?:TRT|Torch-TensorRT[^\]]*)\]:?\s*(?:-\s+)?)?)?")
#: the Markdown bold a reporter closed at a line's end (``**``, ``****``), opened on a line above
_BOLD_CLOSE = re.compile(r"\*{2,}\s*$")
#: ``Warning: `` (mixed case): a warning printed with no logger prefix inside a TensorRT 8 build (by its wording
#: the Myelin compiler's): ``Warning: Slice op /Slice_slice cannot slice along a uniform dimension.``
_WORDS = {"INTERNAL_ERROR": "E", "ERROR": "E", "CRITICAL": "E", "WARNING": "W", "Warning": "W", "INFO": "I",
          "VERBOSE": "V", "DEBUG": "V"}
_LETTERS = {"F": "E"}  # glog's and TensorFlow's FATAL
#: Polygraphy's letters beyond TensorRT's (polygraphy/logger/logger.py): CRITICAL, ultra/super/extra verbose
_POLYGRAPHY = {"!": "E", "U": "V", "S": "V", "X": "V"}
_GST_LEVELS = {"ERROR": "E", "WARN": "W", "FIXME": "W", "INFO": "I"}  # DEBUG, LOG, TRACE, MEMDUMP: verbose

#: error lines written by other libraries than TensorRT's logger (no severity prefix), and the shell's report of a
#: process a signal ended: ``Killed`` (the kernel's out-of-memory killer, common on a Jetson building an engine),
#: ``Segmentation fault (core dumped)``, ``Aborted (core dumped)`` (``Abort (core dumped)`` in a report from a QNX
#: target); such a line is the failure, whatever came before
FOREIGN_ERRORS = re.compile(r"^\[libprotobuf ERROR\b|^NVMEDIA_DLA\b.*\bERROR\b|"
                            r"^(?:Killed|Terminated|Abort(?:ed)?|Segmentation fault|Bus error|Illegal instruction|"
                            # the Markdown a reporter closed right after it: ``Aborted (core dumped)**``
                            r"Floating point exception)(?: \(core dumped\))?(?:\*{2,}|`)?$")
#: an application's own failure message, a line of its own with no severity ("Building engine failed", "Failed to
#: build CUDA engine on ...", jetson-inference's "[TRT] device DLA_0, failed to build CUDA engine", a Python
#: builder's "Failed building engine"); "Tests failed:  0"
#: and an assertion's "... failed. )" are none
_APP_FAILURE = re.compile(r"\b[Ff]ailed to\b|\b[Ff]ailed\.?$|^Failed building\b"
                          # an application reporting the engine it could not make: CUDA-PointPillars' "engine init null!"
                          r"|\bengine init null\b")
#: a line of plain text that names an Error, reports a failed assertion or check or refuses an option (it may continue a
#: logger's multi-line message: the ONNX parser's ``[8] Assertion failed: ...`` after its ``ERROR:`` line)
_UNMARKED_ERROR = re.compile(r"\bError\b|\bERROR\b|\bAssertion failed\b|^(?:Cannot |Unknown option|Invalid )"
                             # a program's own lower-case report (jetson-inference: "error:  model file '...' was not found.")
                             r"|^error:\s"
                             # Myelin's failed check printed bare by TensorRT 8.6 ("nvrtc_compile.cpp:940: CHECK(false)
                             # failed. NVRTC Compilation failure"; TensorRT 10 logs the same check inside an Error[9])
                             r"|\bCHECK\(.*\) failed\b"
                             # TensorRT's error message as a logger that prints no severity writes it: its ErrorCode (1 to
                             # 10) first ("3: Cannot find binding of given name: 339"); a batch's "1: 640x640 2 persons" is none
                             r"|^(?:[1-9]|10): (?=[A-Za-z])")
#: a Python exception's last traceback line (``RuntimeError: ...``): a message of its own, never a continuation
_PY_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception): ")
#: a line that opens with an error word of its own (Ultralytics' ``ERROR TensorRT: export failure ...``): never the
#: continuation of the error message before it
_OPENS_WITH_ERROR = re.compile(r"^(?:INTERNAL_ERROR|ERROR|FATAL|CRITICAL)\b"
                               # TensorRT's own error message, its code, source location and Error Code first, as a
                               # logger that prints no severity writes it: "2: [builder.cpp::buildSerializedNetwork::751]
                               # Error Code 2: ..." opens a message of its own. Without the leading code ("[graphShape
                               # Analyzer.cpp::...] Error Code 2: ...") the line may end the ONNX parser's message
                               # (an application may tag it with its own name first: "trt_infer: 2: [...] Error Code 2: ...")
                               r"|^(?:[A-Za-z_][\w.-]*: )?\d+: \[[\w./ -]+::[\w:~]+::\d+\] Error Code \d+: "
                               # or with no source location: "3: Cannot find binding of given name: output0"
                               r"|^(?:[1-9]|10): (?=[A-Za-z])"
                               # the ONNX parser's error object as a Python application prints it (parser.get_error(i)):
                               # "In node 143 (importResize): UNSUPPORTED_NODE: Assertion failed: ..."
                               r"|^In node -?\d+ \(\w+\): [A-Z_]+: ")
#: the builder's report of a tactic it skipped (``Skipping tactic 0x... due to exception Assertion ... failed.``): a
#: verbose message the build goes on after, never an error of its own where no logger marked it an error
#: (jetson-inference prints every severity behind the same bare ``[TRT]`` tag)
_TACTIC_SKIPPED = re.compile(r"^Skipping tactic\b")
_QUOTE = re.compile(r"^>(?:\s+|$)")
#: the ONNX parser's failure report opens with the node it failed on (TensorRT 5-7 print it plain, before the
#: ``ERROR: ModelImporter.cpp:296 ...`` line): it explains the failure, and never continues a warning above it
_PARSER_REPORT = re.compile(r"^While parsing node number \d+\b")
#: the tail of a severity tag a reporter's copy began inside (``E] Error[10]: ...`` of ``[04/28/2023-14:06:47] [E] ``)
_CUT_TAG = re.compile(r"^\s*[IWEVF]\] (?=\S)")
#: a timed logger prefix glued to an application's text that ended with no newline: ``Completed creating
#: Engine[06/14/2022-11:19:54] [TRT] [E] 4: [network.cpp::validate::2633] ...`` (the Python logger's, or trtexec's)
_GLUED_PREFIX = re.compile(r"\S\[\d{1,2}/\d{1,2}/\d{4}-[\d:]+\]\s*(?:\[TRT\]\s*)?\[[IWEVF]\]\s")


def split_prefix(line: str) -> tuple[str | None, str]:
    """``"[03/31/2022-15:12:38] [I] [TRT] text"`` -> ``("I", "text")``: the severity letter a log line's
    prefixes name (None when they name none; TensorRT's own before the printing tool's) and the message."""
    w = _WRAPPER.match(line)
    assert w is not None  # every part of it is optional: it always matches
    rest = line[w.end():]
    m = _PREFIX.match(rest)
    assert m is not None
    msg = rest[m.end():]
    if m.group("word") and msg.startswith(m.group("word") + ": "):  # the severity word printed twice: "ERROR: ERROR: "
        msg = msg[len(m.group("word")) + 2:]
    if m.group("mark") and msg.rstrip().endswith(m.group("mark")):  # the Markdown closed on the same line
        msg = msg.rstrip()[:-len(m.group("mark"))]
    elif (bold := _BOLD_CLOSE.search(msg)) and "**" not in msg[:bold.start()]:  # bold opened lines above closes here
        msg = msg[:bold.start()]
    if w.group("ort") or w.group("ort2"):
        msg = _ORT_WHERE.sub("", msg)
    if w.group("glog") and len(msg) > 1 and msg.startswith('"') and msg.rstrip().endswith('"'):
        msg = msg.rstrip()[1:-1]  # Triton from 2.4x quotes glog's message
    sev = (_POLYGRAPHY.get(m.group("sev") or "", m.group("sev")) or m.group("sev2") or _WORDS.get(m.group("word") or "")
           or _WORDS.get(w.group("trtlog") or "") or (w.group("gst") and _GST_LEVELS.get(w.group("gst"), "V"))
           or w.group("ort") or w.group("ort2")
           or (w.group("pywarn") and "W")
           or (w.group("tllm") and _WORDS.get(w.group("tllm"), "V"))
           or _WORDS.get(w.group("py") or w.group("pydate") or w.group("pybr") or w.group("mme") or w.group("ul")
                         or (w.group("spd") or "").upper())
           or _LETTERS.get(w.group("glog") or w.group("tf") or "", w.group("glog") or w.group("tf")))
    if sev is None and _CUT_TAG.match(line):  # a copy begun inside trtexec's prefix: "E] Error[10]: ..."
        return split_prefix("[" + line.lstrip())
    if sev is None and (glued := _GLUED_PREFIX.search(line)):  # an application's print with no newline before it
        return split_prefix(line[glued.start() + 1:])
    if sev is None and msg.startswith("[libprotobuf WARNING"):  # protobuf's own warning (a large model)
        sev = "W"
    return sev, msg.strip()


def is_bare(raw: str, msg: str) -> bool:
    """Whether a line is its message alone, no logger's prefix before it: plain text, also behind a Markdown quote's
    ``> `` (a quoted log: ``> [8] Assertion failed: ...`` still continues the ``> ERROR: ModelImporter.cpp:92`` line)."""
    text = raw.strip()
    return msg == text or msg == _QUOTE.sub("", text, count=1)


def own_error_after_warning(msg: str) -> bool:
    """Whether a bare line right after a warning is an error of its own rather than the warning's next line: another
    library's error line or the shell's report of a signal, a line opening with an error word, an application's
    failure line, a Python exception or a ``&&&&`` status. The builder's ``Engine generation failed with backend
    strategy 3.`` warning goes on ``Error message: ... Error Code 10: ...`` on a line of its own: no error."""
    return bool(FOREIGN_ERRORS.search(msg) or _OPENS_WITH_ERROR.match(msg) or _APP_FAILURE.search(msg)
                or _PY_EXCEPTION.match(msg) or msg.startswith("&&&&") or _PARSER_REPORT.match(msg))


def one_line_failure(msg: str) -> bool:
    """Whether an unmarked error line is a whole message: the shell's report of a signal, an application's failure line
    (``Makefile:298: recipe for target 'x' failed``) or a Python exception's last line; no line after it continues it.
    A Python exception whose message ends with a colon goes on on the next lines (onnx_tensorrt's backend raises the
    parser's error as ``RuntimeError: While parsing node number 0:``, its location and assertion on two bare lines)."""
    if _PY_EXCEPTION.match(msg) and msg.rstrip().endswith(":"):
        return False
    return bool(FOREIGN_ERRORS.search(msg) or _APP_FAILURE.search(msg) or _PY_EXCEPTION.match(msg))


def plain_error(msg: str, plain: bool, continues: bool) -> bool:
    """Whether a message with no severity is an error message of its own: another library's error line; in plain
    text (no severity given with it), an application's failure line, or a line naming an Error unless it continues
    the error message before it (the ONNX parser's error spans lines, the last ones bare)."""
    if FOREIGN_ERRORS.search(msg):
        return True
    if _TACTIC_SKIPPED.match(msg):
        return False
    continues = continues and not _OPENS_WITH_ERROR.match(msg)
    return plain and bool(_APP_FAILURE.search(msg) or _PY_EXCEPTION.match(msg)
                          or not continues and _UNMARKED_ERROR.search(msg))


def unmarked_error(msg: str) -> bool:
    """Whether a message that no logger marked (plain text, its prefix stripped) reports an error in its own words:
    another library's error line, an application's failure message, an Error named, an option refused, a Python
    exception's last line (``RuntimeError: Unable to load the engine file``) or the ONNX parser's report opening
    (``While parsing node number 0 [Sub]:``)."""
    if _TACTIC_SKIPPED.match(msg):
        return False
    return bool(FOREIGN_ERRORS.search(msg) or _APP_FAILURE.search(msg) or _UNMARKED_ERROR.search(msg)
                or _PY_EXCEPTION.match(msg) or _PARSER_REPORT.match(msg))
