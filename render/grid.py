"""Grids of framed picture pieces (jigsaw), drawn by render/_blit.pyx on both cores.

``draw_grid`` paints whole frames (``changed`` None) or the changed cells of each episode. A
batch redraw is memory-bound (a reorder rewrites most of a ~0.45 MB frame): the episodes are
split into contiguous runs of about equal bytes, one per core, and when a call writes far more
than the caches hold each frame row is composed in a scratch row and streamed out. Measured on
the 2-core machine, a B=256 2 x 2 redraw of every cell (110 MB): the old Numba kernel 21.9 ms;
this one 23.9 on one thread, 10.3 on two, 6.5 on two with streamed rows.
"""
from __future__ import annotations

import numpy as np

from ..core import threads
from . import _blit, blit

__all__ = ["draw_grid"]

# A call that writes at least blit.STREAM_BYTES composes each frame row in a scratch row and
# streams it out past the caches (render/blit.py says why); one that writes at least
# core.threads.THREAD_BYTES is split across the cores.
SMALL_CALL = 8   # calls with fewer rows skip the weighing (a single env's step)


def draw_grid(frames, atlas, slot_off, slot_of, image_id, image_hw, current, target,
              rows_n: int, cols_n: int, border: int, rows, changed=None) -> None:
    """Paint episodes ``rows`` of ``frames`` (B, H, W, 3) uint8: picture ``image_id[b]`` (h, w =
    ``image_hw[b]``) stored in the flat uint8 ``atlas`` at ``slot_off[slot_of[image_id[b]]]``,
    cut into rows_n x cols_n crops framed by ``border`` white pixels, position p showing piece
    ``current[b, p]`` where ``target[b, k]`` is the piece of crop k. With ``changed`` (bool
    (B, N)) only the changed positions' cells are repainted (equal to a full repaint)."""
    if frames.ndim != 4 or frames.shape[3] != 3 or not frames.flags.c_contiguous:
        raise ValueError(f"frames: expected a C-contiguous (B, H, W, 3) buffer, got shape "
                         f"{frames.shape}")
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    if rows.shape[0] == 0:
        return
    flat = frames.reshape(frames.shape[0], -1)
    cells = None if changed is None else np.ascontiguousarray(changed).view(np.uint8)
    args = (flat, frames.shape[2] * 3, atlas, slot_off, slot_of, image_id, image_hw, current,
            target, rows_n, cols_n, border, cells)
    if rows.shape[0] < SMALL_CALL:
        _blit.draw_grid(*args, rows)   # a few frames: one call, cached stores
        return
    hw = image_hw[rows].astype(np.int64)
    weights = (hw[:, 0] + 2 * rows_n * border) * (hw[:, 1] + 2 * cols_n * border) * 3
    if cells is not None:
        weights = weights * cells[rows].sum(axis=1) // (rows_n * cols_n)
    stream = bool(weights.sum() >= blit.STREAM_BYTES)
    _blit.draw_grid(*args, rows, False, False)   # every row checked before any is painted
    threads.FRAME_POOL.run_parts(lambda part: _blit.draw_grid(*args, part, stream), rows, weights,
                                 threads.THREAD_BYTES)
