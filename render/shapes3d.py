"""Triangle meshes of simple solids for the 3-D rasterizer (``raster3d.draw_meshes``).

Every builder returns ``(vertices float32[V, 3], triangles int32[T, 3])`` in the solid's own
frame (centred at the origin), with triangles wound counter-clockwise seen from outside, which is
what back-face culling and lighting in ``raster3d`` expect. ``cluster`` simplifies a dense mesh
(e.g. a robot link loaded from an STL file) for drawing at a few hundred pixels. The sphere lives
beside the rasterizer (``raster3d.uv_sphere``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["box", "quad", "cluster"]

# Box corner k = 4*ix + 2*iy + iz (i = 0: negative side, 1: positive side); its six faces as
# quads of corners, counter-clockwise seen from outside.
_BOX_QUADS = ((0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3))


def box(half) -> tuple[np.ndarray, np.ndarray]:
    """An axis-aligned box of half-sizes ``half`` = (hx, hy, hz): 8 vertices, 12 triangles."""
    hx, hy, hz = (float(h) for h in half)
    vertices = np.array([[sx * hx, sy * hy, sz * hz] for sx in (-1, 1) for sy in (-1, 1)
                         for sz in (-1, 1)], np.float32)
    triangles = []
    for a, b, c, d in _BOX_QUADS:
        triangles += [(a, b, c), (a, c, d)]
    return vertices, np.array(triangles, np.int32)


def quad(hx: float, hy: float) -> tuple[np.ndarray, np.ndarray]:
    """A rectangle of half-sizes (hx, hy) in the z = 0 plane, facing +z: 4 vertices, 2
    triangles (a MuJoCo plane geom of those half-sizes, drawn)."""
    hx, hy = float(hx), float(hy)
    vertices = np.array([[-hx, -hy, 0], [hx, -hy, 0], [hx, hy, 0], [-hx, hy, 0]], np.float32)
    return vertices, np.array([[0, 1, 2], [0, 2, 3]], np.int32)


def cluster(vertices, triangles, cell: float) -> tuple[np.ndarray, np.ndarray]:
    """Simplify a mesh by vertex clustering: the vertices that share a cell of a grid of
    ``cell`` (same unit as the vertices) merge into their mean, and the triangles that collapse
    (two corners in one cell) or repeat are dropped. Keeps the silhouette to about one cell, so
    a 4 mm cell turns a 34 k-triangle robot into a few thousand triangles at 480 px."""
    vertices = np.asarray(vertices)
    triangles = np.asarray(triangles)
    keys = np.floor(vertices / cell).astype(np.int64)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    sums = np.zeros((first.size, 3))
    np.add.at(sums, inverse, vertices)
    counts = np.bincount(inverse, minlength=first.size)[:, None]
    merged = (sums / counts).astype(np.float32)
    t = inverse[triangles]
    keep = (t[:, 0] != t[:, 1]) & (t[:, 1] != t[:, 2]) & (t[:, 0] != t[:, 2])
    t = np.unique(t[keep], axis=0)
    return merged, t.astype(np.int32)
