"""Batched kernels for puzzles that show a row of precomputed square tiles in a permuted order
(zoom_in_puzzle): permutation steps (swap two slots, gather a whole ordering) and the blit of
tiles plus constant slot labels into frames (Numba).

Nothing here knows a family by name. ``order`` (B, N) holds, per display slot, the index of the
tile shown there; ``tiles`` (B, N + 1, T, T * 3) are per-episode tiles flattened per row, tile 0
being a fixed leading picture (slot 0) and tile c + 1 the tile of index c; frames are flattened
the same way (B, T, W * 3). Labels (N, LH, LW * 3) are constant patches right-aligned at the
bottom-right corner of each slot; ``label_w[s]`` is the width in pixels actually used by slot s.
"""
import numpy as np
from numba import njit


@njit(cache=True)
def step_orders(order, kind, ints, rows, swap_kind, reorder_kind):
    """Apply each row's swap (ints[0], ints[1], 1-based slots) or reorder (ints[:N], 1-based:
    new[k] = old[ints[k] - 1]) where ``rows`` is true. Payloads are already validated."""
    n = order.shape[1]
    scratch = np.empty(n, order.dtype)
    for b in range(order.shape[0]):
        if not rows[b]:
            continue
        if kind[b] == swap_kind:
            i = ints[b, 0] - 1
            j = ints[b, 1] - 1
            t = order[b, i]
            order[b, i] = order[b, j]
            order[b, j] = t
        elif kind[b] == reorder_kind:
            for k in range(n):
                scratch[k] = order[b, ints[b, k] - 1]
            for k in range(n):
                order[b, k] = scratch[k]


@njit(cache=True, inline="always")
def _copy(out, inp, count):
    # A loop over views indexed from 0 (no negative-index test per byte) vectorizes; slice
    # assignment did not (about 2.7 times slower).
    for t in range(count):
        out[t] = inp[t]


@njit(cache=True, nogil=True)
def draw_tiles(frames, tiles, order, drawn, labels, label_w, rows, full):
    """Draw the slots of ``rows``: with ``full`` every slot (and slot 0), else only the slots
    whose tile differs from ``drawn`` (what the frame shows now). ``drawn`` is updated.
    Returns the number of slots drawn. Releases the GIL: callers split a batch's rows between
    threads (core.threads.FRAME_POOL)."""
    t = tiles.shape[2]
    row_px = t * 3
    lh = labels.shape[1]
    lw_max = labels.shape[2] // 3
    n = order.shape[1]
    count = 0
    for i in range(rows.shape[0]):
        b = rows[i]
        if full:
            for y in range(t):
                _copy(frames[b, y, 0:row_px], tiles[b, 0, y], row_px)
        for s in range(n):
            c = order[b, s]
            if not full and drawn[b, s] == c:
                continue
            drawn[b, s] = c
            count += 1
            x0 = row_px * (s + 1)
            keep = (t - label_w[s]) * 3
            for y in range(t - lh):
                _copy(frames[b, y, x0:x0 + row_px], tiles[b, c + 1, y], row_px)
            for y in range(t - lh, t):
                _copy(frames[b, y, x0:x0 + keep], tiles[b, c + 1, y], keep)
                _copy(frames[b, y, x0 + keep:x0 + row_px],
                      labels[s, y - (t - lh), (lw_max - label_w[s]) * 3:], row_px - keep)
    return count



@njit(cache=True)
def solved_rows(order, out):
    """out[b] = order[b] is the identity (slot k shows tile k)."""
    for b in range(order.shape[0]):
        ok = True
        for k in range(order.shape[1]):
            if order[b, k] != k:
                ok = False
                break
        out[b] = ok
