"""Batched kernels for puzzles that show N items in a row of slots in a permuted order and are
moved by swapping two slots or giving a whole new ordering (zoom_in_puzzle, video_unshuffle), in
Numba.

Nothing here knows a family by name. ``order`` (B, N) holds, per display slot, the id of the item
shown there; ids run from ``first`` (0 or 1, the family's numbering) to ``first + N - 1``, and
the puzzle is solved when slot k shows item ``first + k``.
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def step_orders(order, kind, ints, rows, swap_kind, reorder_kind):
    """Apply each row's swap (ints[0], ints[1]: 1-based slots) or reorder (ints[:N], 1-based:
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


@njit(cache=True, nogil=True)
def solved_rows(order, first, out):
    """out[b] = slot k of row b shows item ``first + k`` for every k."""
    for b in range(order.shape[0]):
        ok = True
        for k in range(order.shape[1]):
            if order[b, k] != first + k:
                ok = False
                break
        out[b] = ok
