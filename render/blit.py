"""Memory-bound frame writes on both cores (render/_blit.pyx): rows of square tiles with slot
labels (zoom_in_puzzle), and clearing what a resized frame no longer covers (variable-size
families); render/grid.py draws grids of framed pieces (jigsaw) the same way.

A batch's frames are far larger than the caches, so a draw is bound by memory writes: the
episodes are split into contiguous runs of about equal bytes, one per core
(core.threads.FRAME_POOL), and a call that writes at least ``STREAM_BYTES`` writes the whole
64-byte lines of its runs with non-temporal stores, which skip the read a cached store of a line
not in the cache makes first (on the 2-core machine ~1.7x on one core, ~2.2x on two).
"""
from __future__ import annotations

import numpy as np

from ..core import threads
from . import _blit

__all__ = ["clear_outside", "copy_frame", "draw_tiles", "STREAM_BYTES"]

STREAM_BYTES = 2 << 20


def draw_tiles(frames, tiles, order, drawn, labels, label_w, rows, full: bool) -> None:
    """Frames (B, T, W * 3) show a row of T x T tiles (``tiles`` (B, N + 1, T, T * 3)): tile 0
    in slot 0, tile ``order[b, s] + 1`` in slot s + 1 with label patch ``labels[s]``
    (``label_w[s]`` px wide) at its bottom-right. ``full`` draws every slot of ``rows``; else
    only the slots whose tile differs from ``drawn`` (updated). See render/_blit.pyx."""
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    tile_bytes = tiles.shape[2] * tiles.shape[3]
    args = (frames, tiles, order, drawn, labels, label_w)
    _blit.draw_tiles(*args, rows, full, False, False)   # every row checked before any is drawn
    if full:
        weights = np.full(rows.shape[0], tiles.shape[1] * tile_bytes, np.int64)
    else:
        weights = (order[rows] != drawn[rows]).sum(axis=1) * tile_bytes
        keep = weights > 0
        rows, weights = rows[keep], weights[keep]
    if rows.shape[0] == 0:
        return
    stream = bool(weights.sum() >= STREAM_BYTES)
    threads.FRAME_POOL.run_parts(lambda part: _blit.draw_tiles(*args, part, full, stream), rows,
                                 weights, threads.THREAD_BYTES)


def clear_outside(frames, rows, sizes, old) -> None:
    """Zero what frame ``rows[i]`` of ``frames`` (B, H, W, 3) showed inside its old size
    ``old[i]`` and outside its new size ``sizes[i]`` ((h, w) each): a variable-size family's
    ``Family.clear_padding`` in compiled code (write-prefetched rows; render/_blit.pyx)."""
    if frames.ndim != 4 or frames.shape[3] != 3 or not frames.flags.c_contiguous:
        raise ValueError(f"frames: expected a C-contiguous (B, H, W, 3) buffer, got shape "
                         f"{frames.shape}")
    _blit.clear_outside(frames.reshape(frames.shape[0], -1), frames.shape[2] * 3,
                        np.ascontiguousarray(rows, dtype=np.int64),
                        np.ascontiguousarray(sizes, dtype=np.int64).reshape(-1, 2),
                        np.ascontiguousarray(old, dtype=np.int64).reshape(-1, 2))


def copy_frame(frames, b: int, src, h: int, w: int, x: int = 0, stream: bool = True) -> None:
    """Copy the h x w picture in the flat uint8 ``src`` into frame ``b`` of ``frames``
    (B, H, W, 3) at column ``x`` of its top rows, with streamed stores unless ``stream`` is off
    (render/_blit.pyx). Nothing outside the picture's own pixels is written."""
    _blit.copy_frame(frames.reshape(frames.shape[0], -1), frames.shape[2] * 3, int(b), src,
                     int(h), int(w), int(x), bool(stream))
