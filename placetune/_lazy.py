"""Modules imported on first use: :func:`lazy_import`, for the few places that must stay light.

``import placetune`` and the command line's start import none of the heavy optional packages
(TensorRT, PyCUDA, matplotlib, Optuna, SQLAlchemy, ONNX, SciPy). A module that needs one of them in
a function that is rarely called names it at the top with :func:`lazy_import` instead of importing
it inside the function: its dependencies stay visible at the top of the file (the architecture test
reads these calls as imports), and the package is imported the first time one of its attributes is
read. Everywhere else, modules use ordinary top-level imports.

Example:
    >>> from placetune._lazy import lazy_import
    >>> json = lazy_import("json")
    >>> json.dumps([1])
    '[1]'

For type checkers, pair it with the real import::

    if TYPE_CHECKING:
        import optuna
    else:
        optuna = lazy_import("optuna")
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__all__ = ["lazy_import"]


class _LazyModule(types.ModuleType):
    """A stand-in for a module that imports it on the first attribute read, then forwards to it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_placetune_lazy_module"] = None

    def _load(self) -> types.ModuleType:
        module = self.__dict__["_placetune_lazy_module"]
        if module is None:
            module = importlib.import_module(self.__name__)
            self.__dict__["_placetune_lazy_module"] = module
        return module

    def __getattr__(self, item: str) -> Any:
        return getattr(self._load(), item)

    def __dir__(self) -> list[str]:
        return dir(self._load())

    def __repr__(self) -> str:
        state = "imported" if self.__dict__["_placetune_lazy_module"] is not None else "not imported yet"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy_import(name: str) -> types.ModuleType:
    """The module ``name`` (dotted, absolute), imported the first time one of its attributes is read.

    An import error (the package is not installed) is raised at that first read, where the code
    that needs the package runs. A module already imported is returned as it is.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    return _LazyModule(name)
