"""Shared fixtures: the real ONNX exports in tests/data and small helpers."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


@pytest.fixture(scope="session")
def seed_block():
    from placetune import Model

    return Model.load(DATA / "seed_block.onnx.gz")


@pytest.fixture(scope="session")
def seed_model_gn():
    from placetune import Model

    return Model.load(DATA / "seed_model_gn.onnx.gz")


@pytest.fixture(scope="session")
def resnet18_export():
    from placetune import Model

    return Model.load(DATA / "resnet18.onnx.gz")
