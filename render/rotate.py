"""Rotating square pictures exactly as OpenCV 4 does: the photo transform of mental_rotation_2d
(spec/envs/mental_rotation_2d.md, section 8; the cv2-exact linear resize the pictures start from
is render/resample.linear).

``rotate_rows`` turns S x S uint8 RGB pictures about pixel (cx, cy) clockwise on screen by a
per-row angle and writes them into a batch frame buffer, computing what
``cv2.warpAffine(src, cv2.getRotationMatrix2D((cx, cy), -angle, 1), (S, S), INTER_LINEAR,
BORDER_CONSTANT, 0)`` computes in OpenCV 4's fixed-point path: the matrix in doubles, inverted
as ``invertAffineTransform`` does, source coordinates accumulated in 1/1024 pixel and cut to
1/32 pixel (``INTER_BITS`` = 5), each output the 2 x 2 neighbourhood weighted by the integer
bilinear table (weights summing to 2**15, outside samples 0), rounded. Pictures are read as
``pack_rgb`` pixels (R, G, B in 21-bit lanes of one uint64), so the three channels' sums are one
integer multiply-add chain (the table's sum equals the two-stage sum the kernel computes: see
``bilinear_table``). Only pixels inside the
per-row spans ``[lo[y], hi[y])`` are computed; the rest of the panel is set to 0, which is the
disk mask applied after the warp. The reference frames (parity/frames/mental_rotation_2d_*.png)
are reproduced pixel for pixel. The OpenCV installed as the test oracle (5.x) moved warpAffine to
a floating-point path that differs from OpenCV 4 by a few levels on ~5% of the pixels; the tests
hold this module to cv2's matrix exactly, to cv2.remap (which kept the fixed-point
interpolation) exactly for the interpolation, and to cv2.warpAffine within that small margin.

``disk_spans`` turns a filled-circle mask (render/circles.disk_mask: cv2.circle's filled LINE_8
disk) into the per-row spans both use.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..core.threads import FRAME_POOL, THREAD_BYTES

INTER_BITS = 5
INTER_TAB_SIZE = 1 << INTER_BITS
AB_BITS = 10
AB_SCALE = 1 << AB_BITS
ROUND_DELTA = AB_SCALE // INTER_TAB_SIZE // 2
REMAP_COEF_BITS = 15


def bilinear_table() -> np.ndarray:
    """int32[1024, 4]: OpenCV's fixed-point bilinear weights for each (fy, fx) in 1/32 pixel
    (index fy * 32 + fx), for the samples (x, y), (x+1, y), (x, y+1), (x+1, y+1). Each set sums
    to 2**15; OpenCV saturates the (0, 0) weight to 32767 and adds the missing unit to the last
    sample (its sum fix-up). The kernel computes the equal two-stage sum ((32 - fy) a + fy c)
    (32 - fx) + ((32 - fy) b + fy d) fx, rounded at 2**10 (the fix-up moves a result by less
    than 1/2 and never changes it); tests/test_rotate.py checks the equality over the table."""
    table = np.zeros((INTER_TAB_SIZE * INTER_TAB_SIZE, 4), np.int32)
    for fy in range(INTER_TAB_SIZE):
        for fx in range(INTER_TAB_SIZE):
            ax, ay = INTER_TAB_SIZE - fx, INTER_TAB_SIZE - fy
            w = [ay * ax * 32, ay * fx * 32, fy * ax * 32, fy * fx * 32]
            if w[0] == 1 << REMAP_COEF_BITS:
                w = [w[0] - 1, 0, 0, 1]
            table[fy * INTER_TAB_SIZE + fx] = w
    return table


def rotation_matrix(cx: float, cy: float, angle_ccw_deg: float) -> np.ndarray:
    """float64[2, 3]: ``cv2.getRotationMatrix2D((cx, cy), angle_ccw_deg, 1.0)`` (counter-
    clockwise on screen for positive angles), computed the same way."""
    a = angle_ccw_deg * (math.pi / 180.0)
    alpha, beta = math.cos(a), math.sin(a)
    return np.array([[alpha, beta, (1 - alpha) * cx - beta * cy],
                     [-beta, alpha, beta * cx + (1 - alpha) * cy]])


@njit(cache=True, inline="always")
def _round(v):
    # cvRound / saturate_cast<int>(double): to nearest, ties to even (and in int32 range here).
    return np.int64(np.rint(v))


@njit(cache=True, inline="always")
def _inverse_rotation(angle_cw_deg, cx, cy, m):
    """The inverse map of getRotationMatrix2D((cx, cy), -angle_cw_deg, 1), as warpAffine's
    invertAffineTransform computes it, into m (float64[6])."""
    a = -angle_cw_deg * (math.pi / 180.0)
    alpha = math.cos(a)
    beta = math.sin(a)
    m0, m1, m2 = alpha, beta, (1.0 - alpha) * cx - beta * cy
    m3, m4, m5 = -beta, alpha, beta * cx + (1.0 - alpha) * cy
    d = m0 * m4 - m1 * m3
    d = 1.0 / d if d != 0.0 else 0.0
    i0 = m4 * d
    i4 = m0 * d
    i1 = m1 * -d
    i3 = m3 * -d
    m[0] = i0
    m[1] = i1
    m[2] = -i0 * m2 - i1 * m5
    m[3] = i3
    m[4] = i4
    m[5] = -i3 * m2 - i4 * m5


# Packed pixels: R, G, B in 21-bit lanes of one uint64, so the bilinear sums of the three
# channels (at most 255 * 1024 + 512 < 2**21 each) run as one integer multiply-add chain.
LANE_BITS = 21
_HALF = np.uint64(512 | (512 << LANE_BITS) | (512 << (2 * LANE_BITS)))


def pack_rgb(image: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """uint64[..., h, w]: each RGB pixel of ``image`` (uint8[..., h, w, 3]) as
    R | G << 21 | B << 42, the source layout ``rotate_rows`` reads."""
    image = np.asarray(image, np.uint8)
    if out is None:
        out = np.empty(image.shape[:-1], np.uint64)
    np.left_shift(image[..., 2], np.uint64(2 * LANE_BITS), out=out, dtype=np.uint64)
    out |= image[..., 1].astype(np.uint64) << np.uint64(LANE_BITS)
    out |= image[..., 0]
    return out


@njit(cache=True, inline="always")
def _store(out, x, v):
    out[x, 0] = np.uint8((v >> np.uint64(10)) & np.uint64(0xFF))
    out[x, 1] = np.uint8((v >> np.uint64(10 + LANE_BITS)) & np.uint64(0xFF))
    out[x, 2] = np.uint8((v >> np.uint64(10 + 2 * LANE_BITS)) & np.uint64(0xFF))


@njit(cache=True, inline="always")
def _inside(fxy, gxy, inner):
    # Both samples of both rows inside the picture: 0 <= sx < size - 1 and 0 <= sy < size - 1.
    return np.uint64(fxy >> INTER_BITS) < inner and np.uint64(gxy >> INTER_BITS) < inner


@njit(cache=True, nogil=True)
def _edge_pixel(src, off, size, out, o, fxy, gxy):
    # A pixel whose 2 x 2 samples are partly or wholly outside: BORDER_CONSTANT samples are 0.
    sx = fxy >> INTER_BITS
    sy = gxy >> INTER_BITS
    fx = np.uint64(fxy & (INTER_TAB_SIZE - 1))
    fy = np.uint64(gxy & (INTER_TAB_SIZE - 1))
    gx = np.uint64(INTER_TAB_SIZE) - fx
    gy = np.uint64(INTER_TAB_SIZE) - fy
    zero = np.uint64(0)
    in_x0 = 0 <= sx < size
    in_x1 = 0 <= sx + 1 < size
    in_y0 = 0 <= sy < size
    in_y1 = 0 <= sy + 1 < size
    p = off + sy * size + sx
    a = src[p] if in_y0 and in_x0 else zero
    b = src[p + 1] if in_y0 and in_x1 else zero
    d = src[p + size] if in_y1 and in_x0 else zero
    e = src[p + size + 1] if in_y1 and in_x1 else zero
    _store(out, o, (a * gy + d * fy) * gx + (b * gy + e * fy) * fx + _HALF)


@njit(cache=True, inline="always")
def _rotate_one(src, off, size, dst, y0, x0, angle_cw_deg, cx, cy, lo, hi, m, adelta, bdelta):
    # Picture (y, x) is src[off + y * size + x].
    one = np.uint64(1)
    usize = np.uint64(size)
    inner = np.uint64(size - 1)
    _inverse_rotation(angle_cw_deg, cx, cy, m)
    for x in range(size):
        adelta[x] = _round(m[0] * x * AB_SCALE)
        bdelta[x] = _round(m[3] * x * AB_SCALE)
    for y in range(size):
        out = dst[y0 + y]
        start = lo[y]
        stop = hi[y]
        for x in range(x0, x0 + start):
            out[x, 0] = 0
            out[x, 1] = 0
            out[x, 2] = 0
        for x in range(x0 + stop, x0 + size):
            out[x, 0] = 0
            out[x, 1] = 0
            out[x, 2] = 0
        if stop <= start:
            continue
        xrow = _round((m[1] * y + m[2]) * AB_SCALE) + ROUND_DELTA
        yrow = _round((m[4] * y + m[5]) * AB_SCALE) + ROUND_DELTA
        # Source positions move monotonically along a row (each coordinate is a rounded
        # linear function of x), so the pixels whose samples all lie inside the picture form
        # one run: the edges are peeled off from both ends, the run needs no bounds test.
        a = start
        while a < stop:
            fxy = (xrow + adelta[a]) >> (AB_BITS - INTER_BITS)
            gxy = (yrow + bdelta[a]) >> (AB_BITS - INTER_BITS)
            if _inside(fxy, gxy, inner):
                break
            _edge_pixel(src, off, size, out, x0 + a, fxy, gxy)
            a += 1
        b = stop
        while b > a:
            fxy = (xrow + adelta[b - 1]) >> (AB_BITS - INTER_BITS)
            gxy = (yrow + bdelta[b - 1]) >> (AB_BITS - INTER_BITS)
            if _inside(fxy, gxy, inner):
                break
            _edge_pixel(src, off, size, out, x0 + b - 1, fxy, gxy)
            b -= 1
        for x in range(a, b):
            fxy = (xrow + adelta[x]) >> (AB_BITS - INTER_BITS)
            gxy = (yrow + bdelta[x]) >> (AB_BITS - INTER_BITS)
            # The table's weights are (32 - fx, fx) x (32 - fy, fy) x 32, summed then >> 15:
            # the same integer as this two-stage sum then >> 10 (the (0, 0) entry's
            # 32767 / +1 fix-up never changes a result: see bilinear_table). Unsigned
            # indices: no negative-index wraparound test.
            fx = np.uint64(fxy & (INTER_TAB_SIZE - 1))
            fy = np.uint64(gxy & (INTER_TAB_SIZE - 1))
            gx = np.uint64(INTER_TAB_SIZE) - fx
            gy = np.uint64(INTER_TAB_SIZE) - fy
            p = np.uint64(off + (gxy >> INTER_BITS) * size + (fxy >> INTER_BITS))
            q = p + usize
            v = (src[p] * gy + src[q] * fy) * gx + (src[p + one] * gy + src[q + one] * fy) * fx
            _store(out, x0 + x, v + _HALF)


@njit(cache=True, inline="always")
def _copy_one(src, off, size, dst, y0, x0, lo, hi):
    # Angle 0: the inverse map is the identity (cos 0 = 1, sin 0 = 0 exactly), every sample
    # sits on a pixel with weight 1, so the warp copies the picture: done here directly.
    for y in range(size):
        out = dst[y0 + y]
        for x in range(size):
            if lo[y] <= x < hi[y]:
                v = src[off + y * size + x] << np.uint64(10)
                _store(out, x0 + x, v)
            else:
                out[x0 + x, 0] = 0
                out[x0 + x, 1] = 0
                out[x0 + x, 2] = 0


def _rotate_rows(src, src_off, size, frames, rows, angle_cw_deg, y0, x0, cx, cy, lo, hi):
    m = np.empty(6, np.float64)
    adelta = np.empty(size, np.int64)
    bdelta = np.empty(size, np.int64)
    for k in range(rows.shape[0]):
        b = rows[k]
        if angle_cw_deg[b] == 0.0:
            _copy_one(src, src_off[b], size, frames[b], y0, x0, lo, hi)
        else:
            _rotate_one(src, src_off[b], size, frames[b], y0, x0, angle_cw_deg[b], cx, cy, lo,
                        hi, m, adelta, bdelta)


_rotate_kernel = njit(cache=True, nogil=True)(_rotate_rows)


def rotate_rows(src: np.ndarray, src_off: np.ndarray, size: int, frames: np.ndarray,
                rows: np.ndarray, angle_cw_deg: np.ndarray, y0: int, x0: int, cx: float,
                cy: float, lo: np.ndarray, hi: np.ndarray) -> None:
    """For each b in ``rows``: the ``size`` x ``size`` picture at ``src[src_off[b]:]`` (a flat
    uint64 buffer of ``pack_rgb`` pixels, row-major) rotated clockwise on screen by
    ``angle_cw_deg[b]`` degrees about (cx, cy), written to ``frames[b, y0:y0+size,
    x0:x0+size]`` inside the spans [lo[y], hi[y]) of each panel row y and 0 outside them (spans
    (0, size) on every row: the plain warpAffine). Angle 0 copies the picture exactly."""
    size = int(size)
    if src.dtype != np.uint64 or src.ndim != 1 or not src.flags.c_contiguous:
        raise ValueError(f"src: expected a flat uint64 buffer of packed pixels, got "
                         f"{src.dtype}{list(src.shape)}")
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[3] != 3 or \
            frames.shape[1] < y0 + size or frames.shape[2] < x0 + size or y0 < 0 or x0 < 0:
        raise ValueError(f"frames: expected uint8[B, >= {y0 + size}, >= {x0 + size}, 3], got "
                         f"{frames.dtype}{list(frames.shape)}")
    if lo.shape[0] < size or hi.shape[0] < size:
        raise ValueError(f"lo, hi: expected {size} spans, got {lo.shape[0]}, {hi.shape[0]}")
    rows = np.ascontiguousarray(rows, np.int64)
    if rows.shape[0] == 0:
        return
    src_off = np.ascontiguousarray(src_off, np.int64)
    used = src_off[rows]
    if used.min() < 0 or used.max() + size * size > src.shape[0]:
        raise ValueError(f"src_off: a picture of rows {rows.tolist()[:8]} lies outside src "
                         f"({src.shape[0]} pixels)")
    angles = np.ascontiguousarray(angle_cw_deg, np.float64)
    lo = np.ascontiguousarray(lo, np.int64)
    hi = np.ascontiguousarray(hi, np.int64)
    y0, x0, cx, cy = int(y0), int(x0), float(cx), float(cy)

    def part(part_rows):
        _rotate_kernel(src, src_off, size, frames, part_rows, angles, y0, x0, cx, cy, lo, hi)

    # One contiguous run of rows per core on the shared frame pool (the kernel releases the
    # GIL); a few rows stay on the calling thread.
    FRAME_POOL.run_parts(part, rows, np.full(rows.shape[0], 3.0 * size * size), THREAD_BYTES)


def rotate(image: np.ndarray, angle_cw_deg: float, center: tuple[float, float] | None = None,
           mask: np.ndarray | None = None) -> np.ndarray:
    """One S x S uint8 RGB picture rotated clockwise by ``angle_cw_deg`` about ``center``
    (default (S // 2, S // 2)); ``mask`` (bool[S, S] whose rows are single spans, e.g. a disk)
    zeroes everything outside it. A new array."""
    image = np.ascontiguousarray(image, np.uint8)
    size = image.shape[0]
    if image.ndim != 3 or image.shape[1] != size or image.shape[2] != 3:
        raise ValueError(f"image: expected uint8[S, S, 3], got {list(image.shape)}")
    cx, cy = center if center is not None else (size // 2, size // 2)
    lo, hi = disk_spans(mask) if mask is not None else (np.zeros(size, np.int64),
                                                        np.full(size, size, np.int64))
    out = np.zeros((1, size, size, 3), np.uint8)
    rotate_rows(pack_rgb(image).reshape(-1), np.zeros(1, np.int64), size, out,
                np.zeros(1, np.int64), np.array([angle_cw_deg], np.float64), 0, 0, cx, cy,
                lo, hi)
    return out[0]


def disk_spans(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) int64[S]: row y of ``mask`` (bool[S, S]) is true exactly on [lo[y], hi[y])
    (an empty row: lo = hi = 0). ValueError if a row is not one span."""
    mask = np.asarray(mask, np.bool_)
    size = mask.shape[0]
    lo = np.zeros(size, np.int64)
    hi = np.zeros(size, np.int64)
    for y in range(size):
        xs = np.flatnonzero(mask[y])
        if xs.size == 0:
            continue
        if xs[-1] - xs[0] + 1 != xs.size:
            raise ValueError(f"mask: row {y} is not one span of pixels")
        lo[y], hi[y] = xs[0], xs[-1] + 1
    return lo, hi


def centred_disk(size: int) -> np.ndarray:
    """bool[size, size]: cv2.circle's filled disk of radius size // 2 centred at
    (size // 2, size // 2), clipped to the square (render/circles.disk_mask placed there)."""
    from .circles import disk_mask

    r = size // 2
    disk = disk_mask(r)                    # (2r + 1, 2r + 1), centre (r, r)
    out = np.zeros((size, size), np.bool_)
    n = min(size, 2 * r + 1)
    out[:n, :n] = disk[:n, :n]
    return out
