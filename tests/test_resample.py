"""render/resample.py, the one resampling face: Pillow-exact regions (crop and box, Lanczos and
bilinear), the incremental whole-image Lanczos resizer, the batch area / bilinear passes, each
against Pillow or an independent formula, and the OpenCV-linear face against cv2.resize
(INTER_LINEAR) pixel for pixel (cv2 is a test oracle only); bad arguments raise ValueError
naming them."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from visgym.render import resample


def _pillow(image, box, size, filt, mode):
    im = Image.fromarray(image)
    f = {"lanczos": Image.Resampling.LANCZOS, "bilinear": Image.Resampling.BILINEAR}[filt]
    if mode == "crop":
        return np.asarray(im.crop(box).resize(size, f))
    return np.asarray(im.resize(size, f, box=box))


def test_region_coefficients_equal_the_whole_image_coefficients():
    for n_in, n_out in [(97, 40), (40, 97), (224, 224), (507, 224)]:
        b0, w0 = resample.coefficients(n_in, n_out)
        b1, w1 = resample.region_coefficients(n_in, 0, n_in, n_out)
        assert np.array_equal(b0, b1) and np.array_equal(w0, w1)


@pytest.mark.parametrize("filt", ["lanczos", "bilinear"])
@pytest.mark.parametrize("mode", ["crop", "box"])
def test_region_exact_against_pillow(filt, mode):
    rng = np.random.default_rng(["lanczos", "bilinear"].index(filt) * 2 + (mode == "box"))
    for _ in range(12):
        h, w = (int(v) for v in rng.integers(12, 160, 2))
        x0, y0 = int(rng.integers(0, w - 1)), int(rng.integers(0, h - 1))
        box = (x0, y0, int(rng.integers(x0 + 1, w + 1)), int(rng.integers(y0 + 1, h + 1)))
        size = (int(rng.integers(2, 130)), int(rng.integers(2, 130)))
        image = rng.integers(0, 256, (h, w, 3), np.uint8)
        assert np.array_equal(resample.region(image, box, size, filt, mode),
                              _pillow(image, box, size, filt, mode)), (h, w, box, size)


def test_zoom_puzzle_tiles_exact():
    """The zoom_in_puzzle case: nested crops of a photo resized to 224 x 224 with Lanczos."""
    rng = np.random.default_rng(3)
    image = rng.integers(0, 256, (300, 400, 3), np.uint8)
    for box in [(0, 0, 400, 300), (100, 80, 300, 230), (150, 120, 250, 195), (180, 140, 230, 177)]:
        assert np.array_equal(resample.region(image, box, (224, 224)),
                              _pillow(image, box, (224, 224), "lanczos", "crop"))


def test_one_channel_order_probe_gives_pillows_colour_pixels():
    """The pass order is probed on one channel; colour crops of many sizes (zoom_in_puzzle's
    range, down and up) still come out as Pillow's."""
    rng = np.random.default_rng(17)
    image = rng.integers(0, 256, (520, 700, 3), np.uint8)
    for _ in range(30):
        w, h = int(rng.integers(20, 700)), int(rng.integers(20, 520))
        x0, y0 = int(rng.integers(0, 701 - w)), int(rng.integers(0, 521 - h))
        box = (x0, y0, x0 + w, y0 + h)
        assert np.array_equal(resample.region(image, box, (224, 224)),
                              _pillow(image, box, (224, 224), "lanczos", "crop")), box


def test_crop_region_probes_once_per_crop_size_and_fills_out():
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (90, 120, 3), np.uint8)
    before = len(resample._REGION_ORDERS)
    out = np.empty((40, 30, 3), np.uint8)
    for x0, y0 in ((0, 0), (7, 3), (20, 40)):   # same crop size at three places
        box = (x0, y0, x0 + 61, y0 + 47)
        got = resample.region(image, box, (30, 40), out=out)
        assert got is out
        assert np.array_equal(out, _pillow(image, box, (30, 40), "lanczos", "crop"))
    assert len(resample._REGION_ORDERS) - before <= 1


@pytest.mark.parametrize("kwargs,match", [
    (dict(box=(0, 0, 99, 4)), "box"),
    (dict(box=(3, 0, 3, 4)), "box"),
    (dict(size=(0, 4)), "size"),
    (dict(filter="bicubic"), "filter"),
    (dict(mode="stretch"), "mode"),
    (dict(out=np.empty((4, 5, 3), np.uint8)), "out"),
    (dict(image=np.zeros((10, 10), np.uint8)), "image"),
])
def test_region_bad_arguments(kwargs, match):
    args = dict(image=np.zeros((10, 10, 3), np.uint8), box=(0, 0, 8, 8), size=(4, 4))
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        resample.region(args.pop("image"), args.pop("box"), args.pop("size"), **args)


def test_lanczos_resizer_is_pillow_frame_after_frame():
    rng = np.random.default_rng(8)
    frame = rng.integers(0, 256, (90, 130, 3), np.uint8)
    resizer = resample.LanczosResizer(frame.shape, (61, 40))
    for _ in range(4):
        y, x = int(rng.integers(0, 80)), int(rng.integers(0, 120))
        frame[y:y + 7, x:x + 9] = rng.integers(0, 256, (3,), np.uint8)
        assert np.array_equal(resizer.resize(frame), resample.pillow_resize(frame, (61, 40)))
        assert np.array_equal(resizer.resize(frame),
                              np.asarray(Image.fromarray(frame).resize(
                                  (61, 40), Image.Resampling.LANCZOS)))


def test_area_is_the_block_mean_and_bilinear_matches_pillow_upsampling():
    rng = np.random.default_rng(9)
    src = rng.integers(0, 256, (2, 12, 18, 3), np.uint8)
    dst = np.empty((2, 4, 6, 3), np.uint8)
    resample.area(src, dst)
    mean = src.reshape(2, 4, 3, 6, 3, 3).astype(np.float64).mean(axis=(2, 4))
    assert np.abs(dst.astype(np.float64) - mean).max() <= 0.5 + 1e-9
    up = np.empty((2, 30, 41, 3), np.uint8)
    resample.bilinear(src, up)
    for b in range(2):
        ref = np.asarray(Image.fromarray(src[b]).resize((41, 30), Image.Resampling.BILINEAR))
        assert np.abs(up[b].astype(int) - ref).max() <= 1
    with pytest.raises(ValueError, match="src"):
        resample.area(src, np.empty((3, 4, 6, 3), np.uint8))
    with pytest.raises(ValueError, match="dst"):
        resample.bilinear(src, np.empty((2, 4, 6, 3), np.float32))


def test_old_entry_points_are_gone():
    """One import point: the resampling faces are not reachable from their old modules."""
    from visgym.render import raster

    assert not hasattr(raster, "resize_area") and not hasattr(raster, "resize_bilinear")
    for name in ("visgym.render.resize", "visgym.render.compose"):
        with pytest.raises(ImportError):
            __import__(name)


# --------------------------------------------------------------------------- OpenCV linear
def _photo_like(h, w, seed):
    """Smooth ramps with 30% noise pixels: both interpolation regimes."""
    rng = np.random.default_rng(seed)
    size = max(h, w)
    y, x = np.mgrid[0:size, 0:size]
    smooth = np.stack([x * 255 // max(size - 1, 1), y * 255 // max(size - 1, 1),
                       (x + y) * 127 // max(size - 1, 1)], -1)
    noise = rng.integers(0, 256, (size, size, 3))
    image = np.where(rng.random((size, size, 1)) < 0.3, noise, smooth).astype(np.uint8)
    return image[:h, :w].copy()


# mental_rotation_2d's photos (to S x S) and shapes around them.
@pytest.mark.parametrize("src_hw,dst_hw", [
    ((336, 504), (128, 128)), ((300, 451), (128, 128)), ((100, 90), (128, 128)),
    ((256, 256), (128, 128)), ((512, 512), (128, 128)), ((200, 333), (128, 128)),
    ((50, 77), (31, 45)), ((100, 100), (37, 37)), ((64, 64), (96, 96)), ((1, 1), (8, 8)),
    ((3, 700), (128, 128)), ((128, 128), (128, 128)), ((336, 504), (64, 64)),
])
def test_linear_is_cv2_resize_inter_linear_on_photos(src_hw, dst_hw):
    cv2 = pytest.importorskip("cv2")
    image = _photo_like(*src_hw, seed=4)
    want = cv2.resize(image, (dst_hw[1], dst_hw[0]), interpolation=cv2.INTER_LINEAR)
    got = resample.linear(image, (dst_hw[1], dst_hw[0]))
    assert got.shape == want.shape
    assert np.array_equal(got, want), int((got != want).any(2).sum())


# The clip source's decoded frames (any size to 224 x 224), into a preallocated output.
@pytest.mark.parametrize("shape", [(64, 64), (240, 320), (240, 427), (100, 50), (7, 300),
                                   (480, 640), (1, 1), (2, 3), (300, 224), (224, 224)])
def test_linear_is_cv2_resize_inter_linear_on_frames(shape):
    cv2 = pytest.importorskip("cv2")
    src = np.random.default_rng(sum(shape)).integers(0, 256, (*shape, 3), dtype=np.uint8)
    got = np.empty((224, 224, 3), np.uint8)
    assert resample.linear(src, (224, 224), out=got) is got
    np.testing.assert_array_equal(got, cv2.resize(src, (224, 224),
                                                  interpolation=cv2.INTER_LINEAR))


def test_linear_refuses_bad_input():
    with pytest.raises(ValueError, match="image"):
        resample.linear(np.zeros((4, 4), np.uint8), (2, 2))
    with pytest.raises(ValueError, match="size"):
        resample.linear(np.zeros((4, 4, 3), np.uint8), (0, 2))
    with pytest.raises(ValueError, match="size"):
        resample.linear(np.zeros((4, 4, 3), np.uint8), (2.5, 2))
    with pytest.raises(ValueError, match="out"):
        resample.linear(np.zeros((4, 4, 3), np.uint8), (2, 3), out=np.empty((2, 3, 3), np.uint8))
    image = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ValueError, match="out"):
        resample.linear(image, (4, 4), out=image)
