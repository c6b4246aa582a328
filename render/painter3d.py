"""matplotlib-mplot3d-style triangle painting into caller-owned frames (painter's algorithm).

The z-buffered rasterizer (``raster3d``) cannot give the look of a matplotlib 3-D plot: there
every polygon is filled *and then stroked* in back-to-front order, so nearer faces hide the
edges of farther ones while each visible face keeps its own thin dark outline (including the
diagonal of every triangulated square). This module reproduces that pipeline, as specified in
spec/envs/mental_rotation_3d_cube.md section 7 (verified there against matplotlib 3.10 to 1e-6
px):

- per-item autoscaled axes limits from the vertices (x and y: 5 % margins then 1/48 of the
  span; z: 1/48 of the span), box aspect k (4, 4, 3), elevation 30, azimuth 45, eye at distance
  10 from the box centre, focal length 1, the axes box at (32.64, 28.16) px, 197.12 px wide, of
  a 256 px view (scaled to the view size);
- per triangle: normal from the world-space vertices, intensity 0.2 + 0.8 clip(n_z, 0, 1) and
  the grey level floor(256 (1 - I)) (matplotlib's gray colormap at 1 - I: up-facing faces black);
- sort by the mean projected depth, farther first, stable (ties keep the mesh order);
- each triangle filled with anti-aliased coverage, then its three edges stroked in black with
  the given width (0.1 pt at 200 dpi = 0.278 px) and anti-aliased coverage.

Coverage is analytic per pixel (the exact box-filter coverage of each edge's half-plane,
multiplied for the triangle, and of the stroke's strip times its length), not Agg's exact
scanline areas: corners and crossings differ by a few grey levels. Compiled with Numba (this
layer's Cython kernels have no painter's path), serial per call, items in order.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..core.variants import renamed

# The reference's 256 px view (1.28 in at 200 dpi) in matplotlib display units.
REFERENCE_VIEW_PX = 256.0
AXES_X0_PX = 32.64
AXES_Y0_PX = 28.16
AXES_SIZE_PX = 197.12
VIEW_LIM = 0.095            # 2-D view limits [-0.095, 0.09] on both axes
VIEW_SPAN = 0.185
BOX_ASPECT = np.array([4.0, 4.0, 3.0]) * (1.8294640721620434 * (25.0 / 24.0) / math.sqrt(41.0))
ELEVATION_DEG = 30.0
AZIMUTH_DEG = 45.0
EYE_DISTANCE = 10.0
EDGE_WIDTH_PX = 0.1 * 200.0 / 72.0


def camera() -> np.ndarray:
    """float64[4, 3]: eye E, and the camera basis u, v, w (w points from the scene to the eye)."""
    el, az = math.radians(ELEVATION_DEG), math.radians(AZIMUTH_DEG)
    w = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
    u = np.cross([0.0, 0.0, 1.0], w)
    u /= np.linalg.norm(u)
    v = np.cross(w, u)
    eye = BOX_ASPECT / 2.0 + EYE_DISTANCE * w
    return np.stack([eye, u, v, w])


CAMERA = camera()


@njit(cache=True, inline="always")
def _box_cdf(t, a, b):
    """Fraction of a unit pixel, centred at 0, on the side {x . n <= t} of a line with unit
    normal n, where a >= b are |n_x|, |n_y| sorted (the CDF of the pixel projected on n)."""
    h = 0.5 * (a + b)
    if t <= -h:
        return 0.0
    if t >= h:
        return 1.0
    if b < 1e-9:
        return (t + h) / a
    m = 0.5 * (a - b)
    if t < -m:
        u = t + h
        return u * u / (2.0 * a * b)
    if t <= m:
        return b / (2.0 * a) + (t + m) / a
    u = h - t
    return 1.0 - u * u / (2.0 * a * b)


@njit(cache=True, inline="always")
def _blend(frames, b, y, x, g, cov):
    for ch in range(3):
        p = np.float64(frames[b, y, x, ch])
        frames[b, y, x, ch] = np.uint8(p + (g - p) * cov + 0.5)


@njit(cache=True, inline="always")
def _edge(ax, ay, bx, by, sgn):
    """Inward unit normal (nx, ny), offset, and the sorted |n| components of edge a -> b."""
    dx, dy = bx - ax, by - ay
    ln = math.sqrt(dx * dx + dy * dy)
    nx = -dy / ln * sgn
    ny = dx / ln * sgn
    a, c = abs(nx), abs(ny)
    return nx, ny, nx * ax + ny * ay, max(a, c), min(a, c)


@njit(cache=True, inline="always")
def _span(nx, c, thr, lo, hi):
    """Narrow [lo, hi] (pixel-centre x) to where nx * cx + c >= thr."""
    if nx > 1e-12:
        lo = max(lo, (thr - c) / nx)
    elif nx < -1e-12:
        hi = min(hi, (thr - c) / nx)
    elif c < thr:
        hi = lo - 1.0
    return lo, hi


@njit(cache=True, nogil=True)
def _fill_triangle(frames, b, x0, y0, x1, y1, x2, y2, g, vx0, vx1, vy1):
    """Anti-aliased fill with grey g, clipped to columns [vx0, vx1) and rows [0, vy1): per row,
    pixels whose centre is at least half a pixel-projection inside every edge are set, the
    band around the edges gets the product of the three half-plane coverages."""
    area = (x1 - x0) * (y2 - y0) - (x2 - x0) * (y1 - y0)
    if abs(area) < 1e-12:
        return
    sgn = 1.0 if area > 0 else -1.0
    n0x, n0y, o0, a0, b0 = _edge(x0, y0, x1, y1, sgn)
    n1x, n1y, o1, a1, b1 = _edge(x1, y1, x2, y2, sgn)
    n2x, n2y, o2, a2, b2 = _edge(x2, y2, x0, y0, sgn)
    h0, h1, h2 = 0.5 * (a0 + b0), 0.5 * (a1 + b1), 0.5 * (a2 + b2)
    xmin = max(int(math.floor(min(x0, min(x1, x2)))) - 1, vx0)
    xmax = min(int(math.floor(max(x0, max(x1, x2)))) + 2, vx1)
    ymin = max(int(math.floor(min(y0, min(y1, y2)))) - 1, 0)
    ymax = min(int(math.floor(max(y0, max(y1, y2)))) + 2, vy1)
    if xmin >= xmax:
        return
    gi = np.uint8(g)
    for y in range(ymin, ymax):
        cy = y + 0.5
        c0 = n0y * cy - o0
        c1 = n1y * cy - o1
        c2 = n2y * cy - o2
        lo, hi = xmin + 0.5, xmax - 0.5
        lo, hi = _span(n0x, c0, -h0, lo, hi)
        lo, hi = _span(n1x, c1, -h1, lo, hi)
        lo, hi = _span(n2x, c2, -h2, lo, hi)
        if lo > hi:
            continue
        ilo, ihi = xmax - 0.5, xmax - 1.5
        ilo, ihi = lo, hi
        ilo, ihi = _span(n0x, c0, h0, ilo, ihi)
        ilo, ihi = _span(n1x, c1, h1, ilo, ihi)
        ilo, ihi = _span(n2x, c2, h2, ilo, ihi)
        xa = max(int(math.ceil(lo - 0.5)), xmin)
        xb = min(int(math.floor(hi - 0.5)) + 1, xmax)
        fa = int(math.ceil(ilo - 0.5))
        fb = int(math.floor(ihi - 0.5)) + 1
        if fb <= fa:
            fa = xb
            fb = xb
        for x in range(xa, xb):
            if fa <= x < fb:
                frames[b, y, x, 0] = gi
                frames[b, y, x, 1] = gi
                frames[b, y, x, 2] = gi
                continue
            cx = x + 0.5
            cov = 1.0
            d = n0x * cx + c0
            if d < h0:
                cov *= _box_cdf(d, a0, b0)
            d = n1x * cx + c1
            if d < h1:
                cov *= _box_cdf(d, a1, b1)
            d = n2x * cx + c2
            if d < h2:
                cov *= _box_cdf(d, a2, b2)
            if cov > 0.0:
                _blend(frames, b, y, x, g, cov)


@njit(cache=True, nogil=True)
def _stroke(frames, b, x0, y0, x1, y1, width, vx0, vx1, vy1):
    """A black anti-aliased segment of the given width, butt caps."""
    dx, dy = x1 - x0, y1 - y0
    ln = math.sqrt(dx * dx + dy * dy)
    if ln < 1e-12:
        return
    tx, ty = dx / ln, dy / ln
    nxe, nye = -ty, tx
    na, nb = max(abs(nxe), abs(nye)), min(abs(nxe), abs(nye))
    half = 0.5 * width
    reach = 0.5 * (na + nb) + half
    xmin = max(int(math.floor(min(x0, x1) - reach)), vx0)
    xmax = min(int(math.floor(max(x0, x1) + reach)) + 1, vx1)
    ymin = max(int(math.floor(min(y0, y1) - reach)), 0)
    ymax = min(int(math.floor(max(y0, y1) + reach)) + 1, vy1)
    # Pixels along the minor axis within ``reach`` of the line (measured across it).
    window = reach / max(abs(tx), abs(ty))
    if abs(dx) >= abs(dy):
        slope = dy / dx
        for x in range(xmin, xmax):
            cx = x + 0.5
            yc = y0 + (cx - x0) * slope
            ya = max(int(math.floor(yc - window)), ymin)
            yb = min(int(math.floor(yc + window)) + 1, ymax)
            for y in range(ya, yb):
                _stroke_px(frames, b, x, y, x0, y0, tx, ty, nxe, nye, na, nb, half, ln)
    else:
        slope = dx / dy
        for y in range(ymin, ymax):
            cy = y + 0.5
            xc = x0 + (cy - y0) * slope
            xa = max(int(math.floor(xc - window)), xmin)
            xb = min(int(math.floor(xc + window)) + 1, xmax)
            for x in range(xa, xb):
                _stroke_px(frames, b, x, y, x0, y0, tx, ty, nxe, nye, na, nb, half, ln)


@njit(cache=True, inline="always")
def _stroke_px(frames, b, x, y, x0, y0, tx, ty, nxe, nye, na, nb, half, ln):
    rx = x + 0.5 - x0
    ry = y + 0.5 - y0
    d = nxe * rx + nye * ry
    h = 0.5 * (na + nb)
    if d - half >= h or d + half <= -h:
        return
    strip = _box_cdf(d + half, na, nb) - _box_cdf(d - half, na, nb)
    if strip <= 0.0:
        return
    s = tx * rx + ty * ry
    if s <= -h or s >= ln + h:
        return
    cov = strip
    if s < h or s > ln - h:  # near a cap (|t| sorted equals |n| sorted)
        cov *= _box_cdf(s, na, nb) - _box_cdf(s - ln, na, nb)
    if cov > 0.0:
        for ch in range(3):
            p = np.float64(frames[b, y, x, ch])
            frames[b, y, x, ch] = np.uint8(p * (1.0 - cov) + 0.5)


PARALLEL_MIN_ITEMS = 8


@njit(cache=True, nogil=True)
def _paint_item(frames, n, b, ox, view_px, verts, n_verts, tris, n_tris, cam, box_aspect,
                edge_width, background, cull_back):
    """Item n into frame b, view columns [ox, ox + view_px)."""
    scale = view_px / 256.0
    ex, ey, ez = cam[0, 0], cam[0, 1], cam[0, 2]
    ux, uy, uz = cam[1, 0], cam[1, 1], cam[1, 2]
    vx, vy, vz = cam[2, 0], cam[2, 1], cam[2, 2]
    wx, wy, wz = cam[3, 0], cam[3, 1], cam[3, 2]
    vx0 = ox
    vx1 = ox + view_px
    frames[b, :view_px, vx0:vx1, :] = background
    nv = n_verts[n]
    nt = n_tris[n]
    if nv == 0 or nt == 0:
        return
    sx = np.empty(nv)
    sy = np.empty(nv)
    depth = np.empty(nv)
    key = np.empty(nt)
    grey = np.empty(nt)
    lo = verts[n, 0, 0]
    hi = lo
    for i in range(nv):
        for c in range(3):
            t = verts[n, i, c]
            if t < lo:
                lo = t
            if t > hi:
                hi = t
    span = hi - lo
    if span <= 0.0:
        span = 1.0
    xy0 = lo - 0.05 * span
    xy1 = hi + 0.05 * span
    pad = (xy1 - xy0) / 48.0
    xy0 -= pad
    xy1 += pad
    z0 = lo - span / 48.0
    z1 = hi + span / 48.0
    for i in range(nv):
        qx = (verts[n, i, 0] - xy0) / (xy1 - xy0) * box_aspect[0] - ex
        qy = (verts[n, i, 1] - xy0) / (xy1 - xy0) * box_aspect[1] - ey
        qz = (verts[n, i, 2] - z0) / (z1 - z0) * box_aspect[2] - ez
        dw = qx * wx + qy * wy + qz * wz
        px = (qx * ux + qy * uy + qz * uz) / -dw
        py = (qx * vx + qy * vy + qz * vz) / -dw
        sx[i] = ox + scale * (AXES_X0_PX + (px + VIEW_LIM) / VIEW_SPAN * AXES_SIZE_PX)
        sy[i] = view_px - scale * (AXES_Y0_PX + (py + VIEW_LIM) / VIEW_SPAN * AXES_SIZE_PX)
        depth[i] = EYE_DISTANCE / dw
    for t in range(nt):
        a, bb, c = tris[t, 0], tris[t, 1], tris[t, 2]
        key[t] = -(depth[a] + depth[bb] + depth[c]) / 3.0
        e1x = verts[n, bb, 0] - verts[n, a, 0]
        e1y = verts[n, bb, 1] - verts[n, a, 1]
        e1z = verts[n, bb, 2] - verts[n, a, 2]
        e2x = verts[n, c, 0] - verts[n, a, 0]
        e2y = verts[n, c, 1] - verts[n, a, 1]
        e2z = verts[n, c, 2] - verts[n, a, 2]
        cx = e1y * e2z - e1z * e2y
        cy = e1z * e2x - e1x * e2z
        cz = e1x * e2y - e1y * e2x
        ln = math.sqrt(cx * cx + cy * cy + cz * cz)
        nz = cz / ln if ln > 0.0 else 0.0
        inten = 0.2 + 0.8 * min(max(nz, 0.0), 1.0)
        level = math.floor(256.0 * (1.0 - inten))
        grey[t] = min(max(level, 0.0), 255.0)
    # Farther first (descending key = ascending -key), stable: ties keep the mesh order.
    order = np.argsort(key, kind="mergesort")
    for r in range(nt):
        t = order[r]
        a, bb, c = tris[t, 0], tris[t, 1], tris[t, 2]
        if cull_back:
            # Outward-wound faces turned away from the eye run clockwise on screen (y down).
            area = (sx[bb] - sx[a]) * (sy[c] - sy[a]) - (sx[c] - sx[a]) * (sy[bb] - sy[a])
            if area > 0.0:
                continue
        _fill_triangle(frames, b, sx[a], sy[a], sx[bb], sy[bb], sx[c], sy[c], grey[t],
                       vx0, vx1, view_px)
        _stroke(frames, b, sx[a], sy[a], sx[bb], sy[bb], edge_width, vx0, vx1, view_px)
        _stroke(frames, b, sx[bb], sy[bb], sx[c], sy[c], edge_width, vx0, vx1, view_px)
        _stroke(frames, b, sx[c], sy[c], sx[a], sy[a], edge_width, vx0, vx1, view_px)


def _paint_all(frames, idx, x_offset, view_px, verts, n_verts, tris, n_tris, cam, box_aspect,
               edge_width, background, cull_back):
    for n in prange(idx.shape[0]):
        _paint_item(frames, n, idx[n], x_offset[n], view_px, verts, n_verts, tris, n_tris, cam,
                    box_aspect, edge_width, background, cull_back)


# Serial for a few items (waking the thread pool costs more than a view), threaded otherwise;
# items must name distinct frames (each call here paints one view per frame).
# Each variant has a name (hence a Numba cache) of its own: Numba keys cache entries by
# signature only, so both would otherwise load whichever was saved last (core/variants.py).
paint_serial = njit(cache=True, nogil=True)(renamed(_paint_all, "__serial"))
paint_parallel = njit(cache=True, nogil=True, parallel=True)(renamed(_paint_all, "__parallel"))


def paint_meshes(frames: np.ndarray, idx, x_offset, view_px: int, verts, n_verts, tris,
                 n_tris, background: int = 255, edge_width: float = EDGE_WIDTH_PX,
                 cull_back: bool = False) -> None:
    """Checked entry point of ``paint``: frames uint8[B, H, W, 3] (C-contiguous, H >= view_px),
    idx int[N], x_offset int[N] (each view inside the frame), verts float64[N, V, 3], n_verts
    int[N], tris int[T, 3] (shared topology, indices < n_verts of every item that uses them),
    n_tris int[N]."""
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4
            and frames.shape[3] == 3 and frames.flags.c_contiguous):
        raise ValueError("frames must be a C-contiguous uint8 array (B, H, W, 3)")
    idx = np.ascontiguousarray(idx, np.int64)
    n = idx.shape[0]
    x_offset = np.ascontiguousarray(np.broadcast_to(x_offset, (n,)), np.int64)
    verts = np.ascontiguousarray(verts, np.float64)
    tris = np.ascontiguousarray(tris, np.int64)
    n_verts = np.ascontiguousarray(np.broadcast_to(n_verts, (n,)), np.int64)
    n_tris = np.ascontiguousarray(np.broadcast_to(n_tris, (n,)), np.int64)
    if n == 0:
        return
    if verts.ndim != 3 or verts.shape[0] != n or verts.shape[2] != 3:
        raise ValueError(f"verts must have shape ({n}, V, 3), got {verts.shape}")
    if idx.min() < 0 or idx.max() >= frames.shape[0]:
        raise ValueError(f"idx values must lie in [0, {frames.shape[0]})")
    if not (0 < view_px <= frames.shape[1]) or x_offset.min() < 0 or (
            x_offset.max() + view_px > frames.shape[2]):
        raise ValueError("every view must lie inside the frame")
    if n_verts.max() > verts.shape[1] or n_tris.max() > tris.shape[0] or n_verts.min() < 0:
        raise ValueError("n_verts / n_tris exceed the vertex / triangle arrays")
    if not np.isfinite(verts).all():
        raise ValueError("verts must be finite")
    if np.unique(idx).shape[0] != n:
        raise ValueError("idx must name distinct frames (one view per frame and call)")
    kernel = paint_parallel if n >= PARALLEL_MIN_ITEMS else paint_serial
    kernel(frames, idx, x_offset, int(view_px), verts, n_verts, tris, n_tris, CAMERA,
          BOX_ASPECT, float(edge_width), np.uint8(background), bool(cull_back))
