"""Batched kernels for grid jigsaw puzzles: a picture cut into an R x C grid of rectangular
crops, each framed by a white border, shown in a permuted order (Numba).

Nothing here knows a family by name. A board is two permutations of 0..N-1 (N = R * C) per
episode: ``target[k]`` is the piece id given to crop k (the k-th cell of the unscrambled
picture, row-major) and ``current[p]`` the piece id shown at grid position p. Piece geometry
follows the reference's integer split of a W x H picture: column j is ``W // C`` pixels wide
plus one for the first ``W % C`` columns (rows likewise), and the framed piece of a crop is the
crop plus ``b`` white pixels on every side. Position p's framed cell starts at the sum of the
widths (heights) of the columns (rows) before it plus ``2 * b`` per column (row); a piece keeps
its crop's size wherever it is placed, so with unequal crops a piece may overlap the next cell
by one pixel (the later paste wins, pastes go row-major) or leave a one-pixel black gap.

Drawing (render/_blit.pyx) repaints a rectangle of the frame exactly as a full paste of all
pieces in row-major order would leave it, so a step redraws only the cells it changed (grown by
the one pixel a wider piece can spill) and still equals a full redraw; ``apply_moves`` marks
those cells. The picture bookkeeping of the redraw (which rows changed, which pictures the
atlas lacks) is render/atlas.py's.
"""
import numpy as np
from numba import njit


# --------------------------------------------------------------------------- stepping
@njit(cache=True, nogil=True)
def apply_moves(current, kind, ints, rows, swap_kind, reorder_kind, cols, changed):
    """The swaps and reorders of one step, in place, for the rows where ``rows`` is true.

    swap: ints = (row1, col1, row2, col2), exchange the pieces at the two positions.
    reorder: ints[:n] = L, gather: new[k] = old[L[k]].
    ``changed[b, p]`` is set for every position whose piece changed (cleared for every row
    first), so the renderer redraws only those cells."""
    n = current.shape[1]
    old = np.empty(n, current.dtype)
    for b in range(current.shape[0]):
        for p in range(n):
            changed[b, p] = False
        if not rows[b]:
            continue
        if kind[b] == swap_kind:
            p1 = ints[b, 0] * cols + ints[b, 1]
            p2 = ints[b, 2] * cols + ints[b, 3]
            if p1 != p2:
                t = current[b, p1]
                current[b, p1] = current[b, p2]
                current[b, p2] = t
                changed[b, p1] = True
                changed[b, p2] = True
        elif kind[b] == reorder_kind:
            for p in range(n):
                old[p] = current[b, p]
            for p in range(n):
                v = old[ints[b, p]]
                if v != old[p]:
                    changed[b, p] = True
                current[b, p] = v
