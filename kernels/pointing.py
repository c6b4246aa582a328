"""Batched dynamics and drawing of the pointing families (counting, referring_dot_pointing):
dots placed at fractions of an episode's own frame, drawn as OpenCV disks over a base picture.

Pixel mapping of a ``mark (x, y)`` payload (a float32 pair in [0, 1], as the parser gives it):
``px = floor(x * (W - 1))`` in float32 arithmetic, as the reference computes it with a float32
payload (``mode`` FLOOR: counting), or the same product rounded half to even (``mode`` ROUND:
referring_dot_pointing, whose prompt promises ``round``).

Drawing: a base picture (a photo in a picture atlas, or a composed scene drawn by the caller)
and then the dots, each a filled disk (``render.circles.disk_mask``) stamped with
``render.circles.stamp_mask``. A redraw of a rectangle draws the base picture's pixels again
(envs/pointing.py) and stamps again every dot that reaches into it.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..render.circles import stamp_mask
from .scenes import owner_at

FLOOR = 0
ROUND = 1

# What a step changed in an episode (``changed``): nothing, a dot added, a dot removed or moved
# (the old dot's square needs the base picture again).
UNCHANGED = 0
ADDED = 1
REMOVED = 2


@njit(cache=True, inline="always")
def to_pixel(value, size, mode):
    """A fraction in [0, 1] (float64 holding a float32) -> pixel index in [0, size - 1]."""
    v = np.float32(value) * np.float32(size - 1)
    if mode == ROUND:
        p = np.int64(np.rint(v))
    else:
        p = np.int64(np.floor(v))
    if p < 0:
        p = 0
    if p > size - 1:
        p = size - 1
    return p


@njit(cache=True, nogil=True)
def counting_step(kind, floats, ints, move, hw, dots, n_dots, guess, changed, removed,
                  feedback, mark_kind, undo_kind, guess_kind, full_code):
    """Apply mark (append a dot, ``full_code`` when the dot array is full), undo (drop the last
    dot, if any) and guess (record ints[b, 0]) to the rows where ``move`` is set. Every row's
    ``changed``/``removed`` describe this step only (cleared elsewhere); a removed dot's slot is
    zeroed so the State holds nothing beyond ``n_dots``."""
    cap = dots.shape[1]
    for b in range(kind.shape[0]):
        changed[b] = UNCHANGED
        removed[b, 0] = 0
        removed[b, 1] = 0
        if not move[b]:
            continue
        k = kind[b]
        if k == mark_kind:
            n = n_dots[b]
            if n >= cap:
                feedback[b] = full_code
                continue
            dots[b, n, 0] = to_pixel(floats[b, 0], hw[b, 1], FLOOR)
            dots[b, n, 1] = to_pixel(floats[b, 1], hw[b, 0], FLOOR)
            n_dots[b] = n + 1
            changed[b] = ADDED
        elif k == undo_kind:
            n = n_dots[b]
            if n > 0:
                removed[b, 0] = dots[b, n - 1, 0]
                removed[b, 1] = dots[b, n - 1, 1]
                dots[b, n - 1, 0] = 0
                dots[b, n - 1, 1] = 0
                n_dots[b] = n - 1
                changed[b] = REMOVED
        elif k == guess_kind:
            guess[b] = ints[b, 0]


@njit(cache=True, nogil=True)
def pointing_step(kind, floats, move, hw, dot, has_dot, changed, removed, mark_kind):
    """Apply mark (the one dot moves to the rounded pixel) to the rows where ``move`` is set;
    ``removed`` keeps the old dot of a row that had one (its square is redrawn)."""
    for b in range(kind.shape[0]):
        changed[b] = UNCHANGED
        removed[b, 0] = 0
        removed[b, 1] = 0
        if not move[b] or kind[b] != mark_kind:
            continue
        if has_dot[b]:
            removed[b, 0] = dot[b, 0]
            removed[b, 1] = dot[b, 1]
            changed[b] = REMOVED
        else:
            changed[b] = ADDED
        dot[b, 0] = to_pixel(floats[b, 0], hw[b, 1], ROUND)
        dot[b, 1] = to_pixel(floats[b, 1], hw[b, 0], ROUND)
        has_dot[b] = True


@njit(cache=True, nogil=True)
def dot_rects(rows, dots, which, radius, out):
    """out[k] = the square (x0, y0, x1, y1) a disk of ``radius`` at ``dots[rows[k]]`` (or
    ``dots[rows[k], which[k]]`` for a (B, K, 2) array) covers."""
    for k in range(rows.shape[0]):
        b = rows[k]
        if dots.ndim == 3:
            x = dots[b, which[k], 0]
            y = dots[b, which[k], 1]
        else:
            x = dots[b, 0]
            y = dots[b, 1]
        out[k, 0] = x - radius
        out[k, 1] = y - radius
        out[k, 2] = x + radius + 1
        out[k, 3] = y + radius + 1


@njit(cache=True, nogil=True)
def stamp_dot_lists(frames, rows, dots, n_dots, disk, hw, rects, r, g, b_):
    """Stamp, in order, every dot of each row in ``rows`` (``dots[b, :n_dots[b]]``) that reaches
    into ``rects[k]`` (a whole-frame rect stamps them all), colour (r, g, b_)."""
    radius = disk.shape[0] // 2
    for k in range(rows.shape[0]):
        b = rows[k]
        for j in range(n_dots[b]):
            x = dots[b, j, 0]
            y = dots[b, j, 1]
            if (x + radius < rects[k, 0] or x - radius >= rects[k, 2]
                    or y + radius < rects[k, 1] or y - radius >= rects[k, 3]):
                continue
            stamp_mask(frames[b], disk, x, y, hw[b, 0], hw[b, 1], r, g, b_)


@njit(cache=True, nogil=True)
def stamp_last_dots(frames, rows, dots, n_dots, disk, hw, r, g, b_):
    """Stamp the last dot of each row in ``rows`` (a mark just added it)."""
    for k in range(rows.shape[0]):
        b = rows[k]
        j = n_dots[b] - 1
        if j >= 0:
            stamp_mask(frames[b], disk, dots[b, j, 0], dots[b, j, 1], hw[b, 0], hw[b, 1],
                       r, g, b_)


@njit(cache=True, nogil=True)
def stamp_contrast_dots(frames, rows, dot, has_dot, disk, hw):
    """The referring dot: for each row with a dot, the mean luma (0.299 R + 0.587 G + 0.114 B)
    of the up-to-3x3 patch of the frame centred on it (clipped at the borders; read before
    drawing: the frame shows the base picture there) picks green (> 127) or red."""
    for k in range(rows.shape[0]):
        b = rows[k]
        if not has_dot[b]:
            continue
        x = dot[b, 0]
        y = dot[b, 1]
        h = hw[b, 0]
        w = hw[b, 1]
        total = 0.0
        count = 0
        for yy in range(max(y - 1, 0), min(y + 2, h)):
            for xx in range(max(x - 1, 0), min(x + 2, w)):
                px = frames[b, yy, xx]
                total += 0.299 * px[0] + 0.587 * px[1] + 0.114 * px[2]
                count += 1
        luma = total / count if count else 0.0
        if luma > 127.0:
            stamp_mask(frames[b], disk, x, y, h, w, 0, 255, 0)
        else:
            stamp_mask(frames[b], disk, x, y, h, w, 255, 0, 0)


@njit(cache=True, nogil=True)
def scene_hits(rows, dot, target, same_category, n, cat, cx, cy, size, angle, tv, tr, tc, out):
    """out[b] = the dot of each row in ``rows`` lies on the visible part of the scene's target
    object (kernels/scenes.owner_at: the top-most object at that pixel), or with
    ``same_category`` on any object of the target's category."""
    for k in range(rows.shape[0]):
        b = rows[k]
        owner = owner_at(n, cat, cx, cy, size, angle, tv, tr, tc, b, dot[b, 0], dot[b, 1])
        t = target[b]
        out[b] = owner >= 0 and (owner == t or (same_category and cat[b, owner] == cat[b, t]))


@njit(cache=True, nogil=True)
def rows_with(changed, value, out):
    """The rows b with ``changed[b] == value`` into ``out``; returns their number."""
    n = 0
    for b in range(changed.shape[0]):
        if changed[b] == value:
            out[n] = b
            n += 1
    return n
