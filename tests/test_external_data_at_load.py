"""A study whose ONNX model keeps its weights in external data that export could not load.

The weights are read only at export (the simulated Jetson and the DLA rules need none): a model whose
external data file was missing, lay outside the model's folder or was shorter than an initializer's
declared offset and length was tuned all night, then refused at export. It is refused before the study
is stored, with one line naming the initializer (exit status 3). Real ONNX files written by onnx's own
``save_as_external_data``.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

from placetune.cli.main import main
from placetune.errors import ModelError
from placetune.model.model import Model


def _model(folder, location="w.bin", length=None, data_bytes=432):
    """A Conv whose 4x3x3x3 float weight (432 bytes) is external data at ``location``."""
    folder.mkdir(exist_ok=True)
    w = nh.from_array(np.ones((4, 3, 3, 3), np.float32), "W")
    w.ClearField("raw_data")
    w.data_location = T.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", str(length or data_bytes))):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = h.make_graph([h.make_node("Conv", ["x", "W"], ["y"], name="conv")], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)], [w])
    path = folder / "model.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 13)]), str(path))
    if location == "w.bin" and data_bytes:
        (folder / "w.bin").write_bytes(b"\0" * data_bytes)
    return path


def _tune(path, db, capsys):
    code = main(["tune", "--model", str(path), "--agent", "random", "--trials", "2", "--storage", str(db),
                 "--study", "w"])
    err = capsys.readouterr().err
    return code, [x for x in err.splitlines() if x.strip()], err


@pytest.mark.parametrize("case, said", [
    ("missing", "m/w.bin: it does not exist"),
    ("outside", "tensor 'W' keeps its data in '../elsewhere.bin', outside the model's folder"),
    ("short", "initializer 'W' keeps 432 bytes at offset 0 of 'w.bin', which holds 100"),
    ("length", "initializer 'W' holds 4 bytes of data, and its shape 4x3x3x3 of FLOAT needs 432"),
    ("negative", "initializer 'W': its external data's offset or length is not a byte count"),
])
def test_a_tune_of_a_model_whose_external_data_export_cannot_load_is_refused_at_start(case, said, tmp_path, capsys,
                                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "m"
    if case == "missing":
        path = _model(folder, data_bytes=0, length=432)
    elif case == "outside":
        (tmp_path / "elsewhere.bin").write_bytes(b"\0" * 432)
        path = _model(folder, location="../elsewhere.bin")
    elif case == "short":
        path = _model(folder, length=432, data_bytes=100)
    elif case == "negative":
        path = _model(folder, length=-1)
    else:
        path = _model(folder, length=4)
    Model.load(path)  # the graph alone imports: `placetune check` needs no weights
    db = tmp_path / "t.db"
    code, lines, err = _tune(path, db, capsys)
    assert code == ModelError.exit_code == 3 and len(lines) == 1 and "Traceback" not in err, err
    assert said in lines[0] and "'W'" in lines[0], lines[0]
    if db.exists():  # nothing of the study is stored
        import sqlite3

        with sqlite3.connect(db) as con:
            tables = {t for t, in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert "pt_studies" not in tables or not con.execute("SELECT count(*) FROM pt_studies").fetchone()[0]


def test_a_model_whose_external_data_is_whole_is_tuned(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _model(tmp_path / "m")
    code, lines, err = _tune(path, tmp_path / "t.db", capsys)
    assert code == 0, err
    os.unlink(tmp_path / "m" / "w.bin")  # and only the file's references are read: no weight is loaded
    assert Model.load(path).layer("conv").op_type == "Conv"
