"""render/circles.py against OpenCV itself (cv2 is a test oracle only: visgym never imports it)."""
import numpy as np
import pytest

from visgym.render import circles

cv2 = pytest.importorskip("cv2")


def _cv_circle(height, width, cx, cy, radius, thickness):
    img = np.zeros((height, width), np.uint8)
    cv2.circle(img, (int(cx), int(cy)), int(radius), 1, int(thickness), cv2.LINE_8)
    return img.astype(bool)


@pytest.mark.parametrize("radius", list(range(0, 81)) + [97, 128, 150, 200])
def test_disk_mask_equals_opencv_filled_circle(radius):
    size = 2 * radius + 1
    assert np.array_equal(circles.disk_mask(radius),
                          _cv_circle(size, size, radius, radius, radius, -1))


@pytest.mark.parametrize("thickness", [1, 2, 3])
def test_ring_mask_equals_opencv_outline_for_every_radius(thickness):
    for radius in list(range(0, 81)) + [97, 128, 150]:
        big = radius + thickness
        want = _cv_circle(2 * big + 1, 2 * big + 1, big, big, radius, thickness)
        assert np.array_equal(circles.ring_mask(radius, thickness), want), radius


def test_masks_are_read_only_and_shared():
    m = circles.ring_mask(20, 2)
    assert m is circles.ring_mask(20, 2)
    with pytest.raises(ValueError):
        m[0, 0] = True


def test_stamp_inside_frame_equals_drawing_there():
    frame = np.zeros((90, 120, 3), np.uint8)
    circles.stamp_mask(frame, circles.ring_mask(20, 2), 57, 41, 90, 120, 7, 8, 9)
    want = _cv_circle(90, 120, 57, 41, 20, 2)
    assert np.array_equal(frame[..., 0] == 7, want)
    assert np.array_equal(frame[..., 2] == 9, want)
    assert not frame[~want].any()


def test_disk_stamp_clipped_at_any_position_equals_opencv():
    rng = np.random.default_rng(1)
    for _ in range(400):
        r = int(rng.integers(0, 40))
        h, w = int(rng.integers(3, 70)), int(rng.integers(3, 70))
        cx, cy = int(rng.integers(-r - 3, w + r + 3)), int(rng.integers(-r - 3, h + r + 3))
        frame = np.zeros((h + 5, w + 7, 3), np.uint8)   # padded: stamping stays inside (h, w)
        circles.stamp_mask(frame, circles.disk_mask(r), cx, cy, h, w, 255, 255, 255)
        assert not frame[h:].any() and not frame[:, w:].any()
        assert np.array_equal(frame[:h, :w, 0] > 0, _cv_circle(h, w, cx, cy, r, -1)), (r, cx, cy)


def test_ring_mask_at_reproduces_opencv_clipping_at_the_border():
    rng = np.random.default_rng(2)
    clipped_differs = 0
    for _ in range(1500):
        r, t = int(rng.integers(0, 30)), int(rng.integers(1, 4))
        h, w = int(rng.integers(4, 60)), int(rng.integers(4, 60))
        cx, cy = int(rng.integers(-6, w + 6)), int(rng.integers(-6, h + 6))
        want = _cv_circle(h, w, cx, cy, r, t)
        frame = np.zeros((h, w, 3), np.uint8)
        circles.stamp_mask(frame, circles.ring_mask_at(r, t, cx, cy, h, w), cx, cy, h, w, 1, 1, 1)
        assert np.array_equal(frame[..., 0] > 0, want), (r, t, cx, cy, h, w)
        plain = np.zeros((h, w, 3), np.uint8)
        circles.stamp_mask(plain, circles.ring_mask(r, t), cx, cy, h, w, 1, 1, 1)
        if not np.array_equal(plain[..., 0] > 0, want):
            clipped_differs += 1
            assert circles.ring_is_clipped(r, t, cx, cy, h, w)
    # the clipped case is real (OpenCV clips thick outlines' edge lines), so it needs its own path
    assert clipped_differs > 0


def test_stamp_masks_rows_and_frame_sizes():
    frames = np.zeros((3, 40, 50, 3), np.uint8)
    hw = np.array([[40, 50], [20, 25], [40, 50]], np.int32)
    rows = np.array([1, 2], np.int64)
    circles.stamp_masks(frames, rows, circles.disk_mask(6), np.array([22, 10]),
                        np.array([18, 10]), hw, 5, 6, 7)
    assert not frames[0].any()
    assert not frames[1, 20:].any() and not frames[1, :, 25:].any()
    assert np.array_equal(frames[1, :20, :25, 0] == 5, _cv_circle(20, 25, 22, 18, 6, -1))
    assert np.array_equal(frames[2, ..., 1] == 6, _cv_circle(40, 50, 10, 10, 6, -1))


@pytest.mark.parametrize("bad, field", [(-1, "radius"), (2.5, "radius"), (True, "radius"),
                                        (10 ** 9, "radius")])
def test_bad_radius_names_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        circles.disk_mask(bad)


@pytest.mark.parametrize("bad", [0, -2, 1.5, 10 ** 6])
def test_bad_thickness_names_the_field(bad):
    with pytest.raises(ValueError, match="thickness"):
        circles.ring_mask(5, bad)
