"""Representative input data for timing and the accuracy gate (``--input-data FILE.npz``).

By default the real backends time engines on uniform random noise (floats in [-1, 1), integers 0
or 1). A network whose work depends on its data (a detector with its NMS in the graph: the NMS keeps
few or no boxes on noise) then runs faster than deployed, and the pipeline's accuracy gate compares
outputs that are all empty. A ``.npz`` file of the network's inputs fixes both: its keys are the
network's input names, each array of that input's shape and dtype (``numpy.savez(path, images=x)``).
A folder of JPEG/PNG frames (``--input-data DIR``) is made into the model's one image input as
Ultralytics prepares a frame (letterboxed, RGB, /255: :mod:`placetune.inputimages`).

What was timed is recorded as ``timed_input``: :data:`RANDOM_INPUT` or the data's content hash
(``sha256:`` and 16 hex digits of the arrays' names, dtypes, shapes and bytes: two files that hold
the same arrays have the same hash). It is a :class:`~placetune.settings.Settings` field, so a study
is timed on one input only (resuming it with another is refused, as another power mode is) and the
cache never serves a measurement timed on other input.

numpy is imported when a file is read: ``import placetune`` stays light.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import zipfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError
from placetune.files.read import check_regular
from placetune.inputimages import frames_for, image_files
from placetune.safetext import shown

if TYPE_CHECKING:
    import numpy as np

    from placetune.model.model import Model

__all__ = ["RANDOM_INPUT", "InputData", "load_input_data", "check_timed_input", "data_dependent_ops",
           "timed_settings", "MAX_INPUT_BYTES"]

log = logging.getLogger(__name__)

#: ``timed_input`` of a measurement timed on the real backends' random input.
RANDOM_INPUT = "random-uniform"
#: The largest input data file, and the most its arrays may hold once decompressed (bytes).
MAX_INPUT_BYTES = 1 << 30
_HASH = re.compile(r"sha256:[0-9a-f]{16}")
#: ONNX ops whose work depends on the values of their input (how many boxes NMS keeps, how many
#: elements NonZero finds); TensorRT NMS plugins are matched by name (``*NMS*_TRT``).
DATA_DEPENDENT_OPS = ("NonMaxSuppression", "TopK", "NonZero")


def check_timed_input(value: Any) -> str:
    """``value`` when it is a ``timed_input``: :data:`RANDOM_INPUT` or ``sha256:<16 hex digits>``.

    Raises:
        ConfigError: naming the field and what is allowed.
    """
    if not isinstance(value, str) or (value != RANDOM_INPUT and not _HASH.fullmatch(value)):
        raise ConfigError(f"timed_input must be {RANDOM_INPUT!r} or the content hash of input data "
                          f"('sha256:' and 16 hex digits, as --input-data records it), got {str(value)[:60]!r}")
    return value


@dataclass(frozen=True)
class InputData:
    """Input data read from a ``.npz`` file, or made from a folder of images (:mod:`placetune.inputimages`).

    Attributes:
        path: the file or folder as given.
        arrays: input name -> array (C-contiguous, as stored); a folder's once :meth:`check` made them.
        label: the content hash recorded as ``timed_input`` (a folder's: of the arrays made from it).
        images: a folder's image files in name order (empty for a ``.npz``).
    """

    path: str
    arrays: dict[str, "np.ndarray"] = field(repr=False)
    label: str
    images: tuple[str, ...] = field(default=(), repr=False)

    def describe(self) -> str:
        """``sha256:... (frames.npz: images 1x3x640x640 float32)``; a folder: ``(frames/: 12 images -> ...)``."""
        parts = ", ".join(f"{k} {'x'.join(map(str, a.shape)) or 'scalar'} {a.dtype}" for k, a in self.arrays.items())
        if self.images:
            return f"{self.label} ({os.path.basename(self.path.rstrip(os.sep))}/: {len(self.images)} images -> {parts})"
        return f"{self.label} ({os.path.basename(self.path)}: {parts})"

    def check(self, model: "Model") -> None:
        """Refuse data that does not fit ``model``'s inputs: a missing or extra name, another shape or dtype.
        A folder of images is made into ``model``'s input here (once: one folder, one input shape).

        Raises:
            ConfigError: one line naming the input and what is allowed.
        """
        want = {t.name: (tuple(int(d) for d in t.shape), str(t.dtype)) for t in model.inputs}
        if self.images and not self.arrays:
            arrays = frames_for(list(self.images), model, self.path)
            object.__setattr__(self, "arrays", arrays)  # made once, for the model it is checked against
            object.__setattr__(self, "label", _content_hash(arrays))
        where = f"--input-data {shown(self.path)}"
        missing = [n for n in want if n not in self.arrays]
        extra = [n for n in self.arrays if n not in want]
        if missing or extra:
            raise ConfigError(
                f"{where}: " + "; ".join(
                    ([f"no array for input(s) {', '.join(map(repr, missing))}"] if missing else [])
                    + ([f"array(s) {', '.join(repr(n)[:60] for n in extra[:5])} name no input"] if extra else []))
                + f": the keys must be {model.name}'s input names, {', '.join(map(repr, want))}")
        for name, (shape, dtype) in want.items():
            a = self.arrays[name]
            if tuple(a.shape) != shape or str(a.dtype) != dtype:
                raise ConfigError(f"{where}: input {name!r} is {'x'.join(map(str, a.shape)) or 'a scalar'} "
                                  f"{a.dtype}, but {model.name} takes {'x'.join(map(str, shape)) or 'a scalar'} {dtype} "
                                  "(give the batch the model is built with, e.g. --batch, and cast with "
                                  "numpy's astype)")

    def batched(self, name: str, batch: int) -> "np.ndarray":
        """Input ``name`` at ``batch`` (a replica's): its samples repeated (or cut) along the first axis."""
        import numpy as np

        a = self.arrays[name]
        if not a.ndim or a.shape[0] == batch:
            return a
        return np.ascontiguousarray(a[np.arange(batch) % max(1, a.shape[0])])

    def saved(self, folder: str | os.PathLike[str]) -> str:
        """The arrays written once to ``folder/<hash>.npz`` (what the TensorRT worker reads: a later edit of
        the user's file cannot change what a recorded hash stands for); returns the path."""
        import numpy as np

        os.makedirs(folder, exist_ok=True)
        path = os.path.join(os.fspath(folder), self.label.replace(":", "-") + ".npz")
        if not os.path.exists(path):
            tmp = f"{path}.{os.getpid()}.tmp.npz"
            np.savez(tmp, **self.arrays)  # type: ignore[arg-type]  # (numpy's stub: allow_pickle as a keyword)
            os.replace(tmp, path)
        return path

    def raw_files(self, folder: str | os.PathLike[str], batch: int | None = None,
                  int64_as_int32: bool = False) -> dict[str, str]:
        """Each input as a raw binary file in ``folder`` (trtexec's ``--loadInputs``: the tensor's bytes,
        nothing else), at ``batch`` when given; ``int64_as_int32``: int64 arrays written as int32, the
        binding type TensorRT before 10 gives an INT64 network input (trtexec reads the binding's size
        from the file's start: int64 bytes would be read as pairs of int32); returns name -> path."""
        import numpy as np

        os.makedirs(folder, exist_ok=True)
        out = {}
        for i, name in enumerate(self.arrays):
            a = self.batched(name, batch) if batch else self.arrays[name]
            if int64_as_int32 and a.dtype == np.int64:
                a = a.astype(np.int32)
            path = os.path.join(os.fspath(folder), f"{self.label.replace(':', '-')}-{i}-b{a.shape[0] if a.ndim else 0}"
                                f"-{a.dtype}.bin")
            if not os.path.exists(path):
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "wb") as fh:
                    fh.write(a.tobytes(order="C"))
                os.replace(tmp, path)
            out[name] = path
        return out


def _content_hash(arrays: dict[str, "np.ndarray"]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = arrays[name]
        h.update(repr((name, str(a.dtype), tuple(a.shape))).encode())
        h.update(a.tobytes(order="C"))
    return "sha256:" + h.hexdigest()[:16]


def load_input_data(path: str | os.PathLike[str]) -> InputData:
    """Read a ``.npz`` of input arrays (no pickled objects; at most :data:`MAX_INPUT_BYTES` on disk and
    decompressed), or list a folder's JPEG/PNG images (read when checked against the model).

    Raises:
        ConfigError: missing or unreadable file, not a ``.npz``, an object or empty array set; a folder
            without images, or Pillow missing to read them.
    """
    import numpy as np

    p = os.fspath(path)
    where = f"--input-data {shown(p)}"
    if os.path.isdir(p):  # images, made into the model's input when checked against it (inputimages)
        return InputData(p, {}, "", tuple(image_files(p)))
    check_regular(p, "input data", limit=MAX_INPUT_BYTES)
    if not zipfile.is_zipfile(p):
        raise ConfigError(f"{where} is not a .npz file (numpy.savez / savez_compressed writes one, keyed by the "
                          "network's input names)")
    try:
        with zipfile.ZipFile(p) as z:
            total = sum(i.file_size for i in z.infolist())
            if total > MAX_INPUT_BYTES:
                raise ConfigError(f"{where} holds {total:,} bytes once decompressed; at most {MAX_INPUT_BYTES:,}")
            for info in z.infolist():
                _check_claimed_size(np, z, info, where)
        with np.load(p, allow_pickle=False) as npz:
            # np.asarray keeps a scalar (0-d) array one; np.ascontiguousarray made it 1-d
            arrays = {str(k): np.asarray(npz[k], order="C") for k in npz.files}
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - zipfile, zlib and numpy's header parser raise many kinds on a
        # damaged file (zlib.error, tokenize.TokenError, NotImplementedError for an unknown compression, ...)
        raise ConfigError(f"{where}: cannot read it as a .npz of arrays ({type(exc).__name__}: "
                          f"{shown(str(exc), 120)}); write it with numpy.savez, without object arrays") from None
    if not arrays:
        raise ConfigError(f"{where} holds no array: its keys must be the network's input names")
    odd = [k for k, a in arrays.items() if a.dtype.kind not in "biuf"]
    if odd:
        raise ConfigError(f"{where}: array {odd[0][:60]!r} is {arrays[odd[0]].dtype}; input data is numbers "
                          "(bool, int, uint or float arrays)")
    for k, a in arrays.items():
        bad = int(a.size - np.count_nonzero(np.isfinite(a))) if a.dtype.kind == "f" else 0
        if bad:
            raise ConfigError(f"{where}: array {k[:60]!r} holds {bad:,} NaN or infinite value(s); input data must be "
                              "finite numbers (the accuracy gate fails every plan whose reference output is not finite)")
    return InputData(p, arrays, _content_hash(arrays))


def _check_claimed_size(np: Any, z: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> None:
    """Refuse an array whose ``.npy`` header claims more bytes than its entry holds: numpy allocates the
    claimed array before it reads a byte (a 244-byte file claiming 7 TiB was a MemoryError traceback)."""
    if not info.filename.endswith(".npy"):
        return
    with z.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_2_0 if version >= (2, 0) else np.lib.format.read_array_header_1_0
        shape, _, dtype = read_header(fh)
        header = fh.tell()
    if dtype.hasobject:
        return  # np.load(allow_pickle=False) refuses it without reading
    claimed = dtype.itemsize
    for d in shape:
        claimed *= int(d)
    if claimed > info.file_size - header:
        name = info.filename[:-4]
        raise ConfigError(f"{where}: array {name[:60]!r} claims shape {'x'.join(map(str, shape))[:80] or 'scalar'} "
                          f"{dtype} ({claimed:,} bytes) but its entry holds {max(0, info.file_size - header):,}: a "
                          "damaged or forged .npz; write it again with numpy.savez")


def data_dependent_ops(model: "Model") -> list[str]:
    """The op types of ``model`` whose work depends on the input's values (NMS, TopK, NonZero), sorted."""
    found = {layer.op_type for layer in model.layers
             if layer.op_type in DATA_DEPENDENT_OPS or ("NMS" in layer.op_type and layer.op_type.endswith("_TRT"))}
    return sorted(found)


_warned: set[tuple[str, str]] = set()


def timed_settings(backend: Any, settings: Any, model: "Model") -> Any:
    """``settings`` (a :class:`~placetune.settings.Settings`) with the ``timed_input`` of what ``backend``
    (a :class:`~placetune.backends.base.Backend`) times ``model`` on, checked at start.

    The backend's input data (a backend that declares ``capabilities.input_data`` has it as
    ``input_data``) must fit the model; settings that name input data (a resumed study's) need that
    very data. A hardware backend timing a network with a data-dependent op on random input warns
    once (per model and backend) that its figures may not be the deployed ones.

    Raises:
        ConfigError: data that does not fit the model, or settings timed on other input.
    """
    data = backend.input_data if backend.capabilities.input_data else None
    if data is None:
        if settings.timed_input != RANDOM_INPUT:
            raise ConfigError(f"timed_input is {settings.timed_input!r} but no input data is given: pass the same "
                              f"--input-data (input_data in [study]), or drop timed_input for {RANDOM_INPUT!r}")
        ops = data_dependent_ops(model)
        key = (model.hash, backend.name)
        if ops and not backend.capabilities.simulated and key not in _warned:
            _warned.add(key)
            log.warning("%s has data-dependent op(s) %s and is timed on random input: its timing may not be the "
                        "deployed one (NMS keeps few boxes on noise); give representative input with --input-data "
                        "FILE.npz (docs/timing.md)", model.name, ", ".join(ops))
        return settings
    data.check(model)
    key = (data.label, backend.name)
    if backend.capabilities.simulated and key not in _warned:
        _warned.add(key)
        log.warning("the %s backend runs no network: the input data %s is recorded (timed_input) but changes none "
                    "of its figures; the tensorrt and trtexec backends time on it", backend.name, data.label)
    if settings.timed_input not in (RANDOM_INPUT, data.label):
        raise ConfigError(f"timed_input is {settings.timed_input!r} but --input-data {shown(data.path)} is "
                          f"{data.label}: one study is timed on one input")
    return settings if settings.timed_input == data.label else settings.replace(timed_input=data.label)
