# cython: language_level=3
"""Pillow's 8-bit two-pass convolution resize (horizontal pass, then vertical), restricted to a
rectangle of the output, so that a frame which changed in one place is resized again only there.

The arithmetic is Pillow's (libImaging/Resample.c, 8 bits per channel): fixed-point coefficients
with 22 fraction bits, sums started at one half, results clipped to 0..255; the intermediate
image holds the source rows the vertical pass reads (``y_first`` on). The coefficients are made
in ``render/resize.py`` exactly as Pillow makes them.
"""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t
from libc.stdlib cimport calloc, free, malloc
from libc.string cimport memcmp

DEF PRECISION_BITS = 22

# The horizontal pass with SSE2 integer SIMD (x86-64 always has it), written in C so that other
# machines compile the #else branch and run the scalar loop below. The sums are Pillow's exactly:
# each coefficient w (|w| < 2^26, Pillow's are <= 2^22) is split into hi = floor(w / 2048) and
# lo = w mod 2048, both int16, so that pmaddwd (int16 x int16, adjacent pairs added into int32)
# gives sum(p * hi) and sum(p * lo); (sum_hi << 11) + sum_lo + 1/2 is then Pillow's int32 sum,
# every step in wrapping 32-bit arithmetic (integer addition is associative mod 2^32 and Pillow's
# sum fits in int32). The clip (>> 22, then saturating packs to 0..255) is Pillow's clip8.
#
# Layout, for C = 2..4 channels: each source row is first rewritten as 32-bit lanes
# t[j] = (s[j], s[j + C]) (int16 pairs: one byte and the same channel of the next pixel), so that
# the C lanes starting at pixel x hold pixels x and x + 1 of every channel; an output pixel is a
# loop over its taps two at a time, one unaligned load and two pmaddwd against (hi, lo) vectors
# of the tap pair's coefficients (an odd tap count is padded with a zero coefficient). For C = 1
# the row is widened to int16 and eight taps go in each load. The row buffers end in zero lanes,
# so no load reaches past the source row (windows that end at the row's last pixel need no
# scalar fallback). Rows go two at a time (C >= 2), sharing the coefficient loads; the
# coefficients are split and packed once per call (a call with very few rows runs the scalar
# loop instead).
#
# The vertical pass (vg_vertical_row, the last function of the block) uses the same split, two
# taps (two source rows) per pmaddwd pair and 16 output bytes at a time.
cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__) || defined(_M_X64) || defined(_M_AMD64) || \
        (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
    #include <emmintrin.h>
    #define VG_RESIZE_SSE2 1
    /* Keeps v in a register: without it GCC reloads the coefficient and pixel vectors as
       pmaddwd memory operands (SSE's two-operand form), twice the loads (~5% slower). */
    #if defined(__GNUC__)
    #define VG_IN_REGISTER(v) __asm__("" : "+x"(v))
    #else
    #define VG_IN_REGISTER(v) ((void)0)
    #endif

    /* Coefficients of output columns [0, ncols) (bounds, kk of those columns; bstride,
       kstride: int32 from one column's row to the next) as (hi, lo) int16 vector pairs,
       group of taps g of column c at w + (c * wstride + 2 * g) * 8: two taps per group for
       C >= 2 (tap a, tap b repeated in the four 32-bit lanes), eight for C == 1; taps past the
       window are 0. off[c]: where column c's window starts in the row buffer (in lanes / int16
       from pixel px_lo); groups[c]: its group count. 0 when a coefficient does not split into
       int16 halves (the caller then runs the scalar loop). */
    static int vg_pack(const int32_t* bounds, ptrdiff_t bstride, const int32_t* kk,
                       ptrdiff_t kstride, int ncols, int C, int px_lo, int16_t* w, int wstride,
                       int32_t* off, int32_t* groups) {
        const int per = C == 1 ? 8 : 2;
        const __m128i mask = _mm_set1_epi32(2047);
        for (int c = 0; c < ncols; c++) {
            const int32_t* k = kk + c * kstride;
            const int n = bounds[c * bstride + 1];
            const int ng = n <= 0 ? 0 : C == 1 ? (n + 7) >> 3 : (n + 1) >> 1;
            groups[c] = ng;
            off[c] = n > 0 ? C * (bounds[c * bstride] - px_lo) : 0;
            int bad = 0;
            for (int i = 0; i < n; i++)
                bad |= k[i] < -(1 << 26) || k[i] >= (1 << 26);
            if (bad)
                return 0;
            __m128i* v = (__m128i*)(w + (ptrdiff_t)c * wstride * 8);
            /* four taps at a time: hi = w >> 11 (arithmetic: floor), lo = w & 2047 */
            for (int i = 0; i < ng * per; i += 4) {
                __m128i x;
                if (i + 4 <= n) {
                    x = _mm_loadu_si128((const __m128i*)(k + i));
                } else {   /* (set, not a copy to the stack and a load: that stalls) */
                    x = _mm_set_epi32(i + 3 < n ? k[i + 3] : 0, i + 2 < n ? k[i + 2] : 0,
                                      i + 1 < n ? k[i + 1] : 0, i < n ? k[i] : 0);
                }
                const __m128i hi = _mm_srai_epi32(x, 11), lo = _mm_and_si128(x, mask);
                if (C == 1) {   /* group g: hi of its eight taps, then lo */
                    int16_t* q = (int16_t*)(v + (i >> 3) * 2) + (i & 7);
                    _mm_storel_epi64((__m128i*)q, _mm_packs_epi32(hi, hi));
                    _mm_storel_epi64((__m128i*)(q + 8), _mm_packs_epi32(lo, lo));
                } else {        /* group g: (hi a, hi b) four times, then (lo a, lo b) */
                    const __m128i h = _mm_packs_epi32(hi, hi), l = _mm_packs_epi32(lo, lo);
                    __m128i* q = v + (i >> 1) * 2;
                    q[0] = _mm_shuffle_epi32(h, 0x00);
                    q[1] = _mm_shuffle_epi32(l, 0x00);
                    if (i + 2 < ng * per) {
                        q[2] = _mm_shuffle_epi32(h, 0x55);
                        q[3] = _mm_shuffle_epi32(l, 0x55);
                    }
                }
            }
        }
        return 1;
    }

    /* t[j] = s[j] | s[j + C] << 16 for j < L (0 past L); t's lanes after L stay 0. */
    static void vg_pair_lanes(const uint8_t* s, int L, int C, int32_t* t) {
        const __m128i z = _mm_setzero_si128();
        int j = 0;
        for (; j + C + 16 <= L; j += 16) {
            const __m128i a = _mm_loadu_si128((const __m128i*)(s + j));
            const __m128i b = _mm_loadu_si128((const __m128i*)(s + j + C));
            const __m128i lo = _mm_unpacklo_epi8(a, b), hi = _mm_unpackhi_epi8(a, b);
            _mm_storeu_si128((__m128i*)(t + j), _mm_unpacklo_epi8(lo, z));
            _mm_storeu_si128((__m128i*)(t + j + 4), _mm_unpackhi_epi8(lo, z));
            _mm_storeu_si128((__m128i*)(t + j + 8), _mm_unpacklo_epi8(hi, z));
            _mm_storeu_si128((__m128i*)(t + j + 12), _mm_unpackhi_epi8(hi, z));
        }
        for (; j < L; j++)
            t[j] = (int32_t)s[j] | (j + C < L ? (int32_t)s[j + C] << 16 : 0);
    }

    /* u[j] = s[j] for j < L; u's entries after L stay 0. */
    static void vg_widen(const uint8_t* s, int L, int16_t* u) {
        const __m128i z = _mm_setzero_si128();
        int j = 0;
        for (; j + 16 <= L; j += 16) {
            const __m128i a = _mm_loadu_si128((const __m128i*)(s + j));
            _mm_storeu_si128((__m128i*)(u + j), _mm_unpacklo_epi8(a, z));
            _mm_storeu_si128((__m128i*)(u + j + 8), _mm_unpackhi_epi8(a, z));
        }
        for (; j < L; j++)
            u[j] = s[j];
    }

    /* Pillow's clip8 of the four int32 sums (sh << 11) + sl, as bytes (lane i in byte i). */
    static inline uint32_t vg_clip4(__m128i sh, __m128i sl) {
        __m128i v = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(sh, 11), sl), 22);
        v = _mm_packs_epi32(v, v);
        return (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(v, v));
    }

    static inline void vg_put(uint8_t* q, uint32_t b, const int C) {
        q[0] = (uint8_t)b;
        q[1] = (uint8_t)(b >> 8);
        if (C > 2) q[2] = (uint8_t)(b >> 16);
        if (C > 3) q[3] = (uint8_t)(b >> 24);
    }

    /* Output pixels [0, ncols) of one row (t0 -> q0) or two (t1 -> q1 too, when t1 is not
       NULL; the two share the coefficient loads), q the first pixel and step bytes between
       pixels; C = 2..4. */
    static inline void vg_rows_pairs_c(const int32_t* t0, const int32_t* t1, const int16_t* w,
                                       int wstride, const int32_t* off, const int32_t* groups,
                                       int ncols, const int C, uint8_t* q0, uint8_t* q1,
                                       ptrdiff_t step) {
        const __m128i half = _mm_set1_epi32(1 << 21);
        const __m128i* k = (const __m128i*)w;
        if (t1 == NULL) {
            for (int c = 0; c < ncols; c++, q0 += step, k += wstride) {
                const int32_t* p = t0 + off[c];
                const __m128i* kg = k;
                const __m128i* kend = k + 2 * groups[c];
                __m128i sh = _mm_setzero_si128(), sl = half;
                for (; kg < kend; kg += 2, p += 2 * C) {
                    const __m128i d = _mm_loadu_si128((const __m128i*)p);
                    sh = _mm_add_epi32(sh, _mm_madd_epi16(d, kg[0]));
                    sl = _mm_add_epi32(sl, _mm_madd_epi16(d, kg[1]));
                }
                vg_put(q0, vg_clip4(sh, sl), C);
            }
            return;
        }
        const ptrdiff_t dt = t1 - t0;
        /* a pixel but the last may be stored as four bytes: the next pixel overwrites the fourth */
        const int wide = C == 3 && step == 3;
        for (int c = 0; c < ncols; c++, q0 += step, q1 += step, k += wstride) {
            const int32_t* p = t0 + off[c];
            const __m128i* kg = k;
            const __m128i* kend = k + 2 * groups[c];
            __m128i sh0 = _mm_setzero_si128(), sl0 = half, sh1 = sh0, sl1 = half;
            for (; kg < kend; kg += 2, p += 2 * C) {
                __m128i hi = kg[0], lo = kg[1];
                __m128i d0 = _mm_loadu_si128((const __m128i*)p);
                __m128i d1 = _mm_loadu_si128((const __m128i*)(p + dt));
                VG_IN_REGISTER(hi); VG_IN_REGISTER(lo); VG_IN_REGISTER(d0); VG_IN_REGISTER(d1);
                sh0 = _mm_add_epi32(sh0, _mm_madd_epi16(d0, hi));
                sl0 = _mm_add_epi32(sl0, _mm_madd_epi16(d0, lo));
                sh1 = _mm_add_epi32(sh1, _mm_madd_epi16(d1, hi));
                sl1 = _mm_add_epi32(sl1, _mm_madd_epi16(d1, lo));
            }
            __m128i v0 = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(sh0, 11), sl0), 22);
            __m128i v1 = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(sh1, 11), sl1), 22);
            v0 = _mm_packs_epi32(v0, v1);
            v0 = _mm_packus_epi16(v0, v0);
            const uint32_t b0 = (uint32_t)_mm_cvtsi128_si32(v0);
            const uint32_t b1 = (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(v0, 4));
            if (wide && c + 1 < ncols) {
                memcpy(q0, &b0, 4);
                memcpy(q1, &b1, 4);
            } else {
                vg_put(q0, b0, C);
                vg_put(q1, b1, C);
            }
        }
    }

    static void vg_rows_pairs(const int32_t* t0, const int32_t* t1, const int16_t* w,
                              int wstride, const int32_t* off, const int32_t* groups, int ncols,
                              int C, uint8_t* q0, uint8_t* q1, ptrdiff_t step) {
        /* constant channel counts, so that each loop is compiled for its own */
        if (C == 3) vg_rows_pairs_c(t0, t1, w, wstride, off, groups, ncols, 3, q0, q1, step);
        else if (C == 4) vg_rows_pairs_c(t0, t1, w, wstride, off, groups, ncols, 4, q0, q1, step);
        else vg_rows_pairs_c(t0, t1, w, wstride, off, groups, ncols, 2, q0, q1, step);
    }

    /* Column c's four partial sums (sh << 11) + sl, C = 1 (their total is the sum less 1/2). */
    static inline __m128i vg_single_sums(const int16_t* p, const __m128i* k, int ng) {
        __m128i sh = _mm_setzero_si128(), sl = sh;
        for (int g = 0; g < ng; g++, p += 8, k += 2) {
            const __m128i d = _mm_loadu_si128((const __m128i*)p);
            sh = _mm_add_epi32(sh, _mm_madd_epi16(d, k[0]));
            sl = _mm_add_epi32(sl, _mm_madd_epi16(d, k[1]));
        }
        return _mm_add_epi32(_mm_slli_epi32(sh, 11), sl);
    }

    /* One row's output pixels [0, ncols), C = 1: four columns at a time, their partial sums
       added up by a transpose, then clipped together. */
    static void vg_row_single(const int16_t* u, const int16_t* w, int wstride,
                              const int32_t* off, const int32_t* groups, int ncols, uint8_t* q,
                              ptrdiff_t step) {
        const __m128i half = _mm_set1_epi32(1 << 21);
        const __m128i* k = (const __m128i*)w;
        int c = 0;
        for (; c + 4 <= ncols; c += 4, k += 4 * wstride) {
            const __m128i a = vg_single_sums(u + off[c], k, groups[c]);
            const __m128i b = vg_single_sums(u + off[c + 1], k + wstride, groups[c + 1]);
            const __m128i e = vg_single_sums(u + off[c + 2], k + 2 * wstride, groups[c + 2]);
            const __m128i f = vg_single_sums(u + off[c + 3], k + 3 * wstride, groups[c + 3]);
            const __m128i ab = _mm_add_epi32(_mm_unpacklo_epi32(a, b), _mm_unpackhi_epi32(a, b));
            const __m128i ef = _mm_add_epi32(_mm_unpacklo_epi32(e, f), _mm_unpackhi_epi32(e, f));
            __m128i v = _mm_add_epi32(_mm_unpacklo_epi64(ab, ef), _mm_unpackhi_epi64(ab, ef));
            v = _mm_srai_epi32(_mm_add_epi32(v, half), 22);
            v = _mm_packs_epi32(v, v);
            const uint32_t bytes = (uint32_t)_mm_cvtsi128_si32(_mm_packus_epi16(v, v));
            if (step == 1) {
                memcpy(q, &bytes, 4);
                q += 4;
            } else {
                for (int i = 0; i < 4; i++, q += step)
                    *q = (uint8_t)(bytes >> (8 * i));
            }
        }
        for (; c < ncols; c++, q += step, k += wstride) {
            __m128i v = vg_single_sums(u + off[c], k, groups[c]);
            v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4E));
            v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xB1));
            const int32_t ss = (int32_t)((uint32_t)_mm_cvtsi128_si32(v) + (1u << 21));
            *q = ss >= (1 << 30) ? 255 : ss <= 0 ? 0 : (uint8_t)(ss >> 22);
        }
    }

    /* The vertical pass, one output row: q[j] = clip8(1/2 + sum_i p[i * stride + j] * k[i])
       for j < m (m >= 16), n taps (n >= 0). Taps go two at a time: the 16 bytes of rows a and
       b are interleaved as int16 pairs (a[j], b[j]) in 32-bit lanes, four vectors, each
       multiplied and added by pmaddwd against (hi a, hi b) and (lo a, lo b); the eight int32
       sums of a 16-byte block stay in registers over all the taps, then are clipped and stored
       together. An odd last tap is paired with zero bytes. The last block starts at m - 16
       (it overlaps the one before: the same sums, the same bytes), so nothing is read or
       written outside the m bytes. w: room for ((n + 1) / 2) * 2 vectors (16-byte aligned).
       0 (nothing written) when a coefficient does not split into int16 halves. */
    static int vg_vertical_row(const uint8_t* p, ptrdiff_t stride, const int32_t* k, int n,
                               ptrdiff_t m, __m128i* w, uint8_t* q) {
        const int npairs = n >> 1, odd = n & 1;
        for (int i = 0; i < n; i++)
            if (k[i] < -(1 << 26) || k[i] >= (1 << 26))
                return 0;
        for (int g = 0; g < npairs + odd; g++) {
            const int32_t ka = k[2 * g], kb = 2 * g + 1 < n ? k[2 * g + 1] : 0;
            /* hi = floor(w / 2048) (arithmetic shift), lo = w mod 2048 */
            w[2 * g] = _mm_set1_epi32((int32_t)((uint32_t)(uint16_t)(ka >> 11) |
                                                (uint32_t)(uint16_t)(kb >> 11) << 16));
            w[2 * g + 1] = _mm_set1_epi32((int32_t)((uint32_t)(ka & 2047) |
                                                    (uint32_t)(kb & 2047) << 16));
        }
        const __m128i z = _mm_setzero_si128(), half = _mm_set1_epi32(1 << 21);
        ptrdiff_t j = 0;
        for (;;) {
            if (j > m - 16)
                j = m - 16;
            const uint8_t* s = p + j;
            const __m128i* kw = w;
            __m128i h0 = z, h1 = z, h2 = z, h3 = z, l0 = half, l1 = half, l2 = half, l3 = half;
    #define VG_VSTEP(A, B) do {                                                        \
                const __m128i x_ = _mm_unpacklo_epi8((A), (B));                       \
                const __m128i y_ = _mm_unpackhi_epi8((A), (B));                       \
                const __m128i hi_ = kw[0], lo_ = kw[1];                                \
                __m128i d_ = _mm_unpacklo_epi8(x_, z);                                 \
                h0 = _mm_add_epi32(h0, _mm_madd_epi16(d_, hi_));                       \
                l0 = _mm_add_epi32(l0, _mm_madd_epi16(d_, lo_));                       \
                d_ = _mm_unpackhi_epi8(x_, z);                                         \
                h1 = _mm_add_epi32(h1, _mm_madd_epi16(d_, hi_));                       \
                l1 = _mm_add_epi32(l1, _mm_madd_epi16(d_, lo_));                       \
                d_ = _mm_unpacklo_epi8(y_, z);                                         \
                h2 = _mm_add_epi32(h2, _mm_madd_epi16(d_, hi_));                       \
                l2 = _mm_add_epi32(l2, _mm_madd_epi16(d_, lo_));                       \
                d_ = _mm_unpackhi_epi8(y_, z);                                         \
                h3 = _mm_add_epi32(h3, _mm_madd_epi16(d_, hi_));                       \
                l3 = _mm_add_epi32(l3, _mm_madd_epi16(d_, lo_));                       \
            } while (0)
            for (int g = 0; g < npairs; g++, s += 2 * stride, kw += 2) {
                const __m128i a = _mm_loadu_si128((const __m128i*)s);
                const __m128i b = _mm_loadu_si128((const __m128i*)(s + stride));
                VG_VSTEP(a, b);
            }
            if (odd) {
                const __m128i a = _mm_loadu_si128((const __m128i*)s);
                VG_VSTEP(a, z);
            }
    #undef VG_VSTEP
            /* Pillow's clip8: >> 22, then saturated to int16 and to 0..255 */
            const __m128i v0 = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h0, 11), l0), 22);
            const __m128i v1 = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h1, 11), l1), 22);
            const __m128i v2 = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h2, 11), l2), 22);
            const __m128i v3 = _mm_srai_epi32(_mm_add_epi32(_mm_slli_epi32(h3, 11), l3), 22);
            _mm_storeu_si128((__m128i*)(q + j), _mm_packus_epi16(_mm_packs_epi32(v0, v1),
                                                                 _mm_packs_epi32(v2, v3)));
            if (j + 16 >= m)
                return 1;
            j += 16;
        }
    }

    #else
    #define VG_RESIZE_SSE2 0
    static int vg_pack(const int32_t* bounds, ptrdiff_t bstride, const int32_t* kk,
                       ptrdiff_t kstride, int ncols, int C, int px_lo, int16_t* w, int wstride,
                       int32_t* off, int32_t* groups) { return 0; }
    static void vg_pair_lanes(const uint8_t* s, int L, int C, int32_t* t) {}
    static void vg_widen(const uint8_t* s, int L, int16_t* u) {}
    static void vg_rows_pairs(const int32_t* t0, const int32_t* t1, const int16_t* w,
                              int wstride, const int32_t* off, const int32_t* groups, int ncols,
                              int C, uint8_t* q0, uint8_t* q1, ptrdiff_t step) {}
    static void vg_row_single(const int16_t* u, const int16_t* w, int wstride,
                              const int32_t* off, const int32_t* groups, int ncols, uint8_t* q,
                              ptrdiff_t step) {}
    static int vg_vertical_row(const uint8_t* p, ptrdiff_t stride, const int32_t* k, int n,
                               ptrdiff_t m, void* w, uint8_t* q) { return 0; }
    #endif
    """
    enum: VG_RESIZE_SSE2
    int vg_pack(const int32_t* bounds, Py_ssize_t bstride, const int32_t* kk, Py_ssize_t kstride,
                int ncols, int C, int px_lo, int16_t* w, int wstride, int32_t* off,
                int32_t* groups) nogil
    void vg_pair_lanes(const uint8_t* s, int L, int C, int32_t* t) nogil
    void vg_widen(const uint8_t* s, int L, int16_t* u) nogil
    void vg_rows_pairs(const int32_t* t0, const int32_t* t1, const int16_t* w, int wstride,
                       const int32_t* off, const int32_t* groups, int ncols, int C, uint8_t* q0,
                       uint8_t* q1, Py_ssize_t step) nogil
    void vg_row_single(const int16_t* u, const int16_t* w, int wstride, const int32_t* off,
                       const int32_t* groups, int ncols, uint8_t* q, Py_ssize_t step) nogil
    int vg_vertical_row(const uint8_t* p, Py_ssize_t stride, const int32_t* k, int n,
                        Py_ssize_t m, void* w, uint8_t* q) nogil

#: Whether horizontal() and vertical() have their SSE2 loops on this build (else they are the
#: scalar loops only).
HAVE_SIMD = bool(VG_RESIZE_SSE2)


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
               const int32_t[:, ::1] kk, bint simd=True):
    """tmp[r - y_first, c] for source rows r in [row0, row1) and output columns c in
    [col0, col1). ``simd=False`` runs the scalar loop (the same pixels; for tests)."""
    cdef int r, c, n, C = src.shape[2], ncols = col1 - col0
    cdef int px_lo, px_hi, L, wstride, ok = 0
    cdef Py_ssize_t step = src.strides[1], qstep = tmp.strides[1]
    cdef char* wraw = NULL
    cdef int16_t* w = NULL
    cdef int32_t* off = NULL
    cdef int32_t* groups = NULL
    cdef void* row = NULL
    cdef int32_t* t0
    cdef int32_t* t1
    cdef Py_ssize_t rowlen
    if ncols <= 0 or row1 <= row0:
        return
    # (a row or a few: the scalar loop, faster than packing the coefficients first)
    if (simd and VG_RESIZE_SSE2 and 1 <= C <= 4 and step == C
            and row1 - row0 >= (5 if C == 1 else 2)):
        # The source pixels the columns read, and the widest window in coefficient groups.
        px_lo, px_hi, wstride = src.shape[1], 0, 0
        for c in range(col0, col1):
            n = bounds[c, 1]
            if n > 0:
                px_lo = min(px_lo, bounds[c, 0])
                px_hi = max(px_hi, bounds[c, 0] + n)
                wstride = max(wstride, 2 * ((n + 7) >> 3 if C == 1 else (n + 1) >> 1))
        L = max(px_hi - px_lo, 0) * C
        px_lo = min(px_lo, px_hi)
        wraw = <char*>malloc(<size_t>ncols * max(wstride, 1) * 16 + 15)
        off = <int32_t*>malloc(ncols * sizeof(int32_t))
        groups = <int32_t*>malloc(ncols * sizeof(int32_t))
        # zero lanes after the row: loads reach past a window (a padded tap, unused lanes)
        rowlen = L + 8
        row = calloc(2 * rowlen, sizeof(int32_t) if C > 1 else sizeof(int16_t))
        if wraw == NULL or off == NULL or groups == NULL or row == NULL:
            free(wraw)
            free(off)
            free(groups)
            free(row)
            raise MemoryError("horizontal: no memory for the coefficients")
        w = <int16_t*>(wraw + (-<Py_ssize_t>wraw & 15))   # 16-byte aligned
    with nogil:
        if w != NULL:
            ok = vg_pack(&bounds[col0, 0], bounds.strides[0] // sizeof(int32_t), &kk[col0, 0],
                         kk.strides[0] // sizeof(int32_t), ncols, C, px_lo, w, wstride, off,
                         groups)
        if ok and C == 1:
            for r in range(row0, row1):
                vg_widen(&src[r, px_lo, 0] if L > 0 else NULL, L, <int16_t*>row)
                vg_row_single(<int16_t*>row, w, wstride, off, groups, ncols,
                              &tmp[r - y_first, col0, 0], qstep)
        elif ok:
            # two rows at a time, sharing the coefficient loads
            t0 = <int32_t*>row
            t1 = t0 + rowlen
            r = row0
            while r < row1:
                vg_pair_lanes(&src[r, px_lo, 0] if L > 0 else NULL, L, C, t0)
                if r + 1 < row1:
                    vg_pair_lanes(&src[r + 1, px_lo, 0] if L > 0 else NULL, L, C, t1)
                    vg_rows_pairs(t0, t1, w, wstride, off, groups, ncols, C,
                                  &tmp[r - y_first, col0, 0], &tmp[r + 1 - y_first, col0, 0],
                                  qstep)
                else:
                    vg_rows_pairs(t0, NULL, w, wstride, off, groups, ncols, C,
                                  &tmp[r - y_first, col0, 0], NULL, qstep)
                r += 2
        else:
            for r in range(row0, row1):
                for c in range(col0, col1):
                    convolve(&src[r, bounds[c, 0], 0], step, &kk[c, 0], bounds[c, 1], C,
                             &tmp[r - y_first, c, 0])
    free(wraw)
    free(off)
    free(groups)
    free(row)


def vertical(const uint8_t[:, :, ::1] tmp, uint8_t[:, :, ::1] out, int row0, int row1,
             int col0, int col1, const int32_t[:, ::1] bounds, const int32_t[:, ::1] kk,
             bint simd=True):
    """out[r, c] for output rows r in [row0, row1) and columns c in [col0, col1); bounds are
    relative to tmp's first row. Each output row is a sum over the contiguous bytes of the
    columns, source row by source row: with SSE2 (vg_vertical_row above: two taps per pmaddwd
    pair, 16 bytes at a time in registers) when the row is at least 16 bytes wide and its
    coefficients split into int16 halves, else the scalar loop below (an int32 row of sums,
    the same integers added in the same order as ``convolve``); both give Pillow's bytes.
    ``simd=False`` runs the scalar loop only (for tests)."""
    cdef int r, i, n, C = tmp.shape[2]
    cdef bint use_simd, failed = False
    cdef Py_ssize_t j, m = (col1 - col0) * C, stride = tmp.strides[0]
    cdef int32_t w
    cdef int32_t* acc = NULL
    cdef char* wraw = NULL
    cdef void* wv = NULL
    cdef const uint8_t* p
    cdef uint8_t* q
    if m <= 0 or row1 <= row0:
        return
    use_simd = simd and VG_RESIZE_SSE2 and m >= 16
    if use_simd:
        # room for the widest row's coefficient vectors (two per tap pair), 16-byte aligned
        wraw = <char*>malloc(<size_t>((kk.shape[1] + 1) // 2 * 2 + 1) * 16)
        if wraw == NULL:
            raise MemoryError("vertical: no memory for the coefficients")
        wv = wraw + (-<Py_ssize_t>wraw & 15)
    with nogil:
        for r in range(row0, row1):
            n = bounds[r, 1]
            p = &tmp[bounds[r, 0] if n > 0 else 0, col0, 0]   # (not read when n is 0)
            q = &out[r, col0, 0]
            if use_simd and vg_vertical_row(p, stride, &kk[r, 0], n, m, wv, q):
                continue
            if acc == NULL:
                acc = <int32_t*>malloc(m * sizeof(int32_t))
                if acc == NULL:
                    failed = True
                    break
            for j in range(m):
                acc[j] = 1 << (PRECISION_BITS - 1)
            for i in range(n):
                w = kk[r, i]
                p = &tmp[bounds[r, 0] + i, col0, 0]
                for j in range(m):
                    acc[j] += p[j] * w
            for j in range(m):
                q[j] = clip8(acc[j])
    free(wraw)
    free(acc)
    if failed:
        raise MemoryError("vertical: no memory for a row of sums")


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
