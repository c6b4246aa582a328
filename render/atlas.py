"""The one picture atlas of the photo families: pictures decoded lazily by id, shared through a
byte-capped store, and packed per BatchEnv into one flat uint8 buffer that compiled kernels read.

Two layers, so that family instances stay immutable (DESIGN.md "Threads") while drawing reads
one flat buffer:

* ``PictureStore(name, loader, count, max_bytes)`` belongs to a family instance and is shared by
  all of its BatchEnvs and threads. ``loader(id)`` turns a picture id (0..count-1: the index in
  the family's image source) into an (h, w, C) or (h, w) uint8 array: decode, fit, resample,
  whatever the family shows. The store keeps the results read-only and C-contiguous in a
  ``core.cache.BoundedCache`` bounded by ``max_bytes`` (least recently used first), so it is
  locked and bounded like every cache of the package. ``store.picture(id)`` returns the picture
  (built on first use; an exception from the loader, e.g. ``ImageFileError`` naming the file,
  propagates and stores nothing), ``store.dims(id)`` its (h, w); ``held``, ``nbytes`` and
  ``evictions`` say what it holds and has dropped.

* ``PictureAtlas(pictures, count, byte_cap, channels=3)`` is render scratch of ONE BatchEnv: make
  it in ``new_workspace`` (``PictureAtlas(store.picture, len(source))``). ``pictures`` is any
  callable id -> array (a store's ``picture``, or a plain function). Slots are filled on demand:

  - ``atlas.ensure(ids)`` gives every id >= 0 of ``ids`` a slot (negative ids are skipped: "no
    picture"). Decoding happens before anything of the atlas changes, so a loader error leaves
    the atlas as it was. When the new pictures do not fit ``byte_cap`` the atlas starts over
    with exactly the pictures this call asked for (``restarts`` counts these); the State holds
    source ids, never slots, so a restart changes no episode. A single call asking for more than
    ``byte_cap`` is still served whole; the next call that adds a picture then starts over, so
    the atlas never holds more than ``byte_cap`` plus what one call needs.
  - ``atlas.ensure_rows(image_id, rows)`` is the per-step form: ``image_id`` int64[B] (the
    State's picture id of each episode) and ``rows`` int64[k] (the episodes to draw); a compiled
    pass (``missing_pictures``) finds the ids without a slot, and only then Python runs. Returns
    the number of pictures that were missing.
  - ``atlas.slots(ids)`` ensures ``ids`` and returns their slot numbers (int64, -1 for ids < 0).
  - ``atlas.view(id)`` is a read-only (h, w, C) view of a picture's pixels in the buffer (for
    Python-side callers; ensures it first).

  What kernels read (pass these five arrays; all C-contiguous, re-read them after every
  ``ensure`` because growing the buffer replaces it):

  - ``atlas.buffer``   uint8[capacity]: the pixels; slot s occupies
    ``buffer[slot_off[s] : slot_off[s] + h * w * channels]`` as h rows of ``w * channels``
    bytes (no padding between rows or slots).
  - ``atlas.slot_off`` int64[>= count]: byte offset of each slot.
  - ``atlas.slot_hw``  int32[>= count, 2]: (h, w) of each slot (the rect; x, y origin is 0).
  - ``atlas.slot_of``  int64[ids]: the slot of each picture id, -1 where it has none.
  - ``atlas.count``    slots in use (entries of slot_off / slot_hw beyond it are stale).

  A Numba or Cython kernel reads pixel (y, x, c) of picture k as
  ``buffer[slot_off[slot_of[k]] + (y * slot_hw[s, 1] + x) * channels + c]`` with
  ``s = slot_of[k]``. render/grid.py's ``draw_grid`` (jigsaw) is the worked example.

  Threads: an atlas is mutated only by ``ensure*``, which hold the atlas's lock; one BatchEnv
  steps from one thread at a time, so its kernels never read a buffer another thread is
  repacking. The store is shared and locked (BoundedCache).

Also here, generic compiled render bookkeeping used with atlases:

* ``missing_pictures(slot_of, image_id, rows, out)`` (Numba): the distinct ids of ``rows``
  without a slot into ``out``; returns their number.
* ``changed_rows(changed, out)`` (Numba): the rows b of a bool (B, N) "changed" mask with any
  changed entry into ``out``; returns their number (a step then redraws only those rows).

The API above is stable: later additions only extend it.
"""
from __future__ import annotations

import threading
from typing import Callable

import numpy as np
from numba import njit

from ..core.cache import BoundedCache

__all__ = ["PictureStore", "PictureAtlas", "missing_pictures", "changed_rows", "ATLAS_BYTES"]

ATLAS_BYTES = 512 << 20     # default byte cap of one BatchEnv's atlas
_FIRST_BUFFER = 1 << 16
_FIRST_SLOTS = 64


# --------------------------------------------------------------------------- compiled bookkeeping
@njit(cache=True, nogil=True)
def missing_pictures(slot_of, image_id, rows, out):
    """Write the distinct picture ids of ``rows`` (ids >= 0) that have no atlas slot into
    ``out``; return their number."""
    n = 0
    for i in range(rows.shape[0]):
        k = image_id[rows[i]]
        if k < 0 or slot_of[k] >= 0:
            continue
        seen = False
        for t in range(n):
            if out[t] == k:
                seen = True
                break
        if not seen:
            out[n] = k
            n += 1
    return n


@njit(cache=True, nogil=True)
def changed_rows(changed, out):
    """Rows with any changed entry of ``changed`` (bool (B, N)), into ``out``; return their
    number."""
    n = 0
    for b in range(changed.shape[0]):
        for p in range(changed.shape[1]):
            if changed[b, p]:
                out[n] = b
                n += 1
                break
    return n


# --------------------------------------------------------------------------- shared store
def _frozen(picture) -> np.ndarray:
    picture = np.asarray(picture)
    if picture.dtype != np.uint8 or picture.ndim not in (2, 3):
        raise ValueError(f"picture: expected a uint8 (h, w) or (h, w, C) array, got "
                         f"{picture.dtype} {picture.shape}")
    if picture.flags.writeable or not picture.flags.c_contiguous:
        picture = np.array(picture, order="C", copy=True)
        picture.setflags(write=False)
    return picture


class PictureStore:
    """Pictures by id, built by ``loader(id)`` on first use and kept read-only in a locked,
    byte-capped LRU (core.cache.BoundedCache); shared by a family instance's BatchEnvs."""

    def __init__(self, name: str, loader: Callable[[int], np.ndarray], count: int,
                 max_bytes: int):
        self.name = name
        self.count = int(count)
        self._loader = loader
        self._cache = BoundedCache(name, max_bytes=int(max_bytes))

    def __len__(self) -> int:
        return self.count

    def _check(self, image_id) -> int:
        k = int(image_id)
        if not 0 <= k < self.count:
            raise ValueError(f"image id: {k} out of range [0, {self.count}) of {self.name}")
        return k

    def picture(self, image_id: int) -> np.ndarray:
        """Picture ``image_id``: read-only, C-contiguous uint8 (loader errors propagate)."""
        k = self._check(image_id)
        return self._cache.get_or_build(k, lambda: _frozen(self._loader(k)))

    def dims(self, image_id: int) -> tuple[int, int]:
        """(height, width) of picture ``image_id``."""
        h, w = self.picture(image_id).shape[:2]
        return int(h), int(w)

    @property
    def nbytes(self) -> int:
        """Bytes the store holds now."""
        return self._cache.nbytes

    @property
    def held(self) -> int:
        """Pictures the store holds now."""
        return len(self._cache)

    @property
    def evictions(self) -> int:
        """Pictures dropped so far to stay under the byte cap."""
        return self._cache.evictions

    def __repr__(self) -> str:
        return f"PictureStore({self.name!r}, {self.count} ids, {self._cache!r})"


# --------------------------------------------------------------------------- per-BatchEnv atlas
class PictureAtlas:
    """One BatchEnv's pictures packed into a flat uint8 buffer (see the module docstring)."""

    def __init__(self, pictures: Callable[[int], np.ndarray], count: int,
                 byte_cap: int = ATLAS_BYTES, channels: int = 3):
        if int(byte_cap) < 0:
            raise ValueError(f"byte_cap: must be >= 0, got {byte_cap}")
        if int(channels) < 1:
            raise ValueError(f"channels: must be >= 1, got {channels}")
        self.pictures = pictures
        self.byte_cap = int(byte_cap)
        self.channels = int(channels)
        self.slot_of = np.full(int(count), -1, np.int64)
        self.slot_off = np.zeros(_FIRST_SLOTS, np.int64)
        self.slot_hw = np.zeros((_FIRST_SLOTS, 2), np.int32)
        self.buffer = np.zeros(_FIRST_BUFFER, np.uint8)
        self.used = 0
        self.count = 0
        self.restarts = 0
        self._scratch = np.empty(0, np.int64)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.count

    def _picture(self, image_id: int) -> np.ndarray:
        picture = np.asarray(self.pictures(image_id))
        channels = 1 if picture.ndim == 2 else picture.shape[2]
        if picture.dtype != np.uint8 or picture.ndim not in (2, 3) or channels != self.channels:
            raise ValueError(f"picture {image_id}: expected uint8 (h, w, {self.channels}), got "
                             f"{picture.dtype} {picture.shape}")
        return picture

    def ensure(self, image_ids) -> None:
        """Every id >= 0 of ``image_ids`` has a slot (see the module docstring)."""
        wanted = [k for k in dict.fromkeys(int(k) for k in np.asarray(image_ids).reshape(-1))
                  if k >= 0]
        for k in wanted:
            if k >= self.slot_of.shape[0]:
                raise ValueError(f"image id: {k} out of range [0, {self.slot_of.shape[0]})")
        with self._lock:
            missing = [k for k in wanted if self.slot_of[k] < 0]
            if not missing:
                return
            # Decode first: an error leaves the atlas as it was.
            pictures = {k: self._picture(k) for k in missing}
            need = sum(p.nbytes for p in pictures.values())
            if self.used + need > self.byte_cap and self.count:
                # Start over with what this call needs (the rest is read again when next drawn).
                keep = [k for k in wanted if self.slot_of[k] >= 0]
                pictures.update({k: self._picture(k) for k in keep})
                self.slot_of[:] = -1
                self.used = 0
                self.count = 0
                self.restarts += 1
                missing = wanted
            for k in missing:
                self._add(k, pictures[k])

    def ensure_rows(self, image_id: np.ndarray, rows: np.ndarray) -> int:
        """Slots for the pictures episodes ``rows`` show (``image_id``: int64[B]); returns how
        many were missing (a compiled check first: nothing else runs when none is)."""
        if self._scratch.shape[0] < rows.shape[0]:
            self._scratch = np.empty(max(rows.shape[0], 16), np.int64)
        missing = missing_pictures(self.slot_of, image_id, rows, self._scratch)
        if missing:
            # Everything these rows show (a restart keeps exactly that).
            self.ensure(image_id[rows])
        return missing

    def slots(self, image_ids) -> np.ndarray:
        """The slots of ``image_ids`` (int64, -1 for ids < 0), ensured first."""
        ids = np.asarray(image_ids, dtype=np.int64)
        self.ensure(ids)
        out = np.full(ids.shape, -1, np.int64)
        ok = ids >= 0
        out[ok] = self.slot_of[ids[ok]]
        return out

    def view(self, image_id: int) -> np.ndarray:
        """A read-only (h, w, channels) view of picture ``image_id`` in the buffer (valid until
        the next ``ensure``)."""
        s = int(self.slots([int(image_id)])[0])
        h, w = (int(v) for v in self.slot_hw[s])
        off = int(self.slot_off[s])
        out = self.buffer[off:off + h * w * self.channels].reshape(h, w, self.channels)
        out = out.view()
        out.setflags(write=False)
        return out

    def _add(self, image_id: int, picture: np.ndarray) -> None:
        size = picture.nbytes
        if self.used + size > self.buffer.shape[0]:
            grown = np.zeros(max(2 * self.buffer.shape[0], self.used + size), np.uint8)
            grown[:self.used] = self.buffer[:self.used]
            self.buffer = grown
        if self.count == self.slot_off.shape[0]:
            self.slot_off = np.concatenate([self.slot_off, np.zeros_like(self.slot_off)])
            self.slot_hw = np.concatenate([self.slot_hw, np.zeros_like(self.slot_hw)])
        self.buffer[self.used:self.used + size] = picture.reshape(-1)
        self.slot_off[self.count] = self.used
        self.slot_hw[self.count] = picture.shape[:2]
        self.slot_of[image_id] = self.count
        self.used += size
        self.count += 1

    def __repr__(self) -> str:
        return (f"PictureAtlas({self.count} slots, {self.used} of {self.byte_cap} bytes, "
                f"{self.restarts} restarts)")
