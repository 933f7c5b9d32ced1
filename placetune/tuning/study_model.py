"""The model a study searched, read back from the store: its checked ``pt_models`` row and the Model loaded again.

Exporting a plan, calibrating a device profile and resuming a tune all start from a stored study
and need its model: the row says where the model came from (a file or the zoo) and its input
shapes, and the model is loaded again only when its hash is the stored one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from placetune.errors import ModelError, PlacetuneError
from placetune.model import zoo
from placetune.model.model import Model

if TYPE_CHECKING:
    from placetune.store.records import StudyRecord
    from placetune.store.store import Store

__all__ = ["load_study_model", "stored_shapes"]


def load_study_model(store: "Store", study: "StudyRecord | str", path: str | None = None) -> "Model":
    """The :class:`~placetune.model.model.Model` a study searched, loaded again from its file or the zoo.

    Uses the ``pt_models`` row of the study's model (name, path, input shapes) and checks
    that the loaded model has the stored hash. ``path``: an ONNX file to try first (the
    model's file moved, or a copy with its weights: the hash covers graph and shapes only).

    Raises:
        ModelError: the file is gone or changed, or the model is neither a file nor a zoo model.
        UnknownNameError: no such study.
    """
    st = store.study(study) if isinstance(study, str) else study
    row = store.model_row(st.model_hash)
    if row is None:
        raise ModelError(f"the database has no model row for study {st.name!r} (hash {st.model_hash[:12]})")
    shapes = {k: tuple(v) for k, v in (row.shapes or {}).items()}
    tried: list[str] = []
    candidates: list[tuple[str, Any]] = []
    if path:
        candidates.append((f"file {path}", lambda: Model.load(path, shapes or None)))
    if row.path:
        candidates.append((f"file {row.path}", lambda: Model.load(row.path, shapes or None)))
    base = str(row.name).partition(":")[0]
    if base in zoo.names():
        candidates.append((f"zoo model {row.name}", lambda: Model.load(str(row.name), batch=int(st.batch))))
    for what, make in candidates:
        try:
            model = make()
        except PlacetuneError as exc:
            tried.append(f"{what}: {exc}")
            continue
        if st.model_hash in (model.hash, model.legacy_hash):  # legacy: stored by an older placetune
            return model
        tried.append(f"{what} has hash {model.hash[:12]}, the study's model has {st.model_hash[:12]}")
    why = "; ".join(tried) or "it was loaded from neither a file nor the zoo"
    raise ModelError(f"cannot load the model of study {st.name!r} ({row.name}) again: {why}")


def stored_shapes(store: "Store", st: "StudyRecord") -> dict[str, list[int]] | None:
    """The input shapes stored with a study's model (None when its model row is missing)."""
    row = store.model_row(st.model_hash)
    return None if row is None else dict(row.shapes or {})
