"""Tests for the compiled 2-D rasterizer (``visgym.render.raster``) and glyph-atlas text
(``visgym.render.text``): every primitive is held against Pillow drawing the same shape on the
same background, against analytic facts (ink of an anti-aliased shape equals its area, an integer
box filter is a block mean), against itself under clipping and translation, and against itself
drawn one item at a time. Bad arguments must raise ValueError naming the argument.
"""
# Conventions of the Pillow comparisons: our pixel (x, y) is centred at (x+0.5, y+0.5) while
# Pillow's integer coordinate x names the pixel centre, so a shape at our point p is drawn by
# Pillow at p - 0.5 (and a Pillow ellipse box / rectangle includes its last row and column). A
# pixel counts as "changed" (inked) when it moved at least half-way from the background to the
# drawing colour: coverage >= 0.5 is the decision a non-anti-aliased renderer makes by sampling
# the pixel centre, so the two inked masks are comparable although only ours is anti-aliased.
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image, ImageDraw, ImageFont

from visgym.render import raster, resample, text

BG = (20, 30, 40)
FG = (230, 200, 60)
H = W = 96


# ---------------------------------------------------------------------------------------------
# helpers

def blank(b=1, h=H, w=W, color=BG):
    frames = np.empty((b, h, w, 3), dtype=np.uint8)
    frames[:] = color
    return frames


def pillow(draw, h=H, w=W):
    im = Image.new("RGB", (w, h), BG)
    draw(ImageDraw.Draw(im))
    return np.asarray(im)


def ink(img):
    """Per-pixel fraction of the way from BG to FG (1.0 = fully drawn)."""
    bg = np.array(BG)
    return np.abs(img.astype(np.int64) - bg).sum(-1) / np.abs(np.array(FG) - bg).sum()


def inked(img):
    return ink(img) >= 0.5


def iou(a, b):
    a, b = inked(a), inked(b)
    return (a & b).sum() / max(1, (a | b).sum())


def dilate(mask):
    """Grow a boolean mask by one pixel in all 8 directions."""
    out = mask.copy()
    out[1:] |= mask[:-1]
    out[:-1] |= mask[1:]
    grown = out.copy()
    out[:, 1:] |= grown[:, :-1]
    out[:, :-1] |= grown[:, 1:]
    return out


def mae(a, b):
    return np.abs(a.astype(np.int64) - b.astype(np.int64)).mean()


def smooth_image(b, h, w, seed=0):
    """Photo-like test image: a low-frequency colour field (at most 2 cycles per image), one
    hard-edged rectangle and mild sensor noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    out = np.zeros((b, h, w, 3))
    for i in range(b):
        for c in range(3):
            fx, fy, ph = rng.uniform(0.5, 2), rng.uniform(0.5, 2), rng.uniform(0, 6.3)
            out[i, :, :, c] = 128 + 90 * np.sin(2 * np.pi * (fx * xx + fy * yy) + ph)
        out[i, h // 3: h // 2, w // 4: w // 2] = rng.uniform(0, 255, 3)
    return np.clip(out + rng.normal(0, 2, out.shape), 0, 255).astype(np.uint8)


def guarded(b=1, h=H, w=W, guard=4096):
    """Frames that are a contiguous slice of a larger buffer filled with a sentinel, so any write
    outside the frames shows up in the guard bytes."""
    buf = np.full(guard * 2 + b * h * w * 3, 77, dtype=np.uint8)
    frames = buf[guard: guard + b * h * w * 3].reshape(b, h, w, 3)
    frames[:] = BG
    return buf, frames, guard


def guards_intact(buf, frames, guard):
    return bool((buf[:guard] == 77).all() and (buf[guard + frames.size:] == 77).all())


# ---------------------------------------------------------------------------------------------
# fill and rectangles: exact

def test_fill_sets_only_the_named_frames():
    frames = blank(3)
    raster.fill(frames, [2, 0], np.array([[1, 2, 3], [4, 5, 6]], np.uint8))
    assert (frames[0] == (4, 5, 6)).all()
    assert (frames[1] == BG).all()
    assert (frames[2] == (1, 2, 3)).all()


def test_fill_rects_equal_pillow_rectangles_exactly():
    rects = [(3, 4, 20, 30), (40, 10, 41, 11), (50, 50, 96, 96), (10, 60, 70, 64)]
    frames = blank()
    x0, y0, x1, y1 = (np.array(v, np.int32) for v in zip(*rects))
    raster.fill_rects(frames, np.zeros(len(rects), np.int64), x0, y0, x1, y1, FG)

    def draw(d):
        for a, b, c, e in rects:  # Pillow's rectangle includes its last column and row
            d.rectangle((a, b, c - 1, e - 1), fill=FG)

    np.testing.assert_array_equal(frames[0], pillow(draw))


@pytest.mark.parametrize(
    "rect",
    [
        (-10, 20, 15, 40),  # left border
        (20, -10, 40, 15),  # top border
        (80, 20, 200, 40),  # right border
        (20, 80, 40, 200),  # bottom border
        (-5, -5, 200, 200),  # covers everything
        (-10**9, 30, 10**9, 31),  # huge
        (100, 10, 120, 20),  # fully right of the frame
        (-30, -30, -1, -1),  # fully above-left
        (30, 30, 30, 60),  # empty (zero width)
        (40, 40, 20, 20),  # inverted
    ],
)
def test_fill_rects_clip_at_every_border(rect):
    buf, frames, guard = guarded()
    raster.fill_rects(frames, [0], *[np.array([v], np.int64) for v in rect], FG)
    expected = blank()
    x0, y0, x1, y1 = (int(np.clip(v, 0, 96)) for v in rect)
    expected[0, y0:y1, x0:x1] = FG
    np.testing.assert_array_equal(frames, expected)
    assert guards_intact(buf, frames, guard)


# ---------------------------------------------------------------------------------------------
# anti-aliased lines

LINES = [(5, 50, 90, 50), (50, 5, 50, 90), (10, 10, 80, 80), (10, 80, 85, 20),
         (10, 30, 90, 45), (30, 10, 45, 90)]


@pytest.mark.parametrize("width", [1, 3, 5, 7])
@pytest.mark.parametrize("seg", LINES)
def test_lines_match_pillow(seg, width):
    # Endpoints sit on pixel centres and widths are odd so that Pillow draws the same ideal
    # rectangle (its even widths are off-centre by half a pixel). Thresholds: Pillow's wide line
    # is an aliased polygon whose width is rounded per side, so on slanted lines it is often a
    # pixel thinner or thicker than the true rectangle (at 45 degrees Pillow's width 3 and 5 give
    # identical pixels), and a 1-px line is Bresenham's one pixel per step; IoU >= 0.6 and
    # MAE <= 2.5 allow exactly that edge-pixel disagreement, while every inked pixel of each
    # must lie within one pixel of the other's (a wrong position or angle fails that at once).
    x0, y0, x1, y1 = seg
    frames = blank()
    raster.draw_lines(frames, [0], x0 + 0.5, y0 + 0.5, x1 + 0.5, y1 + 0.5, width, FG)
    ref = pillow(lambda d: d.line((x0, y0, x1, y1), fill=FG, width=width))
    ours = frames[0]
    assert mae(ours, ref) <= 2.5
    assert iou(ours, ref) >= 0.6
    assert (inked(ours) <= dilate(inked(ref))).all()
    assert (inked(ref) <= dilate(inked(ours))).all()


@pytest.mark.parametrize("width", [0.3, 1.0, 2.0, 4.5, 8.0])
@pytest.mark.parametrize("seg", [(10.2, 20.7, 83.9, 71.1), (12.0, 80.0, 70.0, 15.5), (8.0, 40.0, 88.0, 40.0)])
def test_line_ink_equals_its_area(seg, width):
    # Analytic coverage conserves ink: a segment fully inside the frame deposits width * length
    # pixels of ink at any angle, including a faint sub-pixel line. 1% covers 8-bit rounding and
    # the cap-corner approximation.
    frames = blank(color=(0, 0, 0))
    raster.draw_lines(frames, [0], *seg, width, (255, 255, 255))
    total = frames[0, :, :, 0].astype(np.float64).sum() / 255.0
    area = width * np.hypot(seg[2] - seg[0], seg[3] - seg[1])
    assert abs(total - area) <= 0.01 * area + 0.5


def test_thin_line_is_faint_not_missing():
    frames = blank(color=(0, 0, 0))
    raster.draw_lines(frames, [0], 10.0, 40.5, 80.0, 40.5, 0.25, (255, 255, 255))
    row = frames[0, 40, 12:78, 0]
    assert (np.abs(row.astype(int) - 64) <= 1).all()  # 0.25 coverage in every pixel it crosses
    assert frames[0, 39].max() == 0 and frames[0, 41].max() == 0


def test_zero_length_or_zero_width_line_draws_nothing():
    frames = blank()
    raster.draw_lines(frames, [0, 0], [10.0, 5.0], [10.0, 5.0], [10.0, 60.0], [10.0, 60.0], [4.0, 0.0], FG)
    assert (frames == BG).all()


# ---------------------------------------------------------------------------------------------
# anti-aliased circles

@pytest.mark.parametrize("cx,cy,r", [(48, 48, 30), (40, 50, 12), (20, 30, 8)])
def test_discs_match_pillow_ellipse(cx, cy, r):
    # Pillow's filled ellipse is aliased and ours is anti-aliased, so they may differ only in
    # the one-pixel rim, which is a few percent of a disc of radius >= 8: hence IoU >= 0.94 and
    # a mean error well under 1 grey level.
    frames = blank()
    raster.draw_circles(frames, [0], cx, cy, r, FG)
    ref = pillow(lambda d: d.ellipse((cx - r, cy - r, cx + r - 1, cy + r - 1), fill=FG))
    assert iou(frames[0], ref) >= 0.94
    assert mae(frames[0], ref) <= 1.0


@pytest.mark.parametrize("thickness", [1, 3, 6])
@pytest.mark.parametrize("cx,cy,r", [(48, 48, 30), (40, 50, 12)])
def test_rings_match_pillow_ellipse_outline(cx, cy, r, thickness):
    # A ring is nearly all rim, so aliased vs anti-aliased decisions weigh more: a 1-px ring
    # is where the two differ most (IoU ~0.91 here), thicker rings agree to ~0.98.
    frames = blank()
    raster.draw_circles(frames, [0], cx, cy, r, FG, thickness=thickness)
    ref = pillow(lambda d: d.ellipse((cx - r, cy - r, cx + r - 1, cy + r - 1), outline=FG, width=thickness))
    assert iou(frames[0], ref) >= (0.85 if thickness == 1 else 0.92)
    assert mae(frames[0], ref) <= 1.5


@pytest.mark.parametrize("r,t", [(20.0, None), (13.3, None), (20.0, 2.5), (9.5, 0.6), (0.4, None)])
def test_circle_ink_equals_its_area(r, t):
    # Exact edge coverage means total ink = pi (r^2 - inner^2), even for sub-pixel discs.
    frames = blank(color=(0, 0, 0))
    raster.draw_circles(frames, [0], 47.3, 45.8, r, (255, 255, 255), thickness=t)
    total = frames[0, :, :, 0].astype(np.float64).sum() / 255.0
    inner = 0.0 if t is None else r - t
    area = np.pi * (r * r - inner * inner)
    assert abs(total - area) <= 0.01 * area + 0.3


def test_thickness_none_zero_and_at_least_radius_all_fill():
    a, b, c = blank(), blank(), blank()
    raster.draw_circles(a, [0], 40, 40, 10, FG)
    raster.draw_circles(b, [0], 40, 40, 10, FG, thickness=0)
    raster.draw_circles(c, [0], 40, 40, 10, FG, thickness=25)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


# ---------------------------------------------------------------------------------------------
# polygons

def star(cx=48.0, cy=48.0, outer=40.0, inner=16.0, points=5):
    ang = np.arange(2 * points) * np.pi / points - np.pi / 2
    rad = np.where(np.arange(2 * points) % 2 == 0, outer, inner)
    return np.stack([cx + rad * np.cos(ang), cy + rad * np.sin(ang)], -1)


ARROW = np.array([(10, 40), (55, 40), (55, 20), (88, 48), (55, 76), (55, 56), (10, 56)], float) + 0.3


@pytest.mark.parametrize("verts", [star(), ARROW], ids=["star", "arrow"])
def test_concave_polygons_match_pillow(verts):
    # Neither anti-aliases, but Pillow also paints every pixel its outline passes through and
    # snaps the outline to whole pixels, so the two disagree along a one-pixel rim of each edge
    # (~5% of these ~1800-px shapes with long slanted edges): IoU >= 0.9 and MAE <= 2.5.
    frames = blank()
    raster.fill_polygons(frames, [0], verts[None], [len(verts)], FG)
    ref = pillow(lambda d: d.polygon([tuple(p - 0.5) for p in verts], fill=FG))
    assert iou(frames[0], ref) >= 0.9
    assert mae(frames[0], ref) <= 2.5


def test_polygon_samples_pixel_centres():
    # A rectangle polygon covers exactly the pixels whose centres are inside it.
    frames = blank()
    verts = np.array([[[10.4, 5.6], [30.5, 5.6], [30.5, 20.5], [10.4, 20.5]]])
    raster.fill_polygons(frames, [0], verts, [4], FG)
    expected = blank()
    expected[0, 6:20, 10:30] = FG  # centres 10.5..29.5 and 6.5..19.5
    np.testing.assert_array_equal(frames, expected)


def test_polygon_uses_only_its_first_nverts_and_even_odd_rule():
    frames = blank()
    # Two nested squares drawn as one outline with a zero-width bridge: even-odd leaves a hole.
    outer = [(10, 10), (60, 10), (60, 60), (10, 60), (10, 10)]
    inner = [(20, 20), (20, 50), (50, 50), (50, 20), (20, 20)]
    verts = np.zeros((1, 16, 2))
    verts[0, :10] = outer + inner
    verts[0, 10:] = 1e6  # padding beyond nverts must be ignored
    raster.fill_polygons(frames, [0], verts, [10], FG)
    assert (frames[0, 30, 30] == BG).all()
    assert (frames[0, 15, 15] == FG).all()
    assert (frames[0, 70:, :] == BG).all()


# ---------------------------------------------------------------------------------------------
# blits

def rgba_sprites(s, h, w, seed=1):
    rng = np.random.default_rng(seed)
    sprites = rng.integers(0, 256, (s, h, w, 4), dtype=np.uint8)
    sprites[..., 3][:, :2] = 0  # some fully transparent ...
    sprites[..., 3][:, -2:] = 255  # ... and some opaque rows
    return sprites


def test_blit_rgba_matches_pillow_alpha_composite():
    # Same straight-alpha "over" formula; Pillow rounds its fixed-point arithmetic slightly
    # differently, so channels may differ by at most one level.
    rng = np.random.default_rng(2)
    bg = rng.integers(0, 256, (1, 40, 50, 3), dtype=np.uint8)
    sprites = rgba_sprites(1, 16, 24)
    frames = bg.copy()
    raster.blit_rgba(frames, [0], sprites, [0], [7], [11])
    base = Image.fromarray(np.dstack([bg[0], np.full((40, 50), 255, np.uint8)]), "RGBA")
    layer = Image.new("RGBA", (50, 40), (0, 0, 0, 0))
    layer.paste(Image.fromarray(sprites[0], "RGBA"), (7, 11))
    ref = np.asarray(Image.alpha_composite(base, layer))[..., :3]
    assert np.abs(frames[0].astype(int) - ref).max() <= 1


def _blend_reference(dst, src_rgb, alpha):
    a = alpha.astype(np.int64)[..., None]
    return ((src_rgb.astype(np.int64) * a + dst.astype(np.int64) * (255 - a) + 127) // 255).astype(np.uint8)


@pytest.mark.parametrize("x,y", [(-5, 10), (10, -7), (40, 10), (10, 30), (-20, -20), (45, 35), (-10**9, 3), (10**12, 10**12)])
def test_blit_rgba_clips_like_a_padded_canvas(x, y):
    sprites = rgba_sprites(2, 12, 18)
    buf, frames, guard = guarded(1, 40, 50)
    raster.blit_rgba(frames, [0], sprites, [1], [x], [y])
    pad = 64
    big = blank(1, 40 + 2 * pad, 50 + 2 * pad)
    if -pad <= x <= 50 and -pad <= y <= 40:
        win = big[0, y + pad: y + pad + 12, x + pad: x + pad + 18]
        win[:] = _blend_reference(win, sprites[1, ..., :3], sprites[1, ..., 3])
    np.testing.assert_array_equal(frames[0], big[0, pad: pad + 40, pad: pad + 50])
    assert guards_intact(buf, frames, guard)


def test_blit_masks_matches_pillow_paste_with_mask():
    rng = np.random.default_rng(3)
    masks = rng.integers(0, 256, (3, 10, 14), dtype=np.uint8)
    frames = blank(1, 32, 40)
    raster.blit_masks(frames, [0, 0], masks, [2, 0], [3, 20], [4, 15], np.array([FG, (9, 250, 120)], np.uint8))
    im = Image.new("RGB", (40, 32), BG)
    im.paste(FG, (3, 4, 17, 14), Image.fromarray(masks[2], "L"))
    im.paste((9, 250, 120), (20, 15, 34, 25), Image.fromarray(masks[0], "L"))
    assert np.abs(frames[0].astype(int) - np.asarray(im)).max() <= 1


def test_blit_masks_uses_the_documented_rounding():
    masks = np.arange(256, dtype=np.uint8).reshape(1, 16, 16)
    frames = blank(1, 16, 16, color=(3, 100, 251))
    raster.blit_masks(frames, [0], masks, [0], [0], [0], (250, 7, 0))
    expected = _blend_reference(blank(1, 16, 16, color=(3, 100, 251))[0], np.full((16, 16, 3), (250, 7, 0)), masks[0])
    np.testing.assert_array_equal(frames[0], expected)


# ---------------------------------------------------------------------------------------------
# text

@pytest.mark.parametrize("size", [10, 14, 20])
def test_text_matches_pillow_draw_text(size):
    # Same font, same hinted integer advances and the same glyph bitmaps, so the result should
    # be Pillow's up to blend rounding: ink-mask IoU >= 0.98 and at most one level of difference.
    s = "Hello, VisGym! 0123 {[x_y]} @#&%"
    frames = blank(1, 40, 400)
    text.draw_text(frames, [0], [s], [5], [7], FG, text.glyph_atlas(size))
    im = Image.new("RGB", (400, 40), BG)
    ImageDraw.Draw(im).text((5, 7), s, font=ImageFont.load_default(size=size), fill=FG)
    ref = np.asarray(im)
    assert iou(frames[0], ref) >= 0.98
    assert np.abs(frames[0].astype(int) - ref).max() <= 1


def test_text_outside_printable_ascii_is_drawn_as_question_marks():
    atlas = text.glyph_atlas(12)
    a, b = blank(1, 20, 80), blank(1, 20, 80)
    text.draw_text(a, [0], ["a\u00e9\nb"], 2, 2, FG, atlas)
    text.draw_text(b, [0], ["a??b"], 2, 2, FG, atlas)
    np.testing.assert_array_equal(a, b)


def test_text_size_and_atlas_shape():
    atlas = text.glyph_atlas(14)
    assert text.glyph_atlas(14) is atlas  # cached per size
    font = ImageFont.load_default(size=14)
    assert atlas.masks.shape[0] == 95 and atlas.masks.dtype == np.uint8
    assert atlas.line_height == sum(font.getmetrics())
    w, h = text.text_size("Batch of 42", atlas)
    assert w == round(font.getlength("Batch of 42")) and h == atlas.line_height
    assert text.text_size("", atlas) == (0, atlas.line_height)


def test_text_batches_into_several_frames_like_one_at_a_time():
    atlas = text.glyph_atlas(12)
    texts = ["first", "", "third line", "x", "clip me at the edge"]
    idx, xs, ys = [1, 0, 1, 2, 0], [3, 5, -4, 60, 50], [2, 9, 20, 25, -3]
    colors = np.array([(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (9, 9, 9)], np.uint8)
    frames = blank(3, 32, 64)
    text.draw_text(frames, idx, texts, xs, ys, colors, atlas)
    ref = blank(3, 32, 64)
    for n in range(len(texts)):
        one = ref[idx[n]: idx[n] + 1]
        text.draw_text(one, [0], [texts[n]], xs[n], ys[n], colors[n], atlas)
    np.testing.assert_array_equal(frames, ref)


# ---------------------------------------------------------------------------------------------
# resampling

@pytest.mark.parametrize("src_hw,dst_hw", [((32, 32), (96, 96)), ((30, 40), (77, 100)), ((24, 20), (48, 60))])
def test_resize_bilinear_matches_pillow_when_upsampling(src_hw, dst_hw):
    # Same half-pixel-centre triangle filter; Pillow works in fixed point, so the outputs
    # differ by rounding only: MAE <= 0.5 and no pixel off by more than one level.
    src = smooth_image(2, *src_hw)
    dst = np.zeros((2, *dst_hw, 3), np.uint8)
    resample.bilinear(src, dst)
    for b in range(2):
        ref = np.asarray(Image.fromarray(src[b]).resize(dst_hw[::-1], Image.Resampling.BILINEAR))
        assert mae(dst[b], ref) <= 0.5
        assert np.abs(dst[b].astype(int) - ref).max() <= 1


def test_resize_bilinear_and_area_are_identity_at_the_same_size():
    src = smooth_image(1, 33, 47)
    for fn in (resample.bilinear, resample.area):
        dst = np.zeros_like(src)
        fn(src, dst)
        np.testing.assert_array_equal(dst, src)


@pytest.mark.parametrize("factor", [2, 3, 4])
def test_resize_area_integer_factor_is_the_exact_block_mean(factor):
    src = smooth_image(2, 96, 72)
    dst = np.zeros((2, 96 // factor, 72 // factor, 3), np.uint8)
    resample.area(src, dst)
    blocks = src.reshape(2, 96 // factor, factor, 72 // factor, factor, 3).astype(np.int64)
    n = factor * factor
    expected = (blocks.sum(axis=(2, 4)) + n // 2) // n  # rounded half up
    np.testing.assert_array_equal(dst, expected)
    ref = np.asarray(Image.fromarray(src[0]).resize(dst.shape[2:0:-1], Image.Resampling.BOX))
    assert np.abs(dst[0].astype(int) - ref).max() <= 1


def _area_weights(n_src, n_dst):
    # Exact overlap of source cell i with destination footprint [X*s, (X+1)*s), normalized.
    s = n_src / n_dst
    edges = np.arange(n_dst + 1) * s
    i = np.arange(n_src)
    lo = np.maximum(edges[:-1, None], i[None, :])
    hi = np.minimum(edges[1:, None], i[None, :] + 1)
    return np.clip(hi - lo, 0, None) / s


@pytest.mark.parametrize("src_hw,dst_hw", [((96, 96), (40, 40)), ((100, 90), (37, 41)), ((64, 64), (27, 50)), ((20, 30), (45, 70))])
def test_resize_area_averages_the_exact_footprint(src_hw, dst_hw):
    # Against a float evaluation of the definition (OpenCV INTER_AREA) only the final rounding
    # may differ, so no pixel may be off by more than half a level.
    src = smooth_image(1, *src_hw)
    dst = np.zeros((1, *dst_hw, 3), np.uint8)
    resample.area(src, dst)
    wy, wx = _area_weights(src_hw[0], dst_hw[0]), _area_weights(src_hw[1], dst_hw[1])
    expected = np.einsum("Yy,yxc,Xx->YXc", wy, src[0].astype(np.float64), wx)
    assert np.abs(dst[0] - expected).max() <= 0.5 + 1e-6


@pytest.mark.parametrize("src_hw,dst_hw", [((96, 96), (48, 32)), ((96, 96), (40, 40)), ((100, 90), (37, 41))])
def test_resize_area_matches_pillow_box_when_downsampling(src_hw, dst_hw):
    # Pillow's BOX takes whole source pixels whose centres fall in the footprint instead of
    # exact fractions: identical for integer factors up to rounding, and for factors >= 2 on a
    # smooth image it differs only in the partial pixels at cell borders, MAE <= 1.5 (at factors
    # near 1 its pixel snapping is coarser than that, so those are covered by the exact test).
    src = smooth_image(1, *src_hw)
    dst = np.zeros((1, *dst_hw, 3), np.uint8)
    resample.area(src, dst)
    ref = np.asarray(Image.fromarray(src[0]).resize(dst_hw[::-1], Image.Resampling.BOX))
    assert mae(dst[0], ref) <= 1.5


def test_resize_bilinear_downsampling_is_point_sampled():
    # Documented behaviour: downsampling by 2 samples exactly between source pixel pairs.
    src = smooth_image(1, 40, 40)
    dst = np.zeros((1, 20, 20, 3), np.uint8)
    resample.bilinear(src, dst)
    pairs = src[0].astype(np.float64).reshape(20, 2, 20, 2, 3).mean(axis=(1, 3))
    assert np.abs(dst[0] - pairs).max() <= 0.5 + 1e-6


# ---------------------------------------------------------------------------------------------
# clipping: every primitive, far-off and huge coordinates

def _draw_all(frames, dx=0.0, dy=0.0, big=False):
    """Draw one of each primitive, translated by (dx, dy) (integers, so pixels map exactly)."""
    ix, iy = int(dx), int(dy)
    raster.fill_rects(frames, [0], [-20 + ix], [60 + iy], [30 + ix], [120 + iy], (200, 10, 10))
    raster.draw_lines(frames, [0], [-30.2 + dx], [10.7 + dy], [70.4 + dx], [-25.1 + dy], [3.5], (10, 200, 10))
    raster.draw_circles(frames, [0], [90.0 + dx], [80.0 + dy], [25.0], (10, 10, 200))
    raster.draw_circles(frames, [0], [-5.0 + dx], [40.0 + dy], [20.0], (250, 250, 0), thickness=4)
    raster.fill_polygons(frames, [0], (star(cx=80.0, cy=10.0) + [dx, dy])[None], [10], (0, 250, 250))
    raster.blit_rgba(frames, [0], rgba_sprites(1, 30, 30), [0], [-12 + ix], [75 + iy])
    raster.blit_masks(frames, [0], np.full((1, 20, 20), 200, np.uint8), [0], [85 + ix], [-8 + iy], (255, 0, 255))


def test_clipped_drawing_equals_a_crop_of_unclipped_drawing():
    # Shapes hanging over all four borders must equal the same shapes drawn on a canvas with a
    # margin, cropped. Float primitives see coordinates shifted by an exact integer, so the
    # arithmetic may differ in the last bit: one level of tolerance.
    buf, frames, guard = guarded()
    _draw_all(frames)
    pad = 48
    big = blank(1, H + 2 * pad, W + 2 * pad)
    _draw_all(big, pad, pad)
    crop = big[0, pad: pad + H, pad: pad + W]
    assert np.abs(frames[0].astype(int) - crop).max() <= 1
    assert guards_intact(buf, frames, guard)


@pytest.mark.parametrize("far", [-1e9, 1e9, -150.0, 300.0, 1e300, -1e300])
def test_every_primitive_far_outside_draws_nothing_and_never_crashes(far):
    buf, frames, guard = guarded(2, 32, 48)
    i = [1]
    f, j = np.array([far]), int(np.clip(far, -2**62, 2**62))
    raster.fill_rects(frames, i, [j], [j], [j + 10 if j < 0 else 2**62], [2**62], FG)
    raster.draw_lines(frames, i, f, f, f + 5.0, f, [3.0], FG)
    raster.draw_circles(frames, i, f, [10.0], [5.0], FG)
    raster.draw_circles(frames, i, [10.0], f, [5.0], FG, thickness=1.0)
    raster.fill_polygons(frames, i, np.array([[[far, far], [far + 10, far], [far, far + 10]]]), [3], FG)
    raster.blit_rgba(frames, i, rgba_sprites(1, 8, 8), [0], [j], [5])
    raster.blit_masks(frames, i, np.full((1, 8, 8), 255, np.uint8), [0], [5], [j], FG)
    assert (frames == BG).all()
    assert guards_intact(buf, frames, guard)


def test_huge_shapes_draw_only_their_clipped_part():
    buf, frames, guard = guarded(1, 32, 48)
    # A horizontal line from -1e9 to 1e9, 3 px wide, centred on row 10: rows 9..11 fully inked.
    raster.draw_lines(frames, [0], [-1e9], [10.5], [1e9], [10.5], [3.0], FG)
    assert (frames[0, 9:12] == FG).all()
    assert (frames[0, :9] == BG).all() and (frames[0, 12:] == BG).all()
    # A huge disc covering the frame fills it; a huge polygon containing it too.
    raster.draw_circles(frames, [0], [1e6], [1e6], [1e7], (1, 2, 3))
    assert (frames[0] == (1, 2, 3)).all()
    raster.fill_polygons(frames, [0], np.array([[[-1e9, -1e9], [1e9, -1e9], [0.0, 1e9]]]), [3], (4, 5, 6))
    assert (frames[0] == (4, 5, 6)).all()
    # A huge disc whose edge crosses the frame draws only the part inside, and a huge ring whose
    # thickness hides the whole frame inside its hole draws nothing.
    raster.fill(frames, [0], BG)
    raster.draw_circles(frames, [0], [24.0], [1e6 + 16.0], [1e6], FG)
    assert (frames[0, 17:] == FG).all() and (frames[0, :15] == BG).all()
    raster.fill(frames, [0], BG)
    raster.draw_circles(frames, [0], [24.0], [16.0], [1e9], FG, thickness=1.0)
    assert (frames == BG).all()
    assert guards_intact(buf, frames, guard)


_coord = st.one_of(
    st.floats(-200, 300, allow_nan=False),
    st.sampled_from([-1e300, -1e9, -1e5, 0.0, 31.999, 32.0, 1e5, 1e9, 1e300]),
)


@settings(max_examples=150, deadline=None)
@given(pts=st.lists(_coord, min_size=8, max_size=8), size=st.floats(0.0, 1e4, allow_nan=False))
def test_random_far_coordinates_never_write_outside_the_frames(pts, size):
    # Any finite coordinates: each float primitive must leave the guard bytes around the buffer
    # untouched and only ever blend towards the drawing colour.
    buf, frames, guard = guarded(2, 24, 32)
    raster.draw_lines(frames, [1], pts[0], pts[1], pts[2], pts[3], size, FG)
    raster.draw_circles(frames, [0], pts[4], pts[5], size, FG, thickness=pts[6] % 7)
    raster.fill_polygons(frames, [1], np.array(pts).reshape(1, 4, 2), [4], FG)
    assert guards_intact(buf, frames, guard)
    lo, hi = np.minimum(BG, FG), np.maximum(BG, FG)
    assert ((frames >= lo) & (frames <= hi)).all()


# ---------------------------------------------------------------------------------------------
# batching

def _batch_cases(rng, n):
    """Per primitive: draw(frames, idx, colors, sel) drawing the items sel of one fixed random set."""
    sprites = rgba_sprites(3, 10, 12)
    masks = rng.integers(0, 256, (4, 9, 7), dtype=np.uint8)
    verts = np.stack([star(cx=rng.uniform(0, 64), cy=rng.uniform(0, 48), outer=15, inner=6) for _ in range(n)])
    nverts = rng.integers(3, 11, n)
    fl = lambda lo, hi: rng.uniform(lo, hi, n)
    it = lambda lo, hi: rng.integers(lo, hi, n)
    rects = (it(-10, 60), it(-10, 40), it(0, 70), it(0, 50))
    lines = (fl(-10, 70), fl(-10, 60), fl(-10, 70), fl(-10, 60), fl(0.2, 6))
    circles = (fl(-5, 70), fl(-5, 55), fl(1, 20), fl(-2, 5))
    sprite_at = (it(0, 3), it(-8, 64), it(-8, 48))
    mask_at = (it(0, 4), it(-8, 64), it(-8, 48))
    return {
        "fill": lambda f, i, c, s: raster.fill(f, i, c),
        "fill_rects": lambda f, i, c, s: raster.fill_rects(f, i, *(v[s] for v in rects), c),
        "draw_lines": lambda f, i, c, s: raster.draw_lines(f, i, *(v[s] for v in lines), c),
        "draw_circles": lambda f, i, c, s: raster.draw_circles(
            f, i, *(v[s] for v in circles[:3]), c, thickness=circles[3][s]),
        "fill_polygons": lambda f, i, c, s: raster.fill_polygons(f, i, verts[s], nverts[s], c),
        "blit_rgba": lambda f, i, c, s: raster.blit_rgba(f, i, sprites, *(v[s] for v in sprite_at)),
        "blit_masks": lambda f, i, c, s: raster.blit_masks(f, i, masks, *(v[s] for v in mask_at), c),
    }


@pytest.mark.parametrize("prim", ["fill", "fill_rects", "draw_lines", "draw_circles", "fill_polygons", "blit_rgba", "blit_masks"])
def test_batched_call_equals_drawing_each_item_alone(prim):
    rng = np.random.default_rng(7)
    n, b = 24, 5
    draw = _batch_cases(rng, n)[prim]
    idx = rng.integers(0, b, n)
    colors = rng.integers(0, 256, (n, 3), dtype=np.uint8)
    base = smooth_image(b, 48, 64)
    batched = base.copy()
    draw(batched, idx, colors, slice(None))
    one_by_one = base.copy()
    for k in range(n):
        s = slice(k, k + 1)
        draw(one_by_one, idx[s], colors[s], s)
    np.testing.assert_array_equal(batched, one_by_one)
    assert not np.array_equal(batched, base)


def test_single_colour_broadcasts_and_empty_batch_is_a_no_op():
    a, b = blank(2), blank(2)
    raster.draw_circles(a, [0, 1], [20.0, 40.0], [20.0, 50.0], [8.0, 12.0], np.array(FG, np.uint8))
    raster.draw_circles(b, [0, 1], [20.0, 40.0], [20.0, 50.0], [8.0, 12.0], np.array([FG, FG], np.uint8))
    np.testing.assert_array_equal(a, b)
    raster.draw_lines(a, np.zeros(0, np.int64), [], [], [], [], [], FG)
    raster.fill_polygons(a, [], np.zeros((0, 4, 2)), [], FG)
    text.draw_text(a, [], [], [], [], FG, text.glyph_atlas(10))
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------------
# argument checks

def _bad_calls():
    f = blank(2, 16, 16)
    ok_idx = np.array([0, 1])
    sprites = rgba_sprites(2, 4, 4)
    masks = np.zeros((2, 4, 4), np.uint8)
    return [
        ("frames", lambda: raster.fill(f.astype(np.float32), ok_idx, FG)),
        ("frames", lambda: raster.fill(f[:, :, ::2], ok_idx, FG)),
        ("frames", lambda: raster.fill(f[..., :2].copy(), ok_idx, FG)),
        ("frames", lambda: raster.fill(np.zeros((16, 16, 3), np.uint8), [0], FG)),
        ("frames", lambda: raster.fill(f.tolist(), ok_idx, FG)),
        ("idx", lambda: raster.fill(f, [0, 2], FG)),
        ("idx", lambda: raster.fill(f, [-1], FG)),
        ("idx", lambda: raster.fill(f, np.array([0.0, 1.0]), FG)),
        ("idx", lambda: raster.fill(f, [[0, 1]], FG)),
        ("colors", lambda: raster.fill(f, ok_idx, np.zeros((3, 3), np.uint8))),
        ("colors", lambda: raster.fill(f, ok_idx, np.array([0.5, 0.5, 0.5]))),
        ("colors", lambda: raster.fill(f, ok_idx, [300, 0, 0])),
        ("x1", lambda: raster.fill_rects(f, ok_idx, [0, 0], [0, 0], [1, 2, 3], [4, 4], FG)),
        ("x0", lambda: raster.fill_rects(f, ok_idx, [0.5, 0], [0, 0], [1, 2], [4, 4], FG)),
        ("width", lambda: raster.draw_lines(f, ok_idx, 0, 0, 5, 5, [1.0], FG)),
        ("width", lambda: raster.draw_lines(f, ok_idx, 0, 0, 5, 5, np.array(["a", "b"]), FG)),
        ("radius", lambda: raster.draw_circles(f, ok_idx, 3, 3, [1, 2, 3], FG)),
        ("thickness", lambda: raster.draw_circles(f, ok_idx, 3, 3, 2, FG, thickness=[1, 2, 3])),
        ("verts", lambda: raster.fill_polygons(f, ok_idx, np.zeros((2, 4, 3)), [3, 3], FG)),
        ("nverts", lambda: raster.fill_polygons(f, ok_idx, np.zeros((2, 4, 2)), [3, 5], FG)),
        ("sprites", lambda: raster.blit_rgba(f, ok_idx, sprites[:, :, ::2], [0, 1], 0, 0)),
        ("sprites", lambda: raster.blit_rgba(f, ok_idx, sprites[..., :3].copy(), [0, 1], 0, 0)),
        ("sprite_ids", lambda: raster.blit_rgba(f, ok_idx, sprites, [0, 2], 0, 0)),
        ("masks", lambda: raster.blit_masks(f, ok_idx, masks.astype(np.int16), [0, 1], 0, 0, FG)),
        ("mask_ids", lambda: raster.blit_masks(f, ok_idx, masks, [-1, 0], 0, 0, FG)),
        ("y", lambda: raster.blit_masks(f, ok_idx, masks, [0, 1], 0, [1.5, 2.5], FG)),
        ("dst", lambda: resample.area(f, np.zeros((2, 8, 8, 3), np.uint8)[:, ::2])),
        ("dst", lambda: resample.bilinear(f, np.zeros((2, 8, 8, 3), np.float32))),
        ("src", lambda: resample.bilinear(f.astype(np.int32), np.zeros((2, 8, 8, 3), np.uint8))),
        ("src", lambda: resample.area(f, np.zeros((3, 8, 8, 3), np.uint8))),
        ("texts", lambda: text.draw_text(f, ok_idx, ["a"], 0, 0, FG, text.glyph_atlas(10))),
        ("texts", lambda: text.draw_text(f, ok_idx, "ab", 0, 0, FG, text.glyph_atlas(10))),
        ("atlas", lambda: text.draw_text(f, ok_idx, ["a", "b"], 0, 0, FG, None)),
    ]


@pytest.mark.parametrize("case", range(len(_bad_calls())))
def test_bad_arguments_raise_value_error_naming_them(case):
    name, call = _bad_calls()[case]
    with pytest.raises(ValueError, match=rf"\b{name}\b"):
        call()


def test_read_only_frames_are_refused():
    f = blank()
    f.flags.writeable = False
    with pytest.raises(ValueError, match="frames"):
        raster.fill(f, [0], FG)
