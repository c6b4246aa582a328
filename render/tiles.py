"""Python face of the tile compositor (render/_tiles.pyx): argument checks, then one call."""
from __future__ import annotations

import numpy as np

from . import _tiles


def _frames_arg(frames):
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4
            and frames.shape[3] == 3 and frames.flags.c_contiguous):
        raise ValueError("frames: expected a C-contiguous uint8 array of shape (B, H, W, 3)")
    return frames


def _below(values, bound) -> bool:
    """Every entry of the 1-D int64/int32 array ``values`` lies in [0, bound)."""
    if values.size <= 16:  # Python's min/max beat NumPy's reductions on a few entries
        items = values.tolist()
        return not items or (min(items) >= 0 and max(items) < bound)
    # Negative entries wrap to huge unsigned values, so one reduction checks both ends.
    unsigned = np.uint64 if values.dtype == np.int64 else np.uint32
    return int(np.maximum.reduce(values.view(unsigned))) < bound


def _idx_arg(idx, batch):
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    if idx.ndim != 1:
        raise ValueError("idx: expected a 1-D array of frame indices")
    if not _below(idx, batch):
        raise ValueError(f"idx: frame indices must be in [0, {batch})")
    return idx


def _tiles_arg(tiles):
    if not (isinstance(tiles, np.ndarray) and tiles.dtype == np.uint8 and tiles.ndim == 4
            and tiles.shape[3] == 3 and tiles.flags.c_contiguous):
        raise ValueError("tiles: expected a C-contiguous uint8 array of shape (T, th, tw, 3)")
    return tiles


_INT64 = np.dtype(np.int64)
_INT32 = np.dtype(np.int32)


def _as(values, dtype):
    # No copy (and no call into NumPy) when the caller already holds the right array.
    if type(values) is np.ndarray and values.dtype == dtype and values.flags.c_contiguous:
        return values
    return np.ascontiguousarray(values, dtype=dtype)


def blit_tiles(frames, idx, tiles, tile_ids, x, y) -> None:
    """Copy tile ``tile_ids[n]`` to (x[n], y[n]) (top-left, pixels) of frame ``idx[n]``.

    The range checks of ``idx`` and ``tile_ids`` run in compiled code before anything is drawn
    (a step's redraw is a few tiles, so checks in NumPy would cost more than the copies): with
    any entry out of range nothing is drawn and a ValueError says how many there were."""
    _frames_arg(frames)
    _tiles_arg(tiles)
    idx = _as(idx, _INT64)
    if idx.ndim != 1:
        raise ValueError("idx: expected a 1-D array of frame indices")
    arrays = [_as(a, _INT32) for a in (tile_ids, x, y)]
    bad = _tiles.blit_tiles(frames, idx, tiles, *arrays)
    if bad:
        raise ValueError(f"idx, tile_ids: {bad} entries out of range (frame indices must be in "
                         f"[0, {frames.shape[0]}), tile indices in [0, {tiles.shape[0]}))")


def blit_tilemaps(frames, idx, tiles, tilemaps) -> None:
    """Draw each tilemap (rows x cols tile ids) as the whole of frame ``idx[n]``."""
    _frames_arg(frames)
    _tiles_arg(tiles)
    idx = _idx_arg(idx, frames.shape[0])
    tilemaps = np.ascontiguousarray(tilemaps, dtype=np.int32)
    if tilemaps.ndim != 3 or tilemaps.shape[0] != idx.shape[0]:
        raise ValueError("tilemaps: expected shape (N, rows, cols) with N = len(idx)")
    _tiles.blit_tilemaps(frames, idx, tiles, tilemaps)
