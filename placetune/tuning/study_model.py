"""The model a study searched, read back from the store: its checked ``pt_models`` row and the Model loaded again.

Exporting a plan, calibrating a device profile and resuming a tune all start from a stored study
and need its model: the row says where the model came from (a file or the zoo) and its input
shapes, and the model is loaded again only when its hash is the stored one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from placetune._lazy import lazy_import
from placetune.errors import ModelError, PlacetuneError, StoreError
from placetune.model import zoo
from placetune.model.model import Model
from placetune.store.schema import ModelRow

if TYPE_CHECKING:
    import sqlalchemy
    import sqlalchemy.exc as sqlalchemy_exc

    from placetune.store.records import StudyRecord
    from placetune.store.store import Store
else:
    sqlalchemy = lazy_import("sqlalchemy")
    sqlalchemy_exc = lazy_import("sqlalchemy.exc")

__all__ = ["load_study_model", "stored_model_row", "stored_shapes"]


def stored_model_row(store: "Store", model_hash: str) -> Any:
    """The ``pt_models`` row of a model (None when not stored), checked like every row read back.

    Raises:
        StoreError: the table cannot be read, or the row's shapes, name or path have the wrong type.
    """
    table = ModelRow.__table__
    try:
        with store.engine.connect() as conn:
            row = conn.execute(sqlalchemy.select(table).where(table.c.hash == model_hash)).first()
    except sqlalchemy_exc.SQLAlchemyError as exc:
        raise StoreError(f"cannot read the models table of {store.url}: {str(exc).splitlines()[0]}") from None
    if row is not None:  # a row read back is checked like every other: shapes, name and path of the right types
        shapes = row.shapes
        ok = (shapes is None or isinstance(shapes, dict) and all(
            isinstance(k, str) and isinstance(v, list) and all(isinstance(d, int) and not isinstance(d, bool)
                                                               and 0 <= d < 2**31 for d in v)
            for k, v in shapes.items())) and isinstance(row.name, str) and isinstance(row.path, (str, type(None)))
        if not ok:
            raise StoreError(f"the stored model {model_hash[:12]} of {store.url} is corrupt (its shapes, name or path "
                             "have the wrong type): the database was edited or damaged")
    return row


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
    row = stored_model_row(store, st.model_hash)
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
    row = stored_model_row(store, st.model_hash)
    return None if row is None else dict(row.shapes or {})
