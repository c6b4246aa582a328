"""The image compositor (render/compose.py, render/_compose.pyx): rectangle blits equal NumPy
slicing (clipped at every edge), crop + resample equals Pillow exactly, labels are drawn where
render/text.py draws them, and bad arguments raise ValueError and leave the frames untouched."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from visgym.render import compose, resize, text
from visgym.render.compose import ImageTable

RNG = np.random.default_rng(5)


def _images(n=5, rng=RNG):
    return [rng.integers(0, 256, (int(rng.integers(8, 60)), int(rng.integers(8, 60)), 3),
                         np.uint8) for _ in range(n)]


def _frames(b=4, h=48, w=64):
    return np.full((b, h, w, 3), 17, np.uint8)


def _reference_blit(frames, b, image, sx, sy, sw, sh, dx, dy):
    """The same copy with NumPy slicing and explicit clipping."""
    H, W = frames.shape[1:3]
    src = image[sy:sy + sh, sx:sx + sw]
    x0, y0 = max(dx, 0), max(dy, 0)
    x1, y1 = min(dx + sw, W), min(dy + sh, H)
    if x1 > x0 and y1 > y0:
        frames[b, y0:y1, x0:x1] = src[y0 - dy:y1 - dy, x0 - dx:x1 - dx]


def test_table_packs_images():
    images = _images()
    table = ImageTable(images)
    assert len(table) == len(images)
    for k, im in enumerate(images):
        assert np.array_equal(table.image(k), im)
        assert table.size(k) == (im.shape[1], im.shape[0])


def test_blits_equal_numpy_slicing_with_clipping_at_all_edges():
    images = _images(6)
    table = ImageTable(images)
    frames = _frames()
    expected = frames.copy()
    rng = np.random.default_rng(1)
    rows = []
    for _ in range(300):
        k = int(rng.integers(len(images)))
        h, w = images[k].shape[:2]
        sx, sy = int(rng.integers(0, w)), int(rng.integers(0, h))
        sw, sh = int(rng.integers(0, w - sx + 1)), int(rng.integers(0, h - sy + 1))
        # destinations reach past every edge, and some lie wholly outside the frame
        dx, dy = int(rng.integers(-70, 90)), int(rng.integers(-60, 70))
        rows.append((int(rng.integers(4)), k, sx, sy, sw, sh, dx, dy))
    for r in rows:
        _reference_blit(expected, r[0], images[r[1]], *r[2:])
    cols = list(zip(*rows))
    compose.blit_rects(frames, *cols[:1], table, *cols[1:])
    assert np.array_equal(frames, expected)


@pytest.mark.parametrize("dx,dy", [(-5, 10), (50, 10), (10, -5), (10, 40), (-30, -30),
                                   (60, 44), (-100, 0), (0, 100)])
def test_clipping_each_edge(dx, dy):
    image = RNG.integers(0, 256, (20, 20, 3), np.uint8)
    table = ImageTable([image])
    frames, expected = _frames(1), _frames(1)
    _reference_blit(expected, 0, image, 2, 3, 16, 15, dx, dy)
    compose.blit_rects(frames, [0], table, [0], [2], [3], [16], [15], [dx], [dy])
    assert np.array_equal(frames, expected)


def test_blit_images_whole():
    images = _images(3)
    table = ImageTable(images)
    frames, expected = _frames(2), _frames(2)
    for b, k, dx, dy in [(0, 0, 1, 2), (1, 2, -3, 30), (0, 1, 40, -4)]:
        h, w = images[k].shape[:2]
        _reference_blit(expected, b, images[k], 0, 0, w, h, dx, dy)
    compose.blit_images(frames, [0, 1, 0], table, [0, 2, 1], [1, -3, 40], [2, 30, -4])
    assert np.array_equal(frames, expected)


@pytest.mark.parametrize("bad", [
    dict(idx=[0, 4]), dict(idx=[0, -1]), dict(image_ids=[0, 3]), dict(image_ids=[-1, 0]),
    dict(sx=[0, -1]), dict(sx=[0, 15]), dict(sw=[4, 21]), dict(sh=[4, -2]), dict(sy=[0, 19]),
])
def test_bad_entries_raise_and_draw_nothing(bad):
    table = ImageTable([RNG.integers(0, 256, (20, 20, 3), np.uint8)] * 3)
    frames = _frames()
    before = frames.copy()
    args = dict(idx=[0, 1], image_ids=[0, 1], sx=[0, 0], sy=[0, 0], sw=[6, 6], sh=[6, 6],
                dx=[0, 5], dy=[0, 5])
    args.update(bad)
    with pytest.raises(ValueError, match="out of range"):
        compose.blit_rects(frames, args["idx"], table, args["image_ids"], args["sx"],
                           args["sy"], args["sw"], args["sh"], args["dx"], args["dy"])
    assert np.array_equal(frames, before)


def test_bad_arrays_raise():
    table = ImageTable(_images(2))
    frames = _frames()
    with pytest.raises(ValueError, match="sw: expected 2 entries"):
        compose.blit_rects(frames, [0, 1], table, [0, 1], [0, 0], [0, 0], [1], [1, 1], [0, 0],
                           [0, 0])
    with pytest.raises(ValueError, match="frames"):
        compose.blit_rects(frames[:, ::2], [0], table, [0], [0], [0], [1], [1], [0], [0])
    with pytest.raises(ValueError, match="table"):
        compose.blit_rects(frames, [0], frames, [0], [0], [0], [1], [1], [0], [0])
    with pytest.raises(ValueError, match="sx: expected whole numbers"):
        compose.blit_rects(frames, [0], table, [0], [0.5], [0], [1], [1], [0], [0])
    with pytest.raises(ValueError, match="dx: values must fit"):
        compose.blit_rects(frames, [0], table, [0], [0], [0], [1], [1], [2**40], [0])
    with pytest.raises(ValueError, match="images\\[1\\]"):
        ImageTable([np.zeros((4, 4, 3), np.uint8), np.zeros((4, 4), np.uint8)])


# ---------------------------------------------------------------------------------------------
# resample

def _pillow(image, box, size, filt, mode):
    im = Image.fromarray(image)
    f = {"lanczos": Image.Resampling.LANCZOS, "bilinear": Image.Resampling.BILINEAR}[filt]
    if mode == "crop":
        return np.asarray(im.crop(box).resize(size, f))
    return np.asarray(im.resize(size, f, box=box))


def test_coefficients_equal_resize_module_for_whole_image():
    for n_in, n_out in [(97, 40), (40, 97), (224, 224), (507, 224)]:
        b0, w0 = resize.coefficients(n_in, n_out)
        b1, w1 = compose.coefficients(n_in, 0, n_in, n_out)
        assert np.array_equal(b0, b1) and np.array_equal(w0, w1)


@pytest.mark.parametrize("filt", ["lanczos", "bilinear"])
@pytest.mark.parametrize("mode", ["crop", "box"])
def test_resample_exact_against_pillow(filt, mode):
    rng = np.random.default_rng(hash((filt, mode)) % 1000)
    for _ in range(12):
        h, w = (int(v) for v in rng.integers(12, 160, 2))
        x0, y0 = int(rng.integers(0, w - 1)), int(rng.integers(0, h - 1))
        box = (x0, y0, int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1)))
        size = (int(rng.integers(2, 130)), int(rng.integers(2, 130)))
        image = rng.integers(0, 256, (h, w, 3), np.uint8)
        assert np.array_equal(compose.resample(image, box, size, filt, mode),
                              _pillow(image, box, size, filt, mode)), (h, w, box, size)


def test_zoom_puzzle_tiles_exact():
    """The zoom_in_puzzle case: nested crops of a photo resized to 224 x 224 with Lanczos."""
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (300, 400, 3), np.uint8)
    for box in [(0, 0, 400, 300), (100, 80, 300, 230), (150, 120, 250, 195), (180, 140, 230, 177)]:
        assert np.array_equal(compose.resample(image, box, (224, 224)),
                              _pillow(image, box, (224, 224), "lanczos", "crop"))


def test_resample_into_frames():
    images = _images(3)
    table = ImageTable(images)
    frames, expected = _frames(2, 60, 90), _frames(2, 60, 90)
    boxes = [(0, 0, images[0].shape[1], images[0].shape[0]), (2, 3, 7, 8), (1, 1, 6, 5)]
    sizes = [(30, 30), (40, 25), (12, 50)]
    where = [(0, 0, 0), (1, 60, 40), (0, -5, 20)]
    for (b, dx, dy), k, box, size in zip(where, range(3), boxes, sizes):
        tile = _pillow(images[k], box, size, "lanczos", "crop")
        _reference_blit(expected, b, tile, 0, 0, size[0], size[1], dx, dy)
    compose.resample_into(frames, [w[0] for w in where], table, [0, 1, 2], boxes, sizes,
                          [w[1] for w in where], [w[2] for w in where])
    assert np.array_equal(frames, expected)


@pytest.mark.parametrize("kwargs,match", [
    (dict(boxes=[(0, 0, 4, 4), (0, 0, 99, 4)]), "entry 1: box"),
    (dict(boxes=[(0, 0, 4, 4), (3, 0, 3, 4)]), "entry 1: box"),
    (dict(sizes=[(4, 4), (0, 4)]), "entry 1: size"),
    (dict(idx=[0, 9]), "idx"),
    (dict(image_ids=[0, 5]), "image_ids"),
    (dict(filter="bicubic"), "filter"),
    (dict(mode="stretch"), "mode"),
])
def test_resample_into_bad_arguments_draw_nothing(kwargs, match):
    table = ImageTable([RNG.integers(0, 256, (10, 10, 3), np.uint8)] * 2)
    frames = _frames()
    before = frames.copy()
    args = dict(idx=[0, 1], image_ids=[0, 1], boxes=[(0, 0, 4, 4), (1, 1, 9, 9)],
                sizes=[(4, 4), (8, 8)], dx=[0, 0], dy=[0, 0])
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        compose.resample_into(frames, args.pop("idx"), table, args.pop("image_ids"),
                              args.pop("boxes"), args.pop("sizes"), args.pop("dx"),
                              args.pop("dy"), **args)
    assert np.array_equal(frames, before)


# ---------------------------------------------------------------------------------------------
# labels

def test_labels_drawn_with_background_box():
    atlas = text.glyph_atlas(16)
    frames = np.full((2, 64, 96, 3), 200, np.uint8)
    compose.draw_labels(frames, [0, 1], ["3", "12"], [60, 10], [30, 5], (255, 255, 255),
                        atlas, background=(0, 0, 0), pad=4)
    # the same text drawn by render/text.py on the same box
    expected = np.full((2, 64, 96, 3), 200, np.uint8)
    for b, s, x, y in [(0, "3", 60, 30), (1, "12", 10, 5)]:
        tw, th = text.text_size(s, atlas)
        expected[b, y - 4:y + th + 4, x - 4:x + tw + 4] = 0
    text.draw_text(expected, [0, 1], ["3", "12"], [60, 10], [30, 5], (255, 255, 255), atlas)
    assert np.array_equal(frames, expected)
    # ink is there: white pixels inside each box, the background outside untouched
    assert (frames[0, 30:30 + atlas.line_height, 60:75] == 255).any()
    assert (frames[1, :, 60:] == 200).all()


def test_labels_bad_arguments_draw_nothing():
    atlas = text.glyph_atlas(12)
    frames = _frames()
    before = frames.copy()
    with pytest.raises(ValueError, match="texts"):
        compose.draw_labels(frames, [0, 1], ["1"], [0, 0], [0, 0], (1, 2, 3), atlas)
    with pytest.raises(ValueError, match="idx"):
        compose.draw_labels(frames, [0, 7], ["1", "2"], [0, 0], [0, 0], (1, 2, 3), atlas,
                            background=(0, 0, 0))
    with pytest.raises(ValueError, match="atlas"):
        compose.draw_labels(frames, [0], ["1"], [0], [0], (1, 2, 3), None)
    with pytest.raises(ValueError, match="pad"):
        compose.draw_labels(frames, [0], ["1"], [0], [0], (1, 2, 3), atlas, pad=-1)
    assert np.array_equal(frames, before)


def test_step_redraw_only_changed_rects():
    """A swap of two jigsaw pieces redraws exactly two rectangles; the result equals a full
    redraw of the new arrangement."""
    image = RNG.integers(0, 256, (112, 112, 3), np.uint8)
    table = ImageTable([image])
    cells = [(c * 56, r * 56) for r in range(2) for c in range(2)]
    order = [0, 1, 2, 3]

    def full(order):
        frames = _frames(1, 120, 120)
        cols = [[0] * 4, [0] * 4, [cells[p][0] for p in order], [cells[p][1] for p in order],
                [56] * 4, [56] * 4, [c[0] + 2 for c in cells], [c[1] + 2 for c in cells]]
        compose.blit_rects(frames, cols[0], table, *cols[1:])
        return frames

    frames = full(order)
    order[0], order[3] = order[3], order[0]
    changed = [0, 3]
    compose.blit_rects(frames, [0, 0], table, [0, 0], [cells[order[i]][0] for i in changed],
                       [cells[order[i]][1] for i in changed], [56, 56], [56, 56],
                       [cells[i][0] + 2 for i in changed], [cells[i][1] + 2 for i in changed])
    assert np.array_equal(frames, full(order))


def test_one_channel_order_probe_gives_pillows_colour_pixels():
    """The pass order is probed on one channel; colour crops of many sizes (zoom_in_puzzle's
    range, down and up) still come out as Pillow's."""
    rng = np.random.default_rng(17)
    image = rng.integers(0, 256, (520, 700, 3), np.uint8)
    for _ in range(40):
        w, h = int(rng.integers(20, 700)), int(rng.integers(20, 520))
        x0, y0 = int(rng.integers(0, 701 - w)), int(rng.integers(0, 521 - h))
        box = (x0, y0, x0 + w, y0 + h)
        assert np.array_equal(compose.resample(image, box, (224, 224)),
                              _pillow(image, box, (224, 224), "lanczos", "crop")), box


def test_crop_resample_probes_once_per_crop_size_and_fills_out():
    from visgym.render import compose as c

    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (90, 120, 3), np.uint8)
    before = len(c._ORDERS)
    out = np.empty((40, 30, 3), np.uint8)
    for x0, y0 in ((0, 0), (7, 3), (20, 40)):   # same crop size at three places
        box = (x0, y0, x0 + 61, y0 + 47)
        got = c.resample(image, box, (30, 40), out=out)
        assert got is out
        assert np.array_equal(out, _pillow(image, box, (30, 40), "lanczos", "crop"))
    assert len(c._ORDERS) - before <= 1
    with pytest.raises(ValueError, match="out"):
        c.resample(image, (0, 0, 61, 47), (30, 40), out=np.empty((30, 40, 3), np.uint8))
