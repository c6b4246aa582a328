# cython: language_level=3, cdivision=True
"""Compiled kernels of visgym's 3-D triangle rasterizer (the public face is ``raster3d.py``).

One call draws N *draws* (a triangle range of a shared vertex/index table, a model matrix, a
view-projection matrix, a light and a viewport) into caller-owned ``uint8[B, H, W, 3]`` frames
with a ``float32[B, H, W]`` depth buffer. Per vertex, once per draw (a cache stamped with the
draw's number): world, clip and viewport position and outcodes. Per triangle: with the table's
facing planes, a clear back face is skipped first (one dot product with the camera's cofactors,
before any corner is transformed); then trivial frustum reject, facing test on homogeneous
coordinates (so triangles crossing the eye plane are judged right), back-face culling, Lambert
light (flat, or per vertex when normals are given), clipping in
homogeneous space against the near plane and a guard band (so no vertex ever reaches w <= 0 and
screen coordinates stay small enough for exact integer edge functions), then scan conversion.

Positions are in the viewport's own pixel coordinates (the frame offset is applied to row
pointers), so a view's picture does not depend on where its viewport sits in the frame. Scan
conversion snaps vertices to 1/256 pixel and evaluates edge functions in 64-bit integers
with the top-left rule, so triangles sharing an edge cover every pixel centre exactly once (no
cracks, no double hits), and each pixel row's covered span is solved exactly per edge instead of
testing a bounding box (a small solid triangle finds each row's covered run from its box's pixel
centres instead, four at a time in 32-bit SSE2 lanes when its edge values fit; same pixels).
Depth (NDC z) is affine in screen space and interpolated linearly; texture coordinates and
vertex light are interpolated perspective-correctly (attribute / w and 1 / w are affine).
Texture lookups are clamped to the triangle's own UV range, so extrapolation at a pixel centre a
hair outside an edge can never wrap around to the opposite side of a texture. The kernels
trust the Python face for dtypes and shapes but skip draws and triangles whose indices are out
of range, so even a direct call cannot write outside the buffers. Draws are processed strictly
in order without the GIL. Loops are serial (no OpenMP, so the build needs
no extra flags); callers can render disjoint frame sets from several Python threads.

``raycast_grid`` is a fast path for the special case of full-height boxes on a grid seen level
(one DDA ray per column, affine texture rows on the walls, per-row floor/ceiling distances): the
same picture and depth buffer as rasterizing those boxes, with no division per pixel.
"""
from libc.math cimport floor, ceil, sqrt, fabs, INFINITY
from libc.string cimport memcpy, memset
from libc.stdlib cimport malloc, free

ctypedef unsigned char u8
ctypedef long long i64

# C helpers: the covered runs of a small triangle's box, 4 pixel centres at a time (SSE2,
# baseline x86-64; a scalar loop elsewhere; the edge functions are exact integers either way, so
# the pixels are the ones the scalar tests find, and only the caller's guarantee that every value
# fits int32 makes the 32-bit lanes safe), the branch-free solid span, and the 2 x 2 average
# of supersampling (SSSE3 when the CPU has it).
cdef extern from *:
    """
    #include <stdint.h>
    #if defined(__SSE2__) || defined(_M_X64) || defined(_M_AMD64)
    #include <emmintrin.h>
    #define VG_RASTER_SSE2 1
    #else
    #define VG_RASTER_SSE2 0
    #endif

    /* Rows 0..nrows-1 of a box `width` (1..32) pixel centres wide: e[i] is edge i's value at
       the box's top-left centre, sx[i] / sy[i] its change one pixel right / down; a centre is
       covered where all three are >= 0. lo[r] / hi[r]: first / last covered column of row r
       (lo > hi when none; a triangle's covered centres on a row are one run). */
    static void vg_box_runs(const int32_t* e, const int32_t* sx, const int32_t* sy, int width,
                            int nrows, int32_t* lo, int32_t* hi) {
        const uint32_t full = width >= 32 ? 0xffffffffu : (1u << width) - 1u;
        const int chunks = (width + 3) >> 2;
    #if VG_RASTER_SSE2
        __m128i row[3], step[3], down[3];
        for (int i = 0; i < 3; i++) {
            row[i] = _mm_set_epi32(e[i] + 3 * sx[i], e[i] + 2 * sx[i], e[i] + sx[i], e[i]);
            step[i] = _mm_set1_epi32(4 * sx[i]);
            down[i] = _mm_set1_epi32(sy[i]);
        }
        for (int r = 0; r < nrows; r++) {
            uint32_t m = 0;
            __m128i a = row[0], b = row[1], c = row[2];
            for (int k = 0; k < chunks; k++) {
                const __m128i v = _mm_or_si128(_mm_or_si128(a, b), c);
                m |= (uint32_t)(~_mm_movemask_ps(_mm_castsi128_ps(v)) & 15) << (4 * k);
                a = _mm_add_epi32(a, step[0]);
                b = _mm_add_epi32(b, step[1]);
                c = _mm_add_epi32(c, step[2]);
            }
            m &= full;
            if (m) {
                lo[r] = __builtin_ctz(m);
                hi[r] = 31 - __builtin_clz(m);
            } else {
                lo[r] = 1;
                hi[r] = 0;
            }
            for (int i = 0; i < 3; i++)
                row[i] = _mm_add_epi32(row[i], down[i]);
        }
    #else
        int32_t r0 = e[0], r1 = e[1], r2 = e[2];
        for (int r = 0; r < nrows; r++) {
            int first = -1, last = -2;
            int32_t a = r0, b = r1, c = r2;
            for (int x = 0; x < width; x++) {
                if ((a | b | c) >= 0) {
                    if (first < 0) first = x;
                    last = x;
                }
                a += sx[0]; b += sx[1]; c += sx[2];
            }
            lo[r] = first < 0 ? 1 : first;
            hi[r] = first < 0 ? 0 : last;
            r0 += sy[0]; r1 += sy[1]; r2 += sy[2];
        }
        (void)full; (void)chunks;
    #endif
    }

    /* One row of a solid triangle without a branch on the depth test (a failed test stores
       the old depth and colour back): the test's outcome changes too often along a row for the
       branch predictor, and a mispredicted branch costs more than the stores. The depth steps
       z, z + dz, ... as in the other spans. */
    static inline double vg_span_solid(float* d, uint8_t* q, int64_t xa, int64_t xb,
                                       double z, double dz, uint8_t c0, uint8_t c1,
                                       uint8_t c2) {
        double last = z;
        for (int64_t x = xa; x <= xb; x++) {
            last = z;
            const float old = d[x];
            const int m = z < (double)old;
            uint8_t* p = q + 3 * x;
            const uint8_t p0 = p[0], p1 = p[1], p2 = p[2];
            d[x] = m ? (float)z : old;
            p[0] = m ? c0 : p0;
            p[1] = m ? c1 : p1;
            p[2] = m ? c2 : p2;
            z += dz;
        }
        return last;   /* the depth of pixel xb */
    }

    /* 2 x 2 supersampling's average of one output row: out[x] = the rounded-up mean of the
       2 x 2 block of source rows p, q (6 W bytes each) at pixel x, eight output pixels at a
       time with SSSE3 (16-bit sums; the 3-byte pixels are gathered with pshufb), chosen at
       run time. Returns how many leading pixels it did (the caller does the rest: the last
       chunk would read past the row). */
    #if VG_RASTER_SSE2 && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    #include <tmmintrin.h>
    #define VG_HAVE_SSSE3_PATH 1
    __attribute__((target("ssse3")))
    static int64_t vg_down2_row_ssse3(const uint8_t* p, const uint8_t* q, uint8_t* out,
                                      int64_t W) {
        const __m128i z = _mm_setzero_si128(), two = _mm_set1_epi16(2);
        const __m128i shA = _mm_setr_epi8(0, 1, 2, 6, 7, 8, 12, 13, 14, -128, -128, -128, -128,
                                          -128, -128, -128);
        const __m128i shB = _mm_setr_epi8(-128, -128, -128, -128, -128, -128, -128, -128, -128,
                                          2, 3, 4, 8, 9, 10, 14);
        const __m128i shC = _mm_setr_epi8(15, -128, -128, -128, -128, -128, -128, -128, -128,
                                          -128, -128, -128, -128, -128, -128, -128);
        const __m128i shD = _mm_setr_epi8(-128, 0, 4, 5, 6, 10, 11, 12, -128, -128, -128, -128,
                                          -128, -128, -128, -128);
        int64_t x = 0;
        for (; x + 10 <= W; x += 8) {
            const uint8_t* a = p + 6 * x;
            const uint8_t* b = q + 6 * x;
            __m128i S[7], U[6];
            for (int k = 0; k < 3; k++) {
                const __m128i va = _mm_loadu_si128((const __m128i*)(a + 16 * k));
                const __m128i vb = _mm_loadu_si128((const __m128i*)(b + 16 * k));
                S[2 * k] = _mm_add_epi16(_mm_unpacklo_epi8(va, z), _mm_unpacklo_epi8(vb, z));
                S[2 * k + 1] = _mm_add_epi16(_mm_unpackhi_epi8(va, z), _mm_unpackhi_epi8(vb, z));
            }
            S[6] = _mm_add_epi16(_mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i*)(a + 48)), z),
                                 _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i*)(b + 48)), z));
            for (int m = 0; m < 6; m++) {
                const __m128i t = _mm_alignr_epi8(S[m + 1], S[m], 6);   /* the pixel to the right */
                U[m] = _mm_srli_epi16(_mm_add_epi16(_mm_add_epi16(S[m], t), two), 2);
            }
            const __m128i w0 = _mm_packus_epi16(U[0], U[1]);
            const __m128i w1 = _mm_packus_epi16(U[2], U[3]);
            const __m128i w2 = _mm_packus_epi16(U[4], U[5]);
            _mm_storeu_si128((__m128i*)(out + 3 * x),
                             _mm_or_si128(_mm_shuffle_epi8(w0, shA), _mm_shuffle_epi8(w1, shB)));
            _mm_storel_epi64((__m128i*)(out + 3 * x + 16),
                             _mm_or_si128(_mm_shuffle_epi8(w1, shC), _mm_shuffle_epi8(w2, shD)));
        }
        return x;
    }
    static int vg_ssse3 = -1;
    static int64_t vg_down2_row(const uint8_t* p, const uint8_t* q, uint8_t* out, int64_t W,
                                int simd) {
        if (vg_ssse3 < 0)
            vg_ssse3 = __builtin_cpu_supports("ssse3") ? 1 : 0;
        return simd && vg_ssse3 ? vg_down2_row_ssse3(p, q, out, W) : 0;
    }
    #else
    #define VG_HAVE_SSSE3_PATH 0
    static int64_t vg_down2_row(const uint8_t* p, const uint8_t* q, uint8_t* out, int64_t W,
                                int simd) {
        (void)p; (void)q; (void)out; (void)W; (void)simd;
        return 0;
    }
    #endif
    """
    int VG_RASTER_SSE2
    int VG_HAVE_SSSE3_PATH
    i64 vg_down2_row(const u8* p, const u8* q, u8* out, i64 W, int simd) noexcept nogil
    void vg_box_runs(const int* e, const int* sx, const int* sy, int width, int nrows,
                     int* lo, int* hi) noexcept nogil
    double vg_span_solid(float* d, u8* q, i64 xa, i64 xb, double z, double dz, u8 c0, u8 c1,
                         u8 c2) noexcept nogil

HAVE_SIMD = bool(VG_RASTER_SSE2)

# The shortcuts that must not change a pixel (the box runs of small triangles and the back-face
# test before the corners are transformed); tests turn them off to compare against the paths
# they shortcut.
cdef bint _fast = True


def set_fast_paths(bint enabled):
    """Turn the pixel-exact shortcuts on or off (for tests); returns the previous setting."""
    global _fast
    cdef bint old = _fast
    _fast = enabled
    return old

cdef enum:
    FLAG_LIT = 1
    FLAG_TWO_SIDED = 2
    SUB_BITS = 8
    SUB = 256            # sub-pixel steps per pixel
    HALF = 128           # pixel centre offset in sub-pixel units
    MAXV = 12            # vertices of a polygon clipped by 6 planes, with room to spare
    BOX_TRI = 32         # solid triangles narrower than this, with vertices within BOX_EXTENT,
                         # find each row's run from their box's pixel centres, 4 at a time
    BOX_ROWS = 64        # (at most this many rows)
    BOX_EXTENT = 64 * 256   # sub-pixel extent bound that keeps every edge value within int32
    LONG_SPAN = 48       # solid spans at least this long keep and use the row records

# Guard band: |x|, |y| <= GUARD * w in clip space, i.e. GUARD times the viewport half-size. It
# bounds screen coordinates so 64-bit edge functions cannot overflow, and it lies outside the
# viewport, so clipping there never changes a visible pixel.
cdef double GUARD = 4.0
cdef double W_EPS = 1e-9


cdef struct CV:      # a clip-space vertex with its attributes
    double x, y, z, w, u, v, l


cdef struct SV:      # a screen-space vertex: position and the affine-in-screen attributes
    double sx, sy, z, iw, uw, vw, lw


cdef struct Shade:   # per-triangle shading inputs
    int textured
    int gouraud
    int bilinear
    double flat_light      # multiplier when not gouraud (1.0 = unlit)
    double r, g, b         # flat colour
    const u8* atlas
    i64 atlas_stride       # bytes per atlas row
    int tx0, ty0, tw, th   # texture rectangle in the atlas
    int pow2               # tw and th are powers of two (wrap with a mask)
    double ushift, vshift  # whole numbers subtracted from u, v so the triangle's range is >= 0
    double ulo, uhi, vlo, vhi   # the triangle's UV range in shifted texel units
    int solid              # neither textured nor Gouraud: one colour, only depth interpolated
    u8 c0, c1, c2          # that colour with its flat light applied (as _put computes it)
    i64 ox                 # the viewport's column in the frame
    i64* rec_lo            # per frame row: a run of columns [rec_lo, rec_hi] whose stored depths
    i64* rec_hi            # are all <= rec_z (see _long_span), or NULL
    double* rec_z


cdef inline i64 _floordiv(i64 a, i64 b) noexcept nogil:
    # b > 0; C division truncates toward zero, we want floor.
    cdef i64 q = a // b   # truncates (cdivision)
    if (a % b != 0) and (a < 0):
        q -= 1
    return q


cdef inline i64 _ceildiv(i64 a, i64 b) noexcept nogil:
    return -_floordiv(-a, b)


cdef inline double _plane_dist(CV* p, int plane) noexcept nogil:
    if plane == 0:
        return p.z + p.w                 # near plane: z_ndc >= -1
    if plane == 1:
        return p.w - W_EPS               # in front of the eye (matters for odd matrices only)
    if plane == 2:
        return GUARD * p.w - p.x
    if plane == 3:
        return GUARD * p.w + p.x
    if plane == 4:
        return GUARD * p.w - p.y
    return GUARD * p.w + p.y


cdef inline void _lerp(CV* a, CV* b, double t, CV* out) noexcept nogil:
    out.x = a.x + t * (b.x - a.x)
    out.y = a.y + t * (b.y - a.y)
    out.z = a.z + t * (b.z - a.z)
    out.w = a.w + t * (b.w - a.w)
    out.u = a.u + t * (b.u - a.u)
    out.v = a.v + t * (b.v - a.v)
    out.l = a.l + t * (b.l - a.l)


cdef int _clip(CV* inp, int n, CV* out, int plane) noexcept nogil:
    """Sutherland-Hodgman against one plane. The crossing point is always computed from the
    inside vertex toward the outside one, so an edge shared by two triangles is cut at the
    bitwise same point whichever way round it is walked."""
    cdef int i, m = 0
    cdef CV* a
    cdef CV* b
    cdef double da, db
    for i in range(n):
        a = &inp[i]
        b = &inp[(i + 1) % n]
        da = _plane_dist(a, plane)
        db = _plane_dist(b, plane)
        if da >= 0:
            out[m] = a[0]
            m += 1
            if db < 0:
                _lerp(a, b, da / (da - db), &out[m])
                m += 1
        elif db >= 0:
            _lerp(b, a, db / (db - da), &out[m])
            m += 1
    return m


cdef inline int _wrap(int i, int n, int pow2) noexcept nogil:
    # i mod n for i >= 0 (coordinates are shifted to be non-negative); the division is only
    # reached by textures repeated several times across one triangle.
    if i < n:
        return i
    if i < 2 * n:
        return i - n
    if pow2:
        return i & (n - 1)
    return i % n


cdef inline void _texel_bilinear(Shade* s, double fx, double fy, double* rgb) noexcept nogil:
    """Bilinear texture colour at shifted texel coordinates (fx, fy) (already clamped to the
    triangle's range), with repeat wrapping between the four taps."""
    cdef int x0, y0, x1, y1, k
    cdef double ax, ay
    cdef const u8* p00
    cdef const u8* p01
    cdef const u8* p10
    cdef const u8* p11
    # +n keeps the truncation a floor (fx - 0.5 >= -0.5).
    fx = fx - 0.5 + s.tw
    fy = fy - 0.5 + s.th
    x0 = <int>fx
    y0 = <int>fy
    ax = fx - x0
    ay = fy - y0
    x0 = _wrap(x0, s.tw, s.pow2)
    y0 = _wrap(y0, s.th, s.pow2)
    x1 = x0 + 1 if x0 + 1 < s.tw else 0
    y1 = y0 + 1 if y0 + 1 < s.th else 0
    p00 = s.atlas + (s.ty0 + y0) * s.atlas_stride + (s.tx0 + x0) * 3
    p01 = s.atlas + (s.ty0 + y0) * s.atlas_stride + (s.tx0 + x1) * 3
    p10 = s.atlas + (s.ty0 + y1) * s.atlas_stride + (s.tx0 + x0) * 3
    p11 = s.atlas + (s.ty0 + y1) * s.atlas_stride + (s.tx0 + x1) * 3
    for k in range(3):
        rgb[k] = ((p00[k] * (1.0 - ax) + p01[k] * ax) * (1.0 - ay)
                  + (p10[k] * (1.0 - ax) + p11[k] * ax) * ay)


cdef inline u8 _to_u8(double c) noexcept nogil:
    if c <= 0.0:
        return 0
    if c >= 254.5:
        return 255
    return <u8>(c + 0.5)


cdef void _raster_tri(u8* frame, float* depth, i64 W, SV* a, SV* b, SV* c,
                      i64 cx0, i64 cy0, i64 cx1, i64 cy1, i64 ox, i64 oy,
                      Shade* s) noexcept nogil:
    """Scan-convert one screen-space triangle into the scissor [cx0, cx1) x [cy0, cy1). The
    vertices and the scissor are in the coordinates of a viewport whose top-left pixel is
    (ox, oy) of the frame, so a view's picture does not depend on where it is placed."""
    cdef i64 X[3]
    cdef i64 Y[3]
    cdef i64 A[3]
    cdef i64 Bc[3]
    cdef i64 C[3]
    cdef i64 area2, minx, maxx, miny, maxy, xmin, xmax, ymin, ymax, x, y, xa, xb, K, py, t
    cdef int i, ia, ib, nplanes
    cdef SV* v[3]
    cdef SV* tmp
    cdef double d, x0d, y0d, e1x, e1y, e2x, e2y, px, pyd, dz, dzx, dzy
    cdef double g[5][3]   # plane (value at v0, d/dx, d/dy) of z, iw, uw, vw, lw
    cdef double alpha[3]
    cdef double beta[3]
    cdef double av[5][3]
    cdef double z, iw, uw, vw, lw
    cdef float* drow
    cdef u8* prow
    v[0] = a
    v[1] = b
    v[2] = c
    for i in range(3):
        X[i] = <i64>floor(v[i].sx * SUB + 0.5)
        Y[i] = <i64>floor(v[i].sy * SUB + 0.5)
    area2 = (X[1] - X[0]) * (Y[2] - Y[0]) - (X[2] - X[0]) * (Y[1] - Y[0])
    if area2 == 0:
        return
    if area2 < 0:
        # Normalise the winding so that "inside" is where all edge functions are >= 0.
        tmp = v[1]; v[1] = v[2]; v[2] = tmp
        t = X[1]; X[1] = X[2]; X[2] = t
        t = Y[1]; Y[1] = Y[2]; Y[2] = t
        area2 = -area2
    minx = X[0]; maxx = X[0]; miny = Y[0]; maxy = Y[0]
    for i in range(1, 3):
        if X[i] < minx: minx = X[i]
        if X[i] > maxx: maxx = X[i]
        if Y[i] < miny: miny = Y[i]
        if Y[i] > maxy: maxy = Y[i]
    xmin = _ceildiv(minx - HALF, SUB)
    xmax = _floordiv(maxx - HALF, SUB)
    ymin = _ceildiv(miny - HALF, SUB)
    ymax = _floordiv(maxy - HALF, SUB)
    if xmin < cx0: xmin = cx0
    if xmax > cx1 - 1: xmax = cx1 - 1
    if ymin < cy0: ymin = cy0
    if ymax > cy1 - 1: ymax = cy1 - 1
    if xmin > xmax or ymin > ymax:
        return
    # Edge i runs from v[(i+1)%3] to v[(i+2)%3]; E = A*px + B*py + C >= 0 inside.
    for i in range(3):
        ia = (i + 1) % 3
        ib = (i + 2) % 3
        A[i] = Y[ia] - Y[ib]
        Bc[i] = X[ib] - X[ia]
        C[i] = -(A[i] * X[ia] + Bc[i] * Y[ia])
        if not (A[i] > 0 or (A[i] == 0 and Bc[i] > 0)):
            C[i] -= 1   # not a top-left edge: a pixel centre exactly on it belongs to the neighbour
    # Attribute planes from the unsnapped positions (the texel clamp makes the hair-thin
    # extrapolation at snapped edges harmless).
    x0d = v[0].sx
    y0d = v[0].sy
    e1x = v[1].sx - x0d
    e1y = v[1].sy - y0d
    e2x = v[2].sx - x0d
    e2y = v[2].sy - y0d
    d = e1x * e2y - e2x * e1y
    if d == 0.0:
        return
    for i in range(3):
        av[0][i] = v[i].z
        av[1][i] = v[i].iw
        av[2][i] = v[i].uw
        av[3][i] = v[i].vw
        av[4][i] = v[i].lw
    # A solid triangle needs the depth plane only.
    nplanes = 1 if s.solid else 5
    for i in range(nplanes):
        g[i][0] = av[i][0]
        g[i][1] = ((av[i][1] - av[i][0]) * e2y - (av[i][2] - av[i][0]) * e1y) / d
        g[i][2] = ((av[i][2] - av[i][0]) * e1x - (av[i][1] - av[i][0]) * e2x) / d
    if (_fast and s.solid and xmax - xmin < BOX_TRI and ymax - ymin < BOX_ROWS
            and maxx - minx <= BOX_EXTENT and maxy - miny <= BOX_EXTENT):
        _box_solid(frame, depth, W, xmin, xmax, ymin, ymax, A, Bc, C, x0d, y0d, g, ox, oy, s)
        return
    # Per edge, the pixel index where its half-plane starts (A > 0) or ends (A < 0) on row y is
    # close to alpha + beta * y; a cheap floating estimate that the integer edge function then
    # corrects by a step or two, so the per-row cost is a few multiplies (per-row integer
    # division, or libm's ceil on baseline x86-64, dominated scenes of small triangles).
    for i in range(3):
        if A[i] != 0:
            alpha[i] = (-(<double>Bc[i] * HALF + C[i]) / A[i] - HALF) / SUB
            beta[i] = -<double>Bc[i] * SUB / A[i] / SUB
    for y in range(ymin, ymax + 1):
        py = y * SUB + HALF
        xa = xmin
        xb = xmax
        for i in range(3):
            K = Bc[i] * py + C[i]
            if A[i] > 0:
                t = <i64>(alpha[i] + beta[i] * y)
                while A[i] * (t * SUB + HALF) + K >= 0:
                    t -= 1
                t += 1
                while A[i] * (t * SUB + HALF) + K < 0:
                    t += 1
                if t > xa: xa = t
            elif A[i] < 0:
                t = <i64>(alpha[i] + beta[i] * y)
                while A[i] * (t * SUB + HALF) + K < 0:
                    t -= 1
                t += 1
                while A[i] * (t * SUB + HALF) + K >= 0:
                    t += 1
                t -= 1
                if t < xb: xb = t
            elif K < 0:
                xb = xa - 1
        if xa > xb:
            continue
        px = xa + 0.5 - x0d
        pyd = y + 0.5 - y0d
        z = g[0][0] + g[0][1] * px + g[0][2] * pyd
        drow = depth + (y + oy) * W + ox
        prow = frame + ((y + oy) * W + ox) * 3
        if s.solid:
            if xb - xa >= LONG_SPAN and s.rec_z != NULL:
                _long_span(s, y + oy, drow, prow, xa, xb, z, g[0][1])
            else:
                _span_solid(drow, prow, xa, xb, z, g[0][1], s.c0, s.c1, s.c2)
            continue
        iw = g[1][0] + g[1][1] * px + g[1][2] * pyd
        uw = g[2][0] + g[2][1] * px + g[2][2] * pyd
        vw = g[3][0] + g[3][1] * px + g[3][2] * pyd
        lw = g[4][0] + g[4][1] * px + g[4][2] * pyd
        if s.textured and not s.bilinear:
            _span_nearest(drow, prow, xa, xb, z, iw, uw, vw, lw, g, s)
        else:
            _span_general(drow, prow, xa, xb, z, iw, uw, vw, lw, g, s)


cdef void _box_solid(u8* frame, float* depth, i64 W, i64 xmin, i64 xmax, i64 ymin, i64 ymax,
                     i64* A, i64* Bc, i64* C, double x0d, double y0d, double g[5][3],
                     i64 ox, i64 oy, Shade* s) noexcept nogil:
    """A solid triangle with a box under BOX_TRI pixels wide and BOX_ROWS tall whose vertices lie
    within BOX_EXTENT sub-pixels of each other, so every edge value over the box fits int32:
    vg_box_runs finds each row's covered run, which is then drawn as the span path draws it
    (depth from the plane at the run's first pixel, stepped by dz)."""
    cdef int e[3]
    cdef int sx[3]
    cdef int sy[3]
    cdef int lo[BOX_ROWS]
    cdef int hi[BOX_ROWS]
    cdef i64 px0 = xmin * SUB + HALF, py0 = ymin * SUB + HALF, x, y
    cdef int i, r, nrows = <int>(ymax - ymin + 1)
    cdef double z
    for i in range(3):
        e[i] = <int>(A[i] * px0 + Bc[i] * py0 + C[i])
        sx[i] = <int>(A[i] * SUB)
        sy[i] = <int>(Bc[i] * SUB)
    vg_box_runs(e, sx, sy, <int>(xmax - xmin + 1), nrows, lo, hi)
    for r in range(nrows):
        if lo[r] > hi[r]:
            continue
        y = ymin + r
        x = xmin + lo[r]
        z = g[0][0] + g[0][1] * (x + 0.5 - x0d) + g[0][2] * (y + 0.5 - y0d)
        _span_solid(depth + (y + oy) * W + ox, frame + ((y + oy) * W + ox) * 3, x,
                    xmin + hi[r], z, g[0][1], s.c0, s.c1, s.c2)


cdef inline void _put(u8* px, double r, double g, double b, double light) noexcept nogil:
    if light == 1.0:
        px[0] = _to_u8(r)
        px[1] = _to_u8(g)
        px[2] = _to_u8(b)
    else:
        px[0] = _to_u8(r * light)
        px[1] = _to_u8(g * light)
        px[2] = _to_u8(b * light)


cdef inline void _span_solid(float* drow, u8* prow, i64 xa, i64 xb, double z, double dz, u8 c0,
                             u8 c1, u8 c2) noexcept nogil:
    """One row of a flat-coloured, flat-lit triangle (vg_span_solid)."""
    vg_span_solid(drow, prow, xa, xb, z, dz, c0, c1, c2)


cdef void _long_span(Shade* s, i64 row, float* drow, u8* prow, i64 xa, i64 xb, double z,
                     double dz) noexcept nogil:
    """A solid span of at least LONG_SPAN pixels (frame row ``row``), whose hidden end is skipped.

    Each frame row keeps one run of columns whose stored depths are all at most rec_z, made of
    long spans: every pixel a solid span has tested holds at most the larger of its end depths
    (the steps are monotone, and a failed test keeps a nearer depth), and later draws only lower
    depths. When that run covers the span's end and the span is no nearer there (its smallest
    depth over the covered part, less a margin far above the stepping's rounding, is >= rec_z),
    every test there would fail, so the span stops before it: the same picture. Only an end can
    go: the depths after a skipped middle would need the steps through it. That is the floor
    behind a table top, drawn after it."""
    cdef i64 fa = xa + s.ox, fb = xb + s.ox, lo = s.rec_lo[row], hi = s.rec_hi[row], cut
    cdef double zc, ze, last, bound
    if lo <= fb <= hi:
        cut = lo if lo > fa else fa
        zc = z + (cut - fa) * dz
        ze = z + (fb - fa) * dz
        if (zc if zc < ze else ze) - 1e-9 * (fabs(z) + fabs(zc) + fabs(ze)) >= s.rec_z[row]:
            if cut == fa:
                return
            xb = cut - s.ox - 1
            fb = cut - 1
    last = vg_span_solid(drow, prow, xa, xb, z, dz, s.c0, s.c1, s.c2)
    bound = z if z > last else last
    if <double><float>z > bound:
        bound = <double><float>z
    if <double><float>last > bound:
        bound = <double><float>last
    if not (bound == bound):      # NaN depths: no record
        return
    if fa <= hi + 1 and fb + 1 >= lo and lo <= hi:
        if fa < lo:
            s.rec_lo[row] = fa
        if fb > hi:
            s.rec_hi[row] = fb
        if bound > s.rec_z[row]:
            s.rec_z[row] = bound
    elif lo > hi or fb - fa > hi - lo:
        s.rec_lo[row] = fa
        s.rec_hi[row] = fb
        s.rec_z[row] = bound


cdef void _span_nearest(float* drow, u8* prow, i64 xa, i64 xb, double z, double iw, double uw,
                        double vw, double lw, double g[5][3], Shade* s) noexcept nogil:
    """One row of a nearest-sampled textured triangle: the hot loop of textured scenes, so the
    texel lookup is inlined and uses no floor() or division besides the perspective 1/w."""
    cdef i64 x
    cdef double wpx, fx, fy, light
    cdef int ix, iy
    cdef const u8* p
    cdef double dz = g[0][1], diw = g[1][1], duw = g[2][1], dvw = g[3][1], dlw = g[4][1]
    cdef double ulo = s.ulo, uhi = s.uhi, vlo = s.vlo, vhi = s.vhi
    cdef int tw = s.tw, th = s.th, pow2 = s.pow2
    cdef const u8* base = s.atlas + s.ty0 * s.atlas_stride + s.tx0 * 3
    cdef i64 stride = s.atlas_stride
    cdef int gouraud = s.gouraud
    cdef double flat = s.flat_light
    for x in range(xa, xb + 1):
        if z < drow[x]:
            drow[x] = <float>z
            wpx = 1.0 / iw
            fx = uw * wpx
            fy = vw * wpx
            if fx < ulo:
                fx = ulo
            elif fx > uhi:
                fx = uhi
            if fy < vlo:
                fy = vlo
            elif fy > vhi:
                fy = vhi
            ix = _wrap(<int>fx, tw, pow2)
            iy = _wrap(<int>fy, th, pow2)
            p = base + iy * stride + ix * 3
            if gouraud:
                light = lw * wpx
                _put(prow + 3 * x, p[0], p[1], p[2], light)
            elif flat == 1.0:
                prow[3 * x] = p[0]
                prow[3 * x + 1] = p[1]
                prow[3 * x + 2] = p[2]
            else:
                _put(prow + 3 * x, p[0], p[1], p[2], flat)
        z += dz
        iw += diw
        uw += duw
        vw += dvw
        lw += dlw


cdef void _span_general(float* drow, u8* prow, i64 xa, i64 xb, double z, double iw, double uw,
                        double vw, double lw, double g[5][3], Shade* s) noexcept nogil:
    """One row of a flat-coloured or bilinear-textured triangle."""
    cdef i64 x
    cdef double wpx, fx, fy, light
    cdef double rgb[3]
    cdef double dz = g[0][1], diw = g[1][1], duw = g[2][1], dvw = g[3][1], dlw = g[4][1]
    for x in range(xa, xb + 1):
        if z < drow[x]:
            drow[x] = <float>z
            wpx = 1.0 / iw
            if s.textured:
                fx = uw * wpx
                fy = vw * wpx
                if fx < s.ulo:
                    fx = s.ulo
                elif fx > s.uhi:
                    fx = s.uhi
                if fy < s.vlo:
                    fy = s.vlo
                elif fy > s.vhi:
                    fy = s.vhi
                _texel_bilinear(s, fx, fy, rgb)
            else:
                rgb[0] = s.r
                rgb[1] = s.g
                rgb[2] = s.b
            light = lw * wpx if s.gouraud else s.flat_light
            _put(prow + 3 * x, rgb[0], rgb[1], rgb[2], light)
        z += dz
        iw += diw
        uw += duw
        vw += dvw
        lw += dlw


cdef inline double _lambert(double nx, double ny, double nz, double lx, double ly, double lz,
                            double amb, double dif) noexcept nogil:
    cdef double ndl = nx * lx + ny * ly + nz * lz
    if ndl < 0.0:
        ndl = 0.0
    return amb + dif * ndl


cdef void _clear_frame(u8* p, float* d, Py_ssize_t H, Py_ssize_t W, u8 r, u8 g,
                       u8 bl) noexcept nogil:
    cdef Py_ssize_t i, row
    for i in range(W):
        p[3 * i] = r
        p[3 * i + 1] = g
        p[3 * i + 2] = bl
    for row in range(1, H):
        memcpy(p + row * W * 3, p, W * 3)
    for i in range(H * W):
        d[i] = INFINITY


cdef enum:
    VCACHE = 11          # cached doubles per vertex: world xyz, clip xyzw, screen x, y, z, 1/w
    REJECT_BITS = 31     # outcode bits 0-4: x > w, x < -w, y > w, y < -w, z < -w
    CLIP_SHIFT = 5       # outcode bits 5-10: outside clip plane 0-5 (_plane_dist < 0)
    CLIP_BITS = 63 << 5


cdef inline void _transform_vertex(const float* p, double M[4][4], double P[4][4],
                                   double vw_, double vh_, double* out,
                                   int* code) noexcept nogil:
    """World and clip position of one vertex (as the per-triangle path computes them), its
    outcodes, and its screen vertex when no clip plane cuts it."""
    cdef double px = p[0], py = p[1], pz = p[2], x, y, z, w, tx
    cdef int i, c = 0, plane
    cdef CV cv
    for i in range(3):
        out[i] = M[i][0] * px + M[i][1] * py + M[i][2] * pz + M[i][3]
    x = P[0][0] * out[0] + P[0][1] * out[1] + P[0][2] * out[2] + P[0][3]
    y = P[1][0] * out[0] + P[1][1] * out[1] + P[1][2] * out[2] + P[1][3]
    z = P[2][0] * out[0] + P[2][1] * out[1] + P[2][2] * out[2] + P[2][3]
    w = P[3][0] * out[0] + P[3][1] * out[1] + P[3][2] * out[2] + P[3][3]
    out[3] = x
    out[4] = y
    out[5] = z
    out[6] = w
    if x > w: c |= 1
    if x < -w: c |= 2
    if y > w: c |= 4
    if y < -w: c |= 8
    if z < -w: c |= 16
    cv.x = x
    cv.y = y
    cv.z = z
    cv.w = w
    for plane in range(6):
        if _plane_dist(&cv, plane) < 0:
            c |= 1 << (CLIP_SHIFT + plane)
    code[0] = c
    if (c & CLIP_BITS) == 0:
        tx = 1.0 / w
        out[7] = (x * tx + 1.0) * 0.5 * vw_       # viewport coordinates
        out[8] = (1.0 - y * tx) * 0.5 * vh_
        out[9] = z * tx
        out[10] = tx


cdef inline double _minor3(double Q[3][4], int skip) noexcept nogil:
    """The determinant of the 3 x 3 matrix of Q's columns other than ``skip``."""
    cdef int c[3]
    cdef int j, k = 0
    for j in range(4):
        if j != skip:
            c[k] = j
            k += 1
    return (Q[0][c[0]] * (Q[1][c[1]] * Q[2][c[2]] - Q[1][c[2]] * Q[2][c[1]])
            - Q[0][c[1]] * (Q[1][c[0]] * Q[2][c[2]] - Q[1][c[2]] * Q[2][c[0]])
            + Q[0][c[2]] * (Q[1][c[0]] * Q[2][c[1]] - Q[1][c[1]] * Q[2][c[0]]))


cdef inline void _solid_colour(Shade* sh, u8 r, u8 g, u8 b) noexcept nogil:
    """The colour _put writes for a flat face of colour (r, g, b) under sh.flat_light."""
    if sh.flat_light == 1.0:
        sh.c0 = _to_u8(r)
        sh.c1 = _to_u8(g)
        sh.c2 = _to_u8(b)
    else:
        sh.c0 = _to_u8(r * sh.flat_light)
        sh.c1 = _to_u8(g * sh.flat_light)
        sh.c2 = _to_u8(b * sh.flat_light)


def facing_planes(const float[:, ::1] verts, const int[:, ::1] tris, double[:, ::1] out):
    """out[t] = the 4-vector L of triangle t: L[j] = (-1)^j det(X without row j), X the 4 x 3
    matrix of its corners (x, y, z, 1) as columns (see raster3d._facing_planes); triangles
    indexing outside verts get zeros (never culled)."""
    cdef Py_ssize_t T = tris.shape[0], NV = verts.shape[0], t, k
    cdef i64 i0, i1, i2
    cdef double x0, y0, z0, x1, y1, z1, x2, y2, z2
    with nogil:
        for t in range(T):
            i0 = tris[t, 0]
            i1 = tris[t, 1]
            i2 = tris[t, 2]
            if i0 < 0 or i0 >= NV or i1 < 0 or i1 >= NV or i2 < 0 or i2 >= NV:
                for k in range(4):
                    out[t, k] = 0.0
                continue
            x0 = verts[i0, 0]; y0 = verts[i0, 1]; z0 = verts[i0, 2]
            x1 = verts[i1, 0]; y1 = verts[i1, 1]; z1 = verts[i1, 2]
            x2 = verts[i2, 0]; y2 = verts[i2, 1]; z2 = verts[i2, 2]
            # rows (y, z, 1), (x, z, 1), (x, y, 1), (x, y, z) over the corners
            out[t, 0] = y0 * (z1 - z2) - z0 * (y1 - y2) + (y1 * z2 - z1 * y2)
            out[t, 1] = -(x0 * (z1 - z2) - z0 * (x1 - x2) + (x1 * z2 - z1 * x2))
            out[t, 2] = x0 * (y1 - y2) - y0 * (x1 - x2) + (x1 * y2 - y1 * x2)
            out[t, 3] = -(x0 * (y1 * z2 - z1 * y2) - y0 * (x1 * z2 - z1 * x2)
                          + z0 * (x1 * y2 - y1 * x2))


def boxes_outside(const double[:, :, ::1] view_proj, const double[:, :, ::1] model,
                  const double[:, ::1] lo, const double[:, ::1] hi, u8[::1] out):
    """out[k] = 1 where every corner of the box [lo[k], hi[k]] (model space) is beyond one and
    the same side of the view of view_proj[k] @ model[k] (x > w, x < -w, y > w, y < -w or
    z < -w, by a margin above rounding), else 0: a draw whose vertices all lie in that box
    cannot reach a pixel (the trivial reject of its every triangle)."""
    cdef Py_ssize_t K = out.shape[0], k, i, j, c
    cdef double Q[4][4]
    cdef double p[3]
    cdef double x, y, z, w, tol
    cdef int code, all_codes
    with nogil:
        for k in range(K):
            for i in range(4):
                for j in range(4):
                    Q[i][j] = (view_proj[k, i, 0] * model[k, 0, j]
                               + view_proj[k, i, 1] * model[k, 1, j]
                               + view_proj[k, i, 2] * model[k, 2, j]
                               + view_proj[k, i, 3] * model[k, 3, j])
            all_codes = 31
            for c in range(8):
                p[0] = hi[k, 0] if c & 1 else lo[k, 0]
                p[1] = hi[k, 1] if c & 2 else lo[k, 1]
                p[2] = hi[k, 2] if c & 4 else lo[k, 2]
                x = Q[0][0] * p[0] + Q[0][1] * p[1] + Q[0][2] * p[2] + Q[0][3]
                y = Q[1][0] * p[0] + Q[1][1] * p[1] + Q[1][2] * p[2] + Q[1][3]
                z = Q[2][0] * p[0] + Q[2][1] * p[1] + Q[2][2] * p[2] + Q[2][3]
                w = Q[3][0] * p[0] + Q[3][1] * p[1] + Q[3][2] * p[2] + Q[3][3]
                tol = 1e-7 * (fabs(x) + fabs(y) + fabs(z) + fabs(w))
                code = 0
                if x - w > tol: code |= 1
                if -x - w > tol: code |= 2
                if y - w > tol: code |= 4
                if -y - w > tol: code |= 8
                if -z - w > tol: code |= 16
                all_codes &= code
                if all_codes == 0:
                    break
            out[k] = 1 if all_codes else 0


def clear(u8[:, :, :, ::1] frames, float[:, :, ::1] depth, const i64[::1] idx,
          const u8[:, ::1] colors):
    """Fill frame idx[n] with colors[n] and its depth buffer with +inf."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t npx = H * W, n, i, row
    cdef i64 b
    cdef u8* p
    cdef float* d
    cdef u8 r, g, bl
    if npx == 0:
        return
    with nogil:
        for n in range(idx.shape[0]):
            b = idx[n]
            if b < 0 or b >= B:
                continue
            _clear_frame(&frames[b, 0, 0, 0], &depth[b, 0, 0], H, W, colors[n, 0],
                         colors[n, 1], colors[n, 2])


def draw(u8[:, :, :, ::1] frames, float[:, :, ::1] depth, const i64[::1] idx, i64 idx_offset,
         const float[:, ::1] verts, const int[:, ::1] tris, const double[:, ::1] planes,
         const i64[::1] tri_start, const i64[::1] tri_stop,
         const double[:, :, ::1] view_proj, const double[:, :, ::1] model, bint has_model,
         const u8[:, ::1] face_rgb, const int[::1] face_tex, const u8[::1] face_flags,
         const float[:, ::1] uvs, const float[:, ::1] normals, bint has_normals,
         const u8[:, :, ::1] atlas, const int[:, ::1] rects,
         const double[:, ::1] light_dir, const double[::1] ambient, const double[::1] diffuse,
         const i64[:, ::1] viewport, bint bilinear, u8[::1] pending_clear,
         const u8[::1] clear_rgb):
    """Draw N draws in order; see raster3d.draw_meshes for the meaning of every argument.
    Draw n lands in frame idx[n] - idx_offset (skipped when that is outside the frames).
    A frame b with pending_clear[b] != 0 is cleared to clear_rgb (depth +inf) right before its
    first draw, so its buffers are still in cache when the triangles land."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], NV = verts.shape[0], NT = tris.shape[0]
    cdef Py_ssize_t NR = rects.shape[0], NUV = uvs.shape[0], NN = normals.shape[0]
    cdef Py_ssize_t n, t, k, m, i, j, plane
    cdef i64 b, cx0, cy0, cx1, cy1, ox, oy
    cdef i64 vi[3]
    cdef double M[4][4]
    cdef double P[4][4]
    cdef double wp[3][3]
    cdef double wn[3]
    cdef double nx, ny, nz, nlen, lx, ly, lz, llen, amb, dif, det, vw_, vh_, sgn
    cdef double ex1, ey1, ez1, ex2, ey2, ez2, px, py, pz, tx, umin, umax, vmin, vmax
    cdef int front, flags, tex, outside, need
    cdef CV poly[MAXV]
    cdef CV buf[MAXV]
    cdef CV* cur
    cdef CV* nxt
    cdef CV* swp
    cdef int npoly
    cdef SV sv[MAXV]
    cdef Shade sh
    cdef u8* frame
    cdef float* dep
    if H == 0 or W == 0:
        return
    memset(&sh, 0, sizeof(Shade))
    # Per-vertex cache, valid for the draw whose number is in vstamp: world position, clip
    # position, outcodes and (when no clip plane cuts it) the projected screen vertex. A vertex
    # is shared by about six triangles, so each is transformed once per draw instead of once
    # per corner, with the same arithmetic (the picture does not change).
    cdef double* vcache = <double*>malloc((NV + 1) * VCACHE * sizeof(double))
    cdef i64* vstamp = <i64*>malloc((NV + 1) * sizeof(i64))
    cdef int* vcode = <int*>malloc((NV + 1) * sizeof(int))
    if vcache == NULL or vstamp == NULL or vcode == NULL:
        free(vcache); free(vstamp); free(vcode)
        raise MemoryError("raster3d.draw: no memory for the vertex cache")
    cdef double* vc
    cdef int code0, code1, code2, ccode
    # Per frame row, a run of columns with a bound on their depths (_long_span).
    cdef i64* rec_lo = NULL
    cdef i64* rec_hi = NULL
    cdef double* rec_z = NULL
    if _fast:
        rec_lo = <i64*>malloc((B * H + 1) * sizeof(i64))
        rec_hi = <i64*>malloc((B * H + 1) * sizeof(i64))
        rec_z = <double*>malloc((B * H + 1) * sizeof(double))
        if rec_lo == NULL or rec_hi == NULL or rec_z == NULL:
            free(rec_lo); free(rec_hi); free(rec_z)
            free(vcache); free(vstamp); free(vcode)
            raise MemoryError("raster3d.draw: no memory for the row records")
        for i in range(B * H):
            rec_lo[i] = 1
            rec_hi[i] = 0
    cdef double Q[3][4]
    cdef double cq[4]
    cdef double f0, f1, f2, f3
    cdef const double* pl
    cdef int cull = _fast and planes.shape[0] == NT and planes.shape[1] == 4
    with nogil:
        for i in range(NV):
            vstamp[i] = -1
        for n in range(N):
            b = idx[n] - idx_offset
            if b < 0 or b >= B:
                continue
            frame = &frames[b, 0, 0, 0]
            dep = &depth[b, 0, 0]
            if pending_clear[b]:
                _clear_frame(frame, dep, H, W, clear_rgb[0], clear_rgb[1], clear_rgb[2])
                pending_clear[b] = 0
            if rec_z != NULL:
                sh.rec_lo = rec_lo + b * H
                sh.rec_hi = rec_hi + b * H
                sh.rec_z = rec_z + b * H
            vw_ = <double>viewport[n, 2]
            vh_ = <double>viewport[n, 3]
            cx0 = viewport[n, 0] if viewport[n, 0] > 0 else 0
            cy0 = viewport[n, 1] if viewport[n, 1] > 0 else 0
            cx1 = viewport[n, 0] + viewport[n, 2]
            cy1 = viewport[n, 1] + viewport[n, 3]
            if cx1 > W: cx1 = W
            if cy1 > H: cy1 = H
            if cx1 <= cx0 or cy1 <= cy0:
                continue
            # From here on, coordinates are the viewport's: pixel (x, y) is frame pixel
            # (ox + x, oy + y).
            ox = viewport[n, 0]
            oy = viewport[n, 1]
            sh.ox = ox
            cx0 -= ox
            cx1 -= ox
            cy0 -= oy
            cy1 -= oy
            for i in range(4):
                for j in range(4):
                    P[i][j] = view_proj[n, i, j]
                    if has_model:
                        M[i][j] = model[n, i, j]
                    else:
                        M[i][j] = 1.0 if i == j else 0.0
            # The camera side of each face (see raster3d._facing_planes): cq . planes[t] is the
            # facing determinant of triangle t, so a face that is clearly back-facing is skipped
            # before its corners are fetched and transformed. "Clearly" is a margin far above
            # rounding; anything nearer edge-on is left to the determinant below, so the
            # picture is the one the determinant alone gives.
            for i in range(3):
                for j in range(4):
                    Q[i][j] = 0.0
                    for k in range(4):
                        Q[i][j] += P[i if i < 2 else 3][k] * M[k][j]
            for j in range(4):
                cq[j] = _minor3(Q, j) if j % 2 == 0 else -_minor3(Q, j)
            lx = light_dir[n, 0]
            ly = light_dir[n, 1]
            lz = light_dir[n, 2]
            llen = sqrt(lx * lx + ly * ly + lz * lz)
            if llen > 0:
                lx /= llen; ly /= llen; lz /= llen
            amb = ambient[n]
            dif = diffuse[n]
            for t in range(tri_start[n], tri_stop[n]):
                if t < 0 or t >= NT:
                    continue
                vi[0] = tris[t, 0]
                vi[1] = tris[t, 1]
                vi[2] = tris[t, 2]
                if (vi[0] < 0 or vi[0] >= NV or vi[1] < 0 or vi[1] >= NV
                        or vi[2] < 0 or vi[2] >= NV):
                    continue
                flags = face_flags[t]
                if cull and not (flags & FLAG_TWO_SIDED):
                    pl = &planes[t, 0]
                    f0 = cq[0] * pl[0]
                    f1 = cq[1] * pl[1]
                    f2 = cq[2] * pl[2]
                    f3 = cq[3] * pl[3]
                    if f0 + f1 + f2 + f3 < -1e-6 * (fabs(f0) + fabs(f1) + fabs(f2) + fabs(f3)):
                        continue
                tex = face_tex[t]
                if tex >= NR or NUV != NV:
                    tex = -1
                # World (model) and clip positions, from the cache.
                for k in range(3):
                    if vstamp[vi[k]] != n:
                        _transform_vertex(&verts[vi[k], 0], M, P, vw_, vh_,
                                          vcache + vi[k] * VCACHE, vcode + vi[k])
                        vstamp[vi[k]] = n
                    vc = vcache + vi[k] * VCACHE
                    for i in range(3):
                        wp[k][i] = vc[i]
                    poly[k].x = vc[3]
                    poly[k].y = vc[4]
                    poly[k].z = vc[5]
                    poly[k].w = vc[6]
                    if tex >= 0:
                        poly[k].u = uvs[vi[k], 0]
                        poly[k].v = uvs[vi[k], 1]
                    else:
                        poly[k].u = 0.0
                        poly[k].v = 0.0
                    poly[k].l = 1.0
                code0 = vcode[vi[0]]
                code1 = vcode[vi[1]]
                code2 = vcode[vi[2]]
                # Trivial reject: all three vertices outside one frustum side or the near plane.
                if code0 & code1 & code2 & REJECT_BITS:
                    continue
                # Facing from homogeneous coordinates: det > 0 <=> counter-clockwise in NDC
                # (y up), valid even when the triangle crosses the eye plane.
                det = (poly[0].x * (poly[1].y * poly[2].w - poly[2].y * poly[1].w)
                       - poly[0].y * (poly[1].x * poly[2].w - poly[2].x * poly[1].w)
                       + poly[0].w * (poly[1].x * poly[2].y - poly[2].x * poly[1].y))
                if det == 0.0:
                    continue
                front = det > 0.0
                if not front and not (flags & FLAG_TWO_SIDED):
                    continue
                sgn = 1.0 if front else -1.0
                # Light.
                sh.gouraud = 0
                sh.flat_light = 1.0
                if flags & FLAG_LIT:
                    if has_normals and NN == NV:
                        sh.gouraud = 1
                        for k in range(3):
                            px = normals[vi[k], 0]
                            py = normals[vi[k], 1]
                            pz = normals[vi[k], 2]
                            for i in range(3):
                                wn[i] = M[i][0] * px + M[i][1] * py + M[i][2] * pz
                            nlen = sqrt(wn[0] * wn[0] + wn[1] * wn[1] + wn[2] * wn[2])
                            if nlen > 0:
                                nlen = sgn / nlen
                            poly[k].l = _lambert(wn[0] * nlen, wn[1] * nlen, wn[2] * nlen,
                                                 lx, ly, lz, amb, dif)
                    else:
                        ex1 = wp[1][0] - wp[0][0]; ey1 = wp[1][1] - wp[0][1]; ez1 = wp[1][2] - wp[0][2]
                        ex2 = wp[2][0] - wp[0][0]; ey2 = wp[2][1] - wp[0][1]; ez2 = wp[2][2] - wp[0][2]
                        nx = ey1 * ez2 - ez1 * ey2
                        ny = ez1 * ex2 - ex1 * ez2
                        nz = ex1 * ey2 - ey1 * ex2
                        nlen = sqrt(nx * nx + ny * ny + nz * nz)
                        if nlen > 0:
                            nlen = sgn / nlen
                        sh.flat_light = _lambert(nx * nlen, ny * nlen, nz * nlen,
                                                 lx, ly, lz, amb, dif)
                sh.solid = tex < 0 and not sh.gouraud
                ccode = (code0 | code1 | code2) & CLIP_BITS
                if sh.solid and ccode == 0:
                    # The common case: one colour, no plane to clip against; the screen
                    # vertices come straight from the cache.
                    _solid_colour(&sh, face_rgb[t, 0], face_rgb[t, 1], face_rgb[t, 2])
                    for k in range(3):
                        vc = vcache + vi[k] * VCACHE
                        sv[k].sx = vc[7]
                        sv[k].sy = vc[8]
                        sv[k].z = vc[9]
                        sv[k].iw = vc[10]
                        sv[k].uw = 0.0
                        sv[k].vw = 0.0
                        sv[k].lw = vc[10]
                    _raster_tri(frame, dep, W, &sv[0], &sv[1], &sv[2], cx0, cy0, cx1, cy1, ox, oy,
                                &sh)
                    continue
                # Clip (only against the planes some vertex is outside of).
                npoly = 3
                cur = poly
                nxt = buf
                for plane in range(6):
                    # The original corners' outcodes say whether this plane cuts the polygon
                    # (a polygon clipped so far stays inside the planes its corners are in).
                    need = (ccode >> (CLIP_SHIFT + plane)) & 1
                    if need:
                        npoly = _clip(cur, npoly, nxt, plane)
                        swp = cur; cur = nxt; nxt = swp
                        if npoly < 3:
                            break
                if npoly < 3:
                    continue
                # Shading constants.
                if sh.solid:
                    _solid_colour(&sh, face_rgb[t, 0], face_rgb[t, 1], face_rgb[t, 2])
                sh.textured = tex >= 0
                sh.bilinear = bilinear
                sh.r = face_rgb[t, 0]
                sh.g = face_rgb[t, 1]
                sh.b = face_rgb[t, 2]
                if sh.textured:
                    sh.atlas = &atlas[0, 0, 0]
                    sh.atlas_stride = atlas.shape[1] * 3
                    sh.tx0 = rects[tex, 0]
                    sh.ty0 = rects[tex, 1]
                    sh.tw = rects[tex, 2]
                    sh.th = rects[tex, 3]
                    sh.pow2 = (sh.tw & (sh.tw - 1)) == 0 and (sh.th & (sh.th - 1)) == 0
                    umin = cur[0].u; umax = cur[0].u
                    vmin = cur[0].v; vmax = cur[0].v
                    for k in range(1, npoly):
                        if cur[k].u < umin: umin = cur[k].u
                        if cur[k].u > umax: umax = cur[k].u
                        if cur[k].v < vmin: vmin = cur[k].v
                        if cur[k].v > vmax: vmax = cur[k].v
                    # Work in texel units shifted by whole tiles so the triangle's range starts
                    # at >= 0: truncation is then a floor, and wrapping a subtraction.
                    sh.ushift = floor(umin)
                    sh.vshift = floor(vmin)
                    sh.ulo = (umin - sh.ushift) * sh.tw
                    sh.uhi = (umax - sh.ushift) * sh.tw - 1e-6
                    if sh.uhi < sh.ulo: sh.uhi = sh.ulo
                    sh.vlo = (vmin - sh.vshift) * sh.th
                    sh.vhi = (vmax - sh.vshift) * sh.th - 1e-6
                    if sh.vhi < sh.vlo: sh.vhi = sh.vlo
                    for k in range(npoly):
                        cur[k].u = (cur[k].u - sh.ushift) * sh.tw
                        cur[k].v = (cur[k].v - sh.vshift) * sh.th
                # Project and draw the fan.
                for k in range(npoly):
                    tx = 1.0 / cur[k].w
                    sv[k].sx = (cur[k].x * tx + 1.0) * 0.5 * vw_
                    sv[k].sy = (1.0 - cur[k].y * tx) * 0.5 * vh_
                    sv[k].z = cur[k].z * tx
                    sv[k].iw = tx
                    sv[k].uw = cur[k].u * tx
                    sv[k].vw = cur[k].v * tx
                    sv[k].lw = cur[k].l * tx
                for k in range(1, npoly - 1):
                    _raster_tri(frame, dep, W, &sv[0], &sv[k], &sv[k + 1],
                                cx0, cy0, cx1, cy1, ox, oy, &sh)
    free(vcache)
    free(vstamp)
    free(vcode)
    free(rec_lo)
    free(rec_hi)
    free(rec_z)


# ---------------------------------------------------------------------------------------------
# grid ray casting (the fast path for scenes made of full-height boxes on a grid)

cdef inline i64 _ifloor(double v) noexcept nogil:
    cdef i64 i = <i64>v
    if i > v:
        i -= 1
    return i


def raycast_grid(u8[:, :, :, ::1] frames, float[:, :, ::1] depth, const i64[::1] idx,
                 const u8[:, :, ::1] grids, const i64[::1] grid_ids,
                 const double[:, ::1] eye, const double[:, ::1] forward,
                 const double[:, :, ::1] proj, double origin_x, double origin_z, double cell,
                 double height, const u8[:, :, ::1] atlas, const int[:, ::1] rects,
                 int wall_tex, int floor_tex, int ceil_tex, const u8[::1] background):
    """First-person views of grids of full-height boxes (Wolfenstein-style), one per item.
    Pass 1, per image column: one DDA ray through the grid to the first solid cell (the eye's
    own cell is never a hit), giving the wall span's rows, texture column and depth. Pass 2, row
    by row (sequential writes): the wall texel, or the floor / ceiling texel where the row's
    pixel centres meet that plane nearer than the wall, or the background; every pixel and its
    NDC depth (+inf for background) is written exactly once. See raster3d.raycast_grid."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], G = grids.shape[0], R = grids.shape[1], C = grids.shape[2]
    cdef Py_ssize_t n, x, y
    cdef i64 b, gi, col, row, stepx, stepz, cam_col, cam_row, ytop, ybot, iu, iv
    cdef double ex, ey, ez, fx, fz, rx, rz, thx, thy, p22, p23, ndcx, dx, dz, px, pz
    cdef double tmaxx, tmaxz, tdx, tdz, t, u, hx, hz, ndc_top, ndc_bot, fl, tl, wx, wz
    cdef float zrow
    cdef int side, hit, tw, th, fw, fh, cw, ch, above
    cdef u8* frame
    cdef u8* out
    cdef float* dep
    cdef const u8* wall_base
    cdef const u8* floor_base
    cdef const u8* ceil_base
    cdef const u8* pbase
    cdef const u8* q
    cdef i64 stride = atlas.shape[1] * 3
    cdef int pw, ph
    # Per column: wall rows [c_top, c_bot] (empty when no hit), hit depth, texel column,
    # texel row at c_top and per row, NDC z of the wall, and the ray direction.
    cdef i64* c_top = <i64*>malloc(W * sizeof(i64))
    cdef i64* c_bot = <i64*>malloc(W * sizeof(i64))
    cdef double* c_t = <double*>malloc(W * sizeof(double))
    cdef i64* c_iu = <i64*>malloc(W * sizeof(i64))
    cdef double* c_v0 = <double*>malloc(W * sizeof(double))
    cdef double* c_dv = <double*>malloc(W * sizeof(double))
    cdef float* c_z = <float*>malloc(W * sizeof(float))
    cdef double* c_dx = <double*>malloc(W * sizeof(double))
    cdef double* c_dz = <double*>malloc(W * sizeof(double))
    if (c_top == NULL or c_bot == NULL or c_t == NULL or c_iu == NULL or c_v0 == NULL
            or c_dv == NULL or c_z == NULL or c_dx == NULL or c_dz == NULL):
        free(c_top); free(c_bot); free(c_t); free(c_iu); free(c_v0); free(c_dv); free(c_z)
        free(c_dx); free(c_dz)
        raise MemoryError()
    wall_base = &atlas[rects[wall_tex, 1], rects[wall_tex, 0], 0]
    floor_base = &atlas[rects[floor_tex, 1], rects[floor_tex, 0], 0]
    ceil_base = &atlas[rects[ceil_tex, 1], rects[ceil_tex, 0], 0]
    tw = rects[wall_tex, 2]; th = rects[wall_tex, 3]
    fw = rects[floor_tex, 2]; fh = rects[floor_tex, 3]
    cw = rects[ceil_tex, 2]; ch = rects[ceil_tex, 3]
    with nogil:
        for n in range(N):
            b = idx[n]
            gi = grid_ids[n]
            if b < 0 or b >= B or gi < 0 or gi >= G or H == 0 or W == 0:
                continue
            frame = &frames[b, 0, 0, 0]
            dep = &depth[b, 0, 0]
            ex = eye[n, 0]
            ey = eye[n, 1]
            ez = eye[n, 2]
            fx = forward[n, 0]
            fz = forward[n, 1]
            rx = -fz
            rz = fx
            thx = 1.0 / proj[n, 0, 0]
            thy = 1.0 / proj[n, 1, 1]
            p22 = proj[n, 2, 2]
            p23 = proj[n, 2, 3]
            px = (ex - origin_x) / cell
            pz = (ez - origin_z) / cell
            cam_col = _ifloor(px)
            cam_row = _ifloor(pz)
            for x in range(W):
                ndcx = 2.0 * (x + 0.5) / W - 1.0
                # Ray direction per unit of view depth, in grid units: the DDA parameter is
                # then the view depth itself.
                dx = (fx + rx * ndcx * thx) / cell
                dz = (fz + rz * ndcx * thx) / cell
                c_dx[x] = dx
                c_dz[x] = dz
                col = cam_col
                row = cam_row
                if dx > 0:
                    stepx = 1
                    tdx = 1.0 / dx
                    tmaxx = (col + 1 - px) * tdx
                elif dx < 0:
                    stepx = -1
                    tdx = -1.0 / dx
                    tmaxx = (px - col) * tdx
                else:
                    stepx = 0
                    tdx = 1e300
                    tmaxx = 1e300
                if dz > 0:
                    stepz = 1
                    tdz = 1.0 / dz
                    tmaxz = (row + 1 - pz) * tdz
                elif dz < 0:
                    stepz = -1
                    tdz = -1.0 / dz
                    tmaxz = (pz - row) * tdz
                else:
                    stepz = 0
                    tdz = 1e300
                    tmaxz = 1e300
                hit = 0
                t = 0.0
                side = 0
                while True:
                    if tmaxx < tmaxz:
                        col += stepx
                        t = tmaxx
                        tmaxx += tdx
                        side = 0
                    else:
                        row += stepz
                        t = tmaxz
                        tmaxz += tdz
                        side = 1
                    if col < 0 or col >= C or row < 0 or row >= R or t >= 1e299:
                        break
                    if grids[gi, row, col] != 0:
                        hit = 1
                        break
                # Floor and ceiling show out to the exit distance when nothing is hit, and on
                # every row outside the wall span when something is (no test there, so rounding
                # cannot open a gap between a wall and the floor).
                c_t[x] = 1e300 if hit else t
                c_top[x] = 0
                c_bot[x] = -1
                if not hit or t <= 0.0:
                    continue
                # Wall rows: pixel centres that see heights in [0, height] at depth t.
                ndc_top = (height - ey) / (t * thy)
                ndc_bot = -ey / (t * thy)
                ytop = <i64>ceil((1.0 - ndc_top) * H * 0.5 - 0.5)
                ybot = <i64>floor((1.0 - ndc_bot) * H * 0.5 - 0.5)
                c_top[x] = ytop if ytop > 0 else 0
                c_bot[x] = ybot if ybot < H - 1 else H - 1
                hx = px + t * dx
                hz = pz + t * dz
                # u runs from the viewer's left across the face they are looking at.
                if side == 0:
                    u = hz - row if stepx > 0 else row + 1 - hz
                else:
                    u = col + 1 - hx if stepz > 0 else hx - col
                iu = <i64>(u * tw)
                c_iu[x] = iu if iu < tw - 1 else tw - 1
                if c_iu[x] < 0:
                    c_iu[x] = 0
                # v = (height - h) / height is affine in the row on a vertical wall.
                c_v0[x] = (height - ey) / height * th
                c_dv[x] = t * thy / height * th
                c_z[x] = <float>(-p22 + p23 / t)
            for y in range(H):
                fl = 1.0 - 2.0 * (y + 0.5) / H        # NDC y of the row
                above = fl > 0
                if fl < 0:
                    tl = ey / (-fl * thy)
                elif fl > 0:
                    tl = (height - ey) / (fl * thy)
                else:
                    tl = 1e300
                zrow = <float>(-p22 + p23 / tl)
                if above:
                    pbase = ceil_base
                    pw = cw
                    ph = ch
                else:
                    pbase = floor_base
                    pw = fw
                    ph = fh
                out = frame + y * W * 3
                for x in range(W):
                    if c_top[x] <= y <= c_bot[x]:
                        iv = <i64>(c_v0[x] - fl * c_dv[x])
                        if iv < 0: iv = 0
                        if iv > th - 1: iv = th - 1
                        q = wall_base + iv * stride + c_iu[x] * 3
                        dep[y * W + x] = c_z[x]
                    elif tl <= c_t[x]:
                        wx = px + tl * c_dx[x]
                        wz = pz + tl * c_dz[x]
                        iu = <i64>((wx - _ifloor(wx)) * pw)
                        iv = <i64>((wz - _ifloor(wz)) * ph)
                        if iu > pw - 1: iu = pw - 1
                        if iv > ph - 1: iv = ph - 1
                        q = pbase + iv * stride + iu * 3
                        dep[y * W + x] = zrow
                    else:
                        q = &background[0]
                        dep[y * W + x] = INFINITY
                    out[3 * x] = q[0]
                    out[3 * x + 1] = q[1]
                    out[3 * x + 2] = q[2]
    free(c_top); free(c_bot); free(c_t); free(c_iu); free(c_v0); free(c_dv); free(c_z)
    free(c_dx); free(c_dz)


# ---------------------------------------------------------------------------------------------
# supersampling

def downsample(const u8[:, :, :, ::1] src, u8[:, :, :, ::1] dst, int factor, Py_ssize_t x0,
               bint simd=True):
    """dst[k, :, x0:x0 + W] = the mean of each factor x factor block of src[k] (rounded half
    up), for the first src.shape[0] frames; src is (n, H * factor, W * factor, 3), dst
    (>= n, H, >= x0 + W, 3)."""
    cdef Py_ssize_t n = src.shape[0], H = dst.shape[1], W = src.shape[2] // factor
    cdef Py_ssize_t k, y, x, fy, fx, c, sw = W * factor * 3
    cdef unsigned int area = factor * factor, half = area // 2, r, g, b
    cdef const u8* top
    cdef const u8* p
    cdef const u8* q
    cdef u8* out
    if n == 0 or H == 0 or W == 0:
        return
    with nogil:
        for k in range(n):
            for y in range(H):
                top = &src[k, y * factor, 0, 0]
                out = &dst[k, y, x0, 0]
                if factor == 2:
                    x = vg_down2_row(top, top + sw, out, W, simd)
                    p = top + 6 * x
                    q = top + sw + 6 * x
                    out += 3 * x
                    for x in range(x, W):
                        out[0] = <u8>((p[0] + p[3] + q[0] + q[3] + 2) >> 2)
                        out[1] = <u8>((p[1] + p[4] + q[1] + q[4] + 2) >> 2)
                        out[2] = <u8>((p[2] + p[5] + q[2] + q[5] + 2) >> 2)
                        p += 6
                        q += 6
                        out += 3
                    continue
                for x in range(W):
                    r = g = b = 0
                    for fy in range(factor):
                        p = top + fy * sw + x * factor * 3
                        for fx in range(factor):
                            r += p[0]
                            g += p[1]
                            b += p[2]
                            p += 3
                    out[0] = <u8>((r + half) // area)
                    out[1] = <u8>((g + half) // area)
                    out[2] = <u8>((b + half) // area)
                    out += 3
