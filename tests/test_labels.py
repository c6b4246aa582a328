"""render/labels.py, the one label builder: ink crops equal what render/text.py (or Pillow) draws,
anchors put the ink where they say, drawing on any background equals a direct draw of the
text, background boxes (opaque and alpha-blended), and bad arguments raise naming the field."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont

from visgym.render import labels, text


def _ink_box(frame, background):
    ys, xs = np.nonzero((frame != np.asarray(background, np.uint8)).any(axis=2))
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


@pytest.mark.parametrize("s,size,bold", [("7", 28, False), ("12", 32, False),
                                         ("current board", 20, True), ("Ag,j", 14, False)])
def test_coverage_is_the_text_drawn_white_on_black_cropped_to_ink(s, size, bold):
    lab = labels.label(s, size, bold)
    frame = np.zeros((1, 120, 400, 3), np.uint8)
    atlas = text.glyph_atlas(size)
    for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1))[:4 if bold else 1]:
        text.draw_text(frame, [0], [s], 30 + dx, 40 + dy, (255, 255, 255), atlas)
    x0, y0, x1, y1 = _ink_box(frame[0], (0, 0, 0))
    assert (x0 - 30, y0 - 40, x1 - 30, y1 - 40) == lab.ink
    assert np.array_equal(lab.coverage, frame[0, y0:y1, x0:x1, 0])
    assert (lab.width, lab.height) == (x1 - x0, y1 - y0)
    assert not lab.coverage.flags.writeable
    assert labels.label(s, size, bold) is lab   # rendered once


def test_anchors_place_the_ink_box():
    lab = labels.label("42", 24)
    w, h = lab.width, lab.height
    assert lab.place("lt", 10, 20) == (10, 20)
    assert lab.place("mm", 50, 50) == (50 - w // 2, 50 - h // 2)
    assert lab.place("rb", 100, 80) == (100 - w, 80 - h)   # bottom-right corner at the point
    assert lab.place("pa", 5, 6) == (5 + lab.ink[0], 6 + lab.ink[1])
    # Baseline anchor: the ink of digits ends on the baseline (no descender).
    left, top = lab.place("ps", 5, 60)
    assert top + h == 60 and left == 5 + lab.ink[0]
    frame = np.zeros((1, 100, 100, 3), np.uint8)
    lab.draw(frame, 0, *lab.place("rb", 90, 70), (255, 255, 255))
    assert _ink_box(frame[0], (0, 0, 0))[2:] == (90, 70)
    with pytest.raises(ValueError, match="anchor"):
        lab.place("xx", 0, 0)


def test_centred_rounding():
    assert labels.centred(0, 10, 3) == 3 and labels.centred(0, 10, 3, round_up=True) == 4
    assert labels.centred(5, 9, 4) == 5 and labels.centred(2, 12, 4, True) == 5


def test_draw_equals_a_direct_draw_on_any_background():
    rng = np.random.default_rng(1)
    background = rng.integers(0, 256, (1, 60, 90, 3), np.uint8)
    for bold in (False, True):
        lab = labels.label("31", 22, bold)
        got = background.copy()
        lab.draw(got, [0], 17, 9, (10, 200, 30))
        want = background.copy()
        for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1))[:4 if bold else 1]:
            text.draw_text(want, [0], ["31"], 17 - lab.ink[0] + dx, 9 - lab.ink[1] + dy,
                           (10, 200, 30), text.glyph_atlas(22))
        assert np.array_equal(got, want)


def test_background_box_opaque_and_alpha():
    lab = labels.label("5", 20)
    frame = np.full((2, 50, 50, 3), 200, np.uint8)
    lab.draw(frame, [0, 1], 10, 12, (255, 255, 255), background=(0, 0, 0), pad=3)
    box = frame[0, 9:12 + lab.height + 3, 7:10 + lab.width + 3]
    assert (box.max(axis=2) == box.min(axis=2)).all()          # grey levels only
    assert (frame[0, 9:12, 7:10 + lab.width + 3] == 0).all()     # the pad is background
    assert (frame[0, :9] == 200).all() and (frame[0, :, 10 + lab.width + 3:] == 200).all()
    assert np.array_equal(frame[0], frame[1])
    half = np.full((1, 50, 50, 3), 200, np.uint8)
    lab.draw(half, 0, 10, 12, (255, 255, 255), background=(0, 0, 100), pad=2, alpha=0.25)
    # Outside the ink, the box is round(bg * 0.25 + 200 * 0.75).
    assert tuple(half[0, 10, 8]) == (150, 150, 175)
    assert tuple(half[0, 0, 0]) == (200, 200, 200)


def test_patch_is_the_label_on_a_box():
    lab = labels.label("9", 28)
    patch = lab.patch((255, 255, 255), (0, 0, 0), pad=(2, 3, 4, 5))
    assert patch.shape == (lab.height + 8, lab.width + 6, 3)
    assert np.array_equal(patch[3:3 + lab.height, 2:2 + lab.width, 0], lab.coverage)
    assert (patch[:3] == 0).all() and (patch[:, -4:] == 0).all()


def test_pillow_engine_is_pillows_draw_text():
    lab = labels.label("17", 16, engine="pillow")
    font = ImageFont.load_default(size=16)
    im = Image.new("RGB", (60, 30), (255, 255, 255))
    ImageDraw.Draw(im).text((9, 4), "17", fill=(0, 0, 0), font=font)
    got = np.full((1, 30, 60, 3), 255, np.uint8)
    lab.draw_at_pen(got, 0, 9, 4, (0, 0, 0))
    assert np.array_equal(got[0], np.asarray(im))
    assert lab.layout == ImageDraw.Draw(im).textbbox((0, 0), "17", font=font)
    x0, y0, x1, y1 = _ink_box(got[0], (255, 255, 255))
    assert (x0 - 9, y0 - 4, x1 - 9, y1 - 4) == lab.ink


@pytest.mark.parametrize("args,match", [
    (("", 10), "text"), ((5, 10), "text"), (("1", 0), "size"), (("1", 10, False, "cv2"), "engine"),
    (("1", 10, True, "pillow"), "bold"), ((" ", 10), "inks no pixel"),
])
def test_bad_labels(args, match):
    with pytest.raises(ValueError, match=match):
        labels.label(*args)


def test_bad_draw_arguments_draw_nothing():
    lab = labels.label("3", 12)
    frame = np.zeros((1, 20, 20, 3), np.uint8)
    with pytest.raises(ValueError, match="pad"):
        lab.draw(frame, 0, 0, 0, (1, 2, 3), background=(0, 0, 0), pad=-1)
    with pytest.raises(ValueError, match="alpha"):
        lab.draw(frame, 0, 0, 0, (1, 2, 3), background=(0, 0, 0), alpha=2)
    assert not frame.any()
