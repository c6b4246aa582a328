"""Numba kernels that generate the procedural object scenes (envs/assets/scenes.py): the
counting scenes (``generate_counting_rows``) and the referring scenes with
their checked expressions (``generate_referring_rows``; the expression codes ``EXPR_*`` and the
margins of each template below, stated in words in ``scenes.EXPRESSION_RULES``).

Geometry, the exact point test and the compositor live in kernels/scenes.py; generation uses
its ``_transform`` / ``_crossings`` / span rules, so a scene's occlusion checks count exactly
the pixels the compositor draws. Every kernel is ``cache=True, nogil=True``; the per-episode
generators draw from kernels/rng.py (SplitMix64 seeded by the episode seed alone), so a scene
is a pure function of its seed (and, for counting, the category and count asked). The
compile-time rules of kernels/scenes.py apply here too: few, flat entry points, ``np.int64``
arguments where a literal would compile a second specialization, int64 / float64 scratch only.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .rng import seed_state
from .scenes import (MAX_CROSS, MAX_VERTS, _below, _crossings, _row_range, _span_end,
                     _span_start, _transform, _uniform)

STREAM_COUNTING = np.uint64(0x5C0E11)
STREAM_REFERRING = np.uint64(0x5C0E13)


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
