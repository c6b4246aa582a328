"""The one cache helper: a bounded, locked, least-recently-used map.

Family instances are immutable after construction (DESIGN.md "Threads"); what they learn while
running (decoded pictures, fitted pictures, meshes, resampled tiles, probes of the resampler's
pass order) goes through a ``BoundedCache``, so every cache in the package is safe to use from
several threads and cannot grow without limit. A cache is bounded by entries, by bytes (the
``nbytes`` of its values, or a size function), or both; the least recently used entries go first.

``get_or_build`` builds a missing value outside the lock (a decode or a mesh load may take long
and other keys must not wait for it). Two threads missing the same key at once may both build it;
the first value stored wins and both get it, so a value must be a pure function of its key.
Values are shared between threads: store read-only arrays (``setflags(write=False)``).
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable, Hashable

_CACHES: "weakref.WeakSet[BoundedCache]" = weakref.WeakSet()


def nbytes(value) -> int:
    """The bytes a value holds: its ``nbytes`` (NumPy arrays, meshes that define it), else 0."""
    try:
        return int(getattr(value, "nbytes", 0))
    except (TypeError, ValueError):
        return 0


class BoundedCache:
    """A thread-safe LRU map holding at most ``max_items`` entries and ``max_bytes`` bytes
    (None: no bound of that kind; one of them must be given). An entry larger than
    ``max_bytes`` by itself is returned but not kept."""

    def __init__(self, name: str, *, max_items: int | None = None, max_bytes: int | None = None,
                 size: Callable[[object], int] = nbytes):
        if max_items is None and max_bytes is None:
            raise ValueError(f"{name}: a cache needs max_items or max_bytes")
        if max_items is not None and max_items < 1:
            raise ValueError(f"max_items: must be at least 1, got {max_items}")
        if max_bytes is not None and max_bytes < 0:
            raise ValueError(f"max_bytes: must be at least 0, got {max_bytes}")
        self.name = name
        self.max_items = max_items
        self.max_bytes = max_bytes
        self._size = size
        self._entries: "OrderedDict[Hashable, tuple[object, int]]" = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = self.evictions = 0
        _CACHES.add(self)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key) -> bool:
        with self._lock:
            return key in self._entries

    @property
    def nbytes(self) -> int:
        """Bytes held now (as the size function counts them)."""
        return self._bytes

    def get(self, key, default=None):
        """The value of ``key`` (now the most recently used), or ``default``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return default
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key, value):
        """Store ``value`` under ``key`` unless a value is there already; return the value kept
        (the earlier one if another thread stored it first)."""
        size = int(self._size(value))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                return entry[0]
            if self.max_bytes is not None and size > self.max_bytes:
                return value   # too large to keep at all: the caller uses it once
            self._entries[key] = (value, size)
            self._bytes += size
            self._trim()
            return value

    def get_or_build(self, key, build: Callable[[], object]):
        """The value of ``key``, built by ``build()`` (outside the lock) and stored if missing.
        An exception from ``build`` propagates and stores nothing."""
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = self.put(key, build())
        return value

    def _trim(self) -> None:
        entries = self._entries
        while entries and (
                (self.max_items is not None and len(entries) > self.max_items)
                or (self.max_bytes is not None and self._bytes > self.max_bytes)):
            _, (_, size) = entries.popitem(last=False)
            self._bytes -= size
            self.evictions += 1

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def __repr__(self) -> str:
        return (f"BoundedCache({self.name!r}, {len(self._entries)} entries, {self._bytes} bytes, "
                f"max_items={self.max_items}, max_bytes={self.max_bytes})")


_MISSING = object()


def all_caches() -> list[BoundedCache]:
    """Every live cache of this process (for inspection and tests)."""
    return sorted(_CACHES, key=lambda c: c.name)


def clear_all() -> None:
    """Empty every cache of this process."""
    for cache in list(_CACHES):
        cache.clear()
