"""Fuzzing the ONNX importer through ``placetune check --json``.

Every model either imports (exit 0, JSON on stdout) or is refused with one
``placetune: error: ...`` line (a PlacetuneError); no other exception, no hang.

* onnx's own backend test models: the ``model.onnx`` files shipped in the onnx package
  (``onnx/backend/test/data/*/*/model.onnx``) and every node test case of
  ``onnx.backend.test.case.node`` (the models of ``data/node/*/model.onnx``, which recent
  onnx wheels no longer ship but generate from these cases).
* Random mutations of the real exports in ``tests/data``: truncated and bit-flipped files,
  broken gzip, dropped nodes, dynamic dims, unknown ops, wrong dtypes, cycles, missing
  initializers, duplicate outputs, bad attributes, absurd shapes, unknown opsets.

The mutations draw from this run's fresh seed, printed in the header and at the end of the run and in a
failure's message (tests/seeds.py); replay one with
``PLACETUNE_FUZZ_SEED=N python -m pytest -q -p no:cacheprovider tests/reliability/test_onnx_fuzz.py``.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import gzip
import io
import json
import random
import signal
import traceback
import warnings
from collections import Counter
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import placetune.cli.main
from placetune.cli.main import main

from tests.seeds import seed as run_seed

from ._harness import COUNTS, NOTES

DATA = Path(__file__).resolve().parents[1] / "data"
TIMEOUT_S = 30


@pytest.fixture(autouse=True)
def _one_parser():
    """Build the argument parser once: ``main`` otherwise spends 3/4 of a check building it."""
    with mock.patch.object(placetune.cli, "build_parser", functools.lru_cache(maxsize=1)(placetune.cli.build_parser)):
        yield


def _shape_only_pool(padded, x_shape, kernel, strides, out_shape, *args, **kwargs):
    """Stand-in for onnx's reference pooling while generating the node test cases: the models
    only need the output's shape and dtype (the real one computes every value in Python, 10 s)."""
    return np.zeros([x_shape[0], x_shape[1], *list(out_shape)], dtype=padded.dtype)


class _Hang(Exception):
    pass


def _check(path: Path) -> tuple[str, str]:
    """``placetune check PATH --json`` in this process: ``(imported|refused|crashed, detail)``."""
    out, err = io.StringIO(), io.StringIO()

    def alarm(signum, frame):  # noqa: ARG001
        raise _Hang(f"no answer after {TIMEOUT_S} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(TIMEOUT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rc = main(["check", str(path), "--json"])
    except BaseException as exc:  # noqa: BLE001 - the crashes this test counts
        frames = traceback.extract_tb(exc.__traceback__)
        at = next((f for f in reversed(frames) if "placetune" in f.filename), frames[-1] if frames else None)
        where = f" at {Path(at.filename).name}:{at.lineno}" if at else ""
        if frames and at is not frames[-1]:
            where += f" (in {Path(frames[-1].filename).parent.name}/{Path(frames[-1].filename).name})"
        return "crashed", f"{type(exc).__name__}{where}: {str(exc)[:160]}"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    if rc == 0:
        try:
            doc = json.loads(out.getvalue())
            assert isinstance(doc["layers"], list)
        except (ValueError, KeyError, AssertionError):
            return "crashed", "exit 0 without a JSON answer"
        return "imported", ""
    errors = [ln for ln in lines if ln.startswith("placetune: error:")]
    if rc in range(3, 9) and len(errors) == 1 and "Traceback" not in err.getvalue():
        return "refused", errors[0]
    return "crashed", f"exit {rc}: {err.getvalue()[-300:]}"


def _tally(kind: str, results: list[tuple[str, str, str]]) -> list[str]:
    c = Counter(r for _, r, _ in results)
    COUNTS[f"{kind}_tried"] += len(results)
    for r in ("imported", "refused", "crashed"):
        COUNTS[f"{kind}_{r}"] += c[r]
    return [f"{name}: {detail}" for name, r, detail in results if r == "crashed"]


# --------------------------------------------------------------------------- onnx's backend test models
def test_onnx_backend_test_models(tmp_path):
    root = Path(onnx.__file__).parent / "backend" / "test" / "data"
    files = sorted(glob.glob(str(root / "*" / "*" / "model.onnx")))
    results = [(str(Path(f).relative_to(root).parent), *_check(Path(f))) for f in files]
    try:
        from onnx.reference.ops import op_pool_common

        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                mock.patch.object(op_pool_common, "pool", _shape_only_pool):
            warnings.simplefilter("ignore")
            from onnx.backend.test.case import node

            cases = node.collect_testcases(None)
    except Exception as exc:  # noqa: BLE001 - an onnx without its test-case generator
        cases = []
        NOTES.append(f"onnx node test cases unavailable ({type(exc).__name__}: {exc}); shipped files only")
    for case in cases:
        p = tmp_path / f"{case.name}.onnx"
        onnx.save(case.model, p)
        results.append((f"node/{case.name}", *_check(p)))
        p.unlink()
    crashes = _tally("onnx_backend", results)
    NOTES.append(f"onnx {onnx.__version__} backend test models: {len(files)} shipped files + {len(cases)} node cases")
    assert len(results) >= 100
    assert not crashes, crashes[:20]


# --------------------------------------------------------------------------- mutations of real exports
def _load_proto(path: Path) -> tuple[onnx.ModelProto, bytes]:
    raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    return onnx.load_from_string(raw), raw


def _item(data_type: int) -> int | None:
    """Bytes per element of an ONNX data type (None: strings, undefined or unknown types)."""
    try:
        return None if data_type == TensorProto.STRING else helper.tensor_dtype_to_np_dtype(data_type).itemsize
    except (KeyError, ValueError, TypeError):
        return None


def _mutants(proto: onnx.ModelProto, raw: bytes, rng: random.Random):
    """(kind, file suffix, bytes) of one mutation of each kind."""
    def edit(fn):
        m = onnx.ModelProto()
        m.CopyFrom(proto)
        fn(m)
        return m.SerializeToString()

    g = proto.graph
    nodes = len(g.node)

    def drop_nodes(m):
        for _ in range(rng.randint(1, min(3, max(1, nodes - 1)))):
            if len(m.graph.node):
                del m.graph.node[rng.randrange(len(m.graph.node))]

    def dynamic_dims(m):
        dims = m.graph.input[0].type.tensor_type.shape.dim
        if rng.random() < 0.3:
            m.graph.input[0].type.tensor_type.ClearField("shape")
        for d in dims:
            if rng.random() < 0.6:
                d.dim_param = rng.choice(["N", "batch", "height", ""])

    def unknown_op(m):
        n = m.graph.node[rng.randrange(len(m.graph.node))]
        n.op_type = rng.choice(["PlacetuneFuzzOp", "Conv2D", ""])
        if rng.random() < 0.5:
            n.domain = "com.example.fuzz"

    def wrong_dtype(m):
        m.graph.input[0].type.tensor_type.elem_type = rng.choice(
            [TensorProto.STRING, TensorProto.BOOL, TensorProto.INT8, TensorProto.COMPLEX64, 0, 77])

    def wrong_initializer(m):
        """An initializer whose data no longer fits its type or shape: every such file is refused."""
        inits = [t for t in m.graph.initializer if len(t.raw_data) >= 2]
        if not inits:
            return wrong_dtype(m)
        t = inits[rng.randrange(len(inits))]
        choice = rng.random()
        if choice < 0.4:  # a type whose element size differs (or no numeric type at all)
            t.data_type = rng.choice([d for d in (TensorProto.INT64, TensorProto.STRING, TensorProto.DOUBLE,
                                                  TensorProto.INT16, 0, 99)
                                      if d != t.data_type and _item(d) != _item(t.data_type)])
        elif choice < 0.7:
            t.dims[:] = [d + rng.randint(1, 5) for d in t.dims] or [7]
        else:
            t.raw_data = t.raw_data[: rng.randint(1, len(t.raw_data) - 1)]

    def cycle(m):
        ns = m.graph.node
        i = rng.randrange(len(ns))
        j = rng.randrange(i, len(ns))
        if len(ns[i].input):
            ns[i].input[0] = ns[j].output[0]
        else:
            ns[i].input.append(ns[j].output[0])

    def missing_initializer(m):
        inputs = {i.name for i in m.graph.input}
        inits = [k for k, t in enumerate(m.graph.initializer) if t.name not in inputs]
        for k in sorted(rng.sample(inits, min(len(inits), rng.randint(1, 3))), reverse=True):
            del m.graph.initializer[k]

    def duplicate_outputs(m):
        ns = m.graph.node
        if len(ns) >= 2:
            a, b = rng.sample(range(len(ns)), 2)
            ns[a].output[0] = ns[b].output[0]

    def bad_attribute(m):
        n = m.graph.node[rng.randrange(len(m.graph.node))]
        if len(n.attribute) and rng.random() < 0.5:
            del n.attribute[rng.randrange(len(n.attribute))]
        else:
            n.attribute.append(helper.make_attribute(rng.choice(["strides", "pads", "axis", "kernel_shape"]),
                                                     rng.choice([[0, 0], [-1], 0, "x", [10**9, 1]])))

    def absurd_shape(m):
        dims = m.graph.input[0].type.tensor_type.shape.dim
        if len(dims):
            dims[rng.randrange(len(dims))].dim_value = rng.choice([0, -3, 2**40, 1])

    def opset(m):
        if rng.random() < 0.5:
            m.opset_import[0].version = rng.choice([1, 999])
        else:
            del m.opset_import[:]

    def empty_graph(m):
        if rng.random() < 0.5:
            del m.graph.node[:]
        else:
            del m.graph.output[:]

    n_flips = rng.randint(1, 40)
    flipped = bytearray(raw)
    for _ in range(n_flips):
        k = rng.randrange(len(flipped))
        flipped[k] ^= rng.randint(1, 255)
    zipped = gzip.compress(raw, compresslevel=1)
    yield "truncated", ".onnx", raw[: rng.randint(0, len(raw) - 1)]
    yield "bit-flipped", ".onnx", bytes(flipped)
    yield "broken gzip", ".onnx.gz", zipped[: rng.randint(1, len(zipped) - 1)]
    yield "garbage", ".onnx", bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 2000)))
    for fn in (drop_nodes, dynamic_dims, unknown_op, wrong_dtype, wrong_initializer, cycle, missing_initializer,
               duplicate_outputs, bad_attribute, absurd_shape, opset, empty_graph):
        yield fn.__name__.replace("_", " "), ".onnx", edit(fn)


MODELS = {  # model -> rounds (the big exports get fewer: each mutant is a 14-21 MB file)
    "seed_block.onnx.gz": 4,
    "seed_block_dynamo.onnx.gz": 3,
    "seed_model_gn.onnx.gz": 3,
    "resnet18.onnx.gz": 1,
    "mobilenet_v2_dynamo.onnx.gz": 1,
}


def test_mutated_models_import_or_are_refused(tmp_path):
    seed = run_seed("PLACETUNE_FUZZ_SEED")
    rng = random.Random(seed)
    results = []
    kinds: Counter[str] = Counter()
    for name, rounds in MODELS.items():
        proto, raw = _load_proto(DATA / name)
        for r in range(rounds):
            for kind, suffix, blob in _mutants(proto, raw, rng):
                p = tmp_path / f"mutant{suffix}"
                p.write_bytes(blob)
                outcome, detail = _check(p)
                results.append((f"{name} {kind} #{r}", outcome, detail))
                kinds[(kind, outcome)] += 1
    crashes = _tally("onnx_mutations", results)
    NOTES.append(f"ONNX mutations (seed {seed}): " + ", ".join(
        f"{k} {n}" for (k, o), n in sorted(kinds.items()) if o != "crashed" and o == "refused") + " refused")
    assert len(results) >= 150
    assert not crashes, f"replay with PLACETUNE_FUZZ_SEED={seed}: {crashes[:20]}"
    # an initializer whose data does not fit its type or shape is a corrupt file, whatever its size: imported,
    # its segments are ONNX files TensorRT's parser cannot read, found at the first build or the export
    accepted = [name for name, outcome, _ in results if "wrong initializer" in name and outcome != "refused"]
    assert not accepted, f"replay with PLACETUNE_FUZZ_SEED={seed}: corrupt initializers imported: {accepted}"


# --------------------------------------------------------------------------- corrupt initializers, fixed cases
def _tiny_conv(weight: np.ndarray) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, weight.shape[1], 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = onnx.numpy_helper.from_array(weight, "w")
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "tiny", [x], [y], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _corrupt(t: onnx.TensorProto, how: str) -> None:
    if how == "truncated":
        t.raw_data = t.raw_data[: len(t.raw_data) // 3]
    elif how == "grown dims":
        t.dims[0] += 1  # (the first: the output maps, which a Conv's group check does not see)
    elif how == "int64":
        t.data_type = TensorProto.INT64
    elif how == "unknown type":
        t.data_type = 99
    elif how == "undefined type":
        t.data_type = TensorProto.UNDEFINED
    elif how == "string":
        t.data_type = TensorProto.STRING
    elif how == "typed field short":
        values = np.frombuffer(t.raw_data, dtype=np.float32)
        t.ClearField("raw_data")
        t.float_data.extend(values[: len(values) // 2].tolist())


CORRUPTIONS = ["truncated", "grown dims", "int64", "unknown type", "undefined type", "string", "typed field short"]


@pytest.mark.parametrize("size", ["large", "small"])
@pytest.mark.parametrize("how", CORRUPTIONS)
def test_a_corrupt_initializer_is_refused_whatever_its_size(tmp_path, how, size):
    """A weight whose data does not fit its type or shape: a small one (decoded at import) was refused, a
    large one (its data left unread) imported, and every segment written from it was a file TensorRT's
    parser refuses, found at the night's first build or at the export."""
    if size == "large":  # 384x384 float32: above the size whose data the import leaves unread
        proto, _ = _load_proto(DATA / "seed_block.onnx.gz")
    else:
        proto = _tiny_conv(np.ones((4, 2, 1, 1), dtype=np.float32))
    t = proto.graph.initializer[0]
    _corrupt(t, how)
    name = t.name
    p = tmp_path / "corrupt.onnx"
    onnx.save(proto, p)
    outcome, line = _check(p)
    assert outcome == "refused", (outcome, line)
    assert repr(name) in line and "initializer" in line, line
    from placetune.errors import ModelError
    from placetune.model import Model

    with pytest.raises(ModelError, match="initializer"):  # the Python API, given the proto itself
        Model.load(proto)
