"""Non-antialiased circles exactly as OpenCV's ``cv2.circle(..., lineType=cv2.LINE_8)`` draws
them, as small boolean masks stamped onto frames (the reference families colorization and
mental_rotation_2d draw their disks, outlines and markers with OpenCV).

OpenCV draws a filled disk, or a 1-px outline, with a midpoint-circle walk (``Circle`` in
imgproc/drawing.cpp); an outline thicker than one pixel goes another way: the circle becomes a
polygon with vertices every 5 to 90 degrees (taken from a table of float32 sines, in 16.16 fixed
point), and each polygon edge is drawn as a thick line, i.e. a filled quadrilateral plus a small
filled disk at each vertex. This module re-derives those rules in plain Python (integer
arithmetic with C's truncating division and round-half-even), runs them once per (radius,
thickness) on a canvas large enough to hold the whole shape centred at an integer pixel, and
caches the resulting mask (``BoundedCache``). Because every step is integer and shifts with the
centre, stamping a mask at (cx, cy) equals drawing there, except where a thick outline crosses
the canvas border: OpenCV then clips the polygon's edge lines before walking them, which can
move a border pixel; ``ring_mask_at`` reproduces that case exactly by drawing on a canvas of the
target size (also cached), and ``ring_is_clipped`` says when it is needed.

``stamp_mask`` / ``stamp_masks`` (Numba) paint a mask colour onto a frame (or onto rows of a
batch of frames), clipped to the frame's valid size.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.cache import BoundedCache

__all__ = [
    "disk_mask",
    "ring_mask",
    "ring_mask_at",
    "ring_is_clipped",
    "circle_mask_on_canvas",
    "stamp_mask",
    "stamp_masks",
]

_XY_SHIFT = 16
_XY_ONE = 1 << _XY_SHIFT
_HALF = _XY_ONE >> 1
# OpenCV's sine table: sin(k degrees) for k = 0..450, written with 7 decimals, stored as float32.
_SIN_TABLE = np.array([round(math.sin(math.radians(k)), 7) for k in range(451)],
                      dtype=np.float32).astype(np.float64)
_MAX_RADIUS = 4096
_MAX_THICKNESS = 255

_MASKS = BoundedCache("render.circles.masks", max_items=4096, max_bytes=64 << 20)


# --------------------------------------------------------------------------- C arithmetic
def _cdiv(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _cv_round(x: float) -> int:
    """cvRound: round half to even (the x86 conversion in its default mode)."""
    return int(round(x))


# --------------------------------------------------------------------------- primitives
def _hline(img: np.ndarray, y: int, x1: int, x2: int) -> None:
    if x2 >= x1:
        img[y, x1:x2 + 1] = True


def _midpoint_circle(img: np.ndarray, cx: int, cy: int, radius: int, fill: bool) -> None:
    """OpenCV ``Circle``: the midpoint walk, filled with horizontal spans or as points."""
    height, width = img.shape
    err, dx, dy, plus, minus = 0, radius, 0, 1, (radius << 1) - 1
    while dx >= dy:
        for (xa, xb, ya, yb) in ((cx - dx, cx + dx, cy - dy, cy + dy),
                                 (cx - dy, cx + dy, cy - dx, cy + dx)):
            for y in (ya, yb):
                if not 0 <= y < height:
                    continue
                if fill:
                    lo, hi = max(xa, 0), min(xb, width - 1)
                    _hline(img, y, lo, hi)
                else:
                    if 0 <= xa < width:
                        img[y, xa] = True
                    if 0 <= xb < width:
                        img[y, xb] = True
        dy += 1
        err += plus
        plus += 2
        mask = (1 if err <= 0 else 0) - 1
        err -= minus & mask
        dx += mask
        minus -= mask & 2


def _clip_line(width: int, height: int, x1: int, y1: int, x2: int, y2: int):
    """OpenCV ``clipLine`` on a (width, height) box; returns (inside, x1, y1, x2, y2)."""
    if width <= 0 or height <= 0:
        return False, x1, y1, x2, y2
    right, bottom = width - 1, height - 1

    def code(x, y):
        return (x < 0) + (x > right) * 2 + (y < 0) * 4 + (y > bottom) * 8

    c1, c2 = code(x1, y1), code(x2, y2)
    if (c1 & c2) == 0 and (c1 | c2) != 0:
        if c1 & 12:
            a = 0 if c1 < 8 else bottom
            x1 += _cdiv((a - y1) * (x2 - x1), (y2 - y1))
            y1 = a
            c1 = (x1 < 0) + (x1 > right) * 2
        if c2 & 12:
            a = 0 if c2 < 8 else bottom
            x2 += _cdiv((a - y2) * (x2 - x1), (y2 - y1))
            y2 = a
            c2 = (x2 < 0) + (x2 > right) * 2
        if (c1 & c2) == 0 and (c1 | c2) != 0:
            if c1:
                a = 0 if c1 == 1 else right
                y1 += _cdiv((a - x1) * (y2 - y1), (x2 - x1))
                x1 = a
                c1 = 0
            if c2:
                a = 0 if c2 == 1 else right
                y2 += _cdiv((a - x2) * (y2 - y1), (x2 - x1))
                x2 = a
                c2 = 0
    return (c1 | c2) == 0, x1, y1, x2, y2


def _line_fixed(img: np.ndarray, p1, p2) -> None:
    """OpenCV ``Line2``: an 8-connected line between 16.16 fixed-point end points."""
    height, width = img.shape
    inside, x1, y1, x2, y2 = _clip_line(width << _XY_SHIFT, height << _XY_SHIFT, *p1, *p2)
    if not inside:
        return
    dx, dy = x2 - x1, y2 - y1
    ax, ay = abs(dx), abs(dy)
    if ax > ay:
        if dx < 0:
            dy = -dy
            x1, x2, y1, y2 = x2, x1, y2, y1
        x_step = _XY_ONE
        y_step = _cdiv(dy << _XY_SHIFT, ax | 1)
        ecount = (x2 - x1) >> _XY_SHIFT
    else:
        if dy < 0:
            dx = -dx
            x1, x2, y1, y2 = x2, x1, y2, y1
        x_step = _cdiv(dx << _XY_SHIFT, ay | 1)
        y_step = _XY_ONE
        ecount = (y2 - y1) >> _XY_SHIFT
    x1 += _HALF
    y1 += _HALF

    def put(x, y):
        if 0 <= x < width and 0 <= y < height:
            img[y, x] = True

    put((x2 + _HALF) >> _XY_SHIFT, (y2 + _HALF) >> _XY_SHIFT)
    if ax > ay:
        x1 >>= _XY_SHIFT
        while ecount >= 0:
            put(x1, y1 >> _XY_SHIFT)
            x1 += 1
            y1 += y_step
            ecount -= 1
    else:
        y1 >>= _XY_SHIFT
        while ecount >= 0:
            put(x1 >> _XY_SHIFT, y1)
            x1 += x_step
            y1 += 1
            ecount -= 1


def _fill_convex_poly(img: np.ndarray, v) -> None:
    """OpenCV ``FillConvexPoly`` for LINE_8 and shift 16: outline lines, then scanline spans."""
    height, width = img.shape
    npts = len(v)
    delta = _HALF
    p0 = v[-1]
    xmin = xmax = v[0][0]
    ymin = ymax = v[0][1]
    imin = 0
    for i, p in enumerate(v):
        if p[1] < ymin:
            ymin = p[1]
            imin = i
        ymax = max(ymax, p[1])
        xmax = max(xmax, p[0])
        xmin = min(xmin, p[0])
        _line_fixed(img, p0, p)
        p0 = p
    xmin = (xmin + delta) >> _XY_SHIFT
    xmax = (xmax + delta) >> _XY_SHIFT
    ymin = (ymin + delta) >> _XY_SHIFT
    ymax = (ymax + delta) >> _XY_SHIFT
    if npts < 3 or xmax < 0 or ymax < 0 or xmin >= width or ymin >= height:
        return
    ymax = min(ymax, height - 1)
    e_idx = [imin, imin]
    e_di = [1, npts - 1]
    e_x = [-_XY_ONE, -_XY_ONE]
    e_dx = [0, 0]
    y = ymin
    e_ye = [y, y]
    edges = npts
    while True:
        for i in range(2):
            if y >= e_ye[i]:
                idx0, di = e_idx[i], e_di[i]
                idx = idx0 + di
                if idx >= npts:
                    idx -= npts
                while True:
                    old = edges
                    edges -= 1
                    if not old > 0:
                        break
                    ty = (v[idx][1] + delta) >> _XY_SHIFT
                    if ty > y:
                        xs, xe = v[idx0][0], v[idx][0]
                        e_ye[i] = ty
                        e_dx[i] = _cdiv((xe - xs) * 2 + (ty - y), 2 * (ty - y))
                        e_x[i] = xs
                        e_idx[i] = idx
                        break
                    idx0 = idx
                    idx += di
                    if idx >= npts:
                        idx -= npts
        if edges < 0:
            break
        if y >= 0:
            left, right = (1, 0) if e_x[0] > e_x[1] else (0, 1)
            xx1 = (e_x[left] + _HALF) >> _XY_SHIFT
            xx2 = (e_x[right] + _HALF) >> _XY_SHIFT
            if xx2 >= 0 and xx1 < width:
                _hline(img, y, max(xx1, 0), min(xx2, width - 1))
        e_x[0] += e_dx[0]
        e_x[1] += e_dx[1]
        y += 1
        if y > ymax:
            break


def _thick_line(img: np.ndarray, p0, p1, thickness: int, flags: int) -> None:
    """OpenCV ``ThickLine`` for thickness >= 2, LINE_8, 16.16 end points."""
    dx = (p0[0] - p1[0]) / _XY_ONE
    dy = (p1[1] - p0[1]) / _XY_ONE
    r = dx * dx + dy * dy
    odd = thickness & 1
    thick = thickness << (_XY_SHIFT - 1)
    if abs(r) > 2.220446049250313e-16:
        r = (thick + odd * _XY_ONE * 0.5) / math.sqrt(r)
        dpx, dpy = _cv_round(dy * r), _cv_round(dx * r)
        quad = [(p0[0] + dpx, p0[1] + dpy), (p0[0] - dpx, p0[1] - dpy),
                (p1[0] - dpx, p1[1] - dpy), (p1[0] + dpx, p1[1] + dpy)]
        _fill_convex_poly(img, quad)
    cap = (thick + _HALF) >> _XY_SHIFT
    for i, p in enumerate((p0, p1)):
        if flags & (i + 1):
            cx = (p[0] + _HALF) >> _XY_SHIFT
            cy = (p[1] + _HALF) >> _XY_SHIFT
            _midpoint_circle(img, cx, cy, cap, True)


def _thick_circle(img: np.ndarray, cx: int, cy: int, radius: int, thickness: int) -> None:
    """OpenCV ``EllipseEx`` for a full circle outline: polygon, then thick open polyline."""
    fx, fy, fr = cx << _XY_SHIFT, cy << _XY_SHIFT, radius << _XY_SHIFT
    delta = (fr + _HALF) >> _XY_SHIFT
    delta = 90 if delta < 3 else 30 if delta < 10 else 18 if delta < 15 else 5
    alpha, beta = _SIN_TABLE[90], _SIN_TABLE[0]   # cos 0, sin 0
    pts = []
    i = 0
    while i < 360 + delta:
        angle = min(i, 360)
        x = fr * _SIN_TABLE[450 - angle]
        y = fr * _SIN_TABLE[angle]
        pts.append((fx + x * alpha - y * beta, fy + x * beta + y * alpha))
        i += delta
    if len(pts) == 1:
        pts = [(float(fx), float(fy))] * 2
    v = []
    for px, py in pts:
        qx = _cv_round(px / _XY_ONE) << _XY_SHIFT
        qy = _cv_round(py / _XY_ONE) << _XY_SHIFT
        qx += _cv_round(px - qx)
        qy += _cv_round(py - qy)
        if not v or v[-1] != (qx, qy):
            v.append((qx, qy))
    if len(v) == 1:
        v = [(fx, fy)] * 2
    flags = 3
    p0 = v[0]
    for p in v[1:]:
        _thick_line(img, p0, p, thickness, flags)
        p0 = p
        flags = 2


def _check(radius, thickness=None) -> tuple[int, int]:
    if isinstance(radius, bool) or not isinstance(radius, (int, np.integer)):
        raise ValueError(f"radius: expected an integer, got {radius!r}")
    if not 0 <= int(radius) <= _MAX_RADIUS:
        raise ValueError(f"radius: must be in [0, {_MAX_RADIUS}], got {radius}")
    if thickness is None:
        return int(radius), -1
    if isinstance(thickness, bool) or not isinstance(thickness, (int, np.integer)):
        raise ValueError(f"thickness: expected an integer, got {thickness!r}")
    if not 1 <= int(thickness) <= _MAX_THICKNESS:
        raise ValueError(f"thickness: must be in [1, {_MAX_THICKNESS}], got {thickness}")
    return int(radius), int(thickness)


def circle_mask_on_canvas(height: int, width: int, cx: int, cy: int, radius: int,
                          thickness: int) -> np.ndarray:
    """What ``cv2.circle(zeros((height, width)), (cx, cy), radius, 1, thickness, LINE_8)``
    sets, as a fresh bool array (thickness < 0 fills). Plain Python: for building masks."""
    radius, _ = _check(radius)
    img = np.zeros((int(height), int(width)), dtype=bool)
    if thickness > 1:
        _thick_circle(img, int(cx), int(cy), radius, int(thickness))
    else:
        _midpoint_circle(img, int(cx), int(cy), radius, thickness < 0)
    return img


def _frozen(mask: np.ndarray) -> np.ndarray:
    mask.setflags(write=False)
    return mask


def disk_mask(radius: int) -> np.ndarray:
    """Read-only bool (2r+1, 2r+1): ``cv2.circle(img, (r, r), r, 1, thickness=-1, LINE_8)``."""
    r, _ = _check(radius)
    return _MASKS.get_or_build(
        ("disk", r), lambda: _frozen(circle_mask_on_canvas(2 * r + 1, 2 * r + 1, r, r, r, -1)))


def ring_mask(radius: int, thickness: int) -> np.ndarray:
    """Read-only bool (2R+1, 2R+1) with R = radius + thickness: the outline that
    ``cv2.circle(img, (R, R), radius, 1, thickness, LINE_8)`` draws (it fits with room to spare)."""
    r, t = _check(radius, thickness)
    big = r + t
    return _MASKS.get_or_build(
        ("ring", r, t),
        lambda: _frozen(circle_mask_on_canvas(2 * big + 1, 2 * big + 1, big, big, r, t)))


def ring_is_clipped(radius: int, thickness: int, cx: int, cy: int, height: int,
                    width: int) -> bool:
    """True when the outline at (cx, cy) reaches past a (height, width) canvas, where OpenCV's
    clipping of a thick outline's edge lines may differ from a clipped stamp of ``ring_mask``."""
    big = int(radius) + int(thickness)
    return not (cx - big >= 0 and cy - big >= 0 and cx + big < width and cy + big < height)


def ring_mask_at(radius: int, thickness: int, cx: int, cy: int, height: int,
                 width: int) -> np.ndarray:
    """Read-only bool (2R+1, 2R+1), R = radius + thickness: the part of the outline that
    OpenCV draws on a (height, width) canvas with centre (cx, cy), in the frame of
    ``ring_mask`` (pixels outside the canvas are False). Equals ``ring_mask`` when the outline
    is not clipped; otherwise drawn on the real canvas, once per (geometry, clip) and cached."""
    r, t = _check(radius, thickness)
    cx, cy, height, width = int(cx), int(cy), int(height), int(width)
    if t == 1 or not ring_is_clipped(r, t, cx, cy, height, width):
        return ring_mask(r, t)
    big = r + t
    # Only the canvas edges near the outline matter, so the key keeps the centre's distance to
    # each edge capped at the outline's reach (everything farther draws the same way).
    key = ("ring_at", r, t, min(cx, big + 1), min(cy, big + 1),
           min(width - 1 - cx, big + 1), min(height - 1 - cy, big + 1))

    def build():
        out = np.zeros((2 * big + 1, 2 * big + 1), dtype=bool)
        x0, y0 = max(cx - big - 2, 0), max(cy - big - 2, 0)
        x1, y1 = min(cx + big + 3, width), min(cy + big + 3, height)
        if x1 <= x0 or y1 <= y0:
            return _frozen(out)
        # Drawing on the sub-canvas gives the same pixels as the full one only where no
        # border is crossed, so draw on the real canvas limits that matter: the sub-canvas
        # keeps every real edge the outline reaches and moves the others out of reach.
        canvas = circle_mask_on_canvas(y1 - y0, x1 - x0, cx - x0, cy - y0, r, t)
        ox, oy = cx - big - x0, cy - big - y0
        sx0, sy0 = max(0, -ox), max(0, -oy)
        sx1, sy1 = min(2 * big + 1, canvas.shape[1] - ox), min(2 * big + 1, canvas.shape[0] - oy)
        if sx1 > sx0 and sy1 > sy0:
            out[sy0:sy1, sx0:sx1] = canvas[oy + sy0:oy + sy1, ox + sx0:ox + sx1]
        return _frozen(out)

    return _MASKS.get_or_build(key, build)


# --------------------------------------------------------------------------- stamping
@njit(cache=True, inline="always")
def mask_window(mask, cx, cy, height, width):
    """Where ``mask`` (bool [h, w], centre at (w // 2, h // 2)) lies when its centre is put at
    pixel (cx, cy) of a height x width picture: (x0, y0, j0, j1, i0, i1), mask pixel (j, i)
    falling on picture pixel (y0 + j, x0 + i), and the rows [j0, j1) and columns [i0, i1) of
    the mask those that fall inside the picture (the rest is clipped)."""
    mh, mw = mask.shape
    x0 = cx - mw // 2
    y0 = cy - mh // 2
    j0 = min(max(-y0, 0), mh)
    j1 = max(min(height - y0, mh), j0)
    i0 = min(max(-x0, 0), mw)
    i1 = max(min(width - x0, mw), i0)
    return x0, y0, j0, j1, i0, i1


@njit(cache=True, nogil=True)
def stamp_mask(frame, mask, cx, cy, height, width, r, g, b):
    """Paint colour (r, g, b) onto ``frame[:height, :width]`` (uint8 [H, W, 3]) wherever
    ``mask`` (bool [h, w], centre at (w // 2, h // 2)) is set, with the mask centre at pixel
    (cx, cy); parts outside the valid size are skipped."""
    x0, y0, j0, j1, i0, i1 = mask_window(mask, cx, cy, min(height, frame.shape[0]),
                                         min(width, frame.shape[1]))
    for j in range(j0, j1):
        y = y0 + j
        for i in range(i0, i1):
            x = x0 + i
            if mask[j, i]:
                frame[y, x, 0] = r
                frame[y, x, 1] = g
                frame[y, x, 2] = b


@njit(cache=True, nogil=True)
def stamp_masks(frames, rows, mask, cx, cy, frame_hw, r, g, b):
    """``stamp_mask`` for each row k of ``rows`` into ``frames[rows[k]]`` at (cx[k], cy[k]),
    clipped to ``frame_hw[rows[k]]`` (int [B, 2] as (height, width))."""
    for k in range(rows.shape[0]):
        i = rows[k]
        stamp_mask(frames[i], mask, cx[k], cy[k], frame_hw[i, 0], frame_hw[i, 1], r, g, b)
