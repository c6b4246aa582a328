"""Numba kernels of the procedural object scenes (envs/assets/scenes.py): generation, the
compositor, the exact point test and visible masks.

Exactness: pixel (x, y) belongs to object k iff its centre (x + 0.5, y + 0.5) lies inside the
object's transformed polygon by the even-odd rule. Both the rasterizer and the point test get an
object's vertices from ``_transform`` and a row's edge crossings from ``_crossings`` (point
test) or the compositor's crossing table (the same expression and the same half-open test,
edge by edge; no fused or reordered arithmetic: Numba compiles without fast-math), and a pixel is
inside iff an odd number of crossings lie strictly left of its centre. The rasterizer turns the
sorted crossings into spans with the same comparisons (``_span_start`` / ``_span_end``), so a
drawn pixel, ``owner_at`` and ``visible_mask`` always agree, also for centres exactly on an
edge or a vertex.

Templates (``tv`` float64[V, 2] unit vertices, all within radius 1, which the quick rejects
rely on; ``tr`` int32[R + 1] ring starts; ``tc`` int32[C + 1] first ring of each category) are
arguments, never globals, so cached compilations never hold stale geometry. Object k of row
b: category ``cat[b, k]``, centre (``cx``, ``cy``) px, ``size`` px per template unit, rotation
``angle`` rad; unit (u, v) maps to (cx + size (cos a u - sin a v), cy + size (sin a u + cos a v)).

Shading: a linear light gradient across each object along the scene's ``light`` direction
(unit vector, image axes) and a soft drop shadow: the object's silhouette shifted by
``shadow`` px and by twice that, each darkening what lies below by 0.8 (so 0.64 where both
fall). A pixel's colour is a pure function of the scene and the pixel, so redrawing any
rectangle equals the same rectangle of a full draw.

Speed (2-core Xeon VM, B = 256, one thread, measured while writing this module): a full
640x480 frame draws in ~0.27-0.36 ms (the background copy ~0.1-0.17 ms of it, memory-bound),
an 11x11 region redraw in ~1 us, a counting scene generates in ~40-75 us, a referring scene in
~60 us. The compositor copies the background with memcpy (``_copy_bytes``), works in bands of
``BAND`` rows, transforms each object and builds its colour table once per call, builds each
object's crossings edge by edge (its crossing table) and their pixel spans once, and darkens
a shadow only where the object itself does not cover it.

Every kernel is ``cache=True, nogil=True``; the per-episode generators use kernels/rng.py
(SplitMix64 seeded by the episode seed alone).

First-run compile time (an empty Numba cache; each family's first reset, solve and steps, which
the issue caps) shapes the code: Numba's cost is mostly per compiled function and per typed
statement, and every jitted callee is compiled on its own and then optimized again inside each
caller. So the entry points a family touches are few and flat (``generate_counting_rows``,
``generate_referring_rows``, ``draw_scenes_rows``, ``visible_points``, ``visible_mask``,
``owner_at``): the row loop, the compositor, the scene frame, the colour choice, the object
writes, the point-in-row test and the relation tests are written out inline rather than as
helpers; helpers are kept only where they are large and shared (``_transform``, ``_crossings``,
``_coverage``, ``_options``); calls pass ``np.int64(...)`` where a literal would otherwise
compile a second specialization; scratch arrays are int64 / float64 only (each further
allocation type is one more compiled overload). Cold first runs (reset, solve, two steps, B =
256, this VM): counting ~8.5 s, referring_dot_pointing ~10 s, down from 12 s and 16 s.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .rng import below, seed_state, uniform01

MAX_VERTS = 128       # most vertices of one category template
MAX_CROSS = 64        # most edge crossings of one row (one category)
SHADOW_KEEP = 205     # x/256 kept under each shadow layer
GRADIENT = 0.32       # brightness change per template unit along the light
SHADE_MIN = 0.62      # brightness factor range of the gradient
SHADE_MAX = 1.38
BAND = 16             # the compositor works in bands of this many rows
SHADE_LEVELS = 77    # gradient levels (a colour table per object); level 38 is f = 1
STREAM_COUNTING = np.uint64(0x5C0E11)
STREAM_CHOICE = np.uint64(0x5C0E12)
STREAM_REFERRING = np.uint64(0x5C0E13)


# --------------------------------------------------------------------------- random numbers
@njit(cache=True, nogil=True)
def _below(s, n):
    """kernels/rng.py ``below`` behind one call (its inlining at every call site made the
    generators slow to compile)."""
    return below(s, n)


@njit(cache=True, nogil=True)
def _uniform(s):
    """kernels/rng.py ``uniform01`` behind one call."""
    return uniform01(s)


# --------------------------------------------------------------------------- geometry
@njit(cache=True, nogil=True)
def _transform(tv, tr, tc, c, cxk, cyk, sk, ak, vx, vy):
    """Vertices of category ``c`` placed at (cxk, cyk), scale sk, angle ak into vx, vy; returns
    (vertex count, xmin, ymin, xmax, ymax)."""
    v0 = tr[tc[c]]
    v1 = tr[tc[c + 1]]
    ca = math.cos(ak)
    sa = math.sin(ak)
    xmin = 1e300
    ymin = 1e300
    xmax = -1e300
    ymax = -1e300
    for i in range(v0, v1):
        u = tv[i, 0]
        v = tv[i, 1]
        x = cxk + sk * (ca * u - sa * v)
        y = cyk + sk * (sa * u + ca * v)
        vx[i - v0] = x
        vy[i - v0] = y
        xmin = min(xmin, x)
        xmax = max(xmax, x)
        ymin = min(ymin, y)
        ymax = max(ymax, y)
    return v1 - v0, xmin, ymin, xmax, ymax


@njit(cache=True, nogil=True)
def _crossings(vx, vy, tr, tc, c, yc, out):
    """Sorted x of the edge crossings of the horizontal line y = yc (half-open rule) for the
    transformed rings of category ``c``; returns their number."""
    base = tr[tc[c]]
    m = 0
    for r in range(tc[c], tc[c + 1]):
        s = tr[r] - base
        e = tr[r + 1] - base
        j = e - 1
        for i in range(s, e):
            y0 = vy[j]
            y1 = vy[i]
            if (y0 <= yc) != (y1 <= yc):
                x0 = vx[j]
                out[m] = x0 + (yc - y0) * (vx[i] - x0) / (y1 - y0)
                m += 1
            j = i
    for i in range(1, m):   # insertion sort (a few crossings)
        v = out[i]
        j = i - 1
        while j >= 0 and out[j] > v:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = v
    return m


@njit(cache=True, nogil=True)
def _span_start(a):
    """Smallest integer x with x + 0.5 > a."""
    x = int(math.floor(a)) - 1
    while x + 0.5 <= a:
        x += 1
    return x


@njit(cache=True, nogil=True)
def _span_end(b):
    """Largest integer x with x + 0.5 <= b."""
    x = int(math.floor(b)) + 1
    while x + 0.5 > b:
        x -= 1
    return x



@njit(cache=True, nogil=True)
def _row_range(ymin, ymax):
    """Pixel rows whose centre may lie within [ymin, ymax]: [lo, hi)."""
    return int(math.floor(ymin)) - 1, int(math.floor(ymax)) + 2


# --------------------------------------------------------------------------- point queries
@njit(cache=True, nogil=True)
def owner_at(n, cat, cx, cy, size, angle, tv, tr, tc, row, x, y):
    """Index of the top-most object of ``row`` covering pixel (x, y), -1 for the background."""
    vx = np.empty(MAX_VERTS)
    vy = np.empty(MAX_VERTS)
    xs = np.empty(MAX_CROSS)
    yc = y + 0.5
    for k in range(n[row] - 1, -1, -1):
        c = cat[row, k]
        nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, cx[row, k], cy[row, k],
                                                size[row, k], angle[row, k], vx, vy)
        if x + 1.5 < xmin or x - 0.5 > xmax or y + 1.5 < ymin or y - 0.5 > ymax:
            continue
        m = _crossings(vx, vy, tr, tc, c, yc, xs)
        xc = x + 0.5   # inside: an odd number of crossings left of the pixel centre
        cnt = 0
        for i in range(m):
            if xs[i] < xc:
                cnt += 1
            else:
                break
        if (cnt & 1) == 1:
            return k
    return -1


@njit(cache=True, nogil=True)
def visible_mask(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, k, out):
    """out[:h, :w] (bool) = pixels whose top-most owner is object k; returns their number.
    Paints object k's silhouette True, then every later object's silhouette False (the
    silhouettes clipped to the canvas; one flat loop)."""
    h = height[row]
    w = width[row]
    vx = np.empty(MAX_VERTS)
    vy = np.empty(MAX_VERTS)
    xs = np.empty(MAX_CROSS)
    for y in range(h):
        for x in range(w):
            out[y, x] = False
    if k < 0 or k >= n[row]:
        return 0
    for j in range(k, n[row]):
        value = j == k
        c = cat[row, j]
        nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, cx[row, j], cy[row, j],
                                                size[row, j], angle[row, j], vx, vy)
        lo, hi = _row_range(ymin, ymax)
        for y in range(max(lo, 0), min(hi, h)):
            m = _crossings(vx, vy, tr, tc, c, y + 0.5, xs)
            for i in range(0, m - 1, 2):
                a = max(_span_start(xs[i]), 0)
                b = min(_span_end(xs[i + 1]), w - 1)
                for x in range(a, b + 1):
                    out[y, x] = value
    cnt = 0
    for y in range(h):
        for x in range(w):
            if out[y, x]:
                cnt += 1
    return cnt


@njit(cache=True, nogil=True)
def _local_visible(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, k):
    """Object k's visible mask within its clipped bounding box: (mask uint8[bh, bw], x0, y0)."""
    h = height[row]
    w = width[row]
    vx = np.empty(MAX_VERTS)
    vy = np.empty(MAX_VERTS)
    xs = np.empty(MAX_CROSS)
    c = cat[row, k]
    nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, cx[row, k], cy[row, k], size[row, k],
                                            angle[row, k], vx, vy)
    lo, hi = _row_range(ymin, ymax)
    y0 = max(lo, 0)
    y1 = min(hi, h)
    x0 = max(int(math.floor(xmin)) - 1, 0)
    x1 = min(int(math.floor(xmax)) + 2, w)
    bh = max(y1 - y0, 0)
    bw = max(x1 - x0, 0)
    mask = np.zeros((bh, bw), np.uint8)
    for y in range(y0, y1):
        m = _crossings(vx, vy, tr, tc, c, y + 0.5, xs)
        for i in range(0, m - 1, 2):
            a = max(_span_start(xs[i]), x0)
            b = min(_span_end(xs[i + 1]), x1 - 1)
            for x in range(a, b + 1):
                mask[y - y0, x - x0] = 1
    for j in range(k + 1, n[row]):
        # quick reject: template vertices lie within radius 1 (envs/assets/scenes normalises)
        if cx[row, j] + size[row, j] * 1.01 + 2 < x0 or cx[row, j] - size[row, j] * 1.01 - 2 > x1 \
                or cy[row, j] + size[row, j] * 1.01 + 2 < y0 \
                or cy[row, j] - size[row, j] * 1.01 - 2 > y1:
            continue
        cj = cat[row, j]
        nv, jxmin, jymin, jxmax, jymax = _transform(tv, tr, tc, cj, cx[row, j], cy[row, j],
                                                    size[row, j], angle[row, j], vx, vy)
        if jxmax < x0 - 1 or jxmin > x1 + 1 or jymax < y0 - 1 or jymin > y1 + 1:
            continue
        lo, hi = _row_range(jymin, jymax)
        for y in range(max(lo, y0), min(hi, y1)):
            m = _crossings(vx, vy, tr, tc, cj, y + 0.5, xs)
            for i in range(0, m - 1, 2):
                a = max(_span_start(xs[i]), x0)
                b = min(_span_end(xs[i + 1]), x1 - 1)
                for x in range(a, b + 1):
                    mask[y - y0, x - x0] = 0
    return mask, x0, y0


@njit(cache=True, nogil=True)
def visible_stats(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, k):
    """(visible pixels, own pixels in the canvas, visible centroid x, visible centroid y) of
    object k (centroid of pixel centres; -1 when nothing is visible)."""
    vx = np.empty(MAX_VERTS)
    vy = np.empty(MAX_VERTS)
    xs = np.empty(MAX_CROSS)
    mask, x0, y0 = _local_visible(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, k)
    # own pixels: the silhouette alone
    c = cat[row, k]
    nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, cx[row, k], cy[row, k], size[row, k],
                                            angle[row, k], vx, vy)
    lo, hi = _row_range(ymin, ymax)
    own = 0
    for y in range(max(lo, 0), min(hi, height[row])):
        m = _crossings(vx, vy, tr, tc, c, y + 0.5, xs)
        for i in range(0, m - 1, 2):
            a = max(_span_start(xs[i]), 0)
            b = min(_span_end(xs[i + 1]), width[row] - 1)
            if b >= a:
                own += b - a + 1
    vis = 0
    sx = 0.0
    sy = 0.0
    for yy in range(mask.shape[0]):
        for xx in range(mask.shape[1]):
            if mask[yy, xx]:
                vis += 1
                sx += xx + x0 + 0.5
                sy += yy + y0 + 0.5
    if vis == 0:
        return 0, own, -1.0, -1.0
    return vis, own, sx / vis, sy / vis


@njit(cache=True, nogil=True)
def visible_point(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, k):
    """A pixel (x, y) well inside object k's visible mask: the pixel nearest the visible
    centroid when it and its 5x5 neighbourhood are visible (the usual case for compact
    shapes), otherwise the visible pixel farthest from the mask's boundary (chamfer 3-4
    distance; pixels outside the mask or the canvas are boundary), ties broken by the distance
    to the visible centroid, then by y, then x. (-1, -1) when the object has no visible pixel."""
    mask, x0, y0 = _local_visible(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, k)
    bh = mask.shape[0]
    bw = mask.shape[1]
    vis = 0
    sx = 0.0
    sy = 0.0
    for y in range(bh):
        for x in range(bw):
            if mask[y, x]:
                vis += 1
                sx += x
                sy += y
    if vis == 0:
        return -1, -1
    mx = sx / vis
    my = sy / vis
    px = int(math.floor(mx + 0.5))
    py = int(math.floor(my + 0.5))
    if 2 <= px < bw - 2 and 2 <= py < bh - 2:
        inside = True
        for y in range(py - 2, py + 3):
            for x in range(px - 2, px + 3):
                if not mask[y, x]:
                    inside = False
        if inside:
            return px + x0, py + y0
    big = 1 << 30
    d = np.zeros((bh + 2, bw + 2), np.int64)
    for y in range(bh):
        for x in range(bw):
            if mask[y, x]:
                d[y + 1, x + 1] = big
    for y in range(1, bh + 1):
        for x in range(1, bw + 1):
            if d[y, x]:
                v = min(d[y, x - 1] + 3, d[y - 1, x] + 3)
                v = min(v, min(d[y - 1, x - 1] + 4, d[y - 1, x + 1] + 4))
                d[y, x] = min(d[y, x], v)
    for y in range(bh, 0, -1):
        for x in range(bw, 0, -1):
            if d[y, x]:
                v = min(d[y, x + 1] + 3, d[y + 1, x] + 3)
                v = min(v, min(d[y + 1, x + 1] + 4, d[y + 1, x - 1] + 4))
                d[y, x] = min(d[y, x], v)
    best = -1
    bdist = 0.0
    bx = -1
    by = -1
    for y in range(bh):
        for x in range(bw):
            v = d[y + 1, x + 1]
            if v == 0:
                continue
            q = (x - mx) * (x - mx) + (y - my) * (y - my)
            if v > best or (v == best and q < bdist):
                best = v
                bdist = q
                bx = x
                by = y
    return bx + x0, by + y0


# --------------------------------------------------------------------------- compositor
@intrinsic
def _copy_bytes(typingctx, dst, dst_off, src, src_off, count):
    """memcpy(dst.data + dst_off, src.data + src_off, count) for contiguous uint8 arrays
    (callers check the bounds)."""
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        d, d_off, sr, s_off, n = args
        da = context.make_array(signature.args[0])(context, builder, d)
        sa = context.make_array(signature.args[2])(context, builder, sr)
        cgutils.raw_memcpy(builder, builder.gep(da.data, [d_off]), builder.gep(sa.data, [s_off]),
                           n, 1)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True)
def draw_scenes_rows(frames, rows, atlas_buffer, atlas_slot_off, atlas_slot_of, bg_key,
                     height, width, n, cat, rgb, cx, cy, size, angle, light, shadow, tv, tr, tc,
                     rects):
    """For each i: composite the scene of episode rows[i] into frames[rows[i]] (uint8[B, H >=
    h, W >= w, 3]) within rects[i] = (x0, y0, x1, y1) (clipped to the canvas); the background
    is atlas picture ``bg_key[rows[i]]`` (stored at the canvas size: h rows of w * 3 bytes at
    atlas_slot_off[atlas_slot_of[key]]). Works in bands of BAND rows (each band stays in the
    first-level cache); every pixel's value depends only on the scene and the pixel, so bands
    and rectangles compose exactly: a rectangle redraw equals the same rectangle of a full
    draw. One flat kernel (no nested compositor helpers): each nested jitted call is
    re-optimized by LLVM in every caller, which made the first compile slow."""
    # per-call scratch: transformed vertices and colour tables per object (filled lazily),
    # the crossing table and the shadow table
    max_objects = cat.shape[1]
    vxs = np.empty((max_objects, MAX_VERTS))
    vys = np.empty((max_objects, MAX_VERTS))
    boxes = np.empty((max_objects, 4))
    # (int64 and float64 scratch only: every distinct allocation type is one more compilation)
    luts = np.empty((max_objects, SHADE_LEVELS * 3), np.int64)   # level i, channel ch: 3 i + ch
    state = np.empty(max_objects, np.int64)   # bit 1: vertices, bit 2: colour table
    table = np.empty((256, MAX_CROSS))
    counts = np.empty(256, np.int64)
    spans = np.empty((256, MAX_CROSS), np.int64)
    dark = np.empty(256, np.int64)
    for v in range(256):
        dark[v] = (v * SHADOW_KEEP) >> 8
    for ir in range(rows.shape[0]):
        row = np.int64(rows[ir])
        slot = atlas_slot_of[bg_key[row]]
        if slot < 0:
            raise ValueError("bg_key: a background picture has no atlas slot")
        bg = atlas_buffer
        bg_off = atlas_slot_off[slot]
        fb = frames[row]
        flat = fb.reshape(-1)
        stride = fb.shape[1] * 3
        x0 = np.int64(rects[ir, 0])
        y0 = np.int64(rects[ir, 1])
        x1 = np.int64(rects[ir, 2])
        y1 = np.int64(rects[ir, 3])
        h = height[row]
        w = width[row]
        if h > fb.shape[0] or w > fb.shape[1]:
            raise ValueError("frames: a canvas is larger than its frame")
        if bg_off < 0 or bg_off + h * w * 3 > bg.shape[0]:
            raise ValueError("bg: the background picture is smaller than the canvas")
        if n[row] > vxs.shape[0]:
            raise ValueError("n: more objects than the scratch holds")
        x0 = max(x0, 0)
        y0 = max(y0, 0)
        x1 = min(x1, w)
        y1 = min(y1, h)
        if x0 >= x1 or y0 >= y1:
            continue
        for k in range(n[row]):
            state[k] = 0
        for band in range(y0, y1, BAND):
            band_end = min(band + BAND, y1)
            for y in range(band, band_end):
                _copy_bytes(flat, y * stride + 3 * x0, bg, bg_off + (y * w + x0) * 3, (x1 - x0) * 3)
            lx = light[row, 0]
            ly = light[row, 1]
            sdx = shadow[row, 0]
            sdy = shadow[row, 1]
            levels = luts.shape[1] // 3
            per_level = (levels - 1) / (SHADE_MAX - SHADE_MIN)
            for k in range(n[row]):
                c = cat[row, k]
                ck = cx[row, k]
                cyk = cy[row, k]
                sk = size[row, k]
                # quick reject: template vertices lie within radius 1 (envs/assets/scenes
                # normalises)
                reach = sk * 1.01 + 2.0 * (abs(sdx) + abs(sdy)) + 3.0
                if ck + reach < x0 or ck - reach > x1 or cyk + reach < band \
                        or cyk - reach > band_end:
                    continue
                vx = vxs[k]
                vy = vys[k]
                if not state[k] & 1:
                    nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, ck, cyk, sk,
                                                            angle[row, k], vx, vy)
                    boxes[k, 0] = xmin
                    boxes[k, 1] = ymin
                    boxes[k, 2] = xmax
                    boxes[k, 3] = ymax
                    state[k] |= 1
                xmin = boxes[k, 0]
                ymin = boxes[k, 1]
                xmax = boxes[k, 2]
                ymax = boxes[k, 3]
                # bounding box of the object and both shadow layers
                bx0 = xmin + min(0, 2 * sdx) - 2
                bx1 = xmax + max(0, 2 * sdx) + 2
                by0 = ymin + min(0, 2 * sdy) - 2
                by1 = ymax + max(0, 2 * sdy) + 2
                if bx1 < x0 or bx0 > x1 or by1 < band or by0 > band_end:
                    continue
                lo, hi = _row_range(ymin, ymax)
                # crossings of the rows the object and its shadows need within the rect
                tlo = max(lo, min(band, band - 2 * sdy))
                thi = min(hi, max(band_end, band_end - 2 * sdy))
                if thi <= tlo:
                    continue
                if thi - tlo > table.shape[0]:
                    table = np.empty((thi - tlo, MAX_CROSS))
                    counts = np.empty(thi - tlo, np.int64)
                    spans = np.empty((thi - tlo, MAX_CROSS), np.int64)
                # crossings of every pixel row y in [tlo, thi) at y + 0.5 into table[y - tlo,
                # :counts], sorted: edge by edge, with exactly the expression and the test
                # of ``_crossings`` (so each row holds the same values)
                for ct_r in range(thi - tlo):
                    counts[ct_r] = 0
                ct_base = tr[tc[c]]
                for ct_ring in range(tc[c], tc[c + 1]):
                    ct_s = tr[ct_ring] - ct_base
                    ct_e = tr[ct_ring + 1] - ct_base
                    ct_j = ct_e - 1
                    for ct_i in range(ct_s, ct_e):
                        ct_y0 = vy[ct_j]
                        ct_y1 = vy[ct_i]
                        if ct_y0 != ct_y1:
                            ct_ya = min(ct_y0, ct_y1)
                            ct_yb = max(ct_y0, ct_y1)
                            ct_r0 = max(int(math.floor(ct_ya)) - 1, tlo)
                            ct_r1 = min(int(math.floor(ct_yb)) + 2, thi)
                            ct_x0 = vx[ct_j]
                            for ct_y in range(ct_r0, ct_r1):
                                ct_yc = ct_y + 0.5
                                if (ct_y0 <= ct_yc) != (ct_y1 <= ct_yc):
                                    ct_q = ct_y - tlo
                                    table[ct_q, counts[ct_q]] = ct_x0 + (ct_yc - ct_y0) * \
                                        (vx[ct_i] - ct_x0) / (ct_y1 - ct_y0)
                                    counts[ct_q] += 1
                        ct_j = ct_i
                for ct_q in range(thi - tlo):
                    ct_m = counts[ct_q]
                    for ct_i in range(1, ct_m):
                        ct_v = table[ct_q, ct_i]
                        ct_j = ct_i - 1
                        while ct_j >= 0 and table[ct_q, ct_j] > ct_v:
                            table[ct_q, ct_j + 1] = table[ct_q, ct_j]
                            ct_j -= 1
                        table[ct_q, ct_j + 1] = ct_v
                # pixel spans [spans[q, 2i], spans[q, 2i + 1]] (inclusive) of every table row
                for q in range(thi - tlo):
                    for i in range(0, counts[q] - 1, 2):
                        spans[q, i] = _span_start(table[q, i])
                        spans[q, i + 1] = _span_end(table[q, i + 1])
                # shadows: silhouette shifted by (sdx, sdy) and (2 sdx, 2 sdy)
                for layer in range(1, 3):
                    ox = layer * sdx
                    oy = layer * sdy
                    for y in range(max(tlo + oy, band), min(thi + oy, band_end)):
                        q = y - oy - tlo
                        m = counts[q]
                        # the object's own spans on row y (painted over the shadow next)
                        qo = y - tlo
                        mo = counts[qo] if lo <= y < hi else 0
                        for i in range(0, m - 1, 2):
                            a = max(spans[q, i] + ox, x0)
                            b = min(spans[q, i + 1] + ox, x1 - 1)
                            # darken [a, b] minus the object's spans
                            cur = a
                            for t in range(0, mo - 1, 2):
                                if cur > b:
                                    break
                                oa = spans[qo, t]
                                ob = spans[qo, t + 1]
                                if ob < cur or ob < oa:
                                    continue
                                for i3 in range(y * stride + cur * 3,
                                                y * stride + min(b, oa - 1) * 3 + 3):
                                    flat[i3] = dark[flat[i3]]
                                cur = max(cur, ob + 1)
                            for i3 in range(y * stride + cur * 3, y * stride + b * 3 + 3):
                                flat[i3] = dark[flat[i3]]
                if max(lo, band) >= min(hi, band_end):
                    continue
                # the object's colour table along the light gradient
                lut = luts[k]
                if not state[k] & 2:
                    for i in range(levels):
                        f = SHADE_MIN + i / per_level
                        add = 40.0 * (f - 1.0)
                        for ch in range(3):
                            lut[3 * i + ch] = np.uint8(min(max(rgb[row, k, ch] * f + add, 0.0),
                                                           255.0))
                    state[k] |= 2
                gain = GRADIENT / sk
                # level(x, y) = (p(y) + slope x) >> 16 in 16.16 fixed point: a pure function of
                # the pixel
                slope = np.int64(round(gain * lx * per_level * 65536.0))
                for y in range(max(lo, band), min(hi, band_end)):
                    qr = y - tlo
                    m = counts[qr]
                    if m == 0:
                        continue
                    f_row = 1.0 + gain * ((0.5 - ck) * lx + (y + 0.5 - cyk) * ly)
                    p = np.int64(round((f_row - SHADE_MIN) * per_level * 65536.0)) + 32768
                    for i in range(0, m - 1, 2):
                        a = max(spans[qr, i], x0)
                        b = min(spans[qr, i + 1], x1 - 1)
                        o = y * stride + 3 * a
                        for x in range(a, b + 1):
                            lv = (p + slope * x) >> 16
                            lv = min(max(lv, 0), levels - 1)
                            flat[o] = lut[3 * lv]
                            flat[o + 1] = lut[3 * lv + 1]
                            flat[o + 2] = lut[3 * lv + 2]
                            o += 3


def draw_scene(frame, bg, height, width, n, cat, rgb, cx, cy, size, angle, light, shadow,
               tv, tr, tc, row, x0, y0, x1, y1):
    """Composite the scene of ``row`` into frame[y0:y1, x0:x1] (frame uint8[H >= h, W >= w, 3]
    C-contiguous; bg uint8[h, w, 3]: the background picture). A plain-Python front of
    ``draw_scenes_rows`` (one-row views, so no second compilation)."""
    w = int(width[row])
    h = int(height[row])
    x0 = min(max(int(x0), 0), w)
    x1 = min(max(int(x1), 0), w)
    y0 = min(max(int(y0), 0), h)
    y1 = min(max(int(y1), 0), h)
    buf = np.ascontiguousarray(bg).reshape(-1)
    if not buf.flags.writeable:
        buf = buf.copy()
    zero = np.zeros(1, np.int64)
    one = slice(row, row + 1)
    draw_scenes_rows(frame[None], zero, buf, zero, zero, zero, height[one], width[one], n[one],
                     cat[one], rgb[one], cx[one], cy[one], size[one], angle[one], light[one],
                     shadow[one], tv, tr, tc, np.array([[x0, y0, x1, y1]], np.int32))


# --------------------------------------------------------------------------- generation
@njit(cache=True, nogil=True)
def _coverage(row, k, occ, nocc, height, width, cat, cx, cy, size, angle, tv, tr, tc):
    """(own pixels in the canvas, of those not covered by the objects occ[:nocc]) of object k."""
    h = height[row]
    w = width[row]
    vx = np.empty(MAX_VERTS)
    vy = np.empty(MAX_VERTS)
    xs = np.empty(MAX_CROSS)
    ovx = np.empty((max(nocc, 1), MAX_VERTS))
    ovy = np.empty((max(nocc, 1), MAX_VERTS))
    oxs = np.empty((max(nocc, 1), MAX_CROSS))
    om = np.empty(max(nocc, 1), np.int64)
    oy0 = np.empty(max(nocc, 1))
    oy1 = np.empty(max(nocc, 1))
    for t in range(nocc):
        j = occ[t]
        nv, a, b_, c_, d_ = _transform(tv, tr, tc, cat[row, j], cx[row, j], cy[row, j],
                                       size[row, j], angle[row, j], ovx[t], ovy[t])
        oy0[t] = b_
        oy1[t] = d_
    c = cat[row, k]
    nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, cx[row, k], cy[row, k], size[row, k],
                                            angle[row, k], vx, vy)
    lo, hi = _row_range(ymin, ymax)
    own = 0
    vis = 0
    for y in range(max(lo, 0), min(hi, h)):
        yc = y + 0.5
        m = _crossings(vx, vy, tr, tc, c, yc, xs)
        if m == 0:
            continue
        for t in range(nocc):
            if yc < oy0[t] or yc > oy1[t]:
                om[t] = 0
            else:
                om[t] = _crossings(ovx[t], ovy[t], tr, tc, cat[row, occ[t]], yc, oxs[t])
        for i in range(0, m - 1, 2):
            a = max(_span_start(xs[i]), 0)
            b = min(_span_end(xs[i + 1]), w - 1)
            if b < a:
                continue
            own += b - a + 1
            for x in range(a, b + 1):
                covered = False
                xc = x + 0.5
                for t in range(nocc):
                    if om[t] > 0:
                        cnt = 0
                        for i2 in range(om[t]):
                            if oxs[t, i2] < xc:
                                cnt += 1
                            else:
                                break
                        if (cnt & 1) == 1:
                            covered = True
                            break
                if not covered:
                    vis += 1
    return own, vis


MIN_CONTRAST = 100.0  # RGB distance of a named colour from the background cell under it


@njit(cache=True, nogil=True)
def counting_choice(seed, n_cat, min_count, max_count):
    """(category, count) of a counting episode: uniform over the categories and over
    [min_count, max_count]; a pure function of the seed."""
    s = seed_state(np.uint64(seed), STREAM_CHOICE)
    s, c = _below(s, np.int64(n_cat))
    s, k = _below(s, np.int64(max_count - min_count + 1))
    return c, min_count + k




@njit(cache=True, nogil=True)
def generate_counting_rows(rows, seeds, categories, counts, n_bg, min_visible, min_pixels,
                           tv, tr, tc, trad, tarea, similar, colour_rgb, cells, n_canvas,
                           height, width, background, n, cat, colour, rgb, cx, cy, size, angle,
                           light, shadow, target, expr):
    """Counting scenes for episodes rows[i] (seed seeds[i], category categories[i], count
    counts[i]); returns the number of rows that could not be generated (0 in practice)."""
    max_objects = cat.shape[1]
    n_cat = tc.shape[0] - 1
    n_col = colour_rgb.shape[0]
    # scratch (np.empty: every entry is written before it is read)
    kinds = np.empty(max_objects, np.int64)        # 1: target
    dcat = np.empty(max_objects, np.int64)
    rad = np.empty(max_objects)
    is_t = np.empty(max_objects, np.int64)
    occ = np.empty(max_objects, np.int64)
    over = np.empty(max_objects, np.int64)
    failed = 0
    for i_row in range(rows.shape[0]):
        seed = seeds[i_row]
        category = categories[i_row]
        count = counts[i_row]
        row = rows[i_row]
        done = False
        s = seed_state(np.uint64(seed), STREAM_COUNTING)
        s, f_ci = _below(s, np.int64(3))   # canvas, background and light of the scene
        if f_ci == 0:
            height[row] = 480
            width[row] = 640
        elif f_ci == 1:
            height[row] = 640
            width[row] = 480
        else:
            height[row] = 512
            width[row] = 512
        s, f_bg = _below(s, np.int64(n_bg))
        background[row] = f_bg
        s, f_u = _uniform(s)
        f_th = 2.0 * math.pi * f_u
        light[row, 0] = math.cos(f_th)
        light[row, 1] = math.sin(f_th)
        shadow[row, 0] = -int(round(2.4 * math.cos(f_th)))
        shadow[row, 1] = -int(round(2.4 * math.sin(f_th)))
        H = height[row]
        W = width[row]
        target[row] = -1
        for q in range(expr.shape[1]):
            expr[row, q] = -1
        s, nd = _below(s, np.int64(13))
        nd = min(nd + 3, max_objects - count)
        for attempt in range(8):
            nd_a = nd if attempt < 5 else 0
            total = count + nd_a
            for i in range(total):
                kinds[i] = 1 if i < count else 0
            for i in range(total - 1, 0, -1):   # painter's order: targets among distractors
                s, j = _below(s, np.int64(i + 1))
                t = kinds[i]
                kinds[i] = kinds[j]
                kinds[j] = t
            for i in range(total):
                if kinds[i] == 0:
                    s, u = _uniform(s)
                    if u < 0.45:
                        s, j = _below(s, np.int64(similar.shape[1]))
                        dcat[i] = similar[category, j]
                    else:
                        s, j = _below(s, np.int64(n_cat - 1))
                        dcat[i] = j if j < category else j + 1
                else:
                    dcat[i] = category
            r_hi = math.sqrt(0.30 * H * W / (math.pi * max(total, 1)))
            r_hi = min(max(r_hi, 18.0), 72.0) * (0.88 ** attempt)
            r_lo = max(11.0, 0.4 * r_hi)
            placed = 0
            ok = True
            for i in range(total):
                c = dcat[i]
                # smallest bounding radius giving min_pixels of silhouette (with a margin)
                r_min = max(10.0, math.sqrt(1.5 * min_pixels / tarea[c]) * trad[c])
                s, u = _uniform(s)
                if u < 0.25:
                    s, u2 = _uniform(s)
                    r = r_lo * (1.0 + 0.3 * u2)
                else:
                    s, u2 = _uniform(s)
                    r = r_lo + (r_hi - r_lo) * u2
                r = max(r, r_min)
                s, col = _below(s, np.int64(n_col))
                s, u3 = _uniform(s)
                a = 2.0 * math.pi * u3
                success = False
                for tries in range(48):
                    if tries > 0 and tries % 12 == 0:
                        r = max(r * 0.85, r_min)
                    if 2.0 * r + 4.0 >= min(H, W):
                        r = (min(H, W) - 5.0) / 2.0
                    s, ux = _uniform(s)
                    s, uy = _uniform(s)
                    px = r + 2.0 + ux * (W - 2.0 * r - 4.0)
                    py = r + 2.0 + uy * (H - 2.0 * r - 4.0)
                    bad = False
                    nover = 0
                    for j in range(placed):
                        d = math.hypot(px - cx[row, j], py - cy[row, j])
                        if d < 0.62 * (r + rad[j]):
                            bad = True
                            break
                        if d < r + rad[j] and is_t[j]:
                            over[nover] = j
                            nover += 1
                    if bad:
                        continue
                    # col_here := col, or the next named colour (cyclically) that stands out by
                    # MIN_CONTRAST from the mean colour of the background cell under (px, py)
                    # (the first one when none does)
                    if H == 480 and W == 640:
                        k_canvas = 0
                    elif H == 640:
                        k_canvas = 1
                    else:
                        k_canvas = 2
                    k_key = background[row] * n_canvas + k_canvas
                    k_g = cells.shape[1]
                    k_gi = min(max(int(py * k_g / H), 0), k_g - 1)
                    k_gj = min(max(int(px * k_g / W), 0), k_g - 1)
                    k_col = col
                    for k_t in range(n_col):
                        k_c2 = (col + k_t) % n_col
                        k_d = 0.0
                        for k_ch in range(3):
                            k_e = colour_rgb[k_c2, k_ch] - cells[k_key, k_gi, k_gj, k_ch]
                            k_d += k_e * k_e
                        if k_d >= MIN_CONTRAST * MIN_CONTRAST:
                            k_col = k_c2
                            break
                    col_here = k_col
                    # object ``placed``: category, colour (jittered), centre, size, angle
                    cat[row, placed] = c
                    colour[row, placed] = col_here
                    for o_ch in range(3):
                        s, o_j = _below(s, np.int64(29))
                        rgb[row, placed, o_ch] = np.uint8(
                            min(max(int(colour_rgb[col_here, o_ch]) + int(o_j) - 14, 0), 255))
                    cx[row, placed] = px
                    cy[row, placed] = py
                    size[row, placed] = r / trad[c]
                    angle[row, placed] = a
                    rad[placed] = r
                    is_t[placed] = kinds[i] == 1
                    for q in range(nover):
                        j = over[q]
                        nocc = 0
                        for t in range(j + 1, placed + 1):
                            if math.hypot(cx[row, t] - cx[row, j], cy[row, t] - cy[row, j]) < \
                                    rad[t] + rad[j]:
                                occ[nocc] = t
                                nocc += 1
                        own, vis = _coverage(row, j, occ, np.int64(nocc), height, width, cat, cx,
                                             cy, size, angle, tv, tr, tc)
                        if vis < min_visible * own or vis < min_pixels:
                            bad = True
                            break
                    if bad:
                        continue
                    success = True
                    break
                if success:
                    placed += 1
                elif kinds[i] == 1:
                    ok = False
                    break
            if ok:
                n[row] = placed
                for k in range(placed, cat.shape[1]):
                    cat[row, k] = 0
                    colour[row, k] = 0
                    cx[row, k] = 0.0
                    cy[row, k] = 0.0
                    size[row, k] = 0.0
                    angle[row, k] = 0.0
                    for ch in range(3):
                        rgb[row, k, ch] = 0
                done = True
                break
        if not done:
            n[row] = 0
            failed += 1
    return failed


# --------------------------------------------------------------------------- referring
# expr[row] = (kind, mod, np_colour, anchor, anchor_colour); kinds:
EXPR_NP = 0       # "{np}"
EXPR_SIZE = 1     # mod 0 bigger, 1 smaller, 2 biggest, 3 smallest: "{adj} {np}"
EXPR_POS = 2      # mod 0 left, 1 right, 2 top, 3 bottom, 4 middle: "{np} on the left" ...
EXPR_REL = 3      # mod 0 next to, 1 above, 2 below, 3 left of, 4 right of: "{np} {rel} the {a}"
SIZE_RATIO = 1.3  # bigger/smaller: linear size ratio to every other candidate
POS_GAP = 0.10    # on the left/right/top/bottom/in the middle: gap, fraction of W (or H)
REL_GAP = 0.08    # above/below/left of/right of: gap, fraction of min(W, H)
REL_WEAK = 1.5    # another candidate "weakly" in the relation blocks it
NEAR = 1.6        # next to: centre distance <= NEAR (r_t + r_a) ...
NEAR_RATIO = 2.0  # ... and every other candidate at least NEAR_RATIO times as far


@njit(cache=True, nogil=True)
def _options(row, t, nn, W, H, cat, colour, cx, cy, size, okv, kinds, mods, npc, anchors,
             acol, weights):
    """Every valid expression for target t; returns their number."""
    m = 0
    c = cat[row, t]
    col = colour[row, t]
    for use_col in range(2):
        uc = use_col == 1
        kn = 0   # objects the noun phrase matches
        for o in range(nn):
            if cat[row, o] == c and (not uc or colour[row, o] == col):
                kn += 1
        wf = 1.0 if uc else 2.0     # plain category phrases preferred when they work
        if kn == 1:
            kinds[m] = EXPR_NP
            mods[m] = 0
            npc[m] = use_col
            anchors[m] = -1
            acol[m] = 0
            weights[m] = 4.0 if uc else 3.0
            m += 1
            continue
        # size
        for mod in range(2):
            good = True
            for o in range(nn):
                if o == t or not (cat[row, o] == c and (not uc or colour[row, o] == col)):
                    continue
                if mod == 0 and not size[row, t] >= SIZE_RATIO * size[row, o]:
                    good = False
                if mod == 1 and not SIZE_RATIO * size[row, t] <= size[row, o]:
                    good = False
            if good:
                kinds[m] = EXPR_SIZE
                mods[m] = mod if kn == 2 else mod + 2
                npc[m] = use_col
                anchors[m] = -1
                acol[m] = 0
                weights[m] = 2.5 * wf
                m += 1
        # position among the candidates
        gx = POS_GAP * W
        gy = POS_GAP * H
        for mod in range(5):
            if mod == 4 and kn != 3:
                continue
            good = True
            lower = 0
            upper = 0
            for o in range(nn):
                if o == t or not (cat[row, o] == c and (not uc or colour[row, o] == col)):
                    continue
                if mod == 0 and not cx[row, t] + gx <= cx[row, o]:
                    good = False
                elif mod == 1 and not cx[row, t] >= cx[row, o] + gx:
                    good = False
                elif mod == 2 and not cy[row, t] + gy <= cy[row, o]:
                    good = False
                elif mod == 3 and not cy[row, t] >= cy[row, o] + gy:
                    good = False
                elif mod == 4:
                    if cx[row, o] + gx <= cx[row, t]:
                        lower += 1
                    elif cx[row, o] >= cx[row, t] + gx:
                        upper += 1
            if mod == 4 and not (lower == 1 and upper == 1):
                good = False
            if good:
                kinds[m] = EXPR_POS
                mods[m] = mod
                npc[m] = use_col
                anchors[m] = -1
                acol[m] = 0
                weights[m] = 0.5 * wf
                m += 1
    # relations to a uniquely named, well visible anchor
    m_rel = m
    g = REL_GAP * min(W, H)
    for a in range(nn):
        if a == t or not okv[a]:
            continue
        for use_acol in range(2):
            uac = use_acol == 1
            na = 0
            for o in range(nn):
                if cat[row, o] == cat[row, a] and (not uac or colour[row, o] == colour[row, a]):
                    na += 1
            if na != 1:
                continue
            for use_col in range(2):
                uc = use_col == 1
                # a relation that the noun phrase alone makes redundant is rarely chosen
                nr = 0
                for o in range(nn):
                    if cat[row, o] == c and (not uc or colour[row, o] == col):
                        nr += 1
                redundant = nr == 1
                for mod in range(5):
                    good = True
                    dt = 0.0
                    if mod == 0:
                        dt = math.hypot(cx[row, t] - cx[row, a], cy[row, t] - cy[row, a])
                        if dt > NEAR * (size[row, t] + size[row, a]):
                            good = False
                    else:
                        # strong form: gap g, mostly along the axis
                        dx = cx[row, t] - cx[row, a]
                        dy = cy[row, t] - cy[row, a]
                        if mod == 1 or mod == 2:
                            along = -dy if mod == 1 else dy
                            good = along >= g and abs(dx) <= abs(dy)
                        else:
                            along = -dx if mod == 3 else dx
                            good = along >= g and abs(dy) <= abs(dx)
                    if not good:
                        continue
                    for o in range(nn):
                        if o == t or o == a or \
                                not (cat[row, o] == c and (not uc or colour[row, o] == col)):
                            continue
                        if mod == 0:
                            do = math.hypot(cx[row, o] - cx[row, a], cy[row, o] - cy[row, a])
                            if do < NEAR_RATIO * dt:
                                good = False
                        else:
                            # weak form: another candidate roughly in the relation blocks it
                            dx = cx[row, o] - cx[row, a]
                            dy = cy[row, o] - cy[row, a]
                            if mod == 1 or mod == 2:
                                along = -dy if mod == 1 else dy
                                weak = along > 0 and abs(dx) < REL_WEAK * abs(dy)
                            else:
                                along = -dx if mod == 3 else dx
                                weak = along > 0 and abs(dy) < REL_WEAK * abs(dx)
                            if weak:
                                good = False
                    if good:
                        kinds[m] = EXPR_REL
                        mods[m] = mod
                        npc[m] = use_col
                        anchors[m] = a
                        acol[m] = use_acol
                        weights[m] = (1.0 if not uc else 0.5) * (0.2 if redundant else 1.0)
                        m += 1
    # the relations share a total weight of 2
    tot = 0.0
    for i in range(m_rel, m):
        tot += weights[i]
    for i in range(m_rel, m):
        weights[i] *= 2.0 / tot
    return m




@njit(cache=True, nogil=True)
def generate_referring_rows(rows, seeds, n_bg, min_visible, tv, tr, tc, trad, tarea, colour_rgb,
                            cells, n_canvas, height, width, background, n, cat, colour, rgb, cx,
                            cy, size, angle, light, shadow, target, expr):
    """Referring scenes for episodes rows[i] (seed seeds[i]); returns the number of rows that
    could not be generated (0 in practice)."""
    n_cat = tc.shape[0] - 1
    n_col = colour_rgb.shape[0]
    cap = 256   # scratch (np.empty: every entry is written before it is read)
    kinds = np.empty(cap, np.int64)
    mods = np.empty(cap, np.int64)
    npc = np.empty(cap, np.int64)
    anchors = np.empty(cap, np.int64)
    acol = np.empty(cap, np.int64)
    weights = np.empty(cap)
    ocat = np.empty(10, np.int64)
    rad = np.empty(10)
    occ = np.empty(10, np.int64)
    okv = np.empty(10, np.int64)
    order = np.empty(10, np.int64)
    failed = 0
    for i_row in range(rows.shape[0]):
        seed = seeds[i_row]
        row = rows[i_row]
        done = False
        s = seed_state(np.uint64(seed), STREAM_REFERRING)
        s, f_ci = _below(s, np.int64(3))   # canvas, background and light of the scene
        if f_ci == 0:
            height[row] = 480
            width[row] = 640
        elif f_ci == 1:
            height[row] = 640
            width[row] = 480
        else:
            height[row] = 512
            width[row] = 512
        s, f_bg = _below(s, np.int64(n_bg))
        background[row] = f_bg
        s, f_u = _uniform(s)
        f_th = 2.0 * math.pi * f_u
        light[row, 0] = math.cos(f_th)
        light[row, 1] = math.sin(f_th)
        shadow[row, 0] = -int(round(2.4 * math.cos(f_th)))
        shadow[row, 1] = -int(round(2.4 * math.sin(f_th)))
        H = height[row]
        W = width[row]
        for attempt in range(64):
            s, nn = _below(s, np.int64(7))
            nn += 4
            s, C = _below(s, np.int64(n_cat))
            s, u = _uniform(s)
            n_same = 1
            if u < 0.85:
                s, extra = _below(s, np.int64(3))
                n_same = min(2 + extra, nn)
            for i in range(nn):
                if i < n_same:
                    ocat[i] = C
                else:
                    s, u = _uniform(s)
                    if i > n_same and u < 0.3:
                        s, j = _below(s, np.int64(i - n_same))
                        ocat[i] = ocat[n_same + j]
                    else:
                        s, j = _below(s, np.int64(n_cat - 1))
                        ocat[i] = j if j < C else j + 1
            for i in range(nn - 1, 0, -1):
                s, j = _below(s, np.int64(i + 1))
                tmp = ocat[i]
                ocat[i] = ocat[j]
                ocat[j] = tmp
            s, u = _uniform(s)
            shared = u < 0.3
            s, shared_col = _below(s, np.int64(n_col))
            r_hi = math.sqrt(0.2 * H * W / (math.pi * nn))
            r_hi = min(max(r_hi, 34.0), 95.0)
            placed = 0
            for i in range(nn):
                c = ocat[i]
                s, u = _uniform(s)
                r = r_hi * (0.5 + 0.5 * u)
                s, u = _uniform(s)
                if u < 0.2:
                    r *= 0.6
                if shared and c == C:
                    col = shared_col
                else:
                    s, col = _below(s, np.int64(n_col))
                s, u = _uniform(s)
                a = (u - 0.5) * 1.2
                success = False
                for tries in range(40):
                    if tries > 0 and tries % 10 == 0:
                        r = max(r * 0.85, 22.0)
                    s, ux = _uniform(s)
                    s, uy = _uniform(s)
                    px = r + 2.0 + ux * (W - 2.0 * r - 4.0)
                    py = r + 2.0 + uy * (H - 2.0 * r - 4.0)
                    bad = False
                    for j in range(placed):
                        if math.hypot(px - cx[row, j], py - cy[row, j]) < 0.8 * (r + rad[j]):
                            bad = True
                            break
                    if not bad:
                        success = True
                        break
                if success:
                    # col := col, or the next named colour (cyclically) that stands out by
                    # MIN_CONTRAST from the mean colour of the background cell under (px, py)
                    # (the first one when none does)
                    if H == 480 and W == 640:
                        k_canvas = 0
                    elif H == 640:
                        k_canvas = 1
                    else:
                        k_canvas = 2
                    k_key = background[row] * n_canvas + k_canvas
                    k_g = cells.shape[1]
                    k_gi = min(max(int(py * k_g / H), 0), k_g - 1)
                    k_gj = min(max(int(px * k_g / W), 0), k_g - 1)
                    k_col = col
                    for k_t in range(n_col):
                        k_c2 = (col + k_t) % n_col
                        k_d = 0.0
                        for k_ch in range(3):
                            k_e = colour_rgb[k_c2, k_ch] - cells[k_key, k_gi, k_gj, k_ch]
                            k_d += k_e * k_e
                        if k_d >= MIN_CONTRAST * MIN_CONTRAST:
                            k_col = k_c2
                            break
                    col = k_col
                    # object ``placed``: category, colour (jittered), centre, size, angle
                    cat[row, placed] = c
                    colour[row, placed] = col
                    for o_ch in range(3):
                        s, o_j = _below(s, np.int64(29))
                        rgb[row, placed, o_ch] = np.uint8(
                            min(max(int(colour_rgb[col, o_ch]) + int(o_j) - 14, 0), 255))
                    cx[row, placed] = px
                    cy[row, placed] = py
                    size[row, placed] = r / trad[c]
                    angle[row, placed] = a
                    rad[placed] = r
                    placed += 1
            n[row] = placed
            if placed < 2:
                continue
            # visibility of every object (targets and anchors must stay well visible)
            for k in range(placed):
                nocc = 0
                for j in range(k + 1, placed):
                    if math.hypot(cx[row, j] - cx[row, k], cy[row, j] - cy[row, k]) < \
                            rad[j] + rad[k]:
                        occ[nocc] = j
                        nocc += 1
                own, vis = _coverage(row, k, occ, np.int64(nocc), height, width, cat, cx, cy, size,
                                     angle, tv, tr, tc)
                okv[k] = vis >= min_visible * own and vis > 0
            # candidate targets: the repeated category first, in random order, then the rest
            m_ord = 0
            for k in range(placed):
                if cat[row, k] == C:
                    order[m_ord] = k
                    m_ord += 1
            first = m_ord
            for k in range(placed):
                if cat[row, k] != C:
                    order[m_ord] = k
                    m_ord += 1
            for i in range(first - 1, 0, -1):
                s, j = _below(s, np.int64(i + 1))
                tmp = order[i]
                order[i] = order[j]
                order[j] = tmp
            for i in range(m_ord - 1, first, -1):
                s, j = _below(s, np.int64(i - first + 1))
                j += first
                tmp = order[i]
                order[i] = order[j]
                order[j] = tmp
            for q in range(m_ord):
                t = order[q]
                if not okv[t]:
                    continue
                m = _options(row, t, np.int64(placed), W, H, cat, colour, cx, cy, size, okv,
                             kinds, mods, npc, anchors, acol, weights)
                if m == 0:
                    continue
                tot = 0.0
                for i in range(m):
                    tot += weights[i]
                s, u = _uniform(s)
                pick = m - 1
                acc = 0.0
                for i in range(m):
                    acc += weights[i]
                    if u * tot < acc:
                        pick = i
                        break
                target[row] = t
                expr[row, 0] = kinds[pick]
                expr[row, 1] = mods[pick]
                expr[row, 2] = npc[pick]
                expr[row, 3] = anchors[pick]
                expr[row, 4] = acol[pick]
                for k in range(placed, cat.shape[1]):
                    cat[row, k] = 0
                    colour[row, k] = 0
                    cx[row, k] = 0.0
                    cy[row, k] = 0.0
                    size[row, k] = 0.0
                    angle[row, k] = 0.0
                    for ch in range(3):
                        rgb[row, k, ch] = 0
                done = True
                break
            if done:
                break
        if not done:
            n[row] = 0
            target[row] = -1
            failed += 1
    return failed


@njit(cache=True, nogil=True)
def visible_points(height, width, n, cat, cx, cy, size, angle, tv, tr, tc, row, ks, out):
    """out[i] = (x, y): a pixel well inside object ks[i]'s visible mask: the pixel nearest the
    visible centroid when it and its 5x5 neighbourhood are visible (the usual case for compact
    shapes), otherwise the visible pixel farthest from the mask's boundary (chamfer 3-4
    distance; pixels outside the mask or the canvas are boundary), ties broken by the distance
    to the visible centroid, then by y, then x; (-1, -1) when the object has no visible
    pixel. One flat kernel (the mask of ``_local_visible`` built inline)."""
    vx = np.empty(MAX_VERTS)
    vy = np.empty(MAX_VERTS)
    xs = np.empty(MAX_CROSS)
    for iq in range(ks.shape[0]):
        k = ks[iq]
        h = height[row]
        w = width[row]
        c = cat[row, k]
        nv, xmin, ymin, xmax, ymax = _transform(tv, tr, tc, c, cx[row, k], cy[row, k], size[row, k],
                                                angle[row, k], vx, vy)
        lo, hi = _row_range(ymin, ymax)
        y0 = max(lo, 0)
        y1 = min(hi, h)
        x0 = max(int(math.floor(xmin)) - 1, 0)
        x1 = min(int(math.floor(xmax)) + 2, w)
        bh = max(y1 - y0, 0)
        bw = max(x1 - x0, 0)
        mask = np.zeros((bh, bw), np.int64)
        # object k's silhouette (1), then the later objects' (0), within the box
        for j in range(k, n[row]):
            # quick reject: template vertices lie within radius 1 (envs/assets/scenes normalises)
            if j > k and (cx[row, j] + size[row, j] * 1.01 + 2 < x0
                          or cx[row, j] - size[row, j] * 1.01 - 2 > x1
                          or cy[row, j] + size[row, j] * 1.01 + 2 < y0
                          or cy[row, j] - size[row, j] * 1.01 - 2 > y1):
                continue
            cj = cat[row, j]
            nv, jxmin, jymin, jxmax, jymax = _transform(tv, tr, tc, cj, cx[row, j], cy[row, j],
                                                        size[row, j], angle[row, j], vx, vy)
            if j > k and (jxmax < x0 - 1 or jxmin > x1 + 1 or jymax < y0 - 1 or jymin > y1 + 1):
                continue
            value = 1 if j == k else 0
            lo, hi = _row_range(jymin, jymax)
            for y in range(max(lo, y0), min(hi, y1)):
                m = _crossings(vx, vy, tr, tc, cj, y + 0.5, xs)
                for i in range(0, m - 1, 2):
                    a = max(_span_start(xs[i]), x0)
                    b = min(_span_end(xs[i + 1]), x1 - 1)
                    for x in range(a, b + 1):
                        mask[y - y0, x - x0] = value
        bh = mask.shape[0]
        bw = mask.shape[1]
        vis = 0
        sx = 0.0
        sy = 0.0
        for y in range(bh):
            for x in range(bw):
                if mask[y, x]:
                    vis += 1
                    sx += x
                    sy += y
        if vis == 0:
            out[iq, 0] = -1
            out[iq, 1] = -1
            continue
        mx = sx / vis
        my = sy / vis
        px = int(math.floor(mx + 0.5))
        py = int(math.floor(my + 0.5))
        if 2 <= px < bw - 2 and 2 <= py < bh - 2:
            inside = True
            for y in range(py - 2, py + 3):
                for x in range(px - 2, px + 3):
                    if not mask[y, x]:
                        inside = False
            if inside:
                out[iq, 0] = px + x0
                out[iq, 1] = py + y0
                continue
        big = 1 << 30
        d = np.zeros((bh + 2, bw + 2), np.int64)
        for y in range(bh):
            for x in range(bw):
                if mask[y, x]:
                    d[y + 1, x + 1] = big
        for y in range(1, bh + 1):
            for x in range(1, bw + 1):
                if d[y, x]:
                    v = min(d[y, x - 1] + 3, d[y - 1, x] + 3)
                    v = min(v, min(d[y - 1, x - 1] + 4, d[y - 1, x + 1] + 4))
                    d[y, x] = min(d[y, x], v)
        for y in range(bh, 0, -1):
            for x in range(bw, 0, -1):
                if d[y, x]:
                    v = min(d[y, x + 1] + 3, d[y + 1, x] + 3)
                    v = min(v, min(d[y + 1, x + 1] + 4, d[y + 1, x - 1] + 4))
                    d[y, x] = min(d[y, x], v)
        best = -1
        bdist = 0.0
        bx = -1
        by = -1
        for y in range(bh):
            for x in range(bw):
                v = d[y + 1, x + 1]
                if v == 0:
                    continue
                q = (x - mx) * (x - mx) + (y - my) * (y - my)
                if v > best or (v == best and q < bdist):
                    best = v
                    bdist = q
                    bx = x
                    by = y
        out[iq, 0] = bx + x0
        out[iq, 1] = by + y0
        continue
