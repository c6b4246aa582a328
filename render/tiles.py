"""Python face of the tile compositor (render/_tiles.pyx): argument checks, then one call."""
from __future__ import annotations

import numpy as np

from . import _tiles


def _frames_arg(frames):
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4
            and frames.shape[3] == 3 and frames.flags.c_contiguous):
        raise ValueError("frames: expected a C-contiguous uint8 array of shape (B, H, W, 3)")
    return frames


def _idx_arg(idx, batch):
    idx = np.ascontiguousarray(idx, dtype=np.int64)
    if idx.ndim != 1:
        raise ValueError("idx: expected a 1-D array of frame indices")
    if idx.size and (idx.min() < 0 or idx.max() >= batch):
        raise ValueError(f"idx: frame indices must be in [0, {batch})")
    return idx


def _tiles_arg(tiles):
    if not (isinstance(tiles, np.ndarray) and tiles.dtype == np.uint8 and tiles.ndim == 4
            and tiles.shape[3] == 3 and tiles.flags.c_contiguous):
        raise ValueError("tiles: expected a C-contiguous uint8 array of shape (T, th, tw, 3)")
    return tiles


def blit_tiles(frames, idx, tiles, tile_ids, x, y) -> None:
    """Copy tile ``tile_ids[n]`` to (x[n], y[n]) (top-left, pixels) of frame ``idx[n]``."""
    _frames_arg(frames)
    _tiles_arg(tiles)
    idx = _idx_arg(idx, frames.shape[0])
    arrays = [np.ascontiguousarray(a, dtype=np.int32) for a in (tile_ids, x, y)]
    for name, a in zip(("tile_ids", "x", "y"), arrays):
        if a.shape != idx.shape:
            raise ValueError(f"{name}: expected shape {idx.shape}, got {a.shape}")
    _tiles.blit_tiles(frames, idx, tiles, *arrays)


def blit_tilemaps(frames, idx, tiles, tilemaps) -> None:
    """Draw each tilemap (rows x cols tile ids) as the whole of frame ``idx[n]``."""
    _frames_arg(frames)
    _tiles_arg(tiles)
    idx = _idx_arg(idx, frames.shape[0])
    tilemaps = np.ascontiguousarray(tilemaps, dtype=np.int32)
    if tilemaps.ndim != 3 or tilemaps.shape[0] != idx.shape[0]:
        raise ValueError("tilemaps: expected shape (N, rows, cols) with N = len(idx)")
    _tiles.blit_tilemaps(frames, idx, tiles, tilemaps)
