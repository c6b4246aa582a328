"""render/hsv.py against OpenCV itself (cv2 is a test oracle only: visgym never imports it) and
against the reference's recorded colour wheels.

The installed OpenCV (5.x) converts HSV -> RGB like the reference's 4.11 on its SIMD path
(truncating) and on its scalar path (rounding); its SIMD block may be wider than the reference
machine's, so the tests measure the installed one's block and pass it in.
"""
import json

import numpy as np
import pytest

from parity_data import parity_dir
from visgym.render import circles, hsv

cv2 = pytest.importorskip("cv2")


def _all_rgb() -> np.ndarray:
    codes = np.arange(1 << 24, dtype=np.uint32)
    rgb = np.stack([(codes >> 16) & 255, (codes >> 8) & 255, codes & 255], -1)
    return rgb.astype(np.uint8).reshape(4096, 4096, 3)


def _all_hsv() -> np.ndarray:
    h, s, v = np.meshgrid(np.arange(180), np.arange(256), np.arange(256), indexing="ij")
    return np.stack([h, s, v], -1).astype(np.uint8).reshape(180 * 256, 256, 3)


def _installed_block() -> int:
    """Pixels per SIMD block of the installed OpenCV's HSV -> RGB: the first run length whose
    conversion truncates a value that rounding would raise."""
    for n in range(8, 257, 8):
        img = np.zeros((1, n, 3), np.uint8)
        img[0, :] = (133, 165, 105)   # exact value 66.5 on the red channel
        if cv2.cvtColor(img, cv2.COLOR_HSV2RGB)[0, 0, 0] == 66:
            return n
    pytest.skip("cannot find the installed OpenCV's SIMD block")


def test_rgb_to_hsv_equals_opencv_for_every_colour():
    rgb = _all_rgb()
    np.testing.assert_array_equal(hsv.rgb_to_hsv(rgb), cv2.cvtColor(rgb, cv2.COLOR_RGB2HSV))


def test_bgr_to_hsv_equals_opencv_on_a_dense_sample():
    bgr = _all_rgb()[::7, ::3]
    np.testing.assert_array_equal(hsv.bgr_to_hsv(bgr), cv2.cvtColor(bgr, cv2.COLOR_BGR2HSV))


def test_hsv_to_rgb_simd_path_equals_opencv_for_every_input():
    image = _all_hsv()   # 11.8 M pixels: a whole number of blocks, all on the SIMD path
    block = _installed_block()
    assert (image.shape[0] * image.shape[1]) % block == 0
    np.testing.assert_array_equal(hsv.hsv_to_rgb(image, block=block),
                                  cv2.cvtColor(image, cv2.COLOR_HSV2RGB))
    np.testing.assert_array_equal(hsv.hsv_to_bgr(image, block=block),
                                  cv2.cvtColor(image, cv2.COLOR_HSV2BGR))


def test_hsv_to_rgb_scalar_path_equals_opencv_on_short_runs():
    """Runs shorter than a block take OpenCV's scalar (rounding) path: every input, as many
    single-row images of block - 1 pixels (one call each would take minutes)."""
    block = _installed_block()
    flat = _all_hsv().reshape(-1, 3)
    rng = np.random.default_rng(0)
    run = block - 1
    picks = rng.choice(flat.shape[0], run * 4000, replace=False).reshape(4000, run)
    for rows in picks:
        img = flat[rows][None]
        np.testing.assert_array_equal(hsv.hsv_to_rgb(img, block=block),
                                      cv2.cvtColor(img, cv2.COLOR_HSV2RGB))


def test_hsv_to_rgb_row_tails_after_the_last_block_round_like_opencv():
    """OpenCV converts row by row: the last width mod block pixels of every row round."""
    block = _installed_block()
    rng = np.random.default_rng(1)
    for rows, n in ((1, block + 1), (3, 2 * block + 5), (7, 3 * block - 1), (2, 5 * block)):
        img = np.stack([rng.integers(0, 180, (rows, n)), rng.integers(0, 256, (rows, n)),
                        rng.integers(0, 256, (rows, n))], -1).astype(np.uint8)
        np.testing.assert_array_equal(hsv.hsv_to_rgb(img, block=block),
                                      cv2.cvtColor(img, cv2.COLOR_HSV2RGB))


def test_scalar_path_rounds_exact_halves_the_fused_way():
    """(H 133, S 165, V 105): red is exactly 66.5 in real arithmetic; the fused multiply-add
    rounds it up on the scalar path (the reference's wheel shows 67), truncation gives 66."""
    assert hsv.hsv_to_rgb_px(133, 165, 105, True) == (67, 37, 105)
    assert hsv.hsv_to_rgb_px(133, 165, 105, False)[0] == 66


def test_hue_out_of_range_names_the_argument():
    with pytest.raises(ValueError, match="hue"):
        hsv.hsv_to_rgb(np.array([[180, 10, 10]], np.uint8))
    with pytest.raises(ValueError, match="image"):
        hsv.rgb_to_hsv(np.zeros((4, 4), np.uint8))


def test_recolour_keeps_each_pixels_value_like_opencv_on_the_whole_image():
    rng = np.random.default_rng(2)
    block = _installed_block()
    photo = rng.integers(0, 256, (37, 3 * block // 2 + 5, 3), dtype=np.uint8)   # row tails
    h8, s8 = 71, 190
    cx, cy, r = photo.shape[1] - 8, 20, 12
    table = np.empty((2, 256, 3), np.uint8)
    done = np.zeros((2, 256), np.bool_)
    got = photo.copy()
    tail = hsv.tail_start(photo.shape[1], block)
    hsv.recolour_masked(got, photo, circles.disk_mask(r), cx, cy, h8, s8, tail, table, done)
    # The reference: the whole photo to HSV, H and S overwritten under the disk, back to RGB.
    mask = np.zeros(photo.shape[:2], np.uint8)
    cv2.circle(mask, (cx, cy), r, 1, -1)
    full = cv2.cvtColor(photo, cv2.COLOR_RGB2HSV)
    full[mask > 0, 0] = h8
    full[mask > 0, 1] = s8
    back = cv2.cvtColor(full, cv2.COLOR_HSV2RGB)
    want = photo.copy()
    want[mask > 0] = back[mask > 0]
    np.testing.assert_array_equal(got, want)


def test_grey_annulus_is_the_distance_ring():
    dst = np.zeros((40, 50, 3), np.uint8)
    hsv.paint_annulus(dst, 20, 18, 5, 9, 40, 50, 128, 128, 128)
    yy, xx = np.mgrid[:40, :50]
    d2 = (xx - 20) ** 2 + (yy - 18) ** 2
    np.testing.assert_array_equal(dst[..., 0] == 128, (d2 > 25) & (d2 <= 81))


def test_wheel_maps_follow_the_spec():
    hue, sat, inside = hsv.wheel_maps(256)
    mid = 128
    assert inside[mid, mid] and not inside[0, 0] and inside[mid, 0] and not inside[mid - 1, 0]
    assert hue[mid, 255] == 0            # red at the right
    assert hue[255, mid] == 45           # 90 degrees at the bottom (y grows downward)
    assert hue[mid, 0] == 90             # cyan at the left
    assert hue[0, mid] == 135            # 270 degrees at the top
    assert sat[mid, mid] == 0 and sat[mid, 0] == 255
    assert sat[mid, mid + 64] == 127     # floor(64 / 128 * 255)
    with pytest.raises(ValueError):
        hue[0, 0] = 1


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_wheel_with_marker_equals_the_reference_frame(difficulty):
    from PIL import Image

    path = parity_dir() / "frames" / f"colorization_{difficulty}.png"
    if not path.is_file():
        pytest.skip(f"reference frame missing: {path}")
    want = np.asarray(Image.open(path).convert("RGB"))[:256, :256]
    with open(parity_dir() / "colorization.jsonl") as f:
        init = next(json.loads(line)["init_state"] for line in f
                    if json.loads(line)["env_id"] == f"colorization/{difficulty}")
    wheel = np.array(hsv.wheel_rgb(256, init["target_val"]))
    mx, my = hsv.marker_centre(256, init["current_hue"], init["current_sat"])
    circles.stamp_mask(wheel, circles.ring_mask_at(5, 2, mx, my, 256, 256), mx, my, 256, 256,
                       0, 0, 0)
    np.testing.assert_array_equal(wheel, want)


def test_wheels_are_cached_and_read_only():
    a = hsv.wheel_rgb(64, 200)
    assert a is hsv.wheel_rgb(64, 200)
    assert not a.flags.writeable
    with pytest.raises(ValueError, match="value"):
        hsv.wheel_rgb(64, 256)
    with pytest.raises(ValueError, match="size"):
        hsv.wheel_rgb(0, 10)


def test_marker_centre_is_the_reference_arithmetic():
    import math

    for hue, sat in [(0.0, 255), (90.0, 255), (86.17299947746278, 201), (359.9, 3), (180.0, 0)]:
        r = int(sat / 255 * (128 - 2))
        want = (128 + int(r * math.cos(math.radians(hue))),
                128 + int(r * math.sin(math.radians(hue))))
        assert hsv.marker_centre(256, hue, sat) == want
