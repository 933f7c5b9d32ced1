"""A folder of JPEG/PNG images as input data (``--input-data DIR``): the frames a detector is deployed on.

The images are read with Pillow (an optional dependency: without it, one line says ``pip install pillow``)
in file-name order, and made into the network's one image input the way Ultralytics prepares a frame
for an exported model (ultralytics/data/augment.py ``LetterBox`` with ``auto=False``, ``scaleup=True``,
``center=True``; ultralytics/engine/predictor.py ``preprocess``): scaled by ``r = min(H/h, W/w)`` to
``round(w*r) x round(h*r)`` with bilinear interpolation (half-pixel centres, no antialiasing, as OpenCV's
``INTER_LINEAR``; computed here in floating point, so a pixel may differ from OpenCV's fixed-point result by
one grey level), padded to ``H x W`` with grey 114 (``top = round(dh - 0.1)``, ``left = round(dw - 0.1)``
of half the padding), RGB, channels first, divided by 255 and stacked to the model's batch (the first
``batch`` images; fewer images are repeated in order). The input's dtype is kept: float16 stays
float16; a uint8 input gets the pixel values, not divided.

The input's height and width are the model's, so a folder is read when it is checked against the model
(:meth:`~placetune.inputdata.InputData.check`); its ``timed_input`` is then the content hash of the
array made, as for a ``.npz`` of that array.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from placetune.errors import ConfigError
from placetune.safetext import shown

if TYPE_CHECKING:
    import numpy as np

    from placetune.model.model import Model

__all__ = ["IMAGE_SUFFIXES", "image_files", "letterbox", "frames_for"]

#: The file names read in a folder (case-insensitive); other files are left alone.
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
#: Ultralytics' padding grey.
PAD = 114
#: The most pixels one image may have (Pillow's own decompression-bomb limit is 2x its default of 89 MP).
MAX_PIXELS = 64_000_000


def image_files(folder: str) -> list[str]:
    """The JPEG/PNG files of ``folder`` in name order, after checking Pillow can be imported.

    Raises:
        ConfigError: no such image in it, or Pillow is missing (one line each).
    """
    where = f"--input-data {shown(folder)}"
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(IMAGE_SUFFIXES)
                   and os.path.isfile(os.path.join(folder, n)))
    if not names:
        raise ConfigError(f"{where} is a folder with no JPEG or PNG file: give a folder of images (.jpg, .jpeg, "
                          ".png) or a .npz whose keys are the network's input names (numpy.savez(path, images=array))")
    try:
        import PIL.Image  # noqa: F401
    except ImportError:
        raise ConfigError(f"{where} is a folder of images: reading them needs Pillow (pip install pillow), or give a "
                          ".npz of the network's input arrays") from None
    return [os.path.join(folder, n) for n in names]


def _resize_bilinear(img: "np.ndarray", width: int, height: int) -> "np.ndarray":
    """``img`` (h x w x c, uint8) resized to ``height x width``: bilinear with half-pixel centres, edges clamped."""
    import numpy as np

    h, w = img.shape[:2]

    def axis(n_out: int, n_in: int) -> tuple[Any, Any, Any]:
        src = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        return lo, np.minimum(lo + 1, n_in - 1), (src - lo).astype(np.float32)

    y0, y1, fy = axis(height, h)
    x0, x1, fx = axis(width, w)
    a = img.astype(np.float32)
    rows = a[y0] * (1 - fy)[:, None, None] + a[y1] * fy[:, None, None]
    out = rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def letterbox(img: "np.ndarray", height: int, width: int) -> "np.ndarray":
    """``img`` (h x w x 3, uint8) scaled to fit ``height x width`` and padded with grey 114, as Ultralytics'
    ``LetterBox(new_shape=(height, width), auto=False)``."""
    import numpy as np

    h, w = img.shape[:2]
    r = min(height / h, width / w)
    new_w, new_h = int(round(w * r)), int(round(h * r))
    dw, dh = (width - new_w) / 2, (height - new_h) / 2
    if (w, h) != (new_w, new_h):
        img = _resize_bilinear(img, new_w, new_h)
    top, left = int(round(dh - 0.1)), int(round(dw - 0.1))
    out = np.full((height, width, img.shape[2]), PAD, np.uint8)
    out[top:top + new_h, left:left + new_w] = img
    return out


def _read(path: str) -> "np.ndarray":
    import numpy as np
    from PIL import Image

    try:
        with Image.open(path) as im:
            if im.width * im.height > MAX_PIXELS:
                raise ConfigError(f"--input-data: image {shown(path)} is {im.width}x{im.height}, over "
                                  f"{MAX_PIXELS:,} pixels")
            return np.asarray(im.convert("RGB"))
    except ConfigError:
        raise
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise ConfigError(f"--input-data: cannot read image {shown(path)} ({type(exc).__name__}: "
                          f"{str(exc)[:120]})") from None


def frames_for(files: list[str], model: "Model", folder: str) -> dict[str, "np.ndarray"]:
    """The model's one image input (batch x 3 x H x W) made from ``files`` (the first ``batch`` of them,
    repeated in order when fewer).

    Raises:
        ConfigError: the model has no single 3-channel NCHW input of a float or uint8 type, or an image
            cannot be read.
    """
    import numpy as np

    inputs = list(model.inputs)
    shape = tuple(int(d) for d in inputs[0].shape) if len(inputs) == 1 else ()
    dtype = np.dtype(str(inputs[0].dtype)) if len(inputs) == 1 else None
    if len(shape) != 4 or shape[1] != 3 or dtype is None or dtype.kind not in "fu" or (
            dtype.kind == "u" and dtype != np.uint8):
        took = ", ".join(f"{t.name!r} {'x'.join(map(str, t.shape))} {t.dtype}" for t in inputs)
        raise ConfigError(f"--input-data {shown(folder)} is a folder of images, which feeds one image input (batch "
                          f"x 3 x height x width, float or uint8); {model.name} takes {took}: give a .npz of its "
                          "input arrays instead")
    batch, _, height, width = shape
    frames = np.stack([letterbox(_read(files[i % len(files)]), height, width) for i in range(batch)])
    x = np.ascontiguousarray(frames.transpose(0, 3, 1, 2))
    x = x.astype(dtype) if dtype == np.uint8 else (x.astype(np.float32) / np.float32(255.0)).astype(dtype)
    return {inputs[0].name: x}
