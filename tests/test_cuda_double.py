"""The CUDA doubles are asynchronous, as CUDA is: ordering bugs fail against them.

tests/test_cuda_layer.py runs on the GPU machine (real CUDA) and is skipped here; against the
doubles (cuda-python's and pycuda's, on tests/fakes/_fakegpu.py) the same file must pass too,
including its two deliberately broken schedules, which must give wrong checksums. The
semantics it relies on are checked one by one below, on the pycuda double the workers use.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.fakes import FAKES_DIR, fake_env

ROOT = Path(__file__).resolve().parents[1]


def test_the_gpu_test_file_passes_against_the_doubles_and_its_broken_schedules_fail():
    env = {**fake_env("10.3.0"), "PLACETUNE_FAKE_CUDA_PYTHON": "1", "PATH": "/usr/bin:/bin",
           "PLACETUNE_LEAK_JOBS": "30"}  # the GPU runs 1,000 jobs; the doubles' Python clocks fewer
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                        str(ROOT / "tests" / "test_cuda_layer.py")], capture_output=True, text=True, timeout=300,
                       env=env, cwd=str(ROOT))
    tail = p.stdout[-3000:] + p.stderr[-2000:]
    assert p.returncode == 0 and re.search(r"\b48 passed\b", p.stdout) and "skipped" not in p.stdout, tail
    # both bindings, both broken schedules: most frames wrong, the correct schedule exact
    broken = re.findall(r"(missing wait|slot reused early): correct schedule bad frames \[\]; broken schedule "
                        r"bad frames (\d+)/24", p.stdout)
    assert len(broken) == 4 and all(int(n) >= 12 for _, n in broken), broken
    assert p.stdout.count("bad frames []") >= 2 * 9 + 2 * 3  # every frames-in-flight case exact
    # jobs that own their resources leave none: the layer's counts and the doubles' own come back
    flat = [json.loads(m) for m in re.findall(r'^\.?(\{"binding".*\})$', p.stdout, re.M)]
    assert sorted(f["binding"] for f in flat) == ["cuda-python", "pycuda"] and all(
        f["live_after"] == f["live_before"] and f["jobs"] == 30 and f["failed_by_design"] == 3 for f in flat), flat


SEMANTICS = r'''
import json, numpy as np
import pycuda.driver as cuda, _fakegpu as g
cuda.init(); ctx = cuda.Device(0).make_context()
out = {}
a, b = cuda.Stream(), cuda.Stream()
dev = cuda.mem_alloc(16); cuda.memcpy_htod(dev, np.arange(4, dtype=np.float32))
seven = lambda ins: {int(dev): np.full(4, 7, np.float32).tobytes()}

# 1. a host read before the synchronisation sees stale bytes; after it, the new ones
g.launch(a.handle, [("GPU", 1.0)], [], [int(dev)], seven)
host = np.zeros(4, np.float32)
cuda.memcpy_dtoh_async(host, dev, a)
out["before_sync"] = host.tolist()
a.synchronize()
out["after_sync"] = host.tolist()

# 2. Event.query() tells the truth: False while the work before the record runs, True after
g.launch(a.handle, [("GPU", 1.0)], [], [int(dev)], seven)
e = cuda.Event().record(a)
out["query_now"], out["stream_done_now"] = e.query(), a.is_done()
polls = 0
while not e.query():
    polls += 1
out["polls"] = polls
out["query_after"], out["stream_done_after"] = e.query(), a.is_done()

# 3. elapsed time of an event not completed yet: CUDA_ERROR_NOT_READY
s0 = cuda.Event().record(a); g.launch(a.handle, [("GPU", 1.0)], [], [], lambda ins: {}); s1 = cuda.Event().record(a)
try:
    s1.time_since(s0)
    out["elapsed_early"] = "no error"
except cuda.LogicError as exc:
    out["elapsed_early"] = str(exc)
s1.synchronize()
out["elapsed"] = s1.time_since(s0)

# 4. a copy on another stream is not ordered by the writer's stream, unless it waits for its event
cuda.memcpy_htod(dev, np.zeros(4, np.float32))
g.launch(a.handle, [("GPU", 1.0)], [], [int(dev)], seven)
wrong = np.full(4, -1, np.float32)
cuda.memcpy_dtoh_async(wrong, dev, b)
b.synchronize()
out["wrong_stream"] = wrong.tolist()
g.launch(a.handle, [("GPU", 1.0)], [], [int(dev)], lambda ins: {int(dev): np.full(4, 9, np.float32).tobytes()})
done = cuda.Event().record(a)
b.wait_for_event(done)
right = np.zeros(4, np.float32)
cuda.memcpy_dtoh_async(right, dev, b)
b.synchronize()
out["waited_stream"] = right.tolist()

# 5. an engine that reads a buffer while unordered work writes it reads torn data
src, dst = cuda.mem_alloc(16), cuda.mem_alloc(16)
cuda.memcpy_htod(src, np.ones(4, np.float32))
g.launch(b.handle, [("DLA0", 1.0)], [int(src)], [int(dst)], lambda ins: {int(dst): ins[int(src)]})
g.launch(a.handle, [("GPU", 0.5)], [], [int(src)], lambda ins: {int(src): np.full(4, 2, np.float32).tobytes()})
torn = np.zeros(4, np.float32)
ctx.synchronize()
cuda.memcpy_dtoh(torn, dst)
out["torn"] = [str(x) for x in torn]
print(json.dumps(out))
'''


def test_the_pycuda_double_is_asynchronous():
    p = subprocess.run([sys.executable, "-c", SEMANTICS], capture_output=True, text=True, timeout=60,
                       env={**fake_env("10.3.0"), "PATH": "/usr/bin:/bin"}, cwd=str(FAKES_DIR))
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["before_sync"] == [0, 0, 0, 0] and out["after_sync"] == [7, 7, 7, 7]
    assert out["query_now"] is False and out["query_after"] is True and 500 <= out["polls"] <= 1100
    assert out["stream_done_now"] is False and out["stream_done_after"] is True
    assert "not ready" in out["elapsed_early"] and abs(out["elapsed"] - 1.0) < 1e-9
    assert out["wrong_stream"] == [0, 0, 0, 0] and out["waited_stream"] == [9, 9, 9, 9]
    assert out["torn"] == ["nan"] * 4


UNREAD_FRAMES = r'''
import json, sys, numpy as np
import pycuda.driver as cuda, _fakegpu as g
cuda.init(); ctx = cuda.Device(0).make_context()
a = cuda.Stream()
frames = int(sys.argv[1])
out = {}
src, dst, part = cuda.mem_alloc(16), cuda.mem_alloc(16), cuda.mem_alloc(16)
cuda.memcpy_htod(src, np.arange(4, dtype=np.float32))
cuda.memcpy_htod(part, np.full(4, 5, np.float32))
for f in range(frames):  # a timed loop: an engine per frame, its outputs never read in between
    g.launch(a.handle, [("GPU", 1.0)], [int(src)], [int(dst)], lambda ins: {int(dst): ins[int(src)]})
    # an engine that writes the first 4 bytes of its buffer only: the rest are the buffer's older bytes
    g.launch(a.handle, [("GPU", 1.0)], [], [int(part)],
             lambda ins, f=f: {int(part): np.array([f], np.float32).tobytes()})
a.synchronize()
for name, mem in (("whole", dst), ("part", part)):
    host = np.zeros(4, np.float32)
    try:
        cuda.memcpy_dtoh(host, mem)  # the download at the loop's end reads the last frame's outputs
        out[name] = host.tolist()
    except RecursionError as exc:
        out[name] = "RecursionError: %s" % exc
print(json.dumps(out))
'''


def test_a_buffer_written_on_every_frame_and_read_once_downloads_without_recursion():
    """The double keeps an engine's outputs uncomputed until read, each write's over the buffer's
    contents before it; a timed loop of thousands of frames whose outputs are downloaded once at its
    end (a pipeline's) made a chain that was walked by recursion and failed the download with a
    RecursionError after some 250 frames. CUDA has the bytes: the download reads the last frame's."""
    frames = 3000
    p = subprocess.run([sys.executable, "-c", UNREAD_FRAMES, str(frames)], capture_output=True, text=True,
                       timeout=120, env={**fake_env("10.3.0"), "PATH": "/usr/bin:/bin"}, cwd=str(FAKES_DIR))
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out == {"whole": [0.0, 1.0, 2.0, 3.0], "part": [frames - 1.0, 5.0, 5.0, 5.0]}, out
