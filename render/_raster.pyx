# cython: language_level=3
"""Compiled kernels of visgym's 2-D rasterizer: batched fills, rectangles, anti-aliased lines and
circles, even-odd polygons, RGBA and coverage-mask blits, and bilinear / area resampling, all
writing straight into a caller-owned ``uint8[B, H, W, 3]`` frame buffer, in the pixel convention
of ``visgym.render.raster`` (pixel (x, y) covers [x, x+1) x [y, y+1), x is the column) and with
the blend out = (src*a + dst*(255-a) + 127) // 255. The public face that checks arguments is
``raster.py``; these kernels trust dtypes and shapes but still skip items whose frame or table
index is out of range and clamp every float before it becomes an integer, so even a direct call
with bad values can draw nothing wrong outside the buffer. Items are drawn strictly in order
(later over earlier), hence serial item loops; every loop runs without the GIL so several Python
threads can render different buffers at once.
"""
from libc.math cimport floor, ceil, sqrt, hypot, fabs, isfinite, M_PI
from libc.stdlib cimport malloc, free

ctypedef unsigned char u8
ctypedef long long i64


# ---------------------------------------------------------------------------------------------
# small inline helpers

cdef inline void _blend(u8* px, const u8* col, int a) noexcept nogil:
    cdef int ia = 255 - a
    px[0] = <u8>((col[0] * a + px[0] * ia + 127) // 255)
    px[1] = <u8>((col[1] * a + px[1] * ia + 127) // 255)
    px[2] = <u8>((col[2] * a + px[2] * ia + 127) // 255)


cdef inline void _blend_cov(u8* px, const u8* col, double cov) noexcept nogil:
    # Coverage in [0, 1] becomes an 8-bit alpha; 0 leaves the pixel untouched, 255 overwrites it.
    cdef int a = <int>(cov * 255.0 + 0.5)
    if a <= 0:
        return
    if a >= 255:
        px[0] = col[0]
        px[1] = col[1]
        px[2] = col[2]
        return
    _blend(px, col, a)


cdef inline double _box_cdf(double t, double a, double b) noexcept nogil:
    # Fraction of a unit pixel lying on the near side of a straight edge at signed distance t
    # from the pixel centre, for an edge whose unit normal is (a, b) (any signs). Projected onto
    # the normal, the pixel's area spreads as a trapezoid (two boxes of widths |a| and |b|
    # convolved); this is that trapezoid's cumulative distribution, piecewise quadratic, and it
    # is exact area coverage for a straight edge at any angle (a linear 1-px ramp when the edge
    # is axis aligned).
    cdef double p = fabs(a), q = fabs(b), flat, outer, u
    if p > q:
        p, q = q, p
    flat = 0.5 * (q - p)
    outer = 0.5 * (q + p)
    if t >= outer:
        return 1.0
    if t <= -outer:
        return 0.0
    if t >= flat:
        u = outer - t
        return 1.0 - u * u / (2.0 * p * q)
    if t <= -flat:
        u = outer + t
        return u * u / (2.0 * p * q)
    return 0.5 + t / q


cdef inline double _clampd(double v, double lo, double hi) noexcept nogil:
    # Every float coordinate passes through here before it is cast to an integer, so 1e300 or
    # -1e300 becomes a harmless in-range loop bound instead of undefined behaviour.
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


cdef inline int _slab(double c, double d, double lo, double hi, double* xa, double* xb) noexcept nogil:
    # x-interval where lo <= c*x + d <= hi; returns 0 when empty. Used to find, per row, the span
    # of columns a line can touch, so a long diagonal costs its own pixels and not its bbox.
    cdef double t0, t1
    if fabs(c) < 1e-12:
        if d < lo or d > hi:
            return 0
        return 1  # no constraint from this slab
    t0 = (lo - d) / c
    t1 = (hi - d) / c
    if t0 > t1:
        t0, t1 = t1, t0
    if t0 > xa[0]:
        xa[0] = t0
    if t1 < xb[0]:
        xb[0] = t1
    return 1 if xa[0] <= xb[0] else 0


# ---------------------------------------------------------------------------------------------
# fills

def fill(u8[:, :, :, ::1] frames, const i64[::1] idx, const u8[:, ::1] colors):
    """Set every pixel of frame idx[n] to colors[n]."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], n, i, npx = H * W
    cdef i64 b
    cdef u8* p
    cdef u8 r, g, bl
    if H == 0 or W == 0:
        return
    with nogil:
        for n in range(N):
            b = idx[n]
            if b < 0 or b >= B:
                continue
            r = colors[n, 0]
            g = colors[n, 1]
            bl = colors[n, 2]
            p = &frames[b, 0, 0, 0]
            for i in range(npx):
                p[3 * i] = r
                p[3 * i + 1] = g
                p[3 * i + 2] = bl


def fill_rects(u8[:, :, :, ::1] frames, const i64[::1] idx,
               const i64[::1] x0, const i64[::1] y0, const i64[::1] x1, const i64[::1] y1,
               const u8[:, ::1] colors):
    """Fill the half-open integer rectangles [x0, x1) x [y0, y1), clipped to the frame."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], n, x, y
    cdef i64 b, xa, xb, ya, yb
    cdef u8* p
    cdef u8 r, g, bl
    with nogil:
        for n in range(N):
            b = idx[n]
            if b < 0 or b >= B:
                continue
            xa = x0[n] if x0[n] > 0 else 0
            ya = y0[n] if y0[n] > 0 else 0
            xb = x1[n] if x1[n] < W else W
            yb = y1[n] if y1[n] < H else H
            if xa >= xb or ya >= yb:
                continue
            r = colors[n, 0]
            g = colors[n, 1]
            bl = colors[n, 2]
            for y in range(ya, yb):
                p = &frames[b, y, 0, 0]
                for x in range(xa, xb):
                    p[3 * x] = r
                    p[3 * x + 1] = g
                    p[3 * x + 2] = bl


# ---------------------------------------------------------------------------------------------
# anti-aliased lines and circles

def draw_lines(u8[:, :, :, ::1] frames, const i64[::1] idx,
               const double[::1] x0, const double[::1] y0,
               const double[::1] x1, const double[::1] y1,
               const double[::1] width, const u8[:, ::1] colors):
    """Anti-aliased thick segments with butt caps, blended by analytic coverage.

    A pixel's coverage is the product of two factors measured in the segment's own frame: the
    exact area fraction of the pixel between the two long sides (difference of two _box_cdf
    edges) and the same between the two caps. Each factor is exact area coverage at any angle, so
    the sides of a line are exactly anti-aliased and the only approximation is in the pixels at
    the cap corners (where the product of the marginals stands in for the joint area). This costs
    a handful of flops per pixel instead of 16 samples for 4x4 supersampling, and it conserves
    ink: a width-0.3 line deposits 0.3 of a pixel per unit length, fading proportionally instead
    of vanishing or snapping to a full pixel. A zero-length segment has zero area (butt caps) and
    draws nothing.
    """
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], n
    cdef i64 b
    cdef int x, y, ix0, ix1, iy0, iy1
    cdef double ax, ay, bx, by, hw, dx, dy, L, ux, uy, ey, ymin, ymax
    cdef double py, px, u, v, cov, xa, xb, reach
    cdef u8* row
    with nogil:
        for n in range(N):
            b = idx[n]
            if b < 0 or b >= B:
                continue
            ax = x0[n]
            ay = y0[n]
            bx = x1[n]
            by = y1[n]
            hw = 0.5 * width[n]
            if not (isfinite(ax) and isfinite(ay) and isfinite(bx) and isfinite(by)
                    and isfinite(hw)) or hw <= 0.0:
                continue
            dx = bx - ax
            dy = by - ay
            L = hypot(dx, dy)  # no overflow for endpoints up to ~1e307
            if not (L > 0.0) or not isfinite(L):
                continue
            ux = dx / L
            uy = dy / L
            # Rows whose pixels can get any coverage: the rectangle's vertical extent + 1 px.
            ey = fabs(ux) * hw
            ymin = (ay if ay < by else by) - ey - 1.0
            ymax = (ay if ay > by else by) + ey + 1.0
            iy0 = <int>floor(_clampd(ymin, 0.0, <double>H))
            iy1 = <int>ceil(_clampd(ymax, 0.0, <double>H))
            # A pixel reaches at most sqrt(2)/2 from its centre in any direction, so a centre
            # farther than hw + 0.71 across, or outside [-0.71, L + 0.71] along, has zero
            # coverage; 0.75 is that bound with some slack.
            reach = 0.75
            for y in range(iy0, iy1):
                py = y + 0.5 - ay
                # Column span of pixel centres satisfying both slabs for this row (centre x is
                # x + 0.5, so the slab is solved for px = x + 0.5 - ax).
                xa = -1e300
                xb = 1e300
                if not _slab(-uy, py * ux, -hw - reach, hw + reach, &xa, &xb):
                    continue
                if not _slab(ux, py * uy, -reach, L + reach, &xa, &xb):
                    continue
                ix0 = <int>floor(_clampd(xa + ax - 0.5, 0.0, <double>W))
                ix1 = <int>ceil(_clampd(xb + ax - 0.5, -1.0, <double>(W - 1))) + 1
                if ix1 > W:
                    ix1 = W
                row = &frames[b, y, 0, 0]
                for x in range(ix0, ix1):
                    px = x + 0.5 - ax
                    u = px * ux + py * uy
                    v = py * ux - px * uy
                    cov = ((_box_cdf(hw - v, ux, uy) - _box_cdf(-hw - v, ux, uy))
                           * (_box_cdf(L - u, ux, uy) - _box_cdf(-u, ux, uy)))
                    if cov > 0.0:
                        _blend_cov(&row[3 * x], &colors[n, 0], cov)


def draw_circles(u8[:, :, :, ::1] frames, const i64[::1] idx,
                 const double[::1] cx, const double[::1] cy, const double[::1] radius,
                 const double[::1] thickness, const u8[:, ::1] colors):
    """Anti-aliased discs (thickness <= 0) or rings whose outer edge is the radius.

    Each edge is treated locally as a straight edge normal to the radius through the pixel
    centre, and its exact area coverage (_box_cdf) is used: coverage = F(r - d) - F(inner - d).
    The error is only the edge's curvature within one pixel, negligible beyond a few pixels of
    radius. For radii below a pixel that would overstate the ink, so coverage is also capped at
    the shape's area.
    """
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], n
    cdef i64 b
    cdef int x, y, ix0, ix1, iy0, iy1
    cdef double ccx, ccy, r, t, inner, area, dy, dx, d, d2, half, cov, ro, nx, ny
    cdef double full_lo2, full_hi2, hole2
    cdef u8* row
    with nogil:
        for n in range(N):
            b = idx[n]
            if b < 0 or b >= B:
                continue
            ccx = cx[n]
            ccy = cy[n]
            r = radius[n]
            t = thickness[n]
            if not (isfinite(ccx) and isfinite(ccy) and isfinite(r)) or r <= 0.0:
                continue
            if not isfinite(t) or t <= 0.0 or t >= r:
                inner = -1e300
                area = M_PI * r * r
            else:
                inner = r - t
                area = M_PI * (r * r - inner * inner)
            ro = r + 0.75  # beyond r + sqrt(2)/2 no part of a pixel is inside
            # Squared-distance bands where a pixel (reaching < 0.75 from its centre) is certainly
            # fully covered, full_lo2 < d^2 < full_hi2, or certainly in the hole, d^2 < hole2,
            # so most pixels of a large shape skip the sqrt and edge maths. -1 disables a bound.
            full_hi2 = (r - 0.75) * (r - 0.75) if r > 0.75 else -1.0
            full_lo2 = (inner + 0.75) * (inner + 0.75) if inner > -0.75 else -1.0
            hole2 = (inner - 0.75) * (inner - 0.75) if inner > 0.75 else -1.0
            iy0 = <int>floor(_clampd(ccy - ro - 0.5, 0.0, <double>H))
            iy1 = <int>ceil(_clampd(ccy + ro + 0.5, 0.0, <double>H))
            for y in range(iy0, iy1):
                dy = y + 0.5 - ccy
                if fabs(dy) >= ro:
                    continue
                half = sqrt(ro * ro - dy * dy)
                ix0 = <int>floor(_clampd(ccx - half - 0.5, 0.0, <double>W))
                ix1 = <int>ceil(_clampd(ccx + half + 0.5, 0.0, <double>W))
                row = &frames[b, y, 0, 0]
                for x in range(ix0, ix1):
                    dx = x + 0.5 - ccx
                    d2 = dx * dx + dy * dy
                    if d2 < hole2:
                        continue
                    if full_lo2 < d2 < full_hi2:
                        _blend_cov(&row[3 * x], &colors[n, 0], 1.0)
                        continue
                    d = sqrt(d2)
                    if d > 1e-9:
                        nx = dx / d
                        ny = dy / d
                    else:  # at the very centre any direction will do
                        nx = 1.0
                        ny = 0.0
                    cov = _box_cdf(r - d, nx, ny)
                    if inner > -1e300:
                        cov -= _box_cdf(inner - d, nx, ny)
                    if cov > area:
                        cov = area
                    if cov > 0.0:
                        _blend_cov(&row[3 * x], &colors[n, 0], cov)


# ---------------------------------------------------------------------------------------------
# polygons

def fill_polygons(u8[:, :, :, ::1] frames, const i64[::1] idx, const double[:, :, ::1] verts,
                  const i64[::1] nverts, const u8[:, ::1] colors):
    """Even-odd scanline fill sampled at pixel centres, no anti-aliasing.

    For each row the edges crossing the centre line y + 0.5 are intersected (half-open in y so a
    vertex exactly on the line is counted once), the crossings are sorted, and pixels whose
    centres lie in [x_2k, x_2k+1) are set; this handles concave and self-intersecting outlines.
    """
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t N = idx.shape[0], V = verts.shape[1], n
    cdef i64 b, nv
    cdef int x, y, i, j, k, ncross, iy0, iy1, ix0, ix1, ok
    cdef double yc, ymin, ymax, ax, ay, bx, by, tmp
    cdef double* cross
    cdef u8* row
    cdef u8 cr, cg, cb
    if V == 0 or N == 0:
        return
    # The only allocation: one crossing buffer per call, sized by the widest polygon.
    cross = <double*>malloc(V * sizeof(double))
    if cross == NULL:
        raise MemoryError("fill_polygons: cannot allocate the crossing buffer")
    try:
        with nogil:
            for n in range(N):
                b = idx[n]
                nv = nverts[n]
                if b < 0 or b >= B or nv < 3:
                    continue
                if nv > V:
                    nv = V
                ok = 1
                ymin = 1e300
                ymax = -1e300
                for i in range(nv):
                    ax = verts[n, i, 0]
                    ay = verts[n, i, 1]
                    if not (isfinite(ax) and isfinite(ay)):
                        ok = 0
                        break
                    if ay < ymin:
                        ymin = ay
                    if ay > ymax:
                        ymax = ay
                if not ok:
                    continue
                cr = colors[n, 0]
                cg = colors[n, 1]
                cb = colors[n, 2]
                # Rows whose centre y + 0.5 lies in [ymin, ymax).
                iy0 = <int>ceil(_clampd(ymin - 0.5, 0.0, <double>H))
                iy1 = <int>ceil(_clampd(ymax - 0.5, 0.0, <double>H))
                for y in range(iy0, iy1):
                    yc = y + 0.5
                    ncross = 0
                    for i in range(nv):
                        j = i + 1 if i + 1 < nv else 0
                        ay = verts[n, i, 1]
                        by = verts[n, j, 1]
                        if (ay <= yc) != (by <= yc):
                            ax = verts[n, i, 0]
                            bx = verts[n, j, 0]
                            tmp = ax + (yc - ay) * (bx - ax) / (by - ay)
                            # insertion sort: polygons are small, and this keeps it allocation-free
                            k = ncross
                            while k > 0 and cross[k - 1] > tmp:
                                cross[k] = cross[k - 1]
                                k -= 1
                            cross[k] = tmp
                            ncross += 1
                    row = &frames[b, y, 0, 0]
                    k = 0
                    while k + 1 < ncross:
                        # centres x + 0.5 in [cross[k], cross[k+1])
                        ix0 = <int>ceil(_clampd(cross[k] - 0.5, 0.0, <double>W))
                        ix1 = <int>ceil(_clampd(cross[k + 1] - 0.5, 0.0, <double>W))
                        for x in range(ix0, ix1):
                            row[3 * x] = cr
                            row[3 * x + 1] = cg
                            row[3 * x + 2] = cb
                        k += 2
    finally:
        free(cross)


# ---------------------------------------------------------------------------------------------
# blits

def blit_rgba(u8[:, :, :, ::1] frames, const i64[::1] idx, const u8[:, :, :, ::1] sprites,
              const i64[::1] sprite_ids, const i64[::1] x, const i64[::1] y):
    """Alpha-blend sprite sprite_ids[n] with its top-left corner at (x[n], y[n]), clipped."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t S = sprites.shape[0], sh = sprites.shape[1], sw = sprites.shape[2]
    cdef Py_ssize_t N = idx.shape[0], n
    cdef i64 b, s, ox, oy, c0, c1, r0, r1, r, c
    cdef int a
    cdef u8* row
    cdef const u8* src
    with nogil:
        for n in range(N):
            b = idx[n]
            s = sprite_ids[n]
            if b < 0 or b >= B or s < 0 or s >= S:
                continue
            ox = x[n]
            oy = y[n]
            # Reject fully off-frame placements first: afterwards -sw < ox < W, so none of the
            # clipping arithmetic below can overflow even for offsets near the int64 limits.
            if ox >= W or oy >= H or ox <= -sw or oy <= -sh:
                continue
            c0 = -ox if ox < 0 else 0
            r0 = -oy if oy < 0 else 0
            c1 = W - ox if W - ox < sw else sw
            r1 = H - oy if H - oy < sh else sh
            if c0 >= c1 or r0 >= r1:
                continue
            for r in range(r0, r1):
                row = &frames[b, oy + r, 0, 0]
                src = &sprites[s, r, 0, 0]
                for c in range(c0, c1):
                    a = src[4 * c + 3]
                    if a == 0:
                        continue
                    if a == 255:
                        row[3 * (ox + c)] = src[4 * c]
                        row[3 * (ox + c) + 1] = src[4 * c + 1]
                        row[3 * (ox + c) + 2] = src[4 * c + 2]
                    else:
                        _blend(&row[3 * (ox + c)], &src[4 * c], a)


def blit_masks(u8[:, :, :, ::1] frames, const i64[::1] idx, const u8[:, :, ::1] masks,
               const i64[::1] mask_ids, const i64[::1] x, const i64[::1] y,
               const u8[:, ::1] colors):
    """Blend colors[n] through coverage mask mask_ids[n] placed at (x[n], y[n]), clipped."""
    cdef Py_ssize_t B = frames.shape[0], H = frames.shape[1], W = frames.shape[2]
    cdef Py_ssize_t S = masks.shape[0], mh = masks.shape[1], mw = masks.shape[2]
    cdef Py_ssize_t N = idx.shape[0], n
    cdef i64 b, s, ox, oy, c0, c1, r0, r1, r, c
    cdef int a
    cdef u8* row
    cdef const u8* src
    cdef const u8* col
    with nogil:
        for n in range(N):
            b = idx[n]
            s = mask_ids[n]
            if b < 0 or b >= B or s < 0 or s >= S:
                continue
            ox = x[n]
            oy = y[n]
            if ox >= W or oy >= H or ox <= -mw or oy <= -mh:
                continue
            c0 = -ox if ox < 0 else 0
            r0 = -oy if oy < 0 else 0
            c1 = W - ox if W - ox < mw else mw
            r1 = H - oy if H - oy < mh else mh
            if c0 >= c1 or r0 >= r1:
                continue
            col = &colors[n, 0]
            for r in range(r0, r1):
                row = &frames[b, oy + r, 0, 0]
                src = &masks[s, r, 0]
                for c in range(c0, c1):
                    a = src[c]
                    if a == 0:
                        continue
                    if a == 255:
                        row[3 * (ox + c)] = col[0]
                        row[3 * (ox + c) + 1] = col[1]
                        row[3 * (ox + c) + 2] = col[2]
                    else:
                        _blend(&row[3 * (ox + c)], col, a)


# ---------------------------------------------------------------------------------------------
# resampling

def resize_bilinear(const u8[:, :, :, ::1] src, u8[:, :, :, ::1] dst):
    """Bilinear resampling with half-pixel centres and edge clamping.

    Destination pixel X samples the source at (X + 0.5) * w / W - 0.5 from its two nearest
    source pixels. When upsampling this equals Pillow's BILINEAR (whose triangle filter then
    spans exactly those two pixels); when downsampling it is plain point-sampled bilinear without
    a widened pre-filter, so it aliases on fine detail, use resize_area for reductions.
    """
    cdef Py_ssize_t B = src.shape[0], h = src.shape[1], w = src.shape[2]
    cdef Py_ssize_t H = dst.shape[1], W = dst.shape[2]
    cdef Py_ssize_t bb, X, Y, i
    cdef double s, f, fy, gy, fx, gx
    cdef Py_ssize_t* xo0
    cdef Py_ssize_t* xo1
    cdef Py_ssize_t* yi0
    cdef Py_ssize_t* yi1
    cdef double* xf
    cdef double* yf
    cdef const u8* r0
    cdef const u8* r1
    cdef const u8* p00
    cdef const u8* p01
    cdef const u8* p10
    cdef const u8* p11
    cdef u8* out
    if B == 0 or H == 0 or W == 0 or h == 0 or w == 0:
        return
    # Per-call tables (O(W + H), reused for every row and frame): the two source columns as byte
    # offsets and the weight of the second, likewise for rows. At the last column/row both taps
    # are the same pixel, which removes every edge branch from the inner loop.
    xo0 = <Py_ssize_t*>malloc(W * sizeof(Py_ssize_t))
    xo1 = <Py_ssize_t*>malloc(W * sizeof(Py_ssize_t))
    yi0 = <Py_ssize_t*>malloc(H * sizeof(Py_ssize_t))
    yi1 = <Py_ssize_t*>malloc(H * sizeof(Py_ssize_t))
    xf = <double*>malloc(W * sizeof(double))
    yf = <double*>malloc(H * sizeof(double))
    try:
        if (xo0 == NULL or xo1 == NULL or yi0 == NULL or yi1 == NULL or xf == NULL
                or yf == NULL):
            raise MemoryError("resize_bilinear: cannot allocate the weight tables")
        with nogil:
            s = <double>w / <double>W
            for X in range(W):
                f = _clampd((X + 0.5) * s - 0.5, 0.0, <double>(w - 1))
                i = <Py_ssize_t>f
                xf[X] = f - i
                xo0[X] = 3 * i
                xo1[X] = 3 * (i + 1) if i + 1 < w else 3 * i
            s = <double>h / <double>H
            for Y in range(H):
                f = _clampd((Y + 0.5) * s - 0.5, 0.0, <double>(h - 1))
                i = <Py_ssize_t>f
                yf[Y] = f - i
                yi0[Y] = i
                yi1[Y] = i + 1 if i + 1 < h else i
            for bb in range(B):
                for Y in range(H):
                    r0 = &src[bb, yi0[Y], 0, 0]
                    r1 = &src[bb, yi1[Y], 0, 0]
                    fy = yf[Y]
                    gy = 1.0 - fy
                    out = &dst[bb, Y, 0, 0]
                    for X in range(W):
                        fx = xf[X]
                        gx = 1.0 - fx
                        p00 = r0 + xo0[X]
                        p01 = r0 + xo1[X]
                        p10 = r1 + xo0[X]
                        p11 = r1 + xo1[X]
                        out[3 * X] = <u8>(gy * (gx * p00[0] + fx * p01[0])
                                          + fy * (gx * p10[0] + fx * p11[0]) + 0.5)
                        out[3 * X + 1] = <u8>(gy * (gx * p00[1] + fx * p01[1])
                                              + fy * (gx * p10[1] + fx * p11[1]) + 0.5)
                        out[3 * X + 2] = <u8>(gy * (gx * p00[2] + fx * p01[2])
                                              + fy * (gx * p10[2] + fx * p11[2]) + 0.5)
    finally:
        free(xo0)
        free(xo1)
        free(yi0)
        free(yi1)
        free(xf)
        free(yf)


cdef int _area_table(Py_ssize_t n_src, Py_ssize_t n_dst, Py_ssize_t taps,
                     i64* start, i64* count, i64* weight) noexcept nogil:
    # Destination cell X covers source [X*n_src/n_dst, (X+1)*n_src/n_dst). Measured in units of
    # 1/n_dst the endpoints are the integers X*n_src and (X+1)*n_src, so each source cell's
    # overlap is an exact integer and the weights of one destination cell sum to exactly n_src.
    cdef Py_ssize_t X, k
    cdef i64 a, e, i0, i1, lo, hi
    for X in range(n_dst):
        a = X * n_src
        e = (X + 1) * n_src
        i0 = a // n_dst
        i1 = (e - 1) // n_dst
        start[X] = i0
        count[X] = i1 - i0 + 1
        for k in range(count[X]):
            lo = (i0 + k) * n_dst
            hi = lo + n_dst
            if a > lo:
                lo = a
            if e < hi:
                hi = e
            weight[X * taps + k] = hi - lo
    return 0


def resize_area(const u8[:, :, :, ::1] src, u8[:, :, :, ::1] dst):
    """Box-filter resampling over each destination pixel's exact fractional source footprint.

    The same definition as OpenCV's INTER_AREA for reductions, computed in exact integer
    arithmetic (weights are overlaps in units of 1/W and 1/H, rounded half up once at the end).
    Pillow's BOX counts whole source pixels whose centres fall in the footprint instead, so the
    two agree exactly for integer factors and differ slightly at cell borders otherwise. When
    upsampling the footprint is smaller than a source pixel, giving nearest-neighbour with a
    blended pixel where a footprint straddles two source pixels.
    """
    cdef Py_ssize_t B = src.shape[0], h = src.shape[1], w = src.shape[2]
    cdef Py_ssize_t H = dst.shape[1], W = dst.shape[2]
    cdef Py_ssize_t tx, ty, bb, X, Y, kx, ky, ch
    cdef i64* xs
    cdef i64* xc
    cdef i64* xw
    cdef i64* ys
    cdef i64* yc
    cdef i64* yw
    cdef i64 acc0, acc1, acc2, wy, wxy, denom, half
    cdef const u8* p
    cdef u8* out
    if B == 0 or H == 0 or W == 0 or h == 0 or w == 0:
        return
    tx = (w + W - 1) // W + 1
    ty = (h + H - 1) // H + 1
    xs = <i64*>malloc(W * sizeof(i64))
    xc = <i64*>malloc(W * sizeof(i64))
    xw = <i64*>malloc(W * tx * sizeof(i64))
    ys = <i64*>malloc(H * sizeof(i64))
    yc = <i64*>malloc(H * sizeof(i64))
    yw = <i64*>malloc(H * ty * sizeof(i64))
    try:
        if xs == NULL or xc == NULL or xw == NULL or ys == NULL or yc == NULL or yw == NULL:
            raise MemoryError("resize_area: cannot allocate the weight tables")
        with nogil:
            _area_table(w, W, tx, xs, xc, xw)
            _area_table(h, H, ty, ys, yc, yw)
            denom = <i64>w * <i64>h
            half = denom // 2
            for bb in range(B):
                for Y in range(H):
                    out = &dst[bb, Y, 0, 0]
                    for X in range(W):
                        acc0 = 0
                        acc1 = 0
                        acc2 = 0
                        for ky in range(yc[Y]):
                            wy = yw[Y * ty + ky]
                            p = &src[bb, ys[Y] + ky, xs[X], 0]
                            for kx in range(xc[X]):
                                wxy = wy * xw[X * tx + kx]
                                acc0 += wxy * p[3 * kx]
                                acc1 += wxy * p[3 * kx + 1]
                                acc2 += wxy * p[3 * kx + 2]
                        out[3 * X] = <u8>((acc0 + half) // denom)
                        out[3 * X + 1] = <u8>((acc1 + half) // denom)
                        out[3 * X + 2] = <u8>((acc2 + half) // denom)
    finally:
        free(xs)
        free(xc)
        free(xw)
        free(ys)
        free(yc)
        free(yw)
