"""Polycube "snakes" for mental_rotation_3d_cube (spec section 3, "Shape generation"): unit
cubes along orthogonal straight segments, generated per episode from its seed, and the cube mesh
in trimesh's box layout.

A shape is ``seg_lens`` (cubes per segment) and ``dir_indices`` (indices into the axis table
+x, -x, +y, -y, +z, -z). Segment 0 runs along +x from the origin cell; each recorded direction
applies to the *next* segment (the last one is unused), and every direction is drawn uniformly
among the four axes orthogonal to the current one. Cells are a set: a segment crossing an
earlier one merges the shared cells (kept in first-visit order), nothing is rejected.
"""
import math

import numpy as np
from numba import njit

from .rng import below, seed_state, uniform01

STREAM_SHAPE = np.uint64(11)
STREAM_ROTATION = np.uint64(12)
STREAM_SOLVER = np.uint64(13)

AXES = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], np.int64)

# trimesh's box: vertex k has signs (x, y, z) from the bits of k (4, 2, 1); 12 outward-wound
# triangles.
BOX_SIGNS = np.array([[(k >> 2) & 1, (k >> 1) & 1, k & 1] for k in range(8)], np.float64) * 2 - 1
BOX_FACES = np.array([(1, 3, 0), (4, 1, 0), (0, 3, 2), (2, 4, 0), (1, 7, 3), (5, 1, 4),
                      (5, 7, 1), (3, 7, 2), (6, 4, 2), (2, 7, 6), (6, 5, 4), (7, 5, 6)],
                     np.int64)


def max_cells(num_segments: int, max_len: int) -> int:
    """Cells of the longest possible snake: the origin plus every segment at full length."""
    return 1 + num_segments * max_len


@njit(cache=True, nogil=True)
def sample_shapes(seg_lens, dirs, secret, rows, seeds, len_lo, len_hi):
    """Fresh shapes and hidden angles for ``rows``: segment lengths uniform in [len_lo, len_hi],
    directions uniform among the 4 axes orthogonal to the current one (starting from +x), then
    (yaw, pitch, roll) each uniform in [0, 2 pi). Each from its own stream of the episode seed."""
    span = len_hi - len_lo + 1
    n_seg = seg_lens.shape[1]
    for k in range(rows.shape[0]):
        b = rows[k]
        s = seed_state(seeds[k], STREAM_SHAPE)
        for j in range(n_seg):
            s, v = below(s, span)
            seg_lens[b, j] = len_lo + v
        cur = 0
        for j in range(n_seg):
            s, v = below(s, 4)
            # The v-th axis index whose axis differs from the current one's.
            m = -1
            for a in range(6):
                if a // 2 != cur // 2:
                    m += 1
                    if m == v:
                        cur = a
                        break
            dirs[b, j] = cur
        r = seed_state(seeds[k], STREAM_ROTATION)
        for j in range(3):
            r, u = uniform01(r)
            secret[b, j] = 2.0 * math.pi * u


@njit(cache=True, nogil=True)
def build_cells(seg_lens, dirs, rows, cells, n_cells):
    """The distinct cells of each row's snake, in first-visit order, into cells[b, :n]."""
    for k in range(rows.shape[0]):
        b = rows[k]
        n = 1
        cells[b, 0, 0] = 0
        cells[b, 0, 1] = 0
        cells[b, 0, 2] = 0
        x = 0
        y = 0
        z = 0
        d = 0
        for j in range(seg_lens.shape[1]):
            for _ in range(seg_lens[b, j]):
                x += AXES[d, 0]
                y += AXES[d, 1]
                z += AXES[d, 2]
                seen = False
                for q in range(n):
                    if cells[b, q, 0] == x and cells[b, q, 1] == y and cells[b, q, 2] == z:
                        seen = True
                        break
                if not seen:
                    cells[b, n, 0] = x
                    cells[b, n, 1] = y
                    cells[b, n, 2] = z
                    n += 1
            d = dirs[b, j]
        for q in range(n, cells.shape[1]):
            cells[b, q, 0] = 0
            cells[b, q, 1] = 0
            cells[b, q, 2] = 0
        n_cells[b] = n
