"""The procedural object scenes (envs/assets/scenes.py, kernels/scenes.py), the offline default of
counting and referring_dot_pointing: determinism, counts, bounded occlusion, exact masks (the
compositor, the point test and an independent NumPy even-odd rasterizer agree), partial redraws,
unique referring expressions re-evaluated here from the object attributes, bad arguments."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from numba import njit

import visgym.envs.assets.scenes as S
from visgym.kernels import scene_generation as G
from visgym.kernels import scene_generation as G
from visgym.kernels import scenes as K
from visgym.render.atlas import PictureAtlas

T = S.TEMPLATES
pytestmark = pytest.mark.timeout(120)


def _bg(scenes, row, seed=0):
    h, w = int(scenes.height[row]), int(scenes.width[row])
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _counting(seeds, count=None, min_count=2, max_count=20):
    sc = S.new_scenes(len(seeds))
    for i, seed in enumerate(seeds):
        c, k = S.counting_choice(seed, min_count, max_count)
        S.generate_counting(sc, i, seed, c, k if count is None else count)
    return sc


def _referring(seeds):
    sc = S.new_scenes(len(seeds))
    texts = [S.generate_referring(sc, i, seed)[1] for i, seed in enumerate(seeds)]
    return sc, texts


def _row_fields(sc, row):
    return {f: np.array(getattr(sc, f)[row]) for f in S.Scenes._fields}


# --------------------------------------------------------------------------- vocabulary
def test_vocabulary_has_many_single_word_categories_and_named_colours():
    assert len(S.CATEGORIES) >= 14 and len(set(S.CATEGORIES)) == len(S.CATEGORIES)
    assert all(re.fullmatch(r"[a-z]+", c) for c in S.CATEGORIES)
    assert all(re.fullmatch(r"[a-z]+", c) for c in S.COLOURS)
    assert S.COLOUR_RGB.shape == (len(S.COLOURS), 3)
    assert T.cat_ring.shape == (len(S.CATEGORIES) + 1,)
    # every template lies within radius 1 (the compositor's quick reject relies on it)
    assert np.hypot(T.verts[:, 0], T.verts[:, 1]).max() <= 1.0 + 1e-12
    assert (T.area > 0.4).all()   # real filled silhouettes, holes subtracted
    assert S.background_count() >= 16


# --------------------------------------------------------------------------- determinism
def test_counting_scene_is_a_pure_function_of_seed_category_and_count():
    seeds = [3, 17, 2 ** 40 + 5, 91]
    a = S.new_scenes(1)
    big = S.new_scenes(9)
    for seed in seeds:
        c, k = S.counting_choice(seed, 5, 30)
        S.generate_counting(a, 0, seed, c, k)
        S.generate_counting(big, 7, seed, c, k)
        S.generate_counting_rows(big, [2], [seed], [c], [k])
        for row in (7, 2):
            for f, v in _row_fields(a, 0).items():
                np.testing.assert_array_equal(v, getattr(big, f)[row], err_msg=f)
    # a different count or category changes the scene
    S.generate_counting(a, 0, 3, 1, 5)
    S.generate_counting(big, 0, 3, 1, 6)
    assert not np.array_equal(a.cx[0], big.cx[0])


def test_referring_scene_is_a_pure_function_of_the_seed():
    a = S.new_scenes(1)
    big = S.new_scenes(6)
    for seed in (0, 1, 12345, 2 ** 63):
        t1, e1 = S.generate_referring(a, 0, seed)
        S.generate_referring_rows(big, [4], [seed])
        assert (t1, e1) == (int(big.target[4]), S.referring_expression(big, 4))
        for f, v in _row_fields(a, 0).items():
            np.testing.assert_array_equal(v, getattr(big, f)[4], err_msg=f)


def test_counting_choice_is_uniform_and_pure():
    picks = [S.counting_choice(s, 2, 20) for s in range(3000)]
    assert picks == [S.counting_choice(s, 2, 20) for s in range(3000)]
    cats = np.array([p[0] for p in picks])
    counts = np.array([p[1] for p in picks])
    assert set(cats) == set(range(len(S.CATEGORIES)))
    assert counts.min() == 2 and counts.max() == 20 and len(set(counts)) == 19
    assert np.bincount(cats).min() > 3000 / len(S.CATEGORIES) * 0.6
    assert S.counting_choice(7, 4, 4)[1] == 4


# --------------------------------------------------------------------------- counting scenes
@pytest.mark.parametrize("count", [0, 1, 2, 13, 30])
def test_counting_scene_holds_exactly_count_targets_and_distractors(count):
    for seed in range(12):
        c = seed % len(S.CATEGORIES)
        sc = S.new_scenes(1)
        S.generate_counting(sc, 0, seed, c, count)
        n = int(sc.n[0])
        cats = sc.cat[0, :n]
        assert (cats == c).sum() == count
        assert n <= S.MAX_OBJECTS and n - count >= (1 if count == 30 else 3)
        assert (sc.cat[0, n:] == 0).all() and (sc.size[0, n:] == 0).all()
        # objects stay inside the canvas; some are small
        r = sc.size[0, :n]
        assert (sc.cx[0, :n] - r >= 0).all() and (sc.cx[0, :n] + r <= sc.width[0]).all()
        assert (sc.cy[0, :n] - r >= 0).all() and (sc.cy[0, :n] + r <= sc.height[0]).all()


def test_counting_targets_keep_the_visible_fraction_and_are_sometimes_occluded():
    occluded = 0
    for seed in range(30):
        c, k = S.counting_choice(seed, 5, 30)
        sc = S.new_scenes(1)
        S.generate_counting(sc, 0, seed, c, k)
        owners = _owner_map(sc, 0)
        for t in np.flatnonzero(sc.cat[0, :sc.n[0]] == c):
            own = _silhouette(sc, 0, t).sum()
            vis = (owners == t).sum()
            assert vis >= S.MIN_TARGET_VISIBLE * own and vis >= S.MIN_TARGET_PIXELS, (seed, t)
            assert S.visible_fraction(sc, 0, t) == (vis, own)
            occluded += vis < own
    assert occluded >= 10   # occlusion happens, bounded


def test_counting_targets_interleave_with_distractors_in_painters_order():
    later_distractor_on_top = 0
    for seed in range(20):
        sc = _counting([seed], count=12)
        c = S.counting_choice(seed, 2, 20)[0]
        n = int(sc.n[0])
        is_t = sc.cat[0, :n] == c
        first, last = np.flatnonzero(is_t)[[0, -1]]
        later_distractor_on_top += (~is_t[first:last]).any()
    assert later_distractor_on_top >= 15


def test_distractors_include_similar_categories():
    hits = 0
    for seed in range(40):
        c, k = S.counting_choice(seed, 5, 10)
        sc = S.new_scenes(1)
        S.generate_counting(sc, 0, seed, c, k)
        similar = {S.CATEGORIES.index(s) for s in S.SIMILAR[S.CATEGORIES[c]]}
        hits += bool(similar & set(sc.cat[0, :sc.n[0]].tolist()))
    assert hits >= 25


def test_object_colours_stand_out_from_the_background_under_them():
    cells = S.background_cells()
    assert cells.shape == (S.background_key_count(), S.GRID, S.GRID, 3)
    key = 17
    cell_mean = S.background_picture_for_key(key)[:60, :80].reshape(-1, 3).mean(axis=0)
    assert np.abs(cells[key, 0, 0] - cell_mean).max() < 25   # the table describes the picture
    sc = _counting(list(range(40)), min_count=5, max_count=30)
    sr, _ = _referring(list(range(40)))
    checked = 0
    for scenes in (sc, sr):
        keys = S.background_keys(scenes)
        for b in range(scenes.n.shape[0]):
            h, w = int(scenes.height[b]), int(scenes.width[b])
            for k in range(int(scenes.n[b])):
                gi = min(int(scenes.cy[b, k] * S.GRID / h), S.GRID - 1)
                gj = min(int(scenes.cx[b, k] * S.GRID / w), S.GRID - 1)
                under = cells[keys[b], gi, gj]
                dist = np.sqrt(((S.COLOUR_RGB.astype(float) - under) ** 2).sum(axis=1))
                if dist.max() >= G.MIN_CONTRAST:
                    assert dist[scenes.colour[b, k]] >= G.MIN_CONTRAST
                    checked += 1
    assert checked > 500


def test_canvas_sizes_and_backgrounds_vary():
    sc = _counting(list(range(60)))
    sizes = set(zip(sc.height.tolist(), sc.width.tolist()))
    assert sizes == set(S.CANVAS_SIZES)
    assert len(set(sc.background.tolist())) >= 20


# --------------------------------------------------------------------------- exact masks
def _transformed(sc, row, k):
    c = int(sc.cat[row, k])
    v = T.verts[T.ring_start[T.cat_ring[c]]:T.ring_start[T.cat_ring[c + 1]]]
    a = sc.angle[row, k]
    ca, sa = np.cos(a), np.sin(a)
    x = sc.cx[row, k] + sc.size[row, k] * (ca * v[:, 0] - sa * v[:, 1])
    y = sc.cy[row, k] + sc.size[row, k] * (sa * v[:, 0] + ca * v[:, 1])
    rings = T.ring_start[T.cat_ring[c]:T.cat_ring[c + 1] + 1] - T.ring_start[T.cat_ring[c]]
    return x, y, rings


def _silhouette(sc, row, k):
    """Independent NumPy even-odd test of every pixel centre (written apart from the kernels)."""
    h, w = int(sc.height[row]), int(sc.width[row])
    x, y, rings = _transformed(sc, row, k)
    py, px = np.mgrid[0:h, 0:w] + 0.5
    inside = np.zeros((h, w), bool)
    for r0, r1 in zip(rings[:-1], rings[1:]):
        xr, yr = x[r0:r1], y[r0:r1]
        for (xa, ya, xb, yb) in zip(np.roll(xr, 1), np.roll(yr, 1), xr, yr):
            if ya == yb:
                continue
            lo, hi = min(ya, yb), max(ya, yb)
            band = (py[:, :1] >= lo) & (py[:, :1] < hi)
            rows = np.flatnonzero(band[:, 0])
            if rows.size == 0:
                continue
            yc = py[rows, :1]
            xi = xa + (yc - ya) * (xb - xa) / (yb - ya)
            inside[rows] ^= xi < px[rows]
    return inside


def _owner_map(sc, row):
    owners = np.full((int(sc.height[row]), int(sc.width[row])), -1)
    for k in range(int(sc.n[row])):
        owners[_silhouette(sc, row, k)] = k
    return owners


@njit
def _kernel_owner_map(n, cat, cx, cy, size, angle, tv, tr, tc, row, out):
    for y in range(out.shape[0]):
        for x in range(out.shape[1]):
            out[y, x] = K.owner_at(n, cat, cx, cy, size, angle, tv, tr, tc, row, x, y)


def _flat_colour_draw(sc, row):
    """Draw row with unshaded unique colours (light (0, 0), no shadow offset) on black; return
    the owner of every pixel read back from the colours."""
    sc.light[row] = 0.0
    sc.shadow[row] = 0
    n = int(sc.n[row])
    for k in range(n):
        sc.rgb[row, k] = (3 + 5 * k, 255 - 5 * k, 128)
    h, w = int(sc.height[row]), int(sc.width[row])
    frame = np.full((h + 7, w + 5, 3), 77, np.uint8)
    S.draw(sc, row, frame, np.zeros((h, w, 3), np.uint8))
    assert (frame[h:] == 77).all() and (frame[:, w:] == 77).all()   # nothing outside the canvas
    frame = frame[:h, :w]
    owners = np.full((h, w), -1)
    for k in range(n):
        owners[(frame == sc.rgb[row, k]).all(axis=2)] = k
    known = (owners >= 0) | (frame == 0).all(axis=2)
    assert known.all(), "a pixel of neither an object's fill colour nor the background"
    return owners


@pytest.mark.parametrize("kind", ["counting", "referring"])
def test_owner_at_agrees_with_the_rasterizer_on_every_pixel(kind):
    for seed in (5, 8, 21):
        sc = _counting([seed], min_count=5, max_count=30) if kind == "counting" \
            else _referring([seed])[0]
        drawn = _flat_colour_draw(sc, 0)
        kernel = np.empty_like(drawn)
        _kernel_owner_map(sc.n, sc.cat, sc.cx, sc.cy, sc.size, sc.angle, T.verts, T.ring_start,
                          T.cat_ring, 0, kernel)
        np.testing.assert_array_equal(kernel, drawn)
        # the independent NumPy even-odd rasterizer (its own sin/cos) agrees up to rounding
        assert (_owner_map(sc, 0) == drawn).mean() > 0.9995
        for x, y in ((0, 0), (int(sc.width[0]) - 1, int(sc.height[0]) - 1), (100, 200)):
            assert S.owner_at(sc, 0, x, y) == drawn[y, x]


def test_pixel_centres_exactly_on_edges_and_vertices_follow_one_rule():
    """Axis-aligned diamonds and hexagons (exact unit vertices) at half-integer centres put
    crossings exactly on pixel centres: the compositor, owner_at and the NumPy rule agree."""
    sc = S.new_scenes(1)
    sc.height[0], sc.width[0] = 120, 160
    placed = []
    for i, (name, size) in enumerate([("diamond", 8), ("hexagon", 10), ("diamond", 16),
                                      ("hexagon", 6), ("diamond", 5), ("hexagon", 20)]):
        placed.append((S.CATEGORIES.index(name), 20.5 + 24 * i, 30.5 + 40 * (i % 2), size))
    placed.append((S.CATEGORIES.index("diamond"), 100.0, 90.0, 12.0))   # integer centre
    sc.n[0] = len(placed)
    for k, (c, x, y, size) in enumerate(placed):
        sc.cat[0, k], sc.cx[0, k], sc.cy[0, k], sc.size[0, k] = c, x, y, size
    drawn = _flat_colour_draw(sc, 0)
    kernel = np.empty_like(drawn)
    _kernel_owner_map(sc.n, sc.cat, sc.cx, sc.cy, sc.size, sc.angle, T.verts, T.ring_start,
                      T.cat_ring, 0, kernel)
    np.testing.assert_array_equal(kernel, drawn)
    np.testing.assert_array_equal(_owner_map(sc, 0), drawn)   # angle 0: exact sin/cos
    # the half-open rule: the top vertex of a diamond at a pixel centre is not filled
    assert drawn[int(30.5 - 8), 20] == -1 and drawn[int(30.5 - 8) + 1, 20] == 0


def test_visible_mask_and_visible_point():
    sc = _counting([4, 9], min_count=10, max_count=30)
    for row in range(2):
        drawn = _flat_colour_draw(sc, row)
        for k in range(int(sc.n[row])):
            mask = S.visible_mask(sc, row, k)
            np.testing.assert_array_equal(mask, drawn == k)
            x, y = S.visible_point(sc, row, k)
            if mask.any():
                assert mask[y, x]
                # well inside: its 3x3 neighbourhood is in the mask for any sizeable object
                if mask.sum() >= 150:
                    assert mask[y - 1:y + 2, x - 1:x + 2].all()
                ys, xs = np.nonzero(mask)
                cx, cy = int(np.floor(xs.mean() + 0.5)), int(np.floor(ys.mean() + 0.5))
                if mask[cy - 2:cy + 3, cx - 2:cx + 3].sum() == 25:
                    assert (x, y) == (cx, cy)   # the visible centroid when well inside
            else:
                assert (x, y) == (-1, -1)
        ks = np.arange(int(sc.n[row]))[::-1]
        np.testing.assert_array_equal(S.visible_points(sc, row, ks),
                                      [S.visible_point(sc, row, int(k)) for k in ks])
        # the single-object kernels (visible_point, visible_stats) agree with the batched one
        geom = (sc.height, sc.width) + S.geometry_fields(sc)
        np.testing.assert_array_equal(S.visible_points(sc, row, ks),
                                      [K.visible_point(*geom, row, int(k)) for k in ks])
        for k in ks[:6]:
            vis, own, _, _ = K.visible_stats(*geom, row, int(k))
            assert vis == int(S.visible_mask(sc, row, int(k)).sum())
            assert (vis, own) == S.visible_fraction(sc, row, int(k))
        c = int(sc.cat[row, 0])
        np.testing.assert_array_equal(S.target_indices(sc, row, c),
                                      np.flatnonzero(sc.cat[row, :sc.n[row]] == c))


def test_flat_lit_objects_show_their_exact_fill_colour_and_shading_varies_otherwise():
    sc = _counting([11], count=6)
    bg = _bg(sc, 0)
    h, w = int(sc.height[0]), int(sc.width[0])
    frame = S.draw(sc, 0, np.zeros((h, w, 3), np.uint8), bg)
    colours = np.unique(frame.reshape(-1, 3), axis=0)
    assert len(colours) > 5000   # a photograph plus shaded objects, not flat fills
    for k in range(int(sc.n[0])):
        mask = S.visible_mask(sc, 0, k)
        if mask.sum() > 400:
            assert len(np.unique(frame[mask], axis=0)) >= 4   # the light gradient
    # shadows darken the background next to objects, never brighten it
    obj = np.zeros((h, w), bool)
    for k in range(int(sc.n[0])):
        obj |= S.visible_mask(sc, 0, k)
    changed = (frame != bg).any(axis=2) & ~obj
    assert changed.sum() > 50
    assert (frame[changed].astype(int) <= bg[changed]).all()


# --------------------------------------------------------------------------- drawing
def test_partial_redraw_equals_the_full_draw_in_the_rect():
    rng = np.random.default_rng(0)
    for kind, seed in (("counting", 2), ("counting", 33), ("referring", 6)):
        sc = _counting([seed], min_count=5, max_count=30) if kind == "counting" \
            else _referring([seed])[0]
        h, w = int(sc.height[0]), int(sc.width[0])
        bg = _bg(sc, 0, seed)
        full = S.draw(sc, 0, np.zeros((h, w, 3), np.uint8), bg)
        rects = [(0, 0, w, h), (-5, -5, 3, 4), (w - 11, h - 11, w + 20, h + 20)]
        for _ in range(60):
            x, y = int(rng.integers(-5, w)), int(rng.integers(-5, h))
            side = int(rng.choice([1, 11, 37]))
            rects.append((x, y, x + side, y + side))
        for k in range(min(int(sc.n[0]), 10)):   # rects on object edges
            x, y = int(sc.cx[0, k] + sc.size[0, k] * 0.9), int(sc.cy[0, k])
            rects.append((x - 5, y - 5, x + 6, y + 6))
        for (x0, y0, x1, y1) in rects:
            noise = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
            part = S.draw(sc, 0, noise.copy(), bg, (x0, y0, x1, y1))
            inside = np.zeros((h, w), bool)
            inside[max(y0, 0):max(y1, 0), max(x0, 0):max(x1, 0)] = True
            np.testing.assert_array_equal(part[inside], full[inside])
            np.testing.assert_array_equal(part[~inside], noise[~inside])


def test_batched_atlas_draw_equals_single_draws():
    sc = _counting([1, 2, 3], min_count=5, max_count=30)
    sr, _ = _referring([4, 5])
    both = S.new_scenes(5)
    for f in S.Scenes._fields:
        getattr(both, f)[:3] = getattr(sc, f)
        getattr(both, f)[3:] = getattr(sr, f)
    canvas = [S.CANVAS_SIZES.index((int(h), int(w))) for h, w in zip(both.height, both.width)]
    key = np.array([b * len(S.CANVAS_SIZES) + c for c, b in zip(canvas, both.background)],
                   np.int64)
    np.testing.assert_array_equal(S.background_keys(both), key)
    assert (S.background_keys(S.new_scenes(2)) == -1).all()
    atlas = PictureAtlas(S.background_picture_for_key, S.background_key_count())
    frames = np.zeros((5, 640, 640, 3), np.uint8)
    S.draw_rows(frames, np.arange(5), atlas, key, both)
    for b in range(5):
        h, w = int(both.height[b]), int(both.width[b])
        bg = S.background_picture(int(both.background[b]), h, w)
        np.testing.assert_array_equal(bg, S.background_picture_for_key(int(key[b])))
        ref = S.draw(both, b, np.zeros((h, w, 3), np.uint8), bg)
        np.testing.assert_array_equal(frames[b, :h, :w], ref)
        assert (frames[b, h:] == 0).all() and (frames[b, :, w:] == 0).all()
        # the raw kernel with the field helpers draws the same
        raw = np.zeros((1, 640, 640, 3), np.uint8)
        K.draw_scene(raw[0], bg, *S.draw_fields(both), b, 0, 0, w, h)
        np.testing.assert_array_equal(raw[0, :h, :w], ref)
    # region redraws through the batched kernel
    before = frames.copy()
    frames[:] = 9
    rects = np.array([[0, 0, 11, 11], [100, 50, 111, 61], [5, 5, 6, 6], [630, 470, 700, 700],
                      [20, 30, 31, 41]], np.int32)
    S.draw_rows(frames, np.arange(5), atlas, key, both, rects, ensure=False)
    for b, (x0, y0, x1, y1) in enumerate(rects):
        x1, y1 = min(x1, int(both.width[b])), min(y1, int(both.height[b]))
        np.testing.assert_array_equal(frames[b, y0:y1, x0:x1], before[b, y0:y1, x0:x1])


def test_background_pictures_are_photos_of_the_canvas_size():
    seen = set()
    for bg_id in range(0, S.background_count(), 5):
        for h, w in S.CANVAS_SIZES:
            p = S.background_picture(bg_id, h, w)
            assert p.shape == (h, w, 3) and p.dtype == np.uint8
            seen.add(p[::37, ::41].tobytes())
    assert len(seen) == len(range(0, S.background_count(), 5)) * len(S.CANVAS_SIZES)
    np.testing.assert_array_equal(S.background_picture(3, 480, 640),
                                  S.background_picture(3, 480, 640))


# --------------------------------------------------------------------------- referring
_SIZE = {"bigger": ("big", 2), "smaller": ("small", 2), "biggest": ("big", 3),
         "smallest": ("small", 3)}
_POS = ("on the left", "on the right", "at the top", "at the bottom", "in the middle")
_REL = ("next to", "above", "below", "left of", "right of")


def _parse_np(text):
    words = text.split(" ")
    if len(words) == 1 and words[0] in S.CATEGORIES:
        return None, S.CATEGORIES.index(words[0])
    if len(words) == 2 and words[0] in S.COLOURS and words[1] in S.CATEGORIES:
        return S.COLOURS.index(words[0]), S.CATEGORIES.index(words[1])
    raise AssertionError(f"not a noun phrase: {text!r}")


def _referents(sc, row, text):
    """The objects ``text`` refers to, evaluated here from the objects' attributes with the
    rules of S.EXPRESSION_RULES (each candidate o taken as the referent in turn)."""
    n = int(sc.n[row])
    W, H = float(sc.width[row]), float(sc.height[row])
    cat, col = sc.cat[row, :n].astype(int), sc.colour[row, :n].astype(int)
    x, y, s = sc.cx[row, :n], sc.cy[row, :n], sc.size[row, :n]

    def matches(np_):
        colour, c = np_
        return [o for o in range(n) if cat[o] == c and (colour is None or col[o] == colour)]

    m = re.fullmatch(rf"(.+) ({'|'.join(_REL)}) the (.+)", text)
    if m:
        anchors = matches(_parse_np(m.group(3)))
        assert len(anchors) == 1, "the anchor phrase must name exactly one object"
        a = anchors[0]
        K_ = [o for o in matches(_parse_np(m.group(1))) if o != a]
        rel, g = m.group(2), 0.08 * min(W, H)

        def holds(o, strong):
            dx, dy = x[o] - x[a], y[o] - y[a]
            along, across = {"above": (-dy, dx), "below": (dy, dx), "left of": (-dx, dy),
                             "right of": (dx, dy)}[rel]
            if strong:
                return along >= g and abs(across) <= abs(along)
            return along > 0 and abs(across) < 1.5 * abs(along)

        out = []
        for t in K_:
            others = [o for o in K_ if o != t]
            if rel == "next to":
                d = np.hypot(x[t] - x[a], y[t] - y[a])
                ok = d <= 1.6 * (s[t] + s[a]) and all(
                    np.hypot(x[o] - x[a], y[o] - y[a]) >= 2 * d for o in others)
                if ok:   # plain sense: the nearest candidate to the anchor
                    assert all(np.hypot(x[o] - x[a], y[o] - y[a]) > d for o in others)
            else:
                ok = holds(t, True) and not any(holds(o, False) for o in others)
            if ok:
                out.append(t)
        return out
    m = re.fullmatch(rf"(.+) ({'|'.join(_POS)})", text)
    if m:
        K_ = matches(_parse_np(m.group(1)))
        assert len(K_) >= 2
        gx, gy = 0.1 * W, 0.1 * H
        out = []
        for t in K_:
            others = [o for o in K_ if o != t]
            ok = {"on the left": all(x[t] + gx <= x[o] for o in others),
                  "on the right": all(x[t] >= x[o] + gx for o in others),
                  "at the top": all(y[t] + gy <= y[o] for o in others),
                  "at the bottom": all(y[t] >= y[o] + gy for o in others),
                  "in the middle": len(K_) == 3 and sum(x[o] + gx <= x[t] for o in others) == 1
                  and sum(x[o] >= x[t] + gx for o in others) == 1}[m.group(2)]
            if ok:
                out.append(t)
        return out
    m = re.fullmatch(r"(bigger|smaller|biggest|smallest) (.+)", text)
    if m:
        K_ = matches(_parse_np(m.group(2)))
        kind, size_of_set = _SIZE[m.group(1)]
        assert len(K_) == 2 if size_of_set == 2 else len(K_) >= 3
        out = []
        for t in K_:
            others = [o for o in K_ if o != t]
            if kind == "big" and all(s[t] >= 1.3 * s[o] for o in others):
                out.append(t)
            if kind == "small" and all(1.3 * s[t] <= s[o] for o in others):
                out.append(t)
        return out
    return matches(_parse_np(text))


def test_every_referring_expression_picks_out_exactly_its_target():
    seeds = list(range(400))
    sc, texts = _referring(seeds)
    kinds = {"np": 0, "colour": 0, "size": 0, "position": 0, "relation": 0}
    same_category = 0
    for row, text in enumerate(texts):
        t = int(sc.target[row])
        assert _referents(sc, row, text) == [t], (row, text)
        n = int(sc.n[row])
        assert 4 <= n <= 10
        same_category += (sc.cat[row, :n] == sc.cat[row, t]).sum() >= 2
        vis, own = S.visible_fraction(sc, row, t)
        assert vis >= S.MIN_REFERRED_VISIBLE * own
        if re.search(rf" ({'|'.join(_REL)}) the ", text):
            kinds["relation"] += 1
        elif re.search(rf" ({'|'.join(_POS)})$", text):
            kinds["position"] += 1
        elif text.split(" ")[0] in _SIZE:
            kinds["size"] += 1
        elif text.split(" ")[0] in S.COLOURS:
            kinds["colour"] += 1
        else:
            kinds["np"] += 1
    assert min(kinds.values()) >= 10, kinds
    assert kinds["colour"] + kinds["size"] > len(seeds) / 3, kinds   # attribute phrases first
    assert same_category >= 0.6 * len(seeds)
    counts = [int(v) for v in sc.n]
    assert min(counts) == 4 and max(counts) == 10 and np.mean(counts) > 6


def test_referring_expression_text_is_recomputed_from_the_stored_code():
    sc, texts = _referring([10, 11, 12])
    for row, text in enumerate(texts):
        assert S.referring_expression(sc, row) == text
        assert S.referring_expression(sc, row, int(sc.target[row])) == text
    with pytest.raises(ValueError, match="target"):
        S.referring_expression(sc, 0, (int(sc.target[0]) + 1) % int(sc.n[0]))
    empty = S.new_scenes(1)
    with pytest.raises(ValueError, match="row"):
        S.referring_expression(empty, 0)


# --------------------------------------------------------------------------- bad arguments
def test_bad_arguments_raise_value_errors_naming_the_argument():
    sc = S.new_scenes(2)
    S.generate_counting(sc, 0, 1, 0, 3)
    cases = [
        (lambda: S.new_scenes(-1), "batch"),
        (lambda: S.new_scenes(2.0), "batch"),
        (lambda: S.generate_counting(sc, 2, 1, 0, 3), "row"),
        (lambda: S.generate_counting(sc, 0, -1, 0, 3), "seed"),
        (lambda: S.generate_counting(sc, 0, "1", 0, 3), "seed"),
        (lambda: S.generate_counting(sc, 0, 1, len(S.CATEGORIES), 3), "category"),
        (lambda: S.generate_counting(sc, 0, 1, 0, 31), "count"),
        (lambda: S.generate_counting(sc, 0, 1, 0, True), "count"),
        (lambda: S.generate_counting("x", 0, 1, 0, 3), "scenes"),
        (lambda: S.generate_counting_rows(sc, [0, 1], [1], [0], [1]), "rows"),
        (lambda: S.generate_counting_rows(sc, [0], [-3], [0], [1]), "seeds"),
        (lambda: S.generate_referring_rows(sc, [0], [1.5]), "seeds"),
        (lambda: S.generate_referring_rows(sc, [0], [2 ** 64]), "seeds"),
        (lambda: S.counting_choice(1, 5, 4), "max_count"),
        (lambda: S.counting_choice(1, -1, 4), "min_count"),
        (lambda: S.generate_referring(sc, 5, 1), "row"),
        (lambda: S.background_picture(S.background_count(), 480, 640), "bg_id"),
        (lambda: S.background_picture(0, 0, 640), "height"),
        (lambda: S.owner_at(sc, 0, -1, 0), "x"),
        (lambda: S.owner_at(sc, 0, 0, 10 ** 6), "y"),
        (lambda: S.visible_mask(sc, 0, 99), "k"),
        (lambda: S.visible_point(sc, 0, -1), "k"),
        (lambda: S.visible_points(sc, 0, [0, 99]), "ks"),
        (lambda: S.target_indices(sc, 0, -1), "category"),
        (lambda: S.visible_mask(sc, 0, 0, np.zeros((3, 3), bool)), "out"),
        (lambda: S.draw(sc, 0, np.zeros((10, 10, 3), np.uint8), _bg(sc, 0)), "frame"),
        (lambda: S.draw(sc, 0, np.zeros((640, 640, 3), np.uint8), np.zeros((5, 5, 3), np.uint8)),
         "bg"),
        (lambda: S.draw(sc, 0, np.zeros((640, 640, 3), np.uint8), _bg(sc, 0), (1, 2, 3)), "rect"),
        (lambda: S.draw_rows(np.zeros((1, 640, 640, 3), np.uint8), [0], None, [0], sc), "frames"),
        (lambda: S.background_picture_for_key(S.background_key_count()), "key"),
        (lambda: S.draw_rows(np.zeros((2, 640, 640, 3), np.uint8), [0], PictureAtlas(
            S.background_picture_for_key, S.background_key_count()), S.background_keys(sc), sc,
            ensure=False), "bg_key"),
    ]
    for call, name in cases:
        with pytest.raises(ValueError, match=name):
            call()


def test_first_run_kernels_compile_one_specialization_each(tmp_path):
    """The kernels a family's first run compiles get one signature each (a literal argument,
    e.g. ``placed`` starting at 0, once made Numba compile ``_options`` twice, which the cold
    first run of referring_dot_pointing paid for). In a fresh process with an empty Numba cache,
    so that the helpers are really compiled."""
    code = """
import json
import numpy as np
import visgym.envs.assets.scenes as S
from visgym.kernels import scene_generation as G
from visgym.kernels import scenes as K
from visgym.render.atlas import PictureAtlas
sc = S.new_scenes(3)
S.generate_counting_rows(sc, [0], [11], [2], [0])
S.generate_counting_rows(sc, [1], [12], [5], [20])
S.generate_referring_rows(sc, [2], [13])
atlas = PictureAtlas(S.background_picture_for_key, S.background_key_count())
frames = np.zeros((3, 640, 640, 3), np.uint8)
S.draw_rows(frames, np.arange(3), atlas, S.background_keys(sc), sc)
S.draw(sc, 2, np.zeros((640, 640, 3), np.uint8),
       S.background_picture_for_key(int(S.background_keys(sc)[2])), (3, 4, 50, 60))
S.visible_points(sc, 1, S.target_indices(sc, 1, 5))
S.visible_point(sc, 0, 0)
S.visible_mask(sc, 2, 0)
S.owner_at(sc, 2, 10, 10)
print(json.dumps({name: len(getattr(M, name).signatures) for M in (K, G) for name in dir(M)
                  if hasattr(getattr(M, name), "signatures")}))
"""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=100, check=True).stdout
    counts = json.loads(out.strip().splitlines()[-1])
    for name in ("generate_counting_rows", "generate_referring_rows", "_options", "_coverage",
                 "_transform", "_crossings", "draw_scenes_rows", "visible_points",
                 "visible_mask", "owner_at", "_below", "_uniform"):
        assert counts[name] == 1, (name, counts)
    assert max(counts.values()) == 1, counts
