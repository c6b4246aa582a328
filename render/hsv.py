"""8-bit RGB <-> HSV exactly as OpenCV 4.x computes it (``cv2.COLOR_RGB2HSV`` /
``cv2.COLOR_HSV2RGB``, H in 0..179), and the pictures colorization draws from it: a region
recoloured with one hue and saturation keeping each pixel's own brightness, a grey annulus, and
the HSV colour wheel with its marker.

RGB -> HSV is OpenCV's integer path: V = max, S = round(diff * 255 / V) and H = round(30 *
(signed difference) / diff) + 0/60/120, each division done as a multiply by a 12-bit fixed-point
table entry (``round((255 << 12) / V)``, ``round((180 << 12) / (6 diff))``) with rounding by
adding 2048 before the shift, so results can differ from the exact quotient by one.

HSV -> RGB is OpenCV's float path, all in float32: h * (6/180), the sector's trunc, the four
candidate values v, v(1-s), v(1-sh), v(1-s(1-h)) with s = S/255 and v = V/255, each "1 - a*b"
computed as one fused multiply-add (as the compiler builds OpenCV for x86-64 with FMA), then each
channel times 255. OpenCV converts an image row by row, and has two paths that end differently:
its SIMD loop, which converts whole blocks of a row's pixels (``SIMD_BLOCK``), truncates; its
scalar loop, which converts what is left of the row after its last whole block, rounds half to
even. So one pixel converted alone (the reference's colour wheel, built pixel by pixel) rounds,
and a whole picture converted at once (the reference's recoloured photo) truncates except in
the last ``W mod SIMD_BLOCK`` columns; ``hsv_to_rgb(image)`` reproduces both, and
``hsv_to_rgb_px(..., rounded)`` chooses. Checked against OpenCV itself (every one of the 180 x
256 x 256 inputs on both paths) and against the reference's recorded frames.

Recolouring a region with hue ``h8`` and saturation ``s``: every pixel's V is kept, so the
result depends on V alone and each brightness is converted once (``recolour_masked``, under a
mask such as render/circles.py's disk, stamped at a centre).
The colour wheel of side ``size`` at brightness V (``wheel_rgb``): a disk of radius size // 2
with H = floor(angle / 2) (angle = atan2(dy, dx) in degrees, 0..360, y down) and S = floor(min(
dist / radius * 255, 255)); black outside; each pixel converted on its own (the scalar path,
as the reference converts it). Its hue and saturation maps are computed once per size
with NumPy as the reference computes them; the RGB wheel of each V is built on demand and kept in
a ``BoundedCache`` (module level; nothing is stored on a family instance).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.cache import BoundedCache
from .circles import mask_window

__all__ = [
    "rgb_to_hsv",
    "hsv_to_rgb",
    "bgr_to_hsv",
    "hsv_to_bgr",
    "rgb_to_hsv_px",
    "hsv_to_rgb_px",
    "recolour_masked",
    "tail_start",
    "SIMD_BLOCK",
    "paint_annulus",
    "wheel_maps",
    "wheel_rgb",
    "marker_centre",
]

_HSV_SHIFT = 12
_HALF = 1 << (_HSV_SHIFT - 1)


def _tables():
    i = np.arange(1, 256, dtype=np.float64)
    sdiv = np.zeros(256, np.int32)
    hdiv = np.zeros(256, np.int32)
    sdiv[1:] = np.rint((255 << _HSV_SHIFT) / i)          # cvRound: half to even
    hdiv[1:] = np.rint((180 << _HSV_SHIFT) / (6.0 * i))
    sdiv.setflags(write=False)
    hdiv.setflags(write=False)
    return sdiv, hdiv


_SDIV, _HDIV = _tables()
_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_F255 = np.float32(255.0)
_INV255 = np.float32(1.0) / np.float32(255.0)          # 1.f / 255
_HSCALE = np.float32(6.0) / np.float32(180.0)          # 6.0f / 180
# Pixels per iteration of OpenCV's SIMD HSV -> RGB loop with 256-bit vectors (AVX2: 4 x 8 floats),
# the widest the reference's machine is assumed to have used; pixels after the last whole block
# of a conversion take the scalar path, which rounds instead of truncating.
SIMD_BLOCK = 32


# --------------------------------------------------------------------------- pixels
@njit(cache=True, nogil=True)
def rgb_to_hsv_px(r, g, b):
    """OpenCV's 8-bit RGB -> HSV of one pixel: (h 0..179, s 0..255, v 0..255) as ints."""
    r = np.int32(r)
    g = np.int32(g)
    b = np.int32(b)
    v = max(r, g, b)
    vmin = min(r, g, b)
    diff = v - vmin
    s = (diff * _SDIV[v] + _HALF) >> _HSV_SHIFT
    if v == r:
        h = g - b
    elif v == g:
        h = b - r + 2 * diff
    else:
        h = r - g + 4 * diff
    h = (h * _HDIV[diff] + _HALF) >> _HSV_SHIFT
    if h < 0:
        h += 180
    return h, s, v


@njit(cache=True, nogil=True)
def _fnma1(a, b):
    """float32(1 - a * b) rounded once, as a fused multiply-add computes it (a, b float32: their
    product is exact in float64)."""
    return np.float32(1.0 - np.float64(a) * np.float64(b))


@njit(cache=True, nogil=True)
def hsv_to_rgb_px(h8, s8, v8, rounded):
    """OpenCV 4.x's 8-bit HSV -> RGB of one pixel (h8 0..179): (r, g, b) as ints. ``rounded``:
    OpenCV's scalar path (each channel times 255 rounded half to even: what a conversion of
    fewer pixels than one SIMD block, or the last pixels of an image, gets); else its SIMD path
    (truncated). Both with the fused multiply-adds the compiler makes of 1 - s*h."""
    h = np.float32(h8) * _HSCALE
    s = np.float32(s8) * _INV255
    v = np.float32(v8) * _INV255
    sector_f = np.float32(math.trunc(h))
    h = h - sector_f
    sector = np.int64(sector_f)
    sector = sector - (sector // 6) * 6
    t0 = v
    t1 = v * (_F1 - s)
    t2 = v * _fnma1(s, h)
    t3 = v * _fnma1(s, _F1 - h)
    # OpenCV's sector table {{1,3,0}, {1,0,2}, {3,0,1}, {0,2,1}, {0,1,3}, {2,1,0}} gives (b, g, r).
    if sector == 0:
        bf, gf, rf = t1, t3, t0
    elif sector == 1:
        bf, gf, rf = t1, t0, t2
    elif sector == 2:
        bf, gf, rf = t3, t0, t1
    elif sector == 3:
        bf, gf, rf = t0, t2, t1
    elif sector == 4:
        bf, gf, rf = t0, t1, t3
    else:
        bf, gf, rf = t2, t1, t0
    rf = rf * _F255
    gf = gf * _F255
    bf = bf * _F255
    if rounded:
        rf = np.rint(rf)
        gf = np.rint(gf)
        bf = np.rint(bf)
    r = np.int64(rf)
    g = np.int64(gf)
    b = np.int64(bf)
    return min(max(r, 0), 255), min(max(g, 0), 255), min(max(b, 0), 255)


# --------------------------------------------------------------------------- arrays
@njit(cache=True, nogil=True)
def _rgb_to_hsv_flat(src, dst, swap):
    for i in range(src.shape[0]):
        if swap:
            h, s, v = rgb_to_hsv_px(src[i, 2], src[i, 1], src[i, 0])
        else:
            h, s, v = rgb_to_hsv_px(src[i, 0], src[i, 1], src[i, 2])
        dst[i, 0] = h
        dst[i, 1] = s
        dst[i, 2] = v


@njit(cache=True, nogil=True)
def _hsv_to_rgb_flat(src, dst, swap, width, tail):
    for i in range(src.shape[0]):
        r, g, b = hsv_to_rgb_px(src[i, 0], src[i, 1], src[i, 2], i % width >= tail)
        if swap:
            dst[i, 0] = b
            dst[i, 2] = r
        else:
            dst[i, 0] = r
            dst[i, 2] = b
        dst[i, 1] = g


def _pixels(image, name: str) -> np.ndarray:
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim < 1 or arr.shape[-1] != 3:
        raise ValueError(f"{name}: expected a uint8 array of shape (..., 3), got "
                         f"{arr.dtype} {arr.shape}")
    return np.ascontiguousarray(arr)


def _check_hue(arr: np.ndarray, name: str) -> None:
    if arr.size and int(arr[..., 0].max()) > 179:
        raise ValueError(f"{name}: hue (channel 0) must be in 0..179 (OpenCV's 8-bit range), "
                         f"got {int(arr[..., 0].max())}")


def _convert(image, name, kernel, swap, *extra, check_hue=False) -> np.ndarray:
    arr = _pixels(image, name)
    if check_hue:
        _check_hue(arr, name)
    out = np.empty_like(arr)
    kernel(arr.reshape(-1, 3), out.reshape(-1, 3), swap, *extra)
    return out


def tail_start(width: int, block: int = SIMD_BLOCK) -> int:
    """The first column that OpenCV's 8-bit HSV -> RGB converts on its scalar path: it converts
    an image row by row, each row in whole SIMD blocks of ``block`` pixels and the rest of the
    row (``width mod block`` pixels) on the scalar path."""
    return int(width) - int(width) % int(block)


def _rows(image) -> int:
    shape = np.shape(image)
    return int(shape[-2]) if len(shape) >= 3 else int(np.prod(shape[:-1])) if shape else 1


def rgb_to_hsv(image) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_RGB2HSV)`` for uint8 (..., 3) arrays."""
    return _convert(image, "image", _rgb_to_hsv_flat, False)


def bgr_to_hsv(image) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_BGR2HSV)`` for uint8 (..., 3) arrays."""
    return _convert(image, "image", _rgb_to_hsv_flat, True)


def hsv_to_rgb(image, block: int = SIMD_BLOCK) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_HSV2RGB)`` (OpenCV 4.x) for uint8 (..., 3) arrays with H
    in 0..179, converted row by row as OpenCV does: whole blocks of ``block`` pixels on the SIMD
    path, the rest of each row on the scalar path (a 1-D list of pixels is one row)."""
    width = max(_rows(image), 1)
    return _convert(image, "image", _hsv_to_rgb_flat, False, width, tail_start(width, block),
                    check_hue=True)


def hsv_to_bgr(image, block: int = SIMD_BLOCK) -> np.ndarray:
    """``cv2.cvtColor(image, cv2.COLOR_HSV2BGR)`` (OpenCV 4.x), H in 0..179 (see hsv_to_rgb)."""
    width = max(_rows(image), 1)
    return _convert(image, "image", _hsv_to_rgb_flat, True, width, tail_start(width, block),
                    check_hue=True)


# --------------------------------------------------------------------------- recolouring
@njit(cache=True, nogil=True)
def recolour_masked(dst, src, mask, cx, cy, h8, s8, tail, table, done):
    """Where ``mask`` (bool [h, w], centre (w // 2, h // 2)) centred at (cx, cy) is set, give
    the pixel of ``dst`` hue ``h8`` and saturation ``s8`` with the brightness V = max(R, G, B)
    of the same pixel of ``src`` (uint8 [H, W, 3] each; pixels outside either are skipped), as
    OpenCV's conversion of the whole picture makes it: SIMD path before column ``tail``
    (``tail_start(W)``), scalar path from it on. The result depends on V alone, so each
    brightness is converted once: ``table`` (uint8 [2, 256, 3]) and ``done`` (bool [2, 256])
    are scratch. ``dst`` may be ``src`` or a view of a frame."""
    done[:] = False
    x0, y0, j0, j1, i0, i1 = mask_window(mask, cx, cy, min(dst.shape[0], src.shape[0]),
                                         min(dst.shape[1], src.shape[1]))
    for j in range(j0, j1):
        y = y0 + j
        for i in range(i0, i1):
            x = x0 + i
            if not mask[j, i]:
                continue
            v = max(src[y, x, 0], src[y, x, 1], src[y, x, 2])
            p = 1 if x >= tail else 0
            if not done[p, v]:
                r, g, b = hsv_to_rgb_px(h8, s8, v, p == 1)
                table[p, v, 0] = r
                table[p, v, 1] = g
                table[p, v, 2] = b
                done[p, v] = True
            dst[y, x, 0] = table[p, v, 0]
            dst[y, x, 1] = table[p, v, 1]
            dst[y, x, 2] = table[p, v, 2]


@njit(cache=True, nogil=True)
def paint_annulus(dst, cx, cy, inner, outer, height, width, r, g, b):
    """Colour (r, g, b) on every pixel of ``dst[:height, :width]`` whose squared distance d2
    from (cx, cy) satisfies inner**2 < d2 <= outer**2 (the reference's grey region between the
    recoloured circle and ``region_radius``)."""
    height = min(height, dst.shape[0])
    width = min(width, dst.shape[1])
    lo = inner * inner
    hi = outer * outer
    for y in range(max(cy - outer, 0), min(cy + outer + 1, height)):
        dy = y - cy
        for x in range(max(cx - outer, 0), min(cx + outer + 1, width)):
            dx = x - cx
            d2 = dx * dx + dy * dy
            if lo < d2 <= hi:
                dst[y, x, 0] = r
                dst[y, x, 1] = g
                dst[y, x, 2] = b


# --------------------------------------------------------------------------- the colour wheel
_WHEELS = BoundedCache("render.hsv colour wheels", max_items=1024, max_bytes=96 << 20)
MAX_WHEEL = 2048


def _check_size(size) -> int:
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise ValueError(f"size: expected an integer, got {size!r}")
    if not 1 <= int(size) <= MAX_WHEEL:
        raise ValueError(f"size: must be in [1, {MAX_WHEEL}], got {size}")
    return int(size)


def _build_maps(size: int):
    mid = size // 2
    yy, xx = np.mgrid[:size, :size]
    dx = (xx - mid).astype(np.float64)
    dy = (yy - mid).astype(np.float64)
    dist = np.sqrt(dx * dx + dy * dy)
    angle = np.degrees(np.arctan2(dy, dx)) % 360
    hue = (angle / 2).astype(np.int64)
    radius = float(mid) if mid > 0 else 1.0
    sat = np.minimum(dist / radius * 255, 255).astype(np.int64)
    inside = dist <= mid
    hue = np.where(inside, hue, 0).astype(np.uint8)
    sat = np.where(inside, sat, 0).astype(np.uint8)
    for a in (hue, sat, inside):
        a.setflags(write=False)
    return hue, sat, inside


def wheel_maps(size: int):
    """(hue uint8 [size, size] in 0..179, saturation uint8 [size, size], inside bool [size,
    size]) of the colour wheel of side ``size``; read-only, cached."""
    size = _check_size(size)
    return _WHEELS.get_or_build(("maps", size), lambda: _build_maps(size))


@njit(cache=True, nogil=True)
def _paint_wheel(hue, sat, inside, v, out):
    table = np.empty((180, 256, 3), np.uint8)
    done = np.zeros(180 * 256, np.bool_)
    for y in range(hue.shape[0]):
        for x in range(hue.shape[1]):
            if not inside[y, x]:
                out[y, x, 0] = 0
                out[y, x, 1] = 0
                out[y, x, 2] = 0
                continue
            h = hue[y, x]
            s = sat[y, x]
            k = np.int64(h) * 256 + s
            if not done[k]:
                r, g, b = hsv_to_rgb_px(h, s, v, True)
                table[h, s, 0] = r
                table[h, s, 1] = g
                table[h, s, 2] = b
                done[k] = True
            out[y, x, 0] = table[h, s, 0]
            out[y, x, 1] = table[h, s, 1]
            out[y, x, 2] = table[h, s, 2]


def wheel_rgb(size: int, value: int) -> np.ndarray:
    """The colour wheel of side ``size`` at brightness ``value`` (0..255), without marker:
    uint8 [size, size, 3], read-only, built on first use and cached."""
    size = _check_size(size)
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= 255:
        raise ValueError(f"value: expected an integer in 0..255, got {value!r}")
    value = int(value)

    def build():
        hue, sat, inside = wheel_maps(size)
        out = np.empty((size, size, 3), np.uint8)
        _paint_wheel(hue, sat, inside, value, out)
        out.setflags(write=False)
        return out

    return _WHEELS.get_or_build(("rgb", size, value), build)


@njit(cache=True, nogil=True)
def marker_centre(size, hue_deg, sat):
    """Centre (x, y) of the wheel's marker for a hue in degrees and a saturation 0..255:
    mid + trunc(r cos(theta)), mid + trunc(r sin(theta)) with r = trunc(sat / 255 * (mid - 2))
    and theta the hue in radians (the reference's arithmetic, float64)."""
    mid = size // 2
    radius = np.float64(np.int64(sat / 255.0 * (mid - 2)))
    theta = hue_deg * (math.pi / 180.0)
    return mid + np.int64(radius * math.cos(theta)), mid + np.int64(radius * math.sin(theta))
