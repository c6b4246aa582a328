"""Batched kernels for puzzles that show a row of precomputed square tiles in a permuted order
(zoom_in_puzzle): permutation steps (swap two slots, gather a whole ordering) and the solved
test (Numba). The tiles are drawn into frames by render/blit.py.

Nothing here knows a family by name. ``order`` (B, N) holds, per display slot, the index of the
tile shown there.
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
