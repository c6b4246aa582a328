"""The incremental Lanczos resizer (render/resample.py) gives Pillow's pixels, frame after frame."""
from __future__ import annotations

import warnings

import numpy as np
import PIL
import pytest

import visgym
from visgym.core.cache import BoundedCache
from visgym.bridges.imaging import encode_jpeg, fit_long_side, frame_encoder
from visgym.core.rollout import run_plans
from visgym.render import _resize, resample
from visgym.render.resample import LanczosResizer, pillow_resize

# The pass orders Pillow uses over the random sizes below: Pillow 13 picks the first pass by the
# sizes; 12 (what gradio, under openenv-core, pins) runs the horizontal pass first for these.
PILLOW_ORDERS = {"h", "v"} if int(PIL.__version__.split(".")[0]) >= 13 else {"h"}


@pytest.fixture(autouse=True)
def _warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


@pytest.mark.parametrize("in_shape,size", [
    ((290, 420, 3), (336, 232)), ((400, 400, 3), (336, 336)), ((100, 808, 3), (336, 41)),
    ((480, 960, 3), (336, 168)), ((500, 17, 3), (11, 336)), ((60, 17, 3), (11, 40)),
    ((53, 56), (44, 31)), ((120, 103, 3), (62, 6)), ((40, 30, 3), (30, 40)),
])
def test_equals_pillow_through_edits(in_shape, size):
    rng = np.random.default_rng(sum(in_shape) + sum(size))
    frame = rng.integers(0, 256, in_shape, dtype=np.uint8)
    resizer = LanczosResizer(in_shape, size)
    for _ in range(5):
        assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size))
        frame = frame.copy()
        y, x = int(rng.integers(0, in_shape[0])), int(rng.integers(0, in_shape[1]))
        frame[y:y + int(rng.integers(1, 25)), x:x + int(rng.integers(1, 25))] = rng.integers(256)
    assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size))  # unchanged frame


def test_random_sizes_both_pass_orders():
    rng = np.random.default_rng(11)
    orders = set()
    for t in range(40):
        h, w = (int(v) for v in rng.integers(8, 120, 2))
        size = (int(rng.integers(3, w + 1)), int(rng.integers(3, h + 1)))
        if size == (w, h):
            continue
        shape = (h, w, 3) if t % 3 else (h, w)
        frame = rng.integers(0, 256, shape, dtype=np.uint8)
        resizer = LanczosResizer(shape, size)
        orders.add(resizer._order)
        assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size)), (shape, size)
    assert orders == PILLOW_ORDERS   # Pillow uses both orders over these sizes (13 and later)


def test_wrong_shape_raises():
    with pytest.raises(ValueError, match="shape"):
        LanczosResizer((20, 30, 3), (10, 15)).resize(np.zeros((20, 31, 3), np.uint8))


def test_disagreement_falls_back_to_pillow(monkeypatch):
    monkeypatch.setattr(resample, "_WHOLE_ORDERS", BoundedCache("test orders", max_items=8))
    real = resample.coefficients

    def skewed(in_size, out_size):
        bounds, weights = real(in_size, out_size)
        return bounds, weights + 1000   # no longer Pillow's weights

    monkeypatch.setattr(resample, "coefficients", skewed)
    frame = np.random.default_rng(0).integers(0, 256, (30, 40, 3), dtype=np.uint8)
    with pytest.warns(RuntimeWarning, match="disagrees with Pillow"):
        resizer = LanczosResizer(frame.shape, (20, 15))
    assert np.array_equal(resizer.resize(frame), pillow_resize(frame, (20, 15)))


@pytest.mark.parametrize("env_id", ["sliding_block/easy", "matchstick_rotation/hard",
                                    "matchstick_equation/easy", "fetch_reach/easy"])
def test_frame_encoder_with_resize_is_encode_jpeg(env_id):
    """The evaluation loop's and the demos' path for frames larger than 336 px."""
    env = visgym.make(env_id, 2, autoreset="disabled")
    env.reset(seeds=[5, 6])
    plans = env.solve()
    height, width = env.frames.shape[1:3]
    assert fit_long_side(width, height, 336) != (width, height)
    encoders = [frame_encoder(env.frames.shape[1:]) for _ in range(2)]

    def check(*_):
        for b in range(2):
            assert encoders[b](env.frames[b]) == encode_jpeg(env.frames[b], 336)

    check()
    run_plans(env, [p[:5] for p in plans], on_step=check)


# ---------------------------------------------------------------------------------------------
# The horizontal pass alone (render/_resize.pyx: SSE2 on x86, else scalar). Pillow resizing only
# the width runs only its horizontal pass, so each case is checked against Pillow directly.

def _horizontal(src, out_w, rows=None, cols=None, simd=True, fill=0):
    """_resize.horizontal of src (H, W, C) to out_w columns over rows x cols (default all) into
    a tmp filled with ``fill``."""
    h, w, c = src.shape
    bounds, weights = resample.coefficients(w, out_w)
    row0, row1 = rows or (0, h)
    col0, col1 = cols or (0, out_w)
    tmp = np.full((h, out_w, c), fill, np.uint8)
    _resize.horizontal(src, tmp, 0, row0, row1, col0, col1, bounds, weights, simd)
    return tmp


def _pillow_width(src, out_w):
    frame = src[:, :, 0] if src.shape[2] == 1 else src
    return pillow_resize(frame, (out_w, src.shape[0])).reshape(src.shape[0], out_w, -1)


def _output_sizes(n, rng):
    """Output lengths to resample a length-n axis to: halves, thirds, one more, twice and one,
    a random one, and for long axes a few fixed ones (n itself left out)."""
    outs = {max(1, n // 2), max(1, n // 3), n + 1, 2 * n + 1, int(rng.integers(1, 3 * n + 2))}
    if n > 40:
        outs |= {224, 41, 7}
    return sorted(outs - {n})


def test_horizontal_equals_pillow_all_small_widths():
    """Widths 1..40 and some larger ones, odd and even, down- and upscaled, C = 3 and 1: windows
    of every length that start at the row's first pixel and end at its last; enough rows for the
    SIMD loop (and an odd count: the last row goes alone)."""
    rng = np.random.default_rng(21)
    widths = list(range(1, 41)) + [47, 64, 97, 128, 255, 401, 507]
    for w in widths:
        for channels in (3, 1):
            src = rng.integers(0, 256, (int(rng.integers(5, 9)), w, channels), np.uint8)
            for out_w in _output_sizes(w, rng):
                expected = _pillow_width(src, out_w)
                got = _horizontal(src, out_w)
                assert np.array_equal(got, expected), (w, channels, out_w)
                assert np.array_equal(_horizontal(src, out_w, simd=False), expected)


def test_horizontal_saturates_like_pillow():
    """All-255 / all-0 / 0-255 stripes: sums above 255 and below 0 are clipped exactly so."""
    for w, out_w in [(9, 4), (40, 17), (100, 224), (401, 224), (33, 80)]:
        for channels in (3, 1):
            stripes = np.zeros((6, w, channels), np.uint8)
            stripes[:, ::2] = 255
            for src in (stripes, 255 - stripes, np.full_like(stripes, 255), 0 * stripes):
                assert np.array_equal(_horizontal(src, out_w), _pillow_width(src, out_w))


def _reference_horizontal(src, bounds, weights):
    """The pass in NumPy: int64 sums wrapped to int32 as Pillow's (and the SIMD loop's) 32-bit
    sums, then Pillow's clip."""
    h, w, c = src.shape
    out = np.zeros((h, len(bounds), c), np.uint8)
    for i, (x0, n) in enumerate(bounds):
        s = (src[:, x0:x0 + n].astype(np.int64) * weights[i, :n, None]).sum(axis=1) + (1 << 21)
        s = s.astype(np.int32)
        out[:, i] = np.where(s >= 1 << 30, 255, np.where(s <= 0, 0, s >> 22))
    return out


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
def test_horizontal_coefficient_split_edges(channels):
    """Coefficients at the edges of the hi * 2048 + lo split (+-2^22, -1, 2047, 2048, -2048,
    -2049, -2^26, 2^26 - 1) give the exact wrapped 32-bit sums; ones outside the split's range
    (run by the scalar loop) too. Every channel count the SIMD loop has."""
    rng = np.random.default_rng(23 + channels)
    edges = np.array([1 << 22, -(1 << 22), -1, 0, 1, 2047, 2048, -2048, -2049, 4095,
                      -(1 << 26), (1 << 26) - 1, 12345, -54321], np.int64)
    for t in range(40):
        h, w = int(rng.integers(5, 9)), int(rng.integers(1, 90))
        out_w = int(rng.integers(1, 2 * w + 2))
        bounds, weights = resample.coefficients(w, out_w)
        weights = rng.choice(edges, weights.shape).astype(np.int32)
        src = rng.integers(0, 256, (h, w, channels), np.uint8)
        if t % 4 == 0:   # out of the split's range (small values: no sum overflows int32)
            weights = np.clip(weights, -(1 << 22), 1 << 22)
            weights[:, 0] = (1 << 26) if t % 8 else -(1 << 26) - 1
            src = rng.integers(0, 2, src.shape, np.uint8)
        tmp = np.zeros((h, out_w, channels), np.uint8)
        _resize.horizontal(src, tmp, 0, 0, h, 0, out_w, bounds, weights)
        assert np.array_equal(tmp, _reference_horizontal(src, bounds, weights)), (w, out_w, t)


def test_horizontal_simd_is_built_on_x86():
    import platform
    if platform.machine().lower() in ("x86_64", "amd64"):
        assert _resize.HAVE_SIMD


@pytest.mark.parametrize("mode", ["crop", "box"])
def test_compose_resample_through_the_pass_equals_pillow(mode):
    """render/resample.py's region (crop + resample) runs the same pass with windows offset into the
    image: crops at the left and right edges (windows that end at the row's last pixel), down
    and up, as the zoom puzzle's 224 x 224 tiles."""
    from PIL import Image

    rng = np.random.default_rng(24)
    image = rng.integers(0, 256, (500, 400, 3), np.uint8)
    im = Image.fromarray(image)
    for box, size in [((0, 0, 400, 500), (224, 224)), ((0, 13, 123, 300), (224, 224)),
                      ((277, 0, 400, 499), (224, 224)), ((399, 0, 400, 500), (5, 17)),
                      ((150, 120, 250, 195), (224, 224)), ((390, 480, 400, 500), (37, 23))]:
        if mode == "crop":
            expected = np.asarray(im.crop(box).resize(size, Image.Resampling.LANCZOS))
        else:
            expected = np.asarray(im.resize(size, Image.Resampling.LANCZOS, box=box))
        assert np.array_equal(resample.region(image, box, size, "lanczos", mode), expected), box


# ---------------------------------------------------------------------------------------------
# The vertical pass alone (render/_resize.pyx: SSE2 16 bytes at a time when a row is >= 16
# bytes wide, else scalar). Pillow resizing only the height runs only its vertical pass, on the
# source itself, so each case is checked against Pillow directly.

def _vertical(src, out_h, rows=None, cols=None, simd=True, fill=0, coefficients=None):
    """_resize.vertical of src (H, W, C) to out_h rows over rows x cols (default all) into an
    output filled with ``fill``."""
    h, w, c = src.shape
    bounds, weights = coefficients or resample.coefficients(h, out_h)
    row0, row1 = rows or (0, out_h)
    col0, col1 = cols or (0, w)
    out = np.full((out_h, w, c), fill, np.uint8)
    _resize.vertical(src, out, row0, row1, col0, col1, bounds, weights, simd)
    return out


def _pillow_height(src, out_h):
    frame = src[:, :, 0] if src.shape[2] == 1 else src
    return pillow_resize(frame, (src.shape[1], out_h)).reshape(out_h, src.shape[1], -1)


# Row widths in bytes under, at, just over and between multiples of the 16-byte block.
_V_WIDTHS = {3: (1, 5, 6, 11, 16, 21, 43), 1: (1, 15, 16, 17, 31, 48, 70)}


def test_vertical_equals_pillow_all_small_heights():
    """Heights 1..40 and some larger ones, odd and even, down- and upscaled, C = 3 and 1:
    windows of every tap count (odd counts pad a zero tap) at the image's first and last rows,
    rows narrower than a block (scalar), exactly one block, and blocks plus a tail (the last
    block overlaps the one before)."""
    rng = np.random.default_rng(31)
    heights = list(range(1, 41)) + [47, 64, 97, 128, 255, 401]
    for h in heights:
        for channels in (3, 1):
            w = int(rng.choice(_V_WIDTHS[channels]))
            src = rng.integers(0, 256, (h, w, channels), np.uint8)
            for out_h in _output_sizes(h, rng):
                expected = _pillow_height(src, out_h)
                assert np.array_equal(_vertical(src, out_h), expected), (h, w, channels, out_h)
                assert np.array_equal(_vertical(src, out_h, simd=False), expected)


def test_vertical_saturates_like_pillow():
    """Rows alternating 0 / 255 (the vertical pass's stripes), a checkerboard, all-255 and
    all-0: sums above 255 and below 0 are clipped exactly so."""
    for h, out_h in [(9, 4), (40, 17), (100, 224), (401, 224), (33, 80), (6, 5)]:
        for channels, w in ((3, 23), (1, 37)):
            stripes = np.zeros((h, w, channels), np.uint8)
            stripes[::2] = 255
            checker = stripes.copy()
            checker[:, ::2] = 255 - checker[:, ::2]
            for src in (stripes, 255 - stripes, checker, np.full_like(stripes, 255), 0 * stripes):
                assert np.array_equal(_vertical(src, out_h), _pillow_height(src, out_h))


@pytest.mark.parametrize("axis", ["horizontal", "vertical"])
def test_sub_rectangle_leaves_the_rest(axis):
    """Output rows x columns are Pillow's, every byte outside is untouched: the horizontal SIMD
    loop stores four bytes for three, the vertical one 16-byte blocks with an overlapping last
    one, and neither may reach past the rectangle's last column."""
    horizontal = axis == "horizontal"
    run, pillow = (_horizontal, _pillow_width) if horizontal else (_vertical, _pillow_height)
    rng = np.random.default_rng(22 if horizontal else 32)
    for t in range(60 if horizontal else 80):
        channels = 3 if t % 3 else 1
        if horizontal:
            h, w = int(rng.integers(1, 14)), int(rng.integers(1, 300))
            size = int(rng.integers(1, 2 * w + 2))
            shape = (h, size)
        else:
            h, w = int(rng.integers(1, 60)), int(rng.integers(1, 90))
            size = int(rng.integers(1, 2 * h + 2))
            shape = (size, w)
        src = rng.integers(0, 256, (h, w, channels), np.uint8)
        row0 = int(rng.integers(0, shape[0]))
        row1 = int(rng.integers(row0 + 1, shape[0] + 1))
        col0 = int(rng.integers(0, shape[1]))
        col1 = int(rng.integers(col0 + 1, shape[1] + 1))
        got = run(src, size, (row0, row1), (col0, col1), fill=77)
        expected = np.full_like(got, 77)
        expected[row0:row1, col0:col1] = pillow(src, size)[row0:row1, col0:col1]
        assert np.array_equal(got, expected), (axis, h, w, channels, size, row0, row1, col0, col1)


def _reference_vertical(src, bounds, weights):
    """The pass in NumPy: int64 sums wrapped to int32 as Pillow's (and the SIMD loop's) 32-bit
    sums, then Pillow's clip."""
    out = np.zeros((len(bounds), src.shape[1], src.shape[2]), np.uint8)
    for i, (y0, n) in enumerate(bounds):
        s = (src[y0:y0 + n].astype(np.int64) * weights[i, :n, None, None]).sum(axis=0)
        s = (s + (1 << 21)).astype(np.int32)
        out[i] = np.where(s >= 1 << 30, 255, np.where(s <= 0, 0, s >> 22))
    return out


def test_vertical_coefficient_split_edges():
    """Coefficients at the edges of the hi * 2048 + lo split (+-2^22, -1, 2047, 2048, -2048,
    -2049, -2^26, 2^26 - 1) give the exact wrapped 32-bit sums; rows with a coefficient outside
    the split's range (the scalar loop, in the same call as SIMD rows) and rows of no taps too."""
    rng = np.random.default_rng(33)
    edges = np.array([1 << 22, -(1 << 22), -1, 0, 1, 2047, 2048, -2048, -2049, 4095,
                      -(1 << 26), (1 << 26) - 1, 12345, -54321], np.int64)
    for t in range(40):
        channels = (1, 2, 3, 4)[t % 4]
        h, w = int(rng.integers(1, 50)), int(rng.integers(1, 40))
        out_h = int(rng.integers(1, 2 * h + 2))
        bounds, weights = resample.coefficients(h, out_h)
        weights = rng.choice(edges, weights.shape).astype(np.int32)
        src = rng.integers(0, 256, (h, w, channels), np.uint8)
        if t % 3 == 0:   # some rows out of the split's range (no sum overflows int32)
            weights = np.clip(weights, -(1 << 22), 1 << 22)
            weights[::2, 0] = (1 << 26) if t % 2 else -(1 << 26) - 1
            src = rng.integers(0, 2, src.shape, np.uint8)
        if t % 5 == 0:
            bounds[::3, 1] = 0
        expected = _reference_vertical(src, bounds, weights)
        for simd in (True, False):
            got = _vertical(src, out_h, simd=simd, coefficients=(bounds, weights))
            assert np.array_equal(got, expected), (h, w, channels, out_h, t, simd)


def test_vertical_both_dimensions_equal_pillow():
    """Both passes through LanczosResizer and resample.region (both pass orders), output and
    source widths around multiples of the 16-byte block, heights down and up."""
    from PIL import Image

    rng = np.random.default_rng(34)
    orders = set()
    for t in range(30):
        h, w = int(rng.integers(2, 90)), int(rng.choice([5, 6, 11, 16, 21, 22, 43, 64, 75]))
        size = (int(rng.choice([5, 6, 11, 16, 22, 43])), int(rng.integers(1, 2 * h + 2)))
        if size == (w, h):
            continue
        frame = rng.integers(0, 256, (h, w, 3), np.uint8)
        resizer = LanczosResizer(frame.shape, size)
        orders.add(resizer._order)
        assert np.array_equal(resizer.resize(frame), pillow_resize(frame, size)), (h, w, size)
        box = (int(rng.integers(0, w)), int(rng.integers(0, h)), w, h)
        expected = np.asarray(Image.fromarray(frame).crop(box)
                              .resize(size, Image.Resampling.LANCZOS))
        assert np.array_equal(resample.region(frame, box, size, "lanczos", "crop"), expected)
    assert orders == PILLOW_ORDERS


def test_compiled_coefficients_equal_the_python_statement_bit_for_bit():
    """render/_coeffs.pyx repeats resample.python_interval_coefficients' double arithmetic: the
    weights are identical for whole ranges and for float32 boxes, both filters, down and up."""
    from visgym.render.resample import FILTERS

    rng = np.random.default_rng(8)
    for t in range(400):
        in_size, out = int(rng.integers(1, 1200)), int(rng.integers(1, 500))
        in0, span = 0.0, float(in_size)
        if t % 2:
            a = float(np.float32(rng.uniform(-4, in_size)))
            b = float(np.float32(rng.uniform(a + 0.01, in_size + 4)))
            in0, span = a, float(np.float32(b) - np.float32(a))
        for name in ("lanczos", "bilinear"):
            func, support, _ = FILTERS[name]
            got = resample.interval_coefficients(in_size, in0, span, out, func, support)
            want = resample.python_interval_coefficients(in_size, in0, span, out, func, support)
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), (
                name, in_size, in0, span, out)
