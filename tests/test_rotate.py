"""render/rotate.py against OpenCV (cv2, installed as a test oracle only) and the reference frames.

The rotation is OpenCV 4's ``warpAffine(getRotationMatrix2D(...), INTER_LINEAR, BORDER_CONSTANT)``
for uint8: the matrix equals cv2's in every bit; the interpolation equals ``cv2.remap`` fed with
fixed-point maps (1/32 pixel, integer weights: the path OpenCV 4's warpAffine ends in) that this
test computes from warpAffine's coordinate rule on its own; the reference's frames are reproduced
pixel for pixel. The installed OpenCV (5.x) moved warpAffine itself to a floating-point path: there
the comparison is exact at 0/90/180/270 degrees and within a few levels elsewhere. The disk spans
are cv2.circle's filled disk. (The resize the pictures start from: tests/test_resample.py.)
"""
import math

import numpy as np
import pytest

from visgym.render.circles import disk_mask
from visgym.core.threads import THREAD_BYTES
from visgym.render.rotate import (bilinear_table, disk_spans, pack_rgb, rotate, rotate_rows,
                                  rotation_matrix)

cv2 = pytest.importorskip("cv2")

ANGLES = sorted(set(range(0, 360, 7)) | {0, 1, 45, 90, 135, 180, 225, 270, 300, 359})


def _image(size, seed=0):
    rng = np.random.default_rng(seed)
    # Smooth content plus noise: both interpolation regimes.
    y, x = np.mgrid[0:size, 0:size]
    smooth = np.stack([x * 255 // max(size - 1, 1), y * 255 // max(size - 1, 1),
                       (x + y) * 127 // max(size - 1, 1)], -1)
    noise = rng.integers(0, 256, (size, size, 3))
    return np.where(rng.random((size, size, 1)) < 0.3, noise, smooth).astype(np.uint8)


def _cv2_disk(size):
    m = np.zeros((size, size), np.uint8)
    cv2.circle(m, (size // 2, size // 2), size // 2, 1, thickness=-1, lineType=cv2.LINE_8)
    return m.astype(bool)


def _fixed_point_maps(matrix, size):
    """OpenCV 4 warpAffine's source coordinates: inverse matrix, 1/1024-pixel accumulation with
    round-half-even, +16, >> 5 to 1/32 pixel; as remap's (CV_16SC2, CV_16UC1) maps."""
    inv = cv2.invertAffineTransform(matrix)
    xs = np.arange(size)
    adelta = np.rint(inv[0, 0] * xs * 1024).astype(np.int64)
    bdelta = np.rint(inv[1, 0] * xs * 1024).astype(np.int64)
    x0 = np.rint((inv[0, 1] * xs + inv[0, 2]) * 1024).astype(np.int64) + 16
    y0 = np.rint((inv[1, 1] * xs + inv[1, 2]) * 1024).astype(np.int64) + 16
    big_x = (x0[:, None] + adelta[None, :]) >> 5
    big_y = (y0[:, None] + bdelta[None, :]) >> 5
    xy = np.stack([big_x >> 5, big_y >> 5], -1).astype(np.int16)
    frac = ((big_y & 31) * 32 + (big_x & 31)).astype(np.uint16)
    return xy, frac


@pytest.mark.parametrize("angle", ANGLES + [-54, 12.5, 720.0])
def test_rotation_matrix_is_cv2s_bit_for_bit(angle):
    for centre in ((64, 64), (31, 31), (0, 0)):
        np.testing.assert_array_equal(rotation_matrix(*centre, angle),
                                      cv2.getRotationMatrix2D(centre, angle, 1.0))


@pytest.mark.parametrize("size", [128, 64, 37, 9])
def test_rotation_equals_cv2_remap_of_warpaffine_fixed_point_coordinates(size):
    image = _image(size)
    for angle in ANGLES:
        matrix = cv2.getRotationMatrix2D((size // 2, size // 2), -angle, 1.0)
        xy, frac = _fixed_point_maps(matrix, size)
        want = cv2.remap(image, xy, frac, cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                         borderValue=0)
        got = rotate(image, angle)
        assert np.array_equal(got, want), (size, angle, int((got != want).any(2).sum()))


@pytest.mark.parametrize("size", [128, 64, 37])
def test_rotation_is_cv2_warpaffine_exactly_at_right_angles_and_closely_elsewhere(size):
    image = _image(size, seed=1)
    for angle in ANGLES:
        matrix = cv2.getRotationMatrix2D((size // 2, size // 2), -angle, 1.0)
        want = cv2.warpAffine(image, matrix, (size, size), flags=cv2.INTER_LINEAR,
                              borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        got = rotate(image, angle).astype(int)
        diff = np.abs(got - want)
        if angle % 90 == 0:
            assert not diff.any(), (size, angle)
        else:
            # OpenCV 5's float path vs OpenCV 4's 1/32-pixel fixed point.
            assert diff.max() <= 8 and diff.mean() < 1.0, (size, angle, diff.max(), diff.mean())


def test_clockwise_on_screen():
    # A dot right of the centre goes below it after a clockwise quarter turn (y points down).
    image = np.zeros((65, 65, 3), np.uint8)
    image[32, 50] = 255
    turned = rotate(image, 90)
    ys, xs = np.nonzero(turned[..., 0])
    assert list(zip(ys.tolist(), xs.tolist())) == [(50, 32)]


def test_angle_zero_copies_and_mask_zeroes_outside_the_disk():
    image = _image(128, seed=2)
    np.testing.assert_array_equal(rotate(image, 0.0), image)
    disk = _cv2_disk(128)
    got = rotate(image, 0.0, mask=disk)
    np.testing.assert_array_equal(got, image * disk[..., None])
    got = rotate(image, 33.0, mask=disk)
    full = rotate(image, 33.0)
    np.testing.assert_array_equal(got, full * disk[..., None])


def test_bilinear_table_sums_to_one_and_equals_the_kernels_two_stage_sum():
    table = bilinear_table().astype(np.int64)
    assert (table.sum(1) == 1 << 15).all()
    # OpenCV's saturated (0, 0) entry.
    assert table[0].tolist() == [32767, 0, 0, 1]
    rng = np.random.default_rng(3)
    v = rng.integers(0, 256, (1024, 4, 200))
    fy, fx = np.divmod(np.arange(1024), 32)
    table_result = ((table[:, :, None] * v).sum(1) + (1 << 14)) >> 15
    gx, gy = 32 - fx, 32 - fy
    two_stage = (((v[:, 0] * gy[:, None] + v[:, 2] * fy[:, None]) * gx[:, None]
                  + (v[:, 1] * gy[:, None] + v[:, 3] * fy[:, None]) * fx[:, None] + 512) >> 10)
    np.testing.assert_array_equal(table_result, two_stage)


@pytest.mark.parametrize("size", [128, 129, 64, 9, 8])
def test_disk_spans_are_cv2_circle_filled_disk(size):
    r = size // 2
    disk = disk_mask(r)
    mask = np.zeros((size, size), bool)
    n = min(size, 2 * r + 1)
    mask[:n, :n] = disk[:n, :n]
    np.testing.assert_array_equal(mask, _cv2_disk(size))
    lo, hi = disk_spans(mask)
    rebuilt = (np.arange(size)[None, :] >= lo[:, None]) & (np.arange(size)[None, :] < hi[:, None])
    np.testing.assert_array_equal(rebuilt, mask)


def test_disk_spans_refuse_a_row_with_a_gap():
    mask = np.zeros((4, 4), bool)
    mask[1, [0, 2]] = True
    with pytest.raises(ValueError, match="row 1"):
        disk_spans(mask)


def test_batched_rows_use_their_own_picture_and_angle_and_leave_other_rows_alone():
    size, batch = 32, 6
    pictures = np.stack([_image(size, seed=10 + k) for k in range(3)])
    flat = pack_rgb(pictures).reshape(-1)
    offsets = np.array([2, 0, 1, 1, 0, 2]) * size * size
    angles = np.array([0.0, 30.0, 90.0, 200.0, 359.0, 17.0])
    frames = np.full((batch, size, 3 * size, 3), 7, np.uint8)
    lo, hi = disk_spans(_cv2_disk(size))
    rows = np.array([0, 2, 3, 5])
    rotate_rows(flat, offsets, size, frames, rows, angles, 0, size, size // 2, size // 2, lo, hi)
    disk = _cv2_disk(size)
    for b in range(batch):
        if b in rows:
            want = rotate(pictures[offsets[b] // (size * size)], angles[b], mask=disk)
            np.testing.assert_array_equal(frames[b, :, size:2 * size], want)
        else:
            assert (frames[b] == 7).all()
        # Outside the panel nothing was written.
        assert (frames[b, :, :size] == 7).all() and (frames[b, :, 2 * size:] == 7).all()


def test_a_batch_split_over_the_frame_pool_equals_row_by_row_calls():
    size = 64
    batch = THREAD_BYTES // (3 * size * size) + 10    # past the pool's threshold
    pictures = np.stack([_image(size, seed=20 + k % 7) for k in range(batch)])
    flat = pack_rgb(pictures).reshape(-1)
    offsets = np.arange(batch) * size * size
    angles = np.random.default_rng(5).integers(0, 360, batch).astype(float)
    lo, hi = disk_spans(_cv2_disk(size))
    many = np.zeros((batch, size, size, 3), np.uint8)
    rotate_rows(flat, offsets, size, many, np.arange(batch), angles, 0, 0, 32, 32, lo, hi)
    one = np.zeros((batch, size, size, 3), np.uint8)
    for b in range(batch):
        rotate_rows(flat, offsets, size, one, np.array([b]), angles, 0, 0, 32, 32, lo, hi)
    np.testing.assert_array_equal(one, many)


def test_rotate_rows_refuses_bad_buffers():
    size = 8
    flat = np.zeros(size * size, np.uint64)
    frames = np.zeros((1, size, size, 3), np.uint8)
    lo, hi = np.zeros(size, np.int64), np.full(size, size, np.int64)
    with pytest.raises(ValueError, match="src"):
        rotate_rows(flat.astype(np.uint8), np.zeros(1, np.int64), size, frames, [0], [0.0], 0,
                    0, 4, 4, lo, hi)
    with pytest.raises(ValueError, match="frames"):
        rotate_rows(flat, np.zeros(1, np.int64), size, frames, [0], [0.0], 0, 1, 4, 4, lo, hi)
    with pytest.raises(ValueError, match="src_off"):
        rotate_rows(flat, np.ones(1, np.int64), size, frames, [0], [0.0], 0, 0, 4, 4, lo, hi)


def test_reference_frames_right_panels_pixel_for_pixel():
    from parity_data import parity_dir, require_recordings
    from PIL import Image

    require_recordings("mental_rotation_2d")
    source = np.asarray(Image.open(parity_dir() / "inputs" / "mental_rotation_2d" / "img3.png")
                        .convert("RGB"))
    disk = _cv2_disk(128)
    masked = source * disk[..., None]
    # Episode 0 of each id: img3, secret 306 (easy) / 73 (hard), agent 0.
    for difficulty, secret in (("easy", 306.0), ("hard", 73.0)):
        want = np.asarray(Image.open(parity_dir() / "frames" /
                                     f"mental_rotation_2d_{difficulty}.png").convert("RGB"))
        np.testing.assert_array_equal(want[:, :128], masked)
        got = rotate(masked, math.fmod(0.0 - secret, 360.0) % 360.0, mask=disk)
        assert np.array_equal(got, want[:, 128:]), int((got != want[:, 128:]).any(2).sum())
