"""Bounded memos for hot paths that meet the same inputs again (a search refits on the same
measurements and evaluates the same placements round after round).

:class:`Memo` keeps values by key, the least recently used out first once it holds ``size``.
:class:`IdentityMemo` keeps values computed from objects that cannot be keys (a measurement, a
segmentation) by the object's identity, with an optional tag (e.g. the layout a row was built
for): it holds the object with its value, so its ``id`` cannot pass to another object while the
value is kept. The objects must not change while they are kept.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any, Generic, TypeVar

__all__ = ["Memo", "IdentityMemo"]

V = TypeVar("V")


class Memo(Generic[V]):
    """Values by key; at most ``size`` of them (None: no bound), the least recently used out first."""

    def __init__(self, size: int | None = None) -> None:
        self.size = size
        self._data: OrderedDict[Hashable, V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Hashable) -> V | None:
        """The value kept for ``key`` (now the most recently used), or None."""
        hit = self._data.get(key)
        if hit is not None:
            self._data.move_to_end(key)
        return hit

    def put(self, key: Hashable, value: V) -> V:
        """Keep ``value`` for ``key`` and return it."""
        self._data[key] = value
        self._data.move_to_end(key)
        if self.size is not None:
            while len(self._data) > self.size:
                self._data.popitem(last=False)
        return value


class IdentityMemo(Generic[V]):
    """Values by object identity (and a tag); at most ``size`` of them, as :class:`Memo`."""

    def __init__(self, size: int | None = None) -> None:
        self._memo: Memo[tuple[Any, V]] = Memo(size)

    def __len__(self) -> int:
        return len(self._memo)

    def get(self, obj: Any, tag: Hashable = None) -> V | None:
        """The value kept for ``obj`` (and ``tag``), or None."""
        hit = self._memo.get((tag, id(obj)))
        return None if hit is None else hit[1]

    def put(self, obj: Any, value: V, tag: Hashable = None) -> V:
        """Keep ``value`` for ``obj`` (and ``tag``), and ``obj`` with it; return ``value``."""
        self._memo.put((tag, id(obj)), (obj, value))
        return value
