"""A folder of JPEG/PNG frames as input data (``--input-data DIR``): read with Pillow, letterboxed to the
model's input as Ultralytics prepares a frame (ultralytics/data/augment.py LetterBox, auto=False; RGB,
channels first, /255), stacked to the batch, recorded as the hash of the array made, as a .npz of that
array would be. The images are made here with Pillow; the timing is against the fake trtexec only."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from placetune import Model, Placement
from placetune.cli import main
from placetune.errors import ConfigError
from placetune.inputdata import load_input_data
from placetune.inputimages import PAD, _resize_bilinear, letterbox

from .conftest import DATA

PIL = pytest.importorskip("PIL.Image")
GN = DATA / "seed_model_gn.onnx.gz"  # input "input" 32x3x32x32 float32


@pytest.fixture(scope="module")
def gn() -> Model:
    return Model.load(GN)


def _png(path, h: int, w: int, rgb: tuple[int, int, int]) -> np.ndarray:
    a = np.zeros((h, w, 3), np.uint8)
    a[:] = rgb
    a[0, 0] = (255, 255, 255)  # a corner that says which way up it was read
    PIL.fromarray(a).save(path)
    return a


def test_the_bilinear_resize_uses_half_pixel_centres_as_opencvs_inter_linear():
    """[0, 100] to 4 pixels: sources -0.25, 0.25, 0.75, 1.25, clamped: 0, 25, 75, 100 (cv2.resize's result)."""
    row = np.array([[[0], [100]]], np.uint8)
    assert _resize_bilinear(row, 4, 1)[0, :, 0].tolist() == [0, 25, 75, 100]
    flat = np.full((7, 5, 3), 37, np.uint8)
    assert (_resize_bilinear(flat, 13, 3) == 37).all()


@pytest.mark.parametrize("h, w, top, rows", [(4, 8, 2, 4), (5, 8, 1, 5), (16, 8, 0, 8)])
def test_letterbox_pads_with_grey_114_split_as_ultralytics_rounds_it(h, w, top, rows):
    img = np.full((h, w, 3), 9, np.uint8)
    out = letterbox(img, 8, 8)
    assert out.shape == (8, 8, 3)
    content = np.where((out == 9).all(axis=(1, 2)) | (out[:, :, 0] == 9).any(axis=1))[0]
    assert content[0] == top and len(content) == rows
    assert (out[:top] == PAD).all() and (out[top + rows:] == PAD).all()
    if h == 16:  # taller than wide: scaled by 1/2 to 8x4, padded left and right by 2
        assert (out[:, :2] == PAD).all() and (out[:, 2:6] == 9).all() and (out[:, 6:] == PAD).all()


def test_a_folder_of_pngs_is_the_models_input_hashed_as_the_same_array_in_a_npz(tmp_path, gn):
    folder = tmp_path / "frames"
    folder.mkdir()
    _png(folder / "a.png", 16, 32, (200, 10, 0))
    _png(folder / "b.PNG", 32, 32, (0, 0, 255))
    (folder / "notes.txt").write_text("not an image")
    data = load_input_data(folder)
    data.check(gn)
    x = data.arrays["input"]
    assert x.shape == (32, 3, 32, 32) and x.dtype == np.float32 and x.flags["C_CONTIGUOUS"]
    # a.png (16 high, 32 wide) fits 32x32 at r=1: 8 grey rows above and below; RGB, /255; its white corner top-left
    assert np.allclose(x[0, :, :8], PAD / 255) and np.allclose(x[0, :, 24:], PAD / 255)
    assert np.allclose(x[0, :, 9, 5], np.array([200, 10, 0]) / 255) and np.allclose(x[0, :, 8, 0], 1.0)
    assert np.allclose(x[1, :, 5, 5], np.array([0, 0, 255]) / 255)
    assert np.array_equal(x[2], x[0]) and np.array_equal(x[31], x[1])  # two images repeated to the batch
    np.savez(tmp_path / "same.npz", input=x)
    assert data.label == load_input_data(tmp_path / "same.npz").label
    assert data.describe().endswith("(frames/: 2 images -> input 32x3x32x32 float32)")


def test_the_trtexec_backend_times_on_the_folders_frames(tmp_path, gn):
    from .test_trtexec import _backend, _ev

    folder = tmp_path / "frames"
    folder.mkdir()
    for i in range(3):
        _png(folder / f"{i}.jpg", 24, 40, (40 * i, 90, 10))
    be = _backend(tmp_path, "8.6.1", input_data=str(folder))
    m = _ev(gn, be, tmp_path, trt_version="8.6").evaluate(Placement.all_gpu(gn))
    assert m.status == "ok", m.reason
    assert m.extra["timed_input"] == be.input_data.label and m.extra["timed_input"].startswith("sha256:")
    assert any(a.startswith("--loadInputs=") for a in m.extra["commands"]["time"])


def test_without_pillow_a_folder_is_one_line_saying_pip_install_pillow(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "frames"
    folder.mkdir()
    _png(folder / "a.png", 8, 8, (1, 2, 3))
    monkeypatch.setitem(sys.modules, "PIL", None)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    assert main(["measure", str(GN), "--input-data", str(folder)]) == 6
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "pip install pillow" in err and "--input-data" in err


def test_a_folder_for_a_model_without_one_image_input_or_with_a_broken_image_is_one_line(tmp_path, gn):
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(ConfigError, match="cannot read image .*broken.jpg"):
        load_input_data(folder).check(gn)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError, match="is a folder with no JPEG or PNG file"):
        load_input_data(empty)
    block = Model.load("seed-block")
    (folder / "broken.jpg").unlink()
    _png(folder / "ok.png", 8, 8, (1, 2, 3))
    if tuple(block.inputs[0].shape)[1] != 3:
        with pytest.raises(ConfigError, match="feeds one image input"):
            load_input_data(folder).check(block)
