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

Pictures live in one flat uint8 atlas (``atlas[off:off + h * w * 3]`` is an h x w RGB picture);
frames are written through a flat per-episode view ``fr[b]`` of a (B, Hc, Wc, 3) buffer, whose
row stride is ``Wc * 3`` bytes. Every draw repaints a rectangle of the frame exactly as a full
paste of all pieces in row-major order would leave it, so a step redraws only the cells it
changed (grown by the one pixel a wider piece can spill) and still equals a full redraw.
"""
import numpy as np
from numba import njit, prange

from .batching import row_kernel


@njit(cache=True, inline="always")
def span(i, total, parts):
    """(start, length) of part i when ``total`` pixels are split into ``parts`` parts, the
    first ``total % parts`` parts one pixel longer."""
    base = total // parts
    extra = total % parts
    return i * base + min(i, extra), base + (1 if i < extra else 0)


# --------------------------------------------------------------------------- stepping
@njit(cache=True)
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


# --------------------------------------------------------------------------- drawing
@njit(cache=True, inline="always")
def _fill(fr, start, count, value):
    # Index a view from 0 so the loop index is known non-negative: no wraparound test per
    # byte, and LLVM vectorizes the loop.
    view = fr[start:start + count]
    for t in range(count):
        view[t] = value


@njit(cache=True, inline="always")
def _copy(fr, dst, atlas, src, count):
    out = fr[dst:dst + count]
    inp = atlas[src:src + count]
    for t in range(count):
        out[t] = inp[t]


@njit(cache=True)
def _paint(fr, stride, atlas, off, h, w, rows_n, cols_n, border, current, inv_target,
           x0, y0, x1, y1, clear):
    """Repaint frame rectangle [x0, x1) x [y0, y1) (already clipped to the episode's frame) as
    the reference's full paste leaves it: black, then every framed piece in row-major order."""
    if x1 <= x0 or y1 <= y0:
        return
    if clear:
        for y in range(y0, y1):
            _fill(fr, y * stride + x0 * 3, (x1 - x0) * 3, 0)
    n = rows_n * cols_n
    for q in range(n):
        r = q // cols_n
        c = q % cols_n
        cx, _ = span(c, w, cols_n)
        cy, _ = span(r, h, rows_n)
        dx = cx + 2 * border * c
        dy = cy + 2 * border * r
        k = inv_target[current[q]]
        sx, pw = span(k % cols_n, w, cols_n)
        sy, ph = span(k // cols_n, h, rows_n)
        px0 = max(dx, x0)
        px1 = min(dx + pw + 2 * border, x1)
        py0 = max(dy, y0)
        py1 = min(dy + ph + 2 * border, y1)
        if px0 >= px1 or py0 >= py1:
            continue
        ix0 = min(max(dx + border, px0), px1)
        ix1 = min(max(dx + border + pw, ix0), px1)
        for y in range(py0, py1):
            base = y * stride
            v = y - dy - border
            if v < 0 or v >= ph:
                _fill(fr, base + px0 * 3, (px1 - px0) * 3, 255)
                continue
            if ix0 > px0:
                _fill(fr, base + px0 * 3, (ix0 - px0) * 3, 255)
            if ix1 > ix0:
                src = off + ((sy + v) * w + sx + (ix0 - dx - border)) * 3
                _copy(fr, base + ix0 * 3, atlas, src, (ix1 - ix0) * 3)
            if px1 > ix1:
                _fill(fr, base + ix1 * 3, (px1 - ix1) * 3, 255)


@njit(cache=True, inline="always")
def _inverse(target_b, inv):
    for k in range(target_b.shape[0]):
        inv[target_b[k]] = k


@njit(cache=True, inline="always")
def _frame_size(h, w, rows_n, cols_n, border):
    return h + 2 * rows_n * border, w + 2 * cols_n * border


def _draw_full(fr, stride, atlas, slot_off, slot_of, image_id, image_hw, current, target,
               rows_n, cols_n, border, rows):
    """Full frames of ``rows`` (every needed picture must be in the atlas: see
    ``missing_pictures``)."""
    n = current.shape[1]
    for i in prange(rows.shape[0]):
        b = rows[i]
        if image_id[b] < 0:
            continue
        inv = np.empty(n, np.int64)
        _inverse(target[b], inv)
        h = image_hw[b, 0]
        w = image_hw[b, 1]
        fh, fw = _frame_size(h, w, rows_n, cols_n, border)
        clear = (h % rows_n != 0) or (w % cols_n != 0)
        _paint(fr[b], stride, atlas, slot_off[slot_of[image_id[b]]], h, w, rows_n, cols_n,
               border, current[b], inv, 0, 0, fw, fh, clear)


draw_full = row_kernel(12)(_draw_full)


@njit(cache=True)
def missing_pictures(slot_of, image_id, rows, out):
    """Write the distinct picture ids of ``rows`` that have no atlas slot into ``out``; return
    their number."""
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


@njit(cache=True)
def changed_rows(changed, out):
    """Rows with any changed position, into ``out``; return their number."""
    n = 0
    for b in range(changed.shape[0]):
        for p in range(changed.shape[1]):
            if changed[b, p]:
                out[n] = b
                n += 1
                break
    return n


def _draw_changed(fr, stride, atlas, slot_off, slot_of, image_id, image_hw, current, target,
                  rows_n, cols_n, border, changed, rows):
    """Redraw the changed cells of ``rows`` (from ``changed_rows``): each changed position's
    framed cell, grown by one pixel right and down where crops are unequal (the most a piece
    can spill into the next cell), repainted with every piece that reaches into it."""
    n = current.shape[1]
    for i in prange(rows.shape[0]):
        b = rows[i]
        if image_id[b] < 0:
            continue
        inv = np.empty(n, np.int64)
        _inverse(target[b], inv)
        h = image_hw[b, 0]
        w = image_hw[b, 1]
        fh, fw = _frame_size(h, w, rows_n, cols_n, border)
        grow_x = 1 if w % cols_n != 0 else 0
        grow_y = 1 if h % rows_n != 0 else 0
        clear = grow_x == 1 or grow_y == 1
        off = slot_off[slot_of[image_id[b]]]
        for p in range(n):
            if not changed[b, p]:
                continue
            r = p // cols_n
            c = p % cols_n
            cx, cw = span(c, w, cols_n)
            cy, ch = span(r, h, rows_n)
            x0 = cx + 2 * border * c
            y0 = cy + 2 * border * r
            x1 = min(x0 + cw + 2 * border + grow_x, fw)
            y1 = min(y0 + ch + 2 * border + grow_y, fh)
            _paint(fr[b], stride, atlas, off, h, w, rows_n, cols_n, border, current[b], inv,
                   x0, y0, x1, y1, clear)


draw_changed = row_kernel(13)(_draw_changed)
