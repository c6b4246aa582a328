"""COCO segmentation masks: polygon -> run lengths, compressed run-length strings, decoding.

Our own Numba port of the algorithms of the COCO toolbox's ``maskApi.c`` (``rleFrPoly``,
``rleFrString``, ``rleDecode``), so masks equal pycocotools' bit for bit without importing it
(pycocotools is a test oracle only; tests/test_coco_masks.py compares the two).

Run lengths ("counts") follow COCO's convention: alternating runs of 0 and 1 pixels, starting with
a (possibly empty) run of 0, over the mask read in column-major (Fortran) order, i.e. pixel
(row r, column c) of an H x W mask is position ``c * H + r``.

``poly_counts`` follows ``rleFrPoly`` step by step: the vertices are scaled by 5 and rounded with
C's ``(int)(v + .5)`` (truncation toward zero, so negative coordinates round as C does); each edge
is walked one unit step at a time along its major axis; where the walked x changes, a boundary
point is kept if it falls on a pixel centre column inside the image; the kept points become sorted
column-major positions whose differences are the counts. Two C details are reproduced exactly:
a zero-length edge (a repeated vertex) divides 0 by 0, and x86 converts the NaN to INT_MIN; the
walk is streamed (only kept points are stored), so memory is bounded by the kept points, not by
the walk length. Coordinates must satisfy ``|5 v + .5| < 2**31`` (C's ``int`` conversion is
undefined beyond): callers check ``MAX_COORD``.

Compressed strings (``rleFrString``): 5 bits per character (ASCII 48..111), a continuation bit
0x20, sign extension from bit 0x10 of the last character, and each count after the second stored
as the difference to the count two places before. Counts are unsigned 32-bit in C; the values are
wrapped the same way here.
"""
from __future__ import annotations

import numpy as np
from numba import njit

#: Largest |coordinate| accepted in a polygon: 5 * MAX_COORD + .5 stays far inside C's int range,
#: and one edge's walk stays at most 10**7 unit steps.
MAX_COORD = 1_000_000.0
#: x86's result of converting NaN (or an out-of-range double) to a 32-bit int.
_INT_MIN = -2147483648


@njit(cache=True, nogil=True)
def _c_int(v):
    """C's ``(int)`` of a double in range: truncation toward zero."""
    return np.int64(v)  # numba truncates toward zero like C


@njit(cache=True, nogil=True)
def poly_counts(xy, h, w):
    """COCO counts (int64) of one polygon ``xy`` = [x0, y0, x1, y1, ...] (float64, an odd last
    coordinate is ignored as pycocotools does) rasterised at h x w, exactly as ``rleFrPoly``."""
    scale = 5.0
    k = xy.shape[0] // 2
    xs_ = np.empty(k + 1, np.int64)
    ys_ = np.empty(k + 1, np.int64)
    for j in range(k):
        xs_[j] = _c_int(scale * xy[2 * j] + 0.5)
        ys_[j] = _c_int(scale * xy[2 * j + 1] + 0.5)
    if k > 0:
        xs_[k] = xs_[0]
        ys_[k] = ys_[0]
    # upper bound of kept points: each edge keeps at most one point per image column (+1)
    cap = 0
    total = 0
    for j in range(k):
        step = max(abs(xs_[j] - xs_[j + 1]), abs(ys_[j] - ys_[j + 1])) + 1
        total += step
    cap = min(total, k * (w + 2))
    kx = np.empty(max(cap, 1), np.int64)
    ky = np.empty(max(cap, 1), np.int64)
    m = 0
    have_prev = False
    pu = 0
    pv = 0
    for j in range(k):
        xs = xs_[j]
        xe = xs_[j + 1]
        ys = ys_[j]
        ye = ys_[j + 1]
        dx = abs(xe - xs)
        dy = abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            t = xs
            xs = xe
            xe = t
            t = ys
            ys = ye
            ye = t
        degenerate = dx == 0 and dy == 0
        if dx >= dy:
            s = 0.0 if degenerate else (ye - ys) / dx
            n = dx
        else:
            s = (xe - xs) / dy
            n = dy
        for d in range(n + 1):
            t = n - d if flip else d
            if dx >= dy:
                u = t + xs
                if degenerate:
                    v = _INT_MIN  # (int)(ys + NaN * 0 + .5) on x86
                else:
                    v = _c_int(ys + s * t + 0.5)
            else:
                v = t + ys
                u = _c_int(xs + s * t + 0.5)
            if have_prev and u != pu:
                xd = float(u if u < pu else u - 1)
                xd = (xd + 0.5) / scale - 0.5
                if not (np.floor(xd) != xd or xd < 0 or xd > w - 1):
                    yd = float(v if v < pv else pv)
                    yd = (yd + 0.5) / scale - 0.5
                    if yd < 0:
                        yd = 0.0
                    elif yd > h:
                        yd = float(h)
                    yd = np.ceil(yd)
                    if m == kx.shape[0]:  # never in practice: grow rather than overflow
                        kx2 = np.empty(2 * m, np.int64)
                        ky2 = np.empty(2 * m, np.int64)
                        kx2[:m] = kx
                        ky2[:m] = ky
                        kx = kx2
                        ky = ky2
                    kx[m] = np.int64(xd)
                    ky[m] = np.int64(yd)
                    m += 1
            pu = u
            pv = v
            have_prev = True
    a = np.empty(m + 1, np.int64)
    for j in range(m):
        a[j] = (kx[j] * h + ky[j]) & 0xFFFFFFFF
    a[m] = (h * w) & 0xFFFFFFFF
    a.sort()
    p = 0
    for j in range(m + 1):
        t = a[j]
        a[j] -= p
        p = t
    b = np.empty(m + 1, np.int64)
    nb = 1
    b[0] = a[0]
    j = 1
    while j < m + 1:
        if a[j] > 0:
            b[nb] = a[j]
            nb += 1
            j += 1
        else:
            j += 1
            if j < m + 1:
                b[nb - 1] += a[j]
                j += 1
    return b[:nb].copy()


@njit(cache=True, nogil=True)
def string_counts(s, limit):
    """Counts of a compressed RLE string given as uint8 codes (``rleFrString``). Returns
    (counts int64, error) where error is 0 when fine, 1 for a character outside 48..111, 2 for a
    value longer than ``limit`` characters (C shifts past its 32-bit int there)."""
    n = s.shape[0]
    cnts = np.empty(max(n, 1), np.int64)
    m = 0
    p = 0
    while p < n:
        x = np.int64(0)
        k = 0
        more = True
        while more:
            if p >= n:
                return cnts[:0].copy(), 3  # ended inside a value
            ch = np.int64(s[p])
            if ch < 48 or ch > 111:
                return cnts[:0].copy(), 1
            c = ch - 48
            if k >= limit:
                return cnts[:0].copy(), 2
            x |= (c & 0x1F) << (5 * k)
            more = (c & 0x20) != 0
            p += 1
            k += 1
            if not more and (c & 0x10) != 0:
                x |= np.int64(-1) << (5 * k)
        if m > 2:
            x += cnts[m - 2]
        cnts[m] = x & 0xFFFFFFFF
        m += 1
    return cnts[:m].copy(), 0


@njit(cache=True, nogil=True)
def counts_area(counts):
    """Pixels set by one run-length list (the sum of its odd runs)."""
    a = np.int64(0)
    for j in range(1, counts.shape[0], 2):
        a += counts[j]
    return a


@njit(cache=True, nogil=True)
def paint_counts(flat, counts):
    """OR one run-length list into a flat column-major bool buffer (runs past its end are cut,
    where C would write out of bounds)."""
    pos = np.int64(0)
    n = flat.shape[0]
    for j in range(counts.shape[0]):
        c = counts[j]
        if j % 2 == 1:
            e = min(pos + c, n)
            for q in range(pos, e):
                flat[q] = True
        pos += c


@njit(cache=True, nogil=True)
def polygons_flat(coords, poly_offsets, p0, p1, h, w):
    """Union of polygons p0..p1-1 (rows of the CSR ``poly_offsets`` into ``coords``) as a flat
    column-major bool buffer of h * w."""
    flat = np.zeros(h * w, np.bool_)
    for p in range(p0, p1):
        cnts = poly_counts(coords[poly_offsets[p]:poly_offsets[p + 1]], h, w)
        paint_counts(flat, cnts)
    return flat


@njit(cache=True, nogil=True)
def polygons_area_positive(coords, poly_offsets, p0, p1, h, w):
    """Whether the union of polygons p0..p1-1 has any pixel (from run lengths, no decode)."""
    for p in range(p0, p1):
        cnts = poly_counts(coords[poly_offsets[p]:poly_offsets[p + 1]], h, w)
        if counts_area(cnts) > 0:
            return True
    return False


@njit(cache=True, nogil=True)
def flat_centre(flat, h):
    """(pixel count, sum of columns, sum of rows) of a flat column-major mask of height h."""
    n = np.int64(0)
    sx = np.int64(0)
    sy = np.int64(0)
    for q in range(flat.shape[0]):
        if flat[q]:
            n += 1
            sx += q // h
            sy += q % h
    return n, sx, sy


def flat_to_mask(flat: np.ndarray, h: int, w: int) -> np.ndarray:
    """A flat column-major buffer as a C-ordered bool (h, w) array."""
    return np.ascontiguousarray(flat.reshape(w, h).T)


@njit(cache=True, nogil=True)
def walk_lengths(coords, poly_offsets, seg_offsets, kinds, poly_kind):
    """Per annotation: the unit steps ``poly_counts`` walks over all its polygons (the sum over
    edges of max(|dx|, |dy|) + 1 at 5x scale), 0 for annotations of another kind. Lets a loader
    bound the time one mask can take."""
    n = seg_offsets.shape[0] - 1
    out = np.zeros(n, np.int64)
    for a in range(n):
        if kinds[a] != poly_kind:
            continue
        total = np.int64(0)
        for p in range(seg_offsets[a], seg_offsets[a + 1]):
            q0 = poly_offsets[p]
            k = (poly_offsets[p + 1] - q0) // 2
            for j in range(k):
                jn = j + 1 if j + 1 < k else 0
                x0 = _c_int(5.0 * coords[q0 + 2 * j] + 0.5)
                y0 = _c_int(5.0 * coords[q0 + 2 * j + 1] + 0.5)
                x1 = _c_int(5.0 * coords[q0 + 2 * jn] + 0.5)
                y1 = _c_int(5.0 * coords[q0 + 2 * jn + 1] + 0.5)
                total += max(abs(x1 - x0), abs(y1 - y0)) + 1
        out[a] = total
    return out
