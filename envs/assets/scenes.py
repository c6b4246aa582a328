"""The offline default scenes of counting and referring_dot_pointing: procedural object scenes.

The reference families show COCO photographs with LVIS (counting) or RefCOCO+ (referring)
annotations. No package ships those data sets, so by default the two families draw their own
scenes (spec counting.md and referring_dot_pointing.md, section 4 "Offline substitute"): a
photographic background (one of the CC0 / public-domain photos of ``images.builtin_source()``,
cropped, possibly mirrored and resized to the canvas; ``background_count()`` variants) with
filled object silhouettes composited over it in painter's order. There are ``len(CATEGORIES)``
nameable categories (star, heart, key, cup, ...), each drawn from its own polygon template
(several rings, even-odd fill for holes), with varied scale (some small), rotation and a named
colour (``COLOURS``) jittered per object, shaded by a linear light gradient across the object and
a two-step soft drop shadow away from the scene's light; an object's named colour is chosen to
stand out from the background under it (``background_cells``: mean colours of an 8 x 8 grid
of every background). Partial occlusion is allowed but bounded.

How they differ from COCO photographs: the objects are flat, rigid silhouettes of a small closed
vocabulary pasted over a photo, not photographed objects in a 3-D scene; there is no perspective,
texture, articulation or lighting interplay beyond the gradient and the shadow; the background
never contains instances of a category (it is a photo of something else); every annotation is
exact (masks and centres come from the compositor itself, never from a human annotator), so
every target is countable and every expression is verified to refer to exactly one object.

Exact masks: pixel (x, y) belongs to an object iff the pixel centre (x + 0.5, y + 0.5) lies
inside its transformed polygon by the even-odd rule; the rasterizer and the point test
(``owner_at``) compute the very same float expressions (kernels/scenes.py), so the visible mask
of an object (``visible_mask``: the pixels whose top-most owner it is) is exactly what was drawn.

A scene is a pure function of its seed (for counting also of the asked category and count):
identical on every call and independent of the batch it is generated in. Geometry lives in a
fixed-shape batched ``Scenes`` (leading batch axis) that a family embeds in its State.

Counting scenes (``generate_counting``): ``count`` instances of the target category (0..30) and
distractors of other categories (often similar-looking ones), at most ``MAX_OBJECTS`` in all,
interleaved in painter's order; every target keeps at least ``MIN_TARGET_VISIBLE`` of its own
pixels visible and at least ``MIN_TARGET_PIXELS`` pixels (checked exactly at generation).

Referring scenes (``generate_referring``): 4-10 objects, usually with same-category distractors,
and a template expression in the RefCOCO+ manner (attribute phrases preferred) evaluated as a
predicate over all objects during generation so that it picks out exactly one object. The
expression semantics (what each template means, with its margins) are stated in
``EXPRESSION_RULES`` below; ``referring_expression`` formats the stored expression code.

API: ``new_scenes``; ``counting_choice``, ``generate_counting[_rows]``,
``generate_referring[_rows]``, ``referring_expression``; ``background_count``,
``background_picture`` and the key helpers (``background_keys``, ``background_key_count``,
``background_picture_for_key``: key = variant * len(CANVAS_SIZES) + canvas index);
``draw`` (one frame over a given background), ``draw_rows`` (a batch, backgrounds from a
render.atlas.PictureAtlas); ``owner_at``, ``visible_mask``, ``visible_point[s]``,
``visible_fraction``, ``target_indices``; ``draw_fields`` / ``geometry_fields`` give the
argument tuples of the Numba kernels in kernels/scenes.py for callers that compile their own
loops. Bad arguments raise ValueError naming the argument.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...core.cache import BoundedCache
from ...kernels import scene_generation as _g
from ...kernels import scenes as _k
# The generators by name too: bridges/warmup.is_cold finds a family's kernels through the
# names of the modules it uses.
from ...kernels.scene_generation import (generate_counting_rows as _generate_counting_rows,
                                         generate_referring_rows as _generate_referring_rows)

__all__ = [
    "CATEGORIES", "COLOURS", "COLOUR_RGB", "CANVAS_SIZES", "MAX_OBJECTS", "MAX_COUNT",
    "MIN_TARGET_VISIBLE", "MIN_TARGET_PIXELS", "MIN_REFERRED_VISIBLE", "EXPRESSION_RULES",
    "Scenes", "new_scenes", "counting_choice", "generate_counting", "generate_counting_rows",
    "generate_referring", "generate_referring_rows", "referring_expression",
    "background_count", "background_picture", "draw", "draw_rows", "owner_at", "visible_mask",
    "visible_point", "visible_fraction", "TEMPLATES", "SIMILAR", "geometry_fields",
    "draw_fields", "background_key_count", "background_keys", "background_picture_for_key",
    "visible_points", "target_indices", "background_cells", "GRID",
]

MAX_OBJECTS = 48
MAX_COUNT = 30
CANVAS_SIZES = ((480, 640), (640, 480), (512, 512))   # (height, width)
MIN_TARGET_VISIBLE = 0.55      # counting: a target keeps this fraction of its pixels visible
MIN_TARGET_PIXELS = 90         # ... and at least this many visible pixels
MIN_REFERRED_VISIBLE = 0.70    # referring: the referred object keeps this fraction visible

# --------------------------------------------------------------------------- vocabulary
COLOURS = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "white", "black",
           "brown", "grey")
COLOUR_RGB = np.array([
    (214, 38, 38), (243, 133, 28), (246, 212, 40), (46, 158, 64), (36, 92, 214),
    (128, 56, 178), (240, 118, 178), (238, 238, 234), (28, 28, 30), (128, 78, 38),
    (128, 128, 128)], dtype=np.uint8)
COLOUR_RGB.setflags(write=False)


def _circle(cx, cy, r, n=32):
    return [(cx + r * math.cos(2 * math.pi * i / n), cy + r * math.sin(2 * math.pi * i / n))
            for i in range(n)]


def _arc(cx, cy, r, a0, a1, n):
    return [(cx + r * math.cos(a0 + (a1 - a0) * i / (n - 1)),
             cy + r * math.sin(a0 + (a1 - a0) * i / (n - 1))) for i in range(n)]


def _crescent(r1, c2x, c2y, r2, n=28):
    """Disk (0, 0, r1) minus disk (c2, r2) as one ring (the disks must cross)."""
    d = math.hypot(c2x, c2y)
    a = (r1 * r1 - r2 * r2 + d * d) / (2 * d)
    h = math.sqrt(r1 * r1 - a * a)
    ux, uy = c2x / d, c2y / d
    p1 = (a * ux - h * uy, a * uy + h * ux)
    p2 = (a * ux + h * uy, a * uy - h * ux)
    a1 = math.atan2(p1[1], p1[0]); a2 = math.atan2(p2[1], p2[0])
    # outer arc from p1 to p2 the long way (away from the cut), inner arc back inside disk 1
    if a2 <= a1:
        a2 += 2 * math.pi
    outer = _arc(0, 0, r1, a1, a2, n)
    b1 = math.atan2(p2[1] - c2y, p2[0] - c2x); b2 = math.atan2(p1[1] - c2y, p1[0] - c2x)
    if b2 >= b1:
        b2 -= 2 * math.pi
    inner = _arc(c2x, c2y, r2, b1, b2, n)[1:-1]
    ring = outer + inner
    mid = ring[n // 2]
    if math.hypot(mid[0] - c2x, mid[1] - c2y) < r2:   # took the wrong way round
        raise AssertionError("crescent construction")
    return ring


def _templates():
    """Category -> list of rings (y points down, as in images)."""
    t = {}
    t["star"] = [[(math.cos(-math.pi / 2 + k * math.pi / 5) * (1.0 if k % 2 == 0 else 0.42),
                   math.sin(-math.pi / 2 + k * math.pi / 5) * (1.0 if k % 2 == 0 else 0.42))
                  for k in range(10)]]
    heart = []
    for i in range(40):
        s = 2 * math.pi * i / 40
        heart.append((16 * math.sin(s) ** 3,
                      -(13 * math.cos(s) - 5 * math.cos(2 * s) - 2 * math.cos(3 * s)
                        - math.cos(4 * s))))
    t["heart"] = [heart]
    t["triangle"] = [[(math.cos(-math.pi / 2 + k * 2 * math.pi / 3),
                       math.sin(-math.pi / 2 + k * 2 * math.pi / 3)) for k in range(3)]]
    t["ring"] = [_circle(0, 0, 1.0, 36), _circle(0, 0, 0.58, 36)]
    t["arrow"] = [[(-1.0, -0.17), (0.25, -0.17), (0.25, -0.52), (1.0, 0.0), (0.25, 0.52),
                   (0.25, 0.17), (-1.0, 0.17)]]
    # key: round bow with a hole, shaft with two teeth
    r_bow, hw = 0.42, 0.1
    a0 = math.asin(hw / r_bow)
    bow = _arc(-0.55, 0.0, r_bow, a0, 2 * math.pi - a0, 26)
    bow_end = bow[-1]
    key = bow + [(1.0, -hw), (1.0, hw + 0.3), (0.82, hw + 0.3), (0.82, hw), (0.62, hw),
                 (0.62, hw + 0.22), (0.46, hw + 0.22), (0.46, hw), (bow[0][0], bow[0][1])]
    del bow_end
    key = [(x, -y) for (x, y) in key]
    t["key"] = [key, _circle(-0.55, 0.0, 0.18, 20)]
    # cup: tapered body plus a C-shaped handle on the right
    body = [(-0.62, -0.55), (0.38, -0.55), (0.38, 0.40), (0.30, 0.58), (-0.54, 0.58),
            (-0.62, 0.40)]
    handle = _arc(0.38, -0.02, 0.42, -math.pi / 2, math.pi / 2, 16) + \
        _arc(0.38, -0.02, 0.22, math.pi / 2, -math.pi / 2, 12)
    t["cup"] = [body, handle]
    up = [(0.95 - 1.6 * u, -0.46 * math.sin(math.pi * u)) for u in np.linspace(0, 0.95, 18)]
    low = [(-0.7 + 1.6 * u, 0.46 * math.sin(math.pi * u)) for u in np.linspace(0.05, 1.0, 18)]
    t["leaf"] = [up + [(-0.70, -0.045), (-1.0, -0.045), (-1.0, 0.045), (-0.70, 0.045)] + low[:-1]]
    t["crescent"] = [_crescent(1.0, 0.48, -0.22, 0.82)]
    w = 0.3
    t["cross"] = [[(-w, -1), (w, -1), (w, -w), (1, -w), (1, w), (w, w), (w, 1), (-w, 1),
                   (-w, w), (-1, w), (-1, -w), (-w, -w)]]
    t["diamond"] = [[(0, -1.0), (0.62, 0), (0, 1.0), (-0.62, 0)]]
    t["hexagon"] = [[(math.cos(k * math.pi / 3), math.sin(k * math.pi / 3)) for k in range(6)]]
    # bell: dome, flared lip, clapper below, a loop on top (separate rings: even-odd)
    bell = [(-0.75, 0.45), (-0.55, 0.2), (-0.5, -0.2)] + \
        _arc(0, -0.2, 0.5, math.pi, 2 * math.pi, 14)[1:-1] + \
        [(0.5, -0.2), (0.55, 0.2), (0.75, 0.45), (0.75, 0.56), (-0.75, 0.56)]
    t["bell"] = [bell, _circle(0, 0.76, 0.16, 16), _circle(0, -0.85, 0.13, 14),
                 _circle(0, -0.85, 0.06, 10)]
    # house: roof with a chimney, a door notch and a window hole
    t["house"] = [[(-0.7, 0.8), (-0.7, -0.1), (-0.88, -0.1), (0.0, -0.85), (0.42, -0.48),
                   (0.42, -0.8), (0.62, -0.8), (0.62, -0.31), (0.88, -0.1), (0.7, -0.1),
                   (0.7, 0.8), (0.18, 0.8), (0.18, 0.25), (-0.18, 0.25), (-0.18, 0.8)],
                  [(-0.52, 0.02), (-0.3, 0.02), (-0.3, 0.26), (-0.52, 0.26)]]
    body = [(0.05 + 0.62 * math.cos(s), 0.42 * math.sin(s))
            for s in np.linspace(math.pi * 0.82, -math.pi * 0.82, 30)]
    t["fish"] = [body + [(-0.95, -0.45), (-0.75, 0.0), (-0.95, 0.45)],
                 _circle(0.36, -0.1, 0.07, 10)]
    # umbrella: canopy with four scallops, the shaft and its hook in the same ring
    r_s = 0.2375
    a_cut = math.acos((0.06 - r_s) / r_s)
    umbrella = _arc(0, 0.05, 0.95, math.pi, 2 * math.pi, 24)
    umbrella += _arc(0.95 - r_s, 0.05, r_s, 0.0, -math.pi, 7)[1:]
    umbrella += _arc(r_s, 0.05, r_s, 0.0, -a_cut, 6)[1:]
    umbrella += [(0.06, 0.85)] + _arc(-0.18, 0.85, 0.24, 0.0, math.pi, 10)[1:]
    umbrella += [(-0.42, 0.80), (-0.30, 0.80)] + _arc(-0.18, 0.85, 0.12, math.pi, 0.0, 7)
    umbrella += _arc(-r_s, 0.05, r_s, -(math.pi - a_cut), -math.pi, 6)
    umbrella += _arc(-0.95 + r_s, 0.05, r_s, 0.0, -math.pi, 7)[1:-1]
    t["umbrella"] = [umbrella]
    tree = [(-0.12, 1.0), (-0.12, 0.62), (-0.7, 0.62), (-0.3, 0.2), (-0.55, 0.2), (-0.22, -0.25),
            (-0.42, -0.25), (0.0, -1.0), (0.42, -0.25), (0.22, -0.25), (0.55, 0.2), (0.3, 0.2),
            (0.7, 0.62), (0.12, 0.62), (0.12, 1.0)]
    t["tree"] = [tree]
    drop = [(0.0, -1.0)] + _arc(0.0, 0.3, 0.62, -math.pi / 2 + 0.75, 3 * math.pi / 2 - 0.75,
                                26) + []
    t["drop"] = [drop]
    t["bolt"] = [[(0.15, -1.0), (-0.55, 0.12), (-0.05, 0.12), (-0.25, 1.0), (0.55, -0.2),
                  (0.05, -0.2), (0.35, -1.0)]]
    return t


def _normalise(rings):
    """Centre on the bounding box, scale so that every vertex is within radius 1."""
    pts = np.concatenate([np.asarray(r, float) for r in rings])
    c = (pts.min(0) + pts.max(0)) / 2
    s = np.hypot(*(pts - c).T).max()
    return [(np.asarray(r, float) - c) / s for r in rings]


_RAW = _templates()
CATEGORIES: tuple[str, ...] = tuple(_RAW)
#: Similar-looking categories (counting adds some of them as distractors).
SIMILAR = {
    "star": ("cross", "bolt", "hexagon"), "heart": ("drop", "leaf", "crescent"),
    "triangle": ("arrow", "tree", "diamond"), "ring": ("crescent", "hexagon", "cup"),
    "arrow": ("triangle", "key", "bolt"), "key": ("umbrella", "arrow", "ring"),
    "cup": ("bell", "house", "ring"), "leaf": ("fish", "drop", "heart"),
    "crescent": ("ring", "drop", "leaf"), "cross": ("star", "house", "arrow"),
    "diamond": ("triangle", "hexagon", "drop"), "hexagon": ("ring", "star", "diamond"),
    "bell": ("cup", "house", "umbrella"), "house": ("bell", "tree", "cup"),
    "fish": ("leaf", "arrow", "heart"), "umbrella": ("bell", "key", "crescent"),
    "tree": ("triangle", "house", "leaf"), "drop": ("heart", "leaf", "diamond"),
    "bolt": ("star", "arrow", "cross"),
}


class _Templates(NamedTuple):
    verts: np.ndarray        # float64[V, 2] unit coordinates (y down)
    ring_start: np.ndarray   # int32[R + 1] first vertex of each ring
    cat_ring: np.ndarray     # int32[C + 1] first ring of each category
    radius: np.ndarray       # float64[C] largest vertex distance (1 after normalising)
    area: np.ndarray         # float64[C] even-odd area in unit coordinates
    similar: np.ndarray      # int32[C, 3] similar-looking categories


def _even_odd_area(rings, grid=300) -> float:
    """Area of the even-odd fill of ``rings`` (unit coordinates), counted on a fine grid."""
    g = (np.arange(grid) + 0.5) / grid * 2.0 - 1.0
    px, py = np.meshgrid(g, g)
    inside = np.zeros(px.shape, bool)
    for r in rings:
        x0, y0 = r[:, 0], r[:, 1]
        x1, y1 = np.roll(x0, 1), np.roll(y0, 1)
        for a, b, c, d in zip(x0, y0, x1, y1):
            if b == d:
                continue
            hit = (b <= py) != (d <= py)
            xi = a + (py - b) * (c - a) / (d - b)
            inside ^= hit & (xi < px)
    return float(inside.mean() * 4.0)


def _build_templates() -> _Templates:
    verts, ring_start, cat_ring, radius, area = [], [0], [0], [], []
    for name in CATEGORIES:
        rings = _normalise(_RAW[name])
        a = _even_odd_area(rings)
        for r in rings:
            verts.append(r)
            ring_start.append(ring_start[-1] + len(r))
        cat_ring.append(cat_ring[-1] + len(rings))
        radius.append(max(np.hypot(*r.T).max() for r in rings))
        area.append(a)
    similar = np.array([[CATEGORIES.index(s) for s in SIMILAR[c]] for c in CATEGORIES], np.int32)
    out = _Templates(np.ascontiguousarray(np.concatenate(verts)), np.array(ring_start, np.int32),
                     np.array(cat_ring, np.int32), np.array(radius), np.array(area), similar)
    for a in out:
        a.setflags(write=False)
    return out


TEMPLATES = _build_templates()


# --------------------------------------------------------------------------- batched geometry
class Scenes(NamedTuple):
    """Batched scene geometry (leading batch axis), painter's order (later objects on top)."""
    height: np.ndarray       # int32[B] canvas height px
    width: np.ndarray        # int32[B] canvas width px
    background: np.ndarray   # int32[B] background variant (background_picture's bg_id)
    n: np.ndarray            # int32[B] objects in the scene
    cat: np.ndarray          # int16[B, MAX_OBJECTS] category index into CATEGORIES
    colour: np.ndarray       # int16[B, MAX_OBJECTS] named colour index into COLOURS
    rgb: np.ndarray          # uint8[B, MAX_OBJECTS, 3] fill colour (jittered)
    cx: np.ndarray           # float64[B, MAX_OBJECTS] centre x px
    cy: np.ndarray           # float64[B, MAX_OBJECTS] centre y px
    size: np.ndarray         # float64[B, MAX_OBJECTS] px per template unit (= bounding radius)
    angle: np.ndarray        # float64[B, MAX_OBJECTS] rotation rad
    light: np.ndarray        # float64[B, 2] unit vector towards the light (image axes)
    shadow: np.ndarray       # int32[B, 2] drop-shadow offset px
    target: np.ndarray       # int16[B] referred object (referring), -1 for counting
    expr: np.ndarray         # int16[B, 5] expression code (referring), see EXPRESSION_RULES


def new_scenes(batch: int) -> Scenes:
    """Zeroed Scenes for ``batch`` episodes."""
    b = _count_arg(batch, "batch", 0)
    m = MAX_OBJECTS
    return Scenes(np.zeros(b, np.int32), np.zeros(b, np.int32), np.zeros(b, np.int32),
                  np.zeros(b, np.int32), np.zeros((b, m), np.int16), np.zeros((b, m), np.int16),
                  np.zeros((b, m, 3), np.uint8), np.zeros((b, m)), np.zeros((b, m)),
                  np.zeros((b, m)), np.zeros((b, m)), np.zeros((b, 2)), np.zeros((b, 2), np.int32),
                  np.full(b, -1, np.int16), np.full((b, 5), -1, np.int16))


def _count_arg(value, name, lo, hi=None) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}: expected an int, got {value!r}")
    v = int(value)
    if v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ValueError(f"{name}: expected an int {rng}, got {v}")
    return v


def _seed_arg(seed, name="seed") -> int:
    return _count_arg(seed, name, 0, 2 ** 64 - 1)


def _seeds_arg(seeds) -> np.ndarray:
    """uint64[k] from an int array or a sequence of Python ints (each checked)."""
    arr = seeds if isinstance(seeds, np.ndarray) else np.array(seeds, dtype=object)
    if arr.dtype.kind == "O":
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                   and 0 <= int(v) < 2 ** 64 for v in arr.reshape(-1)):
            raise ValueError("seeds: expected ints in [0, 2**64)")
        return np.array([int(v) for v in arr.reshape(-1)], dtype=np.uint64)
    if arr.dtype.kind not in "iu" or (arr.dtype.kind == "i" and (arr < 0).any()):
        raise ValueError(f"seeds: expected ints in [0, 2**64), got {arr.dtype} values")
    return np.ascontiguousarray(arr, dtype=np.uint64).reshape(-1)


def _check_scenes(scenes) -> None:
    if not isinstance(scenes, Scenes):
        raise ValueError(f"scenes: expected a Scenes (new_scenes), got {type(scenes).__name__}")


def _row_arg(scenes, row) -> int:
    _check_scenes(scenes)
    return _count_arg(row, "row", 0, scenes.n.shape[0] - 1)


def _object_arg(scenes, row, k) -> int:
    return _count_arg(k, "k", 0, int(scenes.n[row]) - 1)


def _geometry(scenes):
    return (scenes.n, scenes.cat, scenes.cx, scenes.cy, scenes.size, scenes.angle,
            TEMPLATES.verts, TEMPLATES.ring_start, TEMPLATES.cat_ring)


def geometry_fields(scenes: Scenes) -> tuple:
    """The arguments of kernels/scenes.py ``owner_at`` before (row, x, y): (n, cat, cx, cy,
    size, angle, tv, tr, tc). Prepend (height, width) for ``visible_mask`` /
    ``visible_point`` / ``visible_stats``."""
    _check_scenes(scenes)
    return _geometry(scenes)


def draw_fields(scenes: Scenes) -> tuple:
    """The scene arguments of kernels/scenes.py ``draw_scenes_rows`` (the Numba compositor) and
    ``draw_scene`` (its one-frame Python front): (height, width, n, cat, rgb, cx, cy, size,
    angle, light, shadow, tv, tr, tc)."""
    _check_scenes(scenes)
    return (scenes.height, scenes.width, scenes.n, scenes.cat, scenes.rgb, scenes.cx, scenes.cy,
            scenes.size, scenes.angle, scenes.light, scenes.shadow, TEMPLATES.verts,
            TEMPLATES.ring_start, TEMPLATES.cat_ring)


def _fields(scenes):
    return (scenes.height, scenes.width, scenes.background, scenes.n, scenes.cat, scenes.colour,
            scenes.rgb, scenes.cx, scenes.cy, scenes.size, scenes.angle, scenes.light,
            scenes.shadow, scenes.target, scenes.expr)


# --------------------------------------------------------------------------- generation
def _mix(z: int) -> int:
    """SplitMix64's output function on a Python int (64 bits)."""
    mask = (1 << 64) - 1
    z = (z + 0x9E3779B97F4A7C15) & mask
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return z ^ (z >> 31)


def counting_choice(seed, min_count: int, max_count: int,
                    categories=None) -> tuple[int, int]:
    """(category, count) of a counting episode: the category uniform over ``categories``
    (indices into CATEGORIES; default all), the count uniform in [min_count, max_count]; a pure
    function of the seed (plain Python: one call per reset)."""
    seed = _seed_arg(seed)
    lo = _count_arg(min_count, "min_count", 0, MAX_COUNT)
    hi = _count_arg(max_count, "max_count", lo, MAX_COUNT)
    pool = tuple(range(len(CATEGORIES))) if categories is None else tuple(categories)
    if not pool:
        raise ValueError("categories: expected at least one category index")
    a = _mix(seed ^ 0x636F756E74)            # "count"
    b = _mix(a)
    return int(pool[(a >> 32) * len(pool) >> 32]), lo + ((b >> 32) * (hi - lo + 1) >> 32)


def generate_counting_rows(scenes: Scenes, rows, seeds, categories, counts) -> None:
    """Counting scenes for episodes ``rows`` (arrays of equal length; see generate_counting)."""
    _check_scenes(scenes)
    rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    seeds = _seeds_arg(seeds)
    cats = np.ascontiguousarray(categories, dtype=np.int64).reshape(-1)
    counts = np.ascontiguousarray(counts, dtype=np.int64).reshape(-1)
    if not rows.shape == seeds.shape == cats.shape == counts.shape:
        raise ValueError(f"rows, seeds, categories, counts: expected equal lengths, got "
                         f"{rows.shape[0]}, {seeds.shape[0]}, {cats.shape[0]}, {counts.shape[0]}")
    if rows.size and (rows.min() < 0 or rows.max() >= scenes.n.shape[0]):
        raise ValueError(f"rows: expected values in [0, {scenes.n.shape[0]})")
    if cats.size and (cats.min() < 0 or cats.max() >= len(CATEGORIES)):
        raise ValueError(f"category: expected values in [0, {len(CATEGORIES)})")
    if counts.size and (counts.min() < 0 or counts.max() > MAX_COUNT):
        raise ValueError(f"count: expected values in [0, {MAX_COUNT}]")
    failed = _generate_counting_rows(
        rows, seeds, cats, counts, background_count(), MIN_TARGET_VISIBLE, MIN_TARGET_PIXELS,
        TEMPLATES.verts, TEMPLATES.ring_start, TEMPLATES.cat_ring, TEMPLATES.radius,
        TEMPLATES.area, TEMPLATES.similar, COLOUR_RGB, background_cells(), len(CANVAS_SIZES),
        *_fields(scenes))
    if failed:   # never seen; a loud failure rather than a scene with the wrong count
        raise RuntimeError(f"counting scenes: {failed} scene(s) could not be placed")


def generate_counting(scenes: Scenes, row: int, seed, category: int, count: int) -> None:
    """Row ``row`` of ``scenes`` := the counting scene of ``seed`` with ``count`` instances of
    CATEGORIES[category] (0 <= count <= MAX_COUNT), distractors of other categories (often
    similar-looking ones), at most MAX_OBJECTS objects in painter's order, targets interleaved
    with distractors; every target keeps >= MIN_TARGET_VISIBLE of its pixels visible and >=
    MIN_TARGET_PIXELS pixels. A pure function of (seed, category, count)."""
    row = _row_arg(scenes, row)
    seed = _seed_arg(seed)
    category = _count_arg(category, "category", 0, len(CATEGORIES) - 1)
    count = _count_arg(count, "count", 0, MAX_COUNT)
    generate_counting_rows(scenes, [row], [seed], [category], [count])


def generate_referring_rows(scenes: Scenes, rows, seeds) -> None:
    """Referring scenes for episodes ``rows`` (see generate_referring); no text is built."""
    _check_scenes(scenes)
    rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    seeds = _seeds_arg(seeds)
    if rows.shape != seeds.shape:
        raise ValueError(f"rows, seeds: expected equal lengths, got {rows.shape[0]}, "
                         f"{seeds.shape[0]}")
    if rows.size and (rows.min() < 0 or rows.max() >= scenes.n.shape[0]):
        raise ValueError(f"rows: expected values in [0, {scenes.n.shape[0]})")
    failed = _generate_referring_rows(
        rows, seeds, background_count(), MIN_REFERRED_VISIBLE, TEMPLATES.verts,
        TEMPLATES.ring_start, TEMPLATES.cat_ring, TEMPLATES.radius, TEMPLATES.area, COLOUR_RGB,
        background_cells(), len(CANVAS_SIZES), *_fields(scenes))
    if failed:
        raise RuntimeError(f"referring scenes: {failed} scene(s) without a unique expression")


def generate_referring(scenes: Scenes, row: int, seed) -> tuple[int, str]:
    """Row ``row`` := the referring scene of ``seed`` (4-10 objects); returns (target object
    index, expression text). The expression is checked during generation to pick out exactly
    one object under EXPRESSION_RULES, and the target keeps >= MIN_REFERRED_VISIBLE of its
    pixels visible."""
    row = _row_arg(scenes, row)
    seed = _seed_arg(seed)
    generate_referring_rows(scenes, [row], [seed])
    return int(scenes.target[row]), referring_expression(scenes, row)


EXPRESSION_RULES = """\
Referring expressions (np = "{cat}" or "{colour} {cat}"; K = the objects np matches;
g_x = 0.10 W, g_y = 0.10 H; g = 0.08 min(W, H); s = size, (x, y) = centre):
  "{np}"                 K = {t}.
  "bigger {np}"          |K| = 2, s_t >= 1.3 s_o for the other o (smaller: 1.3 s_t <= s_o);
  "biggest {np}"         |K| >= 3, the same against every other o (smallest likewise).
  "{np} on the left"     |K| >= 2, x_t + g_x <= x_o for every other o; on the right:
                         x_t >= x_o + g_x; at the top: y_t + g_y <= y_o; at the bottom:
                         y_t >= y_o + g_y; in the middle: |K| = 3, one other o with
                         x_o + g_x <= x_t and the other with x_o >= x_t + g_x.
  "{np} {rel} the {np_a}"  np_a matches exactly one object a != t (the anchor, well visible);
                         K' = K minus a. "above": y_a - y_t >= g and |x_t - x_a| <= |y_t - y_a|,
                         and no other o in K' with y_o < y_a and |x_o - x_a| < 1.5 |y_o - y_a|;
                         "below", "left of", "right of" likewise along their axes;
                         "next to": |t a| <= 1.6 (s_t + s_a) and |o a| >= 2 |t a| for the others.
"""

_SIZE_WORDS = ("bigger", "smaller", "biggest", "smallest")
_POS_WORDS = ("on the left", "on the right", "at the top", "at the bottom", "in the middle")
_REL_WORDS = ("next to", "above", "below", "left of", "right of")


def referring_expression(scenes: Scenes, row: int, target: int | None = None) -> str:
    """The text of the expression stored for ``row`` (by generate_referring[_rows])."""
    row = _row_arg(scenes, row)
    t = int(scenes.target[row])
    if t < 0:
        raise ValueError(f"row: {row} holds no referring scene")
    if target is not None and _count_arg(target, "target", 0) != t:
        raise ValueError(f"target: {target} is not the referred object {t} of row {row}")
    kind, mod, npc, anchor, acol = (int(v) for v in scenes.expr[row])

    def np_text(k, with_colour):
        name = CATEGORIES[int(scenes.cat[row, k])]
        return f"{COLOURS[int(scenes.colour[row, k])]} {name}" if with_colour else name

    phrase = np_text(t, npc == 1)
    if kind == _g.EXPR_NP:
        return phrase
    if kind == _g.EXPR_SIZE:
        return f"{_SIZE_WORDS[mod]} {phrase}"
    if kind == _g.EXPR_POS:
        return f"{phrase} {_POS_WORDS[mod]}"
    return f"{phrase} {_REL_WORDS[mod]} the {np_text(anchor, acol == 1)}"


# --------------------------------------------------------------------------- backgrounds
_PHOTOS = ("astronaut", "chelsea", "coffee", "hubble_deep_field", "retina", "rocket", "camera",
           "clock_motion")
_ZOOMS = (1.0, 0.8, 0.62)


def background_count() -> int:
    """Number of background variants: each built-in photo x 3 crops x 2 mirrorings."""
    return len(_PHOTOS) * len(_ZOOMS) * 2


def _photo(photo_i: int) -> np.ndarray:
    from .images import builtin_source

    return builtin_source([_PHOTOS[photo_i]], scale=None).array(0)


def _crop(k: int, h: int, w: int, ih: int, iw: int) -> tuple[int, int, int, int, int]:
    """(x0, y0, box width, box height, mirrored) of variant k on an ih x iw photo for an
    h x w canvas: the largest box of the canvas's aspect ratio, scaled by the variant's zoom,
    at a variant-dependent place (a fixed, spread sequence)."""
    zoom_i, flip = divmod(k % (len(_ZOOMS) * 2), 2)
    bw = min(iw, ih * w / h) * _ZOOMS[zoom_i]
    bh = bw * h / w
    bw = max(1, min(iw, int(round(bw))))
    bh = max(1, min(ih, int(round(bh))))
    fx = ((k * 0.6180339887) % 1.0) if zoom_i else 0.5
    fy = ((k * 0.7548776662) % 1.0) if zoom_i else 0.5
    return int(round((iw - bw) * fx)), int(round((ih - bh) * fy)), bw, bh, flip


def background_picture(bg_id: int, height: int, width: int) -> np.ndarray:
    """Background variant ``bg_id`` at (height, width): a crop of a built-in photo with the
    canvas's aspect ratio (zoomed in by variant, at a variant-dependent place), possibly
    mirrored, resized bilinearly; uint8[height, width, 3]. Deterministic."""
    from ...render.resample import region

    k = _count_arg(bg_id, "bg_id", 0, background_count() - 1)
    h = _count_arg(height, "height", 1, 4096)
    w = _count_arg(width, "width", 1, 4096)
    image = _photo(k // (len(_ZOOMS) * 2))
    x0, y0, bw, bh, flip = _crop(k, h, w, *image.shape[:2])
    out = region(image, (x0, y0, x0 + bw, y0 + bh), (w, h), filter="bilinear")
    if flip:
        out = np.ascontiguousarray(out[:, ::-1])
    return out


#: The colour contrast table: mean colour of each background key's canvas in GRID x GRID cells.
GRID = 8
_CELLS = BoundedCache("scenes.background_cells", max_items=1)


def background_cells() -> np.ndarray:
    """float64[background_key_count(), GRID, GRID, 3]: the mean colour of each cell of each
    background key's canvas (from the photos, sampled every 4th pixel); generation picks object
    colours that stand out from the cell under the object. Built once per process (~0.3 s)."""
    return _CELLS.get_or_build(0, _build_cells)


def _build_cells() -> np.ndarray:
    n_c = len(CANVAS_SIZES)
    out = np.zeros((background_key_count(), GRID, GRID, 3))
    for photo_i in range(len(_PHOTOS)):
        photo = _photo(photo_i).astype(np.float64)
        ih, iw = photo.shape[:2]
        for v in range(len(_ZOOMS) * 2):
            k = photo_i * len(_ZOOMS) * 2 + v
            for c, (h, w) in enumerate(CANVAS_SIZES):
                x0, y0, bw, bh, flip = _crop(k, h, w, ih, iw)
                box = photo[y0:y0 + bh:4, x0:x0 + bw:4]
                if flip:
                    box = box[:, ::-1]
                ys = np.linspace(0, box.shape[0], GRID + 1).astype(int)
                xs = np.linspace(0, box.shape[1], GRID + 1).astype(int)
                for i in range(GRID):
                    for j in range(GRID):
                        cell = box[ys[i]:max(ys[i + 1], ys[i] + 1), xs[j]:max(xs[j + 1], xs[j] + 1)]
                        out[k * n_c + c, i, j] = cell.reshape(-1, 3).mean(axis=0)
    out.setflags(write=False)
    return out


def background_key_count() -> int:
    """Number of background keys: one per (variant, canvas size)."""
    return background_count() * len(CANVAS_SIZES)


def background_keys(scenes: Scenes) -> np.ndarray:
    """int64[B]: each episode's background key, variant * len(CANVAS_SIZES) + canvas index
    (what ``draw_rows`` / ``draw_scenes_rows`` take as ``bg_key`` and what
    ``background_picture_for_key`` draws; -1 for rows without a scene)."""
    _check_scenes(scenes)
    canvas = np.full(scenes.n.shape[0], -1, np.int64)
    for i, (h, w) in enumerate(CANVAS_SIZES):
        canvas[(scenes.height == h) & (scenes.width == w)] = i
    keys = scenes.background.astype(np.int64) * len(CANVAS_SIZES) + canvas
    keys[canvas < 0] = -1
    return keys


def background_picture_for_key(key: int) -> np.ndarray:
    """The background picture of a background key (a PictureStore loader)."""
    k = _count_arg(key, "key", 0, background_key_count() - 1)
    bg_id, canvas = divmod(k, len(CANVAS_SIZES))
    return background_picture(bg_id, *CANVAS_SIZES[canvas])


# --------------------------------------------------------------------------- drawing and masks
def _frame_arg(frame, h, w, name="frame") -> np.ndarray:
    if not (isinstance(frame, np.ndarray) and frame.dtype == np.uint8 and frame.ndim == 3 and
            frame.shape[2] == 3 and frame.shape[0] >= h and frame.shape[1] >= w and
            frame.flags.writeable and frame.flags.c_contiguous):
        got = (f"{frame.dtype} {frame.shape}" if isinstance(frame, np.ndarray)
               else type(frame).__name__)
        raise ValueError(f"{name}: expected a writeable C-contiguous uint8[H >= {h}, W >= {w}, 3] "
                         f"array, got "
                         f"{got}")
    return frame


def draw(scenes: Scenes, row: int, frame: np.ndarray, bg: np.ndarray, rect=None) -> np.ndarray:
    """Composite the scene of ``row`` into ``frame`` (uint8[H >= h, W >= w, 3]) over the
    background picture ``bg`` (uint8[h, w, 3]), within rect = (x0, y0, x1, y1) (default: the
    whole canvas). Returns frame."""
    row = _row_arg(scenes, row)
    h, w = int(scenes.height[row]), int(scenes.width[row])
    frame = _frame_arg(frame, h, w)
    bg = np.ascontiguousarray(bg)
    if bg.dtype != np.uint8 or bg.shape != (h, w, 3):
        raise ValueError(f"bg: expected uint8[{h}, {w}, 3] (the canvas size), got {bg.dtype} "
                         f"{bg.shape}")
    x0, y0, x1, y1 = (0, 0, w, h) if rect is None else _rect_arg(rect)
    _k.draw_scene(frame, bg, *draw_fields(scenes), row, x0, y0, x1, y1)
    return frame


def _rect_arg(rect) -> tuple[int, int, int, int]:
    try:
        vals = tuple(rect)
    except TypeError:
        vals = ()
    if len(vals) != 4 or not all(isinstance(v, (int, np.integer)) and
                                 not isinstance(v, (bool, np.bool_)) for v in vals):
        raise ValueError(f"rect: expected four ints (x0, y0, x1, y1), got {rect!r}")
    return tuple(int(v) for v in vals)


def draw_rows(frames: np.ndarray, rows, atlas, bg_key: np.ndarray, scenes: Scenes,
              rects=None, ensure: bool = True) -> None:
    """Composite the scenes of episodes ``rows`` into frames[rows] (uint8[B, H, W, 3]) within
    rects[i] = (x0, y0, x1, y1) (default: whole canvases), backgrounds read from ``atlas`` (a
    render.atlas.PictureAtlas holding picture bg_key[b] at episode b's canvas size). With
    ``ensure`` the atlas is given the missing pictures first; pass False from worker threads
    after ensuring once on the calling thread (``ensure_rows`` uses the atlas's scratch)."""
    _check_scenes(scenes)
    rows = np.ascontiguousarray(rows, dtype=np.int64).reshape(-1)
    if rows.size == 0:
        return
    if rows.min() < 0 or rows.max() >= scenes.n.shape[0]:
        raise ValueError(f"rows: expected values in [0, {scenes.n.shape[0]})")
    if not (isinstance(frames, np.ndarray) and frames.dtype == np.uint8 and frames.ndim == 4
            and frames.shape[3] == 3 and frames.shape[0] == scenes.n.shape[0]
            and frames.flags.c_contiguous and frames.flags.writeable):
        raise ValueError(f"frames: expected a writeable C-contiguous uint8[B, H, W, 3] with B = "
                         f"{scenes.n.shape[0]}")
    if (scenes.height[rows] > frames.shape[1]).any() or \
            (scenes.width[rows] > frames.shape[2]).any():
        raise ValueError(f"frames: {frames.shape[1:3]} is smaller than a canvas of these rows")
    bg_key = np.ascontiguousarray(bg_key, dtype=np.int64)
    if rects is None:
        rects = np.zeros((rows.shape[0], 4), np.int32)
        rects[:, 2] = scenes.width[rows]
        rects[:, 3] = scenes.height[rows]
    rects = np.ascontiguousarray(rects, dtype=np.int32)
    if rects.shape != (rows.shape[0], 4):
        raise ValueError(f"rects: expected int32[{rows.shape[0]}, 4], got {rects.shape}")
    if ensure:
        atlas.ensure_rows(bg_key, rows)
    slots = atlas.slot_of[bg_key[rows]]
    if (slots < 0).any():
        raise ValueError("bg_key: a background picture has no atlas slot (ensure it first)")
    hw = atlas.slot_hw[slots]
    if (hw[:, 0] != scenes.height[rows]).any() or (hw[:, 1] != scenes.width[rows]).any():
        raise ValueError("bg_key: a background picture's size differs from its episode's canvas")
    _k.draw_scenes_rows(frames, rows, atlas.buffer, atlas.slot_off, atlas.slot_of, bg_key,
                        scenes.height, scenes.width, scenes.n, scenes.cat, scenes.rgb, scenes.cx,
                        scenes.cy, scenes.size, scenes.angle, scenes.light, scenes.shadow,
                        TEMPLATES.verts, TEMPLATES.ring_start, TEMPLATES.cat_ring, rects)


def owner_at(scenes: Scenes, row: int, x: int, y: int) -> int:
    """Index of the top-most object of ``row`` covering pixel (x, y); -1 for the background."""
    row = _row_arg(scenes, row)
    x = _count_arg(x, "x", 0, int(scenes.width[row]) - 1)
    y = _count_arg(y, "y", 0, int(scenes.height[row]) - 1)
    return int(_k.owner_at(*_geometry(scenes), row, x, y))


def visible_mask(scenes: Scenes, row: int, k: int, out: np.ndarray | None = None) -> np.ndarray:
    """bool[h, w]: the pixels whose top-most owner is object k (into ``out`` when given)."""
    row = _row_arg(scenes, row)
    k = _object_arg(scenes, row, k)
    h, w = int(scenes.height[row]), int(scenes.width[row])
    if out is None:
        out = np.zeros((h, w), np.bool_)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.bool_ and out.shape == (h, w)):
        raise ValueError(f"out: expected bool[{h}, {w}]")
    _k.visible_mask(scenes.height, scenes.width, *_geometry(scenes), row, k, out)
    return out


def visible_point(scenes: Scenes, row: int, k: int) -> tuple[int, int]:
    """(x, y) of a pixel well inside object k's visible mask: the pixel nearest the visible
    centroid when its 5x5 neighbourhood is visible, else the visible pixel farthest from the
    mask boundary (ties by distance to the visible centroid, then y, then x); (-1, -1) if the
    object is not visible at all."""
    row = _row_arg(scenes, row)
    k = _object_arg(scenes, row, k)
    out = np.empty((1, 2), np.int64)
    _k.visible_points(scenes.height, scenes.width, *_geometry(scenes), row,
                      np.array([k], np.int64), out)
    return int(out[0, 0]), int(out[0, 1])


def visible_points(scenes: Scenes, row: int, ks) -> np.ndarray:
    """int64[len(ks), 2]: ``visible_point`` of each object of ``ks`` (one compiled loop), e.g.
    the instance centres of a counting scene's targets."""
    row = _row_arg(scenes, row)
    ks = np.ascontiguousarray(ks, dtype=np.int64).reshape(-1)
    if ks.size and (ks.min() < 0 or ks.max() >= int(scenes.n[row])):
        raise ValueError(f"ks: expected object indices in [0, {int(scenes.n[row])})")
    out = np.empty((ks.shape[0], 2), np.int64)
    _k.visible_points(scenes.height, scenes.width, *_geometry(scenes), row, ks, out)
    return out


def target_indices(scenes: Scenes, row: int, category: int) -> np.ndarray:
    """Indices of the objects of ``category`` in row ``row`` (painter's order)."""
    row = _row_arg(scenes, row)
    category = _count_arg(category, "category", 0, len(CATEGORIES) - 1)
    return np.flatnonzero(scenes.cat[row, :int(scenes.n[row])] == category)


def visible_fraction(scenes: Scenes, row: int, k: int) -> tuple[int, int]:
    """(visible pixels, own silhouette pixels) of object k."""
    row = _row_arg(scenes, row)
    k = _object_arg(scenes, row, k)
    vis, own, _, _ = _k.visible_stats(scenes.height, scenes.width, *_geometry(scenes), row, k)
    return int(vis), int(own)
