"""Compiled per-frame work of the clip source (envs/assets/clips.py), in Numba.

- ``grey``: OpenCV's 8-bit RGB -> grey, ``(9798 R + 19235 G + 3735 B + 16384) >> 15``.
- ``grey_difference``: mean |g1 - g2| / 255 of two grey frames (the reference's frame
  difference).
- the procedural clip painter: a clip is a background texture (``paint_background``) and a noise
  texture (``noise_texture``, a counter hash) painted once, then per frame the background plus a
  shifted window of the noise and a few flat shapes whose geometry is a function of time
  (``paint_frame``), all pure functions of numbers the caller derives from the clip's number.

Nothing here knows a family by name. The kernels release the GIL. (A decoded frame is resized by
render/resample.linear, OpenCV's INTER_LINEAR exactly, which the clip source calls.)
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def grey(rgb, out):
    """OpenCV's COLOR_RGB2GRAY for uint8: rgb (H, W, 3) -> out (H, W)."""
    for y in range(rgb.shape[0]):
        for x in range(rgb.shape[1]):
            out[y, x] = (np.int32(rgb[y, x, 0]) * 9798 + np.int32(rgb[y, x, 1]) * 19235
                         + np.int32(rgb[y, x, 2]) * 3735 + 16384) >> 15


@njit(cache=True, nogil=True)
def grey_difference(a, b):
    """mean(|a - b|) / 255 of two uint8 grey frames of one shape."""
    total = 0
    for y in range(a.shape[0]):
        for x in range(a.shape[1]):
            d = np.int64(a[y, x]) - np.int64(b[y, x])
            total += d if d >= 0 else -d
    return total / (a.shape[0] * a.shape[1]) / 255.0


@njit(cache=True, nogil=True)
def pairwise_differences(greys, out):
    """out[i, j] = grey_difference(greys[i], greys[j]) for a stack of grey frames."""
    n = greys.shape[0]
    for i in range(n):
        out[i, i] = 0.0
        for j in range(i + 1, n):
            d = grey_difference(greys[i], greys[j])
            out[i, j] = d
            out[j, i] = d


# --------------------------------------------------------------------------- procedural clips
@njit(cache=True, nogil=True)
def _hash(x):
    """A 32-bit integer hash (lowbias32): the per-pixel noise of a clip."""
    x = np.uint32(x)
    x ^= x >> np.uint32(16)
    x *= np.uint32(0x7FEB352D)
    x ^= x >> np.uint32(15)
    x *= np.uint32(0x846CA68B)
    x ^= x >> np.uint32(16)
    return x


@njit(cache=True, nogil=True)
def paint_background(out, top, bottom, stripe, key):
    """A vertical gradient from colour ``top`` to ``bottom`` with faint diagonal stripes of
    colour offset ``stripe`` and fixed per-pixel grain (hash of ``key``): the clip's scene."""
    H, W = out.shape[0], out.shape[1]
    for y in range(H):
        t = y / (H - 1)
        for x in range(W):
            on = ((x + y) // 16) % 2
            g = np.int32(_hash(np.uint32(key) * np.uint32(2654435761) + np.uint32(y * W + x))
                         & np.uint32(15)) - 8
            for c in range(3):
                v = top[c] * (1.0 - t) + bottom[c] * t + on * stripe[c] + g
                out[y, x, c] = min(max(int(v + 0.5), 0), 255)


@njit(cache=True, nogil=True)
def noise_texture(out, key, amp):
    """Per-pixel noise in [-amp, amp] (hash of ``key`` and the pixel), the same value in the
    three channels of a pixel: ``out`` int16 (h, w * 3), a clip's grain that ``paint_frame``
    shifts per frame."""
    span = np.uint32(2 * amp + 1)
    base = np.uint32(key) * np.uint32(0x9E3779B1)
    W = out.shape[1] // 3
    for y in range(out.shape[0]):
        for x in range(W):
            v = np.int16(np.int32(_hash(base + np.uint32(y * W + x)) % span) - amp)
            out[y, 3 * x] = v
            out[y, 3 * x + 1] = v
            out[y, 3 * x + 2] = v


@njit(cache=True, nogil=True)
def paint_frame(out, background, shapes, noise, noise_y, noise_x):
    """One frame into ``out`` (H, W * 3): ``background`` (same shape) plus the window of the
    noise texture at (noise_y, noise_x), clipped to 0..255 (one pass: the scene's grain moves
    every frame), then each shape of ``shapes`` (rows of kind, x0, y0, x1, y1, r, g, b; kind 0 =
    none, 1 = rectangle [x0, x1) x [y0, y1), 2 = disc of centre (x0, y0) and radius x1), in
    order, flat."""
    H, W = out.shape[0], out.shape[1] // 3
    n3 = 3 * W
    ox = 3 * noise_x
    for y in range(H):
        row = out[y]
        brow = background[y]
        nrow = noise[noise_y + y]
        for j in range(n3):
            v = np.int32(brow[j]) + np.int32(nrow[ox + j])
            if v < 0:
                v = 0
            if v > 255:
                v = 255
            row[j] = v
    for s in range(shapes.shape[0]):
        kind = int(shapes[s, 0])
        if kind == 0:
            continue
        col0 = np.uint8(min(max(int(shapes[s, 5]), 0), 255))
        col1 = np.uint8(min(max(int(shapes[s, 6]), 0), 255))
        col2 = np.uint8(min(max(int(shapes[s, 7]), 0), 255))
        if kind == 1:
            x0 = max(int(np.floor(shapes[s, 1])), 0)
            y0 = max(int(np.floor(shapes[s, 2])), 0)
            x1 = min(int(np.floor(shapes[s, 3])), W)
            y1 = min(int(np.floor(shapes[s, 4])), H)
            if x1 <= x0:
                continue
            for y in range(y0, y1):
                row = out[y]
                for x in range(x0, x1):
                    row[3 * x] = col0
                    row[3 * x + 1] = col1
                    row[3 * x + 2] = col2
        elif kind == 2:
            cx = shapes[s, 1]
            cy = shapes[s, 2]
            r = shapes[s, 3]
            if r <= 0:
                continue
            ya = max(int(np.floor(cy - r)), 0)
            yb = min(int(np.ceil(cy + r)) + 1, H)
            r2 = r * r
            for y in range(ya, yb):
                dy = y + 0.5 - cy
                if dy * dy > r2:
                    continue
                half = np.sqrt(r2 - dy * dy)
                # pixels whose centre x + 0.5 lies within [cx - half, cx + half]
                xa = max(int(np.ceil(cx - half - 0.5)), 0)
                xb = min(int(np.floor(cx + half - 0.5)) + 1, W)
                row = out[y]
                for x in range(xa, xb):
                    row[3 * x] = col0
                    row[3 * x + 1] = col1
                    row[3 * x + 2] = col2
