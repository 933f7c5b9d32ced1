"""What the morning's export would refuse is refused when ``placetune tune`` starts, before anything is
stored: the export's own checks (trtexec's ``--shapes`` and ``--layerDeviceTypes`` grammar, node names
TensorRT renames), called at start with the same one-line message and exit code; ``placetune check``
lists them as problems. Also: a study file's malformed ``timeout`` is named as the file's key."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from placetune.cli.main import main


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


# --------------------------------------------------------------------------- a study file's timeout
@pytest.mark.parametrize("value, said", [
    ('"8x"', "[study] timeout '8x': use a number of seconds"),
    ("0.5", "[study] timeout must be positive"),
    ("true", "[study] timeout must be a duration"),
])
def test_a_study_files_bad_timeout_names_the_key_and_the_file(value, said, tmp_path, capsys):
    """Before: ``timeout = "8x"`` in a study file was refused as "bad --timeout", an option never given."""
    (tmp_path / "s.toml").write_text(f'[study]\nmodel = "seed-block"\ntimeout = {value}\n')
    assert main(["tune", str(tmp_path / "s.toml"), "--storage", str(tmp_path / "s.db")]) == 6
    err = capsys.readouterr().err
    assert f"study file {tmp_path / 's.toml'}: {said}" in err and "--timeout" not in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s.db").exists()


def test_the_command_lines_bad_timeout_still_names_the_option(capsys):
    assert main(["tune", "--model", "seed-block", "--timeout", "8x"]) == 6
    assert "bad --timeout '8x'" in capsys.readouterr().err
