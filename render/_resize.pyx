# cython: language_level=3
"""Pillow's 8-bit two-pass convolution resize (horizontal pass, then vertical), restricted to a
rectangle of the output, so that a frame which changed in one place is resized again only there.

The arithmetic is Pillow's (libImaging/Resample.c, 8 bits per channel): fixed-point coefficients
with 22 fraction bits, sums started at one half, results clipped to 0..255; the intermediate
image holds the source rows the vertical pass reads (``y_first`` on). The coefficients are made
in ``render/resize.py`` exactly as Pillow makes them.
"""
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp

DEF PRECISION_BITS = 22


cdef inline uint8_t clip8(int32_t v) noexcept nogil:
    """Pillow's clip: the sum's integer part, saturated to 0..255 (32-bit sums, as Pillow)."""
    if v >= (1 << PRECISION_BITS << 8):
        return 255
    if v <= 0:
        return 0
    return <uint8_t>(v >> PRECISION_BITS)


cdef inline void convolve(const uint8_t* p, Py_ssize_t step, const int32_t* k, int n, int C,
                          uint8_t* q) noexcept nogil:
    """q[ch] = clip(sum_i p[i * step + ch] * k[i]) for each of the C channels, Pillow's way."""
    cdef int i, ch
    cdef int32_t ss0, ss1, ss2, w
    if C == 3:
        ss0 = ss1 = ss2 = 1 << (PRECISION_BITS - 1)
        for i in range(n):
            w = k[i]
            ss0 += p[i * step] * w
            ss1 += p[i * step + 1] * w
            ss2 += p[i * step + 2] * w
        q[0] = clip8(ss0)
        q[1] = clip8(ss1)
        q[2] = clip8(ss2)
        return
    for ch in range(C):
        ss0 = 1 << (PRECISION_BITS - 1)
        for i in range(n):
            ss0 += p[i * step + ch] * k[i]
        q[ch] = clip8(ss0)


def horizontal(const uint8_t[:, :, ::1] src, uint8_t[:, :, ::1] tmp, int y_first,
               int row0, int row1, int col0, int col1, const int32_t[:, ::1] bounds,
               const int32_t[:, ::1] kk):
    """tmp[r - y_first, c] for source rows r in [row0, row1) and output columns c in
    [col0, col1)."""
    cdef int r, c, C = src.shape[2]
    with nogil:
        for r in range(row0, row1):
            for c in range(col0, col1):
                convolve(&src[r, bounds[c, 0], 0], C, &kk[c, 0], bounds[c, 1], C,
                         &tmp[r - y_first, c, 0])


def vertical(const uint8_t[:, :, ::1] tmp, uint8_t[:, :, ::1] out, int row0, int row1,
             int col0, int col1, const int32_t[:, ::1] bounds, const int32_t[:, ::1] kk):
    """out[r, c] for output rows r in [row0, row1) and columns c in [col0, col1); bounds are
    relative to tmp's first row. A whole output row is summed at once, source row by source
    row (a loop over contiguous bytes the compiler vectorises); each value's sum is the same
    integers added in the same order as ``convolve``, so the result is Pillow's."""
    cdef int r, i, n, C = tmp.shape[2]
    cdef Py_ssize_t j, m = (col1 - col0) * C
    cdef int32_t w
    cdef int32_t* acc
    cdef const uint8_t* p
    cdef uint8_t* q
    if m <= 0 or row1 <= row0:
        return
    acc = <int32_t*>malloc(m * sizeof(int32_t))
    if acc == NULL:
        raise MemoryError("vertical: no memory for a row of sums")
    with nogil:
        for r in range(row0, row1):
            for j in range(m):
                acc[j] = 1 << (PRECISION_BITS - 1)
            n = bounds[r, 1]
            for i in range(n):
                w = kk[r, i]
                p = &tmp[bounds[r, 0] + i, col0, 0]
                for j in range(m):
                    acc[j] += p[j] * w
            q = &out[r, col0, 0]
            for j in range(m):
                q[j] = clip8(acc[j])
    free(acc)


def changed_box(const uint8_t[:, :, ::1] a, const uint8_t[:, :, ::1] b):
    """(row0, row1, col0, col1): the smallest box holding every pixel where a and b differ, or
    None when they are equal."""
    cdef int H = a.shape[0], W = a.shape[1], C = a.shape[2]
    cdef int r, row0 = -1, row1 = -1, col0 = W, col1 = 0, n = W * C, lo, hi
    cdef const uint8_t* pa
    cdef const uint8_t* pb
    with nogil:
        for r in range(H):
            pa = &a[r, 0, 0]
            pb = &b[r, 0, 0]
            if memcmp(pa, pb, n) == 0:
                continue
            lo = 0
            while pa[lo] == pb[lo]:
                lo += 1
            hi = n - 1
            while pa[hi] == pb[hi]:
                hi -= 1
            if row0 < 0:
                row0 = r
            row1 = r + 1
            col0 = min(col0, lo // C)
            col1 = max(col1, hi // C + 1)
    if row0 < 0:
        return None
    return row0, row1, col0, col1
