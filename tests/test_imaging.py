"""Tests for visgym.bridges.imaging: observation encoding (agent_loop.md section 3). Timing is
deliberately not asserted here; ``python -m visgym.bridges.imaging`` prints it."""
import base64
import io

import numpy as np
import pytest
from PIL import Image

from visgym.bridges.imaging import (DEFAULT_MAX_LONG_SIDE, data_url, decode_b64_image,
                                    encode_jpeg_b64, fit_long_side)


def smooth_rgb(height, width):
    yy, xx = np.mgrid[0:height, 0:width]
    return np.stack([xx * 255 // max(width - 1, 1), yy * 255 // max(height - 1, 1),
                     (xx + yy) * 255 // max(width + height - 2, 1)], axis=-1).astype(np.uint8)


# -- size rule -----------------------------------------------------------------------------------

def test_default_long_side_is_336():
    assert DEFAULT_MAX_LONG_SIDE == 336


@pytest.mark.parametrize("size,limit,expected", [
    ((1024, 576), 336, (336, 189)),   # maze_3d frames
    ((576, 1024), 336, (189, 336)),
    ((672, 336), 336, (336, 168)),    # fetch dual view
    ((1000, 333), 336, (336, 111)),   # 111.888 truncates
    ((570, 100), 336, (336, 58)),     # exact arithmetic: the long side is exactly L
    ((337, 337), 336, (336, 336)),
])
def test_downscale_scales_both_sides_and_truncates(size, limit, expected):
    assert fit_long_side(*size, limit) == expected


@pytest.mark.parametrize("size", [(225, 225), (336, 336), (336, 10), (1, 1)])
def test_never_upscales(size):
    assert fit_long_side(*size, 336) == size


def test_none_means_no_resize():
    assert fit_long_side(5000, 3000, None) == (5000, 3000)


def test_each_side_keeps_at_least_one_pixel():
    assert fit_long_side(10000, 1, 336) == (336, 1)
    assert fit_long_side(1, 10000, 336) == (1, 336)


@pytest.mark.parametrize("args,name", [
    ((0, 10, 336), "width"), ((10, -1, 336), "height"), ((10.0, 10, 336), "width"),
    ((10, 10, 0), "max_long_side"), ((10, 10, True), "max_long_side"),
])
def test_size_rule_rejects_bad_arguments(args, name):
    with pytest.raises(ValueError, match=name):
        fit_long_side(*args)


# -- encoding ------------------------------------------------------------------------------------

def test_base64_has_no_header_and_no_newlines():
    b64 = encode_jpeg_b64(smooth_rgb(200, 300))
    assert "\n" not in b64 and not b64.startswith("data:")
    raw = base64.b64decode(b64, validate=True)
    assert raw[:2] == b"\xff\xd8"  # JPEG start-of-image marker


def test_round_trip_is_close_for_a_smooth_image():
    frame = smooth_rgb(120, 160)
    decoded = decode_b64_image(encode_jpeg_b64(frame))
    assert decoded.shape == frame.shape and decoded.dtype == np.uint8
    assert np.abs(decoded.astype(int) - frame.astype(int)).mean() < 3.0


def test_large_frame_is_downscaled_on_encode():
    frame = smooth_rgb(576, 1024)
    assert decode_b64_image(encode_jpeg_b64(frame)).shape == (189, 336, 3)
    assert decode_b64_image(encode_jpeg_b64(frame, max_long_side=None)).shape == (576, 1024, 3)


def test_downscale_uses_lanczos():
    frame = np.random.default_rng(0).integers(0, 256, (400, 600, 3), dtype=np.uint8)
    expected = Image.fromarray(frame).resize((336, 224), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    expected.save(buffer, format="JPEG")
    assert base64.b64decode(encode_jpeg_b64(frame)) == buffer.getvalue()


def test_small_frame_is_encoded_at_its_own_size():
    frame = smooth_rgb(225, 225)
    assert decode_b64_image(encode_jpeg_b64(frame)).shape == (225, 225, 3)


def test_default_quality_is_pillows_default():
    frame = np.random.default_rng(1).integers(0, 256, (64, 80, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(frame).save(buffer, format="JPEG")
    assert base64.b64decode(encode_jpeg_b64(frame)) == buffer.getvalue()
    assert len(encode_jpeg_b64(frame, quality=30)) < len(encode_jpeg_b64(frame))


def test_jpeg_has_no_exif_and_is_not_progressive():
    with Image.open(io.BytesIO(base64.b64decode(encode_jpeg_b64(smooth_rgb(50, 60))))) as image:
        assert image.format == "JPEG"
        assert "exif" not in image.info
        assert not image.info.get("progressive") and not image.info.get("progression")


def test_gray_frame_stays_gray():
    frame = smooth_rgb(90, 70)[..., 0]
    decoded = decode_b64_image(encode_jpeg_b64(frame))
    assert decoded.shape == frame.shape
    assert np.abs(decoded.astype(int) - frame.astype(int)).mean() < 3.0


def test_non_contiguous_frame_is_accepted():
    frame = smooth_rgb(60, 80)[:, ::-1]
    decoded = decode_b64_image(encode_jpeg_b64(frame))
    assert np.abs(decoded.astype(int) - frame.astype(int)).mean() < 3.0


@pytest.mark.parametrize("frame", [
    np.zeros((10, 10, 3), dtype=np.float32),
    np.zeros((10, 10, 3), dtype=np.int64),
    np.zeros((10, 10, 4), dtype=np.uint8),
    np.zeros((10, 10, 1), dtype=np.uint8),
    np.zeros((10,), dtype=np.uint8),
    np.zeros((2, 10, 10, 3), dtype=np.uint8),
    np.zeros((0, 10, 3), dtype=np.uint8),
    [[0, 0], [0, 0]],
    None,
], ids=["float", "int64", "rgba", "one-channel", "1-d", "4-d", "empty", "list", "none"])
def test_bad_frames_raise_naming_frame(frame):
    with pytest.raises(ValueError, match="frame"):
        encode_jpeg_b64(frame)


@pytest.mark.parametrize("quality", [0, 101, 7.5, True])
def test_bad_quality_raises(quality):
    with pytest.raises(ValueError, match="quality"):
        encode_jpeg_b64(smooth_rgb(8, 8), quality=quality)


# -- data URL and decoding -----------------------------------------------------------------------

def test_data_url_prefixes_the_jpeg_header():
    assert data_url("QUJD") == "data:image/jpeg;base64,QUJD"


def test_decode_accepts_a_data_url():
    frame = smooth_rgb(40, 30)
    b64 = encode_jpeg_b64(frame)
    assert np.array_equal(decode_b64_image(data_url(b64)), decode_b64_image(b64))
    assert np.array_equal(decode_b64_image("data:image;base64," + b64), decode_b64_image(b64))


@pytest.mark.parametrize("value,message", [
    ("", "empty"),
    ("not base64 at all!", "base64"),
    (base64.b64encode(b"plain text, no image").decode(), "image"),
    (encode_jpeg_b64(smooth_rgb(20, 20))[:40], "image|base64"),
    ("data:image/jpeg,QUJD", "data URL"),
    (b"QUJD", "base64 string"),
    (None, "base64 string"),
])
def test_decode_rejects_bad_input_with_a_clear_message(value, message):
    with pytest.raises(ValueError, match=message):
        decode_b64_image(value)


def test_data_url_rejects_non_str():
    with pytest.raises(ValueError, match="b64"):
        data_url(b"QUJD")
