"""The compiled pass behind ``render/resample.linear``: OpenCV's INTER_LINEAR resize of uint8
RGB pictures, in Numba (imported by resample on first use, so its Pillow faces load without
Numba).

OpenCV's fixed-point arithmetic: per axis, float32 source positions ``(d + 0.5) * scale - 0.5``
(``scale`` = 1 / inv_scale in double), floored, the fraction turned into two 11-bit weights by
cvRound (half to even); a horizontal pass into int32 (columns clamped: a tap outside the source
moves onto the edge with weights (1, 0)), then OpenCV's vectorised vertical pass
(``VResizeLinearVec_32s8u``): ``((b0 * (S0 >> 4)) >> 16) + ((b1 * (S1 >> 4)) >> 16) + 2) >> 2``.
Rows keep their unclamped weights and read both taps from clipped rows, so an edge row is
blended with itself, as OpenCV does. Each source row's horizontal pass is computed once and
reused by the next output row that reads it. The kernel releases the GIL.
"""
import numpy as np
from numba import njit

COEF_SCALE = 2048   # OpenCV's INTER_RESIZE_COEF_SCALE (11 bits)


@njit(cache=True, nogil=True)
def _taps(src_n, dst_n, ofs, alpha, clamp):
    """OpenCV's first source index and 11-bit weights of each destination index along one axis
    (``clamp``: the column rule above)."""
    scale = 1.0 / (dst_n / src_n)   # OpenCV's 1 / inv_scale, in double
    for d in range(dst_n):
        f = np.float32((d + 0.5) * scale - 0.5)
        s = int(np.floor(f))
        f = np.float32(f - s)
        if clamp:
            if s < 0:
                f = np.float32(0.0)
                s = 0
            if s >= src_n - 1:
                f = np.float32(0.0)
                s = src_n - 1
        ofs[d] = s
        a1 = np.float32(f * np.float32(COEF_SCALE))
        a0 = np.float32((np.float32(1.0) - f) * np.float32(COEF_SCALE))
        alpha[d, 0] = np.int32(np.rint(a0))   # cvRound: half to even, as np.rint
        alpha[d, 1] = np.int32(np.rint(a1))


@njit(cache=True, nogil=True)
def resize(src, dst):
    """``src`` uint8 (h, w, 3) -> ``dst`` uint8 (H, W, 3), OpenCV INTER_LINEAR exactly."""
    h, w = src.shape[0], src.shape[1]
    H, W = dst.shape[0], dst.shape[1]
    xofs = np.empty(W, np.int64)
    xa = np.empty((W, 2), np.int32)
    yofs = np.empty(H, np.int64)
    yb = np.empty((H, 2), np.int32)
    _taps(w, W, xofs, xa, True)
    _taps(h, H, yofs, yb, False)
    rows = np.empty((2, W, 3), np.int32)
    cached = np.array([-1, -1], np.int64)
    for y in range(H):
        sy = yofs[y]
        for k in range(2):
            sr = min(max(sy + k, 0), h - 1)
            if cached[k] == sr:
                continue
            if k == 0 and cached[1] == sr:   # the previous lower row is this upper row
                for x in range(W):
                    for c in range(3):
                        rows[0, x, c] = rows[1, x, c]
                cached[0] = sr
                continue
            for x in range(W):
                sx = xofs[x]
                sx1 = min(sx + 1, w - 1)
                a0 = xa[x, 0]
                a1 = xa[x, 1]
                for c in range(3):
                    rows[k, x, c] = np.int32(src[sr, sx, c]) * a0 + np.int32(src[sr, sx1, c]) * a1
            cached[k] = sr
        b0 = yb[y, 0]
        b1 = yb[y, 1]
        for x in range(W):
            for c in range(3):
                v = (((b0 * (rows[0, x, c] >> 4)) >> 16) + ((b1 * (rows[1, x, c] >> 4)) >> 16)
                     + 2) >> 2
                dst[y, x, c] = min(max(v, 0), 255)
