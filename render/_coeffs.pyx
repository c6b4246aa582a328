# cython: language_level=3
"""Pillow's resampling coefficients (libImaging/Resample.c ``precompute_coeffs`` and its 8-bit
normalisation) in compiled code, for the Lanczos and bilinear filters.

render/resize.py's ``interval_coefficients`` is the Python statement of the same arithmetic and
the fallback for other filters; this module performs the same IEEE double operations in the same
order (math.sin is the C library's sin), so the weights are bit for bit the same: setup.py builds
it without -ffast-math and without contracting multiply-adds. Building a 224-sample table took
~2-4 ms in Python, which a process meeting many new crop sizes (zoom_in_puzzle) paid per size.
"""
from libc.math cimport ceil, fabs, sin
from libc.stdlib cimport free, malloc

import numpy as np

cdef double PI = 3.141592653589793   # math.pi

DEF LANCZOS = 0
DEF BILINEAR = 1


cdef inline double sinc(double x) noexcept nogil:
    if x == 0.0:
        return 1.0
    x = x * PI
    return sin(x) / x


cdef inline double weight(int kind, double x) noexcept nogil:
    if kind == LANCZOS:
        if -3.0 <= x and x < 3.0:
            return sinc(x) * sinc(x / 3.0)
        return 0.0
    if -1.0 < x and x < 1.0:
        return 1.0 - fabs(x)
    return 0.0


def interval_coefficients(int in_size, double in0, double span, int out_size, int kind,
                          double support0):
    """(bounds int32[out, 2] = (first, count), weights int32[out, ksize]) for output samples
    covering [in0, in0 + span) of in_size samples; kind 0 = Lanczos, 1 = bilinear."""
    cdef double scale, filterscale, support, ss, center, total, w
    cdef double one = <double>(1 << 22)
    cdef int ksize, i, x, lo, hi, count
    cdef double* k
    if kind != LANCZOS and kind != BILINEAR:
        raise ValueError(f"kind: expected 0 (Lanczos) or 1 (bilinear), got {kind}")
    if out_size < 1:
        raise ValueError(f"out_size: expected >= 1, got {out_size}")
    scale = span / out_size
    filterscale = 1.0 if 1.0 > scale else scale   # Python's max(scale, 1.0)
    support = support0 * filterscale
    ksize = <int>ceil(support) * 2 + 1
    bounds_arr = np.zeros((out_size, 2), np.int32)
    weights_arr = np.zeros((out_size, ksize), np.int32)
    cdef int[:, ::1] bounds = bounds_arr
    cdef int[:, ::1] weights = weights_arr
    ss = 1.0 / filterscale
    k = <double*>malloc((ksize + 1) * sizeof(double))
    if k == NULL:
        raise MemoryError("interval_coefficients: no memory")
    try:
        for i in range(out_size):
            center = in0 + (i + 0.5) * scale
            lo = <int>(center - support + 0.5)
            if lo < 0:
                lo = 0
            hi = <int>(center + support + 0.5)
            if hi > in_size:
                hi = in_size
            count = hi - lo
            if count > ksize:
                raise ValueError(f"sample {i}: {count} taps exceed the kernel size {ksize}")
            total = 0.0
            for x in range(count):
                k[x] = weight(kind, (<double>(x + lo) - center + 0.5) * ss)
                total = total + k[x]
            if total != 0.0:
                for x in range(count):
                    k[x] = k[x] / total
            for x in range(count):
                w = k[x]
                weights[i, x] = <int>(-0.5 + w * one) if w < 0 else <int>(0.5 + w * one)
            bounds[i, 0] = lo
            bounds[i, 1] = count if count > 0 else 0
    finally:
        free(k)
    return bounds_arr, weights_arr
