"""Batched drawing of rows of frames shown in a permuted order with positional slot labels on
a half-dark box (video_unshuffle), in Numba.

Nothing here knows a family by name. The steps (gathers on the order) and the solved test are
kernels/slot_orders.py's. Drawing copies each slot's frame (render/blit.py, streamed stores) from
the BatchEnv's workspace tiles (B, N, T, T, 3, the frames in their own order), then blends the
slot's label box (``draw_boxes``): every box pixel p becomes ``dim[p]`` (the 60 % black / 40 %
image blend, rounded as OpenCV's addWeighted rounds it), then the digit ink over it with its
coverage c: ``v + ((255 - v) * c + 127) // 255``.
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def draw_boxes(frames, tiles, rows, slots, tile_ids, dim, box_x, box_y, ink, ink_x, ink_y):
    """The label boxes of slots already copied: for each k, slot ``slots[k]`` of frame
    ``rows[k]`` (frames (B, T, W * 3)) showing tile ``tile_ids[k]`` of ``tiles`` (B, N, T, T * 3):
    the box [box_y, T) x [box_x[s], T) dimmed through ``dim``, then ``ink[s]`` over it."""
    T = tiles.shape[2]
    row_px = tiles.shape[3]
    ih = ink.shape[1]
    iw = ink.shape[2]
    for k in range(rows.shape[0]):
        b = rows[k]
        s = slots[k]
        src = tiles[b, tile_ids[k]]
        dst = frames[b]
        x0 = s * row_px
        bx = 3 * box_x[s]
        for y in range(box_y, T):
            d = dst[y]
            t = src[y]
            for j in range(bx, row_px):
                d[x0 + j] = dim[t[j]]
        base = x0 + 3 * ink_x[s]
        for y in range(ih):
            d = dst[ink_y + y]
            cov_row = ink[s, y]
            for x in range(iw):
                cov = np.int32(cov_row[x])
                if cov == 0:
                    continue
                for c in range(3):
                    v = np.int32(d[base + 3 * x + c])
                    d[base + 3 * x + c] = v + ((255 - v) * cov + 127) // 255
