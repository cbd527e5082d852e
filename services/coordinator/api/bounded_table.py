"""A small thread-safe LRU table: the answer cache's tables are read from many request threads."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

V = TypeVar("V")


class BoundedTable(Generic[V]):
    """A thread-safe table that keeps the ``size`` most recently used entries: reads come
    from many request threads, so a lookup and its reordering happen under one lock."""

    def __init__(self, size: int) -> None:
        self.size, self._entries, self._lock = size, OrderedDict[Any, V](), threading.Lock()

    def get(self, key: Any) -> V | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: Any, value: V) -> None:
        with self._lock:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)


__all__ = ["BoundedTable"]
