"""Numba kernels of the procedural object scenes (envs/assets/scenes.py): geometry, the
compositor, the exact point test and visible masks (generation: kernels/scene_generation.py).

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

from .rng import below, uniform01

MAX_VERTS = 128       # most vertices of one category template
MAX_CROSS = 64        # most edge crossings of one row (one category)
SHADOW_KEEP = 205     # x/256 kept under each shadow layer
GRADIENT = 0.32       # brightness change per template unit along the light
SHADE_MIN = 0.62      # brightness factor range of the gradient
SHADE_MAX = 1.38
BAND = 16             # the compositor works in bands of this many rows
SHADE_LEVELS = 77    # gradient levels (a colour table per object); level 38 is f = 1


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
